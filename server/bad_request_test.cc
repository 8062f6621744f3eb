// Bad requests get the right gRPC status code and a message naming the
// field and the limit, and the server keeps serving.

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/testing/test_server.h"
#include "tests/support/random_model.h"
#include "tests/support/temp_path.h"

namespace h3::server {
namespace {

using ::testing::HasSubstr;
using namespace testing;  // NOLINT: the test server helpers

struct BadRequest {
  std::string name;
  std::function<void(v1::GenerateRequest&)> edit;  // of a good request
  grpc::StatusCode code;
  std::string message;  // a substring of the error message
};

// A good request: 4 token ids, greedy, 8 new tokens.
v1::GenerateRequest Good() { return GreedyIds({1, 2, 3, 4}, 8); }

std::vector<int32_t> Ids(int n) { return std::vector<int32_t>(n, 7); }

void SetIds(v1::GenerateRequest& r, const std::vector<int32_t>& ids) {
  r.mutable_token_ids()->clear_ids();
  for (int32_t id : ids) r.mutable_token_ids()->add_ids(id);
}

const grpc::StatusCode kInvalid = grpc::StatusCode::INVALID_ARGUMENT;
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// The server below: context 256, at most 100 new tokens, 800 tokens.
std::vector<BadRequest> Cases() {
  return {
      {"no prompt", [](auto& r) { r.clear_prompt(); }, kInvalid,
       "set either text or token_ids"},
      {"empty text", [](auto& r) { r.set_text(""); }, kInvalid,
       "prompt is empty"},
      {"empty ids", [](auto& r) { SetIds(r, {}); }, kInvalid,
       "prompt is empty"},
      {"id past vocabulary",
       [](auto& r) {
         SetIds(r, {1, 800});
       },
       kInvalid, "prompt"},
      {"negative id", [](auto& r) { SetIds(r, {-1}); }, kInvalid, "prompt"},
      {"prompt fills context", [](auto& r) { SetIds(r, Ids(256)); }, kInvalid,
       "at most 255"},
      {"max_new_tokens 0",
       [](auto& r) { r.mutable_stop()->set_max_new_tokens(0); }, kInvalid,
       "max_new_tokens"},
      {"max_new_tokens past server limit",
       [](auto& r) { r.mutable_stop()->set_max_new_tokens(101); }, kInvalid,
       "at most 100"},
      {"prompt + max_new_tokens past context",
       [](auto& r) {
         SetIds(r, Ids(200));
         r.mutable_stop()->set_max_new_tokens(100);
       },
       kInvalid, "context 256"},
      {"min_new_tokens past max",
       [](auto& r) { r.mutable_stop()->set_min_new_tokens(9); }, kInvalid,
       "min_new_tokens"},
      {"negative temperature",
       [](auto& r) { r.mutable_sampling()->set_temperature(-1); }, kInvalid,
       "temperature"},
      {"NaN temperature",
       [](auto& r) { r.mutable_sampling()->set_temperature(kNaN); }, kInvalid,
       "temperature"},
      {"huge temperature",
       [](auto& r) { r.mutable_sampling()->set_temperature(1000); }, kInvalid,
       "temperature"},
      {"top_p 0", [](auto& r) { r.mutable_sampling()->set_top_p(0); }, kInvalid,
       "top_p"},
      {"top_p 1.5", [](auto& r) { r.mutable_sampling()->set_top_p(1.5); },
       kInvalid, "top_p"},
      {"negative min_p", [](auto& r) { r.mutable_sampling()->set_min_p(-0.5); },
       kInvalid, "min_p"},
      {"min_p 1.5", [](auto& r) { r.mutable_sampling()->set_min_p(1.5); },
       kInvalid, "min_p"},
      {"repetition_penalty 0",
       [](auto& r) { r.mutable_sampling()->set_repetition_penalty(0); },
       kInvalid, "repetition_penalty"},
      {"repetition_penalty 11",
       [](auto& r) { r.mutable_sampling()->set_repetition_penalty(11); },
       kInvalid, "repetition_penalty"},
      {"presence_penalty 3",
       [](auto& r) { r.mutable_sampling()->set_presence_penalty(3); }, kInvalid,
       "presence_penalty"},
      {"frequency_penalty -5",
       [](auto& r) { r.mutable_sampling()->set_frequency_penalty(-5); },
       kInvalid, "frequency_penalty"},
      {"infinite frequency_penalty",
       [](auto& r) { r.mutable_sampling()->set_frequency_penalty(kInf); },
       kInvalid, "frequency_penalty"},
      {"top_n 21", [](auto& r) { r.mutable_logprobs()->set_top_n(21); },
       kInvalid, "logprobs.top_n: 21; at most 20"},
      {"stop token past vocabulary",
       [](auto& r) { r.mutable_stop()->add_stop_token_ids(800); }, kInvalid,
       "stop_token_ids"},
      {"negative stop token",
       [](auto& r) { r.mutable_stop()->add_stop_token_ids(-3); }, kInvalid,
       "stop_token_ids"},
      {"empty stop string",
       [](auto& r) { r.mutable_stop()->add_stop_strings(""); }, kInvalid,
       "stop.stop_strings[0]: empty"},
      {"too many stop strings",
       [](auto& r) {
         for (int i = 0; i < 17; ++i) r.mutable_stop()->add_stop_strings("x");
       },
       kInvalid, "at most 16"},
      {"long stop string",
       [](auto& r) {
         r.mutable_stop()->add_stop_strings(std::string(300, 'a'));
       },
       kInvalid, "300 bytes; at most 256"},
      {"too many stop token ids",
       [](auto& r) {
         for (int i = 0; i < 65; ++i) r.mutable_stop()->add_stop_token_ids(1);
       },
       kInvalid, "at most 64"},
      {"long request id",
       [](auto& r) { r.set_request_id(std::string(300, 'r')); }, kInvalid,
       "request_id: 300 bytes"},
  };
}

class BadRequestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions options = LoopbackOptions();
    options.max_sequence_length = 256;
    options.max_new_tokens = 100;
    server_ = StartServer(options).release();
  }
  static void TearDownTestSuite() { delete server_; }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    stub_ = Connect(*server_);
  }
  static Server* server_;
  std::unique_ptr<v1::TextGeneration::Stub> stub_;
};

