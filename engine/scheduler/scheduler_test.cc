// The engine loop on the CPU backend: continuous batching gives each request
// exactly its solo result, long prompts are split across iterations,
// cancellation, abort and deadlines free slots, the queue is bounded, bad
// requests are refused, stop strings and stop ids end generations.
#include "engine/scheduler/scheduler.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/convert.h"
#include "loader/model_file.h"
#include "nlohmann/json.hpp"
#include "tests/support/forwarding_backend.h"
#include "tests/support/golden.h"
#include "tests/support/random_model.h"
#include "tests/support/runner_calls.h"
#include "tests/support/temp_path.h"
#include "tokenizer/load.h"

namespace h3::engine {
namespace {

using std::chrono::milliseconds;

const std::string kTestdata = h3::testing::EngineTestdata();

nlohmann::json Golden() { return h3::testing::Golden("tiny_p1"); }

// The golden tiny_p1 checkpoint as a model file (no tokenizer).
std::unique_ptr<loader::ModelFile> TinyModelFile() {
  loader::ConvertOptions options;
  options.input = kTestdata + "/tiny_p1.safetensors";
  options.output = h3::testing::TempPath("scheduler_tiny_p1.h3");
  options.dtype = ElementType::kF32;
  options.hints.n_heads = 2;
  options.hints.vocab_size = 61;
  EXPECT_TRUE(loader::ConvertCheckpoint(options, {}).ok());
  auto file = loader::ModelFile::Open(options.output);
  EXPECT_TRUE(file.ok()) << file.status();
  return *std::move(file);
}

class SchedulerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Scheduler> Make(int slots, SchedulerOptions options = {},
                                  int64_t context = 128) {
    auto runner =
        h3::testing::MakeRunner(*file_, MakeCpuBackend(), slots, context);
    EXPECT_TRUE(runner.ok()) << runner.status();
    auto s = Scheduler::Create(*std::move(runner), nullptr, options);
    EXPECT_TRUE(s.ok()) << s.status();
    return *std::move(s);
  }

  static GenerationRequest Greedy(std::string id, std::vector<int32_t> prompt,
                                  int32_t max_new_tokens) {
    GenerationRequest r;
    r.request_id = std::move(id);
    r.prompt = std::move(prompt);
    r.sampling.temperature = 0;
    r.max_new_tokens = max_new_tokens;
    return r;
  }

  // Waits until every slot is free again (slots are freed at the end of the
  // iteration that sent the final deltas).
  static void WaitForFreeSlots(const Scheduler& s) {
    for (int i = 0; i < 200 && s.stats().free_slots < s.stats().slots; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
  }

  // Reads a stream to its end: all tokens, and the final delta.
  static std::pair<std::vector<int32_t>, Delta> Collect(RequestOutput& stream) {
    std::vector<int32_t> tokens;
    while (true) {
      std::optional<Delta> d = stream.Next(milliseconds(20000));
      if (!d.has_value()) {
        ADD_FAILURE() << "stream timed out";
        return {tokens, {}};
      }
      tokens.insert(tokens.end(), d->token_ids.begin(), d->token_ids.end());
      if (d->finish != FinishReason::kNone) return {tokens, *d};
    }
  }

  std::unique_ptr<loader::ModelFile> file_ = TinyModelFile();
};

// The CPU backend, noting the thread that binds it and refusing to when
// told to (a GPU that cannot be made current).
class BindingBackend final : public h3::testing::ForwardingBackend {
 public:
  BindingBackend(std::atomic<bool>* bound_elsewhere, bool refuse)
      : creator_(std::this_thread::get_id()),
        bound_elsewhere_(bound_elsewhere),
        refuse_(refuse) {}
  absl::Status BindThread() override {
    if (std::this_thread::get_id() != creator_) *bound_elsewhere_ = true;
    if (refuse_) return absl::UnavailableError("device 7 is gone");
    return absl::OkStatus();
  }

