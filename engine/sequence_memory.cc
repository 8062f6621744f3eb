#include "engine/sequence_memory.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace h3::engine {

absl::StatusOr<std::unique_ptr<SequenceMemory>> SequenceMemory::Create(
    Model& model, int slots, int64_t capacity) {
  if (slots < 1 || capacity < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence memory of ", slots, " slots of ", capacity,
                     " positions; both must be >= 1"));
  }
  std::unique_ptr<SequenceMemory> memory(new SequenceMemory(model, capacity));
  Backend& backend = model.backend();
  const int64_t d = model.config().d_model;
  const int64_t h3_floats = model.H3StateFloats();
  memory->slots_.resize(slots);
  for (SlotId id = slots - 1; id >= 0; --id) {
    Slot& slot = memory->slots_[id];
    for (int i = 0; i < model.h3_layers(); ++i) {
      H3_ASSIGN_OR_RETURN(Buffer b, backend.Allocate(h3_floats));
      slot.h3_views.push_back(
          {b.data(), b.data() + d * model.config().d_state});
      slot.h3.push_back(std::move(b));
    }
    // K then V, each [capacity, d] of the KV type, in whole floats.
    const ElementType kv = memory->kv_type();
    const int64_t kv_floats = FloatsHolding(2 * capacity * d, kv);
    for (int j = 0; j < model.attention_layers(); ++j) {
      H3_ASSIGN_OR_RETURN(Buffer b, backend.Allocate(kv_floats));
      slot.kv_views.push_back(
          {b.data(), ElementAt(b.data(), capacity * d, kv), capacity, kv});
      slot.kv.push_back(std::move(b));
    }
    H3_ASSIGN_OR_RETURN(slot.history,
                        backend.Allocate(memory->HistoryFloats()));
    H3_RETURN_IF_ERROR(memory->Reset(id));
    memory->free_.push_back(id);  // slot 0 ends at the back: taken first
  }
  return memory;
}

int64_t SequenceMemory::HistoryFloats() const {
  const int64_t vocab = model_.config().vocab_size;
  return vocab + (vocab + 3) / 4;
}

absl::Status SequenceMemory::CheckSlot(SlotId slot) const {
  if (slot < 0 || slot >= slots()) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot ", slot, " is outside [0, ", slots(), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SlotId> SequenceMemory::Acquire() {
  if (free_.empty()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("all ", slots(), " sequence slots are taken"));
  }
  const SlotId slot = free_.back();
  H3_RETURN_IF_ERROR(Reset(slot));
  free_.pop_back();
  slots_[slot].acquired = true;
  return slot;
}

void SequenceMemory::Release(SlotId slot) {
  slots_[slot].acquired = false;
  free_.push_back(slot);
}

bool SequenceMemory::acquired(SlotId slot) const {
  return slot >= 0 && slot < slots() && slots_[slot].acquired;
}

absl::Status SequenceMemory::Reset(SlotId id) {
  H3_RETURN_IF_ERROR(CheckSlot(id));
  Backend& backend = model_.backend();
  Slot& slot = slots_[id];
  // Attention reads only the positions written since: no need to clear.
  for (Buffer& b : slot.h3) {
    H3_RETURN_IF_ERROR(backend.Fill(b.data(), b.size(), 0.0f));
  }
  // Zero bits: counts 0, no flags.
  H3_RETURN_IF_ERROR(
      backend.Fill(slot.history.data(), slot.history.size(), 0.0f));
  slot.position = 0;
  return absl::OkStatus();
}

absl::Status SequenceMemory::Copy(SlotId from, SlotId to) {
  H3_RETURN_IF_ERROR(CheckSlot(from));
  H3_RETURN_IF_ERROR(CheckSlot(to));
  if (from == to) return absl::OkStatus();
  Backend& backend = model_.backend();
  const Slot& src = slots_[from];
  Slot& dst = slots_[to];
  for (size_t i = 0; i < src.h3.size(); ++i) {
    H3_RETURN_IF_ERROR(
        backend.Copy(src.h3[i].data(), src.h3[i].size(), dst.h3[i].data()));
  }
  // Attention caches: only the filled positions of K and of V matter.
  const int64_t filled =
      src.position * model_.config().d_model * ElementSize(kv_type());
  for (size_t j = 0; j < src.kv.size(); ++j) {
    const kernels::KvCache& s = src.kv_views[j];
    const kernels::KvCache& d = dst.kv_views[j];
    H3_RETURN_IF_ERROR(backend.CopyBytes(s.k, filled, d.k));
    H3_RETURN_IF_ERROR(backend.CopyBytes(s.v, filled, d.v));
  }
  H3_RETURN_IF_ERROR(
      backend.Copy(src.history.data(), src.history.size(), dst.history.data()));
  dst.position = src.position;
  return absl::OkStatus();
}

