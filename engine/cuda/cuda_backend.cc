// The CUDA backend (engine/cuda/cuda_backend.h).
#include "engine/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/cuda/cuda_status.h"
#include "engine/product_choices.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_major.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/kernel_image.h"
#include "kernels/cuda/launch_timing.h"
#include "kernels/cuda/linear.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/skinny_gemm.h"
#include "kernels/cuda/stream_gemm.h"
#include "kernels/cuda/stream_split_gemm.h"
#include "kernels/cuda/tile_gemm.h"
#include "kernels/fallbacks.h"
#include "loader/dtype.h"

namespace h3::engine::cuda {
namespace {

void FreeDeviceFloats(float* p) { cudaFree(p); }
void FreeDevice(void* p) { cudaFree(p); }
void FreePinned(void* p) { cudaFreeHost(p); }

absl::Status LinearError(const std::string& message) {
  if (message.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("linear: ", message));
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, ElementType type, const BackendOptions& options)
      : device_(device),
        type_(type),
        activation_type_(ResolveHalfActivations(options.half_activations, type)
                             ? type
                             : ElementType::kF32),
        flash_attention_(ResolveAttention(options.attention, type) ==
                         AttentionKernel::kFlash),
        h3_prefill_(options.h3_prefill),
        batch_invariant_(options.batch_invariant),
        invariant_kernel_(options.batch_invariant_kernel),
        pinned_linear_(options.batch_invariant &&
                       options.batch_invariant_kernel ==
                           BatchInvariantKernel::kCublasLt),
        decode_products_(options.decode_products),
        measured_(options.decode_products == DecodeProducts::kMeasured),
        tune_products_(options.decode_products ==
                           DecodeProducts::kCublasLtTuned ||
                       options.decode_products == DecodeProducts::kMeasured),
        pdl_requested_(options.pdl) {}

  ~CudaBackend() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    DropGraphs();
    for (void* p : workspaces_) cudaFree(p);
    linears_.clear();
    prefill_scratch_.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init() {
    H3_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    int major = 0;
    H3_CUDA_RETURN_IF_ERROR(kernels::CurrentDeviceMajor(&major));
    sm90_ = kernels::CurrentImageTakesSm90();
    pdl_ = pdl_requested_ && sm90_ && !kernels::KernelFallback("pdl");
    if (batch_invariant_ &&
        (invariant_kernel_ == BatchInvariantKernel::kStreamSplit ||
         invariant_kernel_ == BatchInvariantKernel::kTile) &&
        !sm90_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--batch-invariant-kernel ",
          BatchInvariantKernelName(invariant_kernel_),
          " runs on thread-block clusters: a device of compute capability 9.0 "
          "or later and a build for it (",
          name(), " is ", major,
          ".x; CMAKE_CUDA_ARCHITECTURES must hold 90a); use "
          "--batch-invariant-kernel stream or cublaslt"));
    }
    H3_CUDA_RETURN_IF_ERROR(
        cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    prefill_scratch_ = std::make_unique<PrefillScratch>(stream_);
    return GrowLinear(int64_t{1} << 20, 0);
  }

  std::string name() const override { return absl::StrCat("cuda:", device_); }

  absl::Status BindThread() override {
    H3_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    return absl::OkStatus();
  }
  ElementType weight_type() const override { return type_; }
  ElementType activation_type() const override { return activation_type_; }

  absl::StatusOr<Buffer> Allocate(int64_t floats) override {
    if (floats < 0) return absl::InvalidArgumentError("negative allocation");
    void* p = nullptr;
    H3_RETURN_IF_ERROR(DeviceAlloc(std::max<int64_t>(floats, 1) * 4, &p));
    return Buffer(static_cast<float*>(p), floats, &FreeDeviceFloats);
  }

