// A bounded soak of a real h3serve (label slow, issue 24): 1,000 generation
// requests at concurrency 32 over a small random model, of which 10% are
// cancelled by the client (streamed or unary), 5% carry a deadline that
// passes while they wait or run, 5% are stopped by the Abort RPC, the rest run
// to their length (streamed, or unary Complete). Afterwards every load gauge of
// /metrics is back to idle, the finish-reason counters account for every
// request, and the server holds no more threads or open files than after a
// warm-up of the same mix.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "h3/v1/text_generation.grpc.pb.h"
#include "tests/support/random_model.h"
#include "tests/support/server_stats.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_path.h"

namespace h3 {
namespace {

using ::h3::testing::Subprocess;
using namespace std::chrono_literals;

const std::string kH3serve = H3SERVE_BIN;

constexpr int kVocab = 61;
constexpr int kRequests = 1000;
constexpr int kWarmup = 100;
constexpr int kConcurrency = 32;
constexpr int kChannels = 4;  // connections the clients share
constexpr int kSlots = 8;     // fewer than kConcurrency: requests also wait
// Long enough that a stopped request never ends by length on its own.
constexpr int kLongTokens = 190000;

enum class Kind { kStreamed, kUnary, kCancel, kUnaryCancel, kDeadline, kAbort };

// Of every 20 requests: 2 cancelled by the client (one streamed, one unary),
// 1 with a deadline, 1 aborted, 4 unary that run to their length.
Kind KindOf(int i) {
  switch (i % 20) {
    case 0:
      return Kind::kCancel;
    case 10:
      return Kind::kUnaryCancel;
    case 5:
      return Kind::kDeadline;
    case 15:
      return Kind::kAbort;
    case 2:
    case 7:
    case 12:
    case 17:
      return Kind::kUnary;
    default:
      return Kind::kStreamed;
  }
}

bool Stopped(Kind kind) {
  return kind == Kind::kCancel || kind == Kind::kUnaryCancel ||
         kind == Kind::kDeadline || kind == Kind::kAbort;
}

v1::GenerateRequest MakeRequest(int i, Kind kind, int* max_new_tokens) {
  std::mt19937 rng(i);
  v1::GenerateRequest request;
  const int prompt_length = 1 + static_cast<int>(rng() % 24);
  for (int t = 0; t < prompt_length; ++t) {
    request.mutable_token_ids()->add_ids(static_cast<int32_t>(rng() % kVocab));
  }
  request.mutable_sampling()->set_seed(i);
  *max_new_tokens =
      Stopped(kind) ? kLongTokens : 1 + static_cast<int>(rng() % 16);
  request.mutable_stop()->set_max_new_tokens(*max_new_tokens);
  request.mutable_stop()->set_ignore_eos(true);
  if (kind == Kind::kAbort) request.set_request_id("soak-" + std::to_string(i));
  return request;
}

std::string Failure(int i, const std::string& what, const grpc::Status& s) {
  return "request " + std::to_string(i) + ": " + what + " (status " +
         std::to_string(s.error_code()) + " " + s.error_message() + ")";
}

// Runs request i to its end; "" when it ended as its kind should.
std::string RunOne(v1::TextGeneration::Stub& stub, int i) {
  const Kind kind = KindOf(i);
  int max_new_tokens = 0;
  const v1::GenerateRequest request = MakeRequest(i, kind, &max_new_tokens);
  grpc::ClientContext context;
  // Every call has a deadline, so that a server that stops answering fails
  // the test instead of hanging it.
  context.set_deadline(std::chrono::system_clock::now() +
                       (kind == Kind::kDeadline ? 200ms : 60s));
  if (kind == Kind::kUnaryCancel) {
    // Cancelled from another thread while it waits or runs.
    std::thread canceller([&context] {
      std::this_thread::sleep_for(50ms);
      context.TryCancel();
    });
    v1::GenerateResponse response;
    const grpc::Status s = stub.Complete(&context, request, &response);
    canceller.join();
    if (s.error_code() != grpc::StatusCode::CANCELLED)
      return Failure(i, "unary cancel: not CANCELLED", s);
    return "";
  }
  if (kind == Kind::kUnary) {
    v1::GenerateResponse response;
    const grpc::Status s = stub.Complete(&context, request, &response);
    if (!s.ok()) return Failure(i, "Complete failed", s);
    if (response.token_ids_size() != max_new_tokens ||
        response.finish_reason() != v1::FINISH_REASON_LENGTH) {
      return Failure(i, "Complete ended early", s);
    }
    return "";
  }
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub.Generate(&context, request);
  v1::GenerateResponse message;
  int tokens = 0;
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  bool found = false;
  while (reader->Read(&message)) {
    const bool first = tokens == 0 && message.token_ids_size() > 0;
    tokens += message.token_ids_size();
    finish = message.finish_reason();
    if (first && kind == Kind::kCancel) context.TryCancel();
    if (first && kind == Kind::kAbort) {
      grpc::ClientContext abort_context;
      abort_context.set_deadline(std::chrono::system_clock::now() + 30s);
      v1::AbortRequest abort;
      abort.set_request_id(request.request_id());
      v1::AbortResponse response;
      const grpc::Status s = stub.Abort(&abort_context, abort, &response);
      if (!s.ok()) return Failure(i, "Abort failed", s);
      found = response.found();
    }
  }
  const grpc::Status s = reader->Finish();
  switch (kind) {
    case Kind::kCancel:
      if (s.error_code() != grpc::StatusCode::CANCELLED)
        return Failure(i, "cancel: not CANCELLED", s);
      return "";
    case Kind::kDeadline:
      // The server may end it first, with finish_reason DEADLINE.
      if (s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED &&
          !(s.ok() && finish == v1::FINISH_REASON_DEADLINE)) {
        return Failure(i, "deadline: neither DEADLINE_EXCEEDED nor DEADLINE",
                       s);
      }
      return "";
    case Kind::kAbort:
      if (!s.ok() || !found || finish != v1::FINISH_REASON_CANCELLED)
        return Failure(i, "abort: stream did not end CANCELLED", s);
      return "";
    default:
      if (!s.ok() || tokens != max_new_tokens ||
          finish != v1::FINISH_REASON_LENGTH) {
        return Failure(i, "stream ended early", s);
      }
      return "";
  }
}

// Runs requests [begin, end) on kConcurrency client threads; returns the
// failures.
std::vector<std::string> RunMany(
    const std::vector<std::unique_ptr<v1::TextGeneration::Stub>>& stubs,
    int begin, int end) {
  std::atomic<int> next{begin};
  std::mutex mutex;
  std::vector<std::string> failures;
  std::vector<std::thread> clients;
  for (int c = 0; c < kConcurrency; ++c) {
    clients.emplace_back([&, c] {
      for (int i = next++; i < end; i = next++) {
        std::string failure = RunOne(*stubs[c % stubs.size()], i);
        if (failure.empty()) continue;
        std::lock_guard<std::mutex> lock(mutex);
        failures.push_back(std::move(failure));
      }
    });
  }
  for (std::thread& t : clients) t.join();
  return failures;
}

TEST(SoakTest, ThousandRequestsLeaveNothingBehind) {
  const std::string model = h3::testing::TempPath("soak.h3");
  ASSERT_TRUE(
      testing::WriteRandomModel(testing::SmallHybridConfig(kVocab), model)
          .ok());
  Subprocess server({kH3serve,
                     "--model",
                     model,
                     "--host",
                     "127.0.0.1",
                     "--port",
                     "0",
                     "--metrics-port",
                     "0",
                     "--http-port",
                     "-1",
                     "--threads",
                     "2",
                     "--slots",
                     std::to_string(kSlots),
                     "--max-waiting",
                     "64",
                     "--max-sequence-length",
                     "200000",
                     "--max-new-tokens",
                     "199000"});
  const std::string address = testing::WaitForGrpcAddress(server, 60s);
  std::remove(model.c_str());
  ASSERT_FALSE(address.empty()) << server.output();
  const int metrics_port = testing::MetricsPortOf(server.output());
  ASSERT_GT(metrics_port, 0) << server.output();

  std::vector<std::unique_ptr<v1::TextGeneration::Stub>> stubs;
  for (int c = 0; c < kChannels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection each
    stubs.push_back(v1::TextGeneration::NewStub(grpc::CreateCustomChannel(
        address, grpc::InsecureChannelCredentials(), args)));
  }

  // Warm-up: the same mix, so that thread pools and connections reach the
  // size the load needs before the baseline is taken.
  std::vector<std::string> failures = RunMany(stubs, 0, kWarmup);
  ASSERT_TRUE(failures.empty()) << failures.front();
  testing::LoadGauges load =
      testing::WaitForIdleGauges(metrics_port, kSlots, 30s);
  ASSERT_TRUE(load.IdleWith(kSlots))
      << "after the warm-up: " << load.ToString();
  const std::map<std::string, int> threads =
      testing::ThreadsByName(server.pid());
  const int files = testing::CountOpenFiles(server.pid());
  ASSERT_FALSE(threads.empty());
  ASSERT_GT(files, 0);

  failures = RunMany(stubs, kWarmup, kWarmup + kRequests);
  EXPECT_TRUE(failures.empty())
      << failures.size() << " requests failed; the first: " << failures.front();

  load = testing::WaitForIdleGauges(metrics_port, kSlots, 30s);
  EXPECT_TRUE(load.IdleWith(kSlots)) << load.ToString();

  // Every request is counted once, by how it ended. A call whose deadline
  // passes may be ended by the deadline or by the client going away. A
  // handler that a loaded machine delays may submit its request after the
  // client gave up and the gauges read idle: wait for the counts to add up.
  std::string metrics;
  auto finished = [&](const std::string& reason) {
    return testing::MetricValue(
               metrics, "h3_requests_total{finish_reason=\"" + reason + "\"}")
        .value_or(0);
  };
  const auto counted_by = std::chrono::steady_clock::now() + 30s;
  do {
    metrics = testing::ScrapeMetrics(metrics_port);
    const double counted = finished("length") + finished("cancelled") +
                           finished("deadline") + finished("error");
    if (counted >= kWarmup + kRequests) break;
    std::this_thread::sleep_for(100ms);
  } while (std::chrono::steady_clock::now() < counted_by);
  int stopped = 0, deadlines = 0;
  for (int i = 0; i < kWarmup + kRequests; ++i) {
    stopped += Stopped(KindOf(i)) ? 1 : 0;
    deadlines += KindOf(i) == Kind::kDeadline ? 1 : 0;
  }
  EXPECT_EQ(finished("length"), kWarmup + kRequests - stopped) << metrics;
  EXPECT_EQ(finished("cancelled") + finished("deadline"), stopped) << metrics;
  EXPECT_LE(finished("deadline"), deadlines) << metrics;
  EXPECT_EQ(finished("error"), 0) << metrics;

  // Threads that served the load may take a moment to retire.
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  std::string growth =
      testing::ThreadGrowth(threads, testing::ThreadsByName(server.pid()));
  while ((!growth.empty() || testing::CountOpenFiles(server.pid()) > files) &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(100ms);
    growth =
        testing::ThreadGrowth(threads, testing::ThreadsByName(server.pid()));
  }
  EXPECT_EQ(growth, "") << "threads grew";
  EXPECT_LE(testing::CountOpenFiles(server.pid()), files) << "open files grew";
  int threads_before = 0;
  for (const auto& [name, count] : threads) threads_before += count;
  std::printf("soak: threads %d -> %d, open files %d -> %d\n", threads_before,
              testing::CountThreads(server.pid()), files,
              testing::CountOpenFiles(server.pid()));

  stubs.clear();
  EXPECT_EQ(server.Stop(SIGTERM, 30s), 0) << server.output();
}

}  // namespace
}  // namespace h3
