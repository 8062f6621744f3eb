// LinearCuda with Options::pinned_algorithms (label gpu: skipped without a
// device): one cuBLASLt algorithm per shape whatever the row count, so that
// a row's result is bitwise the same alone, in a batch of 7 or 64, or among
// the 300 rows of a prefill, at any position.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/linear.h"
#include "kernels/cuda/linear_test_support.h"
#include "tests/support/gpu_test.h"
#include "tests/support/normalised_error.h"

namespace h3::kernels::linear_testing {
namespace {

using h3::testing::NormalisedError;

constexpr int64_t kAllRows = 300;

// (weights type, n, k, bias, gelu, 16-bit activations).
struct PinnedCase {
  ElementType type;
  int64_t n, k;
  bool bias, gelu, half;
};

std::vector<PinnedCase> PinnedCases() {
  std::vector<PinnedCase> cases;
  for (ElementType type :
       {ElementType::kF16, ElementType::kBF16, ElementType::kF32}) {
    for (auto [n, k] :
         {std::pair<int64_t, int64_t>{64, 128}, {97, 65}, {250, 1031}}) {
      for (int epilogue = 0; epilogue < 3; ++epilogue) {
        for (bool half : {false, true}) {
          if (half && type == ElementType::kF32) continue;
          cases.push_back({type, n, k, epilogue > 0, epilogue == 2, half});
        }
      }
    }
  }
  return cases;
}

std::string PinnedName(const ::testing::TestParamInfo<PinnedCase>& info) {
  const PinnedCase& c = info.param;
  return std::string(ElementTypeName(c.type)) + "_" + std::to_string(c.n) +
         "x" + std::to_string(c.k) + (c.bias ? "_bias" : "") +
         (c.gelu ? "_gelu" : "") + (c.half ? "_half" : "");
}

// Rows [first, first + rows) of the problem as a case of their own.
Problem Rows(const Problem& all, int64_t k, int64_t n, int64_t first,
             int64_t rows) {
  Problem p = all;
  p.x.assign(all.x.begin() + first * k, all.x.begin() + (first + rows) * k);
  p.want.assign(all.want.begin() + first * n,
                all.want.begin() + (first + rows) * n);
  return p;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The error 16-bit x and y add, normalised, in units of the type's unit
// roundoff u (2^-11 fp16, 2^-8 bf16: half an ulp, relative): x rounded into
// the type errs by u per element, which the dot product averages over k to
// about u / 2 of the largest output; the fused epilogue rounds the product
// to y's type before the bias (as LinearHalfGpuTest found on an H200), u of
// the product through GELU's slope (at most 1.13), and then y itself, u.
// 3u in all; on an H200, bf16 with bias and GELU erred by 1.4u.
double HalfIoError(const PinnedCase& c) {
  if (!c.half) return 0.0;
  const double u = std::ldexp(1.0, c.type == ElementType::kBF16 ? -8 : -11);
  return 3 * u;
}

class LinearPinnedGpuTest : public h3::testing::GpuTestWithParam<PinnedCase> {};

TEST_P(LinearPinnedGpuTest, ARowGetsTheSameBitsInAnyBatch) {
  const PinnedCase& pc = GetParam();
  const Case all{pc.type, kAllRows, pc.n, pc.k, pc.bias, pc.gelu, true};
  const Problem p = MakeProblem(all, 53);
  LinearCuda::Options options = OptionsFor(all);
  options.pinned_algorithms = true;
  const ElementType io = pc.half ? pc.type : ElementType::kF32;
  // The model's types: a 16-bit y takes a bias of its own type.
  const auto run = [&](const Case& c, const Problem& q) {
    return RunCase(c, q, options, 0, io, io, io);
  };
  const std::vector<float> y_all = run(all, p);
  ASSERT_EQ(y_all.size(), static_cast<size_t>(kAllRows * pc.n));
  EXPECT_LE(NormalisedError(y_all, p.want), Tolerance(all) + HalfIoError(pc));
  for (auto [first, rows] : {std::pair<int64_t, int64_t>{0, 1},
                             {5, 1},
                             {3, 7},
                             {0, 64},
                             {200, 64},
                             {299, 1}}) {
    SCOPED_TRACE(::testing::Message()
                 << "rows [" << first << ", " << first + rows << ")");
    Case part = all;
    part.rows = rows;
    const std::vector<float> got = run(part, Rows(p, pc.k, pc.n, first, rows));
    const std::vector<float> want(y_all.begin() + first * pc.n,
                                  y_all.begin() + (first + rows) * pc.n);
    EXPECT_TRUE(SameBits(got, want));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearPinnedGpuTest,
                         ::testing::ValuesIn(PinnedCases()), PinnedName);

}  // namespace
}  // namespace h3::kernels::linear_testing
