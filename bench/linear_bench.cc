// h3_linear_bench: the decode products of the H3-1.3B shape (d_model 2048)
// by SkinnyGemmCuda (the batch-invariant kernel, kernels/skinny_gemm.h) and by
// LinearCuda (cuBLASLt, the default path; "cublaslt_pinned", one
// algorithm per shape for every row count: LinearCuda::Options::
// pinned_algorithms; "cublaslt_tuned", the fastest of the heuristic's first
// few algorithms and their split-K variants, timed at the first call:
// Options::tune_algorithms, which the untimed calls below trigger; its
// record's "tuning" says what was timed and kept) and by StreamGemmCuda
// ("stream": the decode product on tensor cores, kernels/stream_gemm.h),
// against the device-to-device copy bandwidth measured in the same run, with
// fp32 activations (x and y fp32: LinearCuda first rounds x to W's type) and
// with 16-bit ones (x in W's type, and y too where the model's half activations
// keep it 16-bit: the qkv and fc1 outputs, whose bias is then of y's type, as
// the model stores it). "half-fp32-bias" times qkv and fc1 with half
// activations but an fp32 bias (LinearCuda's route through fp32 D and a
// rounding kernel), for comparison. "stream_pdl" is "stream" launched with
// LaunchOrder::kOverlapPrior (--pdl: each call may start while the one before
// finishes). On compute capability 9.0 and later, "stream_split" (and
// "stream_split_pdl") times StreamSplitGemmCuda (kernels/stream_split_gemm.h: k
// split across a thread-block cluster, x read once per 128 columns), and with
// half activations "tile" (and "tile_pdl") times TileGemmCuda
// (kernels/tile_gemm.h: W and x through shared memory in 64 x 64 tiles; its
// records say the product's "splits" and block width "cols"; with
// --tile-splits 1,2,4,8 also "tile_s1" ... at each of those split counts,
// launched as --pdl launches, "_pdl" then, to find the best count per
// product; with --tile-cols 64,128 too, "tile_c64_s1" ... at each block
// width and split count instead: TileGemmCudaCut). With half
// activations and at most kNormStreamMaxRows rows, qkv and fc1 are also timed
// with the norm before them: "norm+stream" (AddLayerNormCuda, then
// StreamGemmCuda: what a decode step runs), "fused_norm"
// (AddNormStreamGemmCuda: the norm inside the product, which no step runs),
// each also "_pdl"; their bytes count the norm's too (x and two residual rows
// in fp32, gamma, beta; the normed rows twice where they exist).
// H3_CUDA_FALLBACKS leaves out the records of the paths it names (pdl: every
// "_pdl"; stream-split; tile). JSON on stdout, or in --out.
//
//   h3_linear_bench [--types fp16,bf16] [--rows 1,8,64] [--vocab 50264]
//       [--activations fp32,half,half-fp32-bias] [--tile-splits 1,2,4,8]
//       [--tile-cols 64,128]
//       [--reps 50] [--rounds 3] [--rotate-mib 512] [--copy-mib 1024]
//       [--device 0] [--out FILE]
//
// Method: per (product, weight type, rows, kernel), enough copies of W (N(0,1)
// values) to pass --rotate-mib, so that calls read W from HBM and not from
// L2; 3 untimed calls, then --rounds rounds of --reps calls cycling through
// the copies, each round between two CUDA events. ms: the per-call mean of
// the fastest round (and of the median one). Bytes per call: W, x, y and bias;
// gb_per_s = bytes / ms; fraction_of_copy = gb_per_s / the copy bandwidth
// (bytes read + written per second by cudaMemcpyAsync, the fastest of 20).
// step_ms: 24 layers x (qkv + out_proj + fc1 + fc2) + lm_head, the products
// of one decode step, per weight type, rows, kernel and (for half
// activations: a "_half" suffix) activation type; half-fp32-bias, which times
// two of the products, has none.
//
// Exit status: 0; 1 on a CUDA failure (the call and the error are printed)
// or an unwritable --out; 2 without a CUDA device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/flashconv_device.h"
#include "bench/flashconv_floor.h"
#include "bench/flashconv_report.h"
#include "bench/gpu_bench_support.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/device_major.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/linear.h"
#include "kernels/cuda/skinny_gemm.h"
#include "kernels/cuda/stream_gemm.h"
#include "kernels/cuda/stream_split_gemm.h"
#include "kernels/cuda/tile_gemm.h"
#include "kernels/fallbacks.h"
#include "nlohmann/json.hpp"

