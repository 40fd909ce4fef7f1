#!/usr/bin/env python3
"""tests/check_side_config.py PAGODA DATA_DIR OUT_DIR — what a ViT or Swin load assumes rather
than reads, and the Hugging Face config.json beside the weights that gives it (plain Python, no
NumPy).

  - tests/data/vit-hf.safetensors without num_heads in its __metadata__ and no config.json: the
    heads of the standard table and Hugging Face's layer_norm_eps are said on stderr (the value,
    the default, how to set it) and under "assumed" in the JSON;
  - a config.json beside it (num_attention_heads, layer_norm_eps): nothing assumed, the golden
    file's own result again; --heads goes over it;
  - a bad config.json (a FIFO, invalid JSON, heads 0 or "2", eps -1): an error naming the file
    and the key, no hang;
  - tests/data/swin-hf4.safetensors (Hugging Face's Swin): its layer_norm_eps assumed and said
    without config.json, given by one (the same result), refused when bad;
  - tests/data/dino-tiny.safetensors (headless) without num_heads: `pagoda embed` says the heads
    it assumes, takes --heads (recorded in FEATS.npy.json), and `pagoda similar` reopens the
    model with the recorded heads (the features match; nothing assumed the second time).
Exit 0 when all hold, 1 otherwise; 77 (skipped) without an OpenCL device.
"""
import json
import os
import struct
import subprocess
import sys

PAGODA, DATA, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
IMAGE = os.path.join(DATA, "grad_300x200.png")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(weights, extra=(), cmd="vit"):
    p = subprocess.run([PAGODA, cmd, "--weights", weights, "--json"] + list(extra) + [IMAGE],
                       capture_output=True, timeout=120)
    if p.returncode == 1 and b"no OpenCL" in p.stderr:
        sys.exit(77)
    doc = json.loads(p.stdout) if p.returncode == 0 else None
    return p, doc, p.stderr.decode(errors="replace")


def without_heads(path, src="vit-hf.safetensors"):
    """src with no num_heads in its __metadata__."""
    with open(os.path.join(DATA, src), "rb") as f:
        data = f.read()
    hl = struct.unpack("<Q", data[:8])[0]
    head = json.loads(data[8:8 + hl])
    head["__metadata__"] = {"format": "pt"}
    hj = json.dumps(head).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + data[8 + hl:])


def top(doc):
    return doc["results"][0] if doc else None


d = os.path.join(OUT, "vit-config")
os.makedirs(d, exist_ok=True)
for f in os.listdir(d):
    os.remove(os.path.join(d, f))
w = os.path.join(d, "vit.safetensors")
cfg = os.path.join(d, "config.json")
without_heads(w)

_, golden, _ = run(os.path.join(DATA, "vit-hf.safetensors"))
p, doc, err = run(w)
a = doc["model"].get("assumed") if doc else None
check(doc is not None and a == {"heads": 1, "eps": 1e-12} and doc["model"]["heads"] == 1,
      f"nothing given: assumed in the JSON {a}")
check("heads not given: assumed 1" in err and "--heads" in err and
      "eps not given: assumed 1e-12" in err and "layer_norm_eps" in err,
      f"nothing given: assumed on stderr: {err.strip()}")

with open(cfg, "w") as f:
    json.dump({"num_attention_heads": 2, "layer_norm_eps": 1e-12, "model_type": "vit"}, f)
p, doc, err = run(w)
check(doc is not None and doc["model"].get("assumed") == {} and doc["model"]["heads"] == 2
      and "not given" not in err and top(doc) == top(golden),
      f"config.json gives the heads and eps: {doc and doc['model']}, {err.strip()}")
p, doc, err = run(w, ["--heads", "1"])
check(doc is not None and doc["model"]["heads"] == 1, "--heads goes over config.json")
os.remove(cfg)

cases = [("{\"num_attention_heads\": 2,", "not valid JSON"),
         ("{\"num_attention_heads\": 0}", "'num_attention_heads' must be"),
         ("{\"num_attention_heads\": \"2\"}", "'num_attention_heads' must be"),
         ("{\"layer_norm_eps\": -1}", "'layer_norm_eps' must be"),
         (None, "FIFO")]
