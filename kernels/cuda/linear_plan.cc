// LinearCuda's cuBLASLt plans (linear_plan.h).
#include "kernels/cuda/linear_plan.h"

#include <algorithm>
#include <utility>

namespace h3::kernels::linear_plan {

const CublasLtApi& Lt() {
  std::string ignored;
  return *LoadCublasLt(&ignored);
}

std::string LtError(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return "";
  return std::string(call) + " failed: " + Lt().cublasLtGetStatusName(status) +
         " (" + Lt().cublasLtGetStatusString(status) + ")";
}

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

std::vector<int32_t> SplitsFor(int64_t k, int32_t current) {
  std::vector<int32_t> splits;
  for (const int32_t s : PlanCache::kSplits) {
    if (s != current && k / s >= PlanCache::kMinSplitK) splits.push_back(s);
  }
  return splits;
}

std::vector<cublasLtReductionScheme_t> SplitSchemes(uint32_t mask) {
  std::vector<cublasLtReductionScheme_t> schemes;
  for (const cublasLtReductionScheme_t scheme :
       {CUBLASLT_REDUCTION_SCHEME_INPLACE,
        CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE}) {
    if ((mask & scheme) != 0) schemes.push_back(scheme);
  }
  if (schemes.empty() && (mask & CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE) != 0) {
    schemes.push_back(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE);
  }
  return schemes;
}

std::string DescribeAlgo(const cublasLtMatmulAlgo_t& algo) {
  // Each attribute's size as cuBLASLt declares it; -1 where it will not say.
  const auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attribute,
                       auto value) -> int64_t {
    size_t written = 0;
    if (Lt().cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value,
                                                  sizeof(value), &written) !=
        CUBLAS_STATUS_SUCCESS) {
      return -1;
    }
    return static_cast<int64_t>(value);
  };
  return "id " + std::to_string(get(CUBLASLT_ALGO_CONFIG_ID, int32_t{0})) +
         " tile " +
         std::to_string(get(CUBLASLT_ALGO_CONFIG_TILE_ID, uint32_t{0})) +
         " stages " +
         std::to_string(get(CUBLASLT_ALGO_CONFIG_STAGES_ID, uint32_t{0})) +
         " splits " +
         std::to_string(get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, int32_t{0})) +
         " scheme " +
         std::to_string(
             get(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, uint32_t{0})) +
         " cluster " +
         std::to_string(
             get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, uint16_t{0}));
}

// The key's pointer alignments, which the heuristic may assume.
static std::string SetAlignments(const PlanKey& key,
                                 cublasLtMatmulPreference_t preference) {
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] =
      {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_w},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_x},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_y},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_y}};
  for (const auto& [attribute, bytes] : alignments) {
    H3_LT_CALL(cublasLtMatmulPreferenceSetAttribute, preference, attribute,
               &bytes, sizeof(bytes));
  }
  return "";
}

// A matrix layout destroyed with its scope.
struct Layout {
  cublasLtMatrixLayout_t layout = nullptr;
  ~Layout() {
    if (layout != nullptr) Lt().cublasLtMatrixLayoutDestroy(layout);
  }
};

std::string PlanCache::Pinned(const PlanKey& key, Plan* plan) {
  PlanKey shape = key;
  shape.rows = 0;
  auto it = pinned_.find(shape);
  if (it == pinned_.end()) {
    // The descriptor is the key's; only the row count differs.
    Layout x, y;
    H3_LT_CALL(cublasLtMatrixLayoutCreate, &x.layout, CudaType(key.type), key.k,
               kPinnedRows, key.k);
    H3_LT_CALL(cublasLtMatrixLayoutCreate, &y.layout, CudaType(key.d_type),
               key.n, kPinnedRows, key.n);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = Lt().cublasLtMatmulAlgoGetHeuristic(
        handle_, plan->desc, plan->w_layout, x.layout, y.layout, y.layout,
        pinned_preference_, 1, &result, &found);
    if (status != CUBLAS_STATUS_NOT_SUPPORTED) {
      H3_RETURN_IF_NOT_EMPTY(LtError(status, "cublasLtMatmulAlgoGetHeuristic"));
    }
    std::optional<cublasLtMatmulAlgo_t> algo;
    if (status == CUBLAS_STATUS_SUCCESS && found > 0 &&
        result.state == CUBLAS_STATUS_SUCCESS) {
      algo = result.algo;
    }
    it = pinned_.emplace(shape, algo).first;
  }
  plan->has_algo = it->second.has_value();
  if (!plan->has_algo) return "";
  plan->algo = *it->second;
  cublasLtMatmulHeuristicResult_t check{};
  const cublasStatus_t status = Lt().cublasLtMatmulAlgoCheck(
      handle_, plan->desc, plan->w_layout, plan->x_layout, plan->y_layout,
      plan->y_layout, &plan->algo, &check);
  plan->fits = status == CUBLAS_STATUS_SUCCESS &&
               check.state == CUBLAS_STATUS_SUCCESS && check.workspaceSize == 0;
  return "";
}

