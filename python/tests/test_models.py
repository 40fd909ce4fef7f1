"""pagoda.load on the golden checkpoints of tests/data (made from PyTorch by
tools/golden/make-golden*.py) against their stored logits, on every device; classify with paths, PIL
images and arrays against the CLI; attention maps, affinity rows; hostile files and inputs raise."""

from __future__ import annotations

import json
import os
import struct
import subprocess

import numpy as np
import pytest

import pagoda
from conftest import DATA, allclose, rows_close, slow_device

VIT_GOLDEN = ["vit-timm", "vit-hf", "vit-torchvision", "vit-deit", "vit-timm-24x40",
              "vit-hf-40x32", "vit-torchvision-40x40", "vit-deit-40x24"]
NL_GOLDEN = ["basic-embedded-gaussian", "basic-gaussian-sub", "basic-dot-product",
             "basic-concatenation-sub", "bottleneck"]
# On llvmpipe (a software rasteriser, slow by design) a subset: the C suites run every golden
# there already; here each family and path of the binding is covered once.
SWIN_GOLDEN = ["swin-torchvision", "swin-timm", "swin-timm-old", "swin-hf4", "swin-hf5",
               "swin-torchvision-48x44", "swin-timm-48x44", "swin-hf5-48x44"]
SLOW_SUBSET = {"vit-timm", "vit-hf", "vit-torchvision-40x40", "vit-deit-40x24",
               "basic-embedded-gaussian", "basic-concatenation-sub", "swin-timm",
               "swin-hf5-48x44"}


def subset(ctx, name):
    if slow_device(ctx) and name not in SLOW_SUBSET:
        pytest.skip("software rasteriser: covered by the C suites and the subset")


def meta(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)).get("__metadata__", {})