for text, want in cases:
    if text is None:
        os.mkfifo(cfg)
    else:
        with open(cfg, "w") as f:
            f.write(text)
    try:
        p, doc, err = run(w)
        check(p.returncode == 1 and want in err and "config.json" in err,
              f"config.json {text!r}: exit {p.returncode}, {err.strip()}")
    except subprocess.TimeoutExpired:
        check(False, f"config.json {text!r}: hangs")
    os.remove(cfg)

def swin_runs():
    sd = os.path.join(OUT, "swin-config")
    os.makedirs(sd, exist_ok=True)
    for f in os.listdir(sd):
        os.remove(os.path.join(sd, f))
    sw, scfg = os.path.join(sd, "swin.safetensors"), os.path.join(sd, "config.json")
    without_heads(sw, "swin-hf4.safetensors")
    _, golden, _ = run(os.path.join(DATA, "swin-hf4.safetensors"), cmd="classify")
    p, doc, err = run(sw, cmd="classify")
    a = doc["model"].get("assumed") if doc else None
    check(a == {"eps": 1e-05} and "eps not given: assumed 1e-05 (layer_norm_eps in config.json)"
          in err, f"Swin (Hugging Face) without config.json: assumed {a}, {err.strip()}")
    with open(scfg, "w") as f:
        json.dump({"layer_norm_eps": 1e-05, "num_heads": [1, 2]}, f)
    p, doc, err = run(sw, cmd="classify")
    check(doc is not None and doc["model"].get("assumed") == {} and "not given" not in err
          and top(doc) == top(golden), f"Swin config.json gives eps: {err.strip()}")
    with open(scfg, "w") as f:
        f.write("{\"layer_norm_eps\": \"small\"}")
    p, doc, err = run(sw, cmd="classify")
    check(p.returncode == 1 and "'layer_norm_eps' must be" in err and "config.json" in err,
          f"Swin config.json with a bad eps: exit {p.returncode}, {err.strip()}")
    os.remove(scfg)


def embed_runs():
    ed = os.path.join(OUT, "embed-config")
    os.makedirs(ed, exist_ok=True)
    for f in os.listdir(ed):
        os.remove(os.path.join(ed, f))
    ew = os.path.join(ed, "dino.safetensors")
    without_heads(ew, "dino-tiny.safetensors")
    feats = os.path.join(ed, "f.npy")

    def embed(extra):
        p = subprocess.run([PAGODA, "embed", "--weights", ew, "--quiet", "--output", feats]
                           + extra + [IMAGE], capture_output=True, timeout=120)
        return p, p.stderr.decode(errors="replace")

    p, err = embed([])
    check(p.returncode == 0 and "heads not given" in err and "--heads" in err,
          f"embed without heads: exit {p.returncode}, {err.strip()}")
    p, err = embed(["--heads", "2"])
    meta = json.load(open(feats + ".json")) if p.returncode == 0 else {}
    check(p.returncode == 0 and "heads not given" not in err and meta.get("heads") == 2,
          f"embed --heads 2: exit {p.returncode}, heads {meta.get('heads')}, {err.strip()}")
    q = subprocess.run([PAGODA, "similar", "--index", feats, "--json", IMAGE],
                       capture_output=True, timeout=120)
    qerr = q.stderr.decode(errors="replace")
    doc = json.loads(q.stdout) if q.returncode == 0 else None
    best = doc["results"][0]["nearest"][0]["similarity"] if doc else None
    check(doc is not None and "heads not given" not in qerr and abs(best - 1.0) < 1e-5,
          f"similar reopens with the recorded heads (the image finds itself at {best}): exit "
          f"{q.returncode}, {qerr.strip()}")
    p, err = embed(["--heads", "0"])
    check(p.returncode == 2 and "--heads" in err, f"embed --heads 0: exit {p.returncode}")


swin_runs()
embed_runs()
sys.exit(1 if failures else 0)
