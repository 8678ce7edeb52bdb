// test_util.hpp - helpers shared by the tests: fixture paths, array comparison with a readable report.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "checkpoint/weights.hpp"
#include "core/error.hpp"

inline std::string fixture(const std::string& rel) { return std::string(ATTNMAP_TEST_DIR) + "/fixtures/" + rel; }

/// The message of the attnmap::Error that f() throws ("" when it throws none).
template <class F>
std::string thrown_message(F f) {
  try {
    f();
  } catch (const attnmap::Error& e) {
    return e.what();
  }
  return "";
}

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

/// n floats drawn from N(0, scale^2) by mt19937(seed): the same values on every run.
inline std::vector<float> randoms(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

/// A layer of random weights (N, K) and bias (N), normal(0, 1) from `seed` and seed + 1.
inline attnmap::LinearW random_linear(int N, int K, unsigned seed) {
  attnmap::LinearW lin;
  lin.out = N;
  lin.in = K;
  lin.weight = randoms(static_cast<size_t>(N) * static_cast<size_t>(K), seed);
  lin.bias = randoms(static_cast<size_t>(N), seed + 1);
  return lin;
}

/// A file's whole content ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// A path single-quoted for the shell.
inline std::string q(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

/// Exit status and captured output of one run of the attnmap binary.
struct CliRun {
  int status;  ///< exit status, -1 when killed by a signal
  std::string out, err;
};

/// Runs `env_prefix 'attnmap' args` through the shell (args already quoted), capturing stdout and stderr.
inline CliRun run_attnmap(const std::string& args, const std::string& env_prefix = "") {
  static int counter = 0;
  const std::string base = (std::filesystem::temp_directory_path() /
                            ("attnmap_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
                               .string();
  const std::string cmd =
      env_prefix + "'" + ATTNMAP_BIN + "' " + args + " >'" + base + ".out' 2>'" + base + ".err'";
  const int rc = std::system(cmd.c_str());
  CliRun r{WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(base + ".out"), slurp(base + ".err")};
  std::filesystem::remove(base + ".out");
  std::filesystem::remove(base + ".err");
  return r;
}

/// A test fixture with a fresh, empty folder `dir` per test (named after the test), removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() /
          ("attnmap_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name() + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::filesystem::path dir;
};
