#include "engine/backend.h"

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/stream_gemm.h"

namespace h3::engine {

absl::StatusOr<std::optional<ElementType>> ParseWeightType(
    const std::string& name) {
  if (name == "auto") return std::nullopt;
  for (ElementType type :
       {ElementType::kF32, ElementType::kF16, ElementType::kBF16}) {
    if (name == ElementTypeName(type)) return type;
  }
  return absl::InvalidArgumentError("unknown weight type \"" + name +
                                    "\"; use auto, fp32, fp16 or bf16");
}

absl::StatusOr<AttentionKernel> ParseAttentionKernel(const std::string& name) {
  for (AttentionKernel kernel : {AttentionKernel::kAuto, AttentionKernel::kFma,
                                 AttentionKernel::kFlash}) {
    if (name == AttentionKernelName(kernel)) return kernel;
  }
  return absl::InvalidArgumentError("unknown attention kernel \"" + name +
                                    "\"; use auto, fma or flash");
}

AttentionKernel ResolveAttention(AttentionKernel kernel, ElementType type) {
  if (kernel != AttentionKernel::kAuto) return kernel;
  return type == ElementType::kF32 ? AttentionKernel::kFma
                                   : AttentionKernel::kFlash;
}

const char* AttentionKernelName(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::kFma:
      return "fma";
    case AttentionKernel::kFlash:
      return "flash";
    default:
      return "auto";
  }
}

absl::StatusOr<BackendOptions> ParseBackendFlags(const BackendFlags& flags) {
  BackendOptions options;
  options.device = flags.device;
  H3_ASSIGN_OR_RETURN(options.weight_type, ParseWeightType(flags.dtype));
  H3_ASSIGN_OR_RETURN(options.attention, ParseAttentionKernel(flags.attention));
  H3_ASSIGN_OR_RETURN(options.h3_prefill,
                      ParseH3PrefillKernel(flags.h3_prefill));
  options.batch_invariant = flags.batch_invariant;
  H3_ASSIGN_OR_RETURN(options.batch_invariant_kernel,
                      ParseBatchInvariantKernel(flags.batch_invariant_kernel));
  H3_ASSIGN_OR_RETURN(options.decode_products,
                      ParseDecodeProducts(flags.decode_products));
  if (flags.half_activations || flags.fp32_activations) {
    options.half_activations = flags.half_activations;
  }
  if (flags.pdl != "on" && flags.pdl != "off") {
    return absl::InvalidArgumentError("--pdl is \"" + flags.pdl +
                                      "\"; use on or off");
  }
  options.pdl = flags.pdl == "on";
  return options;
}

bool ResolveHalfActivations(std::optional<bool> half, ElementType type) {
  return half.value_or(type != ElementType::kF32);
}

absl::StatusOr<H3PrefillKernel> ParseH3PrefillKernel(const std::string& name) {
  const std::vector<std::string>& names = H3PrefillKernelNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (name == names[i]) return static_cast<H3PrefillKernel>(i);
  }
  return absl::InvalidArgumentError(
      "unknown H3 prefill kernel \"" + name +
      "\"; use auto, fft, chunked or chunked-mma");
}

const std::vector<std::string>& BatchInvariantKernelNames() {
  static const auto* names = new std::vector<std::string>{
      "skinny", "cublaslt", "stream", "stream-split", "tile"};
  return *names;
}

const std::string& BatchInvariantKernelName(BatchInvariantKernel kernel) {
  return BatchInvariantKernelNames()[static_cast<size_t>(kernel)];
}

const std::string& DecodeProductsName(DecodeProducts products) {
  return DecodeProductsNames()[static_cast<size_t>(products)];
}

const std::vector<std::string>& DecodeProductsNames() {
  static const auto* names = new std::vector<std::string>{
      "auto",         "cublaslt", "stream", "cublaslt-tuned",
      "stream-split", "measured", "tile"};
  return *names;
}

absl::StatusOr<BatchInvariantKernel> ParseBatchInvariantKernel(
    const std::string& name) {
  if (name == "skinny") return BatchInvariantKernel::kSkinny;
  if (name == "cublaslt") return BatchInvariantKernel::kCublasLt;
  if (name == "stream") return BatchInvariantKernel::kStream;
  if (name == "stream-split") return BatchInvariantKernel::kStreamSplit;
  if (name == "tile") return BatchInvariantKernel::kTile;
  return absl::InvalidArgumentError(
      "unknown batch-invariant kernel \"" + name +
      "\"; use skinny, cublaslt, stream, stream-split or tile");
}

int64_t StreamProductRows(DecodeProducts products) {
  switch (products) {
    case DecodeProducts::kAuto:
    case DecodeProducts::kStreamSplit:
    case DecodeProducts::kTile:
      return kAutoStreamRows;
    case DecodeProducts::kStream:
      return kernels::kStreamMaxRows;
    default:
      return 0;
  }
}

