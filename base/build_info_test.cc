#include "base/build_info.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace h3 {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

TEST(BuildInfoTest, VersionIsSemantic) {
  EXPECT_THAT(GetBuildInfo().version, MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+"));
}

TEST(BuildInfoTest, VersionLineNamesProgramCommitAndCuda) {
  const BuildInfo& info = GetBuildInfo();
  std::string line = VersionLine("h3");
  EXPECT_THAT(line, HasSubstr(std::string("h3 ") + info.version));
  EXPECT_THAT(line, HasSubstr(info.git_commit));
  EXPECT_THAT(line, HasSubstr(info.cuda_enabled ? "CUDA " : "without CUDA"));
}

}  // namespace
}  // namespace h3
