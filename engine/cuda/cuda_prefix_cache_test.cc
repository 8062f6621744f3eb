// The prefix cache on the CUDA backend: its snapshots live in device memory
// and are copied there, so a restored sequence continues like one prefilled
// whole, across an edge split and under eviction. On a GPU the prefill of a
// split prompt is not bitwise the prefill of the whole (FFT sizes and
// summation order differ), so logits are compared within 1e-4 normalised
// error, the bound engine/cuda/cuda_engine_test.cc uses for prefill against
// token-by-token decoding. Label gpu: skips without a device.
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/runner.h"
#include "gtest/gtest.h"
#include "loader/model_file.h"
#include "tests/support/cache_checks.h"
#include "tests/support/gpu_test.h"
#include "tests/support/normalised_error.h"
#include "tests/support/runner_calls.h"
#include "tests/support/temp_path.h"

namespace h3::engine {
namespace {

using h3::testing::NormalisedError;

using h3::testing::Join;
using h3::testing::Resumed;
using h3::testing::Snapshot;
constexpr auto Tokens = h3::testing::CacheTokens;
constexpr auto Whole = h3::testing::Solo;

class CudaPrefixCacheTest : public h3::testing::GpuTest {
 protected:
  void SetUp() override {
    h3::testing::GpuTest::SetUp();
    if (IsSkipped()) return;
    loader::ModelConfig c = h3::testing::TinyPaddedConfig();
    c.d_model = 64;
    c.n_heads = 4;
    c.d_state = 16;
    c.d_inner = 256;
    c.rotary_dim = 8;
    auto file = h3::testing::OpenRandomModel(
        c, h3::testing::TempPath("cuda_prefix_cache.h3"));
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
  }

  std::unique_ptr<Runner> Load(int64_t max_bytes) {
    auto backend = MakeBackend({"cuda", ElementType::kF32});
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return nullptr;
    auto runner = h3::testing::MakeRunner(
        *file_, *std::move(backend), /*slots=*/4, /*context=*/512,
        /*prefill_chunk=*/48, /*graphs=*/true,
        {.max_bytes = max_bytes, .interval = 0});
    EXPECT_TRUE(runner.ok()) << runner.status();
    return runner.ok() ? *std::move(runner) : nullptr;
  }

  std::unique_ptr<loader::ModelFile> file_;
};

TEST_F(CudaPrefixCacheTest, RestoredSnapshotsContinueLikeAWholePrefill) {
  auto gpu = Load(int64_t{1} << 30);
  ASSERT_NE(gpu, nullptr);
  const auto shared = Tokens(100, 1);
  const auto a = Join(shared, Tokens(60, 2));
  auto b = Join(shared, Tokens(30, 3));
  b[100] = (a[100] + 1) % 61;
  Snapshot(*gpu, a);
  Snapshot(*gpu, shared);  // splits a's edge on the device
  Snapshot(*gpu, b);
  int64_t restored = 0;
  for (const auto& [tokens, hit] :
       std::vector<std::pair<std::vector<int32_t>, int64_t>>{
           {Join(a, Tokens(7, 4)), 160},
           {Join(b, Tokens(9, 5)), 130},
           {Join(shared, Tokens(11, 6)), 100}}) {
    const std::vector<float> expected = Whole(*gpu, tokens);
    EXPECT_LT(NormalisedError(Resumed(*gpu, tokens, &restored), expected),
              1e-4);
    EXPECT_EQ(restored, hit);
  }
}

TEST_F(CudaPrefixCacheTest, EvictionKeepsTheBudgetAndTheNewest) {
  auto probe = Load(1);
  ASSERT_NE(probe, nullptr);
  const SequenceMemory& m = probe->memory();
  const int64_t one = 50 * m.KvBytesPerPosition() + 4 * m.StateFloats();
  auto gpu = Load(one + one / 2);
  ASSERT_NE(gpu, nullptr);
  const auto p = Tokens(50, 7), q = Tokens(50, 8);
  Snapshot(*gpu, p);
  Snapshot(*gpu, q);  // evicts p
  const PrefixCacheStats stats = gpu->prefix_cache().stats();
  EXPECT_EQ(stats.snapshots, 1);
  EXPECT_EQ(stats.evictions, 1);
  EXPECT_LE(stats.bytes, stats.max_bytes);
  int64_t restored = 0;
  const auto more = Join(q, Tokens(5, 9));
  EXPECT_LT(NormalisedError(Resumed(*gpu, more, &restored), Whole(*gpu, more)),
            1e-4);
  EXPECT_EQ(restored, 50);
}

}  // namespace
}  // namespace h3::engine
