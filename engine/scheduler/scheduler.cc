#include "engine/scheduler/scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tokenizer/incremental_decoder.h"

namespace h3::engine {
namespace {

constexpr int kMaxTopLogprobs = 20;

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
  // The token flags of the state's sampling history (kernels/sampling.h):
  // the prompt's tokens, ids from listed on banned for good, and `banned`
  // until min_new_tokens.
  std::vector<uint8_t> flags;
  std::optional<tokenizer::IncrementalDecoder> decoder;  // with a tokenizer
  std::vector<int32_t> banned;  // masked until min_new_tokens
  std::unique_ptr<SequenceState> state;
  int64_t prefilled = 0;  // prompt tokens consumed
  std::vector<int32_t> generated;
  SteadyTime submitted;
  SteadyTime last_token;  // when the newest token was sampled
  double queue_seconds = 0, first_token_seconds = 0;
  FinishReason finish = FinishReason::kNone;
  Delta final;  // sent once the request id and slot are free
};

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(
    std::unique_ptr<Model> model, const tokenizer::Tokenizer* tokenizer,
    const SchedulerOptions& options) {
  if (options.slots < 1 || options.max_waiting < 0 ||
      options.prefill_tokens_per_iteration < 1 || options.stream_buffer < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scheduler options: slots (", options.slots,
        "), prefill tokens per iteration (",
        options.prefill_tokens_per_iteration, ") and stream buffer (",
        options.stream_buffer, ") must be >= 1, max waiting (",
        options.max_waiting, ") >= 0"));
  }
  std::unique_ptr<Scheduler> s(
      new Scheduler(std::move(model), tokenizer, options));
  for (int i = 0; i < options.slots; ++i) {
    H3_ASSIGN_OR_RETURN(std::unique_ptr<SequenceState> state,
                        s->model_->NewSequence());
    s->free_states_.push_back(std::move(state));
  }
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

Scheduler::Scheduler(std::unique_ptr<Model> model,
                     const tokenizer::Tokenizer* tokenizer,
                     const SchedulerOptions& options)
    : model_(std::move(model)),
      tokenizer_(tokenizer),
      options_(options),
      logits_(options.slots * model_->config().padded_vocab_size) {}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::Status Scheduler::Validate(const GenerationRequest& r) const {
  const int64_t context = model_->options().max_sequence_length;
  const int64_t prompt = static_cast<int64_t>(r.prompt.size());
  if (r.request_id.empty()) {
    return absl::InvalidArgumentError("request_id is empty");
  }
  if (r.prompt.empty()) return absl::InvalidArgumentError("prompt is empty");
  H3_RETURN_IF_ERROR(Annotate(model_->CheckTokens(r.prompt), "prompt"));
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
  H3_RETURN_IF_ERROR(
      Annotate(model_->CheckTokens(r.stop_token_ids), "stop_token_ids"));
  if (!r.stop_strings.empty() && tokenizer_ == nullptr) {
    return absl::InvalidArgumentError(
        "stop_strings: this model has no tokenizer, so no text to match");
  }
  return ValidateSamplingParams(r.sampling);
}

absl::StatusOr<std::shared_ptr<ResultStream>> Scheduler::Submit(
    GenerationRequest request) {
  H3_RETURN_IF_ERROR(Validate(request));
  auto s = std::make_unique<Sequence>();
  int32_t vocab = static_cast<int32_t>(model_->config().vocab_size);
  if (tokenizer_ != nullptr) {
    vocab = std::min(vocab, tokenizer_->vocab_size());
    H3_ASSIGN_OR_RETURN(s->decoder, tokenizer::IncrementalDecoder::Create(
                                        tokenizer_, request.stop_strings));
    if (!request.ignore_eos && tokenizer_->eos_id() >= 0) {
      s->banned.push_back(tokenizer_->eos_id());
    }
  }
  s->banned.insert(s->banned.end(), request.stop_token_ids.begin(),
                   request.stop_token_ids.end());
  s->seed =
      request.sampling.seed.has_value() ? *request.sampling.seed : RandomSeed();
  s->listed = vocab;
  s->flags.assign(model_->config().vocab_size, 0);
  for (int32_t id : request.prompt) s->flags[id] |= kernels::kTokenInPrompt;
  for (size_t id = vocab; id < s->flags.size(); ++id) {
    s->flags[id] |= kernels::kTokenBanned;
  }
  if (request.min_new_tokens > 0) {
    // Validate checked the stop ids; the end-of-text id is the tokenizer's.
    for (int32_t id : s->banned) {
      if (id < vocab) s->flags[id] |= kernels::kTokenBanned;
    }
  }
  s->request = std::move(request);
  s->stream = std::make_shared<ResultStream>(options_.stream_buffer);
  s->submitted = std::chrono::steady_clock::now();
  std::shared_ptr<ResultStream> stream = s->stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_ || stopping_) {
      return absl::UnavailableError("the server is shutting down");
    }
    if (ids_.contains(s->request.request_id)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "request_id \"", s->request.request_id, "\" is already running"));
    }
    if (static_cast<int>(waiting_.size()) >= options_.max_waiting) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "all ", options_.slots, " slots are busy and ", waiting_.size(),
          " requests are already waiting (the limit); retry later"));
    }
    ids_.insert(s->request.request_id);
    waiting_.push_back(std::move(s));
  }
  wake_.notify_all();
  return stream;
}

