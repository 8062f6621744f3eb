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
cudaError_t H3StepCuda(const H3StepParams& params, cudaStream_t stream);

// The bytes one call must move through global memory at least: the states
// read and written, the SSM parameters read once, q/k/v read and out
// written. The floor the benchmark compares the measured time with.
int64_t H3StepBytes(const H3Shape& shape, int batch);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_H3_STEP_H_
