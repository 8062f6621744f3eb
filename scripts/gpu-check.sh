#!/usr/bin/env bash
# Runs every GPU check of h3serve on a GPU machine (no network, no apt needed):
# from the archive scripts/gpu-pack.sh writes (this script is inside it), or
# from a source tree with a CUDA build. Each phase has its own time limit and
# all of them share a total one; see docs/gpu-machine.md.
#
#   scripts/gpu-check.sh [options] OUT_DIR
#
#   --total S          seconds for everything (default 540: one 10-minute
#                      device command, with room to unpack)
#   --phases LIST      only these phases (comma-separated; they still run in
#                      the order below)
#   --limit P=S[:MIN]  phase P's limit in seconds (and the least time worth
#                      starting it with); repeatable
#   --build DIR        the build directory (default: ROOT/build, ROOT being
#                      the folder above this script)
#   --python EXE       the Python with PyTorch (default: python3)
#   --model FILE       the random H3-1.3B model the benchmarks share (default
#                      /tmp/h3-table4/h3-1.3b.h3; written when absent)
#   --prompt-lens L    Table 4's prompt lengths (default 512)
#   --breakdown-batches L  the breakdown's batch sizes (default 1,64)
#   --breakdown-prompt-len N, --breakdown-prefill-batch N  its prefill step:
#                      N prompts (at most the batch) of that length (default
#                      1 of 512)
#   --breakdown-flags F  more h3_engine_bench flags for both breakdown runs
#   --fast-flags F     Table 4's second run of our engine (default
#                      "--decode-products measured"; a failure
#                      of that run is recorded and the phase goes on)
#   --table4-sides L   Table 4's sides (default engine,torch_h3,gpt2: our
#                      engine, the eager PyTorch H3 and GPT-2)
#   --serve-budgets L  serve_64's --prefill-tokens values (default: default)
#   --test-shards N    gtest shards run at once per test program (default 4)
#   --profile-lengths L  the lengths the profile phase runs the prefill
#                      kernels at (default 1024,4096; none: only the decode
#                      kernels)
#
# Phases, most valuable first (limit / least time worth starting, seconds):
#   facts      20/5   nvidia-smi, the build (commit, architectures), glibc,
#                     the CUDA libraries the machine must supply
#   devices    30/5   h3 devices
#   triage     90/20  the tests of each path that replaced an older one,
#                     one process per test line at once (a crash ends only
#                     its own): where one fails or runs past the limit, the
#                     benchmark phases run with that path turned off
#                     (H3_CUDA_FALLBACKS, see docs/cuda-engine.md
#                     "Fallbacks"); the tests and memcheck phases still run
#                     every default path. (At eb5e768 the cluster kernels'
#                     tests, 57 s alone, ran past 60 s beside the others.)
#   tests     180/30  every gpu-labelled test program (--gtest_brief=1), in
#                     --test-shards gtest shards at once
#   table4    240/90  bench/table4_bench.py: our engine, eager PyTorch H3 and
#                     GPT-2 at batch 64, then batch-1 latency; our engine
#                     also with a path that is off by default
#                     (--fast-flags)
#   flashconv 120/30  bench/flashconv_bench.py: B64 H768 fp16, lengths 256 to
#                     32K, fused FlashConv, chunked (and its shift-MMA
#                     variant; both also on packed rows, --rows) and cuFFT
#   profile   150/30  Nsight Compute (ncu --clock-control none) on the fused
#                     FlashConv and the chunked H3 prefill kernels (B64 H768
#                     fp16, L 1024 and 4096; their guard calls), on the
#                     kernels of one batch-64 decode step (H3-1.3B shape,
#                     --half-activations), on one H3 step with every
#                     section, on one layer's batch-1 products (the
#                     stream kernel) and on one layer's batch-64 products
#                     on the tile kernel (--decode-products tile), each
#                     with every section: profile.txt
#   breakdown 240/60  bench/engine_breakdown.py (h3_engine_bench --what
#                     breakdown): per-op times of a decode step and a
#                     512-token prefill, H3-1.3B shape, fp16, at batch 1 and
#                     64 (graphs off, forced), with --fp32-activations; then
#                     the same with --half-activations (breakdown_half)
#   linear    120/20  h3_linear_bench: the batch-invariant skinny GEMM against
#                     cuBLASLt on the H3-1.3B decode products, rows 1, 2, 4,
#                     8, 64, with fp32 and with 16-bit (half) activations;
#                     the stream kernel also overlapped (--pdl) and, before
#                     qkv and fc1, with its norm apart and inside it; the
#                     cluster kernel (stream_split) on sm_90 and later
#   tile       90/20  h3_linear_bench on the tile product alone: fp16,
#                     half activations, rows 8, 16, 32, 64, each product at
#                     its chosen width and split count, and at 2, 4, 6 and
#                     8 splits in blocks 64 and 128 wide (--tile-splits,
#                     --tile-cols), against cuBLASLt
#   step       60/15  h3_step_bench: the decode step's kernels (auto, the
#                     float4 kernel; runtime_lanes) at the H3-1.3B
#                     layer shape, fp16, batch 1, 8 and 64, against the copy
#                     bandwidth; auto also with 8 and 16 sequences a block
#   attention 120/30  h3_attention_bench: prefill attention, fp32 FMA against
#                     tensor cores (fp16, bf16; fp32 io and caches, and all
#                     in the operand type as the engine calls it:
#                     flash_half_io), h3-1.3b's shape, prompts of
#                     512, 1536 and 4096 at batch 1 and 64; decode attention
#                     with fp32, fp16 and bf16 KV caches (contexts 1664 and
#                     4096, batch 1 and 64) against the copy bandwidth
#   serve_1    60/30  bench/serve_vs_offline.py --device cuda: h3serve under
#                     h3 bench against the offline engine, 1 stream, prompts
#                     of 1536 tokens, 128 generated
#   serve_64  150/60  the same at 64 streams (128 requests)
#   memcheck  600/60  compute-sanitizer memcheck of the engine's GPU tests
# A phase starts only when its least time is left of the total (less a 5 s
# reserve) and runs for at most the smaller of its limit and what is left.
# When h3 devices sees no GPU, the benchmarks, profile and memcheck are
# skipped. timeout(1) ends a phase with every process it started (SIGTERM to
# the process group, SIGKILL 3 s later).
#
# OUT_DIR receives at most 6 files (the device tool brings back 8), rewritten
# after every phase: summary.txt (what passed, failed, timed out, was skipped
# and why), check.json (the same as JSON), tests.log (tests and memcheck),
# bench.log (everything else), results.json (every benchmark's JSON report,
# keyed by its name: table4, breakdown, breakdown_half, flashconv, linear, tile, step,
# attention, serve_1, serve_64; a report that is not JSON is kept as a
# string) and profile.txt (ncu's reports).
# Our programs run with the archive's lib/ on LD_LIBRARY_PATH, through small
# wrappers; nothing else (Python, PyTorch, nvidia-smi, ncu) sees those
# libraries, except the programs ncu starts.
# Exit status: 0 when every phase that ran passed; 1 otherwise; 2 on bad
# arguments.
set -uo pipefail
SECONDS=0
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

