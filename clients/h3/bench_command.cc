#include "clients/h3/bench_command.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/build_info.h"
#include "clients/h3/bench_backend.h"
#include "clients/h3/bench_dataset.h"
#include "clients/h3/bench_openai.h"
#include "clients/h3/bench_report.h"
#include "clients/h3/bench_runner.h"
#include "clients/h3/bench_turns.h"
#include "clients/h3/channel.h"
#include "clients/h3/grpc_status.h"
#include "clients/h3/interrupt.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/create_channel.h"
#include "h3/v1/text_generation.grpc.pb.h"
#include "nlohmann/json.hpp"

namespace h3::cli {
namespace {

constexpr int kFailedExit = 1;
constexpr int kUsageExit = 2;
constexpr int kInterruptedExit = 130;  // 128 + SIGINT, as shells report it
constexpr int kProgressWidth = 30;
constexpr auto kInfoTimeout = std::chrono::seconds(10);

struct BenchFlags {
  std::string server = "localhost:50051";
  ChannelFlags channel;
  std::string backend = "grpc";
  std::string base_url = "http://localhost:8080";
  int num_prompts = 100;
  std::string request_rate = "inf";
  double burstiness = 1;
  int max_concurrency = 0;
  int num_warmups = 1;
  double time_limit_s = 0;
  std::string dataset = "random";
  int32_t input_len = 128;
  int32_t output_len = 128;
  double random_range_ratio = 0;
  int32_t prefix_len = 0;
  int num_prefixes = 1;
  int multi_turn = 1;
  float temperature = 0;
  uint64_t seed = 0;
  std::string json_path;
  bool progress = false;
};

nlohmann::ordered_json OptionsJson(const BenchFlags& f, double rate) {
  return {
      {"server", f.server},
      {"backend", f.backend},
      {"base_url", f.backend == "openai" ? nlohmann::ordered_json(f.base_url)
                                         : nlohmann::ordered_json(nullptr)},
      {"num_prompts", f.num_prompts},
      // JSON has no infinity: an unlimited rate is written as null.
      {"request_rate", std::isinf(rate) ? nlohmann::ordered_json(nullptr)
                                        : nlohmann::ordered_json(rate)},
      {"burstiness", f.burstiness},
      {"max_concurrency", f.max_concurrency},
      {"num_warmups", f.num_warmups},
      {"time_limit_s", f.time_limit_s},
      {"dataset", f.dataset},
      {"input_len", f.input_len},
      {"output_len", f.output_len},
      {"random_range_ratio", f.random_range_ratio},
      {"prefix_len", f.prefix_len},
      {"num_prefixes", f.num_prefixes},
      {"multi_turn", f.multi_turn},
      {"temperature", f.temperature},
      {"seed", f.seed}};
}

// A protobuf message as JSON, every field present, with the .proto names.
nlohmann::ordered_json ProtoJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions print;
  print.always_print_primitive_fields = true;
  print.preserve_proto_field_names = true;
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(message, &text, print)
           .ok()) {
    return nullptr;
  }
  return nlohmann::ordered_json::parse(text, nullptr, false);
}

nlohmann::ordered_json MachineJson() {
  std::string cpu = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != line.npos) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  utsname name{};
  std::string platform = "unknown";
  if (uname(&name) == 0) {
    platform = absl::StrCat(name.sysname, "-", name.release, "-", name.machine);
  }
  return {{"cpu", cpu},
          {"cores", std::thread::hardware_concurrency()},
          {"platform", platform}};
}

std::string LocalTimeNow() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &local);
  return text;
}

// "inf" or a positive number of requests per second.
std::optional<double> ParseRate(const std::string& text) {
  double rate = 0;
  if (!absl::SimpleAtod(text, &rate) || !(rate > 0)) return std::nullopt;
  return rate;
}

