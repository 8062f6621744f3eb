#ifndef H3_TESTS_SUPPORT_INV_FREQ_H_
#define H3_TESTS_SUPPORT_INV_FREQ_H_

// The rotary frequencies the attention tests use: inv_freq[i] =
// 10000^(-2i / rotary_dim), as the model's (kernels/attention.h). Test
// support; header-only.

#include <cmath>
#include <vector>

namespace h3::testing {

inline std::vector<float> InvFreq(int rotary_dim) {
  std::vector<float> f(rotary_dim / 2);
  for (int i = 0; i < rotary_dim / 2; ++i) {
    f[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / rotary_dim));
  }
  return f;
}

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_INV_FREQ_H_
