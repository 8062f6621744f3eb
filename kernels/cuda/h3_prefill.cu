// H3PrefillCuda: uploads one layer's weights and routes each call to the fused
// kernel or the cuFFT path.
#include <string>
#include <vector>

#include "kernels/cuda/h3_prefill.h"
#include "kernels/cuda/h3_prefill_chunked.h"
#include "kernels/cuda/h3_prefill_cufft.h"
#include "kernels/cuda/h3_prefill_fused.h"
#include "kernels/fallbacks.h"

namespace h3::kernels {
namespace {

const void* Advance(const void* base, int64_t bytes) {
  return static_cast<const char*>(base) + bytes;
}
void* Advance(void* base, int64_t bytes) {
  return static_cast<char*>(base) + bytes;
}

}  // namespace

H3PrefillCudaParams SegmentCall(const H3PrefillPackedParams& p, int i) {
  const H3PrefillSegment& s = p.seqs[i];
  const int64_t bytes = ElementSize(p.type) * s.offset;
  H3PrefillCudaParams one;
  one.batch = 1;
  one.start = s.start;
  one.length = s.length;
  one.type = p.type;
  one.layout = {0, p.time, p.channel};
  one.q = Advance(p.q, bytes);
  one.k = Advance(p.k, bytes);
  one.v = Advance(p.v, bytes);
  one.out = Advance(p.out, bytes);
  one.shift_state = s.shift_state;
  one.diag_state = s.diag_state;
  return one;
}

const char* H3PrefillPathName(H3PrefillPath path) {
  switch (path) {
    case H3PrefillPath::kFused:
      return "fused";
    case H3PrefillPath::kChunked:
      return "chunked";
    case H3PrefillPath::kChunkedMma:
      return "chunked_mma";
    default:
      return "cufft";
  }
}

bool H3FusedSupports(const H3Shape& s, std::string* why) {
  if (s.head_dim != 1) {
    *why = "head_dim " + std::to_string(s.head_dim) +
           " (the fused kernel computes head_dim 1)";
    return false;
  }
  if (s.modes() % 8 != 0 || s.modes() > 32) {
    *why = "d_state " + std::to_string(s.d_state) +
           " (the fused kernel needs d_state a multiple of 16, at most 64)";
    return false;
  }
  return true;
}

H3PrefillCuda::~H3PrefillCuda() {
  chunked_.reset();
  fused_.reset();
  cufft_.reset();
  cudaFree(weight_memory_);
}

cudaError_t H3PrefillCuda::Create(const H3Weights& w, const Options& options,
                                  std::unique_ptr<H3PrefillCuda>* out) {
  const H3Shape& s = w.shape;
  if (s.d_model <= 0 || s.head_dim <= 0 || s.d_model % s.head_dim != 0 ||
      s.d_state <= 0 || s.d_state % 2 != 0) {
    return cudaErrorInvalidValue;
  }
  const size_t d = s.d_model, n = s.d_state;
  const size_t heads = s.heads(), modes = s.modes();
  // The weights, packed into one allocation in H3Weights order.
  struct Part {
    const float* host;
    size_t size;
    const float** device;
  };
  std::unique_ptr<H3PrefillCuda> op(new H3PrefillCuda());
  op->device_weights_.shape = s;
  H3Weights& dw = op->device_weights_;
  const Part parts[] = {{w.shift_kernel, d * n, &dw.shift_kernel},
                        {w.shift_D, d, &dw.shift_D},
                        {w.dA, 2 * heads * modes, &dw.dA},
                        {w.dB, 2 * heads * modes, &dw.dB},
                        {w.C, 2 * heads * modes, &dw.C},
                        {w.D, heads, &dw.D}};
  // Each array starts 256-byte aligned, so kernels may read complex values
  // as float2 and rows as vectors.
  constexpr size_t kAlign = 64;  // floats
  std::vector<float> packed;
  std::vector<size_t> offsets;
  for (const Part& part : parts) {
    if (part.host == nullptr) return cudaErrorInvalidValue;
    offsets.push_back(packed.size());
    packed.insert(packed.end(), part.host, part.host + part.size);
    packed.resize((packed.size() + kAlign - 1) / kAlign * kAlign, 0.0f);
  }
  cudaError_t err =
      cudaMalloc(&op->weight_memory_, packed.size() * sizeof(float));
  if (err != cudaSuccess) return err;
  err = cudaMemcpy(op->weight_memory_, packed.data(),
                   packed.size() * sizeof(float), cudaMemcpyHostToDevice);
  if (err != cudaSuccess) return err;
  for (size_t i = 0; i < offsets.size(); ++i) {
    *parts[i].device = op->weight_memory_ + offsets[i];
  }

  err = H3PrefillCufft::Create(dw, &op->cufft_);
  if (err != cudaSuccess) return err;
  std::string why;
  if (options.prefer == H3PrefillPath::kCufft) {
    op->reason_ = "cuFFT path requested";
  } else if (!H3FusedSupports(s, &why)) {
    op->reason_ = std::string("cuFFT path: the ") +
                  H3PrefillPathName(options.prefer) +
                  " kernel does not support " + why;
  } else if (options.prefer == H3PrefillPath::kChunked ||
             options.prefer == H3PrefillPath::kChunkedMma) {
    const bool mma = options.prefer == H3PrefillPath::kChunkedMma;
    err = H3PrefillChunked::Create(w, dw, mma, &op->chunked_);
    if (err != cudaSuccess) return err;
    op->path_ = options.prefer;
    op->reason_ =
        s.d_model % 8 == 0
            ? "chunked-scan kernel (channel-major calls, and token-major ones "
              "on packed rows; others take cuFFT)"
            : "chunked-scan kernel (channel-major calls; others take cuFFT)";
  } else {
    err = H3PrefillFused::Create(w, dw, &op->fused_);
    if (err != cudaSuccess) return err;
    op->path_ = H3PrefillPath::kFused;
    op->reason_ =
        "fused FlashConv kernel (channel-major calls; others take cuFFT)";
  }
  *out = std::move(op);
  return cudaSuccess;
}

bool H3PrefillCuda::RunsFused(const SequenceLayout& layout) const {
  if ((fused_ != nullptr || chunked_ != nullptr) && layout.time == 1) {
    return true;
  }
  return chunked_ != nullptr && layout.channel == 1 && layout.time % 8 == 0 &&
         device_weights_.shape.d_model % 8 == 0;
}

bool H3PrefillCuda::RunsRows(const H3PrefillPackedParams& p) const {
  return chunked_ != nullptr && chunked_->TakesRows(p) &&
         !KernelFallback("rows");
}

cudaError_t H3PrefillCuda::Run(const H3PrefillCudaParams& p,
                               cudaStream_t stream) {
  if (p.batch < 0 || p.length < 0 || p.start < 0) return cudaErrorInvalidValue;
  if (p.batch == 0 || p.length == 0) return cudaSuccess;
  if (p.q == nullptr || p.k == nullptr || p.v == nullptr || p.out == nullptr ||
      p.shift_state == nullptr || p.diag_state == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (!RunsFused(p.layout)) return cufft_->Run(p, stream);
  // The batch as a packed call: sequence b is the segment at offset
  // b * layout.batch with state b.
  const int64_t shift_size =
      int64_t{device_weights_.shape.d_model} * device_weights_.shape.d_state;
  const int64_t diag_size = 2 * int64_t{device_weights_.shape.kv_channels()} *
                            device_weights_.shape.modes();
  std::vector<H3PrefillSegment> segments(p.batch);
  for (int b = 0; b < p.batch; ++b) {
    segments[b] = {p.start, p.length, b * p.layout.batch,
                   p.shift_state + b * shift_size,
                   p.diag_state + b * diag_size};
  }
  H3PrefillPackedParams packed;
  packed.type = p.type;
  packed.time = p.layout.time;
  packed.channel = p.layout.channel;
  packed.q = p.q;
  packed.k = p.k;
  packed.v = p.v;
  packed.out = p.out;
  packed.segments = p.batch;
  packed.seqs = segments.data();
  if (p.layout.time != 1) {  // token-major: packed rows, where aligned
    return RunsRows(packed) ? chunked_->RunRows(packed, stream)
                            : cufft_->Run(p, stream);
  }
  return fused_ != nullptr ? fused_->RunPacked(packed, stream)
                           : chunked_->RunPacked(packed, stream);
}

cudaError_t H3PrefillCuda::RunPacked(const H3PrefillPackedParams& p,
                                     cudaStream_t stream) {
  std::string why;
  if (!CheckPacked(device_weights_.shape, p, &why)) {
    return cudaErrorInvalidValue;
  }
  if (p.segments == 0) return cudaSuccess;
  if (RunsRows(p)) return chunked_->RunRows(p, stream);
  if (OutTime(p) != p.time) return cudaErrorInvalidValue;  // rows only
  const SequenceLayout layout{0, p.time, p.channel};
  if (layout.time == 1 && RunsFused(layout)) {
    return fused_ != nullptr ? fused_->RunPacked(p, stream)
                             : chunked_->RunPacked(p, stream);
  }
  for (int i = 0; i < p.segments; ++i) {
    const cudaError_t err = cufft_->Run(SegmentCall(p, i), stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace h3::kernels
