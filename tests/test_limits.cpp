// Runs under limits and runs that must repeat: threads refused (a process limit), an address-space limit,
// figures that must be the same bytes whatever -j, order or resume, a panel wider than cairo's canvas, and
// names holding control or bidirectional formatting characters.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/threads.hpp"
#include "draw/canvas.hpp"
#include "draw/overlay.hpp"
#include "io/image_io.hpp"
#include "io/mapped_file.hpp"
#include "model/thread_pool.hpp"
#include "sanitizer.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

const std::string kModel = fixture("timm_small/weights.json");

// Every regular file under `root`, by path relative to it.
std::set<std::string> files_under(const fs::path& root) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) out.insert(fs::relative(e.path(), root).string());
  return out;
}

// Files of `a` and `b` (relative paths, manifests left out) that differ in content or exist in one only.
std::vector<std::string> differing(const fs::path& a, const fs::path& b) {
  std::set<std::string> names = files_under(a);
  for (const std::string& n : files_under(b)) names.insert(n);
  std::vector<std::string> out;
  for (const std::string& n : names)
    if (n.find("manifest") == std::string::npos && (!fs::exists(a / n) || !fs::exists(b / n) || slurp(a / n) != slurp(b / n)))
      out.push_back(n);
  return out;
}

// Four small photos of different sizes in `dir`.
void small_photos(const fs::path& dir) {
  fs::create_directories(dir);
  const std::string d = ATTNMAP_DATA_DIR;
  write_png((dir / "a_cat.png").string(), resize_photo(load_image(d + "/chelsea.png"), 120, 80));
  write_png((dir / "b_cup.png").string(), resize_photo(load_image(d + "/coffee.png"), 90, 90));
  write_png((dir / "c_rocket.png").string(), resize_photo(load_image(d + "/rocket.jpg"), 64, 100));
  write_png((dir / "d_camera.png").string(), resize_photo(load_image(d + "/camera.png"), 100, 70));
}

// Threads of every process whose real user id is `uid` (what RLIMIT_NPROC counts), from /proc.
int threads_of_user(unsigned uid) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string status = slurp(e.path() / "status");
    const size_t u = status.find("\nUid:"), t = status.find("\nThreads:");
    if (u == std::string::npos || t == std::string::npos) continue;
    if (std::stoul(status.substr(u + 5, 16)) == uid) n += std::stoi(status.substr(t + 9, 16));
  }
  return n;
}

class Limits : public TempDirTest {};

}  // namespace

// ---- threads the system refuses ------------------------------------------------------------------------

