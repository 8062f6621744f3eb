// FlashConv: the fused H3 prefill (paper section 4) for head_dim 1.
//
// One thread block owns one (segment, channel): blockIdx.x picks a segment
// (a sequence's chunk with its own start, length, place in the tensors and
// states) from the launch's table, blockIdx.y the channel. A launch holds
// segments of one FFT size; a batch call (Run) is a table of equal segments.
// The block walks its segment in chunks of Lc = n / 2 tokens (n the on-chip
// FFT size, 512 ... 4096), keeping the state on chip between chunks (state
// passing). Per chunk:
//
//  1. kbar = shiftconv(k) + shift_D k: direct, fp32, from k with kHistory
//     tokens of history; kv = kbar v. The history starts as the shift state's
//     ring read in position order (the N inputs before the call, zero before
//     position 0), so the saved state needs no term of its own.
//  2. The diagonal end state, on tensor cores: x_end = dA^Lc x +
//     sum_g dA^(16 (G-1-g)) R[g] with R = E kv (E[m][i] = dA^(15-i) dB, kv cut
//     into 16-token columns), summed over g by Horner's rule in fp32.
//  3. The carried state's output 2 Re(sum_m C dA^(t+1) x): for t = 16 g + j
//     it is 2 Re(P Z) with P[j][m] = C dA^(j+1) and Z[m][g] = dA^(16 g) x.
//  4. The long convolution by a two-level Cooley-Tukey (Monarch) FFT of size
//     n = n1 n2: u[n1 n2' + n2] as an n1 x n2 matrix, F_n1 on the left,
//     twiddles, F_n2 on the right (the spectrum comes out transposed, and the
//     precomputed kernel spectrum is stored in that order), the pointwise
//     product, and the same steps conjugated and reversed. The upper half of
//     u is zero padding, so the first and last products use half of F_n1.
//     Every product is a 16 x 16 x 16 tensor-core MMA: fp16 operands, fp32
//     accumulation; twiddles and the pointwise product are applied in fp32
//     between products.
//  5. out = q (conv + D kv + carried output).
//
// fp16 operands: every tensor is scaled into [-1, 1] first (kv by its max
// over the chunk, the spectrum by its max per channel, the states by theirs),
// so fp16's range never overflows and its 11-bit significand (2^-11 relative)
// holds more than bf16's 8 bits; bf16 inputs use the same fp16 operands.
//
// What depends only on the weights is computed once at load, on the host
// (kernels/flashconv_setup.h): per channel P, E, their scales and dA^16,
// dA^256; per FFT size the twiddles and the powers of dA that start Z's
// segments. Transcendentals left per block and chunk: dA^len (32 double
// exp + sincos) in a chunk shorter than n / 2, the segment's last.

#include "kernels/cuda/flashconv_device.cuh"
#include "kernels/cuda/h3_prefill_fused_kernel.h"

