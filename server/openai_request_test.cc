// The HTTP API's request reading and error naming, and its response shapes:
// what a completion body becomes, what it may not say, and that errors name
// OpenAI's fields whichever layer found them.
#include "server/openai_request.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/generate_request.h"
#include "server/openai_response.h"

namespace h3::server {
namespace {

using ::testing::HasSubstr;

CompletionRequest Parse(const std::string& body) {
  absl::StatusOr<CompletionRequest> r = ParseCompletionRequest(body);
  EXPECT_TRUE(r.ok()) << body << ": " << r.status();
  return r.ok() ? *std::move(r) : CompletionRequest();
}

HttpError Error(const std::string& body) {
  absl::StatusOr<CompletionRequest> r = ParseCompletionRequest(body);
  EXPECT_FALSE(r.ok()) << body;
  return r.ok() ? HttpError() : ToOpenAiError(r.status());
}

TEST(OpenAiRequestTest, FieldsBecomeTheGrpcRequest) {
  const CompletionRequest r = Parse(R"({
      "model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5,
      "top_p": 0.9, "top_k": 40, "min_p": 0.1, "presence_penalty": 0.25,
      "frequency_penalty": -0.5, "repetition_penalty": 1.1, "seed": -1,
      "stop": ["a", "b"], "stop_token_ids": [5], "min_tokens": 2,
      "ignore_eos": true, "logprobs": 3, "user": "u", "n": 1, "best_of": null,
      "suffix": null, "logit_bias": {}, "stream": true,
      "stream_options": {"include_usage": true}, "return_token_ids": true,
      "unknown_field": [1, 2, 3]})");
  const v1::GenerateRequest& g = r.generate;
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(g.text(), "Hello");
  EXPECT_EQ(g.stop().max_new_tokens(), 7u);
  EXPECT_FLOAT_EQ(g.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().top_p(), 0.9f);
  EXPECT_EQ(g.sampling().top_k(), 40u);
  EXPECT_FLOAT_EQ(g.sampling().min_p(), 0.1f);
  EXPECT_FLOAT_EQ(g.sampling().presence_penalty(), 0.25f);
  EXPECT_FLOAT_EQ(g.sampling().frequency_penalty(), -0.5f);
  EXPECT_FLOAT_EQ(g.sampling().repetition_penalty(), 1.1f);
  EXPECT_EQ(g.sampling().seed(), UINT64_MAX);  // -1, two's complement
  ASSERT_EQ(g.stop().stop_strings_size(), 2);
  EXPECT_EQ(g.stop().stop_strings(1), "b");
  EXPECT_EQ(g.stop().stop_token_ids(0), 5);
  EXPECT_EQ(g.stop().min_new_tokens(), 2u);
  EXPECT_TRUE(g.stop().ignore_eos());
  EXPECT_TRUE(g.logprobs().enabled());
  EXPECT_EQ(g.logprobs().top_n(), 3u);
  EXPECT_EQ(r.logprobs, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.return_token_ids);
}

TEST(OpenAiRequestTest, DefaultsAreOpenAis) {
  const CompletionRequest r = Parse(R"({"prompt": [1, 2, 3]})");
  EXPECT_EQ(r.generate.token_ids().ids_size(), 3);
  EXPECT_EQ(r.generate.stop().max_new_tokens(), kDefaultCompletionTokens);
  EXPECT_FALSE(r.generate.sampling().has_temperature());  // 1.0
  EXPECT_FALSE(r.generate.logprobs().enabled());
  EXPECT_EQ(r.logprobs, -1);
  EXPECT_FALSE(r.stream);
  // null max_tokens: the server's limit, as vLLM has it.
  EXPECT_FALSE(Parse(R"({"prompt": "x", "max_tokens": null})")
                   .generate.stop()
                   .has_max_new_tokens());
  // top_k -1 keeps every token.
  EXPECT_EQ(
      Parse(R"({"prompt": "x", "top_k": -1})").generate.sampling().top_k(), 0u);
}

TEST(OpenAiRequestTest, PromptShapes) {
  EXPECT_EQ(Parse(R"({"prompt": ["one"]})").generate.text(), "one");
  EXPECT_EQ(Parse(R"({"prompt": [[4, 5]]})").generate.token_ids().ids(1), 5);
  EXPECT_EQ(Error(R"({"prompt": ["a", "b"]})").code, "unsupported");
  EXPECT_EQ(Error(R"({"prompt": [1, "a"]})").param, "prompt");
  EXPECT_EQ(Error(R"({"prompt": [-1]})").param, "prompt");
  EXPECT_EQ(Error(R"({"prompt": []})").param, "prompt");
  EXPECT_EQ(Error(R"({"max_tokens": 3})").param, "prompt");
}

TEST(OpenAiRequestTest, BadValuesNameTheField) {
  struct Case {
    const char* body;
    const char* param;
    const char* says;
  };
  const Case cases[] = {
      {R"({"prompt": "x", "temperature": "hot"})", "temperature",
       "expected a number, got string"},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens", "[1, "},
      {R"({"prompt": "x", "max_tokens": 2.5})", "max_tokens", "an integer"},
      {R"({"prompt": "x", "stop": 3})", "stop", "a string or an array"},
      {R"({"prompt": "x", "stop": ["a", 1]})", "stop", "stop[1]"},
      {R"({"prompt": "x", "logprobs": true})", "logprobs", "an integer"},
      {R"({"prompt": "x", "echo": 1})", "echo", "true or false"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})",
       "stream_options", "stream: true"},
      {R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})",
       "stream_options", "include_usage"},
      {R"({"prompt": "x", "user": 7})", "user", "a string"},
      {R"({"prompt": "x", "model": 7})", "model", "a string"},
      {R"({"prompt": "x", "n": 2})", "n", "only 1"},
      {R"({"prompt": "x", "best_of": 3})", "best_of", "only 1"},
      {R"({"prompt": "x", "suffix": "y"})", "suffix", "not supported"},
      {R"({"prompt": "x", "logit_bias": {"5": 1}})", "logit_bias", ""},
      {R"({"prompt": "x", "echo": true, "logprobs": 1})", "echo", "logprobs"},
  };
  for (const Case& c : cases) {
    const HttpError e = Error(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_THAT(e.message, HasSubstr(c.says)) << c.body;
  }
}

