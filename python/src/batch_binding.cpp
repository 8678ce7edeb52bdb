// batch_binding.cpp - render_folder's run (batch_binding.hpp): rows, progress and lines to Python callables,
// each called with the GIL acquired from the run's threads; a callback's exception stops the run.
#include "batch_binding.hpp"

#include <atomic>
#include <memory>
#include <mutex>

#include "app/cli/flags.hpp"
#include "app/cli/options.hpp"
#include "engine/batch.hpp"

namespace attnmap_py {

namespace {

/// The first exception a Python callback raised during a run, kept to be raised when the run has returned;
/// the run is told to stop (stopped()) after the images under way.
class CallbackError {
 public:
  /// Calls `fn` with the GIL acquired (from any thread); an exception it raises is kept (the first one) and
  /// stops the run.
  void call(const std::function<void()>& fn) {
    py::gil_scoped_acquire gil;
    try {
      fn();
    } catch (py::error_already_set& e) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::make_shared<py::object>(e.value());
      stop_ = true;
    }
  }
  bool stopped() const { return stop_.load(); }
  /// Raises the kept exception (py::error_already_set), if any. The GIL held.
  void raise_if_any() {
    if (!error_) return;
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error_->ptr())), error_->ptr());
    throw py::error_already_set();
  }

 private:
  std::mutex mu_;
  std::shared_ptr<py::object> error_;
  std::atomic<bool> stop_{false};
};

/// The hooks that call `calls` (through `errors`); cancelled when a callback raised or `interrupted()`.
attnmap::BatchHooks python_hooks(const BatchCallbacks& calls, bool progress_bar, CallbackError* errors,
                                 const std::function<bool()>& interrupted) {
  using attnmap::LineStream;
  attnmap::BatchHooks h;
  h.progress_bar = progress_bar;
  h.on_line = [on_line = calls.on_line, errors](LineStream stream, const std::string& text) {
    const char* name = stream == LineStream::Out ? "out" : stream == LineStream::Err ? "err" : "bar";
    const std::string spelled = attnmap::spell_as_flags(text);
    errors->call([&] { on_line(name, py::str(spelled)); });
  };
  h.on_row = [on_row = calls.on_row, errors](const attnmap::BatchRow& row) {
    errors->call([&] { on_row(row.index, py::str(row.json)); });
  };
  if (!calls.progress.is_none())
    h.on_progress = [progress = calls.progress, errors](size_t done, size_t total, const std::string& input,
                                                     const std::string& status) {
      errors->call([&] { progress(done, total, input, status); });
    };
  h.cancelled = [errors, interrupted] { return errors->stopped() || (interrupted && interrupted()); };
  return h;
}

}  // namespace

int run_batch(const attnmap::GivenSettings& given, const attnmap::ModelSource& model, const BatchCallbacks& calls,
              bool progress_bar, std::shared_mutex& engine_mu, const std::function<bool()>& interrupted) {
  const attnmap::CheckedRequest request = attnmap::make_request("render", given);
  CallbackError errors;
  attnmap::BatchHooks hooks = python_hooks(calls, progress_bar, &errors, interrupted);
  hooks.model = model;
  int rc = 0;
  {
    py::gil_scoped_release nogil;
    std::unique_lock<std::shared_mutex> lock(engine_mu);
    rc = attnmap::run_render(request.ro, request.bo, hooks);
  }
  errors.raise_if_any();
  return rc;
}

py::list settings_list(const std::string& command) {
  using namespace pybind11::literals;
  py::list out;
  for (const attnmap::SettingInfo& s : attnmap::settings_of(command))
    out.append(py::dict("id"_a = s.id, "keyword"_a = s.keyword, "flag"_a = s.flag, "topic"_a = s.topic, "is_switch"_a = s.is_switch,
                        "makes_model"_a = s.makes_model, "repeatable"_a = s.repeatable, "negated"_a = s.negated,
                        "forward"_a = s.forward, "set_by_call"_a = s.set_by_call));
  return out;
}

}  // namespace attnmap_py
