#ifndef H3_ENGINE_MODEL_LAYER_H_
#define H3_ENGINE_MODEL_LAYER_H_

// Private to engine/model*.cc: one layer's weights in backend memory.

#include <map>

#include "engine/model.h"

namespace h3::engine {

struct Model::Layer {
  bool attention = false;
  Buffer norm1_w, norm1_b, norm2_w, norm2_b;
  Buffer fc1_w, fc1_b, fc2_w, fc2_b;
  Buffer out_w, out_b;  // H3 output_linear or attention out_proj
  // H3 layers.
  Buffer q_w, q_b, k_w, k_b, v_w, v_b;
  Buffer shift_kernel, shift_B, shift_C, shift_D, dA, dB, C, D;
  std::map<int, Buffer> spectra;  // nfft -> H3KernelSpectrum
  // Attention layers.
  Buffer wqkv_w, wqkv_b, inv_freq;
};

}  // namespace h3::engine

#endif  // H3_ENGINE_MODEL_LAYER_H_
