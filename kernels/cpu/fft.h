#ifndef H3_KERNELS_CPU_FFT_H_
#define H3_KERNELS_CPU_FFT_H_

#include <memory>

namespace h3::kernels {

// A real FFT of one size, on kissfft. Not thread-safe (kissfft keeps scratch
// space in its plan): give each thread its own. Creating one costs O(nfft).
class RealFft {
 public:
  // REQUIRES: nfft even and >= 2.
  explicit RealFft(int nfft);
  ~RealFft();
  RealFft(const RealFft&) = delete;
  RealFft& operator=(const RealFft&) = delete;

  int size() const { return nfft_; }
  // time: [nfft] -> freq: [nfft/2 + 1] complex (interleaved re, im).
  void Forward(const float* time, float* freq);
  // freq: [nfft/2 + 1] complex -> time: [nfft], unnormalised: the result is
  // nfft times the inverse transform.
  void Inverse(const float* freq, float* time);

 private:
  struct Plans;
  int nfft_;
  std::unique_ptr<Plans> plans_;
};

}  // namespace h3::kernels

#endif  // H3_KERNELS_CPU_FFT_H_
