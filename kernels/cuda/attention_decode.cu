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

namespace h3::kernels {
namespace {

using namespace attention_detail;

// A piece is scored by kWarps warps, each taking kKeysPerStep keys at a time
// (the loads of those keys' K and V rows are in flight together) with lanes
// across the head's dims, so every K and V row is read coalesced.
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kKeysPerStep = 4;

// Pieces hold at least kMinPieceLen keys, 64 per warp, so that the partial's
// write and the combine stay small next to the keys read. At most kMaxPieces
// bound the workspace and the combine's serial loop; at 64, a capacity of
// 16384 (pieces of 256) times 16 heads is 1024 blocks for one sequence,
// several waves on an H100's 132 SMs.
constexpr int64_t kMinPieceLen = 256;
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
  const int b = blockIdx.x;
  const int64_t pos = p.positions[b];
  const KvCache cache = p.caches[b];
  if (!Usable(pos, cache, p.io_type)) return;
  const int64_t d = static_cast<int64_t>(p.shape.heads) * p.shape.head_dim;
  WriteTokenKv(static_cast<const T*>(p.qkv) + b * 3 * d, p.shape, p.inv_freq,
               pos, cache);
}

// T: qkv's elements and those of a cache that is not fp32.
template <int kDims, typename T>  // DimsPerLane(head_dim)
__global__ void __launch_bounds__(kThreads)
    DecodePieceKernel(AttentionDecodeParams p, Split split, Workspace ws,
                      float scale) {
  const int piece = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t pos = p.positions[b];
  const KvCache cache = p.caches[b];
  const int64_t begin = piece * split.piece_len;
  if (!Usable(pos, cache, p.io_type) || begin > pos) return;
  // The last piece runs to the position even past max_positions.
  const int64_t end = piece + 1 == split.pieces
                          ? pos + 1
                          : MinI64(begin + split.piece_len, pos + 1);
  const int hd = p.shape.head_dim;
  const int64_t d = static_cast<int64_t>(p.shape.heads) * hd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // The rotated query, lane's dims lane + 32 i (each warp computes its own).
  float q[kDims];
  for (int i = 0; i < kDims; ++i) {
    const int dd = lane + 32 * i;
    q[i] = dd < hd ? RotatedElement(
                         static_cast<const T*>(p.qkv) + b * 3 * d + h * hd, dd,
                         p.shape.rotary_dim, p.inv_freq, pos)
                   : 0.0f;
  }

  // The warp's running softmax over keys j0 .. j0 + kKeysPerStep - 1, then
  // the same kWarps * kKeysPerStep further on.
  // Cache elements: fp32 or T. Offsets from the head's first element.
  const bool f32 = cache.type == ElementType::kF32;
  const int64_t head = h * hd;
  float m = -INFINITY, l = 0.0f, acc[kDims] = {};
  for (int64_t j0 = begin + warp * kKeysPerStep; j0 < end;
       j0 += kWarps * kKeysPerStep) {
    float s[kKeysPerStep], v[kKeysPerStep][kDims];
    for (int kk = 0; kk < kKeysPerStep; ++kk) {
      s[kk] = 0.0f;
      for (int i = 0; i < kDims; ++i) {
        const int dd = lane + 32 * i;
        v[kk][i] = 0.0f;
        if (j0 + kk < end && dd < hd) {
          const int64_t at = head + (j0 + kk) * d + dd;
          s[kk] = fmaf(q[i], CacheLoad<T>(cache.k, f32, at), s[kk]);
          v[kk][i] = CacheLoad<T>(cache.v, f32, at);
        }
      }
    }
    float step_max = -INFINITY;
    for (int kk = 0; kk < kKeysPerStep; ++kk) {
      s[kk] = WarpSum(s[kk]) * scale;
      if (j0 + kk < end) step_max = fmaxf(step_max, s[kk]);
    }
    const float m_new = fmaxf(m, step_max);  // finite: key j0 is < end
    const float corr = expf(m - m_new);      // 0 on the first step
    l *= corr;
    for (int i = 0; i < kDims; ++i) acc[i] *= corr;
    for (int kk = 0; kk < kKeysPerStep; ++kk) {
      if (j0 + kk >= end) break;
      const float prob = expf(s[kk] - m_new);
      l += prob;
      for (int i = 0; i < kDims; ++i) acc[i] = fmaf(prob, v[kk][i], acc[i]);
    }
    m = m_new;
  }

  // The warps' partials into one for the piece. Warp 0 saw key `begin`, so
  // the block's max is finite; a warp that saw no key (m = -inf) weighs 0.
  __shared__ float m_s[kWarps], l_s[kWarps], acc_s[kWarps][kMaxHeadDim];
  if (lane == 0) {
    m_s[warp] = m;
    l_s[warp] = l;
  }
  for (int i = 0; i < kDims; ++i) {
    const int dd = lane + 32 * i;
    if (dd < hd) acc_s[warp][dd] = acc[i];
  }
  __syncthreads();
  float block_max = -INFINITY;
  for (int w = 0; w < kWarps; ++w) block_max = fmaxf(block_max, m_s[w]);
  float weight[kWarps];
  for (int w = 0; w < kWarps; ++w) weight[w] = expf(m_s[w] - block_max);
  const int64_t slot =
      (static_cast<int64_t>(b) * p.shape.heads + h) * split.pieces + piece;
  for (int e = threadIdx.x; e < hd; e += kThreads) {
    float a = 0.0f;
    for (int w = 0; w < kWarps; ++w) a = fmaf(weight[w], acc_s[w][e], a);
    ws.acc[slot * hd + e] = a;
  }
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) sum = fmaf(weight[w], l_s[w], sum);
    ws.max_sum[2 * slot] = block_max;
    ws.max_sum[2 * slot + 1] = sum;
  }
}

// Grid (heads, batch). Reads only the pieces DecodePieceKernel wrote: those
// that begin at or before the position.
template <typename T>  // out's elements
__global__ void __launch_bounds__(kThreads)
    DecodeCombineKernel(AttentionDecodeParams p, Split split, Workspace ws) {
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
                         const Workspace& ws, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(split.pieces),
                  static_cast<unsigned>(p.shape.heads),
                  static_cast<unsigned>(p.batch));
  DecodePieceKernel<kDims, T><<<grid, kThreads, 0, stream>>>(
      p, split, ws, ScoreScale(p.shape.head_dim));
  return cudaGetLastError();
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
                                size_t workspace_bytes, cudaStream_t stream) {
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
    DecodeWriteKvKernel<T><<<p.batch, 256, 0, stream>>>(p);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    switch (DimsPerLane(p.shape.head_dim)) {
      case 1:
        err = LaunchPieces<1, T>(p, split, ws, stream);
        break;
      case 2:
        err = LaunchPieces<2, T>(p, split, ws, stream);
        break;
      case 4:
        err = LaunchPieces<4, T>(p, split, ws, stream);
        break;
      default:
        err = LaunchPieces<8, T>(p, split, ws, stream);
        break;
    }
    if (err != cudaSuccess) return err;
    DecodeCombineKernel<T><<<dim3(static_cast<unsigned>(p.shape.heads),
                                  static_cast<unsigned>(p.batch)),
                             kThreads, 0, stream>>>(p, split, ws);
    return cudaGetLastError();
  });
}

}  // namespace h3::kernels
