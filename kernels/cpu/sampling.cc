// SampleCpu: the specification in kernels/sampling.h, step by step, with a
// full sort where the filters need an order and double-precision sums. Plain
// rather than fast: the GPU kernel is the one the server runs.
#include "kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/philox.h"
#include "kernels/sampling_token.h"

namespace h3::kernels {
namespace {

// The first largest value: the lowest id among equals.
int32_t ArgMax(const std::vector<float>& x) {
  return static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
}

// Steps 3-6 for one row. x: the penalised logits, divided by the
// temperature here. kept, w, order: scratch.
int32_t Draw(const SamplingRow& row, std::vector<float>& x,
             std::vector<uint8_t>& kept, std::vector<float>& w,
             std::vector<int32_t>& order) {
  const int32_t vocab = static_cast<int32_t>(x.size());
  for (float& v : x) v /= row.temperature;
  const float max_x = x[ArgMax(x)];
  w.resize(vocab);
  for (int32_t v = 0; v < vocab; ++v) w[v] = TokenWeight(x[v], max_x);

  kept.assign(vocab, 1);
  const bool top_k = row.top_k > 0 && row.top_k < vocab;
  const bool top_p = row.top_p < 1.0f;
  if (top_k || top_p) {
    // Most likely first; equal values by id, so the boundary is one token.
    order.resize(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return x[a] > x[b] || (x[a] == x[b] && a < b);
    });
    int32_t n = top_k ? row.top_k : vocab;
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
  return last >= 0 ? last : ArgMax(x);
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
  std::vector<uint8_t> kept;
  std::vector<int32_t> order;
  for (int b = 0; b < p.batch; ++b) {
    const float* logits = p.logits + b * p.row_stride;
    const SamplingRow& row = p.rows[b];
    const int64_t base = int64_t{b} * vocab;
    for (int32_t v = 0; v < vocab; ++v) {
      const int32_t count = p.counts != nullptr ? p.counts[base + v] : 0;
      const bool in_prompt =
          p.in_prompt != nullptr && p.in_prompt[base + v] != 0;
      x[v] = PenalizedLogit(logits[v], count, in_prompt, row);
    }
    const int32_t id =
        row.temperature > 0 ? Draw(row, x, kept, w, order) : ArgMax(x);
    p.ids[b] = id;
    if (p.logprobs != nullptr) {
      p.logprobs[b] =
          static_cast<float>(double{logits[id]} - LogSumExp(logits, vocab));
    }
  }
}

}  // namespace h3::kernels
