#ifndef H3_TESTS_SUPPORT_HALF_ULP_H_
#define H3_TESTS_SUPPORT_HALF_ULP_H_

// Comparing 16-bit results of kernels whose fp32 arithmetic differs from
// their CPU twin's (the GPU mixers with 16-bit I/O or caches): within one
// ulp of the type plus the fp32 kernels' own bound. Test support;
// header-only.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "base/element_type.h"
#include "gtest/gtest.h"
#include "tests/support/half_io.h"

namespace h3::testing {

// The spacing of `type`'s values just above |x|: one ulp at x.
inline double Ulp(float x, ElementType type) {
  const uint16_t bits = HalfBits({std::abs(x)}, type)[0];
  const std::vector<float> pair =
      HalfValues({bits, static_cast<uint16_t>(bits + 1)}, type);
  return double{pair[1]} - double{pair[0]};
}

// Every element of got within one ulp of the type (at want) plus
// bound * max |want| of want; both 16-bit tensors of `type`.
inline void ExpectWithinUlp(const std::vector<uint16_t>& got,
                            const std::vector<uint16_t>& want, ElementType type,
                            double bound) {
  const std::vector<float> g = HalfValues(got, type),
                           w = HalfValues(want, type);
  ASSERT_EQ(g.size(), w.size());
  double scale = 0;
  for (float x : w) scale = std::max(scale, double{std::abs(x)});
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double err = std::abs(double{g[i]} - double{w[i]});
    if (!(err <= Ulp(w[i], type) + bound * scale) && ++bad <= 5) {
      ADD_FAILURE() << "element " << i << ": got " << g[i] << ", want " << w[i];
    }
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_HALF_ULP_H_
