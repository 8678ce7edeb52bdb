// test_util.hpp - helpers shared by the tests: fixture paths, array comparison with a readable report.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

inline std::string fixture(const std::string& rel) { return std::string(ATTNMAP_TEST_DIR) + "/fixtures/" + rel; }

/// Compares two arrays element-wise within `tol` (absolute); on failure prints the first mismatches and
/// the largest difference, as llm.c's tests do.
inline ::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                                            const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " != expected " << want.size();
  double max_diff = 0;
  size_t max_at = 0, bad = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(d <= tol)) {
      if (bad < 5) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "\n  [%zu] got %.8g expected %.8g (diff %.3g)", i, got[i], want[i], d);
        first += buf;
      }
      ++bad;
    }
    if (!(d <= max_diff)) {
      max_diff = d;
      max_at = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess() << what << ": max diff " << max_diff;
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << got.size() << " values differ by more than "
                                       << tol << "; largest diff " << max_diff << " at [" << max_at << "]" << first;
}
