#include "loader/safetensors.h"

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_path.h"

namespace h3::loader {
namespace {

using ::testing::HasSubstr;

// A file: 8-byte length, `header`, then `data_size` zero bytes.
std::string File(const std::string& header, size_t data_size,
                 uint64_t length_override = 0) {
  uint64_t n = length_override ? length_override : header.size();
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s + header + std::string(data_size, '\0');
}

absl::StatusOr<SafetensorsHeader> Parse(const std::string& file) {
  return ParseSafetensorsHeader(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(file.data()),
                          file.size()),
      file.size());
}

TEST(SafetensorsTest, ParsesValidHeader) {
  absl::StatusOr<SafetensorsHeader> h = Parse(
      File(R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2,3],)"
           R"("data_offsets":[0,24]},"b":{"dtype":"BF16","shape":[],)"
           R"("data_offsets":[24,26]}})",
           26));
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->tensors.size(), 2u);
  EXPECT_EQ(h->metadata.at("k"), "v");
  EXPECT_EQ(h->tensors[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h->tensors[1].dtype, ElementType::kBF16);
}

TEST(SafetensorsTest, RefusesLyingHeaders) {
  const std::pair<std::string, std::string> cases[] = {
      {std::string("\x05\x00\x00", 3), "shorter than the 8-byte"},
      {File("{}", 0, 1000), "runs past the end"},
      {File("{}", 0, uint64_t{1} << 40), "exceeds the"},
      {File("[]", 0), "not a JSON object"},
      {File("{\"a\":", 0), "not valid JSON"},
      {File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
       "lie outside"},
      {File(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
       "need 12 bytes but offsets give 8"},
      {File(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
       "negative"},
      {File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8),
       "lie outside"},
      {File(R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8),
       "unsupported tensor dtype"},
      {File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            12),
       "overlap"},
      {File(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],)"
            R"("data_offsets":[0,0]}})",
            0),
       "too many elements"},
      {File(R"({"__metadata__":{"k":1}})", 0), "not a string"},
      {File("{\"a\":" + std::string(1000, '[') + std::string(1000, ']') + "}",
            0),
       "nested too deeply"},
  };
  for (const auto& [file, message] : cases) {
    absl::StatusOr<SafetensorsHeader> h = Parse(file);
    ASSERT_FALSE(h.ok()) << "accepted, expected: " << message;
    EXPECT_EQ(h.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(h.status().message(), HasSubstr(message));
  }
}

TEST(SafetensorsTest, WriterAlignsEveryTensorAndReadsBack) {
  const std::string path = h3::testing::TempPath("aligned.safetensors");
  std::vector<SafetensorsWriter::Tensor> tensors = {
      {"small", ElementType::kF16, {3}},  // 6 bytes: the next one needs padding
      {"matrix", ElementType::kF32, {4, 5}},
      {"empty", ElementType::kF32, {0}},
      {"last", ElementType::kU8, {7}},
  };
  absl::StatusOr<std::unique_ptr<SafetensorsWriter>> w =
      SafetensorsWriter::Create(path, tensors, {{"h3.test", "yes"}});
  ASSERT_TRUE(w.ok()) << w.status();
  std::vector<uint8_t> small(6, 1), matrix(80), last(7, 9);
  for (size_t i = 0; i < matrix.size(); ++i)
    matrix[i] = static_cast<uint8_t>(i);
  EXPECT_FALSE((*w)->Append(matrix).ok());  // wrong size for "small"
  ASSERT_TRUE((*w)->Append(small).ok());
  ASSERT_TRUE((*w)->Append(matrix).ok());
  ASSERT_TRUE((*w)->Append({}).ok());
  EXPECT_FALSE((*w)->Finish().ok());  // "last" not written yet
  ASSERT_TRUE((*w)->Append(last).ok());
  ASSERT_TRUE((*w)->Finish().ok());

  absl::StatusOr<std::unique_ptr<SafetensorsFile>> f =
      SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->header().metadata.at("h3.test"), "yes");
  EXPECT_EQ((*f)->header().data_start % 64, 0u);
  uint64_t covered = 0;  // padding tensors make the data section exact
  for (const SafetensorsEntry& e : (*f)->header().tensors) {
    covered += e.end - e.begin;
    if (absl::StartsWith(e.name, SafetensorsWriter::kPaddingPrefix)) continue;
    EXPECT_EQ(((*f)->header().data_start + e.begin) % 64, 0u) << e.name;
  }
  const SafetensorsEntry* m = (*f)->Find("matrix");
  ASSERT_NE(m, nullptr);
  absl::Span<const uint8_t> bytes = (*f)->Bytes(*m);
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.end()), matrix);
  const SafetensorsEntry* l = (*f)->Find("last");
  EXPECT_EQ(covered, l->end);
  EXPECT_EQ((*f)->Bytes(*l)[6], 9);
}

TEST(SafetensorsTest, WriterRefusesBadNamesAndRemovesPartialFile) {
  const std::string path = h3::testing::TempPath("bad.safetensors");
  EXPECT_FALSE(
      SafetensorsWriter::Create(
          path, {{"a", ElementType::kF32, {1}}, {"a", ElementType::kF32, {1}}},
          {})
          .ok());
  EXPECT_FALSE(SafetensorsWriter::Create(
                   path, {{"__padding__.0", ElementType::kU8, {1}}}, {})
                   .ok());
  {
    auto w =
        SafetensorsWriter::Create(path, {{"a", ElementType::kF32, {1}}}, {});
    ASSERT_TRUE(w.ok());
  }  // abandoned before Finish
  std::ifstream partial(path + ".partial");
  EXPECT_FALSE(partial.good());
  std::ifstream final_file(path);
  EXPECT_FALSE(final_file.good());
}

}  // namespace
}  // namespace h3::loader
