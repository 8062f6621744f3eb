#ifndef H3_TESTS_SUPPORT_H3_EMULATION_CHECKS_H_
#define H3_TESTS_SUPPORT_H3_EMULATION_CHECKS_H_

// The checks the CPU emulations of the GPU prefill kernels share
// (kernels/cpu/flashconv_emulation_test.cc, h3_chunked_emulation_test.cc):
// a channel-by-channel driver, and the emulation against the CPU twin
// H3PrefillCpu from a random saved state, and as consecutive calls against
// one call. Header-only, gtest assertions; link h3_kernels_cpu.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/h3.h"
#include "tests/support/h3_cpu_prefill.h"
#include "tests/support/normalised_error.h"
#include "tests/support/random.h"
#include "tests/support/random_h3_layer.h"

namespace h3::testing {

// One channel's emulated prefill: its q, k, v and out over `length` tokens
// at positions [start, start + length); its ring [N] and diagonal state
// [M] complex, in place.
using EmulatedChannel = std::function<void(
    int c, int64_t start, int64_t length, const float* q, const float* k,
    const float* v, float* out, float* ring, float* diag)>;

// An emulated call on tokens [first, first + length) of q, k, v ([total,
// d] token-major) at positions [start, start + length), channel by
// channel; writes those tokens of *out and updates ring [d, N] and diag.
inline void EmulateChannels(const kernels::H3Weights& w, int64_t start,
                            int64_t first, int64_t length,
                            const std::vector<float>& q,
                            const std::vector<float>& k,
                            const std::vector<float>& v,
                            std::vector<float>* out, std::vector<float>* ring,
                            std::vector<float>* diag,
                            const EmulatedChannel& channel) {
  const int d = w.shape.d_model, ns = w.shape.d_state;
  std::vector<float> qc(length), kc(length), vc(length), oc(length);
  for (int c = 0; c < d; ++c) {
    for (int64_t t = 0; t < length; ++t) {
      qc[t] = q[(first + t) * d + c];
      kc[t] = k[(first + t) * d + c];
      vc[t] = v[(first + t) * d + c];
    }
    channel(c, start, length, qc.data(), kc.data(), vc.data(), oc.data(),
            ring->data() + c * ns, diag->data() + c * ns);
    for (int64_t t = 0; t < length; ++t) (*out)[(first + t) * d + c] = oc[t];
  }
}

// A whole emulated call (EmulateChannels' arguments but the channel).
using EmulatedPrefill = std::function<void(
    const kernels::H3Weights& w, int64_t start, int64_t first, int64_t length,
    const std::vector<float>& q, const std::vector<float>& k,
    const std::vector<float>& v, std::vector<float>* out,
    std::vector<float>* ring, std::vector<float>* diag)>;

struct EmulationBounds {
  double output;  // normalised errors (max |got - want| / max |want|)
  double state;   // of the diagonal end state; the ring must be exact
};

// The emulation on a random layer of 4 channels against the CPU twin, from
// a nonzero saved state (the ring's slots of positions before 0 hold values
// too, which the call must neither read nor overwrite). Records the errors
// as the test's properties output_error and diag_state_error.
inline void ExpectMatchesTheCpuTwin(const EmulatedPrefill& emulate, int d_state,
                                    int64_t length, int64_t start,
                                    EmulationBounds bounds) {
  const int d = 4;
  const RandomH3Layer layer({d, 1, d_state}, 7);
  const kernels::H3Weights w = layer.weights();
  const auto q = RandomNormal(length * d, 1), k = RandomNormal(length * d, 2),
             v = RandomNormal(length * d, 3);
  const auto ring0 = RandomNormal(d * d_state, 4),
             diag0 = RandomNormal(d * d_state, 5);
  std::vector<float> want, want_ring = ring0, want_diag = diag0;
  PrefillCpu(w, start, length, q, k, v, &want, &want_ring, &want_diag);
  std::vector<float> got(length * d), ring = ring0, diag = diag0;
  emulate(w, start, 0, length, q, k, v, &got, &ring, &diag);
  const double out_err = NormalisedError(got, want);
  const double diag_err = NormalisedError(diag, want_diag);
  EXPECT_LT(out_err, bounds.output);
  EXPECT_EQ(ring, want_ring);  // raw fp32 inputs on both sides
  EXPECT_LT(diag_err, bounds.state);
  ::testing::Test::RecordProperty("output_error", std::to_string(out_err));
  ::testing::Test::RecordProperty("diag_state_error", std::to_string(diag_err));
}

// Emulated calls one after another, each at the position the last one
// stopped and from the state it left (the ring included), compute what the
// CPU twin's one call does from a new sequence's zero state; d_state 64 and
// 16.
inline void ExpectConsecutiveCallsEqualOneCall(const EmulatedPrefill& emulate,
                                               EmulationBounds bounds) {
  for (int d_state : {64, 16}) {
    SCOPED_TRACE("d_state " + std::to_string(d_state));
    const int d = 3;
    const RandomH3Layer layer({d, 1, d_state}, 9);
    const kernels::H3Weights w = layer.weights();
    const std::vector<int64_t> calls = {1, 5, 63, 70, 1000, 2, 3000};
    int64_t length = 0;
    for (int64_t c : calls) length += c;
    const auto q = RandomNormal(length * d, 11),
               k = RandomNormal(length * d, 12),
               v = RandomNormal(length * d, 13);
    const std::vector<float> zeros(d * d_state, 0.0f);
    std::vector<float> want, want_ring = zeros, want_diag = zeros;
    PrefillCpu(w, 0, length, q, k, v, &want, &want_ring, &want_diag);
    std::vector<float> got(length * d), ring = zeros, diag = zeros;
    int64_t position = 0;
    for (int64_t len : calls) {
      emulate(w, position, position, len, q, k, v, &got, &ring, &diag);
      position += len;
    }
    EXPECT_LT(NormalisedError(got, want), bounds.output);
    EXPECT_EQ(ring, want_ring);
    EXPECT_LT(NormalisedError(diag, want_diag), bounds.state);
  }
}

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_H3_EMULATION_CHECKS_H_
