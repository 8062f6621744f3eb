// The CPU emulator of CUDA kernels (fibers.h, device.h, wmma.h) against
// CUDA's own rules: barriers, the shuffles' source lanes (widths below a
// warp included), votes, the WMMA product, and the errors it must report
// (a deadlock, lanes at different collectives, a lane outside the mask, a
// returned lane, __trap, a misaligned WMMA operand), cp.async copies
// that land at their wait (async_copy.cuh), and ldmatrix's fragments. Compiled
// with device.h first, so the small kernels here are CUDA source.
#include "kernels/cuda/emulator/fibers.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/mma_half.cuh"
#include "kernels/cuda/shared_memory.cuh"

namespace h3::emulator {
namespace {

using ::testing::HasSubstr;

// Each thread's `out[t]` after `body(t)` over one block of `threads`.
template <typename Body>
std::vector<int> PerThread(int threads, Body body,
                           Order order = Order::kForward,
                           size_t shared_bytes = 0) {
  std::vector<int> out(threads, -1);
  const std::string error = emulator::Run(
      dim3(1), dim3(threads), shared_bytes,
      [&] { out[threadIdx.x] = body(static_cast<int>(threadIdx.x)); }, order);
  EXPECT_EQ(error, "");
  return out;
}

TEST(EmulatorTest, BuiltInsNameEveryThreadAndBlockOnce) {
  std::vector<int> seen(2 * 3 * 4 * 5, 0);
  const std::string error = emulator::Run(dim3(2, 3), dim3(4, 5), 0, [&] {
    EXPECT_EQ(gridDim.x, 2u);
    EXPECT_EQ(blockDim.y, 5u);
    const int block = blockIdx.x + 2 * blockIdx.y;
    const int thread = threadIdx.x + 4 * threadIdx.y;
    ++seen[block * 20 + thread];
  });
  EXPECT_EQ(error, "");
  for (int s : seen) EXPECT_EQ(s, 1);
}

TEST(EmulatorTest, BlockBarrierOrdersSharedMemory) {
  for (const Order order : {Order::kForward, Order::kBackward}) {
    const std::vector<int> got = PerThread(
        96,
        [](int t) {
          __shared__ int cell[96];
          cell[t] = t;
          __syncthreads();
          return cell[(t + 37) % 96];
        },
        order);
    for (int t = 0; t < 96; ++t) EXPECT_EQ(got[t], (t + 37) % 96);
  }
}

// Without the barrier one of the two orders reads a cell before its
// writer ran: the emulator shows a missing barrier as wrong values.
TEST(EmulatorTest, AMissingBarrierShowsInOneOrder) {
  int wrong = 0;
  for (const Order order : {Order::kForward, Order::kBackward}) {
    const std::vector<int> got = PerThread(
        64,
        [](int t) {
          H3_DYNAMIC_SHARED(int, cell, 4);
          cell[t] = t;
          return cell[(t + 1) % 64];
        },
        order, 64 * sizeof(int));
    for (int t = 0; t < 64; ++t) wrong += got[t] != (t + 1) % 64;
  }
  EXPECT_GT(wrong, 0);
}

TEST(EmulatorTest, ShufflesReadTheLanesCudaDefines) {
  for (const int width : {32, 8}) {
    const std::vector<int> x = PerThread(
        64, [&](int t) { return __shfl_xor_sync(0xffffffffu, t, 5, width); });
    const std::vector<int> up = PerThread(
        64, [&](int t) { return __shfl_up_sync(0xffffffffu, t, 3, width); });
    const std::vector<int> down = PerThread(
        64, [&](int t) { return __shfl_down_sync(0xffffffffu, t, 3, width); });
    const std::vector<int> idx = PerThread(
        64, [&](int t) { return __shfl_sync(0xffffffffu, t, 13, width); });
    for (int t = 0; t < 64; ++t) {
      const int lane = t % 32, warp = t - lane, base = lane - lane % width;
      // xor: a source past the lane's segment reads the lane itself.
      const int xs = lane ^ 5;
      EXPECT_EQ(x[t], warp + (xs >= base + width ? lane : xs)) << t;
      EXPECT_EQ(up[t], warp + (lane - 3 < base ? lane : lane - 3)) << t;
      EXPECT_EQ(down[t], warp + (lane + 3 >= base + width ? lane : lane + 3))
          << t;
      EXPECT_EQ(idx[t], warp + base + 13 % width) << t;
    }
  }
}

// Spelled out for width 8 and lane mask 12: lane 1 would read lane 13, in
// a later segment, so reads itself; lane 9 reads lane 5, in an earlier
// one, which xor may.
TEST(EmulatorTest, XorReadsEarlierSegmentsButNotLaterOnes) {
  const std::vector<int> got = PerThread(
      32, [](int t) { return __shfl_xor_sync(0xffffffffu, t, 12, 8); });
  EXPECT_EQ(got[1], 1);
  EXPECT_EQ(got[9], 5);
  EXPECT_EQ(got[20], 20);  // 20 ^ 12 = 24: the next segment
  EXPECT_EQ(got[28], 16);
}

TEST(EmulatorTest, VotesCountTheLanesInTheMask) {
  const std::vector<int> got = PerThread(32, [](int t) {
    const unsigned ballot = __ballot_sync(0xffffffffu, t % 3 == 0);
    const int any = __any_sync(0xffffffffu, t == 31);
    const int all = __all_sync(0xffffffffu, t < 31);
    return static_cast<int>(__popc(ballot)) * 100 + any * 10 + all;
  });
  for (int v : got) EXPECT_EQ(v, 11 * 100 + 10 + 0);
  // A vote over half the warp: the other half takes no part.
  const std::vector<int> half = PerThread(32, [](int t) {
    if (t >= 16) return -2;
    return static_cast<int>(__ballot_sync(0x0000ffffu, 1));
  });
  for (int t = 0; t < 16; ++t) EXPECT_EQ(half[t], 0xffff);
}

TEST(EmulatorTest, WmmaProductIsTheMatrixProduct) {
  namespace wmma = nvcuda::wmma;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  alignas(32) __half a[16 * 16], b[16 * 16];
  alignas(32) float c[16 * 16], d[16 * 16];
  for (int i = 0; i < 256; ++i) {
    a[i] = __float2half_rn(normal(rng));
    b[i] = __float2half_rn(normal(rng));
    c[i] = normal(rng);
  }
  // a row-major (ldm 16), b column-major (ldm 16), c and d column-major.
  const std::string error = emulator::Run(dim3(1), dim3(32), 0, [&] {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::load_matrix_sync(acc, c, 16, wmma::mem_col_major);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(d, acc, 16, wmma::mem_col_major);
  });
  ASSERT_EQ(error, "");
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      double want = c[j * 16 + i];
      for (int k = 0; k < 16; ++k) {
        want += double{__half2float(a[i * 16 + k])} *
                double{__half2float(b[j * 16 + k])};
      }
      EXPECT_NEAR(d[j * 16 + i], want, 1e-5 * (1 + std::abs(want)));
    }
  }
}

