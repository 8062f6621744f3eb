#!/usr/bin/python3
"""CPU engine vs the PyTorch baseline: prefill and decode tokens/s, side by
side in one run, with the same random weights and the same thread count.

For each model shape (random weights, fp32):
  1. writes the checkpoint, converts it with `h3 convert` (fp32);
  2. checks that both sides compute the same function: the logits at the
     last position of a 16-token prompt (max abs difference) and 4 greedy
     tokens (ours from `h3 run`, PyTorch's from its recurrent decoder);
  3. --rounds times, alternating: h3_engine_bench (ours), then PyTorch, each
     --reps timed repetitions after a warm-up, for prefill at every
     --prompt-lens and decode at every --batches.
Reports every repetition, the median and best tokens/s, the ratio of medians
(ours / PyTorch), and the floors: decode cannot beat reading every weight
once per step at the measured read bandwidth; prefill cannot beat its GEMM
FLOPs at the measured PyTorch/OpenBLAS SGEMM rate.

  /usr/bin/python3 bench/engine_bench.py [--threads 2] [--out FILE]
      [--configs small,h3-125m] [--rounds 3] [--reps 2]

Needs Debian's python3-torch and libopenblas0-pthread (scripts/install-deps.sh
--test installs both), and a build with bench/h3_engine_bench and h3.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
VOCAB, PADDED_VOCAB = 50257, 50264
CONFIGS = {
    # A small hybrid (4 layers, d 256) and the released H3-125M shape.
    "small": dict(name="small", d_model=256, n_layer=4, attn=[2], n_heads=4,
                  head_dim=1, d_state=64, rotary=0, prompt_lens=[512]),
    "h3-125m": dict(name="h3-125m", d_model=768, n_layer=12, attn=[6], n_heads=12,
                    head_dim=1, d_state=64, rotary=0, prompt_lens=[512, 2048]),
}

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--threads", type=int, default=os.cpu_count())
ap.add_argument("--configs", default="small,h3-125m")
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--reps", type=int, default=2)
ap.add_argument("--batches", default="1,8")
ap.add_argument("--decode-context", type=int, default=128)
ap.add_argument("--decode-steps", type=int, default=32)
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--dir", default="/tmp/h3-engine-bench")
ap.add_argument("--out", help="also write the JSON here")
args = ap.parse_args()

# Before torch loads OpenBLAS: both sides get the same threads.
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "H3_NUM_THREADS"):
    os.environ[var] = str(args.threads)
# PyTorch's OpenMP threads otherwise spin while OpenBLAS's threads work: on 2
# cores that made its batch-8 decode 17x slower (0.36 s vs 0.022 s a step).
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402
import torch_h3  # noqa: E402
from h3_reference import write_safetensors  # noqa: E402  (path set by torch_h3)

torch.set_num_threads(args.threads)
H3 = os.path.join(args.build, "clients", "h3")
BENCH = os.path.join(args.build, "bench", "h3_engine_bench")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def floors():
    """Read bandwidth (GB/s: a sum over 512 MB, best of 5) and SGEMM GFLOP/s
    (2048^3, best of 5), both with --threads threads."""
    a = torch.ones(128 << 20)  # 512 MB
    a.sum()
    t = min(timeit(lambda: a.sum()) for _ in range(5))
    bw = a.numel() * 4 / t / 1e9
    x, y = torch.randn(2048, 2048), torch.randn(2048, 2048)
    x @ y
    t = min(timeit(lambda: x @ y) for _ in range(5))
    return dict(read_gb_per_s=bw, sgemm_gflop_per_s=2 * 2048 ** 3 / t / 1e9)


def timeit(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def make_model(cfg):
    os.makedirs(args.dir, exist_ok=True)
    w = torch_h3.random_weights(cfg, PADDED_VOCAB)
    ckpt = os.path.join(args.dir, cfg["name"] + ".safetensors")
    model = os.path.join(args.dir, cfg["name"] + ".h3")
    write_safetensors(ckpt, w)
    subprocess.run([H3, "convert", ckpt, "-o", model, "--dtype", "fp32",
                    "--n-heads", str(cfg["n_heads"]), "--vocab-size", str(VOCAB)],
                   check=True, capture_output=True)
    return w, model


def agreement(w, cfg, model):
    prompt = torch.randint(0, VOCAB, (16,), generator=torch.Generator().manual_seed(3))
    ours = run_json([H3, "run", "--model", model, "--prompt-ids",
                     ",".join(map(str, prompt.tolist())), "--greedy", "--max-tokens", "4",
                     "--json", "--logits"])
    with torch.inference_mode():
        want = torch_h3.prefill_last_logits(w, cfg, prompt)[:VOCAB]
        dec = torch_h3.Decoder(w, cfg, 1, 32)
        for t in prompt:
            logits = dec.step(t.view(1))
        greedy = []
        for _ in range(4):
            greedy.append(int(logits[0, :VOCAB].argmax()))
            logits = dec.step(torch.tensor([greedy[-1]]))
    got = torch.tensor(ours["prompt_last_logits"])
    return dict(max_abs_logit_diff=float((got - want).abs().max()),
                max_abs_logit=float(want.abs().max()),
                greedy_ours=ours["generated_ids"], greedy_pytorch=greedy,
                greedy_equal=ours["generated_ids"] == greedy)


def torch_prefill(w, cfg, length, reps):
    tokens = torch.randint(0, VOCAB, (length,), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        torch_h3.prefill_last_logits(w, cfg, tokens)  # warm-up
        return [timeit(lambda: torch_h3.prefill_last_logits(w, cfg, tokens))
                for _ in range(reps)]


def torch_decoder(w, cfg, batch):
    """A decoder that has consumed --decode-context tokens per sequence."""
    dec = torch_h3.Decoder(w, cfg, batch, args.decode_context + args.decode_steps)
    g = torch.Generator().manual_seed(100)
    with torch.inference_mode():
        for _ in range(args.decode_context):
            dec.step(torch.randint(0, VOCAB, (batch,), generator=g))
    return dec


def torch_decode(base, batch, reps):
    def steps():
        dec = base.clone()
        tokens = torch.zeros(batch, dtype=torch.long)
        start = time.perf_counter()
        for _ in range(args.decode_steps):
            tokens = dec.step(tokens)[:, :VOCAB].argmax(-1)
        return time.perf_counter() - start
    with torch.inference_mode():
        steps()  # warm-up
        return [steps() for _ in range(reps)]


def summary(seconds, tokens):
    rates = [tokens / s for s in seconds]
    return dict(seconds=seconds, tokens=tokens, median_tokens_per_s=statistics.median(rates),
                best_tokens_per_s=max(rates))


def bench_config(cfg, machine_floors):
    log(f"{cfg['name']}: writing and converting random weights")
    w, model = make_model(cfg)
    params = sum(t.numel() for t in w.values())
    check = agreement(w, cfg, model)
    log(f"{cfg['name']}: agreement {check}")
    batches = [int(b) for b in args.batches.split(",")]
    bases = {b: torch_decoder(w, cfg, b) for b in batches}
    times = {}  # (kind, size, side) -> [seconds]
    for r in range(args.rounds):
        for length in cfg["prompt_lens"]:
            ours = run_json([BENCH, "--model", model, "--what", "prefill", "--reps",
                             str(args.reps), "--prompt-len", str(length)])
            times.setdefault(("prefill", length, "h3serve"), []).extend(ours["prefill_s"])
            times.setdefault(("prefill", length, "pytorch"), []).extend(
                torch_prefill(w, cfg, length, args.reps))
        for b in batches:
            ours = run_json([BENCH, "--model", model, "--what", "decode", "--reps",
                             str(args.reps), "--batch", str(b), "--decode-context",
                             str(args.decode_context), "--decode-steps", str(args.decode_steps)])
            times.setdefault(("decode", b, "h3serve"), []).extend(ours["decode_s"])
            times.setdefault(("decode", b, "pytorch"), []).extend(
                torch_decode(bases[b], b, args.reps))
        log(f"{cfg['name']}: round {r + 1}/{args.rounds} done")

    # Floors. Decode reads every weight once per step (fp32); the embedding
    # is read once more as the LM head. Prefill GEMM FLOPs per token: 2 per
    # weight of the layers' linears (the LM head only for the last token).
    d = cfg["d_model"]
    linear = sum(t.numel() for n, t in w.items()
                 if any(f".{lin}.weight" in n for lin in torch_h3.LINEARS))
    weight_bytes = 4 * params
    step_floor_s = weight_bytes / (machine_floors["read_gb_per_s"] * 1e9)
    results = []
    for (kind, size, side), secs in sorted(times.items()):
        if side != "h3serve":
            continue
        tokens = size if kind == "prefill" else size * args.decode_steps
        ours = summary(secs, tokens)
        base = summary(times[(kind, size, "pytorch")], tokens)
        if kind == "prefill":
            flops = 2 * linear * size + 2 * d * PADDED_VOCAB + \
                len(cfg["attn"]) * 2 * size * size * d
            floor = size / (flops / (machine_floors["sgemm_gflop_per_s"] * 1e9))
        else:
            floor = size / step_floor_s
        results.append(dict(
            kind=kind, **({"prompt_len": size} if kind == "prefill" else
                          {"batch": size, "context": args.decode_context,
                           "steps": args.decode_steps}),
            h3serve=ours, pytorch=base,
            ratio_of_medians=ours["median_tokens_per_s"] / base["median_tokens_per_s"],
            floor_tokens_per_s=floor))
        log(f"{cfg['name']} {kind} {size}: h3serve {ours['median_tokens_per_s']:.1f} tok/s, "
            f"pytorch {base['median_tokens_per_s']:.1f} tok/s, ratio "
            f"{results[-1]['ratio_of_medians']:.2f}, floor {floor:.1f}")
    shape = {k: v for k, v in cfg.items() if k != "prompt_lens"}
    return dict(config=dict(shape, vocab_size=VOCAB, padded_vocab_size=PADDED_VOCAB,
                            parameters=params, dtype="fp32"),
                agreement=check, results=results)


def machine():
    return report.machine(
        torch=torch.__version__,
        blas=os.path.realpath("/etc/alternatives/libblas.so.3-x86_64-linux-gnu"))


def main():
    m = machine()
    f = floors()
    log(f"machine {m}\nfloors {f}")
    report.emit("engine_cpu", args.out, machine=m, threads=args.threads, floors=f,
                method=f"{args.rounds} rounds alternating h3serve and PyTorch, {args.reps} "
                       "timed repetitions each per round after one warm-up; medians and best",
                configs=[bench_config(CONFIGS[c], f) for c in args.configs.split(",")])


if __name__ == "__main__":
    main()
