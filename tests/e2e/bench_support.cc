#include "tests/e2e/bench_support.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "gtest/gtest.h"

namespace h3::testing {

RunResult RunBench(const std::string& h3, const std::string& address,
                   std::vector<std::string> args,
                   const std::string& json_path) {
  args.insert(args.begin(), {h3, "bench", "--server", address});
  args.insert(args.end(), {"--json", json_path});
  return RunCommand(args, std::chrono::seconds(120));
}

nlohmann::json ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json out = nlohmann::json::parse(text.str(), nullptr, false);
  EXPECT_FALSE(out.is_discarded()) << path << ": " << text.str();
  return out.is_discarded() ? nlohmann::json::object() : out;
}

std::unique_ptr<FakeTextGeneration> ScriptedServer(
    const std::vector<int32_t>& ids, bool hold_open) {
  auto fake = FakeTextGeneration::Start();
  if (fake == nullptr) return nullptr;
  FakeTextGeneration::Script script;
  for (int32_t id : ids) script.pieces.emplace_back().add_token_ids(id);
  script.pieces.back().set_finish_reason(v1::FINISH_REASON_LENGTH);
  script.hold_open = hold_open;
  fake->SetScript(script);
  v1::ModelInfo model;
  model.set_name("scripted");
  model.mutable_tokenizer()->set_vocab_size(100);
  model.mutable_tokenizer()->set_eos_token_id(0);
  model.mutable_tokenizer()->set_bos_token_id(-1);
  model.mutable_limits()->set_max_sequence_length(1000);
  model.mutable_limits()->set_max_new_tokens(1000);
  fake->SetModelInfo(model);
  return fake;
}

}  // namespace h3::testing
