// The fused H3 decoding step. H3StepCpu (kernels/cpu/h3_step.cc) is the
// specification; this computes the same thing with one pass over the state.
//
// Decode is memory-bound: per sequence and step the kernel reads its whole
// state (the d N floats of the shift ring and the p^2 H M complex diagonal
// modes) and writes back the diagonal modes and one ring slot per channel,
// for a few flops per element. For d = 2048, N = 64, p = 1 that is 1.5 MiB
// of state traffic per sequence (0.5 MiB of ring read, 8 KiB written, 1 MiB
// of diagonal state read and written) against 2 MiB of SSM parameters
// (shift_kernel, dA, dB, C) shared by the batch, so the parameters are worth
// reusing: see H3StepHeadDim1Kernel for how.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/h3_step.h"
#include "kernels/cuda/h3_step_device.cuh"
#include "kernels/cuda/io_element.cuh"
#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/shared_memory.cuh"

namespace h3::kernels {
namespace h3_step {
namespace {

// The general kernel's shared memory (kbar[p] and y[p, p]) stays within the
// 48 KiB every GPU grants without an opt-in attribute.
constexpr size_t kSharedLimit = 48 * 1024;

// A p = 1 lane's ring slots [first, first + kVec): k into slot `newest`
// if the lane holds it.
template <int kVec>
__device__ __forceinline__ void PutNewest(float (&ring)[kVec], float k,
                                          int first, int newest) {
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    if (first + i == newest) ring[i] = k;
  }
}

// The shift SSM of one p = 1 lane for the ring slot newest = pos mod N:
// puts k in that slot and returns
//   kbar = shift_D k + sum_j kshift[j] ring[(pos - j) mod N],
// j from 0 to min(pos, N - 1), summed over the channel's `lanes`.
// Lane L holds ring slots and taps [L kVec, (L + 1) kVec). Tap
// j = L kVec + i needs slot u = (pos - j) mod N, which lane u / kVec holds
// in its register u mod kVec = (pos - i) mod kVec: the same register in
// every lane (N is a multiple of kVec, pos the same across the block), so
// tap i of every lane is served by one shuffle.
template <int kVec>
__device__ __forceinline__ float ShiftStep(float (&ring)[kVec],
                                           const float (&taps)[kVec],
                                           float shift_d, float k, int64_t pos,
                                           int newest, int n_state, int lane,
                                           int lanes) {
  const int first = lane * kVec;  // this lane's first slot and first tap
  PutNewest(ring, k, first, newest);
  // Slot of tap `first`: newest - first, brought into [0, N). Padding lanes
  // (first >= N) have zero taps; their slots only need to be in range.
  // lanes * kVec < 2 N, so two additions of N suffice.
  int slot0 = newest - first;
  if (slot0 < 0) slot0 += n_state;
  if (slot0 < 0) slot0 += n_state;
  const int turn = newest % kVec;
  float kbar = 0.0f;
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const int reg = (turn - i + kVec) % kVec;
    float send = ring[0];
#pragma unroll
    for (int r = 1; r < kVec; ++r) send = reg == r ? ring[r] : send;
    int slot = slot0 - i;
    if (slot < 0) slot += n_state;
    const float got = __shfl_sync(kFullMask, send, slot / kVec, lanes);
    // Taps past pos would reach before position 0: skipped (their slots
    // are zero in a well-formed state anyway).
    if (first + i <= pos) kbar += taps[i] * got;
  }
  return GroupSum(kbar, lanes) + shift_d * k;
}

// ShiftStep where the channel's lanes hold its ring exactly: kLanes kVec ==
// N, kLanes a power of two (N 64 with float4s: every released H3 model).
// With newest = kVec a + turn (turn < kVec), tap j = L kVec + i of lane L
// needs slot u = (newest - j) mod N: in lane (a - L) mod kLanes ("here") for
// i <= turn, in the lane before it for i > turn, and in register
// (turn - i) mod kVec either way. So a lane reads two source lanes, and
// tap i's register is the same in every lane (newest is block-uniform):
// the same slots as ShiftStep, summed in the same order, with no slot
// arithmetic a tap, no per-tap 64-bit compare once pos has passed N - 1,
// and the lane sums unrolled for kLanes. With the register walk of 24b03d7
// (two sequences' slices in registers) the walk went from about 330 to 225
// instructions a sequence (nvdisasm); on an H200 a batch-64 step took 46.9
// us a layer, against 50.0 with the lanes at run time (kRuntimeLanes); with
// the cp.async walk of 0e387a3, 41.5 against 45.9.
template <int kVec, int kLanes>
__device__ __forceinline__ float ExactShiftStep(float (&ring)[kVec],
                                                const float (&taps)[kVec],
                                                float shift_d, float k,
                                                int64_t pos, int newest,
                                                int lane) {
  static_assert((kVec & (kVec - 1)) == 0 && (kLanes & (kLanes - 1)) == 0);
  constexpr int kN = kVec * kLanes;
  const int first = lane * kVec;
  PutNewest(ring, k, first, newest);
  const int turn = newest & (kVec - 1);
  const int here = (newest / kVec - lane) & (kLanes - 1);
  const int before = (here - 1) & (kLanes - 1);
  // Taps past pos would reach before position 0: skipped while pos < N - 1.
  const int reach = pos >= kN - 1 ? kN : static_cast<int>(pos);
  // rot[j] = ring[(j + turn) mod kVec], rotated a bit of turn at a time,
  // so tap i sends rot[-i mod kVec] = ring[(turn - i) mod kVec].
  float rot[kVec];
#pragma unroll
  for (int j = 0; j < kVec; ++j) rot[j] = ring[j];
#pragma unroll
  for (int bit = 1; bit < kVec; bit *= 2) {
    const bool on = (turn & bit) != 0;
    float moved[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      moved[j] = on ? rot[(j + bit) & (kVec - 1)] : rot[j];
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) rot[j] = moved[j];
  }
  float kbar = 0.0f;
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const float got = __shfl_sync(kFullMask, rot[(kVec - i) & (kVec - 1)],
                                  i <= turn ? here : before, kLanes);
    if (first + i <= reach) kbar += taps[i] * got;
  }
  return GroupSum(kbar, kLanes) + shift_d * k;
}

