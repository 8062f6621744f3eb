#include "loader/pickle.h"

#include <cstring>
#include <limits>
#include <string_view>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace h3::loader {

using Kind = PickleValue::Kind;

namespace {

// Bounds what a hostile stream can make us allocate: a real state_dict's
// pickle has a few values per tensor (thousands), a Lightning checkpoint with
// optimizer state some hundred thousand.
constexpr size_t kMaxValues = 4'000'000;
constexpr size_t kMaxDims = 64;

struct StorageTypeName {
  absl::string_view name;
  DType dtype;
};
constexpr StorageTypeName kStorageTypes[] = {
    {"torch.DoubleStorage", DType::kF64},
    {"torch.FloatStorage", DType::kF32},
    {"torch.HalfStorage", DType::kF16},
    {"torch.BFloat16Storage", DType::kBF16},
    {"torch.LongStorage", DType::kI64},
    {"torch.IntStorage", DType::kI32},
    {"torch.ShortStorage", DType::kI16},
    {"torch.CharStorage", DType::kI8},
    {"torch.ByteStorage", DType::kU8},
    {"torch.BoolStorage", DType::kBool},
    {"torch.UntypedStorage", DType::kU8},
};

}  // namespace

// The opcode interpreter. One instance per stream.
class Unpickler {
 public:
  explicit Unpickler(absl::Span<const uint8_t> data) : data_(data) {}

  absl::StatusOr<PickleGraph> Run();

 private:
  absl::Status Step(uint8_t op, bool* stop);

  absl::Status Error(absl::string_view what) const {
    return absl::DataLossError(
        absl::StrCat("pickle: ", what, " at byte ", op_pos_));
  }
  absl::Status Need(size_t n) const {
    if (data_.size() - pos_ < n) return Error("truncated stream");
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> ReadUint(size_t n) {
    H3_RETURN_IF_ERROR(Need(n));
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{data_[pos_ + i]} << (8 * i);
    pos_ += n;
    return v;
  }
  absl::StatusOr<std::string> ReadBytes(uint64_t n) {
    H3_RETURN_IF_ERROR(Need(n));
    std::string s(reinterpret_cast<const char*>(data_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  absl::StatusOr<std::string> ReadLine() {
    for (size_t i = pos_; i < data_.size(); ++i) {
      if (data_[i] == '\n') {
        std::string s(reinterpret_cast<const char*>(data_.data() + pos_),
                      i - pos_);
        pos_ = i + 1;
        return s;
      }
    }
    return Error("unterminated line");
  }

  absl::StatusOr<ValueId> New(PickleValue v) {
    if (graph_.values_.size() >= kMaxValues) {
      return Error("too many values");
    }
    graph_.values_.push_back(std::move(v));
    return static_cast<ValueId>(graph_.values_.size() - 1);
  }
  absl::Status Push(PickleValue v) {
    H3_ASSIGN_OR_RETURN(ValueId id, New(std::move(v)));
    stack_.push_back(id);
    return absl::OkStatus();
  }
  absl::StatusOr<ValueId> Pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) {
      return Error("stack underflow");
    }
    ValueId id = stack_.back();
    stack_.pop_back();
    return id;
  }
  absl::StatusOr<ValueId> Top() const {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) {
      return Error("stack underflow");
    }
    return stack_.back();
  }
  // Pops everything above the last MARK, and the mark.
  absl::StatusOr<std::vector<ValueId>> PopMark() {
    if (marks_.empty()) return Error("no MARK on the stack");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<ValueId> items(stack_.begin() + m, stack_.end());
    stack_.resize(m);
    return items;
  }
  PickleValue& Val(ValueId id) { return graph_.values_[id]; }

  absl::Status PushInt(int64_t v) {
    PickleValue p;
    p.kind = Kind::kInt;
    p.integer = v;
    return Push(std::move(p));
  }
  absl::Status PushText(Kind kind, std::string s) {
    PickleValue p;
    p.kind = kind;
    p.text = std::move(s);
    return Push(std::move(p));
  }
  absl::Status PushSequence(Kind kind, std::vector<ValueId> items) {
    PickleValue p;
    p.kind = kind;
    p.items = std::move(items);
    return Push(std::move(p));
  }
  absl::Status PushLong(uint64_t nbytes);
  absl::Status Memoize(uint64_t index) {
    H3_ASSIGN_OR_RETURN(ValueId top, Top());
    if (memo_.size() >= kMaxValues && !memo_.contains(index)) {
      return Error("memo too large");
    }
    memo_[index] = top;
    return absl::OkStatus();
  }
  absl::Status Get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) return Error(absl::StrCat("memo ", index, " unset"));
    stack_.push_back(it->second);
    return absl::OkStatus();
  }
  absl::Status SetItems(std::vector<ValueId> kv);
  absl::Status AppendItems(std::vector<ValueId> items, Kind want);
  absl::Status Reduce(ValueId callable, ValueId args);
  absl::Status PersistentId(ValueId pid);
  absl::StatusOr<ValueId> RebuildTensor(const std::vector<ValueId>& args);
  absl::StatusOr<std::vector<int64_t>> IntTuple(ValueId id);
  absl::Status PushObject(std::string name, std::vector<ValueId> args) {
    PickleValue p;
    p.kind = Kind::kObject;
    p.text = std::move(name);
    p.items = std::move(args);
    return Push(std::move(p));
  }

  absl::Span<const uint8_t> data_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  PickleGraph graph_;
  std::vector<ValueId> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ValueId> memo_;
};

