// The CUDA backend's H3 layer: H3PrefillCuda for prefill, H3StepCuda for
// decoding, both over the device copy of the layer's parameters that
// H3PrefillCuda owns.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_status.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/h3_prefill.h"
#include "kernels/cuda/h3_step.h"

namespace h3::engine::cuda {
namespace {

class CudaH3Layer final : public H3Layer {
 public:
  CudaH3Layer(std::unique_ptr<kernels::H3PrefillCuda> prefill, bool pdl,
              cudaStream_t stream, const Backend& owner,
              PrefillScratch& scratch)
      : prefill_(std::move(prefill)),
        pdl_(pdl),
        stream_(stream),
        owner_(owner),
        type_(owner.activation_type()),
        scratch_(scratch) {}

  absl::Status Prefill(absl::Span<const H3Segment> segments, int64_t piece,
                       const void* qkv, void* out) override {
    if (piece < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("h3 prefill: piece is ", piece, "; it must be >= 1"));
    }
    int64_t rows = 0;
    for (const H3Segment& s : segments) {
      if (s.length < 1 || s.start < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("h3 prefill: a segment at position ", s.start,
                         " of length ", s.length));
      }
      rows += s.length;
    }
    if (rows == 0) return absl::OkStatus();
    if (prefill_->path() == kernels::H3PrefillPath::kCufft) {
      return PrefillCufft(segments, piece, qkv, out);
    }
    return PrefillFused(segments, piece, rows, qkv, out);
  }

  absl::Status Step(int batch, const void* qkv, void* out,
                    const kernels::H3State* states,
                    const int64_t* positions) override {
    const kernels::H3Weights& w = prefill_->device_weights();
    const int64_t d = w.shape.d_model;
    kernels::H3StepParams p;
    p.w = w;
    p.batch = batch;
    p.q = qkv;
    p.k = ElementAt(qkv, d, type_);
    p.v = ElementAt(qkv, 2 * d, type_);
    p.out = out;
    p.io_type = type_;
    p.states = states;
    p.input_stride = 3 * d;
    p.positions = positions;
    H3_CUDA_RETURN_IF_ERROR(
        kernels::H3StepCuda(p, stream_, DecodeLaunchOrder(pdl_, owner_)));
    return absl::OkStatus();
  }

 private:
  // The chunked kernel reads q, k, v from the q|k|v rows and writes out's
  // rows in place where it can (RunsRows: d_model a multiple of 8, aligned
  // tensors). Otherwise (and always for the fused kernel) the kernel reads
  // channel-major q, k, v: all the call's rows are transposed in once
  // ([rows, 3d] -> [3d, rows]: a piece's channel c at c * rows + its first
  // row), and the outputs are transposed back once. Either way the pieces
  // run round by round: the first piece of every segment in one packed
  // call, then the second piece of those that have one, ...
  absl::Status PrefillFused(absl::Span<const H3Segment> segments, int64_t piece,
                            int64_t rows, const void* qkv, void* out) {
    const int64_t d = prefill_->device_weights().shape.d_model;
    Profiler* const prof = owner_.profiler();
    // RunsRows looks at the tensors and strides.
    kernels::H3PrefillPackedParams p = kernels::QkvRowsCall(type_, d, qkv, out);
    const bool in_rows = prefill_->RunsRows(p);
    void* scratch = nullptr;
    if (!in_rows) {
      H3_ASSIGN_OR_RETURN(scratch, Reserve(4 * rows * d));
      ProfileRange range(prof, "transpose_in");
      H3_CUDA_RETURN_IF_ERROR(kernels::TransposeToChannelMajor(
          qkv, rows, 3 * d, 3 * d, type_, scratch, stream_));
      p.time = 1;
      p.channel = rows;
      p.out_time = 0;
      p.q = scratch;
      p.k = ElementAt(scratch, d * rows, type_);
      p.v = ElementAt(scratch, 2 * d * rows, type_);
      p.out = ElementAt(scratch, 3 * d * rows, type_);
    }
    {
      // Round r: piece r of every segment still going, in one packed call.
      ProfileRange range(prof,
                         prefill_->path() == kernels::H3PrefillPath::kFused
                             ? "fused_conv"
                             : "chunked_conv");
      for (int64_t done = 0;; done += piece) {
        pieces_.clear();
        int64_t row = 0;  // the segment's first row
        for (const H3Segment& s : segments) {
          if (done < s.length) {
            // A piece's offset: its first row's in the rows (time 3d), its
            // first token's in the channel-major scratch (time 1).
            pieces_.push_back({s.start + done, std::min(piece, s.length - done),
                               (row + done) * p.time, s.state.shift,
                               s.state.diag});
          }
          row += s.length;
        }
        if (pieces_.empty()) break;
        p.segments = static_cast<int>(pieces_.size());
        p.seqs = pieces_.data();
        H3_CUDA_RETURN_IF_ERROR(prefill_->RunPacked(p, stream_));
      }
    }
    if (in_rows) return absl::OkStatus();
    ProfileRange range(prof, "transpose_out");
    H3_CUDA_RETURN_IF_ERROR(
        kernels::TransposeToTokenMajor(ElementAt(scratch, 3 * d * rows, type_),
                                       rows, d, type_, out, d, stream_));
    return absl::OkStatus();
  }

