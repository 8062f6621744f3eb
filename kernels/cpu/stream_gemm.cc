// StreamGemmEmulation and StreamSplitGemmEmulation: the decode products'
// algorithms (kernels/stream_gemm.h, kernels/stream_split_gemm.h) on the
// host, fragment by fragment, with each MMA's sum of 16 products taken in
// double and rounded once into the fp32 accumulator.
#include "kernels/stream_gemm.h"

#include <algorithm>
#include <cstdint>

#include "base/half_float.h"
#include "kernels/skinny_gemm.h"
#include "kernels/stream_split_gemm.h"

namespace h3::kernels {
namespace {

bool Is16Bit(ElementType t) {
  return t == ElementType::kF16 || t == ElementType::kBF16;
}

bool Misaligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 != 0;
}

}  // namespace

const char* StreamGemmCheck(const StreamGemmParams& p, bool check_alignment) {
  if (!Is16Bit(p.w_type)) return "w_type: fp16 or bf16 only";
  if (p.x_type != ElementType::kF32 && p.x_type != p.w_type) {
    return "x_type: fp32 or w_type";
  }
  if (p.y_type != ElementType::kF32 && p.y_type != p.w_type) {
    return "y_type: fp32 or w_type";
  }
  if (p.bias_type != ElementType::kF32 && p.bias_type != p.y_type) {
    return "bias_type: fp32, or y_type when y_type is 16-bit";
  }
  if (p.rows < 0 || p.rows > kStreamMaxRows) return "rows: 0 to 64";
  if (p.n < 0) return "n: must not be negative";
  if (p.k < 1 || p.k % 8 != 0) return "k: a positive multiple of 8";
  if (p.rows == 0 || p.n == 0) return "";
  if (p.x == nullptr || p.w == nullptr || p.y == nullptr) {
    return "x, w and y: must not be null";
  }
  if (check_alignment &&
      (Misaligned(p.x) || Misaligned(p.w) || Misaligned(p.y))) {
    return "x, w and y: must be 16-byte aligned";
  }
  return "";
}

namespace {

// The accumulator of output (row r, column j) after the steps [first, last)
// from `acc`, each step's four MMAs in order (kernels/stream_gemm.h).
float EmulateSteps(const StreamGemmParams& p, int64_t r, int64_t j,
                   int64_t first, int64_t last, float acc) {
  // x as the kernel's B fragments see it: rounded to W's type.
  const auto x_at = [&](int64_t e) -> double {
    if (e >= p.k) return 0.0;
    return RoundToType(LoadFloat(p.x, p.x_type, r * p.k + e), p.w_type);
  };
  const auto w_at = [&](int64_t e) -> double {
    if (e >= p.k) return 0.0;
    return LoadFloat(p.w, p.w_type, j * p.k + e);
  };
  for (int64_t s = first; s < last; ++s) {
    for (int mma = 0; mma < 4; ++mma) {
      // The MMA's 16 products of output (j, r): every lane t's two
      // registers, each a pair of elements.
      double sum = acc;
      for (int t = 0; t < 4; ++t) {
        for (int half = 0; half < 2; ++half) {
          const int64_t e = s * kStreamStep + StreamElement(t, mma, half);
          sum += w_at(e) * x_at(e) + w_at(e + 1) * x_at(e + 1);
        }
      }
      acc = static_cast<float>(sum);
    }
  }
  return acc;
}

}  // namespace

void StreamGemmFinish(const StreamGemmParams& p, int64_t r, int64_t j,
                      float sum) {
  if (p.bias != nullptr) sum += LoadFloat(p.bias, p.bias_type, j);
  if (p.gelu) sum = SkinnyGeluTanh(sum);
  StoreFloat(p.y, p.y_type, r * p.n + j, sum);
}

void StreamGemmEmulation(const StreamGemmParams& p) {
  const int64_t steps = (p.k + kStreamStep - 1) / kStreamStep;
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t j = 0; j < p.n; ++j) {
      // Warp w takes steps w, w + 8, ...
      float warp_acc[kStreamWarps] = {};
      for (int64_t s = 0; s < steps; ++s) {
        float& acc = warp_acc[s % kStreamWarps];
        acc = EmulateSteps(p, r, j, s, s + 1, acc);
      }
      float out = warp_acc[0];
      for (int w = 1; w < kStreamWarps; ++w) out += warp_acc[w];
      StreamGemmFinish(p, r, j, out);
    }
  }
}

StreamSplitShape StreamSplitShapeFor(int64_t n, int64_t k,
                                     int multiprocessors) {
  StreamSplitShape shape;
  shape.col_blocks = (n + kSplitBlockCols - 1) / kSplitBlockCols;
  shape.steps = (k + kStreamStep - 1) / kStreamStep;
  int64_t splits =
      shape.col_blocks > 0
          ? 2 * int64_t{std::max(multiprocessors, 1)} / shape.col_blocks
          : 1;
  splits = std::min<int64_t>(splits, kSplitMaxSplits);
  splits = std::min<int64_t>(splits, shape.steps / kSplitMinSteps);
  shape.splits = static_cast<int>(std::max<int64_t>(splits, 1));
  return shape;
}

void StreamSplitGemmEmulation(const StreamGemmParams& p, int splits) {
  const int64_t steps = (p.k + kStreamStep - 1) / kStreamStep;
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t j = 0; j < p.n; ++j) {
      float out = 0.0f;
      for (int q = 0; q < splits; ++q) {
        const float part =
            EmulateSteps(p, r, j, StreamSplitFirstStep(steps, splits, q),
                         StreamSplitFirstStep(steps, splits, q + 1), 0.0f);
        out = q == 0 ? part : out + part;
      }
      StreamGemmFinish(p, r, j, out);
    }
  }
}

}  // namespace h3::kernels
