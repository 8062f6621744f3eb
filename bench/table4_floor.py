"""The floors of bench/table4_bench.py: the fastest the H3-1.3B Table 4
workload could run on a GPU, from its bytes and FLOPs; the GPU's peaks; and
the ratios the report gives."""

FORMULA = (
    "total = prefill + sum over decode steps s = 0..T-1 of max(bytes_s / BW, flops_s / PEAK). "
    "prefill = flops_prefill / PEAK, flops_prefill = B*L*2*P_lin + n_attn*B*2*L^2*d (causal QK^T "
    "and AV) + B*2*d*V_pad (LM head, last position); the FFT convolutions are left out (small). "
    "bytes_s = w*(P_lin + V_pad*d) (every weight matrix once, tied LM head included; w = 2 for "
    "fp16) + n_attn*2*B*(L+s+1)*d*w (K/V read) + n_h3*B*(d*N*4 + d*4 + 2*d*N*4) (the engine's "
    "fp32 H3 states: the shift ring of d*N read and one slot per channel written, the diagonal "
    "state of d*N read and written); flops_s = B*2*(P_lin + V_pad*d) + "
    "n_attn*B*4*(L+s+1)*d. P_lin = per layer 4*d^2 (q,k,v,out or Wqkv+out) + 2*d*4d (MLP). "
    "tokens/s = B*T / total. Batch-1 latency floor: bytes_0 / BW at batch 1. BW and PEAK: "
    "the datasheet's HBM bandwidth and dense fp16 tensor FLOP/s ('peak'), and the measured "
    "copy bandwidth and fp16 GEMM rate ('measured').")

# The issue's H100 floors for this workload (tokens/s; ms per token), and
# the bar: at least this fraction of them.
ISSUE_H100_TOKENS_PER_S = {512: 30000, 1024: 21900, 1536: 17200}
ISSUE_H100_LATENCY_MS = 0.80
BAR = 0.70

# Datasheet peaks: (name substring, HBM bytes/s, dense fp16 tensor FLOP/s).
# First match wins, so the more specific names come first.
_PEAKS = [
    ("H100 PCIe", 2.0e12, 756e12),
    ("H100 NVL", 3.9e12, 835e12),
    ("H100", 3.35e12, 989.4e12),      # SXM5 80GB HBM3
    ("H200", 4.8e12, 989.4e12),
    ("A100-SXM4-80GB", 2.039e12, 312e12),
    ("A100 80GB PCIe", 1.935e12, 312e12),
    ("A100", 1.555e12, 312e12),       # 40GB
]


def peaks(device_name):
    for name, bw, flops in _PEAKS:
        if name in device_name:
            return dict(matched=name, hbm_bytes_per_s=bw, fp16_flop_per_s=flops)
    return dict(matched=None, hbm_bytes_per_s=None, fp16_flop_per_s=None)


def measure(torch):
    """Copy bandwidth (2 GiB, read + write counted, best of 5) and fp16 GEMM
    rate (8192^3, best of 5), with CUDA events."""
    def best(fn):
        fn()
        times = []
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
        return min(times)
    src = torch.empty(1 << 30, dtype=torch.float16, device="cuda")
    dst = torch.empty_like(src)
    t = best(lambda: dst.copy_(src))
    bw = 2 * src.numel() * 2 / t
    del src, dst
    x = torch.randn(8192, 8192, dtype=torch.float16, device="cuda")
    y = torch.randn_like(x)
    t = best(lambda: x @ y)
    del x, y
    torch.cuda.empty_cache()
    return dict(hbm_bytes_per_s=bw, fp16_flop_per_s=2 * 8192 ** 3 / t)


def _counts(cfg, padded_vocab):
    d = cfg["d_model"]
    n_attn = len(cfg["attn"])
    return dict(d=d, n_attn=n_attn, n_h3=cfg["n_layer"] - n_attn,
                p_lin=cfg["n_layer"] * (4 * d * d + 8 * d * d), p_head=padded_vocab * d)