 private:
  const std::thread::id creator_;
  std::atomic<bool>* bound_elsewhere_;
  const bool refuse_;
};

TEST_F(SchedulerTest, TheEngineThreadBindsTheBackendAndFailsStepsWithoutIt) {
  for (const bool refuse : {false, true}) {
    std::atomic<bool> bound_elsewhere = false;
    auto runner = h3::testing::MakeRunner(
        *file_, std::make_unique<BindingBackend>(&bound_elsewhere, refuse), 2,
        128);
    ASSERT_TRUE(runner.ok()) << runner.status();
    auto scheduler = Scheduler::Create(*std::move(runner), nullptr, {});
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    auto stream = (*scheduler)->Submit(Greedy("a", {1, 2, 3}, 3));
    ASSERT_TRUE(stream.ok()) << stream.status();
    auto [tokens, last] = Collect(**stream);
    EXPECT_TRUE(bound_elsewhere) << "refuse " << refuse;
    if (refuse) {
      EXPECT_EQ(last.finish, FinishReason::kError);
      EXPECT_NE(last.error.message().find("device 7 is gone"),
                std::string::npos)
          << last.error;
      EXPECT_TRUE(tokens.empty());
    } else {
      EXPECT_EQ(last.finish, FinishReason::kLength);
      EXPECT_EQ(tokens.size(), 3u);
    }
  }
}

TEST_F(SchedulerTest, GreedyTokensMatchThePyTorchReference) {
  const nlohmann::json g = Golden();
  auto scheduler = Make(2);
  auto stream = scheduler->Submit(
      Greedy("a", g["prompt"].get<std::vector<int32_t>>(), 8));
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto [tokens, last] = Collect(**stream);
  EXPECT_EQ(tokens, g["greedy"].get<std::vector<int32_t>>());
  EXPECT_EQ(last.finish, FinishReason::kLength);
  EXPECT_EQ(last.usage.prompt_tokens, 23);
  EXPECT_EQ(last.usage.generated_tokens, 8);
  EXPECT_GT(last.usage.first_token_seconds, 0);
}

TEST_F(SchedulerTest, ConcurrentRequestsEachGetTheirSoloResultBitwise) {
  // 12 requests of different lengths, greedy and seeded, over a few slots
  // (so some wait) with small step budgets (so prompts are split and steps
  // mix prompt chunks with other requests' tokens): each gets exactly the
  // tokens, and the logprobs, it gets alone.
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> prompt;
    for (int t = 0; t < 3 + 4 * i; ++t) prompt.push_back((i * 7 + t * 3) % 61);
    GenerationRequest r = Greedy("r" + std::to_string(i), prompt, 6 + i % 5);
    if (i % 2 == 1)
      r.sampling = {
          .temperature = 0.9f, .top_k = 20, .seed = static_cast<uint64_t>(i)};
    r.logprobs = 0;
    requests.push_back(r);
  }
  auto logprobs = [](const std::vector<SampledToken>& tokens) {
    std::vector<float> out;
    for (const SampledToken& t : tokens) out.push_back(t.logprob);
    return out;
  };
  std::vector<std::vector<int32_t>> solo;
  std::vector<std::vector<float>> solo_logprobs;
  auto alone = Make(1, {.step_tokens = 128});
  for (const auto& r : requests) {
    auto stream = alone->Submit(r);
    ASSERT_TRUE(stream.ok()) << stream.status();
    std::vector<SampledToken> tokens;
    while (std::optional<Delta> d = (*stream)->Next(milliseconds(20000))) {
      tokens.insert(tokens.end(), d->logprobs.begin(), d->logprobs.end());
      if (d->finish != FinishReason::kNone) break;
    }
    std::vector<int32_t> ids;
    for (const SampledToken& t : tokens) ids.push_back(t.id);
    solo.push_back(ids);
    solo_logprobs.push_back(logprobs(tokens));
  }
  for (auto [slots, budget] : {std::pair{4, 7}, std::pair{5, 16}}) {
    auto batched = Make(slots, {.step_tokens = budget});
    std::vector<std::unique_ptr<RequestOutput>> streams;
    for (const auto& r : requests) {
      auto stream = batched->Submit(r);
      ASSERT_TRUE(stream.ok()) << stream.status();
      streams.push_back(*std::move(stream));
    }
    for (size_t i = 0; i < requests.size(); ++i) {
      std::vector<SampledToken> tokens;
      while (std::optional<Delta> d = streams[i]->Next(milliseconds(20000))) {
        tokens.insert(tokens.end(), d->logprobs.begin(), d->logprobs.end());
        if (d->finish != FinishReason::kNone) break;
      }
      std::vector<int32_t> ids;
      for (const SampledToken& t : tokens) ids.push_back(t.id);
      EXPECT_EQ(ids, solo[i]) << requests[i].request_id << ", " << slots
                              << " slots, budget " << budget;
      EXPECT_EQ(logprobs(tokens), solo_logprobs[i]) << requests[i].request_id;
    }
    WaitForFreeSlots(*batched);
    const Scheduler::Stats stats = batched->stats();
    EXPECT_EQ(stats.running, 0);
    EXPECT_EQ(stats.free_slots, slots);
  }
}

// Records what the loop reports; with hold_first, holds the loop after its
// first iteration until released (requests submitted meanwhile are then
// admitted together, however busy the machine).
class RecordingObserver : public SchedulerObserver {
 public:
  void OnIteration(const IterationReport& r) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      prefill_tokens += r.prefill_tokens;
      generated += r.generated_tokens;
      gaps += static_cast<int64_t>(r.inter_token_seconds.size());
      max_decode_batch = std::max(max_decode_batch, r.decode_batch);
      chunks.insert(chunks.end(), r.prompt_chunks.begin(),
                    r.prompt_chunks.end());
      // A step's time where the iteration fed tokens, inside the
      // iteration's.
      const bool fed = r.prefill_tokens > 0 || r.decode_batch > 0;
      if (fed != (r.step_seconds > 0) || r.iteration_seconds < r.step_seconds) {
        ++bad_times;
      }
      last = r;
    }
    if (hold_first && !held.HasBeenNotified()) {
      held.Notify();
      release.WaitForNotification();
    }
  }
  void OnFinish(FinishReason reason, const Usage& usage) override {
    std::lock_guard<std::mutex> lock(mu);
    finished.push_back(reason);
    EXPECT_GE(usage.total_seconds, usage.first_token_seconds);
  }
  std::mutex mu;
  int64_t prefill_tokens = 0, generated = 0, gaps = 0, bad_times = 0;
  int max_decode_batch = 0;
  std::vector<IterationReport::PromptChunk> chunks;
  IterationReport last;
  std::vector<FinishReason> finished;
  bool hold_first = false;
  absl::Notification held, release;
};

