#!/usr/bin/env python3
"""cli_stream.py PAGODA DATA [--mpirun MPIRUN] — the streaming classify path end to end.

Python's standard library only (the PNG files are written here with zlib). On a directory of 320
generated images (a tenth in a sub-directory, plus an unreadable file and a text file):

  * streaming (--recursive --batch 8 --jobs 2 --output F.jsonl) gives, image for image, the
    results of the one-batch path (`--json` over the same files) on PoCL and Intel's runtime (and
    on a 12-image --list on rusticl, which is slow), the unreadable file one "error" line;
  * a run killed (SIGKILL) after a random number of lines, then --resume, gives the same file
    byte for byte; so does a run interrupted with SIGINT (exit 130), then --resume;
  * --device POCL,OTHER (Intel's runtime, else rusticl) gives the one-device results (to 1e-5:
    the implementations round differently) and reports each device's share;
  * CSV output from --list - (stdin), the usage errors of options that do not stream, a FIFO
    as --list refused at once;
  * with --mpirun (the MPI build): `mpirun --oversubscribe -n 3` writes the same file as one
    process (static and dynamic schedules), and `pagoda bench --mpi` under mpirun -n 2 gives one document with a run per rank.
--images N: N generated images instead of 320 (meson's default suite: 96; the suite "slow" runs
all 320). --quick (the sanitizer build): 40 images on PoCL only. The random kill point is drawn from
a seed printed first (PAGODA_TEST_SEED repeats it).
Exit 77 (skipped) when PoCL is not there.
"""
import json
import os
import random
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib

N_IMAGES = 320


