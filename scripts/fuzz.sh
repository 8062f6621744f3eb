#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (-fsanitize=fuzzer,address) apart
# from the main (g++) build, and runs each for a bounded time over its seed
# corpus:
#   pickle, safetensors  checkpoints (loader/fuzz/)
#   model_file           the .h3 model file (loader/fuzz/)
#   gpt2_files           vocab.json+merges.txt, encoder.json+vocab.bpe,
#                        tokenizer.json, then text (tokenizer/fuzz/)
#   sentencepiece        a .model file (tokenizer/fuzz/)
#   generate_request     gRPC GenerateRequest bytes, validated (tests/fuzz/)
#   openai_request       POST /v1/completions bodies, validated (tests/fuzz/)
#
#   scripts/fuzz.sh [--runs N] [--seconds S] [--build-dir DIR] [--json DIR]
#                   [TARGET...]
#
# Each target runs until N runs or S seconds, whichever comes first (default
# 20000 runs, 10 s). New inputs go to DIR/corpus-TARGET, never into the
# committed seeds. With --json, writes DIR/fuzz_TARGET.json: execs, libFuzzer's
# cov and ft, corpus size, crashes, commit and machine. A crashing input is
# kept as DIR/artifacts/TARGET-crash-*; the script then exits 1.
# Exits 77 (ctest: skipped) when clang++ or its fuzzer runtime is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=20000
seconds=10
build=build/fuzz
json=""
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    -*) echo "fuzz.sh: unknown argument $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
all=(pickle safetensors model_file gpt2_files sentencepiece generate_request
     openai_request)
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
cxx=${FUZZ_CXX:-clang++}
if ! command -v "$cxx" >/dev/null; then
  echo "fuzz.sh: $cxx not found; skipping" >&2
  exit 77
fi
mkdir -p "$build/obj" "$build/gen" "$build/artifacts"
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
     "$cxx" -x c++ -fsanitize=fuzzer -o "$build/probe" - 2>/dev/null; then
  echo "fuzz.sh: $cxx has no libFuzzer runtime; skipping" >&2
  exit 77
fi
ccache=""
command -v ccache >/dev/null && ccache=ccache
cflags=(-std=c++20 -O1 -g -fsanitize=fuzzer-no-link,address -I. -I"$build/gen"
        -DH3_SENTENCEPIECE_MODULE_FILE_NAME='"libh3_sentencepiece_module.so"'
        -DH3_SENTENCEPIECE_MODULE_BUILD_PATH='""')
libs=(-lzip -lre2 -ldl)
for l in status statusor strings str_format_internal cord cordz_info \
         cord_internal cordz_functions cordz_handle crc_cord_state crc32c \
         crc_internal throw_delegate int128 raw_logging_internal \
         strings_internal base spinlock_wait synchronization time time_zone \
         stacktrace symbolize debugging_internal demangle_internal \
         malloc_internal graphcycles_internal exponential_biased hash \
         city low_level_hash raw_hash_set; do
  if [ -e "/usr/lib/x86_64-linux-gnu/libabsl_$l.so" ]; then libs+=("-labsl_$l"); fi
done

# The sources each target links, beside its own fuzzer file.
loader_srcs="base/half_float.cc loader/dtype.cc loader/mapped_file.cc loader/torch_zip.cc
  loader/pickle.cc loader/pickle_torch.cc loader/safetensors.cc"
model_srcs="$loader_srcs loader/config.cc loader/model_file.cc
  loader/tokenizer_files.cc"
tokenizer_srcs="$model_srcs tokenizer/bytes_to_unicode.cc tokenizer/gpt2_bpe.cc
  tokenizer/gpt2_pretokenizer.cc tokenizer/gpt2_vocab_files.cc
  tokenizer/load.cc tokenizer/sentencepiece_library.cc
  tokenizer/sentencepiece_module_loader.cc tokenizer/sentencepiece_tokenizer.cc
  tokenizer/tokenizer.cc tokenizer/utf8.cc"
