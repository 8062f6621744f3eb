#!/usr/bin/python3
"""Trains h3-kjv, the default model: a sentencepiece tokenizer and a small
hybrid H3 language model on the King James Bible (corpus.py).

The model is the independent PyTorch reference of the hybrid H3 LM
(tests/reference/h3_reference.py), its weights a dict of parameters with the
released checkpoints' tensor names; the result is saved as they were, a
torch.save'd plain state_dict, so `h3 convert` takes it to a model file
exactly as it takes the released models.

  /usr/bin/python3 models/h3-kjv/train.py DATA_DIR OUT_DIR [--steps N]
reads DATA_DIR/{train,valid}.txt and writes OUT_DIR/h3-kjv.model (tokenizer),
OUT_DIR/h3-kjv.pt (checkpoint) and OUT_DIR/train_log.json.
"""
import argparse
import json
import math
import os
import sys
import time

import sentencepiece as spm
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))
import h3_reference as ref  # noqa: E402

# H3 layers with one attention layer in the middle, as in the released
# hybrids; head_dim 1 and d_state 64 as there.
CONFIG = dict(name="h3-kjv", d_model=192, n_layer=4, attn=[2], n_heads=4,
              head_dim=1, d_state=64, rotary=0)
VOCAB = 4096
SEQ_LEN, BATCH = 256, 16
PEAK_LR, SSM_LR, WARMUP, WEIGHT_DECAY = 3e-3, 1e-3, 200, 0.1
SEED = 1611

EMB = "backbone.embeddings.word_embeddings.weight"
SSM_NAMES = ("ssm_k_kernel.", "ssm_k_D", "kernel.kernel.", "mixer.D")
OUTPUT_PROJECTIONS = ("output_linear.weight", "out_proj.weight", "fc2.weight")


def read_docs(path):
    with open(path) as f:
        return [line.rstrip("\n").replace("\t", "\n") for line in f]


def train_tokenizer(docs, prefix):
    """A unigram sentencepiece model; ids 0..3 are unk, bos, eos, pad."""
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(docs), model_prefix=prefix, vocab_size=VOCAB,
        model_type="unigram", character_coverage=1.0, byte_fallback=True,
        unk_id=0, bos_id=1, eos_id=2, pad_id=3, max_sentence_length=1 << 16,
        num_threads=2, minloglevel=2)
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


def token_stream(sp, docs):
    """All documents' tokens, each followed by </s>, as one int64 tensor."""
    ids = []
    for piece in sp.encode(docs):
        ids.extend(piece)
        ids.append(sp.eos_id())
    return torch.tensor(ids, dtype=torch.int64)


def init_weights(cfg, gen):
    """GPT-2 style init for the linear layers; H3's init for the SSMs: shift
    B = e1, S4D-Lin for the diagonal SSM (A = -1/2 + i pi n, dt log-uniform
    in [1e-3, 1e-1], B = 1)."""
    d, n, L = cfg["d_model"], cfg["d_state"], cfg["n_layer"]
    h, m = d // cfg["head_dim"], n // 2
    w = ref.random_weights(cfg, gen, VOCAB)
    for name, t in w.items():
        if name.endswith(".bias"):
            w[name] = torch.zeros_like(t)
        elif ".norm" in name or "ln_f" in name:
            w[name] = torch.ones_like(t)
        elif name == EMB or name.endswith(".weight"):
            std = 0.02 / math.sqrt(2 * L) if name.endswith(OUTPUT_PROJECTIONS) else 0.02
            w[name] = torch.randn(t.shape, generator=gen) * std
        elif name.endswith("ssm_k_kernel.kernel.B"):
            w[name] = torch.zeros(d, n)
            w[name][:, 0] = 1
        elif name.endswith("ssm_k_kernel.kernel.C"):
            w[name] = torch.randn(1, d, n, generator=gen) / math.sqrt(n)
        elif name.endswith("kernel.kernel.log_dt"):
            w[name] = math.log(1e-3) + torch.rand(h, generator=gen) * math.log(100)
        elif name.endswith("kernel.kernel.inv_A_real"):
            w[name] = torch.full((h, m), math.log(0.5))
        elif name.endswith("kernel.kernel.B"):
            w[name] = torch.stack([torch.ones(h, m), torch.zeros(h, m)], -1)
        elif name.endswith("kernel.kernel.C"):
            w[name] = torch.randn(1, h, m, 2, generator=gen) * math.sqrt(0.5)
    return w