// head_dim 1. Channel c is head c, and its shift ring (N floats) and diagonal
// row (M = N / 2 complex) have the same size: a group of `lanes` threads owns
// channel c, lane j holding floats [j kVec, (j + 1) kVec) of both rows and
// of the matching parameter rows (shift_kernel, dA, dB, C). Lanes past N
// (N / kVec not a power of two) hold zeros and only take part in the
// shuffles.
//
// Grid: (channel tiles of kThreads / lanes channels, sequence groups). A
// block loads its channels' parameters into registers once and walks through
// `sequences_per_block` sequences (StepSequences), with kStages sequences'
// state in flight at once: copied into shared memory (cp.async), which
// holds no register while the copies wait on HBM. Before that change
// (7e0c717) a lane loaded the next sequence's slice into registers while
// it stepped the current one, so a block had at most two sequences' state
// in flight. On an H200 (h3_step_bench, H3-1.3B layer, fp16) a batch-64
// step took 41.3 us against 46.9 (9.3 against 9.9 at batch 8, the same at
// batch 1); with an evict-first L2 hint on the copies it took 49.7.
//
// The sequences' state addresses and positions are copied into shared
// memory first (StageSequences): read from the arrays in the walk, each
// sequence's state loads waited on a load of their address (an L2 round
// trip, then the HBM one, per sequence). The same threads send the block's
// rows of the sequences past the first kStages towards L2. The
// alternative, one block per (channel tile, sequence) with parameters
// re-read from L2, sends the parameters through L2 once per sequence: 2
// MiB against 1.5 MiB of state traffic for d 2048, N 64, which more than
// doubles the L2 traffic; the grouping divides that by the group size and
// still leaves kTargetBlocks blocks to fill the GPU.
//
// Per sequence a lane reads its kVec ring slots (vector copies) but writes
// at most one: the lane owning slot pos mod N stores k there, a scalar
// store.
//
// kLanes: 0 for any lanes (l.lanes, ShiftStep); else l.lanes at compile
// time, the ring held exactly (kLanes kVec == N: ExactShiftStep).
// Eight blocks an SM (64 registers, 16.4 KiB of shared memory a block with
// kVec 4): ptxas takes 63 registers for the exact-lanes instances and
// spills 8 bytes in the runtime-lanes ones (sm_90a); unbounded they take
// 73 to 76, and six blocks fit (52.5 us at batch 64 on the H200, with the
// L2 hint, against 49.7 with eight).
template <int kVec, typename T, int kLanes>  // T: q, k, v and out's elements
__global__ void __launch_bounds__(kThreads, 8)
    H3StepHeadDim1Kernel(H3StepParams p, StepLayout l) {
  const int d = p.w.shape.d_model, n_state = p.w.shape.d_state;
  const int lanes = kLanes > 0 ? kLanes : l.lanes;
  const int lane = threadIdx.x % lanes;
  const int64_t c =
      int64_t{blockIdx.x} * (kThreads / lanes) + threadIdx.x / lanes;
  const bool active = c < d && lane * kVec < n_state;
  const int64_t row = c * n_state + lane * kVec;  // [d, N] and [H, M, 2]
  LetNextKernelStart();

  float taps[kVec] = {}, da[kVec] = {}, db[kVec] = {}, cc[kVec] = {};
  float shift_d = 0, skip_d = 0;
  if (active) {
    LoadVec<kVec>(p.w.shift_kernel + row, l.weights_aligned, taps);
    LoadVec<kVec>(p.w.dA + row, l.weights_aligned, da);
    LoadVec<kVec>(p.w.dB + row, l.weights_aligned, db);
    LoadVec<kVec>(p.w.C + row, l.weights_aligned, cc);
    shift_d = p.w.shift_D[c];
    skip_d = p.w.D[c];
  }

  StepSequences<kVec, T>(
      p, l, c, row, active, lane, lanes, da, db, cc, skip_d,
      [&](Slice<kVec>& cur) {
        if constexpr (kLanes > 0) {
          return ExactShiftStep<kVec, kLanes>(cur.s, taps, shift_d, cur.k,
                                              cur.pos, cur.newest, lane);
        } else {
          return ShiftStep<kVec>(cur.s, taps, shift_d, cur.k, cur.pos,
                                 cur.newest, n_state, lane, lanes);
        }
      });
}

