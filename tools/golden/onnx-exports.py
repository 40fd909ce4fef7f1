#!/usr/bin/env python3
"""tools/golden/onnx-exports.py — the ONNX exports Pagoda's graph path is tested on, made with PyTorch.

    .deps-torch/bin/python tools/golden/onnx-exports.py [--tier small|full] [--exporter ts|dynamo|both]
                                                 [--out DIR] [NAME ...]

Each model is built with seeded random weights (no download), made sensitive, and exported with
torch.onnx.export — the TorchScript exporter (opset 17) and/or the dynamo exporter — with a
symbolic batch dimension, into DIR/<name>-<tier>-<exporter>.onnx (an existing file is kept).

Random models answer mostly from their biases, so a golden comparison on them can miss a wrong
head count or a lost mask: parameters that a library initialises to zero (torchvision's ViT
head, timm's Mixer head) are drawn at random, and every attention's query projection is scaled
by 4 so that attention is sharp and the output depends on the input through it.

Tiers: `full` is each library's real size at 224x224 (torchvision resnet50, vit_b_16, swin_t,
convnext_tiny, mobilenet_v3_large, efficientnet_b0; timm deit_small, mixer_b16, DINOv2-S;
transformers' DETR-R50 at 320x480 with 2+2 layers; a ResNet-50 with a non-local block before
layer3.5); `small` is the same architectures at sizes every OpenCL device runs in seconds (64x64
CNN inputs; 2-layer, 64-wide transformers), used on all devices in CI.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

try:
    import torch
    import torchvision
except ImportError:
    print("onnx-exports: torch/torchvision are not installed (tools/setup makes .deps-torch)")
    sys.exit(77)


class NonLocal(torch.nn.Module):
    """The embedded-Gaussian non-local block of Wang et al. 2018 (C' = C/2, BN last)."""

    def __init__(self, c):
        super().__init__()
        self.inner = c // 2
        self.theta = torch.nn.Conv2d(c, self.inner, 1)
        self.phi = torch.nn.Conv2d(c, self.inner, 1)
        self.g = torch.nn.Conv2d(c, self.inner, 1)
        self.w = torch.nn.Conv2d(self.inner, c, 1)
        self.bn = torch.nn.BatchNorm2d(c)

    def forward(self, x):
        b, c, h, w = x.shape
        theta = self.theta(x).flatten(2).transpose(1, 2)
        phi = self.phi(x).flatten(2)
        g = self.g(x).flatten(2).transpose(1, 2)
        f = torch.softmax(torch.bmm(theta, phi), dim=-1)
        y = torch.bmm(f, g).transpose(1, 2).reshape(b, self.inner, h, w)
        return x + self.bn(self.w(y))


def tv(name, **kw):
    return lambda: getattr(torchvision.models, name)(**kw)


def tv_vit_small():
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=64, patch_size=16, num_layers=2, num_heads=4,
                             hidden_dim=64, mlp_dim=128, num_classes=10)


def tv_swin_small():
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                           window_size=[4, 4], num_classes=10)


def resnet_nl(small):
    def make():
        m = torchvision.models.resnet50(num_classes=10 if small else 1000)
        blocks = list(m.layer3.children())
        m.layer3 = torch.nn.Sequential(*blocks[:5], NonLocal(1024), *blocks[5:])
        return m
    return make


def timm_model(name, **kw):
    def make():
        import timm
        return timm.create_model(name, pretrained=False, **kw)
    return make


def mixer_small():
    from timm.models.mlp_mixer import MlpMixer
    return MlpMixer(num_classes=10, img_size=64, patch_size=16, num_blocks=2, embed_dim=64)


def detr(small):
    def make():
        from transformers import DetrConfig, DetrForObjectDetection
        cfg = DetrConfig(use_timm_backbone=True, use_pretrained_backbone=False,
                         backbone="resnet50", encoder_layers=2, decoder_layers=2,
                         d_model=64 if small else 256, encoder_ffn_dim=128 if small else 2048,
                         decoder_ffn_dim=128 if small else 2048, num_queries=20 if small else 100,
                         attn_implementation="eager")
        m = DetrForObjectDetection(cfg)

        class Wrap(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, x):
                o = self.m(pixel_values=x)
                return o.logits, o.pred_boxes
        return Wrap(m)
    return make