TEST(EmulatorTest, WmmaRefusesAMisalignedOperand) {
  namespace wmma = nvcuda::wmma;
  alignas(32) __half a[16 * 16 + 8] = {};
  const std::string error = emulator::Run(dim3(1), dim3(32), 0, [&] {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::load_matrix_sync(fa, a + 8, 16);  // 16 bytes off
  });
  EXPECT_THAT(error, HasSubstr("not 256-bit aligned"));
}

TEST(EmulatorTest, ReportsADeadlock) {
  // Lane 1 waits at the block barrier, lane 0 for lane 1 at __syncwarp.
  const std::string error = emulator::Run(
      dim3(1), dim3(32), 0,
      [] {
        if (threadIdx.x == 1) __syncthreads();
        if (threadIdx.x < 2) __syncwarp(0x3u);
      },
      Order::kBackward);
  EXPECT_THAT(error, HasSubstr("deadlock"));
}

TEST(EmulatorTest, ReportsLanesAtDifferentCollectives) {
  const std::string error = emulator::Run(dim3(1), dim3(32), 0, [] {
    if (threadIdx.x == 0) {
      __shfl_xor_sync(0xffffffffu, 1, 1);
    } else {
      __syncwarp();
    }
  });
  EXPECT_THAT(error, HasSubstr("different collectives"));
}

// CUDA's collectives wait for the non-exited lanes of their mask only.
TEST(EmulatorTest, CollectivesWaitOnlyForLanesThatHaveNotReturned) {
  const std::vector<int> got = PerThread(32, [](int t) {
    if (t == 5) return -2;
    __syncwarp();
    const int all = __all_sync(0xffffffffu, 1);
    return static_cast<int>(__ballot_sync(0xffffffffu, 1)) + all;
  });
  for (int t = 0; t < 32; ++t) {
    EXPECT_EQ(got[t], t == 5 ? -2 : static_cast<int>(~(1u << 5)) + 1) << t;
  }
}

