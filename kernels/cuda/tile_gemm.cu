// TileGemmCuda: the algorithm of kernels/tile_gemm.h.
//
// A block of a warp per 16 columns owns kCols output columns (64: 4 warps,
// or 128: 8 warps; TileGemmChooseShape picks per product) and every row
// (up to 64: 2, 4 or 8 row tiles of 8), and one split of k; the splits of
// a column block form a cluster. Its steps go through shared memory in a
// pipeline of 3 or 4 stages (Stage): each stage holds the step's kCols
// rows of W and 8 x kRowTiles rows of x, 128 contiguous bytes a row,
// copied by cp.async (past L1) so that a warp's copy instruction covers
// four whole rows (a lane's 16 bytes each), 2 or 3 steps in flight while
// the block multiplies the next. Each thread's copies are addressed once
// (StepCopies) and its ldmatrix offsets too (LaneSlots). A warp takes a
// tile of the block's outputs (WarpTile): up to 32 rows, each warp every
// row tile and 16 columns; at 64 rows, 32 columns and 32 rows, which needs
// a fifth fewer ldmatrix per MMA. Per 16 elements a warp loads one
// ldmatrix of W per 16 columns (A fragments) and one of x per 16 rows (B
// fragments of two row tiles), then runs one MMA per pair. So W is read
// from memory once per call, and x from L2 once per kCols columns: at 64
// rows as many bytes of x as of W in 64-wide blocks, half as many in
// 128-wide ones (the stream kernel reads 4 of x per byte of W there; the
// split kernel lost half its time to a second wave of clusters, which
// TileGemmShapeFor's rule avoids). On an H200 (eb5e768, 64 wide, 4
// stages at 64 rows) ncu found the kernel short of warps (0.6 of a wave,
// 12 warps a multiprocessor) and issuing some 7,300 instructions a warp for
// 16 steps; since then: 3 stages at 64 rows, the loop's addresses set once
// (PTX of the 64-row loop: about 150 instructions a step, from 265), and
// the 128-wide blocks (24 warps a multiprocessor). Not yet timed.

// Each row of a stage keeps its 8 vectors XOR-swizzled by row % 8, so the
// 8 rows an ldmatrix matrix reads, and the 8 vectors of a row that 8
// threads copy, fall in 8 different bank groups.
//
// After the loop the block leaves its accumulators in shared memory, rows
// of partials [row][column], the cluster meets, and block q sums the q-th
// share of the outputs over the splits in split order from the blocks'
// shared memory (distributed shared memory), each thread 4 consecutive
// columns of a row at a time (one 16-byte read a split), consecutive
// threads consecutive quads, then finishes them (bias, GELU, y's type:
// FinishQuad, one store of a quad);
// a second barrier keeps every block's partials until all have been read.
//
// Launched with LaunchOrder::kOverlapPrior, the block copies its first
// steps of W before it waits for the kernel before (which writes x).
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/device_major.h"
#include "kernels/cuda/kernel_image.h"
#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/mma_half.cuh"
#include "kernels/cuda/shared_memory.cuh"
#include "kernels/cuda/stream_gemm_device.cuh"
#include "kernels/cuda/stream_split_device.cuh"
#include "kernels/cuda/tile_gemm.h"