TEST(OpenAiRequestTest, MalformedBodiesAre400WithoutParam) {
  const std::string nested =
      std::string(100, '[') + "1" + std::string(100, ']');
  for (const std::string& body :
       std::vector<std::string>{"", "{", "[1, 2]", "\"text\"", nested}) {
    const HttpError e = Error(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.type, "invalid_request_error");
    EXPECT_EQ(e.param, "") << body;
  }
  // Deep nesting is refused before parsing, however long the body.
  const std::string deep = "{\"prompt\": " + std::string(1 << 20, '[');
  EXPECT_THAT(Error(deep).message, HasSubstr("nested deeper"));
}

// The gRPC API's and the engine's names in messages become OpenAI's.
TEST(OpenAiRequestTest, EngineMessagesUseOpenAiNames) {
  const RequestLimits limits{.max_sequence_length = 64, .max_new_tokens = 32};
  const CompletionRequest r = Parse(R"({"prompt": [1], "max_tokens": 40})");
  const absl::Status too_many =
      ToGenerationRequest(r.generate, "id", limits, nullptr).status();
  const HttpError e = ToOpenAiError(too_many);
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_EQ(e.message, "max_tokens: 40; this server allows at most 32");

  struct Case {
    absl::Status status;
    const char* param;
    const char* message;
    int http;
  };
  const Case cases[] = {
      {absl::InvalidArgumentError("stop.stop_strings[2]: empty"), "stop",
       "stop[2]: empty", 400},
      {absl::InvalidArgumentError("max_new_tokens is 9; with a prompt"),
       "max_tokens", "max_tokens is 9; with a prompt", 400},
      {absl::InvalidArgumentError("top logprobs is 25; at most 20"), "logprobs",
       "logprobs is 25; at most 20", 400},
      {absl::InvalidArgumentError("top_p is 2; it must be in (0, 1]"), "top_p",
       "top_p is 2; it must be in (0, 1]", 400},
      {absl::InvalidArgumentError("prompt: 99 tokens; the context holds 64"),
       "prompt", "prompt: 99 tokens; the context holds 64", 400},
      {absl::ResourceExhaustedError("the waiting queue is full"), "",
       "the waiting queue is full", 429},
      {absl::UnavailableError("draining"), "", "draining", 503},
  };
  for (const Case& c : cases) {
    const HttpError got = ToOpenAiError(c.status);
    EXPECT_EQ(got.param, c.param) << c.status;
    EXPECT_EQ(got.message, c.message) << c.status;
    EXPECT_EQ(got.status, c.http) << c.status;
  }
}

TEST(OpenAiResponseTest, ErrorShapeHasNullsForEmptyFields) {
  HttpError e = ToHttpError(absl::ResourceExhaustedError("full"));
  EXPECT_EQ(ErrorJson(e),
            R"({"error":{"message":"full","type":"rate_limit_error",)"
            R"("param":null,"code":"queue_full"}})");
}

TEST(OpenAiResponseTest, LegacyLogprobsContinueTheirOffsets) {
  LegacyLogprobs logprobs(nullptr, 5, -1);
  engine::SampledToken a{.id = 7, .logprob = -0.5f, .top = {{7, -0.5f}}};
  engine::SampledToken b{.id = 8, .logprob = -1.0f, .top = {}};
  const nlohmann::ordered_json first = logprobs.Make({a});
  const nlohmann::ordered_json second = logprobs.Make({b});
  EXPECT_EQ(first.dump(),
            R"({"tokens":["token_id:7"],"token_logprobs":[-0.5],)"
            R"("top_logprobs":[{"token_id:7":-0.5}],"text_offset":[5]})");
  EXPECT_EQ(second["text_offset"][0], 5 + 10);
}

TEST(OpenAiResponseTest, FinishReasonsAreOpenAis) {
  EXPECT_STREQ(OpenAiFinishReason(engine::FinishReason::kEos), "stop");
  EXPECT_STREQ(OpenAiFinishReason(engine::FinishReason::kStop), "stop");
  EXPECT_STREQ(OpenAiFinishReason(engine::FinishReason::kLength), "length");
  EXPECT_STREQ(OpenAiFinishReason(engine::FinishReason::kNone), "");
}

}  // namespace
}  // namespace h3::server
