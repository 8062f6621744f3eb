// The chunked GPU prefill's algorithm (kernels/h3_chunked.h,
// kernels/cuda/h3_prefill_chunked_kernel.cu), emulated on the CPU step by
// step with the kernel's tables (kernels/flashconv_setup.h: P, E, dA^16;
// kernels/h3_chunked.h: T) and fp16 roundings, against the CPU twin
// H3PrefillCpu. It checks the algebra (the column states, P X, T U, the
// partial last column, the ring and the history across tiles) and the error
// that fp16 tensor-core operands cost; the gpu-labelled kernels_cuda_test
// checks the CUDA mechanics against the same twin.
#include <algorithm>
#include <cmath>
#include <complex>
#include <random>
#include <tuple>
#include <vector>

#include "base/half_float.h"
#include "gtest/gtest.h"
#include "kernels/flashconv.h"
#include "kernels/flashconv_setup.h"
#include "kernels/h3.h"
#include "kernels/h3_chunked.h"
#include "tests/support/h3_emulation_checks.h"
#include "tests/support/random_h3_layer.h"

namespace h3::kernels {
namespace {

namespace fc = flashconv;
namespace ch = chunked;
using cfloat = std::complex<float>;

float Half(float x) { return static_cast<float>(static_cast<_Float16>(x)); }

float FromBits(uint16_t bits) { return HalfToFloat(bits); }

// One channel's prefill of `length` tokens at positions [start, start +
// length), as the kernel computes it (shift_mma: its kShiftMma variant).
// q, k, v, out: the channel's values; ring [N] and diag [M] complex in place.
class Emulator {
 public:
  Emulator(const H3Weights& w, int c, const fc::ChannelSetup& setup,
           const ch::ChunkedChannel& toeplitz, bool shift_mma)
      : w_(w),
        c_(c),
        modes_(w.shape.modes()),
        s_(setup),
        t_(toeplitz),
        shift_mma_(shift_mma),
        taps_h_(ch::kShiftTaps, 0.0f) {
    // The A_r blocks' values: taps / 2^et in fp16 (zero past N).
    const int ns = w.shape.d_state;
    float most = 0;
    for (int j = 0; j < ns; ++j) {
      most = std::max(most, std::abs(w.shift_kernel[c * ns + j]));
    }
    et_ = ch::ScaleExponent(most);
    for (int j = 0; j < ns; ++j) {
      taps_h_[j] = Half(std::ldexp(w.shift_kernel[c * ns + j], -et_));
    }
  }

