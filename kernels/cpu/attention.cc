#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

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

void AttentionCpu(const AttentionParams& p) {
  const AttentionShape& s = p.shape;
  const int heads = s.heads, hd = s.head_dim, d = s.d_model();
  const int64_t row = 3 * static_cast<int64_t>(d);  // one token's q, k, v

  // Rotated keys and values of the new tokens into the cache.
  for (int64_t t = 0; t < p.length; ++t) {
    const int64_t pos = p.start + t;
    float* k = p.cache.k + pos * d;
    float* v = p.cache.v + pos * d;
    std::memcpy(k, p.qkv + t * row + d, d * sizeof(float));
    std::memcpy(v, p.qkv + t * row + 2 * d, d * sizeof(float));
    if (s.rotary_dim > 0) {
      for (int h = 0; h < heads; ++h) {
        ApplyRotary(k + h * hd, s.rotary_dim, p.inv_freq, pos);
      }
    }
  }

  // One (query token, head) pair per work item.
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  ParallelFor(p.length * heads, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> q(hd);
    std::vector<double> scores(p.start + p.length), acc(hd);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / heads;
      const int h = static_cast<int>(item % heads);
      const int64_t pos = p.start + t;
      std::memcpy(q.data(), p.qkv + t * row + h * hd, hd * sizeof(float));
      if (s.rotary_dim > 0)
        ApplyRotary(q.data(), s.rotary_dim, p.inv_freq, pos);

      double max_score = -INFINITY;
      for (int64_t j = 0; j <= pos; ++j) {
        const float* k = p.cache.k + j * d + h * hd;
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
        const float* v = p.cache.v + j * d + h * hd;
        for (int i = 0; i < hd; ++i) acc[i] += w * v[i];
      }
      float* out = p.out + t * d + h * hd;
      for (int i = 0; i < hd; ++i) out[i] = static_cast<float>(acc[i] / total);
    }
  });
}

void AttentionDecodeCpu(const AttentionDecodeParams& p) {
  const int64_t d = p.shape.d_model();
  for (int b = 0; b < p.batch; ++b) {
    AttentionCpu({p.shape, p.positions[b], 1, p.qkv + b * 3 * d, p.inv_freq,
                  p.caches[b], p.out + b * d});
  }
}

}  // namespace h3::kernels