request_srcs="$tokenizer_srcs server/generate_request.cc server/openai_request.cc
  server/status.cc engine/scheduler/result_stream.cc
  $build/gen/h3/v1/text_generation.pb.cc"
declare -A srcs=(
  [pickle]="loader/fuzz/pickle_fuzzer.cc $loader_srcs"
  [safetensors]="loader/fuzz/safetensors_fuzzer.cc $loader_srcs"
  [model_file]="loader/fuzz/model_file_fuzzer.cc $tokenizer_srcs"
  [gpt2_files]="tokenizer/fuzz/gpt2_files_fuzzer.cc $tokenizer_srcs"
  [sentencepiece]="tokenizer/fuzz/sentencepiece_fuzzer.cc tokenizer/sentencepiece_module.cc"
  [generate_request]="tests/fuzz/generate_request_fuzzer.cc $request_srcs"
  [openai_request]="tests/fuzz/openai_request_fuzzer.cc $request_srcs"
)
# Libraries beyond abseil's and libs: libsentencepiece bundles a
# protobuf-lite that must not meet libprotobuf in one process (see
# tokenizer/CMakeLists.txt), so only its target links it.
declare -A extra_libs=(
  [sentencepiece]="-lsentencepiece"
  [generate_request]="-lprotobuf -lgrpc++ -lgrpc -lgpr"
  [openai_request]="-lprotobuf -lgrpc++ -lgrpc -lgpr"
)
declare -A corpus=(
  [pickle]=loader/fuzz/corpus/pickle [safetensors]=loader/fuzz/corpus/safetensors
  [model_file]=loader/fuzz/corpus/model_file
  [gpt2_files]=tokenizer/fuzz/corpus/gpt2_files
  [sentencepiece]=tokenizer/fuzz/corpus/sentencepiece
  [generate_request]=tests/fuzz/corpus/generate_request
  [openai_request]=tests/fuzz/corpus/openai_request
)

# The request targets need the API's generated Protobuf code.
protoc --cpp_out="$build/gen" --proto_path=proto proto/h3/v1/text_generation.proto

# Compiles every source once (two at a time), ccache doing the rest.
needed=$(for t in "${targets[@]}"; do echo ${srcs[$t]}; done | tr ' ' '\n' | sort -u)
for src in $needed; do
  echo "$src $build/obj/$(echo "$src" | tr / _).o"
done | xargs -P 2 -n 2 sh -c '$0 -c "$1" -o "$2"' "$ccache $cxx ${cflags[*]}" \
  || { echo "fuzz.sh: compiling failed" >&2; exit 1; }

status=0
for target in "${targets[@]}"; do
  objs=()
  for src in ${srcs[$target]}; do objs+=("$build/obj/$(echo "$src" | tr / _).o"); done
  "$cxx" -fsanitize=fuzzer,address -o "$build/${target}_fuzzer" "${objs[@]}" "${libs[@]}" \
    ${extra_libs[$target]:-}
  work="$build/corpus-$target"
  log="$build/$target.log"
  mkdir -p "$work"
  echo "== $target: $runs runs or ${seconds}s"
  set +e
  "$build/${target}_fuzzer" -runs="$runs" -max_total_time="$seconds" \
    -max_len=65536 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$target-" \
    "$work" "${corpus[$target]}" >"$log" 2>&1
  code=$?
  set -e
  grep -E "^#[0-9]+.(DONE|INITED)|^Done|ERROR|SUMMARY" "$log" | tail -4
  [ $code -eq 0 ] || { echo "fuzz.sh: $target failed (exit $code); see $log" >&2; status=1; }
  if [ -n "$json" ]; then
    mkdir -p "$json"
    python3 scripts/fuzz_summary.py "$target" "$log" "$code" "$seconds" "$runs" \
      "$json/fuzz_$target.json"
  fi
done
exit $status
