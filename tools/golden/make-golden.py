#!/usr/bin/python3
"""Makes the PyTorch golden files for attention and patch embedding in tests/data/.

Run with a Python that has PyTorch and numpy (the files were made with torch 2.15 from pip, the
venv of tools/golden/make-vit-golden.py; Debian's python3-torch 1.13 works too):
    .deps-torch/bin/python tools/golden/make-golden.py

The attention cases are sensitive: q and k are drawn with amplitude QK_AMP (the causal and
self-attention cases) or 2 (the cross case, whose scale is 0.1), so that each softmax row peaks
(largest probability 0.5 to 0.8, where unit inputs give 0.3) as a trained model's does; the
script checks that the output's query-dependent part (each query row minus the first), which
near-uniform attention would leave at nothing, is a large share of the output, and that heads
split the wrong way move it far (tests/test_golden.c checks that part on its own).

Seeded and deterministic: running it again writes the same bytes.

Format. Per case <case>, tests/data/golden-<case>.json holds
    {"case": "<case>", "op": "<Pagoda op>", "params": {...sizes, scale, mask mode...},
     "arrays": {"<name>": {"shape": [d0, d1, ...], "file": "golden-<case>-<name>.bin"}, ...}}
and each array is a raw little-endian float32 file beside the JSON, row-major (C order), with
exactly prod(shape) elements. Inputs are float32 (what Pagoda takes); the expected outputs
(array names starting with "want") are computed in float64 by PyTorch from those float32
inputs and stored as float32. Read by tests/test_golden.c.

Cases:
  attn-qkv      ViT self-attention on a fused qkv [B=2, N=17, 3*H*D], H=3, D=16, laid out as
                timm does (qkv.reshape(B, N, 3, H, D)); out [B, N, H*D]. Also the probabilities
                of head 1, query rows [2, 7): want_probs [B, 1, 5, N].
  attn-causal   causal self-attention, BHND [B=2, H=2, N=13, D=32].
  attn-cross    cross attention, BHND, B=2, H=2, Nq=5, Nk=19, D=64, scale 0.1, an additive
                float mask [Nq, Nk] broadcast over batch and head with some -inf (every row
                keeps finite entries).
  patch-cls     timm PatchEmbed (Conv2d(3, 24, 4, stride 4)) on [2, 3, 16, 12], flatten(2)
                .transpose(1, 2), cls token prepended, pos_embed [1 + 12, 24] added.
  patch-dist    the same with a DeiT distillation token: cls, dist, then patches; pos [2 + 12, 24].
  pos-resize    pos [1 + 4*3, 8], grid 4x3 -> 6x5 by F.interpolate(mode='bicubic',
                align_corners=False) on the grid part, class row kept.
  pos-resize-<mode>-<up|down>
                the grid resize of each pgd_resize_mode (params "mode"), upsampling and
                downsampling, with 0, 1 or 2 extra rows kept:
                  bicubic        F.interpolate(size=, mode='bicubic', align_corners=False)
                  align-corners  the same with align_corners=True (torchvision)
                  antialias      F.interpolate(size=, mode='bicubic', antialias=True,
                                 align_corners=False) (timm's resample_abs_pos_embed)
                  hf             F.interpolate(scale_factor=((gh2 + 0.1) / gh, (gw2 + 0.1) / gw),
                                 mode='bicubic', align_corners=False) (Hugging Face ViT), square
                                 source grids as Hugging Face has them
  resize-weights
                the 1-D weights of each mode (arrays named as the modes), for every input
                size 1..6 and output size 1..9: F.interpolate of the identity basis, a
                [1, in, 1, in] batch of unit rows, to width `out` (height 1 stays 1; Hugging
                Face's height factor 1.1 keeps it 1); per (in, out), in that order, the matrix
                W [out, in] row-major, all concatenated.
"""
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

import goldenlib

OUT = goldenlib.DATA
QK_AMP = 1.5


