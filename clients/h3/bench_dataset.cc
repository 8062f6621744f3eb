#include "clients/h3/bench_dataset.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace h3::cli {

absl::StatusOr<TokenPool> TokenPool::Create(int32_t vocab_size,
                                            std::vector<int32_t> special) {
  std::erase_if(
      special, [vocab_size](int32_t id) { return id < 0 || id >= vocab_size; });
  std::sort(special.begin(), special.end());
  special.erase(std::unique(special.begin(), special.end()), special.end());
  if (vocab_size - static_cast<int32_t>(special.size()) < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a vocabulary of ", vocab_size,
                     " ids has no ordinary token to build prompts from"));
  }
  return TokenPool(vocab_size, std::move(special));
}

int32_t TokenPool::Sample(std::mt19937_64& rng) const {
  // The k-th ordinary id: k, moved past every special id at or below it.
  int32_t id = std::uniform_int_distribution<int32_t>(0, size() - 1)(rng);
  for (int32_t special : special_) {
    if (special <= id) ++id;
  }
  return id;
}

int32_t SampleLength(int32_t length, double ratio, std::mt19937_64& rng) {
  if (ratio <= 0) return length;
  const auto low = std::max<int32_t>(
      1, static_cast<int32_t>(std::floor(length * (1 - ratio))));
  const auto high = std::max<int32_t>(
      low, static_cast<int32_t>(std::ceil(length * (1 + ratio))));
  return std::uniform_int_distribution<int32_t>(low, high)(rng);
}

std::vector<BenchPrompt> RandomPrompts(const RandomPromptOptions& options,
                                       const TokenPool& pool,
                                       std::mt19937_64& rng) {
  auto draw = [&pool, &rng](int32_t n, std::vector<int32_t>* out) {
    for (int32_t i = 0; i < n; ++i) out->push_back(pool.Sample(rng));
  };
  std::vector<std::vector<int32_t>> prefixes(
      options.prefix_len > 0 ? options.num_prefixes : 0);
  for (std::vector<int32_t>& prefix : prefixes) {
    draw(options.prefix_len, &prefix);
  }
  std::vector<BenchPrompt> prompts(options.num_prompts);
  for (int i = 0; i < options.num_prompts; ++i) {
    BenchPrompt& p = prompts[i];
    if (!prefixes.empty()) p.ids = prefixes[i % prefixes.size()];
    draw(SampleLength(options.input_len, options.range_ratio, rng), &p.ids);
    p.output_len = SampleLength(options.output_len, options.range_ratio, rng);
  }
  return prompts;
}

absl::StatusOr<std::vector<BenchPrompt>> ReadJsonlPrompts(
    const std::string& path, int num_prompts, int32_t default_output_len) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::vector<BenchPrompt> file;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": ", why));
    };
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    if (record.is_discarded() || !record.is_object()) {
      return bad("not a JSON object");
    }
    auto prompt = record.find("prompt");
    if (prompt == record.end() || !prompt->is_string()) {
      return bad("no \"prompt\" string");
    }
    BenchPrompt p;
    p.text = prompt->get<std::string>();
    p.output_len = default_output_len;
    if (auto len = record.find("output_len"); len != record.end()) {
      if (!len->is_number_integer() || len->get<int64_t>() < 1 ||
          len->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return bad("\"output_len\" is not a positive integer");
      }
      p.output_len = len->get<int32_t>();
    }
    file.push_back(std::move(p));
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  if (file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no prompts"));
  }
  std::vector<BenchPrompt> prompts;
  prompts.reserve(num_prompts);
  for (int i = 0; i < num_prompts; ++i) {
    prompts.push_back(file[i % file.size()]);
  }
  return prompts;
}

}  // namespace h3::cli
