#ifndef H3_KERNELS_CUDA_H3_STEP_H_
#define H3_KERNELS_CUDA_H3_STEP_H_

// The H3 decoding step on the GPU: the GPU twin of H3StepCpu (kernels/h3.h).
// One fused pass per step: each sequence's shift state and diagonal state are
// read once, updated, written once, and the layer's inner output is produced
// from them, for a batch of sequences each at its own position.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/h3.h"

namespace h3::kernels {

// Same Params as H3StepCpu; every pointer in device memory, including the
// `states` array itself (so a captured graph can serve any batch of
// sequences: only the array's contents change between replays). Enqueues on
// `stream`; returns the launch error, if any. A batch of 0 launches nothing.
// Returns cudaErrorInvalidValue for an invalid shape (d_state odd, d_model
// not a multiple of head_dim, a size <= 0), a negative batch or input_stride,
// or a null pointer; cudaErrorNotSupported for head_dim > 110 (its p + p^2
// floats of shared memory pass 48 KiB) and, where the general kernel runs
// (head_dim > 1, or d_state above 128, or above 64 when not a multiple of
// 4), for batch * heads >= 2^31.
// REQUIRES: the batch's states are distinct and overlap nothing else; out
// does not overlap q, k, v or a state. States need no alignment (16-byte
// aligned ones are read as vectors); the kernel reads each state once and
// writes it once.
cudaError_t H3StepCuda(const H3StepParams& params, cudaStream_t stream);

// The bytes one call must move through global memory at least: the states
// read and written, the SSM parameters read once, q/k/v read and out
// written. The floor the benchmark compares the measured time with.
int64_t H3StepBytes(const H3Shape& shape, int batch);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_H3_STEP_H_
