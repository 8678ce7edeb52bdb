#include "checkpoint/pickle.hpp"

#include <cstring>
#include <limits>
#include <unordered_map>

#include "core/error.hpp"
#include "core/tensor.hpp"

namespace attnmap {

namespace {

using K = PyValue::Kind;

// torch.XStorage -> the dtype name attnmap uses (the safetensors names) and its element size.
struct StorageType {
  const char* global;
  const char* dtype;
  size_t bytes;
};
const StorageType kStorages[] = {
    {"torch.FloatStorage", "F32", 4}, {"torch.HalfStorage", "F16", 2},  {"torch.BFloat16Storage", "BF16", 2},
    {"torch.DoubleStorage", "F64", 8}, {"torch.LongStorage", "I64", 8},  {"torch.IntStorage", "I32", 4},
    {"torch.ShortStorage", "I16", 2},  {"torch.CharStorage", "I8", 1},   {"torch.ByteStorage", "U8", 1},
    {"torch.BoolStorage", "BOOL", 1},
};

// The callables attnmap interprets itself (never calls): what torch.save writes for a state dict.
const char* const kCallables[] = {"collections.OrderedDict", "torch._utils._rebuild_tensor_v2",
                                  "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state"};

const StorageType* storage_type(const std::string& g) {
  for (const StorageType& s : kStorages)
    if (g == s.global) return &s;
  return nullptr;
}

// Classes whose instances are plain data: built as a dict of their attributes (NEWOBJ, then BUILD with the
// attribute dict), never with the class's own code. A training checkpoint's 'args' (DINO, DeiT, MAE).
const char* const kInertClasses[] = {"argparse.Namespace"};

bool inert_class(const std::string& g) {
  for (const char* c : kInertClasses)
    if (g == c) return true;
  return false;
}

bool whitelisted(const std::string& g) {
  for (const char* c : kCallables)
    if (g == c) return true;
  return storage_type(g) != nullptr || inert_class(g);
}

constexpr size_t kMaxMarks = 100000;
constexpr size_t kMaxStack = 1000000;
// Values and memo entries in all: each costs ~200 bytes for a byte or two of pickle ('N' POP, MEMOIZE), so
// without a bound a 64 MiB data.pkl could take gigabytes. A ViT state dict has a few thousand values,
// with its optimizer state some tens of thousands.
constexpr size_t kMaxValues = 500000;
constexpr size_t kMaxRank = 16;

class Unpickler {
 public:
  Unpickler(const uint8_t* d, size_t n, const std::string& path) : d_(d), n_(n), path_(path) {}

  PickleData run() {
    while (true) {
      if (pos_ >= n_) fail("the pickle ends without STOP (truncated)");
      op_at_ = pos_;
      const uint8_t op = d_[pos_++];
      if (op == '.') break;
      if (!simple_op(op) && !container_op(op) && !memo_op(op) && !call_op(op))
        fail("unsupported pickle opcode 0x" + hex(op) + " at byte " + std::to_string(op_at_) +
             " (attnmap reads torch.save's protocol-2 state dicts)");
    }
    if (!marks_.empty())
      fail("the pickle stops with " + std::to_string(marks_.size()) + " MARK" + (marks_.size() == 1 ? "" : "s") +
           " not closed (a well-formed pickle closes each MARK before STOP)");
    if (stack_.size() != 1)
      fail("the pickle stops with " + std::to_string(stack_.size()) + " value" + (stack_.size() == 1 ? "" : "s") +
           " on its stack, expected exactly one (the object pickled)");
    if (pos_ != n_) fail(std::to_string(n_ - pos_) + " bytes after the pickle's STOP");
    out_.root = stack_.back();
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw Error(path_ + ": data.pkl: " + why); }

  static std::string hex(uint8_t b) {
    const char* x = "0123456789abcdef";
    return std::string{x[b >> 4], x[b & 15]};
  }

