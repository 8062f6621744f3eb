#ifndef H3_KERNELS_CUDA_EMULATOR_DEVICE_H_
#define H3_KERNELS_CUDA_EMULATOR_DEVICE_H_

// Included first (-include) in a host C++ translation unit that compiles a
// kernel's .cu file for the CPU emulator (fibers.h): CUDA's headers as the
// host compiler sees them, then the device side they leave out, in terms of
// the emulator: the execution-space qualifiers as nothing, static
// __shared__ variables as statics (one for all blocks: right while blocks
// run one at a time; a kernel whose blocks form clusters declares its
// arrays with H3_SHARED_ARRAY, kernels/cuda/shared_memory.cuh), the built-in
// variables, barriers, shuffles, votes, the cache-hinted loads and stores,
// the fast-math and bit intrinsics the kernels use, and nvcuda::wmma
// (wmma.h), the mma.sync tile mma_half.cuh uses (mma.h) and
// cooperative_groups' thread-block cluster. Device code that needs more fails
// to compile, which is the signal to add it here.

#define H3_CUDA_EMULATOR 1

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/emulator/fibers.h"

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __noinline__
#undef __launch_bounds__
#undef __grid_constant__
#undef __shared__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __grid_constant__
#define __shared__ static

#define threadIdx (::h3::emulator::ThreadIndex())
#define blockIdx (::h3::emulator::BlockIndex())
#define blockDim (::h3::emulator::BlockDim())
#define gridDim (::h3::emulator::GridDim())
#define warpSize 32

namespace h3::emulator {

// out = the `in` of lane arg (the shuffles' source lane), which must be
// taking part.
inline const char* GatherLanes(Lane* lanes, unsigned lanes_in) {
  for (int i = 0; i < 32; ++i) {
    if (!(lanes_in >> i & 1u)) continue;
    const int src = lanes[i].arg;
    if (src < 0 || src > 31 || !(lanes_in >> src & 1u)) {
      return "reads a lane outside the mask or one that returned";
    }
    std::memcpy(lanes[i].out, lanes[src].in, sizeof(Lane::in));
  }
  return nullptr;
}

// A vote: out = {the bits of the lanes taking part whose `in` (an int) is
// not zero, the lanes taking part}.
inline const char* BallotLanes(Lane* lanes, unsigned lanes_in) {
  unsigned result[2] = {0, lanes_in};
  for (int i = 0; i < 32; ++i) {
    int pred = 0;
    std::memcpy(&pred, lanes[i].in, sizeof pred);
    if ((lanes_in >> i & 1u) && pred != 0) result[0] |= 1u << i;
  }
  for (int i = 0; i < 32; ++i) {
    if (lanes_in >> i & 1u) std::memcpy(lanes[i].out, result, sizeof result);
  }
  return nullptr;
}

inline const char* NoCombine(Lane*, unsigned) { return nullptr; }

template <typename T>
T Shuffle(const char* what, unsigned mask, T v, int src) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16,
                "a shuffle moves a trivially copyable value of 16 bytes at "
                "most here");
  T out;
  WarpCollective(what, mask, &GatherLanes, &v, sizeof v, src, &out, sizeof out);
  return out;
}

// The vote's bits, and (*lanes_in) the lanes that took part.
inline unsigned Ballot(const char* what, unsigned mask, int predicate,
                       unsigned* lanes_in = nullptr) {
  unsigned result[2] = {0, 0};
  WarpCollective(what, mask, &BallotLanes, &predicate, sizeof predicate, 0,
                 result, sizeof result);
  if (lanes_in != nullptr) *lanes_in = result[1];
  return result[0];
}

// A shuffle's segment of `width` lanes (a power of two up to 32).
inline int SegmentBase(int width) {
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    Trap("a shuffle's width must be a power of two up to 32");
  }
  return LaneId() & ~(width - 1);
}

}  // namespace h3::emulator

// cuda_runtime.h's typed overload, which its headers give nvcc's code only
// (kernel_image.cu asks for a kernel's attributes through it).
template <typename T>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, T* entry) {
  return ::cudaFuncGetAttributes(attributes,
                                 reinterpret_cast<const void*>(entry));
}

inline void __syncthreads() { ::h3::emulator::SyncThreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::h3::emulator::WarpCollective("__syncwarp", mask, &::h3::emulator::NoCombine,
                                 nullptr, 0, 0, nullptr, 0);
}

