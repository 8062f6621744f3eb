// The profiler on the CUDA backend (CUDA events): every op of a decode step
// and of a prefill named and counted, times that sum to no more than the
// steps' wall time, and the logits bitwise those of the same steps without
// it, replayed from graphs. Label gpu: skips without a device.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/runner.h"
#include "gtest/gtest.h"
#include "loader/model_file.h"
#include "tests/support/gpu_test.h"
#include "tests/support/profile_checks.h"
#include "tests/support/random_model.h"
#include "tests/support/runner_calls.h"
#include "tests/support/temp_path.h"

namespace h3::engine {
namespace {

using h3::testing::SameBits;

// fp16 weights take the chunked prefill (on the q|k|v rows), fp32 the cuFFT
// one.
class CudaProfilerTest : public h3::testing::GpuTestWithParam<ElementType> {
 protected:
  void SetUp() override {
    h3::testing::GpuTestWithParam<ElementType>::SetUp();
    if (IsSkipped()) return;
    loader::ModelConfig c = h3::testing::SmallHybridConfig(61);
    c.d_model = 64;
    c.n_layer = 3;
    c.n_heads = 4;
    c.d_state = 16;
    c.d_inner = 256;
    c.padded_vocab_size = 64;
    c.rotary_dim = 8;
    const std::string path = h3::testing::TempPath("cuda_profiler.h3");
    ASSERT_TRUE(h3::testing::WriteRandomModel(c, path).ok());
    auto file = loader::ModelFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
    auto backend = MakeBackend({"cuda", GetParam()});
    ASSERT_TRUE(backend.ok()) << backend.status();
    // Graphs on: a profiled step must run op by op all the same.
    auto runner = h3::testing::MakeRunner(*file_, *std::move(backend), 8, 256,
                                          1024, /*graphs=*/true);
    ASSERT_TRUE(runner.ok()) << runner.status();
    runner_ = *std::move(runner);
  }

  std::unique_ptr<loader::ModelFile> file_;
  std::unique_ptr<Runner> runner_;
};

TEST_P(CudaProfilerTest, DecodeStepsNameEveryOp) {
  // The first run captures the graphs the profiled one must not replay.
  ASSERT_TRUE(h3::testing::RunDecode(*runner_, 3, 9, 3, false).ok());
  auto run = h3::testing::RunDecode(*runner_, 3, 9, 3, true);
  ASSERT_TRUE(run.ok()) << run.status();
  h3::testing::ExpectBreakdown(*run, h3::testing::DecodeOps(), 2, 1, 3);
}

TEST_P(CudaProfilerTest, PrefillNamesEveryOp) {
  auto run = h3::testing::RunPrefill(*runner_, 97, true);
  ASSERT_TRUE(run.ok()) << run.status();
  h3::testing::ExpectBreakdown(*run, h3::testing::PrefillOps(), 2, 1, 1);
}

// Without the profiler the decode steps replay graphs (launched overlapped
// where the device takes it, --pdl); with it each op runs alone: the same
// bits either way.
TEST_P(CudaProfilerTest, LogitsAreBitwiseTheSameWithAndWithoutIt) {
  for (int batch : {1, 3, 5}) {
    auto off = h3::testing::RunDecode(*runner_, batch, 9, 4, false);
    auto on = h3::testing::RunDecode(*runner_, batch, 9, 4, true);
    ASSERT_TRUE(off.ok() && on.ok());
    EXPECT_FALSE(on->totals.empty());
    EXPECT_TRUE(SameBits(off->logits, on->logits)) << "batch " << batch;
    EXPECT_EQ(off->ids, on->ids) << "batch " << batch;
  }
  auto prefill_off = h3::testing::RunPrefill(*runner_, 97, false);
  auto prefill_on = h3::testing::RunPrefill(*runner_, 97, true);
  ASSERT_TRUE(prefill_off.ok() && prefill_on.ok());
  EXPECT_TRUE(SameBits(prefill_off->logits, prefill_on->logits));
}

TEST_P(CudaProfilerTest, NoCaptureWhileProfiling) {
  Backend& backend = runner_->model().backend();
  ASSERT_TRUE(backend.EnableProfiler(true).ok());
  EXPECT_EQ(backend.BeginCapture().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(backend.EnableProfiler(false).ok());
}

INSTANTIATE_TEST_SUITE_P(Types, CudaProfilerTest,
                         ::testing::Values(ElementType::kF16,
                                           ElementType::kF32));

}  // namespace
}  // namespace h3::engine
