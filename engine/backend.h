#ifndef H3_ENGINE_BACKEND_H_
#define H3_ENGINE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/element_type.h"
#include "engine/profiler.h"
#include "kernels/attention.h"
#include "kernels/h3.h"
#include "kernels/layer_norm.h"
#include "kernels/sampling.h"

namespace h3::engine {

// fp32 memory in a backend's space: host memory for the CPU backend, device
// memory for CUDA. Move-only; frees itself. Buffers of 16-bit elements
// (activations, K/V) are allocated as FloatsHolding floats.
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

// Whole floats that hold `elements` elements of `type`: the Allocate size of
// a Buffer of 16-bit (or fp32) elements.
inline int64_t FloatsHolding(int64_t elements, ElementType type) {
  return (elements * ElementSize(type) + 3) / 4;
}

// How weight matrices are stored (base/element_type.h: kF32, kF16 or kBF16;
// SSM states, SSM parameters and the residual stream are always fp32; the
// activations that feed products are fp32 or, with half activations, the
// weights' type: Backend::activation_type). The CPU backend stores fp32
// weights only.
//
// "fp32", "fp16", "bf16", or "auto" (unset: the backend's default).
// InvalidArgument for anything else.
absl::StatusOr<std::optional<ElementType>> ParseWeightType(
    const std::string& name);

// A weight matrix [rows, cols], row-major, in a backend's memory and in the
// backend's weight type. Move-only; frees itself.
class Matrix {
 public:
  using Deleter = void (*)(void*);
  Matrix() = default;
  Matrix(void* data, int64_t rows, int64_t cols, ElementType type,
         Deleter deleter)
      : data_(data, deleter), rows_(rows), cols_(cols), type_(type) {}

  const void* data() const { return data_.get(); }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  ElementType type() const { return type_; }

 private:
  std::unique_ptr<void, Deleter> data_{nullptr, nullptr};
  int64_t rows_ = 0, cols_ = 0;
  ElementType type_ = ElementType::kF32;
};

// Memory the host writes and the backend's ops read: pinned host memory with
// a device mirror on CUDA (Upload copies one to the other, as an enqueued
// operation that a captured graph repeats), one plain host block on the CPU.
// The model writes per-step arguments there (token ids, positions, state
// pointers) so that a captured decode step serves any batch of sequences.
class Staging {
 public:
  using Deleter = void (*)(void*);
  Staging() = default;
  Staging(void* host, void* device, int64_t bytes, Deleter free_host,
          Deleter free_device)
      : host_(host, free_host), device_(device, free_device), bytes_(bytes) {}

  void* host() const { return host_.get(); }
  void* device() const { return device_.get(); }
  int64_t bytes() const { return bytes_; }

 private:
  std::unique_ptr<void, Deleter> host_{nullptr, nullptr};
  std::unique_ptr<void, Deleter> device_{nullptr, nullptr};
  int64_t bytes_ = 0;
};

enum class Epilogue { kNone, kGeluTanh };

// y[rows, n] = epilogue(x[rows, k] W^T + bias) with W [n, k] row-major (the
// PyTorch Linear layout). bias may be null. y must not alias x. x and y each
// hold fp32 or the backend's activation_type(); the bias holds fp32 or, when
// y is 16-bit, y's type (bias_type; InvalidArgument naming bias_type for any
// other). A 16-bit y is the fp32 result rounded once (to nearest even) and a
// 16-bit bias is widened exactly: y = round(epilogue(acc + float(bias))),
// acc the product's fp32 accumulation.
struct LinearParams {
  const void* x = nullptr;
  const Matrix* w = nullptr;
  const void* bias = nullptr;
  void* y = nullptr;
  int64_t rows = 0;
  Epilogue epilogue = Epilogue::kNone;
  ElementType x_type = ElementType::kF32;
  ElementType y_type = ElementType::kF32;
  ElementType bias_type = ElementType::kF32;

