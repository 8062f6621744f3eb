#ifndef H3_CLIENTS_H3_GRPC_STATUS_H_
#define H3_CLIENTS_H3_GRPC_STATUS_H_

#include <string>

#include "grpcpp/support/status.h"

namespace h3::cli {

// The canonical name of a gRPC status code, e.g. "INVALID_ARGUMENT", or
// "CODE_<n>" for a number outside the canonical set.
std::string GrpcCodeName(grpc::StatusCode code);

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_GRPC_STATUS_H_