die() { echo "gpu-check.sh: $*" >&2; exit 2; }
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }

all_phases=(facts devices triage tests table4 flashconv profile breakdown linear tile step attention
            serve_1 serve_64 memcheck)
declare -A limit=([facts]=20 [devices]=30 [triage]=90 [tests]=180 [table4]=240 [breakdown]=240
                  [profile]=150 [flashconv]=120 [linear]=120 [tile]=90 [step]=60 [attention]=120 [serve_1]=60
                  [serve_64]=150 [memcheck]=600)
declare -A least=([facts]=5 [devices]=5 [triage]=20 [tests]=30 [table4]=90 [breakdown]=60 [profile]=30
                  [flashconv]=30 [linear]=20 [tile]=20 [step]=15 [attention]=30 [serve_1]=30 [serve_64]=60
                  [memcheck]=60)
reserve=5      # seconds kept back to write the summary
kill_grace=3   # seconds between SIGTERM and SIGKILL

total=540
phases=""
build=""
python=python3
model=/tmp/h3-table4/h3-1.3b.h3
prompt_lens=512
breakdown_batches=1,64
breakdown_prompt_len=512
breakdown_prefill_batch=1
serve_budgets=default
test_shards=4
profile_lengths=1024,4096
# An engine path that is off by default; table4 times it beside the
# defaults (half activations and the tensor-core attention with 16-bit
# weights).
fast_flags="--decode-products measured"
breakdown_flags=""
table4_sides=engine,torch_h3,gpt2
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --total|--phases|--limit|--build|--python|--model|--prompt-lens|--fast-flags|--table4-sides|--serve-budgets|\
    --breakdown-flags|--breakdown-batches|--breakdown-prompt-len|--breakdown-prefill-batch|--test-shards|\
    --profile-lengths)
      [ $# -ge 2 ] || die "$1 needs a value" ;;&
    --total) total=$2; shift 2 ;;
    --phases) phases=$2; shift 2 ;;
    --limit)
      [[ $2 =~ ^([a-z0-9_]+)=([0-9]+)(:([0-9]+))?$ ]] || die "--limit wants P=S[:MIN], not '$2'"
      p=${BASH_REMATCH[1]}
      [ -n "${limit[$p]:-}" ] || die "--limit: no phase '$p' (${all_phases[*]})"
      limit[$p]=${BASH_REMATCH[2]}
      [ -z "${BASH_REMATCH[4]}" ] || least[$p]=${BASH_REMATCH[4]}
      shift 2 ;;
    --build) build=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --prompt-lens) prompt_lens=$2; shift 2 ;;
    --fast-flags) fast_flags=$2; shift 2 ;;
    --table4-sides) table4_sides=$2; shift 2 ;;
    --breakdown-flags) breakdown_flags=$2; shift 2 ;;
    --serve-budgets) serve_budgets=$2; shift 2 ;;
    --breakdown-batches) breakdown_batches=$2; shift 2 ;;
    --breakdown-prompt-len) breakdown_prompt_len=$2; shift 2 ;;
    --breakdown-prefill-batch) breakdown_prefill_batch=$2; shift 2 ;;
    --test-shards) test_shards=$2; shift 2 ;;
    --profile-lengths) profile_lengths=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option '$1' (try --help)" ;;
    *) [ -z "$out" ] || die "one OUT_DIR only"; out=$1; shift ;;
  esac
done
[ -n "$out" ] || die "give OUT_DIR (try --help)"
[[ $total =~ ^[0-9]+$ ]] || die "--total wants seconds, not '$total'"
[[ $test_shards =~ ^[1-9][0-9]*$ ]] || die "--test-shards wants a count >= 1, not '$test_shards'"
[[ $profile_lengths =~ ^(none|[1-9][0-9]*(,[1-9][0-9]*)*)$ ]] ||
  die "--profile-lengths wants lengths (1024,4096) or none, not '$profile_lengths'"
selected=()
for p in "${all_phases[@]}"; do
  if [ -z "$phases" ] || [[ ",$phases," == *",$p,"* ]]; then selected+=("$p"); fi
