// AddNormStreamGemmCuda: the residual add and layer norm of a decode step
// inside the product that reads the norm's output (kernels/cuda/
// stream_gemm.h). Every block norms the (at most kNormStreamMaxRows) rows
// itself, keeps them in shared memory as the product's x, and writes its
// slice of the residual sum; the product is StreamGemmKernel's (StreamBlock).
//
// Why: at batch 1 a norm is one block on one SM, a few microseconds of
// launch, two reductions and a round trip through memory between two
// products that stream megabytes of weights (the H200 breakdown at e190e6a:
// 5.2 us a norm, 48 norms a step). In the product, the norm costs each
// block one read of the rows from L2 and two block reductions.
//
// The residual sum cannot go back where it came from: other blocks still
// read it. So it goes to norm.residual, read from norm.residual_in (the
// forward pass alternates two residual buffers).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/layer_norm_device.cuh"
#include "kernels/cuda/mma_half.cuh"
#include "kernels/cuda/prefetch.cuh"
#include "kernels/cuda/shared_memory.cuh"
#include "kernels/cuda/stream_gemm.h"
#include "kernels/cuda/stream_gemm_device.cuh"

namespace h3::kernels {
namespace {

using layer_norm::kNormThreads;
using stream_gemm::kThreads;
static_assert(kThreads == kNormThreads,
              "the product's block computes the norm with the norm kernel's "
              "arithmetic: the same threads hold the same columns");

constexpr int kRows = static_cast<int>(kNormStreamMaxRows);
// A normed row in shared memory is k + kRowPad elements apart from the
// next: 64 bytes of padding put the rows two lane groups read in one phase
// of a 16-byte load (rows g and g + 1) in different halves of the banks.
constexpr int64_t kRowPad = 32;

// L2 prefetch of this warp's first kUnroll = 4 steps of W (16 rows of 128
// bytes a step, one line each), issued before the wait: the weights stream
// in while the kernel before finishes, without holding registers through
// the norm.
template <typename T>
__device__ __forceinline__ void PrefetchFirstSteps(const StreamGemmParams& p,
                                                   int64_t steps) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t col = int64_t{blockIdx.x} * kStreamCols + lane % 16;
  if (col >= p.n) return;
  const T* row = static_cast<const T*>(p.w) + col * p.k;
#pragma unroll
  for (int u = lane / 16; u < 4; u += 2) {
    const int64_t s = warp + int64_t{kStreamWarps} * u;
    if (s < steps) PrefetchL2(row + s * kStreamStep);
  }
}

// T: W's type, and the normed rows'; kPer: columns a thread (cols <=
// kPer * kNormThreads), as AddLayerNormCuda's row kernel takes them.
template <typename T, int kPer>
__global__ void __launch_bounds__(kThreads)
    AddNormStreamGemmKernel(StreamGemmParams p, AddLayerNormParams n,
                            int64_t steps) {
  __shared__ float partial[kStreamWarps - 1][1][4][32];
  __shared__ float sums[kRows * layer_norm::kNormWarps];
  H3_DYNAMIC_SHARED(uint4, shared_rows, 16);  // [rows][k + kRowPad] of T
  T* rows_x = reinterpret_cast<T*>(shared_rows);
  const int64_t stride = p.k + kRowPad;
  const int cols = static_cast<int>(n.cols);
  const int rows = static_cast<int>(n.rows);

  LetNextKernelStart();
  PrefetchFirstSteps<T>(p, steps);
  float gamma[kPer], beta[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int c = threadIdx.x + i * kNormThreads;
    gamma[i] = c < cols ? n.gamma[c] : 0.0f;
    beta[i] = c < cols ? n.beta[c] : 0.0f;
  }
  WaitForPriorKernel();  // x and the residual are the kernels before's

  float v[kRows][kPer];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float in[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int c = threadIdx.x + i * kNormThreads;
      const bool inside = r < rows && c < cols;
      const int64_t at = int64_t{r} * cols + c;
      v[r][i] = inside ? n.x[at] : 0.0f;
      in[i] = inside && n.add_residual ? n.residual_in[at] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      if (n.add_residual) v[r][i] = v[r][i] + in[i];
    }
  }
  float mean[kRows], inv[kRows];
  layer_norm::RowStats<kRows, kPer>(v, cols, n.eps, sums, mean, inv);

