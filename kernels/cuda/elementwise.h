#ifndef H3_KERNELS_CUDA_ELEMENTWISE_H_
#define H3_KERNELS_CUDA_ELEMENTWISE_H_

// The model's small GPU kernels around the matrix products. Each enqueues on
// `stream` and returns the launch error, if any; empty tensors launch
// nothing. Every pointer is device memory.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/element_type.h"
#include "kernels/cuda/launch_order.h"
#include "kernels/layer_norm.h"

namespace h3::kernels {

// The GPU twin of AddLayerNormCpu: same Params. cudaErrorInvalidValue for
// an out_type other than kF32, kF16 and kBF16, or a 16-bit out aliasing x.
// With LaunchOrder::kOverlapPrior it reads gamma and beta before it waits
// for the kernel before (kernels/cuda/launch_order.h).
cudaError_t AddLayerNormCuda(const AddLayerNormParams& params,
                             cudaStream_t stream,
                             LaunchOrder order = LaunchOrder::kAfterPrior);

// out[i][:] = table[ids[i]][:] as fp32, for i < n; `table` [rows, cols] of
// `type`. ids (device memory) must be in [0, rows): the caller checks them.
cudaError_t EmbeddingCuda(const int32_t* ids, int64_t n, const void* table,
                          ElementType type, int64_t cols, float* out,
                          cudaStream_t stream);

// out[c][r] = in[r * in_stride + c] for r < rows, c < cols: a token-major
// block [rows, cols] (row stride in_stride >= cols) to channel-major
// [cols, rows]. And back: out[r * out_stride + c] = in[c][r]. in and out hold
// elements of `type` (kF32, kF16 or kBF16; others: cudaErrorInvalidValue),
// moved unchanged.
cudaError_t TransposeToChannelMajor(const void* in, int64_t rows, int64_t cols,
                                    int64_t in_stride, ElementType type,
                                    void* out, cudaStream_t stream);
cudaError_t TransposeToTokenMajor(const void* in, int64_t rows, int64_t cols,
                                  ElementType type, void* out,
                                  int64_t out_stride, cudaStream_t stream);

// out[i] = in[i] rounded to `type` (to nearest even), for i < n; `out` holds
// n elements of `type`. For fp32 a copy.
cudaError_t ConvertFromFloat(const float* in, int64_t n, ElementType type,
                             void* out, cudaStream_t stream);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_ELEMENTWISE_H_
