// One recurrent H3 step per sequence (docs/model.md, "Recurrent form"): the
// one-token run of kernels/cpu/h3_recurrence.h, the routine H3ScanCpu runs
// over a chunk.
#include <algorithm>
#include <vector>

#include "base/half_float.h"
#include "base/parallel.h"
#include "kernels/cpu/h3_recurrence.h"
#include "kernels/h3.h"

namespace h3::kernels {

namespace {

// The fp32 step: H3StepCpu with io_type kF32, on fp32 q, k, v rows `stride`
// elements apart.
void H3StepF32(const H3StepParams& p, const H3RecurrentWeightsCpu& w,
               const float* q, const float* k, const float* v, int64_t stride,
               float* out) {
  const H3Shape& shape = w.shape();
  const int heads = shape.heads(), pd = shape.head_dim;
  const int64_t work = static_cast<int64_t>(p.batch) * heads;
  // A head-token costs ~N + p^2 N vector-lane multiply-adds, ~50 ns at p = 1,
  // N = 64: a few hundred per task keep the hand-off to a thread small.
  const int64_t grain = std::max(1, 256 / (pd * pd));
  ParallelFor(work, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end;) {
      const int64_t b = i / heads;
      const int head = static_cast<int>(i % heads);
      const int head_end =
          static_cast<int>(std::min<int64_t>(heads, head + (end - i)));
      const int64_t row = b * stride;
      H3RecurrenceRun run;
      run.start = p.positions[b];
      run.length = 1;
      run.q = q + row;
      run.k = k + row;
      run.v = v + row;
      run.input_stride = stride;
      run.out = out + b * shape.d_model;
      run.state = p.states[b];
      H3RecurHeads(w, run, head, head_end);
      i += head_end - head;
    }
  });
}

}  // namespace

void H3StepCpu(const H3StepParams& p, const H3RecurrentWeightsCpu& w) {
  const int64_t d = w.shape().d_model;
  const int64_t stride = p.input_stride > 0 ? p.input_stride : d;
  if (p.io_type == ElementType::kF32) {
    H3StepF32(p, w, static_cast<const float*>(p.q),
              static_cast<const float*>(p.k), static_cast<const float*>(p.v),
              stride, static_cast<float*>(p.out));
    return;
  }
  // 16-bit I/O: the fp32 step of the widened rows, its outputs rounded once.
  std::vector<float> q(p.batch * d), k(q.size()), v(q.size()), out(q.size());
  for (int64_t b = 0; b < p.batch; ++b) {
    LoadFloats(p.q, p.io_type, b * stride, d, &q[b * d]);
    LoadFloats(p.k, p.io_type, b * stride, d, &k[b * d]);
    LoadFloats(p.v, p.io_type, b * stride, d, &v[b * d]);
  }
  H3StepF32(p, w, q.data(), k.data(), v.data(), d, out.data());
  StoreFloats(out.data(), out.size(), p.out, p.io_type, 0);
}

void H3StepCpu(const H3StepParams& p) {
  if (p.batch <= 0) return;
  H3StepCpu(p, H3RecurrentWeightsCpu(p.w));
}

}  // namespace h3::kernels
