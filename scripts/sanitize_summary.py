#!/usr/bin/env python3
"""Summarises one run of scripts/sanitize.sh as JSON.

  sanitize_summary.py KIND TEST_LOG REPORTS_DIR BUILD_S TEST_S OUT_JSON

TEST_LOG is the test binaries' output, each ended by an "== exit CODE NAME"
line; REPORTS_DIR holds the sanitizer report
files of every process (log_path). Exits 1 when a test failed or a sanitizer
reported anything.
"""
import json
import os
import platform
import re
import subprocess
import sys


def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True).stdout.strip()


def count_tests(text):
    """(binaries, tests, failed, failed binaries) from the gtest output."""
    binaries = re.findall(r"^== exit -?\d+ (\S+)$", text, re.M)
    tests = sum(int(n) for n in re.findall(r"^\[==========\] (\d+) tests? from .* ran", text, re.M))
    failed = sum(int(n) for n in re.findall(r"^\[  FAILED  \] (\d+) tests?, listed below", text, re.M))
    bad = re.findall(r"^== exit ([1-9]\d*) (\S+)$", text, re.M)
    return binaries, tests, failed, [f"{name} (exit {code})" for code, name in bad]


def reports(directory):
    """The distinct first lines of the sanitizer reports, with their counts."""
    found = {}
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        text = open(os.path.join(directory, name), errors="replace").read()
        for line in re.findall(
                r"(?:ERROR: \w+Sanitizer: .*|WARNING: ThreadSanitizer: .*|"
                r"SUMMARY: \w+Sanitizer: .*|.*runtime error: .*)", text):
            line = re.sub(r"\(pid=\d+\)|0x[0-9a-f]+| T\d+\b", "", line).strip()
            found[line] = found.get(line, 0) + 1
    return found


def main():
    kind, log, report_dir, build_s, test_s, out = sys.argv[1:]
    text = open(log, errors="replace").read()
    binaries, tests, failed, failed_names = count_tests(text)
    found = reports(report_dir)
    compiler = subprocess.run(["c++", "--version"], capture_output=True, text=True)
    result = {
        "kind": kind,
        "commit": git("rev-parse", "HEAD"),
        "uncommitted_changes": git("status", "--porcelain", "--untracked-files=no") != "",
        "machine": {
            "cpus": os.cpu_count(),
            "system": platform.platform(),
            "compiler": compiler.stdout.splitlines()[0] if compiler.stdout else "",
        },
        "binaries": binaries,
        "tests": tests,
        "failed": failed,
        "failed_tests": failed_names,
        "report_files": len(os.listdir(report_dir)) if os.path.isdir(report_dir) else 0,
        # Reports whose top frame is in this repository's own sources (not in
        # a library, a system header or generated code): where to look first.
        "reports_in_our_sources": {k: v for k, v in found.items()
                                   if os.getcwd() + "/" in k and "/build-" not in k},
        "sanitizer_reports": found,
        "build_seconds": int(build_s),
        "test_seconds": int(test_s),
    }
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps({k: result[k] for k in ("kind", "tests", "failed", "report_files")}))
    sys.exit(0 if tests and failed == 0 and not failed_names and not found else 1)


if __name__ == "__main__":
    main()
