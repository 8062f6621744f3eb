// The tensor-core prefill's argument checks (FlashAttentionPrefillCuda):
// they come before any device work, so these run without a GPU.
#include <cuda_runtime.h>

#include "base/element_type.h"
#include "gtest/gtest.h"
#include "kernels/cuda/flash_attention.h"

namespace h3::kernels::flash {
namespace {

// The checks come before any device work, so these run without a GPU; the
// pointers are never dereferenced.
TEST(FlashAttentionArgumentsTest, RefusesWhatItHasNoInstanceFor) {
  EXPECT_TRUE(FlashAttentionSupports({16, 128, 0}, ElementType::kF16));
  EXPECT_TRUE(FlashAttentionSupports({12, 64, 64}, ElementType::kBF16));
  EXPECT_FALSE(FlashAttentionSupports({16, 96, 0}, ElementType::kF16));
  EXPECT_FALSE(FlashAttentionSupports({16, 256, 0}, ElementType::kF16));
  EXPECT_FALSE(FlashAttentionSupports({16, 128, 0}, ElementType::kF32));
  EXPECT_FALSE(FlashAttentionSupports({16, 128, 3}, ElementType::kF16));

  alignas(16) static float host[1024];
  const Sequence seq{0, 1, 0, {host, host, 4}};
  auto run = [&](AttentionShape shape, ElementType type, Sequence s) {
    return FlashAttentionPrefillCuda({shape, type, 1, &s, host, host, host},
                                     nullptr);
  };
  EXPECT_EQ(run({2, 96, 0}, ElementType::kF16, seq), cudaErrorNotSupported);
  EXPECT_EQ(run({2, 64, 0}, ElementType::kF32, seq), cudaErrorNotSupported);
  Sequence misaligned = seq;
  misaligned.cache.v = host + 2;  // 8 bytes off
  EXPECT_EQ(run({2, 64, 0}, ElementType::kF16, misaligned),
            cudaErrorNotSupported);
  // Contract violations: past the capacity, odd rotary, no frequencies.
  Sequence past = seq;
  past.start = 4;
  EXPECT_EQ(run({2, 64, 0}, ElementType::kF16, past), cudaErrorInvalidValue);
  EXPECT_EQ(run({2, 64, 3}, ElementType::kF16, seq), cudaErrorInvalidValue);
  EXPECT_EQ(FlashAttentionPrefillCuda(
                {{2, 64, 8}, ElementType::kF16, 1, &seq, host, nullptr, host},
                nullptr),
            cudaErrorInvalidValue);
}

TEST(FlashAttentionArgumentsTest, EmptyCallsSucceedWithoutLaunching) {
  const Sequence empty{5, 0, 0, {nullptr, nullptr, 5}};
  EXPECT_EQ(
      FlashAttentionPrefillCuda(
          {{2, 64, 0}, ElementType::kF16, 1, &empty, nullptr, nullptr, nullptr},
          nullptr),
      cudaSuccess);
  EXPECT_EQ(FlashAttentionPrefillCuda({{2, 64, 0},
                                       ElementType::kF16,
                                       0,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr},
                                      nullptr),
            cudaSuccess);
}

// The tensor-core kernel has instances for io_type fp32 and its operand
// type only; anything else is NotSupported before any launch, so that the
// caller falls back to AttentionPrefillCuda.
TEST(FlashAttentionArgumentsTest, RefusesIoOtherThanFp32OrOperandType) {
  alignas(16) static float host[1024];
  const Sequence seq{0, 1, 0, {host, host, 4}};
  EXPECT_EQ(FlashAttentionPrefillCuda({{2, 64, 0},
                                       ElementType::kF16,
                                       1,
                                       &seq,
                                       host,
                                       host,
                                       host,
                                       ElementType::kBF16},
                                      nullptr),
            cudaErrorNotSupported);
  EXPECT_EQ(FlashAttentionPrefillCuda({{2, 64, 0},
                                       ElementType::kBF16,
                                       1,
                                       &seq,
                                       host,
                                       host,
                                       host,
                                       ElementType::kI16},
                                      nullptr),
            cudaErrorNotSupported);
}

// A 16-bit cache is taken only of io_type (= the operand type): the cache
// writer is the io_type's, and the tiles of a 16-bit cache are copied, not
// converted. Anything else is NotSupported before any launch, so that the
// caller falls back to AttentionPrefillCuda.
TEST(FlashAttentionArgumentsTest, RefusesCachesOtherThanFp32OrIoType) {
  alignas(16) static float host[1024];
  struct Combo {
    ElementType operand, io, cache;
  };
  for (const Combo& c :
       {Combo{ElementType::kF16, ElementType::kF32, ElementType::kF16},
        Combo{ElementType::kF16, ElementType::kF16, ElementType::kBF16},
        Combo{ElementType::kBF16, ElementType::kBF16, ElementType::kF16},
        Combo{ElementType::kBF16, ElementType::kF32, ElementType::kBF16},
        Combo{ElementType::kF16, ElementType::kF16, ElementType::kI16}}) {
    SCOPED_TRACE(::testing::Message()
                 << "operand " << ElementTypeName(c.operand) << " io "
                 << ElementTypeName(c.io) << " cache "
                 << ElementTypeName(c.cache));
    const Sequence ok{0, 1, 0, {host, host, 4}};
    const Sequence bad{0, 1, 0, {host, host, 4, c.cache}};
    const Sequence seqs[] = {ok, bad};  // one bad cache refuses the call
    EXPECT_EQ(
        FlashAttentionPrefillCuda(
            {{2, 64, 0}, c.operand, 2, seqs, host, host, host, c.io}, nullptr),
        cudaErrorNotSupported);
  }
}

}  // namespace
}  // namespace h3::kernels::flash
