#ifndef H3_ENGINE_SEQUENCE_MEMORY_H_
#define H3_ENGINE_SEQUENCE_MEMORY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/backend.h"
#include "engine/model.h"
#include "kernels/sampling.h"

namespace h3::engine {

// A sequence's place in SequenceMemory.
using SlotId = int;

// The memory of up to `slots` sequences, apart from the model (llama.cpp's
// recurrent memory is the example): per slot, every H3 layer's state (the
// shift ring and the diagonal state, kernels/h3.h), every attention layer's
// K/V cache of `capacity` positions, the sampling history (token counts and
// flags, kernels/sampling.h), and the position the sequence has reached.
// All of it is allocated in the model's backend at creation.
//
// Not thread-safe: the Runner owns it and one thread drives both.
class SequenceMemory {
 public:
  // InvalidArgument for slots < 1 or capacity < 1; the backend's errors of
  // allocating (ResourceExhausted when memory runs out).
  static absl::StatusOr<std::unique_ptr<SequenceMemory>> Create(
      Model& model, int slots, int64_t capacity);

  int slots() const { return static_cast<int>(slots_.size()); }
  // Positions a sequence may reach: the K/V caches' capacity.
  int64_t capacity() const { return capacity_; }
  int free_slots() const { return static_cast<int>(free_.size()); }

  // A free slot, reset (position 0, zero states, counts and flags).
  // ResourceExhausted when every slot is taken.
  absl::StatusOr<SlotId> Acquire();
  // Gives an acquired slot back. REQUIRES: acquired(slot).
  void Release(SlotId slot);
  bool acquired(SlotId slot) const;

  // Back to position 0 with zero states, counts and flags, reusing the
  // memory. InvalidArgument for a slot out of range.
  absl::Status Reset(SlotId slot);
  // Makes `to` a copy of `from` (states, the filled part of the caches, the
  // history, the position): snapshots and prefix reuse.
  absl::Status Copy(SlotId from, SlotId to);
  // Replaces the slot's token flags (kTokenInPrompt, kTokenBanned;
  // [vocab_size]); counts are kept. InvalidArgument for another size.
  absl::Status SetTokenFlags(SlotId slot, absl::Span<const uint8_t> flags);

  int64_t position(SlotId slot) const { return slots_[slot].position; }
  // Records that `tokens` more tokens went through the model (the Runner
  // calls it after each step).
  void Advance(SlotId slot, int64_t tokens) { slots_[slot].position += tokens; }

  // The slot's states and caches as the forward reads them. Valid while the
  // memory lives.
  SequenceView View(SlotId slot) const;
  kernels::TokenHistory History(SlotId slot) const;

  // Snapshots (the prefix cache): a slot's H3 states and its K/V at chosen
  // positions, copied to and from buffers of the same backend.
  //
  // Floats of every H3 layer's state, back to back.
  int64_t StateFloats() const;
  // The K/V caches' element type: the backend's activation_type() (fp32, or
  // 16-bit with half activations).
  ElementType kv_type() const { return model_.backend().activation_type(); }
  // Bytes one position takes in every attention layer's K and V.
  int64_t KvBytesPerPosition() const;
  // Copies the slot's H3 states to `dst` [StateFloats()], or back.
  absl::Status ReadStates(SlotId slot, float* dst) const;
  absl::Status WriteStates(SlotId slot, const float* src);
  // Copies K/V of positions [start, start + length) to `dst`, laid out
  // [attention layer][K, V][length][d_model] in kv_type(), or back from
  // `src` laid out the same way. REQUIRES: start + length <= capacity().
  absl::Status ReadKv(SlotId slot, int64_t start, int64_t length,
                      void* dst) const;
  absl::Status WriteKv(SlotId slot, int64_t start, int64_t length,
                       const void* src);
  // Sets the position after WriteStates/WriteKv restored a prefix.
  void SetPosition(SlotId slot, int64_t position) {
    slots_[slot].position = position;
  }

 private:
  struct Slot {
    std::vector<Buffer> h3;  // per H3 layer: [Model::H3StateFloats()]
    std::vector<Buffer> kv;  // per attention layer: K then V, [capacity, d]
                             // of kv_type()
    Buffer history;          // int32 counts [vocab], then uint8 flags
    std::vector<kernels::H3State> h3_views;
    std::vector<kernels::KvCache> kv_views;
    int64_t position = 0;
    bool acquired = false;
  };

  SequenceMemory(Model& model, int64_t capacity)
      : model_(model), capacity_(capacity) {}
  absl::Status CheckSlot(SlotId slot) const;
  // A history's size in floats: int32 counts, then uint8 flags rounded up.
  int64_t HistoryFloats() const;
  // Copies [start, start + length) of each K and V of the slot between the
  // cache and a packed buffer (to_cache: from `packed` into the cache).
  absl::Status MoveKv(SlotId slot, int64_t start, int64_t length, void* packed,
                      bool to_cache) const;

  Model& model_;
  const int64_t capacity_;
  std::vector<Slot> slots_;
  std::vector<SlotId> free_;  // taken from the back
};

}  // namespace h3::engine

#endif  // H3_ENGINE_SEQUENCE_MEMORY_H_
