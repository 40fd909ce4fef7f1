#!/usr/bin/env python3
"""Makes the headless-ViT golden files in tests/data/: a tiny timm VisionTransformer without a
classifier (num_classes=0, as timm builds vit_*_patch16_224.dino), random weights, a seeded batch
of two 32 x 32 images and PyTorch's features: the class token after the final norm (what the
model returns) and the mean of the patch tokens of forward_features.

Every model's query and key projections are scaled by QK_SHARPEN (tools/golden/goldenlib.py), so
that the softmax peaks as a trained model's does, and each is checked to see a wrong head count: the
same weights with 1 or 4 heads move the image-dependent part of the class-token features (image 1 -
image 0) by far more than tests/test_vit.c allows.

Needs PyTorch, timm, transformers 5.x and safetensors from pip (the files were made with torch
2.15, timm 1.0.31, transformers 5.25), e.g. the venv of tools/golden/make-vit-golden.py:
    .deps-torch/bin/python tools/golden/make-dino-golden.py

Writes dino-tiny.safetensors (__metadata__ num_heads), dino-tiny-input.bin, dino-tiny-cls.bin,
dino-tiny-mean.bin and dino-tiny-heads.bin (raw little-endian float32 [2, 3, 32, 32], [2, 32],
[2, 32], and the last block's class-token attention over the 16 patches per head, [2, 2, 16]).

Then a DINOv2-style model (patch 14, LayerScale ls1/ls2 with random gammas, trained at 28 x 28,
a 2 x 2 grid) as dinov2-tiny.*: features of a batch of two 28 x 28 images, and of one 56 x 42
image run with dynamic_img_size=True (the position grid resampled as timm does):
dinov2-tiny-56x42-{input,cls,mean}.bin.

Then Hugging Face's headless ViTModel as dino-hf-tiny.*, saved in the names the hub's
facebook/dino-vits16 uses (transformers 4.x; needs transformers).
"""
import os

import torch
from safetensors.torch import save_file
from timm.models.vision_transformer import VisionTransformer

import goldenlib

OUT = goldenlib.DATA
QK_SHARPEN = 1.5
# timm's fused qkv; transformers 5.x's q_proj/k_proj (ViTModel and Dinov2Model alike)
QK = (goldenlib.fused_qk("attn.qkv.weight", "attn.qkv.bias"),
      goldenlib.named_qk("attention.q_proj.", "attention.k_proj."))


def sharpen(model):
    for pick in QK:
        goldenlib.sharpen(model, QK_SHARPEN, pick)


