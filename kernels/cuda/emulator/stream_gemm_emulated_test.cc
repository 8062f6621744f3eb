// The decode products on tensor cores run on the CPU by the emulator
// (stream_gemm_emulated.cc and friends; mma.sync with the PTX fragment
// layout, emulator/mma.h): StreamGemmCuda (it ran on an H200, so this also
// checks the emulator's MMA layout) and StreamSplitGemmCuda (thread-block
// clusters and distributed shared memory) against the plain reference on
// every tail case of their GPU test, a row's bits the same in any batch;
// and AddNormStreamGemmCuda bit for bit against AddLayerNormCuda followed
// by StreamGemmCuda, as its GPU test asks. All three passed their GPU
// tests on an H200.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/element_type.h"
#include "base/half_float.h"
#include "gtest/gtest.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/emulator/fibers.h"
#include "kernels/cuda/stream_gemm.h"
#include "kernels/cuda/stream_split_gemm.h"
#include "kernels/skinny_gemm.h"
#include "tests/support/norm_product_case.h"
#include "tests/support/normalised_error.h"
#include "tests/support/stream_gemm_case.h"

namespace h3::kernels {
namespace {

using h3::testing::StreamCase;
using h3::testing::StreamOperands;

// StreamGemmCuda, or StreamSplitGemmCuda (k split across a thread-block
// cluster).
enum class Kernel { kStream, kSplit };

// y of case c over operands o, by `kernel` on the emulator.
void RunEmulated(Kernel kernel, const StreamCase& c, const StreamOperands& o,
                 std::vector<uint8_t>* y) {
  y->assign(c.rows * c.n * ElementSize(h3::testing::YType(c)), 0xff);
  const StreamGemmParams p = h3::testing::StreamParams(
      c, o.x.data(), o.w.data(), o.bias.data(), y->data());
  ASSERT_EQ(kernel == Kernel::kStream ? StreamGemmCuda(p, nullptr)
                                      : StreamSplitGemmCuda(p, nullptr),
            cudaSuccess)
      << emulator::LastRunError();
}

class StreamGemmEmulatedTest
    : public ::testing::TestWithParam<std::tuple<Kernel, StreamCase>> {
 protected:
  Kernel kernel() const { return std::get<0>(GetParam()); }
  const StreamCase& test_case() const { return std::get<1>(GetParam()); }
};

// In both fiber orders (the split kernel's blocks of a cluster meet at its
// barriers and read each other's partials).
TEST_P(StreamGemmEmulatedTest, MatchesThePlainProduct) {
  const StreamCase& c = test_case();
  const StreamOperands o = h3::testing::MakeStreamOperands(c, 7);
  for (const emulator::Order order :
       {emulator::Order::kForward, emulator::Order::kBackward}) {
    const emulator::ScopedOrder scoped(order);
    std::vector<uint8_t> y;
    RunEmulated(kernel(), c, o, &y);
    if (HasFatalFailure()) return;
    EXPECT_LE(h3::testing::NormalisedError(h3::testing::DecodeY(c, y),
                                           h3::testing::StreamReference(c, o)),
              h3::testing::StreamTolerance(c));
  }
}

// As the GPU test's: a row's bits alone equal its bits at the start, middle
// and end of batches of 7 and 64. The emulator's MMA sums in one order
// whatever the rows, so this checks the rows' indexing and that nothing of
// the reduction depends on them (the split count does not).
TEST_P(StreamGemmEmulatedTest, ARowGetsTheSameBitsInAnyBatch) {
  h3::testing::ExpectARowGetsTheSameBitsInAnyBatch(
      test_case(),
      [&](const StreamCase& c, const StreamOperands& o,
          std::vector<uint8_t>* y) { RunEmulated(kernel(), c, o, y); });
}

// StreamGemmCuda's y as the emulator computes it: kernels/stream_gemm.h's
// order of every sum, with each MMA's 16 products added in fp32 in the
// emulated MMA's order (emulator/mma.h: its k = 0..15 in turn; k = 2 t + h
// + 8 q holds element 16 t + 4 j + 2 q + h of MMA j). The products of two
// 16-bit values are exact in fp32, so this gives the kernel's bits: any
// other assignment of steps to warps, order of steps or of the warps' sums
// shows.
std::vector<uint8_t> SumOrderProduct(const StreamCase& c,
                                     const StreamOperands& o) {
  const ElementType x_type = h3::testing::XType(c);
  const ElementType y_type = h3::testing::YType(c);
  std::vector<uint8_t> y(c.rows * c.n * ElementSize(y_type));
  const int64_t steps = (c.k + kStreamStep - 1) / kStreamStep;
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t j = 0; j < c.n; ++j) {
      const auto product = [&](int64_t e) {
        if (e >= c.k) return 0.0f;
        const float x =
            RoundToType(LoadFloat(o.x.data(), x_type, r * c.k + e), c.w_type);
        return x * LoadFloat(o.w.data(), c.w_type, j * c.k + e);
      };
      float warp_acc[kStreamWarps] = {};
      for (int64_t s = 0; s < steps; ++s) {
        float& acc = warp_acc[s % kStreamWarps];
        for (int mma = 0; mma < 4; ++mma) {
          for (int kk = 0; kk < 16; ++kk) {
            const int t = kk % 8 / 2, h = kk % 2, q = kk / 8;
            acc += product(s * kStreamStep + 16 * t + 4 * mma + 2 * q + h);
          }
        }
      }
      float v = warp_acc[0];
      for (int w = 1; w < kStreamWarps; ++w) v += warp_acc[w];
      if (c.bias) v += LoadFloat(o.bias.data(), y_type, j);
      if (c.gelu) v = SkinnyGeluTanh(v);
      StoreFloat(y.data(), y_type, r * c.n + j, v);
    }
  }
  return y;
}

