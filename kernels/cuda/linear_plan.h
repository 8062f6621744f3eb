#ifndef H3_KERNELS_CUDA_LINEAR_PLAN_H_
#define H3_KERNELS_CUDA_LINEAR_PLAN_H_

// LinearCuda's cuBLASLt plans (linear.cc): the descriptors and the algorithm
// the heuristic chose for one (shape, types, epilogue, alignments) key, in a
// bounded cache, and the small helpers both files use. Internal to
// LinearCuda.

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/element_type.h"
#include "kernels/cuda/cublaslt_api.h"
#include "kernels/cuda/cuda_error.h"  // H3_RETURN_IF_NOT_EMPTY

namespace h3::kernels::linear_plan {

// cuBLASLt's entry points; LinearCuda::Create has loaded them before any
// other function here runs.
const CublasLtApi& Lt();

std::string LtError(cublasStatus_t status, const char* call);

// Calls the cuBLASLt function `fn` and returns its error, named, if any.
#define H3_LT_CALL(fn, ...)                                     \
  do {                                                          \
    std::string lt_error_ = LtError(Lt().fn(__VA_ARGS__), #fn); \
    if (!lt_error_.empty()) return lt_error_;                   \
  } while (false)

// The largest pointer alignment cuBLASLt asks about (its default minimum).
constexpr uint32_t kMaxAlignment = 256;

// The largest power of two (up to 256) dividing the address: the alignment
// the heuristic may assume. A slice of a larger tensor (x + offset) is less
// aligned than cudaMalloc's 256 bytes, and an algorithm chosen for 256 could
// fault on it.
uint32_t AlignmentOf(const void* p);

cudaDataType_t CudaType(ElementType type);

bool HasBias(cublasLtEpilogue_t epilogue);

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
  // LinearCuda::Options::pinned_algorithms: the algorithm is chosen without
  // looking at `rows` (PlanCache::Pinned).
  bool pinned;
  auto operator<=>(const PlanKey&) const = default;
};

// The row count a pinned algorithm is chosen for: the most rows of a decode
// step (64 slots). Prefill rows run on it too.
constexpr int64_t kPinnedRows = 64;
// The pointer alignment pinned plans assume at most (16 bytes: a vector
// load, and what Hopper's tensor copies need).
constexpr uint32_t kPinnedAlignment = 16;

// The split counts a tuned plan of `k` tries besides an answer's own
// `current` (ascending): PlanCache::kSplits with at least kMinSplitK
// elements a split.
std::vector<int32_t> SplitsFor(int64_t k, int32_t current);

// The reduction schemes split-K variants ask for, of those in `mask`
// (CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK): in place (no second kernel)
// and fp32 partials in the workspace (a reduction kernel after); partials
// of the output type only where neither is offered.
std::vector<cublasLtReductionScheme_t> SplitSchemes(uint32_t mask);

// An algorithm's configuration, for reports: "id I tile T stages S splits
// K scheme R cluster C" (cuBLASLt's enum values).
std::string DescribeAlgo(const cublasLtMatmulAlgo_t& algo);

// The descriptors and algorithm for one key. has_algo is false when the
// heuristic found none (e.g. an epilogue unsupported for these types).
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t w_layout = nullptr;
  cublasLtMatrixLayout_t x_layout = nullptr;
  cublasLtMatrixLayout_t y_layout = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool has_algo = false;
  // Pinned plans: has_algo says whether the key's shape has a pinned
  // algorithm at all (whatever the rows, so that the route never depends on
  // them); fits, whether cublasLtMatmulAlgoCheck accepts it for key.rows.
  bool fits = true;
  // Tuned plans (PlanCache's tune_rows): the heuristic's answers in its
  // order, algo the first, then split-K variants of its first answers
  // (PlanCache::AddSplits), until LinearCuda times them on the plan's first
  // uncaptured call and keeps the fastest in algo; then empty.
  std::vector<cublasLtMatmulAlgo_t> candidates;
  // Of candidates, the split-K variants (at its end).
  int split_candidates = 0;

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

// Plans by key, built on first use. Holds at most kMaxPlans: prefill row
// counts vary with the prompt, so the map would otherwise grow without
// bound; when full the plans that are not tuned are dropped (a heuristic
// query costs microseconds of host time, no device memory), and all of
// them if the tuned ones alone fill it.
class PlanCache {
 public:
  static constexpr size_t kMaxPlans = 256;

  // The heuristic's answers a tuned plan keeps as candidates.
  static constexpr int kTuneCandidates = 16;
  // Of those, the first ones that also get split-K variants, and the
  // splits tried (SplitsFor), each with every scheme of SplitSchemes.
  static constexpr int kSplitSources = 4;
  static constexpr int32_t kSplits[] = {2, 3, 4, 6, 8, 12, 16};
  // The fewest k elements a split may take.
  static constexpr int64_t kMinSplitK = 256;

  // handle and the preferences (which hold the workspace limits) are the
  // caller's and must outlive the cache. pinned_preference: no workspace and
  // no reduction scheme, so no split-K or stream-K algorithm. tune_rows:
  // plans of keys of up to this many rows (not pinned) keep the heuristic's
  // first kTuneCandidates answers and their split-K variants that need at
  // most workspace_bytes as Plan::candidates; 0, none.
  PlanCache(cublasLtHandle_t handle, cublasLtMatmulPreference_t preference,
            cublasLtMatmulPreference_t pinned_preference, bool allow_tf32,
            int64_t tune_rows = 0, size_t workspace_bytes = 0)
      : handle_(handle),
        preference_(preference),
        pinned_preference_(pinned_preference),
        allow_tf32_(allow_tf32),
        tune_rows_(tune_rows),
        workspace_bytes_(workspace_bytes) {}

  // The plan of `key`; `bias` (its alignment) is read when the key's
  // epilogue has one. *out stays valid until the next Find.
  std::string Find(const PlanKey& key, const void* bias, Plan** out);
  void Clear() { plans_.clear(); }

 private:
  std::string Build(const PlanKey& key, const void* bias, Plan* plan);
  // A pinned key's algorithm: the heuristic's first answer for kPinnedRows
  // rows under pinned_preference_, kept per key with rows 0 (so every row
  // count gets the same one, even after plans_ is emptied), then checked
  // for key.rows.
  std::string Pinned(const PlanKey& key, Plan* plan);
  // Makes room when plans_ holds kMaxPlans (see the class comment).
  void Evict();
  // Appends to plan->candidates the split-K variants of its first
  // kSplitSources answers that cuBLASLt accepts for `key`.
  std::string AddSplits(const PlanKey& key, Plan* plan);

  cublasLtHandle_t handle_;
  cublasLtMatmulPreference_t preference_;
  cublasLtMatmulPreference_t pinned_preference_;
  bool allow_tf32_;
  int64_t tune_rows_;
  size_t workspace_bytes_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
  // By key with rows 0; nullopt: the heuristic had none.
  std::map<PlanKey, std::optional<cublasLtMatmulAlgo_t>> pinned_;
};

}  // namespace h3::kernels::linear_plan

#endif  // H3_KERNELS_CUDA_LINEAR_PLAN_H_