namespace h3::bench {
namespace {

using Json = nlohmann::ordered_json;

struct Flags : TimingFlags {
  std::vector<std::string> types = {"fp16", "bf16"};
  std::vector<int64_t> rows = {1, 8, 64};
  std::vector<std::string> activations = {"fp32", "half", "half-fp32-bias"};
  int64_t vocab = 50264;         // the random H3-1.3B's padded vocabulary
  std::vector<int> tile_splits;  // also "tile_s<N>": TileGemmCudaSplits
  std::vector<int> tile_cols;    // "tile_c<W>_s<N>" instead: TileGemmCudaCut
};

struct Product {
  const char* name;
  int64_t n, k;
  bool bias, gelu;
  bool half_y;  // y 16-bit with half activations (else fp32: the residual
                // stream's inputs and the logits)
};

// The products of one H3-1.3B layer (q|k|v stacked), then the tied LM head.
std::vector<Product> Products(int64_t vocab) {
  return {{"qkv", 6144, 2048, true, false, true},
          {"out_proj", 2048, 2048, true, false, false},
          {"fc1", 8192, 2048, true, true, true},
          {"fc2", 2048, 8192, true, false, false},
          {"lm_head", vocab, 2048, false, false, false}};
}

ElementType TypeOf(const std::string& name) {
  return name == "bf16" ? ElementType::kBF16 : ElementType::kF16;
}

int Run(const Flags& f) {
  if (const int status = UseDevice(f.device, "h3_linear_bench")) return status;
  cudaStream_t stream;
  H3_BENCH_CUDA_CHECK(cudaStreamCreate(&stream));
  const Bandwidth bw = MeasureBandwidth(f.device, f.copy_mib << 20, stream);
  int major = 0;
  H3_BENCH_CUDA_CHECK(kernels::CurrentDeviceMajor(&major));
  const bool clusters = major >= 9;  // StreamSplitGemmCuda runs
  // H3_CUDA_FALLBACKS (kernels/fallbacks.h; gpu-check's triage sets it
  // where a path's tests failed): the records of the paths it names are
  // left out, so a faulting kernel does not end the run.
  const bool no_pdl = kernels::KernelFallback("pdl");
  const bool no_split = kernels::KernelFallback("stream-split");
  const bool no_tile = kernels::KernelFallback("tile");
  std::vector<kernels::LaunchOrder> orders = {
      kernels::LaunchOrder::kAfterPrior};
  if (!no_pdl) orders.push_back(kernels::LaunchOrder::kOverlapPrior);
  const int64_t max_rows = *std::max_element(f.rows.begin(), f.rows.end());
  std::unique_ptr<kernels::LinearCuda> lt;
  kernels::LinearCuda::Options options;
  options.max_rows_times_k = max_rows * 8192;
  options.max_rows_times_n = max_rows * 8192;  // fc1: 16-bit y, fp32 bias
  const std::string lt_error = kernels::LinearCuda::Create(options, &lt);
  // The same with one algorithm per shape for every row count
  // (LinearCuda::Options::pinned_algorithms): batch invariance on cuBLASLt.
  std::unique_ptr<kernels::LinearCuda> pinned;
  options.pinned_algorithms = true;
  const std::string pinned_error =
      lt_error.empty() ? kernels::LinearCuda::Create(options, &pinned) : "";
  // And with each shape's algorithm timed at its first call
  // (LinearCuda::Options::tune_algorithms).
  std::unique_ptr<kernels::LinearCuda> tuned;
  options.pinned_algorithms = false;
  options.tune_algorithms = true;
  const std::string tuned_error =
      pinned_error.empty() ? kernels::LinearCuda::Create(options, &tuned) : "";
  for (const std::string& e : {lt_error, pinned_error, tuned_error}) {
    if (!e.empty()) {
      std::cerr << "h3_linear_bench: " << e << "\n";
      return 1;
    }
  }

  Json records = Json::array();
  Json step_ms = Json::object();
  for (const std::string& type_name : f.types) {
    const ElementType type = TypeOf(type_name);
    for (const Product& p : Products(f.vocab)) {
      const int64_t w_bytes = p.n * p.k * ElementSize(type);
      const int copies = CopiesPast(f, w_bytes, 1);
      std::vector<kernels::DeviceBuffer> w(copies);
      for (int c = 0; c < copies; ++c) {
        H3_BENCH_CUDA_CHECK(w[c].Reserve(w_bytes));
        H3_BENCH_CUDA_CHECK(
            FillNormal(w[c].get(), p.n * p.k, type, 100 + c, stream));
      }
      kernels::DeviceBuffer x32, x16, y, bias, bias16;
      H3_BENCH_CUDA_CHECK(x32.Reserve(max_rows * p.k * sizeof(float)));
      H3_BENCH_CUDA_CHECK(x16.Reserve(max_rows * p.k * ElementSize(type)));
      H3_BENCH_CUDA_CHECK(y.Reserve(max_rows * p.n * sizeof(float)));
      H3_BENCH_CUDA_CHECK(bias.Reserve(p.n * sizeof(float)));
      H3_BENCH_CUDA_CHECK(bias16.Reserve(p.n * ElementSize(type)));
      H3_BENCH_CUDA_CHECK(
          FillNormal(x32.get(), max_rows * p.k, ElementType::kF32, 1, stream));
      H3_BENCH_CUDA_CHECK(
          FillNormal(x16.get(), max_rows * p.k, type, 1, stream));
      H3_BENCH_CUDA_CHECK(
          FillNormal(bias.get(), p.n, ElementType::kF32, 2, stream));
      H3_BENCH_CUDA_CHECK(FillNormal(bias16.get(), p.n, type, 2, stream));
      // The norm before the product (timed for qkv and fc1): its input and
      // the residual in fp32, gamma and beta.
      kernels::DeviceBuffer norm_x, norm_in, norm_out, gamma, beta;
      for (kernels::DeviceBuffer* b : {&norm_x, &norm_in, &norm_out}) {
        H3_BENCH_CUDA_CHECK(b->Reserve(max_rows * p.k * sizeof(float)));
        H3_BENCH_CUDA_CHECK(
            FillNormal(b->get(), max_rows * p.k, ElementType::kF32, 3, stream));
      }
      for (kernels::DeviceBuffer* b : {&gamma, &beta}) {
        H3_BENCH_CUDA_CHECK(b->Reserve(p.k * sizeof(float)));
        H3_BENCH_CUDA_CHECK(
            FillNormal(b->get(), p.k, ElementType::kF32, 4, stream));
      }
      for (const int64_t rows : f.rows) {
        for (const std::string& act : f.activations) {
          const bool half = act != "fp32";
          const bool fp32_bias = act == "half-fp32-bias";
          if (fp32_bias && !(p.bias && p.half_y)) continue;  // = "half"
          const ElementType x_type = half ? type : ElementType::kF32;
          const ElementType y_type =
              half && p.half_y ? type : ElementType::kF32;
          // The model's: y's type (engine/model.cc), unless fp32_bias.
          const ElementType bias_type = fp32_bias ? ElementType::kF32 : y_type;
          // The call's operands; each call sets w to its copy.
          const auto params = [&](auto out) {
            out.x = half ? x16.get() : x32.get();
            out.x_type = x_type;
            out.w_type = type;
            out.bias = !p.bias                          ? nullptr
                       : bias_type == ElementType::kF32 ? bias.get()
                                                        : bias16.get();
            out.bias_type = bias_type;
            out.y = y.get();
            out.y_type = y_type;
            out.rows = rows;
            out.n = p.n;
            out.k = p.k;
            out.gelu = p.gelu;
            return out;
          };
          kernels::SkinnyGemmParams skinny_params =
              params(kernels::SkinnyGemmParams{});
          kernels::LinearCudaParams lt_params =
              params(kernels::LinearCudaParams{});
          kernels::StreamGemmParams stream_params =
              params(kernels::StreamGemmParams{});
          const std::vector<double> skinny =
              TimeRounds(f, copies, stream, [&](int c) {
                skinny_params.w = w[c].get();
                H3_BENCH_CUDA_CHECK(
                    kernels::SkinnyGemmCuda(skinny_params, stream));
              });
          const auto time_lt = [&](kernels::LinearCuda& linear) {
            return TimeRounds(f, copies, stream, [&](int c) {
              lt_params.w = w[c].get();
              const std::string e = linear.Run(lt_params, stream);
              if (!e.empty()) {
                std::cerr << "h3_linear_bench: " << e << "\n";
                std::exit(1);
              }
            });
          };
          const std::vector<double> streamed =
              TimeRounds(f, copies, stream, [&](int c) {
                stream_params.w = w[c].get();
                H3_BENCH_CUDA_CHECK(
                    kernels::StreamGemmCuda(stream_params, stream));
              });
          // The paths H3_CUDA_FALLBACKS has not turned off.
          std::vector<std::pair<std::string, std::vector<double>>> extra;
          if (!no_pdl) {
            extra.push_back(
                {"stream_pdl", TimeRounds(f, copies, stream, [&](int c) {
                   stream_params.w = w[c].get();
                   H3_BENCH_CUDA_CHECK(kernels::StreamGemmCuda(
                       stream_params, stream,
                       kernels::LaunchOrder::kOverlapPrior));
                 })});
          }
          // Times `launch` (a call on stream_params, whose W the rounds
          // rotate) as record `name`; where its first call fails, a warning,
          // and the record is left out rather than ending the run.
          // The tile records' block widths and split counts, by name.
          std::map<std::string, std::pair<int, int>> tile_cuts;
          const auto time_if_it_launches = [&](const std::string& name,
                                               const auto& launch) {
            stream_params.w = w[0].get();
            if (const cudaError_t err = launch(); err != cudaSuccess) {
              std::cerr << "h3_linear_bench: " << name << " on " << p.name
                        << " rows " << rows << ": " << cudaGetErrorString(err)
                        << "; left out\n";
              cudaGetLastError();
              return;
            }
            extra.push_back({name, TimeRounds(f, copies, stream, [&](int c) {
                               stream_params.w = w[c].get();
                               H3_BENCH_CUDA_CHECK(launch());
                             })});
          };
          const auto suffix = [](kernels::LaunchOrder order) {
            return order == kernels::LaunchOrder::kOverlapPrior ? "_pdl" : "";
          };
          // The cluster kernel where the device has clusters.
          for (const auto order : orders) {
            if (!clusters || no_split) break;
            time_if_it_launches(std::string("stream_split") + suffix(order),
                                [&] {
                                  return kernels::StreamSplitGemmCuda(
                                      stream_params, stream, order);
                                });
          }
          // The tile kernel where it takes the product (x of W's type, on
          // 9.0 and later), and at each split count asked for.
          kernels::TileGemmShape tile_shape;
          const bool tiled =
              clusters && !no_tile &&
              kernels::TileGemmCheck(stream_params, true)[0] == '\0' &&
              kernels::TileGemmCudaShape(p.n, p.k, &tile_shape) == cudaSuccess;
          for (const auto order : tiled ? orders : decltype(orders){}) {
            const std::string name = std::string("tile") + suffix(order);
            tile_cuts[name] = {tile_shape.cols, tile_shape.splits};
            time_if_it_launches(name, [&] {
              return kernels::TileGemmCuda(stream_params, stream, order);
            });
          }
          // Each split count asked for, at the chosen width, or at each
          // width asked for (0: the chosen one).
          const std::vector<int> widths =
              f.tile_cols.empty() ? std::vector<int>{0} : f.tile_cols;
          for (const int cols : tiled ? widths : std::vector<int>{}) {
            for (const int splits : f.tile_splits) {
              const auto order = orders.back();  // as the engine launches
              const std::string name =
                  (cols > 0 ? "tile_c" + std::to_string(cols) + "_s"
                            : std::string("tile_s")) +
                  std::to_string(splits) + suffix(order);
              tile_cuts[name] = {cols > 0 ? cols : tile_shape.cols, splits};
              time_if_it_launches(name, [&] {
                return cols > 0
                           ? kernels::TileGemmCudaCut(stream_params, cols,
                                                      splits, stream, order)
                           : kernels::TileGemmCudaSplits(stream_params, splits,
                                                         stream, order);
              });
            }
          }
          const std::vector<double> cublas = time_lt(*lt);
          const std::vector<double> cublas_pinned = time_lt(*pinned);
          const kernels::LinearCuda::TuneStats before = tuned->tune_stats();
          const std::vector<double> cublas_tuned = time_lt(*tuned);
          const kernels::LinearCuda::TuneStats after = tuned->tune_stats();
          // What tuning this product's plan did (nothing if an earlier
          // configuration timed the same plan).
          Json tuning = {{"timed", after.timed - before.timed},
                         {"kept_other", after.changed - before.changed},
                         {"split_candidates",
                          after.split_candidates - before.split_candidates},
                         {"kept_split", after.split_kept - before.split_kept}};
          if (after.timed > before.timed) {
            Json candidates = Json::array();
            for (const auto& [algo, ms] : after.last_timings) {
              candidates.push_back({{"algo", algo}, {"median_ms", ms}});
            }
            tuning["candidates"] = candidates;
            tuning["kept"] = after.last_kept;
          }
          const double bytes =
              w_bytes +
              rows * (p.k * ElementSize(x_type) + p.n * ElementSize(y_type)) +
              (p.bias ? double(ElementSize(bias_type)) * p.n : 0.0);
          std::vector<std::pair<std::string, std::vector<double>>> timed = {
              {"skinny", skinny},
              {"cublaslt", cublas},
              {"cublaslt_pinned", cublas_pinned},
              {"cublaslt_tuned", cublas_tuned},
              {"stream", streamed}};
          timed.insert(timed.end(), extra.begin(), extra.end());
          // The norm before qkv and fc1, apart and inside the product.
          const bool normed = half && !fp32_bias && p.half_y &&
                              rows <= kernels::kNormStreamMaxRows;
          if (normed) {
            kernels::AddLayerNormParams norm;
            norm.x = norm_x.as<float>();
            norm.residual_in = norm_in.as<float>();
            norm.residual = norm_out.as<float>();
            norm.gamma = gamma.as<float>();
            norm.beta = beta.as<float>();
            norm.out = x16.get();
            norm.out_type = type;
            norm.rows = rows;
            norm.cols = p.k;
            for (const auto order : orders) {
              const bool pdl = order == kernels::LaunchOrder::kOverlapPrior;
              timed.push_back({pdl ? "norm+stream_pdl" : "norm+stream",
                               TimeRounds(f, copies, stream, [&](int c) {
                                 stream_params.w = w[c].get();
                                 H3_BENCH_CUDA_CHECK(kernels::AddLayerNormCuda(
                                     norm, stream, order));
                                 H3_BENCH_CUDA_CHECK(kernels::StreamGemmCuda(
                                     stream_params, stream, order));
                               })});
              timed.push_back({pdl ? "fused_norm_pdl" : "fused_norm",
                               TimeRounds(f, copies, stream, [&](int c) {
                                 stream_params.w = w[c].get();
                                 H3_BENCH_CUDA_CHECK(
                                     kernels::AddNormStreamGemmCuda(
                                         norm, stream_params, stream, order));
                               })});
            }
          }
          // The norm's bytes: x and both residual rows (fp32), gamma, beta.
          const double norm_bytes = double(rows) * p.k * 3 * sizeof(float) +
                                    2.0 * p.k * sizeof(float);
          for (const auto& [kernel, ms] : timed) {
            const std::string name = kernel;
            const bool with_norm =
                name.rfind("norm+", 0) == 0 || name.rfind("fused_norm", 0) == 0;
            // Apart, the normed rows are also written and read back.
            const double call_bytes =
                bytes + (with_norm ? norm_bytes : 0.0) +
                (name.rfind("norm+", 0) == 0
                     ? double(rows) * p.k * ElementSize(type)
                     : 0.0);
            const TimeStats s = Summarize(ms);
            const double gbps = call_bytes / (s.min * 1e-3) / 1e9;
            records.push_back({{"product", p.name},
                               {"n", p.n},
                               {"k", p.k},
                               {"type", type_name},
                               {"rows", rows},
                               {"activations", act},
                               {"x_type", ElementTypeName(x_type)},
                               {"y_type", ElementTypeName(y_type)},
                               {"bias_type", ElementTypeName(bias_type)},
                               {"kernel", kernel},
                               {"ms", s.min},
                               {"ms_median_round", s.median},
                               {"bytes", call_bytes},
                               {"gb_per_s", gbps},
                               {"fraction_of_copy", gbps * 1e9 / bw.measured}});
            if (name == "cublaslt_tuned") records.back()["tuning"] = tuning;
            if (const auto it = tile_cuts.find(name); it != tile_cuts.end()) {
              records.back()["cols"] = it->second.first;
              records.back()["splits"] = it->second.second;
            }
            if (fp32_bias || with_norm) continue;  // two products: no step
            const std::string key = type_name + "_rows" + std::to_string(rows) +
                                    "_" + kernel + (half ? "_half" : "");
            const double layers = std::string(p.name) == "lm_head" ? 1 : 24;
            step_ms[key] = step_ms.value(key, 0.0) + layers * s.min;
          }
        }
      }
    }
  }
  const Json report = {
      {"benchmark", "h3_linear_bench"},
      {"build", BuildJson()},
      {"device", DeviceJson(f.device)},
      {"bandwidth", BandwidthJson(bw)},
      {"method",
       "per-call mean of the fastest of --rounds rounds of --reps calls, W "
       "rotated through copies past --rotate-mib; gb_per_s = (W + x + y + "
       "bias bytes) / ms; fraction_of_copy against "
       "bandwidth.measured_gb_per_s"},
      {"reps", f.reps},
      {"rounds", f.rounds},
      {"step_ms", step_ms},
      {"results", records}};
  return WriteReport(report, f.out, "h3_linear_bench");
}

}  // namespace
}  // namespace h3::bench

