#!/usr/bin/env python3
"""Makes the MLP-Mixer golden files in tests/data/: a tiny timm MlpMixer with random weights
(every parameter random, LayerNorm scales near 1), its weights as .safetensors in timm naming,
a seeded input batch and PyTorch's logits.

Sensitive (tools/golden/goldenlib.py): the script says how much of the logits the image decides and
checks that a slip moves that part (image 1 - image 0) by far more than tests/test_mixer.c
allows: the token MLPs run over the patches in column order instead of row order.

Needs PyTorch, timm and safetensors (pip; the files were made with torch 2.15 and timm 1.0.31),
e.g. the venv of tools/golden/make-vit-golden.py:
    .deps-torch/bin/python tools/golden/make-mixer-golden.py

Writes mixer-tiny.safetensors, mixer-tiny.json ({"input": [B, 3, H, W], "classes": C, ...}),
mixer-tiny-input.bin and mixer-tiny-logits.bin (raw little-endian float32, row-major).
"""
import json
import os

import torch
from safetensors.torch import save_file
from timm.models.mlp_mixer import MlpMixer

import goldenlib

OUT = goldenlib.DATA
# 40 x 40 with patch 8: a 5 x 5 token grid (25 tokens, an odd count), width 24, token MLP 12.
IMG, PATCH, DIM, DEPTH, CLASSES, BATCH, SEED = 40, 8, 24, 2, 7, 2, 31


def check_token_order(model, x, want):
    """The token MLPs' weights permuted as if the patches were in column order: a slip the
    golden must see in image 1 - image 0."""
    import copy
    n = IMG // PATCH
    perm = torch.arange(n * n).reshape(n, n).t().reshape(-1)
    other = copy.deepcopy(model)
    with torch.no_grad():
        for blk in other.blocks:
            blk.mlp_tokens.fc1.weight.copy_(blk.mlp_tokens.fc1.weight[:, perm])
            blk.mlp_tokens.fc2.weight.copy_(blk.mlp_tokens.fc2.weight[perm])
            blk.mlp_tokens.fc2.bias.copy_(blk.mlp_tokens.fc2.bias[perm])
        goldenlib.check_slip("mixer-tiny", want, other(x), "patches in column order", 0.1)


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
    check_token_order(model, x, out)
    tensors = {k: v.detach().contiguous().float() for k, v in model.state_dict().items()}
    save_file(tensors, os.path.join(OUT, "mixer-tiny.safetensors"))
    goldenlib.write_f32("mixer-tiny-input.bin", x)
    goldenlib.write_f32("mixer-tiny-logits.bin", out)
    with open(os.path.join(OUT, "mixer-tiny.json"), "w") as f:
        json.dump({"family": "mixer", "input": list(x.shape), "classes": CLASSES,
                   "tokens": (IMG // PATCH) ** 2, "dim": DIM, "depth": DEPTH}, f)
    print("mixer-tiny logits", tuple(out.shape), "params",
          sum(t.numel() for t in tensors.values()), "names", len(tensors))


if __name__ == "__main__":
    main()
