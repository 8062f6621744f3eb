// The CPU emulation of the tensor-core prefill attention
// (kernels/flash_attention.h): the kernel's tiles, roundings and fp32
// accumulations, one query row at a time.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/half_float.h"
#include "kernels/flash_attention.h"

namespace h3::kernels::flash {
namespace {

// One sequence's rotated queries rounded to the half type: [length, d].
std::vector<float> RoundedQueries(const Params& p, const Sequence& s) {
  const int hd = p.shape.head_dim, d = p.shape.d_model();
  std::vector<float> q(s.length * d);
  for (int64_t t = 0; t < s.length; ++t) {
    const float* in = static_cast<const float*>(p.qkv) + (s.row + t) * 3 * d;
    std::memcpy(&q[t * d], in, d * sizeof(float));
    for (int h = 0; h < p.shape.heads && p.shape.rotary_dim > 0; ++h) {
      ApplyRotary(&q[t * d + h * hd], p.shape.rotary_dim, p.inv_freq,
                  s.start + t);
    }
  }
  for (float& x : q) x = RoundToType(x, p.type);
  return q;
}

// The chunk's rotated keys and values into the cache, rounded once to the
// cache's type, as AttentionCpu and the kernel's first launch write them.
void WriteCache(const Params& p, const Sequence& s) {
  const int hd = p.shape.head_dim, d = p.shape.d_model();
  std::vector<float> k(d);
  for (int64_t t = 0; t < s.length; ++t) {
    const int64_t pos = s.start + t;
    const float* in = static_cast<const float*>(p.qkv) + (s.row + t) * 3 * d;
    std::memcpy(k.data(), in + d, d * sizeof(float));
    for (int h = 0; h < p.shape.heads && p.shape.rotary_dim > 0; ++h) {
      ApplyRotary(k.data() + h * hd, p.shape.rotary_dim, p.inv_freq, pos);
    }
    StoreFloats(k.data(), d, s.cache.k, s.cache.type, pos * d);
    StoreFloats(in + 2 * d, d, s.cache.v, s.cache.type, pos * d);
  }
}

// A sum of 16 products of half values (exact in fp64: 2 x 11 significant
// bits each) added to an fp32 accumulator with one rounding, as one k16 step
// of the MMA adds to its fp32 accumulator.
float AddProducts16(float acc, const float* a, const float* b) {
  double sum = 0;
  for (int i = 0; i < 16; ++i) sum += double{a[i]} * b[i];
  return static_cast<float>(acc + sum);
}

}  // namespace

namespace {

// The emulation with fp32 qkv and out (io_type kF32).
void EmulationF32(const Params& p) {
  const int heads = p.shape.heads, hd = p.shape.head_dim;
  const int d = p.shape.d_model();
  const float scale = ScoreScaleLog2(hd);
  for (int si = 0; si < p.sequences; ++si) {
    const Sequence& s = p.seqs[si];
    WriteCache(p, s);
    const std::vector<float> q = RoundedQueries(p, s);
    const int64_t keys = s.start + s.length;
    // The half-rounded keys [keys, d] and values, transposed to [d, keys] so
    // that the loop over one output dim reads them in order (the kernel
    // holds both row-major and reads V's fragments transposed). A cache of
    // the operand type is already rounded: the rounding changes nothing.
    std::vector<float> k(keys * d), vt(static_cast<size_t>(d) * keys);
    for (int64_t j = 0; j < keys; ++j) {
      for (int e = 0; e < d; ++e) {
        const int64_t i = j * d + e;
        k[i] = RoundToType(LoadFloat(s.cache.k, s.cache.type, i), p.type);
        vt[e * keys + j] =
            RoundToType(LoadFloat(s.cache.v, s.cache.type, i), p.type);
      }
    }
    std::vector<float> x(kKeyTile), prob(kKeyTile), o(hd);
    for (int h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < s.length; ++t) {
        const int64_t pos = s.start + t;
        const float* qr = &q[t * d + h * hd];
        float m = -INFINITY, l = 0;
        std::fill(o.begin(), o.end(), 0.0f);
        for (int64_t k0 = 0; k0 <= pos; k0 += kKeyTile) {
          // Scores, masked past the row's position (and past the keys: a
          // tile's tail holds zeros in the kernel, masked all the same).
          float tile_max = -INFINITY;
          for (int j = 0; j < kKeyTile; ++j) {
            x[j] = -INFINITY;
            if (k0 + j > pos) continue;
            const float* kr = &k[(k0 + j) * d + h * hd];
            float acc = 0;
            for (int i = 0; i < hd; i += 16) {
              acc = AddProducts16(acc, qr + i, kr + i);
            }
            x[j] = acc * scale;
            tile_max = std::max(tile_max, x[j]);
          }
          const float m_new = std::max(m, tile_max);
          const float c = std::exp2(m - m_new);  // 0 on the first tile
          float tile_sum = 0;
          for (int j = 0; j < kKeyTile; ++j) {
            prob[j] = RoundToType(std::exp2(x[j] - m_new), p.type);
            tile_sum += prob[j];
          }
          l = l * c + tile_sum;
          m = m_new;
          // o = o c + P V over the tile's keys, 16 keys per MMA step; keys
          // past the cache's filled part have weight 0 (and value 0 in the
          // kernel), so they are left out here.
          for (int i = 0; i < hd; ++i) {
            float acc = o[i] * c;
            const float* vrow = &vt[(h * hd + i) * keys];
            for (int j0 = 0; j0 < kKeyTile && k0 + j0 < keys; j0 += 16) {
              const int n =
                  static_cast<int>(std::min<int64_t>(16, keys - (k0 + j0)));
              double sum = 0;
              for (int j = 0; j < n; ++j) {
                sum += double{prob[j0 + j]} * vrow[k0 + j0 + j];
              }
              acc = static_cast<float>(acc + sum);
            }
            o[i] = acc;
          }
        }
        float* out = static_cast<float*>(p.out) + (s.row + t) * d + h * hd;
        for (int i = 0; i < hd; ++i) out[i] = o[i] / l;
      }
    }
  }
}

}  // namespace

void FlashAttentionEmulation(const Params& p) {
  if (p.io_type == ElementType::kF32) return EmulationF32(p);
  // 16-bit qkv and out: the fp32 emulation of the widened rows, each output
  // rounded once.
  const int64_t d = p.shape.d_model();
  int64_t rows = 0;
  for (int i = 0; i < p.sequences; ++i) {
    rows = std::max(rows, p.seqs[i].row + p.seqs[i].length);
  }
  std::vector<float> qkv(rows * 3 * d), out(rows * d);
  for (int i = 0; i < p.sequences; ++i) {
    const Sequence& s = p.seqs[i];
    LoadFloats(p.qkv, p.io_type, s.row * 3 * d, s.length * 3 * d,
               &qkv[s.row * 3 * d]);
  }
  Params wide = p;
  wide.qkv = qkv.data();
  wide.out = out.data();
  wide.io_type = ElementType::kF32;
  EmulationF32(wide);
  for (int i = 0; i < p.sequences; ++i) {
    const Sequence& s = p.seqs[i];
    StoreFloats(&out[s.row * d], s.length * d, p.out, p.io_type, s.row * d);
  }
}

}  // namespace h3::kernels::flash
