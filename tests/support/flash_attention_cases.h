#ifndef H3_TESTS_SUPPORT_FLASH_ATTENTION_CASES_H_
#define H3_TESTS_SUPPORT_FLASH_ATTENTION_CASES_H_

// The cases the tensor-core attention is checked on, shared by the CPU
// emulation's test (kernels/cpu/flash_attention_emulation_test.cc, against
// AttentionCpu) and the kernel's tests against the emulation (on a GPU,
// kernels/cuda/flash_attention_test.cc; on the CPU emulator of CUDA,
// kernels/cuda/emulator/flash_attention_emulated_test.cc), and the error
// bounds they use. Test support; header-only.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "base/element_type.h"
#include "base/half_float.h"
#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/flash_attention.h"
#include "tests/support/normalised_error.h"
#include "tests/support/random.h"

namespace h3::kernels::flash {

struct Chunk {
  int64_t prefix = 0;  // tokens already in the cache
  int64_t length = 0;  // the chunk's new tokens
};

struct Case {
  int heads = 0, head_dim = 0, rotary_dim = 0;
  ElementType type = ElementType::kF16;
  std::vector<Chunk> chunks;  // one per sequence, packed in this order
};

inline std::string CaseName(const Case& c) {
  std::string name =
      std::string(ElementTypeName(c.type)) + "_" + std::to_string(c.heads) +
      "x" + std::to_string(c.head_dim) + "_rot" + std::to_string(c.rotary_dim);
  for (const Chunk& k : c.chunks) {
    name += "_" + std::to_string(k.prefix) + "p" + std::to_string(k.length);
  }
  return name;
}

// Lengths 1, 17, 64, 65, 300 (one and several query and key tiles, ragged
// ends) and 1536; four sequences packed with different prefixes in the
// cache (one of them a single token); rotary off, full (head_dim 64) and
// partial (128, as h3-2.7b-rotary); fp16 and bf16.
inline std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (ElementType type : {ElementType::kF16, ElementType::kBF16}) {
    for (bool rotary : {false, true}) {
      for (int64_t n : {1, 17, 64, 65, 300}) {
        cases.push_back({2, 64, rotary ? 64 : 0, type, {{0, n}}});
      }
      cases.push_back({1, 128, rotary ? 64 : 0, type, {{0, 1536}}});
      cases.push_back({2,
                       128,
                       rotary ? 64 : 0,
                       type,
                       {{0, 17}, {64, 65}, {130, 1}, {5, 300}}});
    }
  }
  return cases;
}

// A case's inputs: each sequence's tokens (prefix and chunk) and caches
// holding the prefixes, written by AttentionCpu.
struct Inputs {
  AttentionShape shape;
  std::vector<std::vector<float>> tokens;  // per sequence: [prefix+len, 3d]
  std::vector<std::vector<float>> k, v;    // per sequence: [capacity, d]
  std::vector<float> inv_freq;
  std::vector<float> qkv;  // the chunks packed: [rows, 3d]
  int64_t rows = 0;

  const float* freq() const {
    return shape.rotary_dim > 0 ? inv_freq.data() : nullptr;
  }
  int64_t Capacity(const Chunk& c) const { return c.prefix + c.length + 3; }
};

// Case c's sequences, packed in order, over fp32 caches `k` and `v` (one
// per sequence, each of in.Capacity(chunk) positions: copies of in.k, in.v).
inline std::vector<Sequence> SequencesOver(const Case& c, const Inputs& in,
                                           std::vector<std::vector<float>>& k,
                                           std::vector<std::vector<float>>& v) {
  std::vector<Sequence> seqs;
  int64_t row = 0;
  for (size_t s = 0; s < c.chunks.size(); ++s) {
    const Chunk& ch = c.chunks[s];
    seqs.push_back({ch.prefix,
                    ch.length,
                    row,
                    {k[s].data(), v[s].data(), in.Capacity(ch)}});
    row += ch.length;
  }
  return seqs;
}

inline Inputs MakeInputs(const Case& c, uint32_t seed) {
  Inputs in;
  in.shape = {c.heads, c.head_dim, c.rotary_dim};
  const int64_t d = in.shape.d_model();
  for (int i = 0; i < c.rotary_dim / 2; ++i) {
    in.inv_freq.push_back(
        static_cast<float>(std::pow(10000.0, -2.0 * i / c.rotary_dim)));
  }
  for (size_t s = 0; s < c.chunks.size(); ++s) {
    const Chunk& ch = c.chunks[s];
    const int64_t cap = in.Capacity(ch);
    in.tokens.push_back(h3::testing::RandomNormal(
        (ch.prefix + ch.length) * 3 * d, seed + 3 * static_cast<uint32_t>(s)));
    in.k.push_back(h3::testing::RandomNormal(cap * d, seed + 100 + s));
    in.v.push_back(h3::testing::RandomNormal(cap * d, seed + 200 + s));
    std::vector<float> scratch(std::max<int64_t>(ch.prefix, 1) * d);
    AttentionCpu({in.shape,
                  0,
                  ch.prefix,
                  in.tokens[s].data(),
                  in.freq(),
                  {in.k[s].data(), in.v[s].data(), cap},
                  scratch.data()});
    in.qkv.insert(in.qkv.end(), in.tokens[s].begin() + ch.prefix * 3 * d,
                  in.tokens[s].end());
    in.rows += ch.length;
  }
  return in;
}

