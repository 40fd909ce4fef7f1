#!/usr/bin/env python3
"""tests/check_bert_cli.py PAGODA DATA_DIR OUT_DIR — `pagoda fill-mask` and `pagoda embed-text`
end to end on every OpenCL device (plain Python).

  - fill-mask on the tiny BERT (vocab.txt + tokenizer_config.json) and DistilBERT (tokenizer.json)
    golden folders: the top 5 tokens, ids and probabilities equal transformers' (made by
    tools/golden/make-bert-golden.py through BertTokenizer), within 1e-4 relative;
  - the same text in a batch beside a longer one (so it is padded) gives the same answer;
  - embed-text: mean pooling (sentence-transformers) and --pooling cls equal transformers' within
    1e-4 relative; --normalize gives unit vectors; the similarity matrix is symmetric;
  - --attention-map writes a PNG of the chosen layers and heads;
  - errors: no config.json beside the weights, a head count that does not divide the width, a
    missing head count (each naming config.json), no mask token, a headless model for fill-mask,
    a bad --layers / --top-k / --pooling (exit 2), --layers without --attention-map;
  - without --weights: the seeded random model, said on stderr.
Exit 0 when all hold, 1 otherwise; 77 (skipped) without an OpenCL device.
"""
import json
import os
import shutil
import subprocess
import sys

PAGODA, DATA, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def run(args, code=0):
    p = subprocess.run([PAGODA] + args, capture_output=True, text=True, timeout=600)
    if p.returncode != code:
        failures.append(f"{' '.join(args)}: exit {p.returncode}, wanted {code}\n{p.stderr}")
    return p


def check(ok, what):
    if not ok:
        failures.append(what)


def close(a, b, rtol=1e-4, scale=None):
    scale = scale if scale is not None else max(abs(x) for x in b)
    return len(a) == len(b) and all(abs(x - y) <= rtol * abs(y) + rtol * scale
                                    for x, y in zip(a, b))