def png(path, w, h, rnd):
    rows = b"".join(b"\x00" + bytes(rnd.randrange(256) for _ in range(3 * w)) for _ in range(h))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def fail(msg):
    print("cli-stream: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def run(args, ok=(0,), **kw):
    t = time.time()
    p = subprocess.run(args, capture_output=True, **kw)
    print("  %.1f s: %s -> %d" % (time.time() - t, " ".join(args[:12]), p.returncode))
    if p.returncode not in ok:
        sys.stderr.write(p.stderr.decode(errors="replace"))
        fail("exit status %d, want %s: %s" % (p.returncode, ok, " ".join(args)))
    return p


def lines(path):
    """The result lines of a JSON lines file, after its first line: the record of the model."""
    with open(path) as f:
        rows = [json.loads(l) for l in f]
    if not rows or set(rows[0]) != {"pagoda_results"}:
        fail("%s does not begin with the model's record: %r" % (path, rows[:1]))
    return rows[1:]


def same_results(got, want, tol, what):
    """got, want: {source: top list}; the classes in the same order (a swap allowed only between
    classes whose probabilities are within tol) and the probabilities within tol."""
    if set(got) != set(want):
        fail("%s: different images: %s" % (what, sorted(set(got) ^ set(want))[:5]))
    exact = 0
    for src, w in want.items():
        g = got[src]
        if g == w:
            exact += 1
            continue
        if len(g) != len(w):
            fail("%s: %s: top-k lengths %d and %d" % (what, src, len(g), len(w)))
        for a, b in zip(g, w):
            if abs(a["probability"] - b["probability"]) > tol:
                fail("%s: %s: probability %r vs %r" % (what, src, a, b))
            if a["index"] != b["index"]:
                pa = {e["index"]: e["probability"] for e in w}
                if a["index"] not in pa or abs(pa[a["index"]] - b["probability"]) > tol:
                    fail("%s: %s: class %d where %d is expected" % (what, src, a["index"],
                                                                    b["index"]))
    print("  %s: %d images, %d bit-identical" % (what, len(want), exact))


def by_source(rows):
    return {r["source"]: r["top"] for r in rows if "top" in r}


def main():
    pagoda, data = sys.argv[1], sys.argv[2]
    rest = sys.argv[3:]
    quick = "--quick" in rest  # the sanitizer build: 40 images, PoCL alone
    mpirun = rest[rest.index("--mpirun") + 1] if "--mpirun" in rest else None
    global N_IMAGES
    if "--images" in rest:
        N_IMAGES = int(rest[rest.index("--images") + 1])
    if quick:
        N_IMAGES = 40
    seed = int(os.environ.get("PAGODA_TEST_SEED", random.randrange(1 << 30)))
    print("cli-stream: seed %d (PAGODA_TEST_SEED=%d repeats it)" % (seed, seed))
    rnd = random.Random(seed)
    weights = os.path.join(data, "vit-timm.safetensors")
    devs = json.loads(run([pagoda, "devices", "--json"]).stdout)

    def pick(word):
        for d in devs:
            if word in d["platform"].lower():
                return d["selector"]
        return None

    pocl, intel, rusticl = pick("portable"), pick("intel"), pick("rusticl")
    if quick:
        intel = rusticl = None
    if not pocl:
        print("cli-stream: no PoCL device: skipped")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="stream-", dir=os.environ.get("PAGODA_TEST_TMP"))
    imgs = os.path.join(tmp, "imgs")
    os.makedirs(os.path.join(imgs, "sub"))
    img_rnd = random.Random(1)  # the images are the same every time
    for i in range(N_IMAGES):
        sub = "sub/" if i % 10 == 0 else ""
        png(os.path.join(imgs, "%s%03d.png" % (sub, i)), img_rnd.randrange(8, 40),
            img_rnd.randrange(8, 40), img_rnd)
    with open(os.path.join(imgs, "broken.png"), "wb") as f:
        f.write(b"not a png")
    with open(os.path.join(imgs, "notes.txt"), "w") as f:
        f.write("not an image\n")
    base = [pagoda, "vit", "--weights", weights]
    stream = ["--recursive", "--batch", "8", "--jobs", "2"]

    # 1. streaming == one batch, on each implementation
    ref = {}
    for name, sel in (("PoCL", pocl), ("Intel", intel), ("rusticl", rusticl)):
        if not sel:
            print("  %s: not here" % name)
            continue
        out = os.path.join(tmp, "s-%s.jsonl" % name)
        if name == "rusticl":  # slow (a few images/s on llvmpipe): a short list
            files = sorted(os.path.join(imgs, f) for f in os.listdir(imgs) if f.endswith(".png"))
            listed = "\n".join(files[:11] + [os.path.join(imgs, "broken.png")]) + "\n"
            run(base + ["--device", sel, "--list", "-", "--batch", "4", "--output", out],
                input=listed.encode())
        else:
            run(base + ["--device", sel, "--output", out] + stream + [imgs])
        rows = lines(out)
        want_n = 12 if name == "rusticl" else N_IMAGES + 1
        if len(rows) != want_n or [r["image"] for r in rows] != list(range(want_n)):
            fail("%s: %d lines, want %d in order" % (name, len(rows), want_n))
        errs = [r for r in rows if "error" in r]
        if len(errs) != 1 or not errs[0]["source"].endswith("broken.png") or \
                "unknown format" not in errs[0]["error"]:
            fail("%s: the unreadable image's line: %r" % (name, errs))
        good = [r["source"] for r in rows if "top" in r]
        one = json.loads(run(base + ["--device", sel, "--json"] + good).stdout)["results"]
        same_results(by_source(rows), {r["source"]: r["top"] for r in one}, 1e-6,
                     "%s streaming vs one batch" % name)
        ref[name] = out

    # 2. killed at a random point (SIGKILL, then SIGINT), then --resume: the same file
    with open(ref["PoCL"], "rb") as f:
        want = f.read()
    for sig in (signal.SIGKILL, signal.SIGINT):
        out = os.path.join(tmp, "r-%d.jsonl" % sig)
        at = rnd.randrange(8, N_IMAGES * 3 // 4)
        p = subprocess.Popen(base + ["--device", pocl, "--output", out, "--quiet"] + stream +
                             [imgs], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        while p.poll() is None:
            if os.path.exists(out) and open(out, "rb").read().count(b"\n") >= at:
                p.send_signal(sig)
                break
            time.sleep(0.01)
        err = p.communicate()[1].decode(errors="replace")
        n = open(out, "rb").read().count(b"\n")
        print("  signal %d after >= %d lines: exit %d with %d lines" % (sig, at, p.returncode, n))
        if sig == signal.SIGINT and p.returncode not in (0, 130):
            fail("SIGINT: exit %d, want 130: %s" % (p.returncode, err))
        if sig == signal.SIGINT and p.returncode == 130 and "interrupted" not in err:
            fail("SIGINT: no word of the interruption: " + err)
        r = run(base + ["--device", pocl, "--output", out, "--resume"] + stream + [imgs])
        if n and b"--resume" not in r.stderr:
            fail("--resume did not say what it skipped")
        with open(out, "rb") as f:
            if f.read() != want:
                fail("after signal %d and --resume the file differs from %s" % (sig, ref["PoCL"]))

    # 3. two devices at once == one device
    other = intel or rusticl
    if other:
        out = os.path.join(tmp, "multi.jsonl")
        r = run(base + ["--device", "%s,%s" % (pocl, other), "--output", out] + stream + [imgs])
        err = r.stderr.decode(errors="replace")
        if err.count("img/s while busy") != 2:
            fail("no per-device counts: " + err)
        same_results(by_source(lines(out)), by_source(lines(ref["PoCL"])), 1e-5,
                     "--device %s,%s vs one device" % (pocl, other))
        print("  " + "\n  ".join(l for l in err.splitlines() if "while busy" in l))

    # 4. CSV from a list on stdin; what does not stream is refused
    csv = os.path.join(tmp, "x.csv")
    listed = "".join(os.path.join(imgs, "%03d.png\n" % i) for i in (1, 2, 3))
    run(base + ["--device", pocl, "--list", "-", "--topk", "2", "--output", csv],
        input=listed.encode())
    rows = open(csv).read().splitlines()
    if len(rows) != 5 or not rows[0].startswith("# pagoda_results {") or \
            rows[1] != ("image,source,error,class_1,label_1,probability_1,"
                        "class_2,label_2,probability_2") or \
            not rows[2].startswith("0," + os.path.join(imgs, "001.png") + ",,"):
        fail("CSV: %r" % rows)
    run(base + ["--resume", imgs], ok=(2,))
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    r = run(base + ["--list", fifo], ok=(1,), timeout=20)  # refused at once, not a hang
    if b"FIFO" not in r.stderr:
        fail("a FIFO as --list: " + r.stderr.decode(errors="replace"))
    run(base + ["--save-logits", os.path.join(tmp, "l.npy"), imgs], ok=(2,))

    # 5. MPI: three ranks on this host write the file one process writes
    if mpirun:
        # As root Open MPI wants these; in containers the shared-memory transport's
        # single-copy mode (CMA, ptrace) is often denied: plain copies instead.
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1",
                   OMPI_MCA_btl_vader_single_copy_mechanism="none")
        for schedule in ("static", "dynamic"):
            out = os.path.join(tmp, "mpi-%s.jsonl" % schedule)
            run([mpirun, "--oversubscribe", "-n", "3"] + base +
                ["--device", pocl, "--output", out, "--quiet", "--mpi-schedule", schedule] +
                stream + [imgs], env=env)
            with open(out, "rb") as f:
                if f.read() != want:
                    fail("mpirun -n 3 (%s) wrote another file than one process" % schedule)
            print("  mpirun -n 3, --mpi-schedule %s: the same file" % schedule)
        r = run([mpirun, "--oversubscribe", "-n", "2", pagoda, "bench", "--mpi", "--device",
                 pocl, "--repeat", "1", "--warmup", "0", "--json", "gemm:32,32,32"], env=env)
        ranks = sorted(run["rank"] for run in json.loads(r.stdout)["runs"])
        if ranks != [0, 1]:
            fail("bench --mpi under mpirun -n 2: runs of ranks %s" % ranks)
        print("  bench --mpi: one document, a run per rank")
    subprocess.run(["rm", "-rf", tmp])
    print("cli-stream: OK")


if __name__ == "__main__":
    main()
