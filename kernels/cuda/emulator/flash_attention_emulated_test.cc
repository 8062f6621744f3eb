// The tensor-core prefill attention (FlashAttentionPrefillCuda: the cache
// write and the kernel, flash_attention_emulated.cc) run on the CPU by the
// emulator against its CPU emulation FlashAttentionEmulation, with the
// bounds of the GPU test (kernels/cuda/flash_attention_test.cc,
// ExpectKernelMatchesEmulation): head_dim 64 and 128, fp16 and bf16,
// rotary off, full and partial, one and several query and key tiles, and
// sequences packed with prefixes in their caches. The emulator's MMA sums
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

namespace h3::kernels::flash {
namespace {

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
