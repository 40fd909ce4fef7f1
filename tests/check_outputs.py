#!/usr/bin/env python3
"""tests/check_outputs.py PAGODA DATA_DIR — the CLI's output files, appearing together or not at all.

  - a classification run that fails after the forward pass (a heat map into a directory that
    does not exist, or onto a path that is a directory) leaves no --save-logits and no
    --save-input file and no temporary file;
  - a successful run leaves exactly its outputs;
  - --save-logits / --save-input / a heat map / bench --output over a FIFO, a character device
    (mknod, when allowed) or a symbolic link is refused, naming it, and the node is left as it
    was (the link's target unchanged);
  - bench --output F never follows a symbolic link planted at F.tmp.<pid> (the pid is known
    ahead through `exec` from a shell);
  - the stream's results file (--output F.jsonl / F.csv) begins with the record of the model
    that wrote it, and --resume with another model (a Swin checkpoint over ViT results), or
    over a file without the record, is refused naming both, the file left as it was;
  - CSV is RFC 4180: paths and labels holding commas, double quotes (one at the very end too)
    and line ends read back with Python's csv module, and --resume reads its own CSV (also cut
    inside a quoted line end) back;
  - a run that fails at model load leaves an existing results file byte for byte, and creates
    none where there was none;
  - a run whose --output another run holds (its flock) stops with an error naming the file;
  - the outputs of detect, gat, embed and vit are checked before any work: --draw DIR,
    --draw /dev/null, --attention-map DIR, two options naming one file (X and X, a and ./a)
    are refused with an error naming them, and nothing is written.
Exit 0 when all hold, 1 otherwise; 77 (skipped) without an OpenCL device.
"""
import csv
import fcntl
import io
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time

PAGODA, DATA = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
WEIGHTS = os.path.join(DATA, "vit-timm.safetensors")
SWIN = os.path.join(DATA, "swin-hf4.safetensors")
DETR = os.path.join(DATA, "detr-hf4.safetensors")
IMAGE = os.path.join(DATA, "grad_300x200.png")
failures = []


def run(args, shell_prefix=None):
    if shell_prefix:
        cmd = ["sh", "-c", shell_prefix + '; exec "$0" "$@"', PAGODA] + args
    else:
        cmd = [PAGODA] + args
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    return p.returncode, p.stderr.decode("utf-8", "replace")


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
        if detail:
            print("     " + detail.strip().replace("\n", "\n     "))


def listing(d):
    return sorted(os.listdir(d))


def node(path):
    st = os.lstat(path)
    return (st.st_mode, st.st_ino, st.st_rdev)