done
for p in ${phases//,/ }; do
  [ -n "${limit[$p]:-}" ] || die "--phases: no phase '$p' (${all_phases[*]})"
done

build=$(cd "${build:-$root/build}" 2>/dev/null && pwd) || die "no build directory ${build:-$root/build}"
list=$build/gpu_check_files.txt
[ -f "$list" ] || die "no $list: pack with scripts/gpu-pack.sh, or configure $build with this tree"
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
summary=$out/summary.txt
tests_log=$out/tests.log
bench_log=$out/bench.log
rm -f "$summary" "$out/check.json" "$tests_log" "$bench_log" "$out/results.json" \
      "$out/profile.txt"
: >"$tests_log"
: >"$bench_log"

fact() { awk -v k="$1" '$1 == k { sub(/^[^ ]+ ?/, ""); print; exit }' "$list"; }
commit=$(fact commit)
if [ -z "$commit" ]; then
  commit=$(git -C "$(fact source_dir)" rev-parse HEAD 2>/dev/null || echo unknown)
fi
export H3_GIT_COMMIT=$commit    # for the reports (bench/report.py) without git
# In the archive, the packed tests read their data from it
# (tests/support/source_path.h); in a source tree, from where they were built.
[ -f "$root/MANIFEST.json" ] && export H3_SOURCE_DIR=$root

# Wrappers: each program runs with our lib/ first on LD_LIBRARY_PATH, and
# the usual CUDA library folders last; callers use the wrappers' tree
# ($shim) as the build directory.
work=$(mktemp -d "${TMPDIR:-/tmp}/h3-gpu-check.XXXXXX") || die "no temporary folder"
trap 'rm -rf "$work"' EXIT
shim=$work/build
res=$work/results   # the benchmarks' JSON reports, bundled into results.json
mkdir -p "$res"
ld_path=""
[ -d "$root/lib" ] && [ -f "$root/MANIFEST.json" ] && ld_path=$root/lib
ld_path=$ld_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && ld_path=$ld_path:$d
done
ld_path=${ld_path#:}
tests=()          # the gpu-labelled test programs, as wrapper paths
programs=()       # every program, real paths
while read -r kind path _; do
  case "$kind" in tool|bench|test) ;; *) continue ;; esac
  case "$path" in /*) ;; *) path=$build/$path ;; esac
  rel=${path#"$build"/}
  programs+=("$path")
  mkdir -p "$(dirname "$shim/$rel")"
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%q exec %q "$@"\n' "$ld_path" "$path" >"$shim/$rel"
  chmod +x "$shim/$rel"
  [ "$kind" = test ] && tests+=("$shim/$rel")
  # The e2e GPU test starts this server (tests/e2e/concurrent_test.cc).
  [ "$kind" = tool ] && [ "$(basename "$rel")" = h3serve ] && export H3SERVE_BIN=$shim/$rel
done <"$list"

# ---- results ----------------------------------------------------------------
names=() statuses=() seconds_used=() limits=() details=()
running=""
facts_lines=()

json_str() {
  local s=$1
  s=${s//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\n'/\\n}; s=${s//$'\t'/\\t}; s=${s//$'\r'/}
  printf '"%s"' "$s"
}

# Rewrites summary.txt and check.json from what has run so far.
write_summary() {
  local i p status label listed
  bundle_results
  local -A by=()
  {
    echo "h3serve GPU check: $(date '+%Y-%m-%d %H:%M:%S %z'), ${SECONDS} s of --total $total s"
    echo "build: commit $commit, $(fact build_type), CUDA $(fact cuda_version)," \
         "architectures $(fact cuda_architectures); $build"
    printf '%s\n' "${facts_lines[@]}"
    echo
    printf '%-10s %-8s %5s %6s  %s\n' phase result secs limit detail
    for i in "${!names[@]}"; do
      printf '%-10s %-8s %5s %6s  %s\n' "${names[$i]}" "${statuses[$i]}" \
        "${seconds_used[$i]}" "${limits[$i]}" "${details[$i]}"
      by[${statuses[$i]}]+=" ${names[$i]}"
    done
    [ -z "$running" ] || printf '%-10s %-8s\n' "$running" "running (no result yet)"
    echo
    for status in passed failed timeout skipped-time skipped; do
      case $status in
        passed) label="passed:" ;; failed) label="failed:" ;;
        timeout) label="timed out:" ;; skipped-time) label="skipped for time:" ;;
        skipped) label="skipped:" ;;
      esac
      echo "$label${by[$status]:- none}"
    done
    listed=""
    for p in "${all_phases[@]}"; do
      [[ " ${selected[*]} " == *" $p "* ]] || listed+=" $p"
    done
    echo "not selected:${listed:- none}"
    echo "files: $(cd "$out" && ls | tr '\n' ' ')"
  } >"$summary"
  {
    printf '{\n "commit": %s,\n "total_limit_s": %s,\n "elapsed_s": %s,\n' \
      "$(json_str "$commit")" "$total" "$SECONDS"
    printf ' "build": {"type": %s, "cuda_version": %s, "cuda_architectures": %s},\n' \
      "$(json_str "$(fact build_type)")" "$(json_str "$(fact cuda_version)")" \
      "$(json_str "$(fact cuda_architectures)")"
    printf ' "facts": ['
    for i in "${!facts_lines[@]}"; do
      [ "$i" = 0 ] || printf ', '
      json_str "${facts_lines[$i]}"
    done
    printf '],\n "running": %s,\n "phases": [' "$(json_str "$running")"
    for i in "${!names[@]}"; do
      [ "$i" = 0 ] || printf ','
      printf '\n  {"name": %s, "status": %s, "seconds": %s, "limit_s": %s, "detail": %s}' \
        "$(json_str "${names[$i]}")" "$(json_str "${statuses[$i]}")" \
        "${seconds_used[$i]/-/null}" "${limits[$i]/-/null}" "$(json_str "${details[$i]}")"
    done
    printf '\n ]\n}\n'
  } >"$out/check.json"
}

# results.json: every report in $res as one JSON object keyed by its name
# (a report that does not parse is kept as a string). Without a Python, the
# files side by side.
bundle_results() {
  local f sep=""
  compgen -G "$res/*.json" >/dev/null || return 0
  if ! "$python" - "$res" "$work/results.json" <<'EOF' 2>/dev/null; then
import json, os, sys
res, dest = sys.argv[1], sys.argv[2]
bundle = {}
for name in sorted(os.listdir(res)):
    if name.endswith(".json"):
        with open(os.path.join(res, name)) as f:
            text = f.read()
        try:
            bundle[name[:-5]] = json.loads(text)
        except ValueError:
            bundle[name[:-5]] = text
with open(dest, "w") as f:
    json.dump(bundle, f, indent=1)
EOF
    {
      printf '{'
      for f in "$res"/*.json; do
        printf '%s\n"%s": ' "$sep" "$(basename "$f" .json)"; cat "$f"; sep=","
      done
      printf '}\n'
    } >"$work/results.json"
  fi
  mv "$work/results.json" "$out/results.json"
}

record() {  # name status seconds limit detail
  names+=("$1"); statuses+=("$2"); seconds_used+=("$3"); limits+=("$4"); details+=("$5")
}

# bounded LOG CMD...: CMD, its output appended to LOG, stopped at the
# phase's deadline. Its status; 124 when it ran out of time.
bounded() {
  local log=$1 left=$(( deadline - SECONDS )) rc
  shift
  (( left > 0 )) || return 124
  echo "--- $(date +%T) $* (at most $left s)" >>"$log"
  timeout --kill-after="$kill_grace" "$left" "$@" >>"$log" 2>&1 </dev/null
  rc=$?
  [ $rc -ne 137 ] || (( SECONDS < deadline )) || rc=124  # SIGKILLed after the grace
  return $rc
}

# The one-line digest of a benchmark's JSON for the summary.
digest() {
  [ -f "$res/$1.json" ] || { echo "no $1.json"; return; }
  "$python" - "$res/$1.json" "$1" <<'EOF' 2>/dev/null || echo "wrote $1.json"
import json, sys
r, kind = json.load(open(sys.argv[1])), sys.argv[2]
def f(x):
    return f"{x:,.0f}" if isinstance(x, (int, float)) else "?"
if kind == "table4":
    parts = []
    for row in r.get("results", []):
        e = row.get("h3serve_graphs_on", {}).get("median_tokens_per_s")
        flagged = row.get("h3serve_flagged_graphs_on", {})
        fast = flagged.get("median_tokens_per_s")
        ratios = ", ".join(f"{k} {v:.2f}" for k, v in row.get("ratios", {}).items()
                           if isinstance(v, (int, float)) and not isinstance(v, bool))
        # --decode-products measured: how many product keys each kernel won.
        won = {}
        for line in flagged.get("product_choices", []):
            kernel = line.split(": ", 1)[-1].split(" (", 1)[0]
            won[kernel] = won.get(kernel, 0) + 1
        parts.append(f"prompt {row.get('prompt_len')}: engine {f(e)} tok/s" +
                     (f", flagged {f(fast)} tok/s" if fast else "") +
                     (", flagged run failed" if "error" in flagged else "") +
                     (" (products: " + ", ".join(f"{k} {n}" for k, n in sorted(won.items())) + ")"
                      if won else "") + f" ({ratios})")
    lat = r.get("latency", {}).get("h3serve", {}).get("median_step_ms")
    parts.append(f"batch-1 step {lat:.3f} ms" if lat else "no batch-1 latency")
    flagged = r.get("latency", {}).get("h3serve_flagged", {})
    if flagged.get("median_step_ms"):
        parts.append(f"flagged {flagged['median_step_ms']:.3f} ms")
    elif "error" in flagged:
        parts.append("flagged latency run failed")
    print("; ".join(parts))
elif kind.startswith("breakdown"):
    parts = []
    for run in r.get("runs", []):
        d = run.get("decode", {})
        ms = d.get("step_ms", {})
        ops = sorted(d.get("ops", []), key=lambda o: -o.get("ms_per_step", 0))[:2]
        top = ", ".join(f"{o['layer_type']} {o['name']} {o['share']:.0%}" for o in ops)
        p = run.get("prefill", {})
        prefill = p.get("step_ms", {}).get("profiler_off", {})
        ops = sorted(p.get("ops", []), key=lambda o: -o.get("ms_per_step", 0))[:2]
        prefill_top = ", ".join(f"{o['name']} {o['share']:.0%}" for o in ops)
        parts.append(f"batch {run.get('batch')}: decode step "
                     f"{ms.get('profiler_off', {}).get('median', 0):.2f} ms "
                     f"({ms.get('profiler_on', {}).get('median', 0):.2f} profiled; {top}), "
                     f"prefill {prefill.get('median', 0):.1f} ms "
                     f"({run.get('prefill_batch', 1)} x {run.get('prompt_len')}; {prefill_top})")
    print("; ".join(parts))
elif kind == "attention":
    print("; ".join(
        [f"{c['kernel']} {c['type']} b{c['batch']} L{c['length']}: {c['tflops']:.0f} TFLOP/s "
         f"({100 * c['fraction_of_peak']:.0f}%)" for c in r.get("cases", [])] +
        [f"decode {c['cache_type']} cache b{c['batch']} ctx{c['context']}: "
         f"{c['gb_per_s']:.0f} GB/s ({100 * c['fraction_of_copy']:.0f}% of copy)"
         for c in r.get("decode", [])]))
elif kind == "step":
    print("; ".join(
        f"{c['type']} batch {c['batch']} {c['kernel']}: {1000 * c['ms']:.1f} us "
        f"({100 * c['fraction_of_copy']:.0f}% of copy)" for c in r.get("results", [])))
elif kind == "linear":
    step = r.get("step_ms", {})
    parts = []
    for rows in (1, 8, 64):
        s, c = step.get(f"fp16_rows{rows}_skinny"), step.get(f"fp16_rows{rows}_cublaslt")
        h = step.get(f"fp16_rows{rows}_cublaslt_half")
        pinned = step.get(f"fp16_rows{rows}_cublaslt_pinned")
        st, sth = step.get(f"fp16_rows{rows}_stream"), step.get(f"fp16_rows{rows}_stream_half")
        pdl = step.get(f"fp16_rows{rows}_stream_pdl_half")
        split = step.get(f"fp16_rows{rows}_stream_split_half")
        tile = step.get(f"fp16_rows{rows}_tile_half")
        if s and c:
            parts.append(f"fp16 rows {rows}: products of a step {s:.3f} ms skinny, "
                         f"{c:.3f} ms cuBLASLt" +
                         (f" ({h:.3f} ms with half activations)" if h else "") +
                         (f", {pinned:.3f} ms pinned" if pinned else "") +
                         (f", {st:.3f} ms stream" if st else "") +
                         (f" ({sth:.3f} ms half" + (f", {pdl:.3f} ms with --pdl" if pdl else "") +
                          ")" if sth else "") +
                         (f", {split:.3f} ms stream-split (half)" if split else "") +
                         (f", {tile:.3f} ms tile (half)" if tile else ""))
    print("; ".join(parts) or "no fp16 timings")
elif kind == "tile":
    # Per rows and product: cuBLASLt, the tile kernel at its chosen splits,
    # and its fastest split count.
    recs = r.get("results", [])
    parts = []
    for rows in sorted({c["rows"] for c in recs}):
        items = []
        for prod in dict.fromkeys(c["product"] for c in recs if c["rows"] == rows):
            mine = [c for c in recs if c["rows"] == rows and c["product"] == prod]
            lt = next((c["ms"] for c in mine if c["kernel"] == "cublaslt_tuned"), None) or \
                next((c["ms"] for c in mine if c["kernel"] == "cublaslt"), None)
            tile = next((c for c in mine if c["kernel"] == "tile_pdl"), None) or \
                next((c for c in mine if c["kernel"] == "tile"), None)
            best = min((c for c in mine if c["kernel"].startswith(("tile_s", "tile_c"))),
                       key=lambda c: c["ms"], default=None)
            if tile and lt:
                items.append(f"{prod} {1000 * tile['ms']:.1f} us "
                             f"c{tile.get('cols', 64)} s{tile['splits']}" +
                             (f" (best c{best.get('cols', 64)} s{best['splits']} "
                              f"{1000 * best['ms']:.1f})" if best else "") +
                             f" vs {1000 * lt:.1f}")
        if items:
            parts.append(f"rows {rows}: " + ", ".join(items))
    print("; ".join(parts) or "no tile timings")
elif kind.startswith("serve"):
    print("; ".join(
        f"prefill-tokens {b['prefill_tokens']}: served {f(s['served_tokens_per_s'])} tok/s, "
        f"{s['served_over_offline']:.2f} of offline, ITL p50 {s['itl_median_ms']:.1f} ms "
        f"p99 {s['itl_p99_ms']:.1f} ms" +
        (f", host {100 * s['host_fraction']:.0f}% of the loop"
         if s.get("host_fraction") is not None else "")
        for b in r.get("budgets", []) for s in [b["summary"]]))
else:
    cases = r.get("cases", [])
    skipped = sum(1 for c in cases if c.get("skipped"))
    parts = [f"{len(cases)} timings, {skipped} skipped"]
    def name(c):  # a path, with its mode where it is not the batch call
        mode = c.get("mode", "batch")
        return c.get("path") + ("" if mode == "batch" else f" {mode}")
    for path in sorted({name(c) for c in cases if c.get("speedup_vs_cufft")}):
        s = sorted(c["speedup_vs_cufft"] for c in cases
                   if c.get("speedup_vs_cufft") and name(c) == path)
        parts.append(f"{path}/cuFFT median speedup {s[len(s) // 2]:.2f}")
    print(", ".join(parts))
EOF
}

# ---- phases -----------------------------------------------------------------
# Each sets status (passed, failed, timeout, skipped) and detail.

phase_facts() {
  local smi missing=() name found glibc need d p line
  if ! command -v nvidia-smi >/dev/null; then
    facts_lines+=("gpu: nvidia-smi not found")
    status=failed; detail="nvidia-smi not found"
  else
    bounded "$bench_log" nvidia-smi
    smi=$(timeout 10 nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap \
          --format=csv,noheader 2>&1)
    if [ $? -eq 0 ]; then
      while read -r line; do facts_lines+=("gpu: $line"); done <<<"$smi"
      facts_lines+=("driver: $(timeout 10 nvidia-smi | grep -oE 'CUDA Version: [0-9.]+' | head -1)")
      status=passed; detail="$(wc -l <<<"$smi") GPU(s)"
    else
      facts_lines+=("gpu: nvidia-smi failed: ${smi//$'\n'/ }")
      status=failed; detail="nvidia-smi failed"
    fi
  fi
  glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }')
  need=$(fact glibc_required)
  facts_lines+=("glibc: ${glibc:-unknown} here${need:+, the programs need $need}")
  if [ -n "$need" ] && [ -n "$glibc" ] &&
     [ "$(printf '%s\n%s\n' "$need" "$glibc" | sort -V | head -1)" != "$need" ]; then
    status=failed; detail+="; glibc $glibc < $need"
  fi
  # Libraries no program can load (ldd), and those opened at run time.
  for p in "${programs[@]}"; do
    while read -r name; do missing+=("$name"); done < <(
      LD_LIBRARY_PATH=$ld_path ldd "$p" 2>/dev/null | awk '$3 == "not" { print $1 }')
  done
  while read -r name; do
    found=""
    for d in ${ld_path//:/ }; do [ -e "$d/$name" ] && found=1; done
    { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | grep -q "^[[:space:]]$name " &&
      found=1
    [ -n "$found" ] || missing+=("$name")
  done < <(awk '$1 == "machine_library" { print $2 }' "$list")
  if [ ${#missing[@]} -gt 0 ]; then
    missing=($(printf '%s\n' "${missing[@]}" | sort -u))
    facts_lines+=("missing libraries: ${missing[*]}")
    status=failed; detail+="; missing ${missing[*]}"
  else
    facts_lines+=("libraries: every program's found (CUDA's from the machine)")
  fi
  printf '%s\n' "--- facts" "${facts_lines[@]}" >>"$bench_log"
}

phase_devices() {
  local rc line
  bounded "$work/devices.out" "$shim/clients/h3" devices
  rc=$?
  cat "$work/devices.out" >>"$bench_log"
  while read -r line; do facts_lines+=("devices: $line"); done < <(
    grep -v '^--- ' "$work/devices.out" | head -6)
  case $rc in
    0) status=passed; detail="" ;;
    124) status=timeout; detail="h3 devices did not answer" ;;
    *) status=failed; detail="h3 devices: status $rc" ;;
  esac
  if [ $rc -eq 0 ] && grep -q '^No GPUs' "$work/devices.out"; then
    status=failed; detail="h3 devices sees no GPU"; no_gpu=1
  fi
}

# gtest_counts FILE: "ran passed skipped failed" from a --gtest_brief output.
# Brief output has no "N tests, listed below" line for the failures (seen on
# an H200): what ran and neither passed nor was skipped failed.
gtest_counts() {
  awk '
    /^\[==========\] [0-9]+ tests? from .* ran/ { ran = $2 }
    /^\[  PASSED  \] [0-9]+ tests?/ { passed = $4 }
    /^\[  SKIPPED \] [0-9]+ tests?[.,]/ { skipped = $4 }
    /^\[  FAILED  \] [0-9]+ tests?, listed below/ { failed = $4 }
    END {
      if (failed == "" && ran != "") failed = ran - passed - skipped
      printf "%s %d %d %d\n", (ran == "" ? "-" : ran), passed, skipped, failed
    }' "$1"
}

# Each test program runs as test_shards gtest shards at once (the GPU has
# room for several small test processes, and a 15-minute device session has
# none to spare); their outputs go to tests.log one after the other, and
# their counts add up.
phase_tests() {
  local t name rc shard_rc ran passed skipped failed names_failed no_device="" parts=()
  local i r p s f pids=()
  status=passed
  [ ${#tests[@]} -gt 0 ] || { status=failed; detail="no gpu-labelled test programs"; return; }
  for t in "${tests[@]}"; do
    name=$(basename "$t")
    if (( deadline - SECONDS <= 0 )); then
      parts+=("$name: not run (time)"); status=timeout; continue
    fi
    pids=()
    for (( i = 0; i < test_shards; i++ )); do
      : >"$work/test.$i.out"
      GTEST_TOTAL_SHARDS=$test_shards GTEST_SHARD_INDEX=$i \
        bounded "$work/test.$i.out" "$t" --gtest_brief=1 &
      pids+=($!)
    done
    rc=0 ran=0 passed=0 skipped=0 failed=0
    for (( i = 0; i < test_shards; i++ )); do
      wait "${pids[$i]}"
      shard_rc=$?
      echo "=== $name (shard $i of $test_shards)" >>"$tests_log"
      cat "$work/test.$i.out" >>"$tests_log"
      # GpuTest's skip reason (tests/support/gpu_test.h).
      grep -q '^no CUDA device: ' "$work/test.$i.out" && no_device=1
      read -r r p s f < <(gtest_counts "$work/test.$i.out")
      if [ "$r" = - ]; then
        ran=-
      elif [ "$ran" != - ]; then
        ran=$(( ran + r )); passed=$(( passed + p )); skipped=$(( skipped + s ))
        failed=$(( failed + f ))
      fi
      # The worst status: a timeout first, then a signal or failure.
      if [ $shard_rc -eq 124 ] || [ $rc -eq 124 ]; then rc=124
      elif [ $shard_rc -ne 0 ]; then rc=$shard_rc; fi
    done
    if [ $rc -eq 124 ]; then
      parts+=("$name: timed out"); status=timeout
    elif [ "$ran" = - ]; then
      parts+=("$name: status $rc, no gtest summary$( ((rc > 128)) && echo " (signal $((rc - 128)))")")
      status=failed
    elif [ $rc -ne 0 ] || (( failed > 0 )); then
      names_failed=$(cat "$work"/test.*.out | grep -E '^\[  FAILED  \] [A-Za-z_]' |
                     grep -v 'listed below' | awk '{ sub(/,$/, "", $4); print $4 }' | sort -u | head -5 | tr '\n' ' ')
      parts+=("$name: $failed of $ran failed (${names_failed% })")
      [ "$status" = timeout ] || status=failed
    else
      parts+=("$name: $passed passed, $skipped skipped")
    fi
    rm -f "$work"/test.*.out
  done
  if [ -n "$no_device" ]; then
    status=failed; parts+=("tests skipped for want of a CUDA device")
  fi
  detail=$(IFS=';'; echo "${parts[*]}" | sed 's/;/; /g')
}

# The paths that replaced an older one (H3_CUDA_FALLBACKS turns each off),
# each with the tests that exercise it (several lines may name one path):
# path, test program, gtest filter.
triage_cases=(
  "rows kernels_cuda_test *H3PrefillRowsGpuTest.*"
  "stream-split kernels_cuda_test *StreamGemmGpuTest.*/split_*"
  "stream-split kernels_cuda_test StreamSplitGpuTest.*"
  "tile kernels_cuda_test *StreamGemmGpuTest.*/tile_*"
  "tile kernels_cuda_test *LaunchOrderGpuTest.*tile*"
  "tile kernels_cuda_test *TileWidthsGpuTest.*"
  "pdl kernels_cuda_test *LaunchOrderGpuTest.*-*tile*"
  "pdl engine_cuda_test CudaPdlTest.*"
)
triage_fallbacks=""   # the paths whose tests failed: off for the benchmarks

