#!/usr/bin/python3
"""h3serve under `h3 bench` against the offline engine on the same work, in
one run: output tokens/s of each, their ratio, and the served inter-token
latency (median and p99), with the server's own step statistics: among them
the mean step time, the engine loop's own time per iteration (the device idle
meanwhile) and that time's fraction of the loop's (host_fraction).

  /usr/bin/python3 bench/serve_vs_offline.py [--model MODEL.h3 | --shape h3-125m]
      [--concurrency 16] [--num-prompts 32] [--input-len 256] [--output-len 64]
      [--device cpu] [--dtype auto] [--threads 2] [--reps 2] [--server-args "..."]
      [--budgets default,32,64] [--start-timeout 300] [--client-timeout 600]
      [--out FILE.json]

The work: --num-prompts requests of --input-len random token ids, each
generating exactly --output-len tokens (eos ignored), at most --concurrency
at once.
  served:  h3serve with --slots = --concurrency and otherwise its default
           flags (plus --server-args), loaded by `h3 bench --max-concurrency`;
           output tokens/s over the whole run (prefill included);
  offline: h3_engine_bench --what table4 --batch --concurrency: the same
           prompt and output lengths, the prompts packed into batched
           forwards, then one step for all sequences per token (the engine's
           batch throughput: no scheduling, no gRPC, no arrivals).
The two alternate, --reps times each, offline first; medians are compared.
--budgets repeats the served side with each --prefill-tokens value
("default": the flag not given), a server started for each.
Both sides get --threads engine threads and the same weight type (--dtype;
auto: fp16 on a GPU, fp32 on the CPU, h3serve's own default; the offline
bench's default is fp32 everywhere, which made a GPU run compare fp16
serving with fp32 offline); the client shares the machine.
Without --model, a random model of --shape is written (h3_engine_bench
--what write-random) into /tmp/h3-serve-bench/.
Every wait is bounded: for the server to listen (--start-timeout; its
output is reported if it exits or stays silent) and for each client or
offline run (--client-timeout).
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess

import h3serve_process
import report
from h3serve_process import log

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--model")
ap.add_argument("--shape", default="h3-125m")
ap.add_argument("--concurrency", type=int, default=16)
ap.add_argument("--num-prompts", type=int, default=32)
ap.add_argument("--input-len", type=int, default=256)
ap.add_argument("--output-len", type=int, default=64)
ap.add_argument("--device", default="cpu")
ap.add_argument("--dtype", default="auto", choices=["auto", "fp32", "fp16", "bf16"],
                help="weight type of both sides (auto: fp16 with --device cuda[:N], "
                     "else fp32)")
ap.add_argument("--reps", type=int, default=2)
ap.add_argument("--server-args", default="", help="extra h3serve flags")
ap.add_argument("--budgets", default="default",
                help="comma-separated --prefill-tokens values; default: none given")
ap.add_argument("--start-timeout", type=float, default=300,
                help="seconds to wait for h3serve to listen (its model loaded)")
ap.add_argument("--client-timeout", type=float, default=600,
                help="seconds each h3 bench or h3_engine_bench run may take")
report.add_server_options(ap)
args = ap.parse_args()


def binary(*parts):
    return os.path.join(args.build, *parts)


def env():
    return dict(os.environ, H3_NUM_THREADS=str(args.threads))


def dtype():
    """The weight type both sides load: --dtype, auto resolved as h3serve does."""
    if args.dtype != "auto":
        return args.dtype
    return "fp16" if args.device.startswith("cuda") else "fp32"


def model_path():
    return args.model or h3serve_process.random_model(args.build, args.shape,
                                                      args.client_timeout)


def offline(model):
    out = subprocess.run(
        [binary("bench", "h3_engine_bench"), "--model", model, "--what", "table4",
         "--device", args.device, "--dtype", dtype(), "--batch", str(args.concurrency),
         "--prompt-len", str(args.input_len),
         "--decode-steps", str(args.output_len - 1), "--reps", "1"],
        check=True, capture_output=True, text=True, env=env(),
        timeout=args.client_timeout).stdout
    result = json.loads(out)
    # Output tokens as the server counts them: output_len per sequence.
    total = result["total_s"][0]
    return dict(tokens_per_s=args.concurrency * args.output_len / total,
                total_s=total, prefill_s=result["prefill_s"][0],
                decode_s=result["decode_s"][0], step_tokens=result["step_tokens"],
                sequences_per_prefill_step=result["sequences_per_prefill_step"])


def start_server(model, budget):
    command = [binary("server", "h3serve"), "--model", model, "--host", "127.0.0.1",
               "--port", "0", "--metrics-port", "0", "--http-port", "-1",
               "--slots", str(args.concurrency),
               "--device", args.device, "--dtype", dtype(), "--threads", str(args.threads),
               ] + shlex.split(args.server_args)
    if budget != "default":
        command += ["--prefill-tokens", budget]
    server, port, metrics = h3serve_process.start(command, args.start_timeout)
    return server, port, metrics, command


def step_stats(before, after):
    def delta(name):
        return after.get(name, 0) - before.get(name, 0)
    steps = delta("h3_engine_iterations_total")
    decode = delta("h3_decode_batch_size_count")
    prefill = delta("h3_prefill_batch_tokens_count")
    # Wall time per step (forward, sampling, the wait for the tokens) and the
    # engine loop's own time per iteration, the device idle meanwhile.
    step_s, step_n = delta("h3_engine_step_seconds_sum"), delta("h3_engine_step_seconds_count")
    host_s, host_n = delta("h3_engine_host_seconds_sum"), delta("h3_engine_host_seconds_count")
    return dict(
        engine_steps=steps,
        mean_decode_batch=delta("h3_decode_batch_size_sum") / decode if decode else None,
        mean_prefill_tokens_per_step=(delta("h3_prefill_batch_tokens_sum") / prefill
                                      if prefill else None),
        mean_prefill_sequences_per_step=(delta("h3_prefill_batch_sequences_sum") / prefill
                                         if prefill else None),
        mean_step_ms=1000 * step_s / step_n if step_n else None,
        mean_host_ms=1000 * host_s / host_n if host_n else None,
        host_fraction=host_s / (host_s + step_s) if step_s else None)


def served(port, metrics, rep):
    out = f"/tmp/h3-serve-bench/served_{os.getpid()}_{rep}.json"
    before = h3serve_process.scrape(metrics)
    subprocess.run(
        [binary("clients", "h3"), "bench", "--server", f"127.0.0.1:{port}",
         "--max-concurrency", str(args.concurrency), "--num-prompts", str(args.num_prompts),
         "--input-len", str(args.input_len), "--output-len", str(args.output_len),
         "--seed", str(rep), "--json", out],
        check=True, capture_output=True, text=True, timeout=args.client_timeout)
    after = h3serve_process.scrape(metrics)
    with open(out) as f:
        results = json.load(f)["results"]
    os.remove(out)
    assert results["requests"]["failed"] == 0, results["requests"]
    return dict(tokens_per_s=results["output_throughput"], duration_s=results["duration_s"],
                itl_ms=results["itl_ms"], ttft_ms=results["ttft_ms"],
                server=step_stats(before, after))


def measure(model, budget):
    server, port, metrics, command = start_server(model, budget)
    runs = []
    try:
        # One warm-up request of the same shape.
        subprocess.run([binary("clients", "h3"), "bench", "--server", f"127.0.0.1:{port}",
                        "--num-prompts", "1", "--input-len", str(args.input_len),
                        "--output-len", "4"], check=True, capture_output=True,
                       timeout=args.client_timeout)
        for rep in range(args.reps):
            o = offline(model)
            s = served(port, metrics, rep)
            runs.append(dict(offline=o, served=s))
            log(f"budget {budget}, rep {rep}: served {s['tokens_per_s']:.1f} tok/s "
                f"(ITL median {s['itl_ms']['median']:.1f} ms, p99 {s['itl_ms']['p99']:.1f} ms), "
                f"offline {o['tokens_per_s']:.1f} tok/s")
    finally:
        h3serve_process.stop(server)
    served_tps = statistics.median(r["served"]["tokens_per_s"] for r in runs)
    offline_tps = statistics.median(r["offline"]["tokens_per_s"] for r in runs)
    itl_median = statistics.median(r["served"]["itl_ms"]["median"] for r in runs)
    itl_p99 = statistics.median(r["served"]["itl_ms"]["p99"] for r in runs)
    ttft_median = statistics.median(r["served"]["ttft_ms"]["median"] for r in runs)
    host = [r["served"]["server"]["host_fraction"] for r in runs
            if r["served"]["server"]["host_fraction"] is not None]
    return dict(prefill_tokens=budget, server_command=" ".join(command[1:]),
                summary=dict(served_tokens_per_s=served_tps,
                             offline_tokens_per_s=offline_tps,
                             served_over_offline=served_tps / offline_tps,
                             itl_median_ms=itl_median, itl_p99_ms=itl_p99,
                             itl_p99_over_median=itl_p99 / itl_median,
                             ttft_median_ms=ttft_median,
                             host_fraction=statistics.median(host) if host else None),
                runs=runs)


def main():
    model = model_path()
    os.makedirs("/tmp/h3-serve-bench", exist_ok=True)
    budgets = [measure(model, b.strip()) for b in args.budgets.split(",")]
    report.emit(
        "serve_vs_offline", args.out,
        machine=report.machine(**({} if args.device == "cpu" else dict(gpu=report.gpu()))),
        threads=args.threads,
        device=args.device, dtype=dtype(), model=dict(file=os.path.basename(model), shape=args.shape
                                       if not args.model else None),
        work=dict(concurrency=args.concurrency, num_prompts=args.num_prompts,
                  input_len=args.input_len, output_len=args.output_len),
        method="per --prefill-tokens value, a server; offline (h3_engine_bench table4, "
               "batch = concurrency) and served (h3 bench against h3serve) alternate, "
               "offline first, --reps times; medians compared; the client shares the "
               "machine",
        budgets=budgets)


if __name__ == "__main__":
    main()
