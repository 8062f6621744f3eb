#ifndef H3_KERNELS_CUDA_FLASH_ATTENTION_KERNEL_CUH_
#define H3_KERNELS_CUDA_FLASH_ATTENTION_KERNEL_CUH_

// The tensor-core attention kernel (kernels/flash_attention.h states the
// algorithm and its roundings; kernels/cpu/flash_attention_emulation.cc is
// the same computation in plain C++). Included by one .cu per operand type.
//
// A block takes kQueryTile = 64 query rows of one head of one sequence:
// 4 warps of 16 rows, each warp one m16 row block of mma.sync.m16n8k16.
// Its rotated queries are rounded into shared memory once and held as A
// fragments in registers. It walks the keys in tiles of kKeyTile = 64 up to
// its last row's position: K and V tiles are read from the fp32 cache,
// rounded into shared memory, S = Q K^T goes to fp32 accumulators (8 n8
// tiles per warp), the online softmax runs on them in registers (a row's
// values sit in one quad of lanes), P is rounded and repacked, without
// leaving registers, into the A fragments of O += P V (the C layout of
// m16n8 and the A layout of m16n8k16 agree row for row), and V's B
// fragments come from ldmatrix.trans, K's from ldmatrix (one for two k16
// steps, where 32-bit loads took four). The causal mask is applied only to
// the tiles that reach past a warp's first row.
//
// From a 16-bit cache (half activations) the K and V tiles are cp.async
// copies, K's and V's in separate groups: S = Q K^T waits for K alone, and
// the next tile's K is copied during this tile's softmax and P V, its V
// during the next S (one buffer each: the copies are issued once every
// warp is done with the buffer). ptxas (sm_90a, CUDA 13.0): 205 registers
// at head_dim 128 with fp16 operands (190 before the pipelining), 173 with
// bf16; so 2 blocks an SM by registers, as before. Forcing 3
// (`__launch_bounds__(128, 3)`) spills 64 to 104 bytes; not timed. Not
// done yet (docs/cuda-engine.md): wgmma on sm_90a, larger query tiles per
// warp.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/attention_device.cuh"
#include "kernels/cuda/flash_attention_launch.h"
#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/mma_half.cuh"
#include "kernels/cuda/shared_memory.cuh"

namespace h3::kernels::flash {

// Shared-memory tiles, in half elements. Each row is padded by 8 elements
// (16 bytes): a row stride of hd + 8 halves is 4 words mod 32 for hd = 64
// and 128, so the 8 rows x 4 words that a fragment load (or one ldmatrix
// phase) touches fall in 32 distinct banks; and rows stay 16-byte aligned,
// as ldmatrix and the 8-byte stores need.
template <int kHeadDim>
struct Traits {
  static_assert(kHeadDim % 32 == 0, "k16 steps over the head dim, in pairs");
  static constexpr int kStride = kHeadDim + 8;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kDimSteps = kHeadDim / 16;  // k16 steps of Q K^T
  static constexpr int kKeyTiles8 = kKeyTile / 8;  // n8 tiles of S per warp
  static constexpr int kKeySteps = kKeyTile / 16;  // k16 steps of P V
  static constexpr int kOutTiles8 = kHeadDim / 8;  // n8 tiles of O per warp
  // q [kQueryTile][kStride], k and v [kKeyTile][kStride].
  static constexpr int kSmemElements = (kQueryTile + 2 * kKeyTile) * kStride;
  static_assert((kStride / 2) % 32 == 4, "conflict-free fragment loads");
};

template <typename T>
__device__ inline uint32_t Load32(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// Four 8x8 b16 matrices, transposed: lane l gives the address of row l
// (matrix l / 8). Used for V's B fragments: rows are keys.
__device__ inline void LdMatrixX4Trans(const void* row, uint32_t* r) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(addr));
#elif defined(H3_CUDA_EMULATOR)
  ::h3::emulator::LdMatrixX4Trans(row, r);
#else
  __trap();
#endif
}

// rows x kHeadDim fp32 values (row r at src + r * row_stride) rounded into
// a shared tile; rows past `valid` are zeros (a 0 weight times garbage
// could be a NaN). 16-byte loads, 8-byte stores.
template <typename T, int kHeadDim>
__device__ inline void LoadTile(const float* src, int64_t row_stride, int rows,
                                int valid, T* dst) {
  using Ops = HalfOps<T>;
  constexpr int kVec = kHeadDim / 4;
  for (int e = threadIdx.x; e < rows * kVec; e += Traits<kHeadDim>::kThreads) {
    const int r = e / kVec, i = (e % kVec) * 4;
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r < valid)
      x = *reinterpret_cast<const float4*>(src + r * row_stride + i);
    uint2 packed;
    packed.x = Ops::Pack(Ops::Round(x.x), Ops::Round(x.y));
    packed.y = Ops::Pack(Ops::Round(x.z), Ops::Round(x.w));
    *reinterpret_cast<uint2*>(dst + r * Traits<kHeadDim>::kStride + i) = packed;
  }
}