# name -> (full builder, full input HxW, small builder, small input HxW)
MODELS = {
    "resnet50": (tv("resnet50"), (224, 224), tv("resnet50", num_classes=10), (64, 64)),
    "vit_b_16": (tv("vit_b_16"), (224, 224), tv_vit_small, (64, 64)),
    "swin_t": (tv("swin_t"), (224, 224), tv_swin_small, (64, 64)),
    "convnext_tiny": (tv("convnext_tiny"), (224, 224), tv("convnext_tiny", num_classes=10),
                      (64, 64)),
    "mobilenet_v3_large": (tv("mobilenet_v3_large"), (224, 224),
                           tv("mobilenet_v3_large", num_classes=10), (64, 64)),
    "efficientnet_b0": (tv("efficientnet_b0"), (224, 224), tv("efficientnet_b0", num_classes=10),
                        (64, 64)),
    "deit_small": (timm_model("deit_small_patch16_224"), (224, 224),
                   timm_model("deit_tiny_patch16_224", img_size=64, depth=2, num_classes=10),
                   (64, 64)),
    "mixer_b16": (timm_model("mixer_b16_224"), (224, 224),
                  mixer_small,
                  (64, 64)),
    "dinov2_s14": (timm_model("vit_small_patch14_dinov2", img_size=224), (224, 224),
                   timm_model("vit_small_patch14_dinov2", img_size=56, depth=2), (56, 56)),
    "detr_r50": (detr(False), (320, 480), detr(True), (128, 160)),
    "resnet50_nl": (resnet_nl(False), (224, 224), resnet_nl(True), (64, 64)),
}


def sensitise(model, seed, shape):
    """Zero-initialised parameters drawn at random; query projections scaled by 4; batch norm
    statistics measured on random batches (a deep random CNN with unit statistics passes almost
    nothing of its input to the output)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.numel() and p.abs().max() == 0 and "norm" not in name and "ln" not in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
            if name.endswith("in_proj_weight") or name.endswith("qkv.weight"):
                p[: p.shape[0] // 3] *= 4
            elif name.endswith("q_proj.weight"):
                p *= 4
            if name.endswith(".gamma") or name.endswith("ls1.gamma") or name.endswith("ls2.gamma"):
                p.fill_(0.5)  # LayerScale starts at 1e-5: the blocks would add nothing
    # Batch norms (torch's and frozen ones) take the statistics of the activations they see on
    # one random batch, layer after layer, so every layer passes on unit-scale activations.
        # A random non-local block's embedded-Gaussian scores reach the hundreds (θ·φ over 512
        # channels without a 1/sqrt(C') scale): its softmax then amplifies every rounding
        # difference of the backbone; a quarter of θ keeps the block sharp but conditioned.
        for m in model.modules():
            if isinstance(m, NonLocal):
                m.theta.weight *= 0.25
    bns = [m for m in model.modules()
           if hasattr(m, "running_mean") and hasattr(m, "running_var")]
    def calibrate(m, args):
        x = args[0]
        w = getattr(m, "weight", None)
        if w is not None and w.abs().max() == 0:  # a zero-initialised last norm of a block
            w.fill_(1.0)
        m.running_mean.copy_(x.mean(dim=(0, 2, 3)))
        m.running_var.copy_(x.var(dim=(0, 2, 3)) + 1e-3)
    hooks = [m.register_forward_pre_hook(calibrate) for m in bns]
    model.eval()
    with torch.no_grad():
        model(torch.randn(4, *shape, generator=g))
    for h in hooks:
        h.remove()
    return model


def export(name, tier, exporter, out):
    """The file of `name` at `tier` by `exporter` in `out`, exported when it is not there."""
    path = os.path.join(out, f"{name}-{tier}-{exporter}.onnx")
    if os.path.exists(path):
        return path
    # Tests for several devices start together: one process exports, the others wait for it.
    import fcntl
    with open(os.path.join(out, ".export.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(path):
            return path
        return export_locked(name, tier, exporter, out, path)


def export_locked(name, tier, exporter, out, path):
    full, fsize, small, ssize = MODELS[name]
    make, (h, w) = (full, fsize) if tier == "full" else (small, ssize)
    torch.manual_seed(0)
    model = sensitise(make().eval(), 1, (3, h, w))
    x = torch.randn(2, 3, h, w)
    tmp = f"{path}.{os.getpid()}.tmp.onnx"  # parallel tests may export the same model
    if exporter == "ts":
        n_out = 2 if name == "detr_r50" else 1
        outs = ["logits", "boxes"][:n_out] if n_out == 2 else ["y"]
        torch.onnx.export(model, (x,), tmp, dynamo=False, opset_version=17, input_names=["x"],
                          output_names=outs,
                          dynamic_axes={"x": {0: "batch"}, **{o: {0: "batch"} for o in outs}})
    else:
        torch.onnx.export(model, (x,), tmp, dynamo=True, input_names=["x"],
                          dynamic_shapes={"x": {0: torch.export.Dim("batch", min=1, max=64)}},
                          external_data=False, verbose=False)
    os.replace(tmp, path)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tier", choices=["small", "full"], default="small")
    ap.add_argument("--exporter", choices=["ts", "dynamo", "both"], default="ts")
    ap.add_argument("--out", default="onnx-models")
    ap.add_argument("names", nargs="*", default=list(MODELS))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for n in a.names:
        if n not in MODELS:
            sys.exit(f"onnx-exports: unknown model '{n}' (known: {', '.join(MODELS)})")
        for e in (["ts", "dynamo"] if a.exporter == "both" else [a.exporter]):
            print(export(n, a.tier, e, a.out), flush=True)


if __name__ == "__main__":
    main()
