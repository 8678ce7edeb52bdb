// batch_hooks.cpp - the command line's batch hooks (terminal_hooks: the run's text on std::cout / std::cerr)
// and the run's progress (BatchProgress) written through the hooks.
#include "engine/batch_hooks.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "core/setting_ref.hpp"

namespace attnmap {

BatchHooks terminal_hooks() {
  BatchHooks h;
  h.progress_bar = ::isatty(2) == 1;
  h.on_line = [](LineStream stream, const std::string& text) {
    if (stream == LineStream::Out)
      std::cout << spelled_settings(text) << "\n" << std::flush;
    else if (stream == LineStream::Err)
      std::cerr << spelled_settings(text) << "\n";
    else
      std::cerr << "\r\033[K" << text << std::flush;
  };
  return h;
}

void say(const BatchHooks& hooks, LineStream stream, const std::string& text) {
  if (hooks.on_line && (!text.empty() || stream == LineStream::Bar)) hooks.on_line(stream, text);
}

namespace {

std::string fmt_duration(double s) {
  if (!(s >= 0) || s > 359999) return "--:--";
  const long t = std::lround(s);
  char b[32];
  if (t >= 3600)
    std::snprintf(b, sizeof b, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else
    std::snprintf(b, sizeof b, "%ld:%02ld", t / 60, t % 60);
  return b;
}

}  // namespace

BatchProgress::BatchProgress(const BatchHooks& hooks, size_t total, bool enabled, int every)
    : hooks_(hooks), total_(total), enabled_(enabled && total > 0), bar_(hooks.progress_bar),
      t0_(std::chrono::steady_clock::now()) {
  every_ = every > 0 ? static_cast<size_t>(every) : std::clamp<size_t>((total + 9) / 10, 1, 100);
}

void BatchProgress::clear() {
  if (shown_) say(hooks_, LineStream::Bar, "");
  shown_ = false;
}

void BatchProgress::tick(size_t processed, size_t skipped) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double el = std::chrono::duration<double>(now - t0_).count();
  const size_t work = processed - skipped;  // images actually rendered (done or failed)
  const double rate = el > 0 ? static_cast<double>(work) / el : 0.0;
  const double eta = rate > 0 ? static_cast<double>(total_ - processed) / rate : -1.0;
  // Nothing rendered yet, every image so far skipped: no rate or ETA to tell ("0.0 images/s, ETA --:--").
  char speed[96];
  if (work == 0)
    std::snprintf(speed, sizeof speed, processed == total_ ? "all %zu skipped" : "%zu skipped so far", skipped);
  else
    std::snprintf(speed, sizeof speed, "%.1f images/s, ETA %s", rate, fmt_duration(eta).c_str());
  char line[200];
  if (bar_) {
    if (processed < total_ && now - last_ < std::chrono::milliseconds(100) && shown_) return;
    last_ = now;
    const int width = 28;
    const int fill = static_cast<int>(static_cast<double>(width) * static_cast<double>(processed) /
                                      static_cast<double>(total_));
    std::string bar(static_cast<size_t>(fill), '#');
    bar.resize(static_cast<size_t>(width), '.');
    std::snprintf(line, sizeof line, "[%s] %zu/%zu  %s", bar.c_str(), processed, total_, speed);
    say(hooks_, LineStream::Bar, line);
    shown_ = true;
  } else if (processed % every_ == 0 || processed == total_) {
    std::snprintf(line, sizeof line, "attnmap: %zu/%zu images, %s", processed, total_, speed);
    say(hooks_, LineStream::Err, line);
  }
}

}  // namespace attnmap
