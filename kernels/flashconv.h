#ifndef H3_KERNELS_FLASHCONV_H_
#define H3_KERNELS_FLASHCONV_H_

// The conventions of the fused H3 prefill
// (kernels/cuda/h3_prefill_fused_kernel.cu), shared with its host code and with
// the CPU emulation that checks the algorithm
// (kernels/cpu/flashconv_emulation_test.cc): chunk and FFT sizes, the two-level
// FFT's factors and index order, the DFT tables, the row order of the state
// matrices.

#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

namespace h3::kernels::flashconv {

constexpr int kMaxModes = 32;  // diagonal-SSM modes M (d_state <= 64)
// Shift-conv inputs kept across chunks, in position order: at the call's
// start the shift state's ring (the N = d_state inputs before it), after
// each chunk its last kHistory inputs; the end state is written from them.
constexpr int kHistory = 64;
static_assert(2 * kMaxModes <= kHistory, "the history must hold the ring");
constexpr int kStateTile = 256;  // tokens per column tile of the state sums
// The carried state's output builds its state matrix Z in this many runs of
// columns, each from a precomputed power of dA (flashconv_setup.h).
constexpr int kCarrySegments = 8;

// An FFT size n = n1 * n2 of the two-level (Monarch) decomposition; a chunk
// holds n / 2 tokens. n1 >= 32 so that the zero-padded half of the input,
// n1 / 2 rows, is whole 16-row tiles.
struct FftSize {
  int n, n1, n2;
};
constexpr int kNumFftSizes = 4;
constexpr FftSize kFftSizes[kNumFftSizes] = {
    {512, 32, 16}, {1024, 32, 32}, {2048, 32, 64}, {4096, 64, 64}};
constexpr int kMaxChunk = 2048;  // kFftSizes[last].n / 2

// The size a call of `length` tokens uses: the smallest n >= 2 length, else
// the largest (longer calls walk several chunks).
inline int FftSizeIndex(int64_t length) {
  int i = 0;
  while (i + 1 < kNumFftSizes && kFftSizes[i].n < 2 * length) ++i;
  return i;
}

// The spectrum in the order the middle products produce it: entry
// i = k1 * n2 + k2 holds frequency k1 + n1 * k2.
H3_HOST_DEVICE inline int PermutedFrequency(int i, int n1, int n2) {
  return i / n2 + n1 * (i % n2);
}

// Rows of the state matrices (E, P, Z) in groups of 8 modes: a 16-row tile
// holds the real parts of modes 8g .. 8g+7, then their imaginary parts.
H3_HOST_DEVICE inline int ModeRow(int m, int imag) {
  return 16 * (m / 8) + 8 * imag + m % 8;
}

// The DFT tables (fp64; the kernel rounds them to fp16):
//   f1 [2][n1][n1/2]: W_n1^(k1 j) / n1 for k1 < n1, j < n1 / 2;
//   f2 [2][n2][n2]:   W_n2^(i j) / n2;
// re plane then im plane, W_n = exp(-2 pi i / n).
template <typename StoreF1, typename StoreF2>
void DftTables(const FftSize& size, StoreF1 store_f1, StoreF2 store_f2) {
  const double pi = 3.14159265358979323846;
  auto entry = [&](int64_t e, int n, double* re, double* im) {
    const double angle = -2.0 * pi * static_cast<double>(e % n) / n;
    *re = std::cos(angle) / n;
    *im = std::sin(angle) / n;
  };
  const int n1 = size.n1, n2 = size.n2;
  double re, im;
  for (int k1 = 0; k1 < n1; ++k1) {
    for (int j = 0; j < n1 / 2; ++j) {
      entry(int64_t{k1} * j, n1, &re, &im);
      store_f1(k1 * (n1 / 2) + j, re);
      store_f1(n1 * (n1 / 2) + k1 * (n1 / 2) + j, im);
    }
  }
  for (int i = 0; i < n2; ++i) {
    for (int j = 0; j < n2; ++j) {
      entry(int64_t{i} * j, n2, &re, &im);
      store_f2(i * n2 + j, re);
      store_f2(n2 * n2 + i * n2 + j, im);
    }
  }
}

}  // namespace h3::kernels::flashconv

#endif  // H3_KERNELS_FLASHCONV_H_
