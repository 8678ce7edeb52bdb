// setting_ref.cpp - the process's setting speller (set by the front ends' registry) and numbers in messages.
#include "core/setting_ref.hpp"

#include <atomic>
#include <cstdio>

namespace attnmap {

namespace {
std::atomic<SettingSpeller> g_speller{nullptr};
}  // namespace

void set_setting_speller(SettingSpeller spell) { g_speller.store(spell); }

std::string spelled_settings(const std::string& text) {
  const SettingSpeller spell = g_speller.load();
  if (spell == nullptr) return text;
  return spell_settings(text, spell);
}

std::string shown_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace attnmap
