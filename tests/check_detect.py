#!/usr/bin/env python3
"""tests/check_detect.py PAGODA DATA_DIR OUT_DIR — `pagoda detect` end to end (plain Python, no
NumPy: the .npy files are read with struct).

  - --input / --pixel-mask (the golden of tools/golden/make-detr-golden.py, one 48 x 40 image padded
  to
    48 x 64) with --save-logits / --save-boxes / --json: the saved logits and boxes within 1e-4
    relative of transformers', the JSON a document with the image's detections;
  - two images (the sample cat and a gradient) with --draw and --attention-maps: the PNGs
    appear, one per image and one per detection;
  - weights missing a tensor: exit 1, the tensor named;
  - the weights without their heads in __metadata__ and no config.json: the 8 heads assumed are
    said on stderr and under "assumed" in the JSON (and the logits differ from the golden's);
    --heads 2,4, or a config.json beside them, gives the golden again, with nothing assumed;
  - a bad config.json (a FIFO, invalid JSON, heads 0, "4", or not dividing the width, dilation
    "yes", id2label not an object of names): an error naming the file and the key, no hang;
  - a NaN pixel in --input: refused (exit 1), run with --allow-nonfinite;
  - the reported boxes clipped to the image, --save-boxes keeping the model's raw boxes;
  - a 3000 x 1 image: refused as too narrow to resize (exit 2).
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


def rewrite(path, drop=None, meta=None):
    """A copy of the weights at path without tensor `drop`, with __metadata__ `meta` when given."""
    with open(WEIGHTS, "rb") as f:
        data = f.read()
    hl = struct.unpack("<Q", data[:8])[0]
    head = json.loads(data[8:8 + hl])
    body = data[8 + hl:]
    new, parts, off = {}, [], 0
    for k, v in head.items():
        if k == "__metadata__":
            new[k] = v if meta is None else meta
            continue
        if k == drop:
            continue
        a, b = v["data_offsets"]
        parts.append(body[a:b])
        new[k] = dict(v, data_offsets=[off, off + b - a])
        off += b - a
    hj = json.dumps(new).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(parts))


def bad_weights_run():
    """A copy of the weights without one tensor: refused, naming it."""
    drop = "model.decoder.layers.1.encoder_attn.v_proj.bias"
    bad = os.path.join(OUT, "detect-bad.safetensors")
    rewrite(bad, drop=drop)
    p = run(["--weights", bad, "--input", os.path.join(DATA, "detr-cli-input.npy")])
    err = p.stderr.decode(errors="replace")
    check(p.returncode == 1 and drop in err, f"missing tensor named: {err.strip()}")
    os.remove(bad)


GOLDEN_ARGS = ["--input", os.path.join(DATA, "detr-cli-input.npy"), "--pixel-mask",
               os.path.join(DATA, "detr-cli-mask.npy"), "--threshold", "0.2", "--json"]


def worst_error(got, want):
    gs, g = npy(got)
    ws, w = npy(os.path.join(DATA, want))
    return max(abs(a - b) / max(abs(b), 1e-5) for a, b in zip(g, w)) if gs == ws else 1e9


def headless_run(weights, extra, what):
    """Runs the golden input on `weights`; (process, JSON or None, logits' worst error)."""
    logits = os.path.join(OUT, "detect-heads-logits.npy")
    p = run(["--weights", weights, "--save-logits", logits] + GOLDEN_ARGS + extra)
    check(p.returncode == 0, f"{what}: exits 0 ({p.stderr.decode(errors='replace').strip()})")
    if p.returncode:
        return p, None, 1e9
    return p, json.loads(p.stdout), worst_error(logits, "detr-cli-logits.npy")


def assumed_runs():
    """Heads neither in __metadata__ nor config.json: said, and settable."""
    d = os.path.join(OUT, "detect-noconfig")
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    w = os.path.join(d, "detr.safetensors")
    rewrite(w, meta={"format": "pt"})
    p, doc, worst = headless_run(w, [], "no heads anywhere")
    err = p.stderr.decode(errors="replace")
    if doc:
        a = doc.get("assumed", {})
        check(a.get("encoder_heads") == 8 and a.get("decoder_heads") == 8
              and doc["model"].get("encoder_heads") == 8, f"assumed in the JSON: {a}")
        check("encoder_heads not given: assumed 8" in err and "decoder_heads not given" in err
              and "--heads" in err, f"assumed on stderr: {err.strip()}")
        check(worst > 1e-3, f"8 heads are not the golden's 2 and 4 (logits off by {worst:.3g})")
    p, doc, worst = headless_run(w, ["--heads", "2,4"], "--heads 2,4")
    if doc:
        a = doc.get("assumed")
        check(a is not None and "encoder_heads" not in a and doc["model"].get("decoder_heads") == 4
              and b"heads not given" not in p.stderr, f"--heads: assumed {a}")
        check(worst < 1e-4, f"--heads 2,4 gives the golden (logits within {worst:.3g})")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"encoder_attention_heads": 2, "decoder_attention_heads": 4, "dilation": False,
                   "id2label": {str(i): f"thing{i}" for i in range(5)}}, f)
    p, doc, worst = headless_run(w, [], "config.json beside")
    if doc:
        labels = {x["label"] for x in doc["images"][0]["detections"]}
        check(doc.get("assumed") == {} and not p.stderr and worst < 1e-4 and labels <= {
            f"thing{i}" for i in range(5)}, f"config.json: assumed {doc.get('assumed')}, labels "
              f"{labels}, logits within {worst:.3g}")


