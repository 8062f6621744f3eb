#ifndef H3_TESTS_SUPPORT_TEMP_PATH_H_
#define H3_TESTS_SUPPORT_TEMP_PATH_H_

#include <unistd.h>

#include <string>
#include <string_view>

#include "gtest/gtest.h"

namespace h3::testing {

// A path for a scratch file or folder named `name` under the test temporary
// folder, made unique to this process: ctest runs each discovered test in a
// process of its own and two at once, so a fixed name shared by the tests of
// one suite (or one binary) would be written by one while another reads it.
// "model.h3" becomes "<tmp>/model.<pid>.h3"; a name without an extension
// gets ".<pid>" at its end.
inline std::string TempPath(std::string_view name) {
  std::string dir = ::testing::TempDir();
  if (dir.empty() || dir.back() != '/') dir += '/';
  const std::string pid = "." + std::to_string(getpid());
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) {
    return dir + std::string(name) + pid;
  }
  return dir + std::string(name.substr(0, dot)) + pid +
         std::string(name.substr(dot));
}

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_TEMP_PATH_H_
