// The tensor-core prefill attention (FlashAttentionPrefillCuda: the cache
// write and the kernel, flash_attention_emulated.cc) run on the CPU by the
// emulator against its CPU emulation FlashAttentionEmulation, with the
// bounds of the GPU test (kernels/cuda/flash_attention_test.cc,
// ExpectKernelMatchesEmulation): head_dim 64 and 128, fp16 and bf16,
// rotary off, full and partial, one and several query and key tiles, and
// sequences packed with prefixes in their caches; and 16-bit caches (their
// tiles copied by cp.async) against fp32 ones. The emulator's MMA sums
// in fp32 in k order, so this checks the kernel's indexing, fragments
// (mma.sync and ldmatrix.trans), masks and online softmax, not the
// hardware's last bits.
#include <cstdint>
#include <ostream>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/emulator/fibers.h"
#include "kernels/cuda/flash_attention.h"
#include "tests/support/flash_attention_cases.h"
#include "tests/support/half_io.h"

namespace h3::kernels::flash {
namespace {

using h3::testing::HalfBits;
using h3::testing::HalfInput;
using h3::testing::TypedTensor;

class FlashAttentionEmulatedTest : public ::testing::TestWithParam<Case> {};

void CheckCase(const Case& c) {
  const Inputs in = MakeInputs(c, 7);
  const int64_t d = in.shape.d_model();
  // The emulator's device memory is the host's: each side its own caches.
  std::vector<std::vector<float>> k = in.k, v = in.v, emu_k = in.k,
                                  emu_v = in.v;
  const std::vector<Sequence> seqs = SequencesOver(c, in, k, v);
  const std::vector<Sequence> emu_seqs = SequencesOver(c, in, emu_k, emu_v);
  const int count = static_cast<int>(c.chunks.size());
  std::vector<float> out(in.rows * d), emu_out(in.rows * d);
  ASSERT_EQ(FlashAttentionPrefillCuda({in.shape, c.type, count, seqs.data(),
                                       in.qkv.data(), in.freq(), out.data()},
                                      nullptr),
            cudaSuccess);
  FlashAttentionEmulation({in.shape, c.type, count, emu_seqs.data(),
                           in.qkv.data(), in.freq(), emu_out.data()});
  ExpectKernelMatchesEmulation(c, in, emu_seqs, k, v, out.data(), emu_k, emu_v,
                               emu_out.data());
}

// Both orders of the fibers: a missing barrier shows in one of them.
TEST_P(FlashAttentionEmulatedTest, MatchesEmulation) {
  for (const emulator::Order order :
       {emulator::Order::kForward, emulator::Order::kBackward}) {
    SCOPED_TRACE(order == emulator::Order::kForward ? "forward" : "backward");
    const emulator::ScopedOrder scoped(order);
    CheckCase(GetParam());
  }
}

// From 16-bit caches (the engine's, with half activations) the K and V
// tiles are cp.async copies; from fp32 ones, loads rounded on the way. With
// 16-bit qkv and out, caches of the type that hold the fp32 ones rounded
// give the fp32 caches' bits and end holding them rounded (the chunk's keys
// and values written rounded), as the GPU test asks; both fiber orders.
TEST_P(FlashAttentionEmulatedTest, SixteenBitCachesGiveTheFp32CachesBits) {
  const Case& c = GetParam();
  const Inputs in = MakeInputs(c, 9);
  const int64_t d = in.shape.d_model();
  const HalfInput qkv(in.qkv, c.type);
  const int count = static_cast<int>(c.chunks.size());
  for (const emulator::Order order :
       {emulator::Order::kForward, emulator::Order::kBackward}) {
    SCOPED_TRACE(order == emulator::Order::kForward ? "forward" : "backward");
    const emulator::ScopedOrder scoped(order);
    std::vector<std::vector<float>> k = in.k, v = in.v;
    const std::vector<Sequence> seqs32 = SequencesOver(c, in, k, v);
    std::vector<TypedTensor> k16, v16;
    for (int s = 0; s < count; ++s) {
      k16.emplace_back(in.k[s], c.type);
      v16.emplace_back(in.v[s], c.type);
    }
    std::vector<Sequence> seqs16 = seqs32;
    for (int s = 0; s < count; ++s) {
      seqs16[s].cache = {k16[s].bytes.data(), v16[s].bytes.data(),
                         seqs32[s].cache.capacity, c.type};
    }
    std::vector<uint16_t> out[2];  // over fp32 caches, over 16-bit ones
    for (int i = 0; i < 2; ++i) {
      out[i].resize(in.rows * d);
      ASSERT_EQ(FlashAttentionPrefillCuda(
                    {in.shape, c.type, count, (i == 0 ? seqs32 : seqs16).data(),
                     qkv.bits.data(), in.freq(), out[i].data(), c.type},
                    nullptr),
                cudaSuccess)
          << emulator::LastRunError();
    }
    EXPECT_EQ(out[1], out[0]);
    for (int s = 0; s < count; ++s) {
      EXPECT_EQ(k16[s].Bits(), HalfBits(k[s], c.type)) << "keys of " << s;
      EXPECT_EQ(v16[s].Bits(), HalfBits(v[s], c.type)) << "values of " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FlashAttentionEmulatedTest,
    ::testing::Values(
        Case{2, 64, 0, ElementType::kF16, {{0, 17}}},
        Case{2, 64, 64, ElementType::kBF16, {{0, 65}}},
        Case{1, 128, 64, ElementType::kF16, {{0, 130}}},
        Case{2, 128, 0, ElementType::kBF16, {{0, 17}, {64, 65}, {130, 1}}}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return CaseName(info.param);
    });

}  // namespace
}  // namespace h3::kernels::flash