bool Scheduler::Abort(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ids_.contains(request_id)) return false;
    aborted_.insert(request_id);
  }
  wake_.notify_all();
  return true;
}

void Scheduler::Drain() {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = true;
}

Scheduler::Stats Scheduler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {.running = running_count_,
          .waiting = static_cast<int>(waiting_.size()),
          .free_slots = options_.slots - running_count_,
          .slots = options_.slots,
          .iterations = iterations_};
}

void Scheduler::Loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Held requests always have work (a prefill chunk or a decode step),
      // so the loop sleeps only when it holds none.
      wake_.wait(lock, [&] {
        return stopping_ || !waiting_.empty() || running_count_ > 0;
      });
      if (stopping_) break;
    }
    Step();
  }
  // Shutting down: end everything still held.
  for (auto& s : running_) Finish(*s, FinishReason::kCancelled, {});
  Retire();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& s : waiting_) {
    Finish(*s, FinishReason::kCancelled, {});
    s->stream->Push(std::move(s->final));
  }
  waiting_.clear();
}

void Scheduler::Step() {
  report_ = {};
  EndExpired();
  Admit();
  if (absl::Status s = Prefill(); !s.ok()) {
    for (auto& seq : running_) Finish(*seq, FinishReason::kError, {.error = s});
  }
  if (absl::Status s = Decode(); !s.ok()) {
    for (auto& seq : running_) Finish(*seq, FinishReason::kError, {.error = s});
  }
  Retire();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++iterations_;
    report_.running = running_count_;
    report_.waiting = static_cast<int>(waiting_.size());
    report_.free_slots = options_.slots - running_count_;
  }
  if (options_.observer != nullptr) options_.observer->OnIteration(report_);
}

void Scheduler::EndExpired() {
  absl::flat_hash_set<std::string> aborted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted.swap(aborted_);
    // Waiting requests that ended before they got a slot.
    const SteadyTime now = std::chrono::steady_clock::now();
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
      s.queue_seconds = SecondsSince(s.submitted);
      Finish(s, why, {});
      ids_.erase(s.request.request_id);
      s.stream->Push(std::move(s.final));
      it = waiting_.erase(it);
    }
  }
  const SteadyTime now = std::chrono::steady_clock::now();
  for (auto& s : running_) {
    if (s->finish != FinishReason::kNone) continue;
    if (s->stream->cancelled() || aborted.contains(s->request.request_id)) {
      Finish(*s, FinishReason::kCancelled, {});
    } else if (s->request.deadline.has_value() && now > *s->request.deadline) {
      Finish(*s, FinishReason::kDeadline, {});
    }
  }
}

void Scheduler::Admit() {
  std::lock_guard<std::mutex> lock(mu_);
  while (!free_states_.empty() && !waiting_.empty()) {
    std::unique_ptr<Sequence> s = std::move(waiting_.front());
    waiting_.pop_front();
    s->state = std::move(free_states_.back());
    free_states_.pop_back();
    s->queue_seconds = SecondsSince(s->submitted);
    ++running_count_;
    absl::Status reset = model_->ResetSequence(*s->state);
    if (reset.ok()) reset = model_->SetTokenFlags(*s->state, s->flags);
    if (!reset.ok()) Finish(*s, FinishReason::kError, {.error = reset});
    running_.push_back(std::move(s));
  }
}

absl::Status Scheduler::Prefill() {
  int64_t budget = options_.prefill_tokens_per_iteration;
  for (auto& s : running_) {
    const int64_t prompt = static_cast<int64_t>(s->request.prompt.size());
    if (s->finish != FinishReason::kNone || s->prefilled == prompt) continue;
    if (budget == 0) break;
    const int64_t n = std::min(prompt - s->prefilled, budget);
    const bool last = s->prefilled + n == prompt;
    // The first token is sampled from the prompt's last logits; those come
    // to the host only for top logprobs.
    const bool top = last && s->request.logprobs > 0;
    const kernels::SamplingRow row = RowOf(*s);
    int32_t id = 0;
    float logprob = 0;
    const StepSampling sampling{absl::MakeConstSpan(&row, 1), &id, &logprob};
    H3_RETURN_IF_ERROR(model_->Prefill(
        *s->state,
        absl::MakeConstSpan(s->request.prompt).subspan(s->prefilled, n),
        top ? logits_.data() : nullptr, last ? &sampling : nullptr));
    s->prefilled += n;
    budget -= n;
    report_.prefill_sequences += 1;
    report_.prefill_tokens += n;
    if (last) Emit(*s, id, logprob, top ? logits_.data() : nullptr);
  }
  return absl::OkStatus();
}

