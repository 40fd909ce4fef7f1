"""The binding's overhead, measured in one run beside the CLI (the README's numbers).

    python python/examples/overhead.py [--device SEL] [--cli build/apps/pagoda] [--rounds 3]

1. ViT-B/16 forward (batch 1, 224 x 224, seeded random weights): `pagoda bench vit_b16` (the
   C bench: wall time of forward + finish, median) and the same model through
   pagoda.random_model("vit_b16", ctx)(x) (NumPy in, NumPy logits out), in interleaved rounds
   on the same device, so machine noise hits both alike.
2. A 64x64x64 GEMM call: `pagoda bench gemm-nn:64,64,64` (the C call + finish) against
   pagoda.gemm(a, b, c=c) + ctx.finish() from Python, and the cost of one bare ctypes call
   into the library (pgd_tensor_get_numel).
3. Because a separate process and a shared machine add noise of their own, both are also
   measured in one process, interleaved call by call (alternating which goes first): the binding's call against the bare C
   call through ctypes (api.pgd_model_forward, api.pgd_gemm + api.pgd_ctx_finish: no checks,
   no conversions), which is what the binding adds to the C library; for the GEMM also in
   the calling thread's CPU time, which the device's threads and the machine's load leave out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time

import numpy as np

import pagoda
from pagoda._capi import FloatP, GemmArgs, api
from ctypes import byref, c_double, c_void_p


def cli_median(cli: str, device: str, item: str, repeat: int) -> float:
    out = subprocess.run([cli, "bench", "--device", device, "--repeat", str(repeat), "--json",
                          item], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["runs"][0]["results"][0]["median_ms"]


def py_median(fn, ctx, repeat: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
        ctx.finish()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ctx.finish()
        times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="pocl")
    p.add_argument("--cli", default=os.path.join(os.path.dirname(__file__), "..", "..", "build",
                                                 "apps", "pagoda"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--gemm-only", action="store_true", help="skip the ViT-B/16 part")
    a = p.parse_args()
    with pagoda.Context(a.device) as ctx:
        sel = ctx.device["selector"]
        print(f"device: {ctx.device['name']} ({sel})")
        if not a.gemm_only:
            vit(a, ctx, sel)
        gemm(a, ctx, sel)


def vit(a, ctx, sel) -> None:
    model = pagoda.random_model("vit_b16", ctx)
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    cli_v, py_v = [], []
    for r in range(a.rounds):
        cli_v.append(cli_median(a.cli, sel, "vit_b16", a.repeat))
        py_v.append(py_median(lambda: model(x), ctx, a.repeat))
        print(f"round {r + 1}: vit_b16 CLI {cli_v[-1]:.1f} ms, Python {py_v[-1]:.1f} ms")
    c, q = statistics.median(cli_v), statistics.median(py_v)
    print(f"ViT-B/16 batch 1: CLI bench {c:.1f} ms, binding {q:.1f} ms "
          f"({100 * (q / c - 1):+.1f} %)")
    logits = np.empty((1, 1000), np.float32)
    xp, lp, t = x.ctypes.data_as(FloatP), logits.ctypes.data_as(FloatP), c_double()

    def raw_vit():
        err = c_void_p()
        api.pgd_model_forward(model._h, xp, 1, 224, 224, lp, byref(t), byref(err))

    r, w = interleaved(raw_vit, lambda: model(x), a.repeat * a.rounds)
    print(f"ViT-B/16 in one process, interleaved: bare C call {r:.1f} ms, binding {w:.1f} ms "
          f"({100 * (w / r - 1):+.2f} %)")
    model.close()


def gemm(a, ctx, sel) -> None:
    rng = np.random.default_rng(2)
    ta, tb = (ctx.tensor(rng.standard_normal((64, 64), dtype=np.float32)) for _ in range(2))
    tc = ctx.empty((64, 64))
    cli_g, py_g = [], []
    for _ in range(a.rounds):
        cli_g.append(cli_median(a.cli, sel, "gemm-nn:64,64,64", 200))
        py_g.append(py_median(lambda: pagoda.gemm(ta, tb, c=tc), ctx, 200))
    c, q = statistics.median(cli_g), statistics.median(py_g)
    n = 20000
    h = ta._h
    t0 = time.perf_counter()
    for _ in range(n):
        api.pgd_tensor_get_numel(h)
    ffi_us = 1e6 * (time.perf_counter() - t0) / n
    print(f"GEMM 64x64x64 call + finish: CLI bench {1e3 * c:.1f} us, binding {1e3 * q:.1f} us "
          f"({1e3 * (q - c):+.1f} us per call); one bare ctypes call {ffi_us:.2f} us")
    args = GemmArgs(0, 0, 1.0, 0.0, None, 0, None)

    def raw_gemm():
        err = c_void_p()
        api.pgd_gemm(ctx._h, byref(args), ta._h, tb._h, tc._h, byref(err))
        api.pgd_ctx_finish(ctx._h, byref(err))

    def wrapped_gemm():
        pagoda.gemm(ta, tb, c=tc)
        ctx.finish()

    r, w = interleaved(raw_gemm, wrapped_gemm, 3000)
    print(f"GEMM 64x64x64 in one process, interleaved: bare C calls {1e3 * r:.1f} us, "
          f"binding {1e3 * w:.1f} us (the binding adds {1e3 * (w - r):.1f} us per call)")
    # The calling thread's CPU time (time.thread_time) leaves out the device's threads and
    # the time this thread was not scheduled: the binding's host-side cost itself.
    r, w = interleaved(raw_gemm, wrapped_gemm, 3000, clock=time.thread_time)
    print(f"GEMM 64x64x64, calling thread's CPU time per call: bare C calls {1e3 * r:.1f} us, "
          f"binding {1e3 * w:.1f} us (the binding adds {1e3 * (w - r):.1f} us per call)")


def interleaved(f, g, n: int, warmup: int = 3, clock=time.perf_counter):
    """Medians (ms) of f and g run alternately n times each, timed by `clock`."""
    for _ in range(warmup):
        f()
        g()
    tf, tg = [], []
    for i in range(n):
        # f first on even rounds, g first on odd ones: whichever runs second meets a device
        # that has just been busy, which would otherwise favour one of them.
        first, second, t_first, t_second = (f, g, tf, tg) if i % 2 == 0 else (g, f, tg, tf)
        t0 = clock()
        first()
        t1 = clock()
        second()
        t2 = clock()
        t_first.append(1e3 * (t1 - t0))
        t_second.append(1e3 * (t2 - t1))
    return statistics.median(tf), statistics.median(tg)


if __name__ == "__main__":
    main()