// Submits a one-token request and holds the loop after it (observer's
// hold_first), so that the requests submitted before Release start together.
void HoldTheLoop(Scheduler& s, RecordingObserver& observer) {
  GenerationRequest r;
  r.request_id = "gate";
  r.prompt = {1};
  r.max_new_tokens = 1;
  auto gate = s.Submit(std::move(r));
  ASSERT_TRUE(gate.ok()) << gate.status();
  ASSERT_TRUE(observer.held.WaitForNotificationWithTimeout(absl::Seconds(20)));
}

TEST_F(SchedulerTest, TheObserverSeesEveryTokenAndEveryEnd) {
  RecordingObserver observer;
  observer.hold_first = true;
  {
    auto scheduler = Make(3, {.observer = &observer});
    HoldTheLoop(*scheduler, observer);
    std::vector<std::unique_ptr<RequestOutput>> streams;
    for (int i = 0; i < 3; ++i) {
      auto stream = scheduler->Submit(
          Greedy("o" + std::to_string(i), {1, 2, 3, 4}, 5 + i));
      streams.push_back(stream.ok() ? *std::move(stream) : nullptr);
      EXPECT_TRUE(stream.ok()) << stream.status();
    }
    observer.release.Notify();
    for (auto& stream : streams) {
      if (stream != nullptr) Collect(*stream);
    }
    WaitForFreeSlots(*scheduler);
  }
  std::lock_guard<std::mutex> lock(observer.mu);
  // The gate's one prompt token and one generated token, then the three.
  EXPECT_EQ(observer.prefill_tokens, 1 + 3 * 4);
  EXPECT_EQ(observer.generated, 1 + 5 + 6 + 7);
  EXPECT_EQ(observer.gaps, 5 + 6 + 7 - 3);  // all but each first token
  EXPECT_EQ(observer.max_decode_batch, 3);
  EXPECT_EQ(observer.bad_times, 0);
  EXPECT_GT(observer.last.iteration_seconds, 0);
  EXPECT_EQ(observer.finished,
            std::vector<FinishReason>(4, FinishReason::kLength));
  EXPECT_EQ(observer.last.running, 0);
  EXPECT_EQ(observer.last.free_slots, 3);
}

