"""python -m pagoda devices|classify|bench — the CLI's commands for people who only have pip."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import List, Optional


def _devices(a: argparse.Namespace) -> int:
    import pagoda

    devs = pagoda.devices()
    if a.json:
        print(json.dumps(devs, indent=2))
        return 0
    for d in devs:
        mark = "*" if d["default"] else " "
        print(f"{mark} {d['selector']:5} {d['type']:4} {d['name']} ({d['platform']}, "
              f"{d['compute_units']} CUs, {d['global_mem_bytes'] >> 20} MiB)")
    return 0


def _default_image() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    for p in (os.path.join(here, "chelsea.jpg"),
              os.path.join(here, "..", "..", "apps", "data", "chelsea.jpg")):
        if os.path.exists(p):
            return p
    raise SystemExit("pagoda: error: give an image (no sample image found)")


def _classify(a: argparse.Namespace) -> int:
    import pagoda

    images = a.images or [_default_image()]
    with pagoda.Context(a.device) as ctx:
        if a.weights:
            model = pagoda.load(a.weights, ctx)
        else:
            model = pagoda.random_model(a.random, ctx)
            print(f"pagoda: note: seeded random weights ({a.random}): the classes printed are "
                  f"meaningless", file=sys.stderr)
        x = model.preprocess(images)
        res = model.classify(x, topk=a.topk)
        if a.json:
            print(json.dumps({"model": model.description, "device": ctx.device["name"],
                              "results": [{"image": str(i), "top": r}
                                          for i, r in zip(images, res)]}, indent=2))
            return 0
        for img, r in zip(images, res):
            print(img)
            for c in r:
                print(f"  {100 * c['probability']:6.2f}%  {c['label']} ({c['index']})")
        print(f"{len(images)} image(s) on {ctx.device['name']}: {model.last_ms:.1f} ms")
    return 0


class _UsageError(Exception):
    """A bad command line found after argparse (exit status 2, as argparse's own)."""


def _bench_item(spec: str) -> tuple:
    """NAME[:B] as (name, batch); _UsageError naming the item when B is not a whole number
    >= 1 (the model name itself is checked by random_model, with the list of names)."""
    name, colon, b = spec.partition(":")
    if not colon:
        return name, 1
    if not b.isdigit() or not 1 <= int(b) < 2**31:
        raise _UsageError(
            f"bench: '{spec}': an item is MODEL[:B] with B a whole number of images >= 1, "
            f"not '{b}' (python -m pagoda bench times whole models: vit_b16, resnet50, ...; "
            f"GEMM and the other op benchmarks are the CLI's `pagoda bench`)")
    return name, int(b)


def _bench(a: argparse.Namespace) -> int:
    import numpy as np

    import pagoda

    items = [_bench_item(spec) for spec in a.items]  # all checked before any work
    results = []
    with pagoda.Context(a.device) as ctx:
        for name, batch in items:
            model = pagoda.random_model(name, ctx)
            h, w = model.input_size
            x = np.random.default_rng(1).uniform(-1, 1, (batch, 3, h, w)).astype(np.float32)
            for _ in range(a.warmup):
                model(x)
            times = []
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                model(x)
                times.append(1e3 * (time.perf_counter() - t0))
            times.sort()
            r = {"name": f"{name}:{batch}", "device": ctx.device["name"],
                 "median_ms": times[len(times) // 2], "min_ms": times[0], "repeat": a.repeat}
            results.append(r)
            model.close()
            if not a.json:
                print(f"{r['name']:16} median {r['median_ms']:9.2f} ms  min {r['min_ms']:9.2f} ms"
                      f"  ({r['device']})")
    if a.json:
        print(json.dumps(results, indent=2))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pagoda", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("devices", help="list OpenCL devices")
    d.add_argument("--json", action="store_true")
    c = sub.add_parser("classify", help="classify images with a ViT or ResNet checkpoint")
    c.add_argument("images", nargs="*")
    c.add_argument("--weights", help=".safetensors checkpoint (family detected)")
    c.add_argument("--random", default="vit_tiny",
                   help="without --weights: seeded random model (vit_b16, resnet50, ...)")
    c.add_argument("--device")
    c.add_argument("--topk", type=int, default=5)
    c.add_argument("--json", action="store_true")
    b = sub.add_parser("bench", help="time model forwards through the binding")
    b.add_argument("items", nargs="*", default=["vit_b16"],
                   help="vit_ti16|vit_s16|vit_b16|vit_tiny|resnet50|resnet50-nl[:B]")
    b.add_argument("--device")
    b.add_argument("--repeat", type=int, default=10)
    b.add_argument("--warmup", type=int, default=2)
    b.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    import pagoda

    try:
        return {"devices": _devices, "classify": _classify, "bench": _bench}[a.cmd](a)
    except _UsageError as e:
        print(f"python -m pagoda: error: {e}", file=sys.stderr)
        return 2
    except pagoda.Error as e:
        print(f"pagoda: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
