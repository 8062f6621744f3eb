#include "loader/convert.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/checkpoint.h"
#include "loader/mapped_file.h"
#include "loader/model_file.h"
#include "loader/safetensors.h"
#include "loader/tokenizer_files.h"
#include "loader/torch_zip.h"
#include "nlohmann/json.hpp"

namespace h3::loader {
namespace {

// inv_freq = 1 / 10000^(arange(0, rd, 2) / rd), in float32 as the reference.
std::vector<uint8_t> RotaryInvFreq(int64_t rotary_dim) {
  std::vector<uint8_t> out(static_cast<size_t>(rotary_dim / 2) * 4);
  for (int64_t i = 0; i < rotary_dim / 2; ++i) {
    const float x = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
    const float f = 1.0f / std::pow(10000.0f, x);
    std::memcpy(out.data() + 4 * i, &f, 4);
  }
  return out;
}

std::string LayoutName(const Checkpoint& c) {
  std::string s = c.lightning() ? "lightning" : "state_dict";
  if (c.old_names()) s += "+old-names";
  return s;
}

}  // namespace

absl::StatusOr<ConvertResult> ConvertCheckpoint(
    const ConvertOptions& options, const ConvertProgress& progress) {
  std::error_code ec;
  if (std::filesystem::equivalent(options.input, options.output, ec)) {
    return absl::InvalidArgumentError("the output would overwrite the input");
  }
  H3_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt,
                      Checkpoint::Open(options.input));
  const ShapeMap shapes = ckpt->shapes();
  auto in_file = [&](const absl::Status& s) {
    return Annotate(s, options.input);
  };
  absl::StatusOr<ModelConfig> inferred = InferConfig(shapes, options.hints);
  if (!inferred.ok()) return in_file(inferred.status());
  ConvertResult result;
  result.config = *inferred;
  result.config.dtype = options.dtype;
  result.input_format = ckpt->format() == Checkpoint::Format::kTorchZip
                            ? "pytorch"
                            : "safetensors";
  result.layout = LayoutName(*ckpt);
  const ModelConfig& config = result.config;
  absl::Status shapes_ok = CheckShapes(config, shapes);
  if (!shapes_ok.ok()) return in_file(shapes_ok);

  const std::vector<ExpectedTensor> expected = ExpectedTensors(config);
  uint64_t total = 0;
  for (const ExpectedTensor& t : expected) {
    auto it = ckpt->tensors().find(t.name);
    if (it == ckpt->tensors().end()) continue;  // computed
    if (!IsFloatingPoint(it->second.dtype)) {
      return in_file(absl::InvalidArgumentError(
          absl::StrCat("tensor ", t.name, " has dtype ",
                       DTypeName(it->second.dtype), ", expected floats")));
    }
    H3_ASSIGN_OR_RETURN(uint64_t n, NumElements(t.shape));
    total += n * ElementSize(it->second.dtype);
  }

  std::vector<uint8_t> buffer, converted;
  const std::string lm_head = "lm_head.weight";
  if (ckpt->tensors().contains(lm_head) &&
      !ckpt->SameData(lm_head, std::string(kEmbeddingTensor))) {
    std::vector<uint8_t> head;
    H3_RETURN_IF_ERROR(ckpt->Read(lm_head, &head));
    H3_RETURN_IF_ERROR(ckpt->Read(std::string(kEmbeddingTensor), &buffer));
    if (head != buffer ||
        ckpt->tensors().at(lm_head).dtype !=
            ckpt->tensors().at(std::string(kEmbeddingTensor)).dtype) {
      return in_file(absl::UnimplementedError(
          "lm_head.weight differs from the embedding; only tied heads are "
          "supported"));
    }
  }

  std::vector<SafetensorsWriter::Tensor> layout;
  for (const ExpectedTensor& t : expected) {
    layout.push_back(
        {t.name, t.keep_fp32 ? ElementType::kF32 : options.dtype, t.shape});
  }
  std::string tokenizer_json;
  std::vector<std::string> tokenizer_data;
  if (!options.tokenizer.empty()) {
    H3_ASSIGN_OR_RETURN(TokenizerFiles tok,
                        ResolveTokenizer(options.tokenizer));
    tokenizer_json =
        nlohmann::json{{"kind", tok.kind}, {"files", tok.names}}.dump();
    for (size_t i = 0; i < tok.names.size(); ++i) {
      H3_ASSIGN_OR_RETURN(std::string data, ReadFileToString(tok.paths[i]));
      layout.push_back({absl::StrCat(kTokenizerTensorPrefix, tok.names[i]),
                        ElementType::kU8,
                        {static_cast<int64_t>(data.size())}});
      tokenizer_data.push_back(std::move(data));
    }
  }
  const std::string source =
      std::filesystem::path(options.input).filename().string();
  H3_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsWriter> writer,
                      SafetensorsWriter::Create(
                          options.output, layout,
                          ModelFileMetadata(config, source, tokenizer_json)));

  uint64_t done = 0;
  for (const ExpectedTensor& t : expected) {
    const ElementType out_dtype =
        t.keep_fp32 ? ElementType::kF32 : options.dtype;
    auto it = ckpt->tensors().find(t.name);
    ElementType in_dtype = ElementType::kF32;
    absl::Span<const uint8_t> bytes;
    if (it == ckpt->tensors().end()) {
      buffer = RotaryInvFreq(config.rotary_dim);  // computable, not stored
      bytes = buffer;
    } else {
      H3_ASSIGN_OR_RETURN(bytes, ckpt->View(t.name, &buffer));
      in_dtype = it->second.dtype;
      done += bytes.size();
    }
    if (in_dtype == out_dtype) {
      H3_RETURN_IF_ERROR(writer->Append(bytes));
    } else {
      converted.resize(bytes.size() / ElementSize(in_dtype) *
                       ElementSize(out_dtype));
      H3_RETURN_IF_ERROR(
          ConvertFloats(in_dtype, bytes, out_dtype, absl::MakeSpan(converted)));
      H3_RETURN_IF_ERROR(writer->Append(converted));
    }
    if (progress) progress(done, total);
  }
  for (const std::string& data : tokenizer_data) {
    H3_RETURN_IF_ERROR(writer->Append(absl::MakeConstSpan(
        reinterpret_cast<const uint8_t*>(data.data()), data.size())));
  }
  H3_RETURN_IF_ERROR(writer->Finish());
  result.bytes_read = done;
  result.bytes_written = writer->file_size();
  return result;
}

}  // namespace h3::loader
