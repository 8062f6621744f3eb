#include "tests/support/golden_engine.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "engine/runner.h"
#include "gtest/gtest.h"
#include "loader/convert.h"
#include "loader/model_file.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden.h"
#include "tests/support/runner_calls.h"
#include "tests/support/temp_path.h"

namespace h3::testing {

void ExpectEngineMatchesGolden(const std::string& name,
                               const engine::BackendOptions& options,
                               double tolerance) {
  const nlohmann::json golden = Golden(name);
  ASSERT_FALSE(golden.is_null()) << name;
  loader::ConvertOptions convert;
  convert.input = EngineTestdata() + "/" + name + ".safetensors";
  convert.output = TempPath(name + ".h3");
  convert.dtype = ElementType::kF32;
  convert.hints.n_heads = golden["config"]["n_heads"].get<int64_t>();
  convert.hints.vocab_size = golden["vocab_size"].get<int64_t>();
  auto converted = loader::ConvertCheckpoint(convert, {});
  ASSERT_TRUE(converted.ok()) << converted.status();
  EXPECT_EQ(converted->config.head_dim, golden["config"]["head_dim"]);
  EXPECT_EQ(converted->config.rotary_dim, golden["config"]["rotary"]);
  auto file = loader::ModelFile::Open(convert.output);
  ASSERT_TRUE(file.ok()) << file.status();
  for (int64_t chunk : {1024, 5}) {
    auto backend = engine::MakeBackend(options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    auto runner = MakeRunner(**file, *std::move(backend), 1, 64, chunk);
    ASSERT_TRUE(runner.ok()) << runner.status();
    const int64_t vocab = golden["vocab_size"];

    auto prompt = golden["prompt"].get<std::vector<int32_t>>();
    const engine::SlotId slot = *(*runner)->memory().Acquire();
    std::vector<float> logits;
    ASSERT_TRUE(Feed(**runner, slot, prompt, &logits).ok());
    const auto want = golden["last_logits"].get<std::vector<double>>();
    for (int64_t i = 0; i < vocab; ++i) {
      EXPECT_NEAR(logits[i], want[i],
                  tolerance * std::max(1.0, std::abs(want[i])))
          << "logit " << i << ", chunk " << chunk;
    }

    std::vector<int32_t> greedy;
    for (size_t step = 0; step < golden["greedy"].size(); ++step) {
      const int32_t next = static_cast<int32_t>(
          std::max_element(logits.begin(), logits.begin() + vocab) -
          logits.begin());
      greedy.push_back(next);
      ASSERT_TRUE(Feed(**runner, slot, {&next, 1}, &logits).ok());
    }
    EXPECT_EQ(greedy, golden["greedy"].get<std::vector<int32_t>>())
        << "chunk " << chunk;
  }
}

}  // namespace h3::testing