// With fixed_chunk_tokens, prompts started together under a budget that
// would cut them anywhere are cut at multiples of 16 or at their end only,
// and give the same tokens; without it the same run cuts elsewhere.
TEST_F(SchedulerTest, FixedChunksCutPromptsAtMultiplesOnly) {
  const std::vector<int> lengths = {50, 37, 70};
  std::vector<std::vector<int32_t>> tokens[2];
  for (int64_t fixed : {int64_t{0}, int64_t{16}}) {
    RecordingObserver observer;
    observer.hold_first = true;
    auto scheduler = Make(3, {.step_tokens = 40,
                              .fixed_chunk_tokens = fixed,
                              .observer = &observer});
    HoldTheLoop(*scheduler, observer);
    std::vector<std::unique_ptr<RequestOutput>> streams;
    for (size_t i = 0; i < lengths.size(); ++i) {
      std::vector<int32_t> prompt(lengths[i]);
      for (int t = 0; t < lengths[i]; ++t) prompt[t] = (7 * t + i) % 61;
      auto stream = scheduler->Submit(
          Greedy("f" + std::to_string(i), std::move(prompt), 6));
      streams.push_back(stream.ok() ? *std::move(stream) : nullptr);
      EXPECT_TRUE(stream.ok()) << stream.status();
    }
    observer.release.Notify();
    for (auto& stream : streams) {
      if (stream != nullptr)
        tokens[fixed > 0].push_back(Collect(*stream).first);
    }
    WaitForFreeSlots(*scheduler);
    std::lock_guard<std::mutex> lock(observer.mu);
    int unaligned = 0;
    for (const IterationReport::PromptChunk& c : observer.chunks) {
      const int64_t end = c.start + c.tokens;
      if (c.start % 16 != 0 || (end % 16 != 0 && end != c.prompt)) {
        ++unaligned;
      }
    }
    if (fixed > 0) {
      EXPECT_EQ(unaligned, 0);
    } else {
      EXPECT_GT(unaligned, 0) << "the budget alone should cut elsewhere";
    }
  }
  EXPECT_EQ(tokens[0], tokens[1]);  // the CPU is chunk-invariant

  auto runner = h3::testing::MakeRunner(*file_, MakeCpuBackend(), 3, 128);
  ASSERT_TRUE(runner.ok()) << runner.status();
  const auto refused =
      Scheduler::Create(*std::move(runner), nullptr,
                        {.step_tokens = 40, .fixed_chunk_tokens = 38});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("fixed prompt chunks of 38 tokens"));
}

TEST_F(SchedulerTest, CancelAbortAndDeadlineFreeTheirSlots) {
  auto scheduler = Make(3, {}, /*context=*/4096);
  auto cancelled = *scheduler->Submit(Greedy("c", {1, 2, 3}, 4000));
  auto aborted = *scheduler->Submit(Greedy("a", {4, 5}, 4000));
  GenerationRequest late = Greedy("d", {6}, 4000);
  late.deadline = std::chrono::steady_clock::now() + milliseconds(30);
  auto expired = *scheduler->Submit(late);
  ASSERT_TRUE(cancelled->Next(milliseconds(20000)).has_value());
  cancelled->Cancel();
  EXPECT_TRUE(scheduler->Abort("a"));
  EXPECT_FALSE(scheduler->Abort("no-such-request"));
  EXPECT_EQ(Collect(*cancelled).second.finish, FinishReason::kCancelled);
  EXPECT_EQ(Collect(*aborted).second.finish, FinishReason::kCancelled);
  EXPECT_EQ(Collect(*expired).second.finish, FinishReason::kDeadline);
  WaitForFreeSlots(*scheduler);
  EXPECT_EQ(scheduler->stats().free_slots, 3);
  EXPECT_EQ(scheduler->stats().running, 0);
}

