#!/usr/bin/python3
"""Writes a large synthetic checkpoint with the shapes of a released H3 model
(random fp32 values) as a torch.save .pt and as safetensors, for
bench/convert_bench.sh. Needs Debian's python3-torch."""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests", "reference"))
import make_checkpoints as mc  # noqa: E402
import torch  # noqa: E402

PRESETS = {  # d_model, n_layer, attention layers
    "h3-125m": (768, 12, [6]),
    "h3-355m": (1024, 24, [8, 16]),
    "h3-1.3b": (2048, 24, [8, 16]),
}

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--preset", default="h3-355m", choices=sorted(PRESETS))
ap.add_argument("--out", required=True, help="directory for the two files")
args = ap.parse_args()
d, n_layer, attn = PRESETS[args.preset]
sd = mc.make_model(0, d, n_layer, attn, 64, 50264)
os.makedirs(args.out, exist_ok=True)
torch.save(sd, os.path.join(args.out, args.preset + ".pt"))
mc.write_safetensors(os.path.join(args.out, args.preset + ".safetensors"),
                     {k: v for k, v in sd.items() if k != "lm_head.weight"})
