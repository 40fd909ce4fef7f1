"""Devices, contexts, tensors, errors, threads and resource cycles of the binding."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import threading
import time

import numpy as np
import pytest

import pagoda
from conftest import DATA, DEVICES

CLI = os.environ.get("PAGODA_CLI")


def test_devices_fields_match_cli():
    devs = pagoda.devices()
    assert devs, "pagoda.devices() found nothing although the suite runs with a device"
    assert sum(d["default"] for d in devs) == 1
    if not CLI:
        pytest.skip("PAGODA_CLI not set (meson test sets it)")
    out = subprocess.run([CLI, "devices", "--json"], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PAGODA_DEVICE=""))
    cli = json.loads(out.stdout)
    assert [sorted(d) for d in devs] == [sorted(d) for d in cli]
    for mine, theirs in zip(devs, cli):
        assert mine == theirs, f"{mine['name']}: binding and CLI disagree"


def test_options_structure_matches_the_header():
    """CtxOptions mirrors pgd_ctx_options field for field: pgd_ctx_options_init writes every
    field of the C structure, so a shorter mirror would be written past its end."""
    import re
    from pagoda._capi import CtxOptions
    header = os.path.join(os.path.dirname(__file__), "..", "..", "runtime", "include", "pagoda.h")
    with open(header, encoding="utf-8") as f:
        text = f.read()
    body = re.search(r"typedef struct pgd_ctx_options \{(.*?)\} pgd_ctx_options;", text,
                     re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    names = re.findall(r"(\w+)\s*(?:\[\w*\])?\s*;", body)  # one declarator a declaration
    assert names == [f[0] for f in CtxOptions._fields_]


def test_context_options_and_manager():
    with pagoda.Context(DEVICES[0]["selector"], env=False, cache_dir="off", profiling=True,
                        gemm_backend="pagoda", conv_algo="im2col", attention="generic",
                        max_batch=2) as c:
        assert c.device["selector"] == DEVICES[0]["selector"]
        t = c.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
        assert c.memory_stats()["live_bytes"] >= 24
        assert "(" in c.kernel_params()
    assert c.closed and t.closed
    with pytest.raises(pagoda.ClosedError):
        t.numpy()
    with pytest.raises(pagoda.ClosedError):
        c.tensor([1.0])
    c.close()  # idempotent


@pytest.mark.parametrize("kw,exc,text", [
    ({"device": "no-such-device-xyz"}, pagoda.DeviceNotFoundError, "no-such-device-xyz"),
    ({"gemm_backend": "fast"}, pagoda.InvalidArgumentError, "gemm_backend"),
    ({"max_batch": -3}, pagoda.InvalidArgumentError, "max_batch"),
    ({"bogus": 1}, pagoda.InvalidArgumentError, "bogus"),
    ({"kernel_params": "cpu:rm=999"}, pagoda.Error, "rm"),
    ({"device": "a\0b"}, pagoda.InvalidArgumentError, "NUL"),
])
def test_context_bad_options(kw, exc, text):
    with pytest.raises(exc) as e:
        pagoda.Context(env=False, **kw)
    assert text in str(e.value)
    assert e.value.status < 0 and e.value.name.startswith("PGD_")


def test_precision_keyword_refused_by_name_where_unsupported():
    """precision= is the knob: accepted where the device has the extension, refused with
    UnsupportedError naming the device and the extension elsewhere (never a silent f32)."""
    for d in DEVICES:
        lp = d["low_precision"]
        for prec, ok, ext in (("f16", lp["fp16_arithmetic"], "cl_khr_fp16"),
                              ("int8", lp["integer_dot_product_packed"],
                               "cl_khr_integer_dot_product")):
            if ok:
                pagoda.Context(d["selector"], env=False, cache_dir="off", precision=prec).close()
                continue
            with pytest.raises(pagoda.UnsupportedError) as e:
                pagoda.Context(d["selector"], env=False, cache_dir="off", precision=prec)
            assert ext in str(e.value) and d["name"] in str(e.value)
    with pytest.raises(pagoda.InvalidArgumentError, match="precision"):
        pagoda.Context(env=False, precision="bf16")


def test_env_is_read_and_strict(monkeypatch):
    monkeypatch.setenv("PAGODA_GEMM", "fast")
    with pytest.raises(pagoda.InvalidArgumentError, match="PAGODA_GEMM"):
        pagoda.Context()
    pagoda.Context(env=False).close()  # env=False ignores it


def test_tensor_roundtrip_and_dtypes(any_ctx):
    c = any_ctx
    for a in (np.float32(2.5), np.arange(7, dtype=np.float64), np.arange(12, dtype=np.int16)
              .reshape(3, 4), np.ones((2, 1, 3, 1, 2, 1, 1, 2), dtype=np.float16),
              np.asfortranarray(np.random.rand(5, 3)), np.random.rand(6, 4)[::2, 1:]):
        t = c.tensor(a)
        want = np.asarray(a, dtype=np.float32).reshape(t.shape)
        assert t.dtype == np.float32
        np.testing.assert_array_equal(t.numpy(), want)
        np.testing.assert_array_equal(np.asarray(t), want)
    t = c.tensor([[1, 2, 3], [4, 5, 6]])
    assert t.shape == (2, 3) and t.ndim == 2 and t.size == 6 and len(t) == 2
    t.reshape_((3, 2))
    assert t.numpy().tolist() == [[1, 2], [3, 4], [5, 6]]
    t.fill(7)
    assert (t.numpy() == 7).all()
    t.upload(np.zeros(6))
    assert not t.numpy().any()
    e = c.empty((4, 5))
    assert e.shape == (4, 5)


@pytest.mark.parametrize("bad,exc", [
    (np.array([True, False]), pagoda.InvalidArgumentError),
    (np.array([1 + 2j]), pagoda.InvalidArgumentError),
    (np.array(["a"]), pagoda.InvalidArgumentError),
    (np.array([object()]), pagoda.InvalidArgumentError),
    (np.zeros((1,) * 9), pagoda.ShapeError),
])
def test_tensor_refused(any_ctx, bad, exc):
    with pytest.raises(exc):
        any_ctx.tensor(bad)


def test_hostile_shapes_raise(any_ctx):
    c = any_ctx
    with pytest.raises(pagoda.Error):
        c.empty((2**40, 2**20))  # beyond any device: PGD_ERR_TOO_LARGE, not a crash
    with pytest.raises(pagoda.ShapeError):
        c.empty((-1, 3))
    with pytest.raises(pagoda.ShapeError):
        c.empty((1,) * 9)
    assert c.empty(()).shape == ()  # rank 0 is a tensor of one element, as in the C API and NumPy
    t = c.tensor(np.ones((2, 3)))
    with pytest.raises(pagoda.ShapeError):
        t.reshape_((4, 2))
    with pytest.raises(pagoda.ShapeError):
        t.upload(np.ones(5))
    with pytest.raises(pagoda.ShapeError):
        pagoda.gemm(t, t)  # [2, 3] x [2, 3]
    with pytest.raises(pagoda.ShapeError):
        pagoda.layernorm(t, np.ones(4), np.ones(4))
    with pytest.raises(pagoda.InvalidArgumentError):
        pagoda.layernorm(t, np.ones(3))
    with pytest.raises(pagoda.ShapeError):
        pagoda.attention(t, t, t)
    with pytest.raises(pagoda.Error):
        pagoda.maxpool2d(c.tensor(np.ones((1, 4, 4, 2))), 3, 1, 2)  # pad > k/2
    with pytest.raises(pagoda.InvalidArgumentError):
        pagoda.gemm(t, t, act="swish")
    with pytest.raises(pagoda.InvalidArgumentError):
        pagoda.gelu(np.ones(3))  # no tensor and no ctx=
    with pytest.raises(pagoda.Error):
        pagoda.Conv2d(c, np.ones((4, 3, 3, 3)), groups=3)  # cout 4 not a multiple of 3
    with pytest.raises(pagoda.Error):
        pagoda.NonLocal(c, 8, 4, mode="dot_product")  # g and W missing
    with pytest.raises(pagoda.ShapeError):
        pagoda.attention_qkv(c.tensor(np.ones((1, 2, 7))), 2)


def test_error_carries_c_message(any_ctx):
    t = any_ctx.tensor(np.ones((3, 4)))
    with pytest.raises(pagoda.ShapeError) as e:
        pagoda.softmax(t, out=any_ctx.empty((4, 3)))
    assert "[4, 3]" in str(e.value) or "4, 3" in str(e.value)
    with pytest.raises(pagoda.ShapeError) as e:
        pagoda.bias_add(t, np.ones(5))
    assert e.value.name == "PGD_ERR_SHAPE" and "5" in e.value.message
    assert isinstance(e.value, ValueError)


def test_tensors_of_two_contexts_do_not_mix(any_ctx):
    with pagoda.Context(env=False) as other:
        a = other.tensor(np.ones((2, 2)))
        with pytest.raises(pagoda.InvalidArgumentError, match="another context"):
            pagoda.gemm(any_ctx.tensor(np.ones((2, 2))), a)


def test_gc_frees_and_never_after_context():
    c = pagoda.Context(env=False)
    base = c.memory_stats()["live_bytes"]
    t = c.tensor(np.ones(1000))
    assert c.memory_stats()["live_bytes"] >= base + 4000
    del t
    gc.collect()
    assert c.memory_stats()["live_bytes"] == base
    keep = [c.tensor(np.ones(10)) for _ in range(5)]
    lin = pagoda.Linear(c, np.ones((3, 10)))
    c.close()  # frees the five tensors and the layer first
    assert all(k.closed for k in keep) and lin.closed
    del keep, lin
    gc.collect()  # their finalisers run after the context is gone: nothing happens


def test_second_thread_gets_an_error_not_a_crash(any_ctx):
    c = any_ctx
    t = c.tensor(np.ones((4, 4)))
    holding, release = threading.Event(), threading.Event()
    errors = []

    def holder():
        with c._lock:  # as a long call from this thread would hold it
            holding.set()
            release.wait(10)

    th = threading.Thread(target=holder)
    th.start()
    holding.wait(10)
    try:
        for call in (lambda: pagoda.gemm(t, t), lambda: t.numpy(), lambda: c.tensor([1.0]),
                     c.close):
            try:
                call()
            except pagoda.ConcurrentUseError as e:
                errors.append(str(e))
    finally:
        release.set()
        th.join()
    assert len(errors) == 4 and "another thread" in errors[0]
    del t
    gc.collect()  # freed at once now that no thread holds the context
    assert not c._pending


def test_gc_from_another_thread_is_deferred(any_ctx):
    c = any_ctx
    t = c.tensor(np.ones(4))
    h = t._h
    with c._lock:
        done = threading.Event()

        def drop():
            t.__del__()  # what a collection in this thread would do
            done.set()

        threading.Thread(target=drop).start()
        done.wait(10)
        assert c._pending and c._pending[-1][1] == h
    c.tensor([0.0]).close()  # the next call frees it
    assert not c._pending


def test_threads_with_their_own_contexts_run_together():
    out = {}

    def work(i):
        with pagoda.Context(env=False) as c:
            a = np.full((64, 64), i, dtype=np.float32)
            for _ in range(20):
                r = pagoda.gemm(c.tensor(a), a).numpy()
            out[i] = r[0, 0]

    ths = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert out == {i: 64.0 * i * i for i in range(3)}


def _rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_10000_tensor_cycles_no_growth(any_ctx):
    c = any_ctx
    a = np.ones((16, 16), dtype=np.float32)
    for _ in range(1000):  # warm the pool and the allocator
        c.tensor(a).close()
    gc.collect()
    live0, rss0 = c.memory_stats()["live_bytes"], _rss_kib()
    idle0 = c.memory_stats()["idle_buffers"]
    for i in range(10000):
        t = c.tensor(a)
        if i % 2:
            t.close()
        else:
            del t  # the garbage collector's path
    gc.collect()
    s = c.memory_stats()
    grew = _rss_kib() - rss0
    assert s["live_bytes"] == live0, "device buffers left live"
    assert s["idle_buffers"] <= idle0 + 1, "the pool keeps growing"
    assert grew < 2048, f"RSS grew {grew} KiB over 10,000 tensor cycles"


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_100_context_cycles_no_growth():
    sel = DEVICES[0]["selector"]
    a = np.ones((8, 8), dtype=np.float32)

    def cycle():
        with pagoda.Context(sel, env=False, cache_dir=os.environ.get("PAGODA_CACHE_DIR")) as c:
            pagoda.gemm(c.tensor(a), a).numpy()

    for _ in range(10):
        cycle()
    gc.collect()
    rss0 = _rss_kib()
    for _ in range(100):
        cycle()
    gc.collect()
    grew = _rss_kib() - rss0
    assert grew < 4096, f"RSS grew {grew} KiB over 100 context cycles"


def test_long_calls_release_the_gil(any_ctx):
    """While one thread waits in a long C call (big GEMMs, then finish), another keeps running
    Python: ctypes releases the GIL around every foreign call. The work is sized from a measured
    GEMM so that the call lasts about 0.2 s on any device (a fast device gets more GEMMs, never a
    skip), and grows until it lasts at least 50 ms."""
    c = any_ctx
    n = 1024
    a = c.tensor(np.ones((n, n), dtype=np.float32))
    out = pagoda.gemm(a, a)  # every GEMM below writes here: no memory piles up
    c.finish()
    t0 = time.perf_counter()
    pagoda.gemm(a, a, c=out)
    c.finish()
    reps = max(2, min(4096, int(0.2 / max(time.perf_counter() - t0, 1e-5)) + 1))
    for _ in range(4):
        span = {}

        def worker():
            t0 = time.perf_counter()
            for _ in range(reps):
                pagoda.gemm(a, a, c=out)
            c.finish()
            span["call"] = (t0, time.perf_counter())

        gaps, last = [], time.perf_counter()
        th = threading.Thread(target=worker)
        th.start()
        while th.is_alive():
            now = time.perf_counter()
            gaps.append((last, now))
            last = now
        th.join()
        t0, t1 = span["call"]
        if t1 - t0 >= 0.05:
            break
        reps *= 4
    assert t1 - t0 >= 0.05, f"{reps} GEMMs of {n} x {n} took only {1e3 * (t1 - t0):.1f} ms"
    inside = [b - a_ for a_, b in gaps if a_ >= t0 and b <= t1]
    # The main thread ran all along: many iterations, and no pause near the call's length.
    assert len(inside) > 100 and max(inside) < 0.5 * (t1 - t0), (
        f"{len(inside)} iterations, longest pause {1e3 * max(inside or [0]):.1f} ms of a "
        f"{1e3 * (t1 - t0):.1f} ms call")
    out.close()


# Every integer that goes to a C integer type is range-checked in Python (one helper, in
# _capi.py): ctypes would otherwise keep its low bits, silently (2**64 -> 0, 2**32+2 -> 2).
@pytest.mark.parametrize("call,text", [
    (lambda c: c.empty((2**64,)), "18446744073709551616"),
    (lambda c: c.empty((2, 2**63)), "9223372036854775808"),
    (lambda c: c.tensor(np.ones(4)).reshape_((2**64 + 4,)), "reshape_"),
    (lambda c: pagoda.conv2d(c.tensor(np.ones((1, 4, 4, 1))), np.ones((1, 1, 1, 1)),
                             stride=2**32 + 2), "stride"),
    (lambda c: pagoda.conv2d(c.tensor(np.ones((1, 4, 4, 1))), np.ones((1, 1, 1, 1)),
                             padding=(0, -2**32)), "padding"),
    (lambda c: pagoda.conv2d(c.tensor(np.ones((1, 4, 4, 1))), np.ones((1, 1, 1, 1)),
                             dilation=2**31), "dilation"),
    (lambda c: pagoda.Conv2d(c, np.ones((2, 1, 1, 1)), groups=2**32 + 2), "groups"),
    (lambda c: pagoda.Conv2d(c, np.ones((1, 1, 1, 1))).out_size(2**64, 4), "h"),
    (lambda c: pagoda.Conv2d(c, np.ones((1, 1, 1, 1))).algorithm(4, 4, 2**63), "n"),
    (lambda c: pagoda.maxpool2d(c.tensor(np.ones((1, 4, 4, 1))), 2**32 + 2), "kernel_size"),
    (lambda c: pagoda.avgpool2d(c.tensor(np.ones((1, 4, 4, 1))), 2, 2**32 + 1), "stride"),
    (lambda c: pagoda.attention_qkv(c.tensor(np.ones((1, 2, 6))), 2**64 + 1), "heads"),
    (lambda c: pagoda.attention_uniform(2**64, 0, 0, 0, 1, 1), "seed"),
    (lambda c: pagoda.attention_uniform(1, 0, 0, 2**63, 1, 1), "i"),
    (lambda c: pagoda.attention(*(c.tensor(np.ones((1, 1, 2, 2))),) * 3, mode="topk",
                                topk=2**64 + 1), "topk"),
    (lambda c: pagoda.attention(*(c.tensor(np.ones((1, 1, 2, 2))),) * 3,
                                probs=2**32), "probs"),
    (lambda c: pagoda.NonLocal(c, 2**63, 1), "channels"),
    (lambda c: pagoda.imagenet_label(2**32 + 3), "imagenet_label"),
    (lambda c: pagoda.Context(env=False, max_batch=2**32 + 2), "max_batch"),
    (lambda c: pagoda.Context(env=False, row_wg=2**31), "row_wg"),
    (lambda c: pagoda.load(os.path.join(DATA, "vit-hf.safetensors"), c, heads=2**32 + 2),
     "heads"),
    (lambda c: c.empty((2.5, 3)), "2.5"),
])
def test_out_of_range_integers_raise(any_ctx, call, text):
    with pytest.raises(pagoda.InvalidArgumentError) as e:
        call(any_ctx)
    assert text in str(e.value)


def test_in_range_integers_still_work(any_ctx):
    c = any_ctx
    assert c.empty((np.int64(3), 2)).shape == (3, 2)
    y = pagoda.conv2d(c.tensor(np.ones((1, 5, 5, 1))), np.ones((1, 1, 1, 1)),
                      stride=np.int32(2))
    assert y.shape == (1, 3, 3, 1)
    assert 0 <= pagoda.attention_uniform(2**64 - 1, 0, 0, 0, 1, 1) < 1
