#ifndef H3_CLIENTS_H3_CHANNEL_H_
#define H3_CLIENTS_H3_CHANNEL_H_

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "grpcpp/channel.h"

namespace h3::cli {

// How the server-facing commands reach h3serve: its API key and TLS.
struct ChannelFlags {
  std::string api_key;   // sent as "authorization: Bearer <key>" on each call
  std::string tls_ca;    // PEM CA file: connect over TLS, trusting it
  bool tls = false;      // connect over TLS, trusting the system's CAs
  std::string tls_cert;  // PEM client certificate and key, for mutual TLS
  std::string tls_key;
};

// Adds --api-key (default: $H3_API_KEY), --tls, --tls-ca, --tls-cert and
// --tls-key to `command`.
void AddChannelFlags(CLI::App* command, ChannelFlags* flags);

// A channel to `server` (HOST:PORT) as `flags` say: TLS when --tls or
// --tls-ca is given, and the API key added to every call's metadata.
// InvalidArgument naming the flag when a PEM file cannot be read.
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(
    const std::string& server, const ChannelFlags& flags);

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_CHANNEL_H_
