// The multi-turn data set of `h3 bench`: a turn's prompt is the previous
// turn's prompt, its answer and new ids; the turns of a conversation never
// overlap; a conversation whose turn failed ends; a stopped run ends the
// waves; the per-turn report sums what its turn recorded. Against a fake
// backend that answers on threads of its own; nothing here asserts speed.
#include "clients/h3/bench_turns.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace h3::cli {
namespace {

using Outcome = RequestRecord::Outcome;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

constexpr double kAtOnce = std::numeric_limits<double>::infinity();

class NoCall final : public BenchCall {
 public:
  void Cancel() override {}
};

// Answers each call on a thread of its own, after a moment: prompt.output_len
// ids (a function of the prompt), one per message, or INTERNAL when `fails`
// says so. Remembers the prompts in the order they were sent.
class FakeBackend final : public BenchBackend {
 public:
  explicit FakeBackend(
      std::function<bool(const std::vector<int32_t>&)> fails = nullptr)
      : fails_(std::move(fails)) {}
  ~FakeBackend() override {
    for (std::thread& t : threads_) t.join();
  }

  std::shared_ptr<BenchCall> Start(
      const BenchPrompt& prompt, float, RequestRecord* record,
      Clock::time_point start,
      std::function<void(const CallEnd&)> ended) override {
    absl::MutexLock lock(&mu_);
    sent_.push_back(prompt.ids);
    const bool fail = fails_ != nullptr && fails_(prompt.ids);
    threads_.emplace_back([prompt, record, start, ended, fail] {
      auto now = [start] {
        return std::chrono::duration<double>(Clock::now() - start).count();
      };
      record->start_s = now();
      record->input_tokens = static_cast<int64_t>(prompt.ids.size());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      CallEnd end;
      end.ok = !fail;
      if (fail) end.error_code = "INTERNAL";
      for (int32_t i = 0; !fail && i < prompt.output_len; ++i) {
        record->output_ids.push_back(
            1 + static_cast<int32_t>((prompt.ids.size() * 7 + i) % 50));
        record->chunk_times_s.push_back(now());
        record->chunk_tokens.push_back(1);
      }
      record->end_s = now();
      ended(end);
    });
    return std::make_shared<NoCall>();
  }

  std::vector<std::vector<int32_t>> sent() const {
    absl::MutexLock lock(&mu_);
    return sent_;
  }

 private:
  const std::function<bool(const std::vector<int32_t>&)> fails_;
  mutable absl::Mutex mu_;
  std::vector<std::vector<int32_t>> sent_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

class RunTurnsTest : public ::testing::Test {
 protected:
  // `n` first-turn prompts of 5 ids from the pool, the first id of prompt i
  // being 10 + i.
  std::vector<BenchPrompt> First(int n) {
    std::vector<BenchPrompt> prompts(n);
    for (int i = 0; i < n; ++i) {
      prompts[i].ids = {10 + i};
      for (int j = 0; j < 4; ++j) prompts[i].ids.push_back(pool_.Sample(rng_));
      prompts[i].output_len = options_.output_len;
    }
    return prompts;
  }

  std::vector<TurnRecord> Run(BenchBackend& backend,
                              const std::vector<BenchPrompt>& first,
                              int max_concurrency) {
    LoadOptions load;
    load.max_concurrency = max_concurrency;
    BenchRunner runner(&backend, load);
    return RunTurns(runner, first, options_, pool_, rng_, nullptr);
  }

