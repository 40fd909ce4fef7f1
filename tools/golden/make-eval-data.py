#!/usr/bin/env python3
"""Makes tests/data/eval/: a tiny labelled data set in ImageFolder layout for `pagoda eval`, and
the accuracy PyTorch computes on it with the tiny timm ViT of tests/data/vit-timm.safetensors.

Needs PyTorch with timm, Pillow, numpy and safetensors (the peers' venv has them; or
    python3 -m venv /tmp/ev && /tmp/ev/bin/pip install torch timm pillow numpy safetensors
    /tmp/ev/bin/python tools/golden/make-eval-data.py).

24 PNG images (random sizes, smooth colour fields plus noise) go into class folders c<K>/ with
their labels chosen from PyTorch's own ranking so that the accuracies are known and no image
sits on a near-tie: every third image labelled with its top class, every third with its second
(a top-5 but not a top-1 hit), the rest with its lowest class (a miss). The model runs at
224 x 224 (timm's dynamic_img_size=True resamples the 4 x 4 position grid) on the timm preset
(shorter side 248 bicubic, centre crop 224, mean/std 0.5), as `pagoda eval` preprocesses for timm
weights. Written: eval/c<K>/<name>.png, eval/labels-map.txt ('c<K> K' lines: folders of absent
classes would renumber ImageFolder's sorted order), eval/expected.json (per image its path,
label and PyTorch's top-5; the top-1/top-5 counts, per class too).
"""
import json
import os
import shutil

import numpy as np
import torch
from PIL import Image
from safetensors.torch import load_file

import goldenlib

DATA = goldenlib.DATA
OUT = os.path.join(DATA, "eval")
N, MARGIN = 24, 2e-3


def preprocess(img):
    """timm preset: shorter side 248 bicubic, centre crop 224, (x - 0.5) / 0.5."""
    w, h = img.size
    short, long_ = (w, h) if w <= h else (h, w)
    nl = int(248 * long_ / short)
    nw, nh = (248, nl) if w <= h else (nl, 248)
    r = img.resize((nw, nh), Image.BICUBIC)
    top, left = int(round((nh - 224) / 2.0)), int(round((nw - 224) / 2.0))
    a = np.asarray(r.crop((left, top, left + 224, top + 224)), np.uint8).astype(np.float32)
    a = (a / np.float32(255) - np.float32(0.5)) / np.float32(0.5)
    return a.transpose(2, 0, 1)


def make_image(rng):
    w, h = int(rng.integers(16, 48)), int(rng.integers(16, 48))
    y, x = np.mgrid[0:h, 0:w] / max(w, h)
    c = rng.uniform(0, 255, (3, 3))
    a = np.stack([c[k, 0] + c[k, 1] * x + c[k, 2] * y for k in range(3)], -1) % 256
    a += rng.normal(0, 20, a.shape)
    return Image.fromarray(np.clip(np.rint(a), 0, 255).astype(np.uint8), "RGB")


def main():
    from timm.models.vision_transformer import VisionTransformer
    m = VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2,
                          mlp_ratio=2.0, num_classes=10, dynamic_img_size=True)
    m.load_state_dict(load_file(os.path.join(DATA, "vit-timm.safetensors")))
    m.eval()
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    rng = np.random.default_rng(20261204)
    images, tries = [], 0
    while len(images) < N:
        tries += 1
        img = make_image(rng)
        with torch.no_grad():
            logits = m(torch.from_numpy(preprocess(img))[None])[0].double()
        order = torch.argsort(logits, descending=True).tolist()
        s = logits[order].tolist()
        kind = len(images) % 3
        # no near-tie where the label's rank is decided: 1st/2nd, 2nd/3rd, 5th/6th
        gaps = [s[0] - s[1]] + ([s[1] - s[2]] if kind == 1 else []) + [s[4] - s[5]]
        if min(gaps) < MARGIN:
            continue
        label = order[0] if kind == 0 else order[1] if kind == 1 else order[-1]
        images.append((img, label, order[:5]))
    per = {}
    rows = []
    for i, (img, label, top5) in enumerate(images):
        rel = "c%d/img%02d.png" % (label, i)
        os.makedirs(os.path.join(OUT, "c%d" % label), exist_ok=True)
        img.save(os.path.join(OUT, rel))
        hit1, hit5 = top5[0] == label, label in top5
        p = per.setdefault(label, {"images": 0, "top1": 0, "top5": 0})
        p["images"] += 1
        p["top1"] += hit1
        p["top5"] += hit5
        rows.append({"path": rel, "label": label, "top5": top5})
    with open(os.path.join(OUT, "labels-map.txt"), "w") as f:
        for k in sorted(per):
            f.write("c%d %d\n" % (k, k))
    doc = {"images": N, "top1_correct": sum(p["top1"] for p in per.values()),
           "top5_correct": sum(p["top5"] for p in per.values()),
           "per_class": {str(k): per[k] for k in sorted(per)}, "rows": rows,
           "note": ("tools/golden/make-eval-data.py: PyTorch (timm) on vit-timm.safetensors at "
                    "224x224")}
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print("%d images (%d drawn), top-1 %d, top-5 %d" % (N, tries, doc["top1_correct"],
                                                         doc["top5_correct"]))


if __name__ == "__main__":
    main()
