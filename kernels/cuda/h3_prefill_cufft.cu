// H3PrefillCufft: the unfused prefill. A call is split into groups of
// sequences whose scratch fits a budget and, per group, into pieces of at most
// kMaxPieceLength tokens run one after another, each starting from the state
// the previous one left. Per piece (h3_prefill_cufft_kernels.h):
// ShiftKv, ShiftState, cuFFT R2C, SpectrumProduct, cuFFT C2R, DiagState,
// Output.
#include <algorithm>
#include <map>
#include <utility>

#include "kernels/cuda/cufft_plan.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/h3_prefill_cufft.h"
#include "kernels/cuda/h3_prefill_cufft_kernels.h"

namespace h3::kernels {
namespace {

#define H3_RETURN_IF_CUDA_ERROR(expr)           \
  do {                                          \
    const cudaError_t h3_err_ = (expr);         \
    if (h3_err_ != cudaSuccess) return h3_err_; \
  } while (false)

// Groups index grid dimensions y and z.
constexpr int64_t kMaxGroup = 65535;

bool ValidShape(const H3Shape& s) {
  return s.d_model > 0 && s.head_dim > 0 && s.d_model % s.head_dim == 0 &&
         s.d_state > 0 && s.d_state % 2 == 0;
}

}  // namespace

struct H3PrefillCufft::Impl {
  struct Plans {
    CufftPlan r2c;  // kv [count, nfft] -> y [count, nfft/2 + 1] complex
    CufftPlan c2r;  // y in place: rows of nfft + 2 floats
  };

  ~Impl() {
    if (done != nullptr) {
      cudaEventSynchronize(done);  // the scratch may still be in use
      cudaEventDestroy(done);
    }
  }

  // The kernel spectrum for `nfft`, computed on first use.
  cudaError_t Spectrum(int nfft, cudaStream_t stream, const float** out) {
    auto it = spectra.find(nfft);
    if (it == spectra.end()) {
      DeviceBuffer buffer;
      const size_t bins = nfft / 2 + 1;
      H3_RETURN_IF_CUDA_ERROR(
          buffer.Reserve(2 * sizeof(float) * w.shape.heads() * bins));
      H3_RETURN_IF_CUDA_ERROR(
          H3KernelSpectrumCuda(w, nfft, buffer.as<float>(), stream));
      it = spectra.emplace(nfft, std::move(buffer)).first;
    }
    *out = it->second.as<float>();
    return cudaSuccess;
  }

  // The plans for `count` transforms of `nfft` points, made on first use;
  // grows the shared work area to what they need.
  cudaError_t GetPlans(int nfft, int64_t count, Plans** out) {
    const std::pair<int, int64_t> key(nfft, count);
    auto it = plans.find(key);
    if (it == plans.end()) {
      Plans made;
      const int64_t bins = nfft / 2 + 1;
      H3_RETURN_IF_CUDA_ERROR(made.r2c.Make(CUFFT_R2C, nfft, count, nfft, bins,
                                            /*auto_allocate=*/false));
      H3_RETURN_IF_CUDA_ERROR(made.c2r.Make(CUFFT_C2R, nfft, count, 2 * bins,
                                            bins, /*auto_allocate=*/false));
      // At least a few bytes, so that the work area is never null.
      H3_RETURN_IF_CUDA_ERROR(work.Reserve(std::max(
          {made.r2c.work_bytes(), made.c2r.work_bytes(), size_t{256}})));
      it = plans.emplace(key, std::move(made)).first;
    }
    *out = &it->second;
    return cudaSuccess;
  }

  cudaError_t Exec(const CufftPlan& plan, cudaStream_t stream, bool forward,
                   float* in, float* out) {
    H3_RETURN_IF_CUDA_ERROR(CufftToCuda(cufftSetStream(plan.get(), stream)));
    H3_RETURN_IF_CUDA_ERROR(
        CufftToCuda(cufftSetWorkArea(plan.get(), work.get())));
    if (forward) {
      return CufftToCuda(
          cufftExecR2C(plan.get(), in, reinterpret_cast<cufftComplex*>(out)));
    }
    return CufftToCuda(
        cufftExecC2R(plan.get(), reinterpret_cast<cufftComplex*>(in), out));
  }

  cudaError_t RunPiece(CufftPieceParams p, cudaStream_t stream) {
    Plans* piece_plans = nullptr;
    H3_RETURN_IF_CUDA_ERROR(Spectrum(p.nfft, stream, &p.spectrum));
    H3_RETURN_IF_CUDA_ERROR(GetPlans(
        p.nfft, int64_t{p.batch} * w.shape.kv_channels(), &piece_plans));
    H3_RETURN_IF_CUDA_ERROR(LaunchShiftKv(p, stream));
    H3_RETURN_IF_CUDA_ERROR(LaunchShiftState(p, stream));
    H3_RETURN_IF_CUDA_ERROR(
        Exec(piece_plans->r2c, stream, /*forward=*/true, p.kv, p.y));
    H3_RETURN_IF_CUDA_ERROR(LaunchSpectrumProduct(p, stream));
    H3_RETURN_IF_CUDA_ERROR(
        Exec(piece_plans->c2r, stream, /*forward=*/false, p.y, p.y));
    H3_RETURN_IF_CUDA_ERROR(LaunchDiagState(p, stream));
    return LaunchOutput(p, stream);
  }

