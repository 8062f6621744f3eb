#ifndef H3_BASE_BUILD_INFO_H_
#define H3_BASE_BUILD_INFO_H_

#include <string>

namespace h3 {

// What this binary is: filled in at build time (cmake/build_info.cc.in).
struct BuildInfo {
  const char* version;       // "0.1.0"
  const char* git_commit;    // 12 hex digits, "-dirty" if built from a modified
                             // tree, "unknown" outside a git checkout
  const char* build_type;    // CMAKE_BUILD_TYPE
  bool cuda_enabled;         // built with the CUDA backend
  const char* cuda_version;  // CUDA Toolkit version built against, or ""
};

// The process-wide build information. Thread-safe.
const BuildInfo& GetBuildInfo();

// One line for --version: "<program> 0.1.0 (commit abc, CUDA 13.0)".
std::string VersionLine(const char* program);

}  // namespace h3

#endif  // H3_BASE_BUILD_INFO_H_
