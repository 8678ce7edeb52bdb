// output_plan.hpp - the files one image writes (issue 25: one output plan). plan_outputs lists them once,
// as {path, kind, view, class}; the render writes from the plan (write_map_png, write_map_npy, the figures),
// and the batch's checks (names, replaceability, --skip-existing, the files a manifest must not replace) and
// the manifest's outputs read it. A new per-image output kind is its OutputKind (render.hpp), the flag asking
// for it (options_cli.cpp) and, here in output_plan.cpp, its line in plan_map and its case in write_map_files.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/render.hpp"

namespace attnmap {

/// One planned file.
struct PlannedFile {
  std::string path;
  OutputKind kind = OutputKind::MapPng;
  size_t view = 0;       ///< MapPng / MapNpy / Sidecar: index into RenderContext::views
  int class_index = -1;  ///< a class-specific view's class; -1 otherwise (or not known yet)
};

/// Every file of one image, in writing order (figures, then each map's .npy, sidecar and PNG).
struct OutputPlan {
  std::vector<PlannedFile> files;
  /// Per-class files (--class topK, K >= 2) whose classes are not known before the forward pass: not listed
  /// (plan_outputs without `classes`); --skip-existing then renders the image again.
  bool names_unknown = false;
  /// The paths of one kind, in plan order.
  std::vector<std::string> paths(OutputKind kind) const;
};

/// Plans job's files for the run: the user's views' maps (NAME.png for one view, NAME.<tag>.png for several;
/// a class-specific view's per class NAME[.<tag>].class-<label>.png with --class topK, K >= 2, listed when
/// `classes` - the classes the pass explains, most probable first - is given), their .npy and sidecar with
/// --save-raw, and the figures (panel, layers strip, heads sheet) in every figure format.
OutputPlan plan_outputs(const RenderContext& ctx, const Job& job, const std::vector<int>* classes = nullptr);

/// --skip-existing with --class topK (K >= 2): the K classes an earlier run of this image explained, read from
/// the first per-class PNG found (probing NAME[.<tag>].class-<label>.png over the model's classes) - its
/// recorded top-5, most probable first. nullopt when none is found, K > 5 or a label is not the model's. The
/// caller plans with them and compares every file's record with the run's, so a guess from another run's
/// file only makes the image rendered again.
std::optional<std::vector<int>> earlier_top_classes(const RenderContext& ctx, const Job& job);

/// A planned file already on disk, as --skip-existing and the replace check see it (each kind's mark read by
/// its kind: a PNG's record or signature, a .npy's header, a sidecar's JSON, a figure's record).
struct FoundOutput {
  bool ours = false;      ///< attnmap wrote it (else it is a file of the user's: never replaced)
  bool complete = false;  ///< usable as an output: its record read, or an attnmap PNG without one (redone)
  std::optional<nlohmann::json> record;  ///< the settings it was made with (a .npy's: its sidecar's)
};
/// Reads f.path, which exists, as its kind.
FoundOutput find_output(const PlannedFile& f);

/// A file of the user's that merely has an output's name (photos/cat.png when rendering photos/cat.jpg into
/// photos/) is never replaced, nor is anything but a regular file (a link, FIFO, device or folder); attnmap's
/// own earlier outputs are. Checks every planned file (with `per_class_only`, the per-class files named once
/// the classes are known) before any is written. Throws attnmap::Error naming the file.
void check_replaceable(const OutputPlan& plan, bool per_class_only = false);

/// Removes the planned files of attnmap's (find_output) written at or after `since`: after an image failed
/// part-way (a full disk after its .npy and sidecar), none of its files is left under its final name.
void remove_written_since(const OutputPlan& plan, std::filesystem::file_time_type since);

/// What one map's files are written from.
struct MapOutputs {
  const std::vector<float>* raw = nullptr;  ///< the .npy's data (the map, or with --all-heads every head)
  std::vector<int64_t> raw_shape;           ///< its shape: (grid_h, grid_w) or (H, grid_h, grid_w)
  const Image* overlay = nullptr;           ///< the PNG's image
  std::string stats;                        ///< the PNG's tEXt `attnmap:stats`
};

/// One file of an image as bytes in memory (issue 42): what render writes at `path`, bit for bit.
struct OutputFile {
  PlannedFile file;          ///< its path, kind, view and class (a figure's view 0, class -1)
  std::string format;        ///< "png", "pdf", "svg", "npy" or "json" (a sidecar)
  std::vector<uint8_t> bytes;
  std::string record;        ///< the settings record it carries (JSON text; "" none): a map PNG's tEXt `attnmap`,
                             ///< a figure's (with its colour bars), a .npy's sidecar's
};

/// The planned files of one map (view `view`, class `class_index`) in plan order, each encoded by its kind's
/// encoder (a new per-image kind adds its case here): a map PNG with --dpi and, with a run record, tEXt
/// `attnmap` (the record) and `attnmap:stats` (data.stats); a .npy of data.raw; its sidecar (the record and a
/// newline). Figures are drawn by the render. Throws attnmap::Error from the encoders.
std::vector<OutputFile> map_file_outputs(const RenderContext& ctx, const OutputPlan& plan, size_t view, int class_index,
                                         const MapOutputs& data);

/// Writes `f` atomically (io's write_file_atomic). A .npy with a sidecar after it removes the old sidecar first,
/// so a sidecar never describes a .npy of other settings (write the sidecar after it).
void write_output_file(const OutputFile& f);

}  // namespace attnmap
