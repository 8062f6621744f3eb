// The H3 recurrence on the CPU, one token at a time (docs/model.md, "Recurrent
// form"), vectorised along each channel's state: 16 lanes over the shift
// ring's slots and over the diagonal state's interleaved (re, im) modes.
//
// Every sum has an order fixed by the layer's shape alone: lane l of a
// 16-float vector accumulates the terms l, l + 16, l + 32, ... in that order,
// then SumLanes adds the lanes as a fixed tree. A channel's arithmetic is the
// same whichever call runs it (a step, a scan, a chunk of a scan), on
// whichever thread; the only other thing that may change bits is the
// instruction set of the clone the loader picks (fused multiply-adds or not),
// which is fixed for the process.
#include "kernels/cpu/h3_recurrence.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace h3::kernels {
namespace {

// Floats per vector: one AVX-512 register, two AVX2 ones, four SSE ones. The
// code's lanes, not the hardware's, decide which terms share a partial sum.
constexpr int kLanes = 16;
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));
typedef float Vec8 __attribute__((vector_size(8 * sizeof(float))));
typedef float Vec4 __attribute__((vector_size(4 * sizeof(float))));
typedef float Vec2 __attribute__((vector_size(2 * sizeof(float))));

int RoundUp(int n) { return (n + kLanes - 1) / kLanes * kLanes; }

[[gnu::always_inline]] inline Vec Load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

[[gnu::always_inline]] inline void Store(float* p, Vec v) {
  std::memcpy(p, &v, sizeof(v));
}

// (a, b, c, d, ...) -> (b, a, d, c, ...): each complex value's (im, re).
[[gnu::always_inline]] inline Vec SwapPairs(Vec v) {
  return __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13,
                                 12, 15, 14);
}

// The sum of the 16 lanes as a fixed tree: lane l + 8 onto lane l, then
// l + 4, l + 2, l + 1.
[[gnu::always_inline]] inline float SumLanes(Vec v) {
  const Vec8 a = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                 __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const Vec4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) +
                 __builtin_shufflevector(a, a, 4, 5, 6, 7);
  const Vec2 c =
      __builtin_shufflevector(b, b, 0, 1) + __builtin_shufflevector(b, b, 2, 3);
  return c[0] + c[1];
}

// A head's working set as vectors, from its first token to its last: the
// diagonal-SSM parameters (`chunks` each of (Re dA, Re dA), (-Im dA, Im dA),
// (Re dB, Im dB), (Re C, -Im C)); the state, p rings and p * p diagonal rows
// of `chunks` vectors each, zero-padded when N is not a multiple of kLanes
// (pad lanes stay zero and add zeros to every sum); kbar [p] and y [p, p].
// FixedHead (N = 64, p = 1, the released models) holds them in arrays that
// are only ever indexed by constants, so the compiler keeps them in
// registers: a token then costs no trip through memory (on AMD Zen 4, a
// 64-byte store followed by a 64-byte load of it stalls). AnyHead holds them
// in a heap block. RunHead is written once for both.
template <int kChunks>
struct FixedHead {
  static constexpr int chunks = kChunks;
  static constexpr int head_dim = 1;
  static constexpr bool padded = false;  // N = 16 kChunks
  Vec a_re[kChunks], a_im[kChunks], b[kChunks], c[kChunks];
  Vec rings[kChunks], diags[kChunks];
  float kbar[1], y[1];
  Vec* ring(int) { return rings; }
  Vec* diag(int) { return diags; }
};

struct AnyHead {
  AnyHead(int n, int n_chunks, int p)
      : chunks(n_chunks),
        head_dim(p),
        padded(n % kLanes != 0),
        storage((4 + p + p * p) * n_chunks * kLanes + kLanes + p + p * p) {
    void* at = storage.data();
    size_t space = storage.size() * sizeof(float);
    Vec* v = static_cast<Vec*>(std::align(sizeof(Vec), sizeof(Vec), at, space));
    a_re = v;
    a_im = v + chunks;
    b = v + 2 * chunks;
    c = v + 3 * chunks;
    rings = v + 4 * chunks;
    diags = rings + p * chunks;
    kbar = reinterpret_cast<float*>(diags + p * p * chunks);
    y = kbar + p;
  }
  Vec* ring(int i) { return rings + i * chunks; }
  Vec* diag(int j) { return diags + j * chunks; }
  int chunks, head_dim;
  bool padded;                 // N not a multiple of kLanes
  std::vector<float> storage;  // 64-byte aligned inside
  Vec *a_re, *a_im, *b, *c, *rings, *diags;
  float *kbar, *y;
};

