// LinearCuda vs a double-precision x W^T + bias (label gpu: skipped without
// a device), fp32 activations; linear_half_test.cc has the 16-bit ones.
#include "kernels/cuda/linear.h"

#include <cuda_runtime.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/linear_plan.h"
#include "kernels/cuda/linear_test_support.h"
#include "tests/support/gpu_test.h"
#include "tests/support/normalised_error.h"
#include "tests/support/random.h"

namespace h3::kernels::linear_testing {
namespace {

using h3::testing::NormalisedError;
using h3::testing::RandomNormal;

#define ASSERT_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess)

class LinearGpuTest : public h3::testing::GpuTestWithParam<Case> {};

TEST_P(LinearGpuTest, MatchesDoubleReference) {
  const Case& c = GetParam();
  const Problem p = MakeProblem(c, 17);
  EXPECT_LE(NormalisedError(RunCase(c, p, OptionsFor(c)), p.want),
            Tolerance(c));
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  const ElementType types[] = {ElementType::kF32, ElementType::kF16,
                               ElementType::kBF16};
  // (n, k): multiples of 8 (tensor-core friendly), odd ones (each row of W
  // starts at a 4- or 2-byte boundary), and a long k.
  const int64_t shapes[][2] = {{64, 128}, {97, 65}, {33, 31}, {250, 1031}};
  for (ElementType type : types) {
    for (int64_t rows : {1, 3, 17, 512}) {
      for (const auto& shape : shapes) {
        for (int epilogue = 0; epilogue < 8; ++epilogue) {
          cases.push_back({type, rows, shape[0], shape[1], (epilogue & 1) != 0,
                           (epilogue & 2) != 0, (epilogue & 4) != 0});
        }
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearGpuTest, ::testing::ValuesIn(AllCases()),
                         CaseName);

class LinearCudaTest : public h3::testing::GpuTest {};

// cuBLASLt's documentation does not say which GELU its epilogue computes;
// the model needs the tanh approximation. The fused result must sit much
// closer to it than to the erf GELU.
TEST_F(LinearCudaTest, FusedGeluIsTheTanhApproximation) {
  const Case c{ElementType::kF32, 64, 256, 256, true, false, true};
  const Problem p = MakeProblem(c, 5);  // p.want: the product + bias
  Case with_gelu = c;
  with_gelu.gelu = true;
  const std::vector<float> got = RunCase(with_gelu, p, {0, false, true});
  std::vector<double> tanh_gelu(p.want.size()), erf_gelu(p.want.size());
  for (size_t i = 0; i < p.want.size(); ++i) {
    const double v = p.want[i];
    tanh_gelu[i] =
        0.5 * v *
        (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    erf_gelu[i] = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  }
  const double tanh_error = NormalisedError(got, tanh_gelu);
  const double erf_error = NormalisedError(got, erf_gelu);
  EXPECT_LE(tanh_error, kFloat32Tolerance + kGeluExtra);
  EXPECT_GE(erf_error, 8 * tanh_error);
}

TEST_F(LinearCudaTest, Tf32WhenAllowed) {
  const Case c{ElementType::kF32, 128, 192, 320, true, false, true};
  const Problem p = MakeProblem(c, 9);
  EXPECT_LE(NormalisedError(RunCase(c, p, {0, true, true}), p.want),
            kTf32Tolerance);
}

// x, y, bias and W all 4 bytes past a 256-byte boundary (for 16-bit weights
// the product reads our aligned scratch instead of x): the heuristic must not
// pick an algorithm that assumes 16-byte alignment.
TEST_F(LinearCudaTest, MisalignedPointers) {
  for (ElementType type : {ElementType::kF32, ElementType::kF16}) {
    for (bool gelu : {false, true}) {
      const Case c{type, 19, 72, 40, true, gelu, true};
      const Problem p = MakeProblem(c, 3);
      EXPECT_LE(NormalisedError(RunCase(c, p, {c.rows * c.k, false, true}, 4),
                                p.want),
                Tolerance(c))
          << TypeName(type) << (gelu ? " gelu" : "");
    }
  }
}

TEST_F(LinearCudaTest, RoundedXBeyondScratchFails) {
  std::unique_ptr<LinearCuda> linear;
  ASSERT_EQ(LinearCuda::Create({100, false, true}, &linear), "");
  DeviceBuffer x, w, y;
  ASSERT_CUDA_OK(x.Reserve(11 * 10 * sizeof(float)));
  ASSERT_CUDA_OK(w.Reserve(8 * 10 * sizeof(float)));
  ASSERT_CUDA_OK(y.Reserve(11 * 8 * sizeof(float)));
  ASSERT_CUDA_OK(cudaMemset(x.get(), 0, x.bytes()));
  ASSERT_CUDA_OK(cudaMemset(w.get(), 0, w.bytes()));
  LinearCudaParams params;
  params.x = x.as<float>();
  params.w = w.get();
  params.w_type = ElementType::kF16;
  params.y = y.as<float>();
  params.n = 8;
  params.k = 10;
  params.rows = 10;  // rows * k = 100: fits
  EXPECT_EQ(linear->Run(params, nullptr), "");
  params.rows = 11;  // 110
  const std::string error = linear->Run(params, nullptr);
  EXPECT_NE(error.find("max_rows_times_k"), std::string::npos) << error;
  // fp32 weights read x directly: no limit.
  params.w_type = ElementType::kF32;
  EXPECT_EQ(linear->Run(params, nullptr), "");
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// A case's operands on the device (fp32 x and bias, W in c.type, y zeroed)
// and the parameters of their product.
struct Operands {
  Operands(const Case& c, const Problem& p) {
    Upload(p.x, &x);
    Upload(Encode(c.type, p.w), &w);
    Upload(p.bias, &bias);
    Upload(std::vector<float>(c.rows * c.n, 0.0f), &y);
    params = {.x = x.get(),
              .w = w.get(),
              .w_type = c.type,
              .bias = bias.as<float>(),
              .y = y.get(),
              .rows = c.rows,
              .n = c.n,
              .k = c.k,
              .gelu = c.gelu};
  }
  DeviceBuffer x, w, bias, y;
  LinearCudaParams params;
};

// One Run of `params` captured on `stream` (which must not be capturing)
// into *graph, instantiated as *exec.
void CaptureRun(LinearCuda& linear, const LinearCudaParams& params,
                cudaStream_t stream, cudaGraph_t* graph,
                cudaGraphExec_t* exec) {
  ASSERT_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const std::string error = linear.Run(params, stream);
  ASSERT_CUDA_OK(cudaStreamEndCapture(stream, graph));
  ASSERT_EQ(error, "");
  ASSERT_CUDA_OK(cudaGraphInstantiate(exec, *graph, 0));
}

// After a first call has chosen the algorithm, a captured call replays with
// whatever x holds at replay time.
TEST_F(LinearCudaTest, ReplaysFromACudaGraph) {
  const Case c{ElementType::kF16, 33, 96, 160, true, true, true};
  const Problem p = MakeProblem(c, 21);
  Operands o(c, p);
  DeviceBuffer &x = o.x, &y = o.y;
  const LinearCudaParams& params = o.params;
  std::unique_ptr<LinearCuda> linear;
  ASSERT_EQ(LinearCuda::Create({c.rows * c.k, false, true}, &linear), "");
  cudaStream_t stream = nullptr;
  ASSERT_CUDA_OK(cudaStreamCreate(&stream));
  ASSERT_EQ(linear->Run(params, stream), "");
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream));

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_NO_FATAL_FAILURE(CaptureRun(*linear, params, stream, &graph, &exec));

  // The same W and bias, a new x.
  const std::vector<float> x2 = RandomNormal(c.rows * c.k, 99);
  const std::vector<float> want = Reference(c, x2, p.w, p.bias);
  ASSERT_CUDA_OK(cudaMemcpy(x.get(), x2.data(), x2.size() * sizeof(float),
                            cudaMemcpyHostToDevice));
  ASSERT_CUDA_OK(cudaMemset(y.get(), 0, y.bytes()));
  ASSERT_CUDA_OK(cudaGraphLaunch(exec, stream));
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
  std::vector<float> got(c.rows * c.n);
  ASSERT_CUDA_OK(cudaMemcpy(got.data(), y.get(), got.size() * sizeof(float),
                            cudaMemcpyDeviceToHost));
  EXPECT_LE(NormalisedError(got, want), Tolerance(c));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Options::tune_algorithms: the algorithm the timing keeps computes the same
// product (the first call, which tunes, and every later one), for decode row
// counts, every type and epilogue route.
TEST_F(LinearCudaTest, TunedAlgorithmsComputeTheProduct) {
  for (const Case& c :
       {Case{ElementType::kF16, 1, 1024, 512, true, false, true},
        Case{ElementType::kF16, 64, 768, 256, true, true, true},
        Case{ElementType::kBF16, 8, 512, 384, true, true, false},
        Case{ElementType::kF32, 17, 256, 128, false, false, true}}) {
    SCOPED_TRACE(CaseName({c, 0}));
    const Problem p = MakeProblem(c, 31);
    LinearCuda::Options options = OptionsFor(c);
    options.tune_algorithms = true;
    EXPECT_LE(NormalisedError(RunCase(c, p, options), p.want), Tolerance(c));
  }
}

// Host-only: the split counts and reduction schemes tuning asks for.
TEST(LinearPlanTest, SplitsLeaveEachSplitAtLeastItsMinimum) {
  using linear_plan::SplitsFor;
  EXPECT_EQ(SplitsFor(8192, 1), (std::vector<int32_t>{2, 3, 4, 6, 8, 12, 16}));
  EXPECT_EQ(SplitsFor(2048, 1), (std::vector<int32_t>{2, 3, 4, 6, 8}));
  EXPECT_EQ(SplitsFor(2048, 4), (std::vector<int32_t>{2, 3, 6, 8}));
  EXPECT_EQ(SplitsFor(511, 1), std::vector<int32_t>{});
  EXPECT_EQ(SplitsFor(512, 1), std::vector<int32_t>{2});
}

TEST(LinearPlanTest, SplitSchemesInPlaceThenFp32Partials) {
  using linear_plan::SplitSchemes;
  using Schemes = std::vector<cublasLtReductionScheme_t>;
  EXPECT_EQ(SplitSchemes(CUBLASLT_REDUCTION_SCHEME_MASK),
            (Schemes{CUBLASLT_REDUCTION_SCHEME_INPLACE,
                     CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE}));
  EXPECT_EQ(SplitSchemes(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                         CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE),
            Schemes{CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE});
  EXPECT_EQ(SplitSchemes(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE),
            Schemes{CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE});
  EXPECT_EQ(SplitSchemes(0), Schemes{});
}

// Few column tiles over a deep k at a decode step's 64 rows: where the
// heuristic's answers leave most multiprocessors idle, tuning also times
// their split-K variants, and whichever it keeps computes the product
// (fused bias and GELU: the epilogue after the reduction).
TEST_F(LinearCudaTest, TuningTimesSplitKVariants) {
  int split_candidates = 0;
  for (const Case& c :
       {Case{ElementType::kF16, 64, 256, 8192, true, true, true},
        Case{ElementType::kBF16, 8, 128, 4096, true, false, true}}) {
    SCOPED_TRACE(CaseName({c, 0}));
    const Problem p = MakeProblem(c, 37);
    Operands o(c, p);
    std::unique_ptr<LinearCuda> linear;
    LinearCuda::Options options = OptionsFor(c);
    options.tune_algorithms = true;
    ASSERT_EQ(LinearCuda::Create(options, &linear), "");
    ASSERT_EQ(linear->Run(o.params, nullptr), "");
    ASSERT_CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> got(c.rows * c.n);
    ASSERT_CUDA_OK(cudaMemcpy(got.data(), o.y.get(), got.size() * sizeof(float),
                              cudaMemcpyDeviceToHost));
    EXPECT_LE(NormalisedError(got, p.want), Tolerance(c));
    const LinearCuda::TuneStats stats = linear->tune_stats();
    RecordProperty("split_candidates_" + TypeName(c.type),
                   stats.split_candidates);
    RecordProperty("split_kept_" + TypeName(c.type), stats.split_kept);
    EXPECT_EQ(stats.timed, 1);
    EXPECT_LE(stats.split_kept, stats.timed);
    split_candidates += stats.split_candidates;
  }
  if (split_candidates == 0) {
    GTEST_SKIP() << "cuBLASLt offered no split-K variant of its first "
                    "answers on this device";
  }
}

// A plan first met under graph capture is not timed there (no
// synchronisation inside a capture); the captured call runs the heuristic's
// first algorithm and replays right. Its first uncaptured call times it,
// once: later calls keep what it chose.
TEST_F(LinearCudaTest, TuningWaitsForAnUncapturedCall) {
  const Case c{ElementType::kF16, 8, 1024, 1024, true, false, true};
  const Problem p = MakeProblem(c, 23);
  Operands o(c, p);
  DeviceBuffer& y = o.y;
  const LinearCudaParams& params = o.params;
  std::unique_ptr<LinearCuda> linear;
  LinearCuda::Options options = OptionsFor(c);
  options.tune_algorithms = true;
  ASSERT_EQ(LinearCuda::Create(options, &linear), "");
  cudaStream_t stream = nullptr;
  ASSERT_CUDA_OK(cudaStreamCreate(&stream));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_NO_FATAL_FAILURE(CaptureRun(*linear, params, stream, &graph, &exec));
  EXPECT_EQ(linear->tune_stats().timed, 0);
  ASSERT_CUDA_OK(cudaGraphLaunch(exec, stream));
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
  std::vector<float> got(c.rows * c.n);
  ASSERT_CUDA_OK(cudaMemcpy(got.data(), y.get(), got.size() * sizeof(float),
                            cudaMemcpyDeviceToHost));
  EXPECT_LE(NormalisedError(got, p.want), Tolerance(c)) << "replayed";

  ASSERT_CUDA_OK(cudaMemset(y.get(), 0, y.bytes()));
  ASSERT_EQ(linear->Run(params, stream), "");
  const LinearCuda::TuneStats tuned = linear->tune_stats();
  // One plan; timed unless cuBLASLt offered a single algorithm.
  EXPECT_LE(tuned.timed, 1);
  RecordProperty("timed", tuned.timed);
  RecordProperty("changed", tuned.changed);
  ASSERT_EQ(linear->Run(params, stream), "");
  EXPECT_EQ(linear->tune_stats().timed, tuned.timed) << "timed twice";
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
  ASSERT_CUDA_OK(cudaMemcpy(got.data(), y.get(), got.size() * sizeof(float),
                            cudaMemcpyDeviceToHost));
  EXPECT_LE(NormalisedError(got, p.want), Tolerance(c)) << "tuned";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace h3::kernels::linear_testing
