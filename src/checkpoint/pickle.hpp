// pickle.hpp - a restricted unpickler for the data.pkl of a torch.save archive (a state dict and the plain
// data around it). It interprets the pickle opcodes a state dict needs and never calls anything: every
// global is looked up in a whitelist (collections.OrderedDict, torch._utils._rebuild_tensor_v2 /
// _rebuild_parameter / _rebuild_parameter_with_state and the torch.*Storage types), the same idea as
// torch.load(weights_only=True); argparse.Namespace (a training checkpoint's 'args') is built as a plain
// dict of its attributes, never by its class; any other global is refused by name. Python objects become values in an
// arena (indices, no pointers), so cycles and deep nesting cannot overflow a destructor's stack.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace attnmap {

/// One unpickled value. Containers hold indices into PickleData::values.
struct PyValue {
  enum class Kind : uint8_t { None, Bool, Int, Float, Str, Bytes, Tuple, List, Dict, Global, Storage, Tensor };
  Kind kind = Kind::None;
  bool ordered = false;          ///< Dict: built by collections.OrderedDict
  int64_t i = 0;                 ///< Bool, Int; Storage: its numel (elements, from the persistent id)
  double f = 0;                  ///< Float
  std::string s;                 ///< Str, Bytes; Global "module.name"; Storage: its archive key
  std::string dtype;             ///< Storage: "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"
  std::vector<uint32_t> items;   ///< Tuple, List: elements; Dict: key, value, key, value, ... (insertion order)
  uint32_t storage = 0;          ///< Tensor: index of its Storage value
  int64_t offset = 0;            ///< Tensor: storage offset in elements
  std::vector<int64_t> sizes, strides;  ///< Tensor: shape and strides in elements
};

/// The whole unpickled stream: values[root] is what the pickle returned.
struct PickleData {
  std::vector<PyValue> values;
  uint32_t root = 0;
};

/// The index of the last storage element a Tensor value reads, offset + sum((size_i - 1) * stride_i), into
/// `last`; false when that overflows 64 bits. `*empty` is set when a size is 0 (nothing is read).
bool tensor_last_element(const PyValue& t, uint64_t* last, bool* empty);

/// Bytes of one element of a storage dtype named as in PyValue::dtype (0 for an unknown name).
size_t storage_dtype_bytes(const std::string& dtype);

/// Interprets the pickle `data` (`size` bytes, protocol 2..5 as torch.save writes it: protocol 2).
/// Accepted opcodes: PROTO, FRAME, STOP, MARK, POP, POP_MARK, DUP, NONE, NEWTRUE/NEWFALSE, BININT/1/2,
/// LONG1, BINFLOAT, BINUNICODE / SHORT_BINUNICODE / BINUNICODE8, BINBYTES / SHORT_BINBYTES / BINBYTES8,
/// BINSTRING / SHORT_BINSTRING, EMPTY_TUPLE, TUPLE/1/2/3, EMPTY_LIST, LIST, APPEND(S), EMPTY_DICT, DICT,
/// SETITEM(S), BINPUT / LONG_BINPUT / MEMOIZE, BINGET / LONG_BINGET, GLOBAL / STACK_GLOBAL (whitelisted
/// names only), REDUCE / NEWOBJ (on whitelisted callables, with the arguments checked), BUILD (only the
/// inert attribute dict torch puts on a state dict's OrderedDict), BINPERSID (torch's storage ids
/// ('storage', torch.XStorage, key, location, numel)), STOP. A tensor's size, stride and offset are checked
/// against its storage's numel (overflow-checked) when it is built. Limits: 100 000 nested MARKs, 500 000
/// values and memo entries in all, 1 000 000
/// values on the stack, memo indices are looked up, never used to size an allocation.
/// Throws attnmap::Error starting with `path` for anything else: an unknown or text-protocol opcode, a
/// refused global ("refused: the pickle in PATH calls os.system, which is not a tensor or a container ..."),
/// a stack underflow, an undefined memo index, a truncated stream, data after STOP.
PickleData unpickle(const uint8_t* data, size_t size, const std::string& path);

/// A short description of `v` for messages and `inspect`: "int 3", "OrderedDict of 12 tensors", "dict of 2
/// entries", "list of 4", "tensor (3, 4) F32", ...
std::string describe_value(const PickleData& p, const PyValue& v);

}  // namespace attnmap