// rows x kHeadDim values of the operand type T (a 16-bit cache, already
// rounded) queued as asynchronous copies into a shared tile (cp.async, 16
// bytes each: kHeadDim is a multiple of 16, so is the stride in bytes); rows
// past `valid` are zeros, stored at once. The caller commits and waits (so
// every thread's copies of both tiles are in flight together: plain loads,
// each followed by its store to shared memory, may go one round trip at a
// time where the compiler cannot tell the pointers apart).
template <typename T, int kHeadDim>
__device__ inline void CopyTile(const T* src, int64_t row_stride, int rows,
                                int valid, T* dst) {
  constexpr int kVec = kHeadDim / 8;
  for (int e = threadIdx.x; e < rows * kVec; e += Traits<kHeadDim>::kThreads) {
    const int r = e / kVec, i = (e % kVec) * 8;
    T* const to = dst + r * Traits<kHeadDim>::kStride + i;
    if (r < valid) {
      CopyAsync<16>(to, src + r * row_stride + i);
    } else {
      *reinterpret_cast<uint4*>(to) = make_uint4(0, 0, 0, 0);
    }
  }
}

// A K or V tile of a cache of fp32 (rounded to T) or of T (copied).
template <typename T, int kHeadDim>
__device__ inline void CacheTile(const void* cache, bool f32, int64_t offset,
                                 int64_t row_stride, int rows, int valid,
                                 T* dst) {
  if (f32) {
    LoadTile<T, kHeadDim>(static_cast<const float*>(cache) + offset, row_stride,
                          rows, valid, dst);
  } else {
    CopyTile<T, kHeadDim>(static_cast<const T*>(cache) + offset, row_stride,
                          rows, valid, dst);
  }
}