// Says on stderr when the requests cannot fit the server's limits; they are
// sent anyway, and the failures counted.
void WarnAboutLimits(const BenchFlags& f, const v1::ModelInfo& model) {
  if (f.dataset != "random") return;
  const auto most = [&f](int32_t length) {
    return static_cast<int64_t>(std::ceil(length * (1 + f.random_range_ratio)));
  };
  // The last turn's prompt is the longest: every turn's new ids and every
  // earlier turn's answer.
  const int64_t output = most(f.output_len);
  const int64_t input = f.prefix_len + f.multi_turn * most(f.input_len) +
                        (f.multi_turn - 1) * output;
  const v1::ServingLimits& limits = model.limits();
  if (output > limits.max_new_tokens()) {
    std::cerr << "h3 bench: warning: up to " << output
              << " output tokens, the server allows " << limits.max_new_tokens()
              << "; longer requests will fail\n";
  }
  if (input + output > limits.max_sequence_length()) {
    std::cerr << "h3 bench: warning: up to " << input + output
              << " tokens per sequence, the server allows "
              << limits.max_sequence_length()
              << "; longer requests will fail\n";
  }
}

// The server's vocabulary without the ids it treats as special.
absl::StatusOr<TokenPool> ServerTokenPool(const v1::ModelInfo& model) {
  const v1::TokenizerInfo& t = model.tokenizer();
  return TokenPool::Create(t.vocab_size(),
                           {t.eos_token_id(), t.bos_token_id()});
}

absl::StatusOr<std::vector<BenchPrompt>> MakePrompts(
    const BenchFlags& f, const v1::ModelInfo& model) {
  if (f.dataset != "random") {
    return ReadJsonlPrompts(f.dataset, f.num_prompts, f.output_len);
  }
  absl::StatusOr<TokenPool> pool = ServerTokenPool(model);
  if (!pool.ok()) return pool.status();
  RandomPromptOptions options;
  options.num_prompts = f.num_prompts;
  options.input_len = f.input_len;
  options.output_len = f.output_len;
  options.range_ratio = f.random_range_ratio;
  options.prefix_len = f.prefix_len;
  options.num_prefixes = f.num_prefixes;
  std::mt19937_64 rng(f.seed);
  return RandomPrompts(options, *pool, rng);
}

// Warm-up prompts: random ids of the run's lengths without shared
// prefixes, so that they do not fill the server's prefix cache for the run.
std::vector<BenchPrompt> WarmupPrompts(const BenchFlags& f,
                                       const v1::ModelInfo& model) {
  absl::StatusOr<TokenPool> pool = ServerTokenPool(model);
  if (!pool.ok() || f.num_warmups == 0) return {};
  RandomPromptOptions options;
  options.num_prompts = f.num_warmups;
  options.input_len = f.input_len + f.prefix_len;
  options.output_len = f.output_len;
  std::mt19937_64 rng(f.seed + 1);
  return RandomPrompts(options, *pool, rng);
}

TurnOptions TurnOptionsOf(const BenchFlags& f, double rate) {
  TurnOptions turns;
  turns.turns = f.multi_turn;
  turns.input_len = f.input_len;
  turns.output_len = f.output_len;
  turns.range_ratio = f.random_range_ratio;
  turns.rate = rate;
  turns.burstiness = f.burstiness;
  turns.seed = f.seed;
  return turns;
}