namespace h3::kernels {
namespace tile_gemm {

constexpr int kChunks = kTileStep * 2 / 16;  // 16-byte vectors a row

// Where vector `chunk` of a stage's row `row` is. Outside the unnamed
// namespace: nvcc's host pass, for which the kernel's body is empty, warns
// of an unused function of internal linkage.
__device__ __forceinline__ int Slot(int row, int chunk) {
  return row * kChunks + (chunk ^ (row % 8));
}

}  // namespace tile_gemm

namespace {

using tile_gemm::kChunks;
using tile_gemm::Slot;

namespace cg = cooperative_groups;

// A block kCols wide (kTileCols or kTileWideCols): a warp per 16 columns.
template <int kCols>
struct Width {
  static constexpr int kWarps = kCols / 16;
  static constexpr int kThreads = kWarps * 32;
  // Floats a row of partials: 4 more than the columns, so that the 4 lanes
  // of a quad (rows 2 t + c % 2) store to different banks.
  static constexpr int kPartialStride = kCols + 4;
  static_assert(kThreads % kChunks == 0, "a thread copies one vector a row");
};

// A stage: W's kCols rows, then x's 8 kRowTiles rows, kChunks vectors
// each. kCount stages: kCount - 1 steps in flight while the block
// multiplies one. 64 wide: 3 at 64 rows (48 KiB a block, so 4 blocks, 16
// warps, a multiprocessor: ncu found the 4-stage kernel's 3 blocks short of
// warps, eb5e768), 4 below (40 and 48 KiB). 128 wide: 3 from 32 rows (72
// and 60 KiB), 4 at 16 (72 KiB): 3 blocks, 24 warps, a multiprocessor.
// kShared, the block's shared memory: the stages, or the partials after
// the loop, whichever is larger.
template <int kCols, int kRowTiles>
struct Stage {
  static_assert(kRowTiles % 2 == 0, "x's fragments come two tiles at a time");
  static constexpr int kCount =
      kRowTiles == 8 || (kCols == kTileWideCols && kRowTiles == 4) ? 3 : 4;
  static constexpr int kXRows = 8 * kRowTiles;
  static constexpr int kVectors = (kCols + kXRows) * kChunks;
  static constexpr size_t kStagesBytes = size_t{kCount} * kVectors * 16;
  static constexpr size_t kPartialBytes =
      size_t{kXRows} * Width<kCols>::kPartialStride * sizeof(float);
  static constexpr size_t kShared =
      kStagesBytes > kPartialBytes ? kStagesBytes : kPartialBytes;
};

// A thread's copies of every step, addressed once: vector `chunk` =
// threadIdx % kChunks of the stage's rows row0 + kRowStep c (row0 =
// threadIdx / kChunks), W's kCols rows (its columns col0 + row) and
// then x's kXRows; zeros past n, past the rows and past k (k % 8 == 0: a
// vector is wholly inside k or wholly past it). A step's copies are then an
// add and a cp.async each (the loop's address arithmetic was most of its
// instructions: ncu, eb5e768).
template <typename T, int kCols, int kRowTiles>
struct StepCopies {
  static constexpr int kRowStep = Width<kCols>::kThreads / kChunks;
  static constexpr int kW = kCols / kRowStep;
  static constexpr int kXRows = Stage<kCols, kRowTiles>::kXRows;
  // x's rows a thread copies; fewer rows than kRowStep (16 rows in a
  // 128-wide block): only the threads of the first kXRows rows copy.
  static constexpr int kX = (kXRows + kRowStep - 1) / kRowStep;
  static constexpr bool kEveryThreadX = kXRows % kRowStep == 0;
  // Row kRowStep c's vectors in a stage: Slot(row0 + kRowStep c, chunk) is
  // Slot(row0, chunk) + kRowStep kChunks c, since kRowStep % 8 == 0.
  static_assert(kRowStep % 8 == 0 && kCols % 8 == 0);
  static_assert(kW * kRowStep == kCols, "whole rows of W a copy");
  static_assert(kEveryThreadX || kX == 1, "x: whole rows, or under one");

  const T* w[kW];  // the split's first step's vectors (row 0's past n)
  const T* x[kX];  // (row 0's past the rows)
  bool w_in[kW];   // row c inside n
  bool x_in[kX];   // inside the rows
  int64_t k_left;  // elements of k from the first step's vector on
  int slot;        // Slot(row0, chunk)
  bool copies_x;   // the thread has a row of x

