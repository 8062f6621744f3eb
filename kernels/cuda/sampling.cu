// SampleCuda: the specification of kernels/sampling.h with one block per row
// and no sort. Every token gets a 64-bit order key (its processed logit's
// bits, then its id reversed) so that "the k largest, ties to lower ids" and
// "the most likely tokens whose mass reaches top_p" are both the tokens whose
// key is at least some threshold. The thresholds come from a radix select
// over the keys, a 4-bit digit per pass, counting tokens (top_k) or summing
// their fixed-point mass (top_p); the draw is a block-wide prefix sum of the
// kept mass in id order. Masses are integers, so every sum is exact and the
// result does not depend on the order of the additions. Banned tokens get
// key 0, below every candidate's, and every threshold is at least 1.
//
// Two kernels: SampleScanKernel reads the logits once, a block to every
// kScanChunk tokens of a row, writing the processed logits and each chunk's
// largest key, banned tokens and log-sum-exp share; SampleKernel, a block a
// row, combines the chunks' shares and, for rows that draw, runs the
// selection and the draw over the processed logits. (One block a row did
// it all at first: at batch 1 a greedy step's sampling took 74 us of an
// H200's 1.4 ms step, one block walking 50K logits three times: the
// processed logits, then the logprob's max and sum; e190e6a.)
#include <cstdint>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/sampling.h"
#include "kernels/philox.h"
#include "kernels/sampling_token.h"

