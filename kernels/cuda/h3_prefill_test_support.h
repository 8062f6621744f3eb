#ifndef H3_KERNELS_CUDA_H3_PREFILL_TEST_SUPPORT_H_
#define H3_KERNELS_CUDA_H3_PREFILL_TEST_SUPPORT_H_

// Helpers of the H3 prefill GPU tests: element rounding and packing on the
// host, device tensors, random inputs and states, the CPU twin over a batch.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/half_float.h"
#include "base/parallel.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/h3_prefill.h"
#include "kernels/h3.h"
#include "tests/support/normalised_error.h"
#include "tests/support/random.h"
#include "tests/support/random_h3_layer.h"

namespace h3::kernels::testing {

inline std::vector<float> RoundAll(ElementType type, std::vector<float> v) {
  for (float& x : v) x = RoundToType(x, type);
  return v;
}

// The unit roundoff of storing a value as `type`: |stored - x| <= u |x|.
inline double UnitRoundoff(ElementType type) {
  switch (type) {
    case ElementType::kF16:
      return std::ldexp(1.0, -11);
    case ElementType::kBF16:
      return std::ldexp(1.0, -8);
    default:
      return 0.0;
  }
}

// A [batch, length, d] tensor of `type` in a layout of the whole length
// (ChannelMajor or TokenMajor), on the device.
struct DeviceTensor {
  int batch = 0;
  int64_t length = 0;
  int d = 0;
  ElementType type = ElementType::kF32;
  SequenceLayout layout;
  DeviceBuffer memory;

