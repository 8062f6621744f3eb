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
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip() != ""
    return dict(cpu=cpu, cores=os.cpu_count(), platform=platform.platform(),
                commit=commit, dirty=dirty, **extra)


def emit(benchmark, out_path, **fields):
    """Prints the report as JSON, and writes it to out_path when given."""
    report = dict(benchmark=benchmark,
                  date=datetime.datetime.now().isoformat(timespec="seconds"), **fields)
    text = json.dumps(report, indent=1)
    print(text)
    if out_path:
        with open(out_path, "w") as fh:
            fh.write(text + "\n")