  void Run(int64_t start, int64_t length, const float* q, const float* k,
           const float* v, float* out, float* ring, float* diag) {
    const int ns = w_.shape.d_state;
    std::vector<float> history(fc::kHistory, 0.0f);
    for (int m = 1; m <= ns; ++m) {
      if (start - m >= 0) history[fc::kHistory - m] = ring[(start - m) % ns];
    }
    std::vector<cfloat> x(modes_);
    for (int m = 0; m < modes_; ++m) x[m] = {diag[2 * m], diag[2 * m + 1]};
    for (int64_t offset = 0; offset < length; offset += ch::kTile) {
      const int len =
          static_cast<int>(std::min<int64_t>(ch::kTile, length - offset));
      // The shift convolution and u = kbar v: fp32, taps in order; or
      // (shift_mma) fp16 taps / 2^et times fp16 k / 2^ek summed in fp32 and
      // scaled back, 2^ek over the tile's k and its history.
      std::vector<float> kf(fc::kHistory + ch::kTile, 0.0f), u(ch::kTile, 0);
      std::copy(history.begin(), history.end(), kf.begin());
      for (int t = 0; t < len; ++t) kf[fc::kHistory + t] = k[offset + t];
      std::vector<float> kh(kf.size());
      float k_most = 0;
      for (float x : kf) k_most = std::max(k_most, std::abs(x));
      const int ek = ch::ScaleExponent(k_most);
      for (size_t i = 0; i < kf.size(); ++i)
        kh[i] = Half(std::ldexp(kf[i], -ek));
      float u_max = 0;
      for (int t = 0; t < len; ++t) {
        const float* kt = kf.data() + fc::kHistory + t;
        float sum = w_.shift_D[c_] * kt[0];
        if (shift_mma_) {
          const float* kht = kh.data() + fc::kHistory + t;
          float acc = 0;
          for (int j = 0; j < ch::kShiftTaps; ++j) acc += taps_h_[j] * kht[-j];
          sum += std::ldexp(acc, ek + et_);
        } else {
          for (int j = 0; j < ns; ++j)
            sum += w_.shift_kernel[c_ * ns + j] * kt[-j];
        }
        u[t] = sum * v[offset + t];
        u_max = std::max(u_max, std::abs(u[t]));
      }
      std::copy(kf.begin() + len, kf.begin() + len + fc::kHistory,
                history.begin());
      const float u_inv = u_max > 0 ? 1.0f / u_max : 0.0f;
      std::vector<float> uh(ch::kTile);  // U: column g holds 16 g .. 16 g + 15
      for (int t = 0; t < ch::kTile; ++t) uh[t] = Half(u[t] * u_inv);
      // The column states X_g (before column g), then the end state.
      std::vector<std::vector<cfloat>> xs(ch::kColumns,
                                          std::vector<cfloat>(modes_));
      const float r_scale = u_max * s_.scale_e;
      std::vector<cfloat> next(modes_);
      for (int m = 0; m < modes_; ++m) {
        const cfloat a16(s_.dA16[m][0], s_.dA16[m][1]);
        cfloat state = x[m];
        for (int g = 0; g < ch::kColumns; ++g) {
          xs[g][m] = state;
          state = a16 * state + cfloat(Row(fc::ModeRow(m, 0), g, uh),
                                       Row(fc::ModeRow(m, 1), g, uh)) *
                                    r_scale;
        }
        next[m] = len == ch::kTile ? state : PartialEnd(m, len, xs, u);
      }
      float x_max = 0;
      for (const auto& column : xs) {
        for (const cfloat& z : column) {
          x_max = std::max({x_max, std::abs(z.real()), std::abs(z.imag())});
        }
      }
      const float x_inv = x_max > 0 ? 1.0f / x_max : 0.0f;
      // Y = 2 Re(P X) + T U + D u, and the gate.
      const float p_scale = 2.0f * s_.scale_p * x_max;
      const float t_scale = t_.scale_t * u_max;
      for (int t = 0; t < len; ++t) {
        const int g = t / ch::kColumn, j = t % ch::kColumn;
        float carried = 0, conv = 0;
        for (int m = 0; m < modes_; ++m) {
          carried += FromBits(s_.pcat[j][fc::ModeRow(m, 0)]) *
                         Half(xs[g][m].real() * x_inv) +
                     FromBits(s_.pcat[j][fc::ModeRow(m, 1)]) *
                         Half(xs[g][m].imag() * x_inv);
        }
        for (int i = 0; i <= j; ++i) {
          conv += FromBits(t_.t16[j][i]) * uh[ch::kColumn * g + i];
        }
        const float y = p_scale * carried + t_scale * conv + w_.D[c_] * u[t];
        out[offset + t] = q[offset + t] * y;
      }
      x = next;
    }
    for (int m = 0; m < modes_; ++m) {
      diag[2 * m] = x[m].real();
      diag[2 * m + 1] = x[m].imag();
    }
    const int64_t last = start + length - 1;
    const int written = static_cast<int>(std::min<int64_t>(length, ns));
    for (int j = 0; j < written; ++j) {
      ring[(last - j) % ns] = history[fc::kHistory - 1 - j];
    }
  }

 private:
  // (E U)[row][g], fp32 sums of fp16 products.
  float Row(int row, int g, const std::vector<float>& uh) const {
    float sum = 0;
    for (int i = 0; i < ch::kColumn; ++i) {
      sum += FromBits(s_.ecat[row][i]) * uh[ch::kColumn * g + i];
    }
    return sum;
  }

