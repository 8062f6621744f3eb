// --half-activations (BackendOptions::half_activations) on the CUDA backend:
// the activations that feed products in the weights' 16-bit type. Held to
// the CPU (the specification) within the 16-bit bounds, to the fp32
// activations it replaces, and to the decode path's invariants (bitwise
// batch invariance with --batch-invariant is in cuda_engine_test.cc). Label
// gpu: skips without a device.
#include <tuple>
#include <utility>
#include <vector>

#include "engine/cuda/cuda_engine_fixture.h"
#include "tests/support/normalised_error.h"

namespace h3::engine {
namespace {

using h3::testing::Feed;
using h3::testing::NormalisedError;

class CudaHalfActivationsTest : public CudaEngineTest {
 protected:
  BackendOptions Options(ElementType type, bool half) {
    BackendOptions options;
    options.device = "cuda";
    options.weight_type = type;
    options.half_activations = half;
    return options;
  }
};

// With 16-bit weights every product input is already rounded to the weights'
// type (fp32 activations are converted before each product); half
// activations round the same values once where they are written, and add
// the rounding of q|k|v (the mixers' inputs): one more relative error of
// 2^-12 (fp16) or 2^-9 (bf16) per layer, within the bounds of
// SixteenBitWeightsStayCloseToTheCpu. The logits differ from the fp32
// activations' (the q|k|v rounding), which shows the path ran; and they are
// close to them: within a few roundings.
TEST_F(CudaHalfActivationsTest, StayCloseToTheCpuAndToFp32Activations) {
  Open(1);
  const std::vector<int32_t> prompt = Tokens(150, 2, config_.vocab_size);
  const std::vector<float> want = CpuGreedy(prompt, 8);
  ASSERT_FALSE(want.empty());
  for (auto [type, bound] : kSixteenBitBounds) {
    auto half = Load(Options(type, true));
    auto full = Load(Options(type, false));
    ASSERT_NE(half, nullptr);
    ASSERT_NE(full, nullptr);
    std::vector<int32_t> half_tokens, full_tokens;
    const std::vector<float> got = Greedy(*half, prompt, 8, &half_tokens);
    const std::vector<float> fp32 = Greedy(*full, prompt, 8, &full_tokens);
    EXPECT_LT(NormalisedError(got, want), bound) << ElementTypeName(type);
    EXPECT_LT(NormalisedError(got, fp32), bound) << ElementTypeName(type);
    EXPECT_NE(got, fp32) << ElementTypeName(type);
  }
}

// The same with a head_dim-2 H3 layer (the cuFFT prefill path, which
// reads the 16-bit q|k|v rows in place) and with the tensor-core attention
// (which reads 16-bit q|k|v and writes a 16-bit output).
TEST_F(CudaHalfActivationsTest, CufftPrefillAndFlashAttentionStayClose) {
  for (auto [head_dim, heads, attention] :
       {std::tuple{2, 4, AttentionKernel::kFma},
        std::tuple{1, 1, AttentionKernel::kFlash}}) {
    Open(head_dim, heads);
    const std::vector<int32_t> prompt = Tokens(150, 3, config_.vocab_size);
    const std::vector<float> want = CpuGreedy(prompt, 8);
    ASSERT_FALSE(want.empty());
    BackendOptions options = Options(ElementType::kF16, true);
    options.attention = attention;
    auto gpu = Load(options);
    ASSERT_NE(gpu, nullptr);
    std::vector<int32_t> tokens;
    const std::vector<float> got = Greedy(*gpu, prompt, 8, &tokens);
    EXPECT_LT(NormalisedError(got, want), 1e-2) << "head_dim " << head_dim;
  }
}

// Graphs replay the half-activation decode step exactly as op by op runs
// it, and a prompt prefilled in one step leaves the state token-by-token
// feeding leaves, to the 16-bit bounds (the fused prefill rounds its own
// operands).
TEST_F(CudaHalfActivationsTest, GraphsAndPrefillAgree) {
  Open(1);
  auto with = Load(Options(ElementType::kF16, true), /*graphs=*/true);
  auto without = Load(Options(ElementType::kF16, true), /*graphs=*/false);
  ASSERT_NE(with, nullptr);
  ASSERT_NE(without, nullptr);
  const std::vector<int32_t> prompt = Tokens(60, 4, config_.vocab_size);
  std::vector<int32_t> a, b;
  EXPECT_EQ(Greedy(*with, prompt, 12, &a), Greedy(*without, prompt, 12, &b));

  const SlotId whole = *with->memory().Acquire();
  const SlotId tokens = *with->memory().Acquire();
  std::vector<float> at_once, one_by_one;
  ASSERT_TRUE(Feed(*with, whole, prompt, &at_once).ok());
  for (int32_t t : prompt) {
    ASSERT_TRUE(Feed(*with, tokens, {&t, 1}, &one_by_one).ok());
  }
  EXPECT_LT(NormalisedError(one_by_one, at_once), 1e-2);
}

}  // namespace
}  // namespace h3::engine
