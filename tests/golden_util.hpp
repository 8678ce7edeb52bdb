// golden_util.hpp - golden-image comparison shared by the figure tests (test_figures.cpp, test_figure_cmd.cpp).
//
// Golden images live in tests/golden/. After a deliberate change of the design, regenerate them with
//   ATTNMAP_UPDATE_GOLDEN=1 ctest --test-dir build -R 'Figure'
// then LOOK at every file in tests/golden/ before committing. Tolerance: same size, and at least 99.5 % of the
// pixels within 2 levels in every channel (cairo/pango may rasterise glyph edges a level or more apart
// across versions); the rest may differ by any amount, which only glyph edges do.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "io/image_io.hpp"

inline const std::string& golden_dir() {
  static const std::string d = std::string(ATTNMAP_TEST_DIR) + "/golden/";
  return d;
}

/// `made` against tests/golden/`name` with the tolerance above, or the reference rewritten from `made` under
/// ATTNMAP_UPDATE_GOLDEN=1.
inline ::testing::AssertionResult matches_golden(const std::string& made, const std::string& name) {
  namespace fs = std::filesystem;
  const std::string ref = golden_dir() + name;
  if (const char* u = std::getenv("ATTNMAP_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    fs::create_directories(golden_dir());
    fs::copy_file(made, ref, fs::copy_options::overwrite_existing);
    return ::testing::AssertionSuccess() << "updated " << ref;
  }
  if (!fs::exists(ref)) return ::testing::AssertionFailure() << ref << " is missing (ATTNMAP_UPDATE_GOLDEN=1 makes it)";
  const attnmap::Image a = attnmap::load_image(made), b = attnmap::load_image(ref);
  if (a.width != b.width || a.height != b.height)
    return ::testing::AssertionFailure() << name << ": " << a.width << "x" << a.height << ", golden " << b.width << "x"
                                         << b.height;
  size_t off = 0;
  const size_t n = static_cast<size_t>(a.width) * static_cast<size_t>(a.height);
  for (size_t i = 0; i < n; ++i) {
    int d = 0;
    for (int k = 0; k < 3; ++k) d = std::max(d, std::abs(int(a.rgb[i * 3 + k]) - int(b.rgb[i * 3 + k])));
    off += d > 2;
  }
  if (off * 200 > n)
    return ::testing::AssertionFailure() << name << ": " << off << " of " << n
                                         << " pixels differ by more than 2 levels (limit 0.5 %); made: " << made;
  return ::testing::AssertionSuccess();
}
