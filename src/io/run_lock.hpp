// run_lock.hpp - one render run per output folder and per manifest (issue 26).
#pragma once
#include <string>

namespace attnmap {

/// The run's claim on its output folder (and its manifest), held until the object is destroyed or the
/// process ends in any way (the kernel drops the locks with the process: kill -9 leaves nothing stale, and
/// no file is added to the folder).
///
/// Mechanism: flock(2) on the output folder itself, exclusive for a run without shards and shared for a
/// shard, so the shards of a split run side by side (docs/batch.md's Slurm recipe) while a run without
/// shards and any shard exclude each other; and an exclusive flock on the manifest file (created empty when
/// missing), so one manifest has one writer. Two runs of the same shard are told apart through their
/// manifest only. A file system without locks (some network mounts) is used without one.
class RunLock {
 public:
  RunLock() = default;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock();

  /// Claims `out_dir` (existing) as a shard (`sharded`) or whole, and `manifest` (a path, "" for none).
  /// Throws attnmap::Error naming the folder or manifest and, where /proc/locks says it, the other run's
  /// process id.
  void claim(const std::string& out_dir, bool sharded, const std::string& manifest);

 private:
  int dir_fd_ = -1, manifest_fd_ = -1;
};

}  // namespace attnmap
