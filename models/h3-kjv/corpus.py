#!/usr/bin/python3
"""The King James Bible as training and held-out text for the default model.

The text comes from Debian's bible-kjv-text package (public domain), read
through its `bible` program, one chapter per document. Verse numbers are
dropped; a chapter is its heading ("Genesis 1") on a line and its verses
joined by spaces. Every 20th chapter (chapters 10, 30, 50, ... in canonical
order, spread over all books) is held out for validation; the rest trains.

  /usr/bin/python3 models/h3-kjv/corpus.py OUT_DIR
writes OUT_DIR/train.txt and OUT_DIR/valid.txt, one chapter per line.
"""
import os
import re
import subprocess
import sys

HOLD_OUT_EVERY, HOLD_OUT_OFFSET = 20, 9
HEADING = re.compile(r"^(\S.*) (\d+)$")
VERSE = re.compile(r"^\s+\d+ (.*)$")


def chapters():
    """[(heading, text)] for the 1,189 chapters, in canonical order."""
    text = subprocess.run(["bible", "-l0", "gen1:1-rev22:21"], check=True,
                          capture_output=True, text=True).stdout
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if m := HEADING.match(line):
            out.append([line.strip(), []])
        elif m := VERSE.match(line):
            out[-1][1].append(m.group(1).strip())
        else:
            raise ValueError(f"unexpected line from bible: {line!r}")
    return [(h, " ".join(v)) for h, v in out]


def split():
    """(train, valid): lists of chapter documents "Heading\\ntext"."""
    train, valid = [], []
    for i, (heading, text) in enumerate(chapters()):
        held = i % HOLD_OUT_EVERY == HOLD_OUT_OFFSET
        (valid if held else train).append(f"{heading}\n{text}")
    return train, valid


def main(out_dir):
    train, valid = split()
    os.makedirs(out_dir, exist_ok=True)
    for name, docs in (("train", train), ("valid", valid)):
        with open(os.path.join(out_dir, name + ".txt"), "w") as f:
            for doc in docs:
                f.write(doc.replace("\n", "\t") + "\n")
    print(f"{len(train)} training and {len(valid)} held-out chapters")


if __name__ == "__main__":
    main(sys.argv[1])
