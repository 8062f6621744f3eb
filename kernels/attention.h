#ifndef H3_KERNELS_ATTENTION_H_
#define H3_KERNELS_ATTENTION_H_

// Causal multi-head attention of the hybrid model's attention layers
// (docs/model.md), over a per-sequence KV cache, with optional rotary
// embeddings in the GPT-NeoX "halves" convention. One sequence's chunk of new
// tokens at a time: a prefill chunk, or one decoding step (length 1).
//
// The input is the Wqkv product laid out [length, 3, heads, head_dim];
// queries attend to every cached position before them and to the new
// positions up to their own, with scale 1 / sqrt(head_dim). The CPU function
// is the specification; the CUDA kernels take the same Params.
//
// qkv and out hold elements of `io_type` (kF32, kF16 or kBF16): reading
// widens exactly to fp32, the arithmetic is the same for every io_type, and
// each output is rounded once (to nearest even) when stored, so a 16-bit
// result is the rounded fp32 result of the widened input. The KV cache holds
// elements of its own `type` (kF32, kF16 or kBF16): a new token's rotated key
// and value (computed in fp32) are rounded once to it where they are written,
// and every read widens exactly; so a 16-bit cache gives the bits of an fp32
// cache whose entries were rounded to that type.

#include <cstdint>

#include "base/element_type.h"

namespace h3::kernels {

struct AttentionShape {
  int heads = 0;
  int head_dim = 0;
  int rotary_dim = 0;  // 0: no rotary; else even and <= head_dim
  int d_model() const { return heads * head_dim; }
};

// A sequence's K/V cache for one attention layer: position i of the sequence
// (after rotary) at k[i][heads][head_dim], v likewise, elements of `type`.
// `type` comes last so that {k, v, capacity} still makes an fp32 cache.
struct KvCache {
  void* k = nullptr;                     // [capacity, heads, head_dim] of type
  void* v = nullptr;                     // [capacity, heads, head_dim] of type
  int64_t capacity = 0;                  // positions the cache can hold
  ElementType type = ElementType::kF32;  // kF32, kF16 or kBF16
};

// REQUIRES: start + length <= cache.capacity; positions [0, start) of the
// cache hold the sequence's earlier tokens. Writes the new tokens' rotated
// keys and values at [start, start + length) and their attention output.
struct AttentionParams {
  AttentionShape shape;
  int64_t start = 0;          // position of the first new token
  int64_t length = 0;         // new tokens
  const void* qkv = nullptr;  // [length, 3, heads, head_dim] of io_type
  const float* inv_freq =
      nullptr;  // [rotary_dim / 2]; null when rotary_dim = 0
  KvCache cache;
  void* out = nullptr;  // [length, heads * head_dim] of io_type
  ElementType io_type = ElementType::kF32;  // of qkv and out
};

// One decoding step of a batch of sequences, each at its own position with
// its own cache: for sequence b, what AttentionParams{shape, positions[b], 1,
// qkv + b * 3 d, inv_freq, caches[b], out + b * d, io_type} computes (offsets
// in elements of io_type). The arrays
// `caches` and `positions` live where the kernel runs (device memory for the
// CUDA kernel), so that one launch, or one captured graph, serves any batch
// of sequences. REQUIRES: positions[b] < caches[b].capacity; distinct
// sequences have distinct caches.
struct AttentionDecodeParams {
  AttentionShape shape;
  int batch = 0;
  const void* qkv = nullptr;           // [batch, 3, heads, head_dim] of io_type
  const float* inv_freq = nullptr;     // [rotary_dim / 2]; null without rotary
  const KvCache* caches = nullptr;     // [batch]
  const int64_t* positions = nullptr;  // [batch]: the new token's position
  void* out = nullptr;                 // [batch, heads * head_dim] of io_type
  ElementType io_type = ElementType::kF32;  // of qkv and out
};

// Rotates the first rotary_dim dims of one head vector `x` at `position`:
// for i < r/2, with angle = position * inv_freq[i] rounded to fp32 as the
// reference computes it, (x[i], x[i + r/2]) becomes
// (x[i] cos - x[i + r/2] sin, x[i + r/2] cos + x[i] sin).
void ApplyRotary(float* x, int rotary_dim, const float* inv_freq,
                 int64_t position);

// The CPU twins. Multi-threaded over heads (and query rows when long).
void AttentionCpu(const AttentionParams& params);
void AttentionDecodeCpu(const AttentionDecodeParams& params);

}  // namespace h3::kernels

#endif  // H3_KERNELS_ATTENTION_H_