absl::StatusOr<PickleGraph> Unpickler::Run() {
  bool stop = false;
  while (!stop) {
    op_pos_ = pos_;
    if (pos_ >= data_.size()) return Error("stream ends without STOP");
    uint8_t op = data_[pos_++];
    H3_RETURN_IF_ERROR(Step(op, &stop));
  }
  if (stack_.size() != 1 || !marks_.empty()) {
    return Error("STOP with a malformed stack");
  }
  graph_.root_ = stack_.back();
  return std::move(graph_);
}

absl::Status Unpickler::PushLong(uint64_t nbytes) {
  H3_RETURN_IF_ERROR(Need(nbytes));
  const uint8_t* p = data_.data() + pos_;
  pos_ += nbytes;
  if (nbytes > 8) {
    // Larger than int64: kept as an inert value, never needed by checkpoints.
    return PushObject("int (more than 64 bits)", {});
  }
  uint64_t v = 0;
  for (size_t i = 0; i < nbytes; ++i) v |= uint64_t{p[i]} << (8 * i);
  if (nbytes > 0 && nbytes < 8 && (p[nbytes - 1] & 0x80)) {
    v |= ~uint64_t{0} << (8 * nbytes);  // sign-extend
  }
  return PushInt(static_cast<int64_t>(v));
}

absl::Status Unpickler::SetItems(std::vector<ValueId> kv) {
  H3_ASSIGN_OR_RETURN(ValueId target, Top());
  if (kv.size() % 2 != 0) return Error("SETITEMS with an odd item count");
  PickleValue& t = Val(target);
  if (t.kind == Kind::kObject) return absl::OkStatus();  // inert, discarded
  if (t.kind != Kind::kDict) return Error("SETITEM on a non-dict");
  for (size_t i = 0; i < kv.size(); i += 2) {
    t.entries.emplace_back(kv[i], kv[i + 1]);
  }
  return absl::OkStatus();
}