// A refused thread (refuse_threads_after: what std::thread's system_error under ulimit -u looks like to
// run_on_threads) leaves the work to the threads that started: every item done once, the count reported.
TEST(LimitsThreads, RunOnThreadsSharesTheWorkWhenThreadsAreRefused) {
  for (const int allowed : {0, 2, 100}) {
    refuse_threads_after(allowed);
    std::vector<std::atomic<int>> hits(500);
    std::atomic<size_t> next{0};
    int reported = 0;
    const int got = run_on_threads(
        8,
        [&] {
          for (size_t i = next++; i < hits.size(); i = next++) hits[i]++;
        },
        [&](int n) { reported = n; });
    refuse_threads_after(-1);
    EXPECT_EQ(got, std::min(8, allowed + 1)) << allowed;
    EXPECT_EQ(reported, got);
    for (const auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

// With room for the libraries' threads: a run that got every thread it asked for plus the room keeps its n
// (the extra ones only tested the room); one refused lets `room` of its threads go again.
TEST(LimitsThreads, RunOnThreadsLeavesRoomForLibraryThreadsOnlyWhenRefused) {
  const std::vector<std::pair<int, int>> allowed_count = {{100, 8}, {9, 8}, {8, 7}, {5, 4}, {2, 1}, {0, 1}};
  for (const auto& [allowed, count] : allowed_count) {
    refuse_threads_after(allowed);
    std::atomic<size_t> next{0};
    std::atomic<int> done{0};
    const int got = run_on_threads(8, [&] {
      for (size_t i = next++; i < 100; i = next++) done++;
    }, nullptr, 2);
    refuse_threads_after(-1);
    EXPECT_EQ(got, count) << allowed;
    EXPECT_EQ(done.load(), 100);
  }
}

TEST(LimitsThreads, RunOnThreadsRethrowsAWorkersErrorAfterAllReturn) {
  std::atomic<int> ran{0};
  EXPECT_THROW(run_on_threads(3,
                              [&] {
                                if (ran++ == 1) throw std::runtime_error("one worker fails");
                              }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 3);
  refuse_threads_after(0);
  EXPECT_FALSE(try_start_thread([] {}).has_value());
  refuse_threads_after(-1);
  auto t = try_start_thread([] {});
  ASSERT_TRUE(t.has_value());
  t->join();
}

// The text layout's wait after each layout tells pango's threads from attnmap's own by this registry: a thread
// started through core/threads is attnmap's while it runs (its probes too), a thread started by anyone else
// (here a bare std::thread, as GLib's for pango) and the main thread are not.
TEST(LimitsThreads, ThreadsStartedHereAreToldFromALibrarysOwn) {
  auto tid = [] { return static_cast<long>(::gettid()); };
  EXPECT_FALSE(started_by_attnmap(tid()));
  long seen = 0;
  bool mine = false;
  auto t = try_start_thread([&] {
    seen = tid();
    mine = started_by_attnmap(seen);
  });
  ASSERT_TRUE(t.has_value());
  t->join();
  EXPECT_TRUE(mine);
  EXPECT_FALSE(started_by_attnmap(seen));  // ended
  std::atomic<int> in_pool{0};
  run_on_threads(3, [&] { in_pool += started_by_attnmap(tid()) ? 1 : 0; }, nullptr, 2);
  EXPECT_GE(in_pool.load(), 2);  // the two started (the calling thread is not one of them)
  bool foreign = true;
  std::thread other([&] { foreign = !started_by_attnmap(tid()); });
  other.join();
  EXPECT_TRUE(foreign);
}

// The forward pass's pool asked for more threads than the system gives keeps those it has and still runs
// every task.
TEST(LimitsThreads, ThePoolKeepsWhatItHasWhenThreadsAreRefused) {
  refuse_threads_after(1);
  set_pool_threads(64);
  refuse_threads_after(-1);
  EXPECT_LT(pool_threads(), 64);
  EXPECT_GE(pool_threads(), 1);
  std::vector<std::atomic<int>> hits(300);
  parallel_for(300, [&](int i) { hits[static_cast<size_t>(i)]++; });
  for (const auto& h : hits) ASSERT_EQ(h.load(), 1);
  set_pool_threads(1);
}

// The real limit: the CLI with -j 8 (4 workers for 4 images) under RLIMIT_NPROC (ulimit -u) of the running
// threads + 6, so that 5 threads can start beside the main one: 1 more worker is kept, 4 slots are left to
// pango's threads (kLibraryThreadRoom). RLIMIT_NPROC is not enforced for root (CAP_SYS_RESOURCE),
// so as root the run is made as an unused user id (setpriv, every capability dropped); it counts the threads of
// every process of that user, hence the + 6 over those running now. Before the fix: "terminate called
// without an active exception", exit 134, nothing rendered. Now: a note, every image rendered, the same bytes
// as a -j 1 run.
TEST_F(Limits, RenderUnderAProcessLimitFallsBackToFewerWorkers) {
  if (::system("command -v setpriv >/dev/null 2>&1") != 0) GTEST_SKIP() << "setpriv (util-linux) not found";
  small_photos(dir / "in");
  fs::permissions(dir, fs::perms::all);
  fs::permissions(dir / "in", fs::perms::all);
  const bool root = ::getuid() == 0;
  // As root: a user id of this run's own (no passwd entry needed), so that another run of this test at the same
  // time (a second checkout's ctest) does not share its process count, as user nobody's would.
  const unsigned uid = root ? 50000u + static_cast<unsigned>(::getpid()) % 10000u : ::getuid();
  const int running = threads_of_user(uid);
  const std::string id = std::to_string(uid);
  const std::string as_user = root ? "setpriv --reuid=" + id + " --regid=" + id + " --clear-groups --inh-caps=-all " : "";
  const std::string limited = as_user + "bash -c 'ulimit -u " + std::to_string(running + 6) + " && exec \"$0\" \"$@\"' ";
  const CliRun r = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "out") + " -w " + q(kModel) +
                                   " -j 8 --panel --figure-format png,svg",
                               "timeout 120 " + limited);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the system refused more threads"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("of the 4 image workers (-j) started"), std::string::npos) << r.err;  // 2 of them, usually
  const CliRun ref = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "ref") + " -w " + q(kModel) +
                                 " -j 1 --panel --figure-format png,svg -q");
  ASSERT_EQ(ref.status, 0) << ref.err;
  EXPECT_EQ(files_under(dir / "ref").size(), 12u);
  EXPECT_EQ(differing(dir / "ref", dir / "out"), std::vector<std::string>{});
}

