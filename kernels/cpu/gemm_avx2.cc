// The AVX2 micro-kernels (compiled with -mavx2 -mfma; run only where the CPU
// has them, see gemm.cc).
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/gemm_internal.h"
#include "kernels/cpu/gemm_microkernel.h"

namespace h3::kernels::gemm_avx2 {
namespace {

struct Avx2 {
  using Reg = __m256;
  static constexpr int kLanes = 8;
  // A panel is 4 ymm vectors; with 16 registers a 2-row tile (8
  // accumulators, 4 W vectors, a broadcast) is the largest without spills.
  static constexpr int kMaxRows = 2;
  // One row spans 2 panels: 8 independent chains.
  static constexpr int WidePanels(int rows) { return rows == 1 ? 2 : 1; }

  [[gnu::always_inline]] static Reg Zero() { return _mm256_setzero_ps(); }
  [[gnu::always_inline]] static Reg Load(const float* p) {
    return _mm256_loadu_ps(p);
  }
  [[gnu::always_inline]] static Reg Broadcast(const float* p) {
    return _mm256_broadcast_ss(p);
  }
  [[gnu::always_inline]] static Reg Fma(Reg a, Reg b, Reg c) {
    return _mm256_fmadd_ps(a, b, c);
  }
  // Lane l is on (sign bit set) when l < count.
  [[gnu::always_inline]] static __m256i FirstMask(int64_t count) {
    const int c = count <= 0 ? 0 : count >= kLanes ? kLanes : int(count);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(c),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  [[gnu::always_inline]] static Reg LoadFirst(const float* p, int64_t count) {
    if (count >= kLanes) return _mm256_loadu_ps(p);
    return _mm256_maskload_ps(p, FirstMask(count));
  }
  [[gnu::always_inline]] static void StoreFirst(float* p, Reg v,
                                                int64_t count) {
    if (count >= kLanes) {
      _mm256_storeu_ps(p, v);
    } else {
      _mm256_maskstore_ps(p, FirstMask(count), v);
    }
  }
};

}  // namespace

const gemm_internal::KernelTable& Kernels() {
  static const gemm_internal::KernelTable table = [] {
    gemm_internal::KernelTable t{};
    gemm_internal::FillTable<Avx2>(&t);
    return t;
  }();
  return table;
}

}  // namespace h3::kernels::gemm_avx2

#endif  // defined(__x86_64__)