// The spread of one output row: with the weights w_j (summing to 1) of a
// row's softmax, for each dim i, spread_i = sum_j w_j |v_ji - o_i| and
// mag_i = sum_j w_j |v_ji|; and the row's largest sum_i |q_i k_ji|.
struct RowSpread {
  std::vector<double> out, spread, mag;
  double max_abs_dot = 0;
};

// Direct fp64 evaluation of one row (query q, keys [0, keys) of k and v,
// stride d) that gives the quantities the bounds below scale with.
inline RowSpread Spread(const float* q, const float* k, const float* v,
                        int64_t keys, int64_t d, int hd) {
  RowSpread r;
  std::vector<double> w(keys);
  double most = -INFINITY, total = 0;
  for (int64_t j = 0; j < keys; ++j) {
    double dot = 0, abs_dot = 0;
    for (int i = 0; i < hd; ++i) {
      dot += double{q[i]} * k[j * d + i];
      abs_dot += std::abs(double{q[i]} * k[j * d + i]);
    }
    w[j] = dot / std::sqrt(double(hd));
    most = std::max(most, w[j]);
    r.max_abs_dot = std::max(r.max_abs_dot, abs_dot);
  }
  for (double& x : w) total += (x = std::exp(x - most));
  r.out.assign(hd, 0);
  r.spread.assign(hd, 0);
  r.mag.assign(hd, 0);
  for (int64_t j = 0; j < keys; ++j) {
    for (int i = 0; i < hd; ++i) r.out[i] += w[j] / total * v[j * d + i];
  }
  for (int64_t j = 0; j < keys; ++j) {
    for (int i = 0; i < hd; ++i) {
      r.spread[i] += w[j] / total * std::abs(v[j * d + i] - r.out[i]);
      r.mag[i] += w[j] / total * std::abs(double{v[j * d + i]});
    }
  }
  return r;
}

// If every weight of a softmax is off by a relative delta_j, |delta_j| <=
// delta < 1, the output o = sum w_j v_j / sum w_j moves by
// sum_j w_j delta_j (v_j - o) / (1 + sum_j w_j delta_j): at most
// delta / (1 - delta) * spread. fp32 accumulation adds, per output, one
// rounding (2^-24 of the partial sum, <= mag) per k16 step of P V (keys /
// 16), per rescale (tiles) and the division, and the denominator's
// sequential sum (keys + tiles roundings of at most 2^-24 relative each).
inline double Bound(double delta, double spread, double mag, int64_t keys) {
  const double tiles = static_cast<double>(keys / kKeyTile + 1);
  const double roundings = keys / 16.0 + keys + 2 * tiles + 4;
  return delta / (1 - delta) * spread + roundings * std::ldexp(1.0, -24) * mag;
}

// Unit roundoff of the half types: 2^-11 (fp16) and 2^-8 (bf16).
inline double UnitRoundoff(ElementType type) {
  return type == ElementType::kBF16 ? std::ldexp(1.0, -8)
                                    : std::ldexp(1.0, -11);
}

// One sequence's operands after rotary (as fp32 values), optionally rounded
// to the half type: q [length, d] for the chunk, k and v [keys, d] for every
// key the chunk sees. `k_cache`, `v_cache`: the cache after the chunk's
// write (capacity rows).
struct Operands {
  std::vector<float> q, k, v;
};

inline Operands MakeOperands(const Inputs& in, const Chunk& c,
                             const std::vector<float>& chunk_qkv,
                             const std::vector<float>& k_cache,
                             const std::vector<float>& v_cache,
                             const ElementType* round_to) {
  const int64_t d = in.shape.d_model(), keys = c.prefix + c.length;
  const int hd = in.shape.head_dim;
  Operands o;
  o.q.resize(c.length * d);
  for (int64_t t = 0; t < c.length; ++t) {
    std::copy(&chunk_qkv[t * 3 * d], &chunk_qkv[t * 3 * d + d], &o.q[t * d]);
    for (int h = 0; h < in.shape.heads && in.shape.rotary_dim > 0; ++h) {
      ApplyRotary(&o.q[t * d + h * hd], in.shape.rotary_dim, in.freq(),
                  c.prefix + t);
    }
  }
  o.k.assign(k_cache.begin(), k_cache.begin() + keys * d);
  o.v.assign(v_cache.begin(), v_cache.begin() + keys * d);
  if (round_to != nullptr) {
    for (std::vector<float>* x : {&o.q, &o.k, &o.v}) {
      for (float& e : *x) e = RoundToType(e, *round_to);
    }
  }
  return o;
}

