#include "engine/scheduler/scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tokenizer/incremental_decoder.h"

namespace h3::engine {
namespace {

// A prompt that leaves the prefix cache's paths less than this many tokens
// in gets no snapshot there: restoring it would save too little to be
// worth a state's memory and a step boundary.
constexpr int64_t kMinBranchTokens = 32;

double SecondsSince(SteadyTime start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

struct Scheduler::Sequence {
  GenerationRequest request;
  std::shared_ptr<ResultStream> stream;
  uint64_t seed = 0;  // the request's, or a random one
  // Ids sampling may choose and TopLogprobs lists: [0, listed) (the
  // tokenizer may know fewer tokens than the model has rows).
  int32_t listed = 0;
  // The token flags of the slot's sampling history (RequestTokenFlags).
  std::vector<uint8_t> flags;
  std::vector<int32_t> held;  // banned until min_new_tokens
  SlotId slot = -1;           // -1 while waiting
  int64_t prefilled = 0;      // prompt tokens consumed
  int64_t cached = 0;         // of which restored from the prefix cache
  // Where the prompt leaves the prefix cache's paths past its snapshot: a
  // snapshot is taken there (0: none).
  int64_t branch = 0;
  int64_t generated = 0;        // tokens sampled
  std::vector<int32_t> output;  // every sampled id
  int32_t last = 0;             // the newest sampled token
  SteadyTime submitted;
  SteadyTime last_token;  // when the newest token was sampled
  double queue_seconds = 0, first_token_seconds = 0;
  FinishReason finish = FinishReason::kNone;
  Delta final;  // sent once the request id and slot are free

  int64_t prompt() const { return static_cast<int64_t>(request.prompt.size()); }
  // The first n tokens the slot was fed: the prompt, then sampled ids.
  std::vector<int32_t> Fed(int64_t n) const {
    std::vector<int32_t> fed(request.prompt.begin(),
                             request.prompt.begin() + std::min(n, prompt()));
    if (n > prompt()) {
      fed.insert(fed.end(), output.begin(), output.begin() + (n - prompt()));
    }
    return fed;
  }
};

int64_t DefaultStepTokens(const Backend& backend, int slots) {
  const int64_t base = backend.name() == "cpu" ? 64 : 1024;
  return std::max<int64_t>(base, 4 * int64_t{slots});
}

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(
    std::unique_ptr<Runner> runner, const tokenizer::Tokenizer* tokenizer,
    SchedulerOptions options) {
  const RunnerOptions& r = runner->options();
  if (options.step_tokens == 0) {
    options.step_tokens =
        std::min(DefaultStepTokens(runner->model().backend(), r.slots),
                 r.max_step_tokens);
  }
  if (options.max_waiting < 0 || options.stream_buffer < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scheduler options: max waiting (", options.max_waiting,
        ") must be >= 0 and stream buffer (", options.stream_buffer, ") >= 1"));
  }
  if (options.step_tokens < r.slots ||
      options.step_tokens > r.max_step_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokens per step (", options.step_tokens, ") must be at least the ",
        r.slots,
        " slots (every running request feeds a token each step) and "
        "at most the runner's ",
        r.max_step_tokens));
  }
  if (options.fixed_chunk_tokens < 0 ||
      options.fixed_chunk_tokens > options.step_tokens - r.slots) {
    return absl::InvalidArgumentError(
        absl::StrCat("fixed prompt chunks of ", options.fixed_chunk_tokens,
                     " tokens: must be >= 0 and at most the tokens per step (",
                     options.step_tokens, ") less the ", r.slots, " slots"));
  }
  std::unique_ptr<Scheduler> s(
      new Scheduler(std::move(runner), tokenizer, options));
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

Scheduler::Scheduler(std::unique_ptr<Runner> runner,
                     const tokenizer::Tokenizer* tokenizer,
                     const SchedulerOptions& options)
    : runner_(std::move(runner)),
      tokenizer_(tokenizer),
      options_(options),
      slots_(runner_->options().slots),
      max_sequence_length_(runner_->options().max_sequence_length),
      vocab_size_(runner_->model().config().vocab_size),
      padded_vocab_(runner_->model().config().padded_vocab_size) {
  // Before the first iteration too (GetServerInfo, the metrics).
  absl::MutexLock lock(&mu_);
  prefix_cache_stats_ = runner_->prefix_cache().stats();
}

Scheduler::~Scheduler() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

absl::Status Scheduler::Validate(const GenerationRequest& r) const {
  const int64_t context = max_sequence_length_;
  const int64_t prompt = static_cast<int64_t>(r.prompt.size());
  if (r.request_id.empty()) {
    return absl::InvalidArgumentError("request_id is empty");
  }
  if (r.prompt.empty()) return absl::InvalidArgumentError("prompt is empty");
  H3_RETURN_IF_ERROR(
      Annotate(runner_->model().CheckTokens(r.prompt), "prompt"));
  if (prompt >= context) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt: ", prompt, " tokens; the context holds ", context,
                     ", so at most ", context - 1, " fit"));
  }
  if (r.max_new_tokens < 1 || prompt + r.max_new_tokens > context) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_new_tokens is ", r.max_new_tokens, "; with a prompt of ", prompt,
        " tokens it must be in [1, ", context - prompt, "] (context ", context,
        ")"));
  }
  if (r.min_new_tokens < 0 || r.min_new_tokens > r.max_new_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_new_tokens is ", r.min_new_tokens,
        "; it must be in [0, max_new_tokens = ", r.max_new_tokens, "]"));
  }
  if (r.logprobs < -1 || r.logprobs > kMaxTopLogprobs) {
    return absl::InvalidArgumentError(
        absl::StrCat("top logprobs is ", r.logprobs, "; at most ",
                     kMaxTopLogprobs, " are returned"));
  }
  H3_RETURN_IF_ERROR(Annotate(runner_->model().CheckTokens(r.stop_token_ids),
                              "stop_token_ids"));
  if (!r.stop_strings.empty() && tokenizer_ == nullptr) {
    return absl::InvalidArgumentError(
        "stop_strings: this model has no tokenizer, so no text to match");
  }
  return ValidateSamplingParams(r.sampling);
}

