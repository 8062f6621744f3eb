// The sequence mixers' 16-bit I/O on the CPU (io_type kF16 / kBF16 of
// AttentionCpu, AttentionDecodeCpu, H3StepCpu and FlashAttentionEmulation):
// each must store, bit for bit, its fp32 result on the exactly widened
// inputs rounded once to the type, and leave the fp32 caches and states
// exactly as that fp32 run does.
#include <cstdint>
#include <vector>

#include "base/element_type.h"
#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/flash_attention.h"
#include "kernels/h3.h"
#include "tests/support/flash_attention_cases.h"
#include "tests/support/half_io.h"
#include "tests/support/inv_freq.h"
#include "tests/support/random.h"
#include "tests/support/random_h3_layer.h"

namespace h3::kernels {
namespace {

using h3::testing::InvFreq;

using h3::testing::HalfBits;
using h3::testing::HalfInput;
using h3::testing::RandomNormal;

class MixerHalfIoTest : public ::testing::TestWithParam<ElementType> {};

// A chunk after a prefix already in the cache, rotary on part of the head.
TEST_P(MixerHalfIoTest, AttentionPrefillIsRoundedFp32Result) {
  const ElementType type = GetParam();
  const AttentionShape s{3, 16, 8};
  const int64_t d = s.d_model(), prefix = 11, len = 29, cap = 48;
  const std::vector<float> inv_freq = InvFreq(s.rotary_dim);
  const HalfInput qkv(RandomNormal(len * 3 * d, 21), type);
  std::vector<float> k32 = RandomNormal(cap * d, 22);
  std::vector<float> v32 = RandomNormal(cap * d, 23);
  std::vector<float> k16 = k32, v16 = v32;

  std::vector<float> want(len * d);
  AttentionCpu({s,
                prefix,
                len,
                qkv.values.data(),
                inv_freq.data(),
                {k32.data(), v32.data(), cap},
                want.data()});
  std::vector<uint16_t> got(len * d);
  AttentionParams p{s,
                    prefix,
                    len,
                    qkv.bits.data(),
                    inv_freq.data(),
                    {k16.data(), v16.data(), cap},
                    got.data()};
  p.io_type = type;
  AttentionCpu(p);
  EXPECT_EQ(got, HalfBits(want, type));
  EXPECT_EQ(k16, k32);
  EXPECT_EQ(v16, v32);
}

// Three sequences at their own positions, each with its own cache.
TEST_P(MixerHalfIoTest, AttentionDecodeIsRoundedFp32Result) {
  const ElementType type = GetParam();
  const AttentionShape s{2, 32, 32};
  const int64_t d = s.d_model(), cap = 40;
  const int batch = 3;
  const std::vector<float> inv_freq = InvFreq(s.rotary_dim);
  const HalfInput qkv(RandomNormal(batch * 3 * d, 31), type);
  const std::vector<int64_t> positions = {0, 17, 39};
  std::vector<std::vector<float>> k32, v32;
  for (int b = 0; b < batch; ++b) {
    k32.push_back(RandomNormal(cap * d, 40 + b));
    v32.push_back(RandomNormal(cap * d, 50 + b));
  }
  std::vector<std::vector<float>> k16 = k32, v16 = v32;
  std::vector<KvCache> caches32, caches16;
  for (int b = 0; b < batch; ++b) {
    caches32.push_back({k32[b].data(), v32[b].data(), cap});
    caches16.push_back({k16[b].data(), v16[b].data(), cap});
  }

  std::vector<float> want(batch * d);
  AttentionDecodeCpu({s, batch, qkv.values.data(), inv_freq.data(),
                      caches32.data(), positions.data(), want.data()});
  std::vector<uint16_t> got(batch * d);
  AttentionDecodeParams p{s,
                          batch,
                          qkv.bits.data(),
                          inv_freq.data(),
                          caches16.data(),
                          positions.data(),
                          got.data()};
  p.io_type = type;
  AttentionDecodeCpu(p);
  EXPECT_EQ(got, HalfBits(want, type));
  EXPECT_EQ(k16, k32);
  EXPECT_EQ(v16, v32);
}

// Fused q|k|v rows (stride 3 d), head_dim 1 and 2, sequences at their own
// positions with random states.
TEST_P(MixerHalfIoTest, H3StepIsRoundedFp32Result) {
  const ElementType type = GetParam();
  for (int head_dim : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim);
    const H3Shape shape{24, head_dim, 16};
    const h3::testing::RandomH3Layer layer(shape, 61);
    const int batch = 3;
    const int64_t d = shape.d_model;
    const HalfInput qkv(RandomNormal(batch * 3 * d, 62), type);
    const std::vector<int64_t> positions = {16, 21, 100};  // >= N
    std::vector<h3::testing::H3StateBuffers> s32, s16;
    for (int b = 0; b < batch; ++b) {
      s32.emplace_back(shape);
      s32.back().shift = RandomNormal(s32.back().shift.size(), 70 + b);
      s32.back().diag = RandomNormal(s32.back().diag.size(), 80 + b);
    }
    s16 = s32;
    std::vector<H3State> v32, v16;
    for (int b = 0; b < batch; ++b) {
      v32.push_back(s32[b].view());
      v16.push_back(s16[b].view());
    }

    std::vector<float> want(batch * d);
    const float* in = qkv.values.data();
    H3StepCpu({layer.weights(), batch, in, in + d, in + 2 * d, want.data(),
               v32.data(), 3 * d, positions.data()});
    std::vector<uint16_t> got(batch * d);
    const uint16_t* bits = qkv.bits.data();
    H3StepParams p{layer.weights(), batch,        bits,
                   bits + d,        bits + 2 * d, got.data(),
                   v16.data(),      3 * d,        positions.data()};
    p.io_type = type;
    H3StepCpu(p);
    EXPECT_EQ(got, HalfBits(want, type));
    for (int b = 0; b < batch; ++b) {
      EXPECT_EQ(s16[b].shift, s32[b].shift) << b;
      EXPECT_EQ(s16[b].diag, s32[b].diag) << b;
    }
  }
}

// Two packed sequences, one with a prefix in its cache; the operand type
// is the other half type, so io_type and type are independent.
TEST_P(MixerHalfIoTest, FlashEmulationIsRoundedFp32Result) {
  const ElementType type = GetParam();
  flash::Case c{2, 64, 32, ElementType::kF16, {{0, 17}, {70, 5}}};
  c.type = type == ElementType::kF16 ? ElementType::kBF16 : ElementType::kF16;
  const flash::Inputs in = flash::MakeInputs(c, 91);
  const int64_t d = in.shape.d_model();
  const HalfInput qkv(in.qkv, type);
  std::vector<std::vector<float>> k32 = in.k, v32 = in.v, k16 = in.k,
                                  v16 = in.v;
  const std::vector<flash::Sequence> seq32 =
      flash::SequencesOver(c, in, k32, v32);
  const std::vector<flash::Sequence> seq16 =
      flash::SequencesOver(c, in, k16, v16);
  std::vector<float> want(in.rows * d);
  flash::FlashAttentionEmulation({in.shape, c.type, 2, seq32.data(),
                                  qkv.values.data(), in.freq(), want.data()});
  std::vector<uint16_t> got(in.rows * d);
  flash::FlashAttentionEmulation({in.shape, c.type, 2, seq16.data(),
                                  qkv.bits.data(), in.freq(), got.data(),
                                  type});
  EXPECT_EQ(got, HalfBits(want, type));
  EXPECT_EQ(k16, k32);
  EXPECT_EQ(v16, v32);
}

INSTANTIATE_TEST_SUITE_P(Types, MixerHalfIoTest,
                         ::testing::Values(ElementType::kF16,
                                           ElementType::kBF16),
                         [](const auto& info) {
                           return std::string(ElementTypeName(info.param));
                         });

}  // namespace
}  // namespace h3::kernels
