// The CPU backend: every op on the host, in fp32.
#include "engine/cpu/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/half_float.h"
#include "base/parallel.h"
#include "base/status_macros.h"
#include "engine/backend.h"
#include "kernels/bias_gelu.h"
#include "kernels/cpu/gemm.h"

namespace h3::engine {
namespace {

void FreeHost(float* p) { ::operator delete[](p, std::align_val_t(64)); }
void FreeHostBytes(void* p) { ::operator delete[](p, std::align_val_t(64)); }
void FreeNothing(void*) {}

// The least work of a thread's share of a Linear, so that small products
// run on fewer threads: 2^21 multiply-adds, ~40 us on one Zen 4 core, about
// what waking a ParallelFor worker cost on a 2-core VM. There (h3_gemm_bench)
// splitting the out projection (768 x 768) in two was 2x slower than one
// thread at 1 and 4 rows, while 4 rows of qkv (2304 x 768) and 16 rows of
// out gained 13-20%.
constexpr int64_t kLinearFmasPerThread = int64_t{1} << 21;

// 64-byte aligned host memory; null when out of memory.
void* AllocateHost(int64_t bytes) {
  return ::operator new[](std::max<int64_t>(bytes, 1), std::align_val_t(64),
                          std::nothrow);
}

absl::Status OutOfMemory(int64_t bytes) {
  return absl::ResourceExhaustedError(
      absl::StrCat("cannot allocate ", bytes, " bytes of host memory"));
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(ElementType activations) : activations_(activations) {
    openblas_set_num_threads(NumThreads());
  }

  std::string name() const override { return "cpu"; }
  ElementType weight_type() const override { return ElementType::kF32; }
  ElementType activation_type() const override { return activations_; }

  absl::StatusOr<Buffer> Allocate(int64_t floats) override {
    if (floats < 0) return absl::InvalidArgumentError("negative allocation");
    float* p = static_cast<float*>(AllocateHost(floats * sizeof(float)));
    if (p == nullptr) return OutOfMemory(floats * sizeof(float));
    return Buffer(p, floats, &FreeHost);
  }

  // On the CPU a Matrix's data() is not W [rows, cols] row-major but its
  // packed form for GemmCpu (kernels/cpu/gemm.h: panels of 32 rows of W,
  // GemmPackedFloats(rows, cols) floats), packed once here. Linear reads it
  // as is; Embedding reads rows back through GemmUnpackRow, so a tied
  // embedding / LM-head matrix is stored once.
  absl::StatusOr<Matrix> UploadMatrix(const float* host, int64_t rows,
                                      int64_t cols) override {
    if (rows < 0 || cols < 0)
      return absl::InvalidArgumentError("negative size");
    const int64_t bytes = kernels::GemmPackedFloats(rows, cols) * sizeof(float);
    void* p = AllocateHost(bytes);
    if (p == nullptr) return OutOfMemory(bytes);
    kernels::GemmPack(host, rows, cols, static_cast<float*>(p));
    return Matrix(p, rows, cols, ElementType::kF32, &FreeHostBytes);
  }

  absl::StatusOr<Staging> AllocateStaging(int64_t bytes) override {
    if (bytes < 0) return absl::InvalidArgumentError("negative allocation");
    void* p = AllocateHost(bytes);
    if (p == nullptr) return OutOfMemory(bytes);
    return Staging(p, p, bytes, &FreeHostBytes, &FreeNothing);
  }
  absl::Status Upload(const Staging&, int64_t) override {
    return absl::OkStatus();  // the host side is the device side
  }
  absl::Status Download(const Staging& staging, int64_t bytes) override {
    if (bytes > staging.bytes()) {
      return absl::InvalidArgumentError("download beyond the staging area");
    }
    return absl::OkStatus();  // the host side is the device side
  }

  absl::Status CopyFromHost(const float* host, int64_t n, float* dst) override {
    std::memcpy(dst, host, n * sizeof(float));
    return absl::OkStatus();
  }
  absl::Status CopyToHost(const float* src, int64_t n, float* host) override {
    std::memcpy(host, src, n * sizeof(float));
    return absl::OkStatus();
  }
  absl::Status CopyBytes(const void* src, int64_t bytes, void* dst) override {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status Fill(float* dst, int64_t n, float value) override {
    std::fill(dst, dst + n, value);
    return absl::OkStatus();
  }

  absl::Status Embedding(const int32_t* ids, int64_t n, const Matrix& matrix,
                         float* out) override {
    const float* packed = static_cast<const float*>(matrix.data());
    const int64_t cols = matrix.cols();
    for (int64_t i = 0; i < n; ++i) {
      kernels::GemmUnpackRow(packed, matrix.rows(), cols, ids[i],
                             out + i * cols);
    }
    return absl::OkStatus();
  }

  // 16-bit x and bias are widened into x32_ and bias32_ first; a 16-bit y
  // is computed into y32_ and rounded once at the end.
  absl::Status Linear(const LinearParams& params) override {
    if (const std::string error = params.BiasTypeError(); !error.empty()) {
      return absl::InvalidArgumentError(error);
    }
    Params p{params};
    if (p.rows == 0 || p.n == 0) return absl::OkStatus();
    if (params.bias != nullptr && params.bias_type != ElementType::kF32) {
      bias32_.resize(p.n);
      LoadFloats(params.bias, params.bias_type, 0, p.n, bias32_.data());
      p.bias = bias32_.data();
    }
    if (params.x_type != ElementType::kF32) {
      x32_.resize(p.rows * p.k);
      LoadFloats(params.x, params.x_type, 0, p.rows * p.k, x32_.data());
      p.x = x32_.data();
    }
    if (params.y_type != ElementType::kF32) {
      y32_.resize(p.rows * p.n);
      p.y = y32_.data();
    }
    LinearFloats(p);
    if (params.y_type != ElementType::kF32) {
      StoreFloats(p.y, p.rows * p.n, params.y, params.y_type, 0);
    }
    return absl::OkStatus();
  }
  absl::Status AddLayerNorm(const kernels::AddLayerNormParams& p) override {
    kernels::AddLayerNormCpu(p);
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<H3Layer>> MakeH3Layer(
      const kernels::H3Weights& weights) override {
    return MakeCpuH3Layer(weights, activations_);
  }

  absl::Status Attention(const AttentionPrefillParams& p) override {
    H3_RETURN_IF_ERROR(CheckAttentionPrefill(p));
    int64_t row = 0;
    for (size_t i = 0; i < p.segments.size(); ++i) {
      kernels::AttentionCpu(AttentionSegmentParams(p, i, row));
      row += p.segments[i].length;
    }
    return absl::OkStatus();
  }
  absl::Status AttentionDecode(const kernels::AttentionDecodeParams& p,
                               int64_t) override {
    for (int b = 0; b < p.batch; ++b) {
      if (p.positions[b] >= p.caches[b].capacity) {
        return absl::InvalidArgumentError(absl::StrCat(
            "attention: position ", p.positions[b],
            " is beyond the KV cache's capacity of ", p.caches[b].capacity));
      }
    }
    kernels::AttentionDecodeCpu(p);
    return absl::OkStatus();
  }
  absl::Status Sample(const kernels::SampleParams& p) override {
    // Rows are independent: each thread samples a range of them.
    ParallelFor(p.batch, 1, [&](int64_t begin, int64_t end) {
      kernels::SampleParams part = p;
      part.batch = static_cast<int>(end - begin);
      part.logits += begin * p.row_stride;
      part.rows += begin;
      if (part.histories != nullptr) part.histories += begin;
      part.ids += begin;
      if (part.logprobs != nullptr) part.logprobs += begin;
      kernels::SampleCpu(part);
    });
    return absl::OkStatus();
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }
  absl::StatusOr<int64_t> FreeMemoryBytes() override {
    return HostAvailableBytes();
  }

 private:
  // LinearParams with the matrix's sizes and packed data spelled out, fp32.
  struct Params {
    explicit Params(const LinearParams& p)
        : x(static_cast<const float*>(p.x)),
          w(static_cast<const float*>(p.w->data())),  // GemmPack form
          bias(static_cast<const float*>(p.bias)),    // fp32 until Linear
          y(static_cast<float*>(p.y)),
          rows(p.rows),
          n(p.w->rows()),
          k(p.w->cols()),
          epilogue(p.epilogue) {}
    const float* x;
    const float* w;
    const float* bias;
    float* y;
    int64_t rows, n, k;
    Epilogue epilogue;
  };

  // y = epilogue(x W^T + bias), all fp32.
  void LinearFloats(const Params& p) {
    // y = x W^T for any number of rows (decode rows, prefill chunks, or both
    // in one step) by one kernel whose every output is the same FMA chain
    // whatever the rows and the split: a row's result never depends on the
    // other rows of the step. Threads take ranges of W's 32-column panels,
    // each at least kLinearFmasPerThread multiply-adds of work.
    const int64_t panel_fmas =
        p.rows * std::max<int64_t>(p.k, 1) * kernels::kGemmPanel;
    const int64_t grain =
        std::max<int64_t>(1, kLinearFmasPerThread / panel_fmas);
    ParallelFor(kernels::GemmPanels(p.n), grain,
                [&](int64_t begin, int64_t end) {
                  kernels::GemmCpu(p.x, p.w, p.y, p.rows, p.n, p.k, begin, end);
                });
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
  }

  const ElementType activations_;
  // Linear's fp32 copies of 16-bit x, y and bias.
  std::vector<float> x32_, y32_, bias32_;
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend(ElementType activations) {
  return std::make_unique<CpuBackend>(activations);
}

}  // namespace h3::engine