  __device__ StepCopies(const StreamGemmParams& p, int64_t col0,
                        int64_t first) {
    const int chunk = static_cast<int>(threadIdx.x) % kChunks;
    const int row0 = static_cast<int>(threadIdx.x) / kChunks;
    const int64_t e = first * kTileStep + 8 * chunk;
    k_left = p.k - e;
    slot = Slot(row0, chunk);
    copies_x = kEveryThreadX || row0 < kXRows;
#pragma unroll
    for (int c = 0; c < kW; ++c) {
      const int64_t row = col0 + row0 + kRowStep * c;
      w_in[c] = row < p.n;
      w[c] = static_cast<const T*>(p.w) + (w_in[c] ? row : 0) * p.k + e;
    }
#pragma unroll
    for (int c = 0; c < kX; ++c) {
      const int64_t row = row0 + kRowStep * c;
      x_in[c] = row < p.rows;
      x[c] = static_cast<const T*>(p.x) + (x_in[c] ? row : 0) * p.k + e;
    }
  }

  // Step first + i's copies into `stage`: W's rows, or (with `of_x`) x's.
  __device__ __forceinline__ void Copy(int i, bool of_x, uint4* stage) const {
    constexpr int kRowVectors = kRowStep * kChunks;
    const int64_t at = int64_t{i} * kTileStep;
    const bool in_k = at < k_left;
    if (!of_x) {
#pragma unroll
      for (int c = 0; c < kW; ++c) {
        CopyAsync16OrZeros(stage + slot + kRowVectors * c, w[c] + at,
                           in_k && w_in[c]);
      }
      return;
    }
    if (!copies_x) return;
#pragma unroll
    for (int c = 0; c < kX; ++c) {
      CopyAsync16OrZeros(stage + slot + kCols * kChunks + kRowVectors * c,
                         x[c] + at, in_k && x_in[c]);
    }
  }
};

// A warp's share of a block with kRowTiles row tiles: kCols columns (kCols
// / 16 W tiles) and kRows = 8 kTiles rows; warp w takes columns kCols (w %
// kColWarps) and rows kRows (w / kColWarps) of the block's.
template <int kBlockCols, int kRowTiles>
struct WarpTile {
  static constexpr int kWarps = Width<kBlockCols>::kWarps;
  static constexpr int kCols = kRowTiles == 8 ? 32 : 16;
  static constexpr int kColWarps = kBlockCols / kCols;
  static constexpr int kWTiles = kCols / 16;
  static constexpr int kTiles = kRowTiles * kColWarps / kWarps;
  static_assert(kColWarps * (kRowTiles / kTiles) == kWarps,
                "every warp a tile");
  static_assert(kTiles % 2 == 0, "x's fragments come two tiles at a time");
  static __device__ __forceinline__ int Col0(int warp) {
    return kCols * (warp % kColWarps);
  }
  static __device__ __forceinline__ int Row0(int warp) {
    return 8 * kTiles * (warp / kColWarps);
  }
};

// Where a lane's ldmatrix of each j (0..3, 16 elements each) reads in a
// stage: W's A fragments at a[j] + 16 kChunks h for W tile h, x's B
// fragments at b[j] + 16 kChunks i for row tiles 2 i and 2 i + 1. A stage's
// row `row` keeps its vectors at Slot(row, .), whose swizzle depends on
// row % 8 only, and the tiles are 16 rows apart: so the offsets, set once,
// hold for every tile and step.
struct LaneSlots {
  int a[4];
  int b[4];
};

template <int kCols, int kRowTiles>
__device__ __forceinline__ LaneSlots LaneSlotsOf(int warp, int lane) {
  using WT = WarpTile<kCols, kRowTiles>;
  const int m = lane / 8, r = lane % 8;
  const int w_row = WT::Col0(warp) + r + 8 * (m % 2);
  const int x_row = kCols + WT::Row0(warp) + r + 8 * (m / 2);
  LaneSlots s;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    s.a[j] = Slot(w_row, 2 * j + m / 2);
    s.b[j] = Slot(x_row, 2 * j + m % 2);
  }
  return s;
}

// One step from `stage` into the warp's accumulators acc[W tile][row
// tile]: for j = 0..3 the MMAs of elements 16 j .. 16 j + 15. W's A
// fragment of a tile: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7),
// (rows 0-7, k 8-15), (rows 8-15, k 8-15); x's B fragments of row tiles
// 2 i and 2 i + 1: matrices (tile 2 i, k 0-7), (2 i, k 8-15), (2 i + 1,
// k 0-7), (2 i + 1, k 8-15) (LaneSlotsOf).
template <typename T, typename WT>
__device__ __forceinline__ void StepMmas(
    const uint4* stage, const LaneSlots& slots,
    float (&acc)[WT::kWTiles][WT::kTiles][4]) {
  constexpr int kTileVectors = 16 * kChunks;  // 16 rows of a stage
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t a[WT::kWTiles][4];
#pragma unroll
    for (int h = 0; h < WT::kWTiles; ++h) {
      LdMatrixX4(stage + slots.a[j] + kTileVectors * h, a[h]);
    }
#pragma unroll
    for (int i = 0; i < WT::kTiles / 2; ++i) {
      uint32_t b[4];
      LdMatrixX4(stage + slots.b[j] + kTileVectors * i, b);
#pragma unroll
      for (int h = 0; h < WT::kWTiles; ++h) {
        HalfOps<T>::Mma(acc[h][2 * i], a[h], b[0], b[1]);
        HalfOps<T>::Mma(acc[h][2 * i + 1], a[h], b[2], b[3]);
      }
    }
  }
}