  // "" when bias_type is one the op takes with y_type, else the message of
  // the InvalidArgument the backends return.
  std::string BiasTypeError() const {
    if (bias_type == ElementType::kF32 || bias_type == y_type) return "";
    return std::string("linear: bias_type ") + ElementTypeName(bias_type) +
           " with y_type " + ElementTypeName(y_type) +
           "; fp32, or y_type when y_type is 16-bit";
  }
};

// Attention prefill of several sequences' chunks in one call: segment i
// computes what kernels::AttentionParams{shape, start_i, length_i, qkv at
// row r_i, inv_freq, cache_i, out at row r_i, io_type} computes, where the
// segments' rows follow each other from row 0 (r_0 = 0, r_i+1 = r_i +
// length_i). Distinct segments belong to distinct sequences (caches).
struct AttentionSegment {
  int64_t start = 0;  // position of the chunk's first token
  int64_t length = 0;
  kernels::KvCache cache;  // REQUIRES start + length <= cache.capacity
};
struct AttentionPrefillParams {
  kernels::AttentionShape shape;
  absl::Span<const AttentionSegment> segments;
  const void* qkv = nullptr;        // [rows, 3, heads, head_dim] of io_type
  const float* inv_freq = nullptr;  // [rotary_dim / 2]; null without rotary
  void* out = nullptr;              // [rows, heads * head_dim] of io_type
  ElementType io_type = ElementType::kF32;
};

// InvalidArgument if a segment has length < 1 or reaches beyond its cache.
absl::Status CheckAttentionPrefill(const AttentionPrefillParams& params);
// The kernels' params of segment i, whose first row is `row`.
kernels::AttentionParams AttentionSegmentParams(
    const AttentionPrefillParams& params, size_t i, int64_t row);

// A sequence's chunk in a packed prefill: `length` >= 1 tokens at positions
// [start, start + length), from `state`.
struct H3Segment {
  int64_t start = 0;
  int64_t length = 0;
  kernels::H3State state;
};

// One H3 layer's inner operation (kernels/h3.h), prepared once per layer by
// Backend::MakeH3Layer: it owns the layer's SSM parameters in the backend and
// whatever its calls reuse (kernel spectra, FFT plans, scratch). Its inputs
// are the fused projection q|k|v: rows of 3 d values. qkv and out hold the
// backend's activation_type().
class H3Layer {
 public:
  virtual ~H3Layer() = default;
  // Prefill of several sequences' chunks in one call (packed rows): the
  // segments' rows follow each other in qkv [rows, 3d] and out [rows, d]
  // from row 0, rows their total length. Each segment goes in pieces of at
  // most `piece` tokens, each from the state the previous one left (the same
  // bits as one call per piece); its state is updated in place. Distinct
  // segments belong to distinct sequences.
  virtual absl::Status Prefill(absl::Span<const H3Segment> segments,
                               int64_t piece, const void* qkv, void* out) = 0;
  // One token of each of `batch` sequences: qkv [batch, 3d], out [batch, d];
  // `states` and the tokens' `positions` [batch] in backend memory (e.g. a
  // Staging's device side).
  virtual absl::Status Step(int batch, const void* qkv, void* out,
                            const kernels::H3State* states,
                            const int64_t* positions) = 0;
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
  virtual ElementType weight_type() const = 0;
  // The type of the activations that feed products (engine/model.h,
  // Activations: the norms' and mixers' outputs, q|k|v, the MLP's hidden
  // layer) and of the attention layers' K/V caches (engine/
  // sequence_memory.h): fp32, or with half activations the weights' 16-bit
  // type. Ops given such a tensor take its type from their params.
  virtual ElementType activation_type() const { return ElementType::kF32; }

