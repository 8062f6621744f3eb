#ifndef H3_BENCH_ATTENTION_DECODE_BENCH_H_
#define H3_BENCH_ATTENTION_DECODE_BENCH_H_

// h3_attention_bench's decode rows: AttentionDecodeCuda (one new token per
// sequence over its KV cache) with fp32 and 16-bit caches, as GB/s of cache
// read and its fraction of the copy bandwidth measured in the same run
// (bench/attention_bench.cc has the method).

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
