// threads.hpp - starting threads where the system may refuse them (a process limit: ulimit -u, a cgroup's
// pids.max under Slurm or Kubernetes). std::thread throws std::system_error then; every thread attnmap
// starts goes through here, so a refusal means fewer threads, never std::terminate.
#pragma once
#include <functional>
#include <optional>
#include <thread>
#include <vector>

namespace attnmap {

/// Thread slots a run leaves free under a process limit for the threads libraries start on their own (pango
/// starts two for each new font pattern it matches, up to four for one label, and GLib aborts the process
/// when it cannot).
constexpr int kLibraryThreadRoom = 4;

/// Starts a thread running `body`, or returns nothing when the system refuses one (std::system_error from
/// std::thread, or the test limit of refuse_threads_after). Never throws for a refusal.
std::optional<std::thread> try_start_thread(std::function<void()> body);

/// Starts up to `n` threads running body(0) .. body(n - 1) and returns them (the caller joins them). When
/// the system refuses some of them, or refuses `room` more small-stacked threads beside them, as many of
/// those that started are let go again before running anything as leave `room` slots free for libraries.
std::vector<std::thread> start_threads(int n, int room, const std::function<void(int)>& body);

/// Runs `work` on the calling thread and on up to `n - 1` threads started for it (start_threads, leaving
/// `room`), and returns when every one has returned. A refused thread is not retried: the work is shared
/// among those that started (so `work` must take its items from a shared counter, not by thread number).
/// `started`, when given, is called on the calling thread with the count (1..n) before the calling thread
/// runs `work`. An exception thrown by `work` on any thread is rethrown here (the first one) after all have
/// returned. Returns the count.
int run_on_threads(int n, const std::function<void()>& work, const std::function<void(int)>& started = nullptr,
                   int room = 0);

/// Whether `tid` (a kernel thread id, as listed in /proc/self/task) is a thread started here (try_start_thread,
/// start_threads, run_on_threads) that has not yet returned: the threads a library starts on its own are the
/// others (e.g. pango's, waited for after each text layout).
bool started_by_attnmap(long tid);

/// For tests: from now on, try_start_thread refuses every thread after `k` more have started, as a process
/// limit would; a negative k lifts the limit (the default).
void refuse_threads_after(int k);

}  // namespace attnmap
