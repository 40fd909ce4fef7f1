#!/usr/bin/env python3
"""tests/check_detect.py PAGODA DATA_DIR OUT_DIR — `pagoda detect` end to end (plain Python, no
NumPy: the .npy files are read with struct).

  - --input / --pixel-mask (the golden of tools/make-detr-golden.py, one 48 x 40 image padded to
    48 x 64) with --save-logits / --save-boxes / --json: the saved logits and boxes within 1e-4
    relative of transformers', the JSON a document with the image's detections;
  - two images (the sample cat and a gradient) with --draw and --attention-maps: the PNGs
    appear, one per image and one per detection;
  - weights missing a tensor: exit 1, the tensor named;
Exit 0 when all hold, 1 otherwise; 77 (skipped) without an OpenCL device.
"""
import ast
import json
import os
import struct
import subprocess
import sys

PAGODA, DATA, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
WEIGHTS = os.path.join(DATA, "detr-hf4.safetensors")
failures = []


def npy(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:6] == b"\x93NUMPY", path
    hl = struct.unpack("<H", data[8:10])[0]
    head = ast.literal_eval(data[10:10 + hl].decode())
    assert head["descr"] == "<f4", (path, head)
    n = 1
    for s in head["shape"]:
        n *= s
    return head["shape"], struct.unpack(f"<{n}f", data[10 + hl:10 + hl + 4 * n])


def run(args):
    p = subprocess.run([PAGODA, "detect"] + args, capture_output=True)
    if p.returncode == 1 and b"no OpenCL" in p.stderr:
        sys.exit(77)
    return p


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def golden_run():
    logits, boxes = os.path.join(OUT, "detect-logits.npy"), os.path.join(OUT, "detect-boxes.npy")
    p = run(["--weights", WEIGHTS, "--input", os.path.join(DATA, "detr-cli-input.npy"),
             "--pixel-mask", os.path.join(DATA, "detr-cli-mask.npy"), "--threshold", "0.2",
             "--save-logits", logits, "--save-boxes", boxes, "--json"])
    check(p.returncode == 0, f"--input run exits 0 ({p.stderr.decode(errors='replace')})")
    if p.returncode:
        return
    for got, want in ((logits, "detr-cli-logits.npy"), (boxes, "detr-cli-boxes.npy")):
        gs, g = npy(got)
        ws, w = npy(os.path.join(DATA, want))
        worst = max(abs(a - b) / max(abs(b), 1e-5) for a, b in zip(g, w))
        check(gs == ws and worst < 1e-4, f"{want}: shape {gs}, max relative error {worst:.3g}")
    doc = json.loads(p.stdout)
    img = doc["images"][0]
    check(img["width"] == 40 and img["height"] == 48, "the unpadded extent from the mask")
    check(len(img["detections"]) >= 1 and all(d["score"] > 0.2 for d in img["detections"]),
          f"{len(img['detections'])} detections above 0.2")


def images_run():
    draw, maps = os.path.join(OUT, "detect-draw.png"), os.path.join(OUT, "detect-att")
    for f in os.listdir(OUT):
        if f.startswith("detect-draw") or f.startswith("detect-att"):
            os.remove(os.path.join(OUT, f))
    cat = os.path.join(DATA, "..", "..", "apps", "data", "chelsea.jpg")
    p = run(["--weights", WEIGHTS, "--threshold", "0.25", "--draw", draw, "--attention-maps",
             maps, "--json", cat, os.path.join(DATA, "grad_300x200.png")])
    check(p.returncode == 0, f"two images exit 0 ({p.stderr.decode(errors='replace')})")
    if p.returncode:
        return
    doc = json.loads(p.stdout)
    n = [len(i["detections"]) for i in doc["images"]]
    outs = sorted(os.listdir(OUT))
    drawn = [f for f in outs if f.startswith("detect-draw")]
    att = [f for f in outs if f.startswith("detect-att")]
    check(drawn == ["detect-draw-1.png", "detect-draw-2.png"], f"boxes drawn: {drawn}")
    check(len(att) == sum(n), f"{len(att)} attention maps for {n} detections")
    check(doc["input"][2] == 800, f"shorter side resized to 800: {doc['input']}")


def bad_weights_run():
    """A copy of the weights without one tensor: refused, naming it."""
    with open(WEIGHTS, "rb") as f:
        data = f.read()
    hl = struct.unpack("<Q", data[:8])[0]
    head = json.loads(data[8:8 + hl])
    drop = "model.decoder.layers.1.encoder_attn.v_proj.bias"
    body = data[8 + hl:]
    new, parts, off = {}, [], 0
    for k, v in head.items():
        if k == "__metadata__":
            new[k] = v
            continue
        if k == drop:
            continue
        a, b = v["data_offsets"]
        parts.append(body[a:b])
        new[k] = dict(v, data_offsets=[off, off + b - a])
        off += b - a
    hj = json.dumps(new).encode()
    hj += b" " * (-len(hj) % 8)
    bad = os.path.join(OUT, "detect-bad.safetensors")
    with open(bad, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(parts))
    p = run(["--weights", bad, "--input", os.path.join(DATA, "detr-cli-input.npy")])
    err = p.stderr.decode(errors="replace")
    check(p.returncode == 1 and drop in err, f"missing tensor named: {err.strip()}")
    os.remove(bad)


golden_run()
images_run()
bad_weights_run()
sys.exit(1 if failures else 0)
