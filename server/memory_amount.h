#ifndef H3_SERVER_MEMORY_AMOUNT_H_
#define H3_SERVER_MEMORY_AMOUNT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace h3::server {

// An amount of memory a flag gives: bytes, or a fraction of what is free.
struct MemoryAmount {
  int64_t bytes = 0;    // when fraction == 0
  double fraction = 0;  // in (0, 1]; 0: `bytes` counts
};

// "0" (none), "1073741824" (bytes), "512K", "64M", "2G", "1T" (powers of
// 1024; "KiB", "MiB", "GiB", "TiB" too), or a fraction with a decimal point,
// "0.1", of free memory. InvalidArgument naming `flag` otherwise.
absl::StatusOr<MemoryAmount> ParseMemoryAmount(absl::string_view text,
                                               absl::string_view flag);

}  // namespace h3::server

#endif  // H3_SERVER_MEMORY_AMOUNT_H_
