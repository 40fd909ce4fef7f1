#!/usr/bin/env python3
"""Makes the MLP-Mixer golden files in tests/data/: a tiny timm MlpMixer with random weights
(every parameter random, LayerNorm scales near 1), its weights as .safetensors in timm naming,
a seeded input batch and PyTorch's logits.

Needs PyTorch, timm and safetensors (pip), e.g. the venv tools/bench-peers makes:
    .deps/peers-venv/bin/python tools/make-mixer-golden.py

Writes mixer-tiny.safetensors, mixer-tiny.json ({"input": [B, 3, H, W], "classes": C, ...}),
mixer-tiny-input.bin and mixer-tiny-logits.bin (raw little-endian float32, row-major).
"""
import json
import os

import torch
from safetensors.torch import save_file
from timm.models.mlp_mixer import MlpMixer

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")
# 40 x 40 with patch 8: a 5 x 5 token grid (25 tokens, an odd count), width 24, token MLP 12.
IMG, PATCH, DIM, DEPTH, CLASSES, BATCH, SEED = 40, 8, 24, 2, 7, 2, 31


def main():
    torch.manual_seed(SEED)
    model = MlpMixer(num_classes=CLASSES, img_size=IMG, patch_size=PATCH, num_blocks=DEPTH,
                     embed_dim=DIM, mlp_ratio=(0.5, 4.0)).eval()
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
        x = torch.randn(BATCH, 3, IMG, IMG, generator=g)
        out = model(x)
    tensors = {k: v.detach().contiguous().float() for k, v in model.state_dict().items()}
    save_file(tensors, os.path.join(OUT, "mixer-tiny.safetensors"))
    x.numpy().astype("<f4").tofile(os.path.join(OUT, "mixer-tiny-input.bin"))
    out.numpy().astype("<f4").tofile(os.path.join(OUT, "mixer-tiny-logits.bin"))
    with open(os.path.join(OUT, "mixer-tiny.json"), "w") as f:
        json.dump({"family": "mixer", "input": list(x.shape), "classes": CLASSES,
                   "tokens": (IMG // PATCH) ** 2, "dim": DIM, "depth": DEPTH}, f)
    print("mixer-tiny logits", tuple(out.shape), "params",
          sum(t.numel() for t in tensors.values()), "names", len(tensors))


if __name__ == "__main__":
    main()
