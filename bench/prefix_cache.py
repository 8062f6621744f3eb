#!/usr/bin/python3
"""The prefix cache's effect on time to first token, in one run: h3serve with
and without the cache on the same shared-prefix work, what a snapshot costs
against the prefill it saves, and (with --multi-turn) the hits of a
multi-turn conversation turn by turn.

  /usr/bin/python3 bench/prefix_cache.py [--model MODEL.h3 | --shape h3-125m]
      [--prefix-len 921] [--num-prefixes 4] [--input-len 103]
      [--output-len 16] [--num-prompts 24] [--concurrency 4] [--slots 8]
      [--cache-memory 2G] [--reps 2] [--multi-turn 8] [--threads 2]
      [--start-timeout 300] [--client-timeout 900] [--out FILE.json]

served:  per repetition, h3serve with --prefix-cache-memory --cache-memory,
         then with 0 (a server started for each), each loaded by `h3 bench`
         with --prefix-len/--num-prefixes/--input-len (prompts of prefix +
         input tokens, prompt i starting with prefix i % num_prefixes),
         --max-concurrency --concurrency; TTFT median and p99 of each, their
         ratio, and the server's prefix-cache counters.
costs:   h3_engine_bench --what prefix-cache --prompt-len prefix + input:
         prefill, snapshot and restore per token and bytes per snapshot.
turns:   with --multi-turn N (if this h3 has the flag), `h3 bench
         --multi-turn N` against the cached server: per turn, cached prompt
         tokens against the previous turn's prompt + answer.
Without --model, a random model of --shape is written (h3_engine_bench
--what write-random) into /tmp/h3-serve-bench/.
"""
import argparse
import json
import os
import statistics
import subprocess

import h3serve_process
import report
from h3serve_process import log

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--model")
ap.add_argument("--shape", default="h3-125m")
ap.add_argument("--prefix-len", type=int, default=921)
ap.add_argument("--num-prefixes", type=int, default=4)
ap.add_argument("--input-len", type=int, default=103)
ap.add_argument("--output-len", type=int, default=16)
ap.add_argument("--num-prompts", type=int, default=24)
ap.add_argument("--concurrency", type=int, default=4)
ap.add_argument("--slots", type=int, default=8)
ap.add_argument("--cache-memory", default="2G")
ap.add_argument("--reps", type=int, default=2)
ap.add_argument("--multi-turn", type=int, default=0)
ap.add_argument("--turn-input-len", type=int, default=64,
                help="new tokens per turn with --multi-turn")
ap.add_argument("--start-timeout", type=float, default=300)
ap.add_argument("--client-timeout", type=float, default=900)
report.add_server_options(ap)
args = ap.parse_args()


def binary(*parts):
    return os.path.join(args.build, *parts)


def model_path():
    return args.model or h3serve_process.random_model(args.build, args.shape,
                                                      args.client_timeout)


def start(model, memory):
    command = [binary("server", "h3serve"), "--model", model, "--host", "127.0.0.1",
               "--port", "0", "--metrics-port", "0", "--http-port", "-1",
               "--slots", str(args.slots), "--device", "cpu",
               "--threads", str(args.threads), "--prefix-cache-memory", memory]
    server, port, metrics = h3serve_process.start(command, args.start_timeout)
    return server, port, metrics, command


def bench(port, extra, out):
    subprocess.run([binary("clients", "h3"), "bench", "--server", f"127.0.0.1:{port}",
                    "--json", out] + extra,
                   check=True, capture_output=True, text=True, timeout=args.client_timeout)
    with open(out) as f:
        result = json.load(f)
    os.remove(out)
    return result


def cache_counters(before, after):
    names = ["h3_prefix_cache_queries_total", "h3_prefix_cache_hit_tokens_total",
             "h3_prefix_cache_evictions_total"]
    out = {n: after.get(n, 0) - before.get(n, 0) for n in names}
    out["h3_prefix_cache_snapshots"] = after.get("h3_prefix_cache_snapshots", 0)
    out["h3_prefix_cache_bytes"] = after.get("h3_prefix_cache_bytes", 0)
    return out


