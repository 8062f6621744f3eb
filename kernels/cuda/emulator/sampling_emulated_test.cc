// SampleCuda (sampling.cu: the scan kernel over chunks of the vocabulary,
// then the sampling kernel) run on the CPU by the emulator against its CPU
// twin SampleCpu, on the batches of its GPU test (tests/support/
// sampling_batch.h): the same ids (rows kept away from rounding-sensitive
// boundaries), log-probabilities within 1e-5, the same ids run to run, and
// the counts updated at the chosen ids only.
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/emulator/fibers.h"
#include "kernels/cuda/sampling.h"
#include "kernels/sampling.h"
#include "tests/support/sampling_batch.h"

namespace h3::kernels {
namespace {

using testing::Batch;
using testing::Result;

// SampleCuda over host memory (the emulator's device memory).
Result OnEmulator(const Batch& batch) {
  const int rows = static_cast<int>(batch.rows.size());
  Result out{std::vector<int32_t>(rows, -1), std::vector<float>(rows, 0.0f),
             batch.counts};
  std::vector<uint8_t> flags = batch.flags;
  const std::vector<TokenHistory> histories =
      testing::Histories(batch, out.counts.data(), flags.data());
  const size_t ws_bytes = SampleWorkspaceBytes(rows, batch.vocab);
  std::vector<uint64_t> workspace(ws_bytes / sizeof(uint64_t) + 1);
  const SampleParams p = testing::Params(
      batch, batch.logits.data(), batch.rows.data(), histories.data(), &out);
  EXPECT_EQ(SampleCuda(p, workspace.data(), ws_bytes, nullptr), cudaSuccess)
      << emulator::LastRunError();
  return out;
}

// (vocab, ties, repeats)
using Shape = std::tuple<int32_t, bool, int>;

class SampleEmulatedTest : public ::testing::TestWithParam<Shape> {};

TEST_P(SampleEmulatedTest, MatchesCpuTwin) {
  const auto [vocab, ties, repeats] = GetParam();
  Batch batch = testing::RandomBatch(vocab, ties, repeats, 4321 + vocab);
  testing::KeepAwayFromBoundaries(batch);
  if (HasFatalFailure()) return;
  const Result cpu = testing::OnCpu(batch);
  const Result emulated = OnEmulator(batch);
  const Result again = OnEmulator(batch);
  for (size_t b = 0; b < batch.rows.size(); ++b) {
    EXPECT_EQ(emulated.ids[b], cpu.ids[b])
        << "row " << b << ": " << testing::RowName(batch.rows[b]);
    EXPECT_NEAR(emulated.logprobs[b], cpu.logprobs[b], 1e-5) << "row " << b;
    EXPECT_EQ(again.ids[b], emulated.ids[b]) << "row " << b << " run to run";
  }
  EXPECT_EQ(testing::FirstDifference(emulated.counts, cpu.counts), -1);
}

// Vocabularies within one scan chunk (7, 1000) and across several (9000,
// with ties); the GPU test adds GPT-2's 50257 and 262144, slow here.
INSTANTIATE_TEST_SUITE_P(Shapes, SampleEmulatedTest,
                         ::testing::Values(Shape{9000, true, 1},
                                           Shape{1000, false, 1},
                                           Shape{7, true, 1},
                                           Shape{1, false, 1}),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           return std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_ties" : "") +
                                  "_x" +
                                  std::to_string(std::get<2>(info.param));
                         });

}  // namespace
}  // namespace h3::kernels
