#include "server/openai_request.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace h3::server {
namespace {

using Json = nlohmann::json;

absl::Status Invalid(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

absl::Status Unsupported(absl::string_view field, absl::string_view problem) {
  return absl::UnimplementedError(absl::StrCat(field, ": ", problem));
}

// Whether the JSON text nests arrays and objects deeper than `limit`,
// outside strings. The body is checked before parsing so that no parser,
// however written, meets a hostile depth.
bool TooDeep(absl::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// The body's field `name`; null when it is absent or JSON null.
const Json* Field(const Json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::Status WrongType(const char* name, const char* expected,
                       const Json& value) {
  return Invalid(
      name, absl::StrCat("expected ", expected, ", got ", value.type_name()));
}

absl::StatusOr<std::optional<double>> Number(const Json& body,
                                             const char* name) {
  const Json* v = Field(body, name);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) return WrongType(name, "a number", *v);
  return std::optional<double>(v->get<double>());
}

// An integer in [lo, hi]; a float with an integral value counts.
absl::StatusOr<std::optional<int64_t>> Integer(const Json& body,
                                               const char* name, int64_t lo,
                                               int64_t hi) {
  const Json* v = Field(body, name);
  if (v == nullptr) return std::optional<int64_t>();
  int64_t n = 0;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) {
      return Invalid(name, absl::StrCat(u, "; at most ", hi));
    }
    n = static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    n = v->get<int64_t>();
  } else if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!(std::trunc(d) == d && d >= -9.2e18 && d <= 9.2e18)) {
      return WrongType(name, "an integer", *v);
    }
    n = static_cast<int64_t>(d);
  } else {
    return WrongType(name, "an integer", *v);
  }
  if (n < lo || n > hi) {
    return Invalid(name,
                   absl::StrCat(n, "; it must be in [", lo, ", ", hi, "]"));
  }
  return std::optional<int64_t>(n);
}

absl::StatusOr<bool> Bool(const Json& body, const char* name) {
  const Json* v = Field(body, name);
  if (v == nullptr) return false;
  if (!v->is_boolean()) return WrongType(name, "true or false", *v);
  return v->get<bool>();
}

