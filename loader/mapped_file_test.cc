#include "loader/mapped_file.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace h3::loader {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/h3_mapped_file_test_" + name;
}

TEST(MappedFileTest, MapsContents) {
  const std::string path = TempPath("contents");
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string("h3\0serve", 8);
  }
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->size(), 8u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*file)->data().data()),
                        (*file)->size()),
            std::string("h3\0serve", 8));
  EXPECT_EQ((*file)->path(), path);
  std::remove(path.c_str());
}

TEST(MappedFileTest, EmptyFileIsEmptySpan) {
  const std::string path = TempPath("empty");
  { std::ofstream out(path, std::ios::binary); }
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->size(), 0u);
  EXPECT_TRUE((*file)->data().empty());
  std::remove(path.c_str());
}

TEST(MappedFileTest, MissingFileIsNotFoundAndNamesPath) {
  auto file = MappedFile::Open("/nonexistent/h3/model.h3");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("/nonexistent/h3/model.h3"),
            std::string::npos);
}

TEST(MappedFileTest, DirectoryIsRefused) {
  auto file = MappedFile::Open("/tmp");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace h3::loader