TEST_F(SchedulerTest, FullQueueIsResourceExhaustedAndDrainingIsUnavailable) {
  auto scheduler = Make(1, {.max_waiting = 1}, /*context=*/4096);
  auto running = *scheduler->Submit(Greedy("1", {1}, 4000));
  ASSERT_TRUE(running->Next(milliseconds(20000)).has_value());  // admitted
  auto waiting = scheduler->Submit(Greedy("2", {1}, 4000));
  ASSERT_TRUE(waiting.ok());
  auto refused = scheduler->Submit(Greedy("3", {1}, 10));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("waiting"), std::string::npos);
  auto duplicate = scheduler->Submit(Greedy("1", {1}, 10));
  EXPECT_EQ(duplicate.status().code(), absl::StatusCode::kAlreadyExists);
  scheduler->Drain();
  EXPECT_EQ(scheduler->Submit(Greedy("4", {1}, 10)).status().code(),
            absl::StatusCode::kUnavailable);
  running->Cancel();
  (*waiting)->Cancel();
  EXPECT_EQ(Collect(*running).second.finish, FinishReason::kCancelled);
  EXPECT_EQ(Collect(**waiting).second.finish, FinishReason::kCancelled);
}

TEST_F(SchedulerTest, BadRequestsNameTheFieldAndTheLimit) {
  auto scheduler = Make(1, {}, /*context=*/64);
  const struct {
    GenerationRequest request;
    const char* message;
  } cases[] = {
      {Greedy("", {1}, 4), "request_id is empty"},
      {Greedy("x", {}, 4), "prompt is empty"},
      {Greedy("x", {1, 61}, 4), "prompt: token 61 at index 1"},
      {Greedy("x", {1, -1}, 4), "prompt: token -1"},
      {Greedy("x", std::vector<int32_t>(64, 1), 1), "at most 63 fit"},
      {Greedy("x", {1}, 0), "max_new_tokens is 0"},
      {Greedy("x", std::vector<int32_t>(60, 1), 5), "[1, 4]"},
      {[] {
         GenerationRequest r = Greedy("x", {1}, 4);
         r.min_new_tokens = 5;
         return r;
       }(),
       "min_new_tokens is 5"},
      {[] {
         GenerationRequest r = Greedy("x", {1}, 4);
         r.logprobs = 21;
         return r;
       }(),
       "at most 20"},
      {[] {
         GenerationRequest r = Greedy("x", {1}, 4);
         r.stop_token_ids = {99};
         return r;
       }(),
       "stop_token_ids: token 99"},
      {[] {
         GenerationRequest r = Greedy("x", {1}, 4);
         r.stop_strings = {"\n"};
         return r;
       }(),
       "no tokenizer"},
      {[] {
         GenerationRequest r = Greedy("x", {1}, 4);
         r.sampling.top_p = 0;
         return r;
       }(),
       "top_p is 0"},
  };
  for (const auto& c : cases) {
    auto s = scheduler->Submit(c.request);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument)
        << c.message;
    EXPECT_NE(s.status().message().find(c.message), std::string::npos)
        << s.status().message();
  }
  // Still serving.
  auto ok = scheduler->Submit(Greedy("ok", {1, 2}, 3));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(Collect(**ok).first.size(), 3u);
}

