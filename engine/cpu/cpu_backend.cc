// The CPU backend: every op on the host, in fp32.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "base/parallel.h"
#include "engine/backend.h"
#include "kernels/bias_gelu.h"
#include "kernels/cpu/skinny_gemm.h"

namespace h3::engine {
namespace {

void FreeHost(float* p) { ::operator delete[](p, std::align_val_t(64)); }

class CpuBackend final : public Backend {
 public:
  CpuBackend() { openblas_set_num_threads(NumThreads()); }

  std::string name() const override { return "cpu"; }

  absl::StatusOr<Buffer> Allocate(int64_t floats) override {
    if (floats < 0) return absl::InvalidArgumentError("negative allocation");
    float* p = static_cast<float*>(
        ::operator new[](std::max<int64_t>(floats, 1) * sizeof(float),
                         std::align_val_t(64), std::nothrow));
    if (p == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot allocate ", floats * sizeof(float), " bytes of host memory"));
    }
    return Buffer(p, floats, &FreeHost);
  }

  absl::Status CopyFromHost(const float* host, int64_t n, float* dst) override {
    std::memcpy(dst, host, n * sizeof(float));
    return absl::OkStatus();
  }
  absl::Status CopyToHost(const float* src, int64_t n, float* host) override {
    std::memcpy(host, src, n * sizeof(float));
    return absl::OkStatus();
  }
  absl::Status Copy(const float* src, int64_t n, float* dst) override {
    std::memcpy(dst, src, n * sizeof(float));
    return absl::OkStatus();
  }
  absl::Status Fill(float* dst, int64_t n, float value) override {
    std::fill(dst, dst + n, value);
    return absl::OkStatus();
  }

  absl::Status Embedding(const int32_t* ids, int64_t n, const float* table,
                         int64_t cols, float* out) override {
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(out + i * cols, table + int64_t{ids[i]} * cols,
                  cols * sizeof(float));
    }
    return absl::OkStatus();
  }

  absl::Status Linear(const LinearParams& p) override {
    if (p.rows == 0 || p.n == 0) return absl::OkStatus();
    // y = x W^T: row-major x [rows, k], W [n, k].
    if (p.rows <= kernels::kSkinnyGemmMaxRows) {
      // Decoding: OpenBLAS would re-pack all of W for a handful of rows.
      ParallelFor(p.n, 256, [&](int64_t begin, int64_t end) {
        kernels::SkinnyGemmCpu(p.x, p.w, p.y, p.rows, p.n, p.k, begin, end);
      });
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p.rows, p.n, p.k,
                  1.0f, p.x, p.k, p.w, p.k, 0.0f, p.y, p.n);
    }
    if (p.epilogue == Epilogue::kGeluTanh) {
      ParallelFor(p.rows, 8, [&](int64_t begin, int64_t end) {
        kernels::BiasGeluCpu(
            {p.y + begin * p.n, p.bias, p.y + begin * p.n, end - begin, p.n});
      });
    } else if (p.bias != nullptr) {
      ParallelFor(p.rows, 64, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          float* y = p.y + r * p.n;
          for (int64_t c = 0; c < p.n; ++c) y[c] += p.bias[c];
        }
      });
    }
    return absl::OkStatus();
  }

  absl::Status AddLayerNorm(const kernels::AddLayerNormParams& p) override {
    kernels::AddLayerNormCpu(p);
    return absl::OkStatus();
  }
  absl::Status H3KernelSpectrum(const kernels::H3Weights& w, int nfft,
                                float* out) override {
    kernels::H3KernelSpectrum(w, nfft, out);
    return absl::OkStatus();
  }
  absl::Status H3Prefill(const kernels::H3PrefillParams& p) override {
    if (p.nfft < 2 * p.length) {
      return absl::InvalidArgumentError(absl::StrCat(
          "H3 prefill of ", p.length, " tokens needs nfft >= ", 2 * p.length,
          ", got ", p.nfft));
    }
    kernels::H3PrefillCpu(p);
    return absl::OkStatus();
  }
  absl::Status H3Step(const kernels::H3StepParams& p) override {
    kernels::H3StepCpu(p);
    return absl::OkStatus();
  }
  absl::Status Attention(const kernels::AttentionParams& p) override {
    if (p.start + p.length > p.cache.capacity) {
      return absl::InvalidArgumentError(absl::StrCat(
          "attention: positions up to ", p.start + p.length,
          " exceed the KV cache's capacity of ", p.cache.capacity));
    }
    kernels::AttentionCpu(p);
    return absl::OkStatus();
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend() {
  return std::make_unique<CpuBackend>();
}

}  // namespace h3::engine