// A state row of n floats into `chunks` vectors, zero-padded when `padded`;
// and back. (Without padding, no copy through memory: the vectors can stay
// in registers.)
[[gnu::always_inline]] inline void LoadRow(const float* src, int n, int chunks,
                                           bool padded, Vec* dst) {
  if (!padded) {
    for (int r = 0; r < chunks; ++r) dst[r] = Load(src + r * kLanes);
  } else {
    std::fill(dst, dst + chunks, Vec{});
    std::memcpy(dst, src, n * sizeof(float));
  }
}

[[gnu::always_inline]] inline void StoreRow(const Vec* src, int n, int chunks,
                                            bool padded, float* dst) {
  if (!padded) {
    for (int r = 0; r < chunks; ++r) Store(dst + r * kLanes, src[r]);
  } else {
    std::memcpy(dst, src, n * sizeof(float));
  }
}

// Writes ring i back: the vectors holding the slots the run wrote (a step's:
// one), so that a step writes one vector per channel, not the whole ring.
template <typename Head>
[[gnu::always_inline]] inline void StoreRing(Head& head, int n,
                                             const H3RecurrenceRun& run,
                                             float* dst, int i) {
  if (head.padded || run.length >= n) {
    StoreRow(head.ring(i), n, head.chunks, head.padded, dst);
    return;
  }
  // Slots first..last, wrapping past n - 1 to 0..last - n.
  const int first = static_cast<int>(run.start % n);
  const int last = first + static_cast<int>(run.length) - 1;
  for (int r = 0; r < head.chunks; ++r) {
    const int begin = r * kLanes, end = begin + kLanes;
    if ((first < end && last >= begin) || last - n >= begin) {
      Store(dst + r * kLanes, head.ring(i)[r]);
    }
  }
}

// Shift SSM of channel c at a token whose ring slot is `newest`: k goes into
// its slot, then
//   kbar = sum over slots s of ring[s] * tap[(newest - s) mod N] + shift_D k,
// the weights read from the reversed, doubled row at offset N - 1 - newest,
// so that the ring is read in slot order (kernels/h3.h).
[[gnu::always_inline]] inline float ShiftChannel(const H3RecurrentWeightsCpu& w,
                                                 int c, int newest, float k,
                                                 int chunks, Vec* ring) {
  typedef int IVec __attribute__((vector_size(kLanes * sizeof(int))));
  const IVec lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const float* taps = w.ring_taps() + static_cast<size_t>(c) * w.ring_row() +
                      (w.shape().d_state - 1 - newest);
  const Vec kk = Vec{} + k;
  ring[0] = lane == newest ? kk : ring[0];
  Vec acc = ring[0] * Load(taps);
  for (int r = 1; r < chunks; ++r) {
    ring[r] = lane == newest - r * kLanes ? kk : ring[r];
    acc = acc + ring[r] * Load(taps + r * kLanes);
  }
  return SumLanes(acc) + w.shift_D()[c] * k;
}

// Diagonal SSM of one kv channel with state x (M complex, interleaved):
//   x <- dA x + dB kv,  y = 2 Re(sum_m C[m] x[m]) + D kv.
template <typename Head>
[[gnu::always_inline]] inline float DiagChannel(const Head& m, float skip,
                                                float kv, Vec* x) {
  const Vec kvv = Vec{} + kv;
  Vec acc{};
  for (int r = 0; r < m.chunks; ++r) {
    const Vec old = x[r];
    x[r] = (m.a_re[r] * old + m.a_im[r] * SwapPairs(old)) + m.b[r] * kvv;
    acc = r == 0 ? m.c[r] * x[r] : acc + m.c[r] * x[r];
  }
  return 2.0f * SumLanes(acc) + skip * kv;
}

