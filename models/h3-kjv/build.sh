#!/usr/bin/env bash
# Makes the default model from nothing but Debian packages: the corpus
# (bible-kjv), a sentencepiece tokenizer and the model (python3-torch,
# python3-sentencepiece), then `h3 convert` to the model file, as for the
# released checkpoints. Writes models/h3-kjv/{h3-kjv.h3,train_log.json};
# the build embeds the model file into h3serve.
#
#   models/h3-kjv/build.sh [--steps N]   (about 15 minutes on 2 CPU cores)
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d /tmp/h3-kjv.XXXXXX)
trap 'rm -rf "$work"' EXIT

apt-get install -y -q bible-kjv python3-torch python3-sentencepiece >/dev/null
cmake --preset default >/dev/null
cmake --build --preset default --target h3

/usr/bin/python3 models/h3-kjv/corpus.py "$work/data"
# Debian's torch (OpenMP) calls Debian's OpenBLAS (its own threads): spinning
# OpenMP workers would take half the CPU from the matrix products.
export OMP_WAIT_POLICY=PASSIVE
/usr/bin/python3 models/h3-kjv/train.py "$work/data" "$work/out" "$@"
build/clients/h3 convert "$work/out/h3-kjv.pt" -o models/h3-kjv/h3-kjv.h3 \
  --n-heads 4 --tokenizer "$work/out/h3-kjv.model"
cp "$work/out/train_log.json" models/h3-kjv/train_log.json