namespace h3::kernels::flashconv {
namespace fc = flashconv;

namespace {

// Setup of a block: the channel's record computed at load (P, E, their
// scales, powers of dA), its taps, the history of inputs before the call and
// the diagonal state. history[kHistory - m] = k at position start - m: from
// the shift state's ring (position P in slot P mod N) for m <= N, zero
// before position 0 and beyond the ring (m > N meets only taps j >= N, which
// are zero).
__device__ void LoadChannel(const KernelArgs& a, int64_t start, int c,
                            const float* ring, const float* diag,
                            fc::SmallShared& s) {
  const int ns = a.w.shape.d_state, modes = a.w.shape.d_state / 2;
  const int tid = threadIdx.x;
  constexpr int kRecordVectors = sizeof(fc::ChannelSetup) / sizeof(uint4);
  const uint4* record = reinterpret_cast<const uint4*>(a.setup + c);
  uint4* copy = reinterpret_cast<uint4*>(&s.setup);
  for (int i = tid; i < kRecordVectors; i += fc::kThreads) copy[i] = record[i];
  fc::LoadHistory(ring, a.w.shift_kernel + c * ns, start, ns, tid, fc::kThreads,
                  s.history, s.taps);
  if (tid < modes) s.x[tid] = make_float2(diag[2 * tid], diag[2 * tid + 1]);
  __syncthreads();
}

// Step 2: x_next = dA^len x + sum_j dA^(len-1-j) dB kv[j]. `kv_right` holds
// kv / kv_scale right-aligned in l256 = len rounded up to kStateTile (zeros
// first), so that token j sits at exponent l256 - 1 - (j + pad) = len - 1 - j.
// `powers`: the channel's chunk powers (SizeTables), dA^chunk the last.
__device__ void EndState(int len, int chunk, int l256, int modes,
                         float kv_scale, const __half* kv_right,
                         const float2* powers, float* tiles,
                         fc::SmallShared& s) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n_tiles = l256 / fc::kStateTile;
  float* st = tiles + warp * 512;
  if (kv_scale > 0) {
    for (int gt = warp; gt < n_tiles; gt += fc::kWarps) {
      fc::FragBCol kv;  // (i, g) = kv_right[256 gt + 16 g + i]
      fc::wmma::load_matrix_sync(kv, kv_right + fc::kStateTile * gt, 16);
      for (int group = 0; group < modes / 8; ++group) {
        fc::FragARow e;
        fc::wmma::load_matrix_sync(e, s.ecat() + 16 * group * 16, 16);
        fc::FragAcc r;
        fc::wmma::fill_fragment(r, 0.0f);
        fc::wmma::mma_sync(r, e, kv, r);
        fc::wmma::store_matrix_sync(st, r, 16, fc::wmma::mem_row_major);
        __syncwarp();
        if (lane < 8) {  // Horner over the tile's 16 columns
          const int m = 8 * group + lane;
          const int re = fc::ModeRow(m, 0) - 16 * group;  // rows of the tile
          const int im = fc::ModeRow(m, 1) - 16 * group;
          float2 acc = make_float2(0.0f, 0.0f);
          for (int g = 0; g < 16; ++g) {
            acc = fc::CAdd(fc::CMul(acc, fc::AsFloat2(s.setup.dA16[m])),
                           make_float2(st[re * 16 + g], st[im * 16 + g]));
          }
          s.partial[gt][m] = acc;
        }
        __syncwarp();
      }
    }
  }
  __syncthreads();
  const int m = threadIdx.x;
  if (m < modes) {
    float2 acc = make_float2(0.0f, 0.0f);
    if (kv_scale > 0) {
      for (int gt = 0; gt < n_tiles; ++gt) {
        acc = fc::CAdd(fc::CMul(acc, fc::AsFloat2(s.setup.dA256[m])),
                       s.partial[gt][m]);
      }
    }
    const float2 decay =
        len == chunk ? __ldg(&powers[(fc::kCarrySegments - 1) * modes + m])
                     : fc::PowPolar(s.setup.log_r[m], s.setup.theta[m], len);
    s.x_next[m] = fc::CAdd(fc::CMul(decay, s.x[m]),
                           fc::CScale(acc, kv_scale * s.setup.scale_e));
  }
}

// Step 3: extra[t] += 2 Re(sum_m C dA^(t+1) x) for t < chunk, with the state
// matrix Z (scaled by x_scale) built in `z` ([2 M][chunk / 16] fp16), in
// kCarrySegments runs of columns: run r starts from dA^(16 g0) x, g0 = r G /
// kCarrySegments, the precomputed powers[r - 1] (the channel's chunk powers).
__device__ void CarriedOutput(int chunk, int modes, float x_scale,
                              const float2* powers, __half* z, float* tiles,
                              float* extra, fc::SmallShared& s) {
  const int groups = chunk / 16;  // G: columns of Z
  const int per_segment = groups / fc::kCarrySegments;
  const float x_inv = 1.0f / x_scale;
  for (int idx = threadIdx.x; idx < fc::kCarrySegments * modes;
       idx += fc::kThreads) {
    const int m = idx % modes, segment = idx / modes;
    const int g0 = segment * per_segment;
    float2 zv = s.x[m];
    if (segment > 0) zv = fc::CMul(__ldg(&powers[idx - modes]), zv);
    zv = fc::CScale(zv, x_inv);
    const float2 dA16 = fc::AsFloat2(s.setup.dA16[m]);
    for (int g = g0; g < g0 + per_segment; ++g) {
      z[fc::ModeRow(m, 0) * groups + g] = __float2half_rn(zv.x);
      z[fc::ModeRow(m, 1) * groups + g] = __float2half_rn(zv.y);
      zv = fc::CMul(zv, dA16);
    }
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* st = tiles + warp * 512;
  const float scale = 2.0f * s.setup.scale_p * x_scale;
  for (int gt = warp; gt < groups / 16; gt += fc::kWarps) {
    fc::FragAcc acc;
    fc::wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < 2 * modes / 16; ++kk) {
      fc::FragARow p;
      fc::FragBRow zf;
      fc::wmma::load_matrix_sync(p, s.pcat() + 16 * kk, 2 * fc::kMaxModes);
      fc::wmma::load_matrix_sync(zf, z + 16 * kk * groups + 16 * gt, groups);
      fc::wmma::mma_sync(acc, p, zf, acc);
    }
    // (j, g) -> st[j + 16 g]: token 256 gt + 16 g + j.
    fc::wmma::store_matrix_sync(st, acc, 16, fc::wmma::mem_col_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) extra[256 * gt + e] += scale * st[e];
    __syncwarp();
  }
}

// Step 4, forward: Q = T o (F1 U) where U is the n1/2 x n2 top of plane P's
// real part (rows below are the zero padding), T[k1][n2] = W_n^(k1 n2) (the
// table t.twiddle).
template <int N1, int N2>
__device__ void ForwardFirst(const SizeTables& t, const __half* u, __half* q_re,
                             __half* q_im, float* tiles) {
  constexpr int kCols = N2 / 16;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* st = tiles + warp * 512;
  const __half* f1_re = t.f1;
  const __half* f1_im = t.f1 + N1 * (N1 / 2);
  for (int tile = warp; tile < (N1 / 16) * kCols; tile += fc::kWarps) {
    const int tr = tile / kCols, tc = tile % kCols;
    fc::FragAcc re, im;
    fc::wmma::fill_fragment(re, 0.0f);
    fc::wmma::fill_fragment(im, 0.0f);
    for (int kk = 0; kk < N1 / 32; ++kk) {
      fc::FragARow a_re, a_im;
      fc::FragBRow b;
      const int a_off = 16 * tr * (N1 / 2) + 16 * kk;
      fc::wmma::load_matrix_sync(a_re, f1_re + a_off, N1 / 2);
      fc::wmma::load_matrix_sync(a_im, f1_im + a_off, N1 / 2);
      fc::wmma::load_matrix_sync(b, u + 16 * kk * N2 + 16 * tc, N2);
      fc::wmma::mma_sync(re, a_re, b, re);
      fc::wmma::mma_sync(im, a_im, b, im);
    }
    fc::wmma::store_matrix_sync(st, re, 16, fc::wmma::mem_row_major);
    fc::wmma::store_matrix_sync(st + 256, im, 16, fc::wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
      const int k1 = 16 * tr + e / 16, n2 = 16 * tc + e % 16;
      const float2 y = fc::CMul(make_float2(st[e], st[256 + e]),
                                __ldg(&t.twiddle[k1 * N2 + n2]));
      q_re[k1 * N2 + n2] = __float2half_rn(y.x);
      q_im[k1 * N2 + n2] = __float2half_rn(y.y);
    }
    __syncwarp();
  }
}

// Step 4, the middle products. Forward (kInverse false):
//   dst = S o (src F2),  the spectrum X[k1 + n1 k2] / n in [k1][k2].
// Inverse (kInverse true):
//   dst = conj(T) o (src conj(F2)), T the forward twiddles at [row][col].
template <int N1, int N2, bool kInverse>
__device__ void Middle(const SizeTables& t, const float2* spectrum,
                       const __half* src_re, const __half* src_im,
                       __half* dst_re, __half* dst_im, float* tiles) {
  constexpr int kCols = N2 / 16;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* st = tiles + warp * 512;
  const __half* f2_re = t.f2;
  const __half* f2_im = t.f2 + N2 * N2;
  for (int tile = warp; tile < (N1 / 16) * kCols; tile += fc::kWarps) {
    const int tr = tile / kCols, tc = tile % kCols;
    fc::FragAcc re, im;
    fc::wmma::fill_fragment(re, 0.0f);
    fc::wmma::fill_fragment(im, 0.0f);
    for (int kk = 0; kk < N2 / 16; ++kk) {
      fc::FragARow a_re, a_im;
      fc::FragBRow b_re, b_im;
      const int a_off = 16 * tr * N2 + 16 * kk;
      const int b_off = 16 * kk * N2 + 16 * tc;
      fc::wmma::load_matrix_sync(a_re, src_re + a_off, N2);
      fc::wmma::load_matrix_sync(a_im, src_im + a_off, N2);
      fc::wmma::load_matrix_sync(b_re, f2_re + b_off, N2);
      fc::wmma::load_matrix_sync(b_im, f2_im + b_off, N2);
      if (!kInverse) {  // (ar + i ai)(br + i bi)
        fc::wmma::mma_sync(re, a_re, b_re, re);
        fc::wmma::mma_sync(im, a_re, b_im, im);
        fc::wmma::mma_sync(im, a_im, b_re, im);
        fc::Negate(a_im);
        fc::wmma::mma_sync(re, a_im, b_im, re);
      } else {  // (ar + i ai)(br - i bi)
        fc::wmma::mma_sync(re, a_re, b_re, re);
        fc::wmma::mma_sync(re, a_im, b_im, re);
        fc::wmma::mma_sync(im, a_im, b_re, im);
        fc::Negate(a_re);
        fc::wmma::mma_sync(im, a_re, b_im, im);
      }
    }
    fc::wmma::store_matrix_sync(st, re, 16, fc::wmma::mem_row_major);
    fc::wmma::store_matrix_sync(st + 256, im, 16, fc::wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
      const int row = 16 * tr + e / 16, col = 16 * tc + e % 16;
      const float2 x = make_float2(st[e], st[256 + e]);
      const float2 y = kInverse
                           ? fc::CMulConj(x, __ldg(&t.twiddle[row * N2 + col]))
                           : fc::CMul(x, spectrum[row * N2 + col]);
      dst_re[row * N2 + col] = __float2half_rn(y.x);
      dst_im[row * N2 + col] = __float2half_rn(y.y);
    }
    __syncwarp();
  }
}

// Step 4, the last product, and step 5: y[n1][n2] = Re(conj(F1)^T V) for the
// chunk's rows n1 < n1/2, then out = q (y scale + extra).
template <typename T, int N1, int N2>
__device__ void InverseLast(const SizeTables& t, const __half* v_re,
                            const __half* v_im, float scale, int len,
                            const float* extra, const T* q, T* out,
                            float* tiles) {
  constexpr int kCols = N2 / 16;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* st = tiles + warp * 512;
  const __half* f1_re = t.f1;
  const __half* f1_im = t.f1 + N1 * (N1 / 2);
  for (int tile = warp; tile < (N1 / 32) * kCols; tile += fc::kWarps) {
    const int tr = tile / kCols, tc = tile % kCols;
    fc::FragAcc acc;
    fc::wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < N1 / 16; ++kk) {
      // A(n1, k1) = F1[k1][n1]: F1 read column-major.
      fc::FragACol a_re, a_im;
      fc::FragBRow b_re, b_im;
      const int a_off = 16 * kk * (N1 / 2) + 16 * tr;
      const int b_off = 16 * kk * N2 + 16 * tc;
      fc::wmma::load_matrix_sync(a_re, f1_re + a_off, N1 / 2);
      fc::wmma::load_matrix_sync(a_im, f1_im + a_off, N1 / 2);
      fc::wmma::load_matrix_sync(b_re, v_re + b_off, N2);
      fc::wmma::load_matrix_sync(b_im, v_im + b_off, N2);
      fc::wmma::mma_sync(acc, a_re, b_re, acc);  // Re(conj(f) v) = fr vr
      fc::wmma::mma_sync(acc, a_im, b_im, acc);  //               + fi vi
    }
    fc::wmma::store_matrix_sync(st, acc, 16, fc::wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
      const int time = (16 * tr + e / 16) * N2 + 16 * tc + e % 16;
      if (time < len) {
        const float y = st[e] * scale + extra[time];
        out[time] = fc::FromFloat<T>(fc::ToFloat(q[time]) * y);
      }
    }
    __syncwarp();
  }
}

