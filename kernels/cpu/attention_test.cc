// Attention against a direct evaluation written differently: rotary by the
// "rotate half" formula with duplicated cos/sin, softmax over the full masked
// score matrix. And chunked prefill + decoding against one prefill.
#include "kernels/attention.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/inv_freq.h"
#include "tests/support/random.h"

namespace h3::kernels {
namespace {

using h3::testing::InvFreq;

// x * cos + rotate_half(x) * sin over the first r dims, cos/sin of
// (fp32 position * inv_freq) repeated twice.
std::vector<double> RotateHalf(const float* x, int hd, int r,
                               const std::vector<float>& inv_freq, int pos) {
  std::vector<double> out(x, x + hd);
  for (int i = 0; i < r; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i % (r / 2)];
    const double rotated =
        i < r / 2 ? -double{x[i + r / 2]} : double{x[i - r / 2]};
    out[i] = x[i] * std::cos(double{angle}) + rotated * std::sin(double{angle});
  }
  return out;
}

std::vector<double> Direct(const AttentionShape& s, int len,
                           const std::vector<float>& qkv,
                           const std::vector<float>& inv_freq) {
  const int d = s.d_model(), hd = s.head_dim;
  std::vector<double> out(len * d);
  for (int h = 0; h < s.heads; ++h) {
    std::vector<std::vector<double>> q(len), k(len);
    for (int t = 0; t < len; ++t) {
      q[t] =
          RotateHalf(&qkv[t * 3 * d + h * hd], hd, s.rotary_dim, inv_freq, t);
      k[t] = RotateHalf(&qkv[t * 3 * d + d + h * hd], hd, s.rotary_dim,
                        inv_freq, t);
    }
    for (int t = 0; t < len; ++t) {
      std::vector<double> w(len, 0.0);
      double total = 0;
      for (int j = 0; j < len; ++j) {
        double dot = 0;
        for (int i = 0; i < hd; ++i) dot += q[t][i] * k[j][i];
        // The reference's additive -10000 mask: exp underflows to 0 as -inf.
        w[j] = j <= t ? std::exp(dot / std::sqrt(double(hd))) : 0.0;
        total += w[j];
      }
      for (int i = 0; i < hd; ++i) {
        double sum = 0;
        for (int j = 0; j < len; ++j)
          sum += w[j] * qkv[j * 3 * d + 2 * d + h * hd + i];
        out[t * d + h * hd + i] = sum / total;
      }
    }
  }
  return out;
}

struct Cache {
  Cache(const AttentionShape& s, int64_t capacity)
      : k(capacity * s.d_model()),
        v(capacity * s.d_model()),
        capacity(capacity) {}
  KvCache view() { return {k.data(), v.data(), capacity}; }
  std::vector<float> k, v;
  int64_t capacity;
};

class AttentionCpuTest : public ::testing::TestWithParam<int /*rotary_dim*/> {};

TEST_P(AttentionCpuTest, PrefillMatchesDirectEvaluation) {
  const AttentionShape s{3, 8, GetParam()};
  const int len = 37, d = s.d_model();
  auto qkv = h3::testing::RandomNormal(len * 3 * d, 1);
  auto inv_freq = InvFreq(std::max(s.rotary_dim, 2));
  Cache cache(s, 64);
  std::vector<float> out(len * d);
  AttentionCpu(
      {s, 0, len, qkv.data(), inv_freq.data(), cache.view(), out.data()});
  std::vector<double> want = Direct(s, len, qkv, inv_freq);
  for (int i = 0; i < len * d; ++i) {
    ASSERT_NEAR(out[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << i;
  }
}

TEST_P(AttentionCpuTest, ChunksAndDecodeStepsEqualOnePrefill) {
  const AttentionShape s{2, 16, GetParam()};
  const int len = 50, d = s.d_model();
  auto qkv = h3::testing::RandomNormal(len * 3 * d, 2);
  auto inv_freq = InvFreq(std::max(s.rotary_dim, 2));
  Cache whole(s, len), parts(s, len);
  std::vector<float> want(len * d), got(len * d);
  AttentionCpu(
      {s, 0, len, qkv.data(), inv_freq.data(), whole.view(), want.data()});
  int64_t start = 0;
  for (int64_t chunk : {20, 13, 1, 1, 15}) {
    AttentionCpu({s, start, chunk, qkv.data() + start * 3 * d, inv_freq.data(),
                  parts.view(), got.data() + start * d});
    start += chunk;
  }
  ASSERT_EQ(start, len);
  for (int i = 0; i < len * d; ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-6 * (1 + std::abs(want[i]))) << i;
  }
  EXPECT_EQ(parts.k, whole.k);
  EXPECT_EQ(parts.v, whole.v);
}

INSTANTIATE_TEST_SUITE_P(Rotary, AttentionCpuTest, ::testing::Values(0, 4, 8));

TEST(RotaryTest, DotProductDependsOnlyOnRelativePosition) {
  const int hd = 16;
  auto inv_freq = InvFreq(hd);
  auto q = h3::testing::RandomNormal(hd, 3),
       k = h3::testing::RandomNormal(hd, 4);
  auto dot_at = [&](int m, int n) {
    std::vector<float> a = q, b = k;
    ApplyRotary(a.data(), hd, inv_freq.data(), m);
    ApplyRotary(b.data(), hd, inv_freq.data(), n);
    double dot = 0;
    for (int i = 0; i < hd; ++i) dot += double{a[i]} * b[i];
    return dot;
  };
  EXPECT_NEAR(dot_at(5, 2), dot_at(103, 100), 1e-4);
  EXPECT_NEAR(dot_at(0, 0), dot_at(77, 77), 1e-4);
  std::vector<float> x = q;
  ApplyRotary(x.data(), hd, inv_freq.data(), 0);
  EXPECT_EQ(x, q);  // position 0 is the identity
}

}  // namespace
}  // namespace h3::kernels
