// GemmCpu's driver: packing, blocking and the choice of instruction set.
// The arithmetic is all in the micro-kernels (gemm_microkernel.h); nothing
// here changes which operations compute an element, only their grouping.
#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/gemm_internal.h"
#include "kernels/cpu/gemm_microkernel.h"

namespace h3::kernels {
namespace {

using gemm_internal::KernelTable;
using gemm_internal::MicroArgs;

// Blocking of a call with several row tiles (more rows than one tile holds),
// for caches of 32 KiB (L1d) and 1 MiB (L2) per core (Zen 4, Skylake-SP):
//   for each chunk of kChunkRows rows     (x packed once per chunk, all k)
//     for each block of kPanelBlock panels (its y: chunk x 256 columns,
//                                           240 KiB, stays in L2)
//       for each block of <= kKBlock steps of k (k split evenly)
//         for each panel of the block      (its block of W, 192 x 32 floats
//                                           = 24 KiB, stays in L1 ...)
//           for each row tile of the chunk (... while every tile uses it)
// The first tile on a panel prefetches the next block of W into L2: without
// it a call whose W comes from memory (the LM head) stalls on every block.
// A call with one row tile runs all of k at once instead: it reads each
// panel of W as one sequential stream, once, several panels at a time.
// (Measured on Zen 4: kKBlock 192 beat 128 and 256 by 2-8%; kPanelBlock 4
// and 16 and kChunkRows 120 were no better.)
constexpr int64_t kChunkRows = 240;
constexpr int64_t kPanelBlock = 8;
constexpr int64_t kKBlock = 192;

// Row tiles of (nearly) equal size, at most max_rows each: tile t holds
// rows [Row(t), Row(t + 1)).
struct Tiling {
  Tiling(int64_t rows, int max_rows)
      : count((rows + max_rows - 1) / max_rows),
        base(rows / count),
        extra(rows % count) {}
  int64_t Row(int64_t t) const { return t * base + std::min(t, extra); }
  int Rows(int64_t t) const { return static_cast<int>(Row(t + 1) - Row(t)); }
  int64_t count, base, extra;
};

// Packs rows [row_begin, row_end) of x [., k] tile by tile: tile t's m rows
// become [k][m] (x[row][i] at i * m + r), at (Row(t) - row_begin) * k, so
// that a step of the micro-kernel reads its m broadcasts from one line.
void PackRows(const float* x, int64_t k, int64_t row_begin, int64_t row_end,
              const Tiling& tiling, int64_t first_tile, float* out) {
  for (int64_t t = first_tile; tiling.Row(t) < row_end; ++t) {
    const int m = tiling.Rows(t);
    float* dst = out + (tiling.Row(t) - row_begin) * k;
    for (int r = 0; r < m; ++r) {
      const float* src = x + (tiling.Row(t) + r) * k;
      for (int64_t i = 0; i < k; ++i) dst[i * m + r] = src[i];
    }
  }
}

// Scratch for packed rows of x, one per thread, grown as needed.
float* PackBuffer(int64_t floats) {
  thread_local std::vector<float> buffer;
  if (static_cast<int64_t>(buffer.size()) < floats) buffer.resize(floats);
  return buffer.data();
}

void RunGemm(const KernelTable& table, const float* x, const float* packed,
             float* y, int64_t rows, int64_t n, int64_t k, int64_t panel_begin,
             int64_t panel_end) {
  if (rows <= 0 || panel_begin >= panel_end) return;
  const int64_t col_begin = panel_begin * kGemmPanel;
  const int64_t col_end = std::min(n, panel_end * kGemmPanel);
  if (k == 0) {  // the empty chain: +0
    for (int64_t r = 0; r < rows; ++r)
      std::fill(y + r * n + col_begin, y + r * n + col_end, 0.0f);
    return;
  }
  const Tiling tiling(rows, table.max_rows);
  const int64_t chunk_tiles = std::max<int64_t>(1, kChunkRows / table.max_rows);
  float* buffer = PackBuffer(std::min(rows, chunk_tiles * table.max_rows) * k);
  MicroArgs args{};
  args.w_panel_stride = k * kGemmPanel;
  args.ldy = n;
  // W's panel p at step k0.
  auto w_at = [&](int64_t p, int64_t k0) {
    return packed + p * k * kGemmPanel + k0 * kGemmPanel;
  };
  // Runs `kernel` on tile t (of a chunk starting at row_begin) and the
  // panels from p, over steps [k0, k0 + kb).
  auto run = [&](gemm_internal::MicroKernel kernel, int64_t row_begin,
                 int64_t t, int64_t p, int64_t k0, int64_t kb,
                 const float* prefetch) {
    const int64_t row = tiling.Row(t);
    args.x = buffer + (row - row_begin) * k + k0 * tiling.Rows(t);
    args.w = w_at(p, k0);
    args.prefetch = prefetch;
    args.y = y + row * n + p * kGemmPanel;
    args.kb = kb;
    args.cols = col_end - p * kGemmPanel;
    args.accumulate = k0 > 0;
    kernel(args);
  };
  if (tiling.count == 1) {
    PackRows(x, k, 0, rows, tiling, 0, buffer);
    const int wide = table.wide_panels[rows];
    int64_t p = panel_begin;
    for (; p + wide <= panel_end; p += wide)
      run(table.wide[rows], 0, 0, p, 0, k, w_at(p, 0));
    for (; p < panel_end; ++p)
      run(table.single[rows], 0, 0, p, 0, k, w_at(p, 0));
    return;
  }
  const int64_t k_blocks = (k + kKBlock - 1) / kKBlock;
  const int64_t kc = (k + k_blocks - 1) / k_blocks;
  for (int64_t t0 = 0; t0 < tiling.count; t0 += chunk_tiles) {
    const int64_t t1 = std::min(tiling.count, t0 + chunk_tiles);
    const int64_t row_begin = tiling.Row(t0);
    PackRows(x, k, row_begin, tiling.Row(t1), tiling, t0, buffer);
    for (int64_t p0 = panel_begin; p0 < panel_end; p0 += kPanelBlock) {
      const int64_t p1 = std::min(panel_end, p0 + kPanelBlock);
      for (int64_t k0 = 0; k0 < k; k0 += kc) {
        const int64_t kb = std::min(kc, k - k0);
        for (int64_t p = p0; p < p1; ++p) {
          // The first tile brings in the block of W that comes next: kb
          // steps of it (a last, shorter k block is reached as the last kb
          // steps of its panel, so that the prefetch stays inside W).
          const float* next = w_at(p, k0);
          if (p + 1 < p1) {
            next = w_at(p + 1, k0);
          } else if (k0 + kb < k) {
            next = w_at(p0, std::min(k0 + kb, k - kb));
          } else if (p1 < panel_end) {
            next = w_at(p1, 0);
          }
          for (int64_t t = t0; t < t1; ++t) {
            run(table.single[tiling.Rows(t)], row_begin, t, p, k0, kb,
                t == t0 ? next : w_at(p, k0));
          }
        }
      }
    }
  }
}

const KernelTable& TableFor(GemmIsa isa) {
#if defined(__x86_64__)
  if (isa == GemmIsa::kAvx512) return gemm_avx512::Kernels();
  if (isa == GemmIsa::kAvx2) return gemm_avx2::Kernels();
#endif
  (void)isa;
  return gemm_portable::Kernels();
}

}  // namespace

void GemmPack(const float* w, int64_t n, int64_t k, float* packed) {
  for (int64_t p = 0; p < GemmPanels(n); ++p) {
    float* panel = packed + p * k * kGemmPanel;
    for (int64_t c = 0; c < kGemmPanel; ++c) {
      const int64_t j = p * kGemmPanel + c;
      for (int64_t i = 0; i < k; ++i)
        panel[i * kGemmPanel + c] = j < n ? w[j * k + i] : 0.0f;
    }
  }
}

void GemmUnpackRow(const float* packed, int64_t n, int64_t k, int64_t row,
                   float* out) {
  (void)n;
  const float* src =
      packed + (row / kGemmPanel) * k * kGemmPanel + row % kGemmPanel;
  for (int64_t i = 0; i < k; ++i) out[i] = src[i * kGemmPanel];
}

const char* GemmIsaName(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kAvx512:
      return "avx512";
    case GemmIsa::kAvx2:
      return "avx2";
    case GemmIsa::kPortable:
      break;
  }
  return "portable";
}

bool GemmIsaSupported(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kPortable:
      return true;
#if defined(__x86_64__)
    case GemmIsa::kAvx2:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case GemmIsa::kAvx512:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
#endif
    default:
      return false;
  }
}

GemmIsa GemmSelectedIsa() {
  static const GemmIsa isa = [] {
    for (GemmIsa candidate : {GemmIsa::kAvx512, GemmIsa::kAvx2}) {
      if (GemmIsaSupported(candidate)) return candidate;
    }
    return GemmIsa::kPortable;
  }();
  return isa;
}

void GemmCpu(const float* x, const float* packed, float* y, int64_t rows,
             int64_t n, int64_t k, int64_t panel_begin, int64_t panel_end) {
  static const KernelTable& table = TableFor(GemmSelectedIsa());
  RunGemm(table, x, packed, y, rows, n, k, panel_begin, panel_end);
}

void GemmCpuWithIsa(GemmIsa isa, const float* x, const float* packed, float* y,
                    int64_t rows, int64_t n, int64_t k, int64_t panel_begin,
                    int64_t panel_end) {
  RunGemm(TableFor(isa), x, packed, y, rows, n, k, panel_begin, panel_end);
}

}  // namespace h3::kernels