int Bench(const BenchFlags& f, double rate) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      OpenChannel(f.server, f.channel);
  if (!channel.ok()) {
    std::cerr << "h3 bench: " << channel.status().message() << "\n";
    return kFailedExit;
  }
  auto stub = v1::TextGeneration::NewStub(*channel);
  v1::ModelInfo model;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kInfoTimeout);
    const grpc::Status status =
        stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &model);
    if (!status.ok()) {
      std::cerr << "h3 bench: " << f.server
                << ": GetModelInfo: " << GrpcCodeName(status.error_code())
                << ": " << status.error_message() << "\n";
      return kFailedExit;
    }
  }
  v1::ServerInfo server;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kInfoTimeout);
    // Only for the report: a server that does not answer is still measured.
    (void)stub->GetServerInfo(&context, v1::GetServerInfoRequest(), &server);
  }
  absl::StatusOr<std::vector<BenchPrompt>> prompts = MakePrompts(f, model);
  if (!prompts.ok()) {
    std::cerr << "h3 bench: " << prompts.status().message() << "\n";
    return kFailedExit;
  }
  WarnAboutLimits(f, model);

  std::unique_ptr<BenchBackend> backend;
  if (f.backend == "openai") {
    absl::StatusOr<HttpEndpoint> endpoint = ParseBaseUrl(f.base_url);
    if (!endpoint.ok()) {
      std::cerr << "h3 bench: " << endpoint.status().message() << "\n";
      return kFailedExit;
    }
    endpoint->api_key = f.channel.api_key;
    backend = std::make_unique<OpenAiBenchBackend>(*endpoint, model.name());
  } else {
    backend = std::make_unique<GrpcBenchBackend>(stub.get());
  }
  LoadOptions load;
  load.max_concurrency = f.max_concurrency;
  load.temperature = f.temperature;
  BenchRunner warmup(backend.get(), load);
  load.time_limit_s = f.time_limit_s;
  BenchRunner runner(backend.get(), load);
  CancelOnInterrupt interrupt([&warmup, &runner] {
    warmup.Stop("interrupted");
    runner.Stop("interrupted");
  });
  // From here on Ctrl-C stops the run and the report is printed.
  std::cerr << absl::StrFormat(
      "h3 bench: %s to %s (model %s on %s), %s, max concurrency %s\n",
      f.multi_turn > 1
          ? absl::StrFormat("%d conversations of %d turns, in waves",
                            f.num_prompts, f.multi_turn)
          : absl::StrFormat("%d requests", f.num_prompts),
      f.backend == "openai" ? f.base_url + " (OpenAI API)" : f.server,
      model.name(), model.device(),
      std::isinf(rate) ? "all at once" : absl::StrFormat("%g per second", rate),
      f.max_concurrency > 0 ? std::to_string(f.max_concurrency) : "none");

  const std::vector<BenchPrompt> warmup_prompts = WarmupPrompts(f, model);
  const BenchMetrics warm = ComputeMetrics(warmup.Run(
      warmup_prompts, std::vector<double>(warmup_prompts.size(), 0.0)));
  if (warm.failed > 0) {
    std::cerr << "h3 bench: warning: " << warm.failed << " of " << warm.requests
              << " warm-up requests failed ("
              << warm.failures_by_code.begin()->first << ")\n";
  }

  BenchRunner::ProgressFn progress;
  if (f.progress || isatty(STDERR_FILENO)) {
    progress = [](const Progress& p) {
      std::cerr << "\r"
                << ProgressLine(p.done, p.failed, p.in_flight, p.total,
                                p.elapsed_s, kProgressWidth)
                << std::flush;
    };
  }
  std::vector<TurnRecord> turns;
  RunRecord run;
  if (f.multi_turn > 1) {
    // MakePrompts made the first turn from this pool; the later turns' new
    // ids have a seed of their own (the warm-up prompts use seed + 1).
    const TokenPool pool = *ServerTokenPool(model);
    std::mt19937_64 rng(f.seed + 2);
    turns =
        RunTurns(runner, *prompts, TurnOptionsOf(f, rate), pool, rng, progress);
    run = MergeTurns(turns);
  } else {
    run = runner.Run(*prompts,
                     ArrivalTimes(f.num_prompts, rate, f.burstiness, f.seed),
                     progress);
  }
  if (progress != nullptr) std::cerr << "\n";
  const BenchMetrics metrics = ComputeMetrics(run);
  std::cout << FormatTable(metrics) << std::flush;
  const std::vector<TurnMetrics> turn_metrics = ComputeTurnMetrics(turns);
  if (f.multi_turn > 1) std::cout << FormatTurnsTable(turn_metrics);

  if (!f.json_path.empty()) {
    const BuildInfo& build = GetBuildInfo();
    nlohmann::ordered_json out = {
        {"benchmark", "h3 bench"},
        {"date", LocalTimeNow()},
        {"options", OptionsJson(f, rate)},
        {"server",
         {{"model_info", ProtoJson(model)},
          {"server_info", ProtoJson(server)}}},
        {"client",
         {{"version", build.version},
          {"git_commit", build.git_commit},
          {"build_type", build.build_type}}},
        {"machine", MachineJson()},
        {"warmup", {{"requests", warm.requests}, {"failed", warm.failed}}},
        {"results", MetricsJson(metrics)},
        {"per_request", RequestsJson(run)}};
    if (f.multi_turn > 1) {
      out["turns"] = TurnsJson(turn_metrics);
      out["per_request"] = TurnRequestsJson(turns);
    }
    std::ofstream file(f.json_path);
    file << out.dump(1, ' ', false, nlohmann::json::error_handler_t::replace)
         << "\n";
    file.close();
    if (!file) {
      std::cerr << "h3 bench: cannot write " << f.json_path << "\n";
      return kFailedExit;
    }
  }
  return interrupt.interrupted() ? kInterruptedExit : 0;
}

}  // namespace

void AddBenchCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure a running h3serve's throughput and latency under load");
  cmd->add_option("--server", f->server,
                  "h3serve's gRPC address HOST:PORT (asked for the model "
                  "and its vocabulary with either backend)")
      ->capture_default_str();
  AddChannelFlags(cmd, &f->channel);
  cmd->add_option("--backend", f->backend,
                  "grpc: Generate calls; openai: POST /v1/completions "
                  "streams at --base-url")
      ->check(CLI::IsMember({"grpc", "openai"}))
      ->capture_default_str();
  cmd->add_option("--base-url", f->base_url,
                  "The OpenAI-compatible API (--backend openai): "
                  "http://HOST:PORT")
      ->capture_default_str();
  cmd->add_option("--num-prompts", f->num_prompts,
                  "Requests to send (conversations with --multi-turn)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--request-rate", f->request_rate,
                  "Requests per second, or inf to send all at once")
      ->capture_default_str();
  cmd->add_option("--burstiness", f->burstiness,
                  "Shape of the gamma-distributed gaps between arrivals: 1 is "
                  "Poisson, lower is burstier")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-concurrency", f->max_concurrency,
                  "Requests in flight at most (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--num-warmups", f->num_warmups,
                  "Unmeasured requests sent first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--time-limit", f->time_limit_s,
                  "Stop after this many seconds (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--dataset", f->dataset,
                  "random, or a file of JSON lines {\"prompt\": TEXT, "
                  "\"output_len\": N}")
      ->capture_default_str();
  cmd->add_option("--input-len", f->input_len, "Prompt tokens (random)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--output-len", f->output_len,
                  "Tokens to generate per request, exactly")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--random-range-ratio", f->random_range_ratio,
                  "Lengths vary uniformly within this fraction (random)")
      ->check(CLI::Range(0.0, 0.999))
      ->capture_default_str();
  cmd->add_option("--prefix-len", f->prefix_len,
                  "Tokens of shared prefix before each random prompt")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--num-prefixes", f->num_prefixes,
                  "Distinct shared prefixes, used in turn")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--multi-turn", f->multi_turn,
                  "Turns per conversation (random, gRPC): each of "
                  "--num-prompts conversations sends turn k + 1 = turn k's "
                  "prompt + its answer + --input-len new ids; turns run in "
                  "waves (every conversation's turn k, then turn k + 1)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--temperature", f->temperature, "Sampling temperature")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--seed", f->seed, "Seed of prompts and arrivals")
      ->capture_default_str();
  cmd->add_option("--json", f->json_path,
                  "Also write every number, the options and the server's "
                  "model to this file");
  cmd->add_flag("--progress", f->progress,
                "Show the progress bar even when stderr is not a terminal");
  cmd->callback([cmd, f, exit_code] {
    const std::optional<double> rate = ParseRate(f->request_rate);
    if (!rate.has_value()) {
      std::cerr << "h3 bench: --request-rate: give a positive number or inf, "
                   "not \""
                << f->request_rate
                << "\"\nRun with --help for more "
                   "information.\n";
      *exit_code = kUsageExit;
      return;
    }
    if (f->dataset != "random" &&
        (cmd->count("--input-len") > 0 || cmd->count("--prefix-len") > 0 ||
         cmd->count("--random-range-ratio") > 0)) {
      std::cerr << "h3 bench: --input-len, --prefix-len and "
                   "--random-range-ratio apply to --dataset random only\n";
      *exit_code = kUsageExit;
      return;
    }
    if (f->multi_turn > 1 && f->dataset != "random") {
      std::cerr << "h3 bench: --multi-turn applies to --dataset random only\n";
      *exit_code = kUsageExit;
      return;
    }
    if (f->multi_turn > 1 && f->backend != "grpc") {
      std::cerr << "h3 bench: --multi-turn needs --backend grpc: the next "
                   "turn's prompt holds the answer's token ids, which only "
                   "Generate streams\n";
      *exit_code = kUsageExit;
      return;
    }
    *exit_code = Bench(*f, *rate);
  });
}

}  // namespace h3::cli
