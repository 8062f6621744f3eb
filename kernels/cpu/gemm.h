#ifndef H3_KERNELS_CPU_GEMM_H_
#define H3_KERNELS_CPU_GEMM_H_

// The CPU backend's matrix product y[rows, n] = x[rows, k] W^T, W [n, k]
// (the PyTorch Linear layout), for any number of rows: one decode row, a
// prefill chunk, or both packed into one step. Its promise is row
// invariance: a row's result is bitwise the same whatever else is in the
// call, so a request's tokens never depend on its batch.
//
// W is packed once, at load time (GemmPack), into panels of kGemmPanel
// columns:
//   packed[p][i][c] = W[p * kGemmPanel + c][i]   // [GemmPanels(n)][k][32]
// with the last panel's missing columns zero. A micro-kernel then reads one
// contiguous stream of W per panel and keeps a tile of rows x panel columns
// in vector registers.

#include <cstdint>

namespace h3::kernels {

// Columns per panel: two AVX-512 or four AVX2 vectors.
inline constexpr int64_t kGemmPanel = 32;

// Panels that hold n columns: ceil(n / kGemmPanel). REQUIRES: n >= 0.
inline constexpr int64_t GemmPanels(int64_t n) {
  return (n + kGemmPanel - 1) / kGemmPanel;
}

// Floats of the packed form of a [n, k] matrix. REQUIRES: n, k >= 0.
inline constexpr int64_t GemmPackedFloats(int64_t n, int64_t k) {
  return GemmPanels(n) * k * kGemmPanel;
}

// Writes the packed form of w [n, k] (row-major, contiguous) to `packed`,
// which holds GemmPackedFloats(n, k) floats and does not overlap w. Every
// float of `packed` is written (padding with +0). Single-threaded.
void GemmPack(const float* w, int64_t n, int64_t k, float* packed);

// Reads row `row` of W (k floats) back from its packed form into out, exactly
// (a copy). REQUIRES: 0 <= row < n; out holds k floats.
void GemmUnpackRow(const float* packed, int64_t n, int64_t k, int64_t row,
                   float* out);

// y[r][j] = sum_i x[r][i] * W[j][i] for every row r in [0, rows) and every
// column j in [panel_begin * kGemmPanel, min(n, panel_end * kGemmPanel)).
// Nothing else of y is read or written.
//
// THE SUMMATION ORDER, and with it the invariance guarantee: every y[r][j]
// is exactly
//   acc = +0.0f;  for i = 0, 1, ..., k-1:  acc = fmaf(x[r][i], W[j][i], acc)
// (one fused multiply-add, one rounding, per term, in order of i; k == 0
// gives +0). That sequence depends on nothing but row r of x and row j of W:
// not on rows, not on r, not on the panel range, not on the thread, and not
// on which instruction set (GemmSelectedIsa) runs it. So each output row is
// bitwise identical alone or in a call of any size, at any index, under any
// split of the panels across threads. The kernels' register tiles, row and
// column remainders, k blocking (partial sums kept in y, stored and reloaded
// exactly) and zero padding never change it. It assumes every thread runs
// in the default floating-point environment (round to nearest, denormals
// kept); a thread with another would compute its columns differently.
//
// Single-threaded over the chosen panels: callers split [0, GemmPanels(n))
// across threads (ParallelFor) with disjoint ranges; no K-splitting. Calls
// that write disjoint parts of y may run concurrently. Fast for any rows: a
// call of up to 240 rows reads W from memory once (up to 12 rows, the
// AVX-512 tile, as one sequential stream per panel); more rows reuse each
// block of W from L1 across row tiles. Keeps a per-thread scratch of up to
// 240 x k floats (x repacked).
//
// REQUIRES: x [rows, k] and y [rows, n] row-major and contiguous; `packed` is
// GemmPack of W [n, k]; y overlaps neither x nor packed;
// 0 <= panel_begin <= panel_end <= GemmPanels(n); rows, n, k >= 0.
void GemmCpu(const float* x, const float* packed, float* y, int64_t rows,
             int64_t n, int64_t k, int64_t panel_begin, int64_t panel_end);

// The instruction sets GemmCpu has kernels for. Each runs the same sequence
// of operations per element (above), so they agree bitwise; they differ only
// in speed.
enum class GemmIsa { kPortable, kAvx2, kAvx512 };

// "portable", "avx2" or "avx512".
const char* GemmIsaName(GemmIsa isa);

// Whether this build and this CPU can run `isa`'s kernels.
bool GemmIsaSupported(GemmIsa isa);

// The fastest supported set: the one GemmCpu uses, chosen once per process.
GemmIsa GemmSelectedIsa();

// GemmCpu with the given instruction set (tests compare the sets bitwise).
// REQUIRES: GemmIsaSupported(isa); the rest as GemmCpu.
void GemmCpuWithIsa(GemmIsa isa, const float* x, const float* packed, float* y,
                    int64_t rows, int64_t n, int64_t k, int64_t panel_begin,
                    int64_t panel_end);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CPU_GEMM_H_
