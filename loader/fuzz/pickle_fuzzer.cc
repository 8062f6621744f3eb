// libFuzzer target: the unpickler must refuse or accept any byte string
// without crashing, and never produce a value id out of range.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "loader/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<h3::loader::PickleGraph> g =
      h3::loader::Unpickle(absl::MakeConstSpan(data, size));
  if (!g.ok()) return 0;
  if (g->root() >= g->size()) std::abort();
  for (size_t i = 0; i < g->size(); ++i) {
    const h3::loader::PickleValue& v = g->at(static_cast<uint32_t>(i));
    for (uint32_t item : v.items) {
      if (item >= g->size()) std::abort();
    }
    for (const auto& [k, val] : v.entries) {
      if (k >= g->size() || val >= g->size()) std::abort();
    }
    (void)g->Describe(v);
  }
  return 0;
}
