#!/usr/bin/env bash
# Builds the loader's libFuzzer targets with clang (-fsanitize=fuzzer,address)
# against the loader sources they exercise, and runs each briefly over its
# seed corpus (loader/fuzz/corpus/, made by tests/reference/make_checkpoints.py).
#
#   scripts/fuzz-loader.sh [--runs N] [--seconds S] [--build-dir DIR]
#
# Exits 77 (ctest: skipped) when clang++ or its fuzzer runtime is missing.
# The main build uses g++; this builds separately so it does not depend on it.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=20000
seconds=10
build=build/fuzz
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    *) echo "fuzz-loader.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
cxx=${FUZZ_CXX:-clang++}
if ! command -v "$cxx" >/dev/null; then
  echo "fuzz-loader.sh: $cxx not found; skipping" >&2
  exit 77
fi
mkdir -p "$build"
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
     "$cxx" -x c++ -fsanitize=fuzzer -o "$build/probe" - 2>/dev/null; then
  echo "fuzz-loader.sh: $cxx has no libFuzzer runtime; skipping" >&2
  exit 77
fi
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address -I.)
absl_libs=(-labsl_status -labsl_statusor -labsl_strings -labsl_str_format_internal
           -labsl_cord -labsl_cordz_info -labsl_cord_internal -labsl_cordz_functions
           -labsl_cordz_handle -labsl_crc_cord_state -labsl_crc32c -labsl_crc_internal
           -labsl_throw_delegate -labsl_int128 -labsl_raw_logging_internal
           -labsl_strings_internal -labsl_base -labsl_spinlock_wait
           -labsl_synchronization -labsl_time -labsl_time_zone -labsl_stacktrace
           -labsl_symbolize -labsl_debugging_internal -labsl_demangle_internal
           -labsl_malloc_internal -labsl_graphcycles_internal -labsl_exponential_biased)
available=()
for l in "${absl_libs[@]}"; do
  if ls /usr/lib/x86_64-linux-gnu/lib${l#-l}.so >/dev/null 2>&1; then available+=("$l"); fi
done
common=(loader/dtype.cc loader/mapped_file.cc loader/torch_zip.cc)
"$cxx" "${flags[@]}" -o "$build/pickle_fuzzer" loader/fuzz/pickle_fuzzer.cc \
  loader/pickle.cc loader/pickle_torch.cc "${common[@]}" "${available[@]}" -lzip
"$cxx" "${flags[@]}" -o "$build/safetensors_fuzzer" loader/fuzz/safetensors_fuzzer.cc \
  loader/safetensors.cc "${common[@]}" loader/pickle.cc loader/pickle_torch.cc "${available[@]}" -lzip
for target in pickle safetensors; do
  work="$build/corpus-$target"
  mkdir -p "$work"
  echo "== $target: $runs runs or ${seconds}s"
  "$build/${target}_fuzzer" -runs="$runs" -max_total_time="$seconds" \
    -max_len=65536 -rss_limit_mb=2048 "$work" "loader/fuzz/corpus/$target" 2>&1 | tail -3
done
