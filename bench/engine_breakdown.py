#!/usr/bin/env python3
"""Where a step's time goes, op by op: runs `h3_engine_bench --what
breakdown` (bench/engine_breakdown.h) once per batch size, prints a table of
each run's decode and prefill ops, and writes {"benchmark", "commands",
"runs": [report per batch]} as JSON.

  bench/engine_breakdown.py --model M.h3 [--build DIR] [--device cpu]
      [--dtype fp32] [--batches 1,8] [--prompt-len 512]
      [--decode-context 128] [--decode-steps 32] [--reps 3]
      [--half-activations] [--engine-flags "..."] [--timeout 600]
      [--out FILE]

--engine-flags: more h3_engine_bench flags for every run (for example
"--attention flash --decode-products stream").

Each run is bounded by --timeout seconds; a run that fails or runs out of
time ends the script with status 1, after writing the runs that finished.
The commit, backend and device are in each report (`machine`, `backend`).
Standard library only (scripts/gpu-check.sh runs it on a GPU machine).
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def table(run):
    lines = []
    for phase in ("decode", "prefill"):
        p = run.get(phase, {})
        ms = p.get("step_ms", {})
        off = ms.get("profiler_off", {}).get("median", 0)
        on = ms.get("profiler_on", {}).get("median", 0)
        lines.append(f"batch {run.get('batch')} {phase}: step {off:.3f} ms median "
                     f"({on:.3f} profiled), ops cover {p.get('covered_share', 0):.1%}")
        for o in sorted(p.get("ops", []), key=lambda o: -o.get("ms_per_step", 0)):
            lines.append(f"  {o.get('layer_type', '?'):<10} {o.get('name', '?'):<26}"
                         f" {o.get('calls_per_step', 0):6.1f} {o.get('ms_per_step', 0):10.4f} ms"
                         f" {o.get('share', 0):7.1%}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--decode-context", type=int, default=128)
    ap.add_argument("--decode-steps", type=int, default=32)
    ap.add_argument("--prefill-batch", type=int, default=1,
                    help="prompts in the timed prefill step (at most each batch)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--half-activations", action="store_true",
                    help="CUDA, 16-bit --dtype: activations in that type")
    ap.add_argument("--engine-flags", default="",
                    help="more h3_engine_bench flags for every run")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args()
    binary = os.path.join(args.build, "bench", "h3_engine_bench")
    commands, runs, status = [], [], 0
    for batch in args.batches.split(","):
        cmd = [binary, "--what", "breakdown", "--model", args.model, "--device", args.device,
               "--dtype", args.dtype, "--batch", batch, "--prompt-len", str(args.prompt_len),
               "--decode-context", str(args.decode_context),
               "--decode-steps", str(args.decode_steps), "--reps", str(args.reps),
               "--prefill-batch", str(min(args.prefill_batch, int(batch)))]
        if args.half_activations:
            cmd.append("--half-activations")
        cmd += args.engine_flags.split()
        commands.append(" ".join(["h3_engine_bench", *cmd[1:]]))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"engine_breakdown.py: batch {batch} ran past {args.timeout} s",
                  file=sys.stderr)
            status = 1
            break
        sys.stderr.write(proc.stderr)
        reports = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0 or not reports:
            print(f"engine_breakdown.py: batch {batch}: status {proc.returncode}",
                  file=sys.stderr)
            status = 1
            break
        runs.append(json.loads(reports[-1]))
        print(table(runs[-1]))
    if runs and args.out:
        with open(args.out, "w") as f:
            json.dump(dict(benchmark="engine_breakdown", commands=commands, runs=runs), f,
                      indent=1)
            f.write("\n")
    sys.exit(status)


if __name__ == "__main__":
    main()
