#ifndef H3_KERNELS_CUDA_H3_STEP_DEVICE_CUH_
#define H3_KERNELS_CUDA_H3_STEP_DEVICE_CUH_

// The GPU decode step's device-side pieces (h3_step.cu holds the float4 /
// float2 head_dim-1 kernel, the general kernel and the dispatch): launch
// constants, the layout, vector loads of state and parameters, lane sums,
// a sequence's slice, the diagonal SSM's update and the walk through a
// block's sequences. Internal to h3_step.cu.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/io_element.cuh"
#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/prefetch.cuh"
#include "kernels/cuda/shared_memory.cuh"
#include "kernels/h3.h"

namespace h3::kernels::h3_step {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
// Every kernel uses 4-warp blocks: small enough that the p = 1 kernels' grids
// have many blocks at batch 1, large enough to keep per-block overheads low.
constexpr int kThreads = 128;
// The p = 1 kernel aims at about this many blocks, then lets a block walk
// through more sequences instead, reusing its parameters from registers. Its
// float4 instances are bounded to 64 registers a thread (ptxas, sm_90a), so
// 8 blocks fit an SM: 4096 blocks are about four waves on the 132 SMs of
// an H100 (five on an A100's 108), enough that the last wave's tail costs
// little.
constexpr int64_t kTargetBlocks = 4096;
// ...and no more sequences than this per block, so that big batches still
// spread over the whole GPU rather than serialise inside few blocks.
constexpr int kMaxSequencesPerBlock = 16;
// The sequences whose state a p = 1 block has in flight at once: each
// lane's slices of kStages sequences are copied into shared memory ahead
// of their step (cp.async), so a block of 4 sequences (batch 64 of the
// 1.3B shape) asks for all of its state at once, 16 KiB, without holding
// registers for it.
constexpr int kStages = 4;
constexpr int kMaxGridY = 65535;

// What the kernels need beyond the Params: sizes H3Shape computes only on
// the host, and the launch's choices.
struct StepLayout {
  int heads = 0;
  int modes = 0;
  int64_t input_stride = 0;  // resolved: d when the Params say 0
  int lanes = 0;             // p = 1 kernel: threads per channel
  int sequences_per_block = 0;
  bool weights_aligned = false;  // p = 1 kernel: vector loads of parameters
};

// The byte alignment LoadVec and StoreVec need for kVec floats as vectors:
// a float2 for 2, float4s for 4 and 8.
template <int kVec>
constexpr size_t kVecAlignment = sizeof(float) * (kVec < 4 ? kVec : 4);

// kVec consecutive floats from `src` (parameters, read through the
// read-only cache): vector loads when `aligned` (src kVecAlignment bytes
// aligned), else scalar loads.
template <int kVec>
__device__ __forceinline__ void LoadVec(const float* src, bool aligned,
                                        float (&dst)[kVec]) {
  if (aligned) {
    if constexpr (kVec == 2) {
      const float2 v = __ldg(reinterpret_cast<const float2*>(src));
      dst[0] = v.x, dst[1] = v.y;
    } else {
#pragma unroll
      for (int i = 0; i < kVec; i += 4) {
        const float4 v = __ldg(reinterpret_cast<const float4*>(src + i));
        dst[i] = v.x, dst[i + 1] = v.y, dst[i + 2] = v.z, dst[i + 3] = v.w;
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) dst[i] = src[i];
  }
}

template <int kVec>
__device__ __forceinline__ void StoreVec(const float (&src)[kVec], bool aligned,
                                         float* dst) {
  if (aligned) {
    if constexpr (kVec == 2) {
      __stcs(reinterpret_cast<float2*>(dst), make_float2(src[0], src[1]));
    } else {
#pragma unroll
      for (int i = 0; i < kVec; i += 4) {
        __stcs(reinterpret_cast<float4*>(dst + i),
               make_float4(src[i], src[i + 1], src[i + 2], src[i + 3]));
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) dst[i] = src[i];
  }
}

// Sum over the `width` lanes (a power of two up to a warp) of each aligned
// lane group: offsets width / 2, ..., 1 in turn. Unrolled over a warp's
// offsets, the ones from width skipped (width is the same in every lane),
// rather than a loop on width: fewer instructions a call.
__device__ __forceinline__ float GroupSum(float x, int width) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    if (offset < width) x += __shfl_xor_sync(kFullMask, x, offset, width);
  }
  return x;
}

// A lane's rows of a sequence's state (its kVec ring and diagonal floats),
// and whether both are aligned for vector access: where IssueSlice copies
// them from and StoreStep writes them back to (RowsOf).
struct StateRows {
  float* shift = nullptr;
  float* diag = nullptr;
  bool aligned = false;
};

// One sequence's share of a p = 1 lane: its slice of the channel's shift
// ring and diagonal state, the channel's q, k, v and the token's position.
// Every lane of a block steps the same sequence, so `pos` is block-uniform.
template <int kVec>
struct Slice {
  StateRows rows{};  // where the state goes back (StoreStep)
  float s[kVec] = {};
  float x[kVec] = {};
  float q = 0, k = 0, v = 0;
  int64_t pos = 0;
  int newest = 0;  // pos mod N
};

// The block's first kMaxSequencesPerBlock sequences' states and positions,
// copied into shared memory once (StageSequences), so that loading a
// sequence's state does not first wait on a load of the state's address.
// Plain arrays (H3State's members have initializers, which a __shared__
// variable may not run).
struct BlockSequences {
  float* shift[kMaxSequencesPerBlock];  // H3State::shift
  float* diag[kMaxSequencesPerBlock];   // H3State::diag
  int64_t pos[kMaxSequencesPerBlock];
  int newest[kMaxSequencesPerBlock];  // pos mod N: the ring slot of k
};

// A hint: the rows of the block's channels in one sequence's state (its
// ring and diagonal rows, each channels x N floats from float `row0`) into
// L2, a 128-byte line at a time.
__device__ __forceinline__ void PrefetchRows(const float* shift,
                                             const float* diag, int64_t row0,
                                             int64_t floats) {
  for (int64_t f = 0; f < floats; f += 32) {
    PrefetchL2(shift + row0 + f);
    PrefetchL2(diag + row0 + f);
  }
}

// Fills `s` for the block's sequences from `first` (below `last`); every
// thread of the block calls it, after the wait for the kernel before. The
// thread that stages a sequence after the first kStages also sends the
// block's rows of its state towards L2 (PrefetchRows), so that the walk,
// which asks for the first kStages at once, finds the later ones' lines
// there.
__device__ __forceinline__ void StageSequences(const H3StepParams& p,
                                               const StepLayout& l, int first,
                                               int last, BlockSequences& s) {
  const int i = static_cast<int>(threadIdx.x);
  if (i < kMaxSequencesPerBlock && first + i < last) {
    s.shift[i] = p.states[first + i].shift;
    s.diag[i] = p.states[first + i].diag;
    s.pos[i] = p.positions[first + i];
    s.newest[i] = static_cast<int>(s.pos[i] % p.w.shape.d_state);
    if (i >= kStages) {
      const int64_t per_block = kThreads / l.lanes;  // channels
      const int64_t c0 = int64_t{blockIdx.x} * per_block;
      const int64_t channels = min(per_block, p.w.shape.d_model - c0);
      const int64_t n = p.w.shape.d_state;
      PrefetchRows(s.shift[i], s.diag[i], c0 * n, channels * n);
    }
  }
  __syncthreads();
}

// Sequence b's state, position and ring slot (pos mod N): staged, or (past
// the staged ones: only for batches over kMaxSequencesPerBlock x kMaxGridY)
// from global memory.
struct Sequence {
  H3State state;
  int64_t pos;
  int newest;
};
__device__ __forceinline__ Sequence SequenceAt(const H3StepParams& p,
                                               const BlockSequences& s,
                                               int first, int b) {
  const int i = b - first;
  if (i >= kMaxSequencesPerBlock) {
    const int64_t pos = p.positions[b];
    return {p.states[b], pos, static_cast<int>(pos % p.w.shape.d_state)};
  }
  H3State state;
  state.shift = s.shift[i];
  state.diag = s.diag[i];
  return {state, s.pos[i], s.newest[i]};
}

// Sequence `seq`'s StateRows for the lane's `row`.
template <int kVec>
__device__ __forceinline__ StateRows RowsOf(const Sequence& seq, int64_t row) {
  StateRows r{seq.state.shift + row, seq.state.diag + row, false};
  r.aligned = ((reinterpret_cast<uintptr_t>(r.shift) |
                reinterpret_cast<uintptr_t>(r.diag)) %
               kVecAlignment<kVec>) == 0;
  return r;
}

// A lane's two rows of one walk stage in the block's shared memory: its
// kVec ring floats, then (ring + kThreads kVec) its kVec diagonal floats.
template <int kVec>
__device__ __forceinline__ float* StageRing(float* stages, int stage) {
  return stages + (stage * 2 * kThreads + threadIdx.x) * kVec;
}

// Queues the copies of sequence b's slice (the lane's kVec ring and
// diagonal floats at `row`) into `stage`, and commits them as one group:
// an empty one for an inactive lane or b past `last`, so that every step
// of the walk commits one.
template <int kVec>
__device__ __forceinline__ void IssueSlice(const H3StepParams& p,
                                           const BlockSequences& staged,
                                           int first, int last, int b,
                                           int64_t row, bool active,
                                           float* ring) {
  static_assert(kVec == 2 || kVec == 4);  // a row is one copy when aligned
  if (active && b < last) {
    const StateRows r = RowsOf<kVec>(SequenceAt(p, staged, first, b), row);
    float* diag_stage = ring + kThreads * kVec;
    constexpr int kBytes = kVecAlignment<kVec>;
    if (r.aligned) {
      CopyAsync<kBytes>(ring, r.shift);
      CopyAsync<kBytes>(diag_stage, r.diag);
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        CopyAsync<sizeof(float)>(ring + i, r.shift + i);
        CopyAsync<sizeof(float)>(diag_stage + i, r.diag + i);
      }
    }
  }
  CommitCopies();
}

