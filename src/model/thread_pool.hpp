// thread_pool.hpp - the one pool of worker threads that the forward pass's parallel work runs on.
#pragma once
#include <functional>

namespace attnmap {

/// Runs task(i) for every i in [0, n), spread over the pool's threads (the calling thread is one of them),
/// and returns when all are done. Which thread runs which i is not fixed, so a task must write only its
/// own outputs and compute them the same way wherever it runs: the results then never depend on the thread
/// count. Runs everything on the calling thread when the pool has one thread, when n <= 1, when called
/// from inside a task (nested parallel_for) or while another thread's parallel_for holds the pool (several
/// image workers). An exception thrown by a task is rethrown here (the first one) after all tasks end.
void parallel_for(int n, const std::function<void(int)>& task);

/// Sets the pool's size (threads including the caller, >= 1; 1 = everything on the calling thread). The
/// helper threads are created once, here, and kept for the whole run; a smaller count parks the extra ones.
/// Not to be called while a parallel_for runs. Fewer threads than asked when the system refuses threads.
void set_pool_threads(int n);

/// The pool's size as set by set_pool_threads (1 until then).
int pool_threads();

}  // namespace attnmap
