// The engine loop with the prefix cache on the CPU backend: every request
// gets bitwise the tokens and logprobs it gets without the cache (CPU
// prefill is chunk-invariant), while exact full-prompt hits, branch points,
// multi-turn prompts, concurrent shared prefixes, eviction and cancellation
// restore what they should, and the counters add up.
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "engine/scheduler/observer.h"
#include "engine/scheduler/scheduler.h"
#include "gtest/gtest.h"
#include "loader/model_file.h"
#include "tests/support/cache_checks.h"
#include "tests/support/runner_calls.h"
#include "tests/support/temp_path.h"

namespace h3::engine {
namespace {

using h3::testing::Join;
using std::chrono::milliseconds;

struct Result {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  Usage usage;
  FinishReason finish = FinishReason::kNone;
};

// Holds the engine loop at the end of the first iteration that leaves
// `snapshots` prefix-cache snapshots, until the test releases it: a cancel
// then lands mid-prompt however slow or busy the machine.
class GateAtSnapshots : public SchedulerObserver {
 public:
  explicit GateAtSnapshots(int64_t snapshots) : snapshots_(snapshots) {}
  void OnIteration(const IterationReport& report) override {
    prefill_tokens_ += report.prefill_tokens;
    if (reached_.HasBeenNotified() ||
        report.prefix_cache.snapshots < snapshots_) {
      return;
    }
    prompt_tokens_at_gate_ = prefill_tokens_;
    reached_.Notify();
    release_.WaitForNotification();
  }
  void OnFinish(FinishReason, const Usage&) override {}

  // True once the loop is held (waits up to 20 s).
  bool WaitUntilHeld() {
    return reached_.WaitForNotificationWithTimeout(absl::Seconds(20));
  }
  void Release() { release_.Notify(); }
  // Prompt tokens the engine had fed when it was held.
  int64_t prompt_tokens_at_gate() const { return prompt_tokens_at_gate_; }

 private:
  const int64_t snapshots_;
  int64_t prefill_tokens_ = 0;         // loop thread only
  int64_t prompt_tokens_at_gate_ = 0;  // read after reached_
  absl::Notification reached_, release_;
};

class SchedulerCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto file = h3::testing::OpenRandomModel(
        h3::testing::TinyPaddedConfig(),
        h3::testing::TempPath("scheduler_cache.h3"));
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
  }

  std::unique_ptr<Scheduler> Make(int64_t cache_bytes, int slots = 3,
                                  int64_t step_tokens = 24,
                                  SchedulerObserver* observer = nullptr) {
    auto runner = h3::testing::MakeRunner(
        *file_, MakeCpuBackend(), slots, /*context=*/256,
        /*prefill_chunk=*/1024, /*graphs=*/true,
        {.max_bytes = cache_bytes, .interval = 16});
    EXPECT_TRUE(runner.ok()) << runner.status();
    auto s =
        Scheduler::Create(*std::move(runner), nullptr,
                          {.step_tokens = step_tokens, .observer = observer});
    EXPECT_TRUE(s.ok()) << s.status();
    return *std::move(s);
  }

  static GenerationRequest Request(std::string id, std::vector<int32_t> prompt,
                                   int32_t max_new_tokens, uint64_t seed) {
    GenerationRequest r;
    r.request_id = std::move(id);
    r.prompt = std::move(prompt);
    r.max_new_tokens = max_new_tokens;
    r.logprobs = 0;
    if (seed == 0) {
      r.sampling.temperature = 0;
    } else {
      r.sampling = {.temperature = 0.8f, .top_k = 30, .seed = seed};
    }
    return r;
  }

  static Result Collect(RequestOutput& stream) {
    Result r;
    while (std::optional<Delta> d = stream.Next(milliseconds(20000))) {
      for (const SampledToken& t : d->logprobs) {
        r.ids.push_back(t.id);
        r.logprobs.push_back(t.logprob);
      }
      if (d->finish != FinishReason::kNone) {
        r.usage = d->usage;
        r.finish = d->finish;
        return r;
      }
    }
    ADD_FAILURE() << "stream timed out";
    return r;
  }

  static Result Run(Scheduler& s, const GenerationRequest& request) {
    auto stream = s.Submit(request);
    EXPECT_TRUE(stream.ok()) << stream.status();
    return stream.ok() ? Collect(**stream) : Result{};
  }

  static std::vector<int32_t> Tokens(int n, int seed) {
    std::vector<int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = (seed * 13 + i * 7 + i * i) % 61;
    return t;
  }

