#ifndef H3_TESTS_SUPPORT_H3_DIRECT_H_
#define H3_TESTS_SUPPORT_H3_DIRECT_H_

// The H3 layer evaluated directly from its raw parameters in double precision
// (docs/model.md): the shift taps as the correlation of B and C, the kernel
// from powers of dA, the convolutions as plain sums. Independent of every
// kernel under test; O(L^2) per channel. Header-only.

#include <cmath>
#include <complex>
#include <cstdint>
#include <vector>

#include "kernels/h3.h"
#include "tests/support/random_h3_layer.h"

namespace h3::testing {

// The whole layer from token 0, evaluated directly from the raw parameters.
inline std::vector<double> Direct(const RandomH3Layer& layer, int64_t len,
                                  const std::vector<float>& q,
                                  const std::vector<float>& k,
                                  const std::vector<float>& v) {
  using cdouble = std::complex<double>;
  const kernels::H3Shape& s = layer.shape;
  const int d = s.d_model, n = s.d_state, p = s.head_dim, heads = s.heads();
  const int modes = s.modes();
  std::vector<double> kbar(len * d);
  for (int c = 0; c < d; ++c) {
    for (int64_t t = 0; t < len; ++t) {
      double sum = double{layer.shift_D[c]} * k[t * d + c];
      for (int j = 0; j < n && j <= t; ++j) {
        double tap = 0;  // sum_n B[n] C[n + j]
        for (int i = 0; i + j < n; ++i) {
          tap +=
              double{layer.shift_B[c * n + i]} * layer.shift_C[c * n + i + j];
        }
        sum += tap * k[(t - j) * d + c];
      }
      kbar[t * d + c] = sum;
    }
  }
  std::vector<double> kernel(heads * len);
  for (int h = 0; h < heads; ++h) {
    const double dt = std::exp(double{layer.log_dt[h]});
    for (int64_t l = 0; l < len; ++l) {
      cdouble sum = 0;
      for (int m = 0; m < modes; ++m) {
        const int i = h * modes + m;
        const cdouble a(-std::exp(double{layer.inv_A_real[i]}),
                        layer.A_imag[i]);
        const cdouble da = (1.0 + dt * a / 2.0) / (1.0 - dt * a / 2.0);
        const cdouble db = cdouble(layer.B[2 * i], layer.B[2 * i + 1]) * dt /
                           (1.0 - dt * a / 2.0);
        sum += cdouble(layer.C[2 * i], layer.C[2 * i + 1]) * db *
               std::pow(da, static_cast<double>(l));
      }
      kernel[h * len + l] = 2.0 * sum.real();
    }
  }
  std::vector<double> out(len * d, 0.0);
  for (int h = 0; h < heads; ++h) {
    for (int d1 = 0; d1 < p; ++d1) {
      for (int d2 = 0; d2 < p; ++d2) {
        auto kv = [&](int64_t t) {
          return kbar[t * d + h * p + d1] * v[t * d + h * p + d2];
        };
        for (int64_t t = 0; t < len; ++t) {
          double y = layer.D[h] * kv(t);
          for (int64_t j = 0; j <= t; ++j) y += kernel[h * len + j] * kv(t - j);
          out[t * d + d2 * heads + h] += q[t * d + h * p + d1] * y;
        }
      }
    }
  }
  return out;
}

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_H3_DIRECT_H_