def bad_config_runs():
    """A config.json that cannot be read as one is an error naming it and the key."""
    d = os.path.join(OUT, "detect-badconfig")
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    w = os.path.join(d, "detr.safetensors")
    rewrite(w, meta={"format": "pt"})
    cfg = os.path.join(d, "config.json")
    cases = [("{\"encoder_attention_heads\": 2,", "not valid JSON"),
             ("[2, 4]", "not a JSON object"),
             ("{\"encoder_attention_heads\": 0}", "'encoder_attention_heads' must be"),
             ("{\"decoder_attention_heads\": \"4\"}", "'decoder_attention_heads' must be"),
             ("{\"encoder_attention_heads\": 3}", "encoder_attention_heads from " + cfg),
             ("{\"dilation\": \"yes\"}", "'dilation' must be true or false"),
             ("{\"id2label\": {\"x\": 1}}", "'id2label' must be"),
             (None, "FIFO")]
    for text, want in cases:
        if os.path.lexists(cfg):
            os.remove(cfg)
        if text is None:
            os.mkfifo(cfg)
        else:
            with open(cfg, "w") as f:
                f.write(text)
        try:
            p = subprocess.run([PAGODA, "detect", "--weights", w] + GOLDEN_ARGS,
                               capture_output=True, timeout=60)
        except subprocess.TimeoutExpired:
            check(False, f"config.json {text!r}: hangs")
            continue
        err = p.stderr.decode(errors="replace")
        check(p.returncode == 1 and want in err and "config.json" in err,
              f"config.json {text!r}: exit {p.returncode}, {err.strip()}")
    os.remove(cfg)


def nonfinite_runs():
    """A NaN pixel in --input is refused, as classify refuses it; --allow-nonfinite runs it."""
    with open(os.path.join(DATA, "detr-cli-input.npy"), "rb") as f:
        data = bytearray(f.read())
    hl = struct.unpack("<H", data[8:10])[0]
    data[10 + hl + 4 * 100:10 + hl + 4 * 101] = struct.pack("<f", float("nan"))
    bad = os.path.join(OUT, "detect-nan.npy")
    with open(bad, "wb") as f:
        f.write(data)
    p = run(["--weights", WEIGHTS, "--input", bad])
    err = p.stderr.decode(errors="replace")
    check(p.returncode == 1 and "non-finite" in err and "[0, 0, 1, 36]" in err
          and b"objects" not in p.stdout, f"a NaN pixel refused: {err.strip()}")
    p = run(["--weights", WEIGHTS, "--input", bad, "--allow-nonfinite"])
    check(p.returncode == 0, f"--allow-nonfinite runs it ({p.stderr.decode(errors='replace')})")
    os.remove(bad)


def clip_run():
    """Boxes reported inside the image; --save-boxes keeps the raw ones, which are not."""
    boxes = os.path.join(OUT, "detect-clip-boxes.npy")
    p = run(["--weights", WEIGHTS, "--save-boxes", boxes] + GOLDEN_ARGS)
    if p.returncode:
        check(False, f"clip run exits 0 ({p.stderr.decode(errors='replace')})")
        return
    img = json.loads(p.stdout)["images"][0]
    w, h = img["width"], img["height"]
    inside = all(0 <= b[0] <= b[2] <= w and 0 <= b[1] <= b[3] <= h
                 for b in (d["box"] for d in img["detections"]))
    _, raw = npy(boxes)
    y0 = [(raw[q * 4 + 1] - raw[q * 4 + 3] / 2) * h for q in range(len(raw) // 4)]
    check(inside and img["detections"] and min(y0) < -1,
          f"boxes clipped to {w} x {h}: {[d['box'] for d in img['detections']]}; raw y0 down "
          f"to {min(y0):.1f} in --save-boxes")


def png(path, w, h):
    """A grey RGB PNG of w x h, with zlib (no imaging library needed)."""
    import zlib
    raw = b"".join(b"\0" + b"\x80" * (3 * w) for _ in range(h))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def narrow_run():
    """3000 x 1 resizes to a shorter side of 0: refused before any arithmetic on it."""
    path = os.path.join(OUT, "detect-3000x1.png")
    png(path, 3000, 1)
    p = run(["--weights", WEIGHTS, path])
    err = p.stderr.decode(errors="replace")
    check(p.returncode == 2 and "too narrow" in err, f"3000 x 1 refused: {err.strip()}")
    os.remove(path)


golden_run()
images_run()
bad_weights_run()
assumed_runs()
bad_config_runs()
nonfinite_runs()
clip_run()
narrow_run()
sys.exit(1 if failures else 0)
