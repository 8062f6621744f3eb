// LinearCuda: y[rows, n] = epilogue(x[rows, k] W^T + bias) by cuBLASLt.
//
// cuBLASLt is column-major. A row-major [r, c] matrix is a column-major
// [c, r] one, so we ask for the transposed product
//   D (n x rows) = op(A) B,  A = W as column-major k x n (lda = k), op = T,
//                            B = x as column-major k x rows (ldb = k),
// with D = y (ldd = n). The bias, one value per output feature, is then one
// per row of D: what CUBLASLT_EPILOGUE_BIAS adds. cuBLASLt takes a bias of
// D's type only (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: fp32 bias
// with 16-bit D is an exception only for fp8 and int8 kernels), so a fused
// plan's D has the bias's type: y itself when the bias has y's type, fp32
// scratch when an fp32 bias meets a 16-bit y (linear.h lists the routes).
#include "kernels/cuda/linear.h"

#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/bias_add.h"
#include "kernels/cuda/bias_gelu.h"
#include "kernels/cuda/cublaslt_api.h"
#include "kernels/cuda/cuda_error.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch_timing.h"
#include "kernels/cuda/linear_plan.h"

namespace h3::kernels {
namespace {

using linear_plan::AlignmentOf;
using linear_plan::HasBias;
using linear_plan::kMaxAlignment;
using linear_plan::kPinnedAlignment;
using linear_plan::Lt;
using linear_plan::LtError;
using linear_plan::Plan;
using linear_plan::PlanCache;
using linear_plan::PlanKey;

// cuBLASLt's split-K and stream-K algorithms want scratch; 32 MiB is what
// the cuBLAS docs recommend for Hopper (and more than Ampere needs).
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// How Run computes one product (linear.h lists the routes).
struct Route {
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;  // fused, if any
  ElementType d_type = ElementType::kF32;                   // of D
  bool scratch_d = false;  // D is the fp32 scratch, not y
  Plan* plan = nullptr;
};

}  // namespace

struct LinearCuda::State {
  Options options;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulPreference_t pinned_preference = nullptr;
  DeviceBuffer workspace;
  DeviceBuffer scratch;    // x rounded to W's type, [max_rows_times_k]
  DeviceBuffer scratch_d;  // fp32 D before rounding, [max_rows_times_n]
  std::unique_ptr<PlanCache> plans;  // after handle and preference
  TuneStats tune_stats;              // what tuning did so far

  ~State() {
    plans.reset();
    if (pinned_preference != nullptr) {
      Lt().cublasLtMatmulPreferenceDestroy(pinned_preference);
    }
    if (preference != nullptr) Lt().cublasLtMatmulPreferenceDestroy(preference);
    if (handle != nullptr) Lt().cublasLtDestroy(handle);
  }

