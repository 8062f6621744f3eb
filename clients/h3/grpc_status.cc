#include "clients/h3/grpc_status.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace h3::cli {

std::string GrpcCodeName(grpc::StatusCode code) {
  // absl::StatusCode numbers its codes exactly as gRPC does.
  std::string name =
      absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? absl::StrCat("CODE_", static_cast<int>(code)) : name;
}

}  // namespace h3::cli
