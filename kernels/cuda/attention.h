#ifndef H3_KERNELS_CUDA_ATTENTION_H_
#define H3_KERNELS_CUDA_ATTENTION_H_

// Attention of the hybrid model's attention layers on the GPU: the GPU twins
// of AttentionCpu and AttentionDecodeCpu (kernels/attention.h), fp32
// arithmetic, rotary included; qkv and out of any io_type (fp32, fp16, bf16;
// another: cudaErrorInvalidValue), each output rounded once at its store.
// The KV cache (KvCache::type) is fp32 or of io_type, so one instance per
// io_type serves both; each new key and value is rounded once where it is
// written.
//
// Prefill: tiled causal attention with an on-chip (online) softmax: the
// score matrix never reaches global memory.
// Decode: one query per sequence over its KV cache, split across the
// sequence into pieces whose partial softmax results are combined by a
// second kernel, so that a long context keeps every SM busy.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/cuda/launch_order.h"

namespace h3::kernels {

// Same Params as AttentionCpu; every pointer in device memory. Writes the new
// tokens' rotated keys and values into the cache and their outputs.
// cudaErrorInvalidValue, before any launch, for a cache type other than kF32
// and io_type.
cudaError_t AttentionPrefillCuda(const AttentionParams& params,
                                 cudaStream_t stream);

// One segment of a packed prefill: `length` new tokens of one sequence at
// positions [start, start + length), whose qkv and out rows are
// [row, row + length) of the packed arrays.
struct AttentionSegmentCall {
  int64_t start = 0;
  int64_t length = 0;
  int64_t row = 0;
  KvCache cache;
};

// Bit for bit what `count` AttentionPrefillCuda calls compute, segment i's
// with qkv and out offset by segs[i].row rows (`segs` in host memory), in two
// launches per kPrefillSegmentsPerLaunch segments. REQUIRES: the segments'
// written cache ranges do not overlap. cudaErrorInvalidValue, before any
// launch, if any segment would be refused by AttentionPrefillCuda or has a
// negative row, or if count < 0.
constexpr int kPrefillSegmentsPerLaunch = 32;
cudaError_t AttentionPrefillPackedCuda(const AttentionShape& shape,
                                       const AttentionSegmentCall* segs,
                                       int count, const void* qkv,
                                       const float* inv_freq, void* out,
                                       ElementType io_type,
                                       cudaStream_t stream);

// The workspace AttentionDecodeCuda needs for `batch` sequences whose
// positions are below `max_positions` (the caches' capacity).
size_t AttentionDecodeWorkspaceBytes(const AttentionShape& shape, int batch,
                                     int64_t max_positions);

// Same Params as AttentionDecodeCpu; every pointer in device memory,
// including the `caches` and `positions` arrays. The split across the
// sequence is chosen from `max_positions`, not from the positions (which the
// host may not know: they live on the device), so one captured graph serves
// every position; pieces past a sequence's position do no work. A sequence
// whose cache type is neither kF32 nor io_type (checked on the device, where
// the caches are) or whose position is outside its cache gets NaNs and its
// cache is left alone.
// InvalidValue if the workspace is smaller than
// AttentionDecodeWorkspaceBytes(shape, batch, max_positions). `order`
// (kernels/cuda/launch_order.h) orders each of its three launches.
cudaError_t AttentionDecodeCuda(const AttentionDecodeParams& params,
                                int64_t max_positions, void* workspace,
                                size_t workspace_bytes, cudaStream_t stream,
                                LaunchOrder order = LaunchOrder::kAfterPrior);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_ATTENTION_H_
