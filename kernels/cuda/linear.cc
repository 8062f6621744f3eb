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

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "kernels/cuda/bias_add.h"
#include "kernels/cuda/bias_gelu.h"
#include "kernels/cuda/cublaslt_api.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/elementwise.h"

namespace h3::kernels {
namespace {

// cuBLASLt's entry points; LinearCuda::Create has loaded them before any
// other function here runs.
const CublasLtApi& Lt() {
  std::string ignored;
  return *LoadCublasLt(&ignored);
}

// cuBLASLt's split-K and stream-K algorithms want scratch; 32 MiB is what
// the cuBLAS docs recommend for Hopper (and more than Ampere needs).
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
// Plans for at most this many (shape, type, epilogue, alignment) keys. Prefill
// row counts vary with the prompt, so the map would otherwise grow without
// bound; when full it is emptied and refilled (a heuristic query costs
// microseconds of host time, no device memory).
constexpr size_t kMaxPlans = 256;
// The largest pointer alignment cuBLASLt asks about (its default minimum).
constexpr uint32_t kMaxAlignment = 256;

std::string LtError(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return "";
  return std::string(call) + " failed: " + Lt().cublasLtGetStatusName(status) +
         " (" + Lt().cublasLtGetStatusString(status) + ")";
}

std::string CudaError(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return "";
  return std::string(what) + " failed: " + cudaGetErrorName(err) + " (" +
         cudaGetErrorString(err) + ")";
}

// Calls the cuBLASLt function `fn` and returns its error, named, if any.
#define H3_LT_CALL(fn, ...)                                     \
  do {                                                          \
    std::string lt_error_ = LtError(Lt().fn(__VA_ARGS__), #fn); \
    if (!lt_error_.empty()) return lt_error_;                   \
  } while (false)

#define H3_RETURN_IF_NOT_EMPTY(expr)    \
  do {                                  \
    std::string error_ = (expr);        \
    if (!error_.empty()) return error_; \
  } while (false)

// The largest power of two (up to 256) dividing the address: the alignment
// the heuristic may assume. A slice of a larger tensor (x + offset) is less
// aligned than cudaMalloc's 256 bytes, and an algorithm chosen for 256 could
// fault on it.
uint32_t AlignmentOf(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  if (address == 0) return kMaxAlignment;
  const uintptr_t lowest_bit = address & (~address + 1);
  return lowest_bit >= kMaxAlignment ? kMaxAlignment
                                     : static_cast<uint32_t>(lowest_bit);
}

cudaDataType_t CudaType(ElementType type) {
  switch (type) {
    case ElementType::kF16:
      return CUDA_R_16F;
    case ElementType::kBF16:
      return CUDA_R_16BF;
    default:  // kF32: Run refuses the other types
      break;
  }
  return CUDA_R_32F;
}

bool HasBias(cublasLtEpilogue_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_BIAS ||
         epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
}

// Everything the descriptors and the chosen algorithm depend on.
struct PlanKey {
  int64_t rows;
  int64_t n;
  int64_t k;
  ElementType type;    // of W and of x as the product reads it
  ElementType d_type;  // of D: kF32 or type; of the bias too when fused
  cublasLtEpilogue_t epilogue;
  uint32_t align_w;
  uint32_t align_x;
  uint32_t align_y;
  uint32_t align_bias;
  auto operator<=>(const PlanKey&) const = default;
};

// The descriptors and algorithm for one key. has_algo is false when the
// heuristic found none (e.g. an epilogue unsupported for these types).
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t w_layout = nullptr;
  cublasLtMatrixLayout_t x_layout = nullptr;
  cublasLtMatrixLayout_t y_layout = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool has_algo = false;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (y_layout != nullptr) Lt().cublasLtMatrixLayoutDestroy(y_layout);
    if (x_layout != nullptr) Lt().cublasLtMatrixLayoutDestroy(x_layout);
    if (w_layout != nullptr) Lt().cublasLtMatrixLayoutDestroy(w_layout);
    if (desc != nullptr) Lt().cublasLtMatmulDescDestroy(desc);
  }
};

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
  DeviceBuffer workspace;
  DeviceBuffer scratch;    // x rounded to W's type, [max_rows_times_k]
  DeviceBuffer scratch_d;  // fp32 D before rounding, [max_rows_times_n]
  std::map<PlanKey, std::unique_ptr<Plan>> plans;

  ~State() {
    plans.clear();
    if (preference != nullptr) Lt().cublasLtMatmulPreferenceDestroy(preference);
    if (handle != nullptr) Lt().cublasLtDestroy(handle);
  }

  std::string BuildPlan(const PlanKey& key, const void* bias, Plan* plan);
  std::string FindPlan(const PlanKey& key, const void* bias, Plan** out);
  // The route of p, x_in the x the product reads (p.x or the scratch).
  std::string Choose(const LinearCudaParams& p, const void* x_in, Route* r);
};

