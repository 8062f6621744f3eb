#ifndef H3_LOADER_UNPICKLER_H_
#define H3_LOADER_UNPICKLER_H_

// Private to loader/pickle*.cc: the opcode interpreter behind Unpickle().
// pickle.cc holds the generic opcodes; pickle_torch.cc the few globals and
// persistent ids that torch.save writes.

#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "loader/pickle.h"

namespace h3::loader {

// Bounds what a hostile stream can make us allocate: a real state_dict's
// pickle has a few values per tensor (thousands), a Lightning checkpoint with
// optimizer state some hundred thousand.
inline constexpr size_t kMaxValues = 4'000'000;
inline constexpr size_t kMaxDims = 64;

// The opcode interpreter. One instance per stream.
class Unpickler {
 public:
  using Kind = PickleValue::Kind;

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

}  // namespace h3::loader

#endif  // H3_LOADER_UNPICKLER_H_