def loss_on(w, tokens):
    """Mean next-token cross-entropy (nats) of tokens [B, T+1]."""
    logits = ref.forward(w, CONFIG, tokens[:, :-1])
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


@torch.no_grad()
def evaluate(w, stream):
    """Mean loss over consecutive SEQ_LEN windows covering `stream`."""
    total, count = 0.0, 0
    for start in range(0, len(stream) - 1, SEQ_LEN):
        chunk = stream[start:start + SEQ_LEN + 1][None]
        if chunk.shape[1] < 2:
            break
        n = chunk.shape[1] - 1
        total += float(loss_on(w, chunk)) * n
        count += n
    return total / count


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    os.makedirs(args.out_dir, exist_ok=True)
    start = time.monotonic()

    train_docs = read_docs(os.path.join(args.data_dir, "train.txt"))
    valid_docs = read_docs(os.path.join(args.data_dir, "valid.txt"))
    sp = train_tokenizer(train_docs, os.path.join(args.out_dir, "h3-kjv"))
    train, valid = token_stream(sp, train_docs), token_stream(sp, valid_docs)
    print(f"tokens: train {len(train)}, valid {len(valid)}", flush=True)

    gen = torch.Generator().manual_seed(SEED)
    w = {k: torch.nn.Parameter(v) for k, v in init_weights(CONFIG, gen).items()}
    ssm = [p for k, p in w.items() if any(s in k for s in SSM_NAMES)]
    decay = [p for k, p in w.items() if p.dim() == 2 and not any(s in k for s in SSM_NAMES)]
    rest = [p for k, p in w.items() if p.dim() < 2 and not any(s in k for s in SSM_NAMES)]
    groups = [dict(params=decay, weight_decay=WEIGHT_DECAY, lr=PEAK_LR),
              dict(params=rest, weight_decay=0.0, lr=PEAK_LR),
              dict(params=ssm, weight_decay=0.0, lr=SSM_LR)]
    for g in groups:
        g["peak"] = g["lr"]
    opt = torch.optim.AdamW(groups, betas=(0.9, 0.95))
    print(f"parameters: {sum(p.numel() for p in w.values())}", flush=True)

    log = dict(config=CONFIG, vocab=VOCAB, seq_len=SEQ_LEN, batch=BATCH,
               steps=args.steps, peak_lr=PEAK_LR, ssm_lr=SSM_LR, warmup=WARMUP,
               weight_decay=WEIGHT_DECAY, seed=SEED, threads=args.threads,
               train_tokens=len(train), valid_tokens=len(valid), evals=[])
    for step in range(1, args.steps + 1):
        scale = min(step / WARMUP, 0.5 * (1 + math.cos(math.pi * step / args.steps)))
        for g in groups:
            g["lr"] = g["peak"] * max(scale, 0.02)
        starts = torch.randint(0, len(train) - SEQ_LEN - 1, (BATCH,), generator=gen)
        batch = torch.stack([train[s:s + SEQ_LEN + 1] for s in starts.tolist()])
        loss = loss_on(w, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(w.values()), 1.0)
        opt.step()
        if step % 50 == 0:
            print(f"step {step} loss {float(loss):.3f} "
                  f"{time.monotonic() - start:.0f}s", flush=True)
        if step % args.eval_every == 0 or step == args.steps:
            v = evaluate(w, valid)
            log["evals"].append(dict(step=step, train_loss=float(loss), valid_loss=v,
                                     seconds=time.monotonic() - start))
            print(f"step {step} valid loss {v:.3f} ppl {math.exp(v):.1f}", flush=True)

    log["seconds"] = time.monotonic() - start
    torch.save({k: v.detach().clone() for k, v in w.items()},
               os.path.join(args.out_dir, "h3-kjv.pt"))
    with open(os.path.join(args.out_dir, "train_log.json"), "w") as f:
        json.dump(log, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
