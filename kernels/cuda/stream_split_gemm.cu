// StreamSplitGemmCuda: the algorithm of kernels/stream_split_gemm.h. This
// kernel takes up to 16 rows, and any rows of fp32 x; 17 to 64 rows of
// 16-bit x go to stream_split_shared_x.cu's (the same sums, x staged in
// shared memory).
//
// A block of 4 warps owns 128 output columns (a warp 32: two MMA tiles of W
// rows) and one split of k; the splits of a column block form a cluster. A
// warp streams its 32 W rows' share of k (a lane: 16 elements of each of 4
// rows a step, 8 x 16-byte loads, past L1) kUnroll steps ahead of the MMAs,
// and reads x through L1, where the block's 4 warps share it: x comes from
// L2 once per 128 columns (StreamGemm's blocks read it once per 16, which
// bounds it at 64 rows). After the loop each block leaves its accumulators
// in shared memory, the cluster meets at a barrier, and block q of the
// cluster sums the q-th share of the outputs over the splits' partials, in
// split order, from the blocks' shared memory (distributed shared memory),
// adds the bias, applies GELU and stores y; a second barrier keeps every
// block's partials until all have been read.
//
// Launched with LaunchOrder::kOverlapPrior, a warp issues its first steps'
// W loads before it waits for the kernel before (which writes x).
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device_major.h"
#include "kernels/cuda/kernel_image.h"
#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/mma_half.cuh"
#include "kernels/cuda/shared_memory.cuh"
#include "kernels/cuda/stream_gemm_device.cuh"
#include "kernels/cuda/stream_split_device.cuh"
#include "kernels/cuda/stream_split_gemm.h"

namespace h3::kernels {
namespace {

namespace cg = cooperative_groups;
using stream_gemm::LoadWStep;
using stream_gemm::LoadX;
using stream_gemm::StepMmas;
using stream_gemm::XRows;

constexpr int kThreads = kSplitWarps * 32;

// T: W's type; X: x's (float or T); kTiles: tiles of 8 x rows.
template <typename T, typename X, int kTiles>
__global__ void __launch_bounds__(kThreads)
    StreamSplitKernel(StreamGemmParams p, int64_t steps, int splits) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) || \
    defined(H3_CUDA_EMULATOR)
  // Read by the cluster's other blocks: H3_SHARED_ARRAY (shared_memory.cuh).
  H3_SHARED_ARRAY(float, partial, StreamSplitEntries(kTiles));
  const int split = static_cast<int>(cg::this_cluster().block_rank());
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t block_col = int64_t{blockIdx.y} * kSplitBlockCols;
  const int64_t col0 = block_col + warp * kSplitWarpCols;
  LetNextKernelStart();

  const T* w = static_cast<const T*>(p.w);
  // W's rows col0 + 16 tile + g + 8 h, or null past n (their values count
  // as 0).
  const T* w_row[2][2];
#pragma unroll
  for (int tile = 0; tile < 2; ++tile) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t col = col0 + 16 * tile + g + 8 * h;
      w_row[tile][h] = col < p.n ? w + col * p.k : nullptr;
    }
  }
  const X* x_row[kTiles];
  XRows(p, g, x_row);

  // Steps loaded before the first of them is multiplied.
  constexpr int kUnroll = kTiles <= 2 ? 4 : 2;
  const int64_t first = StreamSplitFirstStep(steps, splits, split);
  const int64_t last = StreamSplitFirstStep(steps, splits, split + 1);
  float acc[2][kTiles][4] = {};
  for (int64_t s0 = first; s0 < last; s0 += kUnroll) {
    // The first of the 8 elements vector v of step s0 + u holds. k % 8 ==
    // 0: a vector is wholly inside k or wholly past it.
    const auto element = [&](int u, int v) {
      return (s0 + u) * kStreamStep + 16 * t + 8 * v;
    };
    uint4 wv[kUnroll][2][2][2];  // [u][tile][h][v]
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int tile = 0; tile < 2; ++tile) {
        LoadWStep(p, w_row[tile], s0 + u, s0 + u < last, t, wv[u][tile]);
      }
    }
    WaitForPriorKernel();  // x is the kernel before's output
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (s0 + u >= last) break;  // the same for the warp
      uint4 xv[kTiles][2];
