#include "base/build_info.h"

#include "absl/strings/str_cat.h"

namespace h3 {

std::string VersionLine(const char* program) {
  const BuildInfo& info = GetBuildInfo();
  return absl::StrCat(program, " ", info.version, " (commit ", info.git_commit,
                      ", ", info.build_type, ", ",
                      info.cuda_enabled
                          ? absl::StrCat("CUDA ", info.cuda_version)
                          : std::string("built without CUDA"),
                      ")");
}

}  // namespace h3
