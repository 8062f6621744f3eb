#ifndef H3_BENCH_FLASHCONV_CALLS_H_
#define H3_BENCH_FLASHCONV_CALLS_H_

// The calls h3_flashconv_bench times: a batch Run ("batch"), one RunPacked
// of the batch's sequences as segments ("packed"), and the same segments as
// batch-1 Run calls ("singles").

#include <cuda_runtime_api.h>

#include <cstdint>
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

// The packed modes' segments: sequence b (start 0) at row b * L of
// [d, B * L], with state b.
std::vector<kernels::H3PrefillSegment> Segments(const Shape& shape,
                                                int64_t length,
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

}  // namespace h3::bench

#endif  // H3_BENCH_FLASHCONV_CALLS_H_
