#ifndef H3_TESTS_SUPPORT_RANDOM_H3_LAYER_H_
#define H3_TESTS_SUPPORT_RANDOM_H3_LAYER_H_

// A random H3 layer and a sequence's state buffers, for the tests of the H3
// kernels (CPU and GPU). Header-only; link h3_kernels_cpu for H3Discretize.

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/h3.h"

namespace h3::testing {

// One layer with random parameters in the ranges S4D initialises them to:
// dt log-uniform in [0.001, 0.1], Re(A) = -exp(inv_A_real) near -0.5,
// Im(A) = pi * n, B, C, D and the shift SSM's vectors normal. The same seed
// gives the same layer. Owns the parameters behind weights().
struct RandomH3Layer {
  RandomH3Layer(kernels::H3Shape s, uint32_t seed) : shape(s) {
    const int d = s.d_model, n = s.d_state, heads = s.heads(), m = s.modes();
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    auto fill = [&](std::vector<float>& v, size_t size, float scale) {
      v.resize(size);
      for (float& x : v) x = scale * normal(rng);
    };
    fill(shift_B, d * n, 0.5f);
    fill(shift_C, d * n, 0.3f);
    fill(shift_D, d, 1.0f);
    fill(B, heads * m * 2, 0.5f);
    fill(C, heads * m * 2, 0.5f);
    fill(D, heads, 1.0f);
    log_dt.resize(heads);
    for (float& x : log_dt)
      x = std::log(0.001f) + uniform(rng) * std::log(100.0f);
    inv_A_real.resize(heads * m);
    A_imag.resize(heads * m);
    for (int i = 0; i < heads * m; ++i) {
      inv_A_real[i] = std::log(0.5f) + 0.1f * normal(rng);
      A_imag[i] = 3.14159265f * (i % m);
    }
    shift_kernel.resize(d * n);
    dA.resize(heads * m * 2);
    dB.resize(heads * m * 2);
    kernels::H3Discretize(
        {shape, shift_B.data(), shift_C.data(), shift_D.data(), log_dt.data(),
         inv_A_real.data(), A_imag.data(), B.data(), C.data(), D.data()},
        {shift_kernel.data(), dA.data(), dB.data()});
  }

  // Host pointers into this object: valid while it lives and is not moved.
  kernels::H3Weights weights() const {
    return {shape,     shift_kernel.data(), shift_D.data(),
            dA.data(), dB.data(),           C.data(),
            D.data()};
  }

  kernels::H3Shape shape;
  std::vector<float> shift_B, shift_C, shift_D, log_dt, inv_A_real, A_imag, B,
      C, D, shift_kernel, dA, dB;
};

// One sequence's H3 state in host memory, zero (a new sequence) at first.
struct H3StateBuffers {
  explicit H3StateBuffers(const kernels::H3Shape& s)
      : shift(s.d_model * s.d_state, 0.0f),
        diag(2 * s.kv_channels() * s.modes(), 0.0f) {}
  kernels::H3State view() { return {shift.data(), diag.data()}; }
  std::vector<float> shift;  // [d, N]
  std::vector<float> diag;   // [p, p, H, M] complex
};

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_RANDOM_H3_LAYER_H_
