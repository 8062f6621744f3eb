#!/usr/bin/env python3
"""One libFuzzer run of scripts/fuzz.sh as JSON.

  fuzz_summary.py TARGET LOG EXIT_CODE SECONDS RUNS OUT_JSON

Reads libFuzzer's output (-print_final_stats=1): the last status line
("#N DONE cov: C ft: F corp: K/..."), the final stats (stat::number_of_executed_units,
stat::average_exec_per_sec) and any crash report.
"""
import json
import os
import platform
import re
import subprocess
import sys


def stat(text, name):
    m = re.search(r"^stat::%s:\s+(\d+)" % name, text, re.M)
    return int(m.group(1)) if m else None


def main():
    target, log, code, seconds, runs, out = sys.argv[1:]
    text = open(log, errors="replace").read()
    status = re.findall(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/", text, re.M)
    last = status[-1] if status else (None, None, None, None)
    crashes = re.findall(r"^(==\d+==ERROR: .*|SUMMARY: .*|.*deadly signal.*)$", text, re.M)
    artifacts = re.findall(r"Test unit written to (\S+)", text)
    clang = subprocess.run(["clang++", "--version"], capture_output=True, text=True).stdout
    git = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True).stdout.strip()
    result = {
        "target": target,
        "commit": git("rev-parse", "HEAD"),
        "uncommitted_changes": git("status", "--porcelain", "--untracked-files=no") != "",
        "machine": {"cpus": os.cpu_count(), "system": platform.platform(),
                    "compiler": clang.splitlines()[0] if clang else ""},
        "limit_seconds": int(seconds), "limit_runs": int(runs),
        "execs": stat(text, "number_of_executed_units"),
        "execs_per_second": stat(text, "average_exec_per_sec"),
        "cov": int(last[1]) if last[1] else None,
        "ft": int(last[2]) if last[2] else None,
        "corpus": int(last[3]) if last[3] else None,
        "peak_rss_mb": stat(text, "peak_rss_mb"),
        "exit_code": int(code),
        "crashes": len(artifacts),
        "crash_reports": crashes[:5],
        "crash_inputs": [os.path.basename(a) for a in artifacts],
    }
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