// A sequence's q, k and v for channel c (T: their elements, widened
// exactly); zeros for an inactive lane.
struct Inputs {
  float q = 0, k = 0, v = 0;
};
template <typename T>
__device__ __forceinline__ Inputs LoadInputs(const H3StepParams& p,
                                             const StepLayout& l, int b,
                                             int64_t c, bool active) {
  Inputs in;
  if (!active) return in;
  const int64_t at = b * l.input_stride + c;
  in.q = io::ToFloat(static_cast<const T*>(p.q)[at]);
  in.k = io::ToFloat(static_cast<const T*>(p.k)[at]);
  in.v = io::ToFloat(static_cast<const T*>(p.v)[at]);
  return in;
}

// Sequence b's slice from `ring` (its stage, whose copies have completed)
// and its inputs; the state's addresses for StoreStep.
template <int kVec>
__device__ __forceinline__ Slice<kVec> TakeSlice(const H3StepParams& p,
                                                 const BlockSequences& staged,
                                                 int first, int b, int64_t row,
                                                 bool active, const float* ring,
                                                 const Inputs& in) {
  Slice<kVec> t;
  const Sequence seq = SequenceAt(p, staged, first, b);
  t.pos = seq.pos;
  t.newest = seq.newest;
  if (!active) return t;
  t.rows = RowsOf<kVec>(seq, row);
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    t.s[i] = ring[i];
    t.x[i] = ring[kThreads * kVec + i];
  }
  t.q = in.q, t.k = in.k, t.v = in.v;
  return t;
}

