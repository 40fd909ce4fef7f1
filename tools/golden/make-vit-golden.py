#!/usr/bin/env python3
"""Makes the ViT golden files in tests/data/: tiny ViTs with random weights in each naming
(timm, timm DeiT distilled, Hugging Face, torchvision), their weights as .safetensors, an input
batch and PyTorch's logits.

Sensitive (tools/golden/goldenlib.py): the query and key projections are scaled by QK_SHARPEN, so
that each softmax row peaks (its largest probability about 0.55 on 17 tokens, as a trained model's
does, where random weights give about 0.3), and each case checks that the same weights run with
another head count (1 or 4) move the logits' image-dependent part (image 1 - image 0) by far more
than tests/test_vit.c allows.

Needs PyTorch, torchvision, timm, transformers 5.x and safetensors from pip (the files were made
with torch 2.15, torchvision 0.29, timm 1.0.31, transformers 5.25), e.g.
    python3 -m venv .deps-torch
    .deps-torch/bin/pip install torch torchvision timm transformers safetensors numpy pillow
    .deps-torch/bin/python tools/golden/make-vit-golden.py
The Hugging Face case is saved in transformers 4.x names (vit.encoder.layer.N.attention.
attention.query, ...: the hub's files), as transformers 5.x's save_pretrained writes them.

Per case <name>: vit-<name>.safetensors (weights; __metadata__ num_heads), vit-<name>.json
({"input": [B,3,H,W], "classes": C, "heads": h, "family": ...}), vit-<name>-input.bin and
vit-<name>-logits.bin (raw little-endian float32, row-major).

At another image size: per case <name>-<H>x<W> the same model (its weights read back from
vit-<name>.safetensors, which the case's JSON names as "weights"; "trained" is [32, 32]) runs
a batch [2, 3, H, W] the way its library does it, each resampling the 4x4 position grid by its
own rule: timm (and DeiT) built with dynamic_img_size=True (resample_abs_pos_embed: antialiased
bicubic), torchvision built at the new size with the state dict passed through
interpolate_embeddings (align_corners=True; square sizes only), Hugging Face called with
interpolate_pos_encoding=True and transformers 4.x's rule (scale_factor (n + 0.1) / 4, patched
in: 5.x resizes to the size itself). Only vit-<name>-<H>x<W>.json,
-input.bin and -logits.bin are written.
"""
import json
import os
import sys

import numpy as np
import torch
from safetensors.torch import save_file

import goldenlib

OUT = goldenlib.DATA
IMG, PATCH, DIM, DEPTH, HEADS, MLP, CLASSES, BATCH = 32, 8, 32, 2, 2, 64, 10, 2
QK_SHARPEN = 1.5
# q and k of every naming: timm's fused qkv, torchvision's in_proj, transformers' q/k_proj
QK = (goldenlib.fused_qk("attn.qkv.weight", "attn.qkv.bias", "in_proj_weight", "in_proj_bias"),
      goldenlib.named_qk("attention.q_proj.", "attention.k_proj."))
# transformers 5.x names -> the 4.x names the hub's files have
HF4 = [("vit.layers.", "vit.encoder.layer."), ("attention.q_proj.", "attention.attention.query."),
       ("attention.k_proj.", "attention.attention.key."),
       ("attention.v_proj.", "attention.attention.value."),
       ("attention.o_proj.", "attention.output.dense."), ("mlp.fc1.", "intermediate.dense."),
       ("mlp.fc2.", "output.dense.")]


