#include "batch.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include <unistd.h>

#include "classify.hpp"
#include "error.hpp"

namespace attnmap {

namespace fs = std::filesystem;

namespace {

bool has_image_extension(const fs::path& p) {
  static const std::set<std::string> kExt = {".jpg", ".jpeg", ".png", ".bmp", ".tga", ".gif", ".psd",
                                             ".hdr", ".pic",  ".ppm", ".pgm", ".pnm"};
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return kExt.count(e) != 0;
}

bool is_hidden(const fs::path& p) {
  const std::string n = p.filename().string();
  return !n.empty() && n[0] == '.';
}

std::string canonical_or_empty(const fs::path& p) {
  std::error_code ec;
  const fs::path c = fs::weakly_canonical(p, ec);
  return ec ? std::string() : c.string();
}

struct Candidate {
  std::string input;
  fs::path rel;  // path relative to the output folder, with the input's extension
};

}  // namespace

std::vector<Job> plan_jobs(const std::vector<std::string>& inputs, const std::string& out_dir,
                           std::vector<std::string>* missing) {
  std::vector<Candidate> cands;
  std::set<std::string> seen;
  const std::string out_canon = canonical_or_empty(out_dir);
  for (const std::string& in : inputs) {
    std::error_code ec;
    const fs::file_status st = fs::status(in, ec);
    if (ec || !fs::exists(st)) {
      missing->push_back(in);
      continue;
    }
    if (fs::is_directory(st)) {
      std::vector<fs::path> files;
      fs::recursive_directory_iterator it(in, fs::directory_options::skip_permission_denied, ec), end;
      for (; !ec && it != end; it.increment(ec)) {
        const fs::path& p = it->path();
        if (is_hidden(p)) {
          if (it->is_directory(ec)) it.disable_recursion_pending();
          continue;
        }
        if (it->is_directory(ec)) {
          if (!out_canon.empty() && canonical_or_empty(p) == out_canon) it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file(ec) && has_image_extension(p)) files.push_back(p);
      }
      std::sort(files.begin(), files.end());
      for (const fs::path& f : files) {
        const std::string c = canonical_or_empty(f);
        if (!seen.insert(c).second) continue;
        cands.push_back({f.string(), f.lexically_relative(in)});
      }
    } else {
      const std::string c = canonical_or_empty(in);
      if (!seen.insert(c).second) continue;
      cands.push_back({in, fs::path(in).filename()});
    }
  }
  // Output stems; colliding ones keep their extension, then numbered.
  std::map<std::string, int> stem_count;
  auto stem_of = [](const fs::path& rel) { return (rel.parent_path() / rel.stem()).string(); };
  for (const auto& c : cands) ++stem_count[stem_of(c.rel)];
  std::vector<Job> jobs;
  std::set<std::string> used;
  for (const auto& c : cands) {
    std::string base = stem_count[stem_of(c.rel)] > 1 ? c.rel.string() : stem_of(c.rel);
    std::string unique = base;
    for (int k = 2; used.count(unique); ++k) unique = base + "-" + std::to_string(k);
    used.insert(unique);
    jobs.push_back({c.input, (fs::path(out_dir) / unique).string()});
  }
  return jobs;
}

std::string default_weights_path() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "attnmap" / "default.json";
    if (fs::exists(installed, ec)) return installed.string();
  }
  for (const char* p : {ATTNMAP_SOURCE_WEIGHTS, ATTNMAP_INSTALLED_WEIGHTS})
    if (fs::exists(p, ec)) return p;
  throw Error(std::string("no weights given and the bundled default is missing (looked for ") + ATTNMAP_SOURCE_WEIGHTS +
              "); pass --weights");
}

namespace {

std::string with_path(const std::string& input, const std::string& msg) {
  return msg.compare(0, input.size(), input) == 0 ? msg : input + ": " + msg;
}

}  // namespace

int run_render(const RenderOptions& opt) {
  const std::string weights_path = opt.weights.empty() ? default_weights_path() : opt.weights;
  const ViTWeights model = load_model(weights_path, opt.overrides);
  if (!opt.quiet)
    for (const auto& n : model.notices) std::cerr << "attnmap: note: " << weights_path << ": " << n << "\n";

  const RenderContext ctx = make_render_context(model, opt);

  std::vector<std::string> missing;
  const std::vector<Job> jobs = plan_jobs(opt.inputs, opt.out_dir, &missing);
  int failed = 0, done = 0;
  for (const auto& m : missing) {
    std::cerr << "attnmap: error: " << m << ": no such file or folder\n";
    ++failed;
  }
  if (jobs.empty() && missing.empty()) {
    std::cerr << "attnmap: error: no images found in the inputs\n";
    return 1;
  }
  std::set<std::string> input_canon;
  for (const auto& j : jobs) input_canon.insert(canonical_or_empty(j.input));

  const auto t0 = std::chrono::steady_clock::now();
  for (const Job& job : jobs) {
    try {
      const std::string png = job.out_base + ".png", npy = job.out_base + ".npy";
      if (input_canon.count(canonical_or_empty(png)) || (opt.save_raw && input_canon.count(canonical_or_empty(npy))))
        throw Error("output " + png + " would overwrite an input file; choose another --out");
      const RenderResult res = render_image(ctx, job);
      for (const auto& n : res.notes) std::cerr << "attnmap: note: " << job.input << ": " << n << "\n";
      ++done;
      if (!opt.quiet) std::cout << job.input << " -> " << res.outputs.front() << "\n";
      if (!opt.quiet && !res.top5.empty()) std::cout << "  top-5: " << format_top_k(res.top5) << "\n";
    } catch (const std::exception& e) {
      ++failed;
      std::cerr << "attnmap: error: " << with_path(job.input, e.what()) << "\n";
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!opt.quiet) {
    char line[160];
    std::snprintf(line, sizeof line, "attnmap: %d done, %d failed, %.2f s\n", done, failed, secs);
    std::cerr << line;
  }
  return failed ? 1 : 0;
}

}  // namespace attnmap
