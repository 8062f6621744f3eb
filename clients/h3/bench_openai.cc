#include "clients/h3/bench_openai.h"

#include <atomic>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace h3::cli {
namespace {

using Json = nlohmann::json;

std::string RequestBody(const BenchPrompt& prompt, float temperature,
                        const std::string& model) {
  Json body = {{"model", model},
               {"max_tokens", prompt.output_len},
               {"min_tokens", prompt.output_len},
               {"ignore_eos", true},
               {"temperature", temperature},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"return_token_ids", true}};
  if (prompt.ids.empty()) {
    body["prompt"] = prompt.text;
  } else {
    body["prompt"] = prompt.ids;
  }
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

absl::StatusOr<HttpEndpoint> ParseBaseUrl(const std::string& url) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--base-url ", url, ": give http://HOST:PORT (TLS is not supported)"));
  }
  rest = rest.substr(0, rest.find('/'));
  HttpEndpoint endpoint;
  const size_t colon = rest.rfind(':');
  endpoint.host = std::string(rest.substr(0, colon));
  if (colon != absl::string_view::npos &&
      (!absl::SimpleAtoi(rest.substr(colon + 1), &endpoint.port) ||
       endpoint.port < 1 || endpoint.port > 65535)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--base-url ", url, ": bad port"));
  }
  if (endpoint.host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--base-url ", url, ": no host"));
  }
  return endpoint;
}

// One streamed completion on a thread of its own: reads its events as they
// come and records each that carries tokens.
class OpenAiBenchBackend::Call final : public BenchCall {
 public:
  Call(const HttpEndpoint& endpoint, RequestRecord* record,
       Clock::time_point start, std::function<void(const CallEnd&)> ended)
      : client_(endpoint.host, endpoint.port),
        record_(record),
        start_(start),
        ended_(std::move(ended)) {
    client_.set_read_timeout(3600, 0);  // a long generation is not an error
    if (!endpoint.api_key.empty()) {
      client_.set_bearer_token_auth(endpoint.api_key.c_str());
    }
  }

  ~Call() override {
    if (thread_.joinable()) thread_.join();
  }

  void Begin(std::string body, size_t prompt_ids, int32_t output_len) {
    if (prompt_ids > 0)
      record_->input_tokens = static_cast<int64_t>(prompt_ids);
    record_->chunk_times_s.reserve(output_len);
    record_->chunk_tokens.reserve(output_len);
    thread_ = std::thread([this, body = std::move(body)] { Run(body); });
  }

  void Cancel() override {
    cancelled_.store(true);
    client_.stop();  // ends a read in progress
  }

 private:
  double Now() const {
    return std::chrono::duration<double>(Clock::now() - start_).count();
  }

  void Run(const std::string& body) {
    httplib::Request request;
    request.method = "POST";
    request.path = "/v1/completions";
    request.body = body;
    request.set_header("Content-Type", "application/json");
    request.set_header("Accept", "text/event-stream");
    request.content_receiver = [this](const char* data, size_t n, uint64_t,
                                      uint64_t) {
      buffer_.append(data, n);
      ReadEvents();
      return !cancelled_.load();
    };
    httplib::Response response;
    httplib::Error error = httplib::Error::Success;
    record_->start_s = Now();
    const bool sent =
        !cancelled_.load() && client_.send(request, response, error);
    record_->end_s = Now();
    CallEnd end;
    end.cancelled = cancelled_.load();
    if (end.cancelled) {
      end.error_code = "CANCELLED";
    } else if (!sent) {
      end.error_code = absl::StrCat("HTTP_", httplib::to_string(error));
    } else if (response.status != 200) {
      end.error_code = absl::StrCat("HTTP_", response.status);
    } else if (!done_ || stream_error_) {
      end.error_code = "STREAM_ERROR";
    } else {
      end.ok = true;
    }
    ended_(end);
  }

  // Takes the complete events out of buffer_.
  void ReadEvents() {
    size_t end;
    while ((end = buffer_.find("\n\n")) != std::string::npos) {
      const double now = Now();
      absl::string_view event(buffer_.data(), end);
      if (absl::ConsumePrefix(&event, "data: ")) Event(event, now);
      buffer_.erase(0, end + 2);
    }
  }

  void Event(absl::string_view payload, double now) {
    if (payload == "[DONE]") {
      done_ = true;
      return;
    }
    const Json chunk =
        Json::parse(payload.begin(), payload.end(), nullptr, false);
    if (chunk.is_discarded() || chunk.contains("error")) {
      stream_error_ = true;
      return;
    }
    const Json& choices = chunk.value("choices", Json::array());
    if (!choices.empty()) {
      const Json& choice = choices[0];
      const size_t tokens = choice.value("token_ids", Json::array()).size();
      if (tokens > 0) {
        record_->chunk_times_s.push_back(now);
        record_->chunk_tokens.push_back(static_cast<int32_t>(tokens));
      }
      if (choice.contains("finish_reason") &&
          choice["finish_reason"].is_string()) {
        record_->finish_reason = choice["finish_reason"].get<std::string>();
      }
    }
    const Json& usage = chunk.value("usage", Json());
    if (usage.is_object() && usage.contains("prompt_tokens") &&
        usage["prompt_tokens"].is_number_integer()) {
      record_->input_tokens = usage["prompt_tokens"].get<int64_t>();
    }
  }

  httplib::Client client_;
  RequestRecord* const record_;
  const Clock::time_point start_;
  const std::function<void(const CallEnd&)> ended_;
  std::atomic<bool> cancelled_{false};
  std::thread thread_;
  // The call's thread only.
  std::string buffer_;
  bool done_ = false;
  bool stream_error_ = false;
};

OpenAiBenchBackend::OpenAiBenchBackend(HttpEndpoint endpoint, std::string model)
    : endpoint_(std::move(endpoint)), model_(std::move(model)) {}

std::shared_ptr<BenchCall> OpenAiBenchBackend::Start(
    const BenchPrompt& prompt, float temperature, RequestRecord* record,
    Clock::time_point start, std::function<void(const CallEnd&)> ended) {
  auto call =
      std::make_shared<Call>(endpoint_, record, start, std::move(ended));
  call->Begin(RequestBody(prompt, temperature, model_), prompt.ids.size(),
              prompt.output_len);
  return call;
}

}  // namespace h3::cli
