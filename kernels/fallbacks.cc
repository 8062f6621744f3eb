// H3_CUDA_FALLBACKS (kernels/fallbacks.h).
#include "kernels/fallbacks.h"

#include <cstdlib>
#include <string>

namespace h3::kernels {

bool FallbackListHas(std::string_view list, std::string_view name) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view entry = list.substr(0, comma);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    if (!entry.empty() && entry == name) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

bool KernelFallback(std::string_view name) {
  static const std::string* const list = [] {
    const char* value = std::getenv("H3_CUDA_FALLBACKS");
    return new std::string(value != nullptr ? value : "");
  }();
  return FallbackListHas(*list, name);
}

}  // namespace h3::kernels
