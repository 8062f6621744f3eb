#ifndef H3_KERNELS_CUDA_EMULATOR_MMA_H_
#define H3_KERNELS_CUDA_EMULATOR_MMA_H_

// PTX's mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16} for the CPU
// emulator (device.h; kernels/cuda/mma_half.cuh calls it where the GPU
// would run the instruction): a warp collective with the PTX ISA's
// fragment layout, lane = 4 g + t (g = lane / 4, t = lane % 4):
//   A (16 x 16, row): a[0] = (g, 2t..2t+1), a[1] = (g+8, 2t..2t+1),
//                     a[2] = (g, 2t+8..2t+9), a[3] = (g+8, 2t+8..2t+9);
//   B (16 x 8, col):  b0 = (2t..2t+1, g), b1 = (2t+8..2t+9, g);
//   C, D (16 x 8):    c[0..1] = (g, 2t..2t+1), c[2..3] = (g+8, 2t..2t+1);
// each 32-bit register holding two elements, the lower index in the low
// half. Products summed in fp32 in k order after C.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "base/half_float.h"
#include "kernels/cuda/emulator/fibers.h"

namespace h3::emulator {

struct MmaLaneIn {
  uint32_t a[4];
  uint32_t b[2];
  float c[4];
};

template <bool kBf16>
float MmaElement(uint32_t reg, int half) {
  const uint16_t bits = static_cast<uint16_t>(reg >> (16 * half));
  return kBf16 ? BFloat16ToFloat(bits) : HalfToFloat(bits);
}

template <bool kBf16>
const char* MmaCombine(Lane* lanes, unsigned mask) {
  if (mask != 0xffffffffu) return "mma.sync needs the whole warp";
  float a[16][16], b[16][8], c[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    MmaLaneIn in;
    std::memcpy(&in, lanes[lane].in, sizeof in);
    const int g = lane / 4, t = lane % 4;
    for (int h = 0; h < 2; ++h) {
      a[g][2 * t + h] = MmaElement<kBf16>(in.a[0], h);
      a[g + 8][2 * t + h] = MmaElement<kBf16>(in.a[1], h);
      a[g][2 * t + 8 + h] = MmaElement<kBf16>(in.a[2], h);
      a[g + 8][2 * t + 8 + h] = MmaElement<kBf16>(in.a[3], h);
      b[2 * t + h][g] = MmaElement<kBf16>(in.b[0], h);
      b[2 * t + 8 + h][g] = MmaElement<kBf16>(in.b[1], h);
      c[g][2 * t + h] = in.c[h];
      c[g + 8][2 * t + h] = in.c[2 + h];
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    float d[4];
    for (int i = 0; i < 4; ++i) {
      const int row = g + (i / 2) * 8, col = 2 * t + i % 2;
      float sum = c[row][col];
      for (int k = 0; k < 16; ++k) sum += a[row][k] * b[k][col];
      d[i] = sum;
    }
    std::memcpy(lanes[lane].out, d, sizeof d);
  }
  return nullptr;
}

// c += a b on one m16n8k16 tile, this lane's registers.
template <bool kBf16>
void MmaM16N8K16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  MmaLaneIn in;
  std::memcpy(in.a, a, sizeof in.a);
  in.b[0] = b0;
  in.b[1] = b1;
  std::memcpy(in.c, c, sizeof in.c);
  float d[4];
  WarpCollective(kBf16 ? "mma.sync bf16" : "mma.sync f16", 0xffffffffu,
                 &MmaCombine<kBf16>, &in, sizeof in, 0, d, sizeof d);
  std::memcpy(c, d, sizeof d);
}

// ldmatrix.x4's four 8 x 8 matrices of 16-bit elements, m[i][row][column]:
// lanes 8 i to 8 i + 7 give the addresses of rows 0 to 7 of matrix i (16
// bytes each, 16-byte aligned), read when the last lane arrives. nullptr,
// or what is wrong.
inline const char* GatherMatrices(Lane* lanes, unsigned mask,
                                  uint16_t (&m)[4][8][8]) {
  if (mask != 0xffffffffu) return "ldmatrix needs the whole warp";
  for (int lane = 0; lane < 32; ++lane) {
    const unsigned char* row;
    std::memcpy(&row, lanes[lane].in, sizeof row);
    if (reinterpret_cast<uintptr_t>(row) % 16 != 0) {
      return "ldmatrix: a row address not 16-byte aligned";
    }
    std::memcpy(m[lane / 8][lane % 8], row, 16);
  }
  return nullptr;
}

// PTX's ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: lane l receives in
// r[i] row l / 4 of matrix i transposed: elements (2 (l % 4), l / 4) and
// (2 (l % 4) + 1, l / 4) of matrix i, the first in the low half.
inline const char* LdMatrixX4TransCombine(Lane* lanes, unsigned mask) {
  uint16_t m[4][8][8];
  if (const char* error = GatherMatrices(lanes, mask, m)) return error;
  for (int lane = 0; lane < 32; ++lane) {
    const int col = lane / 4, row = 2 * (lane % 4);
    uint32_t r[4];
    for (int i = 0; i < 4; ++i) {
      r[i] = uint32_t{m[i][row][col]} | uint32_t{m[i][row + 1][col]} << 16;
    }
    std::memcpy(lanes[lane].out, r, sizeof r);
  }
  return nullptr;
}

inline void LdMatrixX4Trans(const void* row, uint32_t* r) {
  WarpCollective("ldmatrix.x4.trans", 0xffffffffu, &LdMatrixX4TransCombine,
                 &row, sizeof row, 0, r, 4 * sizeof(uint32_t));
}

// PTX's ldmatrix.sync.aligned.m8n8.x4.shared.b16: lane l receives in r[i]
// elements 2 (l % 4) and 2 (l % 4) + 1 of row l / 4 of matrix i, the first
// in the low half.
inline const char* LdMatrixX4Combine(Lane* lanes, unsigned mask) {
  uint16_t m[4][8][8];
  if (const char* error = GatherMatrices(lanes, mask, m)) return error;
  for (int lane = 0; lane < 32; ++lane) {
    const int row = lane / 4, col = 2 * (lane % 4);
    uint32_t r[4];
    for (int i = 0; i < 4; ++i) {
      r[i] = uint32_t{m[i][row][col]} | uint32_t{m[i][row][col + 1]} << 16;
    }
    std::memcpy(lanes[lane].out, r, sizeof r);
  }
  return nullptr;
}

inline void LdMatrixX4(const void* row, uint32_t* r) {
  WarpCollective("ldmatrix.x4", 0xffffffffu, &LdMatrixX4Combine, &row,
                 sizeof row, 0, r, 4 * sizeof(uint32_t));
}

}  // namespace h3::emulator

#endif  // H3_KERNELS_CUDA_EMULATOR_MMA_H_
