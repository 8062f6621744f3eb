#ifndef H3_KERNELS_H3_H_
#define H3_KERNELS_H3_H_

// The H3 layer's inner operation (docs/model.md), between its q/k/v projections
// and its output projection:
//
//   kbar = shiftconv(k) + shift_D * k          shift SSM, N taps
//   kv   = kbar (x) v                          per head, p x p outer products
//   y    = K * kv + D * kv                     diagonal SSM, long convolution
//   out  = contract(q, y)                      out[d2 * H + h] (the "(d2 h)"
//   layout)
//
// for head_dim p = 1 this is out = q * (K * (kbar * v) + D * kbar * v).
//
// Two forms compute the same function: a prefill over a chunk of tokens that
// starts from a saved state and leaves the end state (FFT convolution plus
// state passing, paper section 4), and a recurrent step for one token per
// sequence. The CPU functions declared here are the specification; the CUDA
// kernels take the same structs.
//
// The shift SSM's state is its last N inputs, raw, in a ring indexed by
// position: k[t] of channel c lives at shift[c][t mod N]. The reference
// keeps s = (the last N inputs filtered by B) and shifts it every token
// (docs/model.md, "Recurrent form"); kbar = C . s + D k equals
// sum_j kshift[j] k[t - j] + D k, so the ring holds the same information,
// and a step writes one value per channel instead of N. Slots of positions
// not yet reached are zero (a new sequence's state is all zeros), which is
// the convolution's "zero before t = 0".
//
// Everything is fp32 (but the step's I/O, H3StepParams); complex numbers are
// stored as interleaved (re, im).

#include <cstdint>
#include <vector>

#include "base/element_type.h"

namespace h3::kernels {

// The sizes of one H3 layer.
struct H3Shape {
  int d_model = 0;   // channels of q, k, v and of the output
  int head_dim = 1;  // p; 1 in the released hybrid models
  int d_state = 0;   // N: shift-SSM state size; the diagonal SSM has N/2 modes

  int heads() const { return d_model / head_dim; }  // H
  int modes() const { return d_state / 2; }         // M
  // Channels of kv and of the diagonal state: p * p * H, ordered (d1, d2, h).
  int kv_channels() const { return head_dim * head_dim * heads(); }
};

// One layer's SSM parameters after discretisation (see H3Discretize). All
// pointers are borrowed; they must outlive every call that uses them.
struct H3Weights {
  H3Shape shape;
  const float* shift_kernel = nullptr;  // [d, N]  kshift[c][j], tap j
  const float* shift_D = nullptr;       // [d]     ssm_k_D
  const float* dA = nullptr;            // [H, M] complex: discrete A
  const float* dB = nullptr;            // [H, M] complex: discrete B
  const float* C = nullptr;             // [H, M] complex
  const float* D = nullptr;             // [H]    skip
};

// A sequence's state in one H3 layer, read and updated in place.
struct H3State {
  float* shift = nullptr;  // [d, N]: k[t] of channel c at [c][t mod N]
  float* diag = nullptr;   // [p, p, H, M] complex: x[(d1, d2, h)][m]
};

// Prefill of one sequence's chunk of `length` tokens at positions
// [start, start + length).
// REQUIRES: q, k, v, out hold [length, d] row-major (token-major); the state
// holds the state before the chunk (zeros for a new sequence) and receives the
// state after it; kernel_spectrum is H3KernelSpectrum(weights, nfft) with
// nfft >= 2 * length and nfft a power of two. `out` must not alias q, k or v.
struct H3PrefillParams {
  H3Weights w;
  int64_t start = 0;  // the position of the chunk's first token
  int64_t length = 0;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  H3State state;
  const float* kernel_spectrum = nullptr;  // [H, nfft/2 + 1] complex
  int nfft = 0;
};

// One decoding step for a batch of sequences, each at its own position with
// its own state. REQUIRES: q, k, v hold [batch, d] rows `input_stride`
// elements apart (d when 0; 3 d when they are the column blocks of one fused
// q|k|v product); out holds [batch, d]; states[b] is sequence b's state and
// positions[b] the position of its token (the ring slot positions[b] mod N
// receives k).
//
// q, k, v and out hold elements of io_type (kF32, kF16 or kBF16; the states
// are fp32 always): the step widens its inputs exactly, computes in fp32 as
// for fp32 I/O and rounds each output once (to nearest even) when it stores
// it.
struct H3StepParams {
  H3Weights w;
  int batch = 0;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  const H3State* states = nullptr;  // [batch]
  int64_t input_stride = 0;
  const int64_t* positions = nullptr;       // [batch], >= 0
  ElementType io_type = ElementType::kF32;  // of q, k, v and out
};

// The checkpoint's SSM parameters of one layer (docs/model.md names), fp32.
struct H3RawParams {
  H3Shape shape;
  const float* shift_B = nullptr;     // ssm_k_kernel.kernel.B      [d, N]
  const float* shift_C = nullptr;     // ssm_k_kernel.kernel.C      [1, d, N]
  const float* shift_D = nullptr;     // ssm_k_D                    [d]
  const float* log_dt = nullptr;      // kernel.kernel.log_dt       [H]
  const float* inv_A_real = nullptr;  // kernel.kernel.inv_A_real   [H, M]
  const float* A_imag = nullptr;      // kernel.kernel.A_imag       [H, M]
  const float* B = nullptr;           // kernel.kernel.B            [H, M, 2]
  const float* C = nullptr;           // kernel.kernel.C            [1, H, M, 2]
  const float* D = nullptr;           // D                          [H]
};

// Output buffers of H3Discretize, sized as in H3Weights.
struct H3DiscretizedBuffers {
  float* shift_kernel;  // [d, N]
  float* dA;            // [H, M, 2]
  float* dB;            // [H, M, 2]
};

// Bilinear discretisation of the diagonal SSM and the shift SSM's kernel,
// computed in double precision and rounded once:
//   dA = (1 + dt A / 2) / (1 - dt A / 2),  dB = B dt / (1 - dt A / 2),
//   A = -exp(inv_A_real) + i A_imag, dt = exp(log_dt),
//   kshift[c][j] = sum_n B[c][n] C[c][n + j].
void H3Discretize(const H3RawParams& raw, const H3DiscretizedBuffers& out);

// The rFFT of the diagonal SSM's convolution kernel
// K[h][l] = 2 Re(sum_m C[m] dB[m] dA[m]^l) for l < nfft / 2, zero-padded to
// nfft. Precomputed once per layer and FFT size. `out`: [H, nfft/2 + 1]
// complex. REQUIRES: nfft a power of two >= 2.
void H3KernelSpectrum(const H3Weights& w, int nfft, float* out);

// The CPU twin of the FFT prefill: the specification of the GPU's FlashConv
// kernels. Multi-threaded over heads (base/parallel.h). The CPU backend
// prefills with H3ScanCpu instead.
void H3PrefillCpu(const H3PrefillParams& params);

// The recurrent form on the CPU (docs/model.md, "Recurrent form"): the decoding
// step H3StepCpu, and H3ScanCpu, a prefill that runs the step's arithmetic
// token after token. Both execute one per-token routine, so a prefill of L
// tokens leaves the same bits (outputs and state) as L steps, or as the same
// tokens prefilled in chunks split anywhere: a result never depends on how a
// prompt was divided. The arithmetic is fp32 in an order fixed per element
// (vector lanes over the shift ring's slots and the diagonal state's modes,
// then a fixed tree), independent of the batch, the chunk and the thread
// count; only the CPU's instruction set (AVX-512 / AVX2 / baseline, chosen
// once per process) may change the bits.
//
// H3RecurrentWeightsCpu holds one layer's parameters rearranged for that
// routine. Immutable after construction, so calls on many threads may share
// one.
class H3RecurrentWeightsCpu {
 public:
  // Copies and rearranges w's host arrays; they need not outlive this.
  // REQUIRES: w.shape valid (d_state even, >= 2; head_dim divides d_model).
  explicit H3RecurrentWeightsCpu(const H3Weights& w);

