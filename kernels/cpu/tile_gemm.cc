// TileGemmShapeFor, TileGemmCheck and TileGemmEmulation: the batch decode
// product's rules and algorithm (kernels/tile_gemm.h) on the host.
#include "kernels/tile_gemm.h"

#include <algorithm>
#include <cstdint>

#include "base/half_float.h"

namespace h3::kernels {

TileGemmShape TileGemmShapeFor(int64_t n, int64_t k,
                               const TileGemmDevice& device, int cols) {
  TileGemmShape shape;
  shape.cols = cols;
  shape.col_blocks = (n + cols - 1) / cols;
  shape.steps = (k + kTileStep - 1) / kTileStep;
  for (int s = kTileMaxSplits; s > 1; --s) {
    if (shape.steps >= int64_t{s} * kTileMinSteps &&
        shape.col_blocks * s <= device.blocks &&
        shape.col_blocks <= device.clusters[s]) {
      shape.splits = s;
      break;
    }
  }
  return shape;
}

TileGemmShape TileGemmChooseShape(int64_t n, int64_t k,
                                  const TileGemmDevice& narrow,
                                  const TileGemmDevice& wide) {
  const TileGemmShape a = TileGemmShapeFor(n, k, narrow, kTileCols);
  const TileGemmShape b = TileGemmShapeFor(n, k, wide, kTileWideCols);
  const auto first_wave_warps = [](const TileGemmShape& s,
                                   const TileGemmDevice& d) {
    return std::min(s.col_blocks * s.splits, d.blocks) * (s.cols / 16);
  };
  return first_wave_warps(b, wide) > first_wave_warps(a, narrow) ? b : a;
}

const char* TileGemmCheck(const StreamGemmParams& p, bool check_alignment) {
  if (const char* broken = StreamGemmCheck(p, check_alignment);
      broken[0] != '\0') {
    return broken;
  }
  if (p.x_type != p.w_type) return "x_type: w_type only";
  return "";
}

void TileGemmEmulation(const StreamGemmParams& p, int splits) {
  const int64_t steps = (p.k + kTileStep - 1) / kTileStep;
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t j = 0; j < p.n; ++j) {
      float out = 0.0f;
      for (int q = 0; q < splits; ++q) {
        // Split q's accumulator: its steps in order, each MMA's products
        // in k order (the elements' own), in fp32.
        float acc = 0.0f;
        const int64_t end = std::min(
            StreamSplitFirstStep(steps, splits, q + 1) * kTileStep, p.k);
        for (int64_t e = StreamSplitFirstStep(steps, splits, q) * kTileStep;
             e < end; ++e) {
          acc += LoadFloat(p.x, p.x_type, r * p.k + e) *
                 LoadFloat(p.w, p.w_type, j * p.k + e);
        }
        out = q == 0 ? acc : out + acc;
      }
      StreamGemmFinish(p, r, j, out);
    }
  }
}

}  // namespace h3::kernels
