#ifndef H3_KERNELS_PHILOX_H_
#define H3_KERNELS_PHILOX_H_

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11): a counter-based generator, the same numbers on the host and
// on the device, so that a sequence's sampled tokens depend only on its seed
// and step, never on where or in which batch it ran.

#include <cstdint>

#include "kernels/host_device.h"

namespace h3::kernels {

// The 4 words of Philox4x32-10 for a 64-bit key and a 128-bit counter
// (ctr[0] the lowest word).
struct Philox4 {
  uint32_t x[4];
};

H3_HOST_DEVICE inline Philox4 Philox4x32(uint64_t key, Philox4 ctr) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t k0 = static_cast<uint32_t>(key),
           k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{kM0} * ctr.x[0];
    const uint64_t p1 = uint64_t{kM1} * ctr.x[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32),
                   lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32),
                   lo1 = static_cast<uint32_t>(p1);
    ctr = {{hi1 ^ ctr.x[1] ^ k0, lo1, hi0 ^ ctr.x[3] ^ k1, lo0}};
    k0 += kW0;
    k1 += kW1;
  }
  return ctr;
}

// Philox4x32-10 keyed by `seed`, counter (step, 0) as two 64-bit halves: the
// first output word as a float in [0, 1) with 24 random bits.
H3_HOST_DEVICE inline float PhiloxUniform(uint64_t seed, uint64_t step) {
  const Philox4 out =
      Philox4x32(seed, {{static_cast<uint32_t>(step),
                         static_cast<uint32_t>(step >> 32), 0u, 0u}});
  return static_cast<float>(out.x[0] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace h3::kernels

#endif  // H3_KERNELS_PHILOX_H_
