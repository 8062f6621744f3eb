// h3_attention_bench's decode rows (bench/attention_decode_bench.h).
#include "bench/attention_decode_bench.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <vector>

#include "base/element_type.h"
#include "base/half_float.h"
#include "bench/flashconv_device.h"
#include "kernels/cuda/attention.h"

namespace h3::bench {
namespace {

using Json = nlohmann::ordered_json;

ElementType TypeOf(const std::string& name) {
  if (name == "fp16") return ElementType::kF16;
  if (name == "bf16") return ElementType::kBF16;
  return ElementType::kF32;
}

void* DeviceBytes(int64_t n) {
  void* p = nullptr;
  H3_BENCH_CUDA_CHECK(cudaMalloc(&p, std::max<int64_t>(n, 1)));
  return p;
}

// One cache type's device memory for a (batch, context) case: `copies`
// sets of the batch's caches (cycled so that calls read them from HBM),
// each [batch][K, V][context, d] elements of the type.
struct DecodeCase {
  std::vector<void*> owned;
  std::vector<kernels::KvCache*> caches;  // per copy, device [batch]
  void *qkv = nullptr, *out = nullptr, *work = nullptr;
  int64_t* positions = nullptr;
  size_t work_bytes = 0;
  ~DecodeCase() {
    for (void* p : owned) cudaFree(p);
  }
  void* Own(int64_t bytes) { return owned.emplace_back(DeviceBytes(bytes)); }
};

// The batch's output, widened to fp32 on the host.
std::vector<float> Output(const DecodeCase& c, int64_t n, ElementType type) {
  std::vector<unsigned char> bytes(n * ElementSize(type));
  H3_BENCH_CUDA_CHECK(
      cudaMemcpy(bytes.data(), c.out, bytes.size(), cudaMemcpyDeviceToHost));
  std::vector<float> x(n);
  LoadFloats(bytes.data(), type, 0, n, x.data());
  return x;
}

// max |a - b| / max |b|; infinity when a holds a non-finite value.
double Normalised(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    err = std::max(err, std::abs(double{a[i]} - b[i]));
    scale = std::max(scale, std::abs(double{b[i]}));
  }
  return err / std::max(scale, 1e-30);
}

}  // namespace

