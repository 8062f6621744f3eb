#include "server/generate_request.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tokenizer/utf8.h"

namespace h3::server {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

absl::Status CheckText(absl::string_view field, absl::string_view text) {
  return Annotate(tokenizer::ValidateUtf8(text), field);
}

absl::StatusOr<std::vector<int32_t>> PromptIds(
    const v1::GenerateRequest& request, const RequestLimits& limits,
    const tokenizer::Tokenizer* tokenizer) {
  switch (request.prompt_case()) {
    case v1::GenerateRequest::kTokenIds:
      return std::vector<int32_t>(request.token_ids().ids().begin(),
                                  request.token_ids().ids().end());
    case v1::GenerateRequest::kText: {
      if (tokenizer == nullptr) {
        return absl::FailedPreconditionError(
            "text: the served model has no tokenizer; send token_ids");
      }
      H3_RETURN_IF_ERROR(
          CheckTextBytes("text", request.text(), limits.max_prompt_bytes));
      // Encode checks the UTF-8 itself.
      absl::StatusOr<std::vector<int32_t>> ids =
          tokenizer->Encode(request.text());
      if (!ids.ok()) return Annotate(ids.status(), "text");
      return ids;
    }
    default:
      return absl::InvalidArgumentError("prompt: set either text or token_ids");
  }
}

engine::SamplingParams Sampling(const v1::SamplingParams& p) {
  engine::SamplingParams s;
  if (p.has_temperature()) s.temperature = p.temperature();
  // top_k past the vocabulary keeps every token, as 0 does.
  s.top_k = static_cast<int32_t>(
      std::min<uint32_t>(p.top_k(), std::numeric_limits<int32_t>::max()));
  if (p.has_top_p()) s.top_p = p.top_p();
  s.min_p = p.min_p();
  if (p.has_repetition_penalty()) s.repetition_penalty = p.repetition_penalty();
  s.presence_penalty = p.presence_penalty();
  s.frequency_penalty = p.frequency_penalty();
  if (p.has_seed()) s.seed = p.seed();
  return s;
}

}  // namespace

int64_t DefaultMaxPromptBytes(int64_t max_sequence_length) {
  return kPromptBytesPerToken * max_sequence_length;
}

absl::Status CheckTextBytes(absl::string_view field, absl::string_view text,
                            int64_t max_bytes) {
  if (static_cast<int64_t>(text.size()) <= max_bytes) return absl::OkStatus();
  return Invalid(field,
                 absl::StrCat(text.size(), " bytes; this server takes at most ",
                              max_bytes, " (--max-prompt-bytes)"));
}

absl::Status CheckRequestId(absl::string_view id) {
  if (id.size() > kMaxRequestIdBytes) {
    return Invalid("request_id", absl::StrCat(id.size(), " bytes; at most ",
                                              kMaxRequestIdBytes));
  }
  return CheckText("request_id", id);
}