TEST_F(SchedulerTest, StopTokenIdsEndTheGenerationUnlessTooShort) {
  auto scheduler = Make(1);
  const nlohmann::json g = Golden();
  const auto prompt = g["prompt"].get<std::vector<int32_t>>();
  const auto greedy = g["greedy"].get<std::vector<int32_t>>();  // 59 59 0 36..
  GenerationRequest r = Greedy("s", prompt, 8);
  r.stop_token_ids = {0};
  auto [tokens, last] = Collect(**scheduler->Submit(r));
  EXPECT_EQ(tokens, std::vector<int32_t>(greedy.begin(), greedy.begin() + 3));
  EXPECT_EQ(last.finish, FinishReason::kStop);
  // Until min_new_tokens, a stop id is never sampled.
  r.min_new_tokens = 4;
  auto [longer, end] = Collect(**scheduler->Submit(r));
  ASSERT_GE(longer.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_NE(longer[i], 0) << i;
}

TEST(SchedulerTextTest, StopStringsEndTheTextAndNeverLeak) {
  // A random model over the sentencepiece test tokenizer's 800 pieces.
  const loader::ModelConfig c = h3::testing::SmallHybridConfig(800);
  const std::string path = h3::testing::TempPath("scheduler_spm.h3");
  ASSERT_TRUE(h3::testing::WriteRandomModel(c, path).ok());
  auto file = loader::ModelFile::Open(path);
  ASSERT_TRUE(file.ok());
  auto tok = tokenizer::LoadTokenizerFromPath(H3_TOKENIZER_TESTDATA
                                              "/spm/h3_test.model");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto run = [&](std::vector<std::string> stops) {
    auto runner = h3::testing::MakeRunner(**file, MakeCpuBackend(), 2, 128);
    auto s = Scheduler::Create(*std::move(runner), tok->get(), {});
    GenerationRequest r;
    r.request_id = "t";
    r.prompt = {5, 6, 7};
    r.max_new_tokens = 60;
    r.ignore_eos = true;
    r.sampling.seed = 3;
    r.stop_strings = std::move(stops);
    auto stream = (*s)->Submit(r);
    EXPECT_TRUE(stream.ok()) << stream.status();
    std::string text;
    Delta last;
    int64_t tokens = 0;
    for (std::optional<Delta> d; (d = (*stream)->Next(milliseconds(20000)));) {
      text += d->text;
      tokens += static_cast<int64_t>(d->token_ids.size());
      last = *d;
    }
    // Usage counts exactly the tokens the reader got.
    EXPECT_EQ(last.usage.generated_tokens, tokens);
    return std::pair{text, last};
  };
  const auto [full, full_end] = run({});
  ASSERT_EQ(full_end.finish, FinishReason::kLength);
  // Two ASCII bytes from the second half of the text as the stop string.
  size_t k = full.size() / 2;
  while (k + 1 < full.size() &&
         (static_cast<unsigned char>(full[k]) >= 0x80 ||
          static_cast<unsigned char>(full[k + 1]) >= 0x80)) {
    ++k;
  }
  ASSERT_LT(k + 1, full.size()) << full;
  const std::string stop = full.substr(k, 2);
  const auto [text, end] = run({stop});
  EXPECT_EQ(end.finish, FinishReason::kStop);
  EXPECT_EQ(end.matched_stop, stop);
  EXPECT_EQ(text, full.substr(0, full.find(stop)));
}

TEST(ResultStreamTest, ASlowReaderGetsMergedDeltasNeverBlocksTheWriter) {
  ResultStream stream(2);
  for (int i = 0; i < 5; ++i) {
    stream.Push({.token_ids = {i}});
  }
  stream.Push({.token_ids = {5}, .finish = FinishReason::kLength});
  std::optional<Delta> first = stream.Next(milliseconds(10));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->token_ids, std::vector<int32_t>{0});
  std::optional<Delta> rest = stream.Next(milliseconds(10));
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(rest->token_ids, (std::vector<int32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(rest->finish, FinishReason::kLength);
  EXPECT_TRUE(stream.done());
  EXPECT_FALSE(stream.Next(milliseconds(1)).has_value());
}

}  // namespace
}  // namespace h3::engine
