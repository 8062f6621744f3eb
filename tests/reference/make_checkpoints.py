#!/usr/bin/python3
"""Builds the loader's test fixtures: tiny random H3 models saved as PyTorch
checkpoints in the three layouts of docs/model.md and as safetensors, broken and
hostile inputs, and the values the C++ tests must read back.

Regenerate (needs Debian's python3-torch; the pyenv python3 has no torch):
    apt-get install -y python3-torch
    /usr/bin/python3 tests/reference/make_checkpoints.py
It rewrites loader/testdata/ and loader/fuzz/corpus/ deterministically (same
seeds); commit the result. CI only reads the committed files.
"""
import argparse
import collections
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "loader", "testdata")
CORPUS = os.path.join(ROOT, "loader", "fuzz", "corpus")
EMB = "backbone.embeddings.word_embeddings.weight"


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def le_bytes(t: torch.Tensor) -> bytes:
    """Little-endian bytes of a contiguous tensor (x86: native order)."""
    t = t.contiguous()
    if t.dtype == torch.bfloat16:  # no numpy bf16: go through int16
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def is_ssm(name: str) -> bool:
    return (".mixer.kernel." in name or ".mixer.ssm_k_kernel." in name
            or name.endswith(".mixer.D") or name.endswith(".mixer.ssm_k_D")
            or name.endswith("rotary_emb.inv_freq"))


def make_model(seed, d, n_layer, attn, d_state, vocab_pad, head_dim=1,
               rotary_dim=0, dtype=torch.float32):
    """A state_dict with the official layout-1 names and random values."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape: torch.randn(*shape, generator=g)
    sd = collections.OrderedDict()
    sd[EMB] = r(vocab_pad, d)
    h, n = d // head_dim, d_state
    for i in range(n_layer):
        p = "backbone.layers.%d." % i
        for norm in ("norm1", "norm2"):
            sd[p + norm + ".weight"] = 1 + 0.1 * r(d)
            sd[p + norm + ".bias"] = 0.1 * r(d)
        if i in attn:
            sd[p + "mixer.Wqkv.weight"] = r(3 * d, d)
            sd[p + "mixer.Wqkv.bias"] = r(3 * d)
            if rotary_dim:
                sd[p + "mixer.rotary_emb.inv_freq"] = 1.0 / (10000 ** (
                    torch.arange(0, rotary_dim, 2).float() / rotary_dim))
            sd[p + "mixer.out_proj.weight"] = r(d, d)
            sd[p + "mixer.out_proj.bias"] = r(d)
        else:
            for proj in ("q_proj", "k_proj", "v_proj"):
                sd[p + "mixer.%s.weight" % proj] = r(d, d)
                sd[p + "mixer.%s.bias" % proj] = r(d)
            sd[p + "mixer.ssm_k_kernel.kernel.B"] = r(d, n)
            sd[p + "mixer.ssm_k_kernel.kernel.C"] = r(1, d, n)
            sd[p + "mixer.ssm_k_D"] = r(d)
            sd[p + "mixer.kernel.kernel.log_dt"] = r(h)
            sd[p + "mixer.kernel.kernel.inv_A_real"] = r(h, n // 2)
            sd[p + "mixer.kernel.kernel.A_imag"] = r(h, n // 2)
            sd[p + "mixer.kernel.kernel.B"] = r(h, n // 2, 2)
            sd[p + "mixer.kernel.kernel.C"] = r(1, h, n // 2, 2)
            sd[p + "mixer.D"] = r(h)
            sd[p + "mixer.output_linear.weight"] = r(d, d)
            sd[p + "mixer.output_linear.bias"] = r(d)
        sd[p + "mlp.fc1.weight"] = r(4 * d, d)
        sd[p + "mlp.fc1.bias"] = r(4 * d)
        sd[p + "mlp.fc2.weight"] = r(d, 4 * d)
        sd[p + "mlp.fc2.bias"] = r(d)
    sd["backbone.ln_f.weight"] = 1 + 0.1 * r(d)
    sd["backbone.ln_f.bias"] = 0.1 * r(d)
    for k in sd:
        sd[k] = sd[k].to(dtype)
    sd["lm_head.weight"] = sd[EMB]  # tied: one storage, saved once
    return sd


def expected_values(sd, config, hints):
    """What the converter must produce: per tensor the FNV-1a 64 of its
    float32 bytes and of torch's own fp16/bf16 rounding of them."""
    tensors = {}
    for name, t in sd.items():
        if name == "lm_head.weight":
            continue
        f32 = t.float()
        tensors[name] = {
            "shape": list(t.shape),
            "fnv_f32": fnv1a64(le_bytes(f32)),
            "fnv_f16": fnv1a64(le_bytes(f32.half())),
            "fnv_bf16": fnv1a64(le_bytes(f32.bfloat16())),
            "first": float(f32.flatten()[0]),
            "last": float(f32.flatten()[-1]),
        }
    return {"config": config, "hints": hints, "tensors": tensors}


