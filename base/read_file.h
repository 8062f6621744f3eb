#ifndef H3_BASE_READ_FILE_H_
#define H3_BASE_READ_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace h3 {

// The whole contents of the small text file at `path` (key files, PEM
// certificates). InvalidArgument "FLAG: cannot read PATH (WHAT)" when it
// cannot be opened or is empty; `flag` and `what` only shape the message.
absl::StatusOr<std::string> ReadSmallFile(absl::string_view flag,
                                          const std::string& path,
                                          absl::string_view what);

}  // namespace h3

#endif  // H3_BASE_READ_FILE_H_
