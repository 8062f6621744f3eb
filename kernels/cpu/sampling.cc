// SampleCpu: the specification in kernels/sampling.h, step by step, with a
// full sort where the filters need an order and double-precision sums. Plain
// rather than fast: the GPU kernel is the one the server runs.
#include "kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/philox.h"
#include "kernels/sampling_token.h"

namespace h3::kernels {
namespace {

// The first largest value of a candidate: the lowest id among equals.
int32_t ArgMax(const std::vector<float>& x,
               const std::vector<uint8_t>& candidate) {
  int32_t best = -1;
  for (int32_t v = 0; v < static_cast<int32_t>(x.size()); ++v) {
    if (candidate[v] && (best < 0 || x[v] > x[best])) best = v;
  }
  return best;
}

// Steps 3-6 for one row. x: the penalised logits, divided by the
// temperature here; candidate: 0 for banned tokens. kept, w, order: scratch.
int32_t Draw(const SamplingRow& row, std::vector<float>& x,
             const std::vector<uint8_t>& candidate, std::vector<uint8_t>& kept,
             std::vector<float>& w, std::vector<int32_t>& order) {
  const int32_t vocab = static_cast<int32_t>(x.size());
  for (float& v : x) v /= row.temperature;
  const int32_t argmax = ArgMax(x, candidate);
  const float max_x = x[argmax];
  w.resize(vocab);
  for (int32_t v = 0; v < vocab; ++v) w[v] = TokenWeight(x[v], max_x);

  kept = candidate;
  const int32_t candidates = static_cast<int32_t>(
      std::count(candidate.begin(), candidate.end(), uint8_t{1}));
  const bool top_k = row.top_k > 0 && row.top_k < candidates;
  const bool top_p = row.top_p < 1.0f;
  if (top_k || top_p) {
    // Candidates, most likely first; equal values by id, so the boundary
    // is one token.
    order.clear();
    for (int32_t v = 0; v < vocab; ++v) {
      if (candidate[v]) order.push_back(v);
    }
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return x[a] > x[b] || (x[a] == x[b] && a < b);
    });
    int32_t n = top_k ? row.top_k : candidates;
    if (top_p) {
      double total = 0;
      for (int32_t i = 0; i < n; ++i) total += w[order[i]];
      const double target = double{row.top_p} * total;
      double mass = 0;
      for (int32_t i = 0; i < n; ++i) {
        mass += w[order[i]];
        if (mass >= target) {
          n = i + 1;
          break;
        }
      }
    }
    kept.assign(vocab, 0);
    for (int32_t i = 0; i < n; ++i) kept[order[i]] = 1;
  }
  // min_p relative to the most likely token, whose weight is 1. Written so
  // that a NaN min_p drops every token, as on the GPU.
  for (int32_t v = 0; v < vocab; ++v) {
    if (!(w[v] >= row.min_p)) kept[v] = 0;
  }

  double total = 0;
  for (int32_t v = 0; v < vocab; ++v) {
    if (kept[v]) total += w[v];
  }
  const double target = double{PhiloxUniform(row.seed, row.step)} * total;
  double running = 0;
  int32_t last = -1;
  for (int32_t v = 0; v < vocab; ++v) {
    if (!kept[v]) continue;
    last = v;
    running += w[v];
    if (running > target) return v;
  }
  return last >= 0 ? last : argmax;
}

double LogSumExp(const float* x, int32_t n) {
  const float max = *std::max_element(x, x + n);
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(double{x[i]} - max);
  return max + std::log(sum);
}

}  // namespace

void SampleCpu(const SampleParams& p) {
  const int32_t vocab = p.vocab_size;
  std::vector<float> x(vocab), w;
  std::vector<uint8_t> candidate(vocab), kept;
  std::vector<int32_t> order;
  for (int b = 0; b < p.batch; ++b) {
    const float* logits = p.logits + b * p.row_stride;
    const SamplingRow& row = p.rows[b];
    const TokenHistory h =
        p.histories != nullptr ? p.histories[b] : TokenHistory{};
    for (int32_t v = 0; v < vocab; ++v) {
      const int32_t count = h.counts != nullptr ? h.counts[v] : 0;
      const uint8_t flags = h.flags != nullptr ? h.flags[v] : 0;
      x[v] =
          PenalizedLogit(logits[v], count, (flags & kTokenInPrompt) != 0, row);
      candidate[v] = (flags & kTokenBanned) == 0;
    }
    const int32_t id = row.temperature > 0
                           ? Draw(row, x, candidate, kept, w, order)
                           : ArgMax(x, candidate);
    p.ids[b] = id;
    if (h.counts != nullptr) ++h.counts[id];
    if (p.logprobs != nullptr) {
      p.logprobs[b] =
          static_cast<float>(double{logits[id]} - LogSumExp(logits, vocab));
    }
  }
}

}  // namespace h3::kernels
