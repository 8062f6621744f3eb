#include "clients/h3/id_list.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace h3::cli {

absl::StatusOr<std::vector<int32_t>> ParseIdList(absl::string_view flag,
                                                 absl::string_view list) {
  std::vector<int32_t> ids;
  for (absl::string_view item :
       absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    int32_t id;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(item), &id)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": \"", item, "\" is not a token id"));
    }
    ids.push_back(id);
  }
  return ids;
}

}  // namespace h3::cli