// One token id of a prompt (the engine checks the vocabulary).
absl::StatusOr<int32_t> TokenId(const Json& v, const std::string& field) {
  if (!v.is_number_integer()) {
    return Invalid(field,
                   absl::StrCat("expected a token id, got ", v.type_name()));
  }
  if (v.is_number_unsigned()
          ? v.get<uint64_t>() > INT32_MAX
          : v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
    return Invalid(field, "not a token id");
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

absl::Status SetIds(const Json& ids, v1::GenerateRequest& out) {
  auto* dst = out.mutable_token_ids()->mutable_ids();
  dst->Reserve(static_cast<int>(ids.size()));
  for (size_t i = 0; i < ids.size(); ++i) {
    H3_ASSIGN_OR_RETURN(int32_t id,
                        TokenId(ids[i], absl::StrCat("prompt[", i, "]")));
    dst->Add(id);
  }
  return absl::OkStatus();
}

// prompt: "text", [ids...], ["text"] or [[ids...]].
absl::Status SetPrompt(const Json& body, v1::GenerateRequest& out) {
  const Json* prompt = Field(body, "prompt");
  if (prompt == nullptr) return Invalid("prompt", "required");
  if (prompt->is_string()) {
    out.set_text(prompt->get<std::string>());
    return absl::OkStatus();
  }
  if (!prompt->is_array()) {
    return WrongType("prompt", "a string or an array", *prompt);
  }
  if (prompt->empty()) return Invalid("prompt", "empty");
  const Json& first = prompt->front();
  if (first.is_number()) return SetIds(*prompt, out);
  if (!first.is_string() && !first.is_array()) {
    return Invalid("prompt", absl::StrCat("expected strings or token ids, got ",
                                          first.type_name()));
  }
  if (prompt->size() > 1) {
    return Unsupported(
        "prompt",
        absl::StrCat(prompt->size(),
                     " prompts given; h3serve takes one per request"));
  }
  if (first.is_string()) {
    out.set_text(first.get<std::string>());
    return absl::OkStatus();
  }
  if (first.empty()) return Invalid("prompt", "empty");
  return SetIds(first, out);
}

// stop: "text" or ["text", ...] (at most kMaxStopStrings, checked later).
absl::Status SetStop(const Json& body, v1::StopConditions& stop) {
  const Json* v = Field(body, "stop");
  if (v == nullptr) return absl::OkStatus();
  if (v->is_string()) {
    stop.add_stop_strings(v->get<std::string>());
    return absl::OkStatus();
  }
  if (!v->is_array()) return WrongType("stop", "a string or an array", *v);
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      return Invalid(
          absl::StrCat("stop[", i, "]"),
          absl::StrCat("expected a string, got ", (*v)[i].type_name()));
    }
    stop.add_stop_strings((*v)[i].get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status SetStopTokenIds(const Json& body, v1::StopConditions& stop) {
  const Json* v = Field(body, "stop_token_ids");
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_array()) return WrongType("stop_token_ids", "an array", *v);
  for (size_t i = 0; i < v->size(); ++i) {
    H3_ASSIGN_OR_RETURN(
        int32_t id, TokenId((*v)[i], absl::StrCat("stop_token_ids[", i, "]")));
    stop.add_stop_token_ids(id);
  }
  return absl::OkStatus();
}

absl::Status SetSampling(const Json& body, v1::SamplingParams& s) {
  H3_ASSIGN_OR_RETURN(std::optional<double> temperature,
                      Number(body, "temperature"));
  if (temperature) s.set_temperature(static_cast<float>(*temperature));
  H3_ASSIGN_OR_RETURN(std::optional<double> top_p, Number(body, "top_p"));
  if (top_p) s.set_top_p(static_cast<float>(*top_p));
  // vLLM's top_k: -1 (or 0) keeps every token.
  H3_ASSIGN_OR_RETURN(std::optional<int64_t> top_k,
                      Integer(body, "top_k", -1, UINT32_MAX));
  if (top_k && *top_k > 0) s.set_top_k(static_cast<uint32_t>(*top_k));
  H3_ASSIGN_OR_RETURN(std::optional<double> min_p, Number(body, "min_p"));
  if (min_p) s.set_min_p(static_cast<float>(*min_p));
  H3_ASSIGN_OR_RETURN(std::optional<double> repetition,
                      Number(body, "repetition_penalty"));
  if (repetition) s.set_repetition_penalty(static_cast<float>(*repetition));
  H3_ASSIGN_OR_RETURN(std::optional<double> presence,
                      Number(body, "presence_penalty"));
  if (presence) s.set_presence_penalty(static_cast<float>(*presence));
  H3_ASSIGN_OR_RETURN(std::optional<double> frequency,
                      Number(body, "frequency_penalty"));
  if (frequency) s.set_frequency_penalty(static_cast<float>(*frequency));
  // Any 64-bit integer; a negative seed is taken by its two's complement.
  const Json* seed = Field(body, "seed");
  if (seed != nullptr) {
    if (seed->is_number_unsigned()) {
      s.set_seed(seed->get<uint64_t>());
    } else if (seed->is_number_integer()) {
      s.set_seed(static_cast<uint64_t>(seed->get<int64_t>()));
    } else {
      return WrongType("seed", "an integer", *seed);
    }
  }
  return absl::OkStatus();
}

// Fields h3serve accepts only at their neutral values.
absl::Status CheckUnsupported(const Json& body) {
  for (const char* name : {"n", "best_of"}) {
    H3_ASSIGN_OR_RETURN(std::optional<int64_t> n,
                        Integer(body, name, 1, INT32_MAX));
    if (n && *n != 1) {
      return Unsupported(name, absl::StrCat(*n,
                                            "; h3serve returns one "
                                            "completion per request, so "
                                            "only 1 is supported"));
    }
  }
  if (const Json* suffix = Field(body, "suffix");
      suffix != nullptr && !(suffix->is_string() && suffix->empty())) {
    return Unsupported("suffix", "insertion is not supported");
  }
  if (const Json* bias = Field(body, "logit_bias");
      bias != nullptr && !(bias->is_object() && bias->empty())) {
    return Unsupported("logit_bias", "not supported");
  }
  if (const Json* user = Field(body, "user");
      user != nullptr && !user->is_string()) {
    return WrongType("user", "a string", *user);
  }
  return absl::OkStatus();
}

absl::Status SetStreaming(const Json& body, CompletionRequest& r) {
  H3_ASSIGN_OR_RETURN(r.stream, Bool(body, "stream"));
  const Json* options = Field(body, "stream_options");
  if (options == nullptr) return absl::OkStatus();
  if (!r.stream) {
    return Invalid("stream_options", "allowed only with stream: true");
  }
  if (!options->is_object()) {
    return WrongType("stream_options", "an object", *options);
  }
  const Json* usage = Field(*options, "include_usage");
  if (usage != nullptr) {
    if (!usage->is_boolean()) {
      return WrongType("stream_options.include_usage", "true or false", *usage);
    }
    r.include_usage = usage->get<bool>();
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CompletionRequest> ParseCompletionRequest(
    absl::string_view body) {
  if (TooDeep(body, kMaxJsonDepth)) {
    return Invalid("body", absl::StrCat("JSON nested deeper than ",
                                        kMaxJsonDepth, " levels"));
  }
  const Json json = Json::parse(body.begin(), body.end(), nullptr,
                                /*allow_exceptions=*/false);
  if (json.is_discarded()) return Invalid("body", "not valid JSON");
  if (!json.is_object()) return WrongType("body", "a JSON object", json);

  CompletionRequest r;
  if (const Json* model = Field(json, "model"); model != nullptr) {
    if (!model->is_string()) return WrongType("model", "a string", *model);
    r.model = model->get<std::string>();
  }
  H3_RETURN_IF_ERROR(CheckUnsupported(json));
  H3_RETURN_IF_ERROR(SetPrompt(json, r.generate));
  H3_RETURN_IF_ERROR(SetSampling(json, *r.generate.mutable_sampling()));

  v1::StopConditions& stop = *r.generate.mutable_stop();
  if (json.contains("max_tokens")) {  // null: the server's limit
    H3_ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens,
                        Integer(json, "max_tokens", 1, UINT32_MAX));
    if (max_tokens) stop.set_max_new_tokens(static_cast<uint32_t>(*max_tokens));
  } else {
    stop.set_max_new_tokens(kDefaultCompletionTokens);
  }
  H3_ASSIGN_OR_RETURN(std::optional<int64_t> min_tokens,
                      Integer(json, "min_tokens", 0, UINT32_MAX));
  if (min_tokens) stop.set_min_new_tokens(static_cast<uint32_t>(*min_tokens));
  H3_RETURN_IF_ERROR(SetStop(json, stop));
  H3_RETURN_IF_ERROR(SetStopTokenIds(json, stop));
  H3_ASSIGN_OR_RETURN(bool ignore_eos, Bool(json, "ignore_eos"));
  stop.set_ignore_eos(ignore_eos);

  H3_ASSIGN_OR_RETURN(std::optional<int64_t> logprobs,
                      Integer(json, "logprobs", 0, INT32_MAX));
  if (logprobs) {
    r.logprobs = static_cast<int>(*logprobs);
    r.generate.mutable_logprobs()->set_enabled(true);
    r.generate.mutable_logprobs()->set_top_n(static_cast<uint32_t>(*logprobs));
  }
  H3_ASSIGN_OR_RETURN(r.echo, Bool(json, "echo"));
  if (r.echo && r.logprobs >= 0) {
    return Unsupported("echo",
                       "with logprobs it needs the prompt's "
                       "logprobs, which h3serve does not compute");
  }
  H3_ASSIGN_OR_RETURN(r.return_token_ids, Bool(json, "return_token_ids"));
  H3_RETURN_IF_ERROR(SetStreaming(json, r));
  return r;
}

HttpError ToOpenAiError(const absl::Status& status) {
  HttpError e = ToHttpError(status);
  // The leading name of messages like "name: ..." or "name is ...".
  const absl::string_view message = status.message();
  const size_t end = message.find_first_of(": ");
  if (end == absl::string_view::npos) return e;
  const absl::string_view name = message.substr(0, end);
  absl::string_view base = name.substr(0, name.find('['));
  const absl::string_view index = name.substr(base.size());
  // The gRPC API's and the engine's names, as the HTTP API calls them.
  static constexpr std::pair<absl::string_view, absl::string_view> kRenames[] =
      {
          {"stop.max_new_tokens", "max_tokens"},
          {"max_new_tokens", "max_tokens"},
          {"stop.min_new_tokens", "min_tokens"},
          {"min_new_tokens", "min_tokens"},
          {"stop.stop_strings", "stop"},
          {"stop_strings", "stop"},
          {"stop.stop_token_ids", "stop_token_ids"},
          {"logprobs.top_n", "logprobs"},
          {"top", "logprobs"},  // "top logprobs is ..."
          {"text", "prompt"},
          {"token_ids", "prompt"},
      };
  // Names that are already OpenAI's (this file's and the sampler's).
  // clang-format off
  static constexpr absl::string_view kSame[] = {
      "prompt", "model", "max_tokens", "min_tokens", "stop", "stop_token_ids",
      "logprobs", "echo", "n", "best_of", "suffix", "logit_bias", "user",
      "stream", "stream_options", "temperature", "top_p", "top_k", "min_p",
      "seed", "repetition_penalty", "presence_penalty", "frequency_penalty",
      "ignore_eos", "return_token_ids"};
  // clang-format on

  for (const auto& [from, to] : kRenames) {
    if (base != from) continue;
    e.param = std::string(to);
    const size_t rest = from == "top" ? end + sizeof(" logprobs") - 1 : end;
    e.message = absl::StrCat(to, index, message.substr(rest));
    return e;
  }
  for (absl::string_view same : kSame) {
    if (base == same) e.param = std::string(base);
  }
  if (absl::StartsWith(base, "stream_options.")) e.param = "stream_options";
  return e;
}

}  // namespace h3::server