// Grid (query tiles of the longest chunk, heads, sequences of the launch).
// __grid_constant__: the block indexes args.seqs at run time, which would
// otherwise copy the whole parameter block to each thread's local memory.
// T: the MMA operands; IoT: the elements of qkv and out (float or T).
template <typename T, typename IoT, int kHeadDim>
__global__ void __launch_bounds__(Traits<kHeadDim>::kThreads)
    FlashAttentionKernel(const __grid_constant__ LaunchArgs args) {
  using Tr = Traits<kHeadDim>;
  using Ops = HalfOps<T>;
  const Sequence& seq = args.seqs[blockIdx.z];
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kQueryTile;
  if (q0 >= seq.length) return;
  const int rows =
      static_cast<int>(attention_detail::MinI64(kQueryTile, seq.length - q0));
  const int h = blockIdx.y;
  const int64_t d = static_cast<int64_t>(args.shape.heads) * kHeadDim;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t4 = lane % 4;  // the fragments' row, column pair

  H3_DYNAMIC_SHARED(uint4, smem, 16);
  T* q_s = reinterpret_cast<T*>(smem);      // [kQueryTile][kStride]
  T* k_s = q_s + kQueryTile * Tr::kStride;  // [kKeyTile][kStride]
  T* v_s = k_s + kKeyTile * Tr::kStride;    // [kKeyTile][kStride]

  // The tile's rotated queries (as RotatedElement computes them for the
  // fp32 kernel and ApplyRotary for the CPU), rounded; zeros past the chunk.
  for (int e = threadIdx.x; e < kQueryTile * kHeadDim; e += Tr::kThreads) {
    const int r = e / kHeadDim, i = e % kHeadDim;
    float x = 0.0f;
    if (r < rows) {
      x = attention_detail::RotatedElement(
          static_cast<const IoT*>(args.qkv) + (seq.row + q0 + r) * 3 * d +
              h * kHeadDim,
          i, args.shape.rotary_dim, args.inv_freq, seq.start + q0 + r);
    }
    q_s[r * Tr::kStride + i] = Ops::Round(x);
  }
  __syncthreads();

  // The warp's 16 query rows as A fragments, one per k16 step over dims.
  uint32_t qf[Tr::kDimSteps][4];
  const T* qw = q_s + warp * 16 * Tr::kStride;
  for (int kk = 0; kk < Tr::kDimSteps; ++kk) {
    const T* p = qw + g * Tr::kStride + kk * 16 + 2 * t4;
    qf[kk][0] = Load32(p);
    qf[kk][1] = Load32(p + 8 * Tr::kStride);
    qf[kk][2] = Load32(p + 8);
    qf[kk][3] = Load32(p + 8 * Tr::kStride + 8);
  }

  // This lane's rows: g and g + 8 of the warp's block ([0] and [1] below).
  const int64_t pos0 = seq.start + q0 + warp * 16 + g;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[Tr::kOutTiles8][4];
  for (int n = 0; n < Tr::kOutTiles8; ++n) {
    for (int c = 0; c < 4; ++c) o[n][c] = 0.0f;
  }

  const int64_t keys = seq.start + q0 + rows;  // the last row sees keys < this
  const bool f32_cache = seq.cache.type == ElementType::kF32;  // else T
  // Key tile k0's K (or V) into k_s (v_s): rows past the keys are zeros.
  const auto fetch = [&](const void* cache, int64_t k0, T* dst) {
    const int valid =
        static_cast<int>(attention_detail::MinI64(kKeyTile, keys - k0));
    CacheTile<T, kHeadDim>(cache, f32_cache, k0 * d + h * kHeadDim, d, kKeyTile,
                           valid, dst);
  };
  // K and V in two groups of copies (a 16-bit cache's; none, and the tiles
  // already stored, from an fp32 one), so that S = Q K^T needs only K: the
  // next tile's K is copied during this tile's softmax and P V, its V during
  // the next S. Every step commits both groups, empty past the last tile,
  // so that the waits' counts stay fixed.
  fetch(seq.cache.k, 0, k_s);
  CommitCopies();
  fetch(seq.cache.v, 0, v_s);
  CommitCopies();
  // A key tile from k0 needs the causal mask where its last key lies past
  // the position of the warp's first row (the least of its rows'): so from
  // k0 > last_whole on; the tiles before are whole for every row of the
  // warp (and lie inside the keys).
  const int64_t last_whole = seq.start + q0 + warp * 16 - (kKeyTile - 1);
  for (int64_t k0 = 0; k0 < keys; k0 += kKeyTile) {
    const bool more = k0 + kKeyTile < keys;
    WaitCopies<1>();  // K's tile is in (V's may not be)
    __syncthreads();

    // S = Q K^T: n8 tile n holds keys k0 + 8n ..; B fragment of key g.
    // ldmatrix of 8 key rows at 4 dim offsets gives two k16 steps' B
    // fragments (b0, b1 of step kk, then of kk + 1).
    float s[Tr::kKeyTiles8][4];
    for (int n = 0; n < Tr::kKeyTiles8; ++n) {
      for (int c = 0; c < 4; ++c) s[n][c] = 0.0f;
      const T* kr = k_s + (8 * n + lane % 8) * Tr::kStride + 8 * (lane / 8);
      for (int kk = 0; kk < Tr::kDimSteps; kk += 2) {
        uint32_t b[4];
        LdMatrixX4(kr + 16 * kk, b);
        Ops::Mma(s[n], qf[kk], b[0], b[1]);
        Ops::Mma(s[n], qf[kk + 1], b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with k_s
    if (more) fetch(seq.cache.k, k0 + kKeyTile, k_s);
    CommitCopies();

    // Scale to base 2, mask, and each row's max over the tile: c0, c1 are
    // row g at keys 8n + 2 t4 + {0, 1}; c2, c3 row g + 8. A row's 64 keys
    // are spread over the 4 lanes of its quad.
    float tile_max[2] = {-INFINITY, -INFINITY};
    const bool masked = k0 > last_whole;
    for (int n = 0; n < Tr::kKeyTiles8; ++n) {
      for (int c = 0; c < 4; ++c) {
        const int rr = c / 2;
        float x = __fmul_rn(s[n][c], args.scale_log2);
        if (masked && k0 + 8 * n + 2 * t4 + (c & 1) > pos0 + 8 * rr) {
          x = -INFINITY;
        }
        s[n][c] = x;
        tile_max[rr] = fmaxf(tile_max[rr], x);
      }
    }
    float corr[2];
    for (int rr = 0; rr < 2; ++rr) {
      tile_max[rr] =
          fmaxf(tile_max[rr], __shfl_xor_sync(0xffffffffu, tile_max[rr], 1));
      tile_max[rr] =
          fmaxf(tile_max[rr], __shfl_xor_sync(0xffffffffu, tile_max[rr], 2));
      // Key 0 is visible to every row (padding rows too), so after the
      // first tile m is finite; before it exp2(-inf) = 0 clears nothing.
      const float m_new = fmaxf(m[rr], tile_max[rr]);
      corr[rr] = exp2f(m[rr] - m_new);
      m[rr] = m_new;
      l[rr] *= corr[rr];
    }
    for (int n = 0; n < Tr::kOutTiles8; ++n) {
      o[n][0] *= corr[0];
      o[n][1] *= corr[0];
      o[n][2] *= corr[1];
      o[n][3] *= corr[1];
    }

    // P rounded to T; the denominators sum the rounded weights. The A
    // fragment of k16 step j over keys: n8 tiles 2j (keys 16j + 2 t4 ..)
    // and 2j + 1 (keys 16j + 8 + 2 t4 ..), rows g and g + 8.
    uint32_t pf[Tr::kKeySteps][4];
    for (int n = 0; n < Tr::kKeyTiles8; ++n) {
      T p[4];
      for (int c = 0; c < 4; ++c) {
        p[c] = Ops::Round(exp2f(s[n][c] - m[c / 2]));
        l[c / 2] += Ops::Value(p[c]);
      }
      pf[n / 2][(n % 2) * 2] = Ops::Pack(p[0], p[1]);
      pf[n / 2][(n % 2) * 2 + 1] = Ops::Pack(p[2], p[3]);
    }

    // O += P V. ldmatrix.trans of 32 key rows (two k16 steps) at dims
    // 8n .. 8n + 7 gives both steps' B fragments.
    WaitCopies<1>();  // V's tile is in (the next K's may not be)
    __syncthreads();
    for (int n = 0; n < Tr::kOutTiles8; ++n) {
      for (int j = 0; j < Tr::kKeySteps; j += 2) {
        uint32_t b[4];
        LdMatrixX4Trans(v_s + (16 * j + lane) * Tr::kStride + 8 * n, b);
        Ops::Mma(o[n], pf[j], b[0], b[1]);
        Ops::Mma(o[n], pf[j + 1], b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with v_s
    if (more) fetch(seq.cache.v, k0 + kKeyTile, v_s);
    CommitCopies();
  }

  // Each lane summed its own keys' weights: add the quad's.
  for (int rr = 0; rr < 2; ++rr) {
    l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 1);
    l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 2);
  }
  for (int rr = 0; rr < 2; ++rr) {
    const int r = warp * 16 + g + 8 * rr;
    if (r >= rows) continue;
    IoT* out = static_cast<IoT*>(args.out) + (seq.row + q0 + r) * d +
               h * kHeadDim + 2 * t4;
    for (int n = 0; n < Tr::kOutTiles8; ++n) {
      const float x0 = o[n][2 * rr] / l[rr], x1 = o[n][2 * rr + 1] / l[rr];
      if constexpr (std::is_same_v<IoT, float>) {
        *reinterpret_cast<float2*>(out + 8 * n) = make_float2(x0, x1);
      } else {
        out[8 * n] = io::FromFloat<IoT>(x0);
        out[8 * n + 1] = io::FromFloat<IoT>(x1);
      }
    }
  }
}

template <typename T, typename IoT, int kHeadDim>
cudaError_t LaunchInstance(const LaunchArgs& args, cudaStream_t stream) {
  constexpr size_t kSmem = Traits<kHeadDim>::kSmemElements * sizeof(T);
  // 52 KiB at head_dim 128: above the 48 KiB default, so opt in.
  cudaError_t err = cudaFuncSetAttribute(
      reinterpret_cast<const void*>(&FlashAttentionKernel<T, IoT, kHeadDim>),
      cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem));
  if (err != cudaSuccess) return err;
  const dim3 grid(
      static_cast<unsigned>((args.max_length + kQueryTile - 1) / kQueryTile),
      static_cast<unsigned>(args.shape.heads),
      static_cast<unsigned>(args.count));
  return LaunchInOrder(LaunchOrder::kAfterPrior,
                       FlashAttentionKernel<T, IoT, kHeadDim>, grid,
                       dim3(Traits<kHeadDim>::kThreads), kSmem, stream, args);
}

template <typename T, typename IoT>
cudaError_t LaunchForHeadDim(const LaunchArgs& args, cudaStream_t stream) {
  switch (args.shape.head_dim) {
    case 64:
      return LaunchInstance<T, IoT, 64>(args, stream);
    case 128:
      return LaunchInstance<T, IoT, 128>(args, stream);
    default:
      return cudaErrorNotSupported;
  }
}

// io_type kF32 (fp32 qkv and out) or the operand type T's (FlashIoSupported).
template <typename T>
cudaError_t LaunchForIo(const LaunchArgs& args, cudaStream_t stream) {
  return args.io_type == ElementType::kF32
             ? LaunchForHeadDim<T, float>(args, stream)
             : LaunchForHeadDim<T, T>(args, stream);
}

}  // namespace h3::kernels::flash

#endif  // H3_KERNELS_CUDA_FLASH_ATTENTION_KERNEL_CUH_
