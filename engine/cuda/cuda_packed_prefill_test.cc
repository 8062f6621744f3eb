// Packed prefill calls on the CUDA backend (label gpu): several sequences'
// chunks in one H3Layer::Prefill (one transpose in and out for all, the
// fused kernel or the cuFFT path per piece) or one Backend::Attention call
// (the tensor-core kernel takes them all in one launch) give each sequence
// the bits a call of its own gives. The CPU twin:
// engine/packed_prefill_test.cc.
#include <string>

#include "engine/backend.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"
#include "tests/support/packed_prefill.h"
#include "tests/support/random_h3_layer.h"

namespace h3::engine {
namespace {

struct Case {
  const char* name;
  ElementType weights;
  bool half_activations;
  AttentionKernel attention;
  H3PrefillKernel h3_prefill = H3PrefillKernel::kFft;
};

// fp32 weights take the cuFFT prefill; 16-bit ones the fused kernel, or
// the chunked one on request.
const Case kCases[] = {
    {"fp32_cufft_fma", ElementType::kF32, false, AttentionKernel::kFma},
    {"fp16_fused_fma", ElementType::kF16, false, AttentionKernel::kFma},
    {"fp16_half_flash", ElementType::kF16, true, AttentionKernel::kFlash},
    {"bf16_half_flash", ElementType::kBF16, true, AttentionKernel::kFlash},
    {"fp16_chunked_fma", ElementType::kF16, false, AttentionKernel::kFma,
     H3PrefillKernel::kChunked},
    {"bf16_half_chunked", ElementType::kBF16, true, AttentionKernel::kFlash,
     H3PrefillKernel::kChunked},
    {"fp16_half_chunked_mma", ElementType::kF16, true, AttentionKernel::kFlash,
     H3PrefillKernel::kChunkedMma},
};

class CudaPackedPrefillTest : public h3::testing::GpuTestWithParam<Case> {
 protected:
  std::unique_ptr<Backend> Make() {
    const Case& c = GetParam();
    auto backend = MakeBackend({.device = "cuda",
                                .weight_type = c.weights,
                                .attention = c.attention,
                                .h3_prefill = c.h3_prefill,
                                .half_activations = c.half_activations});
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? *std::move(backend) : nullptr;
  }
};

TEST_P(CudaPackedPrefillTest, H3SegmentsGetTheirOwnBits) {
  const kernels::H3Shape shape{64, 1, 16};
  const h3::testing::RandomH3Layer weights(shape, 3);
  std::unique_ptr<Backend> backend = Make();
  ASSERT_NE(backend, nullptr);
  auto layer = backend->MakeH3Layer(weights.weights());
  ASSERT_TRUE(layer.ok()) << layer.status();
  // Pieces of 64: the 150-token chunk runs as 64 + 64 + 22.
  EXPECT_TRUE(h3::testing::H3PackedIsEachAlone(*backend, **layer, shape, 64));
}

TEST_P(CudaPackedPrefillTest, AttentionSegmentsGetTheirOwnBits) {
  std::unique_ptr<Backend> backend = Make();
  ASSERT_NE(backend, nullptr);
  // Head dim 64: a shape the tensor-core kernel has an instance for.
  EXPECT_TRUE(h3::testing::AttentionPackedIsEachAlone(*backend, {2, 64, 32}));
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaPackedPrefillTest,
                         ::testing::ValuesIn(kCases), [](const auto& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace h3::engine
