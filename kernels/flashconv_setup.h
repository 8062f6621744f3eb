#ifndef H3_KERNELS_FLASHCONV_SETUP_H_
#define H3_KERNELS_FLASHCONV_SETUP_H_

// The fused H3 prefill's tables that depend only on a layer's weights,
// computed once on the host at load (H3PrefillFused::Create uploads them),
// so that no thread block of the kernel
// (kernels/cuda/h3_prefill_fused_kernel.cu) recomputes them. The CPU
// emulation (kernels/cpu/flashconv_emulation_test.cc) runs the algorithm on
// the same tables. Everything is computed in double and rounded once, to
// float or (through float, as the kernel did) to fp16.
//
// Plain C++17 (nvcc compiles the kernel's side of it).

#include <cstdint>
#include <vector>

#include "kernels/flashconv.h"
#include "kernels/h3.h"

namespace h3::kernels::flashconv {

// One channel's setup, as the kernel keeps it in shared memory for the
// whole segment. The kernel copies it with 16-byte loads, hence the
// alignment and the size (a multiple of 16: 5136 bytes). Modes m >= M =
// d_state / 2 (and their rows ModeRow(m, .)) are zero. Complex numbers are
// (re, im) pairs.
struct alignas(16) ChannelSetup {
  // P[j][m] = C dA^(j+1) / scale_p, fp16 bits: column ModeRow(m, 0) holds
  // Re P, column ModeRow(m, 1) holds -Im P (Re(P Z) = Pr Zr - Pi Zi).
  uint16_t pcat[16][2 * kMaxModes];
  // E[m][i] = dA^(15-i) dB / scale_e, fp16 bits: row ModeRow(m, 0) holds
  // Re E, row ModeRow(m, 1) holds Im E.
  uint16_t ecat[2 * kMaxModes][16];
  float dA16[kMaxModes][2];   // dA^16
  float dA256[kMaxModes][2];  // dA^256
  double log_r[kMaxModes];    // dA = exp(log_r + i theta)
  double theta[kMaxModes];
  float scale_p;  // the largest |Re|, |Im| of P (0 when P is zero)
  float scale_e;  // ... of E
  float unused[2];
};
static_assert(sizeof(ChannelSetup) % 16 == 0, "copied with 16-byte loads");
static_assert(sizeof(ChannelSetup) == 5136, "the size docs/flashconv.md gives");

// z^n for z = exp(log_r + i theta), in double, rounded once to float: the
// kernel's PowPolar on the host.
void PowPolar(double log_r, double theta, double n, float out[2]);

// The setup of every channel: [H] records.
// REQUIRES: w.shape.head_dim == 1, d_state a multiple of 16 up to 64 (the
// fused kernel's domain); w.dA, w.dB and w.C are host arrays (the other
// pointers are not read).
std::vector<ChannelSetup> ChannelSetups(const H3Weights& w);

// CarriedOutput's starting powers and EndState's decay of a whole chunk, for
// chunk = size.n / 2: [H][kCarrySegments][M] (re, im) floats, entry
// [c][g - 1][m] = dA^(g chunk / kCarrySegments) of channel c, mode m, for
// g = 1 .. kCarrySegments (g = kCarrySegments is dA^chunk). Same REQUIRES.
std::vector<float> ChunkPowers(const H3Weights& w, const FftSize& size);

// The forward twiddles of size n = n1 n2: [n1][n2] (re, im) floats, entry
// [k1][k2] = W_n^(k1 k2), W_n = exp(-2 pi i / n). The inverse uses their
// conjugates at the same index.
std::vector<float> TwiddleTable(const FftSize& size);

}  // namespace h3::kernels::flashconv

#endif  // H3_KERNELS_FLASHCONV_SETUP_H_