class StreamGemmSumOrderEmulatedTest
    : public ::testing::TestWithParam<StreamCase> {};

TEST_P(StreamGemmSumOrderEmulatedTest, GivesTheBitsOfItsSumOrder) {
  const StreamCase& c = GetParam();
  const StreamOperands o = h3::testing::MakeStreamOperands(c, 5);
  std::vector<uint8_t> y;
  RunEmulated(Kernel::kStream, c, o, &y);
  if (HasFatalFailure()) return;
  const std::vector<uint8_t> want = SumOrderProduct(c, o);
  ASSERT_EQ(y.size(), want.size());
  const int64_t size = ElementSize(h3::testing::YType(c));
  for (int64_t i = 0; i < c.rows * c.n; ++i) {
    ASSERT_EQ(std::memcmp(y.data() + i * size, want.data() + i * size, size), 0)
        << "row " << i / c.n << " column " << i % c.n;
  }
}

// StreamCases, and 1 and 8 rows of x in W's type in each band of
// StreamGemmFitFor on the emulator's 132 multiprocessors (3 blocks a
// multiprocessor, 2 steps ahead: 265 blocks; 4 and 1 step: 400 blocks),
// and under one block a multiprocessor over a deep k: the same sums.
std::vector<StreamCase> SumOrderCases() {
  std::vector<StreamCase> cases = h3::testing::StreamCases();
  for (const ElementType type : {ElementType::kF16, ElementType::kBF16}) {
    for (const auto& [n, k] :
         {std::pair<int64_t, int64_t>{4240, 1032}, {6400, 520}, {80, 8200}}) {
      cases.push_back({.w_type = type,
                       .half_x = true,
                       .bias = true,
                       .rows = 1,
                       .n = n,
                       .k = k});
      cases.push_back({.w_type = type,
                       .half_x = true,
                       .half_y = true,
                       .bias = true,
                       .gelu = true,
                       .rows = 8,
                       .n = n,
                       .k = k});
    }
  }
  return cases;
}

TEST(StreamGemmFitTest, OneWaveWhereTheGridFitsThreeOrFour) {
  using Fit = StreamGemmFit;
  // The 1.3B products on 132 multiprocessors, one row: q|k|v (384 blocks),
  // fc1 (512), out and fc2 (128), LM head (3142).
  EXPECT_EQ(StreamGemmFitFor(1, true, 384, 132), (Fit{3, 2}));
  EXPECT_EQ(StreamGemmFitFor(1, true, 512, 132), (Fit{4, 1}));
  EXPECT_EQ(StreamGemmFitFor(1, true, 128, 132), Fit{});
  EXPECT_EQ(StreamGemmFitFor(1, true, 3142, 132), Fit{});
  // The bands' edges.
  EXPECT_EQ(StreamGemmFitFor(8, true, 265, 132), (Fit{3, 2}));
  EXPECT_EQ(StreamGemmFitFor(1, true, 264, 132), Fit{});  // fits 2
  EXPECT_EQ(StreamGemmFitFor(1, true, 396, 132), (Fit{3, 2}));
  EXPECT_EQ(StreamGemmFitFor(1, true, 397, 132), (Fit{4, 1}));
  EXPECT_EQ(StreamGemmFitFor(1, true, 528, 132), (Fit{4, 1}));
  EXPECT_EQ(StreamGemmFitFor(1, true, 529, 132), Fit{});
  // Two row tiles, or fp32 x: the default instances.
  EXPECT_EQ(StreamGemmFitFor(9, true, 384, 132), Fit{});
  EXPECT_EQ(StreamGemmFitFor(1, false, 384, 132), Fit{});
}

INSTANTIATE_TEST_SUITE_P(Cases, StreamGemmSumOrderEmulatedTest,
                         ::testing::ValuesIn(SumOrderCases()),
                         [](const ::testing::TestParamInfo<StreamCase>& info) {
                           return h3::testing::StreamCaseName(info.param);
                         });