// The diagonal SSM on a lane's kVec / 2 modes (re, im pairs of x, dA, dB,
// C): x <- dA x + dB kv in place; returns the lane's share of Re(C . x),
// which the channel's lanes sum (y = 2 Re(C . x) + D kv).
template <int kVec>
__device__ __forceinline__ float DiagonalStep(const float (&da)[kVec],
                                              const float (&db)[kVec],
                                              const float (&cc)[kVec], float kv,
                                              float (&x)[kVec]) {
  float y = 0.0f;
#pragma unroll
  for (int i = 0; i < kVec; i += 2) {
    const float re = da[i] * x[i] - da[i + 1] * x[i + 1] + db[i] * kv;
    const float im = da[i] * x[i + 1] + da[i + 1] * x[i] + db[i + 1] * kv;
    x[i] = re;
    x[i + 1] = im;
    y += cc[i] * re - cc[i + 1] * im;
  }
  return y;
}

// The end of a head_dim-1 lane's step of sequence b (channel c): the new
// input k into the ring slot newest (by the lane that holds it), the
// updated diagonal state back, and out = q y from the channel's first lane.
template <int kVec, typename T>
__device__ __forceinline__ void StoreStep(const H3StepParams& p,
                                          const Slice<kVec>& cur, int lane,
                                          int b, int64_t c, float y) {
  if (cur.newest / kVec == lane) {
    __stcs(cur.rows.shift + cur.newest % kVec, cur.k);
  }
  StoreVec<kVec>(cur.x, cur.rows.aligned, cur.rows.diag);
  if (lane == 0) {
    static_cast<T*>(p.out)[int64_t{b} * p.w.shape.d_model + c] =
        io::FromFloat<T>(cur.q * y);
  }
}

