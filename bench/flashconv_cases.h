#ifndef H3_BENCH_FLASHCONV_CASES_H_
#define H3_BENCH_FLASHCONV_CASES_H_

// The measurements of h3_flashconv_bench: one random H3 layer per shape, each
// (element type, length) case timed on the requested paths of
// H3PrefillCuda, interleaved call by call on one stream.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/flashconv_device.h"
#include "kernels/cuda/h3_prefill.h"

namespace h3::bench {

// "fp32", "fp16", "bf16".
const char* TypeName(ElementType type);
std::optional<ElementType> ParseType(const std::string& name);
using h3::ElementSize;

// A batch of sequences through one layer of `heads` channels (d_model = H,
// head_dim 1).
struct Shape {
  int batch = 0;
  int heads = 0;
};
// "64x768" -> {64, 768}; nullopt unless both are positive integers.
std::optional<Shape> ParseShape(const std::string& text);

struct CaseOptions {
  int d_state = 64;
  std::vector<int64_t> lengths;  // ascending
  std::vector<ElementType> types;
  std::vector<kernels::H3PrefillPath> paths;  // the Options.prefer of each
  int warmup = 3;                // untimed calls per path and case, >= 1
  double min_time_ms = 200;      // timed calls per path: at least this long...
  int min_reps = 5;              // ...and at least this many...
  int max_reps = 10000;          // ...but at most this many
  double memory_fraction = 0.6;  // of the free memory, for our tensors
  // Bytes written (cudaMemsetAsync, not timed) before each call to evict the
  // L2 cache, so that the call reads its inputs and states from HBM as the
  // floor assumes; 0 leaves the cache as the previous call left it.
  int64_t l2_flush_bytes = 0;
  uint64_t seed = 1;
  // Time each path in two modes instead of one batch call: "packed", the
  // batch as one H3PrefillCuda::RunPacked call of `batch` segments, and
  // "singles", the same segments as `batch` batch-1 Run calls. Both read the
  // packed step's layout [d, batch * L] (segment b at row b * L, channel
  // stride batch * L), as the engine passes its prefill rows.
  bool packed = false;
  // Add mode "rows" after the others: the batch as one RunPacked call of
  // `batch` segments over the engine's packed rows (q, k, v the columns
  // [0, d), [d, 2d), [2d, 3d) of [batch * L, 3d], out [batch * L, d];
  // segment b at row b * L), built untimed from the first mode's q, k, v so
  // that it reads the same values. Only a layer that takes such calls
  // (H3PrefillCuda::RunsRows: the chunked path) runs it; the others skip it.
  bool rows = false;
};

// One path of one case.
struct PathResult {
  kernels::H3PrefillPath path = kernels::H3PrefillPath::kFused;  // requested
  std::string path_taken;      // what H3PrefillCuda chose for the layer
  std::string reason;          // and why, in its words
  std::string mode = "batch";  // "batch", "packed", "singles" or "rows"
  // Mode packed: its guard call's output against the same path's singles
  // call (the same segments one by one), which it should equal bit for bit.
  std::optional<MaxDiff> vs_singles;
  // A path other than cuFFT, in the first mode, and any path in mode rows:
  // its guard call against cuFFT's in the first mode (outputs, shift and
  // diagonal end states), when both ran. Mode rows' output is transposed
  // back to the first mode's layout for it.
  std::optional<MaxDiff> out_vs_cufft, shift_vs_cufft, diag_vs_cufft;
  std::string skipped;     // non-empty: not measured, and why
  std::vector<double> ms;  // every timed call, in the order run
};

struct CaseResult {
  Shape shape;
  int d_state = 0;
  int64_t length = 0;
  ElementType type = ElementType::kF16;
  std::vector<PathResult> paths;  // in CaseOptions::paths order
};

// Measures every (type, length) case of `shape`, types outermost, and frees
// everything it allocated. A case whose tensors do not fit, or that an
// implementation declines (cudaErrorNotSupported, cudaErrorMemoryAllocation),
// is recorded as skipped with the reason; any other CUDA failure exits
// (H3_BENCH_CUDA_CHECK). Progress goes to stderr.
std::vector<CaseResult> MeasureShape(const Shape& shape,
                                     const CaseOptions& options,
                                     cudaStream_t stream);

}  // namespace h3::bench

#endif  // H3_BENCH_FLASHCONV_CASES_H_