std::string LinearCuda::State::BuildPlan(const PlanKey& key, const void* bias,
                                         Plan* plan) {
  const bool fp32 = key.type == ElementType::kF32;
  const cublasComputeType_t compute = fp32 && options.allow_tf32
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  H3_LT_CALL(cublasLtMatmulDescCreate, &plan->desc, compute, CUDA_R_32F);
  const cublasOperation_t transpose = CUBLAS_OP_T;
  const cublasOperation_t no_transpose = CUBLAS_OP_N;
  H3_LT_CALL(cublasLtMatmulDescSetAttribute, plan->desc,
             CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose));
  H3_LT_CALL(cublasLtMatmulDescSetAttribute, plan->desc,
             CUBLASLT_MATMUL_DESC_TRANSB, &no_transpose, sizeof(no_transpose));
  H3_LT_CALL(cublasLtMatmulDescSetAttribute, plan->desc,
             CUBLASLT_MATMUL_DESC_EPILOGUE, &key.epilogue,
             sizeof(key.epilogue));
  if (HasBias(key.epilogue)) {
    const int32_t bias_type = CudaType(key.d_type);  // D's (see the top)
    H3_LT_CALL(cublasLtMatmulDescSetAttribute, plan->desc,
               CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
               sizeof(bias_type));
    // The heuristic reads the pointer's alignment from here.
    H3_LT_CALL(cublasLtMatmulDescSetAttribute, plan->desc,
               CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  }
  const cudaDataType_t in_type = CudaType(key.type);
  H3_LT_CALL(cublasLtMatrixLayoutCreate, &plan->w_layout, in_type, key.k, key.n,
             key.k);
  H3_LT_CALL(cublasLtMatrixLayoutCreate, &plan->x_layout, in_type, key.k,
             key.rows, key.k);
  H3_LT_CALL(cublasLtMatrixLayoutCreate, &plan->y_layout, CudaType(key.d_type),
             key.n, key.rows, key.n);

  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] =
      {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_w},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_x},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_y},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_y}};
  for (const auto& [attribute, bytes] : alignments) {
    H3_LT_CALL(cublasLtMatmulPreferenceSetAttribute, preference, attribute,
               &bytes, sizeof(bytes));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = Lt().cublasLtMatmulAlgoGetHeuristic(
      handle, plan->desc, plan->w_layout, plan->x_layout, plan->y_layout,
      plan->y_layout, preference, 1, &result, &found);
  // NOT_SUPPORTED: no algorithm for this configuration, which the caller
  // handles like an empty answer.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return "";
  H3_RETURN_IF_NOT_EMPTY(LtError(status, "cublasLtMatmulAlgoGetHeuristic"));
  plan->has_algo = found > 0 && result.state == CUBLAS_STATUS_SUCCESS;
  if (plan->has_algo) plan->algo = result.algo;
  return "";
}

std::string LinearCuda::State::FindPlan(const PlanKey& key, const void* bias,
                                        Plan** out) {
  auto it = plans.find(key);
  if (it == plans.end()) {
    if (plans.size() >= kMaxPlans) plans.clear();
    auto plan = std::make_unique<Plan>();
    H3_RETURN_IF_NOT_EMPTY(BuildPlan(key, bias, plan.get()));
    it = plans.emplace(key, std::move(plan)).first;
  }
  *out = it->second.get();
  return "";
}

std::string LinearCuda::State::Choose(const LinearCudaParams& p,
                                      const void* x_in, Route* r) {
  auto find = [&] {
    const void* d = r->scratch_d ? scratch_d.get() : p.y;
    const bool fused = HasBias(r->epilogue);
    const PlanKey key{p.rows,
                      p.n,
                      p.k,
                      p.w_type,
                      r->d_type,
                      r->epilogue,
                      AlignmentOf(p.w),
                      AlignmentOf(x_in),
                      AlignmentOf(d),
                      fused ? AlignmentOf(p.bias) : kMaxAlignment};
    return FindPlan(key, p.bias, &r->plan);
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
  if (p.rows == 0 || p.n == 0) return "";
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
  if (HasBias(route.epilogue)) {
    // Setting an attribute touches only host memory: safe under capture.
    const void* bias = p.bias;
    H3_LT_CALL(cublasLtMatmulDescSetAttribute, plan->desc,
               CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  }
  const float alpha = 1.0f;
  const float beta = 0.0f;
  H3_LT_CALL(cublasLtMatmul, s.handle, plan->desc, &alpha, p.w, plan->w_layout,
             x_in, plan->x_layout, &beta, d, plan->y_layout, d, plan->y_layout,
             &plan->algo, s.workspace.get(), kWorkspaceBytes, stream);

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

}  // namespace h3::kernels
