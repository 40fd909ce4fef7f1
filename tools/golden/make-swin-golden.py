#!/usr/bin/env python3
"""Makes the Swin Transformer golden files in tests/data/: one tiny Swin V1 (patch 4, width 16,
two stages of 2 blocks with 1 and 2 heads, window 3, 7 classes) with random weights in each
naming, a seeded batch of two 40 x 40 images (a 10 x 10 patch grid: not a multiple of the
window, so windows pad) and PyTorch's logits; then the same weights on one 48 x 44 image (grids
12 x 11 and 6 x 6), run as each library runs another size.

  torchvision  torchvision.models.swin_transformer.SwinTransformer (features.N...; its
               relative_position_index buffers included, int64, as torchvision saves them)
  timm         timm's SwinTransformer (layers.S.downsample at the start of a stage); at 48 x 44
               a model built for that size, loaded with the same state dict
  timm-old     the same weights renamed to the older layout (downsample at the end of a stage)
  hf5          transformers' SwinForImageClassification as transformers 5.x saves it
  hf4          the same weights renamed to transformers 4.x names (attention.self.query, ...,
               intermediate.dense, output.dense), with 4.x's relative_position_index buffers

Sensitive (tools/golden/goldenlib.py): every model's query and key projections are scaled by
QK_SHARPEN, so that the window softmax peaks as a trained model's does, and the script checks
that a slip moves the logits' image-dependent part (image 1 - image 0) by far more than
tests/test_swin.c allows: torchvision's model run without its window shift. (A wrong head
count cannot be loaded: the relative position tables have one column per head.)

Needs PyTorch, torchvision, timm, transformers (5.x) and safetensors from pip (the files were
made with torch 2.15, torchvision 0.29, timm 1.0.31, transformers 5.25), e.g. the venv of
tools/golden/make-vit-golden.py:  .deps-torch/bin/python tools/golden/make-swin-golden.py

Per case <name>: swin-<name>.safetensors, swin-<name>.json ({"input": [B, 3, H, W], "classes":
C, "family": ...}), swin-<name>-input.bin and swin-<name>-logits.bin (raw little-endian float32);
per resized case <name>-48x44 the .json (naming the weights file), -input.bin and -logits.bin.
"""
import json
import os

import torch
from safetensors.torch import save_file

import goldenlib

OUT = goldenlib.DATA
IMG, PATCH, DIM, DEPTHS, HEADS, WINDOW, CLASSES, BATCH = 40, 4, 16, [2, 2], [1, 2], 3, 7, 2
H2, W2 = 48, 44
QK_SHARPEN = 1.5
# timm's and torchvision's fused qkv; transformers 5.x's q_proj/k_proj
QK = (goldenlib.fused_qk("attn.qkv.weight", "attn.qkv.bias"),
      goldenlib.named_qk("attention.q_proj.", "attention.k_proj."))


