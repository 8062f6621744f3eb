// LinearCuda: y[rows, n] = epilogue(x[rows, k] W^T + bias) by cuBLASLt.
//
// cuBLASLt is column-major. A row-major [r, c] matrix is a column-major
// [c, r] one, so we ask for the transposed product
//   D (n x rows) = op(A) B,  A = W as column-major k x n (lda = k), op = T,
//                            B = x as column-major k x rows (ldb = k),
// with D = y (ldd = n). The bias, one value per output feature, is then one
// per row of D: what CUBLASLT_EPILOGUE_BIAS adds. cuBLASLt takes a bias of
// D's type only (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: fp32 bias
// with 16-bit D is an exception only for fp8 and int8 kernels), so a 16-bit
// y with an epilogue goes through fp32 D in scratch.
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
  ElementType d_type;  // of D: kF32 or type
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

  std::string BuildPlan(const PlanKey& key, const float* bias, Plan* plan);
  std::string FindPlan(const PlanKey& key, const float* bias, Plan** out);
};

std::string LinearCuda::State::BuildPlan(const PlanKey& key, const float* bias,
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
    const int32_t bias_type = CUDA_R_32F;  // the type of D
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

std::string LinearCuda::State::FindPlan(const PlanKey& key, const float* bias,
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

// "" when x_type and y_type are ones Run takes with p.w_type, else why not.
static std::string CheckTypes(const LinearCudaParams& p) {
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
  return "";
}

std::string LinearCuda::Run(const LinearCudaParams& p, cudaStream_t stream) {
  State& s = *state_;
  if (p.rows < 0 || p.n < 0 || p.k < 0) {
    return "LinearCuda: negative size";
  }
  H3_RETURN_IF_NOT_EMPTY(CheckTypes(p));
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

  // For 16-bit weights the product reads x in W's type: rounded into
  // scratch when it is fp32.
  const void* x_in = p.x;
  if (p.w_type != ElementType::kF32 && p.x_type == ElementType::kF32) {
    if (p.rows * p.k > s.options.max_rows_times_k) {
      return "LinearCuda: rows * k = " + std::to_string(p.rows * p.k) +
             " exceeds Options::max_rows_times_k = " +
             std::to_string(s.options.max_rows_times_k) +
             " (the scratch 16-bit weights round x into)";
    }
    H3_RETURN_IF_NOT_EMPTY(
        CudaError(ConvertFromFloat(static_cast<const float*>(p.x), p.rows * p.k,
                                   p.w_type, s.scratch.get(), stream),
                  "ConvertFromFloat"));
    x_in = s.scratch.get();
  }

  // D: y itself, unless y is 16-bit and there is an epilogue (bias, GELU),
  // which runs in fp32 into scratch before the one rounding into y.
  const bool round_d =
      p.y_type != ElementType::kF32 && (p.bias != nullptr || p.gelu);
  void* d = p.y;
  if (round_d) {
    if (p.rows * p.n > s.options.max_rows_times_n) {
      return "LinearCuda: rows * n = " + std::to_string(p.rows * p.n) +
             " exceeds Options::max_rows_times_n = " +
             std::to_string(s.options.max_rows_times_n) +
             " (the fp32 scratch a 16-bit y with a bias or GELU is rounded "
             "from)";
    }
    d = s.scratch_d.get();
  }
  const ElementType d_type = round_d ? ElementType::kF32 : p.y_type;

  const bool fuse = s.options.fused_epilogues && p.bias != nullptr;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (fuse) {
    epilogue = p.gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  }
  PlanKey key{p.rows,
              p.n,
              p.k,
              p.w_type,
              d_type,
              epilogue,
              AlignmentOf(p.w),
              AlignmentOf(x_in),
              AlignmentOf(d),
              fuse ? AlignmentOf(p.bias) : kMaxAlignment};
  Plan* plan = nullptr;
  H3_RETURN_IF_NOT_EMPTY(s.FindPlan(key, p.bias, &plan));
  if (!plan->has_algo && epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    // No algorithm with this epilogue: the plain product and our kernels.
    key.epilogue = epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    key.align_bias = kMaxAlignment;
    H3_RETURN_IF_NOT_EMPTY(s.FindPlan(key, p.bias, &plan));
  }
  if (!plan->has_algo) {
    return "LinearCuda: cuBLASLt has no algorithm for rows=" +
           std::to_string(p.rows) + " n=" + std::to_string(p.n) +
           " k=" + std::to_string(p.k) + " with these types and alignments";
  }
  if (HasBias(epilogue)) {
    // Setting an attribute touches only host memory: safe under capture.
    const float* bias = p.bias;
    H3_LT_CALL(cublasLtMatmulDescSetAttribute, plan->desc,
               CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  }
  const float alpha = 1.0f;
  const float beta = 0.0f;
  H3_LT_CALL(cublasLtMatmul, s.handle, plan->desc, &alpha, p.w, plan->w_layout,
             x_in, plan->x_layout, &beta, d, plan->y_layout, d, plan->y_layout,
             &plan->algo, s.workspace.get(), kWorkspaceBytes, stream);

  // Here D is fp32 whenever bias or GELU are left to do.
  float* d32 = static_cast<float*>(d);
  if (epilogue == CUBLASLT_EPILOGUE_DEFAULT) {
    if (p.gelu) {
      H3_RETURN_IF_NOT_EMPTY(
          CudaError(BiasGeluCuda({d32, p.bias, d32, p.rows, p.n}, stream),
                    "BiasGeluCuda"));
    } else if (p.bias != nullptr) {
      H3_RETURN_IF_NOT_EMPTY(CudaError(
          AddBiasCuda(p.bias, p.rows, p.n, d32, stream), "AddBiasCuda"));
    }
  }
  if (round_d) {
    return CudaError(ConvertFromFloat(d32, p.rows * p.n, p.y_type, p.y, stream),
                     "ConvertFromFloat");
  }
  return "";
}

}  // namespace h3::kernels
