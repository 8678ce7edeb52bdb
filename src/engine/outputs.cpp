// outputs.cpp - the render's files of one image written from their bytes in memory (see outputs.hpp;
// image_outputs, which draws them, is in views_render.cpp beside the views' drawing).
#include "engine/outputs.hpp"

#include <filesystem>

#include "engine/explore.hpp"
#include "engine/provenance.hpp"

namespace attnmap {

const char* output_kind_word(OutputKind kind) {
  switch (kind) {
    case OutputKind::MapPng: return "map";
    case OutputKind::MapNpy: return "npy";
    case OutputKind::Sidecar: return "sidecar";
    case OutputKind::Figure: return "figure";
    case OutputKind::Explore: return "explore";
  }
  return "";
}

ImageOutputs render_photo_outputs(const RenderContext& run_ctx, nlohmann::ordered_json settings, const Job& job,
                                  const Image& photo, const std::string& input_sha256) {
  RenderContext ctx = run_ctx;
  const ComputedViews cv = compute_photo_views(ctx, photo, input_sha256);
  if (ctx.opt->scale && ctx.opt->scale->kind == ScaleKind::Run) {  // the run of this one image
    nlohmann::ordered_json bounds = nlohmann::ordered_json::object();
    for (const auto& [units, r] : run_scales_over(ctx, {&cv})) {
      ctx.run_scales[units] = r.scale;
      bounds[units] = {r.scale.vmin, r.scale.vmax};
    }
    settings["scale_bounds"] = bounds;
  }
  ctx.provenance = provenance_text(settings);
  return image_outputs(ctx, job, cv, &photo);
}

RenderResult draw_job_views(const RenderContext& ctx, const Job& job, const ComputedViews& cv) {
  ImageOutputs out = image_outputs(ctx, job, cv);
  check_replaceable(out.plan, true);  // the per-class names, known now (the batch checked the others)
  std::filesystem::create_directories(std::filesystem::path(job.out_base + ".png").parent_path());
  // The figures first, the overlays last (image_outputs' order): a run interrupted in between leaves no NAME.png
  // that --skip-existing would take for a finished image.
  size_t i = 0;
  for (; i < out.files.size() && out.files[i].file.kind == OutputKind::Figure; ++i) write_output_file(out.files[i]);
  if (ctx.opt->writes(OutputKind::Explore)) {  // its own forward pass with every attention matrix (explore.hpp)
    RenderContext image_ctx = ctx;
    image_ctx.provenance = out.record;
    const std::string index = write_explorer(image_ctx, job.input, job.out_base + ".explore", out.record,
                                             ctx.opt->writes(OutputKind::MapNpy)).index;
    out.result.outputs.insert(out.result.outputs.begin() + static_cast<long>(out.explorer_at), index);
  }
  for (; i < out.files.size(); ++i) write_output_file(out.files[i]);
  return std::move(out.result);
}

}  // namespace attnmap
