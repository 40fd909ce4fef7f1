"""Times one model on every OpenCL device and plots the result (a notebook-style script).

    python python/examples/compare_devices.py                       # seeded ViT-Ti/16
    python python/examples/compare_devices.py --model resnet50 --batch 2
    python python/examples/compare_devices.py --weights vit_b16_timm.safetensors --plot out.png

Each device gets its own context; the model is loaded there, run once untimed (kernel builds,
first-touch), then timed `--repeat` times. Software rasterisers (Mesa llvmpipe) are slow by
design and left out unless --all. The table is printed; with matplotlib installed (pip install
matplotlib) a bar chart of the median times is written to --plot.
"""

# %% setup
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import pagoda

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--model", default="vit_ti16",
               help="a seeded random model: vit_ti16, vit_s16, vit_b16, vit_tiny, resnet50, "
                    "resnet50-nl (ignored with --weights)")
p.add_argument("--weights", help="a .safetensors checkpoint instead (ViT or ResNet)")
p.add_argument("--batch", type=int, default=1)
p.add_argument("--repeat", type=int, default=5)
p.add_argument("--all", action="store_true", help="include software rasterisers (llvmpipe)")
p.add_argument("--plot", default="compare_devices.png", help="bar chart file (needs matplotlib)")
args = p.parse_args()

# %% time the model on each device
rows = []
for dev in pagoda.devices():
    if dev["software_rasteriser"] and not args.all:
        print(f"skipping {dev['name']} (software rasteriser; --all includes it)")
        continue
    with pagoda.Context(dev["selector"]) as ctx:
        model = (pagoda.load(args.weights, ctx) if args.weights
                 else pagoda.random_model(args.model, ctx))
        h, w = model.input_size
        x = np.random.default_rng(0).uniform(-1, 1, (args.batch, 3, h, w)).astype(np.float32)
        t0 = time.perf_counter()
        model(x)
        first = 1e3 * (time.perf_counter() - t0)
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            model(x)
            times.append(1e3 * (time.perf_counter() - t0))
        rows.append((f"{dev['name']} ({dev['selector']})", statistics.median(times), min(times),
                     first))
        print(f"{rows[-1][0]:60} median {rows[-1][1]:9.1f} ms  min {rows[-1][2]:9.1f} ms  "
              f"first {first:9.1f} ms")

# %% plot (matplotlib is optional)
try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("matplotlib is not installed (pip install matplotlib): no plot")
else:
    if rows:
        fig, ax = plt.subplots(figsize=(8, 1 + 0.6 * len(rows)))
        ax.barh([r[0] for r in rows], [r[1] for r in rows], color="#4c72b0")
        ax.set_xlabel("median forward time (ms), lower is better")
        what = args.weights or f"{args.model} (seeded weights)"
        ax.set_title(f"{what}, batch {args.batch}")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)
        print(f"plot written to {args.plot}")
