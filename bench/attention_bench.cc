// h3_attention_bench: one attention layer's prefill on the GPU, the fp32
// FMA kernel (AttentionPrefillCuda, one call per sequence as the engine
// makes them) against the tensor-core kernel (FlashAttentionPrefillCuda, all
// sequences in one call: "flash" with fp32 q|k|v, out and caches, and
// "flash_half_io" with all of them in the operand type, as the engine calls
// it with half activations), in one process; and its decode step
// (AttentionDecodeCuda) with fp32 and 16-bit KV caches. Prints one line per
// case and writes JSON (--out): "cases", the prefill's achieved TFLOP/s and
// their fraction of the device's dense fp16/bf16 tensor peak
// (--peak-tflops); "decode", GB/s of cache read and their fraction of the
// copy bandwidth measured in the same run ("bandwidth").
//
//   h3_attention_bench [--heads 16] [--head-dim 128] [--rotary-dim 0]
//       [--parts prefill,decode]
//       [--lengths 512,1536,4096] [--batches 1,64] [--types fp16,bf16]
//       [--kernels fma,flash] [--warmup 2] [--min-reps 5]
//       [--min-time-ms 200] [--peak-tflops 989.4]
//       [--contexts 1664,4096] [--decode-batches 1,64]
//       [--caches fp32,fp16,bf16] [--reps 50] [--rounds 3]
//       [--rotate-mib 512] [--copy-mib 1024] [--device 0] [--out FILE]
//
// The defaults are h3-1.3b's attention layers (d_model 2048, 16 heads of
// 128, no rotary; loader/config.cc). Method: per (batch, length) N(0, 1)
// inputs of one sequence, copied to every sequence of the batch (packed
// rows), each sequence its own KV cache, prompts from position 0. A call
// writes the chunks' keys and values into the caches and their outputs:
// CUDA events around the call(s); --warmup untimed calls, then calls until
// --min-reps and --min-time-ms; median and min ms per call. FLOPs: causal
// attention, 2 * 2 * head_dim per visible (query, key) pair:
// 2 * head_dim * heads * batch * L (L + 1). The fma kernel is fp32 whatever
// --types says (one record per batch and length); flash runs per type and
// reports its normalised error against fma's output as a guard.
//
// Decode: the method is in bench/attention_decode_bench.h.
//
// Exit status: 0; 1 on a CUDA failure or an unwritable --out; 2 without a
// CUDA device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/build_info.h"
#include "base/half_float.h"
#include "bench/attention_decode_bench.h"
#include "bench/flashconv_report.h"
#include "bench/gpu_bench_support.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/flash_attention.h"
#include "nlohmann/json.hpp"

namespace h3::bench {
namespace {

using Json = nlohmann::ordered_json;

#define CHECK_CUDA(expr)                             \
  do {                                               \
    const cudaError_t err_ = (expr);                 \
    if (err_ != cudaSuccess) {                       \
      std::cerr << "h3_attention_bench: " #expr ": " \
                << cudaGetErrorString(err_) << "\n"; \
      std::exit(1);                                  \
    }                                                \
  } while (false)

struct Flags {
  int heads = 16, head_dim = 128, rotary_dim = 0;
  std::vector<std::string> parts = {"prefill", "decode"};
  std::vector<int64_t> lengths = {512, 1536, 4096};
  std::vector<int> batches = {1, 64};
  std::vector<std::string> types = {"fp16", "bf16"};
  std::vector<std::string> kernels = {"fma", "flash"};
  int warmup = 2, min_reps = 5;
  double min_time_ms = 200;
  // H100 SXM5: 989.4 TFLOP/s dense fp16/bf16 with fp32 accumulation (NVIDIA
  // H100 datasheet; the PCIe card: 756).
  double peak_tflops = 989.4;
  DecodeFlags decode;
  int64_t copy_mib = 1024;
  int device = 0;
  std::string out;
};

bool Has(const std::vector<std::string>& list, const std::string& x) {
  return std::count(list.begin(), list.end(), x) > 0;
}

// Device memory for one (batch, length) case.
struct Buffers {
  float *qkv = nullptr, *k = nullptr, *v = nullptr, *freq = nullptr;
  float *out = nullptr, *ref = nullptr;
  ~Buffers() {
    for (float* p : {qkv, k, v, freq, out, ref}) cudaFree(p);
  }
};

float* DeviceFloats(int64_t n) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, n * sizeof(float)));
  return static_cast<float*>(p);
}

