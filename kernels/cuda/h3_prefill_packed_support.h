#ifndef H3_KERNELS_CUDA_H3_PREFILL_PACKED_SUPPORT_H_
#define H3_KERNELS_CUDA_H3_PREFILL_PACKED_SUPPORT_H_

// What the GPU tests of packed H3 prefill calls share
// (h3_prefill_packed_test.cc, h3_prefill_rows_test.cc): the tensors and
// states of a packed step, and byte-for-byte comparisons.

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/h3_prefill.h"
#include "kernels/cuda/h3_prefill_test_support.h"
#include "kernels/h3.h"

namespace h3::kernels::testing {

inline constexpr H3Shape kPackedShape{8, 1, 64};

// The rows of a packed step: segments back to back ([R, d] token-major or
// [d, R] channel-major, R the rows of all segments), q, k, v random, out
// NaN, and every segment's states in its own slot of two state buffers.
struct Packed {
  Packed(const std::vector<int64_t>& lengths,
         const std::vector<int64_t>& starts, ElementType type,
         bool channel_major, const H3Shape& shape = kPackedShape) {
    int64_t rows = 0;
    for (int64_t l : lengths) rows += l;
    const int d = shape.d_model;
    layout = channel_major ? SequenceLayout::ChannelMajor(d, rows)
                           : SequenceLayout::TokenMajor(d, rows);
    const Inputs in(shape, 1, rows, type, 40);
    auto tensor = [&](const std::vector<float>* values, DeviceTensor* t) {
      *t = DeviceTensor{1, rows, d, type, layout};
      if (values != nullptr) return Upload(*values, t);
      cudaError_t err = t->memory.Reserve(t->bytes());
      if (err != cudaSuccess) return err;
      return cudaMemset(t->memory.get(), 0xff, t->bytes());
    };
    ok = tensor(&in.q, &q) == cudaSuccess && tensor(&in.k, &k) == cudaSuccess &&
         tensor(&in.v, &v) == cudaSuccess &&
         tensor(nullptr, &out) == cudaSuccess;
    // One random state per segment, zero for every fourth (a new sequence).
    const Inputs states(shape, static_cast<int>(lengths.size()), 1,
                        ElementType::kF32, 50);
    ok = ok && CopyToDevice(states.state.shift, &shift) == cudaSuccess &&
         CopyToDevice(states.state.diag, &diag) == cudaSuccess;
    const int64_t shift_size = int64_t{d} * shape.d_state;
    const int64_t diag_size = 2 * int64_t{d} * shape.modes();
    int64_t row = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      // Segment i's states in slot (count - 1 - i): not in segment order.
      const int64_t slot = static_cast<int64_t>(lengths.size() - 1 - i);
      segments.push_back({starts[i], lengths[i], row * layout.time,
                          shift.as<float>() + slot * shift_size,
                          diag.as<float>() + slot * diag_size});
      row += lengths[i];
    }
  }
  H3PrefillPackedParams Params(ElementType type) const {
    H3PrefillPackedParams p;
    p.type = type;
    p.time = layout.time;
    p.channel = layout.channel;
    p.q = q.memory.get();
    p.k = k.memory.get();
    p.v = v.memory.get();
    p.out = out.memory.get();
    p.segments = static_cast<int>(segments.size());
    p.seqs = segments.data();
    return p;
  }
  // Each segment as its own batch-1 Run.
  cudaError_t RunOneByOne(H3PrefillCuda& op, ElementType type,
                          cudaStream_t stream) {
    const int64_t size = ElementSize(type);
    for (const H3PrefillSegment& s : segments) {
      H3PrefillCudaParams p;
      p.batch = 1;
      p.start = s.start;
      p.length = s.length;
      p.type = type;
      p.layout = {0, layout.time, layout.channel};
      p.q = static_cast<const char*>(q.memory.get()) + size * s.offset;
      p.k = static_cast<const char*>(k.memory.get()) + size * s.offset;
      p.v = static_cast<const char*>(v.memory.get()) + size * s.offset;
      p.out = static_cast<char*>(out.memory.get()) + size * s.offset;
      p.shift_state = s.shift_state;
      p.diag_state = s.diag_state;
      const cudaError_t err = op.Run(p, stream);
      if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
  }
  // out, then the shift states, then the diagonal states, as raw bytes.
  cudaError_t Bytes(std::vector<char>* bytes) const {
    const DeviceBuffer* parts[] = {&out.memory, &shift, &diag};
    bytes->clear();
    for (const DeviceBuffer* part : parts) {
      const size_t at = bytes->size();
      bytes->resize(at + part->bytes());
      const cudaError_t err = cudaMemcpy(bytes->data() + at, part->get(),
                                         part->bytes(), cudaMemcpyDeviceToHost);
      if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
  }

  bool ok = false;
  SequenceLayout layout;
  DeviceTensor q, k, v, out;
  DeviceBuffer shift, diag;
  std::vector<H3PrefillSegment> segments;
};

// Expects every output element written (out starts as NaN), so that two
// calls that wrote nothing cannot look equal.
inline void ExpectAllWritten(const DeviceTensor& out) {
  std::vector<float> values;
  ASSERT_EQ(Download(out, &values), cudaSuccess);
  size_t nan = 0;
  for (float x : values) nan += std::isnan(x) ? 1 : 0;
  EXPECT_EQ(nan, 0u) << "of " << values.size() << " output elements";
}

// Expects two byte images equal; reports the first difference.
inline void ExpectSameBytes(const std::vector<char>& got,
                            const std::vector<char>& want) {
  ASSERT_EQ(got.size(), want.size());
  size_t first = 0;
  while (first < got.size() && got[first] == want[first]) ++first;
  EXPECT_EQ(first, got.size())
      << "first difference at byte " << first << " of " << got.size();
}

}  // namespace h3::kernels::testing

#endif  // H3_KERNELS_CUDA_H3_PREFILL_PACKED_SUPPORT_H_
