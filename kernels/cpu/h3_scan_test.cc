// H3ScanCpu, the recurrent prefill, against the step and against itself,
// bitwise: a chunk of L tokens leaves the same outputs and state as L steps,
// and as the same tokens scanned in chunks split anywhere. Against the
// double-precision direct evaluation and the FFT prefill, within fp32
// rounding. Shapes with head_dim 1, 2 and 8, N from 2 (one mode, padded
// vectors) to 64 (the released models' fast path) and 160, d not a multiple
// of the 16-float vectors, sequences new, inside their first ring turn and
// far on.
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/h3.h"
#include "tests/support/h3_direct.h"
#include "tests/support/normalised_error.h"
#include "tests/support/random.h"
#include "tests/support/random_h3_layer.h"

namespace h3::kernels {
namespace {

using h3::testing::NormalisedError;
using h3::testing::RandomH3Layer;
using h3::testing::RandomNormal;
using State = h3::testing::H3StateBuffers;

// `length` tokens' q, k, v apart ([L, d] each) and as one fused q|k|v
// product ([L, 3d]), the engine's layout.
struct Inputs {
  Inputs(int d, int64_t len, uint32_t seed)
      : d(d),
        q(RandomNormal(len * d, seed)),
        k(RandomNormal(len * d, seed + 1)),
        v(RandomNormal(len * d, seed + 2)),
        qkv(3 * len * d) {
    for (int64_t t = 0; t < len; ++t) {
      std::copy_n(q.data() + t * d, d, qkv.data() + 3 * t * d);
      std::copy_n(k.data() + t * d, d, qkv.data() + 3 * t * d + d);
      std::copy_n(v.data() + t * d, d, qkv.data() + 3 * t * d + 2 * d);
    }
  }
  // Token t's q, k, v and their row stride, fused or apart.
  const float* Q(int64_t t, bool fused) const { return At(q, 0, t, fused); }
  const float* K(int64_t t, bool fused) const { return At(k, 1, t, fused); }
  const float* V(int64_t t, bool fused) const { return At(v, 2, t, fused); }
  int64_t Stride(bool fused) const { return fused ? 3 * d : 0; }
  const float* At(const std::vector<float>& apart, int block, int64_t t,
                  bool fused) const {
    return fused ? qkv.data() + 3 * t * d + block * d : apart.data() + t * d;
  }
  int d;
  std::vector<float> q, k, v, qkv;
};

// A state a sequence about to process position `start` can hold: the ring
// slots of positions before `start` (and not before 0) random, the others
// zero; the diagonal state random, zero for a new sequence.
State StateAt(const H3Shape& shape, int64_t start, uint32_t seed) {
  State state(shape);
  const int n = shape.d_state;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t pos = std::max<int64_t>(0, start - n); pos < start; ++pos) {
    for (int c = 0; c < shape.d_model; ++c) {
      state.shift[c * n + pos % n] = normal(rng);
    }
  }
  if (start > 0) {
    for (float& x : state.diag) x = normal(rng);
  }
  return state;
}

// Scans tokens [start, start + sum(chunks)) chunk after chunk from *state;
// returns their outputs [L, d]. Chunks alternate between fused and separate
// inputs (the row stride must not matter).
std::vector<float> Scan(const H3RecurrentWeightsCpu& w, const Inputs& in,
                        int64_t start, const std::vector<int64_t>& chunks,
                        State* state) {
  int64_t total = 0;
  for (int64_t c : chunks) total += c;
  std::vector<float> out(total * in.d);
  int64_t t = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const bool fused = i % 2 == 1;
    H3ScanParams p;
    p.w.shape = w.shape();
    p.start = start + t;
    p.length = chunks[i];
    p.q = in.Q(t, fused);
    p.k = in.K(t, fused);
    p.v = in.V(t, fused);
    p.input_stride = in.Stride(fused);
    p.out = out.data() + t * in.d;
    p.state = state->view();
    H3ScanCpu(p, w);
    t += chunks[i];
  }
  return out;
}

