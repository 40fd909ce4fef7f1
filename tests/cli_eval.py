#!/usr/bin/env python3
"""cli_eval.py PAGODA DATA — `pagoda eval` on tests/data/eval (tools/golden/make-eval-data.py): the
top-1 and top-5 counts, overall and per class, are those PyTorch computed (expected.json), from the
ImageFolder layout with --labels-map and from a labelled --list on stdin (spaces at the line ends
ignored); bad labels maps (a bad line, empty, a name twice) and list lines (no label, a label that
is no class) are refused naming FILE:LINE and the rule; symbolic link loops in the folders are
skipped with a warning (eval, classify --recursive). Standard library only."""
import json
import os
import shutil
import subprocess
import sys
import tempfile


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
    symlink_loops(pagoda, base, ev, want, tmp)
    print("cli-eval: OK")


def symlink_loops(pagoda, base, ev, want, tmp):
    """A symbolic link back up the tree (a loop) is skipped with a warning, by the folder
    listing of `classify --recursive` and of eval's ImageFolder classes, and the rest runs."""
    root = tempfile.mkdtemp(prefix="eval-loop-", dir=tmp)
    try:
        # eval: the layout rebuilt with links to the images, and c0/back -> the root.
        for d, _, files in os.walk(ev):
            rel = os.path.relpath(d, ev)
            os.makedirs(os.path.join(root, "ev", rel), exist_ok=True)
            for f in files:
                os.symlink(os.path.join(d, f), os.path.join(root, "ev", rel, f))
        os.symlink("..", os.path.join(root, "ev", "c0", "back"))
        p = subprocess.run(base + ["--labels-map", os.path.join(ev, "labels-map.txt"),
                                   os.path.join(root, "ev")], capture_output=True)
        if p.returncode or b"symbolic link loop" not in p.stderr:
            fail("eval over a link loop: exit %d: %s" % (p.returncode, p.stderr.decode()))
        check(json.loads(p.stdout), want, "ImageFolder with a link loop")
        # classify --recursive: imgs/a.png, imgs/sub/up -> .. and imgs/sub/self -> .
        imgs = os.path.join(root, "imgs")
        os.makedirs(os.path.join(imgs, "sub"))
        os.symlink(os.path.join(ev, want["rows"][0]["path"]), os.path.join(imgs, "a.png"))
        os.symlink("..", os.path.join(imgs, "sub", "up"))
        os.symlink(".", os.path.join(imgs, "sub", "self"))
        out = os.path.join(root, "out.jsonl")
        p = subprocess.run([pagoda, "classify", "--weights", base[3], "--quiet", "--recursive",
                            "--output", out, imgs], capture_output=True)
        err = p.stderr.decode()
        if p.returncode or err.count("symbolic link loop") != 2:
            fail("classify --recursive over link loops: exit %d: %s" % (p.returncode, err))
        with open(out) as f:
            lines = [r for r in (json.loads(x) for x in f if x.strip()) if "source" in r]
        if len(lines) != 1 or not lines[0]["source"].endswith("a.png"):
            fail("classify --recursive over link loops: %r" % lines)
        print("symbolic link loops: skipped with a warning, the run goes on")
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
