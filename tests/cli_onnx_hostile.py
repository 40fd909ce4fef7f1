#!/usr/bin/env python3
"""cli_onnx_hostile.py PAGODA — hostile ONNX files are clean errors of `pagoda info` and `run`.

Each model of tools/golden/make-onnx-models.py's hostile set (truncated, random bytes, raw data shorter
and longer than dims x type, a dim of 2^62, dims whose product overflows, 0 x 2^62, a negative
dim, a cycle, a missing input, a value produced twice, external data through '..', at an
absolute path, past its file's end (offset 2^40, or 16 bytes at 60 of 64), of the wrong length
or in a missing file, opset 9, 200 nested subgraphs) must make both commands exit with an error
status (not a signal), print one message naming the file and the words of the rule broken, and
nothing from a sanitizer (when PAGODA is an ASan/UBSan build's). An unknown op loads:
`info --json` lists it as unsupported with its node and opset, and `run` fails naming node, op
and opset; 20 nested subgraphs (under the limit of 64) load. Needs the onnx package
(exit 77 without it) and an OpenCL device (exit 77 without one: the commands open a context
first). Files that load but fail inside the op API (a Gather index out of range, a pool stride
of 0, a MatMul of mismatched shapes) name the file and node too.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SANITIZER_WORDS = ("AddressSanitizer", "LeakSanitizer", "runtime error:", "UndefinedBehavior")


def load_models():
    spec = importlib.util.spec_from_file_location(
        "make_onnx_models", os.path.join(HERE, "..", "tools", "golden", "make-onnx-models.py"))
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except SystemExit:
        print("cli-onnx-hostile: skipped: the onnx package is not installed")
        sys.exit(77)
    return mod


FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("  FAIL: " + msg)


def run(pagoda, args):
    p = subprocess.run([pagoda] + args, capture_output=True, text=True, timeout=120)
    for w in SANITIZER_WORDS:
        check(w not in p.stderr, "%s: sanitizer report:\n%s" % (" ".join(args), p.stderr))
    return p


def write(d, name, m):
    path = os.path.join(d, name + ".onnx")
    with open(path, "wb") as f:
        f.write(m if isinstance(m, bytes) else m.SerializeToString())
    return path


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n")[0])
    pagoda = sys.argv[1]
    mods = load_models()
    if subprocess.run([pagoda, "devices"], capture_output=True).returncode != 0:
        print("cli-onnx-hostile: skipped: no OpenCL device")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "data.bin"), "wb") as f:
            f.write(bytes(64))  # the external data file of the ext-* models
        for name, (m, words) in mods.hostile_models().items():
            path = write(d, name, m)
            for cmd in (["info", "--no-run", path], ["run", path]):
                p = run(pagoda, cmd)
                print("%-20s %-4s -> %d: %s" % (name, cmd[0], p.returncode, p.stderr.strip()))
                check(0 < p.returncode < 128, "%s: %s exit status %d" % (name, cmd[0],
                                                                         p.returncode))
                check(path in p.stderr, "%s: %s: the message does not name the file" %
                      (name, cmd[0]))
                for w in words:
                    check(w in p.stderr, "%s: %s: the message lacks %r" % (name, cmd[0], w))
                check(len(p.stderr.strip().splitlines()) == 1,
                      "%s: %s: want one line on stderr" % (name, cmd[0]))

        # an op Pagoda lacks: loads, reported; the run names node, op and opset
        from onnx import helper
        m = mods.model([helper.make_node("NoSuchOp", ["X"], ["Y"], name="mystery")],
                       [mods.vi("X", [2])], [mods.vi("Y", [2])])
        path = write(d, "unknown-op", m)
        p = run(pagoda, ["info", "--json", path])
        check(p.returncode == 0, "unknown op: info exit status %d: %s" % (p.returncode, p.stderr))
        if p.returncode == 0:
            rep = json.loads(p.stdout)
            check({"node": "mystery", "op": "NoSuchOp", "reason": "not implemented",
                   "opset": mods.OPSET} in rep.get("unsupported", []),
                  "unknown op: info --json does not list it: %s" % rep.get("unsupported"))
        p = run(pagoda, ["run", path])
        print("%-20s run  -> %d: %s" % ("unknown-op", p.returncode, p.stderr.strip()))
        check(0 < p.returncode < 128, "unknown op: run exit status %d" % p.returncode)
        for w in (path, "'mystery'", "NoSuchOp", "opset %d" % mods.OPSET):
            check(w in p.stderr, "unknown op: run's message lacks %r" % w)

        # files that load but fail inside the op API on the device: the message still names
        # the file and node (the op's own words follow)
        import numpy as np
        n = helper.make_node
        dev = {
            "gather-oob": ([n("Gather", ["X", "I"], ["Y"], name="g")], [mods.vi("X", [4])],
                           [mods.ints("I", [10])], ["node 'g' (Gather", "indices[0] = 10"]),
            "avgpool-stride0": ([n("AveragePool", ["X"], ["Y"], name="p", kernel_shape=[2, 2],
                                   strides=[0, 0])], [mods.vi("X", [1, 3, 8, 8])], [],
                                ["node 'p' (AveragePool", "stride 0x0"]),
            "matmul-mismatch": ([n("MatMul", ["X", "W"], ["Y"], name="m")], [mods.vi("X", [2, 3])],
                                [mods.const("W", np.ones((4, 5), np.float32))],
                                ["node 'm' (MatMul", "(3) must equal"]),
            "flatten-axis-9": ([n("Flatten", ["X"], ["Y"], name="f", axis=9)],
                               [mods.vi("X", [2, 3])], [],
                               ["node 'f' (Flatten", "axis 9 out of range for 2 dims"]),
        }
        for name, (nodes, ins, inits, words) in dev.items():
            path = write(d, name, mods.model(nodes, ins, [mods.vi("Y", None)], inits))
            p = run(pagoda, ["run", path])
            print("%-20s run  -> %d: %s" % (name, p.returncode, p.stderr.strip()))
            check(0 < p.returncode < 128, "%s: run exit status %d" % (name, p.returncode))
            for w in [path] + words:
                check(w in p.stderr, "%s: run's message lacks %r" % (name, w))

        # nesting under the limit loads (the guard refuses only what is too deep)
        path = write(d, "deep-ok-20", mods.nested_bytes(20))
        p = run(pagoda, ["info", "--no-run", "--json", path])
        check(p.returncode == 0, "20 nested subgraphs: exit status %d: %s" % (p.returncode,
                                                                             p.stderr))
        # every valid seed model loads and reports
        for name, m in mods.valid_models().items():
            sub = os.path.join(d, name)
            os.mkdir(sub)
            path = write(sub, "model", m)
            p = run(pagoda, ["info", "--no-run", "--json", path])
            check(p.returncode == 0, "%s: info exit status %d: %s" % (name, p.returncode,
                                                                       p.stderr))
    if FAILS:
        print("cli-onnx-hostile: %d failures" % len(FAILS), file=sys.stderr)
        sys.exit(1)
    print("cli-onnx-hostile: ok")


if __name__ == "__main__":
    main()
