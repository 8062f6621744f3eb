#include "tests/e2e/fake_server.h"

#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>

#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "h3/v1/text_generation.grpc.pb.h"

namespace h3::testing {

class FakeTextGeneration::Service final
    : public v1::TextGeneration::CallbackService {
 public:
  void SetScript(Script script) {
    std::lock_guard<std::mutex> lock(mu_);
    script_ = std::move(script);
  }

  void SetModelInfo(v1::ModelInfo info) {
    std::lock_guard<std::mutex> lock(mu_);
    model_info_ = std::move(info);
  }

  std::vector<v1::GenerateRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

  bool WaitForCancel(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cancelled_cv_.wait_for(lock, timeout, [this] { return cancelled_; });
  }

  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override {
    grpc::Status status(grpc::StatusCode::UNIMPLEMENTED,
                        "no model info was set");
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (model_info_.has_value()) {
        *response = *model_info_;
        status = grpc::Status::OK;
      }
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context,
      const v1::GenerateRequest* request) override {
    return new Writer(this, Record(*request));
  }

  grpc::ServerUnaryReactor* Complete(grpc::CallbackServerContext* context,
                                     const v1::GenerateRequest* request,
                                     v1::GenerateResponse* response) override {
    Script script = Record(*request);
    for (const v1::GenerateResponse& piece : script.pieces) {
      std::string text = response->text() + piece.text();
      response->MergeFrom(piece);
      response->set_text(std::move(text));
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(script.status);
    return reactor;
  }

 private:
  // Streams a script's pieces, then finishes with its status or, when it
  // holds the stream open, with CANCELLED once the client cancels.
  class Writer final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
   public:
    Writer(Service* service, Script script)
        : service_(service), script_(std::move(script)) {
      WriteNextOrFinish();
    }

    void OnWriteDone(bool ok) override {
      if (ok) {
        WriteNextOrFinish();
      } else {
        FinishOnce(grpc::Status::CANCELLED);
      }
    }

    void OnCancel() override {
      service_->NoteCancel();
      FinishOnce(grpc::Status::CANCELLED);
    }

    void OnDone() override { delete this; }

   private:
    void WriteNextOrFinish() {
      if (next_ < script_.pieces.size()) {
        StartWrite(&script_.pieces[next_++]);
      } else if (!script_.hold_open) {
        FinishOnce(script_.status);
      }
    }

    // OnCancel may run concurrently with OnWriteDone; Finish only once.
    void FinishOnce(const grpc::Status& status) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (finished_) return;
        finished_ = true;
      }
      Finish(status);  // may run OnDone, which deletes this
    }

    Service* service_;
    Script script_;
    size_t next_ = 0;
    std::mutex mu_;
    bool finished_ = false;
  };

  // Records the request; returns the script that answers it.
  Script Record(const v1::GenerateRequest& request) {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(request);
    return script_;
  }

  void NoteCancel() {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    cancelled_cv_.notify_all();
  }

  mutable std::mutex mu_;
  Script script_;
  std::optional<v1::ModelInfo> model_info_;
  std::vector<v1::GenerateRequest> requests_;
  bool cancelled_ = false;
  std::condition_variable cancelled_cv_;
};

std::unique_ptr<FakeTextGeneration> FakeTextGeneration::Start() {
  std::unique_ptr<FakeTextGeneration> fake(new FakeTextGeneration);
  fake->service_ = std::make_unique<Service>();
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(fake->service_.get());
  fake->server_ = builder.BuildAndStart();
  if (fake->server_ == nullptr || port == 0) return nullptr;
  fake->address_ = "127.0.0.1:" + std::to_string(port);
  return fake;
}

FakeTextGeneration::~FakeTextGeneration() {
  // Cancels calls still open rather than waiting for them.
  if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
}

void FakeTextGeneration::SetScript(Script script) {
  service_->SetScript(std::move(script));
}

void FakeTextGeneration::SetModelInfo(v1::ModelInfo info) {
  service_->SetModelInfo(std::move(info));
}

std::vector<v1::GenerateRequest> FakeTextGeneration::requests() const {
  return service_->requests();
}

bool FakeTextGeneration::WaitForCancel(std::chrono::milliseconds timeout) {
  return service_->WaitForCancel(timeout);
}

}  // namespace h3::testing
