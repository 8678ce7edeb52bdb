#include "core/threads.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <system_error>

#include <limits.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace attnmap {

namespace {
std::atomic<int> g_allowed{-1};  // threads try_start_thread may still start; negative: no limit

// Where started threads wait until the starting thread knows how many it got and how many keep running.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int keep = 0;
};

// The kernel ids of the threads started here and running (started_by_attnmap).
std::mutex g_own_mu;
std::set<long> g_own;

// Marks the calling thread as attnmap's own while it lives.
struct OwnThread {
  long tid = static_cast<long>(::syscall(SYS_gettid));
  OwnThread() {
    std::lock_guard<std::mutex> lk(g_own_mu);
    g_own.insert(tid);
  }
  ~OwnThread() {
    std::lock_guard<std::mutex> lk(g_own_mu);
    g_own.erase(tid);
  }
  OwnThread(const OwnThread&) = delete;
  OwnThread& operator=(const OwnThread&) = delete;
};
}  // namespace

bool started_by_attnmap(long tid) {
  std::lock_guard<std::mutex> lk(g_own_mu);
  return g_own.count(tid) > 0;
}

void refuse_threads_after(int k) { g_allowed.store(k < 0 ? -1 : k); }

std::optional<std::thread> try_start_thread(std::function<void()> body) {
  for (int left = g_allowed.load(); left >= 0;) {
    if (left == 0) return std::nullopt;
    if (g_allowed.compare_exchange_weak(left, left - 1)) break;
  }
  try {
    return std::thread([b = std::move(body)] {
      const OwnThread own;
      b();
    });
  } catch (const std::system_error&) {
    return std::nullopt;  // EAGAIN: a process or pids limit, or no memory for the stack
  }
}

namespace {
// A thread that only holds a slot until the gate opens: a small stack (a refused thread costs nothing, a
// started one little address space; glibc keeps ended threads' stacks for reuse). Returns false when the
// system (or the test limit) refuses it.
bool start_probe(Gate* gate, pthread_t* out) {
  for (int left = g_allowed.load(); left >= 0;) {
    if (left == 0) return false;
    if (g_allowed.compare_exchange_weak(left, left - 1)) break;
  }
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  pthread_attr_setstacksize(&attr, std::max<size_t>(PTHREAD_STACK_MIN, 64 * 1024));
  auto wait = [](void* g) -> void* {
    const OwnThread own;
    Gate* gt = static_cast<Gate*>(g);
    std::unique_lock<std::mutex> lk(gt->mu);
    gt->cv.wait(lk, [&] { return gt->open; });
    return nullptr;
  };
  const bool ok = pthread_create(out, &attr, wait, gate) == 0;
  pthread_attr_destroy(&attr);
  return ok;
}
}  // namespace

std::vector<std::thread> start_threads(int n, int room, const std::function<void(int)>& body) {
  n = std::max(0, n);
  room = std::max(0, room);
  auto gate = std::make_shared<Gate>();
  std::vector<std::thread> started;
  for (int i = 0; i < n; ++i) {
    std::optional<std::thread> t = try_start_thread([gate, i, body] {
      std::unique_lock<std::mutex> lk(gate->mu);
      gate->cv.wait(lk, [&] { return gate->open; });
      const bool mine = i < gate->keep;
      lk.unlock();
      if (mine) body(i);
    });
    if (!t) break;
    started.push_back(std::move(*t));
  }
  // Is there room beside them? Probes hold `room` slots while the workers exist; each missing one (or, when
  // a worker was refused already, every slot of the room) is a worker let go again.
  std::vector<pthread_t> probes;
  const bool refused = static_cast<int>(started.size()) < n;
  for (int k = 0; k < room && !refused; ++k) {
    pthread_t p;
    if (!start_probe(gate.get(), &p)) break;
    probes.push_back(p);
  }
  const int got = static_cast<int>(started.size());
  const int keep = std::max(0, got - (room - static_cast<int>(probes.size())));
  {
    std::lock_guard<std::mutex> lk(gate->mu);
    gate->keep = keep;
    gate->open = true;
  }
  gate->cv.notify_all();
  for (pthread_t p : probes) pthread_join(p, nullptr);
  for (int i = keep; i < got; ++i) started[static_cast<size_t>(i)].join();
  started.resize(static_cast<size_t>(keep));
  return started;
}

int run_on_threads(int n, const std::function<void()>& work, const std::function<void(int)>& started, int room) {
  std::exception_ptr first;
  std::mutex mu;
  auto guarded = [&] {
    try {
      work();
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu);
      if (!first) first = std::current_exception();
    }
  };
  std::vector<std::thread> threads = start_threads(n - 1, room, [&](int) { guarded(); });
  const int count = static_cast<int>(threads.size()) + 1;
  if (started) {
    try {
      started(count);
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu);
      if (!first) first = std::current_exception();
    }
  }
  guarded();
  for (std::thread& th : threads) th.join();
  if (first) std::rethrow_exception(first);
  return count;
}

}  // namespace attnmap
