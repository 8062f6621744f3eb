#!/usr/bin/env bash
# Builds test binaries under sanitizers, each kind in a build directory of
# its own (CPU only, g++), runs them and writes a summary:
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer: by default every
#         CPU unit and e2e test binary (the e2e tests start the sanitized h3
#         and h3serve, which are built too)
#   tsan  ThreadSanitizer: by default the scheduler and result stream tests
#         (scheduler_test) and the server tests (server/*_test)
#
#   scripts/sanitize.sh asan|tsan [--jobs N] [--out DIR] [TEST_TARGET...]
#
# TEST_TARGETs replace the default list (a subset when time is short: a full
# ASan build is a few hundred compilations). Writes DIR/sanitize_<kind>.json
# (default DIR: bench/results) with the commit, the machine, the test
# binaries, the tests run and failed, the sanitizer reports of every process
# (scripts/sanitize_summary.py), and the build and test times; the test
# output and the report files stay in the build directory
# (sanitize_tests.txt, sanitizer-reports/). Exits 1 when a test fails or a
# sanitizer reports. Run it under `nice` on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { sed -n 2,20p "$0"; exit 2; }
kind=$1; shift
jobs=2
out=bench/results
tests=()
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -*) echo "sanitize.sh: unknown argument $1" >&2; exit 2 ;;
    *) tests+=("$1"); shift ;;
  esac
done
server_tests=(server_generate_request_test server_openai_request_test
              server_http_server_test server_thread_stack_test server_test
              server_generate_test server_bad_request_test server_serving_test)
case "$kind" in
  asan)
    flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
    defaults=(base_test proto_test loader_test tokenizer_test
              sentencepiece_missing_module_test sentencepiece_protobuf_test
              kernels_cpu_test engine_test scheduler_test default_model_test
              test_support_test h3_bench_test h3_bench_runner_test
              "${server_tests[@]}" e2e_binaries_test e2e_run_test
              e2e_generate_fake_test e2e_generate_test e2e_bench_test
              e2e_health_test e2e_openai_test e2e_soak_test) ;;
  tsan)
    flags="-fsanitize=thread -fno-omit-frame-pointer"
    defaults=(scheduler_test "${server_tests[@]}") ;;
  *) echo "sanitize.sh: asan or tsan, not $kind" >&2; exit 2 ;;
esac
[ ${#tests[@]} -gt 0 ] || tests=("${defaults[@]}")
targets=("${tests[@]}")
case " ${tests[*]}" in *" e2e_"*) targets+=(h3 h3serve) ;; esac

status=0
mkdir -p "$out"
build="build-$kind"
echo "== $kind: configure $build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DH3_WITH_CUDA=OFF -DH3_BUILD_TESTS=ON -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
  -DCMAKE_MODULE_LINKER_FLAGS="$flags" >/dev/null
echo "== $kind: build ${targets[*]}"
start=$(date +%s)
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
# The sentencepiece module is loaded with dlmopen into a namespace of its
# own, where a sanitizer runtime cannot load (static TLS): build it plain.
mkdir -p "$build/plain"
c++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -I. \
  tokenizer/sentencepiece_module.cc -o "$build/plain/libh3_sentencepiece_module.so" \
  -lsentencepiece
export H3_SENTENCEPIECE_MODULE="$PWD/$build/plain/libh3_sentencepiece_module.so"
if [ "$kind" = tsan ]; then
  # Debian's abseil is not built with TSan: tell TSan about absl::Mutex.
  c++ -std=c++20 -O1 -g -shared -fPIC tests/sanitize/tsan_absl_mutex.cc \
    -o "$build/plain/libtsan_absl_mutex.so" -ldl
  export LD_PRELOAD="$PWD/$build/plain/libtsan_absl_mutex.so"
fi
built=$(date +%s)
echo "== $kind: test"
log="$build/sanitize_tests.txt"
# Every process (the servers the e2e tests start too) writes its reports to
# a file of its own there.
reports="$PWD/$build/sanitizer-reports"
rm -rf "$reports"; mkdir -p "$reports"
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:log_path=$reports/asan"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan"
export TSAN_OPTIONS="halt_on_error=0:second_deadlock_stack=1:log_path=$reports/tsan"
: >"$log"
for t in "${tests[@]}"; do
  bin="$PWD/$(find "$build" -name "$t" -type f -perm -u+x | head -1)"
  echo "== $t" | tee -a "$log"
  set +e
  (cd "$(dirname "$bin")" && "$bin") >>"$log" 2>&1
  echo "== exit $? $t" >>"$log"
  set -e
  grep -E "^\[  (PASSED|FAILED)  \] [0-9]+ test" "$log" | tail -1
done
tested=$(date +%s)
if ! python3 scripts/sanitize_summary.py "$kind" "$log" "$reports" \
    "$((built - start))" "$((tested - built))" "$out/sanitize_$kind.json"; then
  status=1
fi
exit $status
