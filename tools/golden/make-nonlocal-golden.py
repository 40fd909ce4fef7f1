#!/usr/bin/env python3
"""Makes the PyTorch golden files for the non-local ResNet pipeline in tests/data/.

Run with a Python that has PyTorch and numpy (the files were made with torch 2.15 from pip, the
venv of tools/golden/make-vit-golden.py; Debian's python3-torch 1.13 works too):
    .deps-torch/bin/python tools/golden/make-nonlocal-golden.py

Sensitive (tools/golden/goldenlib.py): theta and phi are scaled per case so that the first block's
softmax rows peak as a trained model's do (largest probability about 0.6, neither uniform nor
one-hot), and the script checks that the non-local blocks left out move the logits' image-
dependent part (image 1 - image 0, image 2 - image 0) by far more than tests/test_nonlocal.c
allows: average pooling over random images leaves little of the logits to the image (2 to 20 %),
so the tests check that part on its own.

Seeded and deterministic. The networks are small ResNets named exactly as torchvision names
its ResNets (conv1, bn1, layerL.B.{conv1,bn1,conv2,bn2[,conv3,bn3],downsample.0/1}, fc), with
arbitrary widths (Pagoda reads every width from the shapes), random weights and random batch-norm
statistics (so folding is exercised), plus non-local blocks (Wang et al., CVPR 2018) stored as
nonlocal.layerL.B.{theta,phi,g,w}.{weight,bias}, nonlocal.layerL.B.bn.*, and for concatenation
nonlocal.layerL.B.concat.weight [1, 2*Ci, 1, 1]; a block runs immediately before residual block
layerL.B. __metadata__ carries nonlocal.mode and nonlocal.subsample.

Per case <name>:
    nl-<name>.safetensors     weights
    nl-<name>-input.npy       float32 [B, 3, H, W]
    nl-<name>-logits.npy      float32 [B, classes], computed in float64 from the float32 weights
    nl-<name>-affinity.npy    float32 [B, N'] — f(x_q, ·) of the first non-local block for the
                              query position in __metadata__ "golden.query" = "y,x" on its grid
                              (softmax row, or the row divided by N for the other two modes)
"""
import json
import os
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import goldenlib

OUT = goldenlib.DATA
MODES = ("embedded_gaussian", "gaussian", "dot_product", "concatenation")


class NonLocal(nn.Module):
    """The block as the paper defines it: z = BN(W y) + x, y_i = 1/C(x) sum_j f(x_i, x_j) g(x_j)."""

    def __init__(self, c, mode, subsample):
        super().__init__()
        ci = c // 2
        self.mode, self.subsample, self.ci = mode, subsample, ci
        self.theta = nn.Conv2d(c, ci, 1)
        self.phi = nn.Conv2d(c, ci, 1)
        self.g = nn.Conv2d(c, ci, 1)
        self.w = nn.Conv2d(ci, c, 1)
        self.bn = nn.BatchNorm2d(c)
        if mode == "concatenation":
            self.concat = nn.Conv2d(2 * ci, 1, 1, bias=False)
        self.last_affinity = None
        self.query = None

    def forward(self, x):
        b, c, h, w = x.shape
        pool = (lambda t: F.max_pool2d(t, 2)) if self.subsample else (lambda t: t)
        g = pool(self.g(x)).flatten(2).transpose(1, 2)  # [b, N', ci]
        if self.mode == "gaussian":
            q = x.flatten(2).transpose(1, 2)  # [b, N, c]
            k = pool(x).flatten(2).transpose(1, 2)
            f = torch.softmax(q @ k.transpose(1, 2), dim=-1)
        elif self.mode == "embedded_gaussian":
            q = self.theta(x).flatten(2).transpose(1, 2)
            k = pool(self.phi(x)).flatten(2).transpose(1, 2)
            f = torch.softmax(q @ k.transpose(1, 2), dim=-1)
        elif self.mode == "dot_product":
            q = self.theta(x).flatten(2).transpose(1, 2)
            k = pool(self.phi(x)).flatten(2).transpose(1, 2)
            f = (q @ k.transpose(1, 2)) / k.shape[1]
        else:
            q = self.theta(x).flatten(2).transpose(1, 2)  # [b, N, ci]
            k = pool(self.phi(x)).flatten(2).transpose(1, 2)  # [b, N', ci]
            wt = self.concat.weight.view(2 * self.ci)
            a = q @ wt[: self.ci]  # [b, N]
            bb = k @ wt[self.ci:]  # [b, N']
            f = F.relu(a[:, :, None] + bb[:, None, :]) / k.shape[1]
            self.last_a = a.detach()
        if self.query is not None:
            qy, qx = self.query
            self.last_affinity = f[:, qy * w + qx, :].clone()
        y = (f @ g).transpose(1, 2).reshape(b, self.ci, h, w)
        return self.bn(self.w(y)) + x


class Basic(nn.Module):
    expansion = 1

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width
        self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + idt)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)  # torchvision v1.5
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        return F.relu(self.bn3(self.conv3(y)) + idt)