def check_heads(name, make, model, x, features):
    """The same weights with 1 and 4 heads (the files have 2) move the class-token features'
    image-dependent part (image 1 - image 0) far beyond tests/test_vit.c's tolerance."""
    want = features(model, x)
    for h in (1, 4):
        other = make(h).eval()
        other.load_state_dict(model.state_dict())
        with torch.no_grad():
            goldenlib.check_slip(name, want, features(other, x), f"{h} heads for 2", 0.1)


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
        sharpen(m)
        x = torch.randn(2, 3, 32, 32, generator=g)
        cls = m(x)
        mean = m.forward_features(x)[:, 1:].mean(1)
        # The last block's attention probabilities, from the input of its attn_drop (the
        # unfused path), class-token row, patches only: [2, heads, 16].
        seen = []
        m.blocks[-1].attn.fused_attn = False
        hook = m.blocks[-1].attn.attn_drop.register_forward_hook(
            lambda mod, inp, out: seen.append(inp[0]))
        m(x)
        hook.remove()
        heads = seen[0][:, :, 0, 1:]
    # The same model at 48 x 40 (timm's dynamic_img_size resamples the 4 x 4 position grid).
    m_dyn = VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2,
                              num_classes=0, dynamic_img_size=True).eval()
    m_dyn.load_state_dict(m.state_dict(), strict=True)
    with torch.no_grad():
        xr = torch.randn(1, 3, 48, 40, generator=g)
        cls_r, mean_r = m_dyn(xr), m_dyn.forward_features(xr)[:, 1:].mean(1)
    for name, t in (("input", xr), ("cls", cls_r), ("mean", mean_r)):
        goldenlib.write_f32(f"dino-tiny-48x40-{name}.bin", t)
    assert not any(k.startswith("head") for k in m.state_dict())
    save_file({k: v.contiguous() for k, v in m.state_dict().items()},
              os.path.join(OUT, "dino-tiny.safetensors"), metadata={"num_heads": "2"})
    for name, t in (("input", x), ("cls", cls), ("mean", mean), ("heads", heads)):
        goldenlib.write_f32(f"dino-tiny-{name}.bin", t)
    print("dino-tiny", tuple(cls.shape), tuple(mean.shape))
    check_heads("dino-tiny", lambda h: VisionTransformer(img_size=32, patch_size=8, embed_dim=32,
                                                         depth=2, num_heads=h, num_classes=0),
                m, x, lambda mm, xx: mm(xx))

    torch.manual_seed(6)
    kw = dict(patch_size=14, embed_dim=32, depth=2, num_heads=2, num_classes=0, init_values=1e-5)
    m2 = VisionTransformer(img_size=28, **kw).eval()
    g = torch.Generator().manual_seed(6)
    with torch.no_grad():
        for name, p in m2.named_parameters():
            if p.dim() == 1 and "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("gamma"):
                p.copy_(0.5 + 0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
        sharpen(m2)
        x = torch.randn(2, 3, 28, 28, generator=g)
        cls, mean = m2(x), m2.forward_features(x)[:, 1:].mean(1)
        m3 = VisionTransformer(img_size=28, dynamic_img_size=True, **kw).eval()
        m3.load_state_dict(m2.state_dict(), strict=True)
        x2 = torch.randn(1, 3, 56, 42, generator=g)
        cls2, mean2 = m3(x2), m3.forward_features(x2)[:, 1:].mean(1)
    assert any(k.endswith("ls1.gamma") for k in m2.state_dict())
    save_file({k: v.contiguous() for k, v in m2.state_dict().items()},
              os.path.join(OUT, "dinov2-tiny.safetensors"), metadata={"num_heads": "2"})
    for name, t in (("input", x), ("cls", cls), ("mean", mean), ("56x42-input", x2),
                    ("56x42-cls", cls2), ("56x42-mean", mean2)):
        goldenlib.write_f32(f"dinov2-tiny-{name}.bin", t)
    print("dinov2-tiny", tuple(cls.shape), tuple(cls2.shape))
    check_heads("dinov2-tiny", lambda h: VisionTransformer(img_size=28, **dict(kw, num_heads=h)),
                m2, x, lambda mm, xx: mm(xx))

    # DINOv2 with registers (timm's vit_small_patch14_reg4_dinov2 layout: 4 register tokens
    # after the class token, the position table over the patches only, no_embed_class), at the
    # trained 28 x 28 and at 56 x 42 (dynamic_img_size).
    torch.manual_seed(8)
    kw = dict(patch_size=14, embed_dim=32, depth=2, num_heads=2, num_classes=0, init_values=1e-5,
              reg_tokens=4, no_embed_class=True)
    r2 = VisionTransformer(img_size=28, **kw).eval()
    g = torch.Generator().manual_seed(8)
    with torch.no_grad():
        for name, p in r2.named_parameters():
            if p.dim() == 1 and "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("gamma"):
                p.copy_(0.5 + 0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
        sharpen(r2)
        x = torch.randn(2, 3, 28, 28, generator=g)
        f = r2.forward_features(x)
        cls, mean = r2(x), f[:, 5:].mean(1)
        r3 = VisionTransformer(img_size=28, dynamic_img_size=True, **kw).eval()
        r3.load_state_dict(r2.state_dict(), strict=True)
        x2 = torch.randn(1, 3, 56, 42, generator=g)
        f2 = r3.forward_features(x2)
        cls2, mean2 = r3(x2), f2[:, 5:].mean(1)
    assert tuple(r2.state_dict()["reg_token"].shape) == (1, 4, 32)
    assert tuple(r2.state_dict()["pos_embed"].shape) == (1, 4, 32)
    save_file({k: v.contiguous() for k, v in r2.state_dict().items()},
              os.path.join(OUT, "dinov2reg-tiny.safetensors"), metadata={"num_heads": "2"})
    for name, t in (("input", x), ("cls", cls), ("mean", mean), ("56x42-input", x2),
                    ("56x42-cls", cls2), ("56x42-mean", mean2)):
        goldenlib.write_f32(f"dinov2reg-tiny-{name}.bin", t)
    print("dinov2reg-tiny", tuple(cls.shape), tuple(cls2.shape))
    check_heads("dinov2reg-tiny",
                lambda h: VisionTransformer(img_size=28, **dict(kw, num_heads=h)), r2, x,
                lambda mm, xx: mm(xx))

    # Hugging Face's DINOv2 (Dinov2Model), saved in the hub's transformers 4.x names
    # (attention.attention.query/key/value, attention.output.dense), at 28 x 28 and 56 x 42
    # (transformers resizes the position grid with plain bicubic interpolation).
    from transformers import Dinov2Config, Dinov2Model
    torch.manual_seed(9)
    d2 = Dinov2Model(Dinov2Config(image_size=28, patch_size=14, hidden_size=32,
                                  num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=128)).eval()
    g = torch.Generator().manual_seed(9)
    with torch.no_grad():
        for name, p in d2.named_parameters():
            if p.dim() == 1 and ("norm" in name) and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("lambda1"):
                p.copy_(0.5 + 0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
        sharpen(d2)
        x = torch.randn(2, 3, 28, 28, generator=g)
        last = d2(pixel_values=x).last_hidden_state
        x2 = torch.randn(1, 3, 56, 42, generator=g)
        last2 = d2(pixel_values=x2).last_hidden_state
    ren = [("attention.q_proj.", "attention.attention.query."),
           ("attention.k_proj.", "attention.attention.key."),
           ("attention.v_proj.", "attention.attention.value."),
           ("attention.o_proj.", "attention.output.dense.")]
    sd = {}
    for k, v in d2.state_dict().items():
        for a, b in ren:
            k = k.replace(a, b)
        sd[k] = v.contiguous()
    assert "embeddings.mask_token" in sd and "encoder.layer.0.layer_scale1.lambda1" in sd
    save_file(sd, os.path.join(OUT, "dinov2-hf-tiny.safetensors"), metadata={"num_heads": "2"})
    for name, t in (("input", x), ("cls", last[:, 0]), ("mean", last[:, 1:].mean(1)),
                    ("56x42-input", x2), ("56x42-cls", last2[:, 0]),
                    ("56x42-mean", last2[:, 1:].mean(1))):
        goldenlib.write_f32(f"dinov2-hf-tiny-{name}.bin", t)
    print("dinov2-hf-tiny", tuple(last.shape), tuple(last2.shape))
    check_heads("dinov2-hf-tiny",
                lambda h: Dinov2Model(Dinov2Config(image_size=28, patch_size=14, hidden_size=32,
                                                   num_hidden_layers=2, num_attention_heads=h,
                                                   intermediate_size=128)),
                d2, x, lambda mm, xx: mm(pixel_values=xx).last_hidden_state[:, 0])

    # Hugging Face's headless ViTModel (facebook/dino-vits16's naming: no "vit." prefix, a
    # pooler the features do not use): last_hidden_state[:, 0] and the patch mean.
    from transformers import ViTConfig, ViTModel
    torch.manual_seed(7)
    hf = ViTModel(ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=64)).eval()
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if p.dim() == 1 and "layernorm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
        sharpen(hf)
        x = torch.randn(2, 3, 32, 32, generator=g)
        last = hf(pixel_values=x).last_hidden_state
        xr = torch.randn(1, 3, 48, 40, generator=g)
        last_r = hf(pixel_values=xr, interpolate_pos_encoding=True).last_hidden_state
    for name, t in (("input", xr), ("cls", last_r[:, 0]), ("mean", last_r[:, 1:].mean(1))):
        goldenlib.write_f32(f"dino-hf-tiny-48x40-{name}.bin", t)
    assert any(k.startswith("pooler.") for k in hf.state_dict())
    # The hub's files (written by transformers 4.x) name the layers encoder.layer.N with
    # attention.attention.query/key/value, attention.output.dense, intermediate.dense and
    # output.dense; transformers 5.x writes layers.N with q/k/v/o_proj and mlp.fc1/fc2.
    ren = [("attention.q_proj.", "attention.attention.query."),
           ("attention.k_proj.", "attention.attention.key."),
           ("attention.v_proj.", "attention.attention.value."),
           ("attention.o_proj.", "attention.output.dense."),
           ("mlp.fc1.", "intermediate.dense."), ("mlp.fc2.", "output.dense.")]
    sd = {}
    for k, v in hf.state_dict().items():
        if k.startswith("layers."):
            k = "encoder.layer." + k[len("layers."):]
            for a, b in ren:
                k = k.replace(a, b)
        sd[k] = v.contiguous()
    save_file(sd, os.path.join(OUT, "dino-hf-tiny.safetensors"), metadata={"num_heads": "2"})
    for name, t in (("input", x), ("cls", last[:, 0]), ("mean", last[:, 1:].mean(1))):
        goldenlib.write_f32(f"dino-hf-tiny-{name}.bin", t)
    print("dino-hf-tiny", tuple(last.shape))
    check_heads("dino-hf-tiny",
                lambda h: ViTModel(ViTConfig(image_size=32, patch_size=8, hidden_size=32,
                                             num_hidden_layers=2, num_attention_heads=h,
                                             intermediate_size=64)),
                hf, x, lambda mm, xx: mm(pixel_values=xx).last_hidden_state[:, 0])


if __name__ == "__main__":
    main()
