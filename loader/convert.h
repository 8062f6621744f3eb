#ifndef H3_LOADER_CONVERT_H_
#define H3_LOADER_CONVERT_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "loader/config.h"
#include "loader/dtype.h"

namespace h3::loader {

struct ConvertOptions {
  std::string input;   // a torch.save checkpoint or a safetensors file
  std::string output;  // the model file to write (replaced atomically)
  ConfigHints hints;   // what shapes cannot tell
  ElementType dtype = ElementType::kF16;  // linear/embedding/norm weights
  std::string tokenizer;                  // optional: see ResolveTokenizer
};

struct ConvertResult {
  ModelConfig config;
  std::string input_format;    // "pytorch" or "safetensors"
  std::string layout;          // "state_dict", "lightning", "old-names", ...
  uint64_t bytes_read = 0;     // tensor bytes read from the checkpoint
  uint64_t bytes_written = 0;  // size of the model file
};

// Called after each tensor with the tensor bytes read so far and in all.
using ConvertProgress = std::function<void(uint64_t done, uint64_t total)>;

// Converts a checkpoint into a model file (see model_file.h): infers and
// validates the config, checks every tensor's shape and that a stored
// lm_head equals the embedding, converts weights to options.dtype (SSM
// parameters stay F32), embeds the tokenizer files. Streams one tensor at a
// time, so memory stays near the largest tensor. On error nothing is left at
// options.output. Errors name the file and the tensor.
absl::StatusOr<ConvertResult> ConvertCheckpoint(
    const ConvertOptions& options, const ConvertProgress& progress);

}  // namespace h3::loader

#endif  // H3_LOADER_CONVERT_H_