  // The state after `len` tokens of a partial tile: the last whole
  // column's state, then the rest of the tokens one by one in fp32.
  cfloat PartialEnd(int m, int len, const std::vector<std::vector<cfloat>>& xs,
                    const std::vector<float>& u) const {
    const int g = len / ch::kColumn, rest = len % ch::kColumn;
    if (rest == 0) return xs[g][m];
    const int i = c_ * modes_ + m;
    const cfloat da(w_.dA[2 * i], w_.dA[2 * i + 1]);
    const cfloat db(w_.dB[2 * i], w_.dB[2 * i + 1]);
    cfloat state = xs[g][m];
    for (int t = ch::kColumn * g; t < len; ++t) state = da * state + db * u[t];
    return state;
  }

  const H3Weights& w_;
  const int c_, modes_;
  const fc::ChannelSetup& s_;
  const ch::ChunkedChannel& t_;
  const bool shift_mma_;
  std::vector<float> taps_h_;  // [kShiftTaps]
  int et_ = 0;
};

// Output and diagonal-state bounds on normalised errors (max |got - want| /
// max |want|). Measured: see RecordProperty; fp16 operands (2^-11 relative)
// in sums of up to 64 products, and the state's scale shared by a tile.
constexpr double kOutputBound = 5e-3;
constexpr double kStateBound = 1e-3;

// The emulated kernel (shift_mma: its kShiftMma variant) on tokens [first,
// first + length) of q, k, v ([total, d]) at positions [start, start +
// length); writes those tokens.
h3::testing::EmulatedPrefill PrefillEmulated(bool shift_mma) {
  return [shift_mma](const H3Weights& w, int64_t start, int64_t first,
                     int64_t length, const std::vector<float>& q,
                     const std::vector<float>& k, const std::vector<float>& v,
                     std::vector<float>* out, std::vector<float>* ring,
                     std::vector<float>* diag) {
    const std::vector<fc::ChannelSetup> setups = fc::ChannelSetups(w);
    const std::vector<ch::ChunkedChannel> toeplitz = ch::ChunkedChannels(w);
    h3::testing::EmulateChannels(
        w, start, first, length, q, k, v, out, ring, diag,
        [&](int c, int64_t at, int64_t len, const float* qc, const float* kc,
            const float* vc, float* oc, float* ring_c, float* diag_c) {
          Emulator(w, c, setups[c], toeplitz[c], shift_mma)
              .Run(at, len, qc, kc, vc, oc, ring_c, diag_c);
        });
  };
}

// (d_state, length, start, shift_mma)
class ChunkedEmulationTest
    : public ::testing::TestWithParam<std::tuple<int, int64_t, int64_t, bool>> {
};

TEST_P(ChunkedEmulationTest, MatchesTheCpuTwin) {
  const auto [d_state, length, start, shift_mma] = GetParam();
  h3::testing::ExpectMatchesTheCpuTwin(PrefillEmulated(shift_mma), d_state,
                                       length, start,
                                       {kOutputBound, kStateBound});
}

// Lengths: 1 and 15 (one partial column), 16 (one whole), 63, 256 (a whole
// tile), 257 (and one token), 1000, 4100; starts: 0, below N, far past it.
INSTANTIATE_TEST_SUITE_P(
    Lengths, ChunkedEmulationTest,
    ::testing::Combine(::testing::Values(64, 16),
                       ::testing::Values<int64_t>(1, 15, 16, 63, 256, 257, 1000,
                                                  4100),
                       ::testing::Values<int64_t>(0, 13, 4139),
                       ::testing::Bool()));

// Calls one after another, each from the state the last one left, compute
// what the CPU twin's one call does.
TEST(ChunkedEmulationCallsTest, ConsecutiveCallsEqualOneCall) {
  for (bool shift_mma : {false, true}) {
    SCOPED_TRACE(shift_mma ? "shift on tensor cores" : "shift in fp32");
    h3::testing::ExpectConsecutiveCallsEqualOneCall(
        PrefillEmulated(shift_mma), {kOutputBound, kStateBound});
  }
}

// A_r[i][j] = taps[16 r + i - j] where that tap is one of the 64: every tap
// once in each row's five blocks, for every output row i.
TEST(ChunkedShiftBlocksTest, EveryTapOnceARow) {
  for (int i = 0; i < ch::kColumn; ++i) {
    std::vector<int> seen(ch::kShiftTaps, 0);
    for (int r = 0; r < ch::kShiftBlocks; ++r) {
      for (int j = 0; j < ch::kColumn; ++j) {
        const int tap = ch::ShiftBlockTap(r, i, j);
        if (tap >= 0) ++seen[tap];
      }
    }
    for (int tap = 0; tap < ch::kShiftTaps; ++tap) {
      EXPECT_EQ(seen[tap], 1) << "row " << i << " tap " << tap;
    }
  }
}

// The packed-rows kernel's shift convolution (ShiftSums: a lane's 8 adjacent
// tokens, inputs and taps read four at a time, a sliding window of inputs)
// sums what the channel-major kernel sums, tap by tap in the same order,
// for every lane of a tile and every d_state; zero taps past N.
TEST(ChunkedShiftSumsTest, EqualTheTapOrderSums) {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  float kf[fc::kHistory + ch::kTile];
  alignas(
      16) float slots[fc::kHistory + ch::kTile];  // kf, as the kernel keeps it
  alignas(16) float taps[ch::kShiftTaps];
  for (float& x : kf) x = normal(gen);
  for (int i = 0; i < fc::kHistory + ch::kTile; ++i)
    slots[ch::KfSlot(i)] = kf[i];
  for (int ns : {16, 32, 48, 64}) {
    for (int j = 0; j < ch::kShiftTaps; ++j) taps[j] = j < ns ? normal(gen) : 0;
    const float shift_d = normal(gen);
    for (int t0 = 0; t0 < ch::kTile; t0 += ch::kLaneTokens) {
      float got[ch::kLaneTokens];
      ch::ShiftSums(slots, taps, ns, shift_d, t0, got);
      if (ns == ch::kShiftTaps) {  // the kernel's unrolled instance
        float unrolled[ch::kLaneTokens];
        ch::ShiftSums<ch::kShiftTaps>(slots, taps, ns, shift_d, t0, unrolled);
        for (int i = 0; i < ch::kLaneTokens; ++i) {
          EXPECT_EQ(unrolled[i], got[i]) << "token " << t0 + i;
        }
      }
      for (int i = 0; i < ch::kLaneTokens; ++i) {
        const float* kt = kf + fc::kHistory + t0 + i;
        float want = shift_d * kt[0];
        for (int j = 0; j < ns; ++j) want += taps[j] * kt[-j];
        // The same products and order: equal but for the host compiler's
        // freedom to contract a * b + c differently in the two loops.
        EXPECT_NEAR(got[i], want, 1e-5f * (1.0f + std::abs(want)))
            << "ns " << ns << " token " << t0 + i;
      }
    }
  }
}

// T is K's first 16 taps, lower triangular, scaled by its largest |tap|.
TEST(ChunkedChannelsTest, ToeplitzOfTheSsmKernel) {
  const h3::testing::RandomH3Layer layer({3, 1, 64}, 5);
  const H3Weights w = layer.weights();
  const std::vector<ch::ChunkedChannel> t = ch::ChunkedChannels(w);
  for (int c = 0; c < 3; ++c) {
    // K[i] = 2 Re(sum_m C dA^i dB), by powers in std::complex<double>.
    std::vector<double> want(16, 0.0);
    for (int m = 0; m < 32; ++m) {
      const int i = c * 32 + m;
      const std::complex<double> da(w.dA[2 * i], w.dA[2 * i + 1]),
          db(w.dB[2 * i], w.dB[2 * i + 1]), cm(w.C[2 * i], w.C[2 * i + 1]);
      for (int k = 0; k < 16; ++k) {
        want[k] += 2.0 * (cm * std::pow(da, k) * db).real();
      }
    }
    double most = 0;
    for (double x : want) most = std::max(most, std::abs(x));
    EXPECT_NEAR(t[c].scale_t, most, 1e-6 * most);
    for (int j = 0; j < 16; ++j) {
      for (int i = 0; i < 16; ++i) {
        const float got = FromBits(t[c].t16[j][i]);
        if (i > j) {
          EXPECT_EQ(got, 0.0f) << j << "," << i;
        } else {  // one fp16 rounding of a value in [-1, 1]
          EXPECT_NEAR(got, want[j - i] / most, 0x1p-11) << j << "," << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace h3::kernels