// ---- an address-space limit (ulimit -v, SGE h_vmem) ----------------------------------------------------

// Before the fix the run rendered, printed its summary and never exited: OpenBLAS (linked though unused)
// had started a thread when loaded, which spun retrying a 128 MB buffer, and its exit handler joined it.
// The oneDNN build no longer links OpenBLAS: the run exits at once.
TEST_F(Limits, RenderUnderAnAddressSpaceLimitExitsPromptly) {
  if (kAddressSanitizer) GTEST_SKIP() << "ulimit -v measures AddressSanitizer's shadow memory (the plain build runs it)";
  const auto t0 = std::chrono::steady_clock::now();
  const CliRun r = run_attnmap("render " + q(fs::path(ATTNMAP_DATA_DIR) / "chelsea.png") + " -o " + q(dir / "out"),
                               "ulimit -v 200000 && timeout 60 ");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_LT(secs, 30.0);
  EXPECT_TRUE(fs::exists(dir / "out" / "chelsea.png"));
  EXPECT_NE(r.err.find("1 done, 0 failed"), std::string::npos) << r.err;
}

// A limit that lets the program load but leaves too little beside the model: before, oneDNN crashed in the
// first image (SIGSEGV, 100 MB) or the run failed with "std::bad_alloc" (80 MB); now one line naming the
// limit, exit status 2, nothing written.
TEST_F(Limits, RenderUnderAnAddressSpaceLimitTooSmallIsRefusedWithOneLine) {
  if (kAddressSanitizer) GTEST_SKIP() << "ulimit -v measures AddressSanitizer's shadow memory (the plain build runs it)";
  const CliRun r = run_attnmap("render " + q(fs::path(ATTNMAP_DATA_DIR) / "chelsea.png") + " -o " + q(dir / "out"),
                               "ulimit -v 90000 && timeout 60 ");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("attnmap: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("address-space limit"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out" / "chelsea.png"));
}

// A photo whose pixels do not fit under the limit (7000 x 7000, 147 MB of RGB, a 150 KB file): stb_image's
// "outofmem" was reported as a fault of the file ("cannot decode image (outofmem)"); now, in render and in
// figure, "out of memory" with the limit, exit status 1, the file named.
TEST_F(Limits, APhotoTooLargeForTheAddressSpaceLimitIsOutOfMemory) {
  if (kAddressSanitizer) GTEST_SKIP() << "ulimit -v measures AddressSanitizer's shadow memory (the plain build runs it)";
  Image big;
  big.width = big.height = 7000;
  big.rgb.assign(size_t{7000} * 7000 * 3, 90);
  const fs::path photo = dir / "big.png";
  write_png(photo.string(), big);
  big.rgb = {};
  for (const std::string& cmd : {"render " + q(photo) + " -o " + q(dir / "out"),
                                 "figure " + q(photo) + " --views L1/mean -o " + q(dir / "fig.png")}) {
    const CliRun r = run_attnmap(cmd, "ulimit -v 250000 && timeout 60 ");
    EXPECT_EQ(r.status, 1) << cmd << "\n" << r.err;
    EXPECT_NE(r.err.find("big.png: out of memory (the address-space limit, ulimit -v, is"), std::string::npos)
        << cmd << "\n" << r.err;
    EXPECT_EQ(r.err.find("outofmem"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "fig.png"));
}

// A mapped weights file cut short by another program while in use: the read past its new end was SIGBUS (exit
// 135, temporary files left); now one line naming the file, exit status 2.
TEST(LimitsDeathTest, AMappedFileCutShortWhileReadIsOneLineAndExit2) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const fs::path f = fs::temp_directory_path() / ("attnmap_cut_" + std::to_string(::getpid()) + ".bin");
  write_file_atomic(f.string(), std::vector<uint8_t>(size_t{1} << 16, 7));
  const MappedFile m(f.string());
  fs::resize_file(f, 100);
  EXPECT_EXIT(
      {
        volatile uint8_t x = m.data()[40000];
        (void)x;
      },
      testing::ExitedWithCode(2), "attnmap_cut_.*: the file was cut short while attnmap was reading it");
  EXPECT_EQ(m.data()[50], 7);  // the pages before the new end read as before
  fs::remove(f);
}