// A head_dim-1 lane's walk through its block's sequences: waits for the
// kernel before (LaunchOrder: the parameters are read before this), stages
// the sequences' states and positions (StageSequences, which sends the
// sequences past the first kStages towards L2), asks for the first kStages
// sequences' slices at once (IssueSlice), then for each sequence b: waits
// for its slice, takes it from shared memory with the q, k, v loaded one
// sequence ahead, kbar = shift(cur) (the shift SSM at cur.newest, the new
// k put in its ring slot), the diagonal SSM on the lane's modes, y summed over
// the channel's lanes, StoreStep, and the copies of sequence b + kStages
// into the stage b used. A lane reads only the shared memory its own
// copies wrote, so the walk needs no barrier. The loop bounds are the same
// for the whole block: every lane reaches every shuffle.
template <int kVec, typename T, typename Shift>
__device__ __forceinline__ void StepSequences(
    const H3StepParams& p, const StepLayout& l, int64_t c, int64_t row,
    bool active, int lane, int lanes, const float (&da)[kVec],
    const float (&db)[kVec], const float (&cc)[kVec], float skip_d,
    Shift shift) {
  const int first = blockIdx.y * l.sequences_per_block;
  const int last = min(first + l.sequences_per_block, p.batch);
  __shared__ BlockSequences staged;
  H3_SHARED_ARRAY(float4, stage_vectors, kStages * 2 * kThreads * kVec / 4);
  float* const stages = reinterpret_cast<float*>(stage_vectors);
  WaitForPriorKernel();
  StageSequences(p, l, first, last, staged);
#pragma unroll
  for (int i = 0; i < kStages; ++i) {
    IssueSlice<kVec>(p, staged, first, last, first + i, row, active,
                     StageRing<kVec>(stages, i));
  }
  Inputs next = LoadInputs<T>(p, l, first, c, active);
  for (int b = first; b < last; ++b) {
    float* const ring = StageRing<kVec>(stages, (b - first) % kStages);
    // Committed so far: kStages + (b - first) groups; b's is the oldest
    // of them not yet waited on.
    WaitCopies<kStages - 1>();
    Slice<kVec> cur =
        TakeSlice<kVec>(p, staged, first, b, row, active, ring, next);
    if (b + 1 < last) next = LoadInputs<T>(p, l, b + 1, c, active);
    const float kv = shift(cur) * cur.v;
    const float y =
        2.0f * GroupSum(DiagonalStep(da, db, cc, kv, cur.x), lanes) +
        skip_d * kv;
    if (active) StoreStep<kVec, T>(p, cur, lane, b, c, y);
    IssueSlice<kVec>(p, staged, first, last, b + kStages, row, active, ring);
  }
}

// The grid of the head_dim-1 kernels for channels_per_block channels a
// block: (channel tiles, sequence groups), and l->sequences_per_block, so
// that there are about kTargetBlocks blocks (at most kMaxSequencesPerBlock
// sequences a block, and a grid.y within kMaxGridY), or `requested`
// sequences a block where that is positive (and the grid's y fits).
inline dim3 SequenceGrid(const H3StepParams& p, int channels_per_block,
                         int requested, StepLayout* l) {
  const int64_t tiles =
      (p.w.shape.d_model + channels_per_block - 1) / channels_per_block;
  const int64_t wanted =
      requested > 0 ? requested
                    : std::min<int64_t>(tiles * p.batch / kTargetBlocks,
                                        kMaxSequencesPerBlock);
  const int64_t fit = (p.batch + kMaxGridY - 1) / kMaxGridY;
  l->sequences_per_block =
      static_cast<int>(std::max<int64_t>({1, wanted, fit}));
  return dim3(static_cast<unsigned>(tiles),
              (p.batch + l->sequences_per_block - 1) / l->sequences_per_block);
}

}  // namespace h3::kernels::h3_step

#endif  // H3_KERNELS_CUDA_H3_STEP_DEVICE_CUH_
