// AttentionCpu and AttentionDecodeCpu with a 16-bit KV cache
// (kernels/attention.h, KvCache::type): the output and the whole cache must
// be, bit for bit, those of an fp32 attention whose cache stores each new
// rotated key and value rounded once to the cache's type, for every io_type.
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "base/element_type.h"
#include "base/half_float.h"
#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "tests/support/half_io.h"
#include "tests/support/inv_freq.h"
#include "tests/support/random.h"

namespace h3::kernels {
namespace {

using h3::testing::InvFreq;

using h3::testing::RandomNormal;
using Typed = h3::testing::TypedTensor;

// The reference: AttentionCpu's fp32 arithmetic over fp32 caches k and v,
// storing each new token's rotated key and value rounded to `cache_type`.
std::vector<float> RoundedCacheAttention(const AttentionShape& s, int64_t start,
                                         int64_t length, const float* qkv,
                                         const float* inv_freq,
                                         ElementType cache_type, float* k,
                                         float* v) {
  const int heads = s.heads, hd = s.head_dim, d = s.d_model();
  for (int64_t t = 0; t < length; ++t) {
    const int64_t pos = start + t;
    float* kr = k + pos * d;
    for (int e = 0; e < d; ++e) kr[e] = qkv[t * 3 * d + d + e];
    for (int h = 0; h < heads && s.rotary_dim > 0; ++h) {
      ApplyRotary(kr + h * hd, s.rotary_dim, inv_freq, pos);
    }
    for (int e = 0; e < d; ++e) {
      kr[e] = RoundToType(kr[e], cache_type);
      v[pos * d + e] = RoundToType(qkv[t * 3 * d + 2 * d + e], cache_type);
    }
  }
  std::vector<float> out(length * d), q(hd);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (int64_t t = 0; t < length; ++t) {
    const int64_t pos = start + t;
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < hd; ++i) q[i] = qkv[t * 3 * d + h * hd + i];
      if (s.rotary_dim > 0) ApplyRotary(q.data(), s.rotary_dim, inv_freq, pos);
      std::vector<double> scores(pos + 1), acc(hd, 0.0);
      double max_score = -INFINITY, total = 0;
      for (int64_t j = 0; j <= pos; ++j) {
        double dot = 0;
        for (int i = 0; i < hd; ++i)
          dot += double{q[i]} * k[j * d + h * hd + i];
        scores[j] = dot * scale;
        max_score = std::max(max_score, scores[j]);
      }
      for (int64_t j = 0; j <= pos; ++j) {
        const double w = std::exp(scores[j] - max_score);
        total += w;
        for (int i = 0; i < hd; ++i) acc[i] += w * v[j * d + h * hd + i];
      }
      for (int i = 0; i < hd; ++i) {
        out[t * d + h * hd + i] = static_cast<float>(acc[i] / total);
      }
    }
  }
  return out;
}

// (cache type, io_type)
class AttentionKvTest
    : public ::testing::TestWithParam<std::tuple<ElementType, ElementType>> {};

// A chunk after a prefix already in the cache, rotary on part of the head.
TEST_P(AttentionKvTest, PrefillEqualsRoundedFp32Cache) {
  const auto [cache_type, io_type] = GetParam();
  const AttentionShape s{3, 16, 8};
  const int64_t d = s.d_model(), prefix = 11, len = 29, cap = 48;
  const std::vector<float> inv_freq = InvFreq(s.rotary_dim);
  const Typed qkv(RandomNormal(len * 3 * d, 1), io_type);
  Typed k(RandomNormal(cap * d, 2), cache_type);
  Typed v(RandomNormal(cap * d, 3), cache_type);
  std::vector<float> k_ref = k.Values(), v_ref = v.Values();
  const std::vector<float> qkv_values = qkv.Values();
  const std::vector<float> want =
      RoundedCacheAttention(s, prefix, len, qkv_values.data(), inv_freq.data(),
                            cache_type, k_ref.data(), v_ref.data());

  Typed out(std::vector<float>(len * d), io_type);
  AttentionParams p{s,
                    prefix,
                    len,
                    qkv.bytes.data(),
                    inv_freq.data(),
                    {k.bytes.data(), v.bytes.data(), cap, cache_type},
                    out.bytes.data()};
  p.io_type = io_type;
  AttentionCpu(p);
  EXPECT_EQ(out.bytes, Typed(want, io_type).bytes);
  EXPECT_EQ(k.bytes, Typed(k_ref, cache_type).bytes);
  EXPECT_EQ(v.bytes, Typed(v_ref, cache_type).bytes);
}

// Three sequences at their own positions (the first and last of a cache
// among them), each with its own cache.
TEST_P(AttentionKvTest, DecodeEqualsRoundedFp32Cache) {
  const auto [cache_type, io_type] = GetParam();
  const AttentionShape s{2, 32, 32};
  const int64_t d = s.d_model(), cap = 40;
  const int batch = 3;
  const std::vector<float> inv_freq = InvFreq(s.rotary_dim);
  const Typed qkv(RandomNormal(batch * 3 * d, 11), io_type);
  const std::vector<float> qkv_values = qkv.Values();
  const std::vector<int64_t> positions = {0, 17, 39};
  std::vector<Typed> k, v;
  std::vector<KvCache> caches;
  std::vector<float> want;
  for (int b = 0; b < batch; ++b) {
    k.emplace_back(RandomNormal(cap * d, 20 + b), cache_type);
    v.emplace_back(RandomNormal(cap * d, 30 + b), cache_type);
  }
  std::vector<std::vector<float>> k_ref, v_ref;
  for (int b = 0; b < batch; ++b) {
    caches.push_back({k[b].bytes.data(), v[b].bytes.data(), cap, cache_type});
    k_ref.push_back(k[b].Values());
    v_ref.push_back(v[b].Values());
    const std::vector<float> row = RoundedCacheAttention(
        s, positions[b], 1, qkv_values.data() + b * 3 * d, inv_freq.data(),
        cache_type, k_ref[b].data(), v_ref[b].data());
    want.insert(want.end(), row.begin(), row.end());
  }

  Typed out(std::vector<float>(batch * d), io_type);
  AttentionDecodeParams p{s,
                          batch,
                          qkv.bytes.data(),
                          inv_freq.data(),
                          caches.data(),
                          positions.data(),
                          out.bytes.data()};
  p.io_type = io_type;
  AttentionDecodeCpu(p);
  EXPECT_EQ(out.bytes, Typed(want, io_type).bytes);
  for (int b = 0; b < batch; ++b) {
    EXPECT_EQ(k[b].bytes, Typed(k_ref[b], cache_type).bytes) << b;
    EXPECT_EQ(v[b].bytes, Typed(v_ref[b], cache_type).bytes) << b;
  }
}

// kF32 caches check the reference itself: it must be AttentionCpu's fp32
// arithmetic, bit for bit.
INSTANTIATE_TEST_SUITE_P(
    CacheAndIoTypes, AttentionKvTest,
    ::testing::Combine(::testing::Values(ElementType::kF32, ElementType::kF16,
                                         ElementType::kBF16),
                       ::testing::Values(ElementType::kF32, ElementType::kF16,
                                         ElementType::kBF16)),
    [](const auto& info) {
      return std::string("cache_") + ElementTypeName(std::get<0>(info.param)) +
             "_io_" + ElementTypeName(std::get<1>(info.param));
    });

}  // namespace
}  // namespace h3::kernels