  virtual absl::StatusOr<Buffer> Allocate(int64_t floats) = 0;
  // Copies between host memory and this backend's memory.
  virtual absl::Status CopyFromHost(const float* host, int64_t n,
                                    float* dst) = 0;
  virtual absl::Status CopyToHost(const float* src, int64_t n, float* host) = 0;
  // Copies within this backend's memory; the ranges must not overlap.
  virtual absl::Status CopyBytes(const void* src, int64_t bytes, void* dst) = 0;
  absl::Status Copy(const float* src, int64_t n, float* dst) {
    return CopyBytes(src, n * static_cast<int64_t>(sizeof(float)), dst);
  }
  virtual absl::Status Fill(float* dst, int64_t n, float value) = 0;
  // A weight matrix from host fp32 values, rounded to weight_type().
  virtual absl::StatusOr<Matrix> UploadMatrix(const float* host, int64_t rows,
                                              int64_t cols) = 0;
  virtual absl::StatusOr<Staging> AllocateStaging(int64_t bytes) = 0;
  // Enqueues the copy of staging's first `bytes` from host to device.
  virtual absl::Status Upload(const Staging& staging, int64_t bytes) = 0;
  // Enqueues the copy of staging's first `bytes` from device to host (a
  // captured graph repeats it); the host side holds them after
  // Synchronize. InvalidArgument past the staging area.
  virtual absl::Status Download(const Staging& staging, int64_t bytes) = 0;

  // out[i] = table[ids[i]] as fp32 for i < n; ids (backend memory, e.g. a
  // Staging's device side) in [0, table.rows()): the caller checks them.
  virtual absl::Status Embedding(const int32_t* ids, int64_t n,
                                 const Matrix& table, float* out) = 0;
  virtual absl::Status Linear(const LinearParams& params) = 0;
  virtual absl::Status AddLayerNorm(
      const kernels::AddLayerNormParams& params) = 0;
  // `weights` holds host pointers (as H3Discretize fills them); copied.
  virtual absl::StatusOr<std::unique_ptr<H3Layer>> MakeH3Layer(
      const kernels::H3Weights& weights) = 0;
  // Prefill of several sequences' chunks (packed rows), each what
  // kernels::AttentionParams computes for it (AttentionPrefillParams).
  virtual absl::Status Attention(const AttentionPrefillParams& params) = 0;
  // One token of each of a batch of sequences; the caches and positions
  // arrays in backend memory; every cache holds `capacity` positions.
  virtual absl::Status AttentionDecode(
      const kernels::AttentionDecodeParams& params, int64_t capacity) = 0;
  // One token per row (kernels/sampling.h: the CPU runs the specification,
  // CUDA its twin). Every pointer in `params`, and the TokenHistory arrays
  // they point to, in backend memory.
  virtual absl::Status Sample(const kernels::SampleParams& params) = 0;
  // Waits until all enqueued work is done.
  virtual absl::Status Synchronize() = 0;
  // Makes the calling thread run on this backend's device (CUDA: its GPU
  // the thread's current device). A thread other than the one that created
  // the backend calls it before its first call.
  virtual absl::Status BindThread() { return absl::OkStatus(); }
  // Bytes this backend could still allocate: the device's free memory on a
  // GPU, the host's available memory (MemAvailable) on the CPU.
  virtual absl::StatusOr<int64_t> FreeMemoryBytes() = 0;
  // What the backend chose at run time for its products (CUDA with
  // --decode-products measured: ProductChoices::Describe), for benchmark
  // reports; "" when it chose nothing.
  virtual std::string DescribeProductChoices() const { return ""; }

  // Graphs: the ops enqueued between BeginCapture and EndCapture are
  // recorded, not run; Replay(id) runs them again, reading the memory's
  // contents at the time of the replay (a Staging's host side included).
  // Backends without graphs return false from SupportsGraphs and
  // Unimplemented from the rest.
  virtual bool SupportsGraphs() const { return false; }
  virtual absl::Status BeginCapture();
  virtual absl::StatusOr<int> EndCapture();
  virtual absl::Status Replay(int graph);
  // Frees every graph (their ids become invalid).
  virtual void DropGraphs() {}

