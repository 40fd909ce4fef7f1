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
    ahead through `exec` from a shell).
Exit 0 when all hold, 1 otherwise; 77 (skipped) without an OpenCL device.
"""
import os
import stat
import subprocess
import sys
import tempfile

PAGODA, DATA = sys.argv[1], sys.argv[2]
WEIGHTS = os.path.join(DATA, "vit-timm.safetensors")
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

    if not failures:
        subprocess.run(["rm", "-rf", base])
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
