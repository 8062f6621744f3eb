// The host side of the chunked H3 prefill: the tables at load, the launches.
#include <cstdint>
#include <vector>

#include "kernels/cuda/h3_prefill_chunked.h"
#include "kernels/cuda/h3_prefill_chunked_kernel.h"
#include "kernels/cuda/h3_prefill_rows_kernel.h"
#include "kernels/flashconv_setup.h"
#include "kernels/h3_chunked.h"

namespace h3::kernels {
namespace {

// Whether every segment has a start >= 0 and a length >= 1 (checked before
// any launch).
bool SegmentsWellFormed(const H3PrefillPackedParams& p) {
  for (int i = 0; i < p.segments; ++i) {
    if (p.seqs[i].start < 0 || p.seqs[i].length < 1) return false;
  }
  return true;
}

// One launch(count) per kMaxPackedSegments segments of p, after writing
// their table into args.seg; a segment's offset divided by `row` (1, or the
// time stride where the kernel takes first rows). The first error, if any.
template <typename Args, typename Launch>
cudaError_t LaunchInGroups(const H3PrefillPackedParams& p, int64_t row,
                           Args& args, Launch launch) {
  for (int first = 0; first < p.segments; first += kMaxPackedSegments) {
    const int count = p.segments - first < kMaxPackedSegments
                          ? p.segments - first
                          : kMaxPackedSegments;
    for (int i = 0; i < count; ++i) {
      const H3PrefillSegment& s = p.seqs[first + i];
      args.seg[i] = {s.start, s.length, s.offset / row, s.shift_state,
                     s.diag_state};
    }
    const cudaError_t err = launch(count);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace

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
  if (err == cudaSuccess) {
    err = chunked::RowsKernelSetUp(&op->rows_shared_limit_);
  }
  if (err != cudaSuccess) return err;
  *out = std::move(op);
  return cudaSuccess;
}

cudaError_t H3PrefillChunked::RunPacked(const H3PrefillPackedParams& p,
                                        cudaStream_t stream) {
  const H3Shape& shape = w_.shape;
  if (p.time != 1 || shape.d_model > 65535 || !SegmentsWellFormed(p)) {
    return cudaErrorInvalidValue;
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
  return LaunchInGroups(p, 1, args, [&](int count) {
    return chunked::LaunchChunkedPrefill(p.type, shift_mma_, args,
                                         static_cast<unsigned>(count), stream);
  });
}

bool H3PrefillChunked::TakesRows(const H3PrefillPackedParams& p) const {
  const int64_t size = ElementSize(p.type);
  if (chunked::RowsSharedBytes(p.type) > rows_shared_limit_ || p.channel != 1 ||
      p.time <= 0 || w_.shape.d_model % chunked::kRowChannels != 0 ||
      p.time * size % 16 != 0 || OutTime(p) * size % 16 != 0 ||
      !Aligned(p.q, 16) || !Aligned(p.k, 16) || !Aligned(p.v, 16) ||
      !Aligned(p.out, 16)) {
    return false;
  }
  for (int i = 0; i < p.segments; ++i) {
    if (p.seqs[i].offset % p.time != 0) return false;
  }
  return true;
}

cudaError_t H3PrefillChunked::RunRows(const H3PrefillPackedParams& p,
                                      cudaStream_t stream) {
  if (!TakesRows(p) || !SegmentsWellFormed(p)) return cudaErrorInvalidValue;
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
  // The kernel's segment offset is its first row.
  return LaunchInGroups(p, p.time, args, [&](int count) {
    return chunked::LaunchRows(p.type, shift_mma_, args,
                               static_cast<unsigned>(count), stream);
  });
}

}  // namespace h3::kernels
