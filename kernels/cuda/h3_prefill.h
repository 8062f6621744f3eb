#ifndef H3_KERNELS_CUDA_H3_PREFILL_H_
#define H3_KERNELS_CUDA_H3_PREFILL_H_

// H3 prefill on the GPU: the GPU twin of H3PrefillCpu (kernels/h3.h) for a
// batch of sequences, with two implementations behind one per-layer object:
//
//   fused (FlashConv, h3_prefill_fused_kernel.cu): one kernel computes
//     the shift convolution, kv, the long convolution by a block FFT on
//     tensor cores, the carried state's contribution, the output gate and
//     both end states, walking the sequence in on-chip chunks and passing
//     the state between them. Needs head_dim 1, d_state a multiple of 16
//     up to 64 (the released models use 64) and channel-major tensors
//     (time stride 1).
//   chunked (h3_prefill_chunked_kernel.cu, kernels/h3_chunked.h): the same
//     domain and result as fused without an FFT: the diagonal SSM as a
//     chunked scan over 16-token columns (its state has at most 32 modes),
//     three small MMAs per 16 tokens. Chosen on request (Options; the
//     engine's default for 16-bit weights). Its second kernel
//     (h3_prefill_rows_kernel.cu) computes the same on token-major packed
//     rows, the q|k|v product's, with no transposes (RunsRows).
//   cufft (h3_prefill_cufft.cu): the unfused baseline. cuFFT for the
//     convolution, separate elementwise kernels for the rest. Any shape and
//     any layout; the fallback where the fused kernel does not apply.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "base/element_type.h"
#include "kernels/h3.h"
#include "kernels/h3_prefill_packing.h"

namespace h3::kernels {

// Where element (b, t, c) of q, k, v and out lives, in elements from the
// tensor's base pointer: b * batch + t * time + c * channel.
struct SequenceLayout {
  int64_t batch = 0;
  int64_t time = 0;
  int64_t channel = 0;

  // [B, d, L]: each channel's sequence contiguous (what FlashConv wants).
  static SequenceLayout ChannelMajor(int d, int64_t length) {
    return {d * length, 1, length};
  }
  // [B, L, d]: each token's channels contiguous (what a GEMM writes).
  static SequenceLayout TokenMajor(int d, int64_t length) {
    return {d * length, d, 1};
  }
};

// One prefill call: a chunk of `length` tokens at positions [start, start +
// length) for each of `batch` sequences (all the same length and start),
// each starting from its own saved state (the shift state a ring indexed by
// position, kernels/h3.h).
// q, k, v, out: device tensors of `type` in `layout`; out must not alias
// q, k or v. The states are fp32 device memory, read as the state before the
// chunk (zeros for a new sequence) and overwritten with the state after it,
// one H3State per sequence laid out back to back:
//   shift_state [batch, d, N],  diag_state [batch, p, p, H, M] complex.
// A call reads the inputs before `start` from the shift state's ring and
// writes its last min(length, N) inputs into their slots.
struct H3PrefillCudaParams {
  int batch = 0;
  int64_t start = 0;  // >= 0
  int64_t length = 0;
  ElementType type = ElementType::kF32;
  SequenceLayout layout;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* shift_state = nullptr;
  float* diag_state = nullptr;
};

// The batch-1 call that segment i of a packed call stands for (see
// H3PrefillCuda::RunPacked): its start, length and states, layout
// {0, time, channel}, the tensors advanced by its offset.
H3PrefillCudaParams SegmentCall(const H3PrefillPackedParams& packed, int i);

// kChunkedMma: the chunked kernel with its shift convolution on tensor
// cores: on channel-major tensors with fp16 taps through shared memory
// (kernels/h3_chunked.h; slower than kChunked on an H200), on packed rows
// in registers with two fp16 parts a value (h3_rows_shift_mma.cuh; 3 to 4%
// faster than kChunked there on an H200). The engine takes it with
// --h3-prefill chunked-mma; h3_flashconv_bench --paths chunked_mma --rows
// times both.
enum class H3PrefillPath { kFused, kCufft, kChunked, kChunkedMma };
const char* H3PrefillPathName(H3PrefillPath path);

class H3PrefillChunked;
class H3PrefillCufft;
class H3PrefillFused;

// One H3 layer's prefill on the current CUDA device: owns a device copy of the
// layer's weights and what every call reuses (kernel spectra, cuFFT plans,
// scratch), computed once at load.
class H3PrefillCuda {
 public:
  struct Options {
    // kFused uses the fused kernel where the layer's shape allows it and the
    // cuFFT path otherwise; kChunked the chunked kernel where the shape
    // allows it (H3FusedSupports, the same domain) and the cuFFT path
    // otherwise (kChunkedMma: its shift-MMA variant); kCufft always uses the
    // cuFFT path.
    H3PrefillPath prefer = H3PrefillPath::kFused;
  };

