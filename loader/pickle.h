#ifndef H3_LOADER_PICKLE_H_
#define H3_LOADER_PICKLE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "loader/dtype.h"

namespace h3::loader {

// A safe reader of the pickle streams that `torch.save` writes (protocol 2,
// plus the few protocol 3-5 opcodes newer writers emit). It interprets the
// opcodes into an inert tree of values and never imports, executes or calls
// anything. It understands exactly these globals:
//   collections.OrderedDict                 called with () -> an empty dict
//   torch._utils._rebuild_tensor_v2         -> a TensorRef
//   torch._utils._rebuild_parameter[_with_state], torch._tensor.
//     _rebuild_from_type_v2 (of a plain Tensor or Parameter) -> its tensor
//   torch.<Type>Storage, torch.UntypedStorage  in persistent ids -> storages
// Any other global, and any call of one (REDUCE, NEWOBJ, BUILD, INST, OBJ),
// becomes an inert kObject value that records the global's name; callers
// refuse it where they need data (a checkpoint whose top level is a call of
// `os.system` is reported, never run).

using ValueId = uint32_t;

// A tensor as torch.save describes it: a view into a storage.
struct TensorRef {
  std::string storage_key;  // the entry data/<key> of the archive
  ElementType dtype = ElementType::kF32;
  uint64_t storage_numel = 0;  // elements of `dtype` the storage holds
  int64_t offset = 0;          // in elements
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements
};

struct PickleValue {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,   // text (str)
    kBytes,    // bytes
    kTuple,    // items
    kList,     // items
    kSet,      // items
    kDict,     // entries (keys in insertion order)
    kGlobal,   // text = "module.name"
    kObject,   // an uncalled call: text = the callable's name, items = args
    kStorage,  // tensor.storage_key/dtype/storage_numel (a persistent id)
    kTensor,   // tensor
  };
  Kind kind = Kind::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;
  std::vector<ValueId> items;
  std::vector<std::pair<ValueId, ValueId>> entries;
  TensorRef tensor;
};

// The values of one unpickled stream. Values refer to each other by id, so
// shared and even cyclic references (which pickle allows) are plain data.
class PickleGraph {
 public:
  ValueId root() const { return root_; }
  const PickleValue& at(ValueId id) const { return values_[id]; }
  size_t size() const { return values_.size(); }

  // The value of `key` (a string) in dict `dict`; nullptr if `dict` is not a
  // dict or has no such key.
  const PickleValue* DictGet(const PickleValue& dict,
                             absl::string_view key) const;

  // A short human-readable description ("dict", "call of os.system", ...).
  std::string Describe(const PickleValue& value) const;

 private:
  friend class Unpickler;
  std::vector<PickleValue> values_;
  ValueId root_ = 0;
};

// Interprets `data` as one pickle stream (up to its STOP opcode).
// DataLoss, with the byte offset, for truncated or malformed input, unknown
// opcodes, a persistent id that is not a torch storage, or limits exceeded
// (nesting, memo size). Never executes anything.
absl::StatusOr<PickleGraph> Unpickle(absl::Span<const uint8_t> data);

}  // namespace h3::loader

#endif  // H3_LOADER_PICKLE_H_