Json RunDecodeCases(const DecodeFlags& f) {
  const kernels::AttentionShape shape{f.heads, f.head_dim, f.rotary_dim};
  const int64_t d = shape.d_model();
  std::vector<float> freq(std::max(f.rotary_dim / 2, 1));
  for (int i = 0; i < f.rotary_dim / 2; ++i) {
    freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / f.rotary_dim));
  }
  float* d_freq = static_cast<float*>(DeviceBytes(freq.size() * 4));
  H3_BENCH_CUDA_CHECK(
      cudaMemcpy(d_freq, freq.data(), freq.size() * 4, cudaMemcpyHostToDevice));
  const float* inv_freq = f.rotary_dim > 0 ? d_freq : nullptr;
  Json records = Json::array();
  cudaEvent_t start, stop;
  H3_BENCH_CUDA_CHECK(cudaEventCreate(&start));
  H3_BENCH_CUDA_CHECK(cudaEventCreate(&stop));
  for (int batch : f.batches) {
    for (int64_t context : f.contexts) {
      std::vector<float> fp32_out;  // the fp32 cache's output, if it ran
      for (const std::string& name : f.caches) {
        const ElementType type = TypeOf(name);
        const int64_t size = ElementSize(type);
        const int64_t cache_bytes = batch * 2 * context * d * size;
        const int copies = static_cast<int>(std::max<int64_t>(
            1, ((f.rotate_mib << 20) + cache_bytes - 1) / cache_bytes));
        DecodeCase c;
        c.qkv = c.Own(batch * 3 * d * size);
        c.out = c.Own(batch * d * size);
        // The same seeds for every cache type: the same draws, rounded.
        H3_BENCH_CUDA_CHECK(FillNormal(c.qkv, batch * 3 * d, type, 1, nullptr));
        std::vector<int64_t> positions(batch, context - 1);
        c.positions = static_cast<int64_t*>(c.Own(batch * 8));
        H3_BENCH_CUDA_CHECK(cudaMemcpy(c.positions, positions.data(), batch * 8,
                                       cudaMemcpyHostToDevice));
        for (int copy = 0; copy < copies; ++copy) {
          char* kv = static_cast<char*>(c.Own(cache_bytes));
          H3_BENCH_CUDA_CHECK(
              FillNormal(kv, cache_bytes / size, type, 2, nullptr));
          std::vector<kernels::KvCache> caches;
          for (int b = 0; b < batch; ++b) {
            char* k = kv + b * 2 * context * d * size;
            caches.push_back({k, k + context * d * size, context, type});
          }
          c.caches.push_back(
              static_cast<kernels::KvCache*>(c.Own(batch * sizeof caches[0])));
          H3_BENCH_CUDA_CHECK(cudaMemcpy(c.caches.back(), caches.data(),
                                         batch * sizeof caches[0],
                                         cudaMemcpyHostToDevice));
        }
        c.work_bytes =
            kernels::AttentionDecodeWorkspaceBytes(shape, batch, context);
        c.work = c.Own(c.work_bytes);
        auto call = [&](int copy) {
          H3_BENCH_CUDA_CHECK(kernels::AttentionDecodeCuda(
              {shape, batch, c.qkv, inv_freq, c.caches[copy], c.positions,
               c.out, type},
              context, c.work, c.work_bytes, nullptr));
        };
        for (int i = 0; i < 3; ++i) call(i % copies);
        H3_BENCH_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<double> ms;
        for (int round = 0; round < f.rounds; ++round) {
          H3_BENCH_CUDA_CHECK(cudaEventRecord(start));
          for (int i = 0; i < f.reps; ++i) call(i % copies);
          H3_BENCH_CUDA_CHECK(cudaEventRecord(stop));
          H3_BENCH_CUDA_CHECK(cudaEventSynchronize(stop));
          float total = 0;
          H3_BENCH_CUDA_CHECK(cudaEventElapsedTime(&total, start, stop));
          ms.push_back(total / f.reps);
        }
        std::sort(ms.begin(), ms.end());
        // Keys and values of positions [0, context): the new token's own
        // included (written, then read).
        const double gbps = cache_bytes / (ms.front() * 1e-3) / 1e9;
        Json r = {{"kernel", "decode"},
                  {"cache_type", name},
                  {"io_type", name},
                  {"batch", batch},
                  {"context", context},
                  {"ms", ms.front()},
                  {"median_round_ms", ms[ms.size() / 2]},
                  {"rounds_ms", ms},
                  {"cache_copies", copies},
                  {"cache_bytes", cache_bytes},
                  {"gb_per_s", gbps},
                  {"fraction_of_copy", gbps / f.copy_gb_per_s}};
        const std::vector<float> out = Output(c, batch * d, type);
        if (type == ElementType::kF32) {
          fp32_out = out;
        } else if (!fp32_out.empty()) {
          // Same N(0, 1) draws, rounded: a guard, not an accuracy figure.
          r["error_vs_fp32_cache"] = Normalised(out, fp32_out);
        }
        std::cout << "decode cache " << name << " batch " << batch
                  << " context " << context << ": " << ms.front() << " ms, "
                  << gbps << " GB/s of cache (" << 100 * gbps / f.copy_gb_per_s
                  << "% of copy)" << std::endl;
        records.push_back(r);
      }
    }
  }
  H3_BENCH_CUDA_CHECK(cudaEventDestroy(start));
  H3_BENCH_CUDA_CHECK(cudaEventDestroy(stop));
  cudaFree(d_freq);
  return records;
}

}  // namespace h3::bench
