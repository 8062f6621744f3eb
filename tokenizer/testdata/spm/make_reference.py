"""Writes spm/reference.json: what Debian's python3-sentencepiece says about
corpus.json with spm/h3_test.model. Run by make_fixtures.sh:
  /usr/bin/python3 make_reference.py MODEL corpus.json OUT.json
"""
import json
import random
import sys

import sentencepiece

model_path, corpus_path, out_path = sys.argv[1:]
sp = sentencepiece.SentencePieceProcessor(model_file=model_path)
corpus = json.load(open(corpus_path, encoding="utf-8"))

rng = random.Random(12345)
byte_ids = [i for i in range(sp.get_piece_size()) if sp.is_byte(i)]
decode = []
for _ in range(300):
    # Half the ids are byte pieces, so that characters get split and broken.
    ids = [rng.choice(byte_ids) if rng.random() < 0.5
           else rng.randrange(sp.get_piece_size())
           for _ in range(rng.randint(1, 6))]
    decode.append({"ids": ids, "text": sp.decode(ids)})

encoded = [sp.encode(text) for text in corpus]
json.dump({
    "generator": "make_reference.py with python3-sentencepiece "
                 + sentencepiece.__version__,
    "vocab_size": sp.get_piece_size(),
    "bos_id": sp.bos_id(),
    "eos_id": sp.eos_id(),
    "encode": encoded,
    "decode_of_encode": [sp.decode(ids) for ids in encoded],
    "decode": decode,
}, open(out_path, "w", encoding="utf-8"), ensure_ascii=True)
open(out_path, "a").write("\n")