template <typename T, int kCols, int kRowTiles>
// 128 wide: at most 80 registers (79 at 64 rows, ptxas sm_90a), so that 3
// blocks of 256 threads fit a multiprocessor as their shared memory does.
// 64 wide: no minimum (0 names none, as before the widths): naming even 1
// block let ptxas give the 64-row instance 112 registers instead of 87.
__global__ void __launch_bounds__(Width<kCols>::kThreads,
                                  kCols == kTileWideCols ? 3 : 0)
    TileGemmKernel(StreamGemmParams p, int64_t steps, int splits) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) || \
    defined(H3_CUDA_EMULATOR)
  using S = Stage<kCols, kRowTiles>;
  constexpr int kThreads = Width<kCols>::kThreads;
  constexpr int kPartialStride = Width<kCols>::kPartialStride;
  // Read by the cluster's other blocks at the end.
  H3_DYNAMIC_SHARED(uint4, shared, 128);
  const cg::cluster_group cluster = cg::this_cluster();
  const int split = static_cast<int>(cluster.block_rank());
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t col0 = int64_t{blockIdx.y} * kCols;
  LetNextKernelStart();

  const int64_t first = StreamSplitFirstStep(steps, splits, split);
  const int count =
      static_cast<int>(StreamSplitFirstStep(steps, splits, split + 1) - first);
  const StepCopies<T, kCols, kRowTiles> copies(p, col0, first);
  const auto stage = [&](int index) { return shared + index * S::kVectors; };
  // The first kCount - 1 steps: W before the wait, x after it; one group
  // of copies a step (the first holds every W copy of them).
  for (int i = 0; i < S::kCount - 1 && i < count; ++i) {
    copies.Copy(i, false, stage(i));
  }
  WaitForPriorKernel();  // x is the kernel before's output
  for (int i = 0; i < S::kCount - 1; ++i) {
    if (i < count) copies.Copy(i, true, stage(i));
    CommitCopies();
  }

  using WT = WarpTile<kCols, kRowTiles>;
  const LaneSlots slots = LaneSlotsOf<kCols, kRowTiles>(warp, lane);
  float acc[WT::kWTiles][WT::kTiles][4] = {};
  // Step i's stage, and step i + kCount - 1's (the one step i - 1 used).
  int read = 0, write = S::kCount - 1;
  for (int i = 0; i < count; ++i) {
    WaitCopies<S::kCount - 2>();  // step i's copies are in
    // Every thread's copies of step i are visible, and every warp is done
    // with step i - 1, whose stage the copies below overwrite.
    __syncthreads();
    if (const int next = i + S::kCount - 1; next < count) {
      copies.Copy(next, false, stage(write));
      copies.Copy(next, true, stage(write));
    }
    CommitCopies();  // possibly empty: the wait's count stays fixed
    StepMmas<T, WT>(stage(read), slots, acc);
    write = read;
    read = read + 1 == S::kCount ? 0 : read + 1;
  }

  __syncthreads();  // the partials go where the stages were
  float* const partial = reinterpret_cast<float*>(shared);
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int h = 0; h < WT::kWTiles; ++h) {
#pragma unroll
    for (int r = 0; r < WT::kTiles; ++r) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        // C fragment: c0, c1 at W row g, x rows 2t, 2t + 1; c2, c3 at g + 8.
        const int row = WT::Row0(warp) + 8 * r + 2 * t + c % 2;
        const int col = WT::Col0(warp) + 16 * h + g + 8 * (c / 2);
        partial[row * kPartialStride + col] = acc[h][r][c];
      }
    }
  }
  cluster.sync();  // every split's partials are in place
  // Outputs in quads of 4 consecutive columns of a row (16 bytes of
  // partials: one read a split), block q the q-th share of them.
  constexpr int kRowQuads = kCols / 4;
  constexpr int kQuads = S::kXRows * kRowQuads;
  const int end = kQuads * (split + 1) / splits;
  for (int q = kQuads * split / splits + static_cast<int>(threadIdx.x); q < end;
       q += kThreads) {
    const int row = q / kRowQuads, col = 4 * (q % kRowQuads);
    if (row >= p.rows || col0 + col >= p.n) continue;
    const float4 sum = stream_split::SumOverCluster<kTileMaxSplits>(
        cluster,
        reinterpret_cast<const float4*>(partial + row * kPartialStride + col),
        splits);
    stream_gemm::FinishQuad(p, row, col0 + col, sum);
  }
  cluster.sync();  // no block leaves while another still reads its partials
