#ifndef H3_KERNELS_CUDA_BLOCK_REDUCE_CUH_
#define H3_KERNELS_CUDA_BLOCK_REDUCE_CUH_

// Block-wide reductions and scans for kernels that give one block to a row.
// REQUIRES: blockDim.x a multiple of 32, at most 1024, and every thread of the
// block calls them (they synchronise). They use a fixed tree for a fixed
// blockDim.x, so floating-point results are the same from run to run.

namespace h3::kernels {

constexpr unsigned kFullWarp = 0xffffffffu;

// The reduction of v over the warp, in every lane.
template <typename T, typename Op>
__device__ T WarpAllReduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) {
    v = op(v, __shfl_xor_sync(kFullWarp, v, offset));
  }
  return v;
}

// The reduction of v over the block, in every thread. scratch: a __shared__
// T[32], free again when this returns.
template <typename T, typename Op>
__device__ T BlockAllReduce(T v, Op op, T* scratch) {
  v = WarpAllReduce(v, op);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  T total = scratch[0];
  for (int i = 1; i < static_cast<int>(blockDim.x / 32); ++i) {
    total = op(total, scratch[i]);
  }
  __syncthreads();
  return total;
}

// The sum of v over the threads before this one (in threadIdx.x order);
// *total: the sum over the block. scratch as for BlockAllReduce.
template <typename T>
__device__ T BlockExclusiveSum(T v, T* total, T* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  T inclusive = v;
  for (int offset = 1; offset < 32; offset *= 2) {
    const T other = __shfl_up_sync(kFullWarp, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  T before = 0, sum = 0;
  for (int i = 0; i < static_cast<int>(blockDim.x / 32); ++i) {
    if (i < warp) before += scratch[i];
    sum += scratch[i];
  }
  __syncthreads();
  *total = sum;
  return before + inclusive - v;
}

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_BLOCK_REDUCE_CUH_
