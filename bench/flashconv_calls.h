#ifndef H3_BENCH_FLASHCONV_CALLS_H_
#define H3_BENCH_FLASHCONV_CALLS_H_

// The calls h3_flashconv_bench times: a batch Run ("batch"), one RunPacked
// of the batch's sequences as segments ("packed"), the same segments as
// batch-1 Run calls ("singles"), and one RunPacked over the engine's packed
// rows ("rows"); and the untimed copies between the rows and the
// channel-major tensors.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/flashconv_cases.h"
#include "kernels/cuda/h3_prefill.h"

namespace h3::bench {

// The states of one path: [B, d, N] and [B, H, M] complex fp32 (head_dim 1).
struct StateBytes {
  int64_t shift = 0;
  int64_t diag = 0;
};

// The device memory of one path's call.
struct CallMemory {
  const void *q, *k, *v;
  void* out;
  float *shift, *diag;
};

// A new sequence's first chunk (start 0: the states are zero) for every
// sequence of the batch, channel-major [B, d, L].
kernels::H3PrefillCudaParams BatchCall(const Shape& shape, int64_t length,
                                       const CallMemory& m, ElementType type);

// The packed modes' segments: sequence b (start 0) at row b * L, with state
// b. `time` is the tensors' time stride: 1 in [d, B * L] (modes packed and
// singles), 3d in the q|k|v rows (mode rows).
std::vector<kernels::H3PrefillSegment> Segments(const Shape& shape,
                                                int64_t length, int64_t time,
                                                const StateBytes& sb,
                                                const CallMemory& m);

// The packed call of `segments` (which must outlive it) in [d, B * L].
kernels::H3PrefillPackedParams PackedCall(
    const Shape& shape, int64_t length, const CallMemory& m, ElementType type,
    const std::vector<kernels::H3PrefillSegment>& segments);

// The packed call's segments as batch-1 Run calls, in order, on `stream`.
cudaError_t RunSingles(kernels::H3PrefillCuda& op, const Shape& shape,
                       int64_t length, const StateBytes& sb,
                       const CallMemory& m, ElementType type,
                       cudaStream_t stream);

// Mode rows, the engine's packed rows (H3PrefillCuda::RunsRows): q, k, v
// are the columns [0, d), [d, 2d) and [2d, 3d) of the q|k|v rows
// [B * L, 3d] at `qkv_rows`, out the rows [B * L, d].
CallMemory RowsMemory(const Shape& shape, const void* qkv_rows,
                      ElementType type, void* out, float* shift, float* diag);

// The rows call of `segments` (Segments with time 3d; they must outlive it):
// time 3d, channel 1, out_time d.
kernels::H3PrefillPackedParams RowsCall(
    const Shape& shape, const CallMemory& m, ElementType type,
    const std::vector<kernels::H3PrefillSegment>& segments);

// Copies q, k, v from mode `like`'s channel-major layout
// ("batch": [B, d, L]; "packed", "singles": [d, B * L]) into the q|k|v rows
// at `qkv_rows`, so that sequence b's token t holds the values mode `like`
// gives it. Enqueued on `stream`.
cudaError_t FillRows(const Shape& shape, int64_t length,
                     const std::string& like, const void* q, const void* k,
                     const void* v, ElementType type, void* qkv_rows,
                     cudaStream_t stream);

// The inverse for the output: out's rows [B * L, d] at `out_rows` to mode
// `like`'s channel-major layout at `out`. Enqueued on `stream`.
cudaError_t RowsToChannelMajor(const Shape& shape, int64_t length,
                               const std::string& like, const void* out_rows,
                               ElementType type, void* out,
                               cudaStream_t stream);

}  // namespace h3::bench

#endif  // H3_BENCH_FLASHCONV_CALLS_H_
