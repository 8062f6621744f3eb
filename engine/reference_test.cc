// The engine against golden data from the independent PyTorch reference
// (tests/reference/h3_reference.py): logits at the last prompt position
// within 1e-4, and greedy tokens exactly. The checkpoints go through the real
// path: safetensors -> h3 convert (fp32) -> model file -> Model -> Runner
// (tests/support/golden_engine.h).
#include <string>

#include "engine/backend.h"
#include "gtest/gtest.h"
#include "tests/support/golden_engine.h"

namespace h3::engine {
namespace {

class ReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceTest, LogitsAndGreedyTokensMatchPyTorch) {
  h3::testing::ExpectEngineMatchesGolden(GetParam(), {"cpu", ElementType::kF32},
                                         1e-4);
}

INSTANTIATE_TEST_SUITE_P(Configs, ReferenceTest,
                         ::testing::Values("tiny_p1", "tiny_p8_rotary",
                                           "tiny_p1_two_attn_rotary"));

}  // namespace
}  // namespace h3::engine
