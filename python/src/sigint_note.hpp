// sigint_note.hpp - Ctrl-C while the engine holds the interpreter's main thread (attnmap_module.cpp): noted for the
// engine to poll, raised as KeyboardInterrupt when the engine has returned.
#pragma once
#include <pybind11/pybind11.h>

#include <atomic>
#include <csignal>

namespace attnmap_py {

namespace py = pybind11;

// SIGINT noted during a command run (run()'s handler; lock-free, so async-signal-safe).
inline std::atomic<bool> g_sigint{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the SIGINT flag must be lock-free");

// The interpreter's main thread (where Python handles signals).
inline unsigned long main_thread_ident() {
  static const unsigned long ident =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  return ident;
}

// Ctrl-C (SIGINT) while the engine holds the main thread: Python's handler cannot run then, so a handler of
// ours notes it (g_sigint) for the engine to poll (BatchHooks::cancelled, the Hub download's cancel), and
// KeyboardInterrupt is raised when the engine has returned. Only on the main thread, where Python handles
// signals; the previous handler is restored when the note ends.
class SigintNote {
 public:
  SigintNote() : on_(PyThread_get_thread_ident() == main_thread_ident()) {
    if (!on_) return;
    g_sigint = false;
    struct sigaction sa {};
    sa.sa_handler = [](int) { g_sigint = true; };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &previous_);
  }
  ~SigintNote() { restore(); }
  SigintNote(const SigintNote&) = delete;
  SigintNote& operator=(const SigintNote&) = delete;
  /// Restores the previous handler, then raises KeyboardInterrupt (py::error_already_set) when a SIGINT came.
  void raise_if_interrupted() {
    restore();
    if (on_ && g_sigint.exchange(false)) {
      PyErr_SetNone(PyExc_KeyboardInterrupt);
      throw py::error_already_set();
    }
  }

 private:
  void restore() {
    if (on_ && !restored_) sigaction(SIGINT, &previous_, nullptr);
    restored_ = true;
  }
  bool on_, restored_ = false;
  struct sigaction previous_ {};
};

}  // namespace attnmap_py
