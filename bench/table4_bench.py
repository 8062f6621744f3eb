#!/usr/bin/python3
"""The H3 paper's Table 4 on one GPU: the H3-1.3B shape with random weights,
batch 64, prompts of 512 / 1024 / 1536 tokens, 128 generated tokens each;
tokens/s = 64 x 128 / total time including prefill. In one run, alternating
per prompt length: our engine (h3_engine_bench --what table4, fp16 weights,
CUDA graphs on; --graphs-off adds a run with them off), the eager PyTorch H3
(bench/torch_h3.py, fp16), and the paper's Transformer baseline, Hugging
Face's GPT2LMHeadModel of the same width and depth in fp16 with generate().
Where `transformers` is missing the baseline is recorded as skipped, with
the reason, and our own GPT-2-shaped PyTorch decoder (bench/torch_gpt2.py)
is reported separately under its own name. Then batch-1 decode latency.
--engine-flags times the engine once more per prompt length (graphs on) and
for latency with those h3_engine_bench flags added (the paths that are off
by default), reported as h3serve_flagged_graphs_on / h3serve_flagged; a
flagged run that fails is recorded there as {"flags", "error"} and the rest
of the run goes on (the flags name paths not yet proven on every device).

  bench/table4_bench.py [--build DIR] [--no-build] [--out FILE]
      [--model /tmp/h3-table4/h3-1.3b.h3] [--prompt-lens 512,1024,1536]
      [--batch 64] [--new-tokens 128] [--reps 3] [--graphs-off]
      [--sides engine,torch_h3,gpt2] [--own-gpt2] [--latency-prompt 512]
      [--engine-flags "--decode-products stream"]

Writes bench/results/table4_<device>.json (or --out). The model file is
written once by h3_engine_bench --what write-random (5.3 GB, fp32) when
absent. Exit status: 0; 1 on a failure; 2 without a CUDA device.

Timing: every side gets one untimed warm-up of the same shape, then --reps
timed runs; wall clock around the whole generation, synchronised (the
engine: steady_clock in the binary; PyTorch: perf_counter after
torch.cuda.synchronize()). Ratios are of median tokens/s.

Floor (table4_floor.py): prefill FLOPs at the GPU's dense fp16 tensor peak,
plus per decode step the larger of its bytes (weights, K/V read, H3 states
read and written) at peak HBM bandwidth and its FLOPs at peak; the issue's
H100 figures (30,000 / 21,900 / 17,200 tokens/s; 0.80 ms batch-1) are
recorded beside it, and the bar is 70% of those.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import table4_floor  # noqa: E402

VOCAB, PADDED_VOCAB = 50257, 50264
CFG = dict(name="h3-1.3b", d_model=2048, n_layer=24, attn=[8, 16], n_heads=16,
           head_dim=1, d_state=64, rotary=0)
PAPER_A100 = {512: 1980, 1024: 1580, 1536: 1240}  # tokens/s, H3-1.3B


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="build directory (default: build-gpu if present, else build)")
    ap.add_argument("--no-build", action="store_true", help="run the binary as built")
    ap.add_argument("--out", help="write the JSON here instead of bench/results/")
    ap.add_argument("--model", default="/tmp/h3-table4/h3-1.3b.h3")
    ap.add_argument("--prompt-lens", default="512,1024,1536")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"])
    ap.add_argument("--graphs-off", action="store_true", help="also time the engine without graphs")
    ap.add_argument("--sides", default="engine,torch_h3,gpt2")
    ap.add_argument("--engine-flags", default="",
                    help="h3_engine_bench flags of a second engine configuration")
    ap.add_argument("--own-gpt2", action="store_true",
                    help="run our GPT-2-shaped decoder even when transformers is present")
    ap.add_argument("--latency-prompt", type=int, default=512)
    ap.add_argument("--latency-steps", type=int, default=128)
    return ap.parse_args()


def run_json(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summary(seconds, tokens):
    rates = [tokens / s for s in seconds]
    return dict(total_s=seconds, tokens_per_s=rates, median_tokens_per_s=statistics.median(rates),
                best_tokens_per_s=max(rates))


class Sides:
    """The PyTorch sides, each model built once on the GPU."""

    def __init__(self, args, torch):
        self.args, self.torch = args, torch
        self.dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
        self.h3_w = self.hf = self.own = None
        self.hf_skip = None
        sides = args.sides.split(",")
        if "torch_h3" in sides:
            import torch_h3
            # Not self.torch_h3: that would hide the method of the same name.
            self.h3_module = torch_h3
            log("torch_h3: random weights")
            self.h3_w = torch_h3.to_device(torch_h3.random_weights(CFG, PADDED_VOCAB),
                                           "cuda", self.dtype)
        if "gpt2" in sides:
            try:
                import transformers
                config = transformers.GPT2Config(
                    vocab_size=VOCAB, n_positions=2048, n_embd=CFG["d_model"],
                    n_layer=CFG["n_layer"], n_head=CFG["n_heads"])
                log(f"gpt2: transformers {transformers.__version__}, building GPT2LMHeadModel")
                self.hf = transformers.GPT2LMHeadModel(config).to("cuda", self.dtype).eval()
                self.hf_version = transformers.__version__
            except ImportError as e:
                self.hf_skip = f"transformers is not installed on this machine ({e})"
            if self.hf is None or args.own_gpt2:
                import torch_gpt2
                self.own = torch_gpt2.Gpt2Shaped(VOCAB, 2048, CFG["d_model"], CFG["n_layer"],
                                                 CFG["n_heads"]).to("cuda", self.dtype).eval()

    def prompts(self, length, seed=1):
        g = self.torch.Generator().manual_seed(seed)
        return self.torch.randint(0, VOCAB, (self.args.batch, length), generator=g).cuda()

    def timed(self, fn, reps):
        """fn() once untimed, then reps times: [seconds]."""
        torch, out = self.torch, []
        for r in range(reps + 1):
            torch.cuda.synchronize()
            start = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            if r > 0:
                out.append(time.perf_counter() - start)
        torch.cuda.empty_cache()
        return out

    def h3_generate(self, length, steps):
        """Prefill then `steps` decode steps, greedy on the GPU:
        (prefill seconds, decode seconds) of one run."""
        torch, th = self.torch, self.h3_module
        prompts = self.prompts(length)
        dec = th.Decoder(self.h3_w, CFG, self.args.batch, length + steps, "cuda", self.dtype)
        torch.cuda.synchronize()
        with torch.inference_mode():
            start = time.perf_counter()
            nxt = dec.prefill(prompts)[:, :VOCAB].argmax(-1)
            torch.cuda.synchronize()
            mid = time.perf_counter()
            for _ in range(steps):
                nxt = dec.step(nxt)[:, :VOCAB].argmax(-1)
            torch.cuda.synchronize()
        return mid - start, time.perf_counter() - mid

    def torch_h3(self, length):
        steps, runs = self.args.new_tokens, []
        for r in range(self.args.reps + 1):
            run = self.h3_generate(length, steps)
            if r > 0:
                runs.append(run)
        self.torch.cuda.empty_cache()
        s = summary([p + d for p, d in runs], self.args.batch * steps)
        return dict(s, prefill_s=[p for p, _ in runs], decode_s=[d for _, d in runs])

    def gpt2_hf(self, length):
        if self.hf is None:
            return dict(skipped=True, reason=self.hf_skip)
        prompts, n = self.prompts(length), self.args.new_tokens

        def generate():
            with self.torch.inference_mode():
                out = self.hf.generate(prompts, attention_mask=self.torch.ones_like(prompts),
                                       do_sample=False, num_beams=1, max_new_tokens=n,
                                       min_new_tokens=n, pad_token_id=0, use_cache=True)
            assert out.shape == (self.args.batch, length + n), out.shape
        return dict(summary(self.timed(generate, self.args.reps), self.args.batch * n),
                    transformers=self.hf_version)

    def gpt2_own(self, length):
        prompts, n = self.prompts(length), self.args.new_tokens
        return summary(self.timed(lambda: self.own.generate_greedy(prompts, n), self.args.reps),
                       self.args.batch * n)

    def torch_h3_latency(self, length, steps):
        torch, th = self.torch, self.h3_module
        prompts = self.prompts(length)[:1]
        ms = []
        for r in range(2):  # the first is the warm-up
            dec = th.Decoder(self.h3_w, CFG, 1, length + steps, "cuda", self.dtype)
            with torch.inference_mode():
                nxt = dec.prefill(prompts)[:, :VOCAB].argmax(-1)
                for _ in range(steps):
                    torch.cuda.synchronize()
                    start = time.perf_counter()
                    nxt = dec.step(nxt)[:, :VOCAB].argmax(-1)
                    torch.cuda.synchronize()
                    if r > 0:
                        ms.append(1e3 * (time.perf_counter() - start))
        return dict(step_ms=ms, median_step_ms=statistics.median(ms))


def main():
    args = parse_args()
    try:
        import torch
    except ImportError:
        log("table4_bench.py: needs PyTorch (the GPU machine has it)")
        sys.exit(1)
    if not torch.cuda.is_available():
        log("table4_bench.py: no CUDA device (torch.cuda.is_available() is False); "
            "this benchmark runs on the GPU machine: see docs/gpu-machine.md")
        sys.exit(2)
    build = args.build or next((os.path.join(ROOT, d) for d in ("build-gpu", "build")
                                if os.path.isdir(os.path.join(ROOT, d))),
                               os.path.join(ROOT, "build"))
    if not args.no_build:
        subprocess.run(["cmake", "--build", build, "--target", "h3_engine_bench"],
                       check=True, stdout=sys.stderr)
    bench = os.path.join(build, "bench", "h3_engine_bench")
    if not os.path.exists(args.model):
        os.makedirs(os.path.dirname(os.path.abspath(args.model)), exist_ok=True)
        log(f"writing the random model {args.model}")
        log(run_json([bench, "--what", "write-random", "--random-shape", "h3-1.3b",
                      "--model", args.model]))
    sides = args.sides.split(",")
    lengths = [int(x) for x in args.prompt_lens.split(",")]
    device = torch.cuda.get_device_name(0)
    peaks = table4_floor.peaks(device)
    measured = table4_floor.measure(torch)
    log(f"device {device}: peaks {peaks}, measured {measured}")
    py = Sides(args, torch)

    flags = args.engine_flags.split()

    def flagged(*engine_args):
        """engine(*engine_args, flags) with the flags recorded, or the error."""
        try:
            return dict(engine(*engine_args, flags), flags=args.engine_flags)
        except RuntimeError as e:
            log(f"flagged run failed: {e}")
            return dict(flags=args.engine_flags, error=str(e))

    def engine(what, graphs, length, steps, reps, batch, extra=()):
        return run_json([bench, "--model", args.model, "--device", "cuda", "--dtype", args.dtype,
                         "--graphs", graphs, "--what", what, "--batch", str(batch),
                         "--prompt-len", str(length), "--decode-steps", str(steps),
                         "--reps", str(reps), *extra])

    results, machine = [], None
    for length in lengths:
        row = dict(prompt_len=length, batch=args.batch, new_tokens=args.new_tokens,
                   paper_a100_tokens_per_s=PAPER_A100.get(length))
        if "engine" in sides:
            for graphs in (["on", "off"] if args.graphs_off else ["on"]):
                out = engine("table4", graphs, length, args.new_tokens, args.reps, args.batch)
                machine = machine or out["machine"]
                row[f"h3serve_graphs_{graphs}"] = out
            if flags:
                row["h3serve_flagged_graphs_on"] = flagged(
                    "table4", "on", length, args.new_tokens, args.reps, args.batch)
        if "torch_h3" in sides:
            row["torch_h3_eager"] = py.torch_h3(length)
        if "gpt2" in sides:
            row["gpt2_hf"] = py.gpt2_hf(length)
            if py.own is not None:
                row["gpt2_shaped_own_pytorch"] = py.gpt2_own(length)
        row["floor"] = table4_floor.table4(CFG, PADDED_VOCAB, args.batch, length,
                                           args.new_tokens, args.dtype, peaks, measured)
        row["ratios"] = table4_floor.ratios(row)
        log(f"prompt {length}: {json.dumps(row['ratios'])}")
        results.append(row)

    latency = dict(prompt_len=args.latency_prompt, steps=args.latency_steps)
    if "engine" in sides:
        latency["h3serve"] = engine("latency", "on", args.latency_prompt, args.latency_steps, 3, 1)
        if flags:
            latency["h3serve_flagged"] = flagged(
                "latency", "on", args.latency_prompt, args.latency_steps, 3, 1)
        machine = machine or latency["h3serve"]["machine"]
    if "torch_h3" in sides:
        latency["torch_h3_eager"] = py.torch_h3_latency(args.latency_prompt, args.latency_steps)
    latency["floor"] = table4_floor.latency(CFG, PADDED_VOCAB, args.latency_prompt, args.dtype,
                                            peaks, measured)
    if "h3serve" in latency:
        latency["fraction_of_issue_floor"] = (
            table4_floor.ISSUE_H100_LATENCY_MS / latency["h3serve"]["median_step_ms"])

    report = dict(
        benchmark="table4", date=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        script_command=" ".join(["bench/table4_bench.py", *sys.argv[1:]]),
        device=dict(name=device, torch=torch.__version__, torch_cuda=torch.version.cuda,
                    engine_machine=machine),
        config=dict(CFG, vocab_size=VOCAB, padded_vocab_size=PADDED_VOCAB,
                    d_inner=4 * CFG["d_model"], weights="random", dtype=args.dtype),
        method=__doc__.split("\n\n", 3)[2:4],
        peaks=peaks, measured=measured, floor_formula=table4_floor.FORMULA,
        results=results, latency=latency)
    slug = re.sub(r"[^a-z0-9]+", "_", device.lower()).strip("_")
    out = args.out or os.path.join(ROOT, "bench", "results", f"table4_{slug}.json")
    with open(out, "w") as f:
        f.write(json.dumps(report, indent=1) + "\n")
    log(f"table4_bench.py: wrote {out}")


if __name__ == "__main__":
    main()