phase_triage() {
  local i path program filter t r p s f rc pids=() parts=() failed_paths=()
  for i in "${!triage_cases[@]}"; do
    read -r path program filter <<<"${triage_cases[$i]}"
    : >"$work/triage.$i.out"
    # A path the caller turned off is not tested: its tests would test the
    # path it falls back to.
    if [[ ",${user_fallbacks// /}," == *",$path,"* ]]; then pids+=(off); continue; fi
    t=""
    for p in "${tests[@]}"; do [ "$(basename "$p")" = "$program" ] && t=$p; done
    [ -n "$t" ] || { pids+=(missing); continue; }
    bounded "$work/triage.$i.out" "$t" --gtest_brief=1 --gtest_filter="$filter" &
    pids+=($!)
  done
  status=passed
  for i in "${!triage_cases[@]}"; do
    read -r path program filter <<<"${triage_cases[$i]}"
    case ${pids[$i]} in
      off) parts+=("$path: off (H3_CUDA_FALLBACKS)"); continue ;;
      missing) parts+=("$path: no $program"); status=failed; continue ;;
    esac
    wait "${pids[$i]}"
    rc=$?
    echo "=== triage $path: $program --gtest_filter=$filter" >>"$tests_log"
    cat "$work/triage.$i.out" >>"$tests_log"
    read -r r p s f < <(gtest_counts "$work/triage.$i.out")
    if [ $rc -eq 124 ]; then
      parts+=("$path: timed out"); failed_paths+=("$path"); status=failed
    elif [ "$r" = - ]; then
      parts+=("$path: status $rc, no gtest summary"); failed_paths+=("$path"); status=failed
    elif [ $rc -ne 0 ] || (( f > 0 )); then
      parts+=("$path: $f of $r failed"); failed_paths+=("$path"); status=failed
    elif (( r == 0 )); then
      parts+=("$path: no test matched $filter"); status=failed
    else
      parts+=("$path: $p passed, $s skipped")
    fi
  done
  rm -f "$work"/triage.*.out
  triage_fallbacks=$(printf '%s\n' "${failed_paths[@]}" | awk 'NF && !seen[$0]++' | paste -sd, -)
  if [ -n "$triage_fallbacks" ]; then
    parts+=("the benchmarks run with H3_CUDA_FALLBACKS=$(bench_fallbacks)")
    facts_lines+=("fallbacks: the benchmarks run with H3_CUDA_FALLBACKS=$(bench_fallbacks) (triage failed: $triage_fallbacks)")
  fi
  detail=$(IFS=';'; echo "${parts[*]}" | sed 's/;/; /g')
}

