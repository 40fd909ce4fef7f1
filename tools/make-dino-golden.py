#!/usr/bin/env python3
"""Makes the headless-ViT golden files in tests/data/: a tiny timm VisionTransformer without a
classifier (num_classes=0, as timm builds vit_*_patch16_224.dino), random weights, a seeded batch
of two 32 x 32 images and PyTorch's features: the class token after the final norm (what the
model returns) and the mean of the patch tokens of forward_features.

Needs PyTorch, timm and safetensors from pip, e.g. the venv tools/bench-peers makes:
    .deps/peers-venv/bin/python tools/make-dino-golden.py

Writes dino-tiny.safetensors (__metadata__ num_heads), dino-tiny-input.bin, dino-tiny-cls.bin
and dino-tiny-mean.bin (raw little-endian float32 [2, 3, 32, 32], [2, 32], [2, 32]).
"""
import os

import torch
from safetensors.torch import save_file
from timm.models.vision_transformer import VisionTransformer

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")


def main():
    torch.manual_seed(5)
    m = VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2,
                          num_classes=0).eval()
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() == 1 and "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
        x = torch.randn(2, 3, 32, 32, generator=g)
        cls = m(x)
        mean = m.forward_features(x)[:, 1:].mean(1)
    assert not any(k.startswith("head") for k in m.state_dict())
    save_file({k: v.contiguous() for k, v in m.state_dict().items()},
              os.path.join(OUT, "dino-tiny.safetensors"), metadata={"num_heads": "2"})
    for name, t in (("input", x), ("cls", cls), ("mean", mean)):
        t.numpy().astype("<f4").tofile(os.path.join(OUT, f"dino-tiny-{name}.bin"))
    print("dino-tiny", tuple(cls.shape), tuple(mean.shape))


if __name__ == "__main__":
    main()
