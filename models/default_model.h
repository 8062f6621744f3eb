#ifndef H3_MODELS_DEFAULT_MODEL_H_
#define H3_MODELS_DEFAULT_MODEL_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "loader/model_file.h"

namespace h3::models {

// The model h3serve serves without --model: h3-kjv (models/h3-kjv), a small
// hybrid H3 model trained on the King James Bible, embedded in the binary.
inline constexpr absl::string_view kDefaultModelName = "h3-kjv";

// The bytes of its model file, in the binary's read-only data (64-byte
// aligned, like a mapped file); they live as long as the process.
absl::Span<const uint8_t> DefaultModelBytes();

// The embedded file opened and checked as ModelFile::Open checks a file;
// its path() is "<embedded h3-kjv>".
absl::StatusOr<std::unique_ptr<loader::ModelFile>> OpenDefaultModel();

}  // namespace h3::models

#endif  // H3_MODELS_DEFAULT_MODEL_H_