// A weights file rewritten in place (same size) while it is read: the maps and the recorded hash mixed two
// versions, exit 0; now the loader's check after hashing refuses it (exit 2 from a run), naming the file.
TEST(LimitsFiles, AMappedFileWrittenWhileReadIsSeen) {
  const fs::path f = fs::temp_directory_path() / ("attnmap_rewrite_" + std::to_string(::getpid()) + ".bin");
  write_file_atomic(f.string(), std::vector<uint8_t>(4096, 7));
  const MappedFile m(f.string());
  EXPECT_FALSE(m.changed_since_open());
  EXPECT_NO_THROW(throw_if_changed(m, f.string()));
  EXPECT_NO_THROW(throw_if_changed(f.string(), m.stamp()));  // by path: a shard whose descriptor is closed
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // past the file system's timestamp granularity
  {
    std::FILE* out = std::fopen(f.c_str(), "r+b");
    ASSERT_NE(out, nullptr);
    std::fputc(9, out);
    std::fclose(out);
  }
  EXPECT_TRUE(m.changed_since_open());
  EXPECT_THROW(throw_if_changed(f.string(), m.stamp()), Error);
  EXPECT_NO_THROW(throw_if_changed(f.string(), FileStamp{}));  // none recorded: nothing to compare
  try {
    throw_if_changed(m, f.string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attnmap_rewrite_"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("changed while attnmap was reading it"), std::string::npos) << e.what();
  }
  m.close_file();
  EXPECT_FALSE(m.changed_since_open());  // nothing to ask once closed
  fs::remove(f);
}

// ---- figures that repeat byte for byte -----------------------------------------------------------------

TEST(LimitsFigures, CanonicalSvgIdsRenumberDefinitionsAndReferencesByDocumentOrder) {
  const std::string doc =
      "<svg><defs><g id=\"glyph0-5\"/><g id=\"glyph0-2\"/><clipPath id=\"clip7\"/>"
      "<image id=\"image203\" xlink:href=\"data:image/png;base64,AAAA\"/></defs>"
      "<g id=\"surface57\" clip-path=\"url(#clip7)\"><use xlink:href=\"#glyph0-2\"/><use xlink:href=\"#image203\"/>"
      "<use xlink:href=\"#glyph0-5\"/><use href=\"#missing9\"/></g><metadata id=\"attnmap\">id=\"x1\"</metadata></svg>";
  EXPECT_EQ(canonical_svg_ids(doc),
            "<svg><defs><g id=\"glyph1\"/><g id=\"glyph2\"/><clipPath id=\"clip1\"/>"
            "<image id=\"image1\" xlink:href=\"data:image/png;base64,AAAA\"/></defs>"
            "<g id=\"surface1\" clip-path=\"url(#clip1)\"><use xlink:href=\"#glyph2\"/><use xlink:href=\"#image1\"/>"
            "<use xlink:href=\"#glyph1\"/><use href=\"#missing9\"/></g><metadata id=\"attnmap\">id=\"x1\"</metadata></svg>");
  // The same drawing in one process twice (cairo's counters moved on in between): the same bytes.
  std::vector<std::string> docs;
  for (int k = 0; k < 2; ++k) {
    Canvas c(120, 60, 100, FigureFormat::Svg);
    c.image(resize_photo(load_image(std::string(ATTNMAP_DATA_DIR) + "/coffee.png"), 40, 40), 5, 5, 40, 40, Filter::Good);
    c.text("L1/h3", 60, 10, TextStyle{});
    const fs::path p = fs::temp_directory_path() / ("attnmap_limits_svg_" + std::to_string(::getpid()) + ".svg");
    c.save(p.string());
    docs.push_back(slurp(p));
    fs::remove(p);
  }
  EXPECT_EQ(docs[0], docs[1]);
  EXPECT_NE(docs[0].find("id=\"image1\""), std::string::npos);
}

// Two runs of a folder, -j 1 and -j 2, every figure kind in PNG, PDF and SVG: every file the same bytes
// (before: every PDF differed by its /CreationDate, most SVGs by cairo's image ids). Then a resumed run
// (--skip-existing after some outputs were deleted, so the resumed process draws a different sequence of
// figures) equals the clean run too.
TEST_F(Limits, FiguresAreTheSameBytesWhateverJobsAndResume) {
  small_photos(dir / "in");
  const std::string args = " -w " + q(kModel) + " --views L1/h0,L0/mean,rollout --panel --strip layers --strip heads " +
                           "--figure-format png,pdf,svg -q";
  const CliRun one = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "j1") + args + " -j 1");
  ASSERT_EQ(one.status, 0) << one.err;
  const CliRun two = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "j2") + args + " -j 2");
  ASSERT_EQ(two.status, 0) << two.err;
  const std::set<std::string> made = files_under(dir / "j1");
  size_t pdf = 0, svg = 0;
  for (const std::string& f : made) {
    if (f.size() > 4 && f.compare(f.size() - 4, 4, ".pdf") == 0) {
      ++pdf;
      EXPECT_EQ(slurp(dir / "j1" / f).find("/CreationDate"), std::string::npos) << f;
    }
    if (f.size() > 4 && f.compare(f.size() - 4, 4, ".svg") == 0) ++svg;
  }
  EXPECT_EQ(pdf, 12u);  // 4 photos x (panel, layers strip, heads strip)
  EXPECT_EQ(svg, 12u);
  EXPECT_EQ(differing(dir / "j1", dir / "j2"), std::vector<std::string>{});

  fs::remove(dir / "j2" / "a_cat.panel.svg");
  fs::remove(dir / "j2" / "c_rocket.layers.pdf");
  fs::remove(dir / "j2" / "c_rocket.heads.svg");
  fs::remove(dir / "j2" / "d_camera.L0-mean.png");
  const CliRun resumed = run_attnmap("render " + q(dir / "in") + " -o " + q(dir / "j2") + args + " -j 2 --skip-existing");
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(differing(dir / "j1", dir / "j2"), std::vector<std::string>{});
}

