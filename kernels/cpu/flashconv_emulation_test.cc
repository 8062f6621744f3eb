// The fused GPU prefill's algorithm (kernels/cuda/h3_prefill_fused_kernel.cu),
// emulated on the CPU step by step with the kernel's conventions
// (kernels/flashconv.h) and its fp16 roundings, against the CPU twin
// H3PrefillCpu. This checks what the GPU tests cannot check without a GPU:
// the two-level FFT's index order, twiddles and scales, the permuted
// spectrum, the state matrices E, P, Z and their row order, the tables
// precomputed at load (kernels/flashconv_setup.h: P, E, their scales, powers
// of dA, twiddles), chunking with state passing, the shift state's ring read
// into the history and written back at the call's positions, and the error that
// fp16 tensor-core operands cost. It does not check the CUDA mechanics
// (fragments, synchronisation); the gpu-labelled kernels_cuda_test does.
#include <algorithm>
#include <cmath>
#include <complex>
#include <tuple>
#include <vector>

#include "base/half_float.h"
#include "gtest/gtest.h"
#include "kernels/flashconv.h"
#include "kernels/flashconv_setup.h"
#include "kernels/h3.h"
#include "tests/support/h3_emulation_checks.h"

namespace h3::kernels {
namespace {

namespace fc = flashconv;
using cfloat = std::complex<float>;

// Rounds to fp16 and back, as the kernel's operands are stored.
float Half(float x) { return static_cast<float>(static_cast<_Float16>(x)); }

cfloat Pair(const float* z) { return cfloat(z[0], z[1]); }

// The layer's tables of one FFT size, as H3PrefillFused::Create uploads them.
struct LoadTables {
  LoadTables(const H3Weights& w, const fc::FftSize& size)
      : channels(fc::ChannelSetups(w)),
        chunk_powers(fc::ChunkPowers(w, size)),
        twiddles(fc::TwiddleTable(size)) {}
  std::vector<fc::ChannelSetup> channels;  // [H]
  std::vector<float> chunk_powers;         // [H][kCarrySegments][M] complex
  std::vector<float> twiddles;             // [n1][n2] complex
};

// One channel's prefill of `length` tokens at positions [start, start +
// length) (p = 1), as the kernel computes it. q, k, v: the channel's inputs;
// ring [N] (the shift state) and diag [M] complex in place.
class Emulator {
 public:
  Emulator(const H3Weights& w, int c, const fc::FftSize& size,
           const LoadTables& tables)
      : w_(w),
        c_(c),
        size_(size),
        modes_(w.shape.modes()),
        setup_(tables.channels[c]),
        powers_(tables.chunk_powers.data() +
                2 * c * fc::kCarrySegments * modes_),
        twiddles_(tables.twiddles.data()) {
    std::vector<float> rfft(2 * w.shape.heads() * (size.n / 2 + 1));
    H3KernelSpectrum(w, size.n, rfft.data());
    const float* bins = rfft.data() + 2 * c * (size.n / 2 + 1);
    spectrum_.resize(size.n);
    float most = 0;
    for (int i = 0; i < size.n; ++i) {
      const int f = fc::PermutedFrequency(i, size.n1, size.n2);
      spectrum_[i] = f <= size.n / 2
                         ? cfloat(bins[2 * f], bins[2 * f + 1])
                         : std::conj(cfloat(bins[2 * (size.n - f)],
                                            bins[2 * (size.n - f) + 1]));
      most = std::max(
          {most, std::abs(spectrum_[i].real()), std::abs(spectrum_[i].imag())});
    }
    for (cfloat& z : spectrum_) z /= most;
    spectrum_scale_ = most;
    f1_.resize(2 * size.n1 * (size.n1 / 2));
    f2_.resize(2 * size.n2 * size.n2);
    fc::DftTables(
        size, [&](int i, double x) { f1_[i] = Half(static_cast<float>(x)); },
        [&](int i, double x) { f2_[i] = Half(static_cast<float>(x)); });
  }

