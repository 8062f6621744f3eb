#include "server/memory_amount.h"

#include "gtest/gtest.h"

namespace h3::server {
namespace {

TEST(MemoryAmountTest, BytesSuffixesAndFractions) {
  const std::pair<const char*, int64_t> bytes[] = {
      {"0", 0},
      {"1073741824", int64_t{1} << 30},
      {"512K", 512 << 10},
      {"64M", int64_t{64} << 20},
      {"2G", int64_t{2} << 30},
      {"3GiB", int64_t{3} << 30},
      {"1T", int64_t{1} << 40}};
  for (const auto& [text, expected] : bytes) {
    auto amount = ParseMemoryAmount(text, "--x");
    ASSERT_TRUE(amount.ok()) << text << ": " << amount.status();
    EXPECT_EQ(amount->bytes, expected) << text;
    EXPECT_EQ(amount->fraction, 0) << text;
  }
  auto fraction = ParseMemoryAmount("0.25", "--x");
  ASSERT_TRUE(fraction.ok());
  EXPECT_EQ(fraction->fraction, 0.25);
  EXPECT_EQ(ParseMemoryAmount("1.0", "--x")->fraction, 1.0);
}

TEST(MemoryAmountTest, NonsenseNamesTheFlag) {
  for (const char* text :
       {"", "-1", "1.5", "-0.1", "12Q", "G", "0x10", "nan.", "99999999999T"}) {
    auto amount = ParseMemoryAmount(text, "--prefix-cache-memory");
    EXPECT_EQ(amount.status().code(), absl::StatusCode::kInvalidArgument)
        << text;
    EXPECT_NE(amount.status().message().find("--prefix-cache-memory"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace h3::server