struct Timing {
  double median_ms = 0, min_ms = 0;
  int reps = 0;
};

template <typename Call>
Timing Time(const Flags& f, Call call) {
  for (int i = 0; i < f.warmup; ++i) call();
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<double> ms;
  double total = 0;
  while (static_cast<int>(ms.size()) < f.min_reps || total < f.min_time_ms) {
    CHECK_CUDA(cudaEventRecord(start));
    call();
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
    total += t;
  }
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front(), static_cast<int>(ms.size())};
}

// max |x - y| / max |y| over host vectors of one size; infinite where x is
// not finite.
double MaxAbsDiffOverMax(const std::vector<float>& x,
                         const std::vector<float>& y) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) return INFINITY;
    err = std::max(err, std::abs(double{x[i]} - y[i]));
    scale = std::max(scale, std::abs(double{y[i]}));
  }
  return err / std::max(scale, 1e-30);
}

// The same of n floats at a and b in device memory.
double MaxAbsDiffOverMax(const float* a, const float* b, int64_t n) {
  std::vector<float> x(n), y(n);
  CHECK_CUDA(cudaMemcpy(x.data(), a, n * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(y.data(), b, n * 4, cudaMemcpyDeviceToHost));
  return MaxAbsDiffOverMax(x, y);
}

// The engine's call with half activations: q|k|v, out and the KV caches
// in the operand type (io_type = type; the caches' tiles are copied, not
// rounded). Recorded as kernel "flash_half_io", its guard against fma's
// fp32 output (ref, on the device) after out is widened.
template <typename Record>
void RunHalfIo(const Flags& f, int batch, int64_t len, ElementType type,
               const std::vector<float>& one, const float* inv_freq,
               const float* ref, const Record& record) {
  const kernels::AttentionShape shape{f.heads, f.head_dim, f.rotary_dim};
  const int64_t d = shape.d_model(), rows = batch * len;
  std::vector<uint16_t> one16(one.size());
  StoreFloats(one.data(), static_cast<int64_t>(one.size()), one16.data(), type,
              0);
  void *qkv = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
  CHECK_CUDA(cudaMalloc(&qkv, rows * 3 * d * 2));
  CHECK_CUDA(cudaMalloc(&k, rows * d * 2));
  CHECK_CUDA(cudaMalloc(&v, rows * d * 2));
  CHECK_CUDA(cudaMalloc(&out, rows * d * 2));
  for (int s = 0; s < batch; ++s) {
    CHECK_CUDA(cudaMemcpy(static_cast<uint16_t*>(qkv) + s * len * 3 * d,
                          one16.data(), one16.size() * 2,
                          cudaMemcpyHostToDevice));
  }
  std::vector<kernels::flash::Sequence> seqs;
  for (int s = 0; s < batch; ++s) {
    seqs.push_back({0,
                    len,
                    s * len,
                    {static_cast<uint16_t*>(k) + s * len * d,
                     static_cast<uint16_t*>(v) + s * len * d, len, type}});
  }
  kernels::flash::Params p{shape, type, batch, seqs.data(), qkv, inv_freq, out};
  p.io_type = type;
  const Timing t = Time(
      f, [&] { CHECK_CUDA(kernels::FlashAttentionPrefillCuda(p, nullptr)); });
  std::vector<uint16_t> got16(rows * d);
  CHECK_CUDA(
      cudaMemcpy(got16.data(), out, got16.size() * 2, cudaMemcpyDeviceToHost));
  std::vector<float> got(rows * d), want(rows * d);
  LoadFloats(got16.data(), type, 0, rows * d, got.data());
  CHECK_CUDA(
      cudaMemcpy(want.data(), ref, want.size() * 4, cudaMemcpyDeviceToHost));
  for (void* ptr : {qkv, k, v, out}) cudaFree(ptr);
  record("flash_half_io", type == ElementType::kBF16 ? "bf16" : "fp16", t,
         MaxAbsDiffOverMax(got, want));
}

void RunCase(const Flags& f, int batch, int64_t len, Json* records) {
  const kernels::AttentionShape shape{f.heads, f.head_dim, f.rotary_dim};
  const int64_t d = shape.d_model(), rows = batch * len;
  Buffers b;
  b.qkv = DeviceFloats(rows * 3 * d);
  b.k = DeviceFloats(rows * d);
  b.v = DeviceFloats(rows * d);
  b.out = DeviceFloats(rows * d);
  b.ref = DeviceFloats(rows * d);
  b.freq = DeviceFloats(std::max(f.rotary_dim / 2, 1));
  std::vector<float> one(len * 3 * d);  // one sequence's q|k|v, on the host
  {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    for (float& x : one) x = normal(rng);
    for (int s = 0; s < batch; ++s) {
      CHECK_CUDA(cudaMemcpy(b.qkv + s * len * 3 * d, one.data(), one.size() * 4,
                            cudaMemcpyHostToDevice));
    }
    std::vector<float> freq(std::max(f.rotary_dim / 2, 1));
    for (int i = 0; i < f.rotary_dim / 2; ++i) {
      freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / f.rotary_dim));
    }
    CHECK_CUDA(cudaMemcpy(b.freq, freq.data(), freq.size() * 4,
                          cudaMemcpyHostToDevice));
  }
  const float* inv_freq = f.rotary_dim > 0 ? b.freq : nullptr;
  std::vector<kernels::flash::Sequence> seqs;
  for (int s = 0; s < batch; ++s) {
    seqs.push_back(
        {0, len, s * len, {b.k + s * len * d, b.v + s * len * d, len}});
  }
  // 2 flops per multiply-add, two products, L (L + 1) / 2 visible pairs.
  const double flops =
      2.0 * f.head_dim * f.heads * batch * static_cast<double>(len) * (len + 1);
  auto record = [&](const std::string& kernel, const std::string& type,
                    const Timing& t, double error) {
    const double tflops = flops / (t.median_ms * 1e-3) / 1e12;
    Json r = {{"kernel", kernel},
              {"type", type},
              {"batch", batch},
              {"length", len},
              {"median_ms", t.median_ms},
              {"min_ms", t.min_ms},
              {"reps", t.reps},
              {"tflops", tflops},
              {"fraction_of_peak", tflops / f.peak_tflops}};
    if (error >= 0) r["error_vs_fma"] = error;
    std::cout << kernel << " " << type << " batch " << batch << " L " << len
              << ": " << t.median_ms << " ms, " << tflops << " TFLOP/s ("
              << 100 * tflops / f.peak_tflops << "% of peak)"
              << (error >= 0 ? ", error vs fma " + std::to_string(error) : "")
              << std::endl;
    records->push_back(r);
  };

  auto fma = [&](float* out) {
    for (int s = 0; s < batch; ++s) {
      CHECK_CUDA(kernels::AttentionPrefillCuda(
          {shape, 0, len, b.qkv + s * len * 3 * d, inv_freq, seqs[s].cache,
           out + s * len * d},
          nullptr));
    }
  };
  fma(b.ref);  // the guard's reference, also for when fma is not timed
  CHECK_CUDA(cudaDeviceSynchronize());
  if (std::count(f.kernels.begin(), f.kernels.end(), "fma") > 0) {
    record("fma", "fp32", Time(f, [&] { fma(b.out); }), -1);
  }
  if (std::count(f.kernels.begin(), f.kernels.end(), "flash") == 0) return;
  for (const std::string& name : f.types) {
    const ElementType type =
        name == "bf16" ? ElementType::kBF16 : ElementType::kF16;
    const kernels::flash::Params p{shape, type,     batch, seqs.data(),
                                   b.qkv, inv_freq, b.out};
    const Timing t = Time(
        f, [&] { CHECK_CUDA(kernels::FlashAttentionPrefillCuda(p, nullptr)); });
    record("flash", name, t, MaxAbsDiffOverMax(b.out, b.ref, rows * d));
    RunHalfIo(f, batch, len, type, one, inv_freq, b.ref, record);
  }
}