#pragma unroll
      for (int v = 0; v < 2; ++v) {
        const int64_t e = element(u, v);
#pragma unroll
        for (int r = 0; r < kTiles; ++r) {
          xv[r][v] = e < p.k && x_row[r] != nullptr ? LoadX<T>(x_row[r], e)
                                                    : make_uint4(0, 0, 0, 0);
        }
      }
      StepMmas<T, 2, kTiles>(wv[u], xv, acc);
    }
  }

  WaitForPriorKernel();  // before the first global write (once waited, a no-op)
#pragma unroll
  for (int tile = 0; tile < 2; ++tile) {
#pragma unroll
    for (int r = 0; r < kTiles; ++r) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        partial[StreamSplitEntryIndex(warp, tile, r, c, lane, kTiles)] =
            acc[tile][r][c];
      }
    }
  }
  stream_split::SumSplits<kTiles, kThreads>(p, partial, block_col, splits,
                                            split);
#else
  __trap();  // the host entry refuses devices before sm_90
#endif
}

template <typename T, typename X, int kTiles>
cudaError_t Launch(const StreamGemmParams& p, const StreamSplitShape& shape,
                   cudaStream_t stream, LaunchOrder order) {
  if (shape.col_blocks > 65535) return cudaErrorInvalidValue;  // grid.y
  return LaunchClustersInOrder(order, static_cast<unsigned>(shape.splits),
                               StreamSplitKernel<T, X, kTiles>,
                               dim3(static_cast<unsigned>(shape.splits),
                                    static_cast<unsigned>(shape.col_blocks)),
                               dim3(kThreads), 0, stream, p, shape.steps,
                               shape.splits);
}

template <typename T, typename X>
cudaError_t LaunchForRows(const StreamGemmParams& p,
                          const StreamSplitShape& shape, cudaStream_t stream,
                          LaunchOrder order) {
  if (p.rows <= 8) return Launch<T, X, 1>(p, shape, stream, order);
  if (p.rows <= 16) return Launch<T, X, 2>(p, shape, stream, order);
  if constexpr (std::is_same_v<X, float>) {
    if (p.rows <= 32) return Launch<T, X, 4>(p, shape, stream, order);
    return Launch<T, X, 8>(p, shape, stream, order);
  } else {  // x in shared memory (stream_split_shared_x.cu)
    return stream_split::LaunchSharedX(p, shape, stream, order);
  }
}

template <typename T>
cudaError_t LaunchForX(const StreamGemmParams& p, const StreamSplitShape& shape,
                       cudaStream_t stream, LaunchOrder order) {
  if (p.x_type == ElementType::kF32) {
    return LaunchForRows<T, float>(p, shape, stream, order);
  }
  return LaunchForRows<T, T>(p, shape, stream, order);
}

}  // namespace

cudaError_t StreamSplitGemmCuda(const StreamGemmParams& p, cudaStream_t stream,
                                LaunchOrder order) {
  if (StreamGemmCheck(p, true)[0] != '\0') return cudaErrorInvalidValue;
  if (p.rows == 0 || p.n == 0) return cudaSuccess;
  // Thread-block clusters: a 9.0 device, and our kernels built for it.
  if (!CurrentImageTakesSm90()) return cudaErrorNotSupported;
  int multiprocessors = 0;
  if (const cudaError_t err = CurrentDeviceMultiprocessors(&multiprocessors);
      err != cudaSuccess) {
    return err;
  }
  const StreamSplitShape shape = StreamSplitShapeFor(p.n, p.k, multiprocessors);
  if (p.w_type == ElementType::kBF16) {
    return LaunchForX<__nv_bfloat16>(p, shape, stream, order);
  }
  return LaunchForX<__half>(p, shape, stream, order);
}

}  // namespace h3::kernels
