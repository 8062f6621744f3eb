// The engine against golden data from the independent PyTorch reference
// (tests/reference/h3_reference.py): logits at the last prompt position
// within 1e-4, and greedy tokens exactly. The checkpoints go through the real
// path: safetensors -> h3 convert (fp32) -> model file -> Model -> Runner.
#include <string>
#include <vector>

#include "engine/runner.h"
#include "gtest/gtest.h"
#include "loader/convert.h"
#include "loader/model_file.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden.h"
#include "tests/support/runner_calls.h"

namespace h3::engine {
namespace {

const std::string kTestdata = h3::testing::EngineTestdata();

class ReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceTest, LogitsAndGreedyTokensMatchPyTorch) {
  const nlohmann::json golden = h3::testing::Golden(GetParam());
  ASSERT_FALSE(golden.is_null()) << GetParam();
  loader::ConvertOptions options;
  options.input = kTestdata + "/" + GetParam() + ".safetensors";
  options.output = ::testing::TempDir() + "/" + GetParam() + ".h3";
  options.dtype = ElementType::kF32;
  options.hints.n_heads = golden["config"]["n_heads"].get<int64_t>();
  options.hints.vocab_size = golden["vocab_size"].get<int64_t>();
  auto converted = loader::ConvertCheckpoint(options, {});
  ASSERT_TRUE(converted.ok()) << converted.status();
  EXPECT_EQ(converted->config.head_dim, golden["config"]["head_dim"]);
  EXPECT_EQ(converted->config.rotary_dim, golden["config"]["rotary"]);
  auto file = loader::ModelFile::Open(options.output);
  ASSERT_TRUE(file.ok()) << file.status();
  for (int64_t chunk : {1024, 5}) {
    auto runner =
        h3::testing::MakeRunner(**file, MakeCpuBackend(), 1, 64, chunk);
    ASSERT_TRUE(runner.ok()) << runner.status();
    const int64_t vocab = golden["vocab_size"];

    auto prompt = golden["prompt"].get<std::vector<int32_t>>();
    const SlotId slot = *(*runner)->memory().Acquire();
    std::vector<float> logits;
    ASSERT_TRUE(h3::testing::Feed(**runner, slot, prompt, &logits).ok());
    const auto want = golden["last_logits"].get<std::vector<double>>();
    for (int64_t i = 0; i < vocab; ++i) {
      EXPECT_NEAR(logits[i], want[i], 1e-4 * std::max(1.0, std::abs(want[i])))
          << "logit " << i << ", chunk " << chunk;
    }

    std::vector<int32_t> greedy;
    for (size_t step = 0; step < golden["greedy"].size(); ++step) {
      const int32_t next = static_cast<int32_t>(
          std::max_element(logits.begin(), logits.begin() + vocab) -
          logits.begin());
      greedy.push_back(next);
      ASSERT_TRUE(h3::testing::Feed(**runner, slot, {&next, 1}, &logits).ok());
    }
    EXPECT_EQ(greedy, golden["greedy"].get<std::vector<int32_t>>())
        << "chunk " << chunk;
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, ReferenceTest,
                         ::testing::Values("tiny_p1", "tiny_p8_rotary",
                                           "tiny_p1_two_attn_rotary"));

}  // namespace
}  // namespace h3::engine