// All of the run's tokens through head h: its state into vectors, the
// tokens in order, the state back.
template <typename Head>
[[gnu::always_inline]] inline void RunHead(const H3RecurrentWeightsCpu& w,
                                           const H3RecurrenceRun& run, int h,
                                           Head& head) {
  const H3Shape& s = w.shape();
  const int d = s.d_model, n = s.d_state, heads = s.heads();
  const int pd = head.head_dim, chunks = head.chunks;
  const float* params = w.modes() + static_cast<size_t>(h) * 4 * w.mode_row();
  for (int r = 0; r < chunks; ++r) {
    head.a_re[r] = Load(params + r * kLanes);
    head.a_im[r] = Load(params + w.mode_row() + r * kLanes);
    head.b[r] = Load(params + 2 * w.mode_row() + r * kLanes);
    head.c[r] = Load(params + 3 * w.mode_row() + r * kLanes);
  }
  // Channel h * p + i's ring; kv channel (d1, d2, h)'s diagonal row.
  auto ring_row = [&](int i) {
    return run.state.shift + static_cast<size_t>(h * pd + i) * n;
  };
  auto diag_row = [&](int j) {
    return run.state.diag + 2 * (static_cast<size_t>(j) * heads + h) * (n / 2);
  };
  for (int i = 0; i < pd; ++i) {
    LoadRow(ring_row(i), n, chunks, head.padded, head.ring(i));
  }
  for (int j = 0; j < pd * pd; ++j) {
    LoadRow(diag_row(j), n, chunks, head.padded, head.diag(j));
  }
  const float skip = w.skip()[h];
  int newest = static_cast<int>(run.start % n);  // token t's ring slot
  for (int64_t t = 0; t < run.length;
       ++t, newest = newest + 1 == n ? 0 : newest + 1) {
    const float* q = run.q + t * run.input_stride + h * pd;
    const float* k = run.k + t * run.input_stride + h * pd;
    const float* v = run.v + t * run.input_stride + h * pd;
    for (int i = 0; i < pd; ++i) {
      head.kbar[i] =
          ShiftChannel(w, h * pd + i, newest, k[i], chunks, head.ring(i));
    }
    for (int d1 = 0; d1 < pd; ++d1) {
      for (int d2 = 0; d2 < pd; ++d2) {
        head.y[d1 * pd + d2] = DiagChannel(head, skip, head.kbar[d1] * v[d2],
                                           head.diag(d1 * pd + d2));
      }
    }
    // out[d2 * H + h] = sum over d1 of q[d1] y[d1, d2], d1 in order.
    float* out = run.out + t * d;
    for (int d2 = 0; d2 < pd; ++d2) {
      float sum = q[0] * head.y[d2];
      for (int d1 = 1; d1 < pd; ++d1) sum = sum + q[d1] * head.y[d1 * pd + d2];
      out[d2 * heads + h] = sum;
    }
  }
  for (int i = 0; i < pd; ++i) StoreRing(head, n, run, ring_row(i), i);
  for (int j = 0; j < pd * pd; ++j) {
    StoreRow(head.diag(j), n, chunks, head.padded, diag_row(j));
  }
}

}  // namespace

H3RecurrentWeightsCpu::H3RecurrentWeightsCpu(const H3Weights& w)
    : shape_(w.shape) {
  const int d = shape_.d_model, n = shape_.d_state, heads = shape_.heads();
  const int modes = shape_.modes();
  ring_row_ = RoundUp(n) + n;
  mode_row_ = RoundUp(2 * modes);
  ring_taps_.assign(static_cast<size_t>(d) * ring_row_, 0.0f);
  shift_D_.assign(w.shift_D, w.shift_D + d);
  for (int c = 0; c < d; ++c) {
    const float* taps = w.shift_kernel + static_cast<size_t>(c) * n;
    float* row = ring_taps_.data() + static_cast<size_t>(c) * ring_row_;
    // Weight index i = N - 1 - newest + s holds tap (newest - s) mod N.
    for (int i = 0; i < n; ++i) row[i] = taps[n - 1 - i];
    for (int i = n; i < 2 * n - 1; ++i) row[i] = taps[2 * n - 1 - i];
  }
  modes_.assign(static_cast<size_t>(heads) * 4 * mode_row_, 0.0f);
  for (int h = 0; h < heads; ++h) {
    float* a_re = modes_.data() + static_cast<size_t>(h) * 4 * mode_row_;
    float* a_im = a_re + mode_row_;
    float* b = a_im + mode_row_;
    float* c = b + mode_row_;
    for (int m = 0; m < modes; ++m) {
      const size_t i = 2 * (static_cast<size_t>(h) * modes + m);
      a_re[2 * m] = a_re[2 * m + 1] = w.dA[i];
      a_im[2 * m] = -w.dA[i + 1];
      a_im[2 * m + 1] = w.dA[i + 1];
      b[2 * m] = w.dB[i];
      b[2 * m + 1] = w.dB[i + 1];
      c[2 * m] = w.C[i];
      c[2 * m + 1] = -w.C[i + 1];
    }
  }
  skip_.assign(w.D, w.D + heads);
}

// Compiled for AVX-512, AVX2 and baseline x86-64; the loader picks the best
// the CPU has, once (GCC function multi-versioning), so every step and scan
// of the process runs the same clone. Not under ThreadSanitizer, whose
// instrumented ifunc resolver would run before its runtime starts.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx512f", "avx2,fma", "default")))
#endif
void H3RecurHeads(const H3RecurrentWeightsCpu& w, const H3RecurrenceRun& run,
                  int head_begin, int head_end) {
  if (run.length <= 0) return;
  const H3Shape& s = w.shape();
  if (s.d_state == 64 && s.head_dim == 1) {
    for (int h = head_begin; h < head_end; ++h) {
      FixedHead<4> head;  // one per head, so that it can live in registers
      RunHead(w, run, h, head);
    }
    return;
  }
  AnyHead head(s.d_state, RoundUp(s.d_state) / kLanes, s.head_dim);
  for (int h = head_begin; h < head_end; ++h) RunHead(w, run, h, head);
}

}  // namespace h3::kernels