#else
  __trap();  // the host entry refuses devices before sm_90
#endif
}

template <typename T, int kCols, int kRowTiles>
const void* KernelId() {
  return reinterpret_cast<const void*>(&TileGemmKernel<T, kCols, kRowTiles>);
}

// Host-side attributes, not stream operations, so they may be set during
// graph capture; set once per device and instance. Every instance asks for
// the largest carveout, so that the blocks its occupancy counts fit a
// multiprocessor (4 of 48 KiB at 64 rows: left to the driver, the carveout
// may hold fewer); above the 48 KiB every kernel gets, shared memory needs
// an opt-in too.
template <typename T, int kCols, int kRowTiles>
cudaError_t OptIn() {
  int set = 0;
  return CachedPerDevice(
      [](int, int* done) {
        constexpr size_t kShared = Stage<kCols, kRowTiles>::kShared;
        const void* const kernel = KernelId<T, kCols, kRowTiles>();
        if constexpr (kShared > 48 * 1024) {
          if (const cudaError_t err = cudaFuncSetAttribute(
                  kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                  static_cast<int>(kShared));
              err != cudaSuccess) {
            return err;
          }
        }
        *done = 1;
        return cudaFuncSetAttribute(
            kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
            cudaSharedmemCarveoutMaxShared);
      },
      &set);
}

// The 64-row fp16 instance of a width: what TileGemmShapeFor is asked
// for, whatever the rows and type of the call (the answer must not depend
// on the rows).
constexpr int kShapeRowTiles = 8;
using ShapeType = __half;

