#include "clients/h3/generate_command.h"

#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "clients/h3/channel.h"
#include "clients/h3/grpc_status.h"
#include "clients/h3/id_list.h"
#include "clients/h3/interrupt.h"
#include "grpcpp/create_channel.h"
#include "h3/v1/text_generation.grpc.pb.h"
#include "nlohmann/json.hpp"

namespace h3::cli {
namespace {

constexpr int kGrpcErrorExit = 1;
constexpr int kUsageExit = 2;
constexpr int kInterruptedExit = 130;  // 128 + SIGINT, as shells report it

// The command line as given; whether an optional flag was given at all is
// asked of the CLI::App, so that unset fields stay unset in the request.
struct GenerateFlags {
  std::string server = "localhost:50051";
  ChannelFlags channel;
  std::string prompt;
  std::string prompt_ids;
  uint32_t max_tokens = 0;
  uint32_t min_tokens = 0;
  bool greedy = false;
  float temperature = 1;
  uint32_t top_k = 0;
  float top_p = 1;
  float min_p = 0;
  float repetition_penalty = 1;
  float presence_penalty = 0;
  float frequency_penalty = 0;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int logprobs = -1;
  std::string request_id;
  double timeout_seconds = 0;
  bool unary = false;
  bool json = false;
};

absl::StatusOr<v1::GenerateRequest> BuildRequest(const GenerateFlags& flags,
                                                 const CLI::App& cmd) {
  auto given = [&cmd](const char* flag) { return cmd.count(flag) > 0; };
  v1::GenerateRequest request;
  request.set_request_id(flags.request_id);
  if (given("--prompt-ids")) {
    absl::StatusOr<std::vector<int32_t>> ids =
        ParseIdList("--prompt-ids", flags.prompt_ids);
    if (!ids.ok()) return ids.status();
    request.mutable_token_ids()->mutable_ids()->Add(ids->begin(), ids->end());
  } else {
    request.set_text(flags.prompt);
  }

  v1::SamplingParams& s = *request.mutable_sampling();
  if (flags.greedy) s.set_temperature(0);
  if (given("--temperature")) s.set_temperature(flags.temperature);
  if (given("--top-k")) s.set_top_k(flags.top_k);
  if (given("--top-p")) s.set_top_p(flags.top_p);
  if (given("--min-p")) s.set_min_p(flags.min_p);
  if (given("--repetition-penalty")) {
    s.set_repetition_penalty(flags.repetition_penalty);
  }
  if (given("--presence-penalty"))
    s.set_presence_penalty(flags.presence_penalty);
  if (given("--frequency-penalty")) {
    s.set_frequency_penalty(flags.frequency_penalty);
  }
  if (given("--seed")) s.set_seed(flags.seed);

  v1::StopConditions& stop = *request.mutable_stop();
  if (given("--max-tokens")) stop.set_max_new_tokens(flags.max_tokens);
  stop.set_min_new_tokens(flags.min_tokens);
  for (const std::string& text : flags.stop) stop.add_stop_strings(text);
  for (int32_t id : flags.stop_token_ids) stop.add_stop_token_ids(id);
  stop.set_ignore_eos(flags.ignore_eos);

  if (flags.logprobs >= 0) {
    request.mutable_logprobs()->set_enabled(true);
    request.mutable_logprobs()->set_top_n(flags.logprobs);
  }
  return request;
}

// Adds a streamed piece to the whole generation: ids and logprobs append,
// text concatenates, and what only the last piece carries (finish reason,
// matched stop, usage) is taken from it.
void Accumulate(const v1::GenerateResponse& piece, v1::GenerateResponse* all) {
  std::string text = all->text() + piece.text();
  all->MergeFrom(piece);
  all->set_text(std::move(text));
}

// "length" for FINISH_REASON_LENGTH; "unspecified" when no last message came.
std::string FinishReasonName(v1::FinishReason reason) {
  return absl::AsciiStrToLower(
      absl::StripPrefix(v1::FinishReason_Name(reason), "FINISH_REASON_"));
}

nlohmann::ordered_json LogprobsJson(const v1::GenerateResponse& all) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const v1::TokenLogprob& lp : all.logprobs()) {
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (const v1::TopLogprob& t : lp.top()) {
      top.push_back({{"token_id", t.token_id()},
                     {"logprob", t.logprob()},
                     {"text", t.text()}});
    }
    out.push_back({{"token_id", lp.token_id()},
                   {"logprob", lp.logprob()},
                   {"top", std::move(top)}});
  }
  return out;
}

