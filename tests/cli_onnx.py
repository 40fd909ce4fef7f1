#!/usr/bin/env python3
"""tests/cli_onnx.py PAGODA WORKDIR IMAGE — pagoda run / info / bench / classify on ONNX files.

Builds small models with the onnx package (no PyTorch): a CNN classifier (Conv + BatchNorm +
Relu + residual Add + MaxPool + GlobalAveragePool + Flatten + Gemm), a transformer block
(MatMul + Add + erf-GELU + LayerNormalization + MatMul-Mul-Softmax-MatMul attention with
Reshape/Transpose views), a zero Pad (a view) before a depthwise Conv and a Softmax over short
rows, and a model with an op Pagoda lacks. Checks that `pagoda run` equals a
NumPy float64 evaluation of the same graph (1e-4 relative), that `pagoda info --json` reports the
fusions and the unsupported node by name, that `run` refuses it naming node, op and opset,
that `pagoda bench FILE:B --json` records the item, that `pagoda classify --weights FILE`
classifies an image through the ONNX family, and that bad input (a truncated file, a missing
input file, an integer input) is a clean error with a non-zero exit. Exit 77 without onnx.
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    print("cli_onnx: numpy and onnx are needed (tools/setup's py-venv); skipped")
    sys.exit(77)

PAGODA, WORK, IMAGE = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(3)
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(*args):
    return subprocess.run([PAGODA, *args], capture_output=True, text=True)


def init(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def save(nodes, inits, inputs, outputs, name, opset=17):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(m, path)
    return path


# ---- a CNN classifier ---------------------------------------------------------------------
C = 8
w1 = rng.standard_normal((C, 3, 3, 3)) * 0.3
b1 = rng.standard_normal(C) * 0.1
bn = [rng.uniform(0.5, 1.5, C), rng.standard_normal(C) * 0.1, rng.standard_normal(C) * 0.1,
      rng.uniform(0.5, 1.5, C)]
w2 = rng.standard_normal((C, C, 3, 3)) * 0.2
fc = rng.standard_normal((10, C)) * 0.5
fcb = rng.standard_normal(10) * 0.1
cnn = save(
    [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
     helper.make_node("BatchNormalization", ["c1", "s", "bb", "m", "v"], ["n1"]),
     helper.make_node("Relu", ["n1"], ["r1"]),
     helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
     helper.make_node("Add", ["c2", "r1"], ["a2"]),
     helper.make_node("Relu", ["a2"], ["r2"]),
     helper.make_node("MaxPool", ["r2"], ["p"], kernel_shape=[3, 3], strides=[2, 2],
                      pads=[1, 1, 1, 1]),
     helper.make_node("GlobalAveragePool", ["p"], ["g"]),
     helper.make_node("Flatten", ["g"], ["f"]),
     helper.make_node("Gemm", ["f", "fc", "fcb"], ["logits"], transB=1)],
    [init("w1", w1), init("b1", b1), init("s", bn[0]), init("bb", bn[1]), init("m", bn[2]),
     init("v", bn[3]), init("w2", w2), init("fc", fc), init("fcb", fcb)],
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 224, 224])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])], "cnn")


def conv(x, w, b, stride, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return y + (0 if b is None else b[None, :, None, None])


def cnn_ref(x):
    c1 = conv(x, w1, b1, 2, 1)
    n1 = (c1 - bn[2][None, :, None, None]) / np.sqrt(bn[3][None, :, None, None] + 1e-5) \
        * bn[0][None, :, None, None] + bn[1][None, :, None, None]
    r1 = np.maximum(n1, 0)
    r2 = np.maximum(conv(r1, w2, None, 1, 1) + r1, 0)
    rp = np.pad(r2, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    oh = (r2.shape[2] + 2 - 3) // 2 + 1
    p = np.full((x.shape[0], C, oh, oh), -np.inf)
    for i in range(3):
        for j in range(3):
            p = np.maximum(p, rp[:, :, i:i + 2 * oh:2, j:j + 2 * oh:2])
    return p.mean(axis=(2, 3)) @ fc.T + fcb


def compare(path, ref_fn, x, name):
    np.save(os.path.join(WORK, "x.npy"), x.astype(np.float32))
    out = os.path.join(WORK, "out-" + name)
    os.makedirs(out, exist_ok=True)
    r = run("run", path, "--input", "x=" + os.path.join(WORK, "x.npy"), "--output-dir", out)
    check(r.returncode == 0, f"pagoda run {name} exits 0 ({r.stderr.strip()[-300:]})")
    if r.returncode:
        return
    got = np.load(os.path.join(out, os.listdir(out)[0]))
    ref = ref_fn(x.astype(np.float64))
    err = np.abs(got - ref).max() / np.abs(ref).max()
    check(got.shape == ref.shape and err < 1e-4,
          f"pagoda run {name}: {got.shape} within 1e-4 of float64 NumPy (max rel err {err:.2e})")


compare(cnn, cnn_ref, rng.standard_normal((2, 3, 224, 224)), "cnn")

# ---- a transformer block ------------------------------------------------------------------
T, D, H = 17, 32, 4
wqkv = rng.standard_normal((D, 3 * D)) * 0.3
bqkv = rng.standard_normal(3 * D) * 0.1
w_o = rng.standard_normal((D, D)) * 0.2
lnw, lnb = rng.uniform(0.5, 1.5, D), rng.standard_normal(D) * 0.1
wf = rng.standard_normal((D, 2 * D)) * 0.2
shape4 = np.array([0, T, 3, H, D // H], np.int64)
block = save(
    [helper.make_node("LayerNormalization", ["x", "lnw", "lnb"], ["ln"], axis=-1),
     helper.make_node("MatMul", ["ln", "wqkv"], ["qkv0"]),
     helper.make_node("Add", ["qkv0", "bqkv"], ["qkv"]),
     helper.make_node("Reshape", ["qkv", "shape4"], ["qkv5"]),
     helper.make_node("Transpose", ["qkv5"], ["qkvt"], perm=[2, 0, 3, 1, 4]),
     helper.make_node("Split", ["qkvt"], ["q1", "k1", "v1"], axis=0, num_outputs=3),
     helper.make_node("Squeeze", ["q1", "ax0"], ["q"]),
     helper.make_node("Squeeze", ["k1", "ax0"], ["k"]),
     helper.make_node("Squeeze", ["v1", "ax0"], ["v"]),
     helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
     helper.make_node("MatMul", ["q", "kt"], ["s0"]),
     helper.make_node("Mul", ["s0", "scale"], ["s"]),
     helper.make_node("Softmax", ["s"], ["p"], axis=-1),
     helper.make_node("MatMul", ["p", "v"], ["o"]),
     helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
     helper.make_node("Reshape", ["ot", "shape3"], ["o3"]),
     helper.make_node("MatMul", ["o3", "w_o"], ["proj"]),
     helper.make_node("Add", ["proj", "x"], ["h"]),
     helper.make_node("MatMul", ["h", "wf"], ["f0"]),
     helper.make_node("Div", ["f0", "sqrt2"], ["f1"]),
     helper.make_node("Erf", ["f1"], ["f2"]),
     helper.make_node("Add", ["f2", "one"], ["f3"]),
     helper.make_node("Mul", ["f0", "f3"], ["f4"]),
     helper.make_node("Mul", ["f4", "half"], ["y"])],
    [init("lnw", lnw), init("lnb", lnb), init("wqkv", wqkv), init("bqkv", bqkv),
     numpy_helper.from_array(shape4, "shape4"),
     numpy_helper.from_array(np.array([0], np.int64), "ax0"),
     init("scale", 4.0 / np.sqrt(D // H)), init("w_o", w_o),
     numpy_helper.from_array(np.array([0, T, D], np.int64), "shape3"), init("wf", wf),
     init("sqrt2", np.sqrt(2.0)), init("one", 1.0), init("half", 0.5)],
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", T, D])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", T, 2 * D])], "block",
    opset=18)


def block_ref(x):
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    ln = (x - mu) / np.sqrt(var + 1e-5) * lnw + lnb
    qkv = (ln @ wqkv + bqkv).reshape(x.shape[0], T, 3, H, D // H).transpose(2, 0, 3, 1, 4)
    s = qkv[0] @ qkv[1].transpose(0, 1, 3, 2) * (4.0 / np.sqrt(D // H))
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = (p @ qkv[2]).transpose(0, 2, 1, 3).reshape(x.shape[0], T, D)
    h = o @ w_o + x
    f = h @ wf
    from math import erf
    return 0.5 * f * (1 + np.vectorize(erf)(f / np.sqrt(2)))


compare(block, block_ref, rng.standard_normal((3, T, D)), "block")

# ---- a zero Pad (a view), a depthwise convolution, a short-row Softmax ---------------------
DC = 24
wdw = rng.standard_normal((DC, 1, 5, 5)) * 0.3
bdw = rng.standard_normal(DC) * 0.1
dwm = save([
    helper.make_node("Pad", ["x", "zpads"], ["p"], mode="constant"),
    helper.make_node("Conv", ["p", "wdw", "bdw"], ["c"], group=DC, kernel_shape=[5, 5],
                     pads=[2, 2, 2, 2]),
    helper.make_node("Relu", ["c"], ["r"]),
    helper.make_node("Softmax", ["r"], ["y"], axis=-1)],
    [init("wdw", wdw), init("bdw", bdw),
     numpy_helper.from_array(np.zeros(8, np.int64), "zpads")],
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, DC, 13, 11])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, DC, 13, 11])], "dwpad")


def dwpad_ref(x):
    xp = np.pad(x, ((0, 0), (0, 0), (2, 2), (2, 2)))
    c = np.zeros_like(x)
    for ky in range(5):
        for kx in range(5):
            c += xp[:, :, ky:ky + 13, kx:kx + 11] * wdw[None, :, 0, ky, kx, None, None]
    r = np.maximum(c + bdw[None, :, None, None], 0)
    e = np.exp(r - r.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


compare(dwm, dwpad_ref, rng.standard_normal((1, DC, 13, 11)), "dwpad")
prof = subprocess.run([PAGODA, "run", dwm], capture_output=True, text=True,
                      env=dict(os.environ, PAGODA_PROFILE="1"))
log = prof.stdout + prof.stderr
check(prof.returncode == 0 and "conv_depthwise" in log and "layout_pad" not in log,
      "dwpad: the depthwise kernel runs and the zero Pad launches nothing (PAGODA_PROFILE)")

# ---- info, bench, classify ----------------------------------------------------------------
r = run("info", block, "--json")
rep = json.loads(r.stdout) if r.returncode == 0 else {}
check(rep.get("fusions", {}).get("attention") == 1 and rep.get("fusions", {}).get("linear", 0) >= 2,
      f"pagoda info: the block's attention and linear layers fuse ({rep.get('fusions')})")
check(rep.get("run", {}).get("gflop", 0) > 0, "pagoda info: the pass's FLOPs are reported")
r = run("info", cnn)
check(r.returncode == 0 and "fused: " in r.stdout and "conv" in r.stdout,
      "pagoda info (text): fused convolutions listed")

bad_op = save([helper.make_node("Relu", ["x"], ["a"], name="ok_relu"),
               helper.make_node("Hardmax", ["a"], ["y"], name="the_hardmax")], [],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])], "unsupported")
r = run("info", bad_op, "--json")
un = json.loads(r.stdout).get("unsupported", []) if r.returncode == 0 else []
check(any(u["node"] == "the_hardmax" and u["op"] == "Hardmax" for u in un),
      "pagoda info names the unsupported node and op")
r = run("run", bad_op)
check(r.returncode == 1 and "the_hardmax" in r.stderr and "Hardmax" in r.stderr and
      "opset" in r.stderr, f"pagoda run refuses it naming node, op and opset ({r.stderr.strip()})")

r = run("bench", cnn + ":2", "--repeat", "2", "--json")
res = json.loads(r.stdout)["runs"][0]["results"] if r.returncode == 0 else []
check(len(res) == 1 and res[0]["name"] == "cnn.onnx:2" and res[0]["median_ms"] > 0 and
      res[0]["flops"] > 0, "pagoda bench FILE:B records the item with its FLOPs")

r = run("classify", "--weights", cnn, "--json", IMAGE)
doc = json.loads(r.stdout) if r.returncode == 0 else {}
check(r.returncode == 0 and "onnx" in json.dumps(doc),
      f"pagoda classify --weights FILE.onnx runs the ONNX family ({r.stderr.strip()[-200:]})")

# ---- bad input ----------------------------------------------------------------------------
data = open(cnn, "rb").read()
trunc = os.path.join(WORK, "truncated.onnx")
open(trunc, "wb").write(data[: len(data) // 2])
r = run("info", trunc)
check(r.returncode == 1 and "truncated.onnx" in r.stderr, "a truncated file is a clean error")
r = run("run", cnn, "--input", "x=" + os.path.join(WORK, "missing.npy"))
check(r.returncode == 1 and "missing.npy" in r.stderr, "a missing input file is named")
ints = save([helper.make_node("Identity", ["x"], ["y"])], [],
            [helper.make_tensor_value_info("x", TensorProto.INT64, [3])],
            [helper.make_tensor_value_info("y", TensorProto.INT64, [3])], "ints")
r = run("run", ints)
check(r.returncode != 0 and "'x'" in r.stderr, "an integer input is refused naming it")

print(f"cli_onnx: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
