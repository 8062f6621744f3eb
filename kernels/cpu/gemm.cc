// GemmCpu's driver: packing, blocking and the choice of instruction set.
// The arithmetic is all in the micro-kernels (gemm_microkernel.h); nothing
// here changes which operations compute an element, only their grouping.
#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm_internal.h"
#include "kernels/cpu/gemm_microkernel.h"

namespace h3::kernels {
namespace {

using gemm_internal::KernelTable;
using gemm_internal::MicroArgs;

// Steps of the chain per k block when a call has several row tiles. One
// panel's block of W (kKBlock x 32 floats = 16 KiB) then stays in L1 (32 KiB
// on Zen 4 and Skylake) while every row tile of the chunk uses it. A call
// with a single row tile runs all of k at once: it reads each panel of W as
// one sequential stream, once.
constexpr int64_t kKBlock = 128;
// Rows of x packed at once: a chunk of kChunkRows x kKBlock floats (120 KiB)
// stays in L2 while the panels go by.
constexpr int64_t kChunkRows = 240;

// A row tile: rows [row, row + rows) of x, packed at `offset` in the buffer.
struct Tile {
  int64_t row;
  int rows;
  int64_t offset;
};

// out[i * m + r] = x[row + r][k0 + i]: the tile's rows interleaved, so that
// a step of the micro-kernel reads its m broadcasts from one cache line.
void PackTile(const float* x, int64_t k, const Tile& tile, int64_t k0,
              int64_t kb, float* out) {
  const int m = tile.rows;
  for (int r = 0; r < m; ++r) {
    const float* src = x + (tile.row + r) * k + k0;
    for (int64_t i = 0; i < kb; ++i) out[i * m + r] = src[i];
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
  // Row tiles of (nearly) equal size, at most max_rows each.
  const int64_t tiles = (rows + table.max_rows - 1) / table.max_rows;
  const int64_t base = rows / tiles, extra = rows % tiles;
  const int64_t kc = tiles == 1 ? k
                                : (k + (k + kKBlock - 1) / kKBlock - 1) /
                                      ((k + kKBlock - 1) / kKBlock);
  const int64_t chunk_tiles = std::max<int64_t>(1, kChunkRows / table.max_rows);
  float* buffer =
      PackBuffer(std::min(tiles, chunk_tiles) * table.max_rows * kc);
  std::vector<Tile> chunk;
  chunk.reserve(std::min(tiles, chunk_tiles));
  for (int64_t k0 = 0; k0 < k; k0 += kc) {
    const int64_t kb = std::min(kc, k - k0);
    for (int64_t t0 = 0; t0 < tiles; t0 += chunk_tiles) {
      chunk.clear();
      int64_t offset = 0;
      for (int64_t t = t0; t < std::min(tiles, t0 + chunk_tiles); ++t) {
        const Tile tile{t * base + std::min(t, extra),
                        static_cast<int>(base + (t < extra ? 1 : 0)), offset};
        PackTile(x, k, tile, k0, kb, buffer + offset);
        chunk.push_back(tile);
        offset += tile.rows * kb;
      }
      MicroArgs args{};
      args.w_panel_stride = k * kGemmPanel;
      args.ldy = n;
      args.kb = kb;
      args.accumulate = k0 > 0;
      auto run = [&](gemm_internal::MicroKernel kernel, const Tile& tile,
                     int64_t panel) {
        args.x = buffer + tile.offset;
        args.w = packed + panel * k * kGemmPanel + k0 * kGemmPanel;
        args.y = y + tile.row * n + panel * kGemmPanel;
        args.cols = col_end - panel * kGemmPanel;
        kernel(args);
      };
      if (chunk.size() == 1) {
        // Few rows: W streams by once; tiles span several panels.
        const Tile& tile = chunk[0];
        const int wide = table.wide_panels[tile.rows];
        int64_t p = panel_begin;
        for (; p + wide <= panel_end; p += wide)
          run(table.wide[tile.rows], tile, p);
        for (; p < panel_end; ++p) run(table.single[tile.rows], tile, p);
      } else {
        // Many rows: each panel's block of W, in L1, meets every tile.
        for (int64_t p = panel_begin; p < panel_end; ++p) {
          for (const Tile& tile : chunk) run(table.single[tile.rows], tile, p);
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
