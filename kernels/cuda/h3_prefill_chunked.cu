// The host side of the chunked H3 prefill: the tables at load, the launches.
#include <cstdint>
#include <vector>

#include "kernels/cuda/h3_prefill_chunked.h"
#include "kernels/cuda/h3_prefill_chunked_kernel.h"
#include "kernels/cuda/h3_prefill_rows_kernel.h"
#include "kernels/flashconv_setup.h"
#include "kernels/h3_chunked.h"

namespace h3::kernels {
cudaError_t H3PrefillChunked::Create(const H3Weights& host_weights,
                                     const H3Weights& device_weights,
                                     bool shift_mma,
                                     std::unique_ptr<H3PrefillChunked>* out) {
  std::unique_ptr<H3PrefillChunked> op(new H3PrefillChunked());
  op->w_ = device_weights;
  op->shift_mma_ = shift_mma;
  cudaError_t err =
      CopyToDevice(flashconv::ChannelSetups(host_weights), &op->setup_);
  if (err == cudaSuccess) {
    err = CopyToDevice(chunked::ChunkedChannels(host_weights), &op->toeplitz_);
  }
  if (err == cudaSuccess) err = chunked::RowsKernelSetUp();
  if (err != cudaSuccess) return err;
  *out = std::move(op);
  return cudaSuccess;
}

cudaError_t H3PrefillChunked::RunPacked(const H3PrefillPackedParams& p,
                                        cudaStream_t stream) {
  const H3Shape& shape = w_.shape;
  if (p.time != 1 || shape.d_model > 65535) return cudaErrorInvalidValue;
  for (int i = 0; i < p.segments; ++i) {  // before any launch
    if (p.seqs[i].start < 0 || p.seqs[i].length < 1) {
      return cudaErrorInvalidValue;
    }
  }
  chunked::ChunkedArgs args{w_,
                            setup_.as<const flashconv::ChannelSetup>(),
                            toeplitz_.as<const chunked::ChunkedChannel>(),
                            p.channel,
                            p.q,
                            p.k,
                            p.v,
                            p.out,
                            {}};
  for (int first = 0; first < p.segments; first += kMaxPackedSegments) {
    const int count = p.segments - first < kMaxPackedSegments
                          ? p.segments - first
                          : kMaxPackedSegments;
    for (int i = 0; i < count; ++i) {
      const H3PrefillSegment& s = p.seqs[first + i];
      args.seg[i] = {s.start, s.length, s.offset, s.shift_state, s.diag_state};
    }
    void* params[] = {&args};
    const cudaError_t err = cudaLaunchKernel(
        chunked::ChunkedPrefillKernelFor(p.type, shift_mma_),
        dim3(count, shape.d_model), dim3(chunked::kThreads), params, 0, stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

namespace {

bool Aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

bool H3PrefillChunked::TakesRows(const H3PrefillPackedParams& p) const {
  const int64_t size = ElementSize(p.type);
  if (shift_mma_ || p.channel != 1 || p.time <= 0 ||
      w_.shape.d_model % chunked::kRowChannels != 0 ||
      p.time * size % 16 != 0 || OutTime(p) * size % 16 != 0 ||
      !Aligned16(p.q) || !Aligned16(p.k) || !Aligned16(p.v) ||
      !Aligned16(p.out)) {
    return false;
  }
  for (int i = 0; i < p.segments; ++i) {
    if (p.seqs[i].offset % p.time != 0) return false;
  }
  return true;
}

cudaError_t H3PrefillChunked::RunRows(const H3PrefillPackedParams& p,
                                      cudaStream_t stream) {
  const H3Shape& shape = w_.shape;
  if (!TakesRows(p)) return cudaErrorInvalidValue;
  for (int i = 0; i < p.segments; ++i) {  // before any launch
    if (p.seqs[i].start < 0 || p.seqs[i].length < 1) {
      return cudaErrorInvalidValue;
    }
  }
  chunked::RowsArgs args{w_,
                         setup_.as<const flashconv::ChannelSetup>(),
                         toeplitz_.as<const chunked::ChunkedChannel>(),
                         p.time,
                         OutTime(p),
                         p.q,
                         p.k,
                         p.v,
                         p.out,
                         {}};
  for (int first = 0; first < p.segments; first += kMaxPackedSegments) {
    const int count = p.segments - first < kMaxPackedSegments
                          ? p.segments - first
                          : kMaxPackedSegments;
    for (int i = 0; i < count; ++i) {
      const H3PrefillSegment& s = p.seqs[first + i];
      // The kernel's offset is the segment's first row.
      args.seg[i] = {s.start, s.length, s.offset / p.time, s.shift_state,
                     s.diag_state};
    }
    void* params[] = {&args};
    const cudaError_t err =
        cudaLaunchKernel(chunked::RowsKernelFor(p.type),
                         dim3(shape.d_model / chunked::kRowChannels, count),
                         dim3(chunked::kRowThreads), params,
                         chunked::RowsSharedBytes(p.type), stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace h3::kernels
