#include "server/openai_response.h"

#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace h3::server {
namespace {

using Json = nlohmann::ordered_json;
using OrderedJson = nlohmann::ordered_json;

// JSON has no infinities: a token the model gives no chance at all is
// written as -9999 (vLLM's value).
double Finite(float logprob) {
  return std::isfinite(logprob) ? logprob : -9999.0;
}

int64_t CodePoints(const std::string& text) {
  int64_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

OrderedJson ChoiceJson(const CompletionChoice& choice, bool with_token_ids) {
  OrderedJson out = {
      {"index", 0}, {"text", choice.text}, {"logprobs", choice.logprobs}};
  const char* finish = OpenAiFinishReason(choice.finish);
  out["finish_reason"] = *finish ? OrderedJson(finish) : OrderedJson(nullptr);
  // vLLM's stop_reason: which stop string or stop token id matched; null for
  // the end-of-text token and the length limit.
  if (choice.finish != engine::FinishReason::kNone) {
    if (!choice.matched_stop.empty()) {
      out["stop_reason"] = choice.matched_stop;
    } else if (choice.matched_stop_token >= 0) {
      out["stop_reason"] = choice.matched_stop_token;
    } else {
      out["stop_reason"] = nullptr;
    }
  }
  if (with_token_ids) out["token_ids"] = choice.token_ids;
  return out;
}

OrderedJson Header(const CompletionIdentity& identity) {
  return {{"id", identity.id},
          {"object", "text_completion"},
          {"created", identity.created},
          {"model", identity.model}};
}

}  // namespace

std::string Dump(const OrderedJson& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

const char* OpenAiFinishReason(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kLength:
      return "length";
    case engine::FinishReason::kStop:
    case engine::FinishReason::kEos:
      return "stop";
    case engine::FinishReason::kCancelled:
    case engine::FinishReason::kDeadline:
    case engine::FinishReason::kError:
      return "abort";
    case engine::FinishReason::kNone:
      break;
  }
  return "";
}

LegacyLogprobs::LegacyLogprobs(const tokenizer::Tokenizer* tokenizer,
                               int64_t offset, int32_t previous)
    : tokenizer_(tokenizer), offset_(offset), previous_(previous) {}

std::string LegacyLogprobs::TokenText(int32_t id) const {
  if (tokenizer_ == nullptr) return absl::StrCat("token_id:", id);
  // Decoded after the token before it, as it appears in the text (a
  // sentencepiece piece alone loses its leading space).
  if (previous_ >= 0) {
    absl::StatusOr<std::string> before = tokenizer_->Decode({previous_});
    absl::StatusOr<std::string> both = tokenizer_->Decode({previous_, id});
    if (before.ok() && both.ok() && absl::StartsWith(*both, *before)) {
      return both->substr(before->size());
    }
  }
  absl::StatusOr<std::string> alone = tokenizer_->Decode({id});
  return alone.ok() ? *std::move(alone) : absl::StrCat("token_id:", id);
}

Json LegacyLogprobs::Make(const std::vector<engine::SampledToken>& tokens) {
  Json texts = Json::array();
  Json logprobs = Json::array();
  Json tops = Json::array();
  Json offsets = Json::array();
  for (const engine::SampledToken& token : tokens) {
    std::string text = TokenText(token.id);
    Json top = Json::object();
    for (const engine::TokenLogprob& alt : token.top) {
      top.emplace(TokenText(alt.id), Finite(alt.logprob));
    }
    top.emplace(text, Finite(token.logprob));  // kept if already there
    offsets.push_back(offset_);
    offset_ += CodePoints(text);
    logprobs.push_back(Finite(token.logprob));
    tops.push_back(std::move(top));
    texts.push_back(std::move(text));
    previous_ = token.id;
  }
  return {{"tokens", std::move(texts)},
          {"token_logprobs", std::move(logprobs)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

Json UsageJson(const engine::Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.generated_tokens},
          {"total_tokens", usage.prompt_tokens + usage.generated_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
}

std::string CompletionJson(const CompletionIdentity& identity,
                           const CompletionChoice& choice, bool with_token_ids,
                           const engine::Usage& usage) {
  OrderedJson out = Header(identity);
  out["choices"] = OrderedJson::array({ChoiceJson(choice, with_token_ids)});
  out["usage"] = UsageJson(usage);
  return Dump(out);
}

std::string ChunkJson(const CompletionIdentity& identity,
                      const CompletionChoice& choice, bool with_token_ids,
                      bool usage_field) {
  OrderedJson out = Header(identity);
  OrderedJson c = ChoiceJson(choice, with_token_ids);
  if (choice.finish == engine::FinishReason::kNone) c["stop_reason"] = nullptr;
  out["choices"] = OrderedJson::array({std::move(c)});
  if (usage_field) out["usage"] = nullptr;
  return Dump(out);
}

std::string UsageChunkJson(const CompletionIdentity& identity,
                           const engine::Usage& usage) {
  OrderedJson out = Header(identity);
  out["choices"] = OrderedJson::array();
  out["usage"] = UsageJson(usage);
  return Dump(out);
}

std::string ErrorJson(const HttpError& error) {
  auto or_null = [](const std::string& s) {
    return s.empty() ? OrderedJson(nullptr) : OrderedJson(s);
  };
  return Dump({{"error",
                {{"message", error.message},
                 {"type", error.type},
                 {"param", or_null(error.param)},
                 {"code", or_null(error.code)}}}});
}

Json ModelJson(const std::string& name, int64_t created,
               int64_t max_model_len) {
  return {{"id", name},
          {"object", "model"},
          {"created", created},
          {"owned_by", "h3serve"},
          {"root", name},
          {"parent", nullptr},
          {"max_model_len", max_model_len}};
}

std::string ModelListJson(const std::vector<OrderedJson>& models) {
  OrderedJson out = {{"object", "list"}, {"data", OrderedJson::array()}};
  for (const Json& model : models) out["data"].push_back(model);
  return Dump(out);
}

}  // namespace h3::server
