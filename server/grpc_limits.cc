#include "server/grpc_limits.h"

#include "absl/strings/str_cat.h"
#include "base/read_file.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"

namespace h3::server {
namespace {

int Clamp(int64_t ms) {
  return static_cast<int>(std::min<int64_t>(ms, INT32_MAX));
}

absl::StatusOr<std::string> ReadPem(const std::string& flag,
                                    const std::string& path) {
  return ReadSmallFile(flag, path, "a PEM file");
}

}  // namespace

void ApplyGrpcLimits(const GrpcLimits& limits, grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(limits.max_message_bytes);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                              limits.max_concurrent_streams);
  builder->AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE,
                              limits.max_metadata_bytes);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                              Clamp(limits.max_connection_idle_ms));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                              Clamp(limits.keepalive_time_ms));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                              Clamp(limits.keepalive_timeout_ms));
  builder->AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                              Clamp(limits.handshake_timeout_ms));
  grpc::ResourceQuota quota("h3serve");
  quota.SetMaxThreads(limits.max_threads);
  builder->SetResourceQuota(quota);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(
    const GrpcLimits& limits) {
  if (limits.tls_cert.empty() && limits.tls_key.empty()) {
    if (!limits.tls_client_ca.empty()) {
      return absl::InvalidArgumentError(
          "--tls-client-ca needs --tls-cert and --tls-key");
    }
    return grpc::InsecureServerCredentials();
  }
  if (limits.tls_cert.empty() || limits.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together: give both or neither");
  }
  grpc::SslServerCredentialsOptions options;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  auto cert = ReadPem("--tls-cert", limits.tls_cert);
  if (!cert.ok()) return cert.status();
  auto key = ReadPem("--tls-key", limits.tls_key);
  if (!key.ok()) return key.status();
  pair.cert_chain = *std::move(cert);
  pair.private_key = *std::move(key);
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!limits.tls_client_ca.empty()) {
    auto ca = ReadPem("--tls-client-ca", limits.tls_client_ca);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *std::move(ca);
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

}  // namespace h3::server