absl::StatusOr<std::unique_ptr<RequestOutput>> Scheduler::Submit(
    GenerationRequest request) {
  H3_RETURN_IF_ERROR(Validate(request));
  auto s = std::make_unique<Sequence>();
  int32_t listed = static_cast<int32_t>(vocab_size_);
  std::optional<tokenizer::IncrementalDecoder> decoder;
  std::vector<int32_t> held;
  if (tokenizer_ != nullptr) {
    listed = std::min(listed, tokenizer_->vocab_size());
    H3_ASSIGN_OR_RETURN(decoder, tokenizer::IncrementalDecoder::Create(
                                     tokenizer_, request.stop_strings));
    if (!request.ignore_eos && tokenizer_->eos_id() >= 0) {
      held.push_back(tokenizer_->eos_id());
    }
  }
  held.insert(held.end(), request.stop_token_ids.begin(),
              request.stop_token_ids.end());
  s->seed =
      request.sampling.seed.has_value() ? *request.sampling.seed : RandomSeed();
  s->listed = listed;
  s->held = std::move(held);
  s->flags = RequestTokenFlags(vocab_size_, listed, request.prompt,
                               request.min_new_tokens > 0
                                   ? absl::Span<const int32_t>(s->held)
                                   : absl::Span<const int32_t>());
  std::vector<std::string> stop_strings = request.stop_strings;
  s->request = std::move(request);
  s->stream = std::make_shared<ResultStream>(options_.stream_buffer);
  s->submitted = std::chrono::steady_clock::now();
  auto output = std::make_unique<RequestOutput>(s->stream, std::move(decoder),
                                                std::move(stop_strings));
  {
    absl::MutexLock lock(&mu_);
    if (draining_ || stopping_) {
      return absl::UnavailableError("the server is shutting down");
    }
    if (ids_.contains(s->request.request_id)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "request_id \"", s->request.request_id, "\" is already running"));
    }
    if (static_cast<int>(waiting_.size()) >= options_.max_waiting) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "all ", slots_, " slots are busy and ", waiting_.size(),
          " requests are already waiting (the limit); retry later"));
    }
    ids_.insert(s->request.request_id);
    waiting_.push_back(std::move(s));
  }
  wake_.SignalAll();
  return output;
}

bool Scheduler::Abort(const std::string& request_id) {
  {
    absl::MutexLock lock(&mu_);
    if (!ids_.contains(request_id)) return false;
    aborted_.insert(request_id);
  }
  wake_.SignalAll();
  return true;
}

void Scheduler::Drain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

Scheduler::Stats Scheduler::stats() const {
  absl::MutexLock lock(&mu_);
  return {.running = running_count_,
          .waiting = static_cast<int>(waiting_.size()),
          .free_slots = slots_ - running_count_,
          .slots = slots_,
          .iterations = iterations_,
          .prefix_cache = prefix_cache_stats_};
}

