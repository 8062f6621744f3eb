#ifndef H3_ENGINE_BACKEND_H_
#define H3_ENGINE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/attention.h"
#include "kernels/h3.h"
#include "kernels/layer_norm.h"

namespace h3::engine {

// fp32 memory in a backend's space: host memory for the CPU backend, device
// memory for CUDA. Move-only; frees itself.
class Buffer {
 public:
  using Deleter = void (*)(float*);
  Buffer() = default;
  Buffer(float* data, int64_t size, Deleter deleter)
      : data_(data, deleter), size_(size) {}

  float* data() const { return data_.get(); }
  int64_t size() const { return size_; }  // in floats

 private:
  std::unique_ptr<float, Deleter> data_{nullptr, nullptr};
  int64_t size_ = 0;
};

enum class Epilogue { kNone, kGeluTanh };

// y[rows, n] = epilogue(x[rows, k] W^T + bias) with W [n, k] row-major (the
// PyTorch Linear layout). bias may be null. y must not alias x.
struct LinearParams {
  const float* x = nullptr;
  const float* w = nullptr;
  const float* bias = nullptr;
  float* y = nullptr;
  int64_t rows = 0;
  int64_t n = 0;
  int64_t k = 0;
  Epilogue epilogue = Epilogue::kNone;
};

// The operations the model is written in. Every pointer an op receives lives
// in this backend's memory, except where a comment says "host". Ops run in
// order on the calling thread's stream of work; results are visible to the
// next op. Not thread-safe: one model drives one backend.
//
// Errors: InvalidArgument for arguments that break an op's contract,
// Internal for a device failure (after which the backend is unhealthy).
class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu", "cuda:0", ...
  virtual std::string name() const = 0;

  virtual absl::StatusOr<Buffer> Allocate(int64_t floats) = 0;
  // Copies between host memory and this backend's memory.
  virtual absl::Status CopyFromHost(const float* host, int64_t n,
                                    float* dst) = 0;
  virtual absl::Status CopyToHost(const float* src, int64_t n, float* host) = 0;
  // Copies within this backend's memory; the ranges must not overlap.
  virtual absl::Status Copy(const float* src, int64_t n, float* dst) = 0;
  virtual absl::Status Fill(float* dst, int64_t n, float value) = 0;

  // out[i] = table[ids[i]] for i < n; ids (host) in [0, rows).
  virtual absl::Status Embedding(const int32_t* ids, int64_t n,
                                 const float* table, int64_t cols,
                                 float* out) = 0;
  virtual absl::Status Linear(const LinearParams& params) = 0;
  virtual absl::Status AddLayerNorm(
      const kernels::AddLayerNormParams& params) = 0;
  virtual absl::Status H3KernelSpectrum(const kernels::H3Weights& w, int nfft,
                                        float* out) = 0;
  virtual absl::Status H3Prefill(const kernels::H3PrefillParams& params) = 0;
  virtual absl::Status H3Step(const kernels::H3StepParams& params) = 0;
  // One sequence's chunk (prefill) or one token (decode step).
  virtual absl::Status Attention(const kernels::AttentionParams& params) = 0;
  // Waits until all enqueued work is done.
  virtual absl::Status Synchronize() = 0;
};

// The CPU backend: OpenBLAS matrix products, kissfft convolutions, the
// kernels' CPU twins, threads from base/parallel.h.
std::unique_ptr<Backend> MakeCpuBackend();

// How weight matrices are stored (activations, SSM states and SSM
// parameters are always fp32). The CPU backend stores fp32 only.
enum class WeightType { kFloat32, kFloat16, kBFloat16 };

struct BackendOptions {
  // "cpu", "cuda" (the first GPU), "cuda:N", or "auto": the first GPU when
  // one is present and usable, else the CPU.
  std::string device = "auto";
  WeightType weight_type = WeightType::kFloat32;
};

// The backend `options` name. InvalidArgument for an unknown device name,
// FailedPrecondition for "cuda" without a usable GPU (the reason in words),
// InvalidArgument for 16-bit weights on the CPU.
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(
    const BackendOptions& options);

}  // namespace h3::engine

#endif  // H3_ENGINE_BACKEND_H_