  int64_t Offset(int64_t b, int64_t t, int64_t c) const {
    return b * layout.batch + t * layout.time + c * layout.channel;
  }
  size_t bytes() const { return ElementSize(type) * batch * length * d; }
  // The tensor seen from token t0 on (same strides).
  const void* At(int64_t t0) const {
    return static_cast<const char*>(memory.get()) +
           ElementSize(type) * t0 * layout.time;
  }
  void* At(int64_t t0) {
    return static_cast<char*>(memory.get()) +
           ElementSize(type) * t0 * layout.time;
  }
};

// Uploads `values` ([batch, length, d], already rounded to `type`).
inline cudaError_t Upload(const std::vector<float>& values, DeviceTensor* t) {
  std::vector<char> host(t->bytes());
  const size_t size = ElementSize(t->type);
  for (int b = 0; b < t->batch; ++b) {
    for (int64_t i = 0; i < t->length; ++i) {
      for (int c = 0; c < t->d; ++c) {
        const float x = values[(b * t->length + i) * t->d + c];
        char* dst = host.data() + size * t->Offset(b, i, c);
        if (t->type == ElementType::kF16) {
          const __half h = __float2half_rn(x);
          std::memcpy(dst, &h, size);
        } else if (t->type == ElementType::kBF16) {
          const __nv_bfloat16 h = __float2bfloat16_rn(x);
          std::memcpy(dst, &h, size);
        } else {
          std::memcpy(dst, &x, size);
        }
      }
    }
  }
  cudaError_t err = t->memory.Reserve(host.size());
  if (err != cudaSuccess) return err;
  return cudaMemcpy(t->memory.get(), host.data(), host.size(),
                    cudaMemcpyHostToDevice);
}

// Downloads the tensor as fp32 values, [batch, length, d].
inline cudaError_t Download(const DeviceTensor& t, std::vector<float>* out) {
  std::vector<char> host(t.bytes());
  cudaError_t err = cudaMemcpy(host.data(), t.memory.get(), host.size(),
                               cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) return err;
  const size_t size = ElementSize(t.type);
  out->assign(static_cast<size_t>(t.batch) * t.length * t.d, 0.0f);
  for (int b = 0; b < t.batch; ++b) {
    for (int64_t i = 0; i < t.length; ++i) {
      for (int c = 0; c < t.d; ++c) {
        const char* src = host.data() + size * t.Offset(b, i, c);
        float& x = (*out)[(b * t.length + i) * t.d + c];
        if (t.type == ElementType::kF16) {
          __half h;
          std::memcpy(&h, src, size);
          x = __half2float(h);
        } else if (t.type == ElementType::kBF16) {
          __nv_bfloat16 h;
          std::memcpy(&h, src, size);
          x = __bfloat162float(h);
        } else {
          std::memcpy(&x, src, size);
        }
      }
    }
  }
  return cudaSuccess;
}

inline cudaError_t CopyToDevice(const std::vector<float>& host,
                                DeviceBuffer* device) {
  cudaError_t err = device->Reserve(host.size() * sizeof(float));
  if (err != cudaSuccess) return err;
  return cudaMemcpy(device->get(), host.data(), host.size() * sizeof(float),
                    cudaMemcpyHostToDevice);
}

inline cudaError_t CopyToHost(const DeviceBuffer& device,
                              std::vector<float>* host) {
  return cudaMemcpy(host->data(), device.get(), host->size() * sizeof(float),
                    cudaMemcpyDeviceToHost);
}

// The batch's states back to back: shift [batch, d, N] (rings by position),
// diag [batch, KV, M] complex.
struct BatchState {
  std::vector<float> shift, diag;
};

// An owned CUDA stream: the calls run on a non-default stream, as in the
// server.
struct Stream {
  Stream() { created = cudaStreamCreate(&stream); }
  ~Stream() {
    if (created == cudaSuccess) cudaStreamDestroy(stream);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t stream = nullptr;
  cudaError_t created;
};

// One batch of inputs: q, k, v [batch, length, d] from N(0, 1) rounded to the
// element type (the CPU twin gets the rounded values, so only the kernel's
// own error is measured), and a random fp32 state, zero for every fourth
// sequence (a new sequence beside continued ones). A random ring is a state
// for any start: slots of positions before 0 are neither read nor (unless
// the call reaches them) written, so their values only have to survive.
struct Inputs {
  Inputs(const H3Shape& s, int batch, int64_t length, ElementType type,
         uint32_t seed) {
    const size_t n = static_cast<size_t>(batch) * length * s.d_model;
    q = RoundAll(type, h3::testing::RandomNormal(n, seed));
    k = RoundAll(type, h3::testing::RandomNormal(n, seed + 1));
    v = RoundAll(type, h3::testing::RandomNormal(n, seed + 2));
    const size_t shift = static_cast<size_t>(s.d_model) * s.d_state;
    const size_t diag = 2 * static_cast<size_t>(s.kv_channels()) * s.modes();
    state.shift = h3::testing::RandomNormal(batch * shift, seed + 3);
    state.diag = h3::testing::RandomNormal(batch * diag, seed + 4);
    for (int b = 3; b < batch; b += 4) {
      std::fill_n(state.shift.begin() + b * shift, shift, 0.0f);
      std::fill_n(state.diag.begin() + b * diag, diag, 0.0f);
    }
  }
  std::vector<float> q, k, v;
  BatchState state;
};

// The CPU twin over a batch, one call of the whole length per sequence at
// positions [start, start + length): q, k, v, *out [batch, length, d];
// *state updated in place.
inline void PrefillCpu(const h3::testing::RandomH3Layer& layer, int batch,
                       int64_t start, int64_t length,
                       const std::vector<float>& q, const std::vector<float>& k,
                       const std::vector<float>& v, std::vector<float>* out,
                       BatchState* state) {
  const H3Shape& s = layer.shape;
  const int d = s.d_model;
  const size_t shift_size = static_cast<size_t>(d) * s.d_state;
  const size_t diag_size = 2 * static_cast<size_t>(s.kv_channels()) * s.modes();
  const int nfft = H3FftSize(length);
  std::vector<float> spectrum(2 * s.heads() *
                              static_cast<size_t>(nfft / 2 + 1));
  H3KernelSpectrum(layer.weights(), nfft, spectrum.data());
  out->assign(static_cast<size_t>(batch) * length * d, 0.0f);
  // Sequences in parallel; each call then runs its heads inline.
  ParallelFor(batch, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const size_t io = static_cast<size_t>(b) * length * d;
      H3PrefillCpu({.w = layer.weights(),
                    .start = start,
                    .length = length,
                    .q = q.data() + io,
                    .k = k.data() + io,
                    .v = v.data() + io,
                    .out = out->data() + io,
                    .state = {state->shift.data() + b * shift_size,
                              state->diag.data() + b * diag_size},
                    .kernel_spectrum = spectrum.data(),
                    .nfft = nfft});
    }
  });
}

using h3::testing::NormalisedError;

}  // namespace h3::kernels::testing

#endif  // H3_KERNELS_CUDA_H3_PREFILL_TEST_SUPPORT_H_