  static void WaitForIdle(const Scheduler& s) {
    for (int i = 0; i < 200 && s.stats().running > 0; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    // One more iteration retires the last tails.
    std::this_thread::sleep_for(milliseconds(50));
  }

  std::unique_ptr<loader::ModelFile> file_;
};

TEST_F(SchedulerCacheTest, HitsRestoreExactlyAndChangeNoToken) {
  auto cached = Make(int64_t{1} << 30), plain = Make(0);
  const auto a = Tokens(40, 1);
  // The first request's answer makes the next turn's prompt.
  const Result first = Run(*cached, Request("t1", a, 8, 0));
  ASSERT_EQ(first.ids.size(), 8u);
  struct Case {
    const char* what;
    std::vector<int32_t> prompt;
    int64_t cached;
  };
  const std::vector<Case> cases = {
      // The same prompt: the interval snapshot at 32 (not 40: the last
      // token must be computed), and a branch snapshot at 39 is taken...
      {"same prompt", a, 32},
      // ...so the same prompt again restores 39.
      {"same prompt again", a, 39},
      // The next turn: prompt + answer + new text; the answer's last
      // token was fed after the end, so all 48 are restored.
      {"next turn", Join(Join(a, first.ids), Tokens(5, 2)), 48},
      // Leaves a's path at 35 (after the snapshot at 32): 32 restored, a
      // snapshot at 35 taken...
      {"branch", Join({a.begin(), a.begin() + 35}, Tokens(10, 3)), 32},
      // ...which the next prompt through 35 restores.
      {"other branch", Join({a.begin(), a.begin() + 35}, Tokens(12, 4)), 35},
  };
  int64_t hits = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const uint64_t seed = i % 2;  // greedy and seeded
    const GenerationRequest r =
        Request("c" + std::to_string(i), cases[i].prompt, 8, seed);
    const Result with = Run(*cached, r), without = Run(*plain, r);
    EXPECT_EQ(with.ids, without.ids) << cases[i].what;
    EXPECT_EQ(with.logprobs, without.logprobs) << cases[i].what;
    EXPECT_EQ(with.usage.cached_tokens, cases[i].cached) << cases[i].what;
    EXPECT_EQ(without.usage.cached_tokens, 0);
    hits += with.usage.cached_tokens;
    WaitForIdle(*cached);
  }
  const PrefixCacheStats stats = cached->stats().prefix_cache;
  EXPECT_EQ(stats.queries, 1 + static_cast<int64_t>(cases.size()));
  EXPECT_EQ(stats.hit_tokens, hits);
  EXPECT_EQ(stats.evictions, 0);
  EXPECT_EQ(plain->stats().prefix_cache.queries, 0);
}

TEST_F(SchedulerCacheTest, ConcurrentSharedPrefixesUnderEvictionStayExact) {
  // Room for about two snapshots of 60 tokens: the cache keeps evicting.
  auto probe = h3::testing::MakeRunner(*file_, MakeCpuBackend(), 1, 256);
  ASSERT_TRUE(probe.ok());
  const SequenceMemory& m = (*probe)->memory();
  const int64_t room = 2 * (60 * m.KvBytesPerPosition() + 4 * m.StateFloats());
  auto cached = Make(room, /*slots=*/4, /*step_tokens=*/16), plain = Make(0);
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 12; ++i) {
    const auto prefix = Tokens(48, 10 + i % 3);
    requests.push_back(Request("r" + std::to_string(i),
                               Join(prefix, Tokens(4 + i, 20 + i)), 6,
                               i % 2 == 0 ? 0 : 100 + i));
  }
  std::vector<std::unique_ptr<RequestOutput>> streams;
  for (const auto& r : requests) {
    auto stream = cached->Submit(r);
    ASSERT_TRUE(stream.ok()) << stream.status();
    streams.push_back(*std::move(stream));
  }
  int64_t hits = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Result with = Collect(*streams[i]);
    const Result without = Run(*plain, requests[i]);
    EXPECT_EQ(with.ids, without.ids) << requests[i].request_id;
    EXPECT_EQ(with.logprobs, without.logprobs) << requests[i].request_id;
    hits += with.usage.cached_tokens;
  }
  WaitForIdle(*cached);
  const PrefixCacheStats stats = cached->stats().prefix_cache;
  EXPECT_EQ(stats.queries, 12);
  EXPECT_EQ(stats.hit_tokens, hits);
  EXPECT_GT(hits, 0);
  EXPECT_GT(stats.evictions, 0);
  EXPECT_LE(stats.bytes, room);
}

TEST_F(SchedulerCacheTest, ACancelledPrefillLeavesAUsableSnapshot) {
  // Prefill in steps of 8 with snapshots every 16; the loop is held after
  // the third snapshot, the request cancelled there, mid-prompt.
  GateAtSnapshots gate(3);
  auto cached = Make(int64_t{1} << 30, /*slots=*/2, /*step_tokens=*/8, &gate),
       plain = Make(0);
  const auto prompt = Tokens(200, 5);
  auto stream = cached->Submit(Request("long", prompt, 56, 0));
  ASSERT_TRUE(stream.ok());
  const bool held = gate.WaitUntilHeld();
  if (held) (*stream)->Cancel();
  gate.Release();
  ASSERT_TRUE(held) << "the prefill never made 3 snapshots";
  EXPECT_GE(gate.prompt_tokens_at_gate(), 48);
  EXPECT_LT(gate.prompt_tokens_at_gate(), 200);
  EXPECT_EQ(Collect(**stream).finish, FinishReason::kCancelled);
  WaitForIdle(*cached);
  const GenerationRequest again = Request("again", prompt, 4, 0);
  const Result with = Run(*cached, again), without = Run(*plain, again);
  EXPECT_EQ(with.ids, without.ids);
  EXPECT_EQ(with.logprobs, without.logprobs);
  EXPECT_GE(with.usage.cached_tokens, 32);
  EXPECT_LT(with.usage.cached_tokens, 200);
}

}  // namespace
}  // namespace h3::engine