// Relative error of one weight of the kernel's softmax from its fp32 score
// arithmetic, on top of the rounding of the weight to the half type: the
// score's fp32 sum (one rounding per k16 step and the scaling: hd / 16 + 1
// roundings of at most 2^-24 sum |q k| in scaled units), the subtraction of
// the running max (|x - m| <= 2 scale sum |q k|: one more), exp2 within 2
// ulps; times ln 2 from base-2 units to a relative error. The rescale
// factors multiply numerator and denominator alike and cancel.
inline double ScoreError(int head_dim, double max_abs_dot) {
  const double steps = head_dim / 16.0 + 3;
  return std::log(2.0) * steps * std::ldexp(1.0, -24) *
             ScoreScaleLog2(head_dim) * max_abs_dot +
         std::ldexp(1.0, -22);
}

// Checks got (the chunk's output rows, [length, d] at `got_row` of a packed
// [rows, d] array) against want (same layout) element by element, with
// bound(spread of the row, dim) from the direct evaluation of `spread_of`'s
// operands. Returns the number of violations (failures are reported with
// the first few places) and the largest |got - want| / bound.
template <typename BoundFn>
int CompareRows(const Inputs& in, const Chunk& c, const Operands& spread_of,
                const float* got, const float* want, BoundFn bound,
                double* worst_ratio) {
  const int64_t d = in.shape.d_model();
  const int hd = in.shape.head_dim;
  int bad = 0;
  for (int64_t t = 0; t < c.length; ++t) {
    const int64_t keys = c.prefix + t + 1;
    for (int h = 0; h < in.shape.heads; ++h) {
      const RowSpread r =
          Spread(&spread_of.q[t * d + h * hd], spread_of.k.data() + h * hd,
                 spread_of.v.data() + h * hd, keys, d, hd);
      for (int i = 0; i < hd; ++i) {
        const int64_t e = t * d + h * hd + i;
        const double err = std::abs(double{got[e]} - double{want[e]});
        const double b = bound(r, i, keys);
        if (!(err <= b)) {
          if (++bad <= 5) {
            ADD_FAILURE() << "row " << t << " head " << h << " dim " << i
                          << ": got " << got[e] << ", want " << want[e]
                          << ", error " << err << " > bound " << b;
          }
        }
        *worst_ratio = std::max(*worst_ratio, err / b);
      }
    }
  }
  return bad;
}

// The kernel's results for case `c` (`out`: [rows, d]; `k`, `v`: each
// sequence's cache as the kernel left it) against the emulation's
// (FlashAttentionEmulation on copies of the same inputs, `seqs` its
// sequences), with the bounds kernels/cuda/flash_attention_test.cc states:
// keys rotated in fp64 on both sides from the same fp32 angle (CUDA's
// sin/cos may flip an fp32 rounding now and then: one ulp, < 6e-8 of the
// scale), values copied, and each output within Bound of the emulation's.
// Returns the largest error over its bound.
inline double ExpectKernelMatchesEmulation(
    const Case& c, const Inputs& in, const std::vector<Sequence>& seqs,
    const std::vector<std::vector<float>>& k,
    const std::vector<std::vector<float>>& v, const float* out,
    const std::vector<std::vector<float>>& emu_k,
    const std::vector<std::vector<float>>& emu_v, const float* emu_out) {
  const int64_t d = in.shape.d_model();
  const double u = UnitRoundoff(c.type);
  double worst = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    SCOPED_TRACE(::testing::Message() << "sequence " << s);
    const Chunk& ch = c.chunks[s];
    EXPECT_LE(h3::testing::NormalisedError(k[s], emu_k[s]), 1e-6);
    EXPECT_EQ(v[s], emu_v[s]);
    const std::vector<float> chunk_qkv(
        in.qkv.begin() + seqs[s].row * 3 * d,
        in.qkv.begin() + (seqs[s].row + ch.length) * 3 * d);
    const Operands rounded =
        MakeOperands(in, ch, chunk_qkv, emu_k[s], emu_v[s], &c.type);
    const int hd = c.head_dim;
    EXPECT_EQ(0, CompareRows(
                     in, ch, rounded, out + seqs[s].row * d,
                     emu_out + seqs[s].row * d,
                     [&](const RowSpread& r, int i, int64_t keys) {
                       const double e = ScoreError(hd, r.max_abs_dot);
                       const double delta = (1 + 2 * u) * (1 + e) * (1 + e) - 1;
                       return Bound(delta, r.spread[i], r.mag[i], keys) +
                              Bound(0, 0, r.mag[i], keys);
                     },
                     &worst));
  }
  return worst;
}

}  // namespace h3::kernels::flash

#endif  // H3_TESTS_SUPPORT_FLASH_ATTENTION_CASES_H_
