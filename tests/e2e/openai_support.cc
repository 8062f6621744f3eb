#include "tests/e2e/openai_support.h"

#include <cstdlib>
#include <thread>

#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"

namespace h3::testing {
namespace {

using namespace std::chrono_literals;

// The port in "KEY...:PORT" of the listening line, or -1.
int PortAfter(const std::string& line, const std::string& key) {
  const size_t at = line.find(key);
  if (at == std::string::npos) return -1;
  const size_t colon = line.find(':', at + key.size());
  return std::atoi(line.c_str() + colon + 1);
}

}  // namespace

OpenAiServer StartOpenAiServer(const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {
      H3SERVE_BIN,   "--host", "127.0.0.1",      "--port", "0",
      "--http-port", "0",      "--metrics-port", "0"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  OpenAiServer s;
  s.process = std::make_unique<Subprocess>(argv);
  s.grpc = WaitForGrpcAddress(*s.process, 60s);
  const std::string& out = s.process->output();
  s.http = PortAfter(out, "http=http://127.0.0.1");
  s.metrics = PortAfter(out, "metrics=http://127.0.0.1");
  return s;
}

nlohmann::json Body(const httplib::Result& result) {
  if (!result) return nullptr;
  return nlohmann::json::parse(result->body, nullptr, false);
}

httplib::Result Complete(int port, const nlohmann::json& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  return client.Post("/v1/completions", body.dump(), "application/json");
}

std::vector<std::string> Events(const std::string& stream) {
  std::vector<std::string> events;
  size_t at = 0;
  while ((at = stream.find("data: ", at)) != std::string::npos) {
    const size_t end = stream.find("\n\n", at);
    events.push_back(stream.substr(at + 6, end - at - 6));
    at = end;
  }
  return events;
}

v1::ServerInfo Info(const std::string& grpc) {
  auto stub = v1::TextGeneration::NewStub(
      grpc::CreateChannel(grpc, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::ServerInfo info;
  EXPECT_TRUE(stub->GetServerInfo(&context, {}, &info).ok());
  return info;
}

bool WaitFor(const std::function<bool()>& condition,
             std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return condition();
}

}  // namespace h3::testing
