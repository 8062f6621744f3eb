// libFuzzer target: any byte string as a safetensors file. A header that is
// accepted must describe only bytes inside the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "loader/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<h3::loader::SafetensorsHeader> h =
      h3::loader::ParseSafetensorsHeader(absl::MakeConstSpan(data, size), size);
  if (!h.ok()) return 0;
  for (const h3::loader::SafetensorsEntry& e : h->tensors) {
    if (e.begin > e.end || h->data_start + e.end > size) std::abort();
    // Touch the bytes: ASan reports any read outside the input.
    volatile uint8_t sink = 0;
    for (uint64_t i = e.begin; i < e.end; ++i)
      sink = sink ^ data[h->data_start + i];
    (void)sink;
  }
  return 0;
}
