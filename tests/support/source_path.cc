#include "tests/support/source_path.h"

#include <cstdlib>
#include <string>

namespace h3::testing {

std::string SourcePath(std::string_view relative) {
  const char* env = std::getenv(kSourceDirEnv);
  std::string path = (env != nullptr && *env != '\0')
                         ? std::string(env)
                         : std::string(H3_COMPILED_SOURCE_DIR);
  if (!relative.empty()) path.append("/").append(relative);
  return path;
}

}  // namespace h3::testing
