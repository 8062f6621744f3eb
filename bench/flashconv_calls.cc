// The calls h3_flashconv_bench times, one function per mode.
#include "bench/flashconv_calls.h"

namespace h3::bench {

using kernels::H3PrefillCuda;
using kernels::H3PrefillCudaParams;

// A new sequence's first chunk (start 0: the states are zero), for every
// sequence of the batch, channel-major [B, d, L].
H3PrefillCudaParams BatchCall(const Shape& shape, int64_t length,
                              const CallMemory& m, ElementType type) {
  H3PrefillCudaParams p;
  p.batch = shape.batch;
  p.length = length;
  p.type = type;
  p.layout = kernels::SequenceLayout::ChannelMajor(shape.heads, length);
  p.q = m.q;
  p.k = m.k;
  p.v = m.v;
  p.out = m.out;
  p.shift_state = m.shift;
  p.diag_state = m.diag;
  return p;
}

// The packed modes' segments: sequence b at row b * L of [d, B * L], with
// state b.
std::vector<kernels::H3PrefillSegment> Segments(const Shape& shape,
                                                int64_t length,
                                                const StateBytes& sb,
                                                const CallMemory& m) {
  std::vector<kernels::H3PrefillSegment> segments(shape.batch);
  const int64_t shift_each = sb.shift / sizeof(float) / shape.batch;
  const int64_t diag_each = sb.diag / sizeof(float) / shape.batch;
  for (int b = 0; b < shape.batch; ++b) {
    segments[b] = {0, length, b * length, m.shift + b * shift_each,
                   m.diag + b * diag_each};
  }
  return segments;
}

kernels::H3PrefillPackedParams PackedCall(
    const Shape& shape, int64_t length, const CallMemory& m, ElementType type,
    const std::vector<kernels::H3PrefillSegment>& segments) {
  kernels::H3PrefillPackedParams p;
  p.type = type;
  p.time = 1;
  p.channel = shape.batch * length;
  p.q = m.q;
  p.k = m.k;
  p.v = m.v;
  p.out = m.out;
  p.segments = shape.batch;
  p.seqs = segments.data();
  return p;
}

cudaError_t RunSingles(H3PrefillCuda& op, const Shape& shape, int64_t length,
                       const StateBytes& sb, const CallMemory& m,
                       ElementType type, cudaStream_t stream) {
  const std::vector<kernels::H3PrefillSegment> segments =
      Segments(shape, length, sb, m);
  const kernels::H3PrefillPackedParams packed =
      PackedCall(shape, length, m, type, segments);
  for (int i = 0; i < packed.segments; ++i) {
    const cudaError_t err = op.Run(kernels::SegmentCall(packed, i), stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace h3::bench
