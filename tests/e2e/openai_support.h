#ifndef H3_TESTS_E2E_OPENAI_SUPPORT_H_
#define H3_TESTS_E2E_OPENAI_SUPPORT_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "h3/v1/text_generation.grpc.pb.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/support/subprocess.h"

// What the tests of the HTTP API share: the h3serve binary started on
// free loopback ports, and small HTTP and gRPC helpers. Failures to reach
// the server are test failures.
namespace h3::testing {

// An h3serve (H3SERVE_BIN) on the embedded default model h3-kjv.
struct OpenAiServer {
  std::unique_ptr<Subprocess> process;
  std::string grpc;  // HOST:PORT, "" when it did not start
  int http = -1;
  int metrics = -1;
};

// Starts one with gRPC, HTTP and metrics on free ports, `flags` added.
OpenAiServer StartOpenAiServer(const std::vector<std::string>& flags = {});

// A response's JSON body (null without a response, discarded when not
// JSON).
nlohmann::json Body(const httplib::Result& result);

// POSTs `body` to /v1/completions on 127.0.0.1:port.
httplib::Result Complete(int port, const nlohmann::json& body);

// The "data:" payloads of an event stream, in order.
std::vector<std::string> Events(const std::string& stream);

// GetServerInfo of the server at `grpc`.
v1::ServerInfo Info(const std::string& grpc);

// Polls `condition` every 10 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& condition,
             std::chrono::milliseconds timeout);

}  // namespace h3::testing

#endif  // H3_TESTS_E2E_OPENAI_SUPPORT_H_