# The benchmarks' H3_CUDA_FALLBACKS: the caller's, and the paths the triage
# turned off.
user_fallbacks=${H3_CUDA_FALLBACKS-}
bench_fallbacks() {
  printf '%s\n' "$user_fallbacks" "$triage_fallbacks" | tr ',' '\n' |
    awk 'NF && !seen[$0]++' | paste -sd, -
}

# ensure_model: the random H3-1.3B model file, written once (5.3 GB) and
# only renamed into place when complete.
ensure_model() {
  [ -f "$model" ] && return 0
  mkdir -p "$(dirname "$model")" || return 1
  bounded "$bench_log" "$shim/bench/h3_engine_bench" --what write-random \
    --random-shape h3-1.3b --model "$model.partial" && mv "$model.partial" "$model"
}

# bench_result RC NAME: status and detail from a benchmark's exit status.
bench_result() {
  case $1 in
    0) status=passed; detail=$(digest "$2") ;;
    124) status=timeout; detail="no $2.json (see bench.log)" ;;
    2) status=failed; detail="no CUDA device, the benchmark says (status 2)" ;;
    *) status=failed; detail="status $1 (see bench.log)" ;;
  esac
}

phase_linear() {
  if [ ! -x "$shim/bench/h3_linear_bench" ]; then
    status=skipped; detail="no h3_linear_bench in this build"; return
  fi
  bounded "$bench_log" "$shim/bench/h3_linear_bench" --rows 1,2,4,8,64 \
    --out "$res/linear.json"
  bench_result $? linear
}