__device__ __forceinline__ float WarpSum(float x) { return GroupSum(x, kWarp); }

// Any head_dim and state size, scalar loads: the simple path for p > 1
// (pure H3 models), for p = 1 with N too large for one warp per channel, and
// the reference layout of the math. Grid: one block per (sequence, head),
// flattened; warps take the head's p shift rows, then its p^2 kv rows.
// Shared memory: kbar [p], then y [p, p] ordered (d1, d2).
template <typename T>  // the elements of q, k, v and out
__global__ void __launch_bounds__(kThreads)
    H3StepGeneralKernel(H3StepParams p, StepLayout l) {
  H3_DYNAMIC_SHARED(float, shared, 4);
  const int d = p.w.shape.d_model, pd = p.w.shape.head_dim;
  const int n_state = p.w.shape.d_state, heads = l.heads, modes = l.modes;
  const int b = static_cast<int>(blockIdx.x / heads);
  const int h = static_cast<int>(blockIdx.x % heads);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int warps = kThreads / kWarp;
  LetNextKernelStart();
  WaitForPriorKernel();
  const H3State state = p.states[b];
  const int64_t in = b * l.input_stride + int64_t{h} * pd;
  float* kbar = shared;
  float* y = shared + pd;
  const T* q_in = static_cast<const T*>(p.q) + in;
  const T* k_in = static_cast<const T*>(p.k) + in;
  const T* v_in = static_cast<const T*>(p.v) + in;

  // Shift SSM on the ring: k goes to slot `newest`; tap j >= 1 reads slot
  // (newest - j) mod N, for j <= pos only (earlier taps reach before
  // position 0). Tap 0 is k itself, taken from the input, so no lane reads
  // the slot lane 0 writes.
  const int64_t pos = p.positions[b];
  const int newest = static_cast<int>(pos % n_state);
  const int taps = static_cast<int>(min(pos, int64_t{n_state} - 1)) + 1;
  for (int i = warp; i < pd; i += warps) {
    const int64_t c = int64_t{h} * pd + i;
    float* ring = state.shift + c * n_state;
    const float* kshift = p.w.shift_kernel + c * n_state;
    const float k = io::ToFloat(k_in[i]);
    float sum = 0.0f;
    for (int j = 1 + lane; j < taps; j += kWarp) {
      const int slot = newest - j < 0 ? newest - j + n_state : newest - j;
      sum += kshift[j] * ring[slot];
    }
    sum = WarpSum(sum);
    if (lane == 0) {
      ring[newest] = k;
      kbar[i] = sum + kshift[0] * k + p.w.shift_D[c] * k;
    }
  }
  __syncthreads();

  const int64_t param = int64_t{h} * modes * 2;  // [H, M, 2]
  for (int r = warp; r < pd * pd; r += warps) {
    const int d1 = r / pd, d2 = r % pd;
    const float kv = kbar[d1] * io::ToFloat(v_in[d2]);
    float* x = state.diag + (int64_t{r} * heads + h) * modes * 2;
    float sum = 0.0f;
    for (int m = lane; m < modes; m += kWarp) {
      const float* a = p.w.dA + param + 2 * m;
      const float* bb = p.w.dB + param + 2 * m;
      const float* cc = p.w.C + param + 2 * m;
      const float xr = x[2 * m], xi = x[2 * m + 1];
      const float re = a[0] * xr - a[1] * xi + bb[0] * kv;
      const float im = a[0] * xi + a[1] * xr + bb[1] * kv;
      x[2 * m] = re;
      x[2 * m + 1] = im;
      sum += cc[0] * re - cc[1] * im;
    }
    sum = WarpSum(sum);
    if (lane == 0) y[r] = 2.0f * sum + p.w.D[h] * kv;
  }
  __syncthreads();

  // out[(d2 h)] = sum_d1 q[h p + d1] y[d1, d2]
  for (int d2 = threadIdx.x; d2 < pd; d2 += kThreads) {
    float sum = 0.0f;
    for (int d1 = 0; d1 < pd; ++d1) {
      sum += io::ToFloat(q_in[d1]) * y[d1 * pd + d2];
    }
    static_cast<T*>(p.out)[int64_t{b} * d + int64_t{d2} * heads + h] =
        io::FromFloat<T>(sum);
  }
}