  TokenPool pool_ = *TokenPool::Create(100, {0});
  std::mt19937_64 rng_{5};
  TurnOptions options_ = {
      .turns = 4, .input_len = 3, .output_len = 2, .rate = kAtOnce, .seed = 1};
};

TEST(NextTurnPromptTest, PreviousPromptThenAnswerThenNewIds) {
  const TokenPool pool = *TokenPool::Create(10, {0});
  std::mt19937_64 rng(3);
  const BenchPrompt previous = {.ids = {4, 5, 6}, .output_len = 2};
  const BenchPrompt next = NextTurnPrompt(previous, {7, 8}, 4, 9, pool, rng);
  ASSERT_EQ(next.ids.size(), 9u);
  EXPECT_EQ(std::vector<int32_t>(next.ids.begin(), next.ids.begin() + 5),
            (std::vector<int32_t>{4, 5, 6, 7, 8}));
  for (size_t i = 5; i < next.ids.size(); ++i) {
    EXPECT_GT(next.ids[i], 0);
    EXPECT_LT(next.ids[i], 10);
  }
  EXPECT_EQ(next.output_len, 9);
  EXPECT_TRUE(next.text.empty());
}

TEST_F(RunTurnsTest, EachTurnIsThePreviousPromptAnswerAndNewIds) {
  FakeBackend backend;
  const std::vector<BenchPrompt> first = First(3);
  const std::vector<TurnRecord> turns = Run(backend, first, 2);
  ASSERT_EQ(turns.size(), 4u);
  const std::vector<std::vector<int32_t>> sent = backend.sent();
  ASSERT_EQ(sent.size(), 12u);
  // By conversation: the last turn's prompt, answer and end.
  std::vector<std::vector<int32_t>> prompt(3), answer(3);
  std::vector<double> end(3);
  size_t at = 0;
  for (size_t k = 0; k < turns.size(); ++k) {
    ASSERT_EQ(turns[k].run.requests.size(), 3u) << k;
    for (size_t i = 0; i < 3; ++i) {
      const int c = turns[k].conversations[i];
      const RequestRecord& r = turns[k].run.requests[i];
      const std::vector<int32_t>& p = sent[at++];
      ASSERT_EQ(r.outcome, Outcome::kSucceeded);
      if (k == 0) {
        EXPECT_EQ(p, first[c].ids);
      } else {
        std::vector<int32_t> expected = prompt[c];
        expected.insert(expected.end(), answer[c].begin(), answer[c].end());
        ASSERT_EQ(p.size(), expected.size() + options_.input_len);
        EXPECT_TRUE(std::equal(expected.begin(), expected.end(), p.begin()))
            << "turn " << k + 1 << " conversation " << c;
        // Sent only after the conversation's previous turn ended.
        EXPECT_GE(r.start_s, end[c]) << "turn " << k + 1;
      }
      EXPECT_EQ(r.output_ids.size(), 2u);
      prompt[c] = p;
      answer[c] = r.output_ids;
      end[c] = r.end_s;
    }
  }
  // The last turn: prefix-free 5 ids + 3 turns of 2 answered and 3 new.
  for (const std::vector<int32_t>& p : prompt) EXPECT_EQ(p.size(), 20u);
}

TEST_F(RunTurnsTest, AConversationWhoseTurnFailedEnds) {
  // Conversation 1 (first id 11) fails at its second turn.
  FakeBackend backend([](const std::vector<int32_t>& ids) {
    return ids.front() == 11 && ids.size() > 5;
  });
  const std::vector<TurnRecord> turns = Run(backend, First(3), 0);
  ASSERT_EQ(turns.size(), 4u);
  EXPECT_EQ(turns[1].run.requests[1].outcome, Outcome::kFailed);
  for (size_t k = 2; k < turns.size(); ++k) {
    EXPECT_EQ(turns[k].conversations, (std::vector<int>{0, 2})) << k;
  }
  EXPECT_EQ(backend.sent().size(), 3u + 3u + 2u + 2u);
}

TEST_F(RunTurnsTest, AStoppedRunEndsTheWaves) {
  FakeBackend backend;
  BenchRunner runner(&backend, LoadOptions());
  runner.Stop("interrupted");
  const std::vector<TurnRecord> turns =
      RunTurns(runner, First(2), options_, pool_, rng_, nullptr);
  ASSERT_EQ(turns.size(), 1u);
  EXPECT_EQ(ComputeMetrics(turns[0].run).not_sent, 2);
  EXPECT_TRUE(backend.sent().empty());
}

RequestRecord Done(int64_t input, int64_t cached, double ttft_s) {
  RequestRecord r;
  r.outcome = Outcome::kSucceeded;
  r.start_s = 1;
  r.chunk_times_s = {1 + ttft_s, 2};
  r.chunk_tokens = {1, 1};
  r.end_s = 2;
  r.input_tokens = input;
  r.cached_input_tokens = cached;
  return r;
}

TEST(TurnMetricsTest, EachTurnSumsItsOwnRequests) {
  std::vector<TurnRecord> turns(2);
  turns[0].run.requests = {Done(10, 0, 0.1), Done(12, 3, 0.3)};
  turns[0].run.duration_s = 2;
  turns[0].conversations = {0, 1};
  RequestRecord failed;
  failed.outcome = Outcome::kFailed;
  failed.input_tokens = 99;
  turns[1].run.requests = {failed, Done(30, 14, 0.2)};
  turns[1].run.duration_s = 3;
  turns[1].conversations = {0, 1};

  const std::vector<TurnMetrics> m = ComputeTurnMetrics(turns);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].turn, 1);
  EXPECT_EQ(m[0].requests, 2);
  EXPECT_EQ(m[0].succeeded, 2);
  EXPECT_EQ(m[0].prompt_tokens, 22);
  EXPECT_EQ(m[0].cached_prompt_tokens, 3);
  EXPECT_NEAR(m[0].ttft_ms.median, 200, 1e-9);
  EXPECT_EQ(m[1].turn, 2);
  EXPECT_EQ(m[1].requests, 2);
  EXPECT_EQ(m[1].succeeded, 1);
  EXPECT_EQ(m[1].prompt_tokens, 30);  // successful requests only
  EXPECT_EQ(m[1].cached_prompt_tokens, 14);
  EXPECT_NEAR(m[1].ttft_ms.p99, 200, 1e-9);

  const RunRecord all = MergeTurns(turns);
  EXPECT_EQ(all.requests.size(), 4u);
  EXPECT_DOUBLE_EQ(all.duration_s, 5);
  const BenchMetrics total = ComputeMetrics(all);
  EXPECT_EQ(total.total_input_tokens, 52);
  EXPECT_EQ(total.cached_input_tokens, 17);

  const nlohmann::ordered_json json = TurnsJson(m);
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json[1]["turn"], 2);
  EXPECT_EQ(json[1]["prompt_tokens"], 30);
  EXPECT_EQ(json[1]["cached_prompt_tokens"], 14);
  EXPECT_EQ(json[0]["ttft_ms"]["count"], 2);
  const nlohmann::ordered_json requests = TurnRequestsJson(turns);
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_EQ(requests[3]["turn"], 2);
  EXPECT_EQ(requests[3]["conversation"], 1);
  EXPECT_EQ(requests[3]["cached_input_tokens"], 14);
  EXPECT_EQ(requests[2]["outcome"], "failed");

  const std::string table = FormatTurnsTable(m);
  EXPECT_THAT(table, HasSubstr("cached tok"));
  EXPECT_THAT(table, ContainsRegex("\n2 +2 +1 +30 +14 +200\\.00 +200\\.00\n"));
}

}  // namespace
}  // namespace h3::cli
