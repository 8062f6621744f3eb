#include "engine/devices.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/build_info.h"
#include "engine/backend.h"
#include "gtest/gtest.h"

namespace h3::engine {
namespace {

// Runs on every machine: the inventory is well-formed whether or not there is
// a GPU, and an empty one always says why.
TEST(DevicesTest, InventoryIsConsistent) {
  CudaInventory inventory = ListCudaDevices();
  EXPECT_EQ(inventory.built_with_cuda, GetBuildInfo().cuda_enabled);
  if (inventory.devices.empty()) {
    EXPECT_FALSE(inventory.no_device_reason.empty());
  }
  for (size_t i = 0; i < inventory.devices.size(); ++i) {
    const DeviceInfo& d = inventory.devices[i];
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.compute_major, 5);
    EXPECT_GT(d.multiprocessors, 0);
    EXPECT_GT(d.total_memory_bytes, 0);
    EXPECT_LE(d.free_memory_bytes, d.total_memory_bytes);
  }
  if (inventory.built_with_cuda) {
    EXPECT_GT(inventory.runtime_version, 0);
  }
}

TEST(DevicesTest, SelfTestRejectsBadIndex) {
  absl::StatusOr<double> result = SelfTestDevice(-1);
  ASSERT_FALSE(result.ok());
  if (GetBuildInfo().cuda_enabled) {
    // With no device, counting them already fails (Internal); with devices,
    // the index is checked (InvalidArgument).
    EXPECT_TRUE(result.status().code() == absl::StatusCode::kInvalidArgument ||
                result.status().code() == absl::StatusCode::kInternal)
        << result.status();
  } else {
    EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST(MakeBackendTest, NamesAndRefusals) {
  EXPECT_EQ(MakeBackend({"tpu", std::nullopt}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeBackend({"cuda:x", std::nullopt}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeBackend({"cpu", ElementType::kF16}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto cpu = MakeBackend({"cpu", std::nullopt});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ((*cpu)->name(), "cpu");
  EXPECT_EQ((*cpu)->weight_type(), ElementType::kF32);

  const CudaInventory inventory = ListCudaDevices();
  const bool usable_gpu =
      std::any_of(inventory.devices.begin(), inventory.devices.end(),
                  [](const DeviceInfo& d) { return d.supported; });
  auto chosen = MakeBackend({"auto", std::nullopt});
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  if (usable_gpu) {
    EXPECT_EQ((*chosen)->name(), "cuda:0");
    EXPECT_EQ((*chosen)->weight_type(), ElementType::kF16);
  } else {
    EXPECT_EQ((*chosen)->name(), "cpu");
  }
  if (inventory.devices.empty()) {
    // Asking for a GPU where there is none says why.
    const absl::Status status = MakeBackend({"cuda", std::nullopt}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(status.message().find("no GPU"), absl::string_view::npos)
        << status;
  }
}

TEST(MakeBackendTest, ParsesWeightTypes) {
  EXPECT_EQ(*ParseWeightType("auto"), std::nullopt);
  EXPECT_EQ(*ParseWeightType("fp16"), ElementType::kF16);
  EXPECT_EQ(*ParseWeightType("bf16"), ElementType::kBF16);
  EXPECT_EQ(*ParseWeightType("fp32"), ElementType::kF32);
  EXPECT_EQ(ParseWeightType("int8").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MakeBackendTest, ParsesAttentionKernels) {
  EXPECT_EQ(*ParseAttentionKernel("fma"), AttentionKernel::kFma);
  EXPECT_EQ(*ParseAttentionKernel("flash"), AttentionKernel::kFlash);
  EXPECT_EQ(*ParseH3PrefillKernel("auto"), H3PrefillKernel::kAuto);
  EXPECT_EQ(*ParseH3PrefillKernel("fft"), H3PrefillKernel::kFft);
  EXPECT_EQ(*ParseH3PrefillKernel("chunked"), H3PrefillKernel::kChunked);
  EXPECT_EQ(*ParseH3PrefillKernel("chunked-mma"), H3PrefillKernel::kChunkedMma);
  EXPECT_EQ(ParseH3PrefillKernel("scan").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseAttentionKernel("wgmma").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BackendOptions{}.attention, AttentionKernel::kAuto);
  EXPECT_EQ(*ParseAttentionKernel("auto"), AttentionKernel::kAuto);
  EXPECT_EQ(BackendOptions{}.h3_prefill, H3PrefillKernel::kAuto);
}

TEST(MakeBackendTest, ParsesBatchInvariantKernels) {
  EXPECT_EQ(*ParseBatchInvariantKernel("skinny"),
            BatchInvariantKernel::kSkinny);
  EXPECT_EQ(*ParseBatchInvariantKernel("cublaslt"),
            BatchInvariantKernel::kCublasLt);
  EXPECT_EQ(*ParseBatchInvariantKernel("stream"),
            BatchInvariantKernel::kStream);
  EXPECT_EQ(*ParseBatchInvariantKernel("stream-split"),
            BatchInvariantKernel::kStreamSplit);
  EXPECT_EQ(*ParseBatchInvariantKernel("tile"), BatchInvariantKernel::kTile);
  // Each name parses back to its kernel.
  for (const std::string& name : BatchInvariantKernelNames()) {
    EXPECT_EQ(BatchInvariantKernelName(*ParseBatchInvariantKernel(name)), name);
  }
  for (const std::string& name : DecodeProductsNames()) {
    EXPECT_EQ(DecodeProductsName(*ParseDecodeProducts(name)), name);
  }
  EXPECT_EQ(ParseBatchInvariantKernel("cublas").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BackendOptions{}.batch_invariant_kernel,
            BatchInvariantKernel::kCublasLt);
}

TEST(MakeBackendTest, ParsesDecodeProducts) {
  EXPECT_EQ(*ParseDecodeProducts("cublaslt"), DecodeProducts::kCublasLt);
  EXPECT_EQ(*ParseDecodeProducts("stream"), DecodeProducts::kStream);
  EXPECT_EQ(*ParseDecodeProducts("cublaslt-tuned"),
            DecodeProducts::kCublasLtTuned);
  EXPECT_EQ(ParseDecodeProducts("skinny").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseDecodeProducts("auto"), DecodeProducts::kAuto);
  EXPECT_EQ(BackendOptions{}.decode_products, DecodeProducts::kAuto);
  EXPECT_EQ(ParseBackendFlags({})->decode_products, DecodeProducts::kAuto);
  // auto: the stream kernel for the smallest products only.
  EXPECT_EQ(StreamProductRows(DecodeProducts::kAuto), kAutoStreamRows);
  EXPECT_EQ(StreamProductRows(DecodeProducts::kStream), 64);
  EXPECT_EQ(StreamProductRows(DecodeProducts::kCublasLt), 0);
  EXPECT_EQ(StreamProductRows(DecodeProducts::kCublasLtTuned), 0);
  // stream-split: auto's stream kernel for the smallest, the split kernel
  // up to 64 rows.
  EXPECT_EQ(*ParseDecodeProducts("stream-split"), DecodeProducts::kStreamSplit);
  EXPECT_EQ(StreamProductRows(DecodeProducts::kStreamSplit), kAutoStreamRows);
  EXPECT_EQ(SplitProductRows(DecodeProducts::kStreamSplit), 64);
  EXPECT_EQ(SplitProductRows(DecodeProducts::kAuto), 0);
  EXPECT_EQ(SplitProductRows(DecodeProducts::kStream), 0);
  // measured: the backend decides per product; neither fixed rule.
  EXPECT_EQ(*ParseDecodeProducts("measured"), DecodeProducts::kMeasured);
  EXPECT_EQ(StreamProductRows(DecodeProducts::kMeasured), 0);
  EXPECT_EQ(SplitProductRows(DecodeProducts::kMeasured), 0);
  // tile: auto's stream kernel for the smallest, the tile kernel up to 64
  // rows; no other kind gives it any.
  EXPECT_EQ(*ParseDecodeProducts("tile"), DecodeProducts::kTile);
  EXPECT_EQ(StreamProductRows(DecodeProducts::kTile), kAutoStreamRows);
  EXPECT_EQ(TileProductRows(DecodeProducts::kTile), 64);
  EXPECT_EQ(SplitProductRows(DecodeProducts::kTile), 0);
  for (const std::string& name : DecodeProductsNames()) {
    if (name == "tile") continue;
    EXPECT_EQ(TileProductRows(*ParseDecodeProducts(name)), 0) << name;
  }
}

// auto takes the chunked kernel where the weights are 16-bit, the cuFFT
// path's (fft) for fp32; a named kernel stays as named.
TEST(MakeBackendTest, ResolvesTheAutoH3Prefill) {
  for (ElementType type : {ElementType::kF16, ElementType::kBF16}) {
    EXPECT_EQ(ResolveH3Prefill(H3PrefillKernel::kAuto, type),
              H3PrefillKernel::kChunked);
    EXPECT_EQ(ResolveH3Prefill(H3PrefillKernel::kFft, type),
              H3PrefillKernel::kFft);
  }
  EXPECT_EQ(ResolveH3Prefill(H3PrefillKernel::kAuto, ElementType::kF32),
            H3PrefillKernel::kFft);
  EXPECT_EQ(ResolveH3Prefill(H3PrefillKernel::kChunked, ElementType::kF32),
            H3PrefillKernel::kChunked);
  for (H3PrefillKernel kernel :
       {H3PrefillKernel::kAuto, H3PrefillKernel::kFft,
        H3PrefillKernel::kChunked, H3PrefillKernel::kChunkedMma}) {
    EXPECT_EQ(*ParseH3PrefillKernel(H3PrefillKernelName(kernel)), kernel);
  }
}

// The default (auto) serves on the CPU, which has no chunked kernel.
TEST(MakeBackendTest, TheDefaultH3PrefillServesOnTheCpu) {
  BackendOptions options;
  options.device = "cpu";
  EXPECT_TRUE(MakeBackend(options).ok());
}

// MakeBackend refuses `options` (a GPU path that computes in 16 bits) on
// the CPU, with a message naming `flag`, and, where there is a GPU, with
// fp32 weights on it, with a message naming --dtype.
void ExpectRefusedOnTheCpuAndWithFp32(BackendOptions options,
                                      const std::string& flag) {
  options.device = "cpu";
  const absl::Status cpu = MakeBackend(options).status();
  EXPECT_EQ(cpu.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cpu.message().find(flag), absl::string_view::npos) << cpu;
  const CudaInventory inventory = ListCudaDevices();
  if (inventory.devices.empty()) return;  // "cuda" fails before the dtype
  options.device = "cuda";
  options.weight_type = ElementType::kF32;
  const absl::Status fp32 = MakeBackend(options).status();
  EXPECT_EQ(fp32.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(fp32.message().find("--dtype"), absl::string_view::npos) << fp32;
}

// The chunked H3 prefill is a GPU kernel with fp16 operands: the CPU and
// fp32 weights refuse it, naming the flag.
TEST(MakeBackendTest, RefusesTheChunkedPrefillWithoutItsPrerequisites) {
  BackendOptions options;
  options.h3_prefill = H3PrefillKernel::kChunked;
  ExpectRefusedOnTheCpuAndWithFp32(options, "--h3-prefill chunked");
  options.h3_prefill = H3PrefillKernel::kChunkedMma;
  ExpectRefusedOnTheCpuAndWithFp32(options, "--h3-prefill chunked-mma");
}

// The tensor-core attention needs a GPU and 16-bit weights; asking for it
// elsewhere says so rather than silently running the fp32 kernel.
TEST(MakeBackendTest, RefusesFlashAttentionWithoutItsPrerequisites) {
  BackendOptions options;
  options.attention = AttentionKernel::kFlash;
  ExpectRefusedOnTheCpuAndWithFp32(options, "--attention flash");
}

// The programs' flags: neither activations flag leaves the choice unset (the
// weights decide); each names its own; an unknown kernel name is refused.
TEST(MakeBackendTest, ParsesTheBackendFlags) {
  const BackendOptions defaults = *ParseBackendFlags({});
  EXPECT_EQ(defaults.device, "auto");
  EXPECT_FALSE(defaults.weight_type.has_value());
  EXPECT_EQ(defaults.attention, AttentionKernel::kAuto);
  EXPECT_EQ(defaults.batch_invariant_kernel, BatchInvariantKernel::kCublasLt);
  EXPECT_EQ(defaults.decode_products, DecodeProducts::kAuto);
  EXPECT_FALSE(defaults.half_activations.has_value());
  EXPECT_EQ(ParseBackendFlags({.half_activations = true})->half_activations,
            true);
  EXPECT_EQ(ParseBackendFlags({.fp32_activations = true})->half_activations,
            false);
  const BackendOptions named = *ParseBackendFlags(
      {.device = "cpu", .dtype = "fp16", .decode_products = "stream"});
  EXPECT_EQ(named.weight_type, ElementType::kF16);
  EXPECT_EQ(named.decode_products, DecodeProducts::kStream);
  EXPECT_EQ(ParseBackendFlags({.attention = "wgmma"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // --pdl: on unless turned off; a name other than on and off is refused.
  EXPECT_TRUE(defaults.pdl);
  EXPECT_TRUE(BackendOptions{}.pdl);
  EXPECT_TRUE(ParseBackendFlags({.pdl = "on"})->pdl);
  EXPECT_FALSE(ParseBackendFlags({.pdl = "off"})->pdl);
  const absl::Status pdl = ParseBackendFlags({.pdl = "yes"}).status();
  EXPECT_EQ(pdl.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(pdl.message().find("--pdl"), std::string::npos) << pdl;
}

// auto: the tensor-core attention and half activations with 16-bit weights,
// the fp32 kernel and activations with fp32 ones; named, as named.
TEST(MakeBackendTest, ResolvesTheAutoAttentionAndActivations) {
  for (ElementType type : {ElementType::kF16, ElementType::kBF16}) {
    EXPECT_EQ(ResolveAttention(AttentionKernel::kAuto, type),
              AttentionKernel::kFlash);
    EXPECT_EQ(ResolveAttention(AttentionKernel::kFma, type),
              AttentionKernel::kFma);
    EXPECT_TRUE(ResolveHalfActivations(std::nullopt, type));
    EXPECT_FALSE(ResolveHalfActivations(false, type));
  }
  EXPECT_EQ(ResolveAttention(AttentionKernel::kAuto, ElementType::kF32),
            AttentionKernel::kFma);
  EXPECT_FALSE(ResolveHalfActivations(std::nullopt, ElementType::kF32));
  EXPECT_STREQ(AttentionKernelName(AttentionKernel::kAuto), "auto");
}

// Half activations take the weights' 16-bit type: the CPU (fp32 weights
// only) and fp32 weights on a GPU refuse them, naming the flag.
TEST(MakeBackendTest, RefusesHalfActivationsWithoutSixteenBitWeights) {
  EXPECT_FALSE(BackendOptions{}.half_activations.has_value());  // auto
  BackendOptions options;
  options.half_activations = true;
  ExpectRefusedOnTheCpuAndWithFp32(options, "--half-activations");
}

// The stream kernel takes 16-bit weights: fp32 weights on a GPU refuse it
// as the batch-invariant kernel, naming the flag (the CPU is batch-invariant
// without a kernel, and ignores the choice).
TEST(MakeBackendTest, RefusesTheStreamInvariantKernelWithFp32Weights) {
  if (ListCudaDevices().devices.empty()) GTEST_SKIP() << "no GPU";
  for (const auto& [kernel, name] :
       {std::pair{BatchInvariantKernel::kStream, "stream "},
        std::pair{BatchInvariantKernel::kStreamSplit, "stream-split "},
        std::pair{BatchInvariantKernel::kTile, "tile "}}) {
    BackendOptions options{.device = "cuda", .weight_type = ElementType::kF32};
    options.batch_invariant = true;
    options.batch_invariant_kernel = kernel;
    const absl::Status status = MakeBackend(options).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(
        status.message().find(std::string("--batch-invariant-kernel ") + name),
        absl::string_view::npos)
        << status;
  }
}

// The tile kernel multiplies 16-bit activations: with fp32 ones it is
// refused, naming the flag to drop.
TEST(MakeBackendTest, RefusesTheTileInvariantKernelWithFp32Activations) {
  if (ListCudaDevices().devices.empty()) GTEST_SKIP() << "no GPU";
  BackendOptions options{.device = "cuda", .weight_type = ElementType::kF16};
  options.batch_invariant = true;
  options.batch_invariant_kernel = BatchInvariantKernel::kTile;
  options.half_activations = false;
  const absl::Status status = MakeBackend(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--fp32-activations"),
            absl::string_view::npos)
      << status;
}

}  // namespace
}  // namespace h3::engine
