"""The PyTorch baseline of bench/engine_bench.py, fp32 eager mode.

Prefill is the independent reference's forward (tests/reference/h3_reference.py:
FFT convolutions with torch.fft, attention as a masked softmax), with the LM
head applied to the last position only, as a server needs. Decode is the
recurrent form of docs/model.md written in batched torch ops: per H3 layer a
shift state [B, d, N] and a diagonal state [B, d, N/2] (complex64), per
attention layer a K/V cache; one step feeds one token of each of B sequences.
head_dim 1 and no rotary (the released hybrid models' shape) only.

bench/table4_bench.py runs the same decoder on a GPU in fp16 (to_device,
Decoder(..., device, dtype)): linear, embedding and norm weights and the
activations in fp16, the SSM parameters, states and recurrences in fp32 and
complex64; Decoder.prefill feeds whole prompts (a batch of them, FFT
convolutions) and leaves the states the recurrence would have reached.
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


def is_ssm_parameter(name):
    """SSM parameters stay fp32 whatever the weights' dtype."""
    return ".kernel." in name or name.endswith("ssm_k_D") or name.endswith("mixer.D")


def to_device(w, device, dtype):
    """The weights on `device`: SSM parameters fp32, the rest `dtype`."""
    return {n: t.to(device=device, dtype=torch.float32 if is_ssm_parameter(n) else dtype)
            for n, t in w.items()}


