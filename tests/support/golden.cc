#include "tests/support/golden.h"

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "loader/mapped_file.h"
#include "tests/support/source_path.h"

namespace h3::testing {

std::string EngineTestdata() { return SourcePath("engine/testdata"); }

nlohmann::json Golden(const std::string& name) {
  absl::StatusOr<std::string> text =
      loader::ReadFileToString(EngineTestdata() + "/golden.json");
  EXPECT_TRUE(text.ok()) << text.status();
  if (!text.ok()) return nullptr;
  return nlohmann::json::parse(*text)[name];
}

}  // namespace h3::testing
