// FallbackListHas: the H3_CUDA_FALLBACKS list's parsing (kernels/fallbacks.h).
#include "kernels/fallbacks.h"

#include "gtest/gtest.h"

namespace h3::kernels {
namespace {

TEST(FallbacksTest, FindsWholeNamesInACommaSeparatedList) {
  EXPECT_TRUE(FallbackListHas("octet", "octet"));
  EXPECT_TRUE(FallbackListHas("rows,octet", "octet"));
  EXPECT_TRUE(FallbackListHas("rows, octet ,norm-in-product", "octet"));
  EXPECT_TRUE(FallbackListHas("rows,,norm-in-product", "norm-in-product"));
  EXPECT_FALSE(FallbackListHas("", "octet"));
  EXPECT_FALSE(FallbackListHas("octets", "octet"));
  EXPECT_FALSE(FallbackListHas("oct", "octet"));
  EXPECT_FALSE(FallbackListHas("rows,", "octet"));
  EXPECT_FALSE(FallbackListHas(",", ""));
}

}  // namespace
}  // namespace h3::kernels
