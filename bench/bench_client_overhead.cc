// h3_bench_client_overhead: how much load `h3 bench` itself can generate,
// so that its numbers against h3serve can be read as the server's and not
// the client's. Runs the h3 binary's bench command against an in-process
// server that answers every Generate at once (tests/e2e/fake_server: no
// model, --output-len one-token messages per request, each sent as soon as
// the previous one is written) and prints JSON: per concurrency, the output
// tokens/s and requests/s the pair reached, the client's CPU time per
// output token, and this process's (the trivial server's) CPU time.
//
//   h3_bench_client_overhead [--h3 PATH] [--concurrency 1,8,32]
//       [--num-prompts 2000] [--input-len 128] [--output-len 128]
//       [--out FILE]
//
// Client and server share the machine's cores, so the rates are lower
// bounds on the client's own; its CPU per token is the number to hold
// against a server's tokens/s.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "h3/v1/text_generation.pb.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/fake_server.h"
#include "tests/support/subprocess.h"

namespace h3 {
namespace {

struct Flags {
  std::string h3 = H3_BIN;
  std::vector<int> concurrency = {1, 8, 32};
  int num_prompts = 2000;
  int input_len = 128;
  int output_len = 128;
  std::string out;
};

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// One token per message, the last with finish reason and usage, as h3serve
// streams them.
testing::FakeTextGeneration::Script InstantAnswer(const Flags& f) {
  testing::FakeTextGeneration::Script script;
  for (int i = 0; i < f.output_len; ++i) {
    v1::GenerateResponse piece;
    piece.add_token_ids(1 + i % 100);
    script.pieces.push_back(piece);
  }
  v1::GenerateResponse& last = script.pieces.back();
  last.set_finish_reason(v1::FINISH_REASON_LENGTH);
  last.mutable_usage()->set_prompt_tokens(f.input_len);
  last.mutable_usage()->set_generated_tokens(f.output_len);
  return script;
}

v1::ModelInfo TrivialModel() {
  v1::ModelInfo model;
  model.set_name("instant (tests/e2e/fake_server)");
  model.set_device("none");
  model.mutable_tokenizer()->set_vocab_size(50257);
  model.mutable_tokenizer()->set_eos_token_id(50256);
  model.mutable_tokenizer()->set_bos_token_id(-1);
  model.mutable_limits()->set_max_sequence_length(1 << 20);
  model.mutable_limits()->set_max_new_tokens(1 << 20);
  return model;
}

int Run(const Flags& f) {
  auto fake = testing::FakeTextGeneration::Start();
  if (fake == nullptr) {
    std::cerr << "h3_bench_client_overhead: cannot start the server\n";
    return 1;
  }
  fake->SetScript(InstantAnswer(f));
  fake->SetModelInfo(TrivialModel());
  const std::string json_path =
      "/tmp/h3_bench_client_overhead_" + std::to_string(getpid()) + ".json";
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  nlohmann::ordered_json client, machine;
  for (int concurrency : f.concurrency) {
    const double server_cpu_before = ProcessCpuSeconds();
    const testing::RunResult result = testing::RunCommand(
        {f.h3, "bench", "--server", fake->address(), "--num-prompts",
         std::to_string(f.num_prompts), "--input-len",
         std::to_string(f.input_len), "--output-len",
         std::to_string(f.output_len), "--max-concurrency",
         std::to_string(concurrency), "--json", json_path},
        std::chrono::seconds(600));
    const double server_cpu = ProcessCpuSeconds() - server_cpu_before;
    std::ifstream in(json_path);
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::json bench =
        nlohmann::json::parse(text.str(), nullptr, false);
    if (result.exit_code != 0 || bench.is_discarded()) {
      std::cerr << "h3_bench_client_overhead: h3 bench failed:\n" << result.out;
      return 1;
    }
    const nlohmann::json& r = bench["results"];
    const double tokens = r["total_output_tokens"].get<double>();
    const double client_cpu = r["client_cpu_s"].get<double>();
    runs.push_back(
        {{"max_concurrency", concurrency},
         {"succeeded", r["requests"]["succeeded"]},
         {"duration_s", r["duration_s"]},
         {"request_throughput", r["request_throughput"]},
         {"output_throughput", r["output_throughput"]},
         {"messages_per_s", tokens / r["duration_s"].get<double>()},
         {"client_cpu_s", client_cpu},
         {"client_cpu_us_per_output_token", client_cpu / tokens * 1e6},
         {"client_output_tokens_per_cpu_s", tokens / client_cpu},
         {"server_cpu_s", server_cpu},
         {"itl_ms", r["itl_ms"]},
         {"ttft_ms", r["ttft_ms"]}});
    client = bench["client"];
    machine = bench["machine"];
  }
  std::remove(json_path.c_str());
  const nlohmann::ordered_json report = {
      {"benchmark", "h3 bench client overhead against an instant server"},
      {"num_prompts", f.num_prompts},
      {"input_len", f.input_len},
      {"output_len", f.output_len},
      {"client", client},
      {"machine", machine},
      {"runs", runs}};
  std::cout << report.dump(1) << std::endl;
  if (!f.out.empty()) std::ofstream(f.out) << report.dump(1) << "\n";
  return 0;
}

}  // namespace
}  // namespace h3

int main(int argc, char** argv) {
  h3::Flags f;
  CLI::App app{"Measures how much load h3 bench itself can generate"};
  app.add_option("--h3", f.h3, "The h3 binary")->capture_default_str();
  app.add_option("--concurrency", f.concurrency, "--max-concurrency values")
      ->delimiter(',');
  app.add_option("--num-prompts", f.num_prompts)->capture_default_str();
  app.add_option("--input-len", f.input_len)->capture_default_str();
  app.add_option("--output-len", f.output_len)->capture_default_str();
  app.add_option("--out", f.out, "Also write the JSON here");
  CLI11_PARSE(app, argc, argv);
  return h3::Run(f);
}
