#ifndef H3_BENCH_FLASHCONV_FLOOR_H_
#define H3_BENCH_FLASHCONV_FLOOR_H_

// The pure arithmetic of h3_flashconv_bench: the bytes one H3 prefill call
// must move through HBM, the peak bandwidth from the device's attributes, the
// summary of repeated timings and how many repetitions to take.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/h3.h"

namespace h3::bench {

// Bytes of one H3PrefillCuda::Run over `batch` sequences of `length` tokens.
struct PrefillBytes {
  // q, k, v read and out written once, in the element type: 4 * B * d * L.
  int64_t activations = 0;
  // Each sequence's state read (the state before the chunk) and written (the
  // state after it), fp32: shift [B, d, N] real, diag [B, p, p, H, M] complex.
  // The shift state is a ring of the last N inputs by position, of which a
  // call rewrites only the slots of its last min(L, N) tokens.
  int64_t states = 0;
  // Listed, not in the floor. The layer's weights (H3Weights), read once per
  // call: shift kernel [d, N] and shift_D [d]; dA, dB, C [H, M] complex and
  // D [H].
  int64_t weights = 0;
  // Listed, not in the floor. The spectrum of the whole-length kernel,
  // [H, nfft / 2 + 1] complex fp32 with nfft = H3FftSize(L): what an FFT
  // convolution over the whole sequence reads (the fused kernel reads
  // per-chunk spectra instead, whose size depends on its chunking).
  int64_t kernel_spectrum = 0;

  // What any implementation must move: activations and states.
  int64_t floor() const { return activations + states; }
};

inline PrefillBytes H3PrefillBytes(const kernels::H3Shape& s, int64_t batch,
                                   int64_t length, int64_t element_size) {
  const int64_t d = s.d_model, n = s.d_state, h = s.heads(), m = s.modes();
  const int64_t p = s.head_dim;
  const int64_t f32 = sizeof(float), c64 = 2 * sizeof(float);
  PrefillBytes bytes;
  bytes.activations = 4 * batch * d * length * element_size;
  const int64_t written = std::min(length, n);  // ring slots rewritten
  bytes.states =
      batch * d * (n + written) * f32 + 2 * batch * p * p * h * m * c64;
  bytes.weights = (d * n + d) * f32 + 3 * h * m * c64 + h * f32;
  bytes.kernel_spectrum =
      h * (static_cast<int64_t>(kernels::H3FftSize(length)) / 2 + 1) * c64;
  return bytes;
}

// Theoretical peak DRAM bandwidth in bytes/s from the runtime's attributes:
// two transfers per memory clock (DDR; the attributes report HBM's clock the
// same way) times the bus width. 0 when either attribute is unknown (0).
inline double PeakBandwidth(int64_t memory_clock_khz, int64_t bus_width_bits) {
  if (memory_clock_khz <= 0 || bus_width_bits <= 0) return 0;
  return 2.0 * memory_clock_khz * 1e3 * (bus_width_bits / 8.0);
}

// Median, minimum and 90th percentile (nearest rank) of a sample.
struct TimeStats {
  double median = 0;
  double min = 0;
  double p90 = 0;
};

// REQUIRES: !ms.empty().
inline TimeStats Summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  TimeStats stats;
  stats.min = ms.front();
  stats.median = n % 2 == 1 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  const size_t rank = static_cast<size_t>(std::ceil(0.9 * n));  // 1-based
  stats.p90 = ms[std::max<size_t>(rank, 1) - 1];
  return stats;
}

// Repetitions for at least `min_total_ms` of timed calls when one call takes
// `estimate_ms`, and at least `min_reps`, at most `max_reps`.
inline int RepsFor(double estimate_ms, double min_total_ms, int min_reps,
                   int max_reps) {
  double reps = max_reps;
  if (estimate_ms > 0) reps = std::ceil(min_total_ms / estimate_ms);
  return static_cast<int>(std::clamp<double>(reps, min_reps, max_reps));
}

}  // namespace h3::bench

#endif  // H3_BENCH_FLASHCONV_FLOOR_H_
