#include "tokenizer/incremental_decoder.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/test_fixtures.h"
#include "tokenizer/utf8.h"

namespace h3::tokenizer {
namespace {

struct Streamed {
  std::vector<std::string> steps;
  std::string text;  // all steps and Finish
  int stop_index = -1;
};

Streamed Stream(const Tokenizer& t, const std::vector<int32_t>& ids,
                std::vector<std::string> stops = {}) {
  IncrementalDecoder d =
      IncrementalDecoder::Create(&t, std::move(stops)).value();
  Streamed out;
  for (const int32_t id : ids) {
    IncrementalDecoder::Step step = d.Add(id).value();
    EXPECT_TRUE(ValidateUtf8(step.text).ok());
    out.steps.push_back(step.text);
    out.text += step.text;
    if (step.stop_index >= 0) {
      out.stop_index = step.stop_index;
      break;
    }
  }
  out.text += d.Finish().value();
  return out;
}

class IncrementalDecoderTest
    : public ::testing::TestWithParam<const Tokenizer& (*)()> {
 protected:
  const Tokenizer& tokenizer() { return GetParam()(); }
};

TEST_P(IncrementalDecoderTest, StreamsTheCorpusExactly) {
  const auto corpus =
      testing::ReadTestJson("corpus.json")->get<std::vector<std::string>>();
  for (const std::string& text : corpus) {
    const std::vector<int32_t> ids = tokenizer().Encode(text).value();
    EXPECT_EQ(Stream(tokenizer(), ids).text, tokenizer().Decode(ids).value());
    EXPECT_EQ(Stream(tokenizer(), ids).text, text);
  }
}

TEST_P(IncrementalDecoderTest, WaitsForWholeCharacters) {
  // Characters that both tokenizers split into several byte tokens.
  const std::string text = "\U0001D11E\U0001D11E x \U0001F680";
  const std::vector<int32_t> ids = tokenizer().Encode(text).value();
  const Streamed s = Stream(tokenizer(), ids);
  EXPECT_EQ(s.text, text);
  int empty_steps = 0;
  for (const std::string& step : s.steps) {
    EXPECT_EQ(step.find("\xEF\xBF\xBD"), std::string::npos);  // no U+FFFD
    empty_steps += step.empty();
  }
  EXPECT_GT(empty_steps, 0);
}

TEST_P(IncrementalDecoderTest, StopStringAcrossTokensNeverLeaks) {
  const std::string text =
      "The answer is 42.\n\nUser: and now?\n\nAssistant: more text";
  const std::vector<int32_t> ids = tokenizer().Encode(text).value();
  const Streamed s = Stream(tokenizer(), ids, {"\n\nUser:", "zzz"});
  EXPECT_EQ(s.text, "The answer is 42.");
  EXPECT_EQ(s.stop_index, 0);
  const Streamed other = Stream(tokenizer(), ids, {"42.\n\nUs"});
  EXPECT_EQ(other.text, "The answer is ");
}

TEST_P(IncrementalDecoderTest, AUnfinishedStopIsFlushedByFinish) {
  const std::vector<int32_t> ids =
      tokenizer().Encode("it ends with Us").value();
  const Streamed s = Stream(tokenizer(), ids, {"User:"});
  EXPECT_EQ(s.stop_index, -1);
  EXPECT_EQ(s.text, "it ends with Us");
  EXPECT_EQ(s.steps.back().find("Us"), std::string::npos);
}

TEST_P(IncrementalDecoderTest, EndOfTextInTheMiddleKeepsSpacing) {
  std::vector<int32_t> ids = tokenizer().Encode("Hello there").value();
  ids.push_back(tokenizer().eos_id());
  const std::vector<int32_t> more = tokenizer().Encode(" world  again").value();
  ids.insert(ids.end(), more.begin(), more.end());
  EXPECT_EQ(Stream(tokenizer(), ids).text, tokenizer().Decode(ids).value());
}

TEST_P(IncrementalDecoderTest, ErrorsAndBrokenCharacters) {
  IncrementalDecoder d =
      IncrementalDecoder::Create(&tokenizer(), {"x"}).value();
  EXPECT_EQ(d.Add(-1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(d.Add(tokenizer().vocab_size()).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A character cut short at the end of the stream comes out as U+FFFD.
  std::vector<int32_t> ids = tokenizer().Encode("ab\U0001D11E").value();
  ids.pop_back();
  EXPECT_EQ(Stream(tokenizer(), ids).text, tokenizer().Decode(ids).value());
  EXPECT_NE(tokenizer().Decode(ids).value().find("\xEF\xBF\xBD"),
            std::string::npos);
  // After a stop, nothing more is accepted.
  const std::vector<int32_t> stop_ids = tokenizer().Encode("a x b").value();
  for (const int32_t id : stop_ids) {
    const bool was_stopped = d.stopped();
    absl::StatusOr<IncrementalDecoder::Step> step = d.Add(id);
    EXPECT_EQ(step.ok(), !was_stopped) << step.status();
    if (was_stopped) {
      EXPECT_EQ(step.status().code(), absl::StatusCode::kFailedPrecondition);
    }
  }
  EXPECT_TRUE(d.stopped());
  EXPECT_EQ(d.Finish().value(), "");
  EXPECT_EQ(IncrementalDecoder::Create(&tokenizer(), {""}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, IncrementalDecoderTest,
                         ::testing::Values(&testing::Gpt2,
                                           &testing::SentencePiece));

}  // namespace
}  // namespace h3::tokenizer
