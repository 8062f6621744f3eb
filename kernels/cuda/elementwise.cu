// The small kernels around the matrix products: residual add + layer norm,
// embedding gather, token-major <-> channel-major transposes and rounding
// fp32 to fp16/bf16. All are memory-bound; the comments say why each launch
// shape is what it is.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/grid.h"
#include "kernels/cuda/io_element.cuh"
#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/layer_norm_device.cuh"

namespace h3::kernels {
namespace {

// Grid-stride elementwise kernels: 256 threads (8 warps) per block hide
// memory latency at any occupancy; 32 blocks per SM saturate HBM on A100 and
// H100 class parts (as in bias_gelu.cu) and the loop covers the rest.
constexpr int kThreads = 256;
constexpr int kMaxBlocksPerSm = 32;

cudaError_t GridFor(int64_t n, int* blocks) {
  return GridStrideBlocks(n, kThreads, kMaxBlocksPerSm, blocks);
}

__device__ int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ int64_t GridThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// Round to nearest, ties to even, as the loader rounds weights on the host.
__device__ void FromFloat(float v, float* out) { *out = v; }
__device__ void FromFloat(float v, __half* out) { *out = __float2half_rn(v); }
__device__ void FromFloat(float v, __nv_bfloat16* out) {
  *out = __float2bfloat16_rn(v);
}

// ---- AddLayerNorm -------------------------------------------------------

// One block per row: a row (d_model = 768..2560 floats) fits the block's
// threads a few elements each, and the two reductions stay on chip
// (layer_norm_device.cuh: kNormThreads, the shared arithmetic).
using layer_norm::kNormThreads;
using layer_norm::NormValue;

// Rows longer than AddLayerNormRowKernel takes, in passes over the row
// (the same arithmetic). Each thread handles the same columns in every
// pass, so writing residual and out in place of what it read (out aliasing
// x, fp32 out) is safe. T is out's element type: the fp32 result is rounded
// once when stored.
template <typename T>
__global__ void __launch_bounds__(kNormThreads)
    AddLayerNormKernel(AddLayerNormParams p) {
  __shared__ float partial[layer_norm::kNormWarps];
  const int64_t offset = static_cast<int64_t>(blockIdx.x) * p.cols;
  const float* x = p.x + offset;
  float* res = p.residual + offset;
  const float* in =
      (p.residual_in != nullptr ? p.residual_in : p.residual) + offset;
  T* out = static_cast<T*>(p.out) + offset;
  LetNextKernelStart();
  WaitForPriorKernel();

  float sum[1] = {0.0f};
  for (int64_t c = threadIdx.x; c < p.cols; c += kNormThreads) {
    const float v = p.add_residual ? x[c] + in[c] : x[c];
    res[c] = v;
    sum[0] += v;
  }
  layer_norm::BlockSums<1>(sum, partial);
  const float mean = sum[0] / static_cast<float>(p.cols);

  float squares[1] = {0.0f};
  for (int64_t c = threadIdx.x; c < p.cols; c += kNormThreads) {
    const float dev = __fsub_rn(res[c], mean);
    squares[0] = __fmaf_rn(dev, dev, squares[0]);
  }
  layer_norm::BlockSums<1>(squares, partial);
  const float inv = rsqrtf(squares[0] / static_cast<float>(p.cols) + p.eps);

  for (int64_t c = threadIdx.x; c < p.cols; c += kNormThreads) {
    FromFloat(NormValue(res[c], mean, inv, p.gamma[c], p.beta[c]), &out[c]);
  }
}

// The same for rows of at most kPer * kNormThreads columns (d_model up to
// 4096), the row held in registers: every thread issues all its loads of x,
// residual, gamma and beta before its first store, so a row costs one
// memory round trip, where the loop above, whose stores to residual may
// alias the next x, waits for each load in turn (an H200's per-op breakdown
// timed a norm of one 2048-wide row at 9.5 us with that loop, 5.2 with this
// kernel, its events' overhead included). Each thread sums the same columns
// in the same order as above: the same arithmetic.
template <typename T, int kPer>
__global__ void __launch_bounds__(kNormThreads)
    AddLayerNormRowKernel(AddLayerNormParams p) {
  __shared__ float partial[layer_norm::kNormWarps];
  const int64_t offset = static_cast<int64_t>(blockIdx.x) * p.cols;
  const float* x = p.x + offset;
  float* res = p.residual + offset;
  const float* in =
      (p.residual_in != nullptr ? p.residual_in : p.residual) + offset;
  T* out = static_cast<T*>(p.out) + offset;
  const int cols = static_cast<int>(p.cols);

  // gamma and beta before waiting for the kernel before (LaunchOrder).
  LetNextKernelStart();
  float v[1][kPer], r[kPer], gamma[kPer], beta[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int c = threadIdx.x + i * kNormThreads;
    const bool inside = c < cols;
    gamma[i] = inside ? p.gamma[c] : 0.0f;
    beta[i] = inside ? p.beta[c] : 0.0f;
  }
  WaitForPriorKernel();
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int c = threadIdx.x + i * kNormThreads;
    const bool inside = c < cols;
    v[0][i] = inside ? x[c] : 0.0f;
    r[i] = inside && p.add_residual ? in[c] : 0.0f;
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    if (p.add_residual) v[0][i] = v[0][i] + r[i];
  }
  float mean[1], inv[1];
  layer_norm::RowStats<1, kPer>(v, cols, p.eps, partial, mean, inv);

#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int c = threadIdx.x + i * kNormThreads;
    if (c >= cols) continue;
    res[c] = v[0][i];
    FromFloat(NormValue(v[0][i], mean[0], inv[0], gamma[i], beta[i]), &out[c]);
  }
}

