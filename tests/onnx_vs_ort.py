#!/usr/bin/env python3
"""tests/onnx_vs_ort.py PAGODA DEVICE [--tier small|full] [--exporter ts|dynamo|both]
                       [--cache DIR] [MODEL ...]

Exports models with PyTorch (tools/golden/onnx-exports.py: seeded random weights made sensitive,
TorchScript and/or dynamo exporter), runs each file with ONNX Runtime and with `pagoda run` on
DEVICE on the same two-image batch, and checks every output within 1e-4 relative (to the
output's largest magnitude) and, on its own, the input-dependent part — the difference between
the two images' outputs — within 1e-3 relative to its own largest magnitude, which must not be
negligible for the first output (a model that ignores its input cannot test anything). Exit 77 when torch,
torchvision or onnxruntime are missing or DEVICE is absent.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch  # noqa: F401  (the exporter needs it)
except ImportError as e:
    print(f"onnx_vs_ort: {e.name} is not installed (tools/setup makes .deps-torch); skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
TOL = 1e-4
# the difference of two outputs carries their rounding twice over a smaller magnitude
TOL_DIFF = 1e-3


def load_exports():
    spec = importlib.util.spec_from_file_location(
        "onnx_exports", os.path.join(HERE, "..", "tools", "golden", "onnx-exports.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def input_shape(path, batch):
    m = onnx.load(path, load_external_data=False)
    return [d.dim_value if d.dim_value else batch for d in
            m.graph.input[0].type.tensor_type.shape.dim]


def rel(got, ref):
    scale = float(np.abs(ref).max())
    return float(np.abs(got - ref).max()) / (scale if scale > 0 else 1.0), scale


def check(pagoda, device, path, work):
    x = np.random.default_rng(7).standard_normal(input_shape(path, 2)).astype(np.float32)
    xin = os.path.join(work, "x.npy")
    np.save(xin, x)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    refs = sess.run(None, {sess.get_inputs()[0].name: x})
    out = os.path.join(work, "out")
    os.makedirs(out, exist_ok=True)
    r = subprocess.run([pagoda, "run", path, "--device", device, "--input", f"x={xin}",
                        "--output-dir", out], capture_output=True, text=True)
    if r.returncode:
        return [f"pagoda run failed ({r.returncode}): {r.stderr.strip()[-600:]}"]
    bad = []
    for k, (o, ref) in enumerate(zip(sess.get_outputs(), refs)):
        got = np.load(os.path.join(out, re.sub(r"[^A-Za-z0-9._-]", "_", o.name) + ".npy"))
        if got.shape != ref.shape:
            bad.append(f"{o.name}: shape {got.shape}, ONNX Runtime {ref.shape}")
            continue
        e, scale = rel(got, ref)
        d_e, d_scale = rel(got[0] - got[1], ref[0] - ref[1])
        sensitive = d_scale > 1e-3 * scale
        print(f"  {o.name} {list(ref.shape)}: max rel err {e:.2e}, input-dependent part "
              f"{d_e:.2e} (its scale {d_scale:.3g}, the output's {scale:.3g})")
        if not e <= TOL:
            bad.append(f"{o.name}: max rel err {e:.3g} > {TOL}")
        if sensitive and not d_e <= TOL_DIFF:
            bad.append(f"{o.name}: input-dependent part's rel err {d_e:.3g} > {TOL_DIFF}")
        if k == 0 and not sensitive:
            bad.append(f"{o.name}: the output barely depends on the input ({d_scale:.3g}): "
                       "the comparison would prove nothing")
        elif not sensitive:
            print(f"  ({o.name} barely depends on the input: checked by value only)")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pagoda")
    ap.add_argument("device")
    ap.add_argument("--tier", default="small", choices=["small", "full"])
    ap.add_argument("--exporter", default="ts", choices=["ts", "dynamo", "both"])
    ap.add_argument("--cache", default=os.environ.get("PAGODA_ONNX_CACHE", "onnx-models"))
    ap.add_argument("--quick", action="store_true",
                    help="four architectures only (ResNet-50, ViT, Swin, DeiT): for slow devices")
    ap.add_argument("models", nargs="*")
    a = ap.parse_intermixed_args()
    r = subprocess.run([a.pagoda, "devices", "--json"], capture_output=True, text=True)
    if a.device.lower() not in r.stdout.lower() and not re.match(r"^\d+:\d+$", a.device):
        print(f"onnx_vs_ort: no device '{a.device}' here; skipped")
        return 77
    ex = load_exports()
    os.makedirs(a.cache, exist_ok=True)
    failures = 0
    names = a.models or (["resnet50", "vit_b_16", "swin_t", "deit_small"] if a.quick
                         else list(ex.MODELS))
    for name in names:
        for e in (["ts", "dynamo"] if a.exporter == "both" else [a.exporter]):
            path = ex.export(name, a.tier, e, a.cache)
            print(f"{os.path.basename(path)} on {a.device}:", flush=True)
            with tempfile.TemporaryDirectory() as work:
                bad = check(a.pagoda, a.device, path, work)
            for b in bad:
                print(f"  FAIL {b}")
            failures += bool(bad)
    print(f"onnx_vs_ort: {failures} failing model(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
