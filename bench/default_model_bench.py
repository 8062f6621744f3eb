#!/usr/bin/python3
"""The default model through the server, as a newcomer meets it: h3serve
started with no flags (the embedded h3-kjv), on this machine's cores.

  1. startup: seconds from launching h3serve to its first complete answer
     (a 1-token Generate, retried every 5 ms until the port answers);
  2. prefill: a prompt of --prompt-len tokens of held-out Bible text (cut
     from a fixed passage, tokenized by the server) with max_new_tokens 1;
     prompt tokens / client-side time to first token;
  3. decode: one greedy stream of --max-tokens tokens (eos ignored);
     (tokens - 1) / (time of the last token - time of the first).
Each of 2 and 3 runs --reps times after one warm-up; the median is reported.

  /usr/bin/python3 bench/default_model_bench.py [--prompt-len 1024]
      [--max-tokens 256] [--reps 5] [--threads N] [--out FILE]

Needs python3-grpcio, python3-protobuf, bible-kjv and a build with h3serve
and the Python stubs (build/python).
"""
import argparse
import os
import statistics
import subprocess
import time

import report

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--prompt-len", type=int, default=1024)
ap.add_argument("--max-tokens", type=int, default=256)
ap.add_argument("--reps", type=int, default=5)
report.add_server_options(ap)
args = ap.parse_args()
grpc, pb, pb_grpc = report.grpc_api(args.build)

PORT = 50551


def generate(stub, request):
    """(client seconds to the first token, arrival times, tokens)."""
    start = time.perf_counter()
    arrivals, tokens = [], 0
    for message in stub.Generate(request):
        if message.token_ids:
            arrivals.append(time.perf_counter())
            tokens += len(message.token_ids)
    return arrivals[0] - start, arrivals, tokens


def startup():
    start = time.perf_counter()
    server = subprocess.Popen(
        [os.path.join(args.build, "server", "h3serve"), "--host", "127.0.0.1",
         "--port", str(PORT), "--metrics-port", "-1", "--http-port", "-1",
         "--threads", str(args.threads)],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    request = pb.GenerateRequest(text="And God said".encode(),
                                 sampling=pb.SamplingParams(temperature=0),
                                 stop=pb.StopConditions(max_new_tokens=1))
    while True:
        # A fresh channel per try: a channel that failed to connect waits out
        # gRPC's reconnect backoff (1 s and more) before it tries again.
        channel = grpc.insecure_channel(f"127.0.0.1:{PORT}")
        stub = pb_grpc.TextGenerationStub(channel)
        try:
            generate(stub, request)
            return server, stub, time.perf_counter() - start
        except grpc.RpcError as e:
            channel.close()
            if e.code() != grpc.StatusCode.UNAVAILABLE or server.poll() is not None:
                raise
            time.sleep(0.005)


def main():
    server, stub, startup_s = startup()
    try:
        passage = subprocess.run(["bible", "-l0", "ps119:1-176"], check=True,
                                 capture_output=True, text=True).stdout
        ids = list(stub.Tokenize(pb.TokenizeRequest(text=passage.encode())).token_ids)
        assert len(ids) >= args.prompt_len, (len(ids), args.prompt_len)
        prompt = pb.TokenIds(ids=ids[:args.prompt_len])
        prefill_req = pb.GenerateRequest(
            token_ids=prompt, sampling=pb.SamplingParams(temperature=0),
            stop=pb.StopConditions(max_new_tokens=1))
        decode_req = pb.GenerateRequest(
            text="And God said".encode(), sampling=pb.SamplingParams(temperature=0),
            stop=pb.StopConditions(max_new_tokens=args.max_tokens, ignore_eos=True))
        prefill, decode = [], []
        for rep in range(args.reps + 1):
            ttft, _, _ = generate(stub, prefill_req)
            _, arrivals, tokens = generate(stub, decode_req)
            assert tokens == args.max_tokens, tokens
            if rep > 0:  # the first is a warm-up
                prefill.append(args.prompt_len / ttft)
                decode.append((tokens - 1) / (arrivals[-1] - arrivals[0]))
    finally:
        server.terminate()
        server.wait()
    report.emit("default_model_serve", args.out,
                machine=report.machine(threads=args.threads),
                model="h3-kjv (embedded)",
                options=dict(prompt_len=args.prompt_len, max_tokens=args.max_tokens,
                             reps=args.reps),
                startup_to_first_answer_s=startup_s,
                prefill_tokens_per_s=dict(median=statistics.median(prefill),
                                          all=prefill),
                decode_tokens_per_s=dict(median=statistics.median(decode),
                                         all=decode))


if __name__ == "__main__":
    main()