TEST(EmulatorTest, ReportsAShuffleFromALaneThatReturned) {
  const std::string error = emulator::Run(dim3(1), dim3(32), 0, [] {
    if (threadIdx.x == 5) return;
    __shfl_sync(0xffffffffu, 1, 5);
  });
  EXPECT_THAT(error, HasSubstr("one that returned"));
}

// A block's last warp short of 32 lanes: the full mask names lanes that do
// not exist, which take no part.
TEST(EmulatorTest, AShortLastWarpTakesTheFullMask) {
  const std::vector<int> got = PerThread(40, [](int t) {
    return __shfl_xor_sync(0xffffffffu, t, 1) +
           100 * __popc(__ballot_sync(0xffffffffu, 1));
  });
  for (int t = 0; t < 40; ++t) {
    EXPECT_EQ(got[t], (t ^ 1) + 100 * (t < 32 ? 32 : 8)) << t;
  }
}

// Divergent halves of a warp, each at its own collectives with its own
// mask, both waiting at once.
TEST(EmulatorTest, CollectivesOfDisjointMasksWaitTogether) {
  for (const Order order : {Order::kForward, Order::kBackward}) {
    const std::vector<int> got = PerThread(
        32,
        [](int t) {
          const unsigned half = t < 16 ? 0x0000ffffu : 0xffff0000u;
          int v = __shfl_xor_sync(half, t, 1);
          v = __shfl_xor_sync(half, v, 2);
          return v + 100 * __popc(__ballot_sync(half, t % 2));
        },
        order);
    for (int t = 0; t < 32; ++t) EXPECT_EQ(got[t], (t ^ 3) + 800) << t;
  }
}

// Seen when both wait at once: the full mask's lanes (16 .. 31, first in
// the backward order) wait for lanes 0 .. 15, which arrive with another.
TEST(EmulatorTest, ReportsCollectivesOfOverlappingMasks) {
  const std::string error = emulator::Run(
      dim3(1), dim3(32), 0,
      [] { __syncwarp(threadIdx.x < 16 ? 0x0000ffffu : 0xffffffffu); },
      Order::kBackward);
  EXPECT_THAT(error, HasSubstr("overlapping masks"));
}

TEST(EmulatorTest, RefusesWhatAnH100Refuses) {
  auto nothing = [] {};
  EXPECT_THAT(emulator::Run(dim3(1), dim3(1, 1, 65), 0, nothing),
              HasSubstr("block of 1 x 1 x 65"));
  EXPECT_THAT(emulator::Run(dim3(1), dim3(33, 32), 0, nothing),
              HasSubstr("at most 1024 threads"));
  EXPECT_THAT(emulator::Run(dim3(1, 65536), dim3(32), 0, nothing),
              HasSubstr("grid of 1 x 65536 x 1"));
  EXPECT_THAT(emulator::Run(dim3(1), dim3(32), 232449, nothing),
              HasSubstr("bytes of dynamic shared memory"));
  EXPECT_THAT(emulator::Run(dim3(1), dim3(32), 0,
                            [] { __shfl_sync(0xffffffffu, 1, 0, 12); }),
              HasSubstr("power of two"));
}

void AKernel() {}

// As on a GPU: past 48 KiB of dynamic shared memory a launch needs the
// kernel's opt-in, and the opt-in stops at the device's most.
TEST(EmulatorTest, DynamicSharedMemoryPast48KiBNeedsTheOptIn) {
  const void* id = reinterpret_cast<const void*>(&AKernel);
  const auto run = [&](size_t bytes) {
    return emulator::Run(dim3(1), dim3(32), bytes, AKernel,
                         emulator::DefaultOrder(), 1, id);
  };
  EXPECT_EQ(run(48 * 1024), "");
  EXPECT_THAT(run(64 * 1024), HasSubstr("past the kernel's limit 49152"));
  EXPECT_EQ(cudaFuncSetAttribute(
                id, cudaFuncAttributeMaxDynamicSharedMemorySize, 232449),
            cudaErrorInvalidValue);
  (void)cudaGetLastError();
  ASSERT_EQ(cudaFuncSetAttribute(
                id, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024),
            cudaSuccess);
  EXPECT_EQ(run(64 * 1024), "");
  EXPECT_THAT(run(64 * 1024 + 16), HasSubstr("past the kernel's limit 65536"));
  // Without a kernel to check against, only the device's limit.
  EXPECT_EQ(emulator::Run(dim3(1), dim3(32), 100 * 1024, AKernel), "");
}

