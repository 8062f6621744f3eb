#ifndef H3_KERNELS_SAMPLING_TOKEN_H_
#define H3_KERNELS_SAMPLING_TOKEN_H_

// The per-token arithmetic of sampling (kernels/sampling.h), written once for
// both twins so that the CPU and the GPU compute the same bits: the filters'
// order and the greedy choice then agree exactly, and only sums of
// probabilities can differ by rounding.

#include <math.h>

#include <cstdint>

#include "kernels/host_device.h"
#include "kernels/sampling.h"

namespace h3::kernels {

// Step 1 of the specification: `logit` after the repetition, presence and
// frequency penalties, for a token generated `count` times and (if
// `in_prompt`) seen in the prompt.
H3_HOST_DEVICE inline float PenalizedLogit(float logit, int32_t count,
                                           bool in_prompt,
                                           const SamplingRow& row) {
  if (row.repetition_penalty != 1.0f && (in_prompt || count > 0)) {
    logit = logit > 0 ? logit / row.repetition_penalty
                      : logit * row.repetition_penalty;
  }
  if (count > 0) {
    // In double, where frequency * count is exact (count < 2^29): nvcc may
    // fuse the multiply and the add, which then changes nothing.
    const double penalty =
        double{row.presence_penalty} + double{row.frequency_penalty} * count;
    logit -= static_cast<float>(penalty);
  }
  return logit;
}

// The unnormalised probability of a token with processed logit `x` when the
// largest is `max_x`: exp(x - max_x) in double, rounded to float (1 for the
// most likely token). In double, the difference of two floats loses nothing
// that matters, so the weight is accurate to a float rounding however far x
// lies below max_x (expf(x - max_x) in float would not be).
H3_HOST_DEVICE inline float TokenWeight(float x, float max_x) {
  return static_cast<float>(exp(double{x} - double{max_x}));
}

}  // namespace h3::kernels

#endif  // H3_KERNELS_SAMPLING_TOKEN_H_
