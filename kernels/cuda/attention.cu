// AttentionPrefillPackedCuda: chunks of new tokens of several sequences (one
// for AttentionPrefillCuda). Two kernels on the stream per table of up to
// kPrefillSegmentsPerLaunch segments: every chunk's rotated keys and values
// into its cache, then tiled causal attention over the caches with an online
// softmax. The last grid dimension picks the segment; the grid covers the
// longest segment and the blocks past a shorter one's end exit at once.
//
// fp32 FMA on the CUDA cores. A tensor-core version would hold Q fragments in
// registers and compute S = Q K^T and O += P V with mma.sync (sm_80) or wgmma
// (sm_90a) on TF32 or bf16 operands (an accuracy change the tests would have
// to allow for), load K/V tiles with cp.async or TMA into double-buffered
// shared memory, and use larger query tiles (64-128 rows per block); the
// online-softmax bookkeeping below stays the same.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_device.cuh"

namespace h3::kernels {
namespace {

using namespace attention_detail;

// Tiles. A block takes kQueryTile query rows of one head: kWarps warps of
// kRowsPerWarp rows each. It walks the keys in tiles of kKeyTile, one key per
// lane when scoring, so a tile's softmax update is a warp reduction. Four rows
// per warp let each K value read from shared memory serve four scores and
// each V value four accumulators; more rows would cost registers
// (kRowsPerWarp * DimsPerLane accumulators per thread, 32 at head_dim 256).
constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 4;
constexpr int kQueryTile = kWarps * kRowsPerWarp;
constexpr int kKeyTile = 32;
constexpr int kThreads = kWarps * 32;

// Shared memory, in floats. Rows are padded to a multiple of 4 (zeros) so the
// dot products read float4s. Each K row has 4 more floats: lane j reads row j,
// and with a row stride of 4 mod 32 floats the 8 lanes of each float4 phase
// hit distinct banks. Q rows are read by a whole warp at once (broadcast) and
// V rows across lanes, so they need no skew.
struct SmemLayout {
  int row = 0;    // floats in a Q or V row
  int k_row = 0;  // floats in a K row
  size_t Floats() const {
    return static_cast<size_t>(kQueryTile) * row +
           static_cast<size_t>(kKeyTile) * (k_row + row);
  }
};

SmemLayout LayoutFor(int head_dim) {
  SmemLayout l;
  l.row = (head_dim + 3) / 4 * 4;
  l.k_row = l.row + 4;
  return l;
}

// The segments of one launch, by value in the kernels' parameters;
// __grid_constant__ lets a block read its entry in place.
struct SegmentTable {
  AttentionShape shape;
  const float* inv_freq = nullptr;
  const void* qkv = nullptr;
  void* out = nullptr;
  int count = 0;
  AttentionSegmentCall segs[kPrefillSegmentsPerLaunch];
};
static_assert(sizeof(SegmentTable) + sizeof(SmemLayout) + sizeof(float) <= 4096,
              "the attention kernels' parameters must stay under 4 KB");

// Segment z's params: what AttentionPrefillCuda would get for it.
template <typename T>
__device__ AttentionParams SegmentParams(const SegmentTable& table, int z) {
  const AttentionSegmentCall& s = table.segs[z];
  const int64_t d =
      static_cast<int64_t>(table.shape.heads) * table.shape.head_dim;
  AttentionParams p;
  p.shape = table.shape;
  p.start = s.start;
  p.length = s.length;
  p.qkv = static_cast<const T*>(table.qkv) + s.row * 3 * d;
  p.inv_freq = table.inv_freq;
  p.cache = s.cache;
  p.out = static_cast<T*>(table.out) + s.row * d;
  return p;
}

// Grid (tokens of the longest segment, segments): one block per token, its
// rotated keys and its values at start + token.
template <typename T>  // qkv's elements
__global__ void PrefillWriteKvKernel(
    const __grid_constant__ SegmentTable table) {
  const AttentionParams p = SegmentParams<T>(table, blockIdx.y);
  const int64_t t = blockIdx.x;
  if (t >= p.length) return;
  const int64_t d = static_cast<int64_t>(p.shape.heads) * p.shape.head_dim;
  WriteTokenKv(static_cast<const T*>(p.qkv) + t * 3 * d, p.shape, p.inv_freq,
               p.start + t, p.cache);
}

// Grid (query tiles of the longest segment, heads, segments). Reads keys
// [0, start + last row] from the cache, which PrefillWriteKvKernel filled for
// the chunk's own positions.
// T: the elements of qkv, out and of a cache that is not fp32.
template <int kDims, typename T>  // DimsPerLane(head_dim)
__global__ void __launch_bounds__(kThreads)
    PrefillAttentionKernel(const __grid_constant__ SegmentTable table,
                           SmemLayout layout, float scale) {
  const AttentionParams p = SegmentParams<T>(table, blockIdx.z);
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kQueryTile;
  if (q0 >= p.length) return;        // past this segment: the whole block
  extern __shared__ float4 smem4[];  // float4: 16-byte aligned
  float* q_s = reinterpret_cast<float*>(smem4);  // [kQueryTile][row]
  float* k_s = q_s + kQueryTile * layout.row;    // [kKeyTile][k_row]
  float* v_s = k_s + kKeyTile * layout.k_row;    // [kKeyTile][row]
  const int hd = p.shape.head_dim, row = layout.row, k_row = layout.k_row;
  const int64_t d = static_cast<int64_t>(p.shape.heads) * hd;
  const int h = blockIdx.y;
  const int rows = static_cast<int>(MinI64(kQueryTile, p.length - q0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool f32 = p.cache.type == ElementType::kF32;  // else T

  // The tile's rotated queries; padding and rows past the chunk are zeros.
  for (int e = threadIdx.x; e < kQueryTile * row; e += kThreads) {
    const int r = e / row, i = e % row;
    float x = 0.0f;
    if (r < rows && i < hd) {
      x = RotatedElement(
          static_cast<const T*>(p.qkv) + (q0 + r) * 3 * d + h * hd, i,
          p.shape.rotary_dim, p.inv_freq, p.start + q0 + r);
    }
    q_s[e] = x;
  }

  // Running softmax of each of the warp's rows: max m, sum l of exp(s - m)
  // and the unnormalised output, lane's dims lane + 32 i.
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kDims];
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    m[rr] = -INFINITY;
    l[rr] = 0.0f;
    for (int i = 0; i < kDims; ++i) acc[rr][i] = 0.0f;
  }

  const int64_t keys = p.start + q0 + rows;  // the last row sees keys < this
  for (int64_t k0 = 0; k0 < keys; k0 += kKeyTile) {
    __syncthreads();  // the previous tile is consumed; q_s is written
    const int tile_keys = static_cast<int>(MinI64(kKeyTile, keys - k0));
    for (int e = threadIdx.x; e < kKeyTile * row; e += kThreads) {
      const int j = e / row, i = e % row;
      float kx = 0.0f, vx = 0.0f;  // zeros: 0 * garbage could be a NaN
      if (j < tile_keys && i < hd) {
        const int64_t off = (k0 + j) * d + h * hd + i;
        kx = CacheLoad<T>(p.cache.k, f32, off);
        vx = CacheLoad<T>(p.cache.v, f32, off);
      }
      k_s[j * k_row + i] = kx;
      v_s[j * row + i] = vx;
    }
    __syncthreads();

    // Scores of key k0 + lane against the warp's rows.
    float s[kRowsPerWarp] = {};
    const float4* k4 = reinterpret_cast<const float4*>(k_s + lane * k_row);
    for (int c = 0; c < row / 4; ++c) {
      const float4 kv = k4[c];
      for (int rr = 0; rr < kRowsPerWarp; ++rr) {
        const float4 qv = reinterpret_cast<const float4*>(
            q_s + (warp * kRowsPerWarp + rr) * row)[c];
        s[rr] = fmaf(qv.x, kv.x, s[rr]);
        s[rr] = fmaf(qv.y, kv.y, s[rr]);
        s[rr] = fmaf(qv.z, kv.z, s[rr]);
        s[rr] = fmaf(qv.w, kv.w, s[rr]);
      }
    }

    // Online softmax: rescale what the earlier tiles summed to the new max.
    float prob[kRowsPerWarp];
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int r = warp * kRowsPerWarp + rr;
      const bool visible = r < rows && k0 + lane <= p.start + q0 + r;
      const float score = visible ? s[rr] * scale : -INFINITY;
      const float m_new = fmaxf(m[rr], WarpMax(score));
      // Equal maxima (including both -inf, for a row that has seen no key
      // yet) need no rescale; exp(-inf - -inf) would be a NaN.
      const float corr = m_new == m[rr] ? 1.0f : expf(m[rr] - m_new);
      prob[rr] = visible ? expf(score - m_new) : 0.0f;
      l[rr] = l[rr] * corr + WarpSum(prob[rr]);
      m[rr] = m_new;
      for (int i = 0; i < kDims; ++i) acc[rr][i] *= corr;
    }

    // acc += P V: key j's probability comes from lane j.
    for (int j = 0; j < tile_keys; ++j) {
      float pj[kRowsPerWarp];
      for (int rr = 0; rr < kRowsPerWarp; ++rr) {
        pj[rr] = __shfl_sync(0xffffffffu, prob[rr], j);
      }
      for (int i = 0; i < kDims; ++i) {
        const int dd = lane + 32 * i;
        const float vx = dd < hd ? v_s[j * row + dd] : 0.0f;
        for (int rr = 0; rr < kRowsPerWarp; ++rr) {
          acc[rr][i] = fmaf(pj[rr], vx, acc[rr][i]);
        }
      }
    }
  }

  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int r = warp * kRowsPerWarp + rr;
    if (r >= rows) continue;
    T* out = static_cast<T*>(p.out) + (q0 + r) * d + h * hd;
    for (int i = 0; i < kDims; ++i) {
      const int dd = lane + 32 * i;
      if (dd < hd) out[dd] = io::FromFloat<T>(acc[rr][i] / l[rr]);
    }
  }
}

