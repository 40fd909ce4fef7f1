#!/opt/pgd-venv/bin/python
"""Makes the ViT golden files in tests/data/: tiny ViTs with random weights in each naming
(timm, timm DeiT distilled, Hugging Face, torchvision), their weights as .safetensors, an input
batch and PyTorch's logits.

Needs PyTorch with timm, transformers and safetensors. On Debian 12:
    apt-get install python3-torch python3-torchvision
    python3 -m venv --system-site-packages /opt/pgd-venv
    /opt/pgd-venv/bin/pip install timm safetensors "transformers<4.40"
    /opt/pgd-venv/bin/python tools/make-vit-golden.py

Per case <name>: vit-<name>.safetensors (weights; __metadata__ num_heads), vit-<name>.json
({"input": [B,3,H,W], "classes": C, "heads": h, "family": ...}), vit-<name>-input.bin and
vit-<name>-logits.bin (raw little-endian float32, row-major).

At another image size: per case <name>-<H>x<W> the same model (its weights read back from
vit-<name>.safetensors, which the case's JSON names as "weights"; "trained" is [32, 32]) runs
one image [1, 3, H, W] the way its library does it, each resampling the 4x4 position grid by its
own rule: timm (and DeiT) built with dynamic_img_size=True (resample_abs_pos_embed: antialiased
bicubic), torchvision built at the new size with the state dict passed through
interpolate_embeddings (align_corners=True; square sizes only), Hugging Face called with
interpolate_pos_encoding=True (scale_factor (n + 0.1) / 4). Only vit-<name>-<H>x<W>.json,
-input.bin and -logits.bin are written.
"""
import json
import os
import sys

import numpy as np
import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")
IMG, PATCH, DIM, DEPTH, HEADS, MLP, CLASSES, BATCH = 32, 8, 32, 2, 2, 64, 10, 2