class ResNet(nn.Module):
    def __init__(self, block, layers, widths, stem, classes, nonlocal_at, mode, subsample):
        super().__init__()
        self.conv1 = nn.Conv2d(3, stem, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(stem)
        cin = stem
        self.nl = nn.ModuleDict()
        self.order = []
        for li, (n, wd) in enumerate(zip(layers, widths), start=1):
            blocks = []
            for bi in range(n):
                stride = 2 if (li > 1 and bi == 0) else 1
                if (li, bi) in nonlocal_at:
                    self.nl[f"layer{li}_{bi}"] = NonLocal(cin, mode, subsample)
                blocks.append(block(cin, wd, stride))
                cin = wd * block.expansion
            setattr(self, f"layer{li}", nn.Sequential(*blocks))
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 3, 2, 1)
        for li in range(1, 5):
            for bi, blk in enumerate(getattr(self, f"layer{li}")):
                key = f"layer{li}_{bi}"
                if key in self.nl:
                    x = self.nl[key](x)
                x = blk(x)
        return self.fc(x.mean((2, 3)))

    def pagoda_state(self):
        out = {}
        for k, v in self.state_dict().items():
            if k.startswith("nl."):
                rest = k[3:]
                lb, tail = rest.split(".", 1)
                li, bi = lb.split("_")
                k = f"nonlocal.{li}.{bi}.{tail}"
            out[k] = v
        return out


def randomise(model, g, qk=0.25):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=g) * (1.5 / fan_in) ** 0.5)
            elif name.endswith("bn.weight") or ".bn" in name or name.startswith("bn"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(0.2 * torch.randn(b.shape, generator=g))
            elif name.endswith("running_var"):
                b.copy_(0.5 + torch.rand(b.shape, generator=g))
            elif name.endswith("num_batches_tracked"):
                b.fill_(7)
        # Scale the pairwise terms (qk) so the softmax rows peak as a trained model's do without
        # going one-hot (a near one-hot row would test little) and the concatenation's ReLU is
        # active for part of each row.
        for name, p in model.named_parameters():
            if name.startswith("nl.") and (".theta." in name or ".phi." in name):
                p.mul_(qk)


DTYPES = {torch.float32: "F32", torch.int64: "I64"}


def save_safetensors(tensors, path, metadata):
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        data = t.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    h = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


class Identity(nn.Module):
    def forward(self, x):
        return x


def check_blocks(name, model64, x, logits):
    """The non-local blocks left out: a slip the golden must see in rows minus row 0."""
    blocks = dict(model64.nl)
    for k in blocks:
        model64.nl[k] = Identity()
    with torch.no_grad():
        goldenlib.check_slip(name, logits, model64(x.double()), "no non-local block", 0.1)
    for k, b in blocks.items():
        model64.nl[k] = b


def make_case(name, block, layers, widths, stem, classes, nonlocal_at, mode, subsample, shape,
              seed, query, qk=0.25):
    g = torch.Generator().manual_seed(seed)
    model = ResNet(block, layers, widths, stem, classes, nonlocal_at, mode, subsample)
    randomise(model, g, qk)
    model.eval()
    x = torch.randn(shape, generator=g)
    state = {k: v.detach().clone() for k, v in model.pagoda_state().items()}
    first = sorted(nonlocal_at)[0]
    if mode == "concatenation":
        # A query whose ReLU row is not all zero: the position with the largest theta term.
        with torch.no_grad():
            model(x)
        a = model.nl[f"layer{first[0]}_{first[1]}"].last_a[0]
        gw = int(round(a.numel() ** 0.5))  # the basic cases have square grids
        i = int(torch.argmax(a))
        query = (i // gw, i % gw)
    meta = {"nonlocal.mode": mode, "nonlocal.subsample": "true" if subsample else "false",
            "golden.query": "%d,%d" % query}
    save_safetensors(state, os.path.join(OUT, f"nl-{name}.safetensors"), meta)
    model64 = model.double()
    nlb = model64.nl[f"layer{first[0]}_{first[1]}"]
    nlb.query = query
    with torch.no_grad():
        logits = model64(x.double())
    if mode in ("embedded_gaussian", "gaussian"):
        print(f"nl-{name}: softmax rows peak at %.2f" % goldenlib.attention_peak(nlb.last_affinity))
    check_blocks(f"nl-{name}", model64, x, logits)
    np.save(os.path.join(OUT, f"nl-{name}-input.npy"), x.numpy().astype("<f4"))
    np.save(os.path.join(OUT, f"nl-{name}-logits.npy"), logits.float().numpy().astype("<f4"))
    np.save(os.path.join(OUT, f"nl-{name}-affinity.npy"),
            nlb.last_affinity.float().numpy().astype("<f4"))
    print(f"nl-{name}: logits {tuple(logits.shape)}, affinity {tuple(nlb.last_affinity.shape)}")


def main():
    seed = 100
    # Basic blocks, one non-local block before layer2.1 (C = 16 on an 8x8 grid; 4x4 subsampled).
    for mode in MODES:
        for sub in (False, True):
            name = "basic-%s%s" % (mode.replace("_", "-"), "-sub" if sub else "")
            make_case(name, Basic, [1, 2, 1, 1], [8, 16, 24, 32], 8, 10, {(2, 1)}, mode, sub,
                      (2, 3, 64, 64), seed, (3, 5))
            seed += 1
    # Bottleneck blocks, odd sizes, two blocks (before layer2.0 and layer3.1), batch 3.
    make_case("bottleneck", Bottleneck, [1, 1, 2, 1], [4, 8, 12, 16], 8, 7, {(2, 0), (3, 1)},
              "embedded_gaussian", True, (3, 3, 72, 56), seed, (2, 1), qk=0.5)


if __name__ == "__main__":
    main()
