#ifndef H3_KERNELS_FLASH_ATTENTION_H_
#define H3_KERNELS_FLASH_ATTENTION_H_

// Prefill attention on tensor cores, the FlashAttention-2 algorithm
// (docs/cuda-engine.md, "Attention kernels"): the conventions shared by the
// CUDA kernel (kernels/cuda/flash_attention*.cu) and its CPU emulation
// (kernels/cpu/flash_attention_emulation.cc), which CI runs against
// AttentionCpu.
//
// What it computes is AttentionCpu's causal attention (kernels/attention.h)
// for several sequences' chunks at once, with these roundings: rotated
// queries, rotated keys (as the fp32 cache holds them) and values rounded to
// the half type (fp16 or bf16; a 16-bit cache of that type already holds
// them rounded, and its tiles are copied); scores S = Q K^T summed in fp32; the online
// softmax in fp32 over key tiles of kKeyTile, in base 2; the weights P
// rounded to the half type before P V, summed in fp32; each row's
// denominator sums the rounded weights, so the output is exactly a convex
// combination of the rounded values up to fp32 rounding.
//
// Per query row r (position pos) and key tile t (keys [t kKeyTile,
// (t + 1) kKeyTile), those <= pos visible):
//   x_j   = fp32(S_rj * ScoreScaleLog2(head_dim))     (masked: -inf)
//   m'    = max(m, max_j x_j);  c = exp2(m - m')       (first tile: c = 0)
//   p_j   = half(exp2(x_j - m'))
//   l     = l c + sum_j p_j;   o = o c + sum_j p_j v_j;   m = m'
// and out_r = o / l after the last tile. Tiles past a row's position change
// nothing (c = 1, p = 0), so the row's result does not depend on which
// query tile it sits in.

#include <cmath>
#include <cstdint>

#include "base/element_type.h"
#include "kernels/attention.h"

namespace h3::kernels::flash {

constexpr int kQueryTile = 64;  // query rows per block: 4 warps x 16 rows
constexpr int kKeyTile = 64;    // keys per step of the online softmax
constexpr int kWarps = kQueryTile / 16;  // one m16 MMA row block per warp
// Sequences per launch: their descriptors travel in the kernel's parameter
// block (56 bytes each, under the 4 KiB limit); more take several launches.
constexpr int kMaxSequencesPerLaunch = 32;

// One sequence's chunk in a packed batch of rows.
struct Sequence {
  int64_t start = 0;   // position of the chunk's first token
  int64_t length = 0;  // tokens in the chunk
  int64_t row = 0;     // the chunk's first row in qkv and out
  KvCache cache;       // REQUIRES: start + length <= cache.capacity
};

// REQUIRES: positions [0, start) of each sequence's cache hold its earlier
// tokens' rotated keys and values; distinct sequences have distinct caches.
// Writes each chunk's rotated keys and values at [start, start + length) of
// its cache and its outputs at its rows of `out`.
struct Params {
  AttentionShape shape;
  ElementType type = ElementType::kF16;  // kF16 or kBF16: the MMA operands
  int sequences = 0;
  const Sequence* seqs = nullptr;   // [sequences], host memory
  const void* qkv = nullptr;        // [rows, 3, heads, head_dim] of io_type
  const float* inv_freq = nullptr;  // [rotary_dim / 2]; null without rotary
  void* out = nullptr;              // [rows, heads * head_dim] of io_type
  // kF32, kF16 or kBF16: the elements of qkv and out (read widened exactly,
  // each output rounded once to nearest even at the store, as AttentionCpu
  // does with its io_type); independent of the operand `type`.
  ElementType io_type = ElementType::kF32;
};

// Head dims with a kernel instance: those of the model presets (64 up to
// h3-355m, 128 from h3-1.3b).
inline bool SupportedHeadDim(int head_dim) {
  return head_dim == 64 || head_dim == 128;
}
inline bool SupportedType(ElementType type) {
  return type == ElementType::kF16 || type == ElementType::kBF16;
}

// 1 / sqrt(head_dim) * log2(e), rounded once to fp32: scores scaled by it
// are in base 2, so the softmax uses exp2.
inline float ScoreScaleLog2(int head_dim) {
  return static_cast<float>(1.4426950408889634 /
                            std::sqrt(static_cast<double>(head_dim)));
}

// The CPU emulation of the kernel's algorithm and roundings (above), one
// row at a time, single-threaded over nothing: plain loops. Same Params,
// host pointers. For tests; it is slow.
void FlashAttentionEmulation(const Params& params);

}  // namespace h3::kernels::flash

#endif  // H3_KERNELS_FLASH_ATTENTION_H_
