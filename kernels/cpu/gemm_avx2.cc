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
  // A panel is 4 ymm vectors and there are 16 registers. A 6-row tile runs
  // each half panel (2 vectors) in its own pass over k: 12 accumulators, 2
  // W vectors and a broadcast, 12 FMAs per 2 loads of W and 6 broadcasts.
  // Up to 2 rows take whole panels per pass (8 accumulators), one row 2
  // panels at once: at least 8 independent FMA chains in flight.
  static constexpr int kMaxRows = 6;
  static constexpr int WidePanels(int rows) { return rows == 1 ? 2 : 1; }
  static constexpr int GroupVecs(int rows, int panels) {
    return rows <= 2 ? 4 * panels : 2;
  }

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
