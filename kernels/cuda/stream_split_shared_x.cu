// StreamSplitGemmCuda for 17 to 64 rows of x in W's 16-bit type: the
// algorithm of kernels/stream_split_gemm.h, with its sums in the same order
// as stream_split_gemm.cu's kernel (the same bits), and the work mapped for
// many rows.
//
// At 64 rows the L1 kernel (stream_split_gemm.cu) loads 8 KiB of x
// fragments a warp for every 4 KiB of W, from global memory through L1, and
// holds them with two W tiles' accumulators and two steps of W in flight:
// 245 registers, two blocks a multiprocessor. Here a block of 8 warps owns
// the same 128 columns (warp w: the W tile of columns 16 w .. 16 w + 15),
// and the block stages x in shared memory, two steps (a chunk) at a time,
// double-buffered: each x vector comes from L2 once per block, and a lane
// reads its fragments from shared memory 8 bytes at a time, conflict-free.
// A warp keeps a chunk of its W rows in registers, each step's refilled
// with the next chunk's as soon as its MMAs are issued. Per chunk the block
// meets at one barrier: it stores the next chunk's x (loaded into registers
// before the barrier, with the next W) after the MMAs of the current one.
//
// An output's sum is the same as the L1 kernel's: warp w here takes the
// outputs of its warp w / 2's W tile w % 2, over the split's steps in
// increasing order, each step's four MMAs j = 0..3 with the same fragments
// (kernels/stream_gemm.h, StreamElement), then the cluster's sum in split
// order (SumSplits, shared). The partials go to the same entries
// (StreamSplitEntryIndex), in shared memory that the x buffers leave free.
//
// Launched with LaunchOrder::kOverlapPrior, a warp issues its first chunk's
// W loads before it waits for the kernel before (which writes x).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/mma_half.cuh"
#include "kernels/cuda/shared_memory.cuh"
#include "kernels/cuda/stream_gemm_device.cuh"
#include "kernels/cuda/stream_split_device.cuh"

