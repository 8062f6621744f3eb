// FlashAttentionPrefillCuda: checks, then per group of up to
// kMaxSequencesPerLaunch sequences two kernels on the stream: the chunks'
// rotated keys and values into their caches (as the fp32 path writes them),
// then the tensor-core attention (flash_attention_kernel.cuh).
#include <cstdint>

#include "kernels/cuda/attention_device.cuh"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/flash_attention_launch.h"
#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/mma_half.cuh"

namespace h3::kernels {
namespace {

using flash::LaunchArgs;
using flash::Sequence;

// Grid (tokens of the longest chunk, sequences): one block per token. T:
// qkv's elements.
template <typename T>
__global__ void WriteKvKernel(const __grid_constant__ LaunchArgs args) {
  const Sequence& seq = args.seqs[blockIdx.y];
  const int64_t t = blockIdx.x;
  if (t >= seq.length) return;
  const int64_t d =
      static_cast<int64_t>(args.shape.heads) * args.shape.head_dim;
  attention_detail::WriteTokenKv(
      static_cast<const T*>(args.qkv) + (seq.row + t) * 3 * d, args.shape,
      args.inv_freq, seq.start + t, seq.cache);
}

}  // namespace

bool FlashAttentionSupports(const AttentionShape& shape, ElementType type) {
  return shape.heads > 0 && shape.heads <= 65535 &&  // grid.y
         flash::SupportedHeadDim(shape.head_dim) &&
         flash::SupportedType(type) && shape.rotary_dim >= 0 &&
         shape.rotary_dim % 2 == 0 && shape.rotary_dim <= shape.head_dim;
}

cudaError_t FlashAttentionPrefillCuda(const flash::Params& p,
                                      cudaStream_t stream) {
  if (p.sequences < 0 || (p.sequences > 0 && p.seqs == nullptr) ||
      !attention_detail::ValidShape(p.shape, p.inv_freq)) {
    return cudaErrorInvalidValue;
  }
  int64_t work = 0;
  bool aligned = Aligned(p.out, 8), caches_ok = true;
  for (int i = 0; i < p.sequences; ++i) {
    const Sequence& s = p.seqs[i];
    if (s.start < 0 || s.length < 0 || s.row < 0 ||
        s.start + s.length > s.cache.capacity ||
        (s.length > 0 && (s.cache.k == nullptr || s.cache.v == nullptr))) {
      return cudaErrorInvalidValue;
    }
    work += s.length;
    aligned = aligned && Aligned(s.cache.k, 16) && Aligned(s.cache.v, 16);
    caches_ok =
        caches_ok && attention_detail::CacheTypeOk(s.cache.type, p.io_type);
  }
  if (work == 0) return cudaSuccess;
  if (p.qkv == nullptr || p.out == nullptr) return cudaErrorInvalidValue;
  if (!FlashAttentionSupports(p.shape, p.type) || !aligned || !caches_ok ||
      !(p.io_type == ElementType::kF32 || p.io_type == p.type)) {
    return cudaErrorNotSupported;
  }
  cudaError_t err = CheckMmaDevice();
  if (err != cudaSuccess) return err;

  LaunchArgs args;
  args.shape = p.shape;
  args.qkv = p.qkv;
  args.inv_freq = p.inv_freq;
  args.out = p.out;
  args.io_type = p.io_type;
  args.scale_log2 = flash::ScoreScaleLog2(p.shape.head_dim);
  for (int first = 0; first < p.sequences;
       first += flash::kMaxSequencesPerLaunch) {
    args.count = 0;
    args.max_length = 0;
    for (int i = first;
         i < p.sequences && args.count < flash::kMaxSequencesPerLaunch; ++i) {
      args.seqs[args.count++] = p.seqs[i];
      if (p.seqs[i].length > args.max_length) {
        args.max_length = p.seqs[i].length;
      }
    }
    if (args.max_length == 0) continue;
    if (args.max_length > INT32_MAX) return cudaErrorInvalidValue;
    // 256 threads: a d_model of 2048 is 8 elements per thread.
    const dim3 kv_grid(static_cast<unsigned>(args.max_length),
                       static_cast<unsigned>(args.count));
    const auto write_kv = [&](auto* kernel) {
      return LaunchInOrder(LaunchOrder::kAfterPrior, kernel, kv_grid, dim3(256),
                           0, stream, args);
    };
    if (p.io_type == ElementType::kF32) {
      err = write_kv(WriteKvKernel<float>);
    } else if (p.io_type == ElementType::kF16) {
      err = write_kv(WriteKvKernel<__half>);
    } else {
      err = write_kv(WriteKvKernel<__nv_bfloat16>);
    }
    if (err != cudaSuccess) return err;
    err = p.type == ElementType::kBF16 ? flash::LaunchBf16(args, stream)
                                       : flash::LaunchF16(args, stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace h3::kernels
