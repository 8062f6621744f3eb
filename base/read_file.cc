#include "base/read_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace h3 {

absl::StatusOr<std::string> ReadSmallFile(absl::string_view flag,
                                          const std::string& path,
                                          absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": cannot read ", path, " (", what, "): ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", path, " is empty (", what, ")"));
  }
  return text.str();
}

}  // namespace h3
