// The forward pass (docs/model.md, "Forward pass") over packed rows: the
// step rows (one token of each of several sequences) and then prompt
// segments of other sequences, all through the same products and norms; only
// the sequence mixers (H3, attention) treat the two kinds apart.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/model.h"
#include "engine/model_layer.h"

namespace h3::engine {

absl::Status Model::Forward(const ForwardBatch& batch, Activations& act) {
  if (batch.rows < 1 || batch.rows > act.rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "forward of ", batch.rows, " rows; the activations hold ", act.rows));
  }
  int64_t rows = batch.step.count;
  for (const Segment& s : batch.segments) rows += s.length;
  if (rows != batch.rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("forward: ", batch.rows, " rows, but the step rows and ",
                     "segments cover ", rows));
  }
  const int64_t d = config_.d_model;
  const float eps = static_cast<float>(config_.layer_norm_epsilon);
  // normed, qkv and mlp in act.type; the residual stream in fp32.
  const ElementType at = act.type;
  constexpr ElementType f32 = ElementType::kF32;
  // residual_out = x (+ residual_in); normed = LayerNorm(residual_out)
  // gamma + beta. The two residual buffers take turns: the first norm of a
  // layer reads act.residual and writes act.residual_next, the second the
  // other way round (as a norm inside the product would need, its blocks
  // reading the whole residual while each writes a slice of the sum:
  // kernels::AddNormStreamGemmCuda, which no backend calls now).
  float* const res_a = act.residual.data();
  float* const res_b = act.residual_next.data();
  auto norm_params = [&](const float* x, bool add, const float* residual_in,
                         float* residual_out, const Buffer& gamma,
                         const Buffer& beta) {
    kernels::AddLayerNormParams p;
    p.x = x;
    p.residual_in = residual_in;
    p.residual = residual_out;
    p.add_residual = add;
    p.gamma = gamma.data();
    p.beta = beta.data();
    p.out = act.normed.data();
    p.out_type = at;
    p.rows = rows;
    p.cols = d;
    p.eps = eps;
    return p;
  };
  // Each op in a named range of the profiler (engine/profiler.h), if on.
  Profiler* const prof = backend_->profiler();
  // The norm and the product after it.
  auto norm_product = [&](const char* norm_name, const char* product_name,
                          const char* type,
                          const kernels::AddLayerNormParams& norm,
                          const LinearParams& product) -> absl::Status {
    H3_RETURN_IF_ERROR(TimeOp(prof, norm_name, type,
                              [&] { return backend_->AddLayerNorm(norm); }));
    return TimeOp(prof, product_name, type,
                  [&] { return backend_->Linear(product); });
  };
  H3_RETURN_IF_ERROR(TimeOp(prof, "embedding", "model", [&] {
    return backend_->Embedding(batch.ids, rows, embedding_, act.hidden.data());
  }));
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& layer = layers_[i];
    const char* type = layer.attention ? "attention" : "h3";
    // The residual add (from the second layer on) and the first norm; the
    // mixer: q|k|v in one product, the sequence mixing into normed (free
    // once the product has read it), the output projection.
    H3_RETURN_IF_ERROR(
        norm_product("ln_1", "qkv_linear", type,
                     norm_params(act.hidden.data(), /*add=*/i > 0, res_a, res_b,
                                 layer.norm1_w, layer.norm1_b),
                     {act.normed.data(), &layer.wqkv_w, layer.wqkv_b.data(),
                      act.qkv.data(), rows, Epilogue::kNone, at, at, at}));
    H3_RETURN_IF_ERROR(
        layer.attention ? AttentionMixer(layer, index_of_layer_[i], batch, act)
                        : H3Mixer(layer, index_of_layer_[i], batch, act));
    H3_RETURN_IF_ERROR(TimeOp(prof, "out_linear", type, [&] {
      return backend_->Linear({act.normed.data(), &layer.out_w,
                               layer.out_b.data(), act.mixed.data(), rows,
                               Epilogue::kNone, at, f32});
    }));
    H3_RETURN_IF_ERROR(
        norm_product("ln_2", "mlp_fc1_gelu", type,
                     norm_params(act.mixed.data(), true, res_b, res_a,
                                 layer.norm2_w, layer.norm2_b),
                     {act.normed.data(), &layer.fc1_w, layer.fc1_b.data(),
                      act.mlp.data(), rows, Epilogue::kGeluTanh, at, at, at}));
    H3_RETURN_IF_ERROR(TimeOp(prof, "mlp_fc2", type, [&] {
      return backend_->Linear({act.mlp.data(), &layer.fc2_w, layer.fc2_b.data(),
                               act.hidden.data(), rows, Epilogue::kNone, at,
                               f32});
    }));
  }
  return TimeOp(prof, "ln_f", "model", [&] {
    return backend_->AddLayerNorm(norm_params(act.hidden.data(), true, res_a,
                                              res_b, ln_f_weight_, ln_f_bias_));
  });
}