def served(model, memory, rep):
    server, port, metrics, command = start(model, memory)
    try:
        before = h3serve_process.scrape(metrics)
        result = bench(port, [
            "--max-concurrency", str(args.concurrency),
            "--num-prompts", str(args.num_prompts), "--num-warmups", "0",
            "--prefix-len", str(args.prefix_len), "--num-prefixes", str(args.num_prefixes),
            "--input-len", str(args.input_len), "--output-len", str(args.output_len),
            "--seed", str(rep)], f"/tmp/h3-serve-bench/prefix_{os.getpid()}.json")
        after = h3serve_process.scrape(metrics)
    finally:
        h3serve_process.stop(server)
    r = result["results"]
    assert r["requests"]["failed"] == 0, r["requests"]
    log(f"rep {rep}, cache {memory}: TTFT median {r['ttft_ms']['median']:.0f} ms, "
        f"p99 {r['ttft_ms']['p99']:.0f} ms")
    return dict(server_command=" ".join(command[1:]), ttft_ms=r["ttft_ms"],
                output_tokens_per_s=r["output_throughput"], duration_s=r["duration_s"],
                prefix_cache=cache_counters(before, after))


def costs(model):
    out = subprocess.run(
        [binary("bench", "h3_engine_bench"), "--model", model, "--what", "prefix-cache",
         "--device", "cpu", "--prompt-len", str(args.prefix_len + args.input_len),
         "--reps", "3"],
        check=True, capture_output=True, text=True, timeout=args.client_timeout,
        env=dict(os.environ, H3_NUM_THREADS=str(args.threads))).stdout
    result = json.loads(out)
    return {k: result[k] for k in ("state_bytes", "kv_bytes_per_token", "prefixes")}


def turns(model):
    help_text = subprocess.run([binary("clients", "h3"), "bench", "--help"],
                               capture_output=True, text=True).stdout
    if "--multi-turn" not in help_text:
        return dict(skipped="this h3 bench has no --multi-turn")
    server, port, metrics, command = start(model, args.cache_memory)
    try:
        result = bench(port, [
            "--multi-turn", str(args.multi_turn), "--max-concurrency", str(args.concurrency),
            "--num-prompts", str(args.concurrency), "--num-warmups", "0",
            "--input-len", str(args.turn_input_len), "--output-len", str(args.output_len),
            "--temperature", "0"], f"/tmp/h3-serve-bench/turns_{os.getpid()}.json")
    finally:
        h3serve_process.stop(server)
    return dict(server_command=" ".join(command[1:]), conversations=args.concurrency,
                turns=result["turns"], totals=result["results"])


def main():
    model = model_path()
    os.makedirs("/tmp/h3-serve-bench", exist_ok=True)
    runs = []
    for rep in range(args.reps):
        runs.append(dict(cached=served(model, args.cache_memory, rep),
                         uncached=served(model, "0", rep)))
    median = {side: statistics.median(r[side]["ttft_ms"]["median"] for r in runs)
              for side in ("cached", "uncached")}
    summary = dict(ttft_median_ms_cached=median["cached"],
                   ttft_median_ms_uncached=median["uncached"],
                   ttft_median_uncached_over_cached=median["uncached"] / median["cached"])
    log(f"TTFT median: {median['uncached']:.0f} ms without, {median['cached']:.0f} ms "
        f"with the cache ({summary['ttft_median_uncached_over_cached']:.1f}x)")
    report.emit(
        "prefix_cache", args.out, machine=report.machine(), threads=args.threads,
        model=dict(file=os.path.basename(model), shape=None if args.model else args.shape),
        work=dict(prefix_len=args.prefix_len, num_prefixes=args.num_prefixes,
                  input_len=args.input_len, output_len=args.output_len,
                  num_prompts=args.num_prompts, concurrency=args.concurrency,
                  slots=args.slots, cache_memory=args.cache_memory),
        method="per repetition a server with the cache, then one without, each loaded by "
               "h3 bench with the same seed; medians over repetitions compared; the "
               "client shares the machine",
        summary=summary, runs=runs, costs=costs(model),
        multi_turn=turns(model) if args.multi_turn > 0 else None)


if __name__ == "__main__":
    main()