TEST(EmulatorTest, ScopedOrderSetsTheDefault) {
  EXPECT_EQ(DefaultOrder(), Order::kForward);
  {
    const ScopedOrder backward(Order::kBackward);
    EXPECT_EQ(DefaultOrder(), Order::kBackward);
    // The last thread runs first: it sees nobody else's write.
    int first = -1;
    EXPECT_EQ(emulator::Run(dim3(1), dim3(4), 0,
                            [&] {
                              if (first < 0) first = threadIdx.x;
                            }),
              "");
    EXPECT_EQ(first, 3);
  }
  EXPECT_EQ(DefaultOrder(), Order::kForward);
}

// Clusters of 2 along x over a 4 x 2 grid: each block has its own
// H3_SHARED_ARRAY and dynamic shared memory, its own __syncthreads, and
// reads the other block's after cluster.sync; ranks follow blockIdx.x.
TEST(EmulatorTest, ClusterBlocksShareMemoryThroughMapSharedRank) {
  for (const Order order : {Order::kForward, Order::kBackward}) {
    std::vector<int> got(8 * 64, -1);
    const std::string error = emulator::Run(
        dim3(4, 2), dim3(64), 64 * sizeof(int),
        [&] {
          namespace cg = cooperative_groups;
          const cg::cluster_group cluster = cg::this_cluster();
          H3_SHARED_ARRAY(int, own, 64);
          H3_DYNAMIC_SHARED(int, dyn, 4);
          const int t = threadIdx.x, rank = cluster.block_rank();
          const int block = blockIdx.x + 4 * blockIdx.y;
          own[t] = 1000 * block + t;
          dyn[63 - t] = block;
          __syncthreads();
          const int mine = own[(t + 1) % 64];
          cluster.sync();
          const int other = static_cast<int>(cluster.num_blocks()) - 1 - rank;
          const int theirs = *cluster.map_shared_rank(own + t, other);
          const int theirs_dyn = *cluster.map_shared_rank(dyn + t, other);
          cluster.sync();
          got[block * 64 + t] = (mine == 1000 * block + (t + 1) % 64) +
                                (rank == static_cast<int>(blockIdx.x % 2)) +
                                (theirs == theirs_dyn * 1000 + t);
        },
        order, 2);
    ASSERT_EQ(error, "");
    for (int v : got) EXPECT_EQ(v, 3);
  }
}

// Without the second cluster.sync a block may return while the other still
// reads its shared memory: refused.
TEST(EmulatorTest, ReportsReadingTheSharedMemoryOfAReturnedBlock) {
  const std::string error = emulator::Run(
      dim3(2), dim3(32), 0,
      [] {
        namespace cg = cooperative_groups;
        const cg::cluster_group cluster = cg::this_cluster();
        H3_SHARED_ARRAY(float, own, 32);
        own[threadIdx.x] = 1.0f;
        cluster.sync();
        if (cluster.block_rank() == 1) {
          (void)*cluster.map_shared_rank(own + threadIdx.x, 0);
        }
      },
      Order::kForward, 2);
  EXPECT_THAT(error, HasSubstr("the block has returned"));
}

TEST(EmulatorTest, ReportsADeadlockAtTheClusterBarrier) {
  // Block 1's thread 0 waits at its __syncthreads, thread 1 at the cluster's
  // barrier: neither can be released.
  const std::string error = emulator::Run(
      dim3(2), dim3(2), 0,
      [] {
        if (blockIdx.x == 1 && threadIdx.x == 0) {
          __syncthreads();
        } else {
          cooperative_groups::this_cluster().sync();
        }
      },
      Order::kForward, 2);
  EXPECT_THAT(error, HasSubstr("deadlock"));
  EXPECT_THAT(error, HasSubstr("threads at cluster.sync"));
  EXPECT_THAT(error, HasSubstr("block 1,0,0: 1 of 2 live threads"));
}