  const H3Shape& shape() const { return shape_; }

  // The layout, for kernels/cpu/h3_recurrence.cc. Shift taps per channel c,
  // reversed and doubled so that the ring is read in slot order: with
  // newest = t mod N (the slot of k[t]), slot s of the ring has weight
  // ring_taps[c][N - 1 - newest + s] = kshift[c][(newest - s) mod N].
  int ring_row() const { return ring_row_; }  // N rounded up to 16, plus N
  const float* ring_taps() const { return ring_taps_.data(); }  // [d, row]
  const float* shift_D() const { return shift_D_.data(); }      // [d]
  // Per head h, four vectors of mode_row() floats, M complex values
  // interleaved and zero-padded: (Re dA, Re dA), (-Im dA, Im dA),
  // (Re dB, Im dB), (Re C, -Im C).
  int mode_row() const { return mode_row_; }            // 2 M rounded up to 16
  const float* modes() const { return modes_.data(); }  // [H, 4, mode_row]
  const float* skip() const { return skip_.data(); }    // [H]: D

 private:
  H3Shape shape_;
  int ring_row_ = 0, mode_row_ = 0;
  std::vector<float> ring_taps_, shift_D_, modes_, skip_;
};

// A prefill by the recurrence: one sequence's chunk of `length` tokens at
// positions [start, start + length), from the state before it (read and
// updated in place: after the call it is the state after the chunk).
// REQUIRES: q, k, v hold [length, d] rows `input_stride` elements apart (d
// when 0; 3 d for the column blocks of one fused q|k|v product); out holds
// [length, d] row-major and overlaps none of q, k, v or the state; start >= 0,
// length >= 0; the ring slots of positions before 0 hold zeros (as a new
// sequence's all-zero state does).
struct H3ScanParams {
  H3Weights w;
  int64_t start = 0;
  int64_t length = 0;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  H3State state;
  int64_t input_stride = 0;
};

// Multi-threaded over heads (base/parallel.h); a head's tokens run in order
// on one thread. The overloads without H3RecurrentWeightsCpu build one from
// params.w on every call (for tests and occasional use); with it, params.w's
// arrays are not read and params.w.shape must equal weights.shape().
void H3ScanCpu(const H3ScanParams& params);
void H3ScanCpu(const H3ScanParams& params,
               const H3RecurrentWeightsCpu& weights);
// Multi-threaded over (sequence, head) pairs. As H3StepParams says, and the
// ring slots of positions before 0 hold zeros.
void H3StepCpu(const H3StepParams& params);
void H3StepCpu(const H3StepParams& params,
               const H3RecurrentWeightsCpu& weights);

// The smallest power of two >= 2 * length: the FFT size a prefill of
// `length` tokens needs.
int H3FftSize(int64_t length);

}  // namespace h3::kernels

#endif  // H3_KERNELS_H3_H_
