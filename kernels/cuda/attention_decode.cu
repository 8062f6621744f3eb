// AttentionDecodeCuda: one new token for each sequence of a batch. Three
// kernels on the stream:
//   1. the new tokens' rotated keys and values into their caches (a kernel of
//      its own, so that stream order puts the write before every read);
//   2. grid (pieces, heads, batch): each block scores its piece of the
//      sequence, keys [piece * piece_len, ...) up to the token's position,
//      and leaves a partial softmax (max, sum, unnormalised output) in the
//      workspace; pieces past the position exit at once;
//   3. grid (heads, batch): rescales the partials to their common max and
//      divides by the total sum.
// Positions are read on the device only, so the launch depends on the batch
// and max_positions alone and a captured graph serves any positions.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_device.cuh"
#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/prefetch.cuh"

namespace h3::kernels {
namespace {

using namespace attention_detail;

// A piece is scored by kWarps warps, each taking kKeysPerStep keys at a time
// (the loads of those keys' K and V rows are in flight together). A lane
// owns kDims consecutive dims of the head (lane kDims ..), so a 16-bit row
// of 128 dims is one 8-byte load a lane, 256 bytes a warp: the first H200
// run measured the former layout (lane owns dims lane, lane + 32, ..., one
// 2-byte load each) at 19% of the copy bandwidth for fp16 caches.
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kKeysPerStep = 4;

// Pieces hold at least kMinPieceLen keys, 16 per warp (four steps of
// kKeysPerStep), so that a block's partial (head_dim + 2 floats: 520 bytes
// for a head of 128) stays small next to the keys it reads (64 K and V
// rows: 32 KB for a 16-bit head of 128). A warp takes its keys a step at a
// time, each step waiting on its loads, so short pieces serve small
// batches: on an H200 at a context of about 540 a batch-1 step's two
// attention layers took 39 us with 64-key pieces against 64 us with 256-key
// ones (the earlier value; 3 pieces of 16 heads, 48 blocks), a batch-64
// step's 238 against 210 us (the 52a594a and e190e6a breakdowns). At most
// kMaxPieces bound the workspace and the combine's serial loop; at 64, a
// capacity of 4096 (pieces of 64) times 16 heads is 1024 blocks for one
// sequence. The split depends on the capacity alone, never on the batch: a
// sequence's sum over its pieces, and so its bits, must not change with the
// batch (docs/cuda-engine.md, "Batch invariance"), so the batch-64 loss
// stays.
constexpr int64_t kMinPieceLen = 64;
constexpr int kMaxPieces = 64;

struct Split {
  int64_t piece_len = 0;
  int pieces = 0;
};

Split SplitFor(int64_t max_positions) {
  const int64_t n = std::max<int64_t>(max_positions, 1);
  Split s;
  s.piece_len = std::max(kMinPieceLen, (n + kMaxPieces - 1) / kMaxPieces);
  s.pieces = static_cast<int>((n + s.piece_len - 1) / s.piece_len);
  return s;
}

// The workspace: partial outputs [batch, heads, pieces, head_dim], then
// their (max, sum) pairs [batch, heads, pieces, 2].
struct Workspace {
  float* acc = nullptr;
  float* max_sum = nullptr;
};

// A position outside its cache breaks the REQUIRES, and a cache neither fp32
// nor of io_type is not taken (the caches live on the device: the host
// cannot check them); the kernels then write nothing into that cache and
// NaNs into the sequence's output, instead of writing past the cache or
// reading it as the wrong type.
__device__ inline bool Usable(int64_t pos, const KvCache& cache,
                              ElementType io_type) {
  return pos >= 0 && pos < cache.capacity && CacheTypeOk(cache.type, io_type);
}

template <typename T>  // qkv's elements
__global__ void DecodeWriteKvKernel(AttentionDecodeParams p) {
  LetNextKernelStart();
  WaitForPriorKernel();
  const int b = blockIdx.x;
  const int64_t pos = p.positions[b];
  const KvCache cache = p.caches[b];
  if (!Usable(pos, cache, p.io_type)) return;
  const int64_t d = static_cast<int64_t>(p.shape.heads) * p.shape.head_dim;
  WriteTokenKv(static_cast<const T*>(p.qkv) + b * 3 * d, p.shape, p.inv_freq,
               pos, cache);
}

// kDims consecutive elements of a cache row from `row` (a lane's dims),
// widened exactly; `avail` of them are in the head. `whole`: all kDims are,
// and `row` is aligned for one vector load. Zeros when not `in`.
template <int kDims, typename C>
__device__ __forceinline__ void LoadDims(const C* row, bool in, bool whole,
                                         int avail, float (&out)[kDims]) {
  struct alignas(sizeof(C) * kDims) Pack {
    C e[kDims];
  };
  if (in && whole) {
    const Pack pack = *reinterpret_cast<const Pack*>(row);
#pragma unroll
    for (int i = 0; i < kDims; ++i) out[i] = io::ToFloat(pack.e[i]);
  } else {
#pragma unroll
    for (int i = 0; i < kDims; ++i) {
      out[i] = in && i < avail ? io::ToFloat(row[i]) : 0.0f;
    }
  }
}

// Where a block's warps score their keys, and its running softmax.
template <int kDims>
struct PieceScan {
  int64_t begin, end;   // keys [begin, end)
  int64_t head, d;      // offset of the head's first element; row stride
  int hd, warp, first;  // head_dim; this warp; this lane's first dim
  float scale;
  float q[kDims];
  float m = -INFINITY, l = 0.0f, acc[kDims] = {};
};

// The warp's running softmax over keys j0 .. j0 + kKeysPerStep - 1, then
// the same kWarps * kKeysPerStep further on. C: the cache's elements.
template <int kDims, typename C>
__device__ void ScoreKeys(const C* k_cache, const C* v_cache,
                          PieceScan<kDims>& w) {
  const bool live = w.first < w.hd;
  const int avail = w.hd - w.first;
  const bool whole =
      avail >= kDims && w.hd % kDims == 0 &&
      reinterpret_cast<uintptr_t>(k_cache) % sizeof(C[kDims]) == 0 &&
      reinterpret_cast<uintptr_t>(v_cache) % sizeof(C[kDims]) == 0;
  for (int64_t j0 = w.begin + w.warp * kKeysPerStep; j0 < w.end;
       j0 += kWarps * kKeysPerStep) {
    float s[kKeysPerStep], v[kKeysPerStep][kDims];
#pragma unroll
    for (int kk = 0; kk < kKeysPerStep; ++kk) {
      const bool in = live && j0 + kk < w.end;
      const int64_t at = w.head + (j0 + kk) * w.d + w.first;
      float k[kDims];
      LoadDims<kDims>(k_cache + at, in, whole, avail, k);
      LoadDims<kDims>(v_cache + at, in, whole, avail, v[kk]);
      s[kk] = 0.0f;
#pragma unroll
      for (int i = 0; i < kDims; ++i) s[kk] = fmaf(w.q[i], k[i], s[kk]);
    }
    float step_max = -INFINITY;
#pragma unroll
    for (int kk = 0; kk < kKeysPerStep; ++kk) {
      s[kk] = WarpSum(s[kk]) * w.scale;
      if (j0 + kk < w.end) step_max = fmaxf(step_max, s[kk]);
    }
    const float m_new = fmaxf(w.m, step_max);  // finite: key j0 is < end
    const float corr = expf(w.m - m_new);      // 0 on the first step
    w.l *= corr;
#pragma unroll
    for (int i = 0; i < kDims; ++i) w.acc[i] *= corr;
#pragma unroll
    for (int kk = 0; kk < kKeysPerStep; ++kk) {
      if (j0 + kk >= w.end) break;
      const float prob = expf(s[kk] - m_new);
      w.l += prob;
#pragma unroll
      for (int i = 0; i < kDims; ++i) w.acc[i] = fmaf(prob, v[kk][i], w.acc[i]);
    }
    w.m = m_new;
  }
}

// A hint: the piece's K and V rows of the head into L2, a 128-byte line at
// a time over the block's threads. ScoreKeys's warps take their keys a
// round at a time, each round waiting on its loads; with the rows sent
// ahead, only the first round waits on HBM. C: the cache's elements.
template <int kDims, typename C>
__device__ void PrefetchPiece(const C* k_cache, const C* v_cache,
                              const PieceScan<kDims>& w) {
  constexpr int kLine = 128;
  const int64_t lines = (int64_t{w.hd} * sizeof(C) + kLine - 1) / kLine;
  const int64_t count = (w.end - w.begin) * lines;
  for (int64_t e = threadIdx.x; e < count; e += kThreads) {
    const int64_t at = w.head + (w.begin + e / lines) * w.d;
    const int64_t offset = kLine * (e % lines);
    PrefetchL2(reinterpret_cast<const char*>(k_cache + at) + offset);
    PrefetchL2(reinterpret_cast<const char*>(v_cache + at) + offset);
  }
}

// T: qkv's elements and those of a cache that is not fp32.
template <int kDims, typename T>  // DimsPerLane(head_dim)
__global__ void __launch_bounds__(kThreads)
    DecodePieceKernel(AttentionDecodeParams p, Split split, Workspace ws,
                      float scale) {
  LetNextKernelStart();
  WaitForPriorKernel();
  const int piece = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t pos = p.positions[b];
  const KvCache cache = p.caches[b];
  const int64_t begin = piece * split.piece_len;
  if (!Usable(pos, cache, p.io_type) || begin > pos) return;
  const int hd = p.shape.head_dim;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  PieceScan<kDims> w;
  w.begin = begin;
  // The last piece runs to the position even past max_positions.
  w.end = piece + 1 == split.pieces ? pos + 1
                                    : MinI64(begin + split.piece_len, pos + 1);
  w.head = static_cast<int64_t>(h) * hd;
  w.d = static_cast<int64_t>(p.shape.heads) * hd;
  w.hd = hd;
  w.warp = warp;
  w.first = lane * kDims;
  w.scale = scale;
  // The rotated query, this lane's dims (each warp computes its own).
  const T* q_in = static_cast<const T*>(p.qkv) + b * 3 * w.d + w.head;
  for (int i = 0; i < kDims; ++i) {
    const int dd = w.first + i;
    w.q[i] = dd < hd
                 ? RotatedElement(q_in, dd, p.shape.rotary_dim, p.inv_freq, pos)
                 : 0.0f;
  }
  // The cache's type is uniform over the block: one loop for each.
  if (cache.type == ElementType::kF32) {
    const float* k = static_cast<const float*>(cache.k);
    const float* v = static_cast<const float*>(cache.v);
    PrefetchPiece<kDims>(k, v, w);
    ScoreKeys<kDims>(k, v, w);
  } else {
    const T* k = static_cast<const T*>(cache.k);
    const T* v = static_cast<const T*>(cache.v);
    PrefetchPiece<kDims>(k, v, w);
    ScoreKeys<kDims>(k, v, w);
  }

  // The warps' partials into one for the piece. Warp 0 saw key `begin`, so
  // the block's max is finite; a warp that saw no key (m = -inf) weighs 0.
  __shared__ float m_s[kWarps], l_s[kWarps], acc_s[kWarps][kMaxHeadDim];
  if (lane == 0) {
    m_s[warp] = w.m;
    l_s[warp] = w.l;
  }
  for (int i = 0; i < kDims; ++i) {
    const int dd = w.first + i;
    if (dd < hd) acc_s[warp][dd] = w.acc[i];
  }
  __syncthreads();
  float block_max = -INFINITY;
  for (int v = 0; v < kWarps; ++v) block_max = fmaxf(block_max, m_s[v]);
  float weight[kWarps];
  for (int v = 0; v < kWarps; ++v) weight[v] = expf(m_s[v] - block_max);
  const int64_t slot =
      (static_cast<int64_t>(b) * p.shape.heads + h) * split.pieces + piece;
  for (int e = threadIdx.x; e < hd; e += kThreads) {
    float a = 0.0f;
    for (int v = 0; v < kWarps; ++v) a = fmaf(weight[v], acc_s[v][e], a);
    ws.acc[slot * hd + e] = a;
  }
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int v = 0; v < kWarps; ++v) sum = fmaf(weight[v], l_s[v], sum);
    ws.max_sum[2 * slot] = block_max;
    ws.max_sum[2 * slot + 1] = sum;
  }
}

