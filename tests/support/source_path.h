#ifndef H3_TESTS_SUPPORT_SOURCE_PATH_H_
#define H3_TESTS_SUPPORT_SOURCE_PATH_H_

#include <string>
#include <string_view>

namespace h3::testing {

// The environment variable naming the source tree that tests read their data
// from. scripts/gpu-check.sh sets it to the unpacked archive, which holds
// the data the packed tests read at the same relative paths
// (docs/gpu-machine.md).
inline constexpr char kSourceDirEnv[] = "H3_SOURCE_DIR";

// `relative` (a path inside the source tree, e.g. "engine/testdata") under
// $H3_SOURCE_DIR when that is set and non-empty, else under the source tree
// this test was compiled from. Reads the environment on every call.
std::string SourcePath(std::string_view relative);

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_SOURCE_PATH_H_
