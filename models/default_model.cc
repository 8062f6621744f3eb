#include "models/default_model.h"

#include <string>

#include "absl/strings/str_cat.h"

// The model file's bytes between two hidden symbols in .rodata, aligned as
// the loader expects a mapping to be (tensors at multiples of 64 bytes).
__asm__(
    ".pushsection .rodata.h3_default_model,\"a\",@progbits\n"
    ".balign 64\n"
    ".hidden h3_default_model_begin\n"
    ".hidden h3_default_model_end\n"
    "h3_default_model_begin:\n"
    ".incbin \"" H3_DEFAULT_MODEL_FILE
    "\"\n"
    "h3_default_model_end:\n"
    ".popsection\n");

extern "C" const uint8_t h3_default_model_begin[];
extern "C" const uint8_t h3_default_model_end[];

namespace h3::models {

absl::Span<const uint8_t> DefaultModelBytes() {
  return {h3_default_model_begin,
          static_cast<size_t>(h3_default_model_end - h3_default_model_begin)};
}

absl::StatusOr<std::unique_ptr<loader::ModelFile>> OpenDefaultModel() {
  return loader::ModelFile::Open(
      absl::StrCat("<embedded ", kDefaultModelName, ">"), DefaultModelBytes());
}

}  // namespace h3::models