  const uint8_t* take(size_t k) {
    if (k > n_ - pos_) fail("the pickle ends inside an opcode at byte " + std::to_string(op_at_) + " (truncated)");
    const uint8_t* p = d_ + pos_;
    pos_ += k;
    return p;
  }
  uint64_t le(size_t k) {
    const uint8_t* p = take(k);
    uint64_t v = 0;
    for (size_t i = k; i-- > 0;) v = (v << 8) | p[i];
    return v;
  }
  std::string text(size_t k) {
    const uint8_t* p = take(k);
    return std::string(reinterpret_cast<const char*>(p), k);
  }
  std::string line() {  // GLOBAL's newline-terminated module and name
    const size_t start = pos_;
    while (pos_ < n_ && d_[pos_] != '\n') ++pos_;
    if (pos_ >= n_) fail("the pickle ends inside a GLOBAL at byte " + std::to_string(op_at_) + " (truncated)");
    return std::string(reinterpret_cast<const char*>(d_ + start), pos_++ - start);
  }

  uint32_t add(PyValue v) {
    if (out_.values.size() >= kMaxValues)
      fail("more than " + std::to_string(kMaxValues) + " values (a state dict, even with its optimizer state, has far fewer): not read further");
    out_.values.push_back(std::move(v));
    return static_cast<uint32_t>(out_.values.size() - 1);
  }
  void push(uint32_t id) {
    if (stack_.size() >= kMaxStack) fail("more than " + std::to_string(kMaxStack) + " values on the pickle stack");
    stack_.push_back(id);
  }
  void push_new(PyValue v) { push(add(std::move(v))); }
  uint32_t pop() {
    if (stack_.size() <= floor()) fail("stack underflow at byte " + std::to_string(op_at_));
    const uint32_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  std::vector<uint32_t> pop_mark() {
    if (marks_.empty()) fail("no MARK before the opcode at byte " + std::to_string(op_at_));
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<uint32_t> items(stack_.begin() + static_cast<long>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  PyValue& val(uint32_t id) { return out_.values[id]; }
  PyValue& top() {
    if (stack_.size() <= floor()) fail("stack underflow at byte " + std::to_string(op_at_));
    return val(stack_.back());
  }

  bool simple_op(uint8_t op);
  bool container_op(uint8_t op);
  bool memo_op(uint8_t op);
  bool call_op(uint8_t op);
  void global(const std::string& module, const std::string& name);
  uint32_t reduce(const std::string& callee, const std::vector<uint32_t>& args);
  uint32_t rebuild_tensor(const std::vector<uint32_t>& args);
  uint32_t persistent_load(uint32_t pid);
  std::vector<int64_t> int_tuple(uint32_t id, const char* what);
  void setitems(PyValue& dict, const std::vector<uint32_t>& kv);

  const uint8_t* d_;
  size_t n_, pos_ = 0, op_at_ = 0;
  const std::string& path_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, uint32_t> memo_;
  PickleData out_;
};

// Scalars, strings, MARK and the stack opcodes.
bool Unpickler::simple_op(uint8_t op) {
  PyValue v;
  switch (op) {
    case 0x80: {  // PROTO
      const uint64_t proto = le(1);
      if (proto < 2 || proto > 5) fail("pickle protocol " + std::to_string(proto) + " (attnmap reads 2 to 5)");
      return true;
    }
    case 0x95: le(8); return true;  // FRAME: a length hint only
    case '(':
      if (marks_.size() >= kMaxMarks) fail("nesting deeper than " + std::to_string(kMaxMarks) + " MARKs");
      marks_.push_back(stack_.size());
      return true;
    case '0': pop(); return true;
    case '1': pop_mark(); return true;
    case '2': push(stack_.size() > floor() ? stack_.back() : pop()); return true;  // DUP (pop() fails: empty)
    case 'N': push_new(v); return true;
    case 0x88: case 0x89: v.kind = K::Bool, v.i = op == 0x88; push_new(v); return true;
    case 'J': v.kind = K::Int, v.i = static_cast<int32_t>(static_cast<uint32_t>(le(4))); push_new(v); return true;
    case 'K': v.kind = K::Int, v.i = static_cast<int64_t>(le(1)); push_new(v); return true;
    case 'M': v.kind = K::Int, v.i = static_cast<int64_t>(le(2)); push_new(v); return true;
    case 0x8a: {  // LONG1: n-byte two's complement little-endian
      const size_t k = static_cast<size_t>(le(1));
      if (k > 8) fail("an integer of " + std::to_string(k) + " bytes at byte " + std::to_string(op_at_) + " (more than 64 bits)");
      uint64_t u = k ? le(k) : 0;
      if (k && k < 8 && (u >> (8 * k - 1)) & 1) u |= ~uint64_t{0} << (8 * k);  // sign-extend
      v.kind = K::Int;
      std::memcpy(&v.i, &u, 8);
      push_new(v);
      return true;
    }
    case 'G': {  // BINFLOAT: big-endian IEEE double
      const uint8_t* p = take(8);
      uint64_t u = 0;
      for (int i = 0; i < 8; ++i) u = (u << 8) | p[i];
      v.kind = K::Float;
      std::memcpy(&v.f, &u, 8);
      push_new(v);
      return true;
    }
    case 'X': case 0x8c: case 0x8d: case 'T': case 'U':  // BINUNICODE(8), SHORT_BINUNICODE, (SHORT_)BINSTRING
    case 'B': case 'C': case 0x8e: {                     // BINBYTES, SHORT_BINBYTES, BINBYTES8
      const size_t w = (op == 0x8c || op == 'U' || op == 'C') ? 1 : (op == 0x8d || op == 0x8e) ? 8 : 4;
      const uint64_t len = le(w);
      if (len > n_ - pos_) fail("a string of " + std::to_string(len) + " bytes at byte " + std::to_string(op_at_) + " runs past the end of the pickle");
      v.kind = (op == 'B' || op == 'C' || op == 0x8e) ? K::Bytes : K::Str;
      v.s = text(static_cast<size_t>(len));
      push_new(v);
      return true;
    }
    default: return false;
  }
}

void Unpickler::setitems(PyValue& dict, const std::vector<uint32_t>& kv) {
  if (kv.size() % 2) fail("SETITEMS with an odd number of values at byte " + std::to_string(op_at_));
  dict.items.insert(dict.items.end(), kv.begin(), kv.end());
}

// Tuples, lists and dicts.
bool Unpickler::container_op(uint8_t op) {
  PyValue v;
  switch (op) {
    case ')': v.kind = K::Tuple; push_new(v); return true;
    case ']': v.kind = K::List; push_new(v); return true;
    case '}': v.kind = K::Dict; push_new(v); return true;
    case 't': case 'l': case 'd': {
      v.kind = op == 't' ? K::Tuple : op == 'l' ? K::List : K::Dict;
      const std::vector<uint32_t> items = pop_mark();
      if (op == 'd') setitems(v, items); else v.items = items;
      push_new(std::move(v));
      return true;
    }
    case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
      v.kind = K::Tuple;
      v.items.resize(static_cast<size_t>(op - 0x84));
      for (size_t i = v.items.size(); i-- > 0;) v.items[i] = pop();
      push_new(std::move(v));
      return true;
    }
    case 'a': case 'e': {  // APPEND, APPENDS
      const std::vector<uint32_t> items = op == 'a' ? std::vector<uint32_t>{pop()} : pop_mark();
      PyValue& list = top();
      if (list.kind != K::List) fail("APPEND to a value that is not a list at byte " + std::to_string(op_at_));
      list.items.insert(list.items.end(), items.begin(), items.end());
      return true;
    }
    case 's': case 'u': {  // SETITEM, SETITEMS
      std::vector<uint32_t> kv;
      if (op == 's') {
        const uint32_t value = pop(), key = pop();
        kv = {key, value};
      } else {
        kv = pop_mark();
      }
      PyValue& dict = top();
      if (dict.kind != K::Dict) fail("SETITEM on a value that is not a dict at byte " + std::to_string(op_at_));
      setitems(dict, kv);
      return true;
    }
    default: return false;
  }
}

// The memo: PUT stores the top of the stack under an index, GET pushes it again (the same object).
bool Unpickler::memo_op(uint8_t op) {
  switch (op) {
    case 'q': case 'r': case 0x94: {  // BINPUT, LONG_BINPUT, MEMOIZE
      const uint64_t idx = op == 'q' ? le(1) : op == 'r' ? le(4) : memo_.size();
      if (stack_.size() <= floor()) fail("memo store with an empty stack at byte " + std::to_string(op_at_));
      if (memo_.size() >= kMaxValues && !memo_.count(idx))
        fail("more than " + std::to_string(kMaxValues) + " memo entries (a state dict, even with its optimizer state, has far fewer): not read further");
      memo_[idx] = stack_.back();
      return true;
    }
    case 'h': case 'j': {  // BINGET, LONG_BINGET
      const uint64_t idx = op == 'h' ? le(1) : le(4);
      auto it = memo_.find(idx);
      if (it == memo_.end()) fail("memo index " + std::to_string(idx) + " used at byte " + std::to_string(op_at_) + " was never stored");
      push(it->second);
      return true;
    }
    default: return false;
  }
}

void Unpickler::global(const std::string& module, const std::string& name) {
  const std::string g = module + "." + name;
  if (!whitelisted(g)) {
    std::string hint;
    if (module.rfind("numpy", 0) == 0)
      hint = "; a training checkpoint? save its state dict alone: torch.save(torch.load(PATH, map_location='cpu')"
             "[KEY], 'weights.pth') with KEY its state dict's entry ('model', 'teacher', ...), or as safetensors";
    throw Error("refused: the pickle in " + path_ + " calls " + printable(g) +
                ", which is not a tensor or a container (attnmap reads state dicts only, like "
                "torch.load(weights_only=True))" + hint);
  }
  PyValue v;
  v.kind = K::Global;
  v.s = g;
  push_new(std::move(v));
}

// GLOBAL, STACK_GLOBAL, REDUCE, NEWOBJ, BUILD, BINPERSID: nothing is ever called; whitelisted callables are
// interpreted here, anything else was refused when it was named.
bool Unpickler::call_op(uint8_t op) {
  switch (op) {
    case 'c': {
      const std::string module = line();
      const std::string name = line();
      global(module, name);
      return true;
    }
    case 0x93: {  // STACK_GLOBAL: module and name strings on the stack
      const uint32_t name = pop(), module = pop();
      if (val(name).kind != K::Str || val(module).kind != K::Str) fail("STACK_GLOBAL without two strings");
      global(val(module).s, val(name).s);
      return true;
    }
    case 'R': case 0x81: {  // REDUCE: callable(*args); NEWOBJ: cls.__new__(cls, *args)
      const uint32_t args = pop(), callee = pop();
      const PyValue& c = val(callee);
      if (c.kind != K::Global)
        fail(std::string(op == 'R' ? "REDUCE" : "NEWOBJ") + " on a " + describe_value(out_, c) + ", not a callable, at byte " + std::to_string(op_at_));
      if (val(args).kind != K::Tuple) fail("REDUCE arguments are not a tuple at byte " + std::to_string(op_at_));
      if (op == 0x81 && inert_class(c.s)) {  // an inert object: its attributes come with BUILD
        if (!val(args).items.empty()) fail("NEWOBJ on " + c.s + " with arguments at byte " + std::to_string(op_at_));
        PyValue v;
        v.kind = K::Dict;
        v.s = c.s;
        push(add(std::move(v)));
        return true;
      }
      if (op == 0x81 && c.s != "collections.OrderedDict") fail("NEWOBJ on " + c.s + ", which attnmap does not build");
      if (inert_class(c.s)) fail("REDUCE on " + c.s + " at byte " + std::to_string(op_at_) + " (attnmap builds it from NEWOBJ only)");
      const std::string callee_name = c.s;
      const std::vector<uint32_t> a = val(args).items;
      push(reduce(callee_name, a));
      return true;
    }
    case 'b': {  // BUILD: obj.__setstate__(state); only an OrderedDict's inert attribute dict (_metadata)
      const uint32_t state = pop();
      PyValue& obj = top();
      if (obj.kind == K::Dict && inert_class(obj.s) && obj.items.empty() && val(state).kind == K::Dict) {
        const std::vector<uint32_t> kv = val(state).items;  // the attribute dict, kept as data
        setitems(obj, kv);
        return true;
      }
      if (obj.kind != K::Dict || !obj.ordered || (val(state).kind != K::Dict && val(state).kind != K::None))
        fail("BUILD on a " + describe_value(out_, obj) + " at byte " + std::to_string(op_at_) +
             " (attnmap sets no attributes; only an OrderedDict's own attribute dict is accepted and ignored)");
      return true;
    }
    case 'Q': {  // BINPERSID
      const uint32_t pid = pop();
      push(persistent_load(pid));
      return true;
    }
    default: return false;
  }
}

uint32_t Unpickler::reduce(const std::string& callee, const std::vector<uint32_t>& args) {
  if (callee == "collections.OrderedDict") {
    if (!args.empty()) fail("collections.OrderedDict called with arguments (attnmap accepts OrderedDict() only)");
    PyValue v;
    v.kind = K::Dict;
    v.ordered = true;
    return add(std::move(v));
  }
  if (callee == "torch._utils._rebuild_tensor_v2") return rebuild_tensor(args);
  if (callee == "torch._utils._rebuild_parameter" || callee == "torch._utils._rebuild_parameter_with_state") {
    const size_t want = callee == "torch._utils._rebuild_parameter" ? 3 : 4;
    if (args.size() != want || val(args[0]).kind != K::Tensor)
      fail(callee + " with " + std::to_string(args.size()) + " arguments, expected " + std::to_string(want) + " starting with a tensor");
    return args[0];  // a Parameter is its data for attnmap
  }
  fail("REDUCE on " + callee + ", which is a storage type, not a function");
}

std::vector<int64_t> Unpickler::int_tuple(uint32_t id, const char* what) {
  const PyValue& t = val(id);
  if (t.kind != K::Tuple) fail(std::string("_rebuild_tensor_v2's ") + what + " is a " + describe_value(out_, t) + ", not a tuple");
  if (t.items.size() > kMaxRank) fail(std::string("_rebuild_tensor_v2's ") + what + " has " + std::to_string(t.items.size()) + " dimensions, more than 16");
  std::vector<int64_t> out;
  for (uint32_t e : t.items) {
    if (val(e).kind != K::Int || val(e).i < 0)
      fail(std::string("_rebuild_tensor_v2's ") + what + " holds " + describe_value(out_, val(e)) + ", not a non-negative integer");
    out.push_back(val(e).i);
  }
  return out;
}

// _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]).
uint32_t Unpickler::rebuild_tensor(const std::vector<uint32_t>& a) {
  if (a.size() != 6 && a.size() != 7) fail("_rebuild_tensor_v2 with " + std::to_string(a.size()) + " arguments, expected 6 or 7");
  if (val(a[0]).kind != K::Storage) fail("_rebuild_tensor_v2 on a " + describe_value(out_, val(a[0])) + ", not a storage");
  if (val(a[1]).kind != K::Int || val(a[1]).i < 0) fail("_rebuild_tensor_v2 with a storage offset that is not a non-negative integer");
  PyValue t;
  t.kind = K::Tensor;
  t.storage = a[0];
  t.offset = val(a[1]).i;
  t.sizes = int_tuple(a[2], "size");
  t.strides = int_tuple(a[3], "stride");
  if (t.sizes.size() != t.strides.size())
    fail("_rebuild_tensor_v2 with " + std::to_string(t.sizes.size()) + " sizes and " + std::to_string(t.strides.size()) + " strides");
  // The last element the tensor reads: offset + sum((size_i - 1) * stride_i), overflow-checked.
  const PyValue& st = val(a[0]);
  uint64_t last = 0;
  bool empty = false;
  const bool over = !tensor_last_element(t, &last, &empty);
  if (!empty && (over || last >= static_cast<uint64_t>(st.i)))
    fail("a tensor of size " + shape_str(t.sizes) + ", stride " + shape_str(t.strides) + " at offset " +
         std::to_string(t.offset) + " runs past its storage '" + printable(st.s) + "' of " + std::to_string(st.i) + " elements");
  return add(std::move(t));
}

// torch.save's persistent id: ('storage', torch.XStorage, key, location, numel).
uint32_t Unpickler::persistent_load(uint32_t pid) {
  const PyValue& t = val(pid);
  if (t.kind != K::Tuple || t.items.size() != 5 || val(t.items[0]).kind != K::Str || val(t.items[0]).s != "storage")
    fail("a persistent id that is not ('storage', type, key, location, numel) at byte " + std::to_string(op_at_));
  const PyValue& type = val(t.items[1]);
  const PyValue& key = val(t.items[2]);
  const PyValue& numel = val(t.items[4]);
  const StorageType* s = type.kind == K::Global ? storage_type(type.s) : nullptr;
  if (!s) fail("a persistent id whose storage type is a " + describe_value(out_, type) + ", not a torch storage type");
  if (key.kind != K::Str || numel.kind != K::Int || numel.i < 0 || val(t.items[3]).kind != K::Str)
    fail("a persistent id with a key, location or numel of the wrong type at byte " + std::to_string(op_at_));
  PyValue v;
  v.kind = K::Storage;
  v.dtype = s->dtype;
  v.s = key.s;
  v.i = numel.i;
  return add(std::move(v));
}

}  // namespace

bool tensor_last_element(const PyValue& t, uint64_t* last, bool* empty) {
  uint64_t at = static_cast<uint64_t>(t.offset);
  bool over = false;
  *empty = false;
  for (size_t i = 0; i < t.sizes.size() && i < t.strides.size(); ++i) {
    if (t.sizes[i] <= 0) *empty = true;
    uint64_t step = 0;
    over = over || __builtin_mul_overflow(static_cast<uint64_t>(t.sizes[i] > 0 ? t.sizes[i] - 1 : 0),
                                          static_cast<uint64_t>(t.strides[i]), &step);
    over = over || __builtin_add_overflow(at, step, &at);
  }
  *last = at;
  return !over;
}

size_t storage_dtype_bytes(const std::string& dtype) {
  for (const StorageType& s : kStorages)
    if (dtype == s.dtype) return s.bytes;
  return 0;
}

PickleData unpickle(const uint8_t* data, size_t size, const std::string& path) {
  return Unpickler(data, size, path).run();
}

std::string describe_value(const PickleData& p, const PyValue& v) {
  auto plural = [](size_t n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); };
  switch (v.kind) {
    case K::None: return "None";
    case K::Bool: return v.i ? "True" : "False";
    case K::Int: return "int " + std::to_string(v.i);
    case K::Float: return "float";
    case K::Str: return "str";
    case K::Bytes: return "bytes";
    case K::Tuple: return "tuple of " + std::to_string(v.items.size());
    case K::List: return "list of " + std::to_string(v.items.size());
    case K::Global: return printable(v.s);
    case K::Storage: return "storage";
    case K::Tensor: return "tensor " + shape_str(v.sizes) + " " + p.values[v.storage].dtype;
    case K::Dict: {
      size_t tensors = 0;
      for (size_t i = 1; i < v.items.size(); i += 2) tensors += p.values[v.items[i]].kind == K::Tensor;
      const std::string what = !v.s.empty() ? printable(v.s) + " of " : v.ordered ? "OrderedDict of " : "dict of ";
      return what + (tensors ? plural(tensors, "tensor", "tensors") + (tensors * 2 < v.items.size() ? " and other entries" : "")
                             : plural(v.items.size() / 2, "entry", "entries"));
    }
  }
  return "value";
}

}  // namespace attnmap