namespace h3::kernels::stream_split {
namespace {

using stream_gemm::LoadWStep;
using stream_gemm::LoadX;
using stream_gemm::WFragment;

constexpr int kWarps = kSplitBlockCols / 16;  // a W tile of 16 columns each
constexpr int kThreads = kWarps * 32;
constexpr int kChunk = 2;  // steps of x staged at a time

// A chunk's buffer: uint2 entries [kChunk][4][kRowStride][4]. Entry (u, j,
// row, t) holds the B fragment (b0, b1) of MMA j of the chunk's step u for
// x row `row` in lane t: x's elements 64 s + 16 t + 4 j + {0, 1} and {2,
// 3} (StreamElement) as 16-bit pairs. One padding row per (u, j) makes the
// staging stores' 16 lanes of a phase fall in distinct banks but for the two
// steps; a fragment load (lanes (g, t), rows 8 r + g) reads 16 consecutive
// entries a phase.
template <int kTiles>
struct Buffers {
  static constexpr int kRowStride = 8 * kTiles + 1;
  static constexpr int kEntries = kChunk * 4 * kRowStride * 4;
  // The block's shared memory in 32-bit words: two buffers, or the
  // partials after the last chunk, whichever is larger.
  static constexpr int kWords = 4 * kEntries > StreamSplitEntries(kTiles)
                                    ? 4 * kEntries
                                    : StreamSplitEntries(kTiles);
  static __device__ __forceinline__ int Entry(int u, int j, int row, int t) {
    return ((u * 4 + j) * kRowStride + row) * 4 + t;
  }
};

// The x vectors a thread stages per chunk: kChunk steps x 8 kTiles rows x 8
// vectors of 16 bytes over the block.
template <int kTiles>
constexpr int kStagedVectors = kChunk * 8 * kTiles * 8 / kThreads;

// The thread's share of a chunk: vector v (elements 8 v .. 8 v + 7) of the
// chunk's step u, of x rows row0, row0 + kStagedRowStep, ...: the same u
// and v for each of its vectors, as kThreads is a multiple of 8 kChunk.
constexpr int kStagedRowStep = kThreads / (8 * kChunk);
static_assert(kThreads % (8 * kChunk) == 0, "a thread's vectors share u, v");
struct Staged {
  int u, row0, v;
};
__device__ __forceinline__ Staged StagedShare() {
  const int idx = static_cast<int>(threadIdx.x);
  return {idx / 8 % kChunk, idx / (8 * kChunk), idx % 8};
}

// The thread's x vectors of the chunk from step s0 (zeros past the rows,
// past the split's last step and past k).
template <typename T, int kTiles>
__device__ __forceinline__ void LoadXChunk(
    const StreamGemmParams& p, const Staged& at, int64_t s0, int64_t last,
    uint4 (&xr)[kStagedVectors<kTiles>]) {
  const int64_t s = s0 + at.u, e = s * kStreamStep + 8 * at.v;
  const bool inside = s < last && e < p.k;
  const T* x = static_cast<const T*>(p.x) + at.row0 * p.k + e;
#pragma unroll
  for (int i = 0; i < kStagedVectors<kTiles>; ++i) {
    xr[i] = inside && at.row0 + kStagedRowStep * i < p.rows
                ? LoadX<T>(x, kStagedRowStep * i * p.k)
                : make_uint4(0, 0, 0, 0);
  }
}

// Vector v holds the pairs 4 v .. 4 v + 3 of the step; pair 8 t + 2 j + reg
// is register reg of MMA j's B fragment in lane t: (x, y) go to MMA 2 (v %
// 2), (z, w) to MMA 2 (v % 2) + 1, both in lane v / 2.
template <int kTiles>
__device__ __forceinline__ void StoreXChunk(
    const Staged& at, const uint4 (&xr)[kStagedVectors<kTiles>],
    uint2* buffer) {
  using B = Buffers<kTiles>;
  const int j = 2 * (at.v % 2), t = at.v / 2;
  uint2* const lo = buffer + B::Entry(at.u, j, at.row0, t);
  uint2* const hi = buffer + B::Entry(at.u, j + 1, at.row0, t);
#pragma unroll
  for (int i = 0; i < kStagedVectors<kTiles>; ++i) {
    constexpr int kRowEntries = 4;  // Entry's step from a row to the next
    lo[kRowEntries * kStagedRowStep * i] = make_uint2(xr[i].x, xr[i].y);
    hi[kRowEntries * kStagedRowStep * i] = make_uint2(xr[i].z, xr[i].w);
  }
}

// Step u of the chunk in `buffer`: the four MMAs of StepMmas
// (stream_gemm_device.cuh) for one W tile, the B fragments from shared
// memory.
template <typename T, int kTiles>
__device__ __forceinline__ void ChunkStep(const uint2* buffer, int u,
                                          const uint4 (&wv)[2][2], int g, int t,
                                          float (&acc)[kTiles][4]) {
  using B = Buffers<kTiles>;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t a[4];
    WFragment(wv, j, a);
#pragma unroll
    for (int r = 0; r < kTiles; ++r) {
      const uint2 b = buffer[B::Entry(u, j, 8 * r + g, t)];
      HalfOps<T>::Mma(acc[r], a, b.x, b.y);
    }
  }
}

template <typename T, int kTiles>
__global__ void __launch_bounds__(kThreads, 2)
    StreamSplitSharedXKernel(StreamGemmParams p, int64_t steps, int splits) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) || \
    defined(H3_CUDA_EMULATOR)
  using B = Buffers<kTiles>;
  // Read by the cluster's other blocks: H3_SHARED_ARRAY (shared_memory.cuh).
  H3_SHARED_ARRAY(uint2, shared, B::kWords / 2);
  const int split =
      static_cast<int>(cooperative_groups::this_cluster().block_rank());
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t block_col = int64_t{blockIdx.y} * kSplitBlockCols;
  LetNextKernelStart();

  const T* w = static_cast<const T*>(p.w);
  const T* w_row[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t col = block_col + 16 * warp + g + 8 * h;
    w_row[h] = col < p.n ? w + col * p.k : nullptr;
  }
  const int64_t first = StreamSplitFirstStep(steps, splits, split);
  const int64_t last = StreamSplitFirstStep(steps, splits, split + 1);
  const Staged staged = StagedShare();

  uint4 wv[kChunk][2][2];  // a chunk's steps of W, each refilled once used
