#ifndef H3_TESTS_SUPPORT_H3_CPU_PREFILL_H_
#define H3_TESTS_SUPPORT_H3_CPU_PREFILL_H_

// The CPU twin of the GPU prefills (H3PrefillCpu, kernels/h3.h) on one
// sequence's chunk, with the kernel spectrum it needs. Header-only; link
// h3_kernels_cpu.

#include <cstdint>
#include <vector>

#include "kernels/h3.h"

namespace h3::testing {

// q, k, v, out: [length, d] token-major; ring and diag (the state before
// the chunk) are updated in place to the state after it.
inline void PrefillCpu(const kernels::H3Weights& w, int64_t start,
                       int64_t length, const std::vector<float>& q,
                       const std::vector<float>& k, const std::vector<float>& v,
                       std::vector<float>* out, std::vector<float>* ring,
                       std::vector<float>* diag) {
  const int nfft = kernels::H3FftSize(length);
  std::vector<float> spectrum(2 * w.shape.heads() * (nfft / 2 + 1));
  kernels::H3KernelSpectrum(w, nfft, spectrum.data());
  out->assign(length * w.shape.d_model, 0.0f);
  kernels::H3PrefillCpu({.w = w,
                         .start = start,
                         .length = length,
                         .q = q.data(),
                         .k = k.data(),
                         .v = v.data(),
                         .out = out->data(),
                         .state = {ring->data(), diag->data()},
                         .kernel_spectrum = spectrum.data(),
                         .nfft = nfft});
}

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_H3_CPU_PREFILL_H_