absl::Status Scheduler::Decode() {
  std::vector<Sequence*> batch;
  std::vector<SequenceState*> states;
  std::vector<int32_t> tokens;
  std::vector<kernels::SamplingRow> rows;
  bool top = false;  // someone wants top logprobs: logits to the host
  for (auto& s : running_) {
    if (s->finish != FinishReason::kNone || s->generated.empty()) continue;
    batch.push_back(s.get());
    states.push_back(s->state.get());
    tokens.push_back(s->generated.back());
    rows.push_back(RowOf(*s));
    top = top || s->request.logprobs > 0;
  }
  if (batch.empty()) return absl::OkStatus();
  report_.decode_batch = static_cast<int>(batch.size());
  std::vector<int32_t> ids(batch.size());
  std::vector<float> logprobs(batch.size());
  const StepSampling sampling{rows, ids.data(), logprobs.data()};
  H3_RETURN_IF_ERROR(model_->Decode(states, tokens,
                                    top ? logits_.data() : nullptr, &sampling));
  const int64_t row = model_->config().padded_vocab_size;
  for (size_t i = 0; i < batch.size(); ++i) {
    Emit(*batch[i], ids[i], logprobs[i],
         top ? logits_.data() + i * row : nullptr);
  }
  return absl::OkStatus();
}

kernels::SamplingRow Scheduler::RowOf(const Sequence& s) {
  return SamplingRowOf(s.request.sampling, s.seed, s.generated.size());
}

void Scheduler::Emit(Sequence& s, int32_t id, float logprob,
                     const float* logits) {
  const GenerationRequest& r = s.request;
  SampledToken token{.id = id, .logprob = logprob};
  if (r.logprobs > 0 && logits != nullptr) {
    const loader::ModelConfig& config = model_->config();
    token.top = TopLogprobs(
        absl::MakeConstSpan(logits, config.padded_vocab_size),
        static_cast<int32_t>(config.vocab_size), s.listed, r.logprobs);
  }
  const SteadyTime now = std::chrono::steady_clock::now();
  if (s.generated.empty()) {
    s.first_token_seconds =
        std::chrono::duration<double>(now - s.submitted).count();
  } else {
    report_.inter_token_seconds.push_back(
        std::chrono::duration<double>(now - s.last_token).count());
  }
  s.last_token = now;
  s.generated.push_back(token.id);
  report_.generated_tokens += 1;
  if (static_cast<int32_t>(s.generated.size()) == r.min_new_tokens &&
      !s.banned.empty()) {
    // Long enough: end of text and the stop tokens may come now.
    for (int32_t banned : s.banned) {
      if (banned < s.listed) s.flags[banned] &= ~kernels::kTokenBanned;
    }
    if (absl::Status unban = model_->SetTokenFlags(*s.state, s.flags);
        !unban.ok()) {
      return Finish(s, FinishReason::kError, {.error = unban});
    }
  }

  Delta delta{.token_ids = {token.id}};
  if (r.logprobs >= 0) delta.logprobs.push_back(token);
  FinishReason finish = FinishReason::kNone;
  const bool eos = tokenizer_ != nullptr && !r.ignore_eos &&
                   token.id == tokenizer_->eos_id();
  if (eos) {
    finish = FinishReason::kEos;
  } else if (std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(),
                       token.id) != r.stop_token_ids.end()) {
    finish = FinishReason::kStop;
    delta.matched_stop_token = token.id;
  } else if (s.decoder.has_value()) {
    absl::StatusOr<tokenizer::IncrementalDecoder::Step> step =
        s.decoder->Add(token.id);
    if (!step.ok()) {
      delta.error = step.status();
      return Finish(s, FinishReason::kError, std::move(delta));
    }
    delta.text = std::move(step->text);
    if (step->stop_index >= 0) {
      finish = FinishReason::kStop;
      delta.matched_stop = r.stop_strings[step->stop_index];
    }
  }
  if (finish == FinishReason::kNone &&
      static_cast<int32_t>(s.generated.size()) >= r.max_new_tokens) {
    finish = FinishReason::kLength;
  }
  if (finish != FinishReason::kNone) return Finish(s, finish, std::move(delta));
  s.stream->Push(std::move(delta));
}

void Scheduler::Finish(Sequence& s, FinishReason reason, Delta delta) {
  if (s.finish != FinishReason::kNone) return;
  s.finish = reason;
  // Text held back for a stop string that never completed, or an
  // unfinished character (as U+FFFD); nothing after a stop string.
  if (s.decoder.has_value() && !s.decoder->stopped()) {
    if (absl::StatusOr<std::string> rest = s.decoder->Finish(); rest.ok()) {
      delta.text += *rest;
    }
  }
  delta.finish = reason;
  delta.usage = {.prompt_tokens = static_cast<int64_t>(s.request.prompt.size()),
                 .generated_tokens = static_cast<int64_t>(s.generated.size()),
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
    free_states_.push_back(std::move((*it)->state));
    finished.push_back(std::move(*it));
    it = running_.erase(it);
  }
  if (finished.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& s : finished) ids_.erase(s->request.request_id);
    running_count_ -= static_cast<int>(finished.size());
  }
  // Last, so that a client that saw its final delta finds the slot free
  // and may reuse the request id at once.
  for (const auto& s : finished) s->stream->Push(std::move(s->final));
}

}  // namespace h3::engine
