// Decompression bombs in torch.save archives (fuzz/regressions/pth/bomb_*.pth, made by
// tools/make_bomb_fixtures.py): each declares 128-256 MiB in a 40-260 KB file and is refused from the declared
// sizes before anything of that size is inflated or allocated; a bomb in a storage the state dict does not
// use is never inflated. The peak memory is measured in a forked child (wait4's ru_maxrss).
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/weights_pth.hpp"
#include "core/error.hpp"
#include "sanitizer.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

std::string bomb(const std::string& name) {
  return (fs::path(ATTNMAP_TEST_DIR).parent_path() / "fuzz" / "regressions" / "pth" / name).string();
}

struct ChildRun {
  int status = -1;
  long maxrss_kb = 0;  // the child's peak resident memory
  double seconds = 0;
};

// Runs `fn` in a forked child (exit 0 when it returns true) and measures its peak memory with wait4.
ChildRun in_child(const std::function<bool()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    bool ok = false;
    try {
      ok = fn();
    } catch (...) {
    }
    ::_exit(ok ? 0 : 1);
  }
  ChildRun r;
  struct rusage ru {};
  int st = 0;
  ::wait4(pid, &st, 0, &ru);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  r.maxrss_kb = ru.ru_maxrss;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

long current_rss_kb() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

std::string pth_error(const std::string& path) {
  try {
    load_weights_pth(path, "");
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

// Each bomb declares 128-256 MiB in a 40-260 KB file: refused with the sizes and the limit, in well under a
// second of work, and without the child process growing by anything near the declared size.
TEST(PthBombs, AreRefusedBeforeInflating) {
  const struct {
    const char* file;
    const char* says;
    long max_growth_mb;  // the pickle-values bomb holds its 40 MiB pickle and 500 000 values before it stops
  } cases[] = {
      {"bomb_storage.pth", "1 compressed storage of the state dict would inflate to 268435456 bytes (256.0 MiB)", 32},
      {"bomb_unused_tensor.pth", "over the inflation limit of 67108864 bytes (64.0 MiB): the larger of 64 MiB and 16 times", 32},
      {"bomb_pickle.pth", "archive entry 'archive/data.pkl' declares 134217732 bytes (128.0 MiB), over the limit of "
                          "67108864 bytes (64.0 MiB)", 32},
      {"bomb_pickle_values.pth", "data.pkl: more than 500000 values", 200},
  };
  const long base = current_rss_kb();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string path = bomb(c.file);
    ASSERT_LT(fs::file_size(path), 300u * 1024);  // small on disk
    const std::string msg = pth_error(path);
    EXPECT_NE(msg.find(path + ": "), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << msg;
    const ChildRun r = in_child([&] { return pth_error(path).find(c.says) != std::string::npos; });
    EXPECT_EQ(r.status, 0);
    EXPECT_LT(r.seconds, 10.0);                 // a loaded 2-core machine; alone it is ~0.05 s
    if (!kAddressSanitizer) {  // (its allocator's own bookkeeping; the plain build bounds the memory)
      EXPECT_LT(r.maxrss_kb - base, c.max_growth_mb * 1024) << r.maxrss_kb;  // the old reader: 530 MB to 4.4 GB
    }
  }
}

// A training checkpoint whose optimizer state holds the bomb: the state dict ('model') does not use that
// storage, so it is never inflated and the file reads with its one tensor.
TEST(PthBombs, UnusedStoragesAreNeverInflated) {
  const std::string path = bomb("bomb_optimizer.pth");
  const RawWeights raw = load_weights_pth(path, "");
  ASSERT_EQ(raw.tensors.size(), 1u);
  const Tensor& w = raw.tensors.at("w");
  EXPECT_EQ(w.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w.data[5], 5.0f);
  const long base = current_rss_kb();
  const ChildRun r = in_child([&] { return load_weights_pth(path, "").tensors.size() == 1; });
  EXPECT_EQ(r.status, 0);
  EXPECT_LT(r.maxrss_kb - base, 32 * 1024) << r.maxrss_kb;
}
