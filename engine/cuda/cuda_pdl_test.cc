// --pdl (BackendOptions::pdl; label gpu: skips without a device; before
// sm_90 the backend launches in stream order and the test still holds): the
// decode kernels launched overlapped (kernels/cuda/launch_order.h) compute
// the same thing as in stream order, so every logit and every sampled id is
// the same bits, with graphs on and off.
#include <memory>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/cuda/cuda_engine_fixture.h"
#include "engine/runner.h"
#include "gtest/gtest.h"
#include "kernels/sampling.h"
#include "tests/support/runner_calls.h"

namespace h3::engine {
namespace {

using h3::testing::Feed;
using h3::testing::FeedEach;

class CudaPdlTest : public CudaEngineTest {
 protected:
  // The fp16 model of Open(1) with the backend's defaults (half
  // activations, stream products up to 8 rows, cuBLASLt above), --pdl
  // `pdl`.
  std::unique_ptr<Runner> LoadWith(bool pdl, bool graphs) {
    BackendOptions options;
    options.device = "cuda";
    options.weight_type = ElementType::kF16;
    options.pdl = pdl;
    return Load(options, graphs);
  }

  void SetUp() override {
    CudaEngineTest::SetUp();
    if (IsSkipped()) return;
    Open(1);
    plain_ = LoadWith(false, true);
    overlapped_ = LoadWith(true, true);
    eager_ = LoadWith(true, false);
    ASSERT_NE(plain_, nullptr);
    ASSERT_NE(overlapped_, nullptr);
    ASSERT_NE(eager_, nullptr);
  }

  // A slot of each runner, prefilled with `prompt`.
  std::vector<SlotId> Prefilled(const std::vector<int32_t>& prompt) {
    std::vector<SlotId> slots;
    for (Runner* r : Runners()) {
      slots.push_back(*r->memory().Acquire());
      EXPECT_TRUE(Feed(*r, slots.back(), prompt, nullptr).ok());
    }
    return slots;
  }

  std::vector<Runner*> Runners() {
    return {plain_.get(), overlapped_.get(), eager_.get()};
  }

  std::unique_ptr<Runner> plain_, overlapped_, eager_;
};

// Batches on the stream products (1, 3, 4, 8) and on cuBLASLt (9), each
// replayed: the norms, the H3 step, decode attention and the products
// launched overlapped read what the kernel before them wrote.
TEST_F(CudaPdlTest, OverlappedLaunchesGiveTheSameLogits) {
  for (int batch : {1, 3, 3, 4, 8, 9, 9}) {
    std::vector<std::vector<SlotId>> slots(3);  // [runner][sequence]
    for (int i = 0; i < batch; ++i) {
      const auto mine =
          Prefilled(Tokens(5 + 7 * i, batch * 10 + i, config_.vocab_size));
      for (size_t r = 0; r < mine.size(); ++r) slots[r].push_back(mine[r]);
    }
    for (int step = 0; step < 4; ++step) {
      const auto next = Tokens(batch, step, config_.vocab_size);
      std::vector<std::vector<float>> logits(3);
      for (size_t r = 0; r < 3; ++r) {
        ASSERT_TRUE(FeedEach(*Runners()[r], slots[r], next, &logits[r]).ok());
      }
      EXPECT_EQ(logits[1], logits[0])
          << "graphs, batch " << batch << " step " << step;
      EXPECT_EQ(logits[2], logits[0])
          << "eager, batch " << batch << " step " << step;
    }
    for (size_t r = 0; r < 3; ++r) {
      for (SlotId s : slots[r]) Runners()[r]->memory().Release(s);
    }
  }
  // Else the graphs above ran op by op, and "graphs" compared eager runs.
  EXPECT_TRUE(overlapped_->capture_error().ok())
      << overlapped_->capture_error();
  EXPECT_TRUE(plain_->capture_error().ok()) << plain_->capture_error();
}

// The sampling kernel launched overlapped draws the same ids (greedy and
// seeded draws, penalties on the device's token counts).
TEST_F(CudaPdlTest, OverlappedSamplingDrawsTheSameIds) {
  const int32_t vocab = static_cast<int32_t>(config_.vocab_size);
  const std::vector<kernels::SamplingRow> rows = {
      {.temperature = 0.0f},
      {.temperature = 1.0f, .seed = 21},
      {.temperature = 0.8f, .top_k = 6, .top_p = 0.9f, .seed = 22},
      {.temperature = 1.0f, .repetition_penalty = 1.3f, .seed = 23},
  };
  std::vector<std::vector<SlotId>> slots(3);
  std::vector<int32_t> next;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto prompt = Tokens(6 + 4 * i, 60 + i, vocab);
    const auto mine = Prefilled(prompt);
    for (size_t r = 0; r < mine.size(); ++r) slots[r].push_back(mine[r]);
    next.push_back(prompt.back());
  }
  for (int step = 0; step < 12; ++step) {
    std::vector<std::vector<int32_t>> ids(3);
    for (size_t r = 0; r < 3; ++r) {
      StepPlan plan;
      for (size_t i = 0; i < rows.size(); ++i) {
        kernels::SamplingRow row = rows[i];
        row.step = step;
        plan.sequences.push_back({.slot = slots[r][i],
                                  .tokens = absl::MakeConstSpan(&next[i], 1),
                                  .sample = true,
                                  .sampling = row});
      }
      StepResult result;
      ASSERT_TRUE(Runners()[r]->Execute(plan, &result).ok());
      ids[r] = result.ids;
    }
    EXPECT_EQ(ids[1], ids[0]) << "graphs, step " << step;
    EXPECT_EQ(ids[2], ids[0]) << "eager, step " << step;
    next = ids[0];
  }
}

}  // namespace
}  // namespace h3::engine