  // Per-operation timing (engine/profiler.h), off by default. While on, the
  // model and the runner time each op in a named range of profiler(), and
  // the runner runs every step op by op: no graph is captured or replayed
  // (a graph would hide the ops). Off: frees the profiler and its totals.
  // The clock's error, if any. Not while a graph is being captured.
  absl::Status EnableProfiler(bool on);
  // Null while off.
  Profiler* profiler() const { return profiler_.get(); }
  // The clock EnableProfiler uses: by default steady_clock, right for
  // backends whose ops have finished when they return (the CPU's).
  virtual absl::StatusOr<std::unique_ptr<ProfileClock>> MakeProfileClock();

 private:
  std::unique_ptr<Profiler> profiler_;
};

// The CPU backend: row-invariant matrix products (kernels/cpu/gemm.h),
// kissfft convolutions, the kernels' CPU twins, threads from
// base/parallel.h. `activations` (kF32, kF16 or kBF16) is its
// activation_type(): 16-bit activations on the CPU exist to test the model's
// half-activation path (the same roundings as the GPU's, around fp32
// arithmetic), not to serve.
std::unique_ptr<Backend> MakeCpuBackend(
    ElementType activations = ElementType::kF32);

// The host's MemAvailable (/proc/meminfo); Unavailable where it cannot be
// read.
absl::StatusOr<int64_t> HostAvailableBytes();

// Which kernel a CUDA backend runs prefill attention on. kFma: the fp32
// kernel. kFlash: the tensor-core FlashAttention-2 kernel
// (kernels/cuda/flash_attention.h) with operands in the weights' 16-bit
// type; shapes it has no instance for (head_dim other than 64 and 128) take
// the fp32 kernel. kAuto, the default: kFlash with 16-bit weights, kFma with
// fp32 ones (and on the CPU). Measured on an H200 with half_activations
// (Table 4 at prompt 1536: 8,564 tokens/s against 6,960 with neither), and
// every gpu test passed with both.
enum class AttentionKernel { kAuto, kFma, kFlash };

// "auto", "fma" or "flash"; InvalidArgument for anything else.
absl::StatusOr<AttentionKernel> ParseAttentionKernel(const std::string& name);

// The kernel `kernel` names for weights of `type`: kAuto resolved.
AttentionKernel ResolveAttention(AttentionKernel kernel, ElementType type);

// "auto", "fma" or "flash".
const char* AttentionKernelName(AttentionKernel kernel);

// Whether a backend with weights of `type` keeps half activations
// (BackendOptions::half_activations): as asked, or unset, exactly when the
// weights are 16-bit.
bool ResolveHalfActivations(std::optional<bool> half, ElementType type);

// Which kernel a CUDA backend with 16-bit weights prefills H3 layers on
// (fp32 weights take the cuFFT path either way). kFft: the fused FlashConv
// kernel (block FFT on tensor cores). kChunked: the chunked-scan kernel
// (kernels/h3_chunked.h), the same domain without an FFT: 2.5 to 2.9 times
// the cuFFT path where the fused kernel is 0.9 to 1.7 times it (an H200,
// B64 H768 fp16, L 256 to 32K; bench/results/2026-11-26-h200_flashconv.json).
// kChunkedMma: the chunked kernel with its shift convolution on tensor
// cores (kernels/cuda/h3_rows_shift_mma.cuh): on an H200 3 to 4% faster
// than kChunked on packed rows, slower on channel-major tensors
// (docs/h3-chunked.md). kAuto, the default: kChunked where the weights are
// 16-bit, else kFft.
enum class H3PrefillKernel { kAuto, kFft, kChunked, kChunkedMma };

// "auto", "fft", "chunked" or "chunked-mma"; InvalidArgument for anything
// else.
absl::StatusOr<H3PrefillKernel> ParseH3PrefillKernel(const std::string& name);

// The kernel `kernel` names for weights of `type`: kAuto resolved.
H3PrefillKernel ResolveH3Prefill(H3PrefillKernel kernel, ElementType type);

// "auto", "fft", "chunked" or "chunked-mma".
const char* H3PrefillKernelName(H3PrefillKernel kernel);
// Every H3PrefillKernelName, in the enum's order (the programs'
// --h3-prefill values).
const std::vector<std::string>& H3PrefillKernelNames();

// Whether `kernel` is one of the chunked kernels (16-bit operands, GPU
// only).
bool IsChunkedH3Prefill(H3PrefillKernel kernel);

// Which products a CUDA backend with `batch_invariant` runs. kCublasLt, the
// default: cuBLASLt with one algorithm per shape for every row count
// (LinearCuda::Options::pinned_algorithms); on an H200 its products cost
// 0.2 to 1.3% more than cuBLASLt's at 64 rows and 6 to 20% more at 1 and 8
// rows (bench/results/2026-11-26-h200-4e3f2ad_linear.json), and its
// invariance held in every gpu test. kSkinny: SkinnyGemmCuda
// (kernels/skinny_gemm.h), CUDA-core FMAs in an order its CPU emulation
// reproduces bit for bit; 1.5 times cuBLASLt's time at 1 row, 16 times at
// 64. kStream: StreamGemmCuda (kernels/stream_gemm.h), the decode product on
// tensor cores, invariant by construction, in pieces of 64 rows (so a long
// prefill reads the weights once per 64 tokens); 16-bit weights only; as
// fast as cuBLASLt at 1 row, 2 to 5 times slower at 64. kStreamSplit:
// StreamSplitGemmCuda (kernels/stream_split_gemm.h), the same on
// thread-block clusters with k split across a cluster's blocks, invariant by
// construction, in pieces of 64 rows; 16-bit weights and compute capability
// 9.0 or later only; on an H200 1.3 to 4.3 times cuBLASLt's time. kTile:
// TileGemmCuda (kernels/tile_gemm.h), W and x through shared memory in 64 x
// 64 tiles, k split across a cluster, invariant by construction, in pieces
// of 64 rows; 16-bit weights and activations (half activations) and compute
// capability 9.0 or later only; correct on an H200 (the bitwise batch tests
// passed at eb5e768), its products slower than cuBLASLt's from 32 rows.
enum class BatchInvariantKernel {
  kSkinny,
  kCublasLt,
  kStream,
  kStreamSplit,
  kTile
};

// The names of the BatchInvariantKernel and DecodeProducts values, as the
// programs' flags take them (and list them in their help).
const std::vector<std::string>& BatchInvariantKernelNames();
const std::vector<std::string>& DecodeProductsNames();

// The name of `kernel` in BatchInvariantKernelNames.
const std::string& BatchInvariantKernelName(BatchInvariantKernel kernel);

// "skinny", "cublaslt", "stream", "stream-split" or "tile"; InvalidArgument
// for anything else.
absl::StatusOr<BatchInvariantKernel> ParseBatchInvariantKernel(
    const std::string& name);

// Which kernel a CUDA backend without `batch_invariant` runs the products of
// at most 64 rows (decode steps, short prefills) on. kCublasLt: cuBLASLt, as
// every larger product. kStream: StreamGemmCuda (kernels/stream_gemm.h),
// which streams 16-bit weights through tensor cores and gives a row the same
// bits in any batch of up to 64; products it does not take (fp32 weights, k
// not a multiple of 8) stay on cuBLASLt. kAuto, the default: StreamGemmCuda
// for products of at most kAutoStreamRows rows, cuBLASLt for the
// others (on an H200 the stream kernel took a batch-1 step from 1.39 to
// 1.34 ms; docs/cuda-engine.md, "Decode products"). kCublasLtTuned:
// cuBLASLt with each product's algorithm timed among the heuristic's first
// few and their split-K variants at its first uncaptured call
// (kernels/cuda/linear.h, Options::tune_algorithms; on an H200 within 3% of the
// heuristic's choice). kStreamSplit: as kAuto for the products kAuto gives
// StreamGemmCuda, StreamSplitGemmCuda (kernels/stream_split_gemm.h: x read from
// L2 once per 128 columns, k split across a thread-block cluster) from there to
// 64 rows, on compute capability 9.0 and later (cuBLASLt elsewhere, and for the
// products it does not take); slower than cuBLASLt on an H200 (its kernel for
// 17 to 64 rows of 16-bit x has changed since, untimed). kMeasured: each
// product of at most 64 rows that the stream kernels take runs on whichever of
// cuBLASLt, StreamGemmCuda and (9.0 and later) StreamSplitGemmCuda was fastest
// for its row bucket, shape, types and epilogue at its first call outside graph
// capture, timed then on the device (engine/product_choices.h; the cuBLASLt
// candidate is kCublasLtTuned's fastest algorithm); the kAuto rule before that.
// On an H200 it chose what kAuto takes (StreamGemmCuda at one row, cuBLASLt at
// 64); with 16-bit activations on 9.0 and later TileGemmCuda is a candidate
// too. kTile: as kAuto for the products kAuto gives StreamGemmCuda,
// TileGemmCuda (kernels/tile_gemm.h: W and x through shared memory in tiles of
// 64 columns and 64 rows, k split across a cluster as far as one wave allows)
// from there to 64 rows, for 16-bit activations on compute capability 9.0 and
// later (cuBLASLt elsewhere); on an H200 (eb5e768) correct and slower than
// cuBLASLt from 32 rows (Table 4 at 1536: 9,407 against 10,074 tokens/s).
enum class DecodeProducts {
  kAuto,
  kCublasLt,
  kStream,
  kCublasLtTuned,
  kStreamSplit,
  kMeasured,
  kTile
};
constexpr int64_t kAutoStreamRows = 8;
// kAuto's bound, whatever the launch order (a rule that looked at the
// launch order put a 5-row prefill's products on another kernel with --pdl
// on than off, or with the profiler on, so the logits changed their bits:
// CudaPdlTest and CudaProfilerTest failed on an H200 at 4088fe5). 8 since
// the H200 runs at f201aae and eb5e768: at 8 rows of 16-bit x the stream
// kernel's products of a step took 1.144 and 1.087 ms in stream order
// against cuBLASLt's 1.197 and 1.095 (bf16 at f201aae: 1.147 both), and
// 0.984 and 0.922 overlapped (--pdl, the default), as at 4 rows (1.129
// and 0.966 against 1.116); with fp32 x (--fp32-activations) 1.596 in
// stream order against 1.527, 1.437 overlapped
// (bench/results/2026-11-27-h200-{f201aae_linear,eb5e768_tile}.json). It
// was 4 while cuBLASLt led at 8 rows in stream order (acfb22a: 1.09 against
// 1.02 ms overlapped).

// The most rows of a product `products` sends to StreamGemmCuda (without
// batch invariance): kStreamMaxRows, kAutoStreamRows or 0.
int64_t StreamProductRows(DecodeProducts products);

// The most rows of a product `products` sends to StreamSplitGemmCuda when
// StreamGemmCuda does not take it (without batch invariance):
// kStreamMaxRows for kStreamSplit, else 0.
int64_t SplitProductRows(DecodeProducts products);

// The most rows of a product `products` sends to TileGemmCuda when
// StreamGemmCuda does not take it (without batch invariance):
// kStreamMaxRows for kTile, else 0.
int64_t TileProductRows(DecodeProducts products);

// The name of `products` in DecodeProductsNames.
const std::string& DecodeProductsName(DecodeProducts products);

// "auto", "cublaslt", "stream", "cublaslt-tuned", "stream-split",
// "measured" or "tile"; InvalidArgument for anything else.
absl::StatusOr<DecodeProducts> ParseDecodeProducts(const std::string& name);

struct BackendOptions {
  // "cpu", "cuda" (the first GPU), "cuda:N", or "auto": the first GPU when
  // one is present and usable, else the CPU.
  std::string device = "auto";
  // Unset: fp16 on a GPU, fp32 on the CPU.
  std::optional<ElementType> weight_type;
  AttentionKernel attention = AttentionKernel::kAuto;
  H3PrefillKernel h3_prefill = H3PrefillKernel::kAuto;
  // CUDA: every matrix product by a batch-invariant kernel
  // (batch_invariant_kernel), so that a row's results never depend on the
  // other rows of its step (docs/cuda-engine.md, "Batch invariance"). Off:
  // cuBLASLt, whose algorithm (and summation order) depends on the row
  // count. The CPU backend is row-invariant either way.
  bool batch_invariant = false;
  // With batch_invariant: which products (BatchInvariantKernel).
  BatchInvariantKernel batch_invariant_kernel = BatchInvariantKernel::kCublasLt;
  // Without batch_invariant: the products of at most 64 rows.
  DecodeProducts decode_products = DecodeProducts::kAuto;
  // CUDA with 16-bit weights: the activations that feed products, and the
  // attention layers' K/V cache, in the weights' type
  // (Backend::activation_type), so products read them without a conversion
  // kernel, q|k|v and the MLP's hidden layer are written in 16 bits and
  // decode attention reads half the bytes. false: fp32 activations and K/V,
  // activations rounded to the weights' type before each product. Unset, the
  // default: true with 16-bit weights, false with fp32 ones (and on the CPU);
  // ResolveHalfActivations. Measured on an H200 with kFlash (see
  // AttentionKernel).
  std::optional<bool> half_activations;
  // CUDA on compute capability 9.0 and later: programmatic dependent launch
  // (kernels/cuda/launch_order.h, LaunchOrder::kOverlapPrior) of the decode
  // step's own kernels (norms, StreamGemmCuda products, the H3 step, decode
  // attention, sampling), so that each one's launch and weight reads
  // overlap the kernel before it; off while the profiler is on (its events
  // time each op alone). Ignored elsewhere. On by default: on an H200 it
  // took a batch-1 step from 1.77 to 1.48 ms and computed the same bits
  // (docs/cuda-engine.md, "Overlapped launches").
  bool pdl = true;
};

// The backend's flags as h3serve, h3 run and h3_engine_bench take them
// (--device, --dtype, --attention, --h3-prefill, --batch-invariant,
// --batch-invariant-kernel, --decode-products, --half-activations,
// --fp32-activations, --pdl), before they are parsed.
struct BackendFlags {
  std::string device = "auto";
  std::string dtype = "auto";
  std::string attention = "auto";
  std::string h3_prefill = "auto";
  bool batch_invariant = false;
  std::string batch_invariant_kernel = "cublaslt";
  std::string decode_products = "auto";
  // Neither: BackendOptions::half_activations stays unset (the default).
  bool half_activations = false;
  bool fp32_activations = false;
  std::string pdl = "on";  // "on" or "off"
};

// The options `flags` name; InvalidArgument naming the flag and its choices
// for an unknown name (the Parse* functions above).
absl::StatusOr<BackendOptions> ParseBackendFlags(const BackendFlags& flags);

// The backend `options` name. InvalidArgument for an unknown device name,
// FailedPrecondition for "cuda" without a usable GPU (the reason in words),
// InvalidArgument for 16-bit weights on the CPU, and for kFlash attention,
// the kChunked H3 prefill or half activations on the CPU or with fp32
// weights (they compute in the 16-bit type).
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(
    const BackendOptions& options);

}  // namespace h3::engine

#endif  // H3_ENGINE_BACKEND_H_
