#!/usr/bin/env python3
"""H3PrefillCuda on the GPU, fused FlashConv against the cuFFT path and the
HBM floor: runs h3_flashconv_bench and writes its JSON to
bench/results/flashconv_<device>.json (e.g. flashconv_nvidia_h100_80gb_hbm3).

  bench/flashconv_bench.py [--build DIR] [--no-build] [--out FILE]
      [-- h3_flashconv_bench options, e.g. --lengths 1024,4096 --types fp16]

Builds the target first (cmake --build DIR --target h3_flashconv_bench;
DIR defaults to build-gpu when it exists, else build), runs it with the
options after `--` (see bench/flashconv_bench.cc; give --out to this script,
not after `--`), passes its table through, and writes the report. Exits with
the benchmark's status: 1 on a CUDA failure, 2 without a CUDA device.

The commit in the report is the one the binary was built from
(base/build_info.h); without a git checkout (the GPU machine) set
H3_GIT_COMMIT before building. Standard library only: see
docs/gpu-machine.md for running it there.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="build directory (default: build-gpu if present, else build)")
    ap.add_argument("--no-build", action="store_true", help="run the binary as built")
    ap.add_argument("--out", help="write the JSON here instead of bench/results/")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER,
                    help="options for h3_flashconv_bench, after --")
    args = ap.parse_args()
    bench_args = args.bench_args[1:] if args.bench_args[:1] == ["--"] else args.bench_args
    build = args.build or next((os.path.join(ROOT, d) for d in ("build-gpu", "build")
                                if os.path.isdir(os.path.join(ROOT, d))),
                               os.path.join(ROOT, "build"))
    if not args.no_build:
        subprocess.run(["cmake", "--build", build, "--target", "h3_flashconv_bench"],
                       check=True, stdout=sys.stderr)
    binary = os.path.join(build, "bench", "h3_flashconv_bench")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "flashconv.json")
        rc = subprocess.run([binary, *bench_args, "--out", path]).returncode
        if rc != 0:
            sys.exit(rc)
        with open(path) as f:
            report = json.load(f)
    report["script_command"] = " ".join(["bench/flashconv_bench.py", *sys.argv[1:]])
    slug = re.sub(r"[^a-z0-9]+", "_", report["device"]["name"].lower()).strip("_")
    out = args.out or os.path.join(ROOT, "bench", "results", f"flashconv_{slug}.json")
    with open(out, "w") as f:
        f.write(json.dumps(report, indent=1) + "\n")
    print(f"flashconv_bench.py: wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