void Scheduler::Loop() {
  // This thread runs every step and the prefix cache's and memory's copies:
  // on the backend's device (a GPU other than the process's first).
  bound_ = runner_->model().backend().BindThread();
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      // Held requests always have work (a prompt chunk or a token), so the
      // loop sleeps only when it holds none.
      while (!stopping_ && waiting_.empty() && running_count_ == 0 &&
             tails_.empty()) {
        wake_.Wait(&mu_);
      }
      if (stopping_) break;
    }
    Step();
  }
  // Shutting down: end everything still held.
  for (auto& s : running_) Finish(*s, FinishReason::kCancelled, {});
  Retire();
  std::deque<std::unique_ptr<Sequence>> waiting;
  {
    absl::MutexLock lock(&mu_);
    waiting.swap(waiting_);
  }
  for (auto& s : waiting) {
    Finish(*s, FinishReason::kCancelled, {});
    s->stream->Push(std::move(s->final));
  }
}

void Scheduler::Step() {
  const SteadyTime start = std::chrono::steady_clock::now();
  report_ = {};
  EndExpired();
  Admit();
  if (absl::Status s = RunStep(); !s.ok()) {
    for (auto& seq : running_) Finish(*seq, FinishReason::kError, {.error = s});
  }
  Retire();
  {
    absl::MutexLock lock(&mu_);
    ++iterations_;
    report_.running = running_count_;
    report_.waiting = static_cast<int>(waiting_.size());
    report_.free_slots = slots_ - running_count_;
    report_.prefix_cache = prefix_cache_stats_ =
        runner_->prefix_cache().stats();
  }
  report_.iteration_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (options_.observer != nullptr) options_.observer->OnIteration(report_);
}

void Scheduler::EndExpired() {
  absl::flat_hash_set<std::string> aborted;
  std::vector<std::pair<std::unique_ptr<Sequence>, FinishReason>> ended;
  const SteadyTime now = std::chrono::steady_clock::now();
  {
    absl::MutexLock lock(&mu_);
    aborted.swap(aborted_);
    // Waiting requests that ended before they got a slot.
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      Sequence& s = **it;
      FinishReason why = FinishReason::kNone;
      if (s.stream->cancelled() || aborted.contains(s.request.request_id)) {
        why = FinishReason::kCancelled;
      } else if (s.request.deadline.has_value() && now > *s.request.deadline) {
        why = FinishReason::kDeadline;
      }
      if (why == FinishReason::kNone) {
        ++it;
        continue;
      }
      ids_.erase(s.request.request_id);
      ended.emplace_back(std::move(*it), why);
      it = waiting_.erase(it);
    }
  }
  // Observer and stream calls happen outside the lock.
  for (auto& [s, why] : ended) {
    s->queue_seconds = SecondsSince(s->submitted);
    Finish(*s, why, {});
    s->stream->Push(std::move(s->final));
  }
  for (auto& s : running_) {
    if (s->finish != FinishReason::kNone) continue;
    if (s->stream->cancelled() || aborted.contains(s->request.request_id)) {
      Finish(*s, FinishReason::kCancelled, {});
    } else if (const int64_t stop = s->stream->stop_requested(); stop > 0) {
      // Its reader matched a stop string at token `stop`.
      s->generated = std::min(s->generated, stop);
      Finish(*s, FinishReason::kStop, {});
    } else if (s->request.deadline.has_value() && now > *s->request.deadline) {
      Finish(*s, FinishReason::kDeadline, {});
    }
  }
}

void Scheduler::Admit() {
  std::vector<std::unique_ptr<Sequence>> admitted;
  // Slots still feeding a finished request's last token are not free yet.
  const int free = runner_->memory().free_slots();
  {
    absl::MutexLock lock(&mu_);
    while (running_count_ < slots_ && !waiting_.empty() &&
           static_cast<int>(admitted.size()) < free) {
      admitted.push_back(std::move(waiting_.front()));
      waiting_.pop_front();
      ++running_count_;
    }
  }
  SequenceMemory& memory = runner_->memory();
  for (auto& s : admitted) {
    s->queue_seconds = SecondsSince(s->submitted);
    absl::StatusOr<SlotId> slot = memory.Acquire();
    absl::Status status = slot.status();
    if (slot.ok()) {
      s->slot = *slot;
      status = memory.SetTokenFlags(*slot, s->flags);
    }
    if (status.ok()) status = Restore(*s);
    if (!status.ok()) Finish(*s, FinishReason::kError, {.error = status});
    running_.push_back(std::move(s));
  }
}

