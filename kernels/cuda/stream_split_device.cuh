#ifndef H3_KERNELS_CUDA_STREAM_SPLIT_DEVICE_CUH_
#define H3_KERNELS_CUDA_STREAM_SPLIT_DEVICE_CUH_

// What StreamSplitGemmCuda's two kernels share (stream_split_gemm.cu: x
// through L1, for up to 16 rows or fp32 x; stream_split_shared_x.cu: 16-bit
// x through shared memory, for 17 to 64 rows): the cluster's sum of the
// splits' partials (kernels/stream_split_gemm.h, step 3) and the second
// kernel's launch. Internal to them. nvcc only (C++17).

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/launch_order.h"
#include "kernels/cuda/stream_gemm_device.cuh"
#include "kernels/stream_split_gemm.h"

namespace h3::kernels::stream_split {

// a + b rounded to nearest, for a float or each lane of a float4.
__device__ __forceinline__ float AddRn(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ __forceinline__ float4 AddRn(float4 a, float4 b) {
  return make_float4(__fadd_rn(a.x, b.x), __fadd_rn(a.y, b.y),
                     __fadd_rn(a.z, b.z), __fadd_rn(a.w, b.w));
}

// The sum over a cluster's first `splits` blocks (at most kMaxSplits), in
// block order, of the T (float, or float4: four sums at once) at `entry`
// in each one's shared memory: every block's value read first
// (independent reads of distributed shared memory, in flight together),
// then added left to right.
// Cluster: cooperative_groups::cluster_group (a parameter of the template:
// nvcc's host pass has no such type).
template <int kMaxSplits, typename Cluster, typename T>
__device__ __forceinline__ T SumOverCluster(const Cluster& cluster,
                                            const T* entry, int splits) {
  T part[kMaxSplits];
#pragma unroll
  for (int from = 0; from < kMaxSplits; ++from) {
    part[from] = from < splits ? *cluster.map_shared_rank(entry, from) : T{};
  }
  T sum = part[0];
#pragma unroll
  for (int from = 1; from < kMaxSplits; ++from) {
    if (from < splits) sum = AddRn(sum, part[from]);
  }
  return sum;
}

// Step 3 for a block of kThreads threads whose `partial` (shared memory,
// StreamSplitEntries(kTiles) floats at StreamSplitEntryIndex) holds its
// split's accumulators: the cluster meets, the block sums its share of the
// entries over the splits in split order from the blocks' shared memory,
// finishes those outputs of the column block at block_col, and meets the
// cluster again, so that no block leaves while another reads its partials.
template <int kTiles, int kThreads>
__device__ __forceinline__ void SumSplits(const StreamGemmParams& p,
                                          float* partial, int64_t block_col,
                                          int splits, int split) {
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every split's partials are in place
  const int end = StreamSplitShare(kTiles, splits, split + 1);
  for (int f = StreamSplitShare(kTiles, splits, split) +
               static_cast<int>(threadIdx.x);
       f < end; f += kThreads) {
    const StreamSplitOutput out = StreamSplitEntryOutput(f, kTiles);
    const int64_t row = out.row, col = block_col + out.col;
    if (row >= p.rows || col >= p.n) continue;
    const float sum =
        SumOverCluster<kSplitMaxSplits>(cluster, partial + f, splits);
    stream_gemm::Finish(p, row, col, sum);
  }
  cluster.sync();  // no block leaves while another still reads its partials
}

// StreamSplitGemmCuda's launch for 17 to 64 rows of x in W's 16-bit type
// (from 17 rows a lane's x fragments outnumber its W fragments), cut by
// `shape`, in `order`. REQUIRES: StreamGemmCheck(p, true) is "", p.x_type
// == p.w_type, 17 <= p.rows.
cudaError_t LaunchSharedX(const StreamGemmParams& p,
                          const StreamSplitShape& shape, cudaStream_t stream,
                          LaunchOrder order);

}  // namespace h3::kernels::stream_split

#endif  // H3_KERNELS_CUDA_STREAM_SPLIT_DEVICE_CUH_
