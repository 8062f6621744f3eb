// StreamGemmCuda: the algorithm of kernels/stream_gemm.h.
//
// A block owns 16 output columns and all rows; its 8 warps take the k steps
// in turn (warp w: steps w, w + 8, ...), so at any moment the block reads
// 8 x 128 contiguous bytes of each of its 16 W rows. Each warp keeps its
// next `stages` steps of W in flight by cp.async into shared memory (2 KiB
// a step, past L1), asking for the first ones before it waits for the
// kernel before (which writes x: with LaunchOrder::kOverlapPrior the
// weights stream while that kernel finishes), and refilling a step's stage
// as soon as its MMAs have its values. x's rows go into shared memory once
// a block after that wait (rounded to W's type there when fp32) where they
// fit (StreamStagePlanFor; up to 8 rows), else a lane loads its x vectors of a
// step from global memory (through L1/L2: every block reads x) as the step
// starts. After the loop the warps' accumulators meet in shared memory and warp
// 0 sums them in warp order, adds the bias, applies GELU and stores y.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/mma_half.cuh"
#include "kernels/cuda/shared_memory.cuh"
#include "kernels/cuda/stream_gemm.h"
#include "kernels/cuda/stream_gemm_device.cuh"

namespace h3::kernels {
namespace {

using stream_gemm::kThreads;
using stream_gemm::LoadX;

// x's rows into shared memory `xs` as W's type, k + kStreamRowPad elements
// apart, by the whole block.
template <typename T, typename X>
__device__ __forceinline__ void StageX(const StreamGemmParams& p, T* xs) {
  const int64_t vectors = p.k / 8;  // of 8 elements a row
  const X* x = static_cast<const X*>(p.x);
  for (int64_t i = threadIdx.x; i < p.rows * vectors; i += kThreads) {
    const int64_t row = i / vectors, e = i % vectors * 8;
    *reinterpret_cast<uint4*>(xs + row * (p.k + kStreamRowPad) + e) =
        LoadX<T>(x + row * p.k, e);
  }
  __syncthreads();
}

// T: W's type; X: x's (float or T); kTiles: tiles of 8 x rows; kSharedX:
// x's rows in shared memory after the stages. Dynamic shared memory:
// `stages` x kStreamStageBytes of W, then (kSharedX) x's rows.
template <typename T, typename X, int kTiles, bool kSharedX>
__global__ void __launch_bounds__(kThreads)
    StreamGemmKernel(StreamGemmParams p, int64_t steps, int stages) {
  __shared__ float partial[kStreamWarps - 1][kTiles][4][32];
  H3_DYNAMIC_SHARED(uint4, shared, 16);
  const int g = threadIdx.x % 32 / 4;
  LetNextKernelStart();
  stream_gemm::CopyFirstSteps<T>(p, steps, stages, shared);
  WaitForPriorKernel();  // x is the kernel before's output
  if constexpr (kSharedX) {
    T* const xs =
        reinterpret_cast<T*>(shared + int64_t{stages} * kStreamStageBytes / 16);
    StageX<T, X>(p, xs);
    stream_gemm::StreamSteps<T, kTiles>(
        p, steps, stages, shared,
        [&](int r, int64_t e) {
          const int64_t row = kStreamRowTile * r + g;
          return row < p.rows ? *reinterpret_cast<const uint4*>(
                                    xs + row * (p.k + kStreamRowPad) + e)
                              : make_uint4(0, 0, 0, 0);
        },
        partial);
  } else {
    const X* x_row[kTiles];
    stream_gemm::XRows(p, g, x_row);
    stream_gemm::StreamSteps<T, kTiles>(
        p, steps, stages, shared,
        [&](int r, int64_t e) {
          return x_row[r] != nullptr ? LoadX<T>(x_row[r], e)
                                     : make_uint4(0, 0, 0, 0);
        },
        partial);
  }
}

// kKernel (a StreamGemmKernel) with `plan`'s stages and shared memory.
template <auto kKernel>
cudaError_t LaunchPlanned(const StreamGemmParams& p, int64_t steps,
                          int64_t blocks, const StreamStagePlan& plan,
                          const StreamDeviceLimits& limits, cudaStream_t stream,
                          LaunchOrder order) {
  if (const cudaError_t err =
          stream_gemm::AllowDynamicShared<kKernel>(plan.dynamic_bytes, limits);
      err != cudaSuccess) {
    return err;
  }
  return LaunchInOrder(order, kKernel, dim3(static_cast<unsigned>(blocks)),
                       dim3(kThreads), static_cast<size_t>(plan.dynamic_bytes),
                       stream, p, steps, plan.stages);
}

template <typename T, typename X, int kTiles>
cudaError_t Launch(const StreamGemmParams& p, cudaStream_t stream,
                   LaunchOrder order) {
  const int64_t blocks = (p.n + kStreamCols - 1) / kStreamCols;
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  const int64_t steps = (p.k + kStreamStep - 1) / kStreamStep;
  StreamDeviceLimits limits;
  if (const cudaError_t err = stream_gemm::CurrentLimits(&limits);
      err != cudaSuccess) {
    return err;
  }
  // x's rows in shared memory only for one tile of rows (where the engine
  // calls this kernel): each instance costs minutes of nvcc.
  const int64_t x_bytes =
      kTiles == 1 ? p.rows * (p.k + kStreamRowPad) * int64_t{sizeof(T)} : 0;
  const StreamStagePlan plan = StreamStagePlanFor(
      blocks, steps, x_bytes, 0,
      sizeof(float) * (kStreamWarps - 1) * kTiles * 4 * 32, limits);
  if (plan.stages == 0) return cudaErrorInvalidValue;
  if constexpr (kTiles == 1) {
    if (plan.x_shared) {
      return LaunchPlanned<StreamGemmKernel<T, X, 1, true>>(
          p, steps, blocks, plan, limits, stream, order);
    }
  }
  return LaunchPlanned<StreamGemmKernel<T, X, kTiles, false>>(
      p, steps, blocks, plan, limits, stream, order);
}

template <typename T, typename X>
cudaError_t LaunchForRows(const StreamGemmParams& p, cudaStream_t stream,
                          LaunchOrder order) {
  if (p.rows <= 8) return Launch<T, X, 1>(p, stream, order);
  if (p.rows <= 16) return Launch<T, X, 2>(p, stream, order);
  if (p.rows <= 32) return Launch<T, X, 4>(p, stream, order);
  return Launch<T, X, 8>(p, stream, order);
}

template <typename T>
cudaError_t LaunchForX(const StreamGemmParams& p, cudaStream_t stream,
                       LaunchOrder order) {
  if (p.x_type == ElementType::kF32) {
    return LaunchForRows<T, float>(p, stream, order);
  }
  return LaunchForRows<T, T>(p, stream, order);
}

}  // namespace

cudaError_t StreamGemmCuda(const StreamGemmParams& p, cudaStream_t stream,
                           LaunchOrder order) {
  if (StreamGemmCheck(p, true)[0] != '\0') return cudaErrorInvalidValue;
  if (p.rows == 0 || p.n == 0) return cudaSuccess;
  if (const cudaError_t err = CheckMmaDevice(); err != cudaSuccess) {
    return err;
  }
  if (p.w_type == ElementType::kBF16) {
    return LaunchForX<__nv_bfloat16>(p, stream, order);
  }
  return LaunchForX<__half>(p, stream, order);
}

}  // namespace h3::kernels
