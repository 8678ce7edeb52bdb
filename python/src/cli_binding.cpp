// cli_binding.cpp - attnmap.cli(args) (cli_binding.hpp): the command line in process, std::cout / std::cerr
// passed to Python line by line.
#include "cli_binding.hpp"

#include <iostream>
#include <mutex>
#include <streambuf>

#include "app/cli/command_line.hpp"

namespace attnmap_py {

namespace {

// std::cout / std::cerr of a command run in process, forwarded line by line to a Python callable (the
// Python layer's sink: sys.stdout / sys.stderr, or a list when quiet), from whichever thread writes.
class PythonLineBuf : public std::streambuf {
 public:
  explicit PythonLineBuf(py::object sink) : sink_(std::move(sink)) {}
  ~PythonLineBuf() override {
    py::gil_scoped_acquire gil;
    sink_ = py::object();
  }

  void flush_line() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!line_.empty()) emit_locked();
  }

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return 0;
    std::lock_guard<std::mutex> lock(mu_);
    line_ += static_cast<char>(c);
    if (c == '\n') emit_locked();
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard<std::mutex> lock(mu_);
    line_.append(s, static_cast<size_t>(n));
    if (line_.find('\n') != std::string::npos) emit_locked();
    return n;
  }
  int sync() override { return 0; }

 private:
  void emit_locked() {
    std::string text;
    text.swap(line_);
    py::gil_scoped_acquire gil;
    try {
      sink_(py::str(text));
    } catch (const py::error_already_set&) {
      // a closed stream: the line is lost, the run goes on
    }
  }
  py::object sink_;
  std::mutex mu_;
  std::string line_;
};

}  // namespace

int run_cli(const std::vector<std::string>& args, py::object out_sink, py::object err_sink, std::shared_mutex& engine_mu,
            const std::function<bool()>& interrupted) {
  int rc = 0;
  PythonLineBuf out(std::move(out_sink)), err(std::move(err_sink));  // made and ended with the GIL held
  py::gil_scoped_release nogil;
  std::unique_lock<std::shared_mutex> lock(engine_mu);
  std::streambuf* old_out = std::cout.rdbuf(&out);
  std::streambuf* old_err = std::cerr.rdbuf(&err);
  try {
    std::vector<std::string> argv{"attnmap"};
    argv.insert(argv.end(), args.begin(), args.end());
    rc = attnmap::run_command_line(argv, interrupted);
  } catch (...) {
    std::cout.rdbuf(old_out);
    std::cerr.rdbuf(old_err);
    throw;
  }
  std::cout.flush();
  std::cerr.flush();
  out.flush_line();
  err.flush_line();
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  return rc;
}

}  // namespace attnmap_py
