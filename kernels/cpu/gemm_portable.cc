// The portable micro-kernel: plain C++, one float per "vector", compiled
// with the build's own flags. It runs where neither AVX2 nor AVX-512 is
// available (or on other architectures) and computes exactly what they do:
// __builtin_fmaf is the correctly rounded fused multiply-add (one
// instruction where the target has FMA, glibc's exact emulation where not).
#include "kernels/cpu/gemm_internal.h"
#include "kernels/cpu/gemm_microkernel.h"

namespace h3::kernels::gemm_portable {
namespace {

struct Scalar {
  using Reg = float;
  static constexpr int kLanes = 1;
  // One row by one panel: 32 independent chains already.
  static constexpr int kMaxRows = 1;
  static constexpr int WidePanels(int) { return 1; }
  static constexpr int GroupVecs(int, int) { return 32; }

  [[gnu::always_inline]] static Reg Zero() { return 0.0f; }
  [[gnu::always_inline]] static Reg Load(const float* p) { return *p; }
  [[gnu::always_inline]] static Reg Broadcast(const float* p) { return *p; }
  [[gnu::always_inline]] static Reg Fma(Reg a, Reg b, Reg c) {
    return __builtin_fmaf(a, b, c);
  }
  [[gnu::always_inline]] static Reg LoadFirst(const float* p, int64_t count) {
    return count >= 1 ? *p : 0.0f;
  }
  [[gnu::always_inline]] static void StoreFirst(float* p, Reg v,
                                                int64_t count) {
    if (count >= 1) *p = v;
  }
};

}  // namespace

const gemm_internal::KernelTable& Kernels() {
  static const gemm_internal::KernelTable table = [] {
    gemm_internal::KernelTable t{};
    gemm_internal::FillTable<Scalar>(&t);
    return t;
  }();
  return table;
}

}  // namespace h3::kernels::gemm_portable