  // The cuFFT path reads q, k, v straight from the q|k|v rows (token-major,
  // row stride 3d), piece by piece; its output has the inputs' layout, so it
  // lands in scratch and is compacted.
  absl::Status PrefillCufft(absl::Span<const H3Segment> segments, int64_t piece,
                            const void* qkv, void* out) {
    const int64_t d = prefill_->device_weights().shape.d_model;
    H3_ASSIGN_OR_RETURN(void* const scratch,
                        Reserve(3 * std::min(piece, MaxLength(segments)) * d));
    kernels::H3PrefillCudaParams p;
    p.batch = 1;
    p.type = type_;
    p.out = scratch;
    const size_t size = ElementSize(type_);
    int64_t row = 0;
    for (const H3Segment& s : segments) {
      for (int64_t done = 0; done < s.length; done += piece) {
        const int64_t first = row + done;
        p.start = s.start + done;
        p.length = std::min(piece, s.length - done);
        p.layout = {p.length * 3 * d, 3 * d, 1};
        p.q = ElementAt(qkv, first * 3 * d, type_);
        p.k = ElementAt(qkv, first * 3 * d + d, type_);
        p.v = ElementAt(qkv, first * 3 * d + 2 * d, type_);
        p.shift_state = s.state.shift;
        p.diag_state = s.state.diag;
        {
          ProfileRange range(owner_.profiler(), "cufft_conv");
          H3_CUDA_RETURN_IF_ERROR(prefill_->Run(p, stream_));
        }
        ProfileRange range(owner_.profiler(), "compact");
        H3_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(
            ElementAt(out, first * d, type_), d * size, scratch, 3 * d * size,
            d * size, p.length, cudaMemcpyDeviceToDevice, stream_));
      }
      row += s.length;
    }
    return absl::OkStatus();
  }

  static int64_t MaxLength(absl::Span<const H3Segment> segments) {
    int64_t most = 0;
    for (const H3Segment& s : segments) most = std::max(most, s.length);
    return most;
  }

  // The shared scratch, for `elements` of the activation type.
  absl::StatusOr<void*> Reserve(int64_t elements) {
    return scratch_.Reserve(elements * ElementSize(type_));
  }

  std::unique_ptr<kernels::H3PrefillCuda> prefill_;
  bool pdl_;  // MakeCudaH3Layer's
  cudaStream_t stream_;
  const Backend& owner_;
  const ElementType type_;   // of qkv, out and the scratch
  PrefillScratch& scratch_;  // the backend's, shared by its H3 layers
  std::vector<kernels::H3PrefillSegment> pieces_;  // one round's, reused
};

}  // namespace

PrefillScratch::~PrefillScratch() { cudaFree(data_); }

absl::StatusOr<void*> PrefillScratch::Reserve(int64_t bytes) {
  if (bytes <= bytes_) return data_;
  H3_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  cudaFree(data_);
  data_ = nullptr;
  bytes_ = 0;
  H3_CUDA_RETURN_IF_ERROR(cudaMalloc(&data_, bytes));
  bytes_ = bytes;
  return data_;
}

absl::StatusOr<std::unique_ptr<H3Layer>> MakeCudaH3Layer(
    const kernels::H3Weights& weights, ElementType type, H3PrefillKernel kernel,
    bool pdl, cudaStream_t stream, const Backend& owner,
    PrefillScratch& scratch) {
  kernels::H3PrefillCuda::Options options;
  // The fused and chunked kernels round their operands to fp16
  // (docs/flashconv.md): exact fp32 serving takes the cuFFT path.
  if (type == ElementType::kF32) {
    options.prefer = kernels::H3PrefillPath::kCufft;
  } else {
    switch (ResolveH3Prefill(kernel, type)) {
      case H3PrefillKernel::kChunked:
        options.prefer = kernels::H3PrefillPath::kChunked;
        break;
      case H3PrefillKernel::kChunkedMma:
        options.prefer = kernels::H3PrefillPath::kChunkedMma;
        break;
      default:  // kFft (auto is resolved)
        options.prefer = kernels::H3PrefillPath::kFused;
    }
  }
  std::unique_ptr<kernels::H3PrefillCuda> prefill;
  H3_CUDA_RETURN_IF_ERROR(
      kernels::H3PrefillCuda::Create(weights, options, &prefill));
  return std::make_unique<CudaH3Layer>(std::move(prefill), pdl, stream, owner,
                                       scratch);
}

}  // namespace h3::engine::cuda
