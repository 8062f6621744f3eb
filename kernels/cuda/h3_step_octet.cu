// The octet kernel of the GPU decode step (h3_step_device.cuh, h3_step.cu
// for the others and the dispatch).
#include <cstdint>

#include "kernels/cuda/h3_step.h"
#include "kernels/cuda/h3_step_device.cuh"
#include "kernels/cuda/io_element.cuh"
#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/shared_memory.cuh"
#include "kernels/h3_step_lanes.h"

namespace h3::kernels::h3_step {
namespace {

// head_dim 1 with N / 8 lanes a channel, N / 8 a power of two up to a warp
// (N = 8, 16, 32, 64, 128, 256): the octet kernel. Lane L holds ring slots
// and diagonal floats [8 L, 8 L + 8) of its channel (two float4 of each),
// and the matching dA, dB, C in registers; the shift taps sit in shared
// memory twice over (kernels/h3_step_lanes.h), so that a lane reads the
// eight taps its slots meet instead of shuffling ring values between lanes.
// Against H3StepHeadDim1Kernel with float4 (N / 4 lanes) that halves the
// lanes a channel and with them the shuffles of the two lane sums, and
// drops the select chains of ShiftStep: by a count of the code, about a
// third of the instructions per sequence and channel for the same bytes (an
// H200's ncu found the float4 kernel issue-bound: 62% SM against 45% DRAM
// throughput). Measured on an H200, it is slower all the same (H3StepKernel,
// h3_step.h): ncu at batch 64 found 96 registers a thread (31% occupancy),
// 46% SM and 27% DRAM throughput, its warps waiting on loads; so it runs
// only where H3StepCuda is asked for it. Grid and sequence walk as
// H3StepHeadDim1Kernel's; shared memory: the block's channels' taps, 2 N + 1
// floats each (the 1 staggers their banks).
template <typename T>  // the elements of q, k, v and out
__global__ void __launch_bounds__(kThreads)
    H3StepOctetKernel(H3StepParams p, StepLayout l) {
  H3_DYNAMIC_SHARED(float, taps2, 4);
  const int d = p.w.shape.d_model, n_state = p.w.shape.d_state;
  const int lanes = l.lanes, per_block = kThreads / lanes;
  const int lane = threadIdx.x % lanes, local = threadIdx.x / lanes;
  const int64_t c0 = int64_t{blockIdx.x} * per_block, c = c0 + local;
  const bool active = c < d;
  const int64_t row = c * n_state + lane * kOctet;  // [d, N] and [H, M, 2]
  const int stride = 2 * n_state + 1;
  LetNextKernelStart();
  for (int e = threadIdx.x; e < per_block * 2 * n_state; e += kThreads) {
    const int ch = e / (2 * n_state), t = e % (2 * n_state);
    taps2[ch * stride + t] =
        c0 + ch < d ? p.w.shift_kernel[(c0 + ch) * n_state + t % n_state]
                    : 0.0f;
  }
  const float* taps = taps2 + local * stride;

  float da[kOctet] = {}, db[kOctet] = {}, cc[kOctet] = {};
  float shift_d = 0, skip_d = 0;
  if (active) {
    LoadVec<kOctet, false>(p.w.dA + row, l.weights_aligned, da);
    LoadVec<kOctet, false>(p.w.dB + row, l.weights_aligned, db);
    LoadVec<kOctet, false>(p.w.C + row, l.weights_aligned, cc);
    shift_d = p.w.shift_D[c];
    skip_d = p.w.D[c];
  }
  __syncthreads();  // the taps

  StepSequences<kOctet, T>(
      p, l, c, row, active, lane, lanes, da, db, cc, skip_d,
      [&](Slice<kOctet>& cur, int newest) {
#pragma unroll
        for (int i = 0; i < kOctet; ++i) {
          if (lane * kOctet + i == newest) cur.s[i] = cur.k;
        }
        return GroupSum(OctetShiftSum(taps, cur.s, cur.pos, lane, n_state),
                        lanes) +
               shift_d * cur.k;
      });
}

}  // namespace

cudaError_t LaunchOctet(const H3StepParams& p, StepLayout l,
                        cudaStream_t stream, LaunchOrder order) {
  const H3Weights& w = p.w;
  constexpr size_t kBytes = kVecAlignment<kOctet>;
  l.weights_aligned =
      Aligned(w.dA, kBytes) && Aligned(w.dB, kBytes) && Aligned(w.C, kBytes);
  const int channels_per_block = kThreads / l.lanes;
  const dim3 grid = SequenceGrid(p, channels_per_block, &l);
  const size_t shared =
      sizeof(float) * channels_per_block * (2 * w.shape.d_state + 1);
  return io::DispatchIo(p.io_type, [&](auto tag) {
    using T = decltype(tag);
    return LaunchInOrder(order, H3StepOctetKernel<T>, grid, dim3(kThreads),
                         shared, stream, p, l);
  });
}

}  // namespace h3::kernels::h3_step