absl::Status SequenceMemory::SetTokenFlags(SlotId slot,
                                           absl::Span<const uint8_t> flags) {
  H3_RETURN_IF_ERROR(CheckSlot(slot));
  const int64_t vocab = model_.config().vocab_size;
  if (static_cast<int64_t>(flags.size()) != vocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token flags: ", flags.size(), " for a vocabulary of ", vocab));
  }
  // The flags are bytes in a float buffer: copied as whole floats.
  std::vector<float> words(HistoryFloats() - vocab, 0.0f);
  std::memcpy(words.data(), flags.data(), flags.size());
  return model_.backend().CopyFromHost(words.data(), words.size(),
                                       slots_[slot].history.data() + vocab);
}

SequenceView SequenceMemory::View(SlotId slot) const {
  const Slot& s = slots_[slot];
  return {s.h3_views, s.kv_views};
}

kernels::TokenHistory SequenceMemory::History(SlotId slot) const {
  float* base = slots_[slot].history.data();
  return {reinterpret_cast<int32_t*>(base),
          reinterpret_cast<uint8_t*>(base + model_.config().vocab_size)};
}

int64_t SequenceMemory::StateFloats() const {
  return model_.h3_layers() * model_.H3StateFloats();
}

int64_t SequenceMemory::KvBytesPerPosition() const {
  return 2 * model_.attention_layers() * model_.config().d_model *
         ElementSize(kv_type());
}

absl::Status SequenceMemory::ReadStates(SlotId slot, float* dst) const {
  H3_RETURN_IF_ERROR(CheckSlot(slot));
  for (const Buffer& b : slots_[slot].h3) {
    H3_RETURN_IF_ERROR(model_.backend().Copy(b.data(), b.size(), dst));
    dst += b.size();
  }
  return absl::OkStatus();
}

absl::Status SequenceMemory::WriteStates(SlotId slot, const float* src) {
  H3_RETURN_IF_ERROR(CheckSlot(slot));
  for (Buffer& b : slots_[slot].h3) {
    H3_RETURN_IF_ERROR(model_.backend().Copy(src, b.size(), b.data()));
    src += b.size();
  }
  return absl::OkStatus();
}

absl::Status SequenceMemory::MoveKv(SlotId slot, int64_t start, int64_t length,
                                    void* packed, bool to_cache) const {
  H3_RETURN_IF_ERROR(CheckSlot(slot));
  if (start < 0 || length < 0 || start + length > capacity_) {
    return absl::InvalidArgumentError(
        absl::StrCat("K/V positions [", start, ", ", start + length,
                     ") outside the capacity ", capacity_));
  }
  const int64_t d = model_.config().d_model;
  const ElementType type = kv_type();
  const int64_t bytes = length * d * ElementSize(type);
  Backend& backend = model_.backend();
  for (const kernels::KvCache& kv : slots_[slot].kv_views) {
    for (void* cache : {kv.k, kv.v}) {
      void* at = ElementAt(cache, start * d, type);
      H3_RETURN_IF_ERROR(to_cache ? backend.CopyBytes(packed, bytes, at)
                                  : backend.CopyBytes(at, bytes, packed));
      packed = ElementAt(packed, length * d, type);
    }
  }
  return absl::OkStatus();
}

absl::Status SequenceMemory::ReadKv(SlotId slot, int64_t start, int64_t length,
                                    void* dst) const {
  return MoveKv(slot, start, length, dst, /*to_cache=*/false);
}

absl::Status SequenceMemory::WriteKv(SlotId slot, int64_t start, int64_t length,
                                     const void* src) {
  return MoveKv(slot, start, length, const_cast<void*>(src),
                /*to_cache=*/true);
}

}  // namespace h3::engine