std::string PlanCache::Build(const PlanKey& key, const void* bias, Plan* plan) {
  const bool fp32 = key.type == ElementType::kF32;
  const cublasComputeType_t compute =
      fp32 && allow_tf32_ ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
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

  H3_RETURN_IF_NOT_EMPTY(
      SetAlignments(key, key.pinned ? pinned_preference_ : preference_));
  if (key.pinned) return Pinned(key, plan);
  const int wanted = key.rows <= tune_rows_ ? kTuneCandidates : 1;
  cublasLtMatmulHeuristicResult_t results[kTuneCandidates] = {};
  int found = 0;
  const cublasStatus_t status = Lt().cublasLtMatmulAlgoGetHeuristic(
      handle_, plan->desc, plan->w_layout, plan->x_layout, plan->y_layout,
      plan->y_layout, preference_, wanted, results, &found);
  // NOT_SUPPORTED: no algorithm for this configuration, which the caller
  // handles like an empty answer.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return "";
  H3_RETURN_IF_NOT_EMPTY(LtError(status, "cublasLtMatmulAlgoGetHeuristic"));
  for (int i = 0; i < found; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) {
      plan->candidates.push_back(results[i].algo);
    }
  }
  plan->has_algo = !plan->candidates.empty();
  if (plan->has_algo) plan->algo = plan->candidates.front();
  if (wanted > 1) H3_RETURN_IF_NOT_EMPTY(AddSplits(key, plan));
  if (plan->candidates.size() < 2) plan->candidates.clear();  // nothing to time
  return "";
}

std::string PlanCache::AddSplits(const PlanKey& key, Plan* plan) {
  // For products of few output tiles at a decode step's few rows, where
  // the heuristic's answers leave multiprocessors idle. On an H200 they won
  // only where the heuristic's own answer already split k
  // (docs/cuda-engine.md, "Tuned cuBLASLt algorithms").
  const size_t sources =
      std::min(plan->candidates.size(), static_cast<size_t>(kSplitSources));
  for (size_t i = 0; i < sources; ++i) {
    const cublasLtMatmulAlgo_t source = plan->candidates[i];
    int32_t supported = 0;
    uint32_t mask = 0;
    int32_t current = 1;
    size_t written = 0;
    if (Lt().cublasLtMatmulAlgoCapGetAttribute(
            &source, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &supported,
            sizeof(supported), &written) != CUBLAS_STATUS_SUCCESS ||
        supported == 0 ||
        Lt().cublasLtMatmulAlgoCapGetAttribute(
            &source, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &mask,
            sizeof(mask), &written) != CUBLAS_STATUS_SUCCESS ||
        Lt().cublasLtMatmulAlgoConfigGetAttribute(
            &source, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &current, sizeof(current),
            &written) != CUBLAS_STATUS_SUCCESS) {
      continue;
    }
    for (const uint32_t scheme : SplitSchemes(mask)) {
      for (const int32_t splits : SplitsFor(key.k, current)) {
        cublasLtMatmulAlgo_t algo = source;
        if (Lt().cublasLtMatmulAlgoConfigSetAttribute(
                &algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                sizeof(splits)) != CUBLAS_STATUS_SUCCESS ||
            Lt().cublasLtMatmulAlgoConfigSetAttribute(
                &algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                sizeof(scheme)) != CUBLAS_STATUS_SUCCESS) {
          continue;
        }
        cublasLtMatmulHeuristicResult_t check{};
        const cublasStatus_t status = Lt().cublasLtMatmulAlgoCheck(
            handle_, plan->desc, plan->w_layout, plan->x_layout, plan->y_layout,
            plan->y_layout, &algo, &check);
        if (status == CUBLAS_STATUS_SUCCESS &&
            check.state == CUBLAS_STATUS_SUCCESS &&
            check.workspaceSize <= workspace_bytes_) {
          plan->candidates.push_back(algo);
          ++plan->split_candidates;
        }
      }
    }
  }
  return "";
}

void PlanCache::Evict() {
  // Tuned plans (every key of up to tune_rows_ rows: a decode step's few
  // row counts, and small prompt chunks) cost a timing each to rebuild; the
  // others (prefill's many row counts) a heuristic query.
  for (auto it = plans_.begin(); it != plans_.end();) {
    if (it->first.rows > tune_rows_ || it->first.pinned) {
      it = plans_.erase(it);
    } else {
      ++it;
    }
  }
  if (plans_.size() >= kMaxPlans) plans_.clear();
}

std::string PlanCache::Find(const PlanKey& key, const void* bias, Plan** out) {
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    if (plans_.size() >= kMaxPlans) Evict();
    auto plan = std::make_unique<Plan>();
    H3_RETURN_IF_NOT_EMPTY(Build(key, bias, plan.get()));
    it = plans_.emplace(key, std::move(plan)).first;
  }
  *out = it->second.get();
  return "";
}

}  // namespace h3::kernels::linear_plan