// The blocks per SM each size's kernel keeps resident (a register cap for
// ptxas): the occupancy it had before the segment table, as measured
// baseline. Then ptxas (sm_90a) gave 48, 64, 99 and 80 registers at n = 512,
// 1024, 2048, 4096: 5, 4, 2 and 3 blocks of 256 threads in 64 K registers,
// within what shared memory allows (SharedMap: 7, 6, 5 and 3 on an H100).
// Without the cap the table's per-block fields took n = 4096 to 128
// registers, 2 blocks.
constexpr int MinBlocks(int n) {
  return n == 512 ? 5 : n == 1024 ? 4 : n == 2048 ? 2 : 3;
}

template <typename T, int N1, int N2>
__global__ void __launch_bounds__(fc::kThreads, MinBlocks(N1* N2))
    FusedPrefillKernel(const __grid_constant__ KernelArgs a) {
  constexpr int kN = N1 * N2, kChunk = kN / 2;
  constexpr fc::SharedMap map(kN);
  extern __shared__ __align__(128) unsigned char smem[];
  __half* p_re = reinterpret_cast<__half*>(smem + map.plane_p);
  __half* p_im = p_re + kN;
  __half* q_re = reinterpret_cast<__half*>(smem + map.plane_q);
  __half* q_im = q_re + kN;
  float* extra = reinterpret_cast<float*>(smem + map.extra);
  float* scratch = reinterpret_cast<float*>(smem + map.scratch);
  fc::SmallShared& s = *reinterpret_cast<fc::SmallShared*>(smem + map.small);

  const BlockSegment& seg = a.seg[blockIdx.x];
  const int64_t start = seg.start, length = seg.length;
  const int c = blockIdx.y, tid = threadIdx.x;
  const int ns = a.w.shape.d_state, modes = a.w.shape.d_state / 2;
  const auto [q, k, v, out, ring, diag, shift_d, skip] =
      fc::ChannelOf<T>(a, seg, c);
  const float2* spectrum = a.t.spectrum + static_cast<int64_t>(c) * kN;
  const float2* powers =
      a.t.chunk_powers + static_cast<int64_t>(c) * fc::kCarrySegments * modes;

  LoadChannel(a, start, c, ring, diag, s);

  // The on-chip chunk of tokens offset .. offset + len - 1 (positions
  // start + offset on), its history the inputs just before it.
  for (int64_t offset = 0; offset < length; offset += kChunk) {
    const int len =
        static_cast<int>(length - offset < kChunk ? length - offset : kChunk);
    // 1. k with its history, kbar, kv.
    float* kf = scratch;  // kf[kHistory + t] = k[offset + t]
    fc::StageInputs(s.history, k, offset, len, kChunk, tid, fc::kThreads, kf);
    __syncthreads();
    float kv_max = 0.0f;
    for (int t = tid; t < kChunk; t += fc::kThreads) {
      float kv = 0.0f;
      if (t < len) {
        const float* kt = kf + fc::kHistory + t;
        float sum = shift_d * kt[0];
        for (int j = 0; j < ns; ++j) sum += s.taps[j] * kt[-j];
        kv = sum * fc::ToFloat(v[offset + t]);
      }
      extra[t] = kv;
      kv_max = fmaxf(kv_max, fabsf(kv));
    }
    __syncthreads();
    for (int i = tid; i < fc::kHistory; i += fc::kThreads)
      s.history[i] = kf[len + i];
    const float kv_scale = fc::BlockMax(kv_max, s.slots);

    // fp16 copies of kv / kv_scale: left-aligned in P (the FFT's input),
    // right-aligned in Q (the end state's input).
    const float kv_inv = kv_scale > 0 ? 1.0f / kv_scale : 0.0f;
    const int l256 =
        (len + fc::kStateTile - 1) / fc::kStateTile * fc::kStateTile;
    const int pad = l256 - len;
    for (int t = tid; t < kChunk; t += fc::kThreads) {
      p_re[t] = __float2half_rn(extra[t] * kv_inv);
      if (t < l256) {
        q_re[t] = t < pad ? __float2half_rn(0.0f)
                          : __float2half_rn(extra[t - pad] * kv_inv);
      }
    }
    __syncthreads();

    // 2. The diagonal end state (into s.x_next).
    EndState(len, kChunk, l256, modes, kv_scale, q_re, powers, scratch, s);
    for (int t = tid; t < kChunk; t += fc::kThreads) extra[t] *= skip;
    float x_max = 0.0f;
    if (tid < modes) x_max = fmaxf(fabsf(s.x[tid].x), fabsf(s.x[tid].y));
    x_max = fc::BlockMax(x_max, s.slots);  // also: Q is free again

    // 3. The carried state's output (Z in plane Q).
    if (x_max > 0) {
      CarriedOutput(kChunk, modes, x_max, powers, q_re, scratch, extra, s);
    }
    __syncthreads();

    // 4 and 5.
    if (kv_scale > 0) {
      ForwardFirst<N1, N2>(a.t, p_re, q_re, q_im, scratch);
      __syncthreads();
      Middle<N1, N2, false>(a.t, spectrum, q_re, q_im, p_re, p_im, scratch);
      __syncthreads();
      Middle<N1, N2, true>(a.t, spectrum, p_re, p_im, q_re, q_im, scratch);
      __syncthreads();
      const float scale = kN * kv_scale * a.t.spectrum_scale[c];
      InverseLast<T, N1, N2>(a.t, q_re, q_im, scale, len, extra, q + offset,
                             out + offset, scratch);
    } else {
      for (int t = tid; t < len; t += fc::kThreads) {
        out[offset + t] =
            fc::FromFloat<T>(fc::ToFloat(q[offset + t]) * extra[t]);
      }
    }
    __syncthreads();
    if (tid < modes) s.x[tid] = s.x_next[tid];
    __syncthreads();
  }

  // The end states.
  if (tid < modes) {
    diag[2 * tid] = s.x[tid].x;
    diag[2 * tid + 1] = s.x[tid].y;
  }
  // The ring (this block read it in LoadChannel, before any chunk).
  fc::WriteRing(s.history, start, length, ns, tid, fc::kThreads, ring);
}

template <typename T, int N1, int N2>
void* KernelOf() {
  return reinterpret_cast<void*>(&FusedPrefillKernel<T, N1, N2>);
}

template <typename T>
void* KernelFor(int size_index) {
  switch (size_index) {
    case 0:
      return KernelOf<T, 32, 16>();
    case 1:
      return KernelOf<T, 32, 32>();
    case 2:
      return KernelOf<T, 32, 64>();
    default:
      return KernelOf<T, 64, 64>();
  }
}

}  // namespace

void* FusedPrefillKernelFor(ElementType type, int size_index) {
  switch (type) {
    case ElementType::kF32:
      return KernelFor<float>(size_index);
    case ElementType::kF16:
      return KernelFor<__half>(size_index);
    default:
      return KernelFor<__nv_bfloat16>(size_index);
  }
}

}  // namespace h3::kernels::flashconv
