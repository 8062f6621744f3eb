#include "loader/model_file.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/torch_zip.h"
#include "nlohmann/json.hpp"

namespace h3::loader {

std::map<std::string, std::string> ModelFileMetadata(
    const ModelConfig& config, const std::string& source,
    const std::string& tokenizer_json) {
  std::map<std::string, std::string> m = {
      {"h3.format_version", std::string(kModelFileVersion)},
      {"h3.config", ConfigToJson(config)},
      {"h3.source", source},
  };
  if (!tokenizer_json.empty()) m["h3.tokenizer"] = tokenizer_json;
  return m;
}

absl::StatusOr<std::unique_ptr<ModelFile>> ModelFile::Open(
    const std::string& path) {
  std::unique_ptr<ModelFile> m(new ModelFile());
  H3_ASSIGN_OR_RETURN(m->file_, SafetensorsFile::Open(path));
  H3_RETURN_IF_ERROR(Annotate(m->Load(), path));
  return m;
}

absl::StatusOr<std::unique_ptr<ModelFile>> ModelFile::Open(
    const std::string& name, absl::Span<const uint8_t> bytes) {
  std::unique_ptr<ModelFile> m(new ModelFile());
  H3_ASSIGN_OR_RETURN(m->file_,
                      SafetensorsFile::Open(MappedFile::Wrap(name, bytes)));
  H3_RETURN_IF_ERROR(Annotate(m->Load(), name));
  return m;
}

uint64_t ModelFile::file_size() const {
  const auto& tensors = file_->header().tensors;
  uint64_t end = 0;
  for (const SafetensorsEntry& e : tensors) end = std::max(end, e.end);
  return file_->header().data_start + end;
}

absl::Status ModelFile::Load() {
  const auto& meta = file_->header().metadata;
  auto get = [&](const std::string& key) -> const std::string* {
    auto it = meta.find(key);
    return it == meta.end() ? nullptr : &it->second;
  };
  const std::string* version = get("h3.format_version");
  if (version == nullptr) {
    return absl::DataLossError(
        "not an h3 model file (no h3.format_version); convert checkpoints "
        "with `h3 convert`");
  }
  version_ = *version;
  if (version_ != kModelFileVersion) {
    return absl::UnimplementedError(absl::StrCat(
        "model file version ", version_, " is not supported (this build reads ",
        kModelFileVersion, ")"));
  }
  const std::string* config = get("h3.config");
  if (config == nullptr) return absl::DataLossError("no h3.config");
  H3_ASSIGN_OR_RETURN(config_, ConfigFromJson(*config));
  if (const std::string* source = get("h3.source")) source_ = *source;

  ShapeMap shapes;
  for (const SafetensorsEntry& e : file_->header().tensors) {
    if (absl::StartsWith(e.name, SafetensorsWriter::kPaddingPrefix) ||
        absl::StartsWith(e.name, kTokenizerTensorPrefix)) {
      continue;
    }
    shapes[e.name] = e.shape;
  }
  absl::Status shapes_ok = CheckShapes(config_, shapes);
  if (!shapes_ok.ok()) return absl::DataLossError(shapes_ok.message());
  for (const ExpectedTensor& t : ExpectedTensors(config_)) {
    const SafetensorsEntry* e = file_->Find(t.name);
    if (e == nullptr) {
      return absl::DataLossError(absl::StrCat("missing tensor ", t.name));
    }
    const ElementType want = t.keep_fp32 ? ElementType::kF32 : config_.dtype;
    if (e->dtype != want) {
      return absl::DataLossError(absl::StrCat("tensor ", t.name, " is ",
                                              DTypeName(e->dtype),
                                              ", expected ", DTypeName(want)));
    }
    H3_ASSIGN_OR_RETURN(uint64_t n, NumElements(t.shape));
    parameter_count_ += n;
  }

  const std::string* tokenizer = get("h3.tokenizer");
  if (tokenizer == nullptr) return absl::OkStatus();
  nlohmann::json j = nlohmann::json::parse(*tokenizer, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("kind") ||
      !j["kind"].is_string() || !j.contains("files") ||
      !j["files"].is_array()) {
    return absl::DataLossError("h3.tokenizer is not {kind, files}");
  }
  tokenizer_kind_ = j["kind"].get<std::string>();
  if (tokenizer_kind_ != "gpt2-bpe" && tokenizer_kind_ != "sentencepiece") {
    return absl::DataLossError(
        absl::StrCat("unknown tokenizer kind '", tokenizer_kind_, "'"));
  }
  for (const auto& f : j["files"]) {
    if (!f.is_string()) return absl::DataLossError("tokenizer file not a name");
    const std::string name = f.get<std::string>();
    const SafetensorsEntry* e =
        file_->Find(absl::StrCat(kTokenizerTensorPrefix, name));
    if (e == nullptr || e->dtype != ElementType::kU8 || e->shape.size() != 1) {
      return absl::DataLossError(absl::StrCat("tokenizer file ", name,
                                              " has no 1-D U8 tensor ",
                                              kTokenizerTensorPrefix, name));
    }
    absl::Span<const uint8_t> bytes = file_->Bytes(*e);
    tokenizer_files_.emplace_back(
        name, absl::string_view(reinterpret_cast<const char*>(bytes.data()),
                                bytes.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<WeightView> ModelFile::Weight(const std::string& name) const {
  const SafetensorsEntry* e = file_->Find(name);
  if (e == nullptr || absl::StartsWith(name, kTokenizerTensorPrefix) ||
      absl::StartsWith(name, SafetensorsWriter::kPaddingPrefix)) {
    return absl::NotFoundError(absl::StrCat("model file has no weight ", name));
  }
  return WeightView{e->dtype, e->shape, file_->Bytes(*e)};
}

}  // namespace h3::loader