Server* BadRequestTest::server_ = nullptr;

TEST_F(BadRequestTest, EachGetsItsCodeAndTheServerKeepsServing) {
  const std::vector<BadRequest> cases = Cases();
  ASSERT_GE(cases.size(), 30u);
  for (const BadRequest& c : cases) {
    v1::GenerateRequest request = Good();
    c.edit(request);
    const Generation g = Generate(*stub_, request);
    EXPECT_EQ(g.status.error_code(), c.code)
        << c.name << ": " << g.status.error_message();
    EXPECT_THAT(g.status.error_message(), HasSubstr(c.message)) << c.name;
    EXPECT_TRUE(g.messages.empty()) << c.name;
    // Complete answers the same.
    grpc::ClientContext context;
    v1::GenerateResponse response;
    EXPECT_EQ(stub_->Complete(&context, request, &response).error_code(),
              c.code)
        << c.name;
  }
  const Generation good = Generate(*stub_, Good());
  EXPECT_TRUE(good.status.ok()) << good.status.error_message();
  EXPECT_EQ(good.ids.size(), 8u);
  const v1::ServerInfo info = Info(*stub_);
  EXPECT_EQ(info.free_slots(), info.total_slots());
}

TEST_F(BadRequestTest, OtherMethods) {
  {
    grpc::ClientContext context;
    v1::DetokenizeRequest request;
    request.add_token_ids(800);
    v1::DetokenizeResponse response;
    const grpc::Status s = stub_->Detokenize(&context, request, &response);
    EXPECT_EQ(s.error_code(), kInvalid);
    EXPECT_THAT(s.error_message(), HasSubstr("800"));
  }
  {
    grpc::ClientContext context;
    v1::DetokenizeRequest request;
    request.add_token_ids(-1);
    v1::DetokenizeResponse response;
    EXPECT_EQ(stub_->Detokenize(&context, request, &response).error_code(),
              kInvalid);
  }
  {
    grpc::ClientContext context;
    v1::AbortResponse response;
    const grpc::Status s =
        stub_->Abort(&context, v1::AbortRequest(), &response);
    EXPECT_EQ(s.error_code(), kInvalid);
    EXPECT_THAT(s.error_message(), HasSubstr("request_id"));
  }
}

TEST(NoTokenizerTest, TextIsAFailedPreconditionAndIdsWork) {
  const std::string model = h3::testing::TempPath("no_tokenizer.h3");
  ASSERT_TRUE(
      h3::testing::WriteRandomModel(h3::testing::SmallHybridConfig(64), model)
          .ok());
  ServerOptions options = LoopbackOptions();
  options.model_path = model;
  std::unique_ptr<Server> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = Connect(*server);

  v1::GenerateRequest text = Good();
  text.set_text("hello");
  const Generation g = Generate(*stub, text);
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(g.status.error_message(), HasSubstr("token_ids"));
  {
    grpc::ClientContext context;
    v1::TokenizeResponse response;
    EXPECT_EQ(
        stub->Tokenize(&context, v1::TokenizeRequest(), &response).error_code(),
        grpc::StatusCode::FAILED_PRECONDITION);
  }
  v1::GenerateRequest stop = Good();
  stop.mutable_stop()->add_stop_strings("x");
  const Generation s = Generate(*stub, stop);
  EXPECT_EQ(s.status.error_code(), kInvalid);
  EXPECT_THAT(s.status.error_message(), HasSubstr("stop_strings"));

  const Generation ids = Generate(*stub, Good());
  ASSERT_TRUE(ids.status.ok()) << ids.status.error_message();
  EXPECT_EQ(ids.ids.size(), 8u);
  EXPECT_TRUE(ids.text.empty());
  grpc::ClientContext context;
  v1::ModelInfo info;
  ASSERT_TRUE(stub->GetModelInfo(&context, {}, &info).ok());
  EXPECT_EQ(info.tokenizer().kind(), "");
  EXPECT_EQ(info.tokenizer().vocab_size(), 64u);
  std::filesystem::remove(model);
}

}  // namespace
}  // namespace h3::server
