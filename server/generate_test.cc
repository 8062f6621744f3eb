// Generation through the real server on loopback, against the engine run
// offline: greedy streams equal the engine's tokens, concurrent requests
// equal their solo runs, stop conditions, logprobs, the tokenizer methods
// and model info.
#include <barrier>
#include <iostream>
#include <random>
#include <thread>

#include "engine/backend.h"
#include "engine/runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/model_file.h"
#include "server/testing/test_server.h"
#include "tests/support/runner_calls.h"
#include "tokenizer/load.h"

namespace h3::server {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using namespace testing;  // NOLINT: the test server helpers

// The model of SpmModelPath(), run offline.
class Offline {
 public:
  Offline() {
    auto file = loader::ModelFile::Open(SpmModelPath());
    EXPECT_TRUE(file.ok()) << file.status();
    auto tokenizer = tokenizer::LoadEmbeddedTokenizer(**file);
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
    auto runner =
        h3::testing::MakeRunner(**file, engine::MakeCpuBackend(), 1, 2048);
    EXPECT_TRUE(runner.ok()) << runner.status();
    runner_ = *std::move(runner);
  }

  // Greedy decoding (ties to the lower id) of n tokens.
  std::vector<int32_t> Greedy(const std::vector<int32_t>& prompt, int n) {
    auto ids = h3::testing::GreedyIds(*runner_, prompt, n);
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.ok() ? *ids : std::vector<int32_t>();
  }

  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<engine::Runner> runner_;
};

class GenerateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    offline_ = new Offline();
    ServerOptions options = LoopbackOptions();
    options.slots = 32;
    options.metrics_port = 0;
    server_ = StartServer(options).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete offline_;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    stub_ = Connect(*server_);
  }

  static Offline* offline_;
  static Server* server_;
  std::unique_ptr<v1::TextGeneration::Stub> stub_;
};

Offline* GenerateTest::offline_ = nullptr;
Server* GenerateTest::server_ = nullptr;