template <int kDims, typename T>
cudaError_t LaunchAttention(const SegmentTable& table, int64_t longest,
                            cudaStream_t stream) {
  const SmemLayout layout = LayoutFor(table.shape.head_dim);
  const size_t smem = layout.Floats() * sizeof(float);  // 81 KiB at 256
  // Above 48 KiB a kernel must opt in; sm_80 and sm_90 allow 163 and 227 KiB.
  cudaError_t err = cudaFuncSetAttribute(
      PrefillAttentionKernel<kDims, T>,
      cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  const dim3 grid(
      static_cast<unsigned>((longest + kQueryTile - 1) / kQueryTile),
      static_cast<unsigned>(table.shape.heads),
      static_cast<unsigned>(table.count));
  PrefillAttentionKernel<kDims, T><<<grid, kThreads, smem, stream>>>(
      table, layout, ScoreScale(table.shape.head_dim));
  return cudaGetLastError();
}

// Both kernels for one table; `longest`: its longest segment's length.
template <typename T>
cudaError_t LaunchTable(const SegmentTable& table, int64_t longest,
                        cudaStream_t stream) {
  // 256 threads: a d_model of 2048 is 8 elements per thread.
  const dim3 grid(static_cast<unsigned>(longest),
                  static_cast<unsigned>(table.count));
  PrefillWriteKvKernel<T><<<grid, 256, 0, stream>>>(table);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  switch (DimsPerLane(table.shape.head_dim)) {
    case 1:
      return LaunchAttention<1, T>(table, longest, stream);
    case 2:
      return LaunchAttention<2, T>(table, longest, stream);
    case 4:
      return LaunchAttention<4, T>(table, longest, stream);
    default:
      return LaunchAttention<8, T>(table, longest, stream);
  }
}

// What AttentionPrefillCuda refuses, for one segment.
bool SegmentOk(const AttentionShape& shape, const AttentionSegmentCall& s,
               const void* qkv, const float* inv_freq, const void* out,
               ElementType io_type) {
  if (!ValidShape(shape, inv_freq) || s.start < 0 || s.length < 0 ||
      s.row < 0 || s.start + s.length > s.cache.capacity) {
    return false;
  }
  if (s.length == 0) return true;
  return qkv != nullptr && s.cache.k != nullptr && s.cache.v != nullptr &&
         out != nullptr && s.length <= INT32_MAX &&  // one block per token
         CacheTypeOk(s.cache.type, io_type);
}

}  // namespace

