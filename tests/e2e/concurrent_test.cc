// 24 concurrent seeded requests through h3serve get exactly the tokens and
// logprobs each gets alone: batch invariance end to end, through gRPC, the
// scheduler's mixed steps and the backend. Built twice: on the CPU backend
// (CI) and, as e2e_concurrent_gpu_test, on CUDA with --batch-invariant
// (H3_TEST_DEVICE_FLAGS), which skips without a device.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "h3/v1/text_generation.grpc.pb.h"
#include "tests/support/random_model.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_path.h"
#ifdef H3_TEST_NEEDS_GPU
#include "tests/support/gpu_test.h"
#endif

namespace h3 {
namespace {

using namespace std::chrono_literals;

constexpr int kRequests = 24;

// The server binary: $H3SERVE_BIN where set (scripts/gpu-check.sh points it
// at the unpacked archive's), else the one built beside this test.
std::string H3serveBinary() {
  const char* env = std::getenv("H3SERVE_BIN");
  return env != nullptr && *env != '\0' ? env : H3SERVE_BIN;
}

std::vector<std::string> DeviceFlags() {
  return absl::StrSplit(H3_TEST_DEVICE_FLAGS, ' ', absl::SkipEmpty());
}

struct Answer {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  std::string error;  // the call's status when not OK
};

// Request i: its own prompt (8 to 100 tokens), seed, temperature and
// length, so that prompts and decodes of different lengths share steps.
v1::GenerateRequest Request(int i) {
  v1::GenerateRequest r;
  r.set_request_id("r" + std::to_string(i));
  const int length = 8 + (i * 37) % 93;
  for (int t = 0; t < length; ++t) {
    r.mutable_token_ids()->add_ids((i * 7 + t * 13 + t * t) % 61);
  }
  v1::SamplingParams* s = r.mutable_sampling();
  s->set_seed(1000 + i);
  s->set_temperature(i % 4 == 0 ? 0.0f : 0.5f + 0.1f * (i % 5));
  if (i % 3 == 1) s->set_top_k(20);
  if (i % 3 == 2) s->set_top_p(0.9f);
  r.mutable_stop()->set_max_new_tokens(16 + (i * 5) % 24);
  r.mutable_stop()->set_ignore_eos(true);
  r.mutable_logprobs()->set_enabled(true);
  return r;
}

Answer Generate(v1::TextGeneration::Stub& stub, const v1::GenerateRequest& r) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 120s);
  auto reader = stub.Generate(&context, r);
  Answer a;
  v1::GenerateResponse m;
  while (reader->Read(&m)) {
    for (int32_t id : m.token_ids()) a.ids.push_back(id);
    for (const v1::TokenLogprob& l : m.logprobs()) {
      a.logprobs.push_back(l.logprob());
    }
    if (m.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      a.finish = m.finish_reason();
    }
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) a.error = status.error_message();
  return a;
}

#ifdef H3_TEST_NEEDS_GPU
using Base = h3::testing::GpuTest;
#define H3_CONCURRENT_SUITE ConcurrentGpuTest
#else
using Base = ::testing::Test;
#define H3_CONCURRENT_SUITE ConcurrentTest
#endif

class H3_CONCURRENT_SUITE : public Base {
 protected:
  void SetUp() override {
    Base::SetUp();
    if (IsSkipped()) return;
    model_ = h3::testing::TempPath("concurrent.h3");
    ASSERT_TRUE(h3::testing::WriteRandomModel(
                    h3::testing::SmallHybridConfig(61), model_)
                    .ok());
    std::vector<std::string> flags = {"--slots", "32", "--max-waiting", "64"};
    for (const std::string& f : DeviceFlags()) flags.push_back(f);
    server_ =
        h3::testing::StartH3serve(H3serveBinary(), model_, flags, &address_);
    ASSERT_FALSE(address_.empty())
        << "h3serve did not start: " << server_->output();
    stub_ = v1::TextGeneration::NewStub(
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Stop(SIGTERM, 30s);
    if (!model_.empty()) std::remove(model_.c_str());
  }

  std::string model_, address_;
  std::unique_ptr<h3::testing::Subprocess> server_;
  std::unique_ptr<v1::TextGeneration::Stub> stub_;
};

TEST_F(H3_CONCURRENT_SUITE, SeededRequestsGetTheirSoloTokensBitwise) {
  std::vector<Answer> alone(kRequests), together(kRequests);
  for (int i = 0; i < kRequests; ++i) alone[i] = Generate(*stub_, Request(i));
  {
    std::vector<std::thread> threads;
    for (int i = 0; i < kRequests; ++i) {
      threads.emplace_back(
          [&, i] { together[i] = Generate(*stub_, Request(i)); });
    }
    for (std::thread& t : threads) t.join();
  }
  for (int i = 0; i < kRequests; ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    ASSERT_EQ(alone[i].error, "");
    ASSERT_EQ(together[i].error, "");
    EXPECT_EQ(alone[i].finish, v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(alone[i].ids.size(), Request(i).stop().max_new_tokens());
    EXPECT_EQ(together[i].ids, alone[i].ids);
    EXPECT_EQ(together[i].logprobs, alone[i].logprobs);  // bitwise
  }
}

}  // namespace
}  // namespace h3
