#ifndef H3_TESTS_SUPPORT_SAMPLING_BATCH_H_
#define H3_TESTS_SUPPORT_SAMPLING_BATCH_H_

// Random sampling batches and the CPU twin's answers, for the tests of
// SampleCuda: its GPU test (kernels/cuda/sampling_test.cc) and its run on
// the CPU emulator (kernels/cuda/emulator/sampling_emulated_test.cc).
// Header-only; link h3_kernels_cpu.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/philox.h"
#include "kernels/sampling.h"
#include "kernels/sampling_token.h"

namespace h3::kernels::testing {

// A batch on the host; rows may be padded (row_stride > vocab).
struct Batch {
  int32_t vocab = 0;
  int64_t stride = 0;
  std::vector<float> logits;  // [rows, stride]
  std::vector<SamplingRow> rows;
  std::vector<uint8_t> has_history;  // [rows]; without: counts, flags unused
  std::vector<int32_t> counts;       // [rows, vocab]
  std::vector<uint8_t> flags;        // [rows, vocab]
};

// How close (as a share of the mass) the row's top_p boundary and its draw
// lie to a point where float rounding could move them: the GPU sums weights
// rounded to 2^-39 in integers, the CPU in double, and nothing else differs
// (the processed logits and their weights are the same bits on both).
inline double BoundaryMargin(const Batch& batch, int b) {
  const SamplingRow& row = batch.rows[b];
  if (!(row.temperature > 0)) return 1;  // greedy: exact
  const int32_t vocab = batch.vocab;
  std::vector<float> x(vocab), w(vocab);
  std::vector<int32_t> order;  // the candidates
  float max_x = -INFINITY;
  for (int32_t v = 0; v < vocab; ++v) {
    const int64_t i = int64_t{b} * vocab + v;
    const int32_t count = batch.has_history[b] ? batch.counts[i] : 0;
    const uint8_t flags = batch.has_history[b] ? batch.flags[i] : 0;
    x[v] = PenalizedLogit(batch.logits[b * batch.stride + v], count,
                          (flags & kTokenInPrompt) != 0, row) /
           row.temperature;
    if (flags & kTokenBanned) continue;
    order.push_back(v);
    max_x = std::max(max_x, x[v]);
  }
  for (int32_t v = 0; v < vocab; ++v) w[v] = TokenWeight(x[v], max_x);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t c) {
    return x[a] > x[c] || (x[a] == x[c] && a < c);
  });
  const int32_t candidates = static_cast<int32_t>(order.size());
  int32_t n = row.top_k > 0 && row.top_k < candidates ? row.top_k : candidates;
  double margin = 1;
  if (row.top_p < 1.0f) {
    double total = 0;
    for (int32_t i = 0; i < n; ++i) total += w[order[i]];
    const double target = double{row.top_p} * total;
    double mass = 0;
    int32_t i = 0;
    while (i < n && mass + w[order[i]] < target) mass += w[order[i++]];
    if (i == n) return 0;
    margin = std::min(target - mass, mass + w[order[i]] - target) / total;
    n = i + 1;
  }
  std::vector<uint8_t> kept(vocab, 0);
  for (int32_t i = 0; i < n; ++i) kept[order[i]] = w[order[i]] >= row.min_p;
  double total = 0;
  for (int32_t v = 0; v < vocab; ++v) total += kept[v] ? w[v] : 0;
  const double target = double{PhiloxUniform(row.seed, row.step)} * total;
  double before = 0;
  for (int32_t v = 0; v < vocab; ++v) {
    if (!kept[v]) continue;
    if (before + w[v] > target) {
      return std::min({margin, (target - before) / total,
                       (before + w[v] - target) / total});
    }
    before += w[v];
  }
  return 0;
}

