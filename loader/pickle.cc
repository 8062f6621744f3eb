#include "loader/pickle.h"

#include <cstring>
#include <limits>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/unpickler.h"

namespace h3::loader {

using Kind = PickleValue::Kind;

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