absl::Status Scheduler::RunStep() {
  plan_.sequences.clear();
  std::vector<Sequence*> who;
  // Finished sequences whose last token goes into the cache's snapshot...
  for (const Tail& t : tails_) {
    plan_.sequences.push_back(
        {.slot = t.slot, .tokens = absl::MakeConstSpan(t.tokens).last(1)});
  }
  const size_t tails = tails_.size();
  // ...every sequence past its prompt feeds its newest token...
  for (auto& s : running_) {
    if (s->finish != FinishReason::kNone || s->prefilled < s->prompt())
      continue;
    plan_.sequences.push_back({.slot = s->slot,
                               .tokens = absl::MakeConstSpan(&s->last, 1),
                               .sample = true,
                               .sampling = RowOf(*s),
                               .logits = s->request.logprobs > 0});
    who.push_back(s.get());
  }
  report_.decode_batch = static_cast<int>(who.size());
  // ...then prompt chunks fill the budget, oldest request first.
  int64_t budget =
      options_.step_tokens - static_cast<int64_t>(plan_.sequences.size());
  for (auto& s : running_) {
    if (budget <= 0) break;
    if (s->finish != FinishReason::kNone || s->prefilled == s->prompt()) {
      continue;
    }
    int64_t end = std::min(NextSnapshot(*s), s->prefilled + budget);
    if (const int64_t c = options_.fixed_chunk_tokens; c > 0) {
      end = std::min(s->prompt(), (s->prefilled / c + 1) * c);
      if (end - s->prefilled > budget) continue;
    }
    const int64_t n = end - s->prefilled;
    report_.prompt_chunks.push_back({s->prefilled, n, s->prompt()});
    const bool last = s->prefilled + n == s->prompt();
    plan_.sequences.push_back(
        {.slot = s->slot,
         .tokens =
             absl::MakeConstSpan(s->request.prompt).subspan(s->prefilled, n),
         .sample = last,
         .sampling = RowOf(*s),
         .logits = last && s->request.logprobs > 0});
    who.push_back(s.get());
    budget -= n;
    report_.prefill_sequences += 1;
    report_.prefill_tokens += n;
  }
  if (plan_.sequences.empty()) return absl::OkStatus();
  const SteadyTime before = std::chrono::steady_clock::now();
  const absl::Status executed =
      bound_.ok() ? runner_->Execute(plan_, &result_) : bound_;
  report_.step_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - before)
          .count();
  for (const Tail& t : tails_) {
    // The request has ended: a failed snapshot costs only the cache (and
    // after a failed step the slot's memory is not worth one).
    if (executed.ok()) (void)runner_->prefix_cache().Save(t.slot, t.tokens);
    runner_->memory().Release(t.slot);
  }
  tails_.clear();
  H3_RETURN_IF_ERROR(executed);
  for (size_t i = 0; i < who.size(); ++i) {
    Sequence& s = *who[i];
    const size_t k = tails + i;
    const SequenceStep& entry = plan_.sequences[k];
    if (s.prefilled < s.prompt()) {
      const int64_t due = NextSnapshot(s);
      s.prefilled += static_cast<int64_t>(entry.tokens.size());
      if (s.prefilled == due) {
        if (absl::Status saved = Snapshot(s); !saved.ok()) {
          Finish(s, FinishReason::kError, {.error = saved});
          continue;
        }
      }
    }
    if (entry.sample) {
      Emit(s, result_.ids[k], result_.logprobs[k], result_.LogitsOf(k));
    }
  }
  return absl::OkStatus();
}

absl::Status Scheduler::Restore(Sequence& s) {
  PrefixCache& cache = runner_->prefix_cache();
  if (!cache.enabled()) return absl::OkStatus();
  H3_ASSIGN_OR_RETURN(PrefixCache::Match match,
                      cache.Restore(s.request.prompt, s.prompt() - 1, s.slot));
  s.prefilled = s.cached = match.restored;
  // A whole prompt on a cached path: the snapshot goes one token short, so
  // that the same prompt again still has a token to compute logits from.
  const int64_t branch = std::min(match.matched, s.prompt() - 1);
  if (branch > match.restored && branch >= kMinBranchTokens) s.branch = branch;
  return absl::OkStatus();
}

int64_t Scheduler::NextSnapshot(const Sequence& s) const {
  const PrefixCache& cache = runner_->prefix_cache();
  int64_t next = s.prompt();
  if (!cache.enabled()) return next;
  if (s.branch > s.prefilled) next = std::min(next, s.branch);
  if (const int64_t every = cache.options().interval; every > 0) {
    next = std::min(next, (s.prefilled / every + 1) * every);
  }
  return next;
}

