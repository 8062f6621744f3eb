#!/usr/bin/python3
"""scripts/gpu-check.sh on a fake GPU machine: an unpacked archive whose
programs are small shell scripts (gtest-like output, sleeps, children that
must be killed), fake bench scripts that write their JSON, and nvidia-smi
and compute-sanitizer stand-ins on PATH. Checks the phase order, the
per-phase and total time limits, that a timed-out phase's processes are
gone, the summary's lists, the reports bundled into results.json, the ncu
profile, and that at most 6 files are written (the device tool brings back
8).

Environment: H3_SOURCE_DIR (the source tree)."""
import json
import os
import shutil
import stat
import subprocess
import tempfile
import textwrap
import time
import unittest

SOURCE = os.environ.get("H3_SOURCE_DIR") or os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CHECK = os.path.join(SOURCE, "scripts", "gpu-check.sh")
PHASES = ["facts", "devices", "triage", "tests", "table4", "flashconv", "profile", "breakdown", "linear",
          "tile", "step", "attention", "serve_1", "serve_64", "memcheck"]
ALLOWED_FILES = {"summary.txt", "check.json", "tests.log", "bench.log", "results.json",
                 "profile.txt"}
REPORTS = {"table4", "breakdown", "breakdown_half", "flashconv", "linear", "tile", "step",
           "attention", "serve_1", "serve_64"}

# h3_engine_bench: writes the model (write-random), or prints a breakdown
# report (one line of JSON) for the batch it is given.
FAKE_ENGINE_BENCH = """what=""; batch=""; prompts=""; length=""
while [ $# -gt 0 ]; do
  case "$1" in
    --what) what=$2 ;;
    --batch) batch=$2 ;;
    --prefill-batch) prompts=$2 ;;
    --prompt-len) length=$2 ;;
    --model) [ "$what" = write-random ] && echo model > "$2" ;;
  esac
  shift
done
if [ "$what" = breakdown ]; then
  echo "not a report"
  printf '{"batch": %s, "prefill_batch": %s, "prompt_len": %s, ' "$batch" "$prompts" "$length"
  printf '"decode": {"step_ms": {"profiler_off": {"median": 2.5}, '
  printf '"profiler_on": {"median": 2.75}}, "ops": [{"name": "h3_step", "layer_type": "h3", '
  printf '"ms_per_step": 1.0, "share": 0.4}]}, "prefill": {"step_ms": {"profiler_off": '
  printf '{"median": 20.0}}, "ops": [{"name": "attention_prefill", "layer_type": '
  printf '"attention", "ms_per_step": 10.0, "share": 0.5}]}}\\n'
fi
"""

# Test programs run as gtest shards (GTEST_SHARD_INDEX of GTEST_TOTAL_SHARDS).
PASSING_TEST = """\
echo "env H3_SOURCE_DIR=$H3_SOURCE_DIR LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
echo "shard $GTEST_SHARD_INDEX of $GTEST_TOTAL_SHARDS"
echo "[==========] 3 tests from 1 test suite ran. (5 ms total)"
echo "[  PASSED  ] 3 tests."
"""
# Shard 1 fails one test; the others pass theirs. As --gtest_brief=1 prints
# it (seen on an H200, googletest 1.12): the failed test's line, and no
# "listed below" count of the failures after the summary.
FAILING_TEST = """\
if [ "$GTEST_SHARD_INDEX" != 1 ]; then
  echo "[==========] 1 test from 1 test suite ran. (5 ms total)"
  echo "[  PASSED  ] 1 test."
  exit 0
fi
echo "engine/cuda/cuda_engine_test.cc:99: Failure"
echo "[  FAILED  ] CudaEngineTest.Broken, where GetParam() = 4-byte object <02-00 00-00> (3 ms)"
echo "[==========] 4 tests from 2 test suites ran. (9 ms total)"
echo "[  PASSED  ] 2 tests."
echo "[  SKIPPED ] 1 test."
exit 1
"""
# Leaves a grandchild behind and hangs: the phase's limit must end both.
HANGING_TEST = """\
sleep 300 &
echo $! > "$FAKE_PIDS/grandchild"
echo $$ > "$FAKE_PIDS/child"
sleep 300
"""

