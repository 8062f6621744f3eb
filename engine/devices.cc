// The one file that chooses between the CUDA and the CPU-only build for
// device discovery; everything CUDA lives in engine/cuda/.
#include "engine/devices.h"

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/backend.h"

#if H3_WITH_CUDA
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_devices.h"
#endif

namespace h3::engine {

CudaInventory ListCudaDevices() {
#if H3_WITH_CUDA
  return cuda::ListDevices();
#else
  CudaInventory inventory;
  inventory.no_device_reason =
      "this h3 was built without CUDA (H3_WITH_CUDA=OFF); rebuild with the "
      "CUDA Toolkit installed to use a GPU";
  return inventory;
#endif
}

absl::StatusOr<double> SelfTestDevice(int index) {
#if H3_WITH_CUDA
  return cuda::SelfTest(index);
#else
  return absl::FailedPreconditionError(
      "this h3 was built without CUDA (H3_WITH_CUDA=OFF)");
#endif
}

namespace {

// The GPU `device` names ("cuda" or "cuda:N"), or -1 for the CPU; "auto"
// becomes the first usable GPU, else the CPU.
absl::StatusOr<int> ResolveDevice(const std::string& device) {
  if (device == "cpu") return -1;
  const CudaInventory inventory = ListCudaDevices();
  if (device == "auto") {
    for (const DeviceInfo& info : inventory.devices) {
      if (info.supported) return info.index;
    }
    return -1;
  }
  int index = 0;
  if (device != "cuda" &&
      !(absl::StartsWith(device, "cuda:") &&
        absl::SimpleAtoi(device.substr(5), &index) && index >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown device \"", device, "\"; use cpu, cuda, cuda:N or auto"));
  }
  if (inventory.devices.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device ", device, ": no GPU: ", inventory.no_device_reason));
  }
  for (const DeviceInfo& info : inventory.devices) {
    if (info.index != index) continue;
    if (!info.supported) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--device ", device, ": ", info.name, " (compute capability ",
          info.compute_major, ".", info.compute_minor,
          ") has no machine code in this build"));
    }
    return index;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--device ", device, ": there are ",
                   inventory.devices.size(), " GPUs (cuda:0 ...)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(
    const BackendOptions& options) {
  H3_ASSIGN_OR_RETURN(const int device, ResolveDevice(options.device));
  if (device < 0) {
    if (options.weight_type.has_value() &&
        *options.weight_type != ElementType::kF32) {
      return absl::InvalidArgumentError(
          absl::StrCat("the CPU backend keeps weights in fp32, not ",
                       ElementTypeName(*options.weight_type)));
    }
    if (options.attention == AttentionKernel::kFlash) {
      return absl::InvalidArgumentError(
          "--attention flash runs on a GPU; the CPU backend has the fp32 "
          "attention only (--attention fma)");
    }
    if (options.half_activations.value_or(false)) {
      return absl::InvalidArgumentError(
          "--half-activations keeps activations in the weights' 16-bit type; "
          "the CPU backend keeps its weights in fp32");
    }
    if (IsChunkedH3Prefill(options.h3_prefill)) {
      return absl::InvalidArgumentError(
          std::string("--h3-prefill ") +
          H3PrefillKernelName(options.h3_prefill) +
          " runs on a GPU; the CPU backend prefills H3 layers by the "
          "recurrence (leave --h3-prefill at its default, auto)");
    }
    return MakeCpuBackend();
  }
  const ElementType type = options.weight_type.value_or(ElementType::kF16);
  if (options.attention == AttentionKernel::kFlash &&
      type == ElementType::kF32) {
    return absl::InvalidArgumentError(
        "--attention flash computes in the weights' 16-bit type: use --dtype "
        "fp16 or bf16, or --attention fma with fp32");
  }
  if (IsChunkedH3Prefill(options.h3_prefill) && type == ElementType::kF32) {
    return absl::InvalidArgumentError(
        std::string("--h3-prefill ") + H3PrefillKernelName(options.h3_prefill) +
        " computes with fp16 operands: use --dtype fp16 or bf16 (fp32 weights "
        "take the exact cuFFT prefill)");
  }
  if (options.half_activations.value_or(false) && type == ElementType::kF32) {
    return absl::InvalidArgumentError(
        "--half-activations keeps activations in the weights' 16-bit type: "
        "use --dtype fp16 or bf16");
  }
  const BatchInvariantKernel invariant = options.batch_invariant_kernel;
  if (options.batch_invariant &&
      (invariant == BatchInvariantKernel::kStream ||
       invariant == BatchInvariantKernel::kStreamSplit ||
       invariant == BatchInvariantKernel::kTile) &&
      type == ElementType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--batch-invariant-kernel ", BatchInvariantKernelName(invariant),
        " streams 16-bit weights: use --dtype fp16 or bf16, or "
        "--batch-invariant-kernel skinny with fp32"));
  }
  if (options.batch_invariant && invariant == BatchInvariantKernel::kTile &&
      !ResolveHalfActivations(options.half_activations, type)) {
    return absl::InvalidArgumentError(
        "--batch-invariant-kernel tile multiplies activations in the "
        "weights' 16-bit type: drop --fp32-activations");
  }
#if H3_WITH_CUDA
  return cuda::MakeCudaBackend(device, type, options);
#else
  return absl::InternalError("unreachable: a GPU without CUDA");
#endif
}

}  // namespace h3::engine
