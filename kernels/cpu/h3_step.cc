// One recurrent H3 step per sequence (docs/model.md, "Recurrent form").
#include <algorithm>
#include <complex>
#include <vector>

#include "base/parallel.h"
#include "kernels/h3.h"

namespace h3::kernels {
namespace {

using cfloat = std::complex<float>;

// Sequence b, head h: updates both states and writes the head's outputs.
void StepHead(const H3StepParams& p, int b, int h, std::vector<float>& kbar,
              std::vector<float>& y) {
  const H3Shape& shape = p.w.shape;
  const int d = shape.d_model, pd = shape.head_dim, heads = shape.heads();
  const int n_state = shape.d_state, modes = shape.modes();
  const size_t row =
      static_cast<size_t>(b) *
      static_cast<size_t>(p.input_stride > 0 ? p.input_stride : d);
  const float* q = p.q + row;
  const float* k = p.k + row;
  const float* v = p.v + row;
  const H3State& state = p.states[b];

  // Shift SSM on the ring of raw inputs (kernels/h3.h): k lands in slot
  // pos mod N; kbar = sum_j kshift[j] k[pos - j] + shift_D k, where inputs
  // before position 0 are zero (so are their never-written slots).
  const int64_t pos = p.positions[b];
  const int newest = static_cast<int>(pos % n_state);
  const int taps = static_cast<int>(std::min<int64_t>(pos, n_state - 1)) + 1;
  for (int i = 0; i < pd; ++i) {
    const int c = h * pd + i;
    float* ring = state.shift + static_cast<size_t>(c) * n_state;
    const float* kshift = p.w.shift_kernel + static_cast<size_t>(c) * n_state;
    ring[newest] = k[c];
    float sum = p.w.shift_D[c] * k[c];
    for (int j = 0; j < taps; ++j) {
      const int slot = newest - j < 0 ? newest - j + n_state : newest - j;
      sum += kshift[j] * ring[slot];
    }
    kbar[i] = sum;
  }
  // Diagonal SSM per kv channel: x <- dA x + dB kv;  y = 2 Re(C . x) + D kv.
  const size_t param = static_cast<size_t>(h) * modes;
  const cfloat* dA = reinterpret_cast<const cfloat*>(p.w.dA) + param;
  const cfloat* dB = reinterpret_cast<const cfloat*>(p.w.dB) + param;
  const cfloat* C = reinterpret_cast<const cfloat*>(p.w.C) + param;
  for (int d1 = 0; d1 < pd; ++d1) {
    for (int d2 = 0; d2 < pd; ++d2) {
      const float kv = kbar[d1] * v[h * pd + d2];
      const size_t channel = static_cast<size_t>(d1 * pd + d2) * heads + h;
      cfloat* x = reinterpret_cast<cfloat*>(state.diag) + channel * modes;
      float sum = 0;
      for (int m = 0; m < modes; ++m) {
        x[m] = dA[m] * x[m] + dB[m] * kv;
        sum += (C[m] * x[m]).real();
      }
      y[d1 * pd + d2] = 2.0f * sum + p.w.D[h] * kv;
    }
  }
  float* out = p.out + static_cast<size_t>(b) * d;
  for (int d2 = 0; d2 < pd; ++d2) {
    float sum = 0;
    for (int d1 = 0; d1 < pd; ++d1) sum += q[h * pd + d1] * y[d1 * pd + d2];
    out[d2 * heads + h] = sum;
  }
}

}  // namespace

void H3StepCpu(const H3StepParams& p) {
  const int heads = p.w.shape.heads(), pd = p.w.shape.head_dim;
  const int64_t work = static_cast<int64_t>(p.batch) * heads;
  // A head-step is ~N + p^2 M multiply-adds: keep thousands per task so that
  // small batches do not pay for thread hand-offs.
  ParallelFor(work, 1024, [&](int64_t begin, int64_t end) {
    std::vector<float> kbar(pd), y(pd * pd);
    for (int64_t i = begin; i < end; ++i) {
      StepHead(p, static_cast<int>(i / heads), static_cast<int>(i % heads),
               kbar, y);
    }
  });
}

}  // namespace h3::kernels