absl::StatusOr<engine::GenerationRequest> ToGenerationRequest(
    const v1::GenerateRequest& request, const std::string& engine_id,
    const RequestLimits& limits, const tokenizer::Tokenizer* tokenizer) {
  engine::GenerationRequest r;
  H3_RETURN_IF_ERROR(CheckRequestId(request.request_id()));
  r.request_id = engine_id;
  H3_ASSIGN_OR_RETURN(r.prompt, PromptIds(request, limits, tokenizer));
  r.sampling = Sampling(request.sampling());

  const v1::StopConditions& stop = request.stop();
  const int64_t prompt = static_cast<int64_t>(r.prompt.size());
  if (stop.has_max_new_tokens()) {
    if (stop.max_new_tokens() > limits.max_new_tokens) {
      return Invalid(
          "stop.max_new_tokens",
          absl::StrCat(stop.max_new_tokens(), "; this server allows at most ",
                       limits.max_new_tokens));
    }
    r.max_new_tokens = static_cast<int32_t>(stop.max_new_tokens());
  } else {
    // The server's limit, cut to the context the prompt leaves (an over-long
    // prompt is refused by the scheduler, naming the context).
    r.max_new_tokens = static_cast<int32_t>(std::max<int64_t>(
        1,
        std::min(limits.max_new_tokens, limits.max_sequence_length - prompt)));
  }
  if (stop.min_new_tokens() > static_cast<uint32_t>(r.max_new_tokens)) {
    return Invalid("stop.min_new_tokens",
                   absl::StrCat(stop.min_new_tokens(),
                                "; it must be at most max_new_tokens (",
                                r.max_new_tokens, ")"));
  }
  r.min_new_tokens = static_cast<int32_t>(stop.min_new_tokens());
  if (stop.stop_strings_size() > kMaxStopStrings) {
    return Invalid("stop.stop_strings",
                   absl::StrCat(stop.stop_strings_size(), " given; at most ",
                                kMaxStopStrings));
  }
  for (int i = 0; i < stop.stop_strings_size(); ++i) {
    const std::string field = absl::StrCat("stop.stop_strings[", i, "]");
    const std::string& s = stop.stop_strings(i);
    if (s.empty()) return Invalid(field, "empty");
    if (s.size() > kMaxStopStringBytes) {
      return Invalid(field, absl::StrCat(s.size(), " bytes; at most ",
                                         kMaxStopStringBytes));
    }
    H3_RETURN_IF_ERROR(CheckText(field, s));
    r.stop_strings.push_back(s);
  }
  if (stop.stop_token_ids_size() > kMaxStopTokenIds) {
    return Invalid("stop.stop_token_ids",
                   absl::StrCat(stop.stop_token_ids_size(), " given; at most ",
                                kMaxStopTokenIds));
  }
  r.stop_token_ids.assign(stop.stop_token_ids().begin(),
                          stop.stop_token_ids().end());
  r.ignore_eos = stop.ignore_eos();

  const v1::LogprobOptions& logprobs = request.logprobs();
  if (logprobs.top_n() > engine::kMaxTopLogprobs) {
    return Invalid(
        "logprobs.top_n",
        absl::StrCat(logprobs.top_n(), "; at most ", engine::kMaxTopLogprobs));
  }
  if (logprobs.enabled() || logprobs.top_n() > 0) {
    r.logprobs = static_cast<int>(logprobs.top_n());
  }
  return r;
}

v1::FinishReason ToProto(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kLength:
      return v1::FINISH_REASON_LENGTH;
    case engine::FinishReason::kStop:
      return v1::FINISH_REASON_STOP;
    case engine::FinishReason::kEos:
      return v1::FINISH_REASON_EOS;
    case engine::FinishReason::kCancelled:
      return v1::FINISH_REASON_CANCELLED;
    case engine::FinishReason::kDeadline:
      return v1::FINISH_REASON_DEADLINE;
    case engine::FinishReason::kNone:
    case engine::FinishReason::kError:
      break;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

void AppendDelta(const engine::Delta& delta,
                 const tokenizer::Tokenizer* tokenizer,
                 v1::GenerateResponse* response) {
  for (int32_t id : delta.token_ids) response->add_token_ids(id);
  response->mutable_text()->append(delta.text);
  for (const engine::SampledToken& token : delta.logprobs) {
    v1::TokenLogprob* out = response->add_logprobs();
    out->set_token_id(token.id);
    out->set_logprob(token.logprob);
    for (const engine::TokenLogprob& alt : token.top) {
      v1::TopLogprob* top = out->add_top();
      top->set_token_id(alt.id);
      top->set_logprob(alt.logprob);
      if (tokenizer != nullptr) {
        absl::StatusOr<std::string> text = tokenizer->Decode({alt.id});
        if (text.ok()) top->set_text(*std::move(text));
      }
    }
  }
  if (delta.finish == engine::FinishReason::kNone) return;
  response->set_finish_reason(ToProto(delta.finish));
  if (!delta.matched_stop.empty()) {
    response->set_stop_string(delta.matched_stop);
  } else if (delta.matched_stop_token >= 0) {
    response->set_stop_token_id(delta.matched_stop_token);
  }
  v1::Usage* usage = response->mutable_usage();
  usage->set_prompt_tokens(static_cast<uint32_t>(delta.usage.prompt_tokens));
  usage->set_generated_tokens(
      static_cast<uint32_t>(delta.usage.generated_tokens));
  usage->set_cached_prompt_tokens(
      static_cast<uint32_t>(delta.usage.cached_tokens));
  usage->set_queue_seconds(delta.usage.queue_seconds);
  usage->set_time_to_first_token_seconds(delta.usage.first_token_seconds);
  usage->set_total_seconds(delta.usage.total_seconds);
}

}  // namespace h3::server
