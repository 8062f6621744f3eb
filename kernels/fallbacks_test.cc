// FallbackListHas: the H3_CUDA_FALLBACKS list's parsing (kernels/fallbacks.h).
#include "kernels/fallbacks.h"

#include "gtest/gtest.h"

namespace h3::kernels {
namespace {

TEST(FallbacksTest, FindsWholeNamesInACommaSeparatedList) {
  EXPECT_TRUE(FallbackListHas("pdl", "pdl"));
  EXPECT_TRUE(FallbackListHas("rows,pdl", "pdl"));
  EXPECT_TRUE(FallbackListHas("rows, pdl ,stream-split", "pdl"));
  EXPECT_TRUE(FallbackListHas("rows,,stream-split", "stream-split"));
  EXPECT_FALSE(FallbackListHas("", "pdl"));
  EXPECT_FALSE(FallbackListHas("pdls", "pdl"));
  EXPECT_FALSE(FallbackListHas("pd", "pdl"));
  EXPECT_FALSE(FallbackListHas("rows,", "pdl"));
  EXPECT_FALSE(FallbackListHas(",", ""));
}

}  // namespace
}  // namespace h3::kernels