// What device `id` (the current one) holds at once of that instance kCols
// wide: the blocks a multiprocessor takes times the multiprocessors, and
// for each cluster size the clusters (0 for a size the runtime will not
// describe: one not to use, rather than a reason to fail the product).
template <int kCols>
cudaError_t AskTileDevice(int id, TileGemmDevice* device) {
  if (const cudaError_t err = OptIn<ShapeType, kCols, kShapeRowTiles>();
      err != cudaSuccess) {
    return err;
  }
  const void* const kernel = KernelId<ShapeType, kCols, kShapeRowTiles>();
  constexpr size_t kShared = Stage<kCols, kShapeRowTiles>::kShared;
  constexpr int kThreads = Width<kCols>::kThreads;
  int multiprocessors = 0, per_multiprocessor = 0;
  if (const cudaError_t err = cudaDeviceGetAttribute(
          &multiprocessors, cudaDevAttrMultiProcessorCount, id);
      err != cudaSuccess) {
    return err;
  }
  if (const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &per_multiprocessor, kernel, kThreads, kShared);
      err != cudaSuccess) {
    return err;
  }
  device->blocks = int64_t{multiprocessors} * per_multiprocessor;
  for (int s = 2; s <= kTileMaxSplits; ++s) {
    cudaLaunchAttribute attribute;
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = static_cast<unsigned>(s);
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    // In field order (grid, block, shared memory, stream, attributes): the
    // emulator's device.h takes gridDim and blockDim as names.
    const cudaLaunchConfig_t config = {dim3(static_cast<unsigned>(s)),
                                       dim3(kThreads),
                                       kShared,
                                       nullptr,
                                       &attribute,
                                       1};
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) !=
        cudaSuccess) {
      clusters = 0;
      cudaGetLastError();  // not left for the next launch's check
    }
    device->clusters[s] = clusters;
  }
  return cudaSuccess;
}

// What the current device holds of each width (AskTileDevice), asked once
// per device (a launch reads it back; CachedPerDevice keeps one positive
// int, and a cluster size may answer 0). Thread-safe.
struct TileDevices {
  TileGemmDevice narrow, wide;  // kTileCols, kTileWideCols
};
cudaError_t AskTileDevices(int id, TileDevices* devices) {
  if (const cudaError_t err = AskTileDevice<kTileCols>(id, &devices->narrow);
      err != cudaSuccess) {
    return err;
  }
  return AskTileDevice<kTileWideCols>(id, &devices->wide);
}
cudaError_t CurrentTileDevices(TileDevices* devices) {
  constexpr int kCached = 64;  // devices past this are asked every time
  static std::mutex mu;
  static std::optional<TileDevices> known[kCached];
  int id = 0;
  if (const cudaError_t err = cudaGetDevice(&id); err != cudaSuccess) {
    return err;
  }
  if (id < 0 || id >= kCached) return AskTileDevices(id, devices);
  const std::lock_guard<std::mutex> lock(mu);
  if (!known[id]) {
    TileDevices asked;
    if (const cudaError_t err = AskTileDevices(id, &asked);
        err != cudaSuccess) {
      return err;
    }
    known[id] = asked;
  }
  *devices = *known[id];
  return cudaSuccess;
}

template <typename T, int kCols, int kRowTiles>
cudaError_t Launch(const StreamGemmParams& p, const TileGemmShape& shape,
                   cudaStream_t stream, LaunchOrder order) {
  if (shape.col_blocks > 65535) return cudaErrorInvalidValue;  // grid.y
  if (const cudaError_t err = OptIn<T, kCols, kRowTiles>();
      err != cudaSuccess) {
    return err;
  }
  return LaunchClustersInOrder(order, static_cast<unsigned>(shape.splits),
                               TileGemmKernel<T, kCols, kRowTiles>,
                               dim3(static_cast<unsigned>(shape.splits),
                                    static_cast<unsigned>(shape.col_blocks)),
                               dim3(Width<kCols>::kThreads),
                               Stage<kCols, kRowTiles>::kShared, stream, p,
                               shape.steps, shape.splits);
}

