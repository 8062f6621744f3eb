#!/usr/bin/env python3
"""Generates text through a running h3serve: an example gRPC client.

    h3_client.py --server localhost:50051 "Once upon a time" --max-tokens 32
    h3_client.py --prompt-ids 1,2,3 --greedy --json

Streams the text to stdout as it arrives (the Generate call); --json prints
one object at the end instead, shaped like `h3 generate --json`. Needs the
stubs that the build generates (target h3_python_stubs, into build/python):
pass their directory with --stubs or $H3_PYTHON_STUBS.
"""

import argparse
import json
import os
import sys


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("prompt", nargs="?", help="the prompt as text")
    p.add_argument("--prompt-ids", metavar="IDS",
                   help="the prompt as token ids: 1,2,3")
    p.add_argument("--server", default="localhost:50051", metavar="HOST:PORT",
                   help="h3serve address (default: %(default)s)")
    p.add_argument("--api-key", default=os.environ.get("H3_API_KEY"),
                   metavar="KEY",
                   help="API key of h3serve --api-key-file "
                        "(default: $H3_API_KEY)")
    p.add_argument("--tls-ca", metavar="PEM",
                   help="connect over TLS, trusting this CA file")
    p.add_argument("--max-tokens", type=int, metavar="N",
                   help="tokens to generate at most")
    p.add_argument("--greedy", action="store_true", help="temperature 0")
    p.add_argument("--temperature", type=float, metavar="T")
    p.add_argument("--top-k", type=int, metavar="K")
    p.add_argument("--top-p", type=float, metavar="P")
    p.add_argument("--seed", type=int, metavar="S",
                   help="makes sampling reproducible")
    p.add_argument("--stop", action="append", default=[], metavar="TEXT",
                   help="stop at this text, which is left out (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--stubs", default=os.environ.get("H3_PYTHON_STUBS"),
                   metavar="DIR",
                   help="directory of the generated h3/v1 stubs "
                        "(default: $H3_PYTHON_STUBS)")
    args = p.parse_args()
    if args.prompt is None and args.prompt_ids is None:
        p.error("give a PROMPT or --prompt-ids 1,2,3")
    if args.prompt is not None and args.prompt_ids is not None:
        p.error("give a PROMPT or --prompt-ids, not both")
    if args.greedy and args.temperature is not None:
        p.error("--greedy excludes --temperature")
    if args.prompt_ids is not None:
        try:
            args.prompt_ids = [int(i) for i in args.prompt_ids.split(",")
                               if i.strip()]
        except ValueError:
            p.error(f"--prompt-ids: {args.prompt_ids!r} is not a list of ids")
    return args


def build_request(pb, args):
    """A GenerateRequest with only the fields given on the command line."""
    request = pb.GenerateRequest()
    if args.prompt_ids is not None:
        request.token_ids.ids.extend(args.prompt_ids)
    else:
        request.text = args.prompt.encode()  # a bytes field: UTF-8
    sampling = request.sampling
    if args.greedy:
        sampling.temperature = 0
    if args.temperature is not None:
        sampling.temperature = args.temperature
    if args.top_k is not None:
        sampling.top_k = args.top_k
    if args.top_p is not None:
        sampling.top_p = args.top_p
    if args.seed is not None:
        sampling.seed = args.seed
    if args.max_tokens is not None:
        request.stop.max_new_tokens = args.max_tokens
    request.stop.stop_strings.extend(s.encode() for s in args.stop)
    return request


def result_json(pb, ids, text, last):
    """The h3 generate --json object, from the stream's ids, text and last
    message (which carries finish_reason, the matched stop and usage)."""
    reason = pb.FinishReason.Name(last.finish_reason)
    out = {
        "request_id": last.request_id,
        "generated_ids": ids,
        "text": text,
        "finish_reason": reason.removeprefix("FINISH_REASON_").lower(),
    }
    matched = last.WhichOneof("matched_stop")
    if matched:
        out[matched] = getattr(last, matched)
    u = last.usage
    out["usage"] = {
        "prompt_tokens": u.prompt_tokens,
        "generated_tokens": u.generated_tokens,
        "cached_prompt_tokens": u.cached_prompt_tokens,
        "queue_seconds": u.queue_seconds,
        "time_to_first_token_seconds": u.time_to_first_token_seconds,
        "total_seconds": u.total_seconds,
    }
    return out


def main():
    args = parse_args()
    if args.stubs:
        sys.path.insert(0, args.stubs)
    try:
        import grpc
        from h3.v1 import text_generation_pb2 as pb
        from h3.v1 import text_generation_pb2_grpc as pb_grpc
    except ImportError as e:
        print(f"h3_client: {e}: install python3-grpcio and python3-protobuf, "
              "build the target h3_python_stubs and pass its directory "
              "(build/python) with --stubs or $H3_PYTHON_STUBS",
              file=sys.stderr)
        return 1

    if args.tls_ca:
        with open(args.tls_ca, "rb") as f:
            credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
        channel = grpc.secure_channel(args.server, credentials)
    else:
        channel = grpc.insecure_channel(args.server)
    metadata = [("authorization", "Bearer " + args.api_key)] if args.api_key else None
    stub = pb_grpc.TextGenerationStub(channel)
    call = stub.Generate(build_request(pb, args), metadata=metadata)
    ids, text, last = [], "", pb.GenerateResponse()
    try:
        for piece in call:
            ids.extend(piece.token_ids)
            text += piece.text
            last = piece
            if not args.json:
                print(piece.text, end="", flush=True)
    except KeyboardInterrupt:
        call.cancel()
        print("\nh3_client: interrupted, the call was cancelled",
              file=sys.stderr)
        return 130
    except grpc.RpcError as e:
        print(f"h3_client: {e.code().name}: {e.details()}", file=sys.stderr)
        return 1
    if last.finish_reason == pb.FINISH_REASON_UNSPECIFIED:
        print("\nh3_client: the stream ended without a finish reason",
              file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result_json(pb, ids, text, last)))
    elif not text and ids:
        print(json.dumps(ids))  # a model without a tokenizer sends no text
    else:
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