// Every combination of temperature (0: greedy), top_k, top_p, min_p and
// penalties, `repeats` times with other seeds and steps; logits N(0, 2),
// or multiples of 1/4 (many exact ties) when `ties`. A quarter of the rows
// have no history; the others ban none, 5% or half of their tokens (but
// never all), banned tokens' logits raised by 8 so that they would win most
// draws if they were candidates.
inline Batch RandomBatch(int32_t vocab, bool ties, int repeats, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  Batch batch;
  batch.vocab = vocab;
  batch.stride = vocab + 3;
  for (int rep = 0; rep < repeats; ++rep) {
    for (float temperature : {0.0f, 0.7f, 1.3f}) {
      // vocab - 1: often more than the candidates, fewer than the tokens.
      for (int32_t top_k : {0, 1, 50, vocab - 1}) {
        for (float top_p : {1.0f, 0.9f}) {
          for (float min_p : {0.0f, 0.05f}) {
            for (bool penalties : {false, true}) {
              SamplingRow row;
              row.temperature = temperature;
              row.top_k = top_k;
              row.top_p = top_p;
              row.min_p = min_p;
              if (penalties) {
                row.repetition_penalty = 1.3f;
                row.presence_penalty = 0.4f;
                row.frequency_penalty = 0.2f;
              }
              row.seed = rng();
              row.step = rng() % 1000;
              batch.rows.push_back(row);
            }
          }
        }
      }
    }
  }
  const size_t rows = batch.rows.size();
  constexpr float kBanRates[] = {0.0f, 0.05f, 0.5f};
  // Padding that would win every draw if it were read.
  batch.logits.assign(rows * batch.stride, 1e30f);
  batch.has_history.resize(rows);
  batch.counts.resize(rows * vocab);
  batch.flags.resize(rows * vocab);
  for (size_t b = 0; b < rows; ++b) {
    batch.has_history[b] = uniform(rng) >= 0.25f;
    const float ban_rate = kBanRates[rng() % 3];
    bool all_banned = true;
    for (int32_t v = 0; v < vocab; ++v) {
      const float l = normal(rng);
      const bool banned = uniform(rng) < ban_rate;
      all_banned = all_banned && banned;
      batch.logits[b * batch.stride + v] =
          (ties ? std::round(4 * l) / 4 : l) + (banned ? 8.0f : 0.0f);
      const float r = uniform(rng);
      batch.counts[b * vocab + v] =
          r < 0.02f ? 1 + static_cast<int>(r * 200) : 0;
      batch.flags[b * vocab + v] = (uniform(rng) < 0.03f ? kTokenInPrompt : 0) |
                                   (banned ? kTokenBanned : 0);
    }
    if (all_banned) batch.flags[b * vocab + rng() % vocab] &= ~kTokenBanned;
  }
  return batch;
}

// Moves rows whose boundaries lie within rounding of a decision (the
// twins may then rightly differ) away from them.
inline void KeepAwayFromBoundaries(Batch& batch) {
  for (size_t b = 0; b < batch.rows.size(); ++b) {
    for (int tries = 0; BoundaryMargin(batch, b) < 1e-6; ++tries) {
      ASSERT_LT(tries, 50) << "row " << b;
      SamplingRow& row = batch.rows[b];
      row.step += 1000003;
      if (row.top_p < 1.0f) row.top_p *= 0.999f;
    }
  }
}

struct Result {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::vector<int32_t> counts;  // the batch's, after the call
};

// The index of the first element where a and b differ, or -1.
inline int64_t FirstDifference(const std::vector<int32_t>& a,
                               const std::vector<int32_t>& b) {
  if (a.size() != b.size()) return 0;
  const auto it = std::mismatch(a.begin(), a.end(), b.begin()).first;
  return it == a.end() ? -1 : it - a.begin();
}

// Each row's history: its rows of `counts` and `flags` (host or device
// memory), or none.
inline std::vector<TokenHistory> Histories(const Batch& batch, int32_t* counts,
                                           uint8_t* flags) {
  std::vector<TokenHistory> histories(batch.rows.size());
  for (size_t b = 0; b < batch.rows.size(); ++b) {
    if (!batch.has_history[b]) continue;
    histories[b] = {counts + b * batch.vocab, flags + b * batch.vocab};
  }
  return histories;
}

inline SampleParams Params(const Batch& batch, const float* logits,
                           const SamplingRow* rows,
                           const TokenHistory* histories, Result* out) {
  SampleParams p;
  p.batch = static_cast<int>(batch.rows.size());
  p.vocab_size = batch.vocab;
  p.row_stride = batch.stride;
  p.logits = logits;
  p.rows = rows;
  p.histories = histories;
  p.ids = out->ids.data();
  p.logprobs = out->logprobs.data();
  return p;
}

// Each call starts from the batch's counts.
inline Result OnCpu(const Batch& batch) {
  Result out{std::vector<int32_t>(batch.rows.size(), -1),
             std::vector<float>(batch.rows.size(), 0.0f), batch.counts};
  std::vector<uint8_t> flags = batch.flags;
  const std::vector<TokenHistory> histories =
      Histories(batch, out.counts.data(), flags.data());
  SampleCpu(Params(batch, batch.logits.data(), batch.rows.data(),
                   histories.data(), &out));
  return out;
}

inline std::string RowName(const SamplingRow& r) {
  return "temperature " + std::to_string(r.temperature) + " top_k " +
         std::to_string(r.top_k) + " top_p " + std::to_string(r.top_p) +
         " min_p " + std::to_string(r.min_p) + " repetition " +
         std::to_string(r.repetition_penalty);
}

}  // namespace h3::kernels::testing

#endif  // H3_TESTS_SUPPORT_SAMPLING_BATCH_H_
