#ifndef H3_KERNELS_STREAM_GEMM_H_
#define H3_KERNELS_STREAM_GEMM_H_

// The decode product on tensor cores (docs/cuda-engine.md, "Decode
// products"): for 1 to 64 rows and 16-bit weights,
//
//   y[rows, n] = epilogue(x[rows, k] W^T + bias),  W [n, k] row-major,
//
// streaming W from memory once, in 16-byte loads, into mma.sync.m16n8k16
// (W's 16 columns n as the MMA's rows, x's rows as its 8 columns), fp32
// accumulation. x is fp32 (rounded to W's type in registers, as cuBLASLt's
// route rounds it into scratch) or W's type; y is fp32 or W's type, the
// epilogue's fp32 result rounded once; the bias is fp32 or y's 16-bit type,
// widened exactly.
//
// The order of every output's sum depends on k alone, never on rows, the
// row's index or n, so a row's result is bitwise the same alone or in any
// batch and position (batch invariance by construction):
//   1. k is cut into steps of kStreamStep = 64 elements; step s belongs to
//      warp s mod kStreamWarps of the block that owns the output's 16
//      columns. Elements past k count as x = W = 0.
//   2. In a step, lane (g, t) = (lane / 4, lane % 4) holds elements
//      [64 s + 16 t, 64 s + 16 t + 16) of W's rows 16 b + g and 16 b + g + 8
//      and of x's rows 8 r + g (StreamElement gives which element fills
//      which slot of which MMA's fragment). The step is four MMAs, j = 0..3,
//      each adding 16 products of every output into its fp32 accumulator.
//   3. The warps' accumulators are summed in warp order 0, 1, ..., 7,
//      starting from warp 0's, then bias is added and GELU (SkinnyGeluTanh)
//      applied, then y is rounded to y_type.
// The MMA's own summation of 16 products is the hardware's and the same for
// every output; StreamGemmEmulation (kernels/cpu/stream_gemm.cc) follows
// steps 1-3 with each MMA's sum taken in double, so it checks the indexing,
// the tails and the epilogue, not the MMA's last bits.

#include <cstdint>

#include "base/element_type.h"
#include "kernels/host_device.h"
#include "kernels/skinny_gemm.h"

namespace h3::kernels {

constexpr int kStreamStep = 64;    // k elements a warp takes at a time
constexpr int kStreamWarps = 8;    // warps of a block, each a share of k
constexpr int kStreamCols = 16;    // output columns (n) a block owns
constexpr int kStreamRowTile = 8;  // x rows per MMA
constexpr int64_t kStreamMaxRows = 64;

// Where a fragment value comes from: MMA j (0..3) of a step, in lane
// (g, t), register `reg` (0..3) of the A fragment (W) holds elements e and
// e + 1 of row 16 b + g + 8 (reg & 1) with e = 64 s + 16 t + 4 j + 2 (reg >>
// 1); register `reg` (0..1) of the B fragment (x) holds elements e and e + 1
// of x's row 8 r + g with e = 64 s + 16 t + 4 j + 2 reg. In the MMA's own
// layout, A's register reg covers its k = 2 t + 8 (reg >> 1) and B's register
// reg its k = 2 t + 8 reg: the same k for the same element, so the product
// pairs W and x of one element. The offset of that pair within the step:
H3_HOST_DEVICE constexpr int StreamElement(int t, int j, int half) {
  return 16 * t + 4 * j + 2 * half;
}

// The skinny product's operands (kernels/skinny_gemm.h, SkinnyGemmParams:
// x, W, bias, y with their types, rows, n, k, gelu). REQUIRES (else
// StreamGemmCheck names what is wrong): 0 <= rows <= kStreamMaxRows, n >= 0,
// k >= 1 and k a multiple of 8; w_type kF16 or kBF16; x_type kF32 or
// w_type; y_type kF32 or w_type; bias_type kF32, or y_type when y_type is
// 16-bit; x, w and y 16-byte aligned; y overlaps neither x, w nor bias.
using StreamGemmParams = SkinnyGemmParams;

// "" when `p` meets the REQUIRES above (the pointers' alignment is checked
// only when `check_alignment`: the emulation takes any), else the broken
// rule with the field and its limit.
const char* StreamGemmCheck(const StreamGemmParams& p, bool check_alignment);

// The specification, on the host. REQUIRES: StreamGemmCheck(p, false) is "".
void StreamGemmEmulation(const StreamGemmParams& p);

// Step 3's epilogue on the host, for the emulations of this product and of
// its split and tile kernels: y[r, j] = sum plus the bias, through GELU
// where p.gelu, rounded to y_type.
void StreamGemmFinish(const StreamGemmParams& p, int64_t r, int64_t j,
                      float sum);

}  // namespace h3::kernels

#endif  // H3_KERNELS_STREAM_GEMM_H_
