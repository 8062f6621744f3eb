#ifndef H3_CLIENTS_H3_ID_LIST_H_
#define H3_CLIENTS_H3_ID_LIST_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace h3::cli {

// Parses "1,2, 3" into token ids. InvalidArgument naming `flag` and the bad
// item for anything that is not a 32-bit integer. Empty items are skipped;
// whether ids are in the vocabulary is for the caller to check.
absl::StatusOr<std::vector<int32_t>> ParseIdList(absl::string_view flag,
                                                 absl::string_view list);

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_ID_LIST_H_