// Every tail case, each kernel: for the split kernel also several column
// blocks of 128 with a partial last one and a k split 8 ways, and not the
// cases of k 8200 (there for StreamGemmCuda's warps of many load rounds;
// the split kernel's batches of 64 at that depth take seconds each here).
std::vector<std::tuple<Kernel, StreamCase>> EmulatedCases() {
  std::vector<std::tuple<Kernel, StreamCase>> cases;
  for (const Kernel kernel : {Kernel::kStream, Kernel::kSplit}) {
    for (const StreamCase& c : h3::testing::StreamCases()) {
      if (kernel == Kernel::kStream || c.k <= 4104) {
        cases.emplace_back(kernel, c);
      }
    }
    for (const ElementType type : {ElementType::kF16, ElementType::kBF16}) {
      cases.emplace_back(
          kernel,
          StreamCase{
              .w_type = type, .bias = true, .rows = 64, .n = 300, .k = 1096});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, StreamGemmEmulatedTest, ::testing::ValuesIn(EmulatedCases()),
    [](const ::testing::TestParamInfo<std::tuple<Kernel, StreamCase>>& info) {
      return std::string(std::get<0>(info.param) == Kernel::kStream
                             ? "stream_"
                             : "split_") +
             h3::testing::StreamCaseName(std::get<1>(info.param));
    });

// As the GPU test's: for the split kernel from 17 rows, the shared-x
// kernel (16-bit x) against the L1 kernel (the same values as fp32 x).
TEST(StreamSplitEmulatedTest, FloatXGivesTheSameBits) {
  h3::testing::ExpectFloatXGivesTheSameBits(
      [](const StreamCase& c, const StreamOperands& o,
         std::vector<uint8_t>* y) { RunEmulated(Kernel::kSplit, c, o, y); });
}

TEST(StreamGemmEmulatedIndexTest, CountsEveryElementOnce) {
  for (const bool split : {false, true}) {
    EXPECT_EQ(h3::testing::FirstElementNotCountedOnce(
                  [split](const StreamGemmParams& p) {
                    ASSERT_EQ(split ? StreamSplitGemmCuda(p, nullptr)
                                    : StreamGemmCuda(p, nullptr),
                              cudaSuccess)
                        << emulator::LastRunError();
                  }),
              -1)
        << (split ? "split" : "stream");
  }
}

using h3::testing::NormProductCase;

class AddNormStreamGemmEmulatedTest
    : public ::testing::TestWithParam<NormProductCase> {};

// As its GPU test: the norm inside the product gives the bits of
// AddLayerNormCuda followed by StreamGemmCuda, output and residual sum
// alike, and leaves the norm's output unwritten.
TEST_P(AddNormStreamGemmEmulatedTest, EqualsTheNormThenTheProduct) {
  const auto [type, rows, cols, add] = GetParam();
  constexpr int64_t kN = h3::testing::kNormProductN;
  const h3::testing::NormProductOperands o(GetParam());
  // 16-byte aligned buffers, 0xff (NaN) where nothing should be read.
  std::vector<uint4> res_a(rows * cols / 4 + 1), res_b(res_a.size());
  std::vector<uint4> normed(rows * cols / 8 + 1), y_a(rows * kN / 4 + 1),
      y_b(y_a.size());
  for (auto* b : {&res_a, &res_b, &normed, &y_a, &y_b}) {
    std::memset(b->data(), 0xff, b->size() * sizeof(uint4));
  }
  h3::testing::NormProductCall call = h3::testing::MakeNormProductCall(
      GetParam(), o.x.data(), o.residual_in.data(),
      reinterpret_cast<float*>(res_a.data()), o.gamma.data(), o.beta.data(),
      normed.data(), o.w.data(), o.bias.data(), y_a.data());
  ASSERT_STREQ(AddNormStreamGemmCheck(call.norm, call.product), "");
  ASSERT_EQ(AddLayerNormCuda(call.norm, nullptr), cudaSuccess)
      << emulator::LastRunError();
  ASSERT_EQ(StreamGemmCuda(call.product, nullptr), cudaSuccess)
      << emulator::LastRunError();

  std::memset(normed.data(), 0xff, normed.size() * sizeof(uint4));
  call.norm.residual = reinterpret_cast<float*>(res_b.data());
  call.product.y = y_b.data();
  ASSERT_EQ(AddNormStreamGemmCuda(call.norm, call.product, nullptr),
            cudaSuccess)
      << emulator::LastRunError();
  EXPECT_EQ(std::memcmp(y_b.data(), y_a.data(), rows * kN * sizeof(float)), 0)
      << "outputs";
  EXPECT_EQ(
      std::memcmp(res_b.data(), res_a.data(), rows * cols * sizeof(float)), 0)
      << "residual sums";
  const uint16_t* out = reinterpret_cast<const uint16_t*>(normed.data());
  for (int64_t i = 0; i < rows * cols; ++i) {
    ASSERT_EQ(out[i], 0xffff) << "the fused kernel wrote the norm's output";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AddNormStreamGemmEmulatedTest,
    ::testing::Combine(::testing::Values(ElementType::kF16, ElementType::kBF16),
                       ::testing::Values(1, 3, 4),
                       ::testing::Values(768, 2048, 2560), ::testing::Bool()),
    [](const ::testing::TestParamInfo<NormProductCase>& info) {
      return h3::testing::NormProductCaseName(info.param);
    });

}  // namespace
}  // namespace h3::kernels
