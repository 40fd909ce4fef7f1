#!/usr/bin/env python3
"""check_precision.py — ViT logits in precision f16 and int8 against float32, on every device.

    check_precision.py PAGODA DATA_DIR

For each device `pagoda devices --json` lists: where it has the capability (low_precision:
fp16_arithmetic for f16, integer_dot_product_packed for int8) a seeded random ViT-Ti/16 runs
the same batch (seeded synthetic images and the PNGs of tests/data) in f32 and in the
precision, and the logits must agree within the bounds of docs/precision.md:
    f16:  relative L2 error of every image's logits <= 1e-2, top-1 agreement >= 95 %
    int8: relative L2 error of every image's logits <= 8e-2, top-1 agreement >= 85 %
and the error must not be float32's own (0: the same kernels run twice agree exactly), which
would mean the precision silently did not run. Where the device lacks the capability the run
must be refused (exit 1) naming the extension. Exit 77 (skip) without numpy.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("check_precision: numpy is not installed: skipped")
    sys.exit(77)

BOUNDS = {"f16": (1e-2, 0.95, "fp16_arithmetic", "cl_khr_fp16"),
          "int8": (8e-2, 0.85, "integer_dot_product_packed", "cl_khr_integer_dot_product")}


def inputs(data_dir, tmp):
    """A [B, 3, 224, 224] batch: smoothed seeded noise (image-like), then the data PNGs."""
    rng = np.random.default_rng(42)
    x = rng.standard_normal((24, 3, 224, 224)).astype(np.float32)
    for _ in range(3):
        x = (x + np.roll(x, 1, 2) + np.roll(x, 1, 3)) / 3
    path = os.path.join(tmp, "in.npy")
    np.save(path, x)
    pngs = [os.path.join(data_dir, n) for n in ("grad_300x200.png", "noise_97x143.png",
                                                 "checker_13x7.png", "png-ok-16x16.png")]
    return path, [p for p in pngs if os.path.exists(p)]


def logits(pagoda, dev, prec, args, out):
    cmd = [pagoda, "vit", "--random", "ti", "--device", dev["selector"], "--precision", prec,
           "--save-logits", out, "--json"] + args
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r, (np.load(out).astype(np.float64) if r.returncode == 0 else None)


def check_device(pagoda, dev, batch, pngs, tmp):
    fails = []
    lp = dev["low_precision"]
    runs = [("npy", ["--input", batch])] + ([("png", pngs)] if pngs else [])
    ref = {}
    for prec, (max_rel, min_top1, cap, ext) in BOUNDS.items():
        if not lp[cap]:
            r, _ = logits(pagoda, dev, prec, runs[0][1], os.path.join(tmp, "refused.npy"))
            if r.returncode != 1 or ext not in r.stderr or dev["name"] not in r.stderr:
                fails.append(f"{dev['name']}: {prec} should be refused naming {ext}: exit "
                             f"{r.returncode}, {r.stderr.strip()[-300:]}")
            else:
                print(f"{dev['name']}: {prec} refused ({ext})")
            continue
        got, want = [], []
        for tag, args in runs:
            if tag not in ref:
                r, ref[tag] = logits(pagoda, dev, "f32", args, os.path.join(tmp, f"f32-{tag}.npy"))
                if r.returncode:
                    return [f"{dev['name']}: f32 run failed: {r.stderr.strip()[-300:]}"]
            r, l = logits(pagoda, dev, prec, args, os.path.join(tmp, f"{prec}-{tag}.npy"))
            if r.returncode:
                fails.append(f"{dev['name']}: {prec} run failed: {r.stderr.strip()[-300:]}")
                break
            got.append(l)
            want.append(ref[tag])
        if len(got) != len(runs):
            continue
        g, w = np.concatenate(got), np.concatenate(want)
        rel = np.linalg.norm(g - w, axis=1) / np.linalg.norm(w, axis=1)
        top1 = float((g.argmax(1) == w.argmax(1)).mean())
        print(f"{dev['name']}: {prec} over {len(g)} images: logits relative error max "
              f"{rel.max():.3g} mean {rel.mean():.3g}, top-1 agreement {top1:.1%}")
        if not (rel.max() <= max_rel and top1 >= min_top1):
            fails.append(f"{dev['name']}: {prec} beyond its bounds (max relative error "
                         f"{rel.max():.3g} > {max_rel} or top-1 {top1:.1%} < {min_top1:.0%})")
        if rel.mean() == 0:
            fails.append(f"{dev['name']}: {prec} logits equal float32's: it did not run")
    return fails


def main():
    pagoda, data_dir = sys.argv[1], sys.argv[2]
    devs = json.loads(subprocess.run([pagoda, "devices", "--json"], capture_output=True,
                                     text=True, check=True).stdout)
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        batch, pngs = inputs(data_dir, tmp)
        for dev in devs:
            fails += check_device(pagoda, dev, batch, pngs, tmp)
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