TEST_F(GenerateTest, GreedyStreamEqualsTheEngineOffline) {
  const std::string prompt = "The quick brown fox";
  const std::vector<int32_t> prompt_ids = *offline_->tokenizer().Encode(prompt);
  const std::vector<int32_t> expected = offline_->Greedy(prompt_ids, 24);

  v1::GenerateRequest request = GreedyIds({}, 24);
  request.set_text(prompt);
  const Generation g = Generate(*stub_, request);
  ASSERT_TRUE(g.status.ok()) << g.status.error_message();
  EXPECT_THAT(g.ids, ElementsAreArray(expected));
  EXPECT_EQ(g.text, *offline_->tokenizer().Decode(expected));
  EXPECT_GT(g.messages.size(), 1u);  // streamed, not sent at the end
  for (size_t i = 0; i + 1 < g.messages.size(); ++i) {
    EXPECT_EQ(g.messages[i].finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
    EXPECT_FALSE(g.messages[i].has_usage());
  }
  const v1::GenerateResponse& last = g.last();
  EXPECT_EQ(last.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(last.usage().prompt_tokens(), prompt_ids.size());
  EXPECT_EQ(last.usage().generated_tokens(), 24u);
  EXPECT_GT(last.usage().time_to_first_token_seconds(), 0);
  EXPECT_GE(last.usage().total_seconds(),
            last.usage().time_to_first_token_seconds());
  EXPECT_FALSE(last.request_id().empty());  // assigned by the server

  // Complete: the same, in one message.
  grpc::ClientContext context;
  v1::GenerateResponse whole;
  request.set_request_id("complete-1");
  ASSERT_TRUE(stub_->Complete(&context, request, &whole).ok());
  EXPECT_THAT(whole.token_ids(), ElementsAreArray(expected));
  EXPECT_EQ(whole.text(), g.text);
  EXPECT_EQ(whole.request_id(), "complete-1");
  EXPECT_EQ(whole.finish_reason(), v1::FINISH_REASON_LENGTH);
}

TEST_F(GenerateTest, ConcurrentRequestsEqualTheirSoloRuns) {
  // 32 requests: even ones greedy, odd ones sampled with a seed; prompts of
  // different lengths, so they prefill and decode at different times.
  constexpr int kRequests = 32;
  std::mt19937 rng(3);
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    std::vector<int32_t> prompt(1 + rng() % 60);
    for (int32_t& id : prompt) id = static_cast<int32_t>(rng() % 800);
    v1::GenerateRequest r = GreedyIds(prompt, 40);
    if (i % 2 == 1) {
      r.mutable_sampling()->set_temperature(0.9f);
      r.mutable_sampling()->set_top_p(0.95f);
      r.mutable_sampling()->set_seed(1000 + i);
    }
    r.set_request_id("r" + std::to_string(i));
    requests.push_back(r);
  }
  std::vector<std::vector<int32_t>> solo;
  for (const auto& r : requests) {
    const Generation g = Generate(*stub_, r);
    ASSERT_TRUE(g.status.ok()) << g.status.error_message();
    ASSERT_EQ(g.ids.size(), 40u);
    solo.push_back(g.ids);
  }
  for (int i = 0; i < kRequests; i += 2) {
    std::vector<int32_t> prompt(requests[i].token_ids().ids().begin(),
                                requests[i].token_ids().ids().end());
    EXPECT_THAT(solo[i], ElementsAreArray(offline_->Greedy(prompt, 40)));
  }

  const auto before = ParseMetrics(HttpGetMetrics(server_->metrics_port()));
  std::vector<Generation> together(kRequests);
  std::vector<std::thread> threads;
  std::barrier start(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      together[i] = Generate(*stub_, requests[i]);  // stubs are thread-safe
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(together[i].status.ok()) << together[i].status.error_message();
    EXPECT_THAT(together[i].ids, ElementsAreArray(solo[i])) << "request " << i;
  }
  // They did share decode steps: fewer steps than sequences decoded. (How
  // many shared one depends on timing; the log says.)
  const auto after = ParseMetrics(HttpGetMetrics(server_->metrics_port()));
  auto moved = [&](const std::string& series) {
    return after.at(series) - before.at(series);
  };
  const double steps = moved("h3_decode_batch_size_count");
  const double decoded = moved("h3_decode_batch_size_sum");
  EXPECT_EQ(decoded, kRequests * 39);  // all but each first token
  EXPECT_LT(steps, decoded);
  std::cout << "32 concurrent requests: " << steps << " decode steps, "
            << steps - moved("h3_decode_batch_size_bucket{le=\"16\"}")
            << " of them over 16 sequences\n";
}

TEST_F(GenerateTest, StopTokenIdEndsTheGeneration) {
  const std::vector<int32_t> prompt = {5, 17, 300};
  const std::vector<int32_t> greedy = offline_->Greedy(prompt, 30);
  const int32_t stop = greedy[6];
  const size_t first =
      std::find(greedy.begin(), greedy.end(), stop) - greedy.begin();
  v1::GenerateRequest request = GreedyIds(prompt, 30);
  request.mutable_stop()->add_stop_token_ids(stop);
  const Generation g = Generate(*stub_, request);
  ASSERT_TRUE(g.status.ok()) << g.status.error_message();
  EXPECT_THAT(g.ids,
              ElementsAreArray(greedy.begin(), greedy.begin() + first + 1));
  EXPECT_EQ(g.last().finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(g.last().stop_token_id(), stop);
  // Its text is not returned.
  std::vector<int32_t> before(greedy.begin(), greedy.begin() + first);
  EXPECT_EQ(g.text, *offline_->tokenizer().Decode(before));

  // min_new_tokens masks it until then.
  request.mutable_stop()->set_min_new_tokens(first + 2);
  const Generation held = Generate(*stub_, request);
  ASSERT_TRUE(held.status.ok());
  ASSERT_GE(held.ids.size(), first + 2);
  for (size_t i = 0; i < first + 2; ++i) EXPECT_NE(held.ids[i], stop);
}

TEST_F(GenerateTest, StopStringEndsTheGenerationAndIsNotReturned) {
  const std::vector<int32_t> prompt = {9, 8, 7};
  const std::string text =
      *offline_->tokenizer().Decode(offline_->Greedy(prompt, 40));
  ASSERT_GT(text.size(), 12u);
  // Three characters from the middle (the test vocabulary is ASCII).
  const std::string stop = text.substr(text.size() / 2, 3);
  v1::GenerateRequest request = GreedyIds(prompt, 40);
  request.mutable_stop()->add_stop_strings(stop);
  const Generation g = Generate(*stub_, request);
  ASSERT_TRUE(g.status.ok()) << g.status.error_message();
  EXPECT_EQ(g.text, text.substr(0, text.find(stop)));
  EXPECT_EQ(g.last().finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(g.last().stop_string(), stop);
}

TEST_F(GenerateTest, LogprobsWithTopAlternatives) {
  v1::GenerateRequest request = GreedyIds({1, 2, 3}, 6);
  request.mutable_logprobs()->set_enabled(true);
  request.mutable_logprobs()->set_top_n(3);
  const Generation g = Generate(*stub_, request);
  ASSERT_TRUE(g.status.ok()) << g.status.error_message();
  int count = 0;
  for (const auto& m : g.messages) {
    ASSERT_EQ(m.logprobs_size(), m.token_ids_size());
    for (int i = 0; i < m.logprobs_size(); ++i, ++count) {
      const v1::TokenLogprob& lp = m.logprobs(i);
      EXPECT_EQ(lp.token_id(), m.token_ids(i));
      EXPECT_LT(lp.logprob(), 0);
      ASSERT_EQ(lp.top_size(), 3);
      EXPECT_EQ(lp.top(0).token_id(), lp.token_id());  // greedy
      EXPECT_EQ(lp.top(0).logprob(), lp.logprob());
      EXPECT_GE(lp.top(0).logprob(), lp.top(1).logprob());
      EXPECT_GE(lp.top(1).logprob(), lp.top(2).logprob());
      EXPECT_EQ(lp.top(1).text(),
                *offline_->tokenizer().Decode({lp.top(1).token_id()}));
    }
  }
  EXPECT_EQ(count, 6);
}

TEST_F(GenerateTest, TokenizeAndDetokenize) {
  grpc::ClientContext context;
  v1::TokenizeRequest request;
  request.set_text("Hello world");
  v1::TokenizeResponse ids;
  ASSERT_TRUE(stub_->Tokenize(&context, request, &ids).ok());
  EXPECT_THAT(ids.token_ids(),
              ElementsAreArray(*offline_->tokenizer().Encode("Hello world")));
  EXPECT_EQ(ids.pieces_size(), ids.token_ids_size());

  grpc::ClientContext context2;
  v1::DetokenizeRequest back;
  *back.mutable_token_ids() = ids.token_ids();
  back.add_token_ids(offline_->tokenizer().eos_id());
  back.set_skip_special_tokens(true);
  v1::DetokenizeResponse text;
  ASSERT_TRUE(stub_->Detokenize(&context2, back, &text).ok());
  EXPECT_EQ(text.text(), "Hello world");
}

TEST_F(GenerateTest, ModelInfoDescribesTheServedModel) {
  grpc::ClientContext context;
  v1::ModelInfo info;
  ASSERT_TRUE(
      stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.name(), "server_spm");
  EXPECT_EQ(info.config().d_model(), 16u);
  EXPECT_EQ(info.config().n_layer(), 2u);
  EXPECT_THAT(info.config().attention_layers(), ElementsAreArray({1u}));
  EXPECT_EQ(info.tokenizer().kind(), "sentencepiece");
  EXPECT_EQ(info.tokenizer().vocab_size(), 800u);
  EXPECT_EQ(info.limits().max_sequence_length(), 1024u);
  EXPECT_EQ(info.limits().max_new_tokens(), 512u);
  EXPECT_EQ(info.limits().max_running_requests(), 32u);
  EXPECT_EQ(info.dtype(), "fp32");
  EXPECT_EQ(info.device(), "cpu");
}

}  // namespace
}  // namespace h3::server
