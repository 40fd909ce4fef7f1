#!/usr/bin/env python3
"""cli_eval.py PAGODA DATA — `pagoda eval` on tests/data/eval (tools/make-eval-data.py): the
top-1 and top-5 counts, overall and per class, are those PyTorch computed (expected.json), from
the ImageFolder layout with --labels-map and from a labelled --list on stdin (spaces at the
line ends ignored); bad labels maps (a bad line, empty, a name twice) and list lines (no label, a
label that is no class) are refused naming FILE:LINE and the rule. Standard library only."""
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
    # Spaces and tabs at the ends of a --list line are ignored: the same counts.
    spaced = "".join("  %s %d \t\n" % (os.path.join(ev, r["path"]), r["label"])
                     for r in want["rows"])
    p = subprocess.run(base + ["--list", "-"], input=spaced.encode(), capture_output=True)
    if p.returncode:
        fail("--list with spaces at the line ends: exit %d: %s" % (p.returncode,
                                                                   p.stderr.decode()))
    check(json.loads(p.stdout), want, "--list with spaces at the line ends")
    tmp = os.environ.get("PAGODA_TEST_TMP", "/tmp")
    # Bad labels maps and lists: exit 1, the message names FILE:LINE (or the file) and the rule.
    first = want["rows"][0]
    cases = [("map", "c0 0\nc1 eleven\n", ":2:", "NAME INDEX"),
             ("map", "", "eval-bad-map.txt", "no 'NAME INDEX' lines"),
             ("map", "\n  \n", "eval-bad-map.txt", "no 'NAME INDEX' lines"),
             ("map", "c0 0\nc1 1\nc0 2\n", ":3:", "listed already on line 1"),
             ("list", "%s c3\n" % os.path.join(ev, first["path"]), ":1:", "not a class number"),
             ("list", "\n%s\n" % os.path.join(ev, first["path"]), ":2:", "has no label")]
    for kind, text, where, rule in cases:
        bad = os.path.join(tmp, "eval-bad-%s.txt" % kind)
        with open(bad, "w") as f:
            f.write(text)
        p = subprocess.run(base + (["--labels-map", bad, ev] if kind == "map" else
                                   ["--list", bad]), capture_output=True)
        os.unlink(bad)
        err = p.stderr.decode()
        if where.startswith(":"):
            where = "eval-bad-%s.txt%s" % (kind, where)
        if p.returncode != 1 or where not in err or rule not in err:
            fail("a bad %s %r: exit %d, want 1 naming %s and %r: %s"
                 % (kind, text, p.returncode, where, rule, err))
    print("cli-eval: OK")


if __name__ == "__main__":
    main()