def randomise(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and ("norm" in name or "layernorm" in name or name.endswith(
                    "features.0.2.weight")) and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
    for pick in QK:
        goldenlib.sharpen(model, QK_SHARPEN, pick)


def check_shift(model, x, want):
    """torchvision's model with every block's shift turned off: a slip the golden must see."""
    import copy
    from torchvision.models.swin_transformer import ShiftedWindowAttention
    other = copy.deepcopy(model)
    for mod in other.modules():
        if isinstance(mod, ShiftedWindowAttention):
            mod.shift_size = [0, 0]
    goldenlib.check_slip("torchvision", want, logits(other, x), "no window shift", 0.1)


def logits(model, x):
    with torch.no_grad():
        out = model(x)
    return out.logits if hasattr(out, "logits") else out


def rel_index(w):
    coords = torch.stack(torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (w - 1)
    return (rel[:, :, 0] * (2 * w - 1) + rel[:, :, 1]).flatten()


def write(name, family, tensors, x, out, weights=None):
    if tensors is not None:
        save_file(tensors, os.path.join(OUT, f"swin-{name}.safetensors"))
    goldenlib.write_f32(f"swin-{name}-input.bin", x)
    goldenlib.write_f32(f"swin-{name}-logits.bin", out)
    meta = {"family": family, "input": list(x.shape), "classes": CLASSES}
    if weights:
        meta["weights"] = weights
    with open(os.path.join(OUT, f"swin-{name}.json"), "w") as f:
        json.dump(meta, f)
    print(name, tuple(out.shape), "max |logit|", float(out.abs().max()),
          "input share %.2f" % goldenlib.input_share(out) if out.shape[0] > 1 else "")


def state(model, keep_int=False):
    return {k: (v.detach().contiguous() if keep_int and not v.dtype.is_floating_point
                else v.detach().contiguous().float())
            for k, v in model.state_dict().items() if keep_int or v.dtype.is_floating_point}


def main():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(BATCH, 3, IMG, IMG, generator=g)
    x2 = torch.randn(1, 3, H2, W2, generator=g)

    from torchvision.models.swin_transformer import SwinTransformer as TvSwin
    tv = TvSwin(patch_size=[PATCH, PATCH], embed_dim=DIM, depths=DEPTHS, num_heads=HEADS,
                window_size=[WINDOW, WINDOW], num_classes=CLASSES).eval()
    randomise(tv, 11)
    write("torchvision", "torchvision", state(tv, keep_int=True), x, logits(tv, x))
    check_shift(tv, x, logits(tv, x))
    write("torchvision-48x44", "torchvision", None, x2, logits(tv, x2),
          "swin-torchvision.safetensors")

    from timm.models.swin_transformer import SwinTransformer as TimmSwin
    kw = dict(patch_size=PATCH, embed_dim=DIM, depths=DEPTHS, num_heads=HEADS,
              window_size=WINDOW, num_classes=CLASSES)
    tm = TimmSwin(img_size=IMG, **kw).eval()
    randomise(tm, 12)
    sd = state(tm)
    write("timm", "timm", sd, x, logits(tm, x))
    tm2 = TimmSwin(img_size=(H2, W2), **kw).eval()
    tm2.load_state_dict(tm.state_dict(), strict=True)
    write("timm-48x44", "timm", None, x2, logits(tm2, x2), "swin-timm.safetensors")
    old = {}
    for k, v in sd.items():
        if k.startswith("layers.") and ".downsample." in k:
            s = int(k.split(".")[1])
            k = f"layers.{s - 1}." + k.split(".", 2)[2]
        old[k] = v
    write("timm-old", "timm", old, x, logits(tm, x))

    from transformers import SwinConfig, SwinForImageClassification
    cfg = SwinConfig(image_size=IMG, patch_size=PATCH, embed_dim=DIM, depths=DEPTHS,
                     num_heads=HEADS, window_size=WINDOW, num_labels=CLASSES)
    hf = SwinForImageClassification(cfg).eval()
    randomise(hf, 13)
    sd = state(hf)
    write("hf5", "hf", sd, x, logits(hf, x))
    write("hf5-48x44", "hf", None, x2, logits(hf, x2), "swin-hf5.safetensors")
    ren = [("attention.q_proj.", "attention.self.query."), ("attention.k_proj.", "attention.self.key."),
           ("attention.v_proj.", "attention.self.value."), ("attention.o_proj.", "attention.output.dense."),
           ("attention.relative_position_bias.relative_position_bias_table",
            "attention.self.relative_position_bias_table"),
           ("mlp.fc1.", "intermediate.dense."), ("mlp.fc2.", "output.dense.")]
    hf4 = {}
    for k, v in sd.items():
        for a, b in ren:
            k = k.replace(a, b)
        hf4[k] = v
        if k.endswith("attention.self.relative_position_bias_table"):
            hf4[k.replace("bias_table", "index")] = rel_index(WINDOW)
    unknown = [k for k in sd if "blocks" in k and not any(a in k for a, _ in ren)
               and "layernorm_" not in k]
    assert not unknown, unknown
    write("hf4", "hf", hf4, x, logits(hf, x))


if __name__ == "__main__":
    main()