TEST(EmulatorTest, RefusesClustersAnH100Refuses) {
  auto nothing = [] {};
  EXPECT_THAT(emulator::Run(dim3(4), dim3(32), 0, nothing, Order::kForward, 3),
              HasSubstr("clusters of 3"));
  EXPECT_THAT(
      emulator::Run(dim3(16), dim3(32), 0, nothing, Order::kForward, 16),
      HasSubstr("clusters of 16"));
  EXPECT_THAT(emulator::Run(
                  dim3(2), dim3(32), 0,
                  [] {
                    int x = 0;
                    (void)cooperative_groups::this_cluster().map_shared_rank(&x,
                                                                             1);
                  },
                  Order::kForward, 2),
              HasSubstr("not an address in the block's shared memory"));
}

TEST(EmulatorTest, ReportsAShuffleFromOutsideTheMask) {
  const std::string error = emulator::Run(dim3(1), dim3(32), 0, [] {
    if (threadIdx.x < 16) __shfl_sync(0x0000ffffu, 1, 20);
  });
  EXPECT_THAT(error, HasSubstr("outside the mask"));
}

TEST(EmulatorTest, TrapEndsTheLaunchWithWhere) {
  const std::string error = emulator::Run(dim3(3), dim3(8), 0, [] {
    if (blockIdx.x == 1 && threadIdx.x == 6) __trap();
  });
  EXPECT_THAT(error, HasSubstr("__trap (block 1,0,0 thread 6,0,0)"));
}

// A cp.async copy writes shared memory only at the wait that completes its
// group: before it the destination holds what it held (0xff), and a wait
// leaving one group in flight completes the older ones only.
TEST(EmulatorTest, AsyncCopiesLandAtTheWaitForTheirGroup) {
  const std::vector<int> source = {11, 22, 33, 44};
  std::vector<int> seen;
  const std::string error = emulator::Run(dim3(1), dim3(1), 0, [&] {
    H3_SHARED_ARRAY(int, cell, 4);
    kernels::CopyAsync<8>(cell, source.data());
    kernels::CommitCopies();
    kernels::CopyAsync<4>(cell + 2, source.data() + 2);
    kernels::CopyAsync<4>(cell + 3, source.data() + 3);
    kernels::CommitCopies();
    seen.push_back(cell[0]);
    kernels::WaitCopies<1>();
    seen.insert(seen.end(), {cell[0], cell[1], cell[2]});
    kernels::WaitCopies<0>();
    seen.insert(seen.end(), {cell[2], cell[3]});
  });
  EXPECT_EQ(error, "");
  EXPECT_EQ(seen, (std::vector<int>{-1, 11, 22, -1, 33, 44}));
}

TEST(EmulatorTest, RefusesAMisalignedAsyncCopy) {
  const std::vector<int> source = {1, 2, 3, 4};
  const std::string error = emulator::Run(dim3(1), dim3(1), 0, [&] {
    H3_SHARED_ARRAY(int, cell, 4);
    kernels::CopyAsync<8>(cell + 1, source.data());
  });
  EXPECT_THAT(error, HasSubstr("not aligned"));
}

// ldmatrix.x4 (kernels/cuda/mma_half.cuh), as the PTX ISA lays it out:
// lane l gives row l % 8 of matrix l / 8 and receives in register i the
// elements 2 (l % 4) and 2 (l % 4) + 1 of row l / 4 of matrix i, the first
// in the low half. Matrix i's element (row, column) is 64 i + 8 row +
// column here; the rows are given out of order to show they are read by
// address.
TEST(EmulatorTest, LdMatrixGivesEachLaneItsFragment) {
  std::vector<uint32_t> got(32 * 4);
  const std::string error = emulator::Run(dim3(1), dim3(32), 0, [&] {
    H3_SHARED_ARRAY(uint16_t, tile, 4 * 8 * 8);
    const int lane = static_cast<int>(threadIdx.x);
    for (int e = 0; e < 8; ++e) tile[8 * lane + e] = 8 * lane + e;
    __syncwarp();
    // Lane l's row: matrix l / 8, row l % 8, kept at row 7 - l % 8.
    const int stored = 8 * (lane / 8) + 7 - lane % 8;
    uint32_t r[4];
    kernels::LdMatrixX4(tile + 8 * stored, r);
    for (int i = 0; i < 4; ++i) got[4 * lane + i] = r[i];
  });
  ASSERT_EQ(error, "");
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      // Row lane / 4 of matrix i was stored at row 7 - lane / 4.
      const uint32_t first = 64 * i + 8 * (7 - lane / 4) + 2 * (lane % 4);
      EXPECT_EQ(got[4 * lane + i], first | (first + 1) << 16)
          << "lane " << lane << " register " << i;
    }
  }
}

}  // namespace
}  // namespace h3::emulator
