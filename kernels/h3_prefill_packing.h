#ifndef H3_KERNELS_H3_PREFILL_PACKING_H_
#define H3_KERNELS_H3_PREFILL_PACKING_H_

// Packed H3 prefill calls (H3PrefillCuda::RunPacked): the parameters, their
// checks and the grouping of segments into kernel launches. Plain C++ (no
// CUDA headers; C++17 for nvcc), so that CI tests the host-side logic
// without a GPU.

#include <cstdint>
#include <string>
#include <vector>

#include "base/element_type.h"
#include "kernels/h3.h"

namespace h3::kernels {

// One sequence's chunk in a packed call.
struct H3PrefillSegment {
  int64_t start = 0;             // position of the chunk's first token, >= 0
  int64_t length = 0;            // tokens, >= 1
  int64_t offset = 0;            // elements from the tensors' base to (token 0,
                                 // channel 0) of this chunk, >= 0
  float* shift_state = nullptr;  // this sequence's [d, N], device
  float* diag_state = nullptr;   // this sequence's [p, p, H, M] complex, device
};

// A packed call: `segments` chunks of different sequences, each with its own
// start, length, place in the tensors and states. Token t, channel c of
// segment i lives at seqs[i].offset + t * time + c * channel in q, k, v and
// out (device memory of `type`).
//
// Packed rows (what the q|k|v product writes: channel 1, every offset a
// whole number of rows, offset = row * time) may give out a row stride of
// its own, out_time: token t, channel c of segment i is then at
// (seqs[i].offset / time + t) * out_time + c in out. Only the chunked
// kernel's token-major form takes such calls (H3PrefillCuda::RunsRows).
// REQUIRES: distinct segments have distinct states and non-overlapping output
// elements (not checked); out does not alias q, k or v.
struct H3PrefillPackedParams {
  ElementType type = ElementType::kF32;
  int64_t time = 0;  // element strides inside a chunk, > 0
  int64_t channel = 0;
  int64_t out_time = 0;  // out's time stride; 0: time (see above)
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  int segments = 0;                        // >= 0; 0 is a no-op
  const H3PrefillSegment* seqs = nullptr;  // [segments], HOST memory
};

// The packed call on the rows of a q|k|v product [R, 3 d] (q, k and v its
// column blocks), out written into rows [R, d]: the engine's call. A
// segment's offset is then its first row times 3 d. No segments yet.
inline H3PrefillPackedParams QkvRowsCall(ElementType type, int64_t d,
                                         const void* qkv, void* out) {
  H3PrefillPackedParams p;
  p.type = type;
  p.time = 3 * d;
  p.channel = 1;
  p.out_time = d;
  p.q = qkv;
  p.k = ElementAt(qkv, d, type);
  p.v = ElementAt(qkv, 2 * d, type);
  p.out = out;
  return p;
}

// Segments one fused-kernel launch takes: its per-block segment table is
// passed by value in the kernel's parameters, which stay under 4 KB
// (static_assert in cuda/h3_prefill_fused_kernel.h). 64 = the batch of the
// benchmarks and of Table 4, so a batch-64 call is one launch.
constexpr int kMaxPackedSegments = 64;

// out's time stride: out_time, or time where it is 0.
inline int64_t OutTime(const H3PrefillPackedParams& p) {
  return p.out_time != 0 ? p.out_time : p.time;
}

// Whether `p` is a well-formed packed call for a layer of `shape`; if not,
// *why names the field and the limit it breaks. segments == 0 is well formed
// whatever the other fields hold. An out_time other than 0 and time needs
// channel 1 and whole-row offsets.
bool CheckPacked(const H3Shape& shape, const H3PrefillPackedParams& p,
                 std::string* why);

// One fused-kernel launch: segment indices (into the call's seqs) that share
// one FFT size index (flashconv::FftSizeIndex of their lengths).
struct PackedLaunch {
  int size_index = 0;
  std::vector<int> segments;
};

// Groups segments by FFT size index (ascending) into launches of at most
// max_per_launch segments each; within a size, segments keep their input
// order. Every segment of segments[0 .. count) appears in exactly one launch.
// REQUIRES: max_per_launch >= 1, count >= 0 (an empty plan otherwise).
std::vector<PackedLaunch> PlanPackedLaunches(const H3PrefillSegment* segments,
                                             int count, int max_per_launch);

}  // namespace h3::kernels

#endif  // H3_KERNELS_H3_PREFILL_PACKING_H_
