#ifndef H3_KERNELS_STREAM_SPLIT_GEMM_H_
#define H3_KERNELS_STREAM_SPLIT_GEMM_H_

// The decode product for many rows (docs/cuda-engine.md, "Decode products"):
// StreamGemm's operands, types, fragments and epilogue (kernels/stream_gemm.h)
// with the work cut differently, so that x is read from L2 once for every 128
// columns of W rather than once for every 16:
//
//   1. k is cut into steps of kStreamStep = 64 elements, and the steps into
//      `splits` contiguous shares: split q takes steps [StreamSplitFirstStep
//      (steps, splits, q), StreamSplitFirstStep(steps, splits, q + 1)).
//   2. The block of split q and column block b has kSplitWarps warps; warp w
//      owns the kSplitWarpCols = 32 columns 128 b + 32 w + [0, 32) (two MMA
//      tiles of 16) and takes the split's steps in increasing order, each as
//      StreamGemm's step: four MMAs, j = 0..3, the lane (g, t) holding the
//      elements StreamElement(t, j, half) of W's and x's rows. Its fp32
//      accumulator starts at 0.
//   3. The `splits` blocks of one column block form a thread-block cluster;
//      their partial sums meet in distributed shared memory and each output
//      is y = p_0 + p_1 + ... + p_{splits - 1}, left to right (p_q: split
//      q's accumulator), then bias and GELU (SkinnyGeluTanh), then rounded
//      to y_type.
//
// `splits` depends on n, k and the device's multiprocessor count
// (StreamSplitShapeFor), never on the rows, so the order of every output's
// sum is the same alone or in any batch of up to 64 at any position: batch
// invariance by construction, as StreamGemm's, with other bits than
// StreamGemm's (its k steps go to 8 warps in turn). StreamSplitGemmEmulation
// follows steps 1-3 with each MMA's sum taken in double, as
// StreamGemmEmulation does.

#include <cstdint>

#include "kernels/host_device.h"
#include "kernels/stream_gemm.h"

namespace h3::kernels {

constexpr int kSplitWarps = 4;      // warps of a block
constexpr int kSplitWarpCols = 32;  // output columns a warp owns
constexpr int kSplitBlockCols = kSplitWarps * kSplitWarpCols;
// The most blocks of a cluster that every device with clusters takes.
constexpr int kSplitMaxSplits = 8;
// Fewer steps a split would leave each block's launch and last round trip
// a large part of its time.
constexpr int kSplitMinSteps = 2;

// How StreamSplitGemmCuda cuts a product of n columns and depth k (and
// TileGemmCuda, with its own block width and step: kernels/tile_gemm.h).
struct StreamSplitShape {
  int64_t col_blocks = 0;  // ceil(n / kSplitBlockCols)
  int64_t steps = 0;       // ceil(k / kStreamStep)
  int splits = 1;          // blocks of a cluster, shares of the steps
};

// Enough blocks for two a multiprocessor: splits = (2 multiprocessors) /
// col_blocks, at least 1, at most kSplitMaxSplits and steps /
// kSplitMinSteps. n, k and multiprocessors alone decide it.
StreamSplitShape StreamSplitShapeFor(int64_t n, int64_t k, int multiprocessors);

// The first step of split q (q = splits: one past the last step).
H3_HOST_DEVICE constexpr int64_t StreamSplitFirstStep(int64_t steps, int splits,
                                                      int q) {
  return steps * q / splits;
}

// A block's partial sums, as its warps leave them in shared memory for the
// cluster: [kSplitWarps][2 W tiles][tiles][4 accumulators][32 lanes] floats
// for `tiles` tiles of 8 x rows. Warp w's accumulator c of W tile h and row
// tile r in lane (g, t) = (lane / 4, lane % 4) is entry
// StreamSplitEntryIndex(w, h, r, c, lane, tiles); by the MMA's C fragment
// it holds the output of W row (column of y) 32 w + 16 h + g + 8 (c / 2)
// of the block and x row 8 r + 2 t + c % 2.
H3_HOST_DEVICE constexpr int StreamSplitEntries(int tiles) {
  return kSplitWarps * 2 * tiles * 4 * 32;
}
H3_HOST_DEVICE constexpr int StreamSplitEntryIndex(int warp, int tile, int r,
                                                   int c, int lane, int tiles) {
  return (((warp * 2 + tile) * tiles + r) * 4 + c) * 32 + lane;
}
struct StreamSplitOutput {
  int row = 0;  // of x and y
  int col = 0;  // of y, within the block's kSplitBlockCols
};
H3_HOST_DEVICE constexpr StreamSplitOutput StreamSplitEntryOutput(int f,
                                                                  int tiles) {
  const int lane = f % 32, c = f / 32 % 4, r = f / 128 % tiles;
  const int tile = f / (128 * tiles) % 2, warp = f / (256 * tiles);
  return {8 * r + 2 * (lane % 4) + c % 2,
          warp * kSplitWarpCols + 16 * tile + lane / 4 + 8 * (c / 2)};
}

// Block q of a cluster of `splits` sums the entries [StreamSplitShare(q),
// StreamSplitShare(q + 1)) over the splits.
H3_HOST_DEVICE constexpr int StreamSplitShare(int tiles, int splits, int q) {
  return StreamSplitEntries(tiles) * q / splits;
}

// The specification, on the host, for a given split count. REQUIRES:
// StreamGemmCheck(p, false) is "", 1 <= splits.
void StreamSplitGemmEmulation(const StreamGemmParams& p, int splits);

}  // namespace h3::kernels

#endif  // H3_KERNELS_STREAM_SPLIT_GEMM_H_