def devices():
    p = subprocess.run([PAGODA, "devices", "--json"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(77)
    found = [d["selector"] for d in json.loads(p.stdout)]
    if not found:
        sys.exit(77)
    return found


def fill_mask(dev, name):
    folder = os.path.join(DATA, f"bert-{name}")
    gold = json.load(open(os.path.join(folder, "golden.json")))["fill_mask"]
    p = run(["fill-mask", "--device", dev, "--weights", folder, "--json", gold["text"]])
    if p.returncode:
        return
    doc = json.loads(p.stdout)
    res = doc["results"][0]
    masks = res["masks"]
    check(len(masks) == 1 and masks[0]["position"] == gold["position"],
          f"{name} on {dev}: mask position {masks}")
    preds = masks[0]["predictions"]
    check([q["id"] for q in preds] == [t[1] for t in gold["top"]] and
          [q["token"] for q in preds] == [t[0] for t in gold["top"]],
          f"{name} on {dev}: top 5 {[(q['token'], q['id']) for q in preds]}, "
          f"transformers {gold['top']}")
    check(close([q["probability"] for q in preds], [t[2] for t in gold["top"]], scale=0),
          f"{name} on {dev}: probabilities {[q['probability'] for q in preds]} vs {gold['top']}")
    check(doc["model"]["arch"] in ("bert", "distilbert") and not doc["random"],
          f"{name}: model {doc['model']}")
    # The same text padded in a batch beside a longer one: the same candidates.
    longer = "the old river runs through the great city of london ."
    p = run(["fill-mask", "--device", dev, "--weights", folder, "--json", gold["text"],
             longer + " [MASK]"])
    if not p.returncode:
        padded = json.loads(p.stdout)["results"][0]["masks"][0]["predictions"]
        check([q["id"] for q in padded] == [q["id"] for q in preds] and
              close([q["probability"] for q in padded], [q["probability"] for q in preds],
                    rtol=1e-5, scale=0),
              f"{name} on {dev}: padded in a batch, {padded} vs {preds}")


def embed_text(dev):
    folder = os.path.join(DATA, "bert-model")
    gold = json.load(open(os.path.join(folder, "golden.json")))["embed"]
    for pooling in ("mean", "cls"):
        p = run(["embed-text", "--device", dev, "--weights", folder, "--pooling", pooling,
                 "--json"] + gold["texts"])
        if p.returncode:
            continue
        doc = json.loads(p.stdout)
        for k, r in enumerate(doc["results"]):
            check(close(r["embedding"], gold[pooling][k]),
                  f"embed-text {pooling} on {dev}: text {k} {r['embedding'][:4]} vs "
                  f"{gold[pooling][k][:4]}")
        s = doc["similarity"]
        check(abs(s[0][1] - s[1][0]) < 1e-9 and abs(s[0][0] - 1) < 1e-6,
              f"embed-text on {dev}: similarity {s}")
    p = run(["embed-text", "--device", dev, "--weights", folder, "--normalize", "--json",
             "a river", "a city"])
    if not p.returncode:
        for r in json.loads(p.stdout)["results"]:
            n = sum(x * x for x in r["embedding"]) ** 0.5
            check(abs(n - 1) < 1e-5, f"--normalize on {dev}: norm {n}")


def bad_config(tag, change, want):
    """A copy of the tiny BERT with config.json changed (None: removed): exit 1, `want` said."""
    d = os.path.join(OUT, f"bert-{tag}")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(os.path.join(DATA, "bert-tiny"), d)
    cfg_path = os.path.join(d, "config.json")
    if change is None:
        os.remove(cfg_path)
    else:
        cfg = json.load(open(cfg_path))
        change(cfg)
        json.dump(cfg, open(cfg_path, "w"))
    p = run(["fill-mask", "--weights", d, "Paris is the [MASK] ."], code=1)
    check(want in p.stderr, f"{tag}: stderr lacks {want!r}: {p.stderr}")


def errors():
    tiny = os.path.join(DATA, "bert-tiny")
    bad_config("no-config", None, "no config.json beside the weights")
    bad_config("heads-5", lambda c: c.update(num_attention_heads=5),
               "'num_attention_heads' 5 does not divide the width 48")
    bad_config("no-heads", lambda c: c.pop("num_attention_heads"),
               "config.json: no 'num_attention_heads'")
    bad_config("width", lambda c: c.update(hidden_size=64), "config.json's hidden_size is 64")
    p = run(["fill-mask", "--weights", tiny, "no mask here"], code=1)
    check("has no mask token" in p.stderr, f"no mask: {p.stderr}")
    p = run(["fill-mask", "--weights", os.path.join(DATA, "bert-model"), "a [MASK]"], code=1)
    check("no masked-LM head" in p.stderr, f"headless: {p.stderr}")
    for args, want in ((["--layers", "0"], "--attention-map"),
                       (["--attention-map", os.path.join(OUT, "x.png"), "--layers", "7"],
                        "--layers wants"),
                       (["--top-k", "0"], "--top-k wants")):
        p = run(["fill-mask", "--weights", tiny] + args + ["a [MASK]"], code=2)
        check(want in p.stderr, f"{args}: {p.stderr}")
    p = run(["embed-text", "--pooling", "max", "x"], code=2)
    check("--pooling wants" in p.stderr, f"--pooling max: {p.stderr}")
    p = run(["fill-mask"], code=2)
    p = run(["fill-mask", "--help"])
    check("usage: pagoda fill-mask" in p.stdout, "fill-mask --help")
    p = run(["embed-text", "--help"])
    check("sentence-transformers" in p.stdout, "embed-text --help")


def attention_map_and_random():
    png = os.path.join(OUT, "bert-map.png")
    if os.path.exists(png):
        os.remove(png)
    p = run(["fill-mask", "--weights", os.path.join(DATA, "bert-tiny"), "--attention-map", png,
             "--layers", "all", "--heads", "0,-1", "Paris is the [MASK] of France."])
    check(os.path.exists(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n",
          f"--attention-map wrote no PNG: {p.stderr}")
    p = run(["fill-mask", "--json", "the capital of france is [MASK] ."])
    check("seeded random BERT" in p.stderr, f"random model: {p.stderr}")
    if not p.returncode:
        doc = json.loads(p.stdout)
        check(doc["random"] and doc["weights"] is None, "random: JSON says so")
    p = run(["embed-text", "hello world"])
    check("seeded random BERT" in p.stderr, f"random embed: {p.stderr}")


def main():
    os.makedirs(OUT, exist_ok=True)
    for dev in devices():
        fill_mask(dev, "tiny")
        fill_mask(dev, "distil")
        embed_text(dev)
    errors()
    attention_map_and_random()
    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