def to_old_names(sd, n_layer):
    """The inverse of SSMLMHeadModel.load_state_dict's remapping: old prefixes
    and the layer norms one position earlier (ln_0 = norm1 of layer 0,
    norm1[l] = norm2[l], norm2[l] = norm1[l+1], norm2[last] = ln_f)."""
    src = dict(sd)
    new = collections.OrderedDict()
    def norm(l, w, p):
        return "backbone.layers.%d.norm%d.%s" % (l, w, p)
    moved = {}
    for p in ("weight", "bias"):
        moved["backbone.ln_0." + p] = src[norm(0, 1, p)]
        for l in range(n_layer):
            moved[norm(l, 1, p)] = src[norm(l, 2, p)]
            moved[norm(l, 2, p)] = (src[norm(l + 1, 1, p)] if l + 1 < n_layer
                                    else src["backbone.ln_f." + p])
    for name, t in sd.items():
        if name == "lm_head.weight" or ".norm" in name or "ln_f" in name:
            continue
        moved[name] = t
    for name, t in moved.items():
        if name == EMB:
            new["embedding.weight"] = t
        else:
            new["s4seq.encoder." + name[len("backbone."):]] = t
    return new


def write_safetensors(path, tensors, metadata=None):
    """The safetensors format, written by hand (no safetensors package in
    Debian 12)."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
    for name, t in tensors.items():
        b = le_bytes(t)
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def save(obj, name):
    torch.save(obj, os.path.join(OUT, name))


def zip_with_pickle(name, pkl, extra=None):
    """A torch.save-shaped zip whose data.pkl is `pkl`."""
    with zipfile.ZipFile(os.path.join(OUT, name), "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/version", "3\n")
        for k, v in (extra or {}).items():
            z.writestr("archive/" + k, v)


def hostile_pickles():
    """Raw pickles that run a command when Python unpickles them. Each
    command creates a marker file, so a test can prove nothing ran."""
    def s(text):  # BINUNICODE
        b = text.encode()
        return b"X" + struct.pack("<I", len(b)) + b
    marker = "/tmp/h3_loader_hostile_%s"
    out = {
        # os.system("touch marker")
        "os_system": b"\x80\x02cos\nsystem\n" + s("touch " + marker % "os_system")
                     + b"\x85R.",
        # builtins.eval("__import__('os').system('touch marker')")
        "eval": b"\x80\x02cbuiltins\neval\n"
                + s("__import__('os').system('touch %s')" % (marker % "eval"))
                + b"\x85R.",
        # subprocess.Popen(["touch", marker])
        "subprocess": b"\x80\x02csubprocess\nPopen\n(]"
                      + b"(" + s("touch") + s(marker % "subprocess") + b"e"
                      + b"tR.",
        # A state_dict whose tensor is an os.system call.
        "nested": b"\x80\x02}(" + s(EMB) + b"cos\nsystem\n"
                  + s("touch " + marker % "nested") + b"\x85Ru.",
    }
    # Prove the fixtures are hostile: Python's pickle does run them.
    for name, pkl in out.items():
        m = marker % name
        if os.path.exists(m):
            os.remove(m)
        code = ("import pickle,sys,time; pickle.loads(sys.stdin.buffer.read()); "
                "time.sleep(0.5)")
        subprocess.run([sys.executable, "-c", code], input=pkl, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not os.path.exists(m):
            sys.exit("fixture %s did not run under pickle.loads" % name)
        os.remove(m)
    return out


def main():
    argparse.ArgumentParser(description=__doc__).parse_args()
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    for sub in ("pickle", "safetensors"):
        shutil.rmtree(os.path.join(CORPUS, sub), ignore_errors=True)
        os.makedirs(os.path.join(CORPUS, sub))
    expected = {}

    # Model A: hybrid, d 16, 3 layers (layer 1 attention), vocab 61 -> 64.
    cfg_a = {"d_model": 16, "n_layer": 3, "attn_layer_idx": [1], "head_dim": 1,
             "d_state": 8, "d_inner": 64, "padded_vocab_size": 64,
             "vocab_size": 61, "n_heads": 2, "rotary_dim": 0}
    hints_a = {"n_heads": 2, "vocab_size": 61}
    a = make_model(1, 16, 3, [1], 8, 64)
    exp_a = expected_values(a, cfg_a, hints_a)

    # Layout 1, with a transposed (non-contiguous) view and a view at a
    # storage offset, as torch.save keeps them.
    plain = collections.OrderedDict(a)
    w = plain["backbone.layers.0.mlp.fc2.weight"]
    plain["backbone.layers.0.mlp.fc2.weight"] = w.t().contiguous().t()
    b = plain["backbone.layers.2.mixer.q_proj.weight"]
    big = torch.cat([torch.full((5,), 7.0), b.flatten(), torch.zeros(3)])
    plain["backbone.layers.2.mixer.q_proj.weight"] = big[5:5 + b.numel()].view(b.shape)
    assert not plain["backbone.layers.0.mlp.fc2.weight"].is_contiguous()
    save(plain, "model_plain.pt")
    expected["model_plain.pt"] = exp_a

    # Layout 2: PyTorch Lightning.
    import argparse as ap
    lightning = {
        "epoch": 3, "global_step": 1200,
        "pytorch-lightning_version": "1.6.0",
        "state_dict": collections.OrderedDict(
            ("model." + k, v) for k, v in a.items()),
        "optimizer_states": [{
            "state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.ones(4)}},
            "param_groups": [{"lr": 6e-4, "betas": (0.9, 0.95), "params": [0]}],
        }],
        "lr_schedulers": [],
        "callbacks": {},
        "hyper_parameters": {"cfg": ap.Namespace(lr=6e-4, name="h3")},
    }
    lightning["state_dict"]["loss_scale"] = torch.tensor([1.0])  # not model.
    save(lightning, "model_lightning.pt")
    expected["model_lightning.pt"] = exp_a

    # Layout 3: old names with ln_0.
    save(to_old_names(a, 3), "model_oldnames.pt")
    expected["model_oldnames.pt"] = exp_a

    # Safetensors, layout-1 names, the tied head stored once.
    write_safetensors(os.path.join(OUT, "model.safetensors"),
                      {k: v for k, v in a.items() if k != "lm_head.weight"},
                      {"format": "pt"})
    expected["model.safetensors"] = exp_a

    # fp16 checkpoint of the same shape.
    a16 = make_model(2, 16, 3, [1], 8, 64, dtype=torch.float16)
    save(a16, "model_fp16.pt")
    expected["model_fp16.pt"] = expected_values(a16, cfg_a, hints_a)

    # Rotary variant: 2 layers, attention at 1, 2 heads of 8, rotary 4.
    rot = make_model(3, 16, 2, [1], 8, 64, rotary_dim=4)
    save(rot, "model_rotary.pt")
    expected["model_rotary.pt"] = expected_values(rot, {
        "d_model": 16, "n_layer": 2, "attn_layer_idx": [1], "head_dim": 1,
        "d_state": 8, "d_inner": 64, "padded_vocab_size": 64, "vocab_size": 64,
        "n_heads": 2, "rotary_dim": 4}, {"n_heads": 2})

    # Pure H3 with head_dim 4 (no attention), as safetensors.
    hd = make_model(4, 16, 2, [], 8, 64, head_dim=4)
    write_safetensors(os.path.join(OUT, "model_headdim4.safetensors"),
                      {k: v for k, v in hd.items() if k != "lm_head.weight"})
    expected["model_headdim4.safetensors"] = expected_values(hd, {
        "d_model": 16, "n_layer": 2, "attn_layer_idx": [], "head_dim": 4,
        "d_state": 8, "d_inner": 64, "padded_vocab_size": 64, "vocab_size": 64,
        "n_heads": 0, "rotary_dim": 0}, {})

    # Broken inputs on a smaller model (d 8, 2 layers, attention at 1).
    small = make_model(5, 8, 2, [1], 4, 16)
    bad = collections.OrderedDict(small)
    bad["backbone.layers.0.mixer.q_proj.weight"] = torch.zeros(8, 7)
    save(bad, "bad_shape.pt")
    missing = collections.OrderedDict(small)
    del missing["backbone.layers.1.mlp.fc2.bias"]
    save(missing, "missing_tensor.pt")
    untied = collections.OrderedDict(small)
    untied["lm_head.weight"] = small[EMB].clone() + 1
    save(untied, "untied_head.pt")
    save({"weights": [1, 2, 3]}, "not_a_model.pt")
    # A storage entry shorter than its tensor: rewrite the zip.
    buf = io.BytesIO()
    torch.save(small, buf)
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    with zipfile.ZipFile(os.path.join(OUT, "short_storage.pt"), "w",
                         zipfile.ZIP_STORED) as z:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "archive/data/0":
                data = data[: len(data) // 2]
            z.writestr(info.filename, data)
    with open(os.path.join(CORPUS, "pickle", "small_state_dict.pkl"), "wb") as f:
        f.write(src.read("archive/data.pkl"))

    for name, pkl in hostile_pickles().items():
        with open(os.path.join(OUT, "hostile_%s.pkl" % name), "wb") as f:
            f.write(pkl)
        zip_with_pickle("hostile_%s.pt" % name, pkl)
        with open(os.path.join(CORPUS, "pickle", "hostile_%s.pkl" % name), "wb") as f:
            f.write(pkl)
    for name in ("model_lightning.pt", "model_oldnames.pt"):
        z = zipfile.ZipFile(os.path.join(OUT, name))
        pkl = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
        with open(os.path.join(CORPUS, "pickle", name + ".pkl"), "wb") as f:
            f.write(z.read(pkl))
    # Safetensors corpus: small files.
    write_safetensors(os.path.join(CORPUS, "safetensors", "two.safetensors"),
                      {"a": torch.ones(2, 3), "b": torch.zeros(4).half()},
                      {"k": "v"})
    write_safetensors(os.path.join(CORPUS, "safetensors", "empty.safetensors"), {})

    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
    print("wrote %d files, %d bytes, under %s" % (len(os.listdir(OUT)), total, OUT))


if __name__ == "__main__":
    main()
