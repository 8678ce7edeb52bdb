// paths.hpp - the files a run reads (which no output may replace: model_reads) and the bundled default
// weights. The checks of output names themselves are io/output_files.
#pragma once
#include <string>
#include <vector>

#include "io/output_files.hpp"

namespace attnmap {

/// The files load_model reads for `weights_path` (model_files: the weights and their side configs) and the
/// running attnmap program itself (/proc/self/exe, and the path main was started as: see
/// set_program_path), as ReadFile entries for check_output_file.
std::vector<ReadFile> model_reads(const std::string& weights_path);

/// Records main's argv[0]. When it names a file (has a '/'), model_reads protects it too: a program started
/// through the dynamic loader (`ld.so ./attnmap`) has ld.so as its /proc/self/exe.
void set_program_path(const std::string& argv0);

/// The bundled default weights: next to the installed binary (../share/attnmap/default.json) or the
/// source tree's weights/default.json. Throws attnmap::Error when neither exists.
std::string default_weights_path();

/// What -w names on this machine before any Hub name is resolved: the bundled weights when `weights_arg` is
/// empty, the path when it exists as a file or folder, else "" (a Hub name, or a path the loader will say is
/// missing). For the output checks made before the model loads.
std::string local_weights_path(const std::string& weights_arg);

}  // namespace attnmap
