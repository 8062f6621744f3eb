// The profiler's ranges cover a step: every operation the Runner and the
// Model call on the backend while the profiler is on runs inside a named
// range, so that a new op without one fails here rather than going missing
// from the breakdown. A backend that forwards to the CPU backend and notes
// each op called outside a range.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/runner.h"
#include "gtest/gtest.h"
#include "loader/model_file.h"
#include "tests/support/forwarding_backend.h"
#include "tests/support/profile_checks.h"
#include "tests/support/random_model.h"
#include "tests/support/runner_calls.h"
#include "tests/support/temp_path.h"

namespace h3::engine {
namespace {

class RangeCheckingBackend final : public h3::testing::ForwardingBackend {
 public:
  explicit RangeCheckingBackend(std::vector<std::string>* outside)
      : outside_(outside) {}

  // Notes `op` when the profiler is on and no range is open.
  void Check(const char* op) const {
    if (profiler() != nullptr && profiler()->depth() == 0) {
      outside_->push_back(op);
    }
  }

  absl::Status CopyFromHost(const float* host, int64_t n, float* dst) override {
    Check("CopyFromHost");
    return ForwardingBackend::CopyFromHost(host, n, dst);
  }
  absl::Status CopyToHost(const float* src, int64_t n, float* host) override {
    Check("CopyToHost");
    return ForwardingBackend::CopyToHost(src, n, host);
  }
  absl::Status CopyBytes(const void* src, int64_t bytes, void* dst) override {
    Check("CopyBytes");
    return ForwardingBackend::CopyBytes(src, bytes, dst);
  }
  absl::Status Fill(float* dst, int64_t n, float value) override {
    Check("Fill");
    return ForwardingBackend::Fill(dst, n, value);
  }
  absl::Status Upload(const Staging& staging, int64_t bytes) override {
    Check("Upload");
    return ForwardingBackend::Upload(staging, bytes);
  }
  absl::Status Embedding(const int32_t* ids, int64_t n, const Matrix& table,
                         float* out) override {
    Check("Embedding");
    return ForwardingBackend::Embedding(ids, n, table, out);
  }
  absl::Status Linear(const LinearParams& params) override {
    Check("Linear");
    return ForwardingBackend::Linear(params);
  }
  absl::Status AddLayerNorm(const kernels::AddLayerNormParams& p) override {
    Check("AddLayerNorm");
    return ForwardingBackend::AddLayerNorm(p);
  }
  absl::StatusOr<std::unique_ptr<H3Layer>> MakeH3Layer(
      const kernels::H3Weights& weights) override;
  absl::Status Attention(const AttentionPrefillParams& p) override {
    Check("Attention");
    return ForwardingBackend::Attention(p);
  }
  absl::Status AttentionDecode(const kernels::AttentionDecodeParams& p,
                               int64_t capacity) override {
    Check("AttentionDecode");
    return ForwardingBackend::AttentionDecode(p, capacity);
  }
  absl::Status Sample(const kernels::SampleParams& p) override {
    Check("Sample");
    return ForwardingBackend::Sample(p);
  }

 private:
  std::vector<std::string>* outside_;
};

class CheckedH3Layer final : public H3Layer {
 public:
  CheckedH3Layer(std::unique_ptr<H3Layer> inner,
                 const RangeCheckingBackend& owner)
      : inner_(std::move(inner)), owner_(owner) {}
  absl::Status Prefill(absl::Span<const H3Segment> segments, int64_t piece,
                       const void* qkv, void* out) override {
    owner_.Check("H3Layer::Prefill");
    return inner_->Prefill(segments, piece, qkv, out);
  }
  absl::Status Step(int batch, const void* qkv, void* out,
                    const kernels::H3State* states,
                    const int64_t* positions) override {
    owner_.Check("H3Layer::Step");
    return inner_->Step(batch, qkv, out, states, positions);
  }

 private:
  std::unique_ptr<H3Layer> inner_;
  const RangeCheckingBackend& owner_;
};

absl::StatusOr<std::unique_ptr<H3Layer>> RangeCheckingBackend::MakeH3Layer(
    const kernels::H3Weights& weights) {
  absl::StatusOr<std::unique_ptr<H3Layer>> layer =
      ForwardingBackend::MakeH3Layer(weights);
  if (!layer.ok()) return layer.status();
  return std::make_unique<CheckedH3Layer>(*std::move(layer), *this);
}

TEST(ProfilerCoverageTest, EveryOpOfAStepRunsInARange) {
  loader::ModelConfig c = h3::testing::SmallHybridConfig(61);
  c.n_layer = 3;
  const std::string path = h3::testing::TempPath("profiler_coverage.h3");
  ASSERT_TRUE(h3::testing::WriteRandomModel(c, path).ok());
  auto file = loader::ModelFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<std::string> outside;
  auto runner = h3::testing::MakeRunner(
      **file, std::make_unique<RangeCheckingBackend>(&outside), 4, 64);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto decode = h3::testing::RunDecode(**runner, 3, 5, 2, true);
  ASSERT_TRUE(decode.ok()) << decode.status();
  auto prefill = h3::testing::RunPrefill(**runner, 37, true);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  EXPECT_FALSE(decode->totals.empty());
  EXPECT_TRUE(outside.empty()) << outside.size() << " ops outside a range, "
                               << "the first " << outside[0];
}

}  // namespace
}  // namespace h3::engine