// `attnmap figure` twice: the same PDF and SVG bytes.
TEST_F(Limits, TheComparisonFigureIsTheSameBytesTwice) {
  small_photos(dir / "in");
  for (const char* ext : {"pdf", "svg"}) {
    std::vector<std::string> got;
    for (int k = 0; k < 2; ++k) {
      const fs::path out = dir / ("fig" + std::to_string(k) + "." + ext);
      const CliRun r = run_attnmap("figure " + q(dir / "in" / "a_cat.png") + " " + q(dir / "in" / "b_cup.png") +
                                   " -w " + q(kModel) + " --views photo,L1/h0,rollout -o " + q(out) + " -q");
      ASSERT_EQ(r.status, 0) << r.err;
      got.push_back(slurp(out));
    }
    EXPECT_GT(got[0].size(), 1000u);
    EXPECT_EQ(got[0], got[1]) << ext;
  }
}

// ---- a panel wider than cairo's canvas -----------------------------------------------------------------

// A 12000 x 40 photo: three columns of it would be a 36,000-pixel canvas (cairo stops at 32,767). Before: the
// overlay was written, then the panel failed (exit 1). Now the panel is drawn with the photo scaled down to
// fit, the overlay file stays at the photo's size.
TEST_F(Limits, APanelOfAPhotoWiderThanTheCanvasIsDrawnScaledToFit) {
  Image wide;
  wide.width = 12000;
  wide.height = 40;
  wide.rgb.resize(static_cast<size_t>(wide.width) * wide.height * 3);
  for (size_t i = 0; i < wide.rgb.size(); ++i) wide.rgb[i] = static_cast<uint8_t>((i / 3 / 97) * 37 % 251);
  write_png((dir / "wide.png").string(), wide);
  const CliRun r = run_attnmap("render " + q(dir / "wide.png") + " -o " + q(dir / "out") + " -w " + q(kModel) +
                               " --panel --figure-format png,svg --no-legend");
  ASSERT_EQ(r.status, 0) << r.err;
  const Image overlay = load_image((dir / "out" / "wide.png").string());  // the bare overlay (--no-legend)
  EXPECT_EQ(overlay.width, 12000);
  EXPECT_EQ(overlay.height, 40);
  const Image panel = load_image((dir / "out" / "wide.panel.png").string());
  EXPECT_LE(panel.width, kMaxCanvas);
  EXPECT_GT(panel.width, 30000);  // scaled just enough, not to a thumbnail
  EXPECT_GT(panel.height, 30);
  EXPECT_TRUE(fs::exists(dir / "out" / "wide.panel.svg"));
}

// ---- control and bidirectional formatting characters in names ------------------------------------------

