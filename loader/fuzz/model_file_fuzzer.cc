// libFuzzer target: any byte string as a model file (.h3). A file that opens
// has every weight of its config, each inside the file and as long as its
// shape and dtype say; its embedded tokenizer loads or fails with a status.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "base/element_type.h"
#include "loader/model_file.h"
#include "tokenizer/load.h"

namespace {

// Reads every byte of `bytes` (ASan reports any read outside the input) and
// aborts unless it lies inside [data, data + size).
void CheckInside(absl::Span<const uint8_t> bytes, const uint8_t* data,
                 size_t size) {
  if (bytes.empty()) return;
  if (bytes.data() < data || bytes.data() + bytes.size() > data + size) {
    std::abort();
  }
  volatile uint8_t sink = 0;
  for (uint8_t b : bytes) sink = sink ^ b;
  (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<std::unique_ptr<h3::loader::ModelFile>> model =
      h3::loader::ModelFile::Open("fuzz.h3", absl::MakeConstSpan(data, size));
  if (!model.ok()) return 0;
  for (const h3::loader::ExpectedTensor& expected :
       h3::loader::ExpectedTensors((*model)->config())) {
    absl::StatusOr<h3::loader::WeightView> w = (*model)->Weight(expected.name);
    if (!w.ok()) continue;  // the tied lm_head
    uint64_t elements = 1;
    for (int64_t d : w->shape) elements *= static_cast<uint64_t>(d);
    if (elements * static_cast<uint64_t>(h3::ElementSize(w->dtype)) !=
        w->bytes.size()) {
      std::abort();
    }
    CheckInside(w->bytes, data, size);
  }
  for (const auto& [name, contents] : (*model)->tokenizer_files()) {
    CheckInside(
        absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(contents.data()),
                            contents.size()),
        data, size);
  }
  if (!(*model)->tokenizer_kind().empty()) {
    (void)h3::tokenizer::LoadEmbeddedTokenizer(**model);
  }
  return 0;
}
