// figures_binding.cpp - overlay(), panel(), figure() and evaluate() on the engine's results in memory (see
// figures_binding.hpp).
#include "figures_binding.hpp"

#include <pybind11/stl.h>

#include <filesystem>
#include <memory>
#include <mutex>

#include "app/cli/flags.hpp"
#include "app/commands/eval_cmd.hpp"
#include "engine/provenance.hpp"
#include "core/error.hpp"

namespace attnmap_py {

using namespace attnmap;

namespace {

py::bytes bytes_of(const std::vector<uint8_t>& b) { return py::bytes(reinterpret_cast<const char*>(b.data()), b.size()); }

// Render's context for one image in memory: the model prepared for `opt` (with the backward pass's matrices
// when a view is class-specific), its views resolved; `settings` the run's record.
std::unique_ptr<RenderContext> context_for(const RenderOptions& opt, const ModelSource& model,
                                           const std::string& weights_name, std::shared_ptr<const ViTWeights>* w,
                                           nlohmann::ordered_json* settings) {
  *w = model(opt, false);
  auto ctx = std::make_unique<RenderContext>(make_render_context(**w, opt));
  if (std::any_of(ctx->views.begin(), ctx->views.end(), [](const ResolvedView& v) { return v.class_specific; })) {
    *w = model(opt, true);
    ctx = std::make_unique<RenderContext>(make_render_context(**w, opt));
  }
  *settings = make_provenance(*ctx, weights_name);
  ctx->provenance = provenance_text(*settings);
  return ctx;
}

}  // namespace

py::list image_output_list(const RenderOptions& opt, const ModelSource& model, const std::string& weights_name,
                           const Image& photo, const std::string& sha256, const std::string& input,
                           const std::string& out_base, std::shared_mutex& engine_mu) {
  ImageOutputs out;
  std::vector<std::string> view_names;
  {
    py::gil_scoped_release nogil;
    std::shared_lock<std::shared_mutex> shared(engine_mu);
    std::shared_ptr<const ViTWeights> w;
    nlohmann::ordered_json settings;
    const std::unique_ptr<RenderContext> ctx = context_for(opt, model, weights_name, &w, &settings);
    try {
      out = render_photo_outputs(*ctx, settings, Job{input, out_base}, photo, sha256);
    } catch (const Error& e) {  // this image's failure (exit status 1), as the command line's
      const std::string msg = e.what();
      throw InputFailure(msg.compare(0, input.size(), input) == 0 ? msg : input + ": " + msg);
    }
    for (const ResolvedView& v : ctx->views) view_names.push_back(v.name);
  }
  py::list files;
  for (const OutputFile& f : out.files) {
    py::dict d;
    d["kind"] = output_kind_word(f.file.kind);
    const bool map = f.file.kind != OutputKind::Figure;
    d["view"] = map && f.file.view < view_names.size() ? view_names[f.file.view] : std::string();
    d["class"] = map && f.file.class_index >= 0 ? py::object(py::int_(f.file.class_index)) : py::object(py::none());
    d["format"] = f.format;
    d["name"] = std::filesystem::path(f.file.path).filename().string();
    d["data"] = bytes_of(f.bytes);
    d["record"] = f.record;
    files.append(d);
  }
  return files;
}

py::dict figure_output(FigurePlan p, const std::string& format, std::vector<FigurePhoto> photos,
                       const ModelSource& model, const std::string& weights_name, std::shared_mutex& engine_mu) {
  FigureResult fig;
  {
    p.ro.quiet = true;  // the lines are returned, not printed
    py::gil_scoped_release nogil;
    std::shared_lock<std::shared_mutex> shared(engine_mu);
    fig = figure_in_memory(p, format, std::move(photos), model, weights_name);
  }
  py::dict d;
  d["data"] = bytes_of(fig.bytes);
  d["format"] = fig.format;
  d["record"] = fig.record;
  d["lines"] = fig.lines;
  std::vector<std::string> notes;  // as Result.notes: the texts, settings spelled as keywords
  for (const std::string& n : fig.notes) notes.push_back(spell_as_keywords(n));
  d["notes"] = notes;
  return d;
}

py::dict eval_output(const GivenSettings& given, const ModelSource& model, std::shared_mutex& engine_mu) {
  const EvalOptions opt = make_request("eval", given).eo;
  std::vector<std::string> errors;
  std::mutex mu;
  BatchHooks hooks;
  hooks.model = model;
  hooks.on_line = [&errors, &mu](LineStream stream, const std::string& text) {  // standard output: EvalResult::text
    static const std::string kError = "attnmap: error: ";
    std::lock_guard<std::mutex> lock(mu);
    if (stream == LineStream::Err && text.compare(0, kError.size(), kError) == 0)
      errors.push_back(spell_as_flags(text.substr(kError.size())));  // as the command line says them
  };
  EvalResult res;
  {
    py::gil_scoped_release nogil;
    std::unique_lock<std::shared_mutex> lock(engine_mu);  // eval sizes the thread pool for its own products
    res = eval_report(opt, hooks);
  }
  py::dict d;
  d["report"] = res.report.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  d["text"] = res.text;
  d["status"] = res.status;
  d["errors"] = errors;
  return d;
}

}  // namespace attnmap_py
