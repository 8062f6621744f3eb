// The H3 CPU ops against an independent, direct double-precision evaluation
// of docs/model.md: the convolution as a plain sum, the kernel from powers of
// dA, the states by the recurrence. And the ops against each other: chunked
// prefill (state passing) equals one prefill, decoding continues a prefill.
#include "kernels/h3.h"

#include <cmath>
#include <complex>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/h3_direct.h"
#include "tests/support/normalised_error.h"
#include "tests/support/random.h"
#include "tests/support/random_h3_layer.h"

namespace h3::kernels {
namespace {

using h3::testing::Direct;
using h3::testing::NormalisedError;

using Layer = h3::testing::RandomH3Layer;
using State = h3::testing::H3StateBuffers;

// Runs prefill chunks of the given lengths from a zero state; returns the
// outputs of all tokens and leaves the end state in *state.
std::vector<float> Prefill(const Layer& layer,
                           const std::vector<int64_t>& chunks,
                           const std::vector<float>& q,
                           const std::vector<float>& k,
                           const std::vector<float>& v, State* state) {
  const int d = layer.shape.d_model;
  int64_t total = 0;
  for (int64_t c : chunks) total += c;
  std::vector<float> out(total * d);
  int64_t start = 0;
  for (int64_t len : chunks) {
    const int nfft = H3FftSize(len);
    std::vector<float> spectrum(2 * layer.shape.heads() * (nfft / 2 + 1));
    H3KernelSpectrum(layer.weights(), nfft, spectrum.data());
    H3PrefillCpu({layer.weights(), start, len, q.data() + start * d,
                  k.data() + start * d, v.data() + start * d,
                  out.data() + start * d, state->view(), spectrum.data(),
                  nfft});
    start += len;
  }
  return out;
}

// Decodes tokens [start, end) one step at a time from *state.
std::vector<float> Decode(const Layer& layer, int64_t start, int64_t end,
                          const std::vector<float>& q,
                          const std::vector<float>& k,
                          const std::vector<float>& v, State* state) {
  const int d = layer.shape.d_model;
  std::vector<float> out((end - start) * d);
  H3State view = state->view();
  for (int64_t t = start; t < end; ++t) {
    H3StepCpu({layer.weights(), 1, q.data() + t * d, k.data() + t * d,
               v.data() + t * d, out.data() + (t - start) * d, &view,
               /*input_stride=*/0, &t});
  }
  return out;
}

// (d_model, head_dim, d_state, length)
using Case = std::tuple<int, int, int, int64_t>;

class H3CpuTest : public ::testing::TestWithParam<Case> {
 protected:
  H3Shape shape() const {
    auto [d, p, n, len] = GetParam();
    return {d, p, n};
  }
  int64_t length() const { return std::get<3>(GetParam()); }
};

TEST_P(H3CpuTest, PrefillMatchesDirectEvaluation) {
  const Layer layer(shape(), 1);
  const int64_t len = length();
  const int d = shape().d_model;
  auto q = h3::testing::RandomNormal(len * d, 2),
       k = h3::testing::RandomNormal(len * d, 3),
       v = h3::testing::RandomNormal(len * d, 4);
  State state(shape());
  std::vector<float> got = Prefill(layer, {len}, q, k, v, &state);
  EXPECT_LT(NormalisedError(got, Direct(layer, len, q, k, v)), 2e-5);
}

TEST_P(H3CpuTest, DecodingMatchesDirectEvaluationAndPrefillState) {
  const Layer layer(shape(), 5);
  const int64_t len = std::min<int64_t>(length(), 300);
  const int d = shape().d_model;
  auto q = h3::testing::RandomNormal(len * d, 6),
       k = h3::testing::RandomNormal(len * d, 7),
       v = h3::testing::RandomNormal(len * d, 8);
  State stepped(shape());
  std::vector<float> got = Decode(layer, 0, len, q, k, v, &stepped);
  EXPECT_LT(NormalisedError(got, Direct(layer, len, q, k, v)), 2e-5);

  // The end state computed inside the prefill equals the recurrence's.
  State prefilled(shape());
  Prefill(layer, {len}, q, k, v, &prefilled);
  for (size_t i = 0; i < stepped.shift.size(); ++i) {
    ASSERT_NEAR(prefilled.shift[i], stepped.shift[i],
                1e-5 * (1 + std::abs(stepped.shift[i])))
        << "shift state " << i;
  }
  for (size_t i = 0; i < stepped.diag.size(); ++i) {
    ASSERT_NEAR(prefilled.diag[i], stepped.diag[i],
                1e-4 * (1 + std::abs(stepped.diag[i])))
        << "diagonal state " << i;
  }
}

TEST_P(H3CpuTest, ChunkedPrefillEqualsOnePrefill) {
  const Layer layer(shape(), 9);
  const int64_t len = length();
  const int d = shape().d_model;
  auto q = h3::testing::RandomNormal(len * d, 10),
       k = h3::testing::RandomNormal(len * d, 11),
       v = h3::testing::RandomNormal(len * d, 12);
  State whole(shape()), chunked(shape());
  std::vector<float> want = Prefill(layer, {len}, q, k, v, &whole);
  // Uneven chunks, some shorter than the shift state (N), one of length 1.
  std::vector<int64_t> chunks;
  for (int64_t left = len, i = 0; left > 0; ++i) {
    const int64_t c = std::min<int64_t>(left, (i % 3 == 0) ? 1 : 5 + 17 * i);
    chunks.push_back(c);
    left -= c;
  }
  std::vector<float> got = Prefill(layer, chunks, q, k, v, &chunked);
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 2e-5 * (1 + std::abs(want[i]))) << i;
  }
  for (size_t i = 0; i < whole.diag.size(); ++i) {
    ASSERT_NEAR(chunked.diag[i], whole.diag[i],
                2e-5 * (1 + std::abs(whole.diag[i])));
  }
  EXPECT_EQ(chunked.shift.size(), whole.shift.size());
  for (size_t i = 0; i < whole.shift.size(); ++i) {
    ASSERT_NEAR(chunked.shift[i], whole.shift[i],
                1e-5 * (1 + std::abs(whole.shift[i])));
  }
}

