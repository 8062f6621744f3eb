// Packed prefill calls on the CPU backend: several sequences' chunks in one
// H3Layer::Prefill or Backend::Attention call give each sequence the bits
// one call of its own gives (tests/support/packed_prefill.h), with fp32 and
// 16-bit activations. The GPU twin: engine/cuda/cuda_packed_prefill_test.cc.
#include "tests/support/packed_prefill.h"

#include "gtest/gtest.h"
#include "tests/support/random_h3_layer.h"

namespace h3::engine {
namespace {

class CpuPackedPrefillTest : public ::testing::TestWithParam<ElementType> {};

TEST_P(CpuPackedPrefillTest, H3SegmentsGetTheirOwnBits) {
  const kernels::H3Shape shape{32, 1, 16};
  const h3::testing::RandomH3Layer weights(shape, 3);
  auto backend = MakeCpuBackend(GetParam());
  auto layer = backend->MakeH3Layer(weights.weights());
  ASSERT_TRUE(layer.ok()) << layer.status();
  EXPECT_TRUE(h3::testing::H3PackedIsEachAlone(*backend, **layer, shape, 64));
}

TEST_P(CpuPackedPrefillTest, AttentionSegmentsGetTheirOwnBits) {
  auto backend = MakeCpuBackend(GetParam());
  EXPECT_TRUE(h3::testing::AttentionPackedIsEachAlone(*backend, {2, 16, 8}));
}

INSTANTIATE_TEST_SUITE_P(Types, CpuPackedPrefillTest,
                         ::testing::Values(ElementType::kF32,
                                           ElementType::kBF16),
                         [](const auto& info) {
                           return std::string(ElementTypeName(info.param));
                         });

}  // namespace
}  // namespace h3::engine