phase_tile() {
  if [ ! -x "$shim/bench/h3_linear_bench" ]; then
    status=skipped; detail="no h3_linear_bench in this build"; return
  fi
  bounded "$bench_log" "$shim/bench/h3_linear_bench" --types fp16 \
    --activations half --rows 8,16,32,64 --tile-splits 2,4,6,8 \
    --tile-cols 64,128 \
    --reps 20 --rounds 3 --out "$res/tile.json"
  bench_result $? tile
}

phase_step() {
  if [ ! -x "$shim/bench/h3_step_bench" ]; then
    status=skipped; detail="no h3_step_bench in this build"; return
  fi
  bounded "$bench_log" "$shim/bench/h3_step_bench" --batches 1,8,64 \
    --sequences-per-block 8,16 --out "$res/step.json"
  bench_result $? step
}

phase_table4() {
  local rc
  ensure_model
  rc=$?
  if [ $rc -eq 0 ]; then
    bounded "$bench_log" "$python" "$root/bench/table4_bench.py" --no-build --build "$shim" \
      --model "$model" --prompt-lens "$prompt_lens" --out "$res/table4.json" \
      --engine-flags="$fast_flags" --sides "$table4_sides"
    rc=$?
  fi
  bench_result $rc table4
}

# bench/engine_breakdown.py: h3_engine_bench --what breakdown per batch size,
# with fp32 activations (breakdown.json), then 16-bit ones (breakdown_half).
phase_breakdown() {
  local rc half=""
  ensure_model
  rc=$?
  [ $rc -eq 0 ] && { breakdown_run breakdown --fp32-activations; rc=$?; }
  if [ $rc -eq 0 ]; then
    breakdown_run breakdown_half --half-activations
    bench_result $? breakdown_half
    half="$status: $detail"
  fi
  bench_result $rc breakdown
  [ -z "$half" ] || detail="$detail | --half-activations $half"
  [ -z "$half" ] || [[ $half == passed* ]] || status=failed
}
breakdown_run() {  # NAME ENGINE_FLAG
  bounded "$bench_log" "$python" "$root/bench/engine_breakdown.py" --build "$shim" \
    --model "$model" --device cuda --dtype fp16 --batches "$breakdown_batches" \
    --prompt-len "$breakdown_prompt_len" --prefill-batch "$breakdown_prefill_batch" \
    --decode-context 512 --decode-steps 32 --reps 5 --out "$res/$1.json" \
    --engine-flags="${breakdown_flags:+$breakdown_flags }$2"
}

