#include "server/memory_amount.h"

#include <limits>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace h3::server {

absl::StatusOr<MemoryAmount> ParseMemoryAmount(absl::string_view text,
                                               absl::string_view flag) {
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " is \"", text,
        "\"; give bytes (1073741824, 512M, 2G) or a fraction of free memory "
        "in (0, 1] with a decimal point (0.1); 0 turns it off"));
  };
  if (text.find('.') != absl::string_view::npos) {
    double fraction = 0;
    if (!absl::SimpleAtod(text, &fraction) || !(fraction >= 0) ||
        fraction > 1) {
      return bad();
    }
    return MemoryAmount{.fraction = fraction};
  }
  absl::string_view number = text;
  int shift = 0;
  for (const auto& [suffix, bits] : {std::pair{"KiB", 10},
                                     {"MiB", 20},
                                     {"GiB", 30},
                                     {"TiB", 40},
                                     {"K", 10},
                                     {"M", 20},
                                     {"G", 30},
                                     {"T", 40}}) {
    if (absl::ConsumeSuffix(&number, suffix)) {
      shift = bits;
      break;
    }
  }
  int64_t value = 0;
  if (number.empty() || !absl::SimpleAtoi(number, &value) || value < 0 ||
      value > (std::numeric_limits<int64_t>::max() >> shift)) {
    return bad();
  }
  return MemoryAmount{.bytes = value << shift};
}

}  // namespace h3::server
