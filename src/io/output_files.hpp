// output_files.hpp - output files a user names, checked before anything is read or written: names that
// cannot name a file, links to nothing, folders, devices and the files the run reads (which no output may
// replace); their missing folders made and removed again; names made printable.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace attnmap {

/// `p` as the kernel will resolve it once its missing folders are made: absolute, every existing link
/// followed, `..` the physical parent; for telling whether two names are the same file. "" when it cannot
/// be resolved (a link loop or dangling link on the way, a file used as a folder, a name too long).
std::string canonical_or_empty(const std::filesystem::path& p);

/// A file the run reads, which an output must not replace: its path and what it is ("an input").
struct ReadFile {
  std::string path;
  std::string what;
};

/// Refuses an output file name that cannot name a file: ending in a folder ("/", ".", ".."), or with a
/// component over 255 bytes. `label` (what the caller calls the file) starts the message. Throws attnmap::Error.
void check_output_name(const std::string& label, const std::string& path);

/// Checks an output file the user named (eval --json, render --manifest) before anything is read or
/// written, and returns where to write it: `path` resolved by canonical_or_empty (a link is written
/// through to its file). Throws attnmap::Error, naming `label` and `path`, for a bad name
/// (check_output_name), a path that cannot be resolved, a link to nothing, a folder, device, FIFO or socket,
/// and a file of `reads` (the same path, or the same inode through a hard link).
std::string check_output_file(const std::string& label, const std::string& path, const std::vector<ReadFile>& reads);

/// Makes the missing folders above `target` (a path from check_output_file) one level at a time, then
/// probes that a file can be created there. Returns the folders made, deepest first. Throws
/// attnmap::Error naming `label` and `path` (after removing what it made) when either fails.
std::vector<std::string> make_output_folder(const std::string& label, const std::string& path, const std::string& target);

/// Removes folders listed by make_output_folder when their output was not written (only empty ones).
void remove_made_folders(const std::vector<std::string>& made);

/// `s` with each byte that is not part of well-formed UTF-8 (RFC 3629) as "%XX" (x\xff -> x%FF); well-formed
/// text, '%' included, unchanged: equal to `s` exactly when `s` is UTF-8. Output names use it, so the
/// manifest, the gallery's links and the sheet name the real file (issue 26).
std::string utf8_escaped_name(const std::string& s);

}  // namespace attnmap