serve() {  # NAME CONCURRENCY NUM_PROMPTS BUDGETS
  local rc left
  ensure_model
  rc=$?
  if [ $rc -eq 0 ]; then
    left=$(( deadline - SECONDS ))
    bounded "$bench_log" "$python" "$root/bench/serve_vs_offline.py" --build "$shim" \
      --device cuda --model "$model" --concurrency "$2" --num-prompts "$3" \
      --input-len 1536 --output-len 128 --reps 2 --budgets "$4" \
      --start-timeout $(( left / 2 )) --client-timeout "$left" --out "$res/$1.json"
    rc=$?
  fi
  bench_result $rc "$1"
}
phase_serve_1() { serve serve_1 1 4 default; }
phase_serve_64() { serve serve_64 64 128 "$serve_budgets"; }

# B64 H768 fp16 (FlashFFTConv's published shape) at every default length, on
# the fused FlashConv kernel, the chunked kernel (also on the packed q|k|v
# rows, mode rows) and cuFFT.
phase_flashconv() {
  bounded "$bench_log" "$python" "$root/bench/flashconv_bench.py" --no-build --build "$shim" \
    --out "$res/flashconv.json" -- --shapes 64x768 --types fp16 --paths fused,chunked,chunked_mma,cufft \
    --rows
  bench_result $? flashconv
}

# find_cuda_tool NAME: its path (PATH, then CUDA_HOME, CUDA_PATH,
# /usr/local/cuda), or nothing.
find_cuda_tool() {
  local d
  command -v "$1" && return
  for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    [ -n "$d" ] && [ -x "$d/bin/$1" ] && { echo "$d/bin/$1"; return; }
  done
}

