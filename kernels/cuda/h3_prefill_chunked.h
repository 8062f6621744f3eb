#ifndef H3_KERNELS_CUDA_H3_PREFILL_CHUNKED_H_
#define H3_KERNELS_CUDA_H3_PREFILL_CHUNKED_H_

// The chunked H3 prefill (kernels/h3_chunked.h; the kernel in
// h3_prefill_chunked_kernel.cu; H3PrefillPath::kChunkedMma its variant
// with the shift convolution on tensor cores): FlashConv's domain (head_dim 1,
// d_state a multiple of 16 up to 64, channel-major tensors) without an FFT.
// Internal to H3PrefillCuda, which checks H3FusedSupports first.

#include <cuda_runtime_api.h>

#include <memory>

#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/h3_prefill.h"
#include "kernels/h3.h"
#include "kernels/h3_prefill_packing.h"

namespace h3::kernels {

class H3PrefillChunked {
 public:
  // Computes the channels' tables (P, E, dA^16 and T) from the host weights
  // and uploads them; `device_weights` (the same layer in device memory)
  // must outlive this object. shift_mma: the kernel's shift convolution on
  // tensor cores (kernels/h3_chunked.h), not in fp32.
  static cudaError_t Create(const H3Weights& host_weights,
                            const H3Weights& device_weights, bool shift_mma,
                            std::unique_ptr<H3PrefillChunked>* out);

  // REQUIRES: params.time == 1, H3FusedSupports(shape), CheckPacked(params).
  // One launch per kMaxPackedSegments segments, all on `stream`; no device
  // allocation, so it can be captured in a CUDA graph. Bit for bit what
  // one batch-1 call per segment computes (each block computes one segment's
  // channel alone).
  cudaError_t RunPacked(const H3PrefillPackedParams& params,
                        cudaStream_t stream);

  // Whether RunRows takes this call: packed rows (channel stride 1, whole-row
  // offsets; out may have a row stride of its own, OutTime), d_model a
  // multiple of 8 (chunked::kRowChannels), q, k, v, out and both row
  // strides 16-byte aligned, and the kernel's shared memory within the
  // device's (not on compute capability 8.6 and 8.9). Either shift
  // convolution (shift_mma or not).
  bool TakesRows(const H3PrefillPackedParams& params) const;

  // The same computation on packed rows (h3_prefill_rows_kernel.cu): q, k
  // and v read, and out written, in place in their rows; no transposes.
  // REQUIRES: TakesRows(params), H3FusedSupports(shape), CheckPacked(params).
  // One launch per kMaxPackedSegments segments; graph-capturable; bit for
  // bit one batch-1 call per segment, as RunPacked.
  cudaError_t RunRows(const H3PrefillPackedParams& params, cudaStream_t stream);

 private:
  H3PrefillChunked() = default;
  H3Weights w_;  // device
  bool shift_mma_ = false;
  // The device's shared memory a block may have (RowsKernelSetUp): the rows
  // kernel runs only where its instance fits.
  int rows_shared_limit_ = 0;
  DeviceBuffer setup_;     // [H] flashconv::ChannelSetup
  DeviceBuffer toeplitz_;  // [H] chunked::ChunkedChannel
};

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_H3_PREFILL_CHUNKED_H_