  void Run(int64_t start, int64_t length, const float* q, const float* k,
           const float* v, float* out, float* ring, float* diag) {
    const int ns = w_.shape.d_state, chunk = size_.n / 2;
    // history[kHistory - m] = k at position start - m, from the ring.
    std::vector<float> history(fc::kHistory, 0.0f);
    for (int m = 1; m <= ns; ++m) {
      if (start - m >= 0) history[fc::kHistory - m] = ring[(start - m) % ns];
    }
    std::vector<cfloat> x(modes_);
    for (int m = 0; m < modes_; ++m)
      x[m] = cfloat(diag[2 * m], diag[2 * m + 1]);
    for (int64_t offset = 0; offset < length; offset += chunk) {
      const int len =
          static_cast<int>(std::min<int64_t>(chunk, length - offset));
      std::vector<float> kf(fc::kHistory + chunk, 0.0f), extra(chunk, 0.0f);
      std::copy(history.begin(), history.end(), kf.begin());
      for (int t = 0; t < len; ++t) kf[fc::kHistory + t] = k[offset + t];
      float kv_max = 0;
      for (int t = 0; t < len; ++t) {
        const float* kt = kf.data() + fc::kHistory + t;
        float sum = w_.shift_D[c_] * kt[0];
        for (int j = 0; j < ns; ++j)
          sum += w_.shift_kernel[c_ * ns + j] * kt[-j];
        extra[t] = sum * v[offset + t];
        kv_max = std::max(kv_max, std::abs(extra[t]));
      }
      std::copy(kf.begin() + len, kf.begin() + len + fc::kHistory,
                history.begin());
      const float kv_inv = kv_max > 0 ? 1.0f / kv_max : 0.0f;
      std::vector<float> u(chunk);  // plane P: the FFT's input kv / kv_max
      for (int t = 0; t < chunk; ++t) u[t] = Half(extra[t] * kv_inv);
      const std::vector<cfloat> x_next =
          EndState(len, extra, kv_max, kv_inv, x);
      for (float& e : extra) e *= w_.D[c_];
      AddCarriedOutput(chunk, x, extra);
      std::vector<float> y(chunk, 0.0f);
      if (kv_max > 0) Convolve(u, &y);
      const float scale = size_.n * kv_max * spectrum_scale_;
      for (int t = 0; t < len; ++t) {
        out[offset + t] = q[offset + t] * (y[t] * scale + extra[t]);
      }
      x = x_next;
    }
    for (int m = 0; m < modes_; ++m) {
      diag[2 * m] = x[m].real();
      diag[2 * m + 1] = x[m].imag();
    }
    // The last min(length, N) inputs into their ring slots.
    for (int64_t j = 0; j < std::min<int64_t>(length, ns); ++j) {
      ring[(start + length - 1 - j) % ns] = history[fc::kHistory - 1 - j];
    }
  }

 private:
  std::vector<cfloat> EndState(int len, const std::vector<float>& kv,
                               float kv_max, float kv_inv,
                               const std::vector<cfloat>& x) {
    const int l256 =
        (len + fc::kStateTile - 1) / fc::kStateTile * fc::kStateTile;
    const int pad = l256 - len;
    std::vector<float> right(l256, 0.0f);
    for (int t = pad; t < l256; ++t) right[t] = Half(kv[t - pad] * kv_inv);
    const int chunk = size_.n / 2;
    std::vector<cfloat> next(modes_);
    for (int m = 0; m < modes_; ++m) {
      const cfloat a16 = Pair(setup_.dA16[m]), a256 = Pair(setup_.dA256[m]);
      cfloat acc = 0;
      if (kv_max > 0) {
        for (int gt = 0; gt < l256 / fc::kStateTile; ++gt) {
          cfloat part = 0;
          for (int g = 0; g < 16; ++g) {
            float re = 0, im = 0;
            for (int i = 0; i < 16; ++i) {
              const float kvi = right[fc::kStateTile * gt + 16 * g + i];
              re += HalfToFloat(setup_.ecat[fc::ModeRow(m, 0)][i]) * kvi;
              im += HalfToFloat(setup_.ecat[fc::ModeRow(m, 1)][i]) * kvi;
            }
            part = part * a16 + cfloat(re, im);
          }
          acc = acc * a256 + part;
        }
      }
      // dA^len: from the table for a whole chunk, else in double.
      float decay[2];
      if (len == chunk) {
        std::copy_n(ChunkPower(fc::kCarrySegments, m), 2, decay);
      } else {
        fc::PowPolar(setup_.log_r[m], setup_.theta[m], len, decay);
      }
      next[m] = Pair(decay) * x[m] + acc * (kv_max * setup_.scale_e);
    }
    return next;
  }