TEST(LimitsNames, PrintableEscapesBidiFormattingCharacters) {
  EXPECT_EQ(printable("cat\xe2\x80\xaegnp.png"), "cat\\u202egnp.png");  // U+202E RIGHT-TO-LEFT OVERRIDE
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\xd8\x9c", "\\u061c"}, {"\xe2\x80\x8e", "\\u200e"}, {"\xe2\x80\x8f", "\\u200f"}, {"\xe2\x80\xaa", "\\u202a"},
      {"\xe2\x80\xab", "\\u202b"}, {"\xe2\x80\xac", "\\u202c"}, {"\xe2\x80\xad", "\\u202d"}, {"\xe2\x81\xa6", "\\u2066"},
      {"\xe2\x81\xa7", "\\u2067"}, {"\xe2\x81\xa8", "\\u2068"}, {"\xe2\x81\xa9", "\\u2069"}};
  for (const auto& [raw, shown] : cases) EXPECT_EQ(printable("a" + raw + "b"), "a" + shown + "b");
  // Their neighbours and other text pass unchanged; controls stay \xNN.
  EXPECT_EQ(printable("\xe2\x80\x8d\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa caf\xc3\xa9 \xe7\x8c\xab"),
            "\xe2\x80\x8d\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa caf\xc3\xa9 \xe7\x8c\xab");
  EXPECT_EQ(printable("a\nb\x1b[2J"), "a\\x0ab\\x1b[2J");
}

// A drawn label is set as printable shows it: a newline does not make a second line, U+202E does not
// reorder, so the label measures exactly as its escaped text does.
TEST(LimitsNames, DrawnLabelsShowControlAndBidiCharactersAsEscapes) {
  Canvas c(400, 100, 100, FigureFormat::Png);
  TextStyle ts;
  ts.px = 14;
  const TextSize one = c.measure("cat.png", ts);
  const TextSize nl = c.measure("cat\n0.031.png", ts);
  EXPECT_EQ(nl.h, one.h);  // one line
  EXPECT_EQ(nl.w, c.measure("cat\\x0a0.031.png", ts).w);
  EXPECT_EQ(c.measure("cat\xe2\x80\xaegnp.png", ts).w, c.measure("cat\\u202egnp.png", ts).w);
}

// The CLI: a folder holding a name with a newline and one with U+202E. The terminal lines show them escaped;
// the contact sheet draws each label as its escaped text (the sheet equals, pixel for pixel, the sheet of
// files literally named with the escapes); the gallery shows them escaped.
TEST_F(Limits, NamesWithControlAndBidiCharactersAreEscapedOnTheTerminalTheSheetAndTheGallery) {
  const Image photo = resize_photo(load_image(std::string(ATTNMAP_DATA_DIR) + "/chelsea.png"), 96, 64);
  fs::create_directories(dir / "raw" / "in");
  fs::create_directories(dir / "esc" / "in");
  write_png((dir / "raw" / "in" / "a\nmax 0.99.png").string(), photo);
  write_png((dir / "raw" / "in" / "b\xe2\x80\xaegnp.png").string(), photo);
  write_png((dir / "esc" / "in" / "a\\x0amax 0.99.png").string(), photo);
  write_png((dir / "esc" / "in" / "b\\u202egnp.png").string(), photo);
  for (const char* which : {"raw", "esc"}) {
    // Run from inside each folder, so that the sheets' titles (the output folder) are the same.
    const CliRun r = run_attnmap("render in -o out -w " + q(kModel) + " -j 1 --contact-sheet sheet.png --gallery gal",
                                 "cd " + q(dir / which) + " && ");
    ASSERT_EQ(r.status, 0) << r.err;
    if (std::string(which) == "raw") {
      EXPECT_EQ(r.out.find("\xe2\x80\xae"), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("b\\u202egnp.png"), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("a\\x0amax 0.99.png"), std::string::npos) << r.out;
      const std::string html = slurp(dir / "raw" / "gal" / "index.html");
      EXPECT_EQ(html.find("\xe2\x80\xae"), std::string::npos);
      EXPECT_NE(html.find("<div class=\"name\" title=\"in/b\\u202egnp.png\">b\\u202egnp.<wbr>png</div>"), std::string::npos);
    }
  }
  const Image raw = load_image((dir / "raw" / "sheet.png").string());
  const Image esc = load_image((dir / "esc" / "sheet.png").string());
  EXPECT_EQ(raw.width, esc.width);
  EXPECT_EQ(raw.height, esc.height);
  EXPECT_TRUE(raw.rgb == esc.rgb);
}
