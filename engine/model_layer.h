#ifndef H3_ENGINE_MODEL_LAYER_H_
#define H3_ENGINE_MODEL_LAYER_H_

// Private to engine/model*.cc: one layer's weights in backend memory.

#include "engine/model.h"

namespace h3::engine {

struct Model::Layer {
  bool attention = false;
  Buffer norm1_w, norm1_b, norm2_w, norm2_b;
  Matrix fc1_w, fc2_w;
  // fc1_b and wqkv_b hold the backend's activation_type() (the type of
  // their products' outputs), fc2_b and out_b fp32.
  Buffer fc1_b, fc2_b;
  // q|k|v fused into one product: H3 q_proj, k_proj, v_proj stacked, or the
  // attention layer's Wqkv. Then H3 output_linear or attention out_proj.
  Matrix wqkv_w, out_w;
  Buffer wqkv_b, out_b;
  std::unique_ptr<H3Layer> h3;  // H3 layers
  Buffer inv_freq;              // attention layers with rotary
};

}  // namespace h3::engine

#endif  // H3_ENGINE_MODEL_LAYER_H_
