#ifndef H3_KERNELS_CUDA_EMULATOR_WMMA_H_
#define H3_KERNELS_CUDA_EMULATOR_WMMA_H_

// nvcuda::wmma for the CPU emulator (device.h): 16 x 16 x 16 fragments of
// __half or __nv_bfloat16 operands and float accumulators. A fragment's
// layout in the lanes is opaque in CUDA; here lane l holds elements 8 l ..
// 8 l + 7 of the matrix in row-major order (A: m x k, B: k x n, the
// accumulator: m x n), so code that touches x[] elementwise behaves as on a
// GPU, and mma_sync is a warp collective: every lane brings its elements,
// the last to arrive forms the product (fp32, summed in k order), each
// takes its part. The loads and stores check CUDA's rules: a 256-bit
// aligned pointer and a stride (ldm) of a multiple of 16 bytes.

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/cuda/emulator/fibers.h"
#include "kernels/cuda/io_element.cuh"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

constexpr int kElementsPerLane = 8;  // 256 / 32

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16,
                "the emulator has 16 x 16 x 16 fragments only");
  using element_type = T;
  static constexpr int num_elements = kElementsPerLane;
  T x[kElementsPerLane];
};

namespace detail {

template <typename T>
void CheckOperand(const char* what, const T* p, unsigned ldm) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0) {
    ::h3::emulator::Trap(what, ": pointer not 256-bit aligned");
  }
  if (ldm * sizeof(T) % 16 != 0) {
    ::h3::emulator::Trap(what, ": ldm not a multiple of 16 bytes");
  }
}

// The (row, column) of element i of the running lane.
inline int Row(int i) {
  return (kElementsPerLane * ::h3::emulator::LaneId() + i) / 16;
}
inline int Col(int i) {
  return (kElementsPerLane * ::h3::emulator::LaneId() + i) % 16;
}

// D = A B + C for the whole warp; a lane's in: its A, B, C elements as
// floats (24), out: its D elements (8).
inline const char* Product(::h3::emulator::Lane* lanes, unsigned mask) {
  if (mask != 0xffffffffu) return "mma_sync needs the whole warp";
  float a[16][16], b[16][16], c[16][16];
  for (int l = 0; l < 32; ++l) {
    float in[3 * kElementsPerLane];
    std::memcpy(in, lanes[l].in, sizeof in);
    for (int i = 0; i < kElementsPerLane; ++i) {
      const int e = kElementsPerLane * l + i;
      a[e / 16][e % 16] = in[i];
      b[e / 16][e % 16] = in[kElementsPerLane + i];
      c[e / 16][e % 16] = in[2 * kElementsPerLane + i];
    }
  }
  for (int l = 0; l < 32; ++l) {
    float out[kElementsPerLane];
    for (int i = 0; i < kElementsPerLane; ++i) {
      const int e = kElementsPerLane * l + i, r = e / 16, col = e % 16;
      float sum = c[r][col];
      for (int k = 0; k < 16; ++k) sum += a[r][k] * b[k][col];
      out[i] = sum;
    }
    std::memcpy(lanes[l].out, out, sizeof out);
  }
  return nullptr;
}

}  // namespace detail

template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p,
                      unsigned ldm) {
  static_assert(!std::is_same_v<Use, accumulator>,
                "an accumulator load takes a layout_t");
  detail::CheckOperand("load_matrix_sync", p, ldm);
  for (int i = 0; i < kElementsPerLane; ++i) {
    const int r = detail::Row(i), c = detail::Col(i);
    f.x[i] =
        std::is_same_v<Layout, row_major> ? p[r * ldm + c] : p[c * ldm + r];
  }
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f,
                             const float* p, unsigned ldm, layout_t layout) {
  detail::CheckOperand("load_matrix_sync", p, ldm);
  for (int i = 0; i < kElementsPerLane; ++i) {
    const int r = detail::Row(i), c = detail::Col(i);
    f.x[i] = layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
  }
}

inline void store_matrix_sync(float* p,
                              const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t layout) {
  detail::CheckOperand("store_matrix_sync", p, ldm);
  for (int i = 0; i < kElementsPerLane; ++i) {
    const int r = detail::Row(i), c = detail::Col(i);
    (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[i];
  }
}

template <typename Use, typename T, typename Layout, typename V>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, V v) {
  for (int i = 0; i < kElementsPerLane; ++i) {
    f.x[i] = ::h3::kernels::io::FromFloat<T>(static_cast<float>(v));
  }
}

template <typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
              const fragment<matrix_a, 16, 16, 16, T, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LayoutB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  float in[3 * kElementsPerLane];
  for (int i = 0; i < kElementsPerLane; ++i) {
    in[i] = ::h3::kernels::io::ToFloat(a.x[i]);
    in[kElementsPerLane + i] = ::h3::kernels::io::ToFloat(b.x[i]);
    in[2 * kElementsPerLane + i] = c.x[i];
  }
  float out[kElementsPerLane];
  ::h3::emulator::WarpCollective("mma_sync", 0xffffffffu, &detail::Product, in,
                                 sizeof in, 0, out, sizeof out);
  for (int i = 0; i < kElementsPerLane; ++i) d.x[i] = out[i];
}

}  // namespace nvcuda::wmma

#endif  // H3_KERNELS_CUDA_EMULATOR_WMMA_H_