  absl::Status CopyFromHost(const float* host, int64_t n, float* dst) override {
    H3_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, host, n * sizeof(float),
                                            cudaMemcpyHostToDevice, stream_));
    return Synchronize();
  }
  absl::Status CopyToHost(const float* src, int64_t n, float* host) override {
    H3_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, src, n * sizeof(float),
                                            cudaMemcpyDeviceToHost, stream_));
    return Synchronize();
  }
  absl::Status CopyBytes(const void* src, int64_t bytes, void* dst) override {
    H3_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
    return absl::OkStatus();
  }
  absl::Status Fill(float* dst, int64_t n, float value) override {
    if (value == 0.0f) {
      H3_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(dst, 0, n * sizeof(float), stream_));
      return absl::OkStatus();
    }
    const std::vector<float> host(n, value);
    return CopyFromHost(host.data(), n, dst);
  }

  absl::StatusOr<Matrix> UploadMatrix(const float* host, int64_t rows,
                                      int64_t cols) override {
    if (rows < 0 || cols < 0)
      return absl::InvalidArgumentError("negative size");
    const int64_t n = rows * cols;
    const ElementType to = type_;
    std::vector<uint8_t> converted(n * ElementSize(to));
    H3_RETURN_IF_ERROR(loader::ConvertFloats(
        ElementType::kF32,
        absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(host),
                                  n * sizeof(float)),
        to, absl::MakeSpan(converted)));
    void* p = nullptr;
    H3_RETURN_IF_ERROR(DeviceAlloc(std::max<size_t>(converted.size(), 1), &p));
    Matrix matrix(p, rows, cols, type_, &FreeDevice);
    H3_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(p, converted.data(),
                                            converted.size(),
                                            cudaMemcpyHostToDevice, stream_));
    H3_RETURN_IF_ERROR(Synchronize());
    return matrix;
  }

  absl::StatusOr<Staging> AllocateStaging(int64_t bytes) override {
    if (bytes < 0) return absl::InvalidArgumentError("negative allocation");
    bytes = std::max<int64_t>(bytes, 1);
    void* host = nullptr;
    H3_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&host, bytes, cudaHostAllocDefault));
    void* device = nullptr;
    const absl::Status status = DeviceAlloc(bytes, &device);
    if (!status.ok()) {
      cudaFreeHost(host);
      return status;
    }
    return Staging(host, device, bytes, &FreePinned, &FreeDevice);
  }
  absl::Status Upload(const Staging& staging, int64_t bytes) override {
    return CopyStaging(staging, bytes, cudaMemcpyHostToDevice);
  }
  absl::Status Download(const Staging& staging, int64_t bytes) override {
    return CopyStaging(staging, bytes, cudaMemcpyDeviceToHost);
  }
  // The first `bytes` of a staging area from one side to the other, enqueued.
  // Pinned memory: a plain asynchronous copy, which a graph captures as a
  // node (pageable memory took a driver bounce and a capture cannot hold it).
  absl::Status CopyStaging(const Staging& staging, int64_t bytes,
                           cudaMemcpyKind kind) {
    const bool up = kind == cudaMemcpyHostToDevice;
    if (bytes > staging.bytes()) {
      return absl::InvalidArgumentError(
          absl::StrCat(up ? "upload" : "download", " beyond the staging area"));
    }
    H3_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        up ? staging.device() : staging.host(),
        up ? staging.host() : staging.device(), bytes, kind, stream_));
    return absl::OkStatus();
  }

  absl::Status Embedding(const int32_t* ids, int64_t n, const Matrix& table,
                         float* out) override {
    H3_CUDA_RETURN_IF_ERROR(kernels::EmbeddingCuda(
        ids, n, table.data(), table.type(), table.cols(), out, stream_));
    return absl::OkStatus();
  }

  absl::Status Linear(const LinearParams& p) override {
    if (const std::string error = p.BiasTypeError(); !error.empty()) {
      return absl::InvalidArgumentError(error);
    }
    // No rows (the LM head of a step of prompt chunks that all end
    // mid-prompt): nothing to run, and nothing for measured_ to time.
    if (p.rows == 0) return absl::OkStatus();
    if (batch_invariant_ &&
        invariant_kernel_ != BatchInvariantKernel::kCublasLt) {
      return PiecewiseLinear(p, invariant_kernel_);
    }
    if (kernels::SkinnyGemmParams params;
        measured_ && OnStreamKernel(p, kernels::kStreamMaxRows, &params)) {
      return MeasuredLinear(p, params);
    }
    // The rule never looks at the launch order: a product runs on the same
    // kernel with --pdl on or off and with the profiler on or off, so the
    // logits keep their bits (CudaPdlTest, CudaProfilerTest).
    if (kernels::SkinnyGemmParams params;
        OnStreamKernel(p, StreamProductRows(decode_products_), &params)) {
      H3_CUDA_RETURN_IF_ERROR(
          kernels::StreamGemmCuda(params, stream_, Order()));
      return absl::OkStatus();
    }
    if (kernels::SkinnyGemmParams params;
        !kernels::KernelFallback("stream-split") &&
        OnStreamKernel(p, SplitProductRows(decode_products_), &params)) {
      // NotSupported (a device before 9.0) comes before any launch:
      // cuBLASLt serves instead.
      const cudaError_t err =
          kernels::StreamSplitGemmCuda(params, stream_, Order());
      if (err != cudaErrorNotSupported) {
        H3_CUDA_RETURN_IF_ERROR(err);
        return absl::OkStatus();
      }
    }
    if (kernels::SkinnyGemmParams params;
        !kernels::KernelFallback("tile") &&
        OnStreamKernel(p, TileProductRows(decode_products_), &params,
                       kernels::TileGemmCheck)) {
      // As the split kernel's: NotSupported before any launch.
      const cudaError_t err = kernels::TileGemmCuda(params, stream_, Order());
      if (err != cudaErrorNotSupported) {
        H3_CUDA_RETURN_IF_ERROR(err);
        return absl::OkStatus();
      }
    }
    return CublasLtLinear(p);
  }

  // `p` on LinearCuda (cuBLASLt, with its epilogues and roundings).
  absl::Status CublasLtLinear(const LinearParams& p) {
    kernels::LinearCudaParams params;
    params.x = p.x;
    params.x_type = p.x_type;
    params.w = p.w->data();
    params.w_type = p.w->type();
    params.bias = p.bias;
    params.bias_type = p.bias_type;
    params.y = p.y;
    params.y_type = p.y_type;
    params.rows = p.rows;
    params.n = p.w->rows();
    params.k = p.w->cols();
    params.gelu = p.epilogue == Epilogue::kGeluTanh;
    // Scratch of the LinearCuda: fp32 x rounded to 16-bit weights' type, and
    // the fp32 D of the routes that round it into a 16-bit y afterwards.
    const bool round_x = params.w_type != ElementType::kF32 &&
                         params.x_type == ElementType::kF32;
    const int64_t need_k = round_x ? p.rows * params.k : 0;
    int64_t need_n = 0;
    H3_RETURN_IF_ERROR(
        LinearError(linears_.back()->ScratchDElements(params, &need_n)));
    if (need_k > linear_k_ || need_n > linear_n_) {
      H3_RETURN_IF_ERROR(GrowLinear(need_k, need_n));
    }
    return LinearError(linears_.back()->Run(params, stream_));
  }

  absl::Status AddLayerNorm(const kernels::AddLayerNormParams& p) override {
    H3_CUDA_RETURN_IF_ERROR(kernels::AddLayerNormCuda(p, stream_, Order()));
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<H3Layer>> MakeH3Layer(
      const kernels::H3Weights& weights) override {
    return MakeCudaH3Layer(weights, type_, h3_prefill_, pdl_, stream_, *this,
                           *prefill_scratch_);
  }

  absl::Status Attention(const AttentionPrefillParams& p) override {
    H3_RETURN_IF_ERROR(CheckAttentionPrefill(p));
    if (p.segments.empty()) return absl::OkStatus();
    if (flash_attention_ && kernels::FlashAttentionSupports(p.shape, type_)) {
      // Every segment in one launch.
      flash_seqs_.clear();
      int64_t row = 0;
      for (const AttentionSegment& s : p.segments) {
        flash_seqs_.push_back({s.start, s.length, row, s.cache});
        row += s.length;
      }
      kernels::flash::Params flash;
      flash.shape = p.shape;
      flash.type = type_;
      flash.sequences = static_cast<int>(flash_seqs_.size());
      flash.seqs = flash_seqs_.data();
      flash.qkv = p.qkv;
      flash.inv_freq = p.inv_freq;
      flash.out = p.out;
      flash.io_type = p.io_type;
      const cudaError_t err =
          kernels::FlashAttentionPrefillCuda(flash, stream_);
      // NotSupported (a device before sm_80, misaligned caches) comes before
      // any launch: the fp32 kernel below serves instead.
      if (err != cudaErrorNotSupported) {
        H3_CUDA_RETURN_IF_ERROR(err);
        return absl::OkStatus();
      }
    }
    // Every segment in one call (two launches per 32 segments).
    fma_segs_.clear();
    int64_t row = 0;
    for (const AttentionSegment& s : p.segments) {
      fma_segs_.push_back({s.start, s.length, row, s.cache});
      row += s.length;
    }
    H3_CUDA_RETURN_IF_ERROR(kernels::AttentionPrefillPackedCuda(
        p.shape, fma_segs_.data(), static_cast<int>(fma_segs_.size()), p.qkv,
        p.inv_freq, p.out, p.io_type, stream_));
    return absl::OkStatus();
  }

  absl::Status AttentionDecode(const kernels::AttentionDecodeParams& p,
                               int64_t capacity) override {
    const size_t bytes =
        kernels::AttentionDecodeWorkspaceBytes(p.shape, p.batch, capacity);
    H3_RETURN_IF_ERROR(ReserveWorkspace(bytes));
    H3_CUDA_RETURN_IF_ERROR(kernels::AttentionDecodeCuda(
        p, capacity, workspaces_.back(), workspace_bytes_, stream_, Order()));
    return absl::OkStatus();
  }

  absl::Status Sample(const kernels::SampleParams& p) override {
    H3_RETURN_IF_ERROR(
        ReserveWorkspace(kernels::SampleWorkspaceBytes(p.batch, p.vocab_size)));
    H3_CUDA_RETURN_IF_ERROR(kernels::SampleCuda(
        p, workspaces_.back(), workspace_bytes_, stream_, Order()));
    return absl::OkStatus();
  }

  absl::Status Synchronize() override {
    H3_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> FreeMemoryBytes() override {
    size_t free_bytes = 0, total_bytes = 0;
    H3_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    H3_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    return static_cast<int64_t>(free_bytes);
  }

  std::string DescribeProductChoices() const override {
    return choices_.Describe();
  }

  bool SupportsGraphs() const override { return true; }

  absl::StatusOr<std::unique_ptr<ProfileClock>> MakeProfileClock() override {
    return MakeCudaProfileClock(stream_);
  }

  absl::Status BeginCapture() override {
    if (profiler() != nullptr) {
      return absl::FailedPreconditionError(
          "no graph capture while the profiler is on");
    }
    H3_CUDA_RETURN_IF_ERROR(
        cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    return absl::OkStatus();
  }

  absl::StatusOr<int> EndCapture() override {
    cudaGraph_t graph = nullptr;
    cudaError_t err = cudaStreamEndCapture(stream_, &graph);
    cudaGraphExec_t exec = nullptr;
    if (err == cudaSuccess) {
      err = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
    }
    // The runner goes on without the graph: the error must not stay the
    // runtime's last one, which the next launch's check would report.
    if (err != cudaSuccess) cudaGetLastError();
    H3_CUDA_RETURN_IF_ERROR(err);
    graphs_.push_back(exec);
    return static_cast<int>(graphs_.size()) - 1;
  }

  absl::Status Replay(int graph) override {
    if (graph < 0 || graph >= static_cast<int>(graphs_.size()) ||
        graphs_[graph] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("no graph ", graph));
    }
    H3_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graphs_[graph], stream_));
    return absl::OkStatus();
  }

  void DropGraphs() override {
    for (cudaGraphExec_t exec : graphs_) {
      if (exec != nullptr) cudaGraphExecDestroy(exec);
    }
    graphs_.clear();
  }

 private:
  kernels::LaunchOrder Order() const { return DecodeLaunchOrder(pdl_, *this); }

  // Whether Linear runs `p` in one piece on StreamGemmCuda (max_rows
  // StreamProductRows), StreamSplitGemmCuda (SplitProductRows) or, with
  // `check` TileGemmCheck, TileGemmCuda (TileProductRows): without
  // batch_invariant_, at most max_rows rows, a product the kernel takes (the
  // others stay on cuBLASLt); then its operands in *params.
  bool OnStreamKernel(
      const LinearParams& p, int64_t max_rows,
      kernels::SkinnyGemmParams* params,
      const char* (*check)(const kernels::StreamGemmParams&,
                           bool) = kernels::StreamGemmCheck) const {
    if (batch_invariant_ || p.rows > max_rows) return false;
    *params = ProductParams(p);
    return check(*params, true)[0] == '\0';
  }

  // A product under --decode-products measured (one the stream kernels
  // take, at most 64 rows): on the kernel choices_ holds for its key; at the
  // key's first call outside graph capture, each candidate (cuBLASLt,
  // StreamGemmCuda; on 9.0 and later StreamSplitGemmCuda, and TileGemmCuda
  // for x of W's type) is timed on this call's operands
  // (kernels/cuda/launch_timing.h: the L2 flushed before each call, the median
  // of 5) and the fastest kept; under capture before that, the kAuto rule.
  absl::Status MeasuredLinear(const LinearParams& p,
                              const kernels::SkinnyGemmParams& params) {
    const ProductKey key = ProductKey::Of(params);
    if (const ProductKernel* chosen = choices_.Find(key)) {
      return RunProduct(*chosen, p, params);
    }
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    H3_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream_, &capture));
    if (capture != cudaStreamCaptureStatusNone) {
      return RunProduct(p.rows <= StreamProductRows(DecodeProducts::kAuto)
                            ? ProductKernel::kStream
                            : ProductKernel::kCublasLt,
                        p, params);
    }
    std::vector<ProductKernel> candidates = {ProductKernel::kCublasLt,
                                             ProductKernel::kStream};
    if (sm90_ && !kernels::KernelFallback("stream-split")) {
      candidates.push_back(ProductKernel::kSplit);
    }
    if (sm90_ && !kernels::KernelFallback("tile") &&
        kernels::TileGemmCheck(params, true)[0] == '\0') {
      candidates.push_back(ProductKernel::kTile);
    }
    const kernels::DeviceBuffer flush = kernels::L2FlushBuffer();
    std::vector<KernelTime> times;
    for (const ProductKernel kernel : candidates) {
      float ms = -1.0f;
      const std::string error = kernels::MedianLaunchMs(
          stream_, flush, [&] { return RunProduct(kernel, p, params).ok(); },
          &ms);
      if (!error.empty()) {
        return absl::InternalError(absl::StrCat(
            "timing the ", ProductKernelName(kernel), " product: ", error));
      }
      times.push_back({kernel, ms});
    }
    return RunProduct(choices_.Choose(key, times), p, params);
  }

  // `p` (with `params`, its operands) on `kernel`.
  absl::Status RunProduct(ProductKernel kernel, const LinearParams& p,
                          const kernels::SkinnyGemmParams& params) {
    switch (kernel) {
      case ProductKernel::kStream:
        H3_CUDA_RETURN_IF_ERROR(
            kernels::StreamGemmCuda(params, stream_, Order()));
        return absl::OkStatus();
      case ProductKernel::kSplit:
        H3_CUDA_RETURN_IF_ERROR(
            kernels::StreamSplitGemmCuda(params, stream_, Order()));
        return absl::OkStatus();
      case ProductKernel::kTile:
        H3_CUDA_RETURN_IF_ERROR(
            kernels::TileGemmCuda(params, stream_, Order()));
        return absl::OkStatus();
      default:
        return CublasLtLinear(p);
    }
  }

  // The operands of `p` for SkinnyGemmCuda or StreamGemmCuda, all its rows.
  static kernels::SkinnyGemmParams ProductParams(const LinearParams& p) {
    kernels::SkinnyGemmParams params;
    params.x = p.x;
    params.x_type = p.x_type;
    params.w = p.w->data();
    params.w_type = p.w->type();
    params.bias = p.bias;
    params.bias_type = p.bias_type;
    params.y = p.y;
    params.y_type = p.y_type;
    params.rows = p.rows;
    params.n = p.w->rows();
    params.k = p.w->cols();
    params.gelu = p.epilogue == Epilogue::kGeluTanh;
    return params;
  }

  // The batch-invariant product by SkinnyGemmCuda, StreamGemmCuda,
  // StreamSplitGemmCuda or TileGemmCuda (`kernel`), rows in pieces of 64
  // (kSkinnyMaxRows = kStreamMaxRows), each row's result the same whatever the
  // piece holds. InvalidArgument, naming the product and the rule, where the
  // kernel does not take it.
  absl::Status PiecewiseLinear(const LinearParams& p,
                               BatchInvariantKernel kernel) {
    static_assert(kernels::kSkinnyMaxRows == kernels::kStreamMaxRows);
    const bool stream = kernel != BatchInvariantKernel::kSkinny;
    kernels::SkinnyGemmParams params = ProductParams(p);
    // fp32 x, which the tile kernel does not take, goes to StreamGemmCuda:
    // by its types alone, whatever the rows.
    if (kernel == BatchInvariantKernel::kTile &&
        params.x_type != params.w_type) {
      kernel = BatchInvariantKernel::kStream;
    }
    const int64_t x_size = ElementSize(p.x_type),
                  y_size = ElementSize(p.y_type);
    for (int64_t first = 0; first < p.rows; first += kernels::kSkinnyMaxRows) {
      params.x = static_cast<const char*>(p.x) + first * params.k * x_size;
      params.y = static_cast<char*>(p.y) + first * params.n * y_size;
      params.rows = std::min(kernels::kSkinnyMaxRows, p.rows - first);
      const char* broken = stream ? kernels::StreamGemmCheck(params, true)
                                  : kernels::SkinnyGemmCheck(params);
      if (broken[0] != '\0') {
        return absl::InvalidArgumentError(absl::StrCat(
            stream ? "stream" : "batch-invariant", " linear (", params.n, " x ",
            params.k, ", ", ElementTypeName(params.w_type), "): ", broken));
      }
      H3_CUDA_RETURN_IF_ERROR(
          kernel == BatchInvariantKernel::kSkinny
              ? kernels::SkinnyGemmCuda(params, stream_)
          : kernel == BatchInvariantKernel::kStream
              ? kernels::StreamGemmCuda(params, stream_, Order())
          : kernel == BatchInvariantKernel::kTile
              ? kernels::TileGemmCuda(params, stream_, Order())
              : kernels::StreamSplitGemmCuda(params, stream_, Order()));
    }
    return absl::OkStatus();
  }

  absl::Status DeviceAlloc(int64_t bytes, void** p) {
    const cudaError_t err = cudaMalloc(p, bytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot allocate ", bytes, " bytes of GPU memory on ", name()));
    }
    H3_CUDA_RETURN_IF_ERROR(err);
    return absl::OkStatus();
  }

  // Captured graphs point at workspaces and scratch: growth keeps the old
  // ones alive (until the backend dies) rather than freeing them.
  absl::Status ReserveWorkspace(size_t bytes) {
    if (bytes <= workspace_bytes_ && !workspaces_.empty()) {
      return absl::OkStatus();
    }
    bytes = std::max(bytes, 2 * workspace_bytes_);
    void* p = nullptr;
    H3_RETURN_IF_ERROR(DeviceAlloc(std::max<size_t>(bytes, 256), &p));
    workspaces_.push_back(p);
    workspace_bytes_ = bytes;
    return absl::OkStatus();
  }

  // A new LinearCuda whose scratch holds at least rows * k = `k` and
  // rows * n = `n` elements (each at least doubled when it grows).
  absl::Status GrowLinear(int64_t k, int64_t n) {
    kernels::LinearCuda::Options options;
    options.pinned_algorithms = pinned_linear_;
    options.tune_algorithms = tune_products_;
    options.max_rows_times_k =
        k > linear_k_ ? std::max(k, 2 * linear_k_) : linear_k_;
    options.max_rows_times_n =
        n > linear_n_ ? std::max(n, 2 * linear_n_) : linear_n_;
    std::unique_ptr<kernels::LinearCuda> linear;
    H3_RETURN_IF_ERROR(
        LinearError(kernels::LinearCuda::Create(options, &linear)));
    linears_.push_back(std::move(linear));
    linear_k_ = options.max_rows_times_k;
    linear_n_ = options.max_rows_times_n;
    return absl::OkStatus();
  }

  int device_;
  ElementType type_;
  ElementType activation_type_;
  bool flash_attention_;  // prefill attention on tensor cores where possible
  H3PrefillKernel h3_prefill_;
  // One attention prefill call's segments, reused.
  std::vector<kernels::flash::Sequence> flash_seqs_;
  std::vector<kernels::AttentionSegmentCall> fma_segs_;
  std::unique_ptr<PrefillScratch> prefill_scratch_;  // the H3 layers'
  bool batch_invariant_;
  BatchInvariantKernel invariant_kernel_;  // with batch_invariant_
  // batch_invariant_ on cuBLASLt with pinned algorithms.
  bool pinned_linear_;
  // Which kernels take the decode products without batch_invariant_: how
  // many rows go to StreamGemmCuda (StreamProductRows), and to
  // StreamSplitGemmCuda where StreamGemmCuda does not take them
  // (SplitProductRows).
  DecodeProducts decode_products_;
  // --decode-products measured: products of at most 64 rows on the kernel
  // choices_ holds for them (MeasuredLinear).
  bool measured_;
  ProductChoices choices_;
  // The device and our kernels' image take 9.0's launches: overlap,
  // clusters (kernels::CurrentImageTakesSm90, at Init).
  bool sm90_ = false;
  // Products of <= 64 rows on cuBLASLt's fastest of a few algorithms, timed
  // at their first uncaptured call (LinearCuda::Options::tune_algorithms):
  // with cublaslt-tuned, and with measured, whose cuBLASLt candidate is
  // then that fastest algorithm (tuned at the candidate's untimed call).
  bool tune_products_;
  bool pdl_requested_;  // BackendOptions::pdl
  bool pdl_ = false;    // ... and the device takes it (Init)
  cudaStream_t stream_ = nullptr;
  std::vector<std::unique_ptr<kernels::LinearCuda>> linears_;  // last: current
  int64_t linear_k_ = 0, linear_n_ = 0;  // the last LinearCuda's scratch
  std::vector<void*> workspaces_;        // last: current
  size_t workspace_bytes_ = 0;
  std::vector<cudaGraphExec_t> graphs_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(
    int device, ElementType type, const BackendOptions& options) {
  if (options.half_activations.value_or(false) && type == ElementType::kF32) {
    return absl::InvalidArgumentError(
        "half activations take the weights' 16-bit type; the weights are "
        "fp32");
  }
  auto backend = std::make_unique<CudaBackend>(device, type, options);
  H3_RETURN_IF_ERROR(backend->Init());
  return backend;
}

}  // namespace h3::engine::cuda