def randomise(model, seed):
    """Every parameter random, LayerNorm scales near 1: no zero biases hiding mistakes."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and ("norm" in name or "ln" in name or "layernorm" in name) and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))


def save_case(name, family, model, heads, seed):
    model.eval()
    randomise(model, seed)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(BATCH, 3, IMG, IMG, generator=g)
    with torch.no_grad():
        out = model(x)
        if hasattr(out, "logits"):
            out = out.logits
        if isinstance(out, tuple):  # DeiT distilled in training mode returns two heads
            out = (out[0] + out[1]) / 2
    tensors = {k: v.detach().contiguous().float() for k, v in model.state_dict().items()
               if v.dtype.is_floating_point}
    save_file(tensors, os.path.join(OUT, f"vit-{name}.safetensors"), metadata={"num_heads": str(heads)})
    x.numpy().astype("<f4").tofile(os.path.join(OUT, f"vit-{name}-input.bin"))
    out.numpy().astype("<f4").tofile(os.path.join(OUT, f"vit-{name}-logits.bin"))
    with open(os.path.join(OUT, f"vit-{name}.json"), "w") as f:
        json.dump({"family": family, "input": list(x.shape), "classes": CLASSES, "heads": heads}, f)
    print(name, "logits", out.shape, "params", sum(t.numel() for t in tensors.values()))


def save_resized(name, family, model, weights, H, W, seed, **call):
    """model (already holding weights) on one seeded [1, 3, H, W] image; see the docstring."""
    model.eval()
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 3, H, W, generator=g)
    with torch.no_grad():
        out = model(x, **call)
        if hasattr(out, "logits"):
            out = out.logits
        if isinstance(out, tuple):
            out = (out[0] + out[1]) / 2
    case = f"{name}-{H}x{W}"
    x.numpy().astype("<f4").tofile(os.path.join(OUT, f"vit-{case}-input.bin"))
    out.numpy().astype("<f4").tofile(os.path.join(OUT, f"vit-{case}-logits.bin"))
    with open(os.path.join(OUT, f"vit-{case}.json"), "w") as f:
        json.dump({"family": family, "input": list(x.shape), "classes": CLASSES, "heads": HEADS,
                   "weights": weights, "trained": [IMG, IMG]}, f)
    print(case, "logits", out.shape)


def resized_cases():
    from collections import OrderedDict

    from safetensors.torch import load_file

    def weights(name):
        return load_file(os.path.join(OUT, f"vit-{name}.safetensors"))

    from timm.models.vision_transformer import VisionTransformer
    from timm.models.deit import VisionTransformerDistilled
    for name, cls, seed in (("timm", VisionTransformer, 110), ("deit", VisionTransformerDistilled, 120)):
        m = cls(img_size=IMG, patch_size=PATCH, embed_dim=DIM, depth=DEPTH, num_heads=HEADS,
                mlp_ratio=MLP / DIM, num_classes=CLASSES, dynamic_img_size=True)
        m.load_state_dict(weights(name))
        H, W = (24, 40) if name == "timm" else (40, 24)  # down in one axis, up in the other
        save_resized(name, "timm", m, f"vit-{name}.safetensors", H, W, seed)
    from torchvision.models.vision_transformer import VisionTransformer as TV, interpolate_embeddings
    S = 40  # torchvision's ViT takes square images only
    sd = interpolate_embeddings(S, PATCH, OrderedDict(weights("torchvision")))
    m = TV(image_size=S, patch_size=PATCH, num_layers=DEPTH, num_heads=HEADS, hidden_dim=DIM,
           mlp_dim=MLP, num_classes=CLASSES)
    m.load_state_dict(sd)
    save_resized("torchvision", "torchvision", m, "vit-torchvision.safetensors", S, S, 130)
    try:
        from transformers import ViTConfig, ViTForImageClassification
    except Exception as e:  # pragma: no cover - tooling only
        print("transformers unavailable, skipping the Hugging Face case:", e, file=sys.stderr)
        return
    cfg = ViTConfig(image_size=IMG, patch_size=PATCH, hidden_size=DIM, num_hidden_layers=DEPTH,
                    num_attention_heads=HEADS, intermediate_size=MLP, num_labels=CLASSES,
                    hidden_act="gelu")
    m = ViTForImageClassification(cfg)
    m.load_state_dict(weights("hf"))
    # 4 -> 5 rows; the columns stay 4 but still resample, by (4 + 0.1) / 4
    save_resized("hf", "hf", m, "vit-hf.safetensors", 40, 32, 140, interpolate_pos_encoding=True)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    import timm
    from timm.models.vision_transformer import VisionTransformer
    m = VisionTransformer(img_size=IMG, patch_size=PATCH, embed_dim=DIM, depth=DEPTH,
                          num_heads=HEADS, mlp_ratio=MLP / DIM, num_classes=CLASSES)
    save_case("timm", "timm", m, HEADS, 10)
    from timm.models.deit import VisionTransformerDistilled
    m = VisionTransformerDistilled(img_size=IMG, patch_size=PATCH, embed_dim=DIM, depth=DEPTH,
                                   num_heads=HEADS, mlp_ratio=MLP / DIM, num_classes=CLASSES)
    save_case("deit", "timm", m, HEADS, 20)
    from torchvision.models.vision_transformer import VisionTransformer as TV
    m = TV(image_size=IMG, patch_size=PATCH, num_layers=DEPTH, num_heads=HEADS, hidden_dim=DIM,
           mlp_dim=MLP, num_classes=CLASSES)
    save_case("torchvision", "torchvision", m, HEADS, 30)
    try:
        from transformers import ViTConfig, ViTForImageClassification
    except Exception as e:  # pragma: no cover - tooling only
        print("transformers unavailable, skipping the Hugging Face case:", e, file=sys.stderr)
        return
    cfg = ViTConfig(image_size=IMG, patch_size=PATCH, hidden_size=DIM, num_hidden_layers=DEPTH,
                    num_attention_heads=HEADS, intermediate_size=MLP, num_labels=CLASSES,
                    hidden_act="gelu")
    save_case("hf", "hf", ViTForImageClassification(cfg), HEADS, 40)
    resized_cases()


if __name__ == "__main__":
    main()