  // The route of p, x_in the x the product reads (p.x or the scratch).
  std::string Choose(const LinearCudaParams& p, const void* x_in, Route* r);
  // Times plan's candidates on this call's operands (x_in, D at d) and keeps
  // the fastest in plan->algo; nothing while `stream` is capturing.
  std::string Tune(Plan* plan, const void* w, const void* x_in, void* d,
                   cudaStream_t stream);
  // One call of `algo` with plan's descriptors; cuBLASLt's error, if any.
  std::string Matmul(Plan* plan, const cublasLtMatmulAlgo_t& algo,
                     const void* w, const void* x_in, void* d,
                     cudaStream_t stream);
};

std::string LinearCuda::State::Matmul(Plan* plan,
                                      const cublasLtMatmulAlgo_t& algo,
                                      const void* w, const void* x_in, void* d,
                                      cudaStream_t stream) {
  const float alpha = 1.0f;
  const float beta = 0.0f;
  H3_LT_CALL(cublasLtMatmul, handle, plan->desc, &alpha, w, plan->w_layout,
             x_in, plan->x_layout, &beta, d, plan->y_layout, d, plan->y_layout,
             &algo, workspace.get(), kWorkspaceBytes, stream);
  return "";
}

std::string LinearCuda::State::Tune(Plan* plan, const void* w, const void* x_in,
                                    void* d, cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  H3_RETURN_IF_NOT_EMPTY(CudaError(cudaStreamIsCapturing(stream, &capture),
                                   "cudaStreamIsCapturing"));
  if (capture != cudaStreamCaptureStatusNone) return "";
  // What is written to evict L2 before each timed call, for this call only
  // (a plan is timed once; holding it would keep twice the L2 allocated for
  // the object's life). Empty where memory is short: no flush then.
  const DeviceBuffer flush = L2FlushBuffer();
  const std::vector<cublasLtMatmulAlgo_t> candidates =
      std::move(plan->candidates);
  plan->candidates.clear();
  // Candidates from this index on are split-K variants.
  const size_t first_split = candidates.size() - plan->split_candidates;
  size_t best = 0;
  float best_ms = -1.0f;
  tune_stats.last_timings.clear();
  for (size_t c = 0; c < candidates.size(); ++c) {
    float median = -1.0f;
    // A candidate cuBLASLt refuses at run time drops out.
    H3_RETURN_IF_NOT_EMPTY(MedianLaunchMs(
        stream, flush,
        [&] { return Matmul(plan, candidates[c], w, x_in, d, stream).empty(); },
        &median));
    tune_stats.last_timings.emplace_back(
        linear_plan::DescribeAlgo(candidates[c]), median);
    if (median >= 0 && (best_ms < 0 || median < best_ms)) {
      best = c;
      best_ms = median;
    }
  }
  if (best_ms >= 0) plan->algo = candidates[best];
  tune_stats.last_kept = best_ms >= 0 ? static_cast<int>(best) : -1;
  ++tune_stats.timed;
  if (best != 0) ++tune_stats.changed;
  tune_stats.split_candidates += plan->split_candidates;
  if (best >= first_split) ++tune_stats.split_kept;
  return "";
}

std::string LinearCuda::State::Choose(const LinearCudaParams& p,
                                      const void* x_in, Route* r) {
  auto find = [&] {
    const void* d = r->scratch_d ? scratch_d.get() : p.y;
    const bool fused = HasBias(r->epilogue);
    // Pinned: alignments above 16 bytes are not told, so that one
    // algorithm serves buffers however much more aligned they happen to be.
    const uint32_t most =
        options.pinned_algorithms ? kPinnedAlignment : kMaxAlignment;
    const auto align = [most](const void* ptr) {
      return std::min(AlignmentOf(ptr), most);
    };
    const PlanKey key{p.rows,
                      p.n,
                      p.k,
                      p.w_type,
                      r->d_type,
                      r->epilogue,
                      align(p.w),
                      align(x_in),
                      align(d),
                      fused ? align(p.bias) : most,
                      options.pinned_algorithms};
    return plans->Find(key, p.bias, &r->plan);
  };
  if (options.fused_epilogues && p.bias != nullptr) {
    // D of the bias's type: y, or fp32 scratch for an fp32 bias and 16-bit y.
    r->epilogue = p.gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    r->d_type = p.bias_type;
    r->scratch_d = p.bias_type != p.y_type;
    H3_RETURN_IF_NOT_EMPTY(find());
    if (r->plan->has_algo) return "";
  }
  // The plain product, then our bias (+ GELU) kernel from fp32 D into y.
  r->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  r->scratch_d = p.y_type != ElementType::kF32 && (p.bias != nullptr || p.gelu);
  r->d_type = r->scratch_d ? ElementType::kF32 : p.y_type;
  H3_RETURN_IF_NOT_EMPTY(find());
  if (!r->plan->has_algo) {
    return "LinearCuda: cuBLASLt has no algorithm for rows=" +
           std::to_string(p.rows) + " n=" + std::to_string(p.n) +
           " k=" + std::to_string(p.k) + " with these types and alignments";
  }
  return "";
}

LinearCuda::LinearCuda(std::unique_ptr<State> state)
    : state_(std::move(state)) {}

LinearCuda::~LinearCuda() = default;

std::string LinearCuda::Create(const Options& options,
                               std::unique_ptr<LinearCuda>* out) {
  if (options.max_rows_times_k < 0 || options.max_rows_times_n < 0) {
    return "LinearCuda: Options::max_rows_times_k and max_rows_times_n must "
           "not be negative";
  }
  std::string load_error;
  if (LoadCublasLt(&load_error) == nullptr) return load_error;
  auto state = std::make_unique<State>();
  state->options = options;
  H3_LT_CALL(cublasLtCreate, &state->handle);
  H3_LT_CALL(cublasLtMatmulPreferenceCreate, &state->preference);
  H3_LT_CALL(cublasLtMatmulPreferenceSetAttribute, state->preference,
             CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspaceBytes,
             sizeof(kWorkspaceBytes));
  // No workspace and no reduction scheme: what a pinned algorithm may use.
  const size_t no_workspace = 0;
  const uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
  H3_LT_CALL(cublasLtMatmulPreferenceCreate, &state->pinned_preference);
  H3_LT_CALL(cublasLtMatmulPreferenceSetAttribute, state->pinned_preference,
             CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &no_workspace,
             sizeof(no_workspace));
  H3_LT_CALL(cublasLtMatmulPreferenceSetAttribute, state->pinned_preference,
             CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &no_reduction,
             sizeof(no_reduction));
  state->plans = std::make_unique<PlanCache>(
      state->handle, state->preference, state->pinned_preference,
      options.allow_tf32,
      options.tune_algorithms && !options.pinned_algorithms ? kTuneRows : 0,
      kWorkspaceBytes);
  H3_RETURN_IF_NOT_EMPTY(CudaError(state->workspace.Reserve(kWorkspaceBytes),
                                   "cudaMalloc (cuBLASLt workspace)"));
  if (options.max_rows_times_k > 0) {
    // 16-bit weights only: x rounded to fp16 or bf16, 2 bytes per element.
    H3_RETURN_IF_NOT_EMPTY(CudaError(
        state->scratch.Reserve(static_cast<size_t>(options.max_rows_times_k) *
                               sizeof(uint16_t)),
        "cudaMalloc (rounded x scratch)"));
  }
  if (options.max_rows_times_n > 0) {
    H3_RETURN_IF_NOT_EMPTY(CudaError(
        state->scratch_d.Reserve(static_cast<size_t>(options.max_rows_times_n) *
                                 sizeof(float)),
        "cudaMalloc (fp32 D scratch)"));
  }
  out->reset(new LinearCuda(std::move(state)));
  return "";
}

// "" when p is a product Run takes (its sizes, types, pointers), else why
// not.
static std::string CheckParams(const LinearCudaParams& p) {
  if (p.rows < 0 || p.n < 0 || p.k < 0) {
    return "LinearCuda: negative size";
  }
  if (p.w_type != ElementType::kF32 && p.w_type != ElementType::kF16 &&
      p.w_type != ElementType::kBF16) {
    return std::string("LinearCuda: weights of type ") +
           ElementTypeName(p.w_type) + "; fp32, fp16 or bf16 only";
  }
  const std::pair<const char*, ElementType> fields[] = {{"x_type", p.x_type},
                                                        {"y_type", p.y_type}};
  for (const auto& [field, type] : fields) {
    if (type != ElementType::kF32 && type != p.w_type) {
      return std::string("LinearCuda: ") + field + " " + ElementTypeName(type) +
             " with w_type " + ElementTypeName(p.w_type) +
             "; fp32 or w_type only";
    }
  }
  if (p.bias_type != ElementType::kF32 && p.bias_type != p.y_type) {
    return std::string("LinearCuda: bias_type ") +
           ElementTypeName(p.bias_type) + " with y_type " +
           ElementTypeName(p.y_type) +
           "; fp32, or y_type when y_type is 16-bit";
  }
  if (p.rows == 0 || p.n == 0) return "";
  if (p.k == 0) return "LinearCuda: k must be positive";
  if (p.x == nullptr || p.w == nullptr || p.y == nullptr) {
    return "LinearCuda: x, w and y must not be null";
  }
  const auto x_begin = reinterpret_cast<uintptr_t>(p.x);
  const auto y_begin = reinterpret_cast<uintptr_t>(p.y);
  if (x_begin < y_begin + p.rows * p.n * ElementSize(p.y_type) &&
      y_begin < x_begin + p.rows * p.k * ElementSize(p.x_type)) {
    return "LinearCuda: y overlaps x";
  }
  return "";
}

// For 16-bit weights the product reads x in W's type: fp32 x is rounded
// into scratch first.
static bool RoundsX(const LinearCudaParams& p) {
  return p.w_type != ElementType::kF32 && p.x_type == ElementType::kF32;
}

std::string LinearCuda::ScratchDElements(const LinearCudaParams& p,
                                         int64_t* elements) {
  *elements = 0;
  H3_RETURN_IF_NOT_EMPTY(CheckParams(p));
  // Only a 16-bit y with a bias or GELU can go through fp32 D: the other
  // products (out, fc2, the LM head) need no route chosen twice per call.
  if (p.rows == 0 || p.n == 0 || p.y_type == ElementType::kF32 ||
      (p.bias == nullptr && !p.gelu)) {
    return "";
  }
  Route route;
  H3_RETURN_IF_NOT_EMPTY(
      state_->Choose(p, RoundsX(p) ? state_->scratch.get() : p.x, &route));
  if (route.scratch_d) *elements = p.rows * p.n;
  return "";
}

std::string LinearCuda::Run(const LinearCudaParams& p, cudaStream_t stream) {
  State& s = *state_;
  H3_RETURN_IF_NOT_EMPTY(CheckParams(p));
  if (p.rows == 0 || p.n == 0) return "";
  if (RoundsX(p) && p.rows * p.k > s.options.max_rows_times_k) {
    return "LinearCuda: rows * k = " + std::to_string(p.rows * p.k) +
           " exceeds Options::max_rows_times_k = " +
           std::to_string(s.options.max_rows_times_k) +
           " (the scratch 16-bit weights round x into)";
  }
  const void* x_in = RoundsX(p) ? s.scratch.get() : p.x;
  Route route;
  H3_RETURN_IF_NOT_EMPTY(s.Choose(p, x_in, &route));
  if (route.scratch_d && p.rows * p.n > s.options.max_rows_times_n) {
    return "LinearCuda: rows * n = " + std::to_string(p.rows * p.n) +
           " exceeds Options::max_rows_times_n = " +
           std::to_string(s.options.max_rows_times_n) +
           " (the fp32 scratch D of a 16-bit y with an fp32 bias or an "
           "unfused epilogue)";
  }
  if (RoundsX(p)) {
    H3_RETURN_IF_NOT_EMPTY(
        CudaError(ConvertFromFloat(static_cast<const float*>(p.x), p.rows * p.k,
                                   p.w_type, s.scratch.get(), stream),
                  "ConvertFromFloat"));
  }
  void* d = route.scratch_d ? s.scratch_d.get() : p.y;
  Plan* plan = route.plan;
  if (!plan->fits) {
    return "LinearCuda: the pinned (batch-invariant) cuBLASLt algorithm for "
           "n=" +
           std::to_string(p.n) + " k=" + std::to_string(p.k) +
           " does not take rows=" + std::to_string(p.rows);
  }
  if (HasBias(route.epilogue)) {
    // Setting an attribute touches only host memory: safe under capture.
    const void* bias = p.bias;
    H3_LT_CALL(cublasLtMatmulDescSetAttribute, plan->desc,
               CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  }
  if (!plan->candidates.empty()) {
    H3_RETURN_IF_NOT_EMPTY(s.Tune(plan, p.w, x_in, d, stream));
  }
  H3_RETURN_IF_NOT_EMPTY(s.Matmul(plan, plan->algo, p.w, x_in, d, stream));

  // Bias and GELU left to do: D is fp32 (y itself when y is fp32), and one
  // kernel writes y from it, rounding once.
  const float* d32 = static_cast<const float*>(d);
  if (route.epilogue == CUBLASLT_EPILOGUE_DEFAULT) {
    if (p.gelu) {
      return CudaError(
          BiasGeluCuda({d32, p.bias, p.y, p.rows, p.n, p.bias_type, p.y_type},
                       stream),
          "BiasGeluCuda");
    }
    if (p.bias != nullptr) {
      return CudaError(AddBiasCuda(d32, p.bias, p.bias_type, p.rows, p.n, p.y,
                                   p.y_type, stream),
                       "AddBiasCuda");
    }
  }
  if (route.scratch_d) {
    return CudaError(ConvertFromFloat(d32, p.rows * p.n, p.y_type, p.y, stream),
                     "ConvertFromFloat");
  }
  return "";
}

LinearCuda::TuneStats LinearCuda::tune_stats() const {
  return state_->tune_stats;
}

}  // namespace h3::kernels