FAKE_BENCH = """\
import json, os, sys, time
args = sys.argv[1:]
out = args[args.index("--out") + 1]
name = "{name}"
time.sleep({sleep})
reports = dict(
    table4=dict(results=[dict(prompt_len=512, h3serve_graphs_on=dict(median_tokens_per_s=20000.0),
                              h3serve_flagged_graphs_on=dict(
                                  median_tokens_per_s=25000.0,
                                  product_choices=[
                                      "rows<=64 2048x8192 fp16/fp16/fp32: stream-split "
                                      "(cublaslt 0.015 ms, stream 0.042 ms, "
                                      "stream-split 0.011 ms)",
                                      "rows<=1 2048x8192 fp16/fp16/fp32: stream (...)",
                                      "rows<=8 2048x8192 fp16/fp16/fp32: stream-split (...)"]),
                              ratios=dict(h3serve_over_torch_h3_eager=7.5))],
                latency=dict(h3serve=dict(median_step_ms=0.9),
                             h3serve_flagged=dict(median_step_ms=0.8))),
    serve=dict(budgets=[dict(prefill_tokens="default", summary=dict(
        served_tokens_per_s=9000.0, served_over_offline=0.9, itl_median_ms=7.0,
        itl_p99_ms=9.0))]),
    flashconv=dict(cases=[dict(path="fused", ms=dict(median=1.0), speedup_vs_cufft=1.8),
                          dict(path="chunked", ms=dict(median=0.5), speedup_vs_cufft=3.6),
                          dict(path="cufft", ms=dict(median=1.8)),
                          dict(skipped="out of memory")]))
with open(out, "w") as f:
    json.dump(reports[name], f)
print("argv", " ".join(args))
print("env H3_CUDA_FALLBACKS=" + os.environ.get("H3_CUDA_FALLBACKS", "(unset)"))
"""


def write(path, text, executable=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    if executable:
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by init) counts as gone.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