def _step(c, cfg, batch, context, w):
    """(bytes, flops) of one decode step attending to `context` positions."""
    d = c["d"]
    weights = w * (c["p_lin"] + c["p_head"])
    kv = c["n_attn"] * 2 * batch * context * d * w
    n = cfg["d_state"]
    # The shift ring read whole and one slot written; the diagonal state
    # read and written (kernels/cuda/h3_step.h, H3StepBytes).
    states = c["n_h3"] * batch * (d * n * 4 + d * 4 + 2 * d * n * 4)
    flops = batch * 2 * (c["p_lin"] + c["p_head"]) + c["n_attn"] * batch * 4 * context * d
    return weights + kv + states, flops


def _rates(bw, peak):
    return bw is not None and peak is not None


def table4(cfg, padded_vocab, batch, length, steps, dtype, peak, measured):
    w = 2 if dtype in ("fp16", "bf16") else 4
    c = _counts(cfg, padded_vocab)
    prefill_flops = (batch * length * 2 * c["p_lin"] + c["n_attn"] * batch * 2 * length ** 2
                     * c["d"] + batch * 2 * c["p_head"])
    steps_bf = [_step(c, cfg, batch, length + s + 1, w) for s in range(steps)]
    out = dict(prefill_flops=prefill_flops, step0_bytes=steps_bf[0][0],
               step0_flops=steps_bf[0][1], issue_h100_tokens_per_s=ISSUE_H100_TOKENS_PER_S.get(length))
    for name, r in (("peak", peak), ("measured", measured)):
        if not _rates(r["hbm_bytes_per_s"], r["fp16_flop_per_s"]):
            out[name] = None
            continue
        pre = prefill_flops / r["fp16_flop_per_s"]
        dec = sum(max(b / r["hbm_bytes_per_s"], f / r["fp16_flop_per_s"]) for b, f in steps_bf)
        out[name] = dict(prefill_s=pre, decode_s=dec, total_s=pre + dec,
                         tokens_per_s=batch * steps / (pre + dec))
    return out


def latency(cfg, padded_vocab, length, dtype, peak, measured):
    w = 2 if dtype in ("fp16", "bf16") else 4
    b, _ = _step(_counts(cfg, padded_vocab), cfg, 1, length + 1, w)
    out = dict(step_bytes=b, issue_h100_ms=ISSUE_H100_LATENCY_MS)
    for name, r in (("peak", peak), ("measured", measured)):
        out[name + "_ms"] = None if r["hbm_bytes_per_s"] is None else 1e3 * b / r["hbm_bytes_per_s"]
    return out


def ratios(row):
    """Ratios of median tokens/s: ours (graphs on) over each baseline, over
    the paper's A100 figure, and as a fraction of the floors; with a second
    engine configuration (--engine-flags), it over ours and over the issue's
    floor."""
    ours = row.get("h3serve_graphs_on", {}).get("median_tokens_per_s")
    out = {}
    if ours is None:
        return out
    for key in ("torch_h3_eager", "gpt2_hf", "gpt2_shaped_own_pytorch"):
        base = row.get(key, {})
        if base.get("median_tokens_per_s"):
            out[f"h3serve_over_{key}"] = ours / base["median_tokens_per_s"]
    if row.get("paper_a100_tokens_per_s"):
        out["h3serve_over_paper_a100"] = ours / row["paper_a100_tokens_per_s"]
    floor = row["floor"]
    if floor.get("issue_h100_tokens_per_s"):
        frac = ours / floor["issue_h100_tokens_per_s"]
        out["fraction_of_issue_h100_floor"] = frac
        out["meets_bar_70_percent"] = frac >= BAR
    for name in ("peak", "measured"):
        if floor.get(name):
            out[f"fraction_of_{name}_floor"] = ours / floor[name]["tokens_per_s"]
    flagged = row.get("h3serve_flagged_graphs_on", {}).get("median_tokens_per_s")
    if flagged:
        out["h3serve_flagged_over_h3serve"] = flagged / ours
        if floor.get("issue_h100_tokens_per_s"):
            out["flagged_fraction_of_issue_h100_floor"] = (
                flagged / floor["issue_h100_tokens_per_s"])
    return out
