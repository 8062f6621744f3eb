// The measured products' choice table (engine/product_choices.h): row
// buckets, keys, the fastest kernel kept, refusals, the bound on keys.
#include "engine/product_choices.h"

#include <string>
#include <vector>

#include "engine/step_plan.h"
#include "gtest/gtest.h"

namespace h3::engine {
namespace {

// The runner's decode batches each get their own measurement: a choice
// made at 40 rows does not serve 64.
TEST(ProductChoicesTest, RowsShareTheRunnersBatchBuckets) {
  EXPECT_EQ(ProductRowBucket(1), 1);
  EXPECT_EQ(ProductRowBucket(2), 2);
  EXPECT_EQ(ProductRowBucket(3), 4);
  EXPECT_EQ(ProductRowBucket(5), 8);
  EXPECT_EQ(ProductRowBucket(8), 8);
  EXPECT_EQ(ProductRowBucket(9), 16);
  EXPECT_EQ(ProductRowBucket(17), 24);
  EXPECT_EQ(ProductRowBucket(33), 40);
  EXPECT_EQ(ProductRowBucket(40), 40);
  EXPECT_EQ(ProductRowBucket(57), 64);
  EXPECT_EQ(ProductRowBucket(64), 64);
  for (int64_t rows = 1; rows <= 64; ++rows) {
    EXPECT_EQ(ProductRowBucket(rows), GraphBucket(rows)) << rows;
  }
}

TEST(ProductChoicesTest, AKeyHoldsTheBucketShapeTypesAndEpilogue) {
  uint16_t w = 0, bias = 0;
  kernels::SkinnyGemmParams p{.w = &w,
                              .w_type = ElementType::kF16,
                              .bias = &bias,
                              .bias_type = ElementType::kF16,
                              .y_type = ElementType::kF16,
                              .rows = 6,
                              .n = 6144,
                              .k = 2048,
                              .gelu = true};
  const ProductKey key = ProductKey::Of(p);
  EXPECT_EQ(key.bucket, 8);
  EXPECT_EQ(key.n, 6144);
  EXPECT_EQ(key.k, 2048);
  EXPECT_TRUE(key.bias);
  EXPECT_TRUE(key.gelu);
  EXPECT_EQ(key.bias_type, ElementType::kF16);
  p.rows = 7;  // the same bucket
  EXPECT_EQ(ProductKey::Of(p), key);
  p.rows = 9;
  EXPECT_NE(ProductKey::Of(p), key);
  p.rows = 7;
  p.bias = nullptr;  // no bias: its type does not matter
  const ProductKey no_bias = ProductKey::Of(p);
  p.bias_type = ElementType::kF32;
  EXPECT_EQ(ProductKey::Of(p), no_bias);
  EXPECT_NE(no_bias, key);
}

TEST(ProductChoicesTest, KeepsTheFastestKernelThatRan) {
  ProductChoices choices;
  const ProductKey a{.bucket = 64, .n = 2048, .k = 8192};
  const ProductKey b{.bucket = 1, .n = 2048, .k = 8192};
  EXPECT_EQ(choices.Find(a), nullptr);
  EXPECT_EQ(choices.Choose(a, {{ProductKernel::kCublasLt, 0.015f},
                               {ProductKernel::kStream, 0.042f},
                               {ProductKernel::kSplit, 0.011f}}),
            ProductKernel::kSplit);
  ASSERT_NE(choices.Find(a), nullptr);
  EXPECT_EQ(*choices.Find(a), ProductKernel::kSplit);
  EXPECT_EQ(choices.Find(b), nullptr);
  // A refusal (negative) never wins; equal times keep the first.
  EXPECT_EQ(choices.Choose(b, {{ProductKernel::kCublasLt, 0.014f},
                               {ProductKernel::kStream, 0.014f},
                               {ProductKernel::kSplit, -1.0f}}),
            ProductKernel::kCublasLt);
  EXPECT_EQ(choices.size(), 2u);
  EXPECT_EQ(choices.Describe(),
            "rows<=1 2048x8192 fp32/fp32/fp32: cublaslt (cublaslt 0.014 ms, "
            "stream 0.014 ms, stream-split refused)\n"
            "rows<=64 2048x8192 fp32/fp32/fp32: stream-split (cublaslt "
            "0.015 ms, stream 0.042 ms, stream-split 0.011 ms)\n");
}

TEST(ProductChoicesTest, EveryKernelRefusedFallsBackToCublasLt) {
  ProductChoices choices;
  EXPECT_EQ(choices.Choose({.bucket = 8}, {{ProductKernel::kStream, -1.0f},
                                           {ProductKernel::kSplit, -1.0f}}),
            ProductKernel::kCublasLt);
}

TEST(ProductChoicesTest, KeepsAtMostMaxKeys) {
  ProductChoices choices;
  for (size_t i = 0; i < ProductChoices::kMaxKeys + 10; ++i) {
    const ProductKey key{.bucket = 1, .n = static_cast<int64_t>(i) + 1};
    EXPECT_EQ(choices.Choose(key, {{ProductKernel::kStream, 1.0f}}),
              ProductKernel::kStream);
  }
  EXPECT_EQ(choices.size(), ProductChoices::kMaxKeys);
  EXPECT_EQ(
      choices.Find({.bucket = 1,
                    .n = static_cast<int64_t>(ProductChoices::kMaxKeys) + 1}),
      nullptr);
}

}  // namespace
}  // namespace h3::engine
