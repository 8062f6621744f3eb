// The profiler (engine/profiler.h) alone, with a clock that reads back
// chosen times, and through the Runner on the CPU backend: every op of a
// decode step and of a prefill named and counted, and not a bit of the
// logits changed by it.
#include "engine/profiler.h"

#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/runner.h"
#include "gtest/gtest.h"
#include "loader/model_file.h"
#include "tests/support/profile_checks.h"
#include "tests/support/random_model.h"
#include "tests/support/runner_calls.h"
#include "tests/support/temp_path.h"

namespace h3::engine {
namespace {

using h3::testing::SameBits;

// Mark i reads back as times[i] ms; Mark fails once `fail_at` marks exist.
class ScriptedClock final : public ProfileClock {
 public:
  ScriptedClock(std::vector<double> times, int fail_at = -1)
      : times_(std::move(times)), fail_at_(fail_at) {}
  absl::Status Mark() override {
    if (marks_ == fail_at_) {
      fail_at_ = -1;
      return absl::InternalError("clock broke");
    }
    ++marks_;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<double>> Read() override {
    std::vector<double> out(times_.begin(), times_.begin() + marks_);
    marks_ = 0;
    return out;
  }

 private:
  std::vector<double> times_;
  int fail_at_;
  int marks_ = 0;
};

TEST(ProfilerTest, NestedRangesCountTheirTimeOnce) {
  // a [0, 10] holds b [1, 4] and c [5, 9], c holds d [6, 8]; then a again
  // [10, 12] in another layer type.
  Profiler p(std::make_unique<ScriptedClock>(
      std::vector<double>{0, 1, 4, 5, 6, 8, 9, 10, 10, 12}));
  p.Begin("a", "h3");
  p.Begin("b");
  p.End();
  p.Begin("c", "attention");  // nested: takes the outer range's type
  p.Begin("d");
  EXPECT_EQ(p.depth(), 3);
  p.End();
  p.End();
  p.End();
  p.Begin("a");
  p.End();
  EXPECT_EQ(p.depth(), 0);
  ASSERT_TRUE(p.Collect().ok());
  const std::vector<OpTotal>& t = p.Totals();
  ASSERT_EQ(t.size(), 5u);
  auto expect = [&](size_t i, const char* type, const char* name, double ms) {
    EXPECT_EQ(t[i].layer_type, type) << i;
    EXPECT_EQ(t[i].name, name) << i;
    EXPECT_EQ(t[i].calls, 1) << i;
    EXPECT_DOUBLE_EQ(t[i].ms, ms) << i;
  };
  expect(0, "h3", "a", 10 - 3 - 4);
  expect(1, "h3", "a/b", 3);
  expect(2, "h3", "a/c", 4 - 2);
  expect(3, "h3", "a/c/d", 2);
  expect(4, "model", "a", 2);
}

TEST(ProfilerTest, CollectAddsToTheTotals) {
  Profiler p(std::make_unique<ScriptedClock>(std::vector<double>{3, 5}));
  for (int i = 0; i < 2; ++i) {
    p.Begin("x");
    p.End();
    ASSERT_TRUE(p.Collect().ok());
  }
  ASSERT_EQ(p.Totals().size(), 1u);
  EXPECT_EQ(p.Totals()[0].calls, 2);
  EXPECT_DOUBLE_EQ(p.Totals()[0].ms, 4);
  p.ClearTotals();
  EXPECT_TRUE(p.Totals().empty());
}

TEST(ProfilerTest, OpenRangesAndClockErrorsAreReported) {
  Profiler open(std::make_unique<ScriptedClock>(std::vector<double>{0, 1}));
  open.Begin("x");
  EXPECT_EQ(open.Collect().code(), absl::StatusCode::kFailedPrecondition);
  open.End();
  EXPECT_TRUE(open.Collect().ok());

  Profiler broken(
      std::make_unique<ScriptedClock>(std::vector<double>{0, 1, 2}, 1));
  broken.Begin("x");
  broken.End();
  EXPECT_EQ(broken.Collect().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(broken.Totals().empty());
  // The error is reported once; later ranges are timed again.
  broken.Begin("y");
  broken.End();
  EXPECT_TRUE(broken.Collect().ok());
  ASSERT_EQ(broken.Totals().size(), 1u);
  EXPECT_EQ(broken.Totals()[0].name, "y");
}

class ProfiledRunnerTest : public ::testing::Test {
 protected:
  // Two H3 layers around one attention layer.
  void SetUp() override {
    loader::ModelConfig c = h3::testing::SmallHybridConfig(61);
    c.n_layer = 3;
    c.attn_layer_idx = {1};
    const std::string path = h3::testing::TempPath("profiled_runner.h3");
    ASSERT_TRUE(h3::testing::WriteRandomModel(c, path).ok());
    auto file = loader::ModelFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
  }

  std::unique_ptr<Runner> Make() {
    auto runner = h3::testing::MakeRunner(*file_, MakeCpuBackend(), 4, 64);
    EXPECT_TRUE(runner.ok()) << runner.status();
    return runner.ok() ? *std::move(runner) : nullptr;
  }

  std::unique_ptr<loader::ModelFile> file_;
};

TEST_F(ProfiledRunnerTest, OffByDefault) {
  std::unique_ptr<Runner> runner = Make();
  ASSERT_NE(runner, nullptr);
  Backend& backend = runner->model().backend();
  EXPECT_EQ(backend.profiler(), nullptr);
  ASSERT_TRUE(backend.EnableProfiler(true).ok());
  EXPECT_NE(backend.profiler(), nullptr);
  ASSERT_TRUE(backend.EnableProfiler(false).ok());
  EXPECT_EQ(backend.profiler(), nullptr);
}

TEST_F(ProfiledRunnerTest, DecodeStepsNameEveryOp) {
  std::unique_ptr<Runner> runner = Make();
  ASSERT_NE(runner, nullptr);
  auto run = h3::testing::RunDecode(*runner, /*batch=*/3, /*context=*/5,
                                    /*steps=*/4, /*profile=*/true);
  ASSERT_TRUE(run.ok()) << run.status();
  h3::testing::ExpectBreakdown(*run, h3::testing::DecodeOps(), 2, 1, 3);
  EXPECT_EQ(runner->model().backend().profiler(), nullptr);
}

TEST_F(ProfiledRunnerTest, PrefillNamesEveryOp) {
  std::unique_ptr<Runner> runner = Make();
  ASSERT_NE(runner, nullptr);
  auto run = h3::testing::RunPrefill(*runner, 37, true);
  ASSERT_TRUE(run.ok()) << run.status();
  h3::testing::ExpectBreakdown(*run, h3::testing::PrefillOps(), 2, 1, 1);
}

TEST_F(ProfiledRunnerTest, LogitsAreBitwiseTheSameWithAndWithoutIt) {
  std::unique_ptr<Runner> runner = Make();
  ASSERT_NE(runner, nullptr);
  auto off = h3::testing::RunDecode(*runner, 3, 5, 4, false);
  auto on = h3::testing::RunDecode(*runner, 3, 5, 4, true);
  ASSERT_TRUE(off.ok() && on.ok());
  EXPECT_TRUE(off->totals.empty());
  EXPECT_FALSE(on->totals.empty());
  EXPECT_TRUE(SameBits(off->logits, on->logits));
  EXPECT_EQ(off->ids, on->ids);
  auto prefill_off = h3::testing::RunPrefill(*runner, 37, false);
  auto prefill_on = h3::testing::RunPrefill(*runner, 37, true);
  ASSERT_TRUE(prefill_off.ok() && prefill_on.ok());
  EXPECT_TRUE(SameBits(prefill_off->logits, prefill_on->logits));
  EXPECT_EQ(prefill_off->ids, prefill_on->ids);
}

}  // namespace
}  // namespace h3::engine
