// The packed-rows kernel's shift convolution on tensor cores
// (kernels/cuda/h3_rows_shift_mma.cuh), one warp on the CPU emulator
// (fibers.h; mma.h emulates mma.sync), against the tap-order sum in
// double: which tap meets which input (impulses, every tap of each), the
// precision of the two fp16 parts (one product an output, so a lost part is
// a visible 2^-12), and a dense tile. Compiled with device.h first.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/half_float.h"
#include "gtest/gtest.h"
#include "kernels/cuda/emulator/fibers.h"
#include "kernels/cuda/h3_rows_shift_mma.cuh"
#include "kernels/h3_chunked.h"

namespace h3::kernels::chunked {
namespace {

constexpr int kAll = kShiftTaps + kTile;  // the history, then the tile

struct ShiftCase {
  std::vector<float> taps;  // [kShiftTaps], zero past d_state
  std::vector<float> kf;    // [kAll]: kf[kShiftTaps + t] = k of token t
  float shift_d = 0.0f;
};

// kbar of the tile's kTile tokens by ScaleTaps and ShiftByRegisterMma on one
// warp; NaN where no lane wrote.
std::vector<float> RunWarp(ShiftCase c) {
  std::vector<__half> hi(kAll), lo(kAll);
  std::vector<float> kbar(kTile, NAN),
      slots(kAll);  // kf as the kernel keeps it
  for (int i = 0; i < kAll; ++i) slots[KfSlot(i)] = c.kf[i];
  const std::string error = emulator::Run(dim3(1), dim3(32), 0, [&] {
    const int et = ScaleTaps(c.taps.data());
    float mine[kLaneTokens];
    ShiftByRegisterMma(slots.data(), c.taps.data(), et, c.shift_d, hi.data(),
                       lo.data(), mine);
    for (int p = 0; p < kLaneTokens / 2; ++p) {
      for (int e = 0; e < 2; ++e) {
        kbar[MmaPairToken(threadIdx.x, p) + e] = mine[2 * p + e];
      }
    }
  });
  EXPECT_EQ(error, "");
  return kbar;
}

// Token t's sum in double; *scale: the sum of its terms' magnitudes;
// *peak: the largest tap times the largest input in its window.
void Want(const ShiftCase& c, int t, double* sum, double* scale, double* peak) {
  *sum = double{c.shift_d} * c.kf[kShiftTaps + t];
  *scale = std::fabs(*sum);
  double tap_max = 0, k_max = 0;
  for (int j = 0; j < kShiftTaps; ++j) {
    const double term = double{c.taps[j]} * c.kf[kShiftTaps + t - j];
    *sum += term;
    *scale += std::fabs(term);
    tap_max = std::fmax(tap_max, std::fabs(c.taps[j]));
    k_max = std::fmax(k_max, std::fabs(c.kf[kShiftTaps + t - j]));
  }
  *peak = tap_max * k_max;
}

// Taps of d_state ns spread over 2^-8 .. 1 in magnitude, none of them
// fp16-exact in general.
std::vector<float> RandomTaps(int ns, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-8.0f, 0.0f);
  std::vector<float> taps(kShiftTaps, 0.0f);
  for (int j = 0; j < ns; ++j) taps[j] = normal(rng) * std::exp2(exponent(rng));
  return taps;
}

float Fp16Value(float x) { return HalfToFloat(FloatToHalf(x)); }

// Inputs zero but for impulses at tokens 70 apart or more (one in the
// history), each at a different place in its column: every output then
// holds at most one tap's product, taps[t - p] k[p], and every tap meets
// every impulse. Within 2^-20 of the largest tap's product with k[p]: the
// two parts carry 22 bits of the largest tap and of k[p] (a tap 2^-8 of
// the largest has a subnormal lo part: 2^-25 of the largest, absolutely).
// A lost fp16 part of a tap or of an fp32 input is off by up to 2^-12.
TEST(RowsShiftMmaEmulatedTest, EveryTapMeetsItsInputInFullPrecision) {
  std::mt19937 rng(41);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const int ns : {64, 32}) {
    for (const bool fp16_inputs : {false, true}) {
      ShiftCase c{RandomTaps(ns, rng), std::vector<float>(kAll, 0.0f), 0.0f};
      for (const int p : {-50, 20, 91, 163, 240}) {
        const float k = 1.0f + 0.37f * normal(rng);
        c.kf[kShiftTaps + p] = fp16_inputs ? Fp16Value(k) : k;
      }
      const std::vector<float> got = RunWarp(c);
      for (int t = 0; t < kTile; ++t) {
        double want = 0, scale = 0, peak = 0;
        Want(c, t, &want, &scale, &peak);
        EXPECT_LE(std::fabs(got[t] - want), std::ldexp(peak, -20))
            << "token " << t << ", d_state " << ns
            << (fp16_inputs ? ", fp16 inputs" : ", fp32 inputs");
      }
    }
  }
}

// A dense tile and history of random inputs over 2^-6 .. 4 in magnitude,
// and the skip term: within 2^-14 of the sum of the terms' magnitudes (the
// fp32 accumulation of some 240 products by the emulator is within
// 240 * 2^-24 ~ 2^-16 of it at worst).
TEST(RowsShiftMmaEmulatedTest, DenseTileWithinFp32Accumulation) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-6.0f, 2.0f);
  for (const bool fp16_inputs : {false, true}) {
    ShiftCase c{RandomTaps(64, rng), std::vector<float>(kAll), 0.83f};
    for (float& k : c.kf) {
      k = normal(rng) * std::exp2(exponent(rng));
      if (fp16_inputs) k = Fp16Value(k);
    }
    const std::vector<float> got = RunWarp(c);
    for (int t = 0; t < kTile; ++t) {
      double want = 0, scale = 0, peak = 0;
      Want(c, t, &want, &scale, &peak);
      EXPECT_LE(std::fabs(got[t] - want), std::ldexp(scale, -14))
          << "token " << t;
    }
  }
}

// The lanes' pairs cover the tile's tokens once each.
TEST(RowsShiftMmaEmulatedTest, LanesPairsCoverTheTileOnce) {
  std::vector<int> seen(kTile, 0);
  for (int lane = 0; lane < 32; ++lane) {
    for (int p = 0; p < kLaneTokens / 2; ++p) {
      const int t = MmaPairToken(lane, p);
      ASSERT_EQ(t % 2, 0);
      ASSERT_LT(t + 1, kTile);
      ++seen[t];
      ++seen[t + 1];
    }
  }
  for (int t = 0; t < kTile; ++t) EXPECT_EQ(seen[t], 1) << "token " << t;
}

}  // namespace
}  // namespace h3::kernels::chunked