  void AddCarriedOutput(int chunk, const std::vector<cfloat>& x,
                        std::vector<float>& extra) {
    float x_max = 0;
    for (const cfloat& z : x)
      x_max = std::max({x_max, std::abs(z.real()), std::abs(z.imag())});
    if (x_max == 0) return;
    const int groups = chunk / 16, per_segment = groups / fc::kCarrySegments;
    std::vector<float> z(2 * modes_ * groups);
    for (int m = 0; m < modes_; ++m) {
      const cfloat a16 = Pair(setup_.dA16[m]);
      for (int segment = 0; segment < fc::kCarrySegments; ++segment) {
        const int g0 = segment * per_segment;  // dA^(16 g0) x / x_max
        cfloat zv = x[m] / x_max;
        if (segment > 0) zv = Pair(ChunkPower(segment, m)) * x[m] / x_max;
        for (int g = g0; g < g0 + per_segment; ++g) {
          z[fc::ModeRow(m, 0) * groups + g] = Half(zv.real());
          z[fc::ModeRow(m, 1) * groups + g] = Half(zv.imag());
          zv *= a16;
        }
      }
    }
    for (int g = 0; g < groups; ++g) {
      for (int j = 0; j < 16; ++j) {
        float sum = 0;
        for (int kk = 0; kk < 2 * modes_; ++kk)
          sum += HalfToFloat(setup_.pcat[j][kk]) * z[kk * groups + g];
        extra[16 * g + j] += 2.0f * setup_.scale_p * x_max * sum;
      }
    }
  }

  // y = (K * u) / (n spectrum_scale) by the two-level FFT, u = kv / kv_max.
  void Convolve(const std::vector<float>& u, std::vector<float>* y) {
    const int n1 = size_.n1, n2 = size_.n2, n = size_.n;
    const float* f1r = f1_.data();
    const float* f1i = f1r + n1 * (n1 / 2);
    const float* f2r = f2_.data();
    const float* f2i = f2r + n2 * n2;
    std::vector<cfloat> a(n), b(n);
    for (int k1 = 0; k1 < n1; ++k1) {
      for (int c2 = 0; c2 < n2; ++c2) {
        float re = 0, im = 0;
        for (int j = 0; j < n1 / 2; ++j) {
          re += f1r[k1 * (n1 / 2) + j] * u[j * n2 + c2];
          im += f1i[k1 * (n1 / 2) + j] * u[j * n2 + c2];
        }
        const cfloat z = cfloat(re, im) * Pair(&twiddles_[2 * (k1 * n2 + c2)]);
        a[k1 * n2 + c2] = cfloat(Half(z.real()), Half(z.imag()));
      }
    }
    for (int pass = 0; pass < 2; ++pass) {  // forward, then inverse
      for (int r = 0; r < n1; ++r) {
        for (int c2 = 0; c2 < n2; ++c2) {
          cfloat sum = 0;
          for (int j = 0; j < n2; ++j) {
            const cfloat f(f2r[j * n2 + c2], f2i[j * n2 + c2]);
            sum += a[r * n2 + j] * (pass == 0 ? f : std::conj(f));
          }
          const cfloat t = Pair(&twiddles_[2 * (r * n2 + c2)]);
          const cfloat z =
              pass == 0 ? sum * spectrum_[r * n2 + c2] : sum * std::conj(t);
          b[r * n2 + c2] = cfloat(Half(z.real()), Half(z.imag()));
        }
      }
      std::swap(a, b);
    }
    for (int r = 0; r < n1 / 2; ++r) {
      for (int c2 = 0; c2 < n2; ++c2) {
        float sum = 0;
        for (int k1 = 0; k1 < n1; ++k1) {
          sum += f1r[k1 * (n1 / 2) + r] * a[k1 * n2 + c2].real() +
                 f1i[k1 * (n1 / 2) + r] * a[k1 * n2 + c2].imag();
        }
        (*y)[r * n2 + c2] = sum;
      }
    }
  }

