"""A benchmark's JSON report: what it ran on (CPU, cores, platform, the
commit measured) and the writing of the report."""
import datetime
import json
import os
import platform
import subprocess

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def machine(**extra):
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip() != ""
    except OSError:  # no git (the GPU machine)
        commit, dirty = "", None
    if not commit:
        # Outside a checkout (scripts/gpu-check.sh sets it from the archive).
        commit, dirty = os.environ.get("H3_GIT_COMMIT", "unknown"), None
    return dict(cpu=cpu, cores=os.cpu_count(), platform=platform.platform(),
                commit=commit, dirty=dirty, **extra)


def gpu():
    """The GPUs nvidia-smi lists (name, driver, memory), or None without it."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines() if out.returncode == 0 else None


def emit(benchmark, out_path, **fields):
    """Prints the report as JSON, and writes it to out_path when given."""
    report = dict(benchmark=benchmark,
                  date=datetime.datetime.now().isoformat(timespec="seconds"), **fields)
    text = json.dumps(report, indent=1)
    print(text)
    if out_path:
        with open(out_path, "w") as fh:
            fh.write(text + "\n")


def add_server_options(parser):
    """--threads, --build and --out, which the server benchmarks share."""
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", help="also write the JSON here")


def grpc_api(build):
    """(grpc, pb, pb_grpc): gRPC and the h3.v1 stubs the build generated
    into BUILD/python (python3-grpcio, python3-protobuf)."""
    import sys
    sys.path.insert(0, os.path.join(build, "python"))
    import grpc
    from h3.v1 import text_generation_pb2 as pb
    from h3.v1 import text_generation_pb2_grpc as pb_grpc
    return grpc, pb, pb_grpc
