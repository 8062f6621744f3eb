// The channel-major chunked prefill kernel for the CPU emulator (device.h
// first), and its entry for the tests (h3_prefill_chunked_emulated.h).
#include "kernels/cuda/emulator/h3_prefill_chunked_emulated.h"

#include "kernels/cuda/h3_prefill_chunked_kernel.cu"

namespace h3::kernels::chunked {

std::string RunChunkedPrefillEmulated(ElementType type, bool shift_mma,
                                      const ChunkedArgs& a, int segments) {
  const dim3 grid(static_cast<unsigned>(segments),
                  static_cast<unsigned>(a.w.shape.d_model));
  auto run = [&](void (*kernel)(ChunkedArgs)) {
    return emulator::Run(grid, dim3(kThreads), 0, [&] { kernel(a); });
  };
  switch (type) {
    case ElementType::kF32:
      return shift_mma ? run(ChunkedPrefillKernel<float, true>)
                       : run(ChunkedPrefillKernel<float, false>);
    case ElementType::kF16:
      return shift_mma ? run(ChunkedPrefillKernel<__half, true>)
                       : run(ChunkedPrefillKernel<__half, false>);
    default:
      return shift_mma ? run(ChunkedPrefillKernel<__nv_bfloat16, true>)
                       : run(ChunkedPrefillKernel<__nv_bfloat16, false>);
  }
}

}  // namespace h3::kernels::chunked
