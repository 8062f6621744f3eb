#include "clients/h3/bench_dataset.h"


#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_path.h"

namespace h3::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(TokenPoolTest, DrawsEveryOrdinaryIdAndNoSpecialOne) {
  // -1 (no such token) and 42 (outside the vocabulary) are ignored.
  absl::StatusOr<TokenPool> pool = TokenPool::Create(10, {9, 0, 3, -1, 42, 3});
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ(pool->size(), 7);
  std::mt19937_64 rng(1);
  std::set<int32_t> seen;
  for (int i = 0; i < 2000; ++i) seen.insert(pool->Sample(rng));
  EXPECT_THAT(seen, ElementsAre(1, 2, 4, 5, 6, 7, 8));
}

TEST(TokenPoolTest, AVocabularyOfSpecialIdsOnlyIsAnError) {
  absl::StatusOr<TokenPool> pool = TokenPool::Create(2, {0, 1});
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SampleLengthTest, StaysInTheRangeAndReachesItsEnds) {
  std::mt19937_64 rng(2);
  EXPECT_EQ(SampleLength(100, 0, rng), 100);
  std::set<int32_t> seen;
  for (int i = 0; i < 2000; ++i) seen.insert(SampleLength(10, 0.5, rng));
  EXPECT_EQ(*seen.begin(), 5);
  EXPECT_EQ(*seen.rbegin(), 15);
  EXPECT_EQ(seen.size(), 11u);
  for (int i = 0; i < 100; ++i) EXPECT_GE(SampleLength(1, 0.9, rng), 1);
}

TEST(RandomPromptsTest, ExactLengthsAndReproducible) {
  absl::StatusOr<TokenPool> pool = TokenPool::Create(50, {0});
  ASSERT_TRUE(pool.ok());
  RandomPromptOptions options;
  options.num_prompts = 5;
  options.input_len = 12;
  options.output_len = 7;
  std::mt19937_64 rng(3);
  const std::vector<BenchPrompt> prompts = RandomPrompts(options, *pool, rng);
  ASSERT_EQ(prompts.size(), 5u);
  for (const BenchPrompt& p : prompts) {
    EXPECT_EQ(p.ids.size(), 12u);
    EXPECT_EQ(p.output_len, 7);
    EXPECT_TRUE(p.text.empty());
    for (int32_t id : p.ids) EXPECT_NE(id, 0);
  }
  std::mt19937_64 again(3);
  EXPECT_EQ(RandomPrompts(options, *pool, again)[4].ids, prompts[4].ids);
}

TEST(RandomPromptsTest, SharedPrefixesInTurnThenOwnTokens) {
  absl::StatusOr<TokenPool> pool = TokenPool::Create(1000, {});
  ASSERT_TRUE(pool.ok());
  RandomPromptOptions options;
  options.num_prompts = 6;
  options.input_len = 8;
  options.output_len = 2;
  options.prefix_len = 32;
  options.num_prefixes = 2;
  std::mt19937_64 rng(4);
  const std::vector<BenchPrompt> p = RandomPrompts(options, *pool, rng);
  ASSERT_EQ(p.size(), 6u);
  auto prefix = [](const BenchPrompt& prompt) {
    return std::vector<int32_t>(prompt.ids.begin(), prompt.ids.begin() + 32);
  };
  auto suffix = [](const BenchPrompt& prompt) {
    return std::vector<int32_t>(prompt.ids.begin() + 32, prompt.ids.end());
  };
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(p[i].ids.size(), 40u);
    EXPECT_EQ(prefix(p[i]), prefix(p[i % 2])) << i;
  }
  EXPECT_NE(prefix(p[0]), prefix(p[1]));
  EXPECT_NE(suffix(p[0]), suffix(p[2]));
}

class JsonlTest : public ::testing::Test {
 protected:
  void TearDown() override { std::remove(path_.c_str()); }

  const std::string& Write(const std::string& text) {
    std::ofstream(path_) << text;
    return path_;
  }

  std::string path_ = h3::testing::TempPath("bench_prompts.jsonl");
};

TEST_F(JsonlTest, ReadsPromptsAndOutputLengthsAndRepeatsThem) {
  const std::string& path = Write(
      "{\"prompt\": \"Hello\", \"output_len\": 3}\n"
      "\n"
      "{\"prompt\": \"World\", \"id\": 7}\n");
  absl::StatusOr<std::vector<BenchPrompt>> prompts =
      ReadJsonlPrompts(path, 5, 16);
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  ASSERT_EQ(prompts->size(), 5u);
  EXPECT_EQ((*prompts)[0].text, "Hello");
  EXPECT_EQ((*prompts)[0].output_len, 3);
  EXPECT_TRUE((*prompts)[0].ids.empty());
  EXPECT_EQ((*prompts)[1].text, "World");
  EXPECT_EQ((*prompts)[1].output_len, 16);
  EXPECT_EQ((*prompts)[4].text, "Hello");
  absl::StatusOr<std::vector<BenchPrompt>> one = ReadJsonlPrompts(path, 1, 16);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1u);
}

TEST_F(JsonlTest, NamesTheLineOfABadRecord) {
  for (const std::string& bad :
       {std::string("{\"prompt\": \"a\"}\n[1, 2]\n"),
        std::string("{\"prompt\": \"a\"}\n{\"text\": \"b\"}\n"),
        std::string("{\"prompt\": \"a\"}\n{\"prompt\": \"b\", "
                    "\"output_len\": 0}\n"),
        std::string("{\"prompt\": \"a\"}\n{\"prompt\": \"b\"\n")}) {
    absl::StatusOr<std::vector<BenchPrompt>> prompts =
        ReadJsonlPrompts(Write(bad), 2, 16);
    EXPECT_EQ(prompts.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_THAT(prompts.status().message(), HasSubstr(path_ + ":2: ")) << bad;
  }
}

TEST_F(JsonlTest, AnEmptyOrMissingFileIsAnError) {
  EXPECT_EQ(ReadJsonlPrompts(Write("\n\n"), 1, 16).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadJsonlPrompts(path_ + ".missing", 1, 16).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace h3::cli