cudaError_t AttentionPrefillPackedCuda(const AttentionShape& shape,
                                       const AttentionSegmentCall* segs,
                                       int count, const void* qkv,
                                       const float* inv_freq, void* out,
                                       ElementType io_type,
                                       cudaStream_t stream) {
  if (count < 0 || (count > 0 && segs == nullptr)) {
    return cudaErrorInvalidValue;
  }
  bool work = false;
  for (int i = 0; i < count; ++i) {
    if (!SegmentOk(shape, segs[i], qkv, inv_freq, out, io_type)) {
      return cudaErrorInvalidValue;
    }
    work = work || segs[i].length > 0;
  }
  if (!work) return cudaSuccess;
  return io::DispatchIo(io_type, [&](auto tag) {
    using T = decltype(tag);
    SegmentTable table;
    table.shape = shape;
    table.inv_freq = inv_freq;
    table.qkv = qkv;
    table.out = out;
    for (int i = 0; i < count;) {
      table.count = 0;
      int64_t longest = 0;
      for (; i < count && table.count < kPrefillSegmentsPerLaunch; ++i) {
        if (segs[i].length == 0) continue;  // nothing to write or compute
        table.segs[table.count++] = segs[i];
        longest = std::max(longest, segs[i].length);
      }
      if (table.count == 0) break;
      const cudaError_t err = LaunchTable<T>(table, longest, stream);
      if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
  });
}

cudaError_t AttentionPrefillCuda(const AttentionParams& p,
                                 cudaStream_t stream) {
  const AttentionSegmentCall seg{p.start, p.length, 0, p.cache};
  return AttentionPrefillPackedCuda(p.shape, &seg, 1, p.qkv, p.inv_freq, p.out,
                                    p.io_type, stream);
}

}  // namespace h3::kernels