template <typename T, int kCols>
cudaError_t LaunchForRows(const StreamGemmParams& p, const TileGemmShape& shape,
                          cudaStream_t stream, LaunchOrder order) {
  if (p.rows <= 16) return Launch<T, kCols, 2>(p, shape, stream, order);
  if (p.rows <= 32) return Launch<T, kCols, 4>(p, shape, stream, order);
  return Launch<T, kCols, 8>(p, shape, stream, order);
}

template <typename T>
cudaError_t LaunchForWidth(const StreamGemmParams& p,
                           const TileGemmShape& shape, cudaStream_t stream,
                           LaunchOrder order) {
  return shape.cols == kTileWideCols
             ? LaunchForRows<T, kTileWideCols>(p, shape, stream, order)
             : LaunchForRows<T, kTileCols>(p, shape, stream, order);
}

}  // namespace

cudaError_t TileGemmCudaShape(int64_t n, int64_t k, TileGemmShape* shape) {
  // Thread-block clusters: a 9.0 device, and our kernels built for it.
  if (!CurrentImageTakesSm90()) return cudaErrorNotSupported;
  TileDevices devices;
  if (const cudaError_t err = CurrentTileDevices(&devices);
      err != cudaSuccess) {
    return err;
  }
  *shape = TileGemmChooseShape(n, k, devices.narrow, devices.wide);
  return cudaSuccess;
}

namespace {

// `p` cut by TileGemmChooseShape's shape, with blocks `cols` wide instead
// where that is positive and k in `splits` shares where that is.
cudaError_t Run(const StreamGemmParams& p, int cols, int splits,
                cudaStream_t stream, LaunchOrder order) {
  if (TileGemmCheck(p, true)[0] != '\0') return cudaErrorInvalidValue;
  if (cols != 0 && cols != kTileCols && cols != kTileWideCols) {
    return cudaErrorInvalidValue;
  }
  // The step count (the same at any width), for the check of `splits`.
  const int64_t steps = TileGemmShapeFor(p.n, p.k, TileGemmDevice{}).steps;
  if (splits > kTileMaxSplits || splits > steps) return cudaErrorInvalidValue;
  if (p.rows == 0 || p.n == 0) return cudaSuccess;
  TileGemmShape shape;
  if (const cudaError_t err = TileGemmCudaShape(p.n, p.k, &shape);
      err != cudaSuccess) {
    return err;
  }
  // The width's sizes (its split count replaced below: TileGemmCudaCut
  // always gives one).
  if (cols > 0) shape = TileGemmShapeFor(p.n, p.k, TileGemmDevice{}, cols);
  if (splits > 0) shape.splits = splits;
  if (p.w_type == ElementType::kBF16) {
    return LaunchForWidth<__nv_bfloat16>(p, shape, stream, order);
  }
  return LaunchForWidth<__half>(p, shape, stream, order);
}

}  // namespace

cudaError_t TileGemmCuda(const StreamGemmParams& p, cudaStream_t stream,
                         LaunchOrder order) {
  return Run(p, 0, 0, stream, order);
}

cudaError_t TileGemmCudaSplits(const StreamGemmParams& p, int splits,
                               cudaStream_t stream, LaunchOrder order) {
  if (splits < 1) return cudaErrorInvalidValue;
  return Run(p, 0, splits, stream, order);
}

cudaError_t TileGemmCudaCut(const StreamGemmParams& p, int cols, int splits,
                            cudaStream_t stream, LaunchOrder order) {
  if (cols < 1 || splits < 1) return cudaErrorInvalidValue;
  return Run(p, cols, splits, stream, order);
}

}  // namespace h3::kernels
