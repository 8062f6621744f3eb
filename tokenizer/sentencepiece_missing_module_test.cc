// A process whose $H3_SENTENCEPIECE_MODULE names no file: sentencepiece
// models fail with an error that says what was tried, and nothing crashes.
// A binary of its own, because the module is looked for once per process.
#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tokenizer/load.h"
#include "tokenizer/test_fixtures.h"

namespace h3::tokenizer {
namespace {

using ::testing::HasSubstr;

TEST(SentencePieceMissingModule, IsAClearErrorNotACrash) {
  ASSERT_EQ(setenv("H3_SENTENCEPIECE_MODULE", "/nonexistent/h3spm.so", 1), 0);
  absl::StatusOr<std::string> model =
      testing::ReadTestData("spm/h3_test.model");
  ASSERT_TRUE(model.ok()) << model.status();
  for (int attempt = 0; attempt < 2; ++attempt) {  // the failure is kept
    absl::StatusOr<std::unique_ptr<Tokenizer>> t =
        LoadTokenizer("sentencepiece", {{"h3_test.model", *model}});
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(t.status().message(),
                HasSubstr("cannot load the sentencepiece module"));
    EXPECT_THAT(t.status().message(),
                HasSubstr("/nonexistent/h3spm.so: no such file"));
  }
  // GPT-2 does not need the module.
  EXPECT_EQ(testing::Gpt2().Encode("Hello world").value(),
            (std::vector<int32_t>{15496, 995}));
}

}  // namespace
}  // namespace h3::tokenizer