absl::Status Unpickler::AppendItems(std::vector<ValueId> items, Kind want) {
  H3_ASSIGN_OR_RETURN(ValueId target, Top());
  PickleValue& t = Val(target);
  if (t.kind == Kind::kObject) return absl::OkStatus();  // inert, discarded
  if (t.kind != want) return Error("APPEND/ADDITEMS on the wrong type");
  t.items.insert(t.items.end(), items.begin(), items.end());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> Unpickler::IntTuple(ValueId id) {
  const PickleValue& v = Val(id);
  if (v.kind != Kind::kTuple && v.kind != Kind::kList) {
    return Error("tensor size/stride is not a tuple");
  }
  if (v.items.size() > kMaxDims) return Error("tensor has too many dims");
  std::vector<int64_t> out;
  for (ValueId item : v.items) {
    const PickleValue& x = Val(item);
    if (x.kind != Kind::kInt || x.integer < 0) {
      return Error("tensor size/stride is not a non-negative integer");
    }
    out.push_back(x.integer);
  }
  return out;
}

absl::StatusOr<ValueId> Unpickler::RebuildTensor(
    const std::vector<ValueId>& args) {
  // (storage, storage_offset, size, stride, requires_grad, backward_hooks
  //  [, metadata])
  if (args.size() < 4) return Error("_rebuild_tensor_v2 with too few args");
  const PickleValue& storage = Val(args[0]);
  const PickleValue& offset = Val(args[1]);
  if (storage.kind != Kind::kStorage) {
    return Error("_rebuild_tensor_v2 without a storage");
  }
  if (offset.kind != Kind::kInt || offset.integer < 0) {
    return Error("tensor storage offset is not a non-negative integer");
  }
  PickleValue t;
  t.kind = Kind::kTensor;
  t.tensor = storage.tensor;
  t.tensor.offset = offset.integer;
  H3_ASSIGN_OR_RETURN(t.tensor.shape, IntTuple(args[2]));
  H3_ASSIGN_OR_RETURN(t.tensor.strides, IntTuple(args[3]));
  if (t.tensor.shape.size() != t.tensor.strides.size()) {
    return Error("tensor size and stride differ in length");
  }
  return New(std::move(t));
}

absl::Status Unpickler::Reduce(ValueId callable, ValueId args_id) {
  const PickleValue& f = Val(callable);
  const PickleValue& a = Val(args_id);
  if (a.kind != Kind::kTuple) return Error("REDUCE arguments are not a tuple");
  std::vector<ValueId> args = a.items;
  if (f.kind != Kind::kGlobal) {
    return PushObject(absl::StrCat("call of ", graph_.Describe(f)), args);
  }
  const std::string& name = f.text;
  if (name == "collections.OrderedDict" && args.empty()) {
    PickleValue d;
    d.kind = Kind::kDict;
    return Push(std::move(d));
  }
  if (name == "torch._utils._rebuild_tensor_v2") {
    H3_ASSIGN_OR_RETURN(ValueId t, RebuildTensor(args));
    stack_.push_back(t);
    return absl::OkStatus();
  }
  if ((name == "torch._utils._rebuild_parameter" ||
       name == "torch._utils._rebuild_parameter_with_state") &&
      !args.empty() && Val(args[0]).kind == Kind::kTensor) {
    stack_.push_back(args[0]);  // a Parameter is its data
    return absl::OkStatus();
  }
  if (name == "torch._tensor._rebuild_from_type_v2" && args.size() >= 3) {
    const PickleValue& func = Val(args[0]);
    const PickleValue& type = Val(args[1]);
    const PickleValue& inner = Val(args[2]);
    if (func.kind == Kind::kGlobal &&
        func.text == "torch._utils._rebuild_tensor_v2" &&
        type.kind == Kind::kGlobal &&
        (type.text == "torch.Tensor" ||
         type.text == "torch.nn.parameter.Parameter") &&
        inner.kind == Kind::kTuple) {
      H3_ASSIGN_OR_RETURN(ValueId t, RebuildTensor(inner.items));
      stack_.push_back(t);
      return absl::OkStatus();
    }
  }
  return PushObject(name, args);  // recorded, never called
}

absl::Status Unpickler::PersistentId(ValueId pid) {
  // torch.save: ('storage', <storage type>, key, location, numel)
  const PickleValue& p = Val(pid);
  if (p.kind != Kind::kTuple || p.items.size() != 5 ||
      Val(p.items[0]).kind != Kind::kString ||
      Val(p.items[0]).text != "storage") {
    return Error("persistent id is not a torch storage");
  }
  const PickleValue& type = Val(p.items[1]);
  const PickleValue& key = Val(p.items[2]);
  const PickleValue& numel = Val(p.items[4]);
  if (type.kind != Kind::kGlobal) return Error("storage type is not a global");
  if (key.kind != Kind::kString) return Error("storage key is not a string");
  if (numel.kind != Kind::kInt || numel.integer < 0) {
    return Error("storage size is not a non-negative integer");
  }
  PickleValue s;
  s.kind = Kind::kStorage;
  bool known = false;
  for (const StorageTypeName& st : kStorageTypes) {
    if (type.text == st.name) {
      s.tensor.dtype = st.dtype;
      known = true;
    }
  }
  if (!known) {
    return Error(absl::StrCat("unsupported storage type ", type.text));
  }
  s.tensor.storage_key = key.text;
  s.tensor.storage_numel = static_cast<uint64_t>(numel.integer);
  return Push(std::move(s));
}

absl::Status Unpickler::Step(uint8_t op, bool* stop) {
  switch (op) {
    case 0x80: {  // PROTO
      H3_ASSIGN_OR_RETURN(uint64_t proto, ReadUint(1));
      if (proto > 5) return Error(absl::StrCat("unknown protocol ", proto));
      return absl::OkStatus();
    }
    case 0x95:  // FRAME: a length prefix only
      return ReadUint(8).status();
    case '.':  // STOP
      *stop = true;
      return absl::OkStatus();
    case '(':  // MARK
      marks_.push_back(stack_.size());
      return absl::OkStatus();
    case '0':  // POP
      return Pop().status();
    case '1':  // POP_MARK
      return PopMark().status();
    case '2': {  // DUP
      H3_ASSIGN_OR_RETURN(ValueId top, Top());
      stack_.push_back(top);
      return absl::OkStatus();
    }
    case 'N':
      return Push(PickleValue{});
    case 0x88:    // NEWTRUE
    case 0x89: {  // NEWFALSE
      PickleValue p;
      p.kind = Kind::kBool;
      p.boolean = op == 0x88;
      return Push(std::move(p));
    }
    case 'J': {  // BININT
      H3_ASSIGN_OR_RETURN(uint64_t v, ReadUint(4));
      return PushInt(static_cast<int32_t>(static_cast<uint32_t>(v)));
    }
    case 'K': {  // BININT1
      H3_ASSIGN_OR_RETURN(uint64_t v, ReadUint(1));
      return PushInt(static_cast<int64_t>(v));
    }
    case 'M': {  // BININT2
      H3_ASSIGN_OR_RETURN(uint64_t v, ReadUint(2));
      return PushInt(static_cast<int64_t>(v));
    }
    case 0x8a: {  // LONG1
      H3_ASSIGN_OR_RETURN(uint64_t n, ReadUint(1));
      return PushLong(n);
    }
    case 0x8b: {  // LONG4
      H3_ASSIGN_OR_RETURN(uint64_t n, ReadUint(4));
      return PushLong(n);
    }
    case 'I':    // INT (text)
    case 'L': {  // LONG (text)
      H3_ASSIGN_OR_RETURN(std::string line, ReadLine());
      if (!line.empty() && line.back() == 'L') line.pop_back();
      if (op == 'I' && (line == "00" || line == "01")) {
        PickleValue p;
        p.kind = Kind::kBool;
        p.boolean = line == "01";
        return Push(std::move(p));
      }
      int64_t v;
      if (!absl::SimpleAtoi(line, &v)) return Error("bad INT/LONG literal");
      return PushInt(v);
    }
    case 'G': {  // BINFLOAT, big-endian
      H3_RETURN_IF_ERROR(Need(8));
      uint64_t bits = 0;
      for (int i = 0; i < 8; ++i) bits = (bits << 8) | data_[pos_ + i];
      pos_ += 8;
      PickleValue p;
      p.kind = Kind::kFloat;
      std::memcpy(&p.real, &bits, 8);
      return Push(std::move(p));
    }
    case 'F': {  // FLOAT (text)
      H3_ASSIGN_OR_RETURN(std::string line, ReadLine());
      PickleValue p;
      p.kind = Kind::kFloat;
      if (!absl::SimpleAtod(line, &p.real)) return Error("bad FLOAT literal");
      return Push(std::move(p));
    }
    case 'X':     // BINUNICODE
    case 0x8c:    // SHORT_BINUNICODE
    case 0x8d:    // BINUNICODE8
    case 'T':     // BINSTRING
    case 'U':     // SHORT_BINSTRING
    case 'B':     // BINBYTES
    case 'C':     // SHORT_BINBYTES
    case 0x8e: {  // BINBYTES8
      const size_t width = (op == 0x8c || op == 'U' || op == 'C') ? 1
                           : (op == 0x8d || op == 0x8e)           ? 8
                                                                  : 4;
      H3_ASSIGN_OR_RETURN(uint64_t n, ReadUint(width));
      H3_ASSIGN_OR_RETURN(std::string s, ReadBytes(n));
      const bool bytes = op == 'B' || op == 'C' || op == 0x8e;
      return PushText(bytes ? Kind::kBytes : Kind::kString, std::move(s));
    }
    case 'S':    // STRING (text, quoted; kept verbatim)
    case 'V': {  // UNICODE (text; kept verbatim)
      H3_ASSIGN_OR_RETURN(std::string line, ReadLine());
      if (op == 'S' && line.size() >= 2 &&
          (line.front() == '\'' || line.front() == '"')) {
        line = line.substr(1, line.size() - 2);
      }
      return PushText(Kind::kString, std::move(line));
    }
    case ')':
      return PushSequence(Kind::kTuple, {});
    case 0x85:
    case 0x86:
    case 0x87: {  // TUPLE1..3
      std::vector<ValueId> items(op - 0x84);
      for (size_t i = items.size(); i-- > 0;) {
        H3_ASSIGN_OR_RETURN(items[i], Pop());
      }
      return PushSequence(Kind::kTuple, std::move(items));
    }
    case 't': {  // TUPLE
      H3_ASSIGN_OR_RETURN(std::vector<ValueId> items, PopMark());
      return PushSequence(Kind::kTuple, std::move(items));
    }
    case ']':
      return PushSequence(Kind::kList, {});
    case 'l': {  // LIST
      H3_ASSIGN_OR_RETURN(std::vector<ValueId> items, PopMark());
      return PushSequence(Kind::kList, std::move(items));
    }
    case 0x8f:  // EMPTY_SET
      return PushSequence(Kind::kSet, {});
    case 0x91: {  // FROZENSET
      H3_ASSIGN_OR_RETURN(std::vector<ValueId> items, PopMark());
      return PushSequence(Kind::kSet, std::move(items));
    }
    case '}': {  // EMPTY_DICT
      PickleValue d;
      d.kind = Kind::kDict;
      return Push(std::move(d));
    }
    case 'd': {  // DICT
      H3_ASSIGN_OR_RETURN(std::vector<ValueId> items, PopMark());
      PickleValue d;
      d.kind = Kind::kDict;
      H3_RETURN_IF_ERROR(Push(std::move(d)));
      return SetItems(std::move(items));
    }
    case 'a': {  // APPEND
      H3_ASSIGN_OR_RETURN(ValueId item, Pop());
      return AppendItems({item}, Kind::kList);
    }
    case 'e': {  // APPENDS
      H3_ASSIGN_OR_RETURN(std::vector<ValueId> items, PopMark());
      return AppendItems(std::move(items), Kind::kList);
    }
    case 0x90: {  // ADDITEMS
      H3_ASSIGN_OR_RETURN(std::vector<ValueId> items, PopMark());
      return AppendItems(std::move(items), Kind::kSet);
    }
    case 's': {  // SETITEM
      H3_ASSIGN_OR_RETURN(ValueId value, Pop());
      H3_ASSIGN_OR_RETURN(ValueId key, Pop());
      return SetItems({key, value});
    }
    case 'u': {  // SETITEMS
      H3_ASSIGN_OR_RETURN(std::vector<ValueId> items, PopMark());
      return SetItems(std::move(items));
    }
    case 'q': {  // BINPUT
      H3_ASSIGN_OR_RETURN(uint64_t i, ReadUint(1));
      return Memoize(i);
    }
    case 'r': {  // LONG_BINPUT
      H3_ASSIGN_OR_RETURN(uint64_t i, ReadUint(4));
      return Memoize(i);
    }
    case 0x94:  // MEMOIZE
      return Memoize(memo_.size());
    case 'p': {  // PUT (text)
      H3_ASSIGN_OR_RETURN(std::string line, ReadLine());
      uint64_t i;
      if (!absl::SimpleAtoi(line, &i)) return Error("bad PUT index");
      return Memoize(i);
    }
    case 'h': {  // BINGET
      H3_ASSIGN_OR_RETURN(uint64_t i, ReadUint(1));
      return Get(i);
    }
    case 'j': {  // LONG_BINGET
      H3_ASSIGN_OR_RETURN(uint64_t i, ReadUint(4));
      return Get(i);
    }
    case 'g': {  // GET (text)
      H3_ASSIGN_OR_RETURN(std::string line, ReadLine());
      uint64_t i;
      if (!absl::SimpleAtoi(line, &i)) return Error("bad GET index");
      return Get(i);
    }
    case 'c': {  // GLOBAL "module\nname\n": looked up by name only
      H3_ASSIGN_OR_RETURN(std::string module, ReadLine());
      H3_ASSIGN_OR_RETURN(std::string name, ReadLine());
      return PushText(Kind::kGlobal, absl::StrCat(module, ".", name));
    }
    case 0x93: {  // STACK_GLOBAL
      H3_ASSIGN_OR_RETURN(ValueId name, Pop());
      H3_ASSIGN_OR_RETURN(ValueId module, Pop());
      if (Val(name).kind != Kind::kString ||
          Val(module).kind != Kind::kString) {
        return Error("STACK_GLOBAL of non-strings");
      }
      return PushText(Kind::kGlobal,
                      absl::StrCat(Val(module).text, ".", Val(name).text));
    }
    case 'R': {  // REDUCE
      H3_ASSIGN_OR_RETURN(ValueId args, Pop());
      H3_ASSIGN_OR_RETURN(ValueId callable, Pop());
      return Reduce(callable, args);
    }
    case 0x81:                                             // NEWOBJ
    case 0x92: {                                           // NEWOBJ_EX
      if (op == 0x92) H3_RETURN_IF_ERROR(Pop().status());  // kwargs
      H3_ASSIGN_OR_RETURN(ValueId args, Pop());
      H3_ASSIGN_OR_RETURN(ValueId cls, Pop());
      return PushObject(graph_.Describe(Val(cls)), {args});
    }
    case 'b':  // BUILD: object state is ignored, the object stays inert
      H3_RETURN_IF_ERROR(Pop().status());
      return Top().status();
    case 'i': {  // INST "module\nname\n" over a MARK
      H3_ASSIGN_OR_RETURN(std::string module, ReadLine());
      H3_ASSIGN_OR_RETURN(std::string name, ReadLine());
      H3_ASSIGN_OR_RETURN(std::vector<ValueId> args, PopMark());
      return PushObject(absl::StrCat(module, ".", name), std::move(args));
    }
    case 'o': {  // OBJ: MARK cls args...
      H3_ASSIGN_OR_RETURN(std::vector<ValueId> items, PopMark());
      if (items.empty()) return Error("OBJ without a class");
      std::string name = graph_.Describe(Val(items[0]));
      items.erase(items.begin());
      return PushObject(std::move(name), std::move(items));
    }
    case 'Q': {  // BINPERSID
      H3_ASSIGN_OR_RETURN(ValueId pid, Pop());
      return PersistentId(pid);
    }
    default:
      return Error(absl::StrCat("unsupported opcode 0x",
                                absl::Hex(op, absl::kZeroPad2)));
  }
}

const PickleValue* PickleGraph::DictGet(const PickleValue& dict,
                                        absl::string_view key) const {
  if (dict.kind != Kind::kDict) return nullptr;
  const PickleValue* found = nullptr;
  for (const auto& [k, v] : dict.entries) {
    const PickleValue& kv = values_[k];
    if (kv.kind == Kind::kString && kv.text == key) found = &values_[v];
  }
  return found;  // the last assignment wins, as in Python
}

std::string PickleGraph::Describe(const PickleValue& value) const {
  switch (value.kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kBytes:
      return "bytes";
    case Kind::kTuple:
      return "tuple";
    case Kind::kList:
      return "list";
    case Kind::kSet:
      return "set";
    case Kind::kDict:
      return "dict";
    case Kind::kGlobal:
      return value.text;
    case Kind::kObject:
      return absl::StrCat("call of ", value.text, " (not executed)");
    case Kind::kStorage:
      return "storage";
    case Kind::kTensor:
      return "tensor";
  }
  return "?";
}

absl::StatusOr<PickleGraph> Unpickle(absl::Span<const uint8_t> data) {
  return Unpickler(data).Run();
}

}  // namespace h3::loader
