// weights_pth.hpp - PyTorch checkpoints written by torch.save (PyTorch >= 1.6, the zip format): a zip archive
// ARCHIVE/data.pkl (the pickled object) + ARCHIVE/data/KEY (each storage's raw little-endian bytes, stored
// uncompressed) + ARCHIVE/version [+ ARCHIVE/byteorder]. The archive is read with libzip, data.pkl with
// attnmap's restricted unpickler (pickle.hpp: nothing is ever executed), the storages in place from the
// memory-mapped file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "checkpoint/weights_json.hpp"

namespace attnmap {

/// Limits of the torch.save reader against decompression bombs, checked on the sizes the archive and the
/// pickle declare before anything is inflated or allocated (torch.save stores every entry uncompressed; a
/// deflated entry comes from a re-zipped file): data.pkl inflates to at most kPthMaxPickle bytes; the
/// deflated storages the state dict's float tensors use inflate to at most kPthInflateFloor bytes in all,
/// or kPthMaxInflateRatio times their compressed bytes when that is more (trained weights deflate by ~1.1x;
/// a bomb by ~1000x); each entry is inflated only to its declared size, which must be the storage's
/// numel x element size from the pickle; storages the state dict does not use (optimizer state, integer
/// buffers) are never inflated.
constexpr uint64_t kPthMaxPickle = uint64_t{64} << 20;
constexpr uint64_t kPthInflateFloor = uint64_t{64} << 20;
constexpr uint64_t kPthMaxInflateRatio = 16;

/// What a checkpoint holds, for `attnmap inspect`.
struct PthInfo {
  std::string holds;  ///< the pickled object: "OrderedDict of 38 tensors", "dict of 3 entries: model (...), ..."
  std::string used;   ///< where the state dict was found: "the top level" or "'model'" ("'a/b'" when nested)
};

/// What the first bytes of a weights file say: a zip archive ("PK\x03\x04": torch.save >= 1.6, also
/// TorchScript), a bare pickle (0x80 then a protocol 2..5: torch.save's legacy format), or neither.
enum class PthSniff { NotPth, Zip, LegacyPickle };

/// Classifies `head` (its first `n` bytes; n >= 2 needed for a verdict other than NotPth).
PthSniff sniff_pth(const uint8_t* head, size_t n);

/// Refuses a legacy (pre-1.6, or _use_new_zipfile_serialization=False) PyTorch checkpoint with one line
/// saying how to re-save it. Always throws attnmap::Error.
[[noreturn]] void refuse_legacy_pth(const std::string& path);

/// Parses a torch.save archive already in memory (`size` bytes at `data`; `path` is for messages). The state
/// dict is the top-level dict when it holds tensors; otherwise the entry named by `key` ("" = automatic:
/// the first of model, state_dict, model_state, model_state_dict, teacher, student, module, net, network
/// that holds one, else the only entry that does; "a/b" names a nested entry). Tensors F32 / F16 / BF16 /
/// F64 become float32 (non-finite values refused by name, as in safetensors); integer and bool tensors
/// (position ids, num_batches_tracked) are skipped with a note, named with their dtype (I64, BOOL, ...) in
/// RawWeights::skipped. Every storage is checked: its archive entry exists and holds numel x element size
/// bytes; every tensor's size, stride and offset stay inside its storage (overflow-checked); a
/// non-contiguous tensor is copied out by its strides; one with more elements than its storage (expanded,
/// overlapping strides) is refused. `info` (if not null) gets what the file holds and the entry used.
/// Throws attnmap::Error, one line naming `path`: not a zip, a TorchScript archive (code/, constants.pkl),
/// no data.pkl, a big-endian archive, an entry over the limits above (with the sizes and the limit), a refused pickle (see unpickle), a missing storage entry, a wrong
/// storage size, no state dict found or an unknown --key (listing the entries).
RawWeights parse_weights_pth(const uint8_t* data, size_t size, const std::string& path, const std::string& key,
                             PthInfo* info = nullptr);

/// Memory-maps `path` (read-only) and parses it with parse_weights_pth. Throws attnmap::Error.
RawWeights load_weights_pth(const std::string& path, const std::string& key, PthInfo* info = nullptr);

}  // namespace attnmap