def main():
    rc, err = run(["vit", "--weights", WEIGHTS, "--json"])
    if rc != 0 and ("matches no device" in err or "no OpenCL" in err):
        print("no OpenCL device; skipped")
        return 77
    check(rc == 0, "a plain run works", err)
    base = tempfile.mkdtemp(prefix="pgd-outputs-", dir=os.environ.get("PAGODA_TEST_TMP"))

    # 1. A run that fails after the forward pass leaves none of its outputs.
    for case, heat in (("missing-dir", "nodir/att.png"), ("heat-is-dir", "adir.png")):
        d = os.path.join(base, case)
        os.mkdir(d)
        if case == "heat-is-dir":
            os.mkdir(os.path.join(d, "adir.png"))
        before = listing(d)
        rc, err = run(["vit", "--weights", WEIGHTS, "--save-logits", os.path.join(d, "logits.npy"),
                       "--save-input", os.path.join(d, "input.npy"),
                       "--attention-map", os.path.join(d, heat), IMAGE])
        check(rc == 1 and "pagoda: error:" in err, "%s: the run fails" % case, err)
        check(listing(d) == before, "%s: no output and no temporary file is left" % case,
              "left: %s" % listing(d))
        if case == "heat-is-dir":
            check(listing(os.path.join(d, "adir.png")) == [], "%s: nothing inside it" % case)

    # 2. A successful run leaves exactly its outputs.
    d = os.path.join(base, "success")
    os.mkdir(d)
    rc, err = run(["vit", "--weights", WEIGHTS, "--save-logits", os.path.join(d, "logits.npy"),
                   "--save-input", os.path.join(d, "input.npy"),
                   "--attention-map", os.path.join(d, "att.png"), IMAGE])
    check(rc == 0, "success: the run works", err)
    check(listing(d) == ["att-rollout.png", "att.png", "input.npy", "logits.npy"],
          "success: exactly the outputs", "got %s" % listing(d))

    # 3. Targets that are not regular files are refused and left alone.
    d = os.path.join(base, "special")
    os.mkdir(d)
    victim = os.path.join(d, "victim")
    with open(victim, "w") as f:
        f.write("victim")
    # Named .png so that --attention-map OUT.png writes its first map exactly there.
    os.mkfifo(os.path.join(d, "fifo.png"))
    os.symlink(victim, os.path.join(d, "link.png"))
    specials = [("fifo.png", "a FIFO"), ("link.png", "a symbolic link")]
    try:
        os.mknod(os.path.join(d, "null.png"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        specials.append(("null.png", "a character device"))
    except OSError as e:
        print("skip mknod: %s" % e)
    for name, kind in specials:
        target = os.path.join(d, name)
        for opt in ("--save-logits", "--save-input", "--attention-map"):
            was = node(target)
            before = listing(d)
            rc, err = run(["vit", "--weights", WEIGHTS, opt, target, IMAGE])
            check(rc == 1 and target in err and kind in err,
                  "vit %s over %s is refused, naming it" % (opt, kind), err)
            check(node(target) == was and listing(d) == before,
                  "vit %s over %s leaves it and the directory as they were" % (opt, kind),
                  "left: %s" % listing(d))
        was = node(target)
        rc, err = run(["bench", "--repeat", "1", "--warmup", "0", "--output", target,
                       "scale:1024"])
        check(rc == 1 and target in err and kind in err,
              "bench --output over %s is refused, naming it" % kind, err)
        check(node(target) == was, "bench --output over %s leaves it as it was" % kind)
    with open(victim) as f:
        check(f.read() == "victim", "the symbolic link's target is unchanged")

    # 4. A symbolic link planted at bench's old temporary name F.tmp.<pid> is not followed.
    d = os.path.join(base, "planted")
    os.mkdir(d)
    victim = os.path.join(d, "victim")
    with open(victim, "w") as f:
        f.write("victim")
    out = os.path.join(d, "bench.json")
    rc, err = run(["bench", "--repeat", "1", "--warmup", "0", "--output", out, "scale:1024"],
                  shell_prefix='ln -s "%s" "%s.tmp.$$"' % (victim, out))
    check(rc == 0, "bench --output with a planted link beside it works", err)
    with open(victim) as f:
        check(f.read() == "victim", "the link planted at F.tmp.<pid> was not followed")
    check(os.path.isfile(out) and not os.path.islink(out), "bench.json is a regular file")

    results_files(base)
    outputs_checked_first(base)

    if not failures:
        subprocess.run(["rm", "-rf", base])
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


def read(path):
    with open(path, "rb") as f:
        return f.read()


def read_or_empty(path):
    try:
        return read(path)
    except FileNotFoundError:
        return b""


def csv_rows(path):
    """The records of a results CSV after its first line (the model's record)."""
    text = read(path).decode()
    first, rest = text.split("\n", 1)
    check(first.startswith("# pagoda_results {"), "%s begins with the model's record" %
          os.path.basename(path), first[:80])
    return list(csv.reader(io.StringIO(rest, newline="")))


def nan_weights(path):
    """vit-timm.safetensors with a NaN in its first float tensor: the load fails."""
    b = bytearray(read(WEIGHTS))
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    name = sorted(k for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32")[0]
    at = 8 + n + header[name]["data_offsets"][0]
    b[at:at + 4] = struct.pack("<I", 0x7fc00000)
    with open(path, "wb") as f:
        f.write(b)


def results_files(base):
    d = os.path.join(base, "results")
    imgs = os.path.join(d, "imgs")
    os.makedirs(imgs)
    names = ['a,"q".png', "b\nx.png", 'c".png']  # a comma and quotes, a line end, a last quote
    for name in names:
        shutil.copy(IMAGE, os.path.join(imgs, name))
    labels = os.path.join(d, "labels.txt")
    with open(labels, "w") as f:
        f.write("".join('say "hi", %d\n' % i if i % 2 else 'end%d"\n' % i for i in range(10)))
    vit = ["vit", "--weights", WEIGHTS, "--labels", labels, "--quiet"]

    # The model's record, and --resume refusing another model's results.
    full = os.path.join(d, "full.jsonl")
    rc, err = run(vit + ["--output", full, imgs])
    check(rc == 0, "results: a stream to JSON lines works", err)
    lines = read(full).splitlines(keepends=True)
    rec = json.loads(lines[0]).get("pagoda_results", {})
    check(len(lines) == 4 and rec.get("weights", {}).get("file") == "vit-timm.safetensors" and
          len(rec["weights"].get("sha256", "")) == 64 and rec.get("topk") == 5,
          "results: the first line records the weights (name, sha256), top-k",
          lines[0][:200].decode(errors="replace"))
    half = os.path.join(d, "half.jsonl")
    with open(half, "wb") as f:
        f.write(b"".join(lines[:2]))
    was = read(half)
    rc, err = run(["classify", "--weights", SWIN, "--output", half, "--resume", imgs])
    check(rc == 1 and "another model" in err and "vit-timm.safetensors" in err and
          "swin-hf4.safetensors" in err, "results: --resume with a Swin checkpoint over ViT "
          "results is refused, naming both", err)
    check(read(half) == was, "results: the refused file is left as it was")
    rc, err = run(vit + ["--topk", "3", "--output", half, "--resume", imgs])
    check(rc == 1 and "topk" in err, "results: --resume with another --topk is refused", err)
    for opt, key in (("--weights-dtype=f16", "weights_dtype"), ("--fast-decode", "preprocess")):
        rc, err = run(vit + [opt, "--output", half, "--resume", imgs])
        check(rc == 1 and key in err and read(half) == was,
              "results: --resume with %s is refused (%s)" % (opt, key), err)
    rc, err = run(vit + ["--output", half, "--resume", imgs])
    check(rc == 0 and "1 of 3 images" in err and read(half) == read(full),
          "results: --resume with the same model completes the file as one run writes it", err)
    legacy = os.path.join(d, "legacy.jsonl")
    with open(legacy, "wb") as f:
        f.write(b"".join(lines[1:2]))
    rc, err = run(vit + ["--output", legacy, "--resume", imgs])
    check(rc == 1 and "record of the model" in err and read(legacy) == b"".join(lines[1:2]),
          "results: --resume over a file without the model's record is refused", err)

    # RFC 4180 CSV, written and read back.
    out = os.path.join(d, "r.csv")
    rc, err = run(vit + ["--output", out, imgs])
    check(rc == 0, "csv: a stream to CSV works", err)
    rows = csv_rows(out)
    want = sorted(os.path.join(imgs, n) for n in names)
    check(len(rows) == 4 and rows[0][:3] == ["image", "source", "error"] and
          [r[1] for r in rows[1:]] == want and all(len(r) == 18 for r in rows),
          "csv: paths with commas, quotes and line ends read back (Python's csv)", repr(rows))
    names_of = open(labels).read().splitlines()
    pairs = [(r[3 + 3 * k], r[4 + 3 * k]) for r in rows[1:] if len(r) == 18 for k in range(5)]
    check(len(pairs) == 15 and all(names_of[int(c)] == l for c, l in pairs),
          "csv: labels with quotes and commas read back", repr(pairs[:4]))
    whole = read(out)
    rc, err = run(vit + ["--output", out, "--resume", imgs])
    check(rc == 0 and read(out) == whole, "csv: --resume reads its own CSV back", err)
    # Cut inside the quoted line end of b\nx.png: the unfinished record is redone.
    cut = whole.index(b"b\nx.png") + 2
    with open(out, "wb") as f:
        f.write(whole[:cut])
    rc, err = run(vit + ["--output", out, "--resume", imgs])
    check(rc == 0 and read(out) == whole, "csv: --resume after a cut inside a quoted field", err)

    # A run that fails at model load leaves the results as they were.
    bad = os.path.join(d, "nan.safetensors")
    nan_weights(bad)
    for path in (full, out):
        was = read(path)
        rc, err = run(["vit", "--weights", bad, "--output", path, imgs])
        check(rc == 1 and "non-finite" in err, "load failure: the run fails (%s)" %
              os.path.basename(path), err)
        check(read(path) == was, "load failure: %s is left byte for byte" % os.path.basename(path),
              "%d bytes, was %d" % (len(read(path)), len(was)))
    fresh = os.path.join(d, "fresh.jsonl")
    rc, err = run(["vit", "--weights", bad, "--output", fresh, imgs])
    check(rc == 1 and not os.path.exists(fresh), "load failure: no results file is created")

    # A second run writing the same output is refused while the first holds it.
    was = read(full)
    with open(full, "r+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        rc, err = run(vit + ["--output", full, imgs])
    check(rc == 1 and full in err and "another pagoda run" in err,
          "lock: a second run writing one output is refused, naming it", err)
    check(read(full) == was, "lock: the held file is left as it was")

    # Two real runs on one output: the second, started while the first writes, is refused.
    many = os.path.join(d, "many")
    os.mkdir(many)
    for i in range(60):
        shutil.copy(IMAGE, os.path.join(many, "%02d.png" % i))
    two = os.path.join(d, "two.jsonl")
    first = subprocess.Popen([PAGODA] + vit + ["--batch", "1", "--jobs", "1", "--output", two,
                                               many], stderr=subprocess.PIPE)
    while first.poll() is None and read_or_empty(two).count(b"\n") < 2:
        time.sleep(0.01)
    rc, err = run(vit + ["--output", two, many])
    first_err = first.communicate()[1].decode(errors="replace")
    rows = read(two).splitlines()
    check(first.returncode == 0 and rc == 1 and "another pagoda run" in err and
          len(rows) == 61 and len(set(rows)) == 61,
          "lock: of two runs writing one output the second is refused, no line twice",
          "first: %d %s; second: %d %s; %d lines, %d distinct" %
          (first.returncode, first_err, rc, err, len(rows), len(set(rows))))


def null_png():
    """/dev/null.png as lstat sees it (None when absent): a run before this fix made it."""
    try:
        st = os.lstat("/dev/null.png")
        return (st.st_ino, st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        return None


def outputs_checked_first(base):
    null_before = null_png()
    d = os.path.join(base, "checked")
    os.makedirs(os.path.join(d, "adir"))
    graph = os.path.join(DATA, "gat-graph.safetensors")
    cases = [
        (["detect", "--weights", DETR, "--draw", "adir", IMAGE], "--draw DIR", "directory"),
        (["detect", "--weights", DETR, "--draw", "/dev/null", IMAGE], "--draw /dev/null",
         "character device"),
        (["detect", "--weights", DETR, "--save-logits", "X", "--save-boxes", "X", IMAGE],
         "detect --save-logits X --save-boxes X", "same file"),
        (["gat", "--weights", os.path.join(DATA, "gat-model.safetensors"), "--graph", graph,
          "--save-logits", "a", "--save-attention", "./a"], "gat a and ./a", "same file"),
        (["vit", "--weights", WEIGHTS, "--save-logits", "l.npy", "--save-input",
          "../checked/l.npy", IMAGE], "vit l.npy and ../checked/l.npy", "same file"),
        (["vit", "--weights", WEIGHTS, "--attention-map", "adir", IMAGE],
         "vit --attention-map DIR", "directory"),
        (["embed", "--weights", WEIGHTS, "--output", "f.npy", "--attention-heads", "f.npy.json",
          IMAGE], "embed --attention-heads over its own image list", "same file"),
    ]
    for args, what, word in cases:
        before = listing(d)
        p = subprocess.run([PAGODA] + args, cwd=d, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=600)
        err = p.stderr.decode("utf-8", "replace")
        want = 2 if word == "same file" else 1  # two names for one file: a usage error
        check(p.returncode == want and word in err, "%s is refused (%s)" % (what, word), err)
        check(listing(d) == before and listing(os.path.join(d, "adir")) == [],
              "%s: nothing is written" % what, "left: %s" % listing(d))
    check(null_png() == null_before, "--draw /dev/null: no /dev/null.png made or changed")


if __name__ == "__main__":
    sys.exit(main())
