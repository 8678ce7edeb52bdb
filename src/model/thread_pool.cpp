#include "model/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/threads.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace attnmap {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

thread_local bool t_in_task = false;  // this thread is running a pool task: nested calls run inline

// Helper threads wait for a new generation of work. Each job is a counter of task indices that every
// participating thread (helpers and the caller) claims from until none is left; the caller then waits for
// the helpers to leave the job. Helpers spin a short while before sleeping, since a forward pass hands out
// hundreds of jobs of a few hundred microseconds each.
class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      gen_.fetch_add(1);
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

  void resize(int n) {
    std::lock_guard<std::mutex> busy(run_mu_);
    const int have = static_cast<int>(threads_.size());
    if (have + 1 < n) {
      unsigned gen = 0;
      {
        std::lock_guard<std::mutex> lk(mu_);
        gen = gen_.load();
      }
      // Under a process limit the pool keeps what it gets, less room for the libraries' own threads.
      auto body = [this, have, gen](int i) { loop(have + i, gen); };
      for (std::thread& t : start_threads(n - 1 - have, kLibraryThreadRoom, body)) threads_.push_back(std::move(t));
    }
    active_.store(std::min(n - 1, static_cast<int>(threads_.size())));
  }

  int size() const { return active_.load() + 1; }

  void run(int n, const std::function<void(int)>& task) {
    std::unique_lock<std::mutex> busy(run_mu_, std::try_to_lock);
    if (n <= 1 || t_in_task || !busy.owns_lock() || active_.load() == 0) {
      for (int i = 0; i < n; ++i) task(i);
      return;
    }
    const int helpers = std::min(active_.load(), n - 1);
    {
      std::lock_guard<std::mutex> lk(mu_);  // a helper reads the generation and the job under mu_ too
      task_ = &task;
      count_ = n;
      next_.store(0);
      error_ = nullptr;
      helpers_ = helpers;
      pending_.store(helpers);
      gen_.fetch_add(1);
    }
    cv_.notify_all();
    work();
    for (int s = 0; pending_.load(std::memory_order_acquire) != 0; ++s) {
      if (s < 4000) cpu_relax();
      else std::this_thread::yield();  // a helper was descheduled (shared cores)
    }
    task_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void work() {
    t_in_task = true;
    for (int i = next_.fetch_add(1); i < count_; i = next_.fetch_add(1)) {
      try {
        (*task_)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lk(err_mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
    t_in_task = false;
  }

  // `seen`: the generation when the thread was created (a thread that starts late still sees every job
  // and the stop after it).
  void loop(int id, unsigned seen) {
    for (;;) {
      // Spin for new work (some tens of microseconds), then sleep on the condition variable.
      for (int s = 0; s < 4000 && gen_.load(std::memory_order_acquire) == seen; ++s) cpu_relax();
      bool mine = false;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || gen_.load() != seen; });
        if (stop_) return;
        seen = gen_.load();  // each generation seen once, with its own job
        mine = id < helpers_;
      }
      if (mine) {
        work();
        pending_.fetch_sub(1, std::memory_order_release);
      }
    }
  }

  std::vector<std::thread> threads_;
  std::atomic<int> active_{0};   // helpers that take part (pool size - 1)
  int helpers_ = 0;              // helpers taking part in the current job (under mu_)
  std::atomic<int> pending_{0};  // helpers of the current job not yet done
  std::atomic<unsigned> gen_{0};
  std::atomic<int> next_{0};
  int count_ = 0;
  const std::function<void(int)>* task_ = nullptr;
  std::exception_ptr error_;
  std::mutex err_mu_;
  std::mutex mu_;      // guards the sleep on cv_
  std::mutex run_mu_;  // one job at a time
  std::condition_variable cv_;
  bool stop_ = false;
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

void parallel_for(int n, const std::function<void(int)>& task) { pool().run(n, task); }

void set_pool_threads(int n) { pool().resize(n < 1 ? 1 : n); }

int pool_threads() { return pool().size(); }

}  // namespace attnmap
