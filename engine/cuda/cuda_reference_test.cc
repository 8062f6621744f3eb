// The CUDA engine against the PyTorch reference's golden data, as
// engine/reference_test.cc holds the CPU engine to it: fp32 weights (the
// cuFFT prefill path, fp32 products), the real conversion path, logits at
// the last prompt position and greedy tokens. The tolerance is twice the
// CPU test's: the same fp32 arithmetic in another summation order. Reads
// engine/testdata through $H3_SOURCE_DIR when set (scripts/gpu-check.sh).
// Label gpu: skips without a device.
#include <string>

#include "engine/backend.h"
#include "gtest/gtest.h"
#include "tests/support/golden_engine.h"
#include "tests/support/gpu_test.h"

namespace h3::engine {
namespace {

class CudaReferenceTest : public h3::testing::GpuTestWithParam<std::string> {};

TEST_P(CudaReferenceTest, LogitsAndGreedyTokensMatchPyTorch) {
  h3::testing::ExpectEngineMatchesGolden(GetParam(),
                                         {"cuda", ElementType::kF32}, 2e-4);
}

INSTANTIATE_TEST_SUITE_P(Configs, CudaReferenceTest,
                         ::testing::Values("tiny_p1", "tiny_p8_rotary",
                                           "tiny_p1_two_attn_rotary"));

}  // namespace
}  // namespace h3::engine
