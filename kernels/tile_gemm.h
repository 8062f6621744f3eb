#ifndef H3_KERNELS_TILE_GEMM_H_
#define H3_KERNELS_TILE_GEMM_H_

// The decode product for a batch (docs/cuda-engine.md, "Tiles through
// shared memory"): StreamGemm's operands, rules and epilogue
// (kernels/stream_gemm.h) with x in W's 16-bit type, cut for up to 64 rows
// so that every byte of W is read once and x once per 64 columns:
//
//   1. k is cut into steps of kTileStep = 64 elements, and the steps into
//      `splits` contiguous shares (StreamSplitFirstStep, as the split
//      kernel's): split q takes steps [first_q, first_(q + 1)).
//   2. The block of split q and column block b owns the `cols` (64 or
//      128) columns cols b + [0, cols) and every row. For each step of its
//      share in increasing order, and in the step for j = 0..3, it adds the 16
//      products of elements 64 s + 16 j + [0, 16) to each output's fp32
//      accumulator (one mma.sync.m16n8k16: W's columns as the MMA's rows,
//      x's rows as its columns, elements in their natural order as the
//      MMA's k). Elements past k count as x = W = 0. The accumulator starts
//      at 0.
//   3. The `splits` blocks of a column block form a thread-block cluster;
//      each output is y = p_0 + p_1 + ... + p_(splits - 1), left to right
//      (p_q: split q's accumulator), then bias and GELU (SkinnyGeluTanh),
//      then rounded to y_type, as StreamGemm's step 3.
//
// `splits` depends on n, k and what the device holds at once
// (TileGemmShapeFor), never on the rows, so a row's bits are the same alone
// or in any batch of up to 64 at any position: batch invariance by
// construction, with other bits than StreamGemm's or the split kernel's.
// TileGemmEmulation follows steps 1 to 3 with each MMA's 16 products added
// in fp32 in k order, as the CPU emulator's MMA does (the products of two
// 16-bit values are exact in fp32), so the emulated kernel gives its bits; a
// GPU's tensor cores add the 16 in their own order.

#include <cstdint>

#include "kernels/stream_gemm.h"
#include "kernels/stream_split_gemm.h"  // StreamSplitShape, StreamSplitFirstStep

namespace h3::kernels {

constexpr int kTileStep = 64;  // k elements of a pipeline stage
// Output columns (n) a block owns: kTileCols (4 warps) or kTileWideCols (8
// warps, which read x once per 128 columns instead of 64).
constexpr int kTileCols = 64;
constexpr int kTileWideCols = 128;
// The most blocks of a cluster that every device with clusters takes.
constexpr int kTileMaxSplits = 8;
// A split's fewest steps: fewer would leave its block's pipeline (3 or 4
// stages) no steps to overlap.
constexpr int kTileMinSteps = 4;

// How TileGemmCuda cuts a product of n columns and depth k: the split
// kernel's fields, with col_blocks = ceil(n / cols) and steps = ceil(k /
// kTileStep), and the block's width `cols` (kTileCols or kTileWideCols).
// The width changes no bits: an output's sums depend on the splits alone.
struct TileGemmShape : StreamSplitShape {
  int cols = kTileCols;
};

// What the device holds at once of TileGemmCuda's kernel of one width:
// `blocks` in all (blocks a multiprocessor times multiprocessors), and
// clusters[s] clusters of s blocks (s = 2 .. kTileMaxSplits; a cluster's
// blocks share a GPC, so this may be fewer than blocks / s; 0 where the
// runtime does not say). Asked of the device for the width's 64-row
// instance, so that every row count gets the same answer.
struct TileGemmDevice {
  int64_t blocks = 0;
  int64_t clusters[kTileMaxSplits + 1] = {};
};

// For blocks `cols` wide: the most splits s (1 .. kTileMaxSplits) such
// that the grid of col_blocks x s blocks runs in one wave (col_blocks x s
// <= blocks and col_blocks <= clusters[s]) and each split has at least
// kTileMinSteps steps; 1 when none does. n, k and the device alone decide
// it.
TileGemmShape TileGemmShapeFor(int64_t n, int64_t k,
                               const TileGemmDevice& device,
                               int cols = kTileCols);

// The shape of the width whose first wave holds more warps (min(grid,
// device blocks) x cols / 16), TileGemmShapeFor's for each width; the
// narrow one at a tie (the H3-1.3B shape on 132 multiprocessors: the wide
// blocks for q|k|v, fc1 and the LM head, the narrow for out and fc2). n, k
// and the two devices alone decide it, so a row's bits stay the same in
// any batch.
TileGemmShape TileGemmChooseShape(int64_t n, int64_t k,
                                  const TileGemmDevice& narrow,
                                  const TileGemmDevice& wide);

// "" when TileGemmCuda takes `p`: StreamGemmCheck(p, check_alignment) is ""
// and x_type is w_type; else the broken rule with the field.
const char* TileGemmCheck(const StreamGemmParams& p, bool check_alignment);

// The specification, on the host, for a given split count. REQUIRES:
// TileGemmCheck(p, false) is "", 1 <= splits.
void TileGemmEmulation(const StreamGemmParams& p, int splits);

}  // namespace h3::kernels

#endif  // H3_KERNELS_TILE_GEMM_H_
