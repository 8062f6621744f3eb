#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/half_float.h"
#include "base/parallel.h"

namespace h3::kernels {

void ApplyRotary(float* x, int rotary_dim, const float* inv_freq,
                 int64_t position) {
  const int half = rotary_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float angle = static_cast<float>(position) * inv_freq[i];
    const double c = std::cos(double{angle}), s = std::sin(double{angle});
    const double x1 = x[i], x2 = x[i + half];
    x[i] = static_cast<float>(x1 * c - x2 * s);
    x[i + half] = static_cast<float>(x2 * c + x1 * s);
  }
}

namespace {

// The fp32 attention: AttentionCpu with io_type kF32 (any cache type).
void AttentionF32(const AttentionParams& p, const float* qkv, float* out_all) {
  const AttentionShape& s = p.shape;
  const int heads = s.heads, hd = s.head_dim, d = s.d_model();
  const int64_t row = 3 * static_cast<int64_t>(d);  // one token's q, k, v

  // Rotated keys and values of the new tokens into the cache, rounded once
  // to the cache's type.
  const ElementType ct = p.cache.type;
  std::vector<float> k(d);
  for (int64_t t = 0; t < p.length; ++t) {
    const int64_t pos = p.start + t;
    std::memcpy(k.data(), qkv + t * row + d, d * sizeof(float));
    if (s.rotary_dim > 0) {
      for (int h = 0; h < heads; ++h) {
        ApplyRotary(k.data() + h * hd, s.rotary_dim, p.inv_freq, pos);
      }
    }
    StoreFloats(k.data(), d, p.cache.k, ct, pos * d);
    StoreFloats(qkv + t * row + 2 * d, d, p.cache.v, ct, pos * d);
  }

  // One (query token, head) pair per work item.
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  ParallelFor(p.length * heads, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> q(hd), widened(hd);
    std::vector<double> scores(p.start + p.length), acc(hd);
    // Head h of cache row j of `cache` (K or V), widened to fp32.
    auto cached = [&](const void* cache, int64_t j, int h) -> const float* {
      if (ct == ElementType::kF32)
        return static_cast<const float*>(cache) + j * d + h * hd;
      LoadFloats(cache, ct, j * d + h * hd, hd, widened.data());
      return widened.data();
    };
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / heads;
      const int h = static_cast<int>(item % heads);
      const int64_t pos = p.start + t;
      std::memcpy(q.data(), qkv + t * row + h * hd, hd * sizeof(float));
      if (s.rotary_dim > 0)
        ApplyRotary(q.data(), s.rotary_dim, p.inv_freq, pos);

      double max_score = -INFINITY;
      for (int64_t j = 0; j <= pos; ++j) {
        const float* k = cached(p.cache.k, j, h);
        double dot = 0;
        for (int i = 0; i < hd; ++i) dot += double{q[i]} * k[i];
        scores[j] = dot * scale;
        max_score = std::max(max_score, scores[j]);
      }
      double total = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j <= pos; ++j) {
        const double w = std::exp(scores[j] - max_score);
        total += w;
        const float* v = cached(p.cache.v, j, h);
        for (int i = 0; i < hd; ++i) acc[i] += w * v[i];
      }
      float* out = out_all + t * d + h * hd;
      for (int i = 0; i < hd; ++i) out[i] = static_cast<float>(acc[i] / total);
    }
  });
}

}  // namespace

void AttentionCpu(const AttentionParams& p) {
  if (p.io_type == ElementType::kF32) {
    AttentionF32(p, static_cast<const float*>(p.qkv),
                 static_cast<float*>(p.out));
    return;
  }
  // 16-bit I/O: the fp32 attention of the widened input, rounded once.
  const int64_t d = p.shape.d_model();
  std::vector<float> qkv(p.length * 3 * d), out(p.length * d);
  LoadFloats(p.qkv, p.io_type, 0, qkv.size(), qkv.data());
  AttentionF32(p, qkv.data(), out.data());
  StoreFloats(out.data(), out.size(), p.out, p.io_type, 0);
}

void AttentionDecodeCpu(const AttentionDecodeParams& p) {
  const int64_t d = p.shape.d_model();
  const int64_t size = ElementSize(p.io_type);
  for (int b = 0; b < p.batch; ++b) {
    AttentionParams one;
    one.shape = p.shape;
    one.start = p.positions[b];
    one.length = 1;
    one.qkv = static_cast<const char*>(p.qkv) + b * 3 * d * size;
    one.inv_freq = p.inv_freq;
    one.cache = p.caches[b];
    one.out = static_cast<char*>(p.out) + b * d * size;
    one.io_type = p.io_type;
    AttentionCpu(one);
  }
}

}  // namespace h3::kernels
