#ifndef H3_KERNELS_CUDA_EMULATOR_FIBERS_H_
#define H3_KERNELS_CUDA_EMULATOR_FIBERS_H_

// Runs CUDA kernel source on the CPU, for the tests of kernels no GPU has
// run yet. A test compiles the kernel's .cu file as host C++ with
// kernels/cuda/emulator/device.h included first (H3_CUDA_EMULATOR defined),
// and calls the kernel inside Run.
//
// Every thread of a block is a fiber (ucontext) on the calling thread, with
// its own stack. A fiber runs until it waits, at a block barrier or a warp
// collective (__syncwarp, a shuffle, a vote, a WMMA product), or returns;
// then the next ready fiber runs, in a fixed order, so a run is
// deterministic. Blocks run one after another, so static __shared__
// variables (plain statics here) and the dynamic shared buffer serve one
// block at a time; the buffer is filled with 0xff bytes (NaN in every float
// type) before each block, so reading shared memory nobody wrote shows.
//
// What it checks, beyond the results a test compares: a barrier or
// collective that some threads never reach (a deadlock: Run returns what
// each thread waits for), the lanes of a warp at different collectives or
// with different masks, a lane outside the mask calling one, a lane exiting
// while its warp waits for it, a shuffle reading a lane outside the mask,
// misaligned or ill-strided WMMA operands, __trap. A fiber that runs ahead
// without a barrier reads what the others have not written yet, so a
// missing __syncwarp or __syncthreads changes the results; Order::kBackward
// runs the fibers last to first, to expose the ones the forward order hides.
// Not modelled: timing, memory ordering between blocks, warp-synchronous
// code without barriers (undefined since Volta anyway), the exact rounding
// of tensor-core sums (fp32, in k order here).

#include <vector_types.h>

#include <cstddef>
#include <functional>
#include <string>

namespace h3::emulator {

// The emulated H100's limits: what a launch may ask for, and what
// runtime.cc's cudaDeviceGetAttribute reports.
inline constexpr unsigned kMaxThreadsPerBlock = 1024;
inline constexpr size_t kMaxDynamicShared = 232448;
// Without the opt-in.
inline constexpr size_t kDefaultDynamicShared = 48 * 1024;
inline constexpr int kMultiProcessors = 132;
// For the occupancy queries (runtime.cc): a multiprocessor's shared memory,
// threads and blocks, and the shared memory the system keeps per block.
inline constexpr size_t kSharedPerMultiprocessor = 228 * 1024;
inline constexpr size_t kSharedReservedPerBlock = 1024;
inline constexpr int kThreadsPerMultiprocessor = 2048;
inline constexpr int kBlocksPerMultiprocessor = 32;

enum class Order { kForward, kBackward };

// The order of a Run that names none: kForward, or the innermost live
// ScopedOrder's on this thread (so that a test can run host code that
// launches through LaunchInOrder in either order).
Order DefaultOrder();
class ScopedOrder {
 public:
  explicit ScopedOrder(Order order);
  ~ScopedOrder();
  ScopedOrder(const ScopedOrder&) = delete;
  ScopedOrder& operator=(const ScopedOrder&) = delete;

 private:
  Order previous_;
};

// Runs kernel() once in every thread of every block (blocks in x, then y,
// then z order), with dynamic_shared_bytes of dynamic shared memory a
// block. With cluster > 1, the blocks form thread-block clusters of
// `cluster` consecutive blocks along x (grid.x a multiple of it, at most
// 8), whose threads run together (cluster.sync, map_shared_rank). Returns
// "" when every thread returned, else what went wrong (an H100 would
// refuse the configuration; or the rest of the launch is abandoned). Not
// reentrant: one Run at a time a process (static __shared__ variables are
// plain statics). kernel_id, when given, is the kernel function: a launch
// asking for more than 48 KiB of dynamic shared memory needs its opt-in
// (cudaFuncAttributeMaxDynamicSharedMemorySize, runtime.cc), as on a GPU.
// The kernel's static shared memory is not counted: the emulator does not
// know it (docs/cuda-emulator.md).
std::string Run(dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                const std::function<void()>& kernel,
                Order order = DefaultOrder(), unsigned cluster = 1,
                const void* kernel_id = nullptr);

// The dynamic shared memory a launch of the kernel function `kernel_id` may
// ask for: 48 KiB, or what cudaFuncSetAttribute last opted it in to.
size_t DynamicSharedLimit(const void* kernel_id);
void SetDynamicSharedLimit(const void* kernel_id, size_t bytes);

// What the last Run on this thread returned: for the tests of host code
// that launches through LaunchInOrder (kernels/cuda/launch_order.cuh),
// which turns it into cudaErrorLaunchFailure.
const std::string& LastRunError();

// The running thread's built-in variables.
const uint3& ThreadIndex();
const uint3& BlockIndex();
const dim3& BlockDim();
const dim3& GridDim();
// The lane (0 .. 31) of the running thread in its warp.
int LaneId();

// The block's dynamic shared memory (aligned to 256 bytes; align must not
// exceed that); null for a launch without any, so that using it faults.
void* DynamicShared(size_t align);

// The running block's copy of the static __shared__ array `tag` names
// (H3_SHARED_ARRAY, kernels/cuda/shared_memory.cuh): `bytes`, 0xff at the
// block's start.
void* BlockStatic(const void* tag, size_t bytes);

// __syncthreads: waits until every thread of the block that has not
// returned is here.
void SyncThreads();

// The thread-block cluster of the running block: its rank, the cluster's
// size, cluster.sync() (every thread of the cluster that has not
// returned), and map_shared_rank: the address in block `rank`'s shared
// memory of `address` in this block's (dynamic, or an H3_SHARED_ARRAY).
int ClusterRank();
int ClusterSize();
void ClusterSync();
void* MapSharedRank(const void* address, int rank);

// A warp collective's per-lane slots: what each lane brings (in, arg) and
// takes away (out).
struct Lane {
  alignas(16) unsigned char in[128];
  alignas(16) unsigned char out[128];
  int arg;
};
// Computes the out of each lane in `lanes_in` (the lanes taking part)
// from their in and arg, writing no other lane's; returns nullptr, or what
// is wrong.
using Combine = const char* (*)(Lane* lanes, unsigned lanes_in);

// The lanes in mask that have not returned (CUDA: "all non-exited threads
// named in mask") each call this with the same `what` and mask; the last
// to arrive runs combine over those that came; each lane then gets its
// out. Collectives of disjoint masks may wait at once; overlapping ones
// are an error. in_bytes and out_bytes <= 128.
void WarpCollective(const char* what, unsigned mask, Combine combine,
                    const void* in, size_t in_bytes, int arg, void* out,
                    size_t out_bytes);

// Asynchronous copies into shared memory (cp.async): AsyncCopy queues a
// copy of `bytes` (4, 8 or 16; both addresses aligned to it) for the
// running thread, AsyncCommit closes the thread's queued copies into a
// group, and AsyncWait(pending) performs the thread's oldest committed
// groups until at most `pending` remain. A copy reads its source and
// writes its destination only then, so shared memory read before its
// wait still holds what it held before (0xff at a block's start, or an
// earlier copy's data): a wait with the wrong count shows. Copies still
// queued when the thread returns are dropped.
void AsyncCopy(void* shared_dst, const void* global_src, size_t bytes);
void AsyncCommit();
void AsyncWait(int pending);

// Ends the launch with what + detail as its error.
[[noreturn]] void Trap(const char* what, const char* detail = "");

}  // namespace h3::emulator

#endif  // H3_KERNELS_CUDA_EMULATOR_FIBERS_H_
