#ifndef H3_KERNELS_CPU_GEMM_MICROKERNEL_H_
#define H3_KERNELS_CPU_GEMM_MICROKERNEL_H_

// Internal to gemm*.cc: the register-tile micro-kernel, written once over a
// vector-traits type and instantiated per instruction set in its own
// translation unit (gemm_avx512.cc, gemm_avx2.cc, gemm_portable.cc), each
// compiled with its own -m flags. The traits types live in distinct
// namespaces, so the instantiations are distinct symbols: the linker cannot
// merge an AVX-512 copy into the portable path. For the same reason this
// header uses nothing from the standard library.
//
// A traits type V provides, all always-inline:
//   using Reg;  static constexpr int kLanes;  (kGemmPanel % kLanes == 0)
//   static constexpr int kMaxRows;             // rows of the largest tile
//   static constexpr int WidePanels(int rows); // panels per tile of few rows
//   static constexpr int GroupVecs(int rows, int panels); // vectors per pass
//   Reg Zero();  Reg Load(const float*);  Reg Broadcast(const float*);
//   Reg Fma(Reg a, Reg b, Reg c);      // a * b + c with one rounding
//   Reg LoadFirst(const float*, int64_t count);   // lanes >= count are 0
//   void StoreFirst(float*, Reg, int64_t count);  // lanes < count only
// where count may be <= 0 (nothing) or >= kLanes (everything).

#include <cstdint>

#include "kernels/cpu/gemm.h"

namespace h3::kernels::gemm_internal {

// One micro-kernel call: a tile of M rows x P panels of y advanced by kb
// steps of the chain (gemm.h), from +0 or from the partial sums in y.
struct MicroArgs {
  const float* x;          // packed rows of x: [kb][M]
  const float* w;          // packed W at the first panel, at step k0: [kb][32]
  int64_t w_panel_stride;  // floats from one panel to the next (k * 32)
  float* y;                // y at the tile's first row and column
  int64_t ldy;             // floats from one row of y to the next (n)
  int64_t kb;              // steps (terms of the chain) to run, >= 1
  int64_t cols;            // valid columns from the tile's first; the rest
                           // are padding, neither read nor written in y
  bool accumulate;         // continue from y (else start from +0)
  const float* prefetch;   // [kb][32] floats to bring into L2 meanwhile (the
                           // next block of W from memory); may equal w
};

using MicroKernel = void (*)(const MicroArgs&);

// The most rows any instruction set puts in one tile.
inline constexpr int kMaxTileRows = 12;

// One instruction set's kernels. Row tiles have 1..max_rows rows; a tile of
// m rows covers 1 panel (single[m]) or wide_panels[m] panels (wide[m]) at a
// time: few rows need several panels to keep enough independent FMA chains
// in flight.
struct KernelTable {
  int max_rows;
  int wide_panels[kMaxTileRows + 1];
  MicroKernel single[kMaxTileRows + 1];
  MicroKernel wide[kMaxTileRows + 1];
};

// Vector v of a tile's row is panel v / kVecs, lanes (v % kVecs) * kLanes
// on. MicroGroup runs the whole k loop for vectors [First, First + G) of
// every row: G vectors x M rows of accumulators, G loads of W and M
// broadcasts of x per step.
template <class V, int M, int G, int First>
[[gnu::always_inline]] inline void MicroGroup(const MicroArgs& a) {
  constexpr int kVecs = static_cast<int>(kGemmPanel) / V::kLanes;
  using Reg = typename V::Reg;
  auto column = [](int v) {
    return ((First + v) / kVecs) * kGemmPanel +
           ((First + v) % kVecs) * V::kLanes;
  };
  Reg acc[M][G];
#pragma GCC unroll 16
  for (int r = 0; r < M; ++r) {
#pragma GCC unroll 16
    for (int v = 0; v < G; ++v) {
      acc[r][v] = a.accumulate ? V::LoadFirst(a.y + r * a.ldy + column(v),
                                              a.cols - column(v))
                               : V::Zero();
    }
  }
  const float* x = a.x;
  const float* w = a.w;
  for (int64_t i = 0; i < a.kb; ++i) {
    Reg wv[G];
#pragma GCC unroll 16
    for (int v = 0; v < G; ++v) {
      wv[v] = V::Load(w + ((First + v) / kVecs) * a.w_panel_stride +
                      ((First + v) % kVecs) * V::kLanes);
    }
#pragma GCC unroll 16
    for (int r = 0; r < M; ++r) {
      const Reg xr = V::Broadcast(x + r);
#pragma GCC unroll 16
      for (int v = 0; v < G; ++v) acc[r][v] = V::Fma(xr, wv[v], acc[r][v]);
    }
    if constexpr (First == 0) {
      __builtin_prefetch(a.prefetch + i * kGemmPanel, 0, 2);
      __builtin_prefetch(a.prefetch + i * kGemmPanel + kGemmPanel / 2, 0, 2);
    }
    x += M;
    w += kGemmPanel;
  }
#pragma GCC unroll 16
  for (int r = 0; r < M; ++r) {
#pragma GCC unroll 16
    for (int v = 0; v < G; ++v) {
      V::StoreFirst(a.y + r * a.ldy + column(v), acc[r][v], a.cols - column(v));
    }
  }
}

// A tile of M rows x P panels, advanced by kb steps: its vectors in groups
// of V::GroupVecs(M, P), each group a full pass over the k steps (so that
// the accumulators of a group fit in the registers).
template <class V, int M, int P, int First = 0>
void Micro(const MicroArgs& a) {
  constexpr int kAll = P * static_cast<int>(kGemmPanel) / V::kLanes;
  constexpr int kGroup = V::GroupVecs(M, P);
  static_assert(kAll % kGroup == 0);
  MicroGroup<V, M, kGroup, First>(a);
  if constexpr (First + kGroup < kAll) Micro<V, M, P, First + kGroup>(a);
}

// Fills table->single[m] and wide[m] for m = 1..M with Micro<V, m, 1> and
// Micro<V, m, V::WidePanels(m)>.
template <class V, int M = V::kMaxRows>
constexpr void FillTable(KernelTable* table) {
  static_assert(V::kMaxRows <= kMaxTileRows);
  if constexpr (M == V::kMaxRows) table->max_rows = M;
  if constexpr (M >= 1) {
    table->wide_panels[M] = V::WidePanels(M);
    table->single[M] = &Micro<V, M, 1>;
    table->wide[M] = &Micro<V, M, V::WidePanels(M)>;
    FillTable<V, M - 1>(table);
  }
}

}  // namespace h3::kernels::gemm_internal

#endif  // H3_KERNELS_CPU_GEMM_MICROKERNEL_H_
