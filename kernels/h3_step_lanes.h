#ifndef H3_KERNELS_H3_STEP_LANES_H_
#define H3_KERNELS_H3_STEP_LANES_H_

// The shift SSM's sum as the GPU decode step's head_dim-1 kernel splits it
// over the lanes of a channel (kernels/cuda/h3_step.cu, the octet kernel),
// shared with its CPU test (kernels/cpu/h3_step_lanes_test.cc).
//
// A channel's ring of N slots (slot u holds the input of the latest
// position congruent to u mod N) is spread over N / 8 lanes, lane L holding
// slots u = 8 L + i, i < 8. At position pos, slot u meets tap
// j = (pos - u) mod N, and only where j <= pos (a tap past pos would reach
// before position 0). The taps live in shared memory twice over,
// taps2[t] = taps[t mod N] for t < 2 N, so that a lane's eight taps are
// eight consecutive entries read downwards: tap (r - i) mod N is
// taps2[r + N - i] for r = (pos - 8 L) mod N.

#include <cstdint>

#include "kernels/host_device.h"

namespace h3::kernels {

constexpr int kOctet = 8;  // ring slots (and diagonal floats) a lane

// Lane `lane`'s share of sum_j taps[j] ring[(pos - j) mod N], over its
// slots in slot order; ring[i] is slot 8 lane + i, the slot of pos already
// holding the new input. The lanes' shares add up to the whole sum.
// REQUIRES: N a multiple of 8, 8 lane < N, pos >= 0.
H3_HOST_DEVICE inline float OctetShiftSum(const float* taps2,
                                          const float (&ring)[kOctet],
                                          int64_t pos, int lane, int n) {
  int r = static_cast<int>(pos % n) - kOctet * lane;
  if (r < 0) r += n;
  float sum = 0.0f;
  H3_UNROLL
  for (int i = 0; i < kOctet; ++i) {
    const int j = r - i < 0 ? r - i + n : r - i;  // this slot's tap
    if (j <= pos) sum += taps2[r + n - i] * ring[i];
  }
  return sum;
}

}  // namespace h3::kernels

#endif  // H3_KERNELS_H3_STEP_LANES_H_
