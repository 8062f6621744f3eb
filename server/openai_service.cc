#include "server/openai_service.h"

#include <ctime>
#include <memory>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/generate_request.h"
#include "server/openai_response.h"
#include "server/relay.h"

namespace h3::server {
namespace {

constexpr char kJson[] = "application/json";

void Reply(httplib::Response& response, const HttpError& error) {
  response.status = error.status;
  response.set_content(ErrorJson(error), kJson);
}

HttpError NoModel() {
  return ToOpenAiError(absl::UnavailableError(
      "no model is loaded (start h3serve with --model)"));
}

int64_t CodePoints(const std::string& text) {
  int64_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

// One completion being generated: what its response needs from the request
// and what it has gathered so far.
struct Completion {
  Completion(CompletionIdentity identity, const CompletionRequest& request,
             const tokenizer::Tokenizer* tokenizer, int32_t last_prompt_id,
             std::string echo)
      : identity(std::move(identity)),
        stream(request.stream),
        include_usage(request.include_usage),
        with_logprobs(request.logprobs >= 0),
        with_token_ids(request.return_token_ids),
        logprobs(tokenizer, CodePoints(echo), last_prompt_id),
        echo(std::move(echo)) {}

  // The choice of `delta`'s tokens and text; sets `usage` when final.
  CompletionChoice Choice(const engine::Delta& delta) {
    CompletionChoice c;
    c.text = delta.text;
    c.token_ids = delta.token_ids;
    if (with_logprobs && stream) c.logprobs = logprobs.Make(delta.logprobs);
    c.finish = delta.finish;
    c.matched_stop = delta.matched_stop;
    c.matched_stop_token = delta.matched_stop_token;
    if (delta.finish != engine::FinishReason::kNone) usage = delta.usage;
    return c;
  }

  const CompletionIdentity identity;
  const bool stream;
  const bool include_usage;
  const bool with_logprobs;
  const bool with_token_ids;
  LegacyLogprobs logprobs;
  const std::string echo;  // the prompt's text when echo, else ""
  engine::Usage usage;
  std::unique_ptr<engine::RequestOutput> output;
};

// Writes one server-sent event "data: PAYLOAD\n\n"; false when the client
// is gone.
bool Event(httplib::DataSink& sink, absl::string_view payload) {
  const std::string event = absl::StrCat("data: ", payload, "\n\n");
  return sink.write(event.data(), event.size());
}

// A non-streamed completion: the deltas gathered into one choice.
void Answer(Completion& c, const HttpConnection& connection,
            httplib::Response& response) {
  CompletionChoice whole;
  whole.text = c.echo;
  std::vector<engine::SampledToken> logprobs;
  const absl::Status relayed = Relay(
      *c.output, [&connection] { return connection.Gone(); },
      [&](const engine::Delta& delta) {
        CompletionChoice part = c.Choice(delta);
        whole.text += part.text;
        whole.token_ids.insert(whole.token_ids.end(), part.token_ids.begin(),
                               part.token_ids.end());
        logprobs.insert(logprobs.end(), delta.logprobs.begin(),
                        delta.logprobs.end());
        whole.finish = part.finish;
        whole.matched_stop = part.matched_stop;
        whole.matched_stop_token = part.matched_stop_token;
        return true;
      });
  if (!relayed.ok()) {
    // A client that left reads nothing; the status is for the metrics.
    Reply(response, ToOpenAiError(relayed));
    return;
  }
  if (c.with_logprobs) whole.logprobs = c.logprobs.Make(logprobs);
  response.set_content(
      CompletionJson(c.identity, whole, c.with_token_ids, c.usage), kJson);
}

// A streamed completion: a chunk per delta that says something, the usage
// chunk if asked for, then [DONE]. False (the connection closes) when the
// client is gone.
bool StreamEvents(Completion& c, const HttpConnection& connection,
                  httplib::DataSink& sink) {
  if (!c.echo.empty()) {
    CompletionChoice prompt;
    prompt.text = c.echo;
    if (!Event(sink, ChunkJson(c.identity, prompt, c.with_token_ids,
                               c.include_usage))) {
      c.output->Cancel();
      return false;
    }
  }
  const absl::Status relayed = Relay(
      *c.output, [&connection] { return connection.Gone(); },
      [&](const engine::Delta& delta) {
        const CompletionChoice choice = c.Choice(delta);
        // Tokens held back (an unfinished character, a possible stop
        // string) say nothing yet unless their ids or logprobs are asked
        // for.
        const bool says_something =
            !choice.text.empty() ||
            choice.finish != engine::FinishReason::kNone ||
            ((c.with_token_ids || c.with_logprobs) &&
             !choice.token_ids.empty());
        return !says_something ||
               Event(sink, ChunkJson(c.identity, choice, c.with_token_ids,
                                     c.include_usage));
      });
  if (relayed.code() == absl::StatusCode::kCancelled) return false;
  if (!relayed.ok()) {
    // The status line has gone out: the error becomes an event, as vLLM
    // sends it.
    if (!Event(sink, ErrorJson(ToOpenAiError(relayed)))) return false;
  } else if (c.include_usage &&
             !Event(sink, UsageChunkJson(c.identity, c.usage))) {
    return false;
  }
  if (!Event(sink, "[DONE]")) return false;
  sink.done();
  return true;
}

}  // namespace

OpenAiService::OpenAiService(ServedModel model, Metrics* metrics)
    : model_(std::move(model)),
      metrics_(metrics),
      created_(static_cast<int64_t>(std::time(nullptr))) {}

std::vector<HttpRoute> OpenAiService::Routes() {
  return {
      {"POST", "/v1/completions", "/v1/completions",
       [this](const httplib::Request& q, httplib::Response& r,
              const HttpConnection& c) { Completions(q, r, c); }},
      {"POST", "/v1/chat/completions", "/v1/chat/completions",
       [this](const httplib::Request& q, httplib::Response& r,
              const HttpConnection&) { ChatCompletions(q, r); }},
      {"GET", "/v1/models", "/v1/models",
       [this](const httplib::Request&, httplib::Response& r,
              const HttpConnection&) { Models(r); }},
      {"GET", "/v1/models/(.+)", "/v1/models/{id}",
       [this](const httplib::Request& q, httplib::Response& r,
              const HttpConnection&) { Model(q, r); }},
      {"GET", "/health", "/health",
       [this](const httplib::Request&, httplib::Response& r,
              const HttpConnection&) { Health(r); }},
  };
}

std::string OpenAiService::Caller(const httplib::Request& request) const {
  if (model_.keys == nullptr || model_.keys->empty()) return "";
  AuthFailure failure;
  return model_.keys
      ->Authenticate(request.get_header_value("Authorization"), &failure)
      .value_or("");
}

std::optional<HttpError> OpenAiService::Admit(const httplib::Request& request) {
  if (model_.keys == nullptr || model_.keys->empty()) return std::nullopt;
  if (request.path == "/health") return std::nullopt;  // probes stay open
  AuthFailure failure;
  absl::StatusOr<std::string> name = model_.keys->Authenticate(
      request.get_header_value("Authorization"), &failure);
  if (name.ok()) return std::nullopt;
  metrics_->OnUnauthenticated("http", failure);
  HttpError e = ToOpenAiError(name.status());
  e.code = "invalid_api_key";
  return e;
}

void OpenAiService::Refuse(httplib::Response& response,
                           const absl::Status& status) {
  metrics_->OnRejected("http", status);
  Reply(response, ToOpenAiError(status));
}

void OpenAiService::Completions(const httplib::Request& request,
                                httplib::Response& response,
                                const HttpConnection& connection) {
  if (model_.scheduler == nullptr) return Reply(response, NoModel());
  absl::StatusOr<CompletionRequest> parsed =
      ParseCompletionRequest(request.body);
  if (!parsed.ok()) return Refuse(response, parsed.status());
  if (!parsed->model.empty() && parsed->model != model_.name) {
    metrics_->OnRejected("http", absl::NotFoundError(""));
    HttpError e = ToOpenAiError(absl::NotFoundError(absl::StrCat(
        "model: `", parsed->model, "` does not exist; this server serves `",
        model_.name, "`")));
    e.code = "model_not_found";
    return Reply(response, e);
  }
  if (draining_.load()) {
    return Refuse(response,
                  absl::UnavailableError("the server is shutting down"));
  }
  const bool text = parsed->generate.has_text();
  if (text && model_.tokenizer == nullptr) {
    return Refuse(response,
                  absl::FailedPreconditionError(
                      "prompt: the served model has no tokenizer; send the "
                      "prompt as an array of token ids"));
  }
  // Admission has authenticated the request; the key's name is its scope.
  absl::StatusOr<std::shared_ptr<RequestIds::Held>> held =
      model_.ids->Hold(Caller(request), "", "cmpl-");
  if (!held.ok()) return Refuse(response, held.status());
  const std::string id = (*held)->id();
  absl::StatusOr<engine::GenerationRequest> r = ToGenerationRequest(
      parsed->generate, (*held)->engine_id(), model_.limits, model_.tokenizer);
  if (!r.ok()) return Refuse(response, r.status());
  const int32_t last_prompt_id = r->prompt.empty() ? -1 : r->prompt.back();
  std::string echo;
  if (parsed->echo) {
    if (text) {
      echo = parsed->generate.text();
    } else if (model_.tokenizer != nullptr) {
      echo = model_.tokenizer->Decode(r->prompt).value_or("");
    }
  }
  absl::StatusOr<std::unique_ptr<engine::RequestOutput>> output =
      model_.scheduler->Submit(*std::move(r));
  if (!output.ok()) return Refuse(response, output.status());

  auto completion = std::make_shared<Completion>(
      CompletionIdentity{id, static_cast<int64_t>(std::time(nullptr)),
                         model_.name},
      *parsed, model_.tokenizer, last_prompt_id, std::move(echo));
  completion->output = *std::move(output);
  if (!completion->stream) return Answer(*completion, connection, response);
  response.set_header("Cache-Control", "no-cache");
  response.set_header("X-Accel-Buffering", "no");  // proxies: do not buffer
  // Runs after this handler returns, on the same thread and connection.
  response.set_chunked_content_provider(
      "text/event-stream",
      // The id stays held until the stream ends.
      [completion, held = *std::move(held), &connection](
          size_t, httplib::DataSink& sink) {
        return StreamEvents(*completion, connection, sink);
      },
      // Not streamed to its end (the client left, or the headers could not
      // be sent): end the request.
      [completion](bool success) {
        if (!success) completion->output->Cancel();
      });
}

void OpenAiService::ChatCompletions(const httplib::Request& request,
                                    httplib::Response& response) {
  HttpError e = ToOpenAiError(absl::NotFoundError(absl::StrCat(
      "model `", model_.scheduler != nullptr ? model_.name : "(none)",
      "` is a base model: its file carries no chat template, so "
      "/v1/chat/completions is not served; use /v1/completions")));
  e.code = "no_chat_template";
  Reply(response, e);
}

void OpenAiService::Models(httplib::Response& response) const {
  std::vector<nlohmann::ordered_json> models;
  if (model_.scheduler != nullptr) {
    models.push_back(
        ModelJson(model_.name, created_, model_.limits.max_sequence_length));
  }
  response.set_content(ModelListJson(models), kJson);
}

void OpenAiService::Model(const httplib::Request& request,
                          httplib::Response& response) const {
  const std::string name = request.matches[1];
  if (model_.scheduler == nullptr || name != model_.name) {
    HttpError e = ToOpenAiError(
        absl::NotFoundError(absl::StrCat("model `", name, "` does not exist")));
    e.param = "model";
    e.code = "model_not_found";
    return Reply(response, e);
  }
  response.set_content(
      Dump(ModelJson(model_.name, created_, model_.limits.max_sequence_length)),
      kJson);
}

void OpenAiService::Health(httplib::Response& response) const {
  if (model_.scheduler == nullptr) return Reply(response, NoModel());
  if (draining_.load()) {
    return Reply(
        response,
        ToOpenAiError(absl::UnavailableError("the server is shutting down")));
  }
  response.status = 200;
}

}  // namespace h3::server
