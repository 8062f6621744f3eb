#ifndef H3_BENCH_ATTENTION_DECODE_BENCH_H_
#define H3_BENCH_ATTENTION_DECODE_BENCH_H_

// h3_attention_bench's decode rows: AttentionDecodeCuda (one new token per
// sequence over its KV cache) with fp32 and 16-bit caches, as GB/s of cache
// read and its fraction of the copy bandwidth measured in the same run
// (the flags are h3_attention_bench's, bench/attention_bench.cc).
//
// Decode method: per (decode batch, context, cache type) N(0, 1) caches of
// that type (qkv and out of it too: a 16-bit cache is taken with 16-bit
// I/O), every sequence's new token at position context - 1, so a call
// writes it and reads context keys and values of each sequence; enough
// copies of the batch's caches to pass --rotate-mib, cycled, so that calls
// read them from HBM, not L2; 3 untimed calls, then --rounds rounds of
// --reps calls between two CUDA events; ms: the per-call mean of the
// fastest round. gb_per_s = cache bytes (batch x 2 x context x d_model x
// element size) / ms; fraction_of_copy = gb_per_s / the copy bandwidth
// (bytes read + written per second by cudaMemcpyAsync, the fastest of 20;
// --copy-mib). error_vs_fp32_cache: the 16-bit cache's output against the
// fp32 cache's (the same draws, rounded), a guard. Defaults: h3-1.3b's
// shape, contexts of a 1536-token prompt plus 128 generated, and 4096.

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace h3::bench {

struct DecodeFlags {
  int heads = 16, head_dim = 128, rotary_dim = 0;
  std::vector<int64_t> contexts = {1664, 4096};
  std::vector<int> batches = {1, 64};
  // "fp32" (fp32 qkv and out too), "fp16", "bf16" (qkv and out of that
  // type: the kernels take a 16-bit cache of io_type only).
  std::vector<std::string> caches = {"fp32", "fp16", "bf16"};
  int reps = 50, rounds = 3;
  int64_t rotate_mib = 512;  // cache copies cycled past this: out of L2
  double copy_gb_per_s = 0;  // the measured copy bandwidth (bytes/s / 1e9)
};

// One record per (batch, context, cache type); exits with status 1 on a
// CUDA failure.
nlohmann::ordered_json RunDecodeCases(const DecodeFlags& f);

}  // namespace h3::bench

#endif  // H3_BENCH_ATTENTION_DECODE_BENCH_H_
