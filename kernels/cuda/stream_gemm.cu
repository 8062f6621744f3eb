// StreamGemmCuda: the algorithm of kernels/stream_gemm.h.
//
// A block owns 16 output columns and all rows; its 8 warps take the k steps
// in turn (warp w: steps w, w + 8, ...), so at any moment the block reads
// 8 x 128 contiguous bytes of each of its 16 W rows. A lane loads its 16
// elements of 2 W rows (4 x 16 bytes, streamed past L1) and of each of its
// x rows (through L1/L2: every block reads x), kUnroll steps ahead of the
// MMAs: 4, 2 or 1 steps (8, 4 or 2 KiB of W a warp in flight) as more x
// rows take more registers; for one row tile StreamGemmFitFor may build it
// to fit 3 or 4 blocks a multiprocessor (2 or 1 steps ahead). After the
// loop the warps' accumulators meet in shared memory and warp 0 sums them
// in warp order, adds the bias, applies GELU and stores y.
//
// Launched with LaunchOrder::kOverlapPrior, a warp issues its first steps'
// W loads before it waits for the kernel before (which writes x): at k =
// 2048 that is all of the block's W, so a product's weights stream while
// the norm or the H3 step before it finishes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device_major.h"
#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/mma_half.cuh"
#include "kernels/cuda/stream_gemm.h"
#include "kernels/cuda/stream_gemm_device.cuh"

namespace h3::kernels {
namespace {

using stream_gemm::kThreads;
using stream_gemm::LoadX;
using stream_gemm::StreamBlock;

// T: W's type; X: x's (float or T); kTiles: tiles of 8 x rows; kUnroll:
// the steps a warp loads ahead (StreamUnroll).
template <typename T, typename X, int kTiles, int kUnroll>
__device__ __forceinline__ void StreamGemmBody(const StreamGemmParams& p,
                                               int64_t steps) {
  __shared__ float partial[kStreamWarps - 1][kTiles][4][32];
  const int g = threadIdx.x % 32 / 4;
  const X* x_row[kTiles];
  stream_gemm::XRows(p, g, x_row);
  LetNextKernelStart();
  StreamBlock<T, kTiles, kUnroll>(
      p, steps,
      [&](int r, int64_t e) {
        return x_row[r] != nullptr ? LoadX<T>(x_row[r], e)
                                   : make_uint4(0, 0, 0, 0);
      },
      partial);
}

// The registers decide the blocks a multiprocessor (ptxas keeps one tile
// at 128: 2 blocks; naming a minimum of 1 would let it take more).
template <typename T, typename X, int kTiles>
__global__ void __launch_bounds__(kThreads)
    StreamGemmKernel(StreamGemmParams p, int64_t steps) {
  StreamGemmBody<T, X, kTiles, stream_gemm::StreamUnroll(kTiles)>(p, steps);
}

// Built to fit kMinBlocks blocks a multiprocessor, kUnroll steps ahead
// (StreamGemmFitFor).
template <typename T, typename X, int kTiles, int kMinBlocks, int kUnroll>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    StreamGemmKernelFitting(StreamGemmParams p, int64_t steps) {
  StreamGemmBody<T, X, kTiles, kUnroll>(p, steps);
}

template <typename T, typename X, int kTiles, int kMinBlocks = 0,
          int kUnroll = 0>
cudaError_t Launch(const StreamGemmParams& p, cudaStream_t stream,
                   LaunchOrder order) {
  const int64_t blocks = (p.n + kStreamCols - 1) / kStreamCols;
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  const int64_t steps = (p.k + kStreamStep - 1) / kStreamStep;
  const dim3 grid(static_cast<unsigned>(blocks));
  if constexpr (kMinBlocks > 0) {
    return LaunchInOrder(
        order, StreamGemmKernelFitting<T, X, kTiles, kMinBlocks, kUnroll>, grid,
        dim3(kThreads), 0, stream, p, steps);
  } else {
    return LaunchInOrder(order, StreamGemmKernel<T, X, kTiles>, grid,
                         dim3(kThreads), 0, stream, p, steps);
  }
}

// At most 8 rows: the default one-tile instance, or for x of W's type the
// one StreamGemmFitFor builds for this grid on this device.
template <typename T, typename X>
cudaError_t LaunchOneTile(const StreamGemmParams& p, cudaStream_t stream,
                          LaunchOrder order) {
  if constexpr (!std::is_same_v<X, float>) {
    int sms = 0;
    if (const cudaError_t err = CurrentDeviceMultiprocessors(&sms);
        err != cudaSuccess) {
      return err;
    }
    const StreamGemmFit fit = StreamGemmFitFor(
        p.rows, true, (p.n + kStreamCols - 1) / kStreamCols, sms);
    if (fit == StreamGemmFit{3, 2}) {
      return Launch<T, X, 1, 3, 2>(p, stream, order);
    }
    if (fit == StreamGemmFit{4, 1}) {
      return Launch<T, X, 1, 4, 1>(p, stream, order);
    }
  }
  return Launch<T, X, 1>(p, stream, order);
}

template <typename T, typename X>
cudaError_t LaunchForRows(const StreamGemmParams& p, cudaStream_t stream,
                          LaunchOrder order) {
  if (p.rows <= 8) return LaunchOneTile<T, X>(p, stream, order);
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