// Grid (heads, batch). Reads only the pieces DecodePieceKernel wrote: those
// that begin at or before the position.
template <typename T>  // out's elements
__global__ void __launch_bounds__(kThreads)
    DecodeCombineKernel(AttentionDecodeParams p, Split split, Workspace ws) {
  LetNextKernelStart();
  WaitForPriorKernel();
  const int h = blockIdx.x, b = blockIdx.y;
  const int hd = p.shape.head_dim;
  const int64_t d = static_cast<int64_t>(p.shape.heads) * hd;
  T* out = static_cast<T*>(p.out) + b * d + h * hd;
  const int64_t pos = p.positions[b];
  if (!Usable(pos, p.caches[b], p.io_type)) {
    for (int e = threadIdx.x; e < hd; e += kThreads) {
      out[e] = io::FromFloat<T>(NAN);
    }
    return;
  }
  const int active =
      static_cast<int>(MinI64(split.pieces, pos / split.piece_len + 1));
  const int64_t first =
      (static_cast<int64_t>(b) * p.shape.heads + h) * split.pieces;
  const float* max_sum = ws.max_sum + 2 * first;

  __shared__ float weight[kMaxPieces];
  float m = -INFINITY;
  for (int i = 0; i < active; ++i) m = fmaxf(m, max_sum[2 * i]);
  for (int i = threadIdx.x; i < active; i += kThreads) {
    weight[i] = expf(max_sum[2 * i] - m);
  }
  __syncthreads();
  float sum = 0.0f;
  for (int i = 0; i < active; ++i)
    sum = fmaf(weight[i], max_sum[2 * i + 1], sum);
  for (int e = threadIdx.x; e < hd; e += kThreads) {
    float a = 0.0f;
    for (int i = 0; i < active; ++i) {
      a = fmaf(weight[i], ws.acc[(first + i) * hd + e], a);
    }
    out[e] = io::FromFloat<T>(a / sum);
  }
}