template <typename T>
cudaError_t LaunchAddLayerNorm(const AddLayerNormParams& p, cudaStream_t stream,
                               LaunchOrder order) {
  const dim3 blocks(static_cast<unsigned>(p.rows));
  auto launch = [&](auto kernel) {
    return LaunchInOrder(order, kernel, blocks, dim3(kNormThreads), 0, stream,
                         p);
  };
  if (p.cols <= 4 * kNormThreads) return launch(AddLayerNormRowKernel<T, 4>);
  if (p.cols <= 8 * kNormThreads) return launch(AddLayerNormRowKernel<T, 8>);
  if (p.cols <= 16 * kNormThreads) {
    return launch(AddLayerNormRowKernel<T, 16>);
  }
  return launch(AddLayerNormKernel<T>);
}

// ---- Embedding and rounding ---------------------------------------------

__device__ float ToFloat(float v) { return v; }
__device__ float ToFloat(__half v) { return __half2float(v); }
__device__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__global__ void EmbeddingKernel(const int32_t* ids, int64_t n, const T* table,
                                int64_t cols, float* out) {
  const int64_t total = n * cols;
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t row = i / cols;
    const int64_t col = i - row * cols;
    out[i] = ToFloat(table[static_cast<int64_t>(ids[row]) * cols + col]);
  }
}

template <typename T>
__global__ void ConvertKernel(const float* in, int64_t n, T* out) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    FromFloat(in[i], &out[i]);
  }
}

template <typename Kernel, typename... Args>
cudaError_t LaunchGridStride(Kernel kernel, int64_t n, cudaStream_t stream,
                             Args... args) {
  int blocks = 0;
  cudaError_t err = GridFor(n, &blocks);
  if (err != cudaSuccess) return err;
  return LaunchInOrder(LaunchOrder::kAfterPrior, kernel, dim3(blocks),
                       dim3(kThreads), 0, stream, args...);
}

// ---- Transposes ---------------------------------------------------------

// 32 x 32 tiles through shared memory: a warp reads 32 consecutive floats of
// one input row and writes 32 consecutive floats of one output row, so both
// sides are coalesced. 32 x 8 threads, each moving 4 elements, keep the
// block small enough for many blocks per SM. The tile's extra column puts a
// tile column's 32 elements in 32 different banks.
constexpr int kTile = 32;
constexpr int kTileRows = 8;
// gridDim.y's hardware limit; taller inputs loop over tile rows.
constexpr int64_t kMaxGridY = 65535;

// out[c * out_stride + r] = in[r * in_stride + c], r < in_rows, c < in_cols;
// T: float, __half or __nv_bfloat16, moved bit for bit.
template <typename T>
__global__ void TransposeKernel(const T* in, int64_t in_rows, int64_t in_cols,
                                int64_t in_stride, T* out, int64_t out_stride) {
  __shared__ T tile[kTile][kTile + 1];
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kTile;
  for (int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile; row0 < in_rows;
       row0 += static_cast<int64_t>(gridDim.y) * kTile) {
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      const int64_t r = row0 + j;
      const int64_t c = col0 + threadIdx.x;
      if (r < in_rows && c < in_cols)
        tile[j][threadIdx.x] = in[r * in_stride + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      const int64_t c = col0 + j;
      const int64_t r = row0 + threadIdx.x;
      if (r < in_rows && c < in_cols)
        out[c * out_stride + r] = tile[threadIdx.x][j];
    }
    __syncthreads();
  }
}