  // This block's slice of the residual sum, and every normed row.
  const int per_block = (cols + gridDim.x - 1) / gridDim.x;
  const int lo = static_cast<int>(blockIdx.x) * per_block;
  const int hi = min(lo + per_block, cols);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r >= rows) break;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int c = threadIdx.x + i * kNormThreads;
      if (c >= cols) continue;
      if (c >= lo && c < hi) n.residual[int64_t{r} * cols + c] = v[r][i];
      rows_x[r * stride + c] = HalfOps<T>::Round(
          layer_norm::NormValue(v[r][i], mean[r], inv[r], gamma[i], beta[i]));
    }
  }
  __syncthreads();

  const int g = threadIdx.x % 32 / 4;
  stream_gemm::StreamBlock<T, 1>(
      p, steps,
      [&](int, int64_t e) {
        return g < rows
                   ? *reinterpret_cast<const uint4*>(rows_x + g * stride + e)
                   : make_uint4(0, 0, 0, 0);
      },
      partial);
}

template <typename T, int kPer>
cudaError_t Launch(const AddLayerNormParams& n, const StreamGemmParams& p,
                   cudaStream_t stream, LaunchOrder order) {
  const int64_t blocks = (p.n + kStreamCols - 1) / kStreamCols;
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  const int64_t steps = (p.k + kStreamStep - 1) / kStreamStep;
  const size_t shared = n.rows * (p.k + kRowPad) * sizeof(T);
  return LaunchInOrder(order, AddNormStreamGemmKernel<T, kPer>,
                       dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
                       shared, stream, p, n, steps);
}

template <typename T>
cudaError_t LaunchForCols(const AddLayerNormParams& n,
                          const StreamGemmParams& p, cudaStream_t stream,
                          LaunchOrder order) {
  // The norm kernel's choice of kPer (elementwise.cu), for the same bits.
  if (n.cols <= 4 * kNormThreads) return Launch<T, 4>(n, p, stream, order);
  if (n.cols <= 8 * kNormThreads) return Launch<T, 8>(n, p, stream, order);
  return Launch<T, 16>(n, p, stream, order);
}

bool Overlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

}  // namespace

const char* AddNormStreamGemmCheck(const AddLayerNormParams& n,
                                   const StreamGemmParams& p) {
  if (n.rows != p.rows || n.cols != p.k) {
    return "the norm's rows and cols must be the product's rows and k";
  }
  if (p.rows < 1 || p.rows > kNormStreamMaxRows) {
    return "rows must be in [1, kNormStreamMaxRows]";
  }
  if (p.k > kNormStreamMaxCols) return "k must be at most kNormStreamMaxCols";
  // No columns, no blocks: nobody would write the residual.
  if (p.n < 1) return "n must be at least 1";
  if (p.x != n.out || p.x_type != n.out_type || n.out_type != p.w_type) {
    return "x must be the norm's output, in the weights' type";
  }
  if (n.x == nullptr || n.residual == nullptr || n.gamma == nullptr ||
      n.beta == nullptr || (n.add_residual && n.residual_in == nullptr)) {
    return "the norm needs x, residual, gamma, beta and (to add) residual_in";
  }
  const int64_t bytes = n.rows * n.cols * int64_t{sizeof(float)};
  if (n.add_residual && Overlap(n.residual_in, bytes, n.residual, bytes)) {
    return "residual_in and residual must not overlap";
  }
  const int64_t y_bytes = p.rows * p.n * int64_t{ElementSize(p.y_type)};
  if (Overlap(n.residual, bytes, n.x, bytes) ||
      Overlap(n.residual, bytes, p.y, y_bytes)) {
    return "residual must overlap neither x nor y";
  }
  // Every block reads all of x and residual_in while others write y.
  if (Overlap(p.y, y_bytes, n.x, bytes) ||
      (n.add_residual && Overlap(p.y, y_bytes, n.residual_in, bytes))) {
    return "y must overlap neither x nor residual_in";
  }
  return "";
}

cudaError_t AddNormStreamGemmCuda(const AddLayerNormParams& norm,
                                  const StreamGemmParams& product,
                                  cudaStream_t stream, LaunchOrder order) {
  if (AddNormStreamGemmCheck(norm, product)[0] != '\0') {
    return cudaErrorNotSupported;
  }
  if (StreamGemmCheck(product, true)[0] != '\0') return cudaErrorInvalidValue;
  if (const cudaError_t err = CheckMmaDevice(); err != cudaSuccess) {
    return err;
  }
  if (product.w_type == ElementType::kBF16) {
    return LaunchForCols<__nv_bfloat16>(norm, product, stream, order);
  }
  return LaunchForCols<__half>(norm, product, stream, order);
}

}  // namespace h3::kernels