def query_part(o, p, name):
    """Says how peaked the softmax is and how much of o ([..., N, D]) depends on the query (rows
    minus the first, over the largest |o|); refuses a case where that part is small."""
    o = o.reshape(-1, o.shape[-2], o.shape[-1])
    share = float((o[:, 1:] - o[:, :1]).abs().max() / o.abs().max())
    peak = float(p.max(-1).values.mean())
    print(f"{name}: softmax rows peak at {peak:.2f}, query-dependent share {share:.2f}")
    assert share > 0.5 and peak > 0.4, name


def f32(x):
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32))


def save(case, op, params, arrays):
    meta = {"case": case, "op": op, "params": params, "arrays": {}}
    for name, a in arrays.items():
        a = f32(a.detach().numpy() if isinstance(a, torch.Tensor) else a)
        fname = "golden-%s-%s.bin" % (case, name)
        with open(os.path.join(OUT, fname), "wb") as f:
            f.write(a.astype("<f4").tobytes())
        meta["arrays"][name] = {"shape": list(a.shape), "file": fname}
    with open(os.path.join(OUT, "golden-%s.json" % case), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")


def randn(g, *shape, amp=1.0):
    """float32 inputs, as Pagoda gets them."""
    return (amp * torch.randn(*shape, generator=g, dtype=torch.float64)).float()


def sdpa(q, k, v, scale, mask=None, causal=False):
    """softmax(q·kᵀ·scale + mask)·v in float64 with torch; q [..., Nq, D], k, v [..., Nk, D]."""
    q, k, v = q.double(), k.double(), v.double()
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    if mask is not None:
        s = s + mask.double()
    if causal:
        nq, nk = s.shape[-2], s.shape[-1]
        i = torch.arange(nq).unsqueeze(1)
        j = torch.arange(nk).unsqueeze(0)
        s = s.masked_fill(j > i + (nk - nq), float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = torch.matmul(p, v)
    # Cross-check with plain numpy float64 ops: explicit max-subtracted exp, sum, divide.
    sn = s.numpy()
    e = np.exp(sn - sn.max(axis=-1, keepdims=True))
    pn = e / e.sum(axis=-1, keepdims=True)
    on = np.einsum("...ij,...jd->...id", pn, v.numpy())
    assert np.allclose(pn, p.numpy(), rtol=1e-12, atol=1e-14), "softmax cross-check"
    assert np.allclose(on, o.numpy(), rtol=1e-12, atol=1e-13), "attention cross-check"
    assert np.isfinite(o.numpy()).all()
    return o, p


def attention_cases():
    # (a) ViT fused qkv, timm layout; (d) probabilities of head 1, rows [2, 7).
    g = torch.Generator().manual_seed(1001)
    B, N, H, D = 2, 17, 3, 16
    qkv = randn(g, B, N, 3 * H * D)
    qkv[..., : 2 * H * D] *= QK_AMP  # q and k: a peaked softmax
    q, k, v = qkv.double().reshape(B, N, 3, H, D).permute(2, 0, 3, 1, 4)  # each [B, H, N, D]
    scale = D ** -0.5
    o, p = sdpa(q, k, v, scale)
    out = o.transpose(1, 2).reshape(B, N, H * D)  # timm: (attn @ v).transpose(1, 2).reshape
    query_part(out, p, "attn-qkv")
    # heads split the wrong way (1 head of 48, or 6 of 8) move the query-dependent part far
    for h in (1, 6):
        q2, k2, v2 = qkv.double().reshape(B, N, 3, h, H * D // h).permute(2, 0, 3, 1, 4)
        o2, _ = sdpa(q2, k2, v2, scale)
        o2 = o2.transpose(1, 2).reshape(B, N, H * D)
        d, dw = (o2[:, 1:] - o2[:, :1]) - (out[:, 1:] - out[:, :1]), out[:, 1:] - out[:, :1]
        print(f"  attn-qkv: {h} heads for {H} move rows minus row 0 by "
              f"{float(d.abs().max() / dw.abs().max()):.3g}")
        assert float(d.abs().max() / dw.abs().max()) > 0.1
    save("attn-qkv", "pgd_attention_qkv",
         {"batch": B, "tokens": N, "heads": H, "head_dim": D, "scale": scale,
          "probs_head": 1, "probs_q0": 2, "probs_q1": 7, "mask": "none", "causal": 0},
         {"qkv": qkv, "want_out": out, "want_probs": p[:, 1:2, 2:7, :]})

    # (b) causal, BHND.
    g = torch.Generator().manual_seed(1002)
    B, H, N, D = 2, 2, 13, 32
    q, k = randn(g, B, H, N, D, amp=QK_AMP), randn(g, B, H, N, D, amp=QK_AMP)
    v = randn(g, B, H, N, D)
    scale = D ** -0.5
    o, p = sdpa(q, k, v, scale, causal=True)
    query_part(o, p, "attn-causal")
    save("attn-causal", "pgd_attention",
         {"batch": B, "heads": H, "nq": N, "nk": N, "head_dim": D, "scale": scale,
          "layout": "BHND", "mask": "none", "causal": 1},
         {"q": q, "k": k, "v": v, "want_out": o})

    # (c) cross attention with an additive [Nq, Nk] mask broadcast over batch and head.
    g = torch.Generator().manual_seed(1003)
    B, H, Nq, Nk, D = 2, 2, 5, 19, 64
    q, k = randn(g, B, H, Nq, D, amp=2.0), randn(g, B, H, Nk, D, amp=2.0)
    v = randn(g, B, H, Nk, D)
    scale = 0.1
    mask = randn(g, Nq, Nk)
    blocked = torch.rand(Nq, Nk, generator=g) < 0.3
    blocked[:, 0] = False  # every row keeps a visible key
    blocked[2, 1:] = True  # one row sees only key 0
    mask = mask.masked_fill(blocked, float("-inf"))
    o, p = sdpa(q, k, v, scale, mask=mask)
    query_part(o, p, "attn-cross")
    save("attn-cross", "pgd_attention",
         {"batch": B, "heads": H, "nq": Nq, "nk": Nk, "head_dim": D, "scale": scale,
          "layout": "BHND", "mask": "additive [nq, nk] broadcast over batch and head",
          "causal": 0},
         {"q": q, "k": k, "v": v, "mask": mask, "want_out": o})


def patch_case(case, seed, dist_token):
    g = torch.Generator().manual_seed(seed)
    B, C, Hh, Ww, P, D = 2, 3, 16, 12, 4, 24
    conv = torch.nn.Conv2d(C, D, kernel_size=P, stride=P).double()
    img = randn(g, B, C, Hh, Ww)
    weight = randn(g, D, C, P, P, amp=0.2)
    bias = randn(g, D, amp=0.2)
    cls = randn(g, D)
    dist = randn(g, D) if dist_token else None
    extra = 2 if dist_token else 1
    T = extra + (Hh // P) * (Ww // P)
    pos = randn(g, T, D, amp=0.5)
    with torch.no_grad():
        conv.weight.copy_(weight.double())
        conv.bias.copy_(bias.double())
        x = conv(img.double()).flatten(2).transpose(1, 2)  # timm PatchEmbed: [B, T - extra, D]
        toks = [cls.double().reshape(1, 1, D).expand(B, -1, -1)]
        if dist_token:
            toks.append(dist.double().reshape(1, 1, D).expand(B, -1, -1))
        x = torch.cat(toks + [x], dim=1) + pos.double().unsqueeze(0)
    arrays = {"image": img, "weight": weight, "bias": bias, "cls": cls}
    if dist_token:
        arrays["dist"] = dist
    arrays["pos"] = pos
    arrays["want_out"] = x
    save(case, "pgd_patch_embed",
         {"batch": B, "channels": C, "height": Hh, "width": Ww, "patch": P, "dim": D,
          "extra": extra, "tokens": T},
         arrays)


def pos_resize_case():
    g = torch.Generator().manual_seed(1006)
    extra, gh, gw, gh2, gw2, D = 1, 4, 3, 6, 5, 8
    pos = randn(g, extra + gh * gw, D)
    p = pos.double()
    grid = p[extra:].reshape(1, gh, gw, D).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(gh2, gw2), mode="bicubic", align_corners=False)
    grid = grid.permute(0, 2, 3, 1).reshape(gh2 * gw2, D)
    out = torch.cat([p[:extra], grid], dim=0)
    save("pos-resize", "pgd_pos_embed_resize",
         {"extra": extra, "gh": gh, "gw": gw, "gh2": gh2, "gw2": gw2, "dim": D,
          "mode": "bicubic", "align_corners": False},
         {"pos": pos, "want_out": out})


def resize_grid(grid, mode, gh, gw, gh2, gw2):
    """grid [1, D, gh, gw] (float64) resized as pgd_resize_mode `mode` does."""
    if mode == "bicubic":
        return F.interpolate(grid, size=(gh2, gw2), mode="bicubic", align_corners=False)
    if mode == "align-corners":
        return F.interpolate(grid, size=(gh2, gw2), mode="bicubic", align_corners=True)
    if mode == "antialias":
        return F.interpolate(grid, size=(gh2, gw2), mode="bicubic", antialias=True,
                             align_corners=False)
    if mode == "hf":
        out = F.interpolate(grid, scale_factor=((gh2 + 0.1) / gh, (gw2 + 0.1) / gw),
                            mode="bicubic", align_corners=False)
        assert out.shape[-2:] == (gh2, gw2)
        return out
    raise ValueError(mode)


def pos_resize_mode_case(mode, direction, seed, extra, gh, gw, gh2, gw2, D):
    g = torch.Generator().manual_seed(seed)
    pos = randn(g, extra + gh * gw, D)
    p = pos.double()
    grid = p[extra:].reshape(1, gh, gw, D).permute(0, 3, 1, 2)
    grid = resize_grid(grid, mode, gh, gw, gh2, gw2)
    grid = grid.permute(0, 2, 3, 1).reshape(gh2 * gw2, D)
    out = torch.cat([p[:extra], grid], dim=0)
    save("pos-resize-%s-%s" % (mode, direction), "pgd_pos_embed_resize",
         {"extra": extra, "gh": gh, "gw": gw, "gh2": gh2, "gw2": gw2, "dim": D, "mode": mode},
         {"pos": pos, "want_out": out})


def pos_resize_mode_cases():
    # (mode, up: extra, gh, gw, gh2, gw2, D; down: the same)
    cases = [
        ("bicubic", (0, 3, 5, 7, 6, 4), (2, 7, 6, 3, 4, 5)),
        ("align-corners", (1, 4, 4, 7, 7, 6), (1, 7, 7, 3, 1, 4)),
        ("antialias", (1, 4, 4, 6, 5, 6), (2, 9, 8, 3, 2, 5)),
        ("hf", (1, 4, 4, 7, 5, 6), (0, 6, 6, 4, 3, 5)),
    ]
    seed = 1100
    for mode, up, down in cases:
        for direction, (extra, gh, gw, gh2, gw2, D) in (("up", up), ("down", down)):
            pos_resize_mode_case(mode, direction, seed, extra, gh, gw, gh2, gw2, D)
            seed += 1


def resize_weights_case():
    in_max, out_max = 6, 9
    arrays = {}
    for mode in ("bicubic", "align-corners", "antialias", "hf"):
        mats = []
        for n_in in range(1, in_max + 1):
            for n_out in range(1, out_max + 1):
                basis = torch.eye(n_in, dtype=torch.float64).reshape(1, n_in, 1, n_in)
                y = resize_grid(basis, mode, 1, n_in, 1, n_out)  # [1, in, 1, out]
                mats.append(y.reshape(n_in, n_out).t().reshape(-1))
        arrays[mode] = torch.cat(mats)
    save("resize-weights", "pgd_pos_embed_resize", {"in_max": in_max, "out_max": out_max},
         arrays)


def main():
    torch.use_deterministic_algorithms(True)
    os.makedirs(OUT, exist_ok=True)
    attention_cases()
    patch_case("patch-cls", 1004, False)
    patch_case("patch-dist", 1005, True)
    pos_resize_case()
    pos_resize_mode_cases()
    resize_weights_case()


if __name__ == "__main__":
    main()
