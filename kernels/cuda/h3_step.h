#ifndef H3_KERNELS_CUDA_H3_STEP_H_
#define H3_KERNELS_CUDA_H3_STEP_H_

// The H3 decoding step on the GPU: the GPU twin of H3StepCpu (kernels/h3.h).
// One fused pass per step: each sequence's shift ring and diagonal state are
// read once; the diagonal state is written back once and the ring gets its
// one new slot per channel; the layer's inner output is produced from them,
// for a batch of sequences each at its own position.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/launch_order.h"
#include "kernels/h3.h"

namespace h3::kernels {

// Same Params as H3StepCpu; every pointer in device memory, including the
// `states` and `positions` arrays themselves (so a captured graph can serve
// any batch of sequences at any positions: only the arrays' contents change
// between replays). Enqueues on `stream`; returns the launch error, if any.
// A batch of 0 launches nothing.
// Returns cudaErrorInvalidValue for an invalid shape (d_state odd, d_model
// not a multiple of head_dim, a size <= 0), a negative batch or input_stride,
// or a null pointer (positions included), or an io_type other than fp32,
// fp16 and bf16; cudaErrorNotSupported for
// head_dim > 110 (its p + p^2 floats of shared memory pass 48 KiB) and, where
// the general kernel runs (head_dim > 1, or a d_state the head_dim-1
// kernels do not take: N / 4 or N / 2 lanes up to 32), for
// batch * heads >= 2^31.
// REQUIRES: positions[b] >= 0; the batch's states are distinct and overlap
// nothing else (except among rows whose outputs and states nobody reads:
// the runner's padding rows share its one pad state, racing on it, which
// is harmless as every value there is discarded, but a racecheck run will
// name it); out does not overlap q, k, v or a state. States need no
// alignment (16-byte aligned ones are read as vectors). The kernel reads
// each state once, writes the diagonal state once and writes one float of
// each channel's shift ring, slot positions[b] mod N, leaving the other
// N - 1 untouched. Taps that would reach before position 0 are skipped, so
// the contents of the slots of positions not yet reached do not matter.
// With LaunchOrder::kOverlapPrior it reads the layer's parameters before it
// waits for the kernel before (kernels/cuda/launch_order.h).
// `kernel` picks among the head_dim-1 kernels (H3StepKernel).
enum class H3StepKernel {
  // The float4 kernel (N / 4 lanes a channel), else float2 (N / 2), else
  // the general one; with N 64, the float4 kernel's instance that knows its
  // 16 lanes at compile time (ExactShiftStep: the ring's slots found from
  // two source lanes, not slot by slot). At the 1.3B shape (d 2048, N 64,
  // fp16) on an H200 it took 41.5 us a layer at batch 64 and 5.0 us at
  // batch 1, kRuntimeLanes 45.9 and 5.0 (h3_step_bench,
  // bench/results/2026-11-27-h200-0e387a3_step.json). An octet kernel (8
  // ring slots a lane, taps from shared memory), slower in every run
  // (79.7 and 13.1 us there), was removed after that run.
  kAuto,
  // The float4/float2 kernel with its lanes at run time, the path kAuto
  // takes for N other than 64: the same sums in the same order as kAuto,
  // so the same bits; kept for the tests, which hold kAuto to it, and for
  // h3_step_bench, which times the two.
  kRuntimeLanes,
};
// `sequences_per_block`: how many sequences a block of the head_dim-1
// kernels walks (each reads its channels' parameters once for all of them);
// 0, the default, for the rule (about 4096 blocks, at most 16 sequences a
// block: 4 at batch 64 of the 1.3B shape); else that many, or more where
// the grid's y would pass 65535. The same bits either way; for
// h3_step_bench, which times the counts, and the tests. Negative:
// cudaErrorInvalidValue.
cudaError_t H3StepCuda(const H3StepParams& params, cudaStream_t stream,
                       LaunchOrder order = LaunchOrder::kAfterPrior,
                       H3StepKernel kernel = H3StepKernel::kAuto,
                       int sequences_per_block = 0);

// The bytes one call must move through global memory at least, 4 bytes a
// float: per sequence the shift ring read (d N) and its new slots written
// (d), the diagonal state read and written (2 p^2 H M each), q, k, v read
// and out written (4 d); once per call the SSM parameters (shift_kernel
// d N, shift_D d, dA, dB, C 2 H M each, D H). The per-sequence metadata
// (states[b], positions[b]: 24 bytes) is left out. The floor the benchmark
// compares the measured time with.
int64_t H3StepBytes(const H3Shape& shape, int batch);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_H3_STEP_H_