def randomise(model, seed):
    """Every parameter random, LayerNorm scales near 1: no zero biases hiding mistakes."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and ("norm" in name or "ln" in name or "layernorm" in name) and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
    for pick in QK:
        goldenlib.sharpen(model, QK_SHARPEN, pick)


def run(model, x, **call):
    with torch.no_grad():
        out = model(x, **call)
        if hasattr(out, "logits"):
            out = out.logits
        if isinstance(out, tuple):  # DeiT distilled in training mode returns two heads
            out = (out[0] + out[1]) / 2
    return out


def save_case(name, family, make, heads, seed):
    """make(h): the model with h heads; the golden is make(heads), randomised."""
    model = make(heads).eval()
    randomise(model, seed)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(BATCH, 3, IMG, IMG, generator=g)
    out = run(model, x)
    for wrong in (1, 4):
        other = make(wrong).eval()
        other.load_state_dict(model.state_dict())
        goldenlib.check_slip(name, out, run(other, x), f"{wrong} heads for {heads}", 0.1)
    sd = model.state_dict()
    if family == "hf":
        sd = {rename(k, HF4): v for k, v in sd.items()}
    tensors = {k: v.detach().contiguous().float() for k, v in sd.items()
               if v.dtype.is_floating_point}
    save_file(tensors, os.path.join(OUT, f"vit-{name}.safetensors"), metadata={"num_heads": str(heads)})
    goldenlib.write_f32(f"vit-{name}-input.bin", x)
    goldenlib.write_f32(f"vit-{name}-logits.bin", out)
    with open(os.path.join(OUT, f"vit-{name}.json"), "w") as f:
        json.dump({"family": family, "input": list(x.shape), "classes": CLASSES, "heads": heads}, f)
    print(name, "logits", out.shape, "params", sum(t.numel() for t in tensors.values()))
    return model


def rename(k, pairs):
    for a, b in pairs:
        k = k.replace(a, b)
    return k


def save_resized(name, family, model, weights, H, W, seed, **call):
    """model (already holding weights) on a seeded [2, 3, H, W] batch; see the docstring."""
    model.eval()
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(BATCH, 3, H, W, generator=g)  # two images: rows to subtract
    out = run(model, x, **call)
    case = f"{name}-{H}x{W}"
    goldenlib.write_f32(f"vit-{case}-input.bin", x)
    goldenlib.write_f32(f"vit-{case}-logits.bin", out)
    with open(os.path.join(OUT, f"vit-{case}.json"), "w") as f:
        json.dump({"family": family, "input": list(x.shape), "classes": CLASSES, "heads": HEADS,
                   "weights": weights, "trained": [IMG, IMG]}, f)
    print(case, "logits", out.shape)


def resized_cases(models):
    """models: name -> the trained-size model save_case made (its weights as written)."""
    from collections import OrderedDict

    from timm.models.vision_transformer import VisionTransformer
    from timm.models.deit import VisionTransformerDistilled
    for name, cls, seed in (("timm", VisionTransformer, 110), ("deit", VisionTransformerDistilled, 120)):
        m = cls(img_size=IMG, patch_size=PATCH, embed_dim=DIM, depth=DEPTH, num_heads=HEADS,
                mlp_ratio=MLP / DIM, num_classes=CLASSES, dynamic_img_size=True)
        m.load_state_dict(models[name].state_dict())
        H, W = (24, 40) if name == "timm" else (40, 24)  # down in one axis, up in the other
        save_resized(name, "timm", m, f"vit-{name}.safetensors", H, W, seed)
    from torchvision.models.vision_transformer import VisionTransformer as TV, interpolate_embeddings
    S = 40  # torchvision's ViT takes square images only
    sd = interpolate_embeddings(S, PATCH, OrderedDict(models["torchvision"].state_dict()))
    m = TV(image_size=S, patch_size=PATCH, num_layers=DEPTH, num_heads=HEADS, hidden_dim=DIM,
           mlp_dim=MLP, num_classes=CLASSES)
    m.load_state_dict(sd)
    save_resized("torchvision", "torchvision", m, "vit-torchvision.safetensors", S, S, 130)
    if "hf" in models:
        # 4 -> 5 rows; the columns stay 4 but still resample, by (4 + 0.1) / 4
        import types
        emb = models["hf"].vit.embeddings
        emb.interpolate_pos_encoding = types.MethodType(hf4_interpolate, emb)
        save_resized("hf", "hf", models["hf"], "vit-hf.safetensors", 40, 32, 140,
                     interpolate_pos_encoding=True)


def hf4_interpolate(self, embeddings, height, width):
    """ViTEmbeddings.interpolate_pos_encoding as transformers 4.x (before 4.42) has it, the rule
    Pagoda's hf resize mode follows: bicubic by scale_factor ((h + 0.1) / n, (w + 0.1) / n).
    transformers 5.x resizes to size=(h, w) instead (plain bicubic)."""
    cls_pos, grid = self.position_embeddings[:, :1], self.position_embeddings[:, 1:]
    n, dim = int(round(grid.shape[1] ** 0.5)), grid.shape[-1]
    h, w = height // self.patch_size + 0.1, width // self.patch_size + 0.1
    grid = grid.reshape(1, n, n, dim).permute(0, 3, 1, 2)
    grid = torch.nn.functional.interpolate(grid, scale_factor=(h / n, w / n), mode="bicubic",
                                           align_corners=False)
    assert grid.shape[-2:] == (int(h), int(w))
    return torch.cat((cls_pos, grid.permute(0, 2, 3, 1).view(1, -1, dim)), dim=1)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    from timm.models.vision_transformer import VisionTransformer
    from timm.models.deit import VisionTransformerDistilled
    from torchvision.models.vision_transformer import VisionTransformer as TV
    models = {}
    kw = dict(img_size=IMG, patch_size=PATCH, embed_dim=DIM, depth=DEPTH, mlp_ratio=MLP / DIM,
              num_classes=CLASSES)
    models["timm"] = save_case("timm", "timm", lambda h: VisionTransformer(num_heads=h, **kw),
                               HEADS, 10)
    models["deit"] = save_case("deit", "timm",
                               lambda h: VisionTransformerDistilled(num_heads=h, **kw), HEADS, 20)
    models["torchvision"] = save_case(
        "torchvision", "torchvision",
        lambda h: TV(image_size=IMG, patch_size=PATCH, num_layers=DEPTH, num_heads=h,
                     hidden_dim=DIM, mlp_dim=MLP, num_classes=CLASSES), HEADS, 30)
    try:
        from transformers import ViTConfig, ViTForImageClassification
    except Exception as e:  # pragma: no cover - tooling only
        print("transformers unavailable, skipping the Hugging Face case:", e, file=sys.stderr)
    else:
        def hf(h):
            return ViTForImageClassification(ViTConfig(
                image_size=IMG, patch_size=PATCH, hidden_size=DIM, num_hidden_layers=DEPTH,
                num_attention_heads=h, intermediate_size=MLP, num_labels=CLASSES,
                hidden_act="gelu"))
        models["hf"] = save_case("hf", "hf", hf, HEADS, 40)
    resized_cases(models)


if __name__ == "__main__":
    main()
