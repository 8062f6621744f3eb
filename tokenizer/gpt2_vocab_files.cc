#include "tokenizer/gpt2_vocab_files.h"

#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "tokenizer/utf8.h"

namespace h3::tokenizer {
namespace {

using Json = nlohmann::json;

constexpr absl::string_view kEndOfText = "<|endoftext|>";

// Parses without exceptions; a discarded value means malformed JSON.
absl::StatusOr<Json> ParseJson(absl::string_view text, absl::string_view what) {
  Json json = Json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                          /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::DataLossError(absl::StrCat(what, " is not valid JSON"));
  }
  return json;
}

absl::StatusOr<int32_t> TokenId(const Json& value, absl::string_view what) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
      value.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
    return absl::DataLossError(
        absl::StrCat(what, ": expected a non-negative 32-bit integer id"));
  }
  return static_cast<int32_t>(value.get<int64_t>());
}

absl::Status ParseVocabObject(const Json& vocab, absl::string_view what,
                              Gpt2Vocabulary* out) {
  if (!vocab.is_object()) {
    return absl::DataLossError(
        absl::StrCat(what, " must be a JSON object of token -> id"));
  }
  out->tokens.reserve(vocab.size());
  for (const auto& [spelling, id_value] : vocab.items()) {
    H3_ASSIGN_OR_RETURN(int32_t id,
                        TokenId(id_value, absl::StrCat(what, " entry ",
                                                       Json(spelling).dump())));
    out->tokens.emplace_back(spelling, id);
  }
  return absl::OkStatus();
}

// One "left right" merge; both halves must be non-empty.
absl::Status AddMerge(absl::string_view line, absl::string_view where,
                      Gpt2Vocabulary* out) {
  std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
    return absl::DataLossError(absl::StrCat(
        where, ": expected two tokens separated by one space, got \"", line,
        "\""));
  }
  out->merges.emplace_back(std::string(parts[0]), std::string(parts[1]));
  return absl::OkStatus();
}

void AddEndOfText(Gpt2Vocabulary* out) {
  for (const auto& [spelling, id] : out->tokens) {
    if (spelling == kEndOfText) {
      out->added_tokens.push_back({std::string(kEndOfText), id, true});
      out->eos_id = id;
    }
  }
}

// A setting of tokenizer.json that must be absent, null or `expected`.
absl::Status ExpectSetting(const Json& object, const char* key,
                           const Json& expected, absl::string_view where) {
  if (!object.is_object() || !object.contains(key) || object[key].is_null() ||
      object[key] == expected) {
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat(
      "tokenizer.json: ", where, ".", key, " = ", object[key].dump(),
      " is not supported (only ", expected.dump(), ")"));
}

}  // namespace

absl::StatusOr<Gpt2Vocabulary> ParseGpt2VocabAndMerges(
    absl::string_view vocab_json, absl::string_view merges_txt) {
  H3_RETURN_IF_ERROR(ValidateUtf8(vocab_json));
  H3_RETURN_IF_ERROR(ValidateUtf8(merges_txt));
  Gpt2Vocabulary out;
  H3_ASSIGN_OR_RETURN(Json vocab, ParseJson(vocab_json, "the vocabulary"));
  H3_RETURN_IF_ERROR(ParseVocabObject(vocab, "the vocabulary", &out));
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(merges_txt, '\n')) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // The first line is a "#version: 0.2" header; blank lines carry nothing.
    if (line.empty() ||
        (line_number == 1 && absl::StartsWith(line, "#version"))) {
      continue;
    }
    H3_RETURN_IF_ERROR(
        AddMerge(line, absl::StrCat("the merges, line ", line_number), &out));
  }
  AddEndOfText(&out);
  return out;
}

absl::StatusOr<Gpt2Vocabulary> ParseHfTokenizerJson(absl::string_view text) {
  H3_ASSIGN_OR_RETURN(Json json, ParseJson(text, "tokenizer.json"));
  if (!json.is_object() || !json.contains("model") ||
      !json["model"].is_object()) {
    return absl::DataLossError("tokenizer.json has no \"model\" object");
  }
  const Json& model = json["model"];
  H3_RETURN_IF_ERROR(ExpectSetting(model, "type", "BPE", "model"));
  H3_RETURN_IF_ERROR(
      ExpectSetting(model, "continuing_subword_prefix", "", "model"));
  H3_RETURN_IF_ERROR(ExpectSetting(model, "end_of_word_suffix", "", "model"));
  H3_RETURN_IF_ERROR(ExpectSetting(model, "byte_fallback", false, "model"));
  if (json.contains("normalizer") && !json["normalizer"].is_null()) {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer.json: normalizer ", json["normalizer"].dump(),
                     " is not supported (GPT-2 has none)"));
  }
  const Json& pre =
      json.contains("pre_tokenizer") ? json["pre_tokenizer"] : Json();
  if (!pre.is_object() || pre.value("type", "") != "ByteLevel") {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer.json: pre_tokenizer ", pre.dump(),
                     " is not supported (only GPT-2's ByteLevel)"));
  }
  H3_RETURN_IF_ERROR(
      ExpectSetting(pre, "add_prefix_space", false, "pre_tokenizer"));
  H3_RETURN_IF_ERROR(ExpectSetting(pre, "use_regex", true, "pre_tokenizer"));

  Gpt2Vocabulary out;
  if (!model.contains("vocab")) {
    return absl::DataLossError("tokenizer.json: model has no vocab");
  }
  H3_RETURN_IF_ERROR(
      ParseVocabObject(model["vocab"], "tokenizer.json: model.vocab", &out));
  const Json& merges =
      model.contains("merges") ? model["merges"] : Json::array();
  if (!merges.is_array()) {
    return absl::DataLossError("tokenizer.json: model.merges must be an array");
  }
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string where =
        absl::StrCat("tokenizer.json: model.merges[", i, "]");
    const Json& m = merges[i];
    if (m.is_string()) {  // "left right"
      H3_RETURN_IF_ERROR(AddMerge(m.get<std::string>(), where, &out));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() &&
               m[1].is_string()) {  // ["left", "right"], newer files
      out.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return absl::DataLossError(
          absl::StrCat(where, ": expected \"a b\" or [\"a\", \"b\"]"));
    }
  }
  const Json& added =
      json.contains("added_tokens") ? json["added_tokens"] : Json::array();
  if (!added.is_array()) {
    return absl::DataLossError("tokenizer.json: added_tokens must be an array");
  }
  for (size_t i = 0; i < added.size(); ++i) {
    const std::string where =
        absl::StrCat("tokenizer.json: added_tokens[", i, "]");
    const Json& t = added[i];
    if (!t.is_object() || !t.contains("content") || !t["content"].is_string() ||
        !t.contains("id") || t["content"].get<std::string>().empty()) {
      return absl::DataLossError(
          absl::StrCat(where, ": expected {\"id\", \"content\", ...}"));
    }
    H3_ASSIGN_OR_RETURN(int32_t id, TokenId(t["id"], where));
    const bool special = t.contains("special") && t["special"].is_boolean() &&
                         t["special"].get<bool>();
    std::string content = t["content"].get<std::string>();
    if (content == kEndOfText) out.eos_id = id;
    out.added_tokens.push_back({std::move(content), id, special});
  }
  return out;
}

}  // namespace h3::tokenizer