// The shift state is the ring of kernels/h3.h: after any mix of chunks and
// steps, k[t] of channel c at [c][t mod N] for the last N positions t, zeros
// in the slots of positions not reached.
TEST_P(H3CpuTest, ShiftStateIsTheRingOfTheLastInputs) {
  const Layer layer(shape(), 17);
  const int64_t len = length(), extra = 3;
  const int d = shape().d_model, n = shape().d_state;
  const int64_t all = len + extra;
  auto q = h3::testing::RandomNormal(all * d, 18),
       k = h3::testing::RandomNormal(all * d, 19),
       v = h3::testing::RandomNormal(all * d, 20);
  State state(shape());
  Prefill(layer, {len / 2, len - len / 2}, q, k, v, &state);
  Decode(layer, len, all, q, k, v, &state);
  for (int c = 0; c < d; ++c) {
    for (int slot = 0; slot < n; ++slot) {
      // The latest position t < all with t mod N == slot, if any.
      int64_t t = all - 1 - ((all - 1 - slot) % n + n) % n;
      const float want = t >= 0 ? k[t * d + c] : 0.0f;
      ASSERT_EQ(state.shift[c * n + slot], want)
          << "channel " << c << " slot " << slot;
    }
  }
}

TEST_P(H3CpuTest, DecodingContinuesAPrefill) {
  const Layer layer(shape(), 13);
  const int64_t len = length(), extra = 9;
  const int d = shape().d_model;
  const int64_t all = len + extra;
  auto q = h3::testing::RandomNormal(all * d, 14),
       k = h3::testing::RandomNormal(all * d, 15),
       v = h3::testing::RandomNormal(all * d, 16);
  State ref(shape()), state(shape());
  std::vector<float> want = Prefill(layer, {all}, q, k, v, &ref);
  Prefill(layer, {len}, q, k, v, &state);
  std::vector<float> got = Decode(layer, len, all, q, k, v, &state);
  for (int64_t i = 0; i < extra * d; ++i) {
    ASSERT_NEAR(got[i], want[len * d + i],
                2e-5 * (1 + std::abs(want[len * d + i])))
        << "token " << len + i / d;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, H3CpuTest,
    ::testing::Values(Case{8, 1, 16, 1}, Case{8, 1, 16, 7}, Case{6, 1, 8, 97},
                      Case{4, 1, 64, 1025}, Case{8, 2, 8, 97},
                      Case{12, 4, 4, 33}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return "d" + std::to_string(std::get<0>(info.param)) + "_p" +
             std::to_string(std::get<1>(info.param)) + "_N" +
             std::to_string(std::get<2>(info.param)) + "_L" +
             std::to_string(std::get<3>(info.param));
    });

TEST(H3StepCpuTest, BatchOfSequencesAtDifferentPositionsEqualsEachAlone) {
  const H3Shape shape{8, 2, 8};
  const Layer layer(shape, 21);
  const int d = shape.d_model;
  const std::vector<int64_t> prompt_lengths = {1, 40, 7};
  const int batch = static_cast<int>(prompt_lengths.size());
  std::vector<State> alone, batched;
  std::vector<std::vector<float>> q, k, v;
  for (int b = 0; b < batch; ++b) {
    const int64_t all = prompt_lengths[b] + 1;
    q.push_back(h3::testing::RandomNormal(all * d, 30 + b));
    k.push_back(h3::testing::RandomNormal(all * d, 40 + b));
    v.push_back(h3::testing::RandomNormal(all * d, 50 + b));
    alone.emplace_back(shape);
    Prefill(layer, {prompt_lengths[b]}, q[b], k[b], v[b], &alone.back());
    batched.push_back(alone.back());
  }
  std::vector<float> bq, bk, bv;
  std::vector<H3State> views;
  for (int b = 0; b < batch; ++b) {
    const int64_t t = prompt_lengths[b];
    bq.insert(bq.end(), q[b].begin() + t * d, q[b].begin() + (t + 1) * d);
    bk.insert(bk.end(), k[b].begin() + t * d, k[b].begin() + (t + 1) * d);
    bv.insert(bv.end(), v[b].begin() + t * d, v[b].begin() + (t + 1) * d);
    views.push_back(batched[b].view());
  }
  std::vector<float> out(batch * d);
  H3StepCpu({layer.weights(), batch, bq.data(), bk.data(), bv.data(),
             out.data(), views.data(), /*input_stride=*/0,
             prompt_lengths.data()});
  for (int b = 0; b < batch; ++b) {
    const int64_t t = prompt_lengths[b];
    std::vector<float> single =
        Decode(layer, t, t + 1, q[b], k[b], v[b], &alone[b]);
    for (int i = 0; i < d; ++i) EXPECT_EQ(out[b * d + i], single[i]) << b;
    EXPECT_EQ(batched[b].diag, alone[b].diag);
    EXPECT_EQ(batched[b].shift, alone[b].shift);
  }
}

TEST(H3FftSizeTest, PowerOfTwoAtLeastTwiceTheLength) {
  EXPECT_EQ(H3FftSize(1), 2);
  EXPECT_EQ(H3FftSize(2), 4);
  EXPECT_EQ(H3FftSize(97), 256);
  EXPECT_EQ(H3FftSize(1024), 2048);
  EXPECT_EQ(H3FftSize(1025), 4096);
}

}  // namespace
}  // namespace h3::kernels