int Run(const Flags& f) {
  if (const int status = UseDevice(f.device, "h3_attention_bench")) {
    return status;
  }
  if (!kernels::FlashAttentionSupports({f.heads, f.head_dim, f.rotary_dim},
                                       ElementType::kF16)) {
    std::cerr << "h3_attention_bench: the tensor-core kernel has no instance "
                 "for head_dim "
              << f.head_dim << " (64 or 128) or rotary_dim " << f.rotary_dim
              << "\n";
    return 1;
  }
  Json records = Json::array(), decode = Json::array(), bandwidth;
  if (Has(f.parts, "prefill")) {
    for (int batch : f.batches) {
      for (int64_t len : f.lengths) RunCase(f, batch, len, &records);
    }
  }
  if (Has(f.parts, "decode")) {
    const Bandwidth bw = MeasureBandwidth(f.device, f.copy_mib << 20, nullptr);
    bandwidth = BandwidthJson(bw);
    DecodeFlags d = f.decode;
    d.heads = f.heads;
    d.head_dim = f.head_dim;
    d.rotary_dim = f.rotary_dim;
    d.copy_gb_per_s = bw.measured / 1e9;
    decode = RunDecodeCases(d);
  }
  if (f.out.empty()) return 0;
  std::ofstream file(f.out);
  const BuildInfo& build = GetBuildInfo();
  const Json report = {{"benchmark", "attention_prefill"},
                       {"commit", build.git_commit},
                       {"cuda", build.cuda_version},
                       {"device", DeviceJson(f.device)},
                       {"shape",
                        {{"heads", f.heads},
                         {"head_dim", f.head_dim},
                         {"rotary_dim", f.rotary_dim}}},
                       {"peak_tflops", f.peak_tflops},
                       {"cases", records},
                       {"bandwidth", bandwidth},
                       {"decode", decode}};
  file << report.dump(2) << "\n";
  if (!file) {
    std::cerr << "h3_attention_bench: cannot write " << f.out << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace h3::bench

int main(int argc, char** argv) {
  CLI::App app{"Times prefill attention: fp32 FMA against tensor cores",
               "h3_attention_bench"};
  h3::bench::Flags f;
  app.add_option("--heads", f.heads)->check(CLI::Range(1, 65535));
  app.add_option("--head-dim", f.head_dim)->check(CLI::IsMember({64, 128}));
  app.add_option("--rotary-dim", f.rotary_dim)->check(CLI::Range(0, 128));
  app.add_option("--lengths", f.lengths)->delimiter(',');
  app.add_option("--batches", f.batches)
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  app.add_option("--types", f.types)
      ->delimiter(',')
      ->check(CLI::IsMember({"fp16", "bf16"}));
  app.add_option("--kernels", f.kernels)
      ->delimiter(',')
      ->check(CLI::IsMember({"fma", "flash"}));
  app.add_option("--warmup", f.warmup)->check(CLI::Range(0, 100));
  app.add_option("--min-reps", f.min_reps)->check(CLI::Range(1, 100000));
  app.add_option("--min-time-ms", f.min_time_ms)->check(CLI::NonNegativeNumber);
  app.add_option("--peak-tflops", f.peak_tflops)->check(CLI::PositiveNumber);
  app.add_option("--parts", f.parts)
      ->delimiter(',')
      ->check(CLI::IsMember({"prefill", "decode"}));
  app.add_option("--contexts", f.decode.contexts)->delimiter(',');
  app.add_option("--decode-batches", f.decode.batches)
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  app.add_option("--caches", f.decode.caches)
      ->delimiter(',')
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  app.add_option("--reps", f.decode.reps)->check(CLI::Range(1, 100000));
  app.add_option("--rounds", f.decode.rounds)->check(CLI::Range(1, 1000));
  app.add_option("--rotate-mib", f.decode.rotate_mib)
      ->check(CLI::Range(0, 1 << 16));
  app.add_option("--copy-mib", f.copy_mib)->check(CLI::Range(1, 1 << 16));
  app.add_option("--device", f.device)->check(CLI::NonNegativeNumber);
  app.add_option("--out", f.out, "JSON report");
  CLI11_PARSE(app, argc, argv);
  for (const auto& [flag, values] :
       {std::pair{"--lengths", f.lengths},
        std::pair{"--contexts", f.decode.contexts}}) {
    for (int64_t len : values) {
      if (len < 1 || len > (int64_t{1} << 20)) {
        std::cerr << "h3_attention_bench: " << flag << ": " << len
                  << " is outside [1, 1048576]\n";
        return 1;
      }
    }
  }
  return h3::bench::Run(f);
}