#pragma unroll
  for (int u = 0; u < kChunk; ++u) {
    LoadWStep(p, w_row, first + u, first + u < last, t, wv[u]);
  }
  WaitForPriorKernel();  // x is the kernel before's output
  {
    uint4 xr[kStagedVectors<kTiles>];
    LoadXChunk<T, kTiles>(p, staged, first, last, xr);
    StoreXChunk<kTiles>(staged, xr, shared);
  }

  float acc[kTiles][4] = {};
  for (int64_t s0 = first, c = 0; s0 < last; s0 += kChunk, ++c) {
    const bool more = s0 + kChunk < last;  // the same for the block
    uint4 xr[kStagedVectors<kTiles>];
    if (more) LoadXChunk<T, kTiles>(p, staged, s0 + kChunk, last, xr);
    // This chunk's x is stored; the other buffer's last reader (the chunk
    // before) is done.
    __syncthreads();
#pragma unroll
    for (int u = 0; u < kChunk; ++u) {
      if (s0 + u < last) {
        ChunkStep<T, kTiles>(shared + c % 2 * B::kEntries, u, wv[u], g, t, acc);
      }
      if (more) {
        const int64_t s = s0 + kChunk + u;
        LoadWStep(p, w_row, s, s < last, t, wv[u]);
      }
    }
    if (more) {
      StoreXChunk<kTiles>(staged, xr, shared + (c + 1) % 2 * B::kEntries);
    }
  }

  __syncthreads();  // the partials go where the last chunk's x was
  float* const partial = reinterpret_cast<float*>(shared);
#pragma unroll
  for (int r = 0; r < kTiles; ++r) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      partial[StreamSplitEntryIndex(warp / 2, warp % 2, r, c, lane, kTiles)] =
          acc[r][c];
    }
  }
  SumSplits<kTiles, kThreads>(p, partial, block_col, splits, split);
#else
  __trap();  // the host entry refuses devices before sm_90
#endif
}

template <typename T, int kTiles>
cudaError_t Launch(const StreamGemmParams& p, const StreamSplitShape& shape,
                   cudaStream_t stream, LaunchOrder order) {
  if (shape.col_blocks > 65535) return cudaErrorInvalidValue;  // grid.y
  return LaunchClustersInOrder(order, static_cast<unsigned>(shape.splits),
                               StreamSplitSharedXKernel<T, kTiles>,
                               dim3(static_cast<unsigned>(shape.splits),
                                    static_cast<unsigned>(shape.col_blocks)),
                               dim3(kThreads), 0, stream, p, shape.steps,
                               shape.splits);
}

template <typename T>
cudaError_t LaunchForRows(const StreamGemmParams& p,
                          const StreamSplitShape& shape, cudaStream_t stream,
                          LaunchOrder order) {
  if (p.rows <= 32) return Launch<T, 4>(p, shape, stream, order);
  return Launch<T, 8>(p, shape, stream, order);
}

}  // namespace

cudaError_t LaunchSharedX(const StreamGemmParams& p,
                          const StreamSplitShape& shape, cudaStream_t stream,
                          LaunchOrder order) {
  if (p.w_type == ElementType::kBF16) {
    return LaunchForRows<__nv_bfloat16>(p, shape, stream, order);
  }
  return LaunchForRows<__half>(p, shape, stream, order);
}

}  // namespace h3::kernels::stream_split
