#ifndef H3_KERNELS_CUDA_LINEAR_H_
#define H3_KERNELS_CUDA_LINEAR_H_

// The model's matrix products on the GPU, by cuBLASLt, with the bias and the
// GELU (tanh approximation) fused into the product's epilogue.
//
//   y[rows, n] = epilogue(x[rows, k] W^T + bias),  W [n, k] row-major
//
// W is fp32, fp16 or bf16; x and y are fp32 or W's type (x_type, y_type);
// the bias is fp32 or, with a 16-bit y, y's type (bias_type). For 16-bit
// weights the product reads x in W's type (fp32 x is first rounded into
// scratch the object owns; 16-bit x is read as it is) and accumulates in
// fp32. A 16-bit y is the fp32 result of the epilogue rounded once to
// nearest even: y = round(epilogue(acc + float(bias))), a 16-bit bias
// widened exactly. cuBLASLt takes a bias of D's type only, so the routes are:
//   - no bias and no GELU: cuBLASLt writes y (D of y_type) itself;
//   - bias of y's type (fp32 y, or 16-bit y with a 16-bit bias): the fused
//     BIAS / GELU_BIAS epilogue writes y itself;
//   - 16-bit y with an fp32 bias: the fused epilogue writes fp32 D into
//     scratch and one kernel rounds it into y;
//   - no fused epilogue (Options::fused_epilogues false, GELU without bias,
//     or no cuBLASLt algorithm with the epilogue for a shape): the product
//     writes fp32 D (into scratch when y is 16-bit) and one bias (+ GELU)
//     kernel writes y from it.
// fp32 weights use fp32 arithmetic throughout (no TF32) unless
// Options::allow_tf32.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/element_type.h"

namespace h3::kernels {

struct LinearCudaParams {
  const void* x = nullptr;                 // [rows, k] of x_type
  ElementType x_type = ElementType::kF32;  // kF32 or w_type
  const void* w = nullptr;                 // [n, k] of w_type
  ElementType w_type = ElementType::kF32;
  const void* bias = nullptr;  // [n] of bias_type, or null
  // kF32, or y_type when y_type is 16-bit.
  ElementType bias_type = ElementType::kF32;
  void* y = nullptr;  // [rows, n] of y_type; must not alias x
  ElementType y_type = ElementType::kF32;  // kF32 or w_type
  int64_t rows = 0;
  int64_t n = 0;
  int64_t k = 0;
  bool gelu = false;  // y = GELU_tanh(x W^T + bias)
};

class LinearCuda {
 public:
  struct Options {
    // The largest rows * k a call may have with 16-bit weights and fp32 x
    // (the scratch x is rounded into). Calls beyond it fail with a message
    // saying so.
    int64_t max_rows_times_k = 0;
    bool allow_tf32 = false;
    // false: the product alone by cuBLASLt, then bias (+ GELU) by our own
    // kernel (BiasGeluCuda). For comparing, and where an epilogue is missing.
    bool fused_epilogues = true;
    // The largest rows * n of a call whose fp32 D goes through scratch (a
    // 16-bit y with an fp32 bias, or with an epilogue that is not fused:
    // ScratchDElements says). Calls beyond it fail with a message saying
    // so.
    int64_t max_rows_times_n = 0;
    // Batch invariance on tensor cores: each (n, k, types, epilogue,
    // alignments, told up to 16 bytes) gets ONE cuBLASLt algorithm, chosen
    // for kPinnedRows (64) rows among those that need no workspace and no
    // reduction scheme (no split-K, no stream-K), and every row count runs on
    // it. Such an algorithm reduces each output over k in an order its tile
    // fixes, so a row's result is bitwise the same whatever the other rows
    // (kernels/cuda/linear_pinned_test.cc checks it; it passed on an H200).
    // The route (fused epilogue or not) never depends on the rows
    // either; a row count the pinned algorithm does not take fails with a
    // message instead of falling back to another algorithm.
    bool pinned_algorithms = false;
    // Products of up to kTuneRows rows (decode steps), not pinned: the
    // first uncaptured call of each plan times the cuBLASLt heuristic's
    // first answers (up to 16) and the first four's variants with k split 2
    // to 16 ways that cuBLASLt accepts, on the call's own operands, the L2
    // cache flushed before each timed call as a decode step finds it, and
    // keeps the fastest (median of 5 calls each); every later call of the
    // plan runs it. A call under graph capture leaves the plan untimed (on
    // the heuristic's first) until an uncaptured one. Off: the heuristic's
    // first, always. Tuning stalls that first call for the timed calls and a
    // synchronisation, and which algorithm wins may vary between processes
    // (the timings are noisy), and with it the last bits of a product.
    bool tune_algorithms = false;
  };

  // The most rows a tuned product has (Options::tune_algorithms).
  static constexpr int64_t kTuneRows = 64;

  // What tuning did so far.
  struct TuneStats {
    int timed = 0;    // plans timed
    int changed = 0;  // of those, kept another than the heuristic's first
    int split_candidates = 0;  // split-K variants timed, over all plans
    int split_kept = 0;        // plans that kept a split-K variant
    // The last timed plan's candidates in order: cuBLASLt's configuration
    // of each ("id I tile T stages S splits K scheme R cluster C") and its
    // median ms (-1: refused), and the index of the one kept.
    std::vector<std::pair<std::string, float>> last_timings;
    int last_kept = -1;
  };
  TuneStats tune_stats() const;

  // Makes the cuBLASLt handle, its workspace and the scratch on the current
  // device. Returns "" on success, otherwise a message naming the failed
  // call and its error.
  static std::string Create(const Options& options,
                            std::unique_ptr<LinearCuda>* out);
  ~LinearCuda();

  // Enqueues one product on `stream`. Returns "" or the error, in words.
  // Allocates nothing, so it may be captured into a CUDA graph (after a
  // first, uncaptured call of the same shape has chosen the algorithm).
  // Not thread-safe, and the workspace and scratch are shared: products on
  // different streams must not run at the same time. Without an epilogue
  // algorithm for a shape (or with no bias), bias and GELU run as a second
  // kernel after the product.
  std::string Run(const LinearCudaParams& params, cudaStream_t stream);

  // How many elements of the fp32 D scratch Run(params) needs: rows * n when
  // its route (above) goes through scratch, else 0. Chooses (and keeps) the
  // algorithm Run will use; enqueues nothing. Returns "" or Run's error for
  // invalid params.
  std::string ScratchDElements(const LinearCudaParams& params,
                               int64_t* elements);

  LinearCuda(const LinearCuda&) = delete;
  LinearCuda& operator=(const LinearCuda&) = delete;

 private:
  struct State;
  explicit LinearCuda(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_LINEAR_H_