template <int kDims, typename T>
cudaError_t LaunchPieces(const AttentionDecodeParams& p, const Split& split,
                         const Workspace& ws, cudaStream_t stream,
                         LaunchOrder order) {
  const dim3 grid(static_cast<unsigned>(split.pieces),
                  static_cast<unsigned>(p.shape.heads),
                  static_cast<unsigned>(p.batch));
  return LaunchInOrder(order, DecodePieceKernel<kDims, T>, grid, dim3(kThreads),
                       0, stream, p, split, ws, ScoreScale(p.shape.head_dim));
}

}  // namespace

size_t AttentionDecodeWorkspaceBytes(const AttentionShape& shape, int batch,
                                     int64_t max_positions) {
  if (shape.heads <= 0 || shape.head_dim <= 0 || batch <= 0) return 0;
  const size_t slots =
      static_cast<size_t>(batch) * shape.heads * SplitFor(max_positions).pieces;
  return slots * (static_cast<size_t>(shape.head_dim) + 2) * sizeof(float);
}

cudaError_t AttentionDecodeCuda(const AttentionDecodeParams& p,
                                int64_t max_positions, void* workspace,
                                size_t workspace_bytes, cudaStream_t stream,
                                LaunchOrder order) {
  if (!ValidShape(p.shape, p.inv_freq) || p.batch < 0 || max_positions <= 0) {
    return cudaErrorInvalidValue;
  }
  if (p.batch == 0) return cudaSuccess;
  // Grid limits: heads and batch are grid dims y and z (at most 65535).
  if (p.qkv == nullptr || p.caches == nullptr || p.positions == nullptr ||
      p.out == nullptr || workspace == nullptr || p.batch > 65535 ||
      p.shape.heads > 65535 ||
      workspace_bytes <
          AttentionDecodeWorkspaceBytes(p.shape, p.batch, max_positions)) {
    return cudaErrorInvalidValue;
  }
  const Split split = SplitFor(max_positions);
  Workspace ws;
  ws.acc = static_cast<float*>(workspace);
  ws.max_sum = ws.acc + static_cast<size_t>(p.batch) * p.shape.heads *
                            split.pieces * p.shape.head_dim;

  return io::DispatchIo(p.io_type, [&](auto tag) {
    using T = decltype(tag);
    // 256 threads: a d_model of 2048 is 8 elements per thread.
    cudaError_t err = LaunchInOrder(order, DecodeWriteKvKernel<T>,
                                    dim3(static_cast<unsigned>(p.batch)),
                                    dim3(256), 0, stream, p);
    if (err != cudaSuccess) return err;
    switch (DimsPerLane(p.shape.head_dim)) {
      case 1:
        err = LaunchPieces<1, T>(p, split, ws, stream, order);
        break;
      case 2:
        err = LaunchPieces<2, T>(p, split, ws, stream, order);
        break;
      case 4:
        err = LaunchPieces<4, T>(p, split, ws, stream, order);
        break;
      default:
        err = LaunchPieces<8, T>(p, split, ws, stream, order);
        break;
    }
    if (err != cudaSuccess) return err;
    return LaunchInOrder(order, DecodeCombineKernel<T>,
                         dim3(static_cast<unsigned>(p.shape.heads),
                              static_cast<unsigned>(p.batch)),
                         dim3(kThreads), 0, stream, p, split, ws);
  });
}

}  // namespace h3::kernels