absl::Status Model::H3Mixer(Layer& layer, int index, const ForwardBatch& batch,
                            Activations& act) {
  const int64_t d = config_.d_model;
  const ElementType at = act.type;
  void* inner = act.normed.data();
  const StepRows& step = batch.step;
  if (step.count > 0) {
    H3_RETURN_IF_ERROR(TimeOp(backend_->profiler(), "h3_step", "h3", [&] {
      return layer.h3->Step(static_cast<int>(step.count), act.qkv.data(), inner,
                            step.h3[index], step.positions);
    }));
  }
  if (batch.segments.empty()) return absl::OkStatus();
  // Every prompt segment in one call, on the rows after the step rows.
  h3_segments_.clear();
  for (const Segment& s : batch.segments) {
    if (s.length > 0) {
      h3_segments_.push_back({s.position, s.length, s.memory.h3[index]});
    }
  }
  return TimeOp(backend_->profiler(), "h3_prefill", "h3", [&] {
    return layer.h3->Prefill(h3_segments_, options_.prefill_chunk,
                             ElementAt(act.qkv.data(), step.count * 3 * d, at),
                             ElementAt(inner, step.count * d, at));
  });
}

absl::Status Model::AttentionMixer(Layer& layer, int index,
                                   const ForwardBatch& batch,
                                   Activations& act) {
  const int64_t d = config_.d_model;
  const kernels::AttentionShape shape{static_cast<int>(config_.n_heads),
                                      static_cast<int>(d / config_.n_heads),
                                      static_cast<int>(config_.rotary_dim)};
  const float* inv_freq = layer.inv_freq.data();
  const ElementType at = act.type;
  void* out = act.normed.data();
  const StepRows& step = batch.step;
  if (step.count > 0) {
    kernels::AttentionDecodeParams p;
    p.shape = shape;
    p.batch = static_cast<int>(step.count);
    p.qkv = act.qkv.data();
    p.inv_freq = inv_freq;
    p.caches = step.kv[index];
    p.positions = step.positions;
    p.out = out;
    p.io_type = at;
    H3_RETURN_IF_ERROR(
        TimeOp(backend_->profiler(), "attention_decode", "attention",
               [&] { return backend_->AttentionDecode(p, step.kv_capacity); }));
  }
  if (batch.segments.empty()) return absl::OkStatus();
  attention_segments_.clear();
  for (const Segment& s : batch.segments) {
    if (s.length > 0) {
      attention_segments_.push_back({s.position, s.length, s.memory.kv[index]});
    }
  }
  AttentionPrefillParams p;
  p.shape = shape;
  p.segments = attention_segments_;
  p.qkv = ElementAt(act.qkv.data(), step.count * 3 * d, at);
  p.inv_freq = inv_freq;
  p.out = ElementAt(out, step.count * d, at);
  p.io_type = at;
  return TimeOp(backend_->profiler(), "attention_prefill", "attention",
                [&] { return backend_->Attention(p); });
}

absl::Status Model::LmHead(const void* normed, int64_t rows, float* logits) {
  // Tied to the embedding: logits = LN_f(residual) E^T.
  return TimeOp(backend_->profiler(), "lm_head", "model", [&] {
    return backend_->Linear({normed, &embedding_, nullptr, logits, rows,
                             Epilogue::kNone, backend_->activation_type(),
                             ElementType::kF32});
  });
}

}  // namespace h3::engine
