#!/usr/bin/python3
"""The HTTP front end's overhead against gRPC: one h3serve on the embedded
default model (h3-kjv), measured by `h3 bench` at --concurrency streams with
--backend grpc and --backend openai in turn, --reps times each, alternating
so that drift on a shared machine hits both alike.

  /usr/bin/python3 bench/http_overhead.py [--concurrency 32] [--reps 5]
      [--num-prompts 128] [--input-len 128] [--output-len 64]
      [--build build] [--threads N] [--out FILE]

Prints (and with --out writes) JSON: each run's throughput and latency
medians by front end, their medians over the runs, and the ratios HTTP /
gRPC (output tok/s below 1, or TTFT / ITL / server CPU above 1, are HTTP's
cost; the server's CPU seconds are read from /proc around each run). Each
run's `h3 bench --json` report, less its per-request records, is kept under
"runs".
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import report

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--concurrency", type=int, default=32)
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--num-prompts", type=int, default=128)
ap.add_argument("--input-len", type=int, default=128)
ap.add_argument("--output-len", type=int, default=64)
report.add_server_options(ap)
args = ap.parse_args()

KEYS = ["output_throughput", "request_throughput", "duration_s",
        "client_cpu_s"]
LATENCIES = ["ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def start_server():
    server = subprocess.Popen(
        [os.path.join(args.build, "server", "h3serve"), "--host", "127.0.0.1",
         "--port", "0", "--http-port", "0", "--metrics-port", "-1",
         "--slots", str(args.concurrency), "--threads", str(args.threads)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in server.stdout:
        if line.startswith("listening:"):
            fields = dict(f.split("=", 1) for f in line.split()[1:])
            return server, fields["grpc"], fields["http"]
    raise RuntimeError("h3serve did not start")


def server_cpu_s(pid):
    """User + system CPU seconds of the server process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench(grpc, http, backend, out):
    subprocess.run(
        [os.path.join(args.build, "clients", "h3"), "bench", "--server", grpc,
         "--backend", backend, "--base-url", http,
         "--num-prompts", str(args.num_prompts),
         "--max-concurrency", str(args.concurrency),
         "--input-len", str(args.input_len), "--output-len", str(args.output_len),
         "--json", out],
        check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def summary(result):
    r = result["results"]
    s = {k: r[k] for k in KEYS}
    for k in LATENCIES:
        s[k + "_median"] = r[k]["median"]
    s["failed"] = r["requests"]["failed"]
    return s


server, grpc_address, http_url = start_server()
runs = {"grpc": [], "openai": []}
reports = []
try:
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            for backend in ("grpc", "openai"):
                cpu = server_cpu_s(server.pid)
                result = bench(grpc_address, http_url, backend,
                               os.path.join(tmp, f"{backend}{rep}.json"))
                runs[backend].append(summary(result))
                # The warm-up request is in it too: the same for both.
                runs[backend][-1]["server_cpu_s"] = server_cpu_s(server.pid) - cpu
                result.pop("per_request", None)  # keep the file small
                reports.append(dict(backend=backend, rep=rep, report=result))
                log(backend, rep, runs[backend][-1]["output_throughput"], "tok/s")
finally:
    server.terminate()
    server.wait()

medians = {b: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
           for b, rs in runs.items()}
ratio = {k: medians["openai"][k] / medians["grpc"][k]
         for k in medians["grpc"] if medians["grpc"][k]}
report.emit("http_overhead", args.out,
            machine=report.machine(threads=args.threads),
            model="h3-kjv (embedded)",
            options=vars(args),
            medians=medians,
            http_over_grpc=ratio,
            by_run=runs,
            runs=reports)
