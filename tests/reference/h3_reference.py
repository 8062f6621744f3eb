#!/usr/bin/python3
"""An independent fp32 PyTorch reference of the hybrid H3 language model.

Written from docs/model.md and the original forward() of the HazyResearch H3
code, with different algorithms from our C++ engine where there is a choice:
the shift kernel as an FFT correlation of B and C, the diagonal SSM kernel as a
Vandermonde product exp(l * log dA), the long convolution with torch.fft, and
attention as a masked softmax over the whole score matrix.

For each small config it writes
  engine/testdata/<name>.safetensors   random weights, canonical tensor names
and one engine/testdata/golden.json with, per config, the prompt, the logits
at the last prompt position and greedy tokens (argmax over the real
vocabulary, recomputing the whole sequence each step).

Run with Debian's python3-torch (apt-get install python3-torch):
  /usr/bin/python3 tests/reference/h3_reference.py engine/testdata
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_checkpoints import write_safetensors  # noqa: E402

CONFIGS = [
    # name, d_model, n_layer, attention layers, heads, head_dim, d_state, rotary
    dict(name="tiny_p1", d_model=16, n_layer=3, attn=[1], n_heads=2,
         head_dim=1, d_state=8, rotary=0),
    dict(name="tiny_p8_rotary", d_model=16, n_layer=4, attn=[1, 3], n_heads=2,
         head_dim=8, d_state=8, rotary=4),
    dict(name="tiny_p1_two_attn_rotary", d_model=24, n_layer=4, attn=[0, 2],
         n_heads=3, head_dim=1, d_state=16, rotary=8),
]
VOCAB, PADDED_VOCAB = 61, 64
PROMPT_LEN, GREEDY_STEPS = 23, 8


def random_weights(cfg, gen, padded_vocab=PADDED_VOCAB):
    d, n, p = cfg["d_model"], cfg["d_state"], cfg["head_dim"]
    h, m = d // p, n // 2
    w = {}

    def normal(*shape, scale=1.0):
        return torch.randn(*shape, generator=gen) * scale

    w["backbone.embeddings.word_embeddings.weight"] = normal(padded_vocab, d, scale=0.3)
    for i in range(cfg["n_layer"]):
        pre = f"backbone.layers.{i}."
        for norm in ("norm1", "norm2"):
            w[pre + norm + ".weight"] = 1 + normal(d, scale=0.1)
            w[pre + norm + ".bias"] = normal(d, scale=0.1)
        w[pre + "mlp.fc1.weight"] = normal(4 * d, d, scale=0.2)
        w[pre + "mlp.fc1.bias"] = normal(4 * d, scale=0.02)
        w[pre + "mlp.fc2.weight"] = normal(d, 4 * d, scale=0.1)
        w[pre + "mlp.fc2.bias"] = normal(d, scale=0.02)
        mix = pre + "mixer."
        if i in cfg["attn"]:
            w[mix + "Wqkv.weight"] = normal(3 * d, d, scale=0.3)
            w[mix + "Wqkv.bias"] = normal(3 * d, scale=0.02)
            w[mix + "out_proj.weight"] = normal(d, d, scale=0.2)
            w[mix + "out_proj.bias"] = normal(d, scale=0.02)
            if cfg["rotary"]:
                rd = cfg["rotary"]
                w[mix + "rotary_emb.inv_freq"] = 1.0 / (
                    10000 ** (torch.arange(0, rd, 2).float() / rd))
            continue
        for proj in ("q_proj", "k_proj", "v_proj", "output_linear"):
            w[mix + proj + ".weight"] = normal(d, d, scale=0.3)
            w[mix + proj + ".bias"] = normal(d, scale=0.02)
        w[mix + "ssm_k_kernel.kernel.B"] = normal(d, n, scale=0.5)
        w[mix + "ssm_k_kernel.kernel.C"] = normal(1, d, n, scale=0.3)
        w[mix + "ssm_k_D"] = normal(d)
        w[mix + "kernel.kernel.log_dt"] = (
            math.log(0.001) + torch.rand(h, generator=gen) * math.log(100))
        w[mix + "kernel.kernel.inv_A_real"] = math.log(0.5) + normal(h, m, scale=0.1)
        w[mix + "kernel.kernel.A_imag"] = math.pi * torch.arange(m).float().repeat(h, 1)
        w[mix + "kernel.kernel.B"] = normal(h, m, 2, scale=0.5)
        w[mix + "kernel.kernel.C"] = normal(1, h, m, 2, scale=0.5)
        w[mix + "D"] = normal(h)
    w["backbone.ln_f.weight"] = 1 + normal(d, scale=0.1)
    w["backbone.ln_f.bias"] = normal(d, scale=0.1)
    return w


def fftconv(u, k):
    """Causal convolution of u [..., L] with kernel k [..., L] by FFT."""
    L = u.shape[-1]
    n = 2 * L
    return torch.fft.irfft(torch.fft.rfft(u, n=n) * torch.fft.rfft(k, n=n), n=n)[..., :L]


def h3_mixer(w, mix, cfg, x):
    """x: [..., L, d] -> [..., L, d]; leading dimensions are a batch."""
    *lead, L, d = x.shape
    n, p = cfg["d_state"], cfg["head_dim"]
    h = d // p
    q = x @ w[mix + "q_proj.weight"].T + w[mix + "q_proj.bias"]
    k = x @ w[mix + "k_proj.weight"].T + w[mix + "k_proj.bias"]
    v = x @ w[mix + "v_proj.weight"].T + w[mix + "v_proj.bias"]
    q, k, v = q.transpose(-1, -2), k.transpose(-1, -2), v.transpose(-1, -2)  # [..., d, L]

    # Shift SSM kernel: the correlation of B and C, as an FFT product.
    B = w[mix + "ssm_k_kernel.kernel.B"]
    C = w[mix + "ssm_k_kernel.kernel.C"][0]
    shift = torch.fft.irfft(torch.fft.rfft(B, n=2 * n).conj() * torch.fft.rfft(C, n=2 * n),
                            n=2 * n)[..., :n]
    shift = torch.nn.functional.pad(shift, (0, max(0, L - n)))[..., :L]
    k = fftconv(k, shift) + w[mix + "ssm_k_D"][:, None] * k

    # Diagonal SSM kernel (S4D, bilinear), Vandermonde form.
    dt = torch.exp(w[mix + "kernel.kernel.log_dt"]).to(torch.complex64)
    A = (-torch.exp(w[mix + "kernel.kernel.inv_A_real"])
         + 1j * w[mix + "kernel.kernel.A_imag"]).to(torch.complex64)
    Bd = torch.view_as_complex(w[mix + "kernel.kernel.B"].contiguous())
    Cd = torch.view_as_complex(w[mix + "kernel.kernel.C"][0].contiguous())
    dtA = A * dt[:, None]
    dA = (1 + dtA / 2) / (1 - dtA / 2)
    coeff = Cd * Bd * dt[:, None] / (1 - dtA / 2)
    powers = torch.exp(dA.log()[:, :, None] * torch.arange(L)[None, None, :])
    K = 2 * (coeff[:, :, None] * powers).sum(1).real  # [h, L]

    # kv per head: (d1, d2) outer products; channels split as (h p).
    kh = k.reshape(*lead, h, p, L)  # [..., h, d1, L]
    vh = v.reshape(*lead, h, p, L)  # [..., h, d2, L]
    kv = kh[..., :, :, None, :] * vh[..., :, None, :, :]  # [..., h, d1, d2, L]
    y = fftconv(kv, K[:, None, None, :]) + w[mix + "D"][:, None, None, None] * kv
    qh = q.reshape(*lead, h, p, L)  # [..., h, d1, L]
    out = (y * qh[..., :, :, None, :]).sum(-3)  # [..., h, d2, L]
    out = out.transpose(-3, -2).reshape(*lead, d, L)  # (d2 h) layout
    return out.transpose(-1, -2) @ w[mix + "output_linear.weight"].T + w[mix + "output_linear.bias"]


def attention_mixer(w, mix, cfg, x):
    """x: [..., L, d] -> [..., L, d]; leading dimensions are a batch."""
    *lead, L, d = x.shape
    nh = cfg["n_heads"]
    hd = d // nh
    qkv = x @ w[mix + "Wqkv.weight"].T + w[mix + "Wqkv.bias"]
    q, k, v = qkv.reshape(*lead, L, 3, nh, hd).unbind(-3)  # [..., L, nh, hd]
    rd = cfg["rotary"]
    if rd:
        angle = torch.arange(L).float()[:, None] * w[mix + "rotary_emb.inv_freq"][None, :]
        cos = torch.cat([angle.cos(), angle.cos()], -1)[:, None, :]
        sin = torch.cat([angle.sin(), angle.sin()], -1)[:, None, :]

        def rotate(t):
            r, rest = t[..., :rd], t[..., rd:]
            half = torch.cat([-r[..., rd // 2:], r[..., :rd // 2]], -1)
            return torch.cat([r * cos + half * sin, rest], -1)

        q, k = rotate(q), rotate(k)
    scores = torch.einsum("...thd,...shd->...hts", q, k) / math.sqrt(hd)
    mask = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
    scores = scores.masked_fill(mask, float("-inf"))
    out = torch.einsum("...hts,...shd->...thd", scores.softmax(-1), v).reshape(*lead, L, d)
    return out @ w[mix + "out_proj.weight"].T + w[mix + "out_proj.bias"]


def layer_norm(x, w, name, d):
    return torch.nn.functional.layer_norm(x, (d,), w[name + ".weight"], w[name + ".bias"], 1e-5)


def mlp(w, pre, x):
    x = torch.nn.functional.gelu(x @ w[pre + "mlp.fc1.weight"].T + w[pre + "mlp.fc1.bias"],
                                 approximate="tanh")
    return x @ w[pre + "mlp.fc2.weight"].T + w[pre + "mlp.fc2.bias"]


def final_hidden(w, cfg, tokens):
    """The final layer norm's output [..., L, d] for every position of
    tokens [..., L]."""
    d = cfg["d_model"]
    hidden = w["backbone.embeddings.word_embeddings.weight"][tokens]
    residual = None
    for i in range(cfg["n_layer"]):
        pre = f"backbone.layers.{i}."
        residual = hidden if residual is None else hidden + residual
        x = layer_norm(residual, w, pre + "norm1", d)
        mixer = attention_mixer if i in cfg["attn"] else h3_mixer
        hidden = mixer(w, pre + "mixer.", cfg, x)
        residual = hidden + residual
        hidden = mlp(w, pre, layer_norm(residual, w, pre + "norm2", d))
    return layer_norm(hidden + residual, w, "backbone.ln_f", d)


def forward(w, cfg, tokens):
    """Logits [..., L, V_pad] for every position of tokens [..., L]."""
    return final_hidden(w, cfg, tokens) @ w["backbone.embeddings.word_embeddings.weight"].T


def main(out_dir):
    torch.manual_seed(0)
    golden = {}
    for cfg in CONFIGS:
        gen = torch.Generator().manual_seed(sum(map(ord, cfg["name"])))
        w = random_weights(cfg, gen)
        write_safetensors(os.path.join(out_dir, cfg["name"] + ".safetensors"), w)
        prompt = torch.randint(0, VOCAB, (PROMPT_LEN,), generator=gen)
        with torch.no_grad():
            last_logits = forward(w, cfg, prompt)[-1]
            seq = prompt.tolist()
            for _ in range(GREEDY_STEPS):
                logits = forward(w, cfg, torch.tensor(seq))[-1]
                seq.append(int(logits[:VOCAB].argmax()))
        golden[cfg["name"]] = dict(
            config=cfg, vocab_size=VOCAB, padded_vocab_size=PADDED_VOCAB,
            prompt=prompt.tolist(),
            last_logits=[float("%.8g" % x) for x in last_logits.tolist()],
            greedy=seq[PROMPT_LEN:])
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "engine/testdata")