  H3Weights w;  // device pointers, borrowed
  ChannelTile tile;
  // The scratch of one group of sequences (kv and y: 2 KV nfft floats per
  // sequence) stays under this. The default 1 GiB runs small layers' batches
  // whole and a 2560-channel layer's 8192-token pieces (335 MB of scratch per
  // sequence) three sequences at a time.
  int64_t scratch_budget = 0;
  std::map<int, DeviceBuffer> spectra;  // nfft -> [H, nfft/2 + 1] complex
  std::map<std::pair<int, int64_t>, Plans> plans;  // (nfft, count)
  DeviceBuffer kv, y, work;
  // Recorded at the end of each call; the next call's stream waits for it,
  // so calls on different streams do not share the scratch concurrently.
  cudaEvent_t done = nullptr;
};

H3PrefillCufft::H3PrefillCufft(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

H3PrefillCufft::~H3PrefillCufft() = default;

cudaError_t H3PrefillCufft::Create(const H3Weights& w, const Options& options,
                                   std::unique_ptr<H3PrefillCufft>* out) {
  if (!ValidShape(w.shape) || w.shift_kernel == nullptr ||
      w.shift_D == nullptr || w.dA == nullptr || w.dB == nullptr ||
      w.C == nullptr || w.D == nullptr) {
    return cudaErrorInvalidValue;
  }
  auto impl = std::make_unique<Impl>();
  impl->w = w;
  impl->scratch_budget = options.scratch_budget_bytes;
  if (!ChooseChannelTile(w.shape, &impl->tile)) return cudaErrorNotSupported;
  H3_RETURN_IF_CUDA_ERROR(
      cudaEventCreateWithFlags(&impl->done, cudaEventDisableTiming));
  out->reset(new H3PrefillCufft(std::move(impl)));
  return cudaSuccess;
}

cudaError_t H3PrefillCufft::Run(const H3PrefillCudaParams& p,
                                cudaStream_t stream) {
  if (p.batch < 0 || p.length < 0 || p.start < 0) return cudaErrorInvalidValue;
  if (p.batch == 0 || p.length == 0) return cudaSuccess;
  if (p.q == nullptr || p.k == nullptr || p.v == nullptr || p.out == nullptr ||
      p.shift_state == nullptr || p.diag_state == nullptr || p.out == p.q ||
      p.out == p.k || p.out == p.v) {
    return cudaErrorInvalidValue;
  }
  if (p.type != ElementType::kF32 && p.type != ElementType::kF16 &&
      p.type != ElementType::kBF16) {
    return cudaErrorInvalidValue;
  }
  Impl& m = *impl_;
  const H3Shape& s = m.w.shape;
  const int64_t kv_channels = s.kv_channels();

  // The first piece is the longest; size the groups and scratch for it.
  const int longest =
      static_cast<int>(std::min<int64_t>(p.length, kMaxPieceLength));
  const int64_t nfft_max = H3FftSize(longest);
  const int64_t per_sequence = sizeof(float) * kv_channels * (2 * nfft_max + 2);
  const int64_t group =
      std::clamp<int64_t>(m.scratch_budget / per_sequence, 1,
                          std::min<int64_t>(p.batch, kMaxGroup));
  H3_RETURN_IF_CUDA_ERROR(
      m.kv.Reserve(sizeof(float) * group * kv_channels * nfft_max));
  H3_RETURN_IF_CUDA_ERROR(
      m.y.Reserve(sizeof(float) * group * kv_channels * (nfft_max + 2)));
  H3_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(stream, m.done, 0));

  CufftPieceParams piece;
  piece.w = m.w;
  piece.tile = m.tile;
  piece.type = p.type;
  piece.layout = p.layout;
  piece.q = p.q;
  piece.k = p.k;
  piece.v = p.v;
  piece.out = p.out;
  piece.shift_state = p.shift_state;
  piece.diag_state = p.diag_state;
  piece.kv = m.kv.as<float>();
  piece.y = m.y.as<float>();
  for (int64_t b0 = 0; b0 < p.batch; b0 += group) {
    piece.first_sequence = b0;
    piece.batch = static_cast<int>(std::min<int64_t>(group, p.batch - b0));
    for (int64_t t0 = 0; t0 < p.length; t0 += kMaxPieceLength) {
      piece.first_token = t0;
      piece.start = p.start + t0;
      piece.length =
          static_cast<int>(std::min<int64_t>(kMaxPieceLength, p.length - t0));
      piece.nfft = H3FftSize(piece.length);
      H3_RETURN_IF_CUDA_ERROR(m.RunPiece(piece, stream));
    }
  }
  return cudaEventRecord(m.done, stream);
}

#undef H3_RETURN_IF_CUDA_ERROR

}  // namespace h3::kernels
