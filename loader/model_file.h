#ifndef H3_LOADER_MODEL_FILE_H_
#define H3_LOADER_MODEL_FILE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "loader/config.h"
#include "loader/safetensors.h"

namespace h3::loader {

// MODEL.h3, the one file the engine serves: a safetensors file (readable by
// ordinary safetensors tools) whose __metadata__ holds
//   h3.format_version  kModelFileVersion
//   h3.config          ConfigToJson(config)
//   h3.source          the checkpoint it was converted from
//   h3.tokenizer       {"kind": ..., "files": [...]}  (when one is embedded)
// and whose tensors are the canonical weights (ExpectedTensors(config); the
// tied lm_head is the embedding) plus `tokenizer/<file>` (1-D U8, verbatim).
// Every tensor starts at a multiple of 64 bytes in the file.
inline constexpr absl::string_view kModelFileVersion = "1";
inline constexpr absl::string_view kTokenizerTensorPrefix = "tokenizer/";

// A weight of a model file: a view into the mapping.
struct WeightView {
  ElementType dtype = ElementType::kF32;
  std::vector<int64_t> shape;
  absl::Span<const uint8_t> bytes;
};

// A model file mapped read-only. Thread-safe after Open; views live as long
// as the object.
class ModelFile {
 public:
  // Opens and checks `path`: safetensors structure, format version (another
  // version: Unimplemented), config, every weight's presence, shape and dtype
  // (SSM parameters F32, the rest the config's dtype), the tokenizer entry.
  // DataLoss naming the problem otherwise.
  static absl::StatusOr<std::unique_ptr<ModelFile>> Open(
      const std::string& path);
  // The same checks over the bytes of a model file that outlive the object
  // (one embedded in the binary); `name` stands for the path in path() and
  // in errors.
  static absl::StatusOr<std::unique_ptr<ModelFile>> Open(
      const std::string& name, absl::Span<const uint8_t> bytes);

  const ModelConfig& config() const { return config_; }
  const std::string& format_version() const { return version_; }
  const std::string& source() const { return source_; }
  const std::string& path() const { return file_->path(); }
  uint64_t file_size() const;

  // The weight called `name` (canonical name); NotFound if absent.
  absl::StatusOr<WeightView> Weight(const std::string& name) const;

  // Number of weight elements (the tied lm_head counted once).
  uint64_t parameter_count() const { return parameter_count_; }

  // "gpt2-bpe", "sentencepiece", or empty when no tokenizer is embedded.
  const std::string& tokenizer_kind() const { return tokenizer_kind_; }
  // File name -> contents, in the order of h3.tokenizer's "files".
  const std::vector<std::pair<std::string, absl::string_view>>&
  tokenizer_files() const {
    return tokenizer_files_;
  }

 private:
  ModelFile() = default;
  absl::Status Load();

  std::unique_ptr<SafetensorsFile> file_;
  ModelConfig config_;
  std::string version_;
  std::string source_;
  uint64_t parameter_count_ = 0;
  std::string tokenizer_kind_;
  std::vector<std::pair<std::string, absl::string_view>> tokenizer_files_;
};

// The __metadata__ of a model file. `tokenizer_json` may be empty.
std::map<std::string, std::string> ModelFileMetadata(
    const ModelConfig& config, const std::string& source,
    const std::string& tokenizer_json);

}  // namespace h3::loader

#endif  // H3_LOADER_MODEL_FILE_H_
