#ifndef H3_SERVER_TESTING_TEST_SERVER_H_
#define H3_SERVER_TESTING_TEST_SERVER_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "h3/v1/text_generation.grpc.pb.h"
#include "server/server.h"

namespace h3::server::testing {

// A random small hybrid model (tests/support SmallHybridConfig) over the
// 800-piece test sentencepiece tokenizer, embedded; written once per
// process. Its context limit is set by the server (ServerOptions).
const std::string& SpmModelPath();

// Options for a server on 127.0.0.1 with free ports, serving
// SpmModelPath(), without a metrics endpoint.
ServerOptions LoopbackOptions();

// Starts it; fails the test (and returns null) when it cannot.
std::unique_ptr<Server> StartServer(const ServerOptions& options);

std::shared_ptr<grpc::Channel> ChannelTo(const Server& server);
std::unique_ptr<v1::TextGeneration::Stub> Connect(const Server& server);

// A Generate call read to its end.
struct Generation {
  grpc::Status status;
  std::vector<int32_t> ids;
  std::string text;
  std::vector<v1::GenerateResponse> messages;
  const v1::GenerateResponse& last() const { return messages.back(); }
};

// Runs Generate; `timeout` (if nonzero) becomes the call's deadline.
Generation Generate(v1::TextGeneration::Stub& stub,
                    const v1::GenerateRequest& request,
                    std::chrono::milliseconds timeout = {});

// A greedy request for `ids` generating exactly `n` tokens (eos ignored).
v1::GenerateRequest GreedyIds(const std::vector<int32_t>& ids, uint32_t n);

v1::ServerInfo Info(v1::TextGeneration::Stub& stub);

// Whether the server runs and queues nothing and all its `slots` are free.
bool Idle(v1::TextGeneration::Stub& stub, uint32_t slots);

// GET http://127.0.0.1:port/metrics: the whole response (headers and body),
// or "" when nothing listens there.
std::string HttpGetMetrics(int port);

// The samples of a Prometheus text exposition, keyed by series as written
// ("name" or "name{labels}"). Adds a test failure for a line that is neither
// a comment nor "series value".
std::map<std::string, double> ParseMetrics(const std::string& response);

// Polls `condition` every 10 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& condition,
             std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace h3::server::testing

#endif  // H3_SERVER_TESTING_TEST_SERVER_H_
