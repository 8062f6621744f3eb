// The tensor-core prefill attention's algorithm (kernels/flash_attention.h),
// emulated on the CPU with the kernel's tiles and roundings, against the CPU
// twin AttentionCpu. This checks what no GPU test can check here: the
// online softmax over key tiles, the causal mask at tile edges, rotary at
// each sequence's positions, packed sequences with prefixes in their caches,
// and the error that half-precision operands cost. The CUDA mechanics
// (fragments, shared memory) are the gpu-labelled flash_attention_test's.
//
// Bounds, per output element, from the arithmetic (tests/support/
// flash_attention_cases.h, Bound): with the weights w_j of the row's
// softmax, spread = sum_j w_j |v_j - o| and mag = sum_j w_j |v_j|:
// - Against AttentionCpu fed the very operands the emulation multiplies
//   (rotated, then rounded to the half type; rotary then off): only the
//   weights' rounding to the half type (relative u: 2^-11 fp16, 2^-8 bf16)
//   and fp32 arithmetic remain: Bound(u + score error, spread, mag).
//   A mask that lets row t see one key too many or too few moves it by about
//   spread / (t + 1), so this catches it for t < 1 / u (2048 fp16, 256
//   bf16); a wrong tile rescale is off by O(spread) anywhere.
// - Against AttentionCpu on the original fp32 inputs (rotary applied by
//   AttentionCpu itself): rounding q and k moves each score by at most
//   (2u + u^2) sum_i |q_i k_i| / sqrt(head_dim) =: sigma, so each weight by
//   a relative e^sigma - 1 on top; rounding v adds u mag. Loose (sigma is a
//   worst case) but checks rotary at the chunk's positions: a wrong angle
//   is off by O(1).
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/flash_attention.h"
#include "tests/support/flash_attention_cases.h"

namespace h3::kernels::flash {
namespace {

class FlashAttentionEmulationTest : public ::testing::TestWithParam<Case> {};

TEST_P(FlashAttentionEmulationTest, MatchesAttentionCpu) {
  const Case& c = GetParam();
  Inputs in = MakeInputs(c, 7);
  const int64_t d = in.shape.d_model();

  // The emulation over all sequences at once, on its own copy of the caches.
  std::vector<std::vector<float>> emu_k = in.k, emu_v = in.v;
  const std::vector<Sequence> seqs = SequencesOver(c, in, emu_k, emu_v);
  std::vector<float> emu_out(in.rows * d);
  FlashAttentionEmulation({in.shape, c.type, static_cast<int>(seqs.size()),
                           seqs.data(), in.qkv.data(), in.freq(),
                           emu_out.data()});

  const double u = UnitRoundoff(c.type);
  double worst_rounded = 0, worst_original = 0;
  for (size_t s = 0; s < c.chunks.size(); ++s) {
    SCOPED_TRACE(::testing::Message() << "sequence " << s);
    const Chunk& ch = c.chunks[s];
    const int64_t cap = in.Capacity(ch), keys = ch.prefix + ch.length;
    const std::vector<float> chunk_qkv(
        in.qkv.begin() + seqs[s].row * 3 * d,
        in.qkv.begin() + (seqs[s].row + ch.length) * 3 * d);

    // AttentionCpu on the original inputs; the caches must agree exactly
    // (the same ApplyRotary), the untouched positions included.
    std::vector<float> k = in.k[s], v = in.v[s], out(ch.length * d);
    AttentionCpu({in.shape,
                  ch.prefix,
                  ch.length,
                  chunk_qkv.data(),
                  in.freq(),
                  {k.data(), v.data(), cap},
                  out.data()});
    EXPECT_EQ(emu_k[s], k);
    EXPECT_EQ(emu_v[s], v);

    // AttentionCpu on the emulation's rounded operands, rotary off.
    const Operands rounded = MakeOperands(in, ch, chunk_qkv, k, v, &c.type);
    const Operands original = MakeOperands(in, ch, chunk_qkv, k, v, nullptr);
    const AttentionShape plain{in.shape.heads, in.shape.head_dim, 0};
    std::vector<float> qkv(keys * 3 * d, 0.0f);
    for (int64_t t = 0; t < keys; ++t) {
      if (t >= ch.prefix) {
        std::copy(&rounded.q[(t - ch.prefix) * d],
                  &rounded.q[(t - ch.prefix + 1) * d], &qkv[t * 3 * d]);
      }
      std::copy(&rounded.k[t * d], &rounded.k[(t + 1) * d],
                &qkv[t * 3 * d + d]);
      std::copy(&rounded.v[t * d], &rounded.v[(t + 1) * d],
                &qkv[t * 3 * d + 2 * d]);
    }
    std::vector<float> rk(keys * d), rv(keys * d), rout(keys * d);
    AttentionCpu({plain,
                  0,
                  keys,
                  qkv.data(),
                  nullptr,
                  {rk.data(), rv.data(), keys},
                  rout.data()});

    const float* got = emu_out.data() + seqs[s].row * d;
    const int hd = c.head_dim;
    EXPECT_EQ(0, CompareRows(
                     in, ch, rounded, got, rout.data() + ch.prefix * d,
                     [&](const RowSpread& r, int i, int64_t n) {
                       const double delta =
                           (1 + u) * (1 + ScoreError(hd, r.max_abs_dot)) - 1;
                       return Bound(delta, r.spread[i], r.mag[i], n);
                     },
                     &worst_rounded));
    EXPECT_EQ(0, CompareRows(
                     in, ch, original, got, out.data(),
                     [&](const RowSpread& r, int i, int64_t n) {
                       const double sigma =
                           (2 * u + u * u) * r.max_abs_dot / std::sqrt(hd);
                       const double delta =
                           std::exp(sigma) * (1 + u) *
                               (1 + ScoreError(hd, r.max_abs_dot)) -
                           1;
                       // The spread is the original values'; the rounded
                       // ones' differs by at most 2u mag.
                       return Bound(delta, r.spread[i] + 2 * u * r.mag[i],
                                    r.mag[i], n) +
                              u * r.mag[i];
                     },
                     &worst_original));
  }
  RecordProperty("worst_error_over_bound_rounded_operands",
                 std::to_string(worst_rounded));
  RecordProperty("worst_error_over_bound_original_inputs",
                 std::to_string(worst_original));
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashAttentionEmulationTest,
                         ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return CaseName(info.param);
                         });

}  // namespace
}  // namespace h3::kernels::flash
