// The AVX-512 micro-kernels (compiled with -mavx512f -mfma; run only where
// the CPU has them, see gemm.cc).
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/gemm_internal.h"
#include "kernels/cpu/gemm_microkernel.h"

namespace h3::kernels::gemm_avx512 {
namespace {

struct Avx512 {
  using Reg = __m512;
  static constexpr int kLanes = 16;
  // A 12-row tile of one panel: 12 x 2 = 24 accumulators, 2 W vectors and
  // broadcasts within the 32 zmm registers; 24 FMAs per 2 loads of W and 12
  // broadcasts of x.
  static constexpr int kMaxRows = 12;
  // Tiles of few rows span several panels so that at least 8 independent
  // FMA chains (4-cycle latency, 1-2 per cycle) are in flight, up to 24
  // accumulators: 1 row x 4 panels = 8, 2 x 4 = 16, 3 x 3 = 18, 4..6 x 2 =
  // 16..24.
  static constexpr int WidePanels(int rows) {
    return rows <= 2 ? 4 : rows == 3 ? 3 : rows <= 6 ? 2 : 1;
  }
  // All of a tile's vectors in one pass (at most 24 accumulators).
  static constexpr int GroupVecs(int, int panels) { return 2 * panels; }

  [[gnu::always_inline]] static Reg Zero() { return _mm512_setzero_ps(); }
  [[gnu::always_inline]] static Reg Load(const float* p) {
    return _mm512_loadu_ps(p);
  }
  [[gnu::always_inline]] static Reg Broadcast(const float* p) {
    return _mm512_set1_ps(*p);
  }
  [[gnu::always_inline]] static Reg Fma(Reg a, Reg b, Reg c) {
    return _mm512_fmadd_ps(a, b, c);
  }
  [[gnu::always_inline]] static __mmask16 FirstMask(int64_t count) {
    if (count >= kLanes) return 0xffff;
    if (count <= 0) return 0;
    return static_cast<__mmask16>((1u << count) - 1);
  }
  [[gnu::always_inline]] static Reg LoadFirst(const float* p, int64_t count) {
    if (count >= kLanes) return _mm512_loadu_ps(p);
    return _mm512_maskz_loadu_ps(FirstMask(count), p);
  }
  [[gnu::always_inline]] static void StoreFirst(float* p, Reg v,
                                                int64_t count) {
    if (count >= kLanes) {
      _mm512_storeu_ps(p, v);
    } else {
      _mm512_mask_storeu_ps(p, FirstMask(count), v);
    }
  }
};

}  // namespace

const gemm_internal::KernelTable& Kernels() {
  static const gemm_internal::KernelTable table = [] {
    gemm_internal::KernelTable t{};
    gemm_internal::FillTable<Avx512>(&t);
    return t;
  }();
  return table;
}

}  // namespace h3::kernels::gemm_avx512

#endif  // defined(__x86_64__)