absl::Status Scheduler::Snapshot(const Sequence& s) {
  PrefixCache& cache = runner_->prefix_cache();
  const int64_t position = runner_->memory().position(s.slot);
  if (!cache.enabled() || position == 0) return absl::OkStatus();
  return cache.Save(s.slot, s.Fed(position));
}

kernels::SamplingRow Scheduler::RowOf(const Sequence& s) {
  return SamplingRowOf(s.request.sampling, s.seed, s.generated);
}

void Scheduler::Emit(Sequence& s, int32_t id, float logprob,
                     const float* logits) {
  const GenerationRequest& r = s.request;
  SampledToken token{.id = id, .logprob = logprob};
  if (r.logprobs > 0 && logits != nullptr) {
    token.top =
        TopLogprobs(absl::MakeConstSpan(logits, padded_vocab_),
                    static_cast<int32_t>(vocab_size_), s.listed, r.logprobs);
  }
  const SteadyTime now = std::chrono::steady_clock::now();
  if (s.generated == 0) {
    s.first_token_seconds =
        std::chrono::duration<double>(now - s.submitted).count();
  } else {
    report_.inter_token_seconds.push_back(
        std::chrono::duration<double>(now - s.last_token).count());
  }
  s.last_token = now;
  s.last = id;
  s.output.push_back(id);
  s.generated += 1;
  report_.generated_tokens += 1;
  if (s.generated == r.min_new_tokens && !s.held.empty()) {
    // Long enough: end of text and the stop tokens may come now.
    ReleaseHeldTokens(s.held, s.listed, s.flags);
    if (absl::Status unban = runner_->memory().SetTokenFlags(s.slot, s.flags);
        !unban.ok()) {
      return Finish(s, FinishReason::kError, {.error = unban});
    }
  }

  Delta delta{.token_ids = {id}};
  if (r.logprobs >= 0) delta.logprobs.push_back(std::move(token));
  FinishReason finish = FinishReason::kNone;
  if (tokenizer_ != nullptr && !r.ignore_eos && id == tokenizer_->eos_id()) {
    finish = FinishReason::kEos;
  } else if (std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), id) !=
             r.stop_token_ids.end()) {
    finish = FinishReason::kStop;
    delta.matched_stop_token = id;
  } else if (s.generated >= r.max_new_tokens) {
    finish = FinishReason::kLength;
  }
  if (finish != FinishReason::kNone) return Finish(s, finish, std::move(delta));
  s.stream->Push(std::move(delta));
}

void Scheduler::Finish(Sequence& s, FinishReason reason, Delta delta) {
  if (s.finish != FinishReason::kNone) return;
  s.finish = reason;
  delta.finish = reason;
  delta.usage = {.prompt_tokens = s.prompt(),
                 .generated_tokens = s.generated,
                 .cached_tokens = s.cached,
                 .queue_seconds = s.queue_seconds,
                 .first_token_seconds = s.first_token_seconds,
                 .total_seconds = SecondsSince(s.submitted)};
  if (options_.observer != nullptr) {
    options_.observer->OnFinish(reason, delta.usage);
  }
  s.final = std::move(delta);
}

void Scheduler::Retire() {
  std::vector<std::unique_ptr<Sequence>> finished;
  for (auto it = running_.begin(); it != running_.end();) {
    if ((*it)->finish == FinishReason::kNone) {
      ++it;
      continue;
    }
    Sequence& s = **it;
    if (s.slot >= 0 && s.finish == FinishReason::kLength &&
        runner_->prefix_cache().enabled()) {
      // Its last token is part of the answer a client sends back: fed in
      // the next step, then snapshotted with the rest.
      tails_.push_back({s.slot, s.Fed(s.prompt() + s.generated)});
    } else if (s.slot >= 0) {
      if (s.finish != FinishReason::kError) (void)Snapshot(s);
      runner_->memory().Release(s.slot);
    }
    finished.push_back(std::move(*it));
    it = running_.erase(it);
  }
  if (finished.empty()) return;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& s : finished) ids_.erase(s->request.request_id);
    running_count_ -= static_cast<int>(finished.size());
  }
  // Last, so that a client that saw its final delta finds the slot free
  // and may reuse the request id at once.
  for (const auto& s : finished) s->stream->Push(std::move(s->final));
}

}  // namespace h3::engine
