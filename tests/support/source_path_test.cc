#include "tests/support/source_path.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/golden.h"

namespace h3::testing {
namespace {

// Restores $H3_SOURCE_DIR as the test found it.
class SourcePathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = std::getenv(kSourceDirEnv);
    had_ = old != nullptr;
    if (had_) old_ = old;
  }
  void TearDown() override {
    if (had_) {
      setenv(kSourceDirEnv, old_.c_str(), 1);
    } else {
      unsetenv(kSourceDirEnv);
    }
  }

 private:
  bool had_ = false;
  std::string old_;
};

TEST_F(SourcePathTest, CompiledInTreeWithoutTheVariable) {
  unsetenv(kSourceDirEnv);
  EXPECT_EQ(SourcePath("engine/testdata"),
            std::string(H3_COMPILED_SOURCE_DIR) + "/engine/testdata");
  EXPECT_EQ(SourcePath(""), H3_COMPILED_SOURCE_DIR);
}

TEST_F(SourcePathTest, EmptyVariableIsUnset) {
  setenv(kSourceDirEnv, "", 1);
  EXPECT_EQ(SourcePath("engine/testdata"),
            std::string(H3_COMPILED_SOURCE_DIR) + "/engine/testdata");
}

TEST_F(SourcePathTest, VariableMovesEveryPath) {
  setenv(kSourceDirEnv, "/tmp/unpacked/h3-gpu", 1);
  EXPECT_EQ(SourcePath("engine/testdata"),
            "/tmp/unpacked/h3-gpu/engine/testdata");
  EXPECT_EQ(EngineTestdata(), "/tmp/unpacked/h3-gpu/engine/testdata");
}

}  // namespace
}  // namespace h3::testing