nlohmann::ordered_json ResultJson(const v1::GenerateResponse& all,
                                  bool with_logprobs) {
  nlohmann::ordered_json out = {
      {"request_id", all.request_id()},
      {"generated_ids",
       std::vector<int32_t>(all.token_ids().begin(), all.token_ids().end())},
      {"text", all.text()},
      {"finish_reason", FinishReasonName(all.finish_reason())}};
  if (all.has_stop_string()) out["stop_string"] = all.stop_string();
  if (all.has_stop_token_id()) out["stop_token_id"] = all.stop_token_id();
  const v1::Usage& u = all.usage();
  out["usage"] = {
      {"prompt_tokens", u.prompt_tokens()},
      {"generated_tokens", u.generated_tokens()},
      {"cached_prompt_tokens", u.cached_prompt_tokens()},
      {"queue_seconds", u.queue_seconds()},
      {"time_to_first_token_seconds", u.time_to_first_token_seconds()},
      {"total_seconds", u.total_seconds()}};
  if (with_logprobs) out["logprobs"] = LogprobsJson(all);
  return out;
}

std::string Summary(const v1::GenerateResponse& all) {
  std::string finish = FinishReasonName(all.finish_reason());
  if (all.has_stop_string()) {
    finish += " " + nlohmann::json(all.stop_string())
                        .dump(-1, ' ', false,
                              nlohmann::json::error_handler_t::replace);
  } else if (all.has_stop_token_id()) {
    finish += absl::StrFormat(" (token %d)", all.stop_token_id());
  }
  const v1::Usage& u = all.usage();
  return absl::StrFormat(
      "h3 generate: finish %s; %d prompt tokens (%d cached); %d tokens in "
      "%.3f s (%.1f tok/s); first token after %.3f s\n",
      finish, u.prompt_tokens(), u.cached_prompt_tokens(), u.generated_tokens(),
      u.total_seconds(),
      u.total_seconds() > 0 ? u.generated_tokens() / u.total_seconds() : 0.0,
      u.time_to_first_token_seconds());
}

int Generate(const GenerateFlags& flags, const v1::GenerateRequest& request) {
  grpc::ClientContext context;
  if (flags.timeout_seconds > 0) {
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::microseconds(static_cast<int64_t>(
                             flags.timeout_seconds * 1e6)));
  }
  CancelOnInterrupt interrupt(&context);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      OpenChannel(flags.server, flags.channel);
  if (!channel.ok()) {
    std::cerr << "h3 generate: " << channel.status().message() << "\n";
    return kUsageExit;
  }
  auto stub = v1::TextGeneration::NewStub(*channel);

  v1::GenerateResponse all;
  grpc::Status status;
  if (flags.unary) {
    status = stub->Complete(&context, request, &all);
    if (status.ok() && !flags.json) std::cout << all.text() << std::flush;
  } else {
    std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> stream =
        stub->Generate(&context, request);
    v1::GenerateResponse piece;
    while (stream->Read(&piece)) {
      if (!flags.json) std::cout << piece.text() << std::flush;
      Accumulate(piece, &all);
    }
    status = stream->Finish();
  }

  if (interrupt.interrupted()) {
    if (!flags.json) std::cout << std::endl;
    std::cerr << "h3 generate: interrupted, the call was cancelled\n";
    return kInterruptedExit;
  }
  if (!status.ok()) {
    if (!flags.json && !all.text().empty()) std::cout << std::endl;
    std::cerr << "h3 generate: " << GrpcCodeName(status.error_code()) << ": "
              << status.error_message() << "\n";
    return kGrpcErrorExit;
  }
  if (all.finish_reason() == v1::FINISH_REASON_UNSPECIFIED) {
    // As when a message did not parse: gRPC then ends the stream quietly.
    if (!flags.json) std::cout << std::endl;
    std::cerr << "h3 generate: the server's answer ended without a finish "
                 "reason\n";
    return kGrpcErrorExit;
  }
  if (flags.json) {
    // A top logprob's text may be part of a character: replace, not throw.
    std::cout << ResultJson(all, flags.logprobs >= 0)
                     .dump(-1, ' ', false,
                           nlohmann::json::error_handler_t::replace)
              << std::endl;
    return 0;
  }
  if (all.text().empty() && all.token_ids_size() > 0) {
    std::cout << nlohmann::json(all.token_ids()).dump();
  }
  std::cout << std::endl;
  std::cerr << Summary(all);
  return 0;
}

}  // namespace

void AddGenerateCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "generate", "Generate through a running h3serve (streaming)");
  cmd->add_option("--server", flags->server, "h3serve address HOST:PORT")
      ->capture_default_str();
  AddChannelFlags(cmd, &flags->channel);
  cmd->add_option("prompt,--prompt", flags->prompt,
                  "The prompt as text (tokenized by the server)");
  cmd->add_option("--prompt-ids", flags->prompt_ids,
                  "The prompt as comma-separated token ids");
  cmd->add_option("--max-tokens", flags->max_tokens,
                  "Tokens to generate at most (default: the server's limit)");
  cmd->add_option("--min-tokens", flags->min_tokens,
                  "Ignore stop conditions before this many tokens");
  CLI::Option* greedy = cmd->add_flag("--greedy", flags->greedy,
                                      "Always take the most likely token");
  for (CLI::Option* o : {
           cmd->add_option("--temperature", flags->temperature, "0 is greedy"),
           cmd->add_option("--top-k", flags->top_k, "0 keeps all tokens"),
           cmd->add_option("--top-p", flags->top_p, "Nucleus sampling mass"),
           cmd->add_option("--min-p", flags->min_p,
                           "Drop tokens below this share of the best"),
       }) {
    o->excludes(greedy);
  }
  cmd->add_option("--repetition-penalty", flags->repetition_penalty,
                  "Penalise tokens of the prompt and output (1 is off)");
  cmd->add_option("--presence-penalty", flags->presence_penalty,
                  "Subtracted once from each generated token's logit");
  cmd->add_option("--frequency-penalty", flags->frequency_penalty,
                  "Subtracted per occurrence from generated tokens' logits");
  cmd->add_option("--seed", flags->seed,
                  "Seed of the sampler (default: random)");
  cmd->add_option("--stop", flags->stop,
                  "Stop at this text, which is left out (repeatable)");
  cmd->add_option("--stop-token-id", flags->stop_token_ids,
                  "Stop after this token id (repeatable)");
  cmd->add_flag("--ignore-eos", flags->ignore_eos,
                "Do not stop at the end-of-sequence token");
  cmd->add_option("--logprobs", flags->logprobs,
                  "With --json: -1 none, 0 each token's own, 1..20 also that "
                  "many alternatives")
      ->check(CLI::Range(-1, 20))
      ->capture_default_str();
  cmd->add_option("--request-id", flags->request_id,
                  "Id of the request (default: assigned by the server)");
  cmd->add_option("--timeout", flags->timeout_seconds,
                  "Deadline of the call in seconds (default: none)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--unary", flags->unary,
                "Use the unary Complete call instead of streaming");
  cmd->add_flag("--json", flags->json, "Print one JSON object at the end");
  cmd->callback([cmd, flags, exit_code] {
    const size_t prompts = cmd->count("prompt") + cmd->count("--prompt-ids");
    if (prompts != 1) {
      std::cerr << "h3 generate: "
                << (prompts == 0 ? "give a PROMPT or --prompt-ids 1,2,3"
                                 : "give a PROMPT or --prompt-ids, not both")
                << "\nRun with --help for more information.\n";
      *exit_code = kUsageExit;
      return;
    }
    absl::StatusOr<v1::GenerateRequest> request = BuildRequest(*flags, *cmd);
    if (!request.ok()) {
      std::cerr << "h3 generate: " << request.status().message() << "\n";
      *exit_code = kUsageExit;
      return;
    }
    *exit_code = Generate(*flags, *request);
  });
}

}  // namespace h3::cli