def _attend(q, k, v, causal):
    """q [B, nh, Lq, hd], k and v [B, nh, Lk, hd] -> [B, nh, Lq, hd]; causal
    aligns the last query with the last key. PyTorch's fused attention
    where this PyTorch has it, else a softmax over the whole score matrix."""
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if sdpa is not None:
        return sdpa(q, k, v, is_causal=causal and q.shape[-2] > 1)
    scores = (q @ k.transpose(-1, -2)).float() / math.sqrt(q.shape[-1])
    if causal and q.shape[-2] > 1:
        L = q.shape[-2]
        mask = torch.ones(L, k.shape[-2], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return scores.softmax(-1).to(v.dtype) @ v


def _fftconv(u, k):
    """Causal convolution of u [..., L] with kernel k [..., L] by FFT."""
    L = u.shape[-1]
    return torch.fft.irfft(torch.fft.rfft(u, n=2 * L) * torch.fft.rfft(k, n=2 * L),
                           n=2 * L)[..., :L]


def prefill_last_logits(w, cfg, tokens):
    """Logits [V_pad] at the last position of `tokens`, one sequence."""
    return ref.final_hidden(w, cfg, tokens)[-1] @ w[EMB].T


class Decoder:
    """Recurrent decoding of B sequences in lock step."""

    def __init__(self, w, cfg, batch, capacity, device="cpu", dtype=torch.float32):
        """w: weights on `device` (to_device(w, device, dtype) for a GPU or
        16-bit weights); dtype: the activations' and the K/V cache's."""
        assert cfg["head_dim"] == 1 and not cfg["rotary"], "baseline: head_dim 1, no rotary"
        self.w, self.cfg, self.pos = w, cfg, 0
        d, n = cfg["d_model"], cfg["d_state"]
        zeros = dict(device=device)
        self.layers = []
        for i in range(cfg["n_layer"]):
            mix = f"backbone.layers.{i}.mixer."
            if i in cfg["attn"]:
                nh = cfg["n_heads"]
                shape = (batch, capacity, nh, d // nh)
                self.layers.append(dict(k=torch.zeros(shape, dtype=dtype, **zeros),
                                        v=torch.zeros(shape, dtype=dtype, **zeros)))
                continue
            dt = torch.exp(w[mix + "kernel.kernel.log_dt"]).to(torch.complex64)
            A = (-torch.exp(w[mix + "kernel.kernel.inv_A_real"])
                 + 1j * w[mix + "kernel.kernel.A_imag"]).to(torch.complex64)
            dtA = A * dt[:, None]
            Bd = torch.view_as_complex(w[mix + "kernel.kernel.B"].contiguous())
            self.layers.append(dict(
                shift=torch.zeros(batch, d, n, **zeros),
                x=torch.zeros(batch, d, n // 2, dtype=torch.complex64, **zeros),
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
        k, v = k.float(), v.float()  # the recurrences in fp32
        shift = torch.roll(s["shift"], 1, dims=-1)
        shift[..., 0] = 0
        s["shift"] = shift + s["shift_B"] * k[..., None]
        kv = ((s["shift"] * s["shift_C"]).sum(-1) + w[mix + "ssm_k_D"] * k) * v
        s["x"] = s["dA"] * s["x"] + s["dB"] * kv[..., None]
        y = 2 * (s["C"] * s["x"]).sum(-1).real + w[mix + "D"] * kv
        return (q * y.to(q.dtype)) @ w[mix + "output_linear.weight"].T + \
            w[mix + "output_linear.bias"]

    def _attention(self, s, mix, u):
        w, nh = self.w, self.cfg["n_heads"]
        B, d = u.shape
        qkv = u @ w[mix + "Wqkv.weight"].T + w[mix + "Wqkv.bias"]
        q, k, v = qkv.reshape(B, 3, nh, d // nh).unbind(1)
        s["k"][:, self.pos], s["v"][:, self.pos] = k, v
        keys, values = s["k"][:, :self.pos + 1], s["v"][:, :self.pos + 1]
        scores = torch.einsum("bhd,bshd->bhs", q, keys).float() / math.sqrt(d // nh)
        out = torch.einsum("bhs,bshd->bhd", scores.softmax(-1).to(values.dtype),
                           values).reshape(B, d)
        return out @ w[mix + "out_proj.weight"].T + w[mix + "out_proj.bias"]

    def _h3_prefill(self, s, mix, u):
        """u [B, L, d] -> [B, L, d]; leaves in s the states after the L
        tokens (the recurrence of _h3 from zero states, in closed form)."""
        w, n = self.w, self.cfg["d_state"]
        L = u.shape[1]
        q = u @ w[mix + "q_proj.weight"].T + w[mix + "q_proj.bias"]
        k = u @ w[mix + "k_proj.weight"].T + w[mix + "k_proj.bias"]
        v = u @ w[mix + "v_proj.weight"].T + w[mix + "v_proj.bias"]
        k, v = k.transpose(1, 2).float(), v.transpose(1, 2).float()  # [B, d, L]
        B_, C_ = s["shift_B"], s["shift_C"]  # [d, N]
        # Shift SSM: state[j] = sum_{i<=j} B[j-i] k[t-i]; its output kernel
        # is the correlation sum_m B[m] C[m+i].
        kernel = torch.fft.irfft(torch.fft.rfft(B_, n=2 * n).conj() * torch.fft.rfft(C_, n=2 * n),
                                 n=2 * n)[..., :n]
        kernel = torch.nn.functional.pad(kernel, (0, max(0, L - n)))[..., :L]
        kv = (_fftconv(k, kernel) + w[mix + "ssm_k_D"][:, None] * k) * v  # [B, d, L]
        last = torch.nn.functional.pad(k, (max(0, n - L), 0))[..., -n:].flip(-1)  # k[t-i]
        j = torch.arange(n, device=u.device)
        lag = j[:, None] - j[None, :]  # [j, i]
        toeplitz = B_[:, lag.clamp(min=0)] * (lag >= 0)  # [d, j, i]
        s["shift"] = torch.einsum("dji,bdi->bdj", toeplitz, last)
        # Diagonal SSM: K[l] = 2 Re sum_m C dB dA^l; x = sum_l dA^(L-1-l) dB kv[l].
        powers = torch.exp(s["dA"].log()[..., None] *
                           torch.arange(L, device=u.device)[None, None, :])  # [d, N/2, L]
        K = 2 * torch.einsum("dm,dml->dl", s["C"] * s["dB"], powers).real
        y = _fftconv(kv, K) + w[mix + "D"][:, None] * kv  # [B, d, L]
        s["x"] = s["dB"] * torch.einsum("bdl,dml->bdm", kv.to(torch.complex64), powers.flip(-1))
        out = (q * y.transpose(1, 2).to(q.dtype))
        return out @ w[mix + "output_linear.weight"].T + w[mix + "output_linear.bias"]

    def _attention_prefill(self, s, mix, u):
        w, nh = self.w, self.cfg["n_heads"]
        B, L, d = u.shape
        qkv = u @ w[mix + "Wqkv.weight"].T + w[mix + "Wqkv.bias"]
        q, k, v = qkv.reshape(B, L, 3, nh, d // nh).unbind(2)  # [B, L, nh, hd]
        s["k"][:, :L], s["v"][:, :L] = k, v
        out = _attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
        out = out.transpose(1, 2).reshape(B, L, d)
        return out @ w[mix + "out_proj.weight"].T + w[mix + "out_proj.bias"]

    def prefill(self, tokens):
        """tokens [B, L] from position 0 -> logits [B, V_pad] of the last
        position; afterwards step() continues from position L."""
        assert self.pos == 0, "prefill starts a fresh decoder"
        out = self._blocks(tokens, self._attention_prefill, self._h3_prefill)
        self.pos = tokens.shape[1]
        return self._head(out[:, -1])

    def step(self, tokens):
        """tokens [B] -> logits [B, V_pad]."""
        out = self._blocks(tokens, self._attention, self._h3)
        self.pos += 1
        return self._head(out)

    def _blocks(self, tokens, attention, h3):
        """The layers over embedded `tokens`: hidden + residual at the end."""
        w, d = self.w, self.cfg["d_model"]
        hidden, residual = w[EMB][tokens], None
        for i, s in enumerate(self.layers):
            pre = f"backbone.layers.{i}."
            residual = hidden if residual is None else hidden + residual
            u = ref.layer_norm(residual, w, pre + "norm1", d)
            mixer = attention if i in self.cfg["attn"] else h3
            hidden = mixer(s, pre + "mixer.", u)
            residual = hidden + residual
            hidden = ref.mlp(w, pre, ref.layer_norm(residual, w, pre + "norm2", d))
        return hidden + residual

    def _head(self, x):
        w, d = self.w, self.cfg["d_model"]
        return ref.layer_norm(x, w, "backbone.ln_f", d) @ w[EMB].T

    def clone(self):
        other = Decoder.__new__(Decoder)
        other.w, other.cfg, other.pos = self.w, self.cfg, self.pos
        other.layers = [{k: v.clone() if k in ("shift", "x", "k", "v") else v
                         for k, v in s.items()} for s in self.layers]
        return other