// The float4 kernel's instance with its lanes known at compile time: N 64
// (ExactShiftStep).
constexpr int kExactLanes = 16;

// Lanes per channel of the p = 1 kernel for N floats per row in vectors of
// `vec`: the power of two >= N / vec, or 0 when that exceeds a warp.
int LanesFor(int n_state, int vec) {
  int lanes = 1;
  while (lanes * vec < n_state) lanes *= 2;
  return lanes <= kWarp ? lanes : 0;
}

template <int kVec, typename T, int kLanes = 0>
cudaError_t LaunchHeadDim1(const H3StepParams& p, StepLayout l,
                           int sequences_per_block, cudaStream_t stream,
                           LaunchOrder order) {
  const H3Weights& w = p.w;
  constexpr size_t kBytes = kVecAlignment<kVec>;
  l.weights_aligned = Aligned(w.shift_kernel, kBytes) &&
                      Aligned(w.dA, kBytes) && Aligned(w.dB, kBytes) &&
                      Aligned(w.C, kBytes);
  const dim3 grid =
      SequenceGrid(p, kThreads / l.lanes, sequences_per_block, &l);
  return LaunchInOrder(order, H3StepHeadDim1Kernel<kVec, T, kLanes>, grid,
                       dim3(kThreads), 0, stream, p, l);
}