# Nsight Compute's reports, with the clocks left alone (the device's
# METHOD.md): the fused FlashConv kernel and the chunked kernels (both shift
# convolutions, channel-major and on packed rows: RowsKernel is the engine's)
# at two lengths, then 28 launches of
# the H3-step and attention-decode kernels at batch 64 after skipping the
# first 28 (a step of H3-1.3B, 22 H3 and 2 attention layers, is 26 to 28 of
# them, depending on whether attention decode combines split pieces).
phase_profile() {
  local ncu rc length report=$out/profile.txt parts=()
  local sections=(--section SpeedOfLight --section LaunchStats --section Occupancy
                  --section WarpStateStats --section ComputeWorkloadAnalysis
                  --section MemoryWorkloadAnalysis --section InstructionStats)
  ncu=$(find_cuda_tool ncu)
  [ -n "$ncu" ] || { status=skipped; detail="ncu not found"; return; }
  status=passed
  local lengths=()
  [ "$profile_lengths" = none ] || IFS=, read -ra lengths <<<"$profile_lengths"
  for length in "${lengths[@]}"; do
    echo "=== ncu: FusedPrefillKernel, ChunkedPrefillKernel and RowsKernel (<T, false> and" \
      "the shift-MMA variants <T, true>), B64 H768 fp16, L $length" >>"$report"
    bounded "$report" "$ncu" --clock-control none -k regex:'FusedPrefill|ChunkedPrefill|RowsKernel' \
      --launch-count 5 "${sections[@]}" "$shim/bench/h3_flashconv_bench" --shapes 64x768 \
      --lengths "$length" --types fp16 --paths fused,chunked,chunked_mma --rows --warmup 1 \
      --min-time-ms 0 --min-reps 1 --max-reps 1 --out "$work/profile_flashconv.json"
    rc=$?
    parts+=("flashconv L$length $(profile_result $rc)")
    (( rc == 0 )) || status=failed
  done
  if ! ensure_model; then
    status=failed; detail="${parts[*]}; no model for the decode profile"; return
  fi
  echo "=== ncu: one batch-64 decode step's H3-step and attention kernels" >>"$report"
  bounded "$report" "$ncu" --clock-control none \
    -k 'regex:H3Step|DecodePiece|DecodeCombine|DecodeWriteKv|AddLayerNorm' --launch-skip 28 \
    --launch-count 28 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    "$shim/bench/h3_engine_bench" --what decode --model "$model" --device cuda \
    --dtype fp16 --half-activations --graphs off --batch 64 --decode-context 512 \
    --decode-steps 3 --reps 1
  rc=$?
  parts+=("decode $(profile_result $rc)")
  (( rc == 0 )) || status=failed
  # The batch-64 H3 step is a third of a decode step, compute-bound at 45%
  # of DRAM (2026-11-26, H200): one launch with every section, to see which
  # instructions and stalls bound it.
  profile_decode "h3 step" "one batch-64 H3 step" H3Step 28 1 64
  # A batch-1 step is mostly its products of 8 to 33 MB, which the stream
  # kernel moves at 28 to 60% of the copy bandwidth: one layer's four
  # (q|k|v, out, fc1, fc2) after a step's 97, every section.
  profile_decode "batch-1 products" "one layer's batch-1 products (StreamGemmKernel)" \
    StreamGemmKernel 97 4 1
  # The tile kernel's batch-64 products (slower than cuBLASLt's at eb5e768,
  # short of warps): 97 a step on it with --decode-products tile.
  profile_decode "batch-64 tile products" \
    "one layer's batch-64 products on the tile kernel (TileGemmKernel)" \
    TileGemmKernel 97 4 64 --decode-products tile
  # ncu's report header of a kernel ends with its grid and block: (x, y, z)x(x, y, z).
  parts+=("$(grep -cE '\([0-9]+, [0-9]+, [0-9]+\)x\([0-9]+, [0-9]+, [0-9]+\)' "$report") kernel reports in profile.txt")
  detail=$(IFS=';'; echo "${parts[*]}" | sed 's/;/; /g')
}
# NAME TITLE REGEX SKIP COUNT BATCH [FLAGS...]: ncu with every section on
# COUNT launches of the kernels REGEX matches, after SKIP, in decode steps of
# BATCH sequences, the engine given FLAGS too (phase_profile's ncu,
# sections, report, parts, status).
profile_decode() {
  echo "=== ncu: $2, every section" >>"$report"
  bounded "$report" "$ncu" --clock-control none -k "regex:$3" --launch-skip "$4" \
    --launch-count "$5" "${sections[@]}" "$shim/bench/h3_engine_bench" --what decode \
    --model "$model" --device cuda --dtype fp16 --half-activations --graphs off \
    --batch "$6" --decode-context 512 --decode-steps 3 --reps 1 "${@:7}"
  local rc=$?
  parts+=("$1 $(profile_result $rc)")
  (( rc == 0 )) || status=failed
}
profile_result() {  # RC: what one ncu run gave
  case $1 in
    0) echo "ran" ;; 124) echo "timed out" ;; *) echo "status $1" ;;
  esac
}

phase_attention() {
  bounded "$bench_log" "$shim/bench/h3_attention_bench" --out "$res/attention.json"
  bench_result $? attention
}

phase_memcheck() {
  local sanitizer t rc targets=() parts=()
  sanitizer=$(find_cuda_tool compute-sanitizer)
  [ -n "$sanitizer" ] || { status=skipped; detail="compute-sanitizer not found"; return; }
  for t in "${tests[@]}"; do [[ $(basename "$t") == engine* ]] && targets+=("$t"); done
  [ ${#targets[@]} -gt 0 ] || { status=skipped; detail="no engine GPU test program"; return; }
  status=passed
  for t in "${targets[@]}"; do
    echo "=== memcheck $(basename "$t")" >>"$tests_log"
    bounded "$tests_log" "$sanitizer" --tool memcheck --error-exitcode 86 --print-limit 50 \
      "$t" --gtest_brief=1
    rc=$?
    case $rc in
      0) parts+=("$(basename "$t"): no errors") ;;
      86) parts+=("$(basename "$t"): memcheck errors (tests.log)"); status=failed ;;
      124) parts+=("$(basename "$t"): timed out (partial log in tests.log)"); status=timeout ;;
      *) parts+=("$(basename "$t"): status $rc under memcheck (tests.log)"); status=failed ;;
    esac
  done
  detail=$(IFS=';'; echo "${parts[*]}" | sed 's/;/; /g')
}

# ---- the run ----------------------------------------------------------------
exit_status=0
bench_phases="table4 flashconv profile breakdown linear tile step attention serve_1 serve_64"
no_gpu=""   # set by the devices phase: the benchmarks and memcheck skip then
for phase in "${selected[@]}"; do
  left=$(( total - SECONDS - reserve ))
  if [ -n "$no_gpu" ] && [[ " triage $bench_phases memcheck " == *" $phase "* ]]; then
    record "$phase" skipped - - "h3 devices sees no GPU"
    continue
  fi
  if (( left < least[$phase] )); then
    record "$phase" skipped-time - - "$(( left > 0 ? left : 0 )) s left, needs ${least[$phase]}"
    continue
  fi
  # The benchmarks run without the paths the triage found failing; the
  # tests and memcheck with the caller's H3_CUDA_FALLBACKS only.
  if [ -n "$triage_fallbacks" ] && [[ " $bench_phases " == *" $phase "* ]]; then
    export H3_CUDA_FALLBACKS; H3_CUDA_FALLBACKS=$(bench_fallbacks)
  elif [ -n "$user_fallbacks" ]; then
    export H3_CUDA_FALLBACKS=$user_fallbacks
  else
    unset H3_CUDA_FALLBACKS
  fi
  phase_limit=$(( limit[$phase] < left ? limit[$phase] : left ))
  deadline=$(( SECONDS + phase_limit ))
  start=$SECONDS
  running=$phase
  write_summary
  echo "gpu-check.sh: $phase (at most $phase_limit s)" >&2
  echo "=== phase $phase (at most $phase_limit s)" >>"$bench_log"
  status=failed
  detail=""
  "phase_$phase"
  running=""
  record "$phase" "$status" $(( SECONDS - start )) "$phase_limit" "$detail"
  case $status in failed|timeout) exit_status=1 ;; esac
  write_summary
  echo "gpu-check.sh: $phase $status${detail:+: $detail}" >&2
done
write_summary
cat "$summary"
exit $exit_status
