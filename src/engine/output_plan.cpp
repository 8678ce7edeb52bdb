// output_plan.cpp - the files one image writes, planned once, and the writers of the map files (see
// output_plan.hpp).
#include "engine/output_plan.hpp"

#include <unistd.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "engine/explore.hpp"
#include "engine/provenance.hpp"
#include "engine/text/zero_shot.hpp"
#include "core/error.hpp"
#include "core/setting_ref.hpp"
#include "io/image_io.hpp"
#include "io/npy.hpp"

namespace attnmap {

namespace {

bool per_class_files(const RenderContext& ctx) { return ctx.classes.kind == ClassSpec::Kind::TopK && ctx.classes.k > 1; }

// NAME for one view, NAME.<tag> for each of several.
std::string view_base(const RenderContext& ctx, const Job& job, const ResolvedView& v) {
  return ctx.user_views == 1 ? job.out_base : job.out_base + "." + v.tag;
}

// One map's files: its PNG, and with --save-raw its .npy and sidecar (written before the PNG).
void plan_map(const RenderContext& ctx, const std::string& base, size_t view, int cls, OutputPlan* plan) {
  if (ctx.opt->writes(OutputKind::MapNpy)) {
    plan->files.push_back({base + ".npy", OutputKind::MapNpy, view, cls});
    plan->files.push_back({npy_sidecar_path(base + ".npy"), OutputKind::Sidecar, view, cls});
  }
  plan->files.push_back({base + ".png", OutputKind::MapPng, view, cls});
}

}  // namespace

std::vector<std::string> OutputPlan::paths(OutputKind kind) const {
  std::vector<std::string> out;
  for (const PlannedFile& f : files)
    if (f.kind == kind) out.push_back(f.path);
  return out;
}

OutputPlan plan_outputs(const RenderContext& ctx, const Job& job, const std::vector<int>* classes) {
  const RenderOptions& opt = *ctx.opt;
  OutputPlan plan;
  for (const FigureFormat ff : opt.figure_formats) {  // the figures first: the map PNGs are the last written
    const std::string ext = figure_extension(ff);
    if (opt.panel) plan.files.push_back({job.out_base + ".panel" + ext, OutputKind::Figure, 0, -1});
    if (opt.strip_layers) plan.files.push_back({job.out_base + ".layers" + ext, OutputKind::Figure, 0, -1});
    if (opt.heads_grid) plan.files.push_back({job.out_base + ".heads" + ext, OutputKind::Figure, 0, -1});
  }
  if (opt.writes(OutputKind::Explore))  // the explorer (engine/explore.hpp): its index.html, written last of its files
    plan.files.push_back({job.out_base + ".explore/index.html", OutputKind::Explore, 0, -1});
  for (size_t i = 0; i < ctx.user_views; ++i) {
    const ResolvedView& v = ctx.views[i];
    const std::string base = view_base(ctx, job, v);
    if (!v.class_specific || !per_class_files(ctx)) {
      plan_map(ctx, base, i, -1, &plan);
    } else if (!classes) {
      plan.names_unknown = true;  // named once the classes are known
    } else {
      for (const int c : *classes) plan_map(ctx, base + ".class-" + class_file_name(*ctx.model, c), i, c, &plan);
    }
  }
  return plan;
}

std::optional<std::vector<int>> earlier_top_classes(const RenderContext& ctx, const Job& job) {
  const int k = ctx.classes.k, C = ctx.model->num_classes();
  if (!per_class_files(ctx) || k > 5) return std::nullopt;
  const std::vector<std::string>& labels = ctx.model->hp.labels;
  auto label = [&](int c) { return labels.size() == static_cast<size_t>(C) ? labels[static_cast<size_t>(c)] : "class " + std::to_string(c); };
  for (size_t i = 0; i < ctx.user_views; ++i) {
    if (!ctx.views[i].class_specific) continue;
    const std::string base = view_base(ctx, job, ctx.views[i]) + ".class-";
    for (int c = 0; c < C; ++c) {
      std::error_code ec;
      const std::string png = base + class_file_name(*ctx.model, c) + ".png";
      if (!std::filesystem::is_regular_file(png, ec)) continue;
      const std::optional<ImageStats> st = read_png_stats(png);
      if (!st || st->top5.size() < static_cast<size_t>(k)) return std::nullopt;
      std::vector<int> out;
      for (int j = 0; j < k; ++j)
        for (int d = 0; d < C; ++d)
          if (label(d) == st->top5[static_cast<size_t>(j)].first) {
            out.push_back(d);
            break;
          }
      if (out.size() != static_cast<size_t>(k)) return std::nullopt;
      return out;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

FoundOutput find_output(const PlannedFile& f) {
  FoundOutput o;
  const bool png = std::filesystem::path(f.path).extension() == ".png";
  switch (f.kind) {
    case OutputKind::Sidecar:
      o.record = read_sidecar(f.path);
      o.ours = o.complete = o.record.has_value();
      break;
    case OutputKind::MapNpy:
      o.ours = looks_written_by_attnmap_npy(f.path);
      if (o.ours) o.record = read_sidecar(npy_sidecar_path(f.path));
      o.complete = o.record.has_value();  // a .npy without its sidecar: an interrupted write
      break;
    case OutputKind::MapPng:
    case OutputKind::Figure:
      o.record = png ? read_png_provenance(f.path) : read_figure_record(f.path);
      o.ours = o.record.has_value() || (png && written_by_attnmap(f.path));
      o.complete = o.ours;
      break;
    case OutputKind::Explore:
      o.record = read_explorer_record(f.path);
      o.ours = o.complete = o.record.has_value();
      break;
  }
  return o;
}

void check_replaceable(const OutputPlan& plan, bool per_class_only) {
  namespace fs = std::filesystem;
  for (const PlannedFile& f : plan.files) {
    if (per_class_only && f.class_index < 0) continue;
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(f.path, ec);
    if (!fs::exists(st)) continue;
    if (!fs::is_regular_file(st))
      throw Error("output " + f.path + " exists and is not a regular file (a link, folder, FIFO or device); it is "
                  "left alone: choose another " + setting_ref("out") + " or move it away");
    if (!find_output(f).ours)
      throw Error("output " + f.path + " already exists and was not written by attnmap; it is left alone: "
                  "choose another " + setting_ref("out") + " or move it away");
  }
}

void remove_written_since(const OutputPlan& plan, std::filesystem::file_time_type since) {
  namespace fs = std::filesystem;
  for (const PlannedFile& f : plan.files) {
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(f.path, ec)) || fs::last_write_time(f.path, ec) < since || ec) continue;
    if (f.kind == OutputKind::Sidecar || find_output(f).ours) fs::remove(f.path, ec);
  }
}

std::vector<OutputFile> map_file_outputs(const RenderContext& ctx, const OutputPlan& plan, size_t view, int class_index,
                                         const MapOutputs& data) {
  std::vector<OutputFile> out;
  for (const PlannedFile& f : plan.files) {
    // A class-specific view's one file (one class asked) is planned without its class.
    if (f.kind == OutputKind::Figure || f.kind == OutputKind::Explore || f.view != view || (f.class_index >= 0 && f.class_index != class_index)) continue;
    switch (f.kind) {
      case OutputKind::MapNpy:
        out.push_back({f, "npy", npy_encode(*data.raw, data.raw_shape), ctx.provenance});
        break;
      case OutputKind::Sidecar: {  // the .npy's record, when the run records one
        if (ctx.provenance.empty()) continue;
        std::string line = ctx.provenance + "\n";
        // A class-specific map's class (or text), as its PNG's statistics name it: a result, not a setting
        // (same_settings leaves it out), so a --class topK file says which class it is.
        const nlohmann::json st = nlohmann::json::parse(data.stats, nullptr, false);
        if (st.is_object() && st.contains("explained_class")) {
          nlohmann::ordered_json rec = nlohmann::ordered_json::parse(ctx.provenance, nullptr, false);
          if (rec.is_object()) {
            rec["explained_class"] = nlohmann::ordered_json::parse(st["explained_class"].dump());
            line = provenance_text(rec) + "\n";
          }
        }
        out.push_back({f, "json", std::vector<uint8_t>(line.begin(), line.end()), ctx.provenance});
        break;
      }
      case OutputKind::MapPng: {
        PngOptions po;
        po.dpi = ctx.opt->dpi.value_or(0.0);
        if (!ctx.provenance.empty()) po.text = {{kProvenanceKeyword, ctx.provenance}, {kStatsKeyword, data.stats}};
        out.push_back({f, "png", encode_png(*data.overlay, po), ctx.provenance});
        break;
      }
      case OutputKind::Figure:
      case OutputKind::Explore:  // drawn by the render (image_outputs, draw_job_views)
        continue;
    }
  }
  return out;
}

void write_output_file(const OutputFile& f) {
  if (f.file.kind == OutputKind::MapNpy && !f.record.empty()) {  // an interrupted write leaves no record at all
    const std::string side = npy_sidecar_path(f.file.path);
    ::unlink(side.c_str());
  }
  write_file_atomic(f.file.path, f.bytes);
}

}  // namespace attnmap
