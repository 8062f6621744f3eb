"""The PyTorch baseline of bench/engine_bench.py, fp32 eager mode.

Prefill is the independent reference's forward (tests/reference/h3_reference.py:
FFT convolutions with torch.fft, attention as a masked softmax), with the LM
head applied to the last position only, as a server needs. Decode is the
recurrent form of H3_MODEL.md written in batched torch ops: per H3 layer a
shift state [B, d, N] and a diagonal state [B, d, N/2] (complex64), per
attention layer a K/V cache; one step feeds one token of each of B sequences.
head_dim 1 and no rotary (the released hybrid models' shape) only.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests", "reference"))
import h3_reference as ref  # noqa: E402

EMB = "backbone.embeddings.word_embeddings.weight"
LINEARS = ("q_proj", "k_proj", "v_proj", "output_linear", "Wqkv", "out_proj",
           "fc1", "fc2")


def random_weights(cfg, padded_vocab, seed=0):
    """The reference's random weights, with linear and embedding weights
    rescaled to std 0.02 (GPT-2's init) so that activations stay O(1) in a
    deep, wide model."""
    w = ref.random_weights(cfg, torch.Generator().manual_seed(seed), padded_vocab)
    for name, t in w.items():
        if name == EMB or any(f".{lin}.weight" in name for lin in LINEARS):
            w[name] = t * (0.02 / t.std())
    return w


def prefill_last_logits(w, cfg, tokens):
    """Logits [V_pad] at the last position of `tokens`, one sequence."""
    return ref.final_hidden(w, cfg, tokens)[-1] @ w[EMB].T


class Decoder:
    """Recurrent decoding of B sequences in lock step."""

    def __init__(self, w, cfg, batch, capacity):
        assert cfg["head_dim"] == 1 and not cfg["rotary"], "baseline: head_dim 1, no rotary"
        self.w, self.cfg, self.pos = w, cfg, 0
        d, n = cfg["d_model"], cfg["d_state"]
        self.layers = []
        for i in range(cfg["n_layer"]):
            mix = f"backbone.layers.{i}.mixer."
            if i in cfg["attn"]:
                nh = cfg["n_heads"]
                shape = (batch, capacity, nh, d // nh)
                self.layers.append(dict(k=torch.zeros(shape), v=torch.zeros(shape)))
                continue
            dt = torch.exp(w[mix + "kernel.kernel.log_dt"]).to(torch.complex64)
            A = (-torch.exp(w[mix + "kernel.kernel.inv_A_real"])
                 + 1j * w[mix + "kernel.kernel.A_imag"]).to(torch.complex64)
            dtA = A * dt[:, None]
            Bd = torch.view_as_complex(w[mix + "kernel.kernel.B"].contiguous())
            self.layers.append(dict(
                shift=torch.zeros(batch, d, n),
                x=torch.zeros(batch, d, n // 2, dtype=torch.complex64),
                dA=(1 + dtA / 2) / (1 - dtA / 2),
                dB=Bd * dt[:, None] / (1 - dtA / 2),
                C=torch.view_as_complex(w[mix + "kernel.kernel.C"][0].contiguous()),
                shift_B=w[mix + "ssm_k_kernel.kernel.B"],
                shift_C=w[mix + "ssm_k_kernel.kernel.C"][0]))

    def _h3(self, s, mix, u):
        w = self.w
        q = u @ w[mix + "q_proj.weight"].T + w[mix + "q_proj.bias"]
        k = u @ w[mix + "k_proj.weight"].T + w[mix + "k_proj.bias"]
        v = u @ w[mix + "v_proj.weight"].T + w[mix + "v_proj.bias"]
        shift = torch.roll(s["shift"], 1, dims=-1)
        shift[..., 0] = 0
        s["shift"] = shift + s["shift_B"] * k[..., None]
        kv = ((s["shift"] * s["shift_C"]).sum(-1) + w[mix + "ssm_k_D"] * k) * v
        s["x"] = s["dA"] * s["x"] + s["dB"] * kv[..., None]
        y = 2 * (s["C"] * s["x"]).sum(-1).real + w[mix + "D"] * kv
        return (q * y) @ w[mix + "output_linear.weight"].T + w[mix + "output_linear.bias"]

    def _attention(self, s, mix, u):
        w, nh = self.w, self.cfg["n_heads"]
        B, d = u.shape
        qkv = u @ w[mix + "Wqkv.weight"].T + w[mix + "Wqkv.bias"]
        q, k, v = qkv.reshape(B, 3, nh, d // nh).unbind(1)
        s["k"][:, self.pos], s["v"][:, self.pos] = k, v
        keys, values = s["k"][:, :self.pos + 1], s["v"][:, :self.pos + 1]
        scores = torch.einsum("bhd,bshd->bhs", q, keys) / math.sqrt(d // nh)
        out = torch.einsum("bhs,bshd->bhd", scores.softmax(-1), values).reshape(B, d)
        return out @ w[mix + "out_proj.weight"].T + w[mix + "out_proj.bias"]

    def step(self, tokens):
        """tokens [B] -> logits [B, V_pad]."""
        w, d = self.w, self.cfg["d_model"]
        hidden, residual = w[EMB][tokens], None
        for i, s in enumerate(self.layers):
            pre = f"backbone.layers.{i}."
            residual = hidden if residual is None else hidden + residual
            u = ref.layer_norm(residual, w, pre + "norm1", d)
            mixer = self._attention if i in self.cfg["attn"] else self._h3
            hidden = mixer(s, pre + "mixer.", u)
            residual = hidden + residual
            hidden = ref.mlp(w, pre, ref.layer_norm(residual, w, pre + "norm2", d))
        self.pos += 1
        return ref.layer_norm(hidden + residual, w, "backbone.ln_f", d) @ w[EMB].T

    def clone(self):
        other = Decoder.__new__(Decoder)
        other.w, other.cfg, other.pos = self.w, self.cfg, self.pos
        other.layers = [{k: v.clone() if k in ("shift", "x", "k", "v") else v
                         for k, v in s.items()} for s in self.layers]
        return other
