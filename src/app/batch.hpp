// batch.hpp - walking inputs, naming outputs, and rendering every image (concurrently) with per-image error
// handling, progress, a JSON-lines manifest, resuming and sharding.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/render.hpp"

namespace attnmap {

/// How a batch run is scheduled and reported (filled by the CLI; no maths here).
struct BatchOptions {
  int jobs = 0;                    ///< images rendered concurrently; 0: the number of usable cores
  std::vector<std::string> ext;    ///< folder walks pick these extensions (case-insensitive, dot optional,
                                   ///< items may be comma lists); empty: default_image_extensions()
  std::string manifest;            ///< JSON-lines file: a header line with the run's settings, then one
                                   ///< object per input; appended to during the run, rewritten with this
                                   ///< run's lines alone at its end; empty: none
  bool skip_existing = false;      ///< images whose outputs all exist already, made with the run's settings
                                   ///< (their provenance records), are skipped (resume)
  int shard_index = 1;             ///< this run renders the inputs whose 0-based sorted index i has
  int shard_count = 1;             ///< i % shard_count == shard_index - 1
  int progress_every = 0;          ///< non-terminal progress: a line per this many images; 0: automatic
  // Figures of the whole run, drawn after its images (app/run_figures.hpp, docs/figures.md).
  std::string contact_sheet;       ///< FILE.png: every input's overlay in a labelled grid; empty: none
  int sheet_columns = 6;           ///< thumbnails per row of the contact sheet
  bool sheet_columns_given = false;  ///< --sheet-columns was given (refused without --contact-sheet)
  std::string gallery;             ///< DIR: DIR/index.html and DIR/thumbs/; empty: none
};

/// The extensions a folder walk picks by default: every format attnmap decodes (stb_image's, and WebP and
/// TIFF), plus .jfif (a JPEG). The format itself is sniffed from the content, not from this extension.
const std::vector<std::string>& default_image_extensions();

/// The summary line for the image files a folder walk passed over (plan_jobs' `passed_over`: lower-case
/// extension with dot -> count), e.g. "skipped 2 files of unsupported types: .heic 1, .svg 1 (not rendered;
/// ...)"; empty when there are none. Files of readable types left out by --ext are not counted.
std::string passed_over_summary(const std::map<std::string, size_t>& passed_over);

/// Normalises an --ext list: items split at commas, leading dots removed, lower-cased. Throws
/// attnmap::Error for an empty item.
std::vector<std::string> parse_extensions(const std::vector<std::string>& items);

/// Parses "K/N" (1 <= K <= N) into shard index K and count N. Throws attnmap::Error otherwise.
void parse_shard(const std::string& s, int* index, int* count);

/// Number of cores this process may run on (sched_getaffinity, so Slurm/cgroup CPU sets are honoured).
int usable_cores();

/// Expands inputs into jobs: a folder is walked recursively in sorted order (hidden entries skipped,
/// symbolic links to folders not followed, so link loops cannot hang it; only files whose extension is
/// in `ext`, lower-case without dot, empty meaning default_image_extensions()), its tree mirrored under
/// out_dir; a file given directly lands at out_dir/NAME whatever its extension. Stems that collide keep
/// their extension (name.jpg.png); any remaining clash gets "-2", "-3"... Inputs that do not exist are
/// returned in `missing`. A folder that cannot be read (the input itself or one below it) is appended to
/// `unreadable` (when given) as (path, "PATH: cannot read folder: REASON"); the rest of the walk goes on.
/// Files in walked folders that are not picked but whose extension names an image format attnmap cannot
/// decode (.heic .heif .avif .svg .jxl .jp2 .exr .ico, camera raw such as .dng .cr2 .nef .arw, .xcf ...) are
/// counted in `passed_over` (when given) by lower-case extension with its dot; other files (.txt, .json,
/// .npy, .csv, no extension) are not. Files given directly are always jobs, whatever their extension.
std::vector<Job> plan_jobs(const std::vector<std::string>& inputs, const std::string& out_dir,
                           std::vector<std::string>* missing, const std::vector<std::string>& ext = {},
                           std::vector<std::pair<std::string, std::string>>* unreadable = nullptr,
                           std::map<std::string, size_t>* passed_over = nullptr);

/// `p` as the kernel will resolve it once its missing folders are made: absolute, every existing link
/// followed, `..` the physical parent; for telling whether two names are the same file. "" when it cannot
/// be resolved (a link loop or dangling link on the way, a file used as a folder, a name too long).
std::string canonical_or_empty(const std::filesystem::path& p);

/// A file the run reads, which an output must not replace: its path and what it is ("an input").
struct ReadFile {
  std::string path;
  std::string what;
};

/// The files load_model reads for `weights_path` (model_files: the weights and their side configs) and the
/// running attnmap program itself (/proc/self/exe, and the path main was started as: see
/// set_program_path), as ReadFile entries for check_output_file.
std::vector<ReadFile> model_reads(const std::string& weights_path);

/// Records main's argv[0]. When it names a file (has a '/'), model_reads protects it too: a program started
/// through the dynamic loader (`ld.so ./attnmap`) has ld.so as its /proc/self/exe.
void set_program_path(const std::string& argv0);

/// Refuses an output file name that cannot name a file: ending in a folder ("/", ".", ".."), or with a
/// component over 255 bytes. `flag` ("--json") starts the message. Throws attnmap::Error.
void check_output_name(const std::string& flag, const std::string& path);

/// Checks an output file the user named (eval --json, render --manifest) before anything is read or
/// written, and returns where to write it: `path` resolved by canonical_or_empty (a link is written
/// through to its file). Throws attnmap::Error, naming `flag` and `path`, for a bad name
/// (check_output_name), a path that cannot be resolved, a link to nothing, a folder, device, FIFO or socket,
/// and a file of `reads` (the same path, or the same inode through a hard link).
std::string check_output_file(const std::string& flag, const std::string& path, const std::vector<ReadFile>& reads);

/// Makes the missing folders above `target` (a path from check_output_file) one level at a time, then
/// probes that a file can be created there. Returns the folders made, deepest first. Throws
/// attnmap::Error naming `flag` and `path` (after removing what it made) when either fails.
std::vector<std::string> make_output_folder(const std::string& flag, const std::string& path, const std::string& target);

/// Removes folders listed by make_output_folder when their output was not written (only empty ones).
void remove_made_folders(const std::vector<std::string>& made);

/// The bundled default weights: next to the installed binary (../share/attnmap/default.json) or the
/// source tree's weights/default.json. Throws attnmap::Error when neither exists.
std::string default_weights_path();

/// The model of a run (render, figure), loaded once: load_model with the command line's overrides, position
/// embeddings resampled to --size (opt.pos_interp, else the layout's default); its notices printed unless
/// quiet. Throws attnmap::Error from the loader (exit 2: unusable weights).
ViTWeights load_run_model(const RenderOptions& opt, const std::string& weights_path);

/// Runs `attnmap render`: weights loaded once (and hashed once for the settings record, make_provenance,
/// that every output carries), the shard's images rendered by `jobs` worker threads (OpenBLAS
/// single-threaded inside each worker when jobs > 1, all cores when jobs == 1), progress on standard error,
/// one manifest line per input in sorted input order after the run's header line (docs/provenance.md:
/// with --skip-existing, skipped images keep the statistics of the earlier manifest, their PNG or .npy). Returns the exit status: 0 all
/// images done or skipped, 1 some failed (each printed with its path and reason; the rest still written).
/// Unreadable folders (input or below one) and missing inputs are per-input failures. Non-regular files
/// (FIFOs, devices) fail alone ("not a regular file"). Throws attnmap::Error (status 2), before anything is
/// written, for unusable weights, bad options, an --out that is an input folder or cannot be created, a
/// --manifest naming an input, the weights or an output of the run, or an unwritable manifest. The forward
/// pass's threads follow blas_threads_to_set (the user's OPENBLAS_NUM_THREADS / OMP_NUM_THREADS cap them).
int run_render(const RenderOptions& opt, const BatchOptions& bopt = {});

}  // namespace attnmap
