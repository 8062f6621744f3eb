#include "server/testing/test_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"
#include "loader/convert.h"
#include "tests/support/random_model.h"
#include "tests/support/temp_path.h"

namespace h3::server::testing {

const std::string& SpmModelPath() {
  static const std::string* path = [] {
    // Per process: ctest runs each test in its own process, in parallel.
    const std::string dir = h3::testing::TempPath("h3_server");
    std::filesystem::create_directories(dir);
    // Removed when the test process exits.
    static const std::string* removed = new std::string(dir);
    std::atexit([] { std::filesystem::remove_all(*removed); });
    const std::string random = dir + "/random.h3";
    auto* model = new std::string(dir + "/server_spm.h3");
    const absl::Status written = h3::testing::WriteRandomModel(
        h3::testing::SmallHybridConfig(800), random);
    EXPECT_TRUE(written.ok()) << written;
    loader::ConvertOptions options;
    options.input = random;
    options.output = *model;
    options.dtype = ElementType::kF32;
    options.hints.n_heads = 2;
    options.tokenizer = H3_TOKENIZER_TESTDATA "/spm/h3_test.model";
    auto converted = loader::ConvertCheckpoint(options, {});
    EXPECT_TRUE(converted.ok()) << converted.status();
    return model;
  }();
  return *path;
}

ServerOptions LoopbackOptions() {
  ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.metrics_port = -1;
  options.model_path = SpmModelPath();
  options.max_sequence_length = 1024;
  options.max_new_tokens = 512;
  options.slots = 4;
  return options;
}

std::unique_ptr<Server> StartServer(const ServerOptions& options) {
  auto server = Server::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::shared_ptr<grpc::Channel> ChannelTo(const Server& server) {
  return grpc::CreateChannel("127.0.0.1:" + std::to_string(server.port()),
                             grpc::InsecureChannelCredentials());
}

std::unique_ptr<v1::TextGeneration::Stub> Connect(const Server& server) {
  return v1::TextGeneration::NewStub(ChannelTo(server));
}

Generation Generate(v1::TextGeneration::Stub& stub,
                    const v1::GenerateRequest& request,
                    std::chrono::milliseconds timeout) {
  Generation g;
  grpc::ClientContext context;
  if (timeout.count() > 0) {
    context.set_deadline(std::chrono::system_clock::now() + timeout);
  }
  auto reader = stub.Generate(&context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    g.ids.insert(g.ids.end(), response.token_ids().begin(),
                 response.token_ids().end());
    g.text += response.text();
    g.messages.push_back(response);
  }
  g.status = reader->Finish();
  return g;
}

v1::GenerateRequest GreedyIds(const std::vector<int32_t>& ids, uint32_t n) {
  v1::GenerateRequest request;
  for (int32_t id : ids) request.mutable_token_ids()->add_ids(id);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_stop()->set_max_new_tokens(n);
  request.mutable_stop()->set_ignore_eos(true);
  return request;
}

v1::ServerInfo Info(v1::TextGeneration::Stub& stub) {
  grpc::ClientContext context;
  v1::ServerInfo info;
  const grpc::Status status =
      stub.GetServerInfo(&context, v1::GetServerInfoRequest(), &info);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return info;
}

bool Idle(v1::TextGeneration::Stub& stub, uint32_t slots) {
  const v1::ServerInfo info = Info(stub);
  return info.running_requests() == 0 && info.waiting_requests() == 0 &&
         info.free_slots() == slots;
}

std::string HttpGetMetrics(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "";
  }
  const std::string request =
      "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  if (write(fd, request.data(), request.size()) < 0) {
    close(fd);
    return "";
  }
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) response.append(buf, n);
  close(fd);
  return response;
}

std::map<std::string, double> ParseMetrics(const std::string& response) {
  std::map<std::string, double> samples;
  const size_t body = response.find("\r\n\r\n");
  EXPECT_NE(body, std::string::npos) << "no HTTP body: " << response;
  if (body == std::string::npos) return samples;
  std::istringstream lines(response.substr(body + 4));
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    char* end = nullptr;
    const double value =
        space == std::string::npos ? 0 : std::strtod(&line[space + 1], &end);
    if (space == std::string::npos || end != line.c_str() + line.size()) {
      ADD_FAILURE() << "not a sample: " << line;
      continue;
    }
    samples[line.substr(0, space)] = value;
  }
  return samples;
}

bool WaitFor(const std::function<bool()>& condition,
             std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace h3::server::testing