int64_t SplitProductRows(DecodeProducts products) {
  return products == DecodeProducts::kStreamSplit ? kernels::kStreamMaxRows : 0;
}

int64_t TileProductRows(DecodeProducts products) {
  return products == DecodeProducts::kTile ? kernels::kStreamMaxRows : 0;
}

absl::StatusOr<DecodeProducts> ParseDecodeProducts(const std::string& name) {
  if (name == "auto") return DecodeProducts::kAuto;
  if (name == "cublaslt") return DecodeProducts::kCublasLt;
  if (name == "stream") return DecodeProducts::kStream;
  if (name == "cublaslt-tuned") return DecodeProducts::kCublasLtTuned;
  if (name == "stream-split") return DecodeProducts::kStreamSplit;
  if (name == "measured") return DecodeProducts::kMeasured;
  if (name == "tile") return DecodeProducts::kTile;
  return absl::InvalidArgumentError(
      "unknown decode-products kernel \"" + name +
      "\"; use auto, cublaslt, stream, cublaslt-tuned, stream-split, "
      "measured or tile");
}

H3PrefillKernel ResolveH3Prefill(H3PrefillKernel kernel, ElementType type) {
  if (kernel != H3PrefillKernel::kAuto) return kernel;
  return type == ElementType::kF32 ? H3PrefillKernel::kFft
                                   : H3PrefillKernel::kChunked;
}

const char* H3PrefillKernelName(H3PrefillKernel kernel) {
  switch (kernel) {
    case H3PrefillKernel::kFft:
      return "fft";
    case H3PrefillKernel::kChunked:
      return "chunked";
    case H3PrefillKernel::kChunkedMma:
      return "chunked-mma";
    default:
      return "auto";
  }
}

const std::vector<std::string>& H3PrefillKernelNames() {
  static const auto* names = new std::vector<std::string>{
      H3PrefillKernelName(H3PrefillKernel::kAuto),
      H3PrefillKernelName(H3PrefillKernel::kFft),
      H3PrefillKernelName(H3PrefillKernel::kChunked),
      H3PrefillKernelName(H3PrefillKernel::kChunkedMma)};
  return *names;
}

bool IsChunkedH3Prefill(H3PrefillKernel kernel) {
  return kernel == H3PrefillKernel::kChunked ||
         kernel == H3PrefillKernel::kChunkedMma;
}

absl::StatusOr<int64_t> HostAvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return absl::UnavailableError("MemAvailable is not in /proc/meminfo");
}

absl::Status CheckAttentionPrefill(const AttentionPrefillParams& p) {
  for (size_t i = 0; i < p.segments.size(); ++i) {
    const AttentionSegment& s = p.segments[i];
    if (s.length < 1) {
      return absl::InvalidArgumentError(absl::StrCat("attention: segment ", i,
                                                     " has length ", s.length,
                                                     "; it must be >= 1"));
    }
    if (s.start < 0 || s.start + s.length > s.cache.capacity) {
      return absl::InvalidArgumentError(absl::StrCat(
          "attention: positions up to ", s.start + s.length,
          " exceed the KV cache's capacity of ", s.cache.capacity));
    }
  }
  return absl::OkStatus();
}

kernels::AttentionParams AttentionSegmentParams(const AttentionPrefillParams& p,
                                                size_t i, int64_t row) {
  const int64_t d = p.shape.d_model();
  kernels::AttentionParams a;
  a.shape = p.shape;
  a.start = p.segments[i].start;
  a.length = p.segments[i].length;
  a.qkv = ElementAt(p.qkv, row * 3 * d, p.io_type);
  a.inv_freq = p.inv_freq;
  a.cache = p.segments[i].cache;
  a.out = ElementAt(p.out, row * d, p.io_type);
  a.io_type = p.io_type;
  return a;
}

absl::Status Backend::BeginCapture() {
  return absl::UnimplementedError(name() + " has no graphs");
}
absl::StatusOr<int> Backend::EndCapture() {
  return absl::UnimplementedError(name() + " has no graphs");
}
absl::Status Backend::Replay(int) {
  return absl::UnimplementedError(name() + " has no graphs");
}

absl::Status Backend::EnableProfiler(bool on) {
  if (!on) {
    profiler_.reset();
    return absl::OkStatus();
  }
  if (profiler_ != nullptr) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<ProfileClock>> clock = MakeProfileClock();
  if (!clock.ok()) return clock.status();
  profiler_ = std::make_unique<Profiler>(*std::move(clock));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ProfileClock>> Backend::MakeProfileClock() {
  return MakeHostProfileClock();
}

}  // namespace h3::engine