class FakeMachine:
    """An unpacked archive of fake programs, and a PATH with fake tools."""

    def __init__(self, tmp, kernels_test=PASSING_TEST, engine_test=PASSING_TEST,
                 bench_sleep=0):
        self.root = os.path.join(tmp, "h3-gpu")
        self.out = os.path.join(tmp, "out")
        self.pids = os.path.join(tmp, "pids")
        self.model = os.path.join(tmp, "models", "h3-1.3b.h3")
        os.makedirs(self.pids)
        os.makedirs(os.path.join(self.root, "lib"))
        os.makedirs(os.path.join(self.root, "scripts"))
        shutil.copy(CHECK, os.path.join(self.root, "scripts", "gpu-check.sh"))
        write(os.path.join(self.root, "MANIFEST.json"), "{}\n")
        write(os.path.join(self.root, "build", "gpu_check_files.txt"), textwrap.dedent("""\
            commit 0123456789ab
            build_type RelWithDebInfo
            with_cuda ON
            cuda_architectures 90a-real
            cuda_version 13.0.88
            glibc_required 2.17
            tool clients/h3
            bench bench/h3_engine_bench
            bench bench/h3_attention_bench
            bench bench/h3_linear_bench
            bench bench/h3_step_bench
            bench bench/h3_flashconv_bench
            test kernels/kernels_cuda_test
            test engine/engine_cuda_test
            """))
        sh = "#!/bin/sh\n"
        write(os.path.join(self.root, "build", "clients", "h3"),
              sh + 'echo "CUDA: built in, driver 13.0, runtime 13.0"\n'
                   'echo "GPU 0: Fake H100, compute capability 9.0"\n', True)
        write(os.path.join(self.root, "build", "bench", "h3_engine_bench"),
              sh + FAKE_ENGINE_BENCH, True)
        # h3_attention_bench writes its JSON itself (--out FILE).
        write(os.path.join(self.root, "build", "bench", "h3_attention_bench"),
              sh + 'while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done\n'
                   'echo \'{"cases": [{"kernel": "flash", "type": "fp16", "batch": 64, '
                   '"length": 1536, "tflops": 400.0, "fraction_of_peak": 0.4}], '
                   '"decode": [{"kernel": "decode", "cache_type": "bf16", "batch": 64, '
                   '"context": 4096, "gb_per_s": 2500.0, "fraction_of_copy": 0.8}]}\' > "$out"\n',
              True)
        # With --tile-splits (the tile phase): the tile kernel's records.
        write(os.path.join(self.root, "build", "bench", "h3_linear_bench"),
              sh + 'tile=""; for a in "$@"; do [ "$a" = --tile-splits ] && tile=1; done\n'
                   'while [ $# -gt 0 ]; do [ "$1" = --out ] && if [ -n "$tile" ]; then '
                   'echo \'{"results": ['
                   '{"product": "qkv", "rows": 64, "kernel": "cublaslt", "ms": 0.0104}, '
                   '{"product": "qkv", "rows": 64, "kernel": "tile_pdl", "ms": 0.0071, '
                   '"cols": 128, "splits": 4}, '
                   '{"product": "qkv", "rows": 64, "kernel": "tile_c64_s2_pdl", "ms": 0.0069, '
                   '"cols": 64, "splits": 2}, '
                   '{"product": "qkv", "rows": 64, "kernel": "tile_c128_s8_pdl", "ms": 0.0090, '
                   '"cols": 128, "splits": 8}]}\' > "$2"; else echo \'{"step_ms": '
                   '{"fp16_rows1_skinny": 0.9, "fp16_rows1_cublaslt": 1.2, '
                   '"fp16_rows1_cublaslt_pinned": 1.3}}\' > "$2"; fi; shift; done\n',
              True)
        write(os.path.join(self.root, "build", "bench", "h3_step_bench"),
              sh + 'while [ $# -gt 0 ]; do [ "$1" = --out ] && echo \'{"results": '
                   '[{"type": "fp16", "batch": 64, "kernel": "runtime_lanes", "ms": 0.07, '
                   '"fraction_of_copy": 0.3}]}\' > "$2"; shift; done\n',
              True)
        write(os.path.join(self.root, "build", "bench", "h3_flashconv_bench"),
              sh + 'echo "flashconv bench $*"\n', True)
        write(os.path.join(self.root, "build", "kernels", "kernels_cuda_test"),
              sh + kernels_test, True)
        write(os.path.join(self.root, "build", "engine", "engine_cuda_test"),
              sh + engine_test, True)
        for script, name in (("table4_bench.py", "table4"), ("serve_vs_offline.py", "serve"),
                             ("flashconv_bench.py", "flashconv")):
            write(os.path.join(self.root, "bench", script),
                  FAKE_BENCH.format(name=name, sleep=bench_sleep))
        # The real driver, over the fake h3_engine_bench.
        shutil.copy(os.path.join(SOURCE, "bench", "engine_breakdown.py"),
                    os.path.join(self.root, "bench", "engine_breakdown.py"))
        self.bin = os.path.join(tmp, "bin")
        write(os.path.join(self.bin, "nvidia-smi"), sh + textwrap.dedent("""\
            case "$*" in
              *--query-gpu*) echo "0, NVIDIA Fake H100, 580.00, 81559 MiB, 9.0" ;;
              *) echo "| NVIDIA-SMI 580.00   Driver Version: 580.00   CUDA Version: 13.0 |" ;;
            esac
            """), True)
        write(os.path.join(self.bin, "compute-sanitizer"), sh + textwrap.dedent("""\
            while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do
              case "$1" in --tool|--error-exitcode|--print-limit) shift ;; esac
              shift
            done
            "$@"
            echo "========= ERROR SUMMARY: 0 errors"
            """), True)

    def add_ncu(self):
        """An ncu stand-in: prints its options and a kernel report header,
        then runs the program (the first absolute path) with its arguments."""
        write(os.path.join(self.bin, "ncu"), "#!/bin/sh\n" + textwrap.dedent("""\
            echo "ncu options:"
            while [ $# -gt 0 ] && [ "${1#/}" = "$1" ]; do printf ' %s' "$1"; shift; done
            echo
            echo "  FakeKernel (768, 64, 1)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 9.0"
            "$@"
            """), True)

    def run(self, *args, env=None):
        env = dict(PATH=f"{self.bin}:/usr/bin:/bin", HOME=os.environ.get("HOME", "/tmp"),
                   FAKE_PIDS=self.pids, LD_LIBRARY_PATH="/machine/lib") | (env or {})
        start = time.monotonic()
        proc = subprocess.run(
            [os.path.join(self.root, "scripts", "gpu-check.sh"), "--python", "/usr/bin/python3",
             "--model", self.model, *args, self.out],
            env=env, capture_output=True, text=True, timeout=120)
        self.seconds = time.monotonic() - start
        self.returncode, self.stderr = proc.returncode, proc.stderr
        if proc.returncode == 2:
            return None
        with open(os.path.join(self.out, "check.json")) as f:
            self.check = json.load(f)
        with open(os.path.join(self.out, "summary.txt")) as f:
            self.summary = f.read()
        self.phases = {p["name"]: p for p in self.check["phases"]}
        return self.check

    def read(self, name):
        with open(os.path.join(self.out, name)) as f:
            return f.read()


class GpuCheckTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpu_check_test.")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_every_phase_in_order_with_a_failing_test(self):
        m = FakeMachine(self.tmp, engine_test=FAILING_TEST)
        m.run()
        self.assertEqual(m.returncode, 1, m.stderr)
        self.assertEqual([p["name"] for p in m.check["phases"]], PHASES)
        statuses = {name: p["status"] for name, p in m.phases.items()}
        self.assertEqual(statuses, dict.fromkeys(PHASES, "passed") |
                         {"tests": "failed", "profile": "skipped"})
        # Four shards each: kernels 4 x 3 tests; engine 3 x 1 and 4, one failed.
        self.assertIn("kernels_cuda_test: 12 passed, 0 skipped", m.phases["tests"]["detail"])
        self.assertIn("engine_cuda_test: 1 of 7 failed (CudaEngineTest.Broken)",
                      m.phases["tests"]["detail"])
        self.assertIn("engine 20,000 tok/s, flagged 25,000 tok/s "
                      "(products: stream 1, stream-split 2)", m.phases["table4"]["detail"])
        self.assertIn("batch-1 step 0.900 ms; flagged 0.800 ms", m.phases["table4"]["detail"])
        self.assertIn("0.90 of offline", m.phases["serve_64"]["detail"])
        self.assertEqual("4 timings, 1 skipped, chunked/cuFFT median speedup 3.60, "
                         "fused/cuFFT median speedup 1.80", m.phases["flashconv"]["detail"])
        self.assertIn("batch 1: decode step 2.50 ms (2.75 profiled; h3 h3_step 40%), "
                      "prefill 20.0 ms (1 x 512; attention_prefill 50%)",
                      m.phases["breakdown"]["detail"])
        self.assertIn("batch 64: decode step", m.phases["breakdown"]["detail"])
        with open(os.path.join(m.out, "results.json")) as f:
            results = json.load(f)
        self.assertEqual(set(results), REPORTS)
        self.assertEqual(results["table4"]["latency"]["h3serve"]["median_step_ms"], 0.9)
        breakdown = results["breakdown"]
        self.assertEqual([r["batch"] for r in breakdown["runs"]], [1, 64])
        self.assertIn("--what breakdown --model " + m.model + " --device cuda --dtype fp16",
                      breakdown["commands"][0])
        self.assertNotIn("--half-activations", breakdown["commands"][0])
        half = results["breakdown_half"]
        self.assertTrue(half["commands"][0].endswith("--half-activations"), half["commands"])
        self.assertIn("| --half-activations passed: batch 1: decode step",
                      m.phases["breakdown"]["detail"])
        self.assertIn("flash fp16 b64 L1536: 400 TFLOP/s (40%); decode bf16 cache b64 "
                      "ctx4096: 2500 GB/s (80% of copy)", m.phases["attention"]["detail"])
        self.assertIn("fp16 rows 1: products of a step 0.900 ms skinny, 1.200 ms cuBLASLt, "
                      "1.300 ms pinned", m.phases["linear"]["detail"])
        self.assertEqual("rows 64: qkv 7.1 us c128 s4 (best c64 s2 6.9) vs 10.4", m.phases["tile"]["detail"])
        self.assertEqual("fp16 batch 64 runtime_lanes: 70.0 us (30% of copy)", m.phases["step"]["detail"])
        self.assertEqual(m.check["commit"], "0123456789ab")
        self.assertTrue(os.path.exists(m.model), "the shared model is written once")

        files = set(os.listdir(m.out))
        self.assertEqual(files, ALLOWED_FILES - {"profile.txt"})
        self.assertIn("failed: tests", m.summary)
        self.assertIn("passed: facts devices triage table4 flashconv breakdown linear tile step "
                      "attention serve_1 serve_64 memcheck", m.summary)
        self.assertIn("skipped: profile", m.summary)
        self.assertEqual(m.phases["profile"]["detail"], "ncu not found")
        self.assertIn("gpu: 0, NVIDIA Fake H100", m.summary)

        # The programs see the archive's data and libraries, the machine's after.
        log = m.read("tests.log")
        self.assertIn(f"env H3_SOURCE_DIR={m.root} LD_LIBRARY_PATH={m.root}/lib:/machine/lib",
                      log)
        self.assertIn("=== memcheck engine_cuda_test", log)
        for shard in range(4):
            self.assertIn(f"=== kernels_cuda_test (shard {shard} of 4)\n"
                          f"--- ", log)
            self.assertIn(f"shard {shard} of 4", log)
        # The bench scripts get the wrappers' tree and the serving shape.
        bench = m.read("bench.log")
        self.assertIn("--shapes 64x768 --types fp16 --paths fused,chunked,chunked_mma,cufft "
                      "--rows", bench)
        self.assertIn("--engine-flags=--decode-products measured", bench)
        self.assertIn("--device cuda", bench)
        self.assertIn("--concurrency 64 --num-prompts 128 --input-len 1536 --output-len 128",
                      bench)
        self.assertIn("batch 64 decode: step 2.500 ms median (2.750 profiled)", bench)
        self.assertNotIn("not a report", json.dumps(breakdown))

    def test_the_triage_turns_failing_paths_off_for_the_benchmarks_only(self):
        # The rows kernel's tests fail, the split kernel's crash (no gtest
        # summary); the others pass. Every program prints what it was given.
        kernels = textwrap.dedent("""\
            echo "env H3_CUDA_FALLBACKS=${H3_CUDA_FALLBACKS:-(unset)} args $*"
            case "$*" in
              *H3PrefillRowsGpuTest*)
                echo "[  FAILED  ] Types/H3PrefillRowsGpuTest.X/fp16 (3 ms)"
                echo "[==========] 6 tests from 1 test suite ran. (9 ms total)"
                echo "[  PASSED  ] 5 tests."
                exit 1 ;;
              *split_*) exit 139 ;;
            esac
            """) + PASSING_TEST
        m = FakeMachine(self.tmp, kernels_test=kernels)
        env = "H3_CUDA_FALLBACKS"
        m.run("--phases", "triage,tests,table4")
        self.assertEqual(m.returncode, 1, m.stderr)
        triage = m.phases["triage"]
        self.assertEqual(triage["status"], "failed")
        self.assertEqual(triage["detail"],
                         "rows: 1 of 6 failed; "
                         "stream-split: status 139, no gtest summary; "
                         "stream-split: 3 passed, 0 skipped; "
                         "tile: 3 passed, 0 skipped; tile: 3 passed, 0 skipped; "
                         "tile: 3 passed, 0 skipped; "
                         "pdl: 3 passed, 0 skipped; pdl: 3 passed, 0 skipped; "
                         "the benchmarks run with H3_CUDA_FALLBACKS=rows,stream-split")
        self.assertIn("fallbacks: the benchmarks run with H3_CUDA_FALLBACKS=rows,stream-split "
                      "(triage failed: rows,stream-split)", m.summary)
        log = m.read("tests.log")
        self.assertIn("=== triage rows: kernels_cuda_test "
                      "--gtest_filter=*H3PrefillRowsGpuTest.*", log)
        self.assertIn("--gtest_brief=1 --gtest_filter=*StreamGemmGpuTest.*/split_*", log)
        self.assertIn("--gtest_brief=1 --gtest_filter=StreamSplitGpuTest.*", log)
        # The tests ran every default path; the benchmark did not.
        self.assertEqual(m.phases["tests"]["status"], "passed")
        self.assertIn(f"env {env}=(unset) args --gtest_brief=1\n", log)
        self.assertIn(f"env {env}=rows,stream-split", m.read("bench.log"))

        # The caller's list reaches every phase, and the triage adds to it;
        # a path the caller turned off is not tested.
        m.run("--phases", "triage,tests,table4", env={env: "pdl"})
        self.assertIn("stream-split: 3 passed, 0 skipped; tile: 3 passed, 0 skipped; "
                      "tile: 3 passed, 0 skipped; tile: 3 passed, 0 skipped; "
                      "pdl: off (H3_CUDA_FALLBACKS); "
                      "pdl: off (H3_CUDA_FALLBACKS)", m.phases["triage"]["detail"])
        self.assertIn("the benchmarks run with H3_CUDA_FALLBACKS=pdl,rows,stream-split",
                      m.phases["triage"]["detail"])
        self.assertNotIn("=== triage pdl", m.read("tests.log"))
        log = m.read("tests.log")
        self.assertIn(f"env {env}=pdl args --gtest_brief=1\n", log)
        self.assertIn(f"env {env}=pdl args --gtest_brief=1 --gtest_filter=*H3Prefill", log)
        self.assertIn(f"env {env}=pdl,rows,stream-split", m.read("bench.log"))

    def test_a_phase_past_its_limit_is_stopped_with_its_children(self):
        m = FakeMachine(self.tmp, kernels_test=HANGING_TEST)
        m.run("--phases", "tests,flashconv", "--limit", "tests=3")
        self.assertEqual(m.returncode, 1, m.stderr)
        self.assertEqual(m.phases["tests"]["status"], "timeout")
        self.assertIn("kernels_cuda_test: timed out", m.phases["tests"]["detail"])
        self.assertIn("engine_cuda_test: not run (time)", m.phases["tests"]["detail"])
        self.assertEqual(m.phases["flashconv"]["status"], "passed")
        self.assertLess(m.seconds, 3 + 3 + 10)
        for who in ("child", "grandchild"):
            with open(os.path.join(m.pids, who)) as f:
                pid = int(f.read())
            self.assertFalse(alive(pid), f"the test's {who} {pid} still runs")
        self.assertIn("timed out: tests", m.summary)
        self.assertIn("not selected: facts devices triage table4 profile breakdown linear tile step "
                      "attention serve_1 serve_64 memcheck",
                      m.summary)

    def test_the_total_limit_cuts_a_phase_and_skips_the_rest(self):
        m = FakeMachine(self.tmp, kernels_test=HANGING_TEST)
        m.run("--total", "12", "--phases", "tests,table4,memcheck",
              "--limit", "tests=60:1", "--limit", "table4=60:1")
        self.assertEqual(m.returncode, 1, m.stderr)
        self.assertEqual(m.phases["tests"]["status"], "timeout")
        self.assertLessEqual(m.phases["tests"]["limit_s"], 12 - 5)
        self.assertEqual(m.phases["table4"]["status"], "skipped-time")
        self.assertEqual(m.phases["memcheck"]["status"], "skipped-time")
        self.assertIn("needs 60", m.phases["memcheck"]["detail"])
        self.assertIn("skipped for time: table4 memcheck", m.summary)
        self.assertLess(m.seconds, 12 + 5)
        self.assertFalse(os.path.exists(os.path.join(m.out, "results.json")))

    def test_a_slow_benchmark_leaves_no_json_and_the_next_phase_runs(self):
        m = FakeMachine(self.tmp, bench_sleep=30)
        m.run("--phases", "table4,memcheck", "--limit", "table4=2")
        self.assertEqual(m.phases["table4"]["status"], "timeout")
        self.assertIn("no table4.json", m.phases["table4"]["detail"])
        self.assertEqual(m.phases["memcheck"]["status"], "passed")
        self.assertFalse(os.path.exists(os.path.join(m.out, "results.json")))

    def test_a_report_that_is_not_json_is_kept_as_a_string(self):
        m = FakeMachine(self.tmp)
        write(os.path.join(m.root, "build", "bench", "h3_linear_bench"),
              '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = --out ] && echo "{half" > "$2"; '
              'shift; done\n', True)
        m.run("--phases", "linear,attention")
        with open(os.path.join(m.out, "results.json")) as f:
            results = json.load(f)
        self.assertEqual(results["linear"], "{half\n")
        self.assertEqual(results["attention"]["decode"][0]["gb_per_s"], 2500.0)

    def test_the_breakdown_prefills_several_long_prompts_in_one_step(self):
        m = FakeMachine(self.tmp)
        m.run("--phases", "breakdown", "--breakdown-prompt-len", "1536",
              "--breakdown-prefill-batch", "10")
        self.assertEqual(m.returncode, 0, m.stderr)
        detail = m.phases["breakdown"]["detail"]
        # At most the batch: one prompt at batch 1, ten at batch 64.
        self.assertIn("batch 1: decode step 2.50 ms", detail)
        self.assertIn("prefill 20.0 ms (1 x 1536; attention_prefill 50%)", detail)
        self.assertIn("prefill 20.0 ms (10 x 1536; attention_prefill 50%)", detail)

    def test_the_engine_flags_of_table4_and_the_breakdown_can_be_named(self):
        m = FakeMachine(self.tmp)
        m.run("--phases", "table4,breakdown", "--fast-flags", "--decode-products stream",
              "--breakdown-flags", "--attention flash")
        self.assertEqual(m.returncode, 0, m.stderr)
        bench = m.read("bench.log")
        self.assertIn("--engine-flags=--decode-products stream", bench)
        self.assertNotIn("--engine-flags=--half-activations", bench)
        self.assertIn("--engine-flags=--attention flash --fp32-activations", bench)
        self.assertIn("--engine-flags=--attention flash --half-activations", bench)

    def test_the_profile_runs_ncu_on_flashconv_and_a_decode_step(self):
        m = FakeMachine(self.tmp)
        m.add_ncu()
        m.run("--phases", "profile")
        self.assertEqual(m.returncode, 0, m.stderr)
        self.assertEqual(m.phases["profile"]["status"], "passed")
        self.assertEqual(m.phases["profile"]["detail"],
                         "flashconv L1024 ran; flashconv L4096 ran; decode ran; "
                         "h3 step ran; batch-1 products ran; batch-64 tile products ran; "
                         "6 kernel reports in profile.txt")
        report = m.read("profile.txt")
        self.assertIn("--clock-control none -k regex:FusedPrefill|ChunkedPrefill|RowsKernel "
                      "--launch-count 5", report)
        for length in (1024, 4096):
            self.assertIn(f"flashconv bench --shapes 64x768 --lengths {length} --types fp16 "
                          "--paths fused,chunked,chunked_mma --rows --warmup 1", report)
        self.assertIn("--launch-skip 28 --launch-count 28", report)
        self.assertIn("-k regex:H3Step --launch-skip 28 --launch-count 1", report)
        self.assertIn("-k regex:StreamGemmKernel --launch-skip 97 --launch-count 4", report)
        self.assertIn("-k regex:TileGemmKernel --launch-skip 97 --launch-count 4", report)
        self.assertIn("--batch 64 --decode-context 512 --decode-steps 3 --reps 1 "
                      "--decode-products tile", report)
        self.assertTrue(os.path.exists(m.model), "the decode profile writes the model")
        self.assertEqual(set(os.listdir(m.out)),
                         {"summary.txt", "check.json", "tests.log", "bench.log", "profile.txt"})

    def test_profile_lengths_choose_the_prefill_runs(self):
        m = FakeMachine(self.tmp)
        m.add_ncu()
        m.run("--phases", "profile", "--profile-lengths", "none")
        self.assertEqual(m.returncode, 0, m.stderr)
        self.assertEqual(m.phases["profile"]["detail"],
                         "decode ran; h3 step ran; batch-1 products ran; "
                         "batch-64 tile products ran; 4 kernel reports in profile.txt")
        self.assertNotIn("flashconv bench", m.read("profile.txt"))
        m = FakeMachine(os.path.join(self.tmp, "again"))
        m.add_ncu()
        m.run("--phases", "profile", "--profile-lengths", "2048")
        self.assertEqual(m.returncode, 0, m.stderr)
        self.assertTrue(m.phases["profile"]["detail"].startswith("flashconv L2048 ran; decode"))

    def test_no_gpu_fails_facts_devices_and_tests_and_skips_the_benchmarks(self):
        m = FakeMachine(self.tmp, kernels_test=PASSING_TEST + 'echo "no CUDA device: none"\n')
        os.remove(os.path.join(m.bin, "nvidia-smi"))
        write(os.path.join(m.root, "build", "clients", "h3"),
              '#!/bin/sh\necho "No GPUs: no NVIDIA driver is installed"\n', True)
        m.run("--phases", "facts,devices,tests,linear,table4,profile,memcheck")
        self.assertEqual(m.phases["facts"]["status"], "failed")
        self.assertIn("nvidia-smi not found", m.phases["facts"]["detail"])
        self.assertEqual(m.phases["devices"]["status"], "failed")
        self.assertEqual(m.phases["tests"]["status"], "failed")
        self.assertIn("want of a CUDA device", m.phases["tests"]["detail"])
        for phase in ("linear", "table4", "profile", "memcheck"):
            self.assertEqual(m.phases[phase]["status"], "skipped")
            self.assertEqual(m.phases[phase]["detail"], "h3 devices sees no GPU")
        self.assertFalse(os.path.exists(m.model), "no model written without a GPU")

    def test_bad_arguments(self):
        m = FakeMachine(self.tmp)
        self.assertIsNone(m.run("--phases", "tests,bogus"))
        self.assertEqual(m.returncode, 2)
        self.assertIn("no phase 'bogus'", m.stderr)
        self.assertIsNone(m.run("--limit", "tests=soon"))
        self.assertEqual(m.returncode, 2)
        self.assertIsNone(m.run("--test-shards", "0"))
        self.assertEqual(m.returncode, 2)
        self.assertIn("--test-shards wants a count >= 1", m.stderr)
        self.assertIsNone(m.run("--profile-lengths", "1024,"))
        self.assertEqual(m.returncode, 2)
        self.assertIn("--profile-lengths wants lengths", m.stderr)
        self.assertFalse(os.path.exists(m.out))


if __name__ == "__main__":
    unittest.main()