// Source lanes as CUDA defines them for a segment of `width` lanes: a lane
// past its segment's end (xor, down) or before its start (up) reads itself;
// xor may read an earlier segment.
template <typename T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  const int base = ::h3::emulator::SegmentBase(width);
  return ::h3::emulator::Shuffle("__shfl_sync", mask, v,
                                 base + (src & (width - 1)));
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  const int base = ::h3::emulator::SegmentBase(width);
  const int lane = ::h3::emulator::LaneId(), src = lane ^ (lane_mask & 31);
  return ::h3::emulator::Shuffle("__shfl_xor_sync", mask, v,
                                 src >= base + width ? lane : src);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int base = ::h3::emulator::SegmentBase(width);
  const int lane = ::h3::emulator::LaneId();
  const int src = lane - static_cast<int>(delta & 31);
  return ::h3::emulator::Shuffle("__shfl_up_sync", mask, v,
                                 src < base ? lane : src);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int base = ::h3::emulator::SegmentBase(width);
  const int lane = ::h3::emulator::LaneId();
  const int src = lane + static_cast<int>(delta & 31);
  return ::h3::emulator::Shuffle("__shfl_down_sync", mask, v,
                                 src >= base + width ? lane : src);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return ::h3::emulator::Ballot("__ballot_sync", mask, predicate);
}
inline int __any_sync(unsigned mask, int predicate) {
  return ::h3::emulator::Ballot("__any_sync", mask, predicate) != 0;
}
inline int __all_sync(unsigned mask, int predicate) {
  unsigned lanes_in = 0;
  const unsigned bits =
      ::h3::emulator::Ballot("__all_sync", mask, predicate, &lanes_in);
  return bits == lanes_in;
}

[[noreturn]] inline void __trap() { ::h3::emulator::Trap("__trap"); }

// Loads and stores with cache hints: plain accesses here.
template <typename T>
T __ldg(const T* p) {
  return *p;
}
template <typename T>
T __ldca(const T* p) {
  return *p;
}
template <typename T>
T __ldcs(const T* p) {
  return *p;
}
template <typename T>
void __stcs(T* p, T v) {
  *p = v;
}

// Correctly rounded arithmetic. The _rn forms are exact only
// where the test's translation unit does not contract (-ffp-contract=off).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float rsqrtf(float a) { return 1.0f / std::sqrt(a); }

inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline unsigned long long __umul64hi(unsigned long long a,
                                     unsigned long long b) {
  return static_cast<unsigned long long>(
      (static_cast<unsigned __int128>(a) * b) >> 64);
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }

// CUDA's min and max overloads for integers and floats.
#define H3_EMULATOR_MIN_MAX(T)                     \
  inline T min(T a, T b) { return b < a ? b : a; } \
  inline T max(T a, T b) { return a < b ? b : a; }
H3_EMULATOR_MIN_MAX(int)
H3_EMULATOR_MIN_MAX(unsigned)
H3_EMULATOR_MIN_MAX(long)
H3_EMULATOR_MIN_MAX(unsigned long)
H3_EMULATOR_MIN_MAX(long long)
H3_EMULATOR_MIN_MAX(unsigned long long)
H3_EMULATOR_MIN_MAX(float)
H3_EMULATOR_MIN_MAX(double)
#undef H3_EMULATOR_MIN_MAX

#include "kernels/cuda/emulator/mma.h"
#include "kernels/cuda/emulator/wmma.h"

// The thread-block cluster of cooperative_groups.
namespace cooperative_groups {
class cluster_group {
 public:
  unsigned block_rank() const {
    return static_cast<unsigned>(::h3::emulator::ClusterRank());
  }
  unsigned num_blocks() const {
    return static_cast<unsigned>(::h3::emulator::ClusterSize());
  }
  void sync() const { ::h3::emulator::ClusterSync(); }
  template <typename T>
  T* map_shared_rank(T* address, unsigned rank) const {
    return static_cast<T*>(
        ::h3::emulator::MapSharedRank(address, static_cast<int>(rank)));
  }
};
inline cluster_group this_cluster() { return {}; }
}  // namespace cooperative_groups

#endif  // H3_KERNELS_CUDA_EMULATOR_DEVICE_H_
