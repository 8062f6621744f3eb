// The Runner on a backend that has graphs but fails to capture one: the step
// that tried still stands, its shape runs op by op from then on (one try,
// not one a step), computing what graphs off computes, and the runner says
// why (Runner::capture_error). A capture can fail on a GPU where a kernel
// takes a launch attribute that capture does not.
#include <memory>
#include <string>
#include <vector>

#include "engine/runner.h"
#include "gtest/gtest.h"
#include "loader/model_file.h"
#include "tests/support/forwarding_backend.h"
#include "tests/support/random_model.h"
#include "tests/support/runner_calls.h"
#include "tests/support/temp_path.h"

namespace h3::engine {
namespace {

using h3::testing::Feed;
using h3::testing::FeedEach;

// The CPU backend, claiming graphs (so steps of single tokens are padded to
// buckets, as on CUDA), refusing every capture, and counting the tries and
// the times the runner drops its graphs (growing its activations).
class NoCaptureBackend final : public h3::testing::ForwardingBackend {
 public:
  explicit NoCaptureBackend(int* captures, int* drops = nullptr)
      : captures_(captures), drops_(drops) {}
  bool SupportsGraphs() const override { return true; }
  absl::Status BeginCapture() override {
    ++*captures_;
    return absl::InternalError("capture refused by the test's backend");
  }
  void DropGraphs() override {
    if (drops_ != nullptr) ++*drops_;
  }

 private:
  int* captures_;
  int* drops_;
};

std::unique_ptr<loader::ModelFile> SmallModel() {
  const loader::ModelConfig config = h3::testing::SmallHybridConfig(61);
  const std::string path = h3::testing::TempPath("runner_capture.h3");
  EXPECT_TRUE(h3::testing::WriteRandomModel(config, path).ok());
  auto file = loader::ModelFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? *std::move(file) : nullptr;
}

TEST(RunnerCaptureTest, AFailedCaptureLeavesTheStepAndRunsItsShapeOpByOp) {
  const std::unique_ptr<loader::ModelFile> file = SmallModel();
  ASSERT_NE(file, nullptr);
  int tries = 0, never = 0;
  auto graphed = h3::testing::MakeRunner(
      *file, std::make_unique<NoCaptureBackend>(&tries), 3, 64, 1024,
      /*graphs=*/true);
  auto plain = h3::testing::MakeRunner(
      *file, std::make_unique<NoCaptureBackend>(&never), 3, 64, 1024,
      /*graphs=*/false);
  ASSERT_TRUE(graphed.ok()) << graphed.status();
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE((*graphed)->capture_error().ok());

  std::vector<SlotId> slots_a, slots_b;
  for (int i = 0; i < 3; ++i) {
    slots_a.push_back(*(*graphed)->memory().Acquire());
    slots_b.push_back(*(*plain)->memory().Acquire());
    const std::vector<int32_t> prompt = {3 + i, 17, 5 * i, 40};
    ASSERT_TRUE(Feed(**graphed, slots_a[i], prompt, nullptr).ok());
    ASSERT_TRUE(Feed(**plain, slots_b[i], prompt, nullptr).ok());
  }
  // Steps of 3 single tokens (bucket 4): the first tries a capture.
  for (int step = 0; step < 4; ++step) {
    const std::vector<int32_t> next = {step, 2 * step + 1, 60 - step};
    std::vector<float> a, b;
    ASSERT_TRUE(FeedEach(**graphed, slots_a, next, &a).ok()) << step;
    ASSERT_TRUE(FeedEach(**plain, slots_b, next, &b).ok()) << step;
    EXPECT_EQ(a, b) << "step " << step;
  }
  EXPECT_EQ(tries, 1);
  EXPECT_EQ(never, 0);
  EXPECT_NE((*graphed)->capture_error().message().find("refused by the test"),
            std::string::npos)
      << (*graphed)->capture_error();
}

// Runner::WarmUp: one sampling step of padding rows per batch bucket (10
// slots: 1, 2, 4, 8, 16), each trying its capture; the activations at the
// largest step, so the prompts after it drop no graph; and no sequence
// touched: a request after it gets what it gets from a cold runner.
TEST(RunnerCaptureTest, WarmUpRunsEachBucketOnceAndChangesNoSequence) {
  const std::unique_ptr<loader::ModelFile> file = SmallModel();
  ASSERT_NE(file, nullptr);
  int tries = 0, drops = 0, cold_tries = 0;
  auto warm = h3::testing::MakeRunner(
      *file, std::make_unique<NoCaptureBackend>(&tries, &drops), 10, 512);
  auto cold = h3::testing::MakeRunner(
      *file, std::make_unique<NoCaptureBackend>(&cold_tries), 10, 512);
  ASSERT_TRUE(warm.ok()) << warm.status();
  ASSERT_TRUE(cold.ok()) << cold.status();
  absl::StatusOr<int> steps = (*warm)->WarmUp();
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_EQ(*steps, 5);
  EXPECT_EQ(tries, 5);
  const int drops_after_warm_up = drops;

  std::vector<int32_t> prompt;
  for (int i = 0; i < 300; ++i) prompt.push_back((7 * i + 3) % 61);
  auto ids = h3::testing::GreedyIds(**warm, prompt, 6);
  auto cold_ids = h3::testing::GreedyIds(**cold, prompt, 6);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_TRUE(cold_ids.ok()) << cold_ids.status();
  EXPECT_EQ(*ids, *cold_ids);
  EXPECT_EQ(tries, 5) << "a warmed bucket tried its capture again";
  EXPECT_EQ(drops, drops_after_warm_up) << "a step grew the activations";
  EXPECT_GT(cold_tries, 0);

  // Without graphs there is nothing to warm.
  auto cpu = h3::testing::MakeRunner(*file, MakeCpuBackend(), 10, 64);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(*(*cpu)->WarmUp(), 0);
}

}  // namespace
}  // namespace h3::engine
