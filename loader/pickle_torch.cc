// The part of the unpickler that knows torch.save: the storage types of
// persistent ids, and the only globals whose "call" is understood (rebuilding
// a tensor view, an OrderedDict). Every other global stays an inert record.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/unpickler.h"

namespace h3::loader {
namespace {

struct StorageTypeName {
  absl::string_view name;
  ElementType dtype;
};
constexpr StorageTypeName kStorageTypes[] = {
    {"torch.DoubleStorage", ElementType::kF64},
    {"torch.FloatStorage", ElementType::kF32},
    {"torch.HalfStorage", ElementType::kF16},
    {"torch.BFloat16Storage", ElementType::kBF16},
    {"torch.LongStorage", ElementType::kI64},
    {"torch.IntStorage", ElementType::kI32},
    {"torch.ShortStorage", ElementType::kI16},
    {"torch.CharStorage", ElementType::kI8},
    {"torch.ByteStorage", ElementType::kU8},
    {"torch.BoolStorage", ElementType::kBool},
    {"torch.UntypedStorage", ElementType::kU8},
};

}  // namespace

using Kind = PickleValue::Kind;

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

}  // namespace h3::loader
