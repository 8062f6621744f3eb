#ifndef H3_TESTS_SUPPORT_NORMALISED_ERROR_H_
#define H3_TESTS_SUPPORT_NORMALISED_ERROR_H_

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace h3::testing {

// max |got - want| / max |want|: the error normalised by the tensor's scale,
// the measure the kernel tests bound (STYLE.md). Infinite where `got` holds a
// NaN or an infinity, or the sizes differ, so that no bound passes them.
template <typename Want>
double NormalisedError(const std::vector<float>& got,
                       const std::vector<Want>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    err = std::max(err, std::abs(double{got[i]} - double{want[i]}));
    scale = std::max(scale, std::abs(double{want[i]}));
  }
  return err / std::max(scale, 1e-30);
}

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_NORMALISED_ERROR_H_
