// The calls h3_flashconv_bench times, one function per mode, and the copies
// that give mode rows the other modes' values.
#include "bench/flashconv_calls.h"

#include "kernels/cuda/elementwise.h"

namespace h3::bench {

using kernels::H3PrefillCuda;
using kernels::H3PrefillCudaParams;

namespace {

// `p` advanced by `elements` elements of `type`.
const void* Advance(const void* p, int64_t elements, ElementType type) {
  return static_cast<const char*>(p) + elements * ElementSize(type);
}
void* Advance(void* p, int64_t elements, ElementType type) {
  return static_cast<char*>(p) + elements * ElementSize(type);
}

// Mode `like`'s channel-major layout as `count` blocks, each a contiguous
// [d, rows] whose tokens are `rows` consecutive rows of the q|k|v rows:
// [B, d, L] is B blocks of L tokens, [d, B * L] one block of B * L tokens.
struct Blocks {
  int64_t count = 0;
  int64_t rows = 0;
};

Blocks BlocksOf(const Shape& shape, int64_t length, const std::string& like) {
  if (like == "batch") return {shape.batch, length};
  return {1, shape.batch * length};
}

}  // namespace

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

// The packed modes' segments: sequence b at row b * L, with state b.
std::vector<kernels::H3PrefillSegment> Segments(const Shape& shape,
                                                int64_t length, int64_t time,
                                                const StateBytes& sb,
                                                const CallMemory& m) {
  std::vector<kernels::H3PrefillSegment> segments(shape.batch);
  const int64_t shift_each = sb.shift / sizeof(float) / shape.batch;
  const int64_t diag_each = sb.diag / sizeof(float) / shape.batch;
  for (int b = 0; b < shape.batch; ++b) {
    segments[b] = {0, length, b * length * time, m.shift + b * shift_each,
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
      Segments(shape, length, 1, sb, m);
  const kernels::H3PrefillPackedParams packed =
      PackedCall(shape, length, m, type, segments);
  for (int i = 0; i < packed.segments; ++i) {
    const cudaError_t err = op.Run(kernels::SegmentCall(packed, i), stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

CallMemory RowsMemory(const Shape& shape, const void* qkv_rows,
                      ElementType type, void* out, float* shift, float* diag) {
  const int64_t d = shape.heads;
  return {qkv_rows,
          Advance(qkv_rows, d, type),
          Advance(qkv_rows, 2 * d, type),
          out,
          shift,
          diag};
}

kernels::H3PrefillPackedParams RowsCall(
    const Shape& shape, const CallMemory& m, ElementType type,
    const std::vector<kernels::H3PrefillSegment>& segments) {
  kernels::H3PrefillPackedParams p;
  p.type = type;
  p.time = 3 * int64_t{shape.heads};
  p.channel = 1;
  p.out_time = shape.heads;
  p.q = m.q;
  p.k = m.k;
  p.v = m.v;
  p.out = m.out;
  p.segments = static_cast<int>(segments.size());
  p.seqs = segments.data();
  return p;
}

cudaError_t FillRows(const Shape& shape, int64_t length,
                     const std::string& like, const void* q, const void* k,
                     const void* v, ElementType type, void* qkv_rows,
                     cudaStream_t stream) {
  const int64_t d = shape.heads;
  const Blocks blocks = BlocksOf(shape, length, like);
  const void* const tensors[3] = {q, k, v};
  for (int j = 0; j < 3; ++j) {
    for (int64_t i = 0; i < blocks.count; ++i) {
      // Block i of tensor j: [d, rows] into its rows' columns j * d onwards.
      const cudaError_t err = kernels::TransposeToTokenMajor(
          Advance(tensors[j], i * d * blocks.rows, type), blocks.rows, d, type,
          Advance(qkv_rows, i * blocks.rows * 3 * d + j * d, type), 3 * d,
          stream);
      if (err != cudaSuccess) return err;
    }
  }
  return cudaSuccess;
}

cudaError_t RowsToChannelMajor(const Shape& shape, int64_t length,
                               const std::string& like, const void* out_rows,
                               ElementType type, void* out,
                               cudaStream_t stream) {
  const int64_t d = shape.heads;
  const Blocks blocks = BlocksOf(shape, length, like);
  for (int64_t i = 0; i < blocks.count; ++i) {
    const cudaError_t err = kernels::TransposeToChannelMajor(
        Advance(out_rows, i * blocks.rows * d, type), blocks.rows, d, d, type,
        Advance(out, i * d * blocks.rows, type), stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace h3::bench