  // dA^(g chunk / kCarrySegments) of mode m, g = 1 .. kCarrySegments.
  const float* ChunkPower(int g, int m) const {
    return powers_ + 2 * ((g - 1) * modes_ + m);
  }

  const H3Weights& w_;
  int c_;
  fc::FftSize size_;
  int modes_;
  const fc::ChannelSetup& setup_;
  const float* powers_;    // the channel's [kCarrySegments][M] complex
  const float* twiddles_;  // [n1][n2] complex
  std::vector<cfloat> spectrum_;
  float spectrum_scale_ = 0;
  std::vector<float> f1_, f2_;
};

// The bounds the GPU test holds the fused kernel to (h3_prefill_test.cc):
// every operand of a tensor-core product is fp16 (2^-11 relative), scaled
// into [-1, 1]; four FFT products and the state products each add about one
// rounding of the output's scale.
constexpr double kOutputBound = 5e-3;
constexpr double kStateBound = 1e-3;

// The emulated kernel on tokens [first, first + length) of q, k, v
// ([total, d]) at positions [start, start + length), each channel with the
// FFT size the kernel picks for `length`; writes those tokens of *out.
void PrefillEmulated(const H3Weights& w, int64_t start, int64_t first,
                     int64_t length, const std::vector<float>& q,
                     const std::vector<float>& k, const std::vector<float>& v,
                     std::vector<float>* out, std::vector<float>* ring,
                     std::vector<float>* diag) {
  const fc::FftSize size = fc::kFftSizes[fc::FftSizeIndex(length)];
  const LoadTables tables(w, size);
  h3::testing::EmulateChannels(
      w, start, first, length, q, k, v, out, ring, diag,
      [&](int c, int64_t at, int64_t len, const float* qc, const float* kc,
          const float* vc, float* oc, float* ring_c, float* diag_c) {
        Emulator(w, c, size, tables)
            .Run(at, len, qc, kc, vc, oc, ring_c, diag_c);
      });
}

// (d_state, length, start)
class FlashConvEmulationTest
    : public ::testing::TestWithParam<std::tuple<int, int64_t, int64_t>> {};

TEST_P(FlashConvEmulationTest, MatchesTheCpuTwin) {
  const auto [d_state, length, start] = GetParam();
  h3::testing::ExpectMatchesTheCpuTwin(PrefillEmulated, d_state, length, start,
                                       {kOutputBound, kStateBound});
}

// 0; below N for both sizes; 63 (below 64, above 16: 2 tokens wrap the ring
// for both); far past N.
INSTANTIATE_TEST_SUITE_P(
    Lengths, FlashConvEmulationTest,
    ::testing::Combine(::testing::Values(64, 16),
                       ::testing::Values<int64_t>(1, 2, 63, 97, 256, 1025, 2048,
                                                  5000),
                       ::testing::Values<int64_t>(0, 13, 63, 4139)));

// Emulated calls one after another, each from the state the last one left
// (the ring included), compute what the CPU twin's one call does.
TEST(FlashConvEmulationCallsTest, ConsecutiveCallsEqualOneCall) {
  h3::testing::ExpectConsecutiveCallsEqualOneCall(PrefillEmulated,
                                                  {kOutputBound, kStateBound});
}

}  // namespace
}  // namespace h3::kernels
