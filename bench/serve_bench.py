#!/usr/bin/python3
"""The server under concurrent streams vs the engine offline: tokens/s at
1, 8 and 32 concurrent Generate streams, with client-side time to first
token and inter-token latency, next to h3_engine_bench's batched decode at
the same batch size (the engine loop's ceiling: no prefill, no sampling, no
gRPC).

For each --streams N (after one warm-up request):
  1. N threads each open a greedy Generate stream at once (a random prompt
     of --prompt-len ids, exactly --max-tokens new tokens, eos ignored);
     tokens/s is all generated tokens over the wall time from the start to
     the last stream's end (prefill included);
  2. h3_engine_bench --what decode --batch N with the same context and
     steps; tokens/s from its best repetition.

  /usr/bin/python3 bench/serve_bench.py --model MODEL.h3 [--streams 1,8,32]
      [--max-tokens 32] [--prompt-len 16] [--threads 2] [--out FILE]

MODEL.h3 is any model file, e.g. the random H3-125M-shaped one that
bench/engine_bench.py leaves in /tmp/h3-engine-bench/. Needs python3-grpcio,
python3-protobuf and a build with h3serve, bench/h3_engine_bench and the
Python stubs (build/python).
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time

import report

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--model", required=True)
ap.add_argument("--streams", default="1,8,32")
ap.add_argument("--max-tokens", type=int, default=32)
ap.add_argument("--prompt-len", type=int, default=16)
report.add_server_options(ap)
args = ap.parse_args()
grpc, pb, pb_grpc = report.grpc_api(args.build)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def start_server(slots):
    server = subprocess.Popen(
        [os.path.join(args.build, "server", "h3serve"), "--model", args.model,
         "--host", "127.0.0.1", "--port", "0", "--metrics-port", "-1", "--http-port", "-1",
         "--slots", str(slots), "--threads", str(args.threads)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in server.stdout:
        if line.startswith("listening: grpc="):
            port = int(line.split()[1].rsplit(":", 1)[1])
            return server, port
    raise RuntimeError("h3serve did not start")


def one_stream(stub, prompt, barrier, out):
    request = pb.GenerateRequest(
        token_ids=pb.TokenIds(ids=prompt),
        sampling=pb.SamplingParams(temperature=0),
        stop=pb.StopConditions(max_new_tokens=args.max_tokens, ignore_eos=True))
    barrier.wait()
    start = time.perf_counter()
    arrivals, tokens = [], 0
    for message in stub.Generate(request):
        if message.token_ids:
            arrivals.append(time.perf_counter())
            tokens += len(message.token_ids)
    out.append(dict(start=start, arrivals=arrivals, tokens=tokens))


def served(stub, n, rng):
    barrier = threading.Barrier(n)
    results = []
    threads = [threading.Thread(target=one_stream, args=(
        stub, [rng.randrange(1000) for _ in range(args.prompt_len)], barrier, results))
        for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    start = min(r["start"] for r in results)
    end = max(r["arrivals"][-1] for r in results)
    tokens = sum(r["tokens"] for r in results)
    assert tokens == n * args.max_tokens, tokens
    ttft = [r["arrivals"][0] - r["start"] for r in results]
    itl = [b - a for r in results for a, b in zip(r["arrivals"], r["arrivals"][1:])]
    q = statistics.quantiles
    return dict(tokens=tokens, wall_s=end - start, tokens_per_s=tokens / (end - start),
                ttft_s=dict(median=statistics.median(ttft), max=max(ttft)),
                itl_s=dict(median=statistics.median(itl), p99=q(itl, n=100)[98])
                if len(itl) >= 2 else None)


def offline(n):
    out = subprocess.run(
        [os.path.join(args.build, "bench", "h3_engine_bench"), "--model", args.model,
         "--what", "decode", "--batch", str(n), "--decode-context", str(args.prompt_len),
         "--decode-steps", str(args.max_tokens), "--reps", "2"],
        check=True, capture_output=True, text=True,
        env=dict(os.environ, H3_NUM_THREADS=str(args.threads))).stdout
    seconds = min(json.loads(out)["decode_s"])
    return dict(tokens_per_s=n * args.max_tokens / seconds, step_s=seconds / args.max_tokens)


def main():
    streams = [int(s) for s in args.streams.split(",")]
    server, port = start_server(max(streams))
    try:
        stub = pb_grpc.TextGenerationStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        info = stub.GetModelInfo(pb.GetModelInfoRequest())
        rng = random.Random(0)
        served(stub, 1, rng)  # warm-up
        rows = []
        for n in streams:
            s = served(stub, n, rng)
            o = offline(n)
            rows.append(dict(streams=n, served=s, offline_decode=o,
                             served_over_offline=s["tokens_per_s"] / o["tokens_per_s"]))
            log(f"{n} streams: served {s['tokens_per_s']:.1f} tok/s, offline decode "
                f"{o['tokens_per_s']:.1f} tok/s")
    finally:
        server.terminate()
        server.wait()
    report.emit("serve_cpu", args.out, machine=report.machine(), threads=args.threads,
                model=dict(file=os.path.basename(args.model), d_model=info.config.d_model,
                           n_layer=info.config.n_layer),
                prompt_len=args.prompt_len, max_tokens=args.max_tokens,
                method="one run per stream count after a warm-up request; the client "
                       "shares the machine with the server; offline is the best of 2 "
                       "repetitions of h3_engine_bench decode",
                results=rows)


if __name__ == "__main__":
    main()