namespace h3::kernels {
namespace {

// 16 warps per row: enough to keep one SM's memory pipes busy when the batch
// is small, and __launch_bounds__ then allows 128 registers per thread, room
// for the 16 64-bit bins of a radix pass.
constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
// A radix digit of 4 bits: its 16 bins stay in registers. Wider digits need
// shared-memory atomics, which serialise when a warp's tokens share a digit,
// as the top bits of a row of logits mostly do.
constexpr int kDigitBits = 4;
constexpr int kBins = 1 << kDigitBits;
// A weight w in [0, 1] weighs floor(w * 2^39). With at most 2^24 tokens the
// row's total stays below 2^63; tokens under 2^-39 of the most likely one
// weigh nothing (the CPU twin would draw them with that probability).
constexpr int kMaxVocabBits = 24;
constexpr float kMassScale = 0x1p39f;
// The draw scans the row in tiles of kThreads * kPerThread consecutive ids:
// 16 per thread costs vocab / 8192 block-wide scans.
constexpr int kPerThread = 16;
// The scan: a thread loads all kScanLoads of its tokens' inputs before it
// uses any, so a block's chunk costs one memory round trip; 4096 tokens a
// block give a 50K vocabulary 13 blocks a row.
constexpr int kScanLoads = 8;
constexpr int32_t kScanChunk = kThreads * kScanLoads;
// A banned token's processed logit in the workspace: no candidate's is NaN
// (kernels/sampling.h REQUIRES), so every pass tells banned tokens apart by
// x alone, without reading the flags again.
constexpr float kBannedLogit = __builtin_nanf("");
// The least threshold: every candidate, no banned token.
constexpr uint64_t kEveryCandidate = 1;

struct Shared {
  uint64_t bins_by_warp[kWarps][kBins];
  uint64_t bins[kBins];
  uint64_t u64[32];  // BlockAllReduce / BlockExclusiveSum scratch
  int32_t i32[32];
  float f32[32];
  double f64[32];
  int32_t chosen;
};

// A chunk's share of its row, from the scan (workspace [batch, chunks]).
struct ScanShare {
  uint64_t best;    // the chunk's largest order key (0: all banned)
  double sum_exp;   // sum of exp(logit - max_logit) (0 when max is -inf)
  float max_logit;  // the chunk's largest logit
  int32_t banned;   // its banned tokens
};

int32_t ScanChunks(int32_t vocab) {
  return (vocab + kScanChunk - 1) / kScanChunk;
}

// One row's processed logits and weights, in the workspace.
struct Row {
  const float* x;  // [vocab]
  const float* w;  // [vocab]
  int32_t vocab;
  int id_bits;  // bits for an id, rounded up to whole digits
};

__device__ uint64_t Plus(uint64_t a, uint64_t b) { return a + b; }
__device__ int32_t Plus32(int32_t a, int32_t b) { return a + b; }
__device__ uint64_t MaxU64(uint64_t a, uint64_t b) { return a > b ? a : b; }

// Larger for a larger x, or an equal x and a lower id; distinct for
// distinct candidates. 0 for a banned token (x NaN): a candidate's key is
// at least -inf's, 0x7fffff << id_bits.
__device__ uint64_t OrderKey(float x, int32_t id, const Row& r) {
  if (isnan(x)) return 0;
  if (x == 0.0f) x = 0.0f;  // -0 == +0: the tie goes to the lower id
  const uint32_t bits = __float_as_uint(x);
  const uint32_t ordered = (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
  return (uint64_t{ordered} << r.id_bits) |
         static_cast<uint32_t>(r.vocab - 1 - id);
}

__device__ uint64_t Mass(float w) {
  return w > 0 ? static_cast<uint64_t>(w * kMassScale) : 0;  // NaN: 0
}

// Sums each thread's bins over the block into sh.bins.
__device__ void BlockSumBins(uint64_t (&bins)[kBins], Shared& sh) {
#pragma unroll
  for (int d = 0; d < kBins; ++d) bins[d] = WarpAllReduce(bins[d], Plus);
  if (threadIdx.x % 32 == 0) {
#pragma unroll
    for (int d = 0; d < kBins; ++d)
      sh.bins_by_warp[threadIdx.x / 32][d] = bins[d];
  }
  __syncthreads();
  if (threadIdx.x < kBins) {
    uint64_t sum = 0;
    for (int w = 0; w < kWarps; ++w) sum += sh.bins_by_warp[w][threadIdx.x];
    sh.bins[threadIdx.x] = sum;
  }
  __syncthreads();
}

// The largest key c such that the tokens with key >= c weigh at least
// `target` (weight 1 each, or their mass): the boundary token of "the k
// largest" or of "the most likely tokens whose mass reaches target". Fixes a
// digit per pass from the top, keeping `above` (the weight of the tokens
// whose key beats every key under `prefix`) below target.
// REQUIRES: 0 < target <= the row's total weight.
template <bool kByMass>
__device__ uint64_t SelectThreshold(const Row& r, uint64_t target, Shared& sh) {
  uint64_t prefix = 0, above = 0;
  for (int shift = 32 + r.id_bits - kDigitBits; shift >= 0;
       shift -= kDigitBits) {
    uint64_t bins[kBins] = {};
    for (int32_t v = threadIdx.x; v < r.vocab; v += kThreads) {
      const uint64_t key = OrderKey(r.x[v], v, r);
      // Banned tokens weigh nothing, so the threshold is a candidate's key.
      if (key == 0 || (key >> (shift + kDigitBits)) != prefix) continue;
      const uint32_t digit = (key >> shift) & (kBins - 1);
      const uint64_t weight = kByMass ? Mass(r.w[v]) : 1;
#pragma unroll
      for (int d = 0; d < kBins; ++d) bins[d] += digit == d ? weight : 0;
    }
    BlockSumBins(bins, sh);
    int digit = kBins - 1;
    for (; digit > 0 && above + sh.bins[digit] < target; --digit) {
      above += sh.bins[digit];
    }
    prefix = (prefix << kDigitBits) | digit;
    __syncthreads();  // sh.bins is refilled by the next pass
  }
  return prefix;
}

// The draw: the first kept token in id order whose running mass exceeds
// floor(u * total), u = u24 / 2^24. Kept: key >= threshold and weight >=
// min_p. Without kept mass, the last kept token, else `fallback`.
__device__ int32_t Draw(const Row& r, uint64_t threshold, float min_p,
                        uint32_t u24, int32_t fallback, Shared& sh) {
  auto kept_mass = [&](int32_t v, bool* is_kept) -> uint64_t {
    const float w = r.w[v];
    *is_kept = OrderKey(r.x[v], v, r) >= threshold && w >= min_p;
    return *is_kept ? Mass(w) : 0;
  };
  bool kept;
  uint64_t mine = 0;
  for (int32_t v = threadIdx.x; v < r.vocab; v += kThreads) {
    mine += kept_mass(v, &kept);
  }
  const uint64_t total = BlockAllReduce(mine, Plus, sh.u64);
  // floor(u24 * total / 2^24): below total, so some token's range holds it.
  const uint64_t target = __umul64hi(uint64_t{u24} << 40, total);

  if (threadIdx.x == 0) sh.chosen = -1;
  __syncthreads();
  uint64_t carry = 0;
  int32_t last = -1;
  for (int32_t tile = 0; tile < r.vocab; tile += kThreads * kPerThread) {
    const int32_t begin = tile + threadIdx.x * kPerThread;
    const int32_t end = min(begin + kPerThread, r.vocab);
    mine = 0;
    for (int32_t v = begin; v < end; ++v) {
      mine += kept_mass(v, &kept);
      if (kept) last = v;
    }
    uint64_t tile_total;
    const uint64_t before =
        carry + BlockExclusiveSum(mine, &tile_total, sh.u64);
    if (before <= target && target < before + mine) {  // one thread
      uint64_t running = before;
      for (int32_t v = begin; v < end; ++v) {
        running += kept_mass(v, &kept);
        if (running > target) {
          sh.chosen = v;
          break;
        }
      }
    }
    carry += tile_total;
    __syncthreads();
    if (sh.chosen >= 0) return sh.chosen;
  }
  last = BlockAllReduce(
      last, [](int32_t a, int32_t b) { return max(a, b); }, sh.i32);
  return last >= 0 ? last : fallback;
}

int IdBits(int32_t vocab) {
  int bits = 0;
  while ((int64_t{1} << bits) < vocab) ++bits;
  return (bits + kDigitBits - 1) / kDigitBits * kDigitBits;
}

// Grid (batch, chunks): steps 1-2 of kernels/sampling.h on chunk
// blockIdx.y of row blockIdx.x (processed logits into the workspace, which
// only the draw reads; the largest candidate; banned tokens), and with
// logprobs the chunk's share of log(sum exp(logits)) in double as on the
// CPU: its largest logit m and the sum of exp(logit - m).
__global__ void __launch_bounds__(kThreads)
    SampleScanKernel(SampleParams p, int id_bits, float* x_all,
                     ScanShare* shares, int32_t chunks) {
  __shared__ Shared sh;
  LetNextKernelStart();
  WaitForPriorKernel();
  const int b = blockIdx.x;
  const int32_t chunk = blockIdx.y, vocab = p.vocab_size;
  const SamplingRow row = p.rows[b];
  const float* logits = p.logits + b * p.row_stride;
  float* x = x_all + int64_t{b} * vocab;
  const Row r{x, nullptr, vocab, id_bits};
  const bool greedy = !(row.temperature > 0);
  const TokenHistory h =
      p.histories != nullptr ? p.histories[b] : TokenHistory{};

  const int32_t first = chunk * kScanChunk + threadIdx.x;
  float logit[kScanLoads];
  int32_t count[kScanLoads];
  uint8_t flags[kScanLoads];
#pragma unroll
  for (int i = 0; i < kScanLoads; ++i) {
    const int32_t v = first + i * kThreads;
    const bool in = v < vocab;
    logit[i] = in ? logits[v] : -INFINITY;
    count[i] = in && h.counts != nullptr ? h.counts[v] : 0;
    flags[i] = in && h.flags != nullptr ? h.flags[v] : 0;
  }
  uint64_t best = 0;
  int32_t banned = 0;
  float max_logit = -INFINITY;
#pragma unroll
  for (int i = 0; i < kScanLoads; ++i) {
    const int32_t v = first + i * kThreads;
    if (v >= vocab) break;
    max_logit = fmaxf(max_logit, logit[i]);
    float xv = PenalizedLogit(logit[i], count[i],
                              (flags[i] & kTokenInPrompt) != 0, row);
    if (!greedy) xv /= row.temperature;
    if (flags[i] & kTokenBanned) {
      xv = kBannedLogit;
      ++banned;
    }
    if (!greedy) x[v] = xv;
    best = MaxU64(best, OrderKey(xv, v, r));
  }
  ScanShare share;
  share.best = BlockAllReduce(best, MaxU64, sh.u64);
  share.banned = BlockAllReduce(banned, Plus32, sh.i32);
  share.max_logit = -INFINITY;
  share.sum_exp = 0;
  if (p.logprobs != nullptr) {
    share.max_logit = BlockAllReduce(
        max_logit, [](float a, float c) { return fmaxf(a, c); }, sh.f32);
    double sum = 0;
    if (share.max_logit > -INFINITY) {
#pragma unroll
      for (int i = 0; i < kScanLoads; ++i) {
        if (first + i * kThreads < vocab) {
          sum += exp(double{logit[i]} - share.max_logit);
        }
      }
    }
    share.sum_exp = BlockAllReduce(
        sum, [](double a, double c) { return a + c; }, sh.f64);
  }
  if (threadIdx.x == 0) shares[int64_t{b} * chunks + chunk] = share;
}

// One block per row, after the scan: the argmax (the greedy choice; the last
// id if every token is banned), then for rows that draw steps 3-6 over the
// processed logits, and the logprob from the chunks' log-sum-exp shares
// (each weighed by exp(its max - the row's max), in a fixed order). x_all,
// w_all: [batch, vocab] workspace.
__global__ void __launch_bounds__(kThreads)
    SampleKernel(SampleParams p, int id_bits, const ScanShare* shares,
                 int32_t chunks, float* x_all, float* w_all) {
  __shared__ Shared sh;
  LetNextKernelStart();
  WaitForPriorKernel();
  const int b = blockIdx.x;
  const SamplingRow row = p.rows[b];
  const int32_t vocab = p.vocab_size;
  const int64_t base = int64_t{b} * vocab;
  const float* logits = p.logits + b * p.row_stride;
  float* x = x_all + base;
  float* w = w_all + base;
  const Row r{x, w, vocab, id_bits};
  const bool greedy = !(row.temperature > 0);
  const TokenHistory h =
      p.histories != nullptr ? p.histories[b] : TokenHistory{};
  const ScanShare* mine = shares + int64_t{b} * chunks;

  uint64_t best = 0;
  int32_t banned = 0;
  float max_logit = -INFINITY;
  for (int32_t c = threadIdx.x; c < chunks; c += kThreads) {
    best = MaxU64(best, mine[c].best);
    banned += mine[c].banned;
    max_logit = fmaxf(max_logit, mine[c].max_logit);
  }
  best = BlockAllReduce(best, MaxU64, sh.u64);
  const uint64_t id_mask = (uint64_t{1} << id_bits) - 1;
  const int32_t argmax = vocab - 1 - static_cast<int32_t>(best & id_mask);
  int32_t id = argmax;

  if (!greedy) {
    const float max_x = x[argmax];
    for (int32_t v = threadIdx.x; v < vocab; v += kThreads) {
      w[v] = TokenWeight(x[v], max_x);
    }
    __syncthreads();
    uint64_t threshold = kEveryCandidate;
    if (row.top_k > 0 && row.top_k < vocab) {
      // top_k applies only when it leaves out some candidate.
      const int32_t candidates = vocab - BlockAllReduce(banned, Plus32, sh.i32);
      if (row.top_k < candidates) {
        threshold = SelectThreshold<false>(r, row.top_k, sh);
      }
    }
    if (row.top_p < 1.0f) {
      uint64_t mass = 0;
      for (int32_t v = threadIdx.x; v < vocab; v += kThreads) {
        if (OrderKey(x[v], v, r) >= threshold) mass += Mass(w[v]);
      }
      const uint64_t total = BlockAllReduce(mass, Plus, sh.u64);
      // Integer masses reach top_p * total iff they reach its ceiling; at
      // least the most likely token however small top_p.
      const double want = ceil(double{row.top_p} * static_cast<double>(total));
      const uint64_t target = want < 1 ? 1
                                       : (want >= static_cast<double>(total)
                                              ? total
                                              : static_cast<uint64_t>(want));
      if (total > 0) threshold = SelectThreshold<true>(r, target, sh);
    }
    const uint32_t u24 = static_cast<uint32_t>(
        PhiloxUniform(row.seed, row.step) * 16777216.0f);  // exact
    id = Draw(r, threshold, row.min_p, u24, argmax, sh);
  }

  double log_z = 0;
  if (p.logprobs != nullptr) {
    max_logit = BlockAllReduce(
        max_logit, [](float a, float c) { return fmaxf(a, c); }, sh.f32);
    double sum = 0;
    for (int32_t c = threadIdx.x; c < chunks; c += kThreads) {
      if (mine[c].max_logit > -INFINITY) {
        sum += mine[c].sum_exp * exp(double{mine[c].max_logit} - max_logit);
      }
    }
    sum = BlockAllReduce(
        sum, [](double a, double c) { return a + c; }, sh.f64);
    log_z = max_logit + log(sum);
  }
  if (threadIdx.x == 0) {
    p.ids[b] = id;
    // Step 7. The scan read the counts before this kernel started.
    if (h.counts != nullptr) ++h.counts[id];
    if (p.logprobs != nullptr) {
      p.logprobs[b] = static_cast<float>(double{logits[id]} - log_z);
    }
  }
}

}  // namespace

size_t SampleWorkspaceBytes(int batch, int32_t vocab_size) {
  if (batch <= 0 || vocab_size <= 0) return 0;
  // The chunks' shares [batch, chunks], then the processed logits and their
  // weights: [batch, vocab_size] floats each.
  return static_cast<size_t>(batch) *
         (ScanChunks(vocab_size) * sizeof(ScanShare) +
          2 * static_cast<size_t>(vocab_size) * sizeof(float));
}

cudaError_t SampleCuda(const SampleParams& p, void* workspace,
                       size_t workspace_bytes, cudaStream_t stream,
                       LaunchOrder order) {
  if (p.batch < 0 || p.batch > 65535 || p.vocab_size <= 0 ||
      p.vocab_size > (int32_t{1} << kMaxVocabBits) ||
      p.row_stride < p.vocab_size) {
    return cudaErrorInvalidValue;
  }
  if (p.batch == 0) return cudaSuccess;
  if (p.logits == nullptr || p.rows == nullptr || p.ids == nullptr ||
      workspace == nullptr ||
      workspace_bytes < SampleWorkspaceBytes(p.batch, p.vocab_size) ||
      reinterpret_cast<uintptr_t>(workspace) % alignof(ScanShare) != 0) {
    return cudaErrorInvalidValue;
  }
  const int32_t chunks = ScanChunks(p.vocab_size);
  ScanShare* shares = static_cast<ScanShare*>(workspace);
  float* x = reinterpret_cast<float*>(shares + int64_t{p.batch} * chunks);
  float* w = x + static_cast<size_t>(p.batch) * p.vocab_size;
  const int id_bits = IdBits(p.vocab_size);
  const unsigned rows = static_cast<unsigned>(p.batch);
  cudaError_t err = LaunchInOrder(
      order, SampleScanKernel, dim3(rows, static_cast<unsigned>(chunks)),
      dim3(kThreads), 0, stream, p, id_bits, x, shares, chunks);
  if (err != cudaSuccess) return err;
  return LaunchInOrder(order, SampleKernel, dim3(rows), dim3(kThreads), 0,
                       stream, p, id_bits, shares, chunks, x, w);
}

}  // namespace h3::kernels