cudaError_t Transpose(const void* in, int64_t in_rows, int64_t in_cols,
                      int64_t in_stride, ElementType type, void* out,
                      int64_t out_stride, cudaStream_t stream) {
  if (in_rows == 0 || in_cols == 0) return cudaSuccess;
  if (in_rows < 0 || in_cols < 0 || in_stride < in_cols ||
      out_stride < in_rows) {
    return cudaErrorInvalidValue;
  }
  const dim3 grid(static_cast<unsigned>((in_cols + kTile - 1) / kTile),
                  static_cast<unsigned>(
                      std::min((in_rows + kTile - 1) / kTile, kMaxGridY)));
  const dim3 block(kTile, kTileRows);
  return io::DispatchIo(type, [&](auto tag) {
    using T = decltype(tag);
    return LaunchInOrder(LaunchOrder::kAfterPrior, TransposeKernel<T>, grid,
                         block, 0, stream, static_cast<const T*>(in), in_rows,
                         in_cols, in_stride, static_cast<T*>(out), out_stride);
  });
}

}  // namespace

cudaError_t AddLayerNormCuda(const AddLayerNormParams& p, cudaStream_t stream,
                             LaunchOrder order) {
  if (p.rows == 0 || p.cols == 0) return cudaSuccess;
  if (p.rows < 0 || p.cols < 0 || p.rows > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  switch (p.out_type) {
    case ElementType::kF32:
      return LaunchAddLayerNorm<float>(p, stream, order);
    case ElementType::kF16:
      if (p.out == p.x) return cudaErrorInvalidValue;
      return LaunchAddLayerNorm<__half>(p, stream, order);
    case ElementType::kBF16:
      if (p.out == p.x) return cudaErrorInvalidValue;
      return LaunchAddLayerNorm<__nv_bfloat16>(p, stream, order);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t EmbeddingCuda(const int32_t* ids, int64_t n, const void* table,
                          ElementType type, int64_t cols, float* out,
                          cudaStream_t stream) {
  if (n == 0 || cols == 0) return cudaSuccess;
  if (n < 0 || cols < 0) return cudaErrorInvalidValue;
  switch (type) {
    case ElementType::kF32:
      return LaunchGridStride(EmbeddingKernel<float>, n * cols, stream, ids, n,
                              static_cast<const float*>(table), cols, out);
    case ElementType::kF16:
      return LaunchGridStride(EmbeddingKernel<__half>, n * cols, stream, ids, n,
                              static_cast<const __half*>(table), cols, out);
    case ElementType::kBF16:
      return LaunchGridStride(EmbeddingKernel<__nv_bfloat16>, n * cols, stream,
                              ids, n, static_cast<const __nv_bfloat16*>(table),
                              cols, out);
  }
  return cudaErrorInvalidValue;
}

cudaError_t TransposeToChannelMajor(const void* in, int64_t rows, int64_t cols,
                                    int64_t in_stride, ElementType type,
                                    void* out, cudaStream_t stream) {
  return Transpose(in, rows, cols, in_stride, type, out, rows, stream);
}

cudaError_t TransposeToTokenMajor(const void* in, int64_t rows, int64_t cols,
                                  ElementType type, void* out,
                                  int64_t out_stride, cudaStream_t stream) {
  // `in` is [cols, rows]: its rows are channels.
  return Transpose(in, cols, rows, rows, type, out, out_stride, stream);
}

cudaError_t ConvertFromFloat(const float* in, int64_t n, ElementType type,
                             void* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (n < 0) return cudaErrorInvalidValue;
  switch (type) {
    case ElementType::kF32:
      if (in == out) return cudaSuccess;
      return cudaMemcpyAsync(out, in, n * sizeof(float),
                             cudaMemcpyDeviceToDevice, stream);
    case ElementType::kF16:
      return LaunchGridStride(ConvertKernel<__half>, n, stream, in, n,
                              static_cast<__half*>(out));
    case ElementType::kBF16:
      return LaunchGridStride(ConvertKernel<__nv_bfloat16>, n, stream, in, n,
                              static_cast<__nv_bfloat16*>(out));
  }
  return cudaErrorInvalidValue;
}

}  // namespace h3::kernels
