#ifndef H3_KERNELS_CUDA_H3_PREFILL_CUFFT_KERNELS_H_
#define H3_KERNELS_CUDA_H3_PREFILL_CUFFT_KERNELS_H_

// The kernels of the cuFFT prefill path (h3_prefill_cufft.cu runs them in
// this order for each piece of a call):
//
//   LaunchShiftKv          kv = (shiftconv(k) + shift_D k) (x) v, the inputs
//                          before the piece read from the shift state's ring
//   LaunchShiftState       the shift state after the piece: its last
//                          min(length, N) inputs written into their ring slots
//   (cuFFT R2C of kv)
//   LaunchSpectrumProduct  times the head's kernel spectrum, / nfft
//   (cuFFT C2R, in place)
//   LaunchDiagState        + the carried diagonal state's output; end state
//   LaunchOutput           out = contract(q, y + D kv)
//
// Each launcher enqueues on `stream` and returns the launch error.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/h3_prefill.h"
#include "kernels/h3.h"

namespace h3::kernels {

// Every kernel here runs 256-thread blocks: 8 warps per block hides latency
// at any occupancy, and the tiles below are sized so that each thread owns a
// few elements.
constexpr int kCufftThreads = 256;
// The longest piece of a call processed at once: its FFTs have at most
// 2 * 8192 points, so kernel spectra exist only up to nfft 16384.
constexpr int kMaxPieceLength = 8192;

// The channel-by-time tile of the kernels that read or write q, k, v, out
// (ShiftKv, Output): whole heads (kv needs all p channels of a head), about
// 32 channels so that a token-major tile row is a 128-byte line in fp32, and
// channels * time <= 2048 elements so that the ShiftKv tile's five arrays
// stay under 48 KiB of shared memory.
struct ChannelTile {
  int heads = 0;     // heads per tile
  int channels = 0;  // heads * head_dim
  int time = 0;      // tokens per tile, a power of two <= 64
};
// The tile for `shape`; false when no tile fits (head_dim above ~1500).
bool ChooseChannelTile(const H3Shape& shape, ChannelTile* tile);

// One piece of a call: `length` consecutive tokens of `batch` consecutive
// sequences, at positions [start, start + length), and the scratch buffers it
// uses.
struct CufftPieceParams {
  H3Weights w;  // device pointers
  ChannelTile tile;
  // The call's tensors as given to Run; element (b, t, c) of the piece is
  // element (first_sequence + b, first_token + t, c) of the call.
  ElementType type = ElementType::kF32;
  SequenceLayout layout;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* shift_state = nullptr;  // [call batch, d, N]: rings by position
  float* diag_state = nullptr;   // [call batch, KV, M] complex
  int64_t first_sequence = 0;
  int batch = 0;
  int64_t first_token = 0;
  int64_t start = 0;  // the position of the piece's first token
  int length = 0;
  int nfft = 0;  // H3FftSize(length)
  // Scratch.
  float* kv = nullptr;              // [batch, KV, nfft], zero beyond length
  float* y = nullptr;               // [batch, KV, nfft + 2]: spectra, then y
  const float* spectrum = nullptr;  // [H, nfft/2 + 1] complex
};

cudaError_t LaunchShiftKv(const CufftPieceParams& p, cudaStream_t stream);
// Writes the piece's last min(length, N) inputs k into their slots of the
// shift state's ring; the other slots keep their values. Must follow
// LaunchShiftKv, which reads the ring as it was before the piece.
cudaError_t LaunchShiftState(const CufftPieceParams& p, cudaStream_t stream);
cudaError_t LaunchSpectrumProduct(const CufftPieceParams& p,
                                  cudaStream_t stream);
cudaError_t LaunchDiagState(const CufftPieceParams& p, cudaStream_t stream);
cudaError_t LaunchOutput(const CufftPieceParams& p, cudaStream_t stream);

// taps: device [H, nfft]: K[h][l] = 2 Re(sum_m C dB dA^l) for l < nfft / 2,
// zero above. w: device pointers.
cudaError_t LaunchKernelTaps(const H3Weights& w, int nfft, float* taps,
                             cudaStream_t stream);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_H3_PREFILL_CUFFT_KERNELS_H_
