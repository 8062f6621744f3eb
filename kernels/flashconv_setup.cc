#include "kernels/flashconv_setup.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>

#include "base/half_float.h"

namespace h3::kernels::flashconv {
namespace {

using cdouble = std::complex<double>;

constexpr double kPi = 3.14159265358979323846;

// dA of channel c, mode m as exp(log_r + i theta).
void PolarOf(const H3Weights& w, int c, int m, double* log_r, double* theta) {
  const int i = c * w.shape.modes() + m;
  const double re = w.dA[2 * i], im = w.dA[2 * i + 1];
  *log_r = 0.5 * std::log(re * re + im * im);
  *theta = std::atan2(im, re);
}

// z^n in double from z's polar form.
cdouble PowPolarDouble(double log_r, double theta, double n) {
  return std::polar(std::exp(n * log_r), n * theta);
}

double LargestComponent(const std::vector<cdouble>& v) {
  double most = 0;
  for (const cdouble& z : v) {
    most = std::max({most, std::abs(z.real()), std::abs(z.imag())});
  }
  return most;
}

// x / scale rounded to float, then to fp16 (as __float2half_rn); 0 when
// scale is 0.
uint16_t ScaledHalf(double x, double scale) {
  return FloatToHalf(scale > 0 ? static_cast<float>(x / scale) : 0.0f);
}

void ChannelSetupOf(const H3Weights& w, int c, ChannelSetup* s) {
  const int modes = w.shape.modes();
  std::memset(s, 0, sizeof(*s));
  std::vector<cdouble> p(16 * modes), e(16 * modes);  // [j][m], [m][i]
  for (int m = 0; m < modes; ++m) {
    const int i = c * modes + m;
    double log_r, theta;
    PolarOf(w, c, m, &log_r, &theta);
    s->log_r[m] = log_r;
    s->theta[m] = theta;
    PowPolar(log_r, theta, 16, s->dA16[m]);
    PowPolar(log_r, theta, 256, s->dA256[m]);
    const cdouble cm(w.C[2 * i], w.C[2 * i + 1]);
    const cdouble bm(w.dB[2 * i], w.dB[2 * i + 1]);
    for (int j = 0; j < 16; ++j) {
      p[j * modes + m] = cm * PowPolarDouble(log_r, theta, j + 1);
      e[m * 16 + j] = bm * PowPolarDouble(log_r, theta, 15 - j);
    }
  }
  const double p_max = LargestComponent(p), e_max = LargestComponent(e);
  s->scale_p = static_cast<float>(p_max);
  s->scale_e = static_cast<float>(e_max);
  for (int j = 0; j < 16; ++j) {
    for (int m = 0; m < modes; ++m) {
      const cdouble pv = p[j * modes + m], ev = e[m * 16 + j];
      s->pcat[j][ModeRow(m, 0)] = ScaledHalf(pv.real(), p_max);
      s->pcat[j][ModeRow(m, 1)] = ScaledHalf(-pv.imag(), p_max);
      s->ecat[ModeRow(m, 0)][j] = ScaledHalf(ev.real(), e_max);
      s->ecat[ModeRow(m, 1)][j] = ScaledHalf(ev.imag(), e_max);
    }
  }
}

}  // namespace

void PowPolar(double log_r, double theta, double n, float out[2]) {
  const cdouble z = PowPolarDouble(log_r, theta, n);
  out[0] = static_cast<float>(z.real());
  out[1] = static_cast<float>(z.imag());
}

std::vector<ChannelSetup> ChannelSetups(const H3Weights& w) {
  std::vector<ChannelSetup> setups(w.shape.heads());
  for (int c = 0; c < w.shape.heads(); ++c) ChannelSetupOf(w, c, &setups[c]);
  return setups;
}

std::vector<float> ChunkPowers(const H3Weights& w, const FftSize& size) {
  const int heads = w.shape.heads(), modes = w.shape.modes();
  const int step = size.n / 2 / kCarrySegments;  // tokens per segment
  std::vector<float> powers(2 * heads * kCarrySegments * modes);
  for (int c = 0; c < heads; ++c) {
    for (int m = 0; m < modes; ++m) {
      double log_r, theta;
      PolarOf(w, c, m, &log_r, &theta);
      for (int g = 1; g <= kCarrySegments; ++g) {
        const int64_t at = (int64_t{c} * kCarrySegments + g - 1) * modes + m;
        PowPolar(log_r, theta, static_cast<double>(g) * step, &powers[2 * at]);
      }
    }
  }
  return powers;
}

std::vector<float> TwiddleTable(const FftSize& size) {
  std::vector<float> t(2 * size.n1 * size.n2);
  for (int k1 = 0; k1 < size.n1; ++k1) {
    for (int k2 = 0; k2 < size.n2; ++k2) {
      // k1 k2 < n: the angle is in (-2 pi, 0].
      const double angle = -2.0 * kPi * (k1 * k2) / size.n;
      t[2 * (k1 * size.n2 + k2)] = static_cast<float>(std::cos(angle));
      t[2 * (k1 * size.n2 + k2) + 1] = static_cast<float>(std::sin(angle));
    }
  }
  return t;
}

}  // namespace h3::kernels::flashconv
