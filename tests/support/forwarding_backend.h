#ifndef H3_TESTS_SUPPORT_FORWARDING_BACKEND_H_
#define H3_TESTS_SUPPORT_FORWARDING_BACKEND_H_

// An engine::Backend that passes every call to another one (by default the
// CPU backend): tests derive from it and override the calls they watch or
// break; graphs are the inner backend's.

#include <memory>
#include <string>
#include <utility>

#include "engine/backend.h"

namespace h3::testing {

class ForwardingBackend : public engine::Backend {
 public:
  explicit ForwardingBackend(
      std::unique_ptr<engine::Backend> inner = engine::MakeCpuBackend())
      : inner_(std::move(inner)) {}

  engine::Backend& inner() { return *inner_; }

  std::string name() const override { return inner_->name(); }
  ElementType weight_type() const override { return inner_->weight_type(); }
  ElementType activation_type() const override {
    return inner_->activation_type();
  }
  absl::StatusOr<engine::Buffer> Allocate(int64_t floats) override {
    return inner_->Allocate(floats);
  }
  absl::Status CopyFromHost(const float* host, int64_t n, float* dst) override {
    return inner_->CopyFromHost(host, n, dst);
  }
  absl::Status CopyToHost(const float* src, int64_t n, float* host) override {
    return inner_->CopyToHost(src, n, host);
  }
  absl::Status CopyBytes(const void* src, int64_t bytes, void* dst) override {
    return inner_->CopyBytes(src, bytes, dst);
  }
  absl::Status Fill(float* dst, int64_t n, float value) override {
    return inner_->Fill(dst, n, value);
  }
  absl::StatusOr<engine::Matrix> UploadMatrix(const float* host, int64_t rows,
                                              int64_t cols) override {
    return inner_->UploadMatrix(host, rows, cols);
  }
  absl::StatusOr<engine::Staging> AllocateStaging(int64_t bytes) override {
    return inner_->AllocateStaging(bytes);
  }
  absl::Status Upload(const engine::Staging& staging, int64_t bytes) override {
    return inner_->Upload(staging, bytes);
  }
  absl::Status Download(const engine::Staging& staging,
                        int64_t bytes) override {
    return inner_->Download(staging, bytes);
  }
  absl::Status Embedding(const int32_t* ids, int64_t n,
                         const engine::Matrix& table, float* out) override {
    return inner_->Embedding(ids, n, table, out);
  }
  absl::Status Linear(const engine::LinearParams& params) override {
    return inner_->Linear(params);
  }
  absl::Status AddLayerNorm(const kernels::AddLayerNormParams& p) override {
    return inner_->AddLayerNorm(p);
  }
  absl::StatusOr<std::unique_ptr<engine::H3Layer>> MakeH3Layer(
      const kernels::H3Weights& weights) override {
    return inner_->MakeH3Layer(weights);
  }
  absl::Status Attention(const engine::AttentionPrefillParams& p) override {
    return inner_->Attention(p);
  }
  absl::Status AttentionDecode(const kernels::AttentionDecodeParams& p,
                               int64_t capacity) override {
    return inner_->AttentionDecode(p, capacity);
  }
  absl::Status Sample(const kernels::SampleParams& p) override {
    return inner_->Sample(p);
  }
  absl::Status Synchronize() override { return inner_->Synchronize(); }
  absl::Status BindThread() override { return inner_->BindThread(); }
  absl::StatusOr<int64_t> FreeMemoryBytes() override {
    return inner_->FreeMemoryBytes();
  }
  bool SupportsGraphs() const override { return inner_->SupportsGraphs(); }
  absl::Status BeginCapture() override { return inner_->BeginCapture(); }
  absl::StatusOr<int> EndCapture() override { return inner_->EndCapture(); }
  absl::Status Replay(int graph) override { return inner_->Replay(graph); }
  void DropGraphs() override { inner_->DropGraphs(); }

 private:
  std::unique_ptr<engine::Backend> inner_;
};

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_FORWARDING_BACKEND_H_