  // `weights` holds host pointers (as filled by H3Discretize); they are
  // copied. On failure *out is untouched and the error is returned.
  static cudaError_t Create(const H3Weights& weights, const Options& options,
                            std::unique_ptr<H3PrefillCuda>* out);
  ~H3PrefillCuda();

  // The path chosen at load, and why, in words (for the load-time log).
  H3PrefillPath path() const { return path_; }
  const std::string& reason() const { return reason_; }
  // The layer's weights in device memory.
  const H3Weights& device_weights() const { return device_weights_; }

  // Whether a call in `layout` runs on the fused kernel: the fused path was
  // chosen and the layout's time stride is 1. Channel-major layouts have it;
  // so does a token-major one when d_model is 1 (the two layouts are then
  // the same memory).
  // The chunked path counts as fused here: same domain. It takes
  // channel-major layouts, and token-major ones (channel stride 1) whose
  // time stride and d_model are multiples of 8 on its packed-rows kernel
  // (RunsRows; their tensors must also be 16-byte aligned, else such a
  // call takes the cuFFT path).
  bool RunsFused(const SequenceLayout& layout) const;

  // Whether RunPacked runs `params` on the chunked kernel's packed-rows form
  // (h3_prefill_rows_kernel.cu: q, k, v read and out written in their rows,
  // no transposes): the chunked path (kChunked or kChunkedMma), channel
  // stride 1, whole-row offsets, d_model a multiple of 8, tensors and row
  // strides 16-byte aligned. Only such calls may give out a row stride of
  // its own (H3PrefillPackedParams::out_time).
  bool RunsRows(const H3PrefillPackedParams& params) const;

  // Enqueues one call on `stream`: on the fused kernel where RunsFused,
  // otherwise on the cuFFT path. InvalidValue for
  // arguments that break the contract above. Not thread-safe: the object
  // owns scratch memory that one call at a time uses.
  cudaError_t Run(const H3PrefillCudaParams& params, cudaStream_t stream);

  // Enqueues a packed call (kernels/h3_prefill_packing.h): `segments`
  // sequences' chunks, each with its own start, length, offset and states.
  // Computes exactly, bit for bit, what the batch-1 Run calls
  // SegmentCall(params, i), i < segments, compute: outputs and end states.
  //
  // Fused path (RunsFused({0, time, channel})): the segments are grouped by
  // FFT size (flashconv::FftSizeIndex(length), the size a batch-1 call
  // uses) into launches of at most kMaxPackedSegments; the segment table
  // travels in the kernel parameters, so the call allocates no device
  // memory, is asynchronous and can be captured in a CUDA graph. The
  // chunked path likewise, in launches of up to kMaxPackedSegments segments
  // of any lengths, channel-major or (RunsRows) on packed rows.
  // cuFFT path, the fallback: one batch-1 Run per segment, in order; it
  // refuses (InvalidValue) an out_time other than time.
  //
  // REQUIRES: distinct segments have distinct states and non-overlapping
  // output elements (not checked). InvalidValue where CheckPacked refuses
  // (it says why); segments == 0 is a no-op success. Not thread-safe (as
  // Run).
  cudaError_t RunPacked(const H3PrefillPackedParams& params,
                        cudaStream_t stream);

  H3PrefillCuda(const H3PrefillCuda&) = delete;
  H3PrefillCuda& operator=(const H3PrefillCuda&) = delete;

 private:
  H3PrefillCuda() = default;

  H3PrefillPath path_ = H3PrefillPath::kCufft;
  std::string reason_;
  float* weight_memory_ = nullptr;  // one allocation behind device_weights_
  H3Weights device_weights_;
  std::unique_ptr<H3PrefillCufft> cufft_;
  std::unique_ptr<H3PrefillFused> fused_;
  std::unique_ptr<H3PrefillChunked> chunked_;
};

// Whether the fused kernel handles this layer shape; if not, *why says what
// it lacks.
bool H3FusedSupports(const H3Shape& shape, std::string* why);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_H3_PREFILL_H_