template <typename T>
cudaError_t LaunchGeneral(const H3StepParams& p, const StepLayout& l,
                          cudaStream_t stream, LaunchOrder order) {
  const int pd = p.w.shape.head_dim;
  const size_t shared = sizeof(float) * (pd + size_t{1} * pd * pd);
  const int64_t blocks = int64_t{p.batch} * l.heads;
  if (shared > kSharedLimit || blocks > INT32_MAX) return cudaErrorNotSupported;
  return LaunchInOrder(order, H3StepGeneralKernel<T>,
                       dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
                       shared, stream, p, l);
}

bool ValidShape(const H3Shape& s) {
  return s.d_model > 0 && s.head_dim > 0 && s.d_state > 0 &&
         s.d_state % 2 == 0 && s.d_model % s.head_dim == 0;
}

}  // namespace
}  // namespace h3_step

cudaError_t H3StepCuda(const H3StepParams& params, cudaStream_t stream,
                       LaunchOrder order, H3StepKernel kernel,
                       int sequences_per_block) {
  using h3_step::LanesFor;
  using h3_step::LaunchGeneral;
  using h3_step::LaunchHeadDim1;
  using h3_step::StepLayout;
  const H3Weights& w = params.w;
  if (!h3_step::ValidShape(w.shape) || params.batch < 0 ||
      params.input_stride < 0 || sequences_per_block < 0) {
    return cudaErrorInvalidValue;
  }
  if (params.batch == 0) return cudaSuccess;
  if (params.q == nullptr || params.k == nullptr || params.v == nullptr ||
      params.out == nullptr || params.states == nullptr ||
      params.positions == nullptr || w.shift_kernel == nullptr ||
      w.shift_D == nullptr || w.dA == nullptr || w.dB == nullptr ||
      w.C == nullptr || w.D == nullptr) {
    return cudaErrorInvalidValue;
  }
  StepLayout l;
  l.heads = w.shape.heads();
  l.modes = w.shape.modes();
  l.input_stride =
      params.input_stride > 0 ? params.input_stride : w.shape.d_model;
  return io::DispatchIo(params.io_type, [&](auto tag) {
    using T = decltype(tag);
    if (w.shape.head_dim == 1) {
      const int n_state = w.shape.d_state;
      if (n_state % 4 == 0 && (l.lanes = LanesFor(n_state, 4)) > 0) {
        if (n_state == 4 * h3_step::kExactLanes &&
            kernel != H3StepKernel::kRuntimeLanes) {
          return LaunchHeadDim1<4, T, h3_step::kExactLanes>(
              params, l, sequences_per_block, stream, order);
        }
        return LaunchHeadDim1<4, T>(params, l, sequences_per_block, stream,
                                    order);
      }
      if ((l.lanes = LanesFor(n_state, 2)) > 0) {
        return LaunchHeadDim1<2, T>(params, l, sequences_per_block, stream,
                                    order);
      }
    }
    return LaunchGeneral<T>(params, l, stream, order);
  });
}

int64_t H3StepBytes(const H3Shape& shape, int batch) {
  if (!h3_step::ValidShape(shape) || batch <= 0) return 0;
  const int64_t d = shape.d_model, n = shape.d_state, heads = shape.heads();
  const int64_t diag = 2 * int64_t{shape.kv_channels()} * shape.modes();
  // The shift ring is read whole (d N) and written one slot a channel (d);
  // the diagonal state is read and written whole.
  const int64_t state = d * n + d + 2 * diag;
  // shift_kernel, shift_D; dA, dB, C (complex); D.
  const int64_t params = d * n + d + 3 * 2 * heads * shape.modes() + heads;
  const int64_t rows = 4 * d;  // q, k, v read, out written
  return static_cast<int64_t>(sizeof(float)) *
         (batch * (state + rows) + params);
}

}  // namespace h3::kernels