// One step per token, batch 1, fused inputs.
std::vector<float> Steps(const H3RecurrentWeightsCpu& w, const Inputs& in,
                         int64_t start, int64_t length, State* state) {
  std::vector<float> out(length * in.d);
  const H3State view = state->view();
  for (int64_t t = 0; t < length; ++t) {
    const int64_t position = start + t;
    H3StepParams p;
    p.w.shape = w.shape();
    p.batch = 1;
    p.q = in.Q(t, true);
    p.k = in.K(t, true);
    p.v = in.V(t, true);
    p.out = out.data() + t * in.d;
    p.states = &view;
    p.input_stride = in.Stride(true);
    p.positions = &position;
    H3StepCpu(p, w);
  }
  return out;
}

// The index of the first element whose bits differ; -1 when none.
int64_t FirstBitDifference(const std::vector<float>& a,
                           const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

void ExpectBitwiseEqual(const std::vector<float>& got,
                        const std::vector<float>& want,
                        const std::string& what) {
  const int64_t i = FirstBitDifference(got, want);
  EXPECT_EQ(i, -1) << what << ": first difference at " << i << ": "
                   << (i >= 0 ? got[i] : 0) << " vs " << (i >= 0 ? want[i] : 0);
}

// Chunks of `size` tokens (the last one shorter) covering `length`.
std::vector<int64_t> EvenChunks(int64_t length, int64_t size) {
  std::vector<int64_t> chunks;
  for (int64_t t = 0; t < length; t += size) {
    chunks.push_back(std::min(size, length - t));
  }
  return chunks;
}

// Random chunk lengths from 1 to 150 covering `length`.
std::vector<int64_t> RandomChunks(int64_t length, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> chunks;
  for (int64_t t = 0; t < length;) {
    const int64_t c = std::min<int64_t>(1 + rng() % 150, length - t);
    chunks.push_back(c);
    t += c;
  }
  return chunks;
}

// Bounds on the normalised error (max |got - want| / max |want|) of a chunk
// of up to L = 1025 tokens. A token's fp32 arithmetic rounds each operation
// by at most u = 2^-24 ~ 6e-8: kbar sums N + 1 products through 4 + 4 tree
// levels, y sums M modes likewise, a few u relative to the terms' scale.
// The diagonal state carries its rounding forward through |dA| < 1, which
// forgets slowly (dt = 0.001: ~2000 tokens), so the errors of a chunk's
// tokens add up, as a random walk: ~sqrt(L) a few u. 10 u sqrt(1025) ~ 2e-5
// is that with a margin of 3 to 10 over what fp32 rounding gives (1e-6 to
// 1.5e-6 observed for L = 1025). The direct evaluation is in double; the FFT
// prefill's state passing too, its convolution in fp32 with errors of the
// FFT's ~log2(nfft) u, well under this.
constexpr double kDirectBound = 2e-5;
constexpr double kFftBound = 2e-5;

struct ScanCase {
  int d, p, n;
  int64_t start, length;
};

std::string Name(const ScanCase& c) {
  return "d" + std::to_string(c.d) + "_p" + std::to_string(c.p) + "_N" +
         std::to_string(c.n) + "_start" + std::to_string(c.start) + "_L" +
         std::to_string(c.length);
}

void PrintTo(const ScanCase& c, std::ostream* os) { *os << Name(c); }

class H3ScanTest : public ::testing::TestWithParam<ScanCase> {
 protected:
  H3Shape shape() const { return {GetParam().d, GetParam().p, GetParam().n}; }
  uint32_t seed() const {
    const ScanCase& c = GetParam();
    return static_cast<uint32_t>(1000 * c.d + 100 * c.p + c.n + c.length);
  }
};

TEST_P(H3ScanTest, ScanEqualsStepsBitwise) {
  const ScanCase c = GetParam();
  const RandomH3Layer layer(shape(), seed());
  const H3RecurrentWeightsCpu w(layer.weights());
  const Inputs in(c.d, c.length, seed() + 1);
  State scanned = StateAt(shape(), c.start, seed() + 5);
  State stepped = scanned;
  const std::vector<float> want = Scan(w, in, c.start, {c.length}, &scanned);
  const std::vector<float> got = Steps(w, in, c.start, c.length, &stepped);
  ExpectBitwiseEqual(got, want, "outputs");
  ExpectBitwiseEqual(stepped.shift, scanned.shift, "shift state");
  ExpectBitwiseEqual(stepped.diag, scanned.diag, "diagonal state");
}

TEST_P(H3ScanTest, ChunkedScanEqualsOneScanBitwise) {
  const ScanCase c = GetParam();
  const RandomH3Layer layer(shape(), seed());
  const H3RecurrentWeightsCpu w(layer.weights());
  const Inputs in(c.d, c.length, seed() + 1);
  const State before = StateAt(shape(), c.start, seed() + 5);
  State whole = before;
  const std::vector<float> want = Scan(w, in, c.start, {c.length}, &whole);
  std::vector<std::vector<int64_t>> splits;
  for (int64_t size : {1, 7, 64, 1000}) {
    splits.push_back(EvenChunks(c.length, size));
  }
  for (uint32_t s = 0; s < 3; ++s) {
    splits.push_back(RandomChunks(c.length, seed() + s));
  }
  for (const std::vector<int64_t>& chunks : splits) {
    State chunked = before;
    const std::vector<float> got = Scan(w, in, c.start, chunks, &chunked);
    const std::string what = std::to_string(chunks.size()) +
                             " chunks, the first of " +
                             std::to_string(chunks[0]) + ": ";
    ExpectBitwiseEqual(got, want, what + "outputs");
    ExpectBitwiseEqual(chunked.shift, whole.shift, what + "shift state");
    ExpectBitwiseEqual(chunked.diag, whole.diag, what + "diagonal state");
  }
}

// The FFT prefill from the same state: the same function, computed another
// way (kbar and the state passing in double, the convolution by fp32 FFT).
TEST_P(H3ScanTest, MatchesFftPrefill) {
  const ScanCase c = GetParam();
  const RandomH3Layer layer(shape(), seed());
  const H3RecurrentWeightsCpu w(layer.weights());
  const Inputs in(c.d, c.length, seed() + 1);
  State scanned = StateAt(shape(), c.start, seed() + 5);
  State fft = scanned;
  const std::vector<float> got = Scan(w, in, c.start, {c.length}, &scanned);
  const int nfft = H3FftSize(c.length);
  std::vector<float> spectrum(2 * shape().heads() * (nfft / 2 + 1));
  H3KernelSpectrum(layer.weights(), nfft, spectrum.data());
  std::vector<float> want(c.length * c.d);
  H3PrefillCpu({layer.weights(), c.start, c.length, in.q.data(), in.k.data(),
                in.v.data(), want.data(), fft.view(), spectrum.data(), nfft});
  EXPECT_LT(NormalisedError(got, want), kFftBound);
  EXPECT_LT(NormalisedError(scanned.diag, fft.diag), kFftBound);
  // The ring holds raw inputs: no arithmetic, no rounding.
  ExpectBitwiseEqual(scanned.shift, fft.shift, "shift state");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, H3ScanTest,
    ::testing::Values(
        // head_dim 1; N = 2: one mode in zero-padded vectors.
        ScanCase{24, 1, 2, 0, 97}, ScanCase{24, 1, 16, 13, 1025},
        ScanCase{100, 1, 64, 0, 1025}, ScanCase{100, 1, 64, 70001, 97},
        ScanCase{768, 1, 64, 63, 64}, ScanCase{768, 1, 64, 70001, 1025},
        ScanCase{24, 1, 64, 70001, 1}, ScanCase{100, 1, 16, 63, 7},
        // N = 24: two vectors, the second half padding; N = 160: ten.
        ScanCase{40, 1, 24, 13, 97}, ScanCase{48, 1, 160, 200, 97},
        // head_dim 2 and 8 (the paper's pure-H3 models).
        ScanCase{24, 2, 16, 63, 7}, ScanCase{100, 2, 64, 13, 97},
        ScanCase{100, 2, 2, 63, 1}, ScanCase{768, 2, 64, 0, 7},
        ScanCase{24, 8, 2, 70001, 64}, ScanCase{24, 8, 16, 0, 1025},
        ScanCase{768, 8, 64, 13, 97}),
    [](const ::testing::TestParamInfo<ScanCase>& info) {
      return Name(info.param);
    });

// The overloads that build H3RecurrentWeightsCpu from params.w per call (the
// GPU step's tests use H3StepCpu's) compute the same bits; a chunk of no
// tokens changes nothing.
TEST(H3ScanCpuTest, OverloadsWithoutPreparedWeightsAgree) {
  const H3Shape shape{48, 2, 16};
  const RandomH3Layer layer(shape, 3);
  const H3RecurrentWeightsCpu w(layer.weights());
  const int64_t start = 21, length = 9;
  const Inputs in(shape.d_model, length + 1, 4);
  const State before = StateAt(shape, start, 5);
  State prepared = before, unprepared = before;
  const std::vector<float> want = Scan(w, in, start, {length}, &prepared);
  std::vector<float> got(length * shape.d_model);
  H3ScanParams p;
  p.w = layer.weights();
  p.start = start;
  p.length = length;
  p.q = in.q.data();
  p.k = in.k.data();
  p.v = in.v.data();
  p.out = got.data();
  p.state = unprepared.view();
  H3ScanCpu(p);
  ExpectBitwiseEqual(got, want, "scan outputs");
  ExpectBitwiseEqual(unprepared.diag, prepared.diag, "scan state");

  p.length = 0;
  H3ScanCpu(p);
  H3ScanCpu(p, w);
  ExpectBitwiseEqual(unprepared.diag, prepared.diag, "after empty chunks");
  ExpectBitwiseEqual(unprepared.shift, prepared.shift, "after empty chunks");

  // One more token by the step, with and without the prepared weights.
  const int64_t position = start + length;
  const H3State views[2] = {unprepared.view(), prepared.view()};
  std::vector<float> step_got(shape.d_model), step_want(shape.d_model);
  H3StepParams step{layer.weights(),
                    1,
                    in.Q(length, false),
                    in.K(length, false),
                    in.V(length, false),
                    step_got.data(),
                    &views[0],
                    0,
                    &position};
  H3StepCpu(step);
  step.out = step_want.data();
  step.states = &views[1];
  H3StepCpu(step, w);
  ExpectBitwiseEqual(step_got, step_want, "step outputs");
  ExpectBitwiseEqual(unprepared.diag, prepared.diag, "step state");
  ExpectBitwiseEqual(unprepared.shift, prepared.shift, "step ring");
}

struct DirectCase {
  int d, p, n;
  int64_t length;
};

std::string Name(const DirectCase& c) {
  return "d" + std::to_string(c.d) + "_p" + std::to_string(c.p) + "_N" +
         std::to_string(c.n) + "_L" + std::to_string(c.length);
}

void PrintTo(const DirectCase& c, std::ostream* os) { *os << Name(c); }

class H3ScanDirectTest : public ::testing::TestWithParam<DirectCase> {};

// A new sequence's chunk against the double-precision direct evaluation
// from the raw parameters (tests/support/h3_direct.h).
TEST_P(H3ScanDirectTest, MatchesDirectEvaluation) {
  const DirectCase c = GetParam();
  const H3Shape shape{c.d, c.p, c.n};
  const RandomH3Layer layer(shape, 7 * c.d + c.n);
  const H3RecurrentWeightsCpu w(layer.weights());
  const Inputs in(c.d, c.length, c.p + 3);
  State state(shape);
  const std::vector<float> got = Scan(w, in, 0, {c.length}, &state);
  EXPECT_LT(NormalisedError(
                got, h3::testing::Direct(layer, c.length, in.q, in.k, in.v)),
            kDirectBound);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, H3ScanDirectTest,
    ::testing::Values(DirectCase{24, 1, 64, 1025}, DirectCase{100, 1, 2, 1025},
                      DirectCase{24, 2, 16, 1025}, DirectCase{24, 8, 64, 97},
                      DirectCase{768, 1, 64, 97}, DirectCase{100, 1, 64, 7},
                      DirectCase{24, 8, 16, 1}),
    [](const ::testing::TestParamInfo<DirectCase>& info) {
      return Name(info.param);
    });

}  // namespace
}  // namespace h3::kernels
