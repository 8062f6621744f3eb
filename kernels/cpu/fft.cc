#include "kernels/cpu/fft.h"

#include <cstdlib>

#include "kiss_fftr.h"

namespace h3::kernels {

struct RealFft::Plans {
  kiss_fftr_cfg forward;
  kiss_fftr_cfg inverse;
};

// kiss_fft_cpx is {float r; float i;}: the same layout as interleaved floats.
static_assert(sizeof(kiss_fft_cpx) == 2 * sizeof(float));

RealFft::RealFft(int nfft)
    : nfft_(nfft),
      plans_(new Plans{kiss_fftr_alloc(nfft, 0, nullptr, nullptr),
                       kiss_fftr_alloc(nfft, 1, nullptr, nullptr)}) {
  if (plans_->forward == nullptr || plans_->inverse == nullptr) std::abort();
}

RealFft::~RealFft() {
  kiss_fftr_free(plans_->forward);
  kiss_fftr_free(plans_->inverse);
}

void RealFft::Forward(const float* time, float* freq) {
  kiss_fftr(plans_->forward, time, reinterpret_cast<kiss_fft_cpx*>(freq));
}

void RealFft::Inverse(const float* freq, float* time) {
  kiss_fftri(plans_->inverse, reinterpret_cast<const kiss_fft_cpx*>(freq),
             time);
}

}  // namespace h3::kernels
