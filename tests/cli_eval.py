#!/usr/bin/env python3
"""cli_eval.py PAGODA DATA — `pagoda eval` on tests/data/eval (tools/make-eval-data.py): the
top-1 and top-5 counts, overall and per class, are those PyTorch computed (expected.json), from
the ImageFolder layout with --labels-map and from a labelled --list on stdin; a labels map with a
bad line is refused naming the line. Standard library only."""
import json
import os
import subprocess
import sys


def fail(msg):
    print("cli-eval: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(doc, want, what):
    got = (doc["images"], doc["top1_correct"], doc["top5_correct"])
    exp = (want["images"], want["top1_correct"], want["top5_correct"])
    if got != exp:
        fail("%s: images, top-1, top-5 = %s, PyTorch %s" % (what, got, exp))
    for c in doc["per_class"]:
        w = want["per_class"][str(c["class"])]
        if c["images"] != w["images"] or round(c["top1"] * w["images"]) != w["top1"] or \
                round(c["top5"] * w["images"]) != w["top5"]:
            fail("%s: class %d: %r, PyTorch %r" % (what, c["class"], c, w))
    if len(doc["per_class"]) != len(want["per_class"]):
        fail("%s: %d classes, PyTorch %d" % (what, len(doc["per_class"]), len(want["per_class"])))
    print("%s: %d images, top-1 %d, top-5 %d, as PyTorch" % ((what,) + got))


def main():
    pagoda, data = sys.argv[1], sys.argv[2]
    ev = os.path.join(data, "eval")
    want = json.load(open(os.path.join(ev, "expected.json")))
    base = [pagoda, "eval", "--weights", os.path.join(data, "vit-timm.safetensors"), "--json",
            "--quiet"]
    p = subprocess.run(base + ["--labels-map", os.path.join(ev, "labels-map.txt"), ev],
                       capture_output=True)
    if p.returncode:
        fail("ImageFolder run: exit %d: %s" % (p.returncode, p.stderr.decode()))
    check(json.loads(p.stdout), want, "ImageFolder + --labels-map")
    listed = "".join("%s %d\n" % (os.path.join(ev, r["path"]), r["label"]) for r in want["rows"])
    p = subprocess.run(base + ["--batch", "5", "--list", "-"], input=listed.encode(),
                       capture_output=True)
    if p.returncode:
        fail("--list run: exit %d: %s" % (p.returncode, p.stderr.decode()))
    check(json.loads(p.stdout), want, "--list with labels")
    tmp = os.environ.get("PAGODA_TEST_TMP", "/tmp")
    bad = os.path.join(tmp, "eval-bad-map.txt")
    with open(bad, "w") as f:
        f.write("c0 0\nc1 eleven\n")
    p = subprocess.run(base + ["--labels-map", bad, ev], capture_output=True)
    os.unlink(bad)
    if p.returncode != 1 or b"line 2" not in p.stderr:
        fail("a bad labels map: exit %d: %s" % (p.returncode, p.stderr.decode()))
    print("cli-eval: OK")


if __name__ == "__main__":
    main()