int main(int argc, char** argv) {
  CLI::App app{"Times the batch-invariant skinny GEMM against cuBLASLt (JSON)",
               "h3_linear_bench"};
  h3::bench::Flags f;
  app.add_option("--types", f.types)
      ->delimiter(',')
      ->check(CLI::IsMember({"fp16", "bf16"}))
      ->capture_default_str();
  app.add_option("--rows", f.rows)
      ->delimiter(',')
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--activations", f.activations,
                 "fp32: x and y fp32; half: x (and the qkv and fc1 y and "
                 "bias) in the weights' type; half-fp32-bias: qkv and fc1 "
                 "as half but with an fp32 bias")
      ->delimiter(',')
      ->check(CLI::IsMember({"fp32", "half", "half-fp32-bias"}))
      ->capture_default_str();
  app.add_option("--tile-splits", f.tile_splits,
                 "also time TileGemmCuda with k in each of these numbers of "
                 "splits (records tile_s<N>; half activations, compute "
                 "capability 9.0+)")
      ->delimiter(',')
      ->check(CLI::Range(1, 8));
  app.add_option("--tile-cols", f.tile_cols,
                 "time the --tile-splits counts at each of these block "
                 "widths instead of the chosen one (records tile_c<W>_s<N>)")
      ->delimiter(',')
      ->check(CLI::IsMember({64, 128}));
  app.add_option("--vocab", f.vocab, "rows of the LM head")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  h3::bench::AddTimingFlags(app, &f, "W");
  CLI11_PARSE(app, argc, argv);
  return h3::bench::Run(f);
}