@pytest.mark.parametrize("name", VIT_GOLDEN)
def test_vit_golden(ctx, name):
    subset(ctx, name)
    spec = json.load(open(os.path.join(DATA, name + ".json")))
    weights = os.path.join(DATA, spec.get("weights", name + ".safetensors"))
    x = np.fromfile(os.path.join(DATA, name + "-input.bin"), np.float32).reshape(spec["input"])
    want = np.fromfile(os.path.join(DATA, name + "-logits.bin"), np.float32)
    m = pagoda.load(weights, ctx)
    assert m.family == "vit" and m.naming == spec["family"].replace("deit", "timm")
    assert m.classes == spec["classes"] and m.heads == spec["heads"]
    got = m(x)
    assert got.shape == (spec["input"][0], spec["classes"])
    allclose(got, want.reshape(got.shape), 1e-4, 1e-5, f"{name} logits")
    rows_close(got, want.reshape(got.shape), 1e-3, f"{name} logits")
    last, roll = m.attention_maps(x)
    B, _, H, W = spec["input"]
    assert last.shape == roll.shape == (B, H // m.patch, W // m.patch)
    assert np.isfinite(last).all() and (last >= 0).all() and (last.sum(axis=(1, 2)) <= 1 + 1e-5).all()
    assert np.isfinite(roll).all() and (roll >= 0).all()
    with pytest.raises(pagoda.UnsupportedError):
        m.affinity(x)
    m.close()


@pytest.mark.parametrize("name", SWIN_GOLDEN)
def test_swin_golden(ctx, name):
    subset(ctx, name)
    spec = json.load(open(os.path.join(DATA, name + ".json")))
    weights = os.path.join(DATA, spec.get("weights", name + ".safetensors"))
    x = np.fromfile(os.path.join(DATA, name + "-input.bin"), np.float32).reshape(spec["input"])
    want = np.fromfile(os.path.join(DATA, name + "-logits.bin"), np.float32)
    m = pagoda.load(weights, ctx)
    assert m.family == "swin" and m.classes == spec["classes"]
    got = m(x)
    allclose(got, want.reshape(got.shape), 1e-4, 1e-5, f"{name} logits")
    if len(got) > 1:
        rows_close(got, want.reshape(got.shape), 1e-3, f"{name} logits")
    with pytest.raises(pagoda.UnsupportedError):
        m.attention_maps(x)
    m.close()


def test_headless_vit_features(ctx):
    x = np.fromfile(os.path.join(DATA, "dino-tiny-input.bin"), np.float32).reshape(2, 3, 32, 32)
    m = pagoda.load(os.path.join(DATA, "dino-tiny.safetensors"), ctx)
    assert m.headless and m.family == "vit"
    for pool in ("cls", "mean"):
        want = np.fromfile(os.path.join(DATA, f"dino-tiny-{pool}.bin"), np.float32)
        got = m.features(x, pool=pool)
        allclose(got, want.reshape(got.shape), 1e-4, 1e-5, f"headless ViT, {pool} pooling")
        rows_close(got, want.reshape(got.shape), 1e-3, f"headless ViT, {pool} pooling")
    with pytest.raises(pagoda.InvalidArgumentError):
        m.features(x, pool="max")
    m.close()
    vit = pagoda.load(os.path.join(DATA, "vit-timm.safetensors"), ctx)
    with pytest.raises(pagoda.UnsupportedError):
        vit.features(np.zeros((1, 3, 32, 32)))


def test_mixer_golden(ctx):
    spec = json.load(open(os.path.join(DATA, "mixer-tiny.json")))
    x = np.fromfile(os.path.join(DATA, "mixer-tiny-input.bin"), np.float32).reshape(spec["input"])
    want = np.fromfile(os.path.join(DATA, "mixer-tiny-logits.bin"), np.float32)
    m = pagoda.load(os.path.join(DATA, "mixer-tiny.safetensors"), ctx)
    assert m.family == "mixer" and m.classes == spec["classes"] and m.depth == spec["depth"]
    assert m.input_size == tuple(spec["input"][2:])
    got = m(x)
    allclose(got, want.reshape(got.shape), 1e-4, 1e-5, "mixer-tiny logits")
    rows_close(got, want.reshape(got.shape), 1e-3, "mixer-tiny logits")
    with pytest.raises(pagoda.UnsupportedError):
        m.attention_maps(x)
    with pytest.raises(pagoda.Error):
        m(np.zeros((1, 3, 32, 32)))  # the token MLPs fix the grid
    m.close()


@pytest.mark.parametrize("name", NL_GOLDEN)
def test_nonlocal_golden(ctx, name):
    subset(ctx, name)
    path = os.path.join(DATA, f"nl-{name}.safetensors")
    x = np.load(os.path.join(DATA, f"nl-{name}-input.npy"))
    want = np.load(os.path.join(DATA, f"nl-{name}-logits.npy"))
    want_aff = np.load(os.path.join(DATA, f"nl-{name}-affinity.npy"))
    m = pagoda.load(path, ctx)
    assert m.family == "resnet" and m.nonlocal_blocks >= 1 and m.has_affinity
    got = m(x)
    allclose(got, want, 0, 1e-4 * np.abs(want).max(), f"nl-{name} logits")
    rows_close(got, want, 1e-3, f"nl-{name} logits")
    # The golden's query is a position on the block's input grid; "sub" halves the key grid.
    qy, qx = (int(v) for v in meta(path)["golden.query"].split(","))
    B, _, H, W = x.shape
    row = m.affinity(x, query=(0.5, 0.5))
    gh, gw = row.shape[1:]
    f = 2 if meta(path).get("nonlocal.subsample") == "true" else 1
    aff = m.affinity(x, query=((qx + 0.5) / (f * gw), (qy + 0.5) / (f * gh)))
    assert m.last_query == (qy, qx)
    allclose(aff.reshape(B, -1), want_aff, 0, 1e-4 * np.abs(want_aff).max(), f"nl-{name} affinity")
    with pytest.raises(pagoda.UnsupportedError):
        m.attention_maps(x)
    m.close()


def test_load_options_and_random(any_ctx):
    path = os.path.join(DATA, "nl-bottleneck.safetensors")
    m = pagoda.load(path, any_ctx, nonlocal_mode="gaussian")
    assert "gaussian" in m.description
    with pytest.raises(pagoda.InvalidArgumentError):
        pagoda.load(path, any_ctx, nonlocal_mode="fast")
    with pytest.raises(pagoda.Error, match="num_heads 2"):
        pagoda.load(os.path.join(DATA, "vit-hf.safetensors"), any_ctx, heads=4)
    r = pagoda.random_model("vit_tiny", any_ctx)
    assert r.classes == 10 and r.input_size == (32, 32)
    assert r(np.zeros((1, 3, 32, 32))).shape == (1, 10)
    r = pagoda.random_model("mixer_tiny", any_ctx)
    assert r.family == "mixer" and r(np.zeros((1, 3, 32, 32))).shape == (1, 10)
    r = pagoda.random_model("swin_tiny", any_ctx)
    assert r.family == "swin" and r(np.zeros((1, 3, 40, 40))).shape == (1, 10)
    with pytest.raises(pagoda.NotFoundError, match="vit_b16"):
        pagoda.random_model("gpt", any_ctx)


def test_classify_inputs_match_cli(any_ctx):
    weights = os.path.join(DATA, "vit-timm.safetensors")
    img = os.path.join(DATA, "grad_300x200.png")
    m = pagoda.load(weights, any_ctx)
    by_path = m.classify([img], topk=3)[0]
    with open(img, "rb") as f:
        by_bytes = m.classify(f.read(), topk=3)[0]
    assert by_path == by_bytes
    want = np.fromfile(os.path.join(DATA, "grad_300x200.timm.f32"), np.float32)
    # every 7th sample of the timm preset, as Pillow + timm made it (tests/test_image.c)
    allclose(pagoda.preprocess(img, "timm").ravel()[::7][: want.size], want, 0, 1e-5,
             "timm preset vs Pillow")
    PIL = pytest.importorskip("PIL.Image")
    pil = PIL.open(img)
    by_pil = m.classify(pil, topk=3)[0]
    by_array = m.classify(np.asarray(pil.convert("RGB")), topk=3)[0]
    assert [c["index"] for c in by_pil] == [c["index"] for c in by_path]
    for a, b in zip(by_pil + by_array, by_path + by_path):
        assert abs(a["probability"] - b["probability"]) < 1e-6
    cli = os.environ.get("PAGODA_CLI")
    if cli:
        env = dict(os.environ, PAGODA_DEVICE=any_ctx.device["selector"])
        out = subprocess.run([cli, "vit", "--weights", weights, "--json", "--topk", "3", img],
                             capture_output=True, text=True, check=True, env=env)
        top = json.loads(out.stdout)["results"][0]["top"]
        assert [t["index"] for t in top] == [c["index"] for c in by_path]
        assert [t["label"] for t in top] == [c["label"] for c in by_path]
        for t, c in zip(top, by_path):
            assert abs(t["probability"] - c["probability"]) < 1e-6


HOSTILE = ["vit-hf.json", "fuzz-regress/model_config-huge-width.safetensors",
           "fuzz-regress/model_config-zero-classes.safetensors",
           "fuzz-regress/model_config-zero-width.safetensors", "bmp-truncated-half.bmp",
           "no-such-file.safetensors"]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_files_raise(any_ctx, name):
    with pytest.raises(pagoda.Error):
        pagoda.load(os.path.join(DATA, name), any_ctx)


def test_hostile_paths_and_inputs(any_ctx, tmp_path):
    with pytest.raises(pagoda.IOError):
        pagoda.load(DATA, any_ctx)  # a directory
    with pytest.raises(pagoda.IOError):
        pagoda.load("/dev/zero", any_ctx)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(pagoda.IOError):
        pagoda.load(fifo, any_ctx)  # refused without blocking
    good = open(os.path.join(DATA, "vit-timm.safetensors"), "rb").read()
    for cut in (0, 7, 8, 100, len(good) // 2, len(good) - 1):
        p = tmp_path / f"cut{cut}.safetensors"
        p.write_bytes(good[:cut])
        with pytest.raises(pagoda.Error):
            pagoda.load(p, any_ctx)
    m = pagoda.load(os.path.join(DATA, "vit-timm.safetensors"), any_ctx)
    for bad in (np.zeros((1, 3, 30, 32)), np.zeros((1, 4, 32, 32)), np.zeros((2, 3)),
                np.zeros((0, 3, 32, 32))):
        with pytest.raises((pagoda.ShapeError, pagoda.InvalidArgumentError)):
            m(bad)
    for bad in (os.path.join(DATA, f) for f in ("fuzz-regress/image-png-corrupt-idat.png",
                                                "fuzz-regress/image-jpeg-dht-overflow.jpg",
                                                "fuzz-regress/image-bmp-8192-in-1000-bytes.bmp",
                                                "vit-hf.json")):
        with pytest.raises(pagoda.Error):
            m.classify([bad])
    with pytest.raises(pagoda.Error):
        m.classify(b"not an image")
    with pytest.raises(pagoda.ShapeError):
        m.classify(np.zeros((4, 4, 5), np.uint8))
    with pytest.raises(pagoda.InvalidArgumentError):
        m.classify([1234])
    with pytest.raises(pagoda.InvalidArgumentError):
        m.classify([os.path.join(DATA, "grad_300x200.png")], topk=0)
    with pytest.raises(pagoda.InvalidArgumentError):
        pagoda.load("a\0b", any_ctx)
    with pytest.raises(pagoda.InvalidArgumentError):
        pagoda.load(os.path.join(DATA, "vit-timm.safetensors"), "cpu")


def test_python_m_pagoda(any_ctx, capsys):
    from pagoda.__main__ import main

    assert main(["devices", "--json"]) == 0
    devs = json.loads(capsys.readouterr().out)
    assert [d["selector"] for d in devs] == [d["selector"] for d in pagoda.devices()]
    sel = any_ctx.device["selector"]
    img = os.path.join(DATA, "grad_300x200.png")
    assert main(["classify", "--device", sel, "--json", "--topk", "2", "--weights",
                 os.path.join(DATA, "vit-timm.safetensors"), img]) == 0
    out = json.loads(capsys.readouterr().out)
    want = pagoda.load(os.path.join(DATA, "vit-timm.safetensors"), any_ctx).classify(img, 2)[0]
    assert [c["index"] for c in out["results"][0]["top"]] == [c["index"] for c in want]
    assert main(["bench", "--device", sel, "--repeat", "2", "--warmup", "1", "--json",
                 "vit_tiny:2"]) == 0
    r = json.loads(capsys.readouterr().out)[0]
    assert r["name"] == "vit_tiny:2" and r["median_ms"] > 0
    assert main(["classify", "--device", sel, "--weights", os.path.join(DATA, "vit-hf.json"),
                 img]) == 1  # a pagoda.Error: reported, exit status 1


def test_classify_nothing_and_bad_bench_spec(any_ctx, capsys):
    m = pagoda.random_model("vit_tiny", any_ctx)
    for empty in ([], ()):
        with pytest.raises(pagoda.InvalidArgumentError, match="no images"):
            m.classify(empty)
        with pytest.raises(pagoda.InvalidArgumentError, match="no images"):
            m.preprocess(empty)
    from pagoda.__main__ import main

    sel = any_ctx.device["selector"]
    for spec, says in (("gemm:197,768,768", "gemm:197,768,768"), ("vit_tiny:x", "vit_tiny:x"),
                       ("vit_tiny:0", "vit_tiny:0"), ("vit_tiny:2:3", "vit_tiny:2:3")):
        assert main(["bench", "--device", sel, "--repeat", "1", "--warmup", "0", spec]) == 2
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err
