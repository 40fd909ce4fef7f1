"""DLPack and host views on every device: NumPy round trips with no copy (checked by data
pointer) where the device shares the host's memory, copies elsewhere and for what cannot be
shared, the capsule protocol (renamed when consumed, deleter called exactly once), lifetimes;
and PyTorch's round trip (dlpack_torch.py) where torch is importable."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

import pagoda
from pagoda import dlpack

import dlpack_torch

_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


class Producer:
    """Hands out one given capsule, so a test can look at it after the consumer took it."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **_):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def _live_exports():
    gc.collect()
    return len(dlpack._exports)


def test_numpy_round_trip_no_copy(ctx):
    shares = pagoda.host_alignment(ctx) > 0
    assert shares == ctx.device["unified_memory"]
    a = pagoda.empty_host(ctx, (5, 7))
    a[...] = np.arange(35, dtype=np.float32).reshape(5, 7)
    t = pagoda.from_dlpack(a, ctx)
    b = np.from_dlpack(t)
    assert np.array_equal(b, a)
    if not shares:
        assert b.ctypes.data != a.ctypes.data
        return
    assert b.ctypes.data == a.ctypes.data, (hex(a.ctypes.data), hex(b.ctypes.data))
    print(f"numpy {hex(a.ctypes.data)} -> pagoda -> numpy {hex(b.ctypes.data)}: same memory")
    a[1, 2] = -4.0  # the host writes, Pagoda reads
    assert t.numpy()[1, 2] == -4.0
    t.fill(3.0)
    ctx.finish()  # Pagoda writes, the host reads
    assert (a == 3.0).all() and (b == 3.0).all()


def test_export_is_a_view_of_the_tensor(ctx):
    t = ctx.tensor(np.ones((3, 4), dtype=np.float32))
    v = np.from_dlpack(t)
    assert np.array_equal(v, np.ones((3, 4)))
    if not ctx.device["unified_memory"]:
        with pytest.raises(BufferError):
            t.host_view()
        return
    w = t.host_view()
    assert w.ctypes.data == v.ctypes.data and w.flags.writeable
    w[2, 1] = 9.0
    del v, w
    assert t.numpy()[2, 1] == 9.0
    assert np.asarray(t, copy=False)[2, 1] == 9.0
    assert np.asarray(t).ctypes.data != np.asarray(t, copy=False).ctypes.data


def test_what_cannot_be_shared_is_copied(ctx):
    al = max(pagoda.host_alignment(ctx), 64)
    base = pagoda.empty_host(ctx, (2 * al,))
    base[...] = np.arange(2 * al)
    cases = {
        "unaligned": base[1:65],
        "float64": np.arange(12, dtype=np.float64).reshape(3, 4),
        "transposed": base[:64].reshape(8, 8).T,
        "int32": np.arange(6, dtype=np.int32),
    }
    for what, arr in cases.items():
        t = pagoda.from_dlpack(arr, ctx)
        assert np.array_equal(t.numpy(), arr.astype(np.float32)), what
        got = np.from_dlpack(t)
        assert got.ctypes.data != arr.ctypes.data, what
        with pytest.raises(BufferError):
            pagoda.from_dlpack(arr, ctx, copy=False)
    copied = pagoda.from_dlpack(base, ctx, copy=True)
    assert np.from_dlpack(copied).ctypes.data != base.ctypes.data


def test_capsule_protocol_export(ctx):
    before = _live_exports()
    t = ctx.tensor(np.arange(6, dtype=np.float32))
    cap = t.__dlpack__()
    assert _is_valid(cap, b"dltensor")
    assert _live_exports() == before + 1
    del cap  # never consumed: its destructor calls the deleter
    assert _live_exports() == before
    cap = t.__dlpack__()
    arr = np.from_dlpack(Producer(cap))
    assert _is_valid(cap, b"used_dltensor")  # the consumer took it
    del cap
    assert _live_exports() == before + 1  # the consumer holds it: no deleter yet
    assert np.array_equal(arr, np.arange(6))
    del arr  # the consumer lets go: the deleter, once
    assert _live_exports() == before
    vcap = t.__dlpack__(max_version=(1, 0))
    assert _is_valid(vcap, b"dltensor_versioned")
    del vcap
    assert _live_exports() == before
    with pytest.raises(BufferError):
        t.__dlpack__(stream=1)
    assert t.__dlpack_device__() == (1, 0)


def test_capsule_protocol_import(ctx):
    if not ctx.device["unified_memory"]:
        pytest.skip(f"{ctx.device['name']}: no host-unified memory, imports copy")
    before = _live_exports()
    # A producer whose memory is aligned for sharing: a Pagoda tensor over aligned host memory
    # (an ordinary tensor's mapping need not be: rusticl's is not aligned to its 512 bytes).
    host = pagoda.empty_host(ctx, (8,))
    host[...] = np.arange(8)
    src = pagoda.from_dlpack(host, ctx)
    cap = src.__dlpack__()
    t = pagoda.from_dlpack(Producer(cap), ctx)
    assert _is_valid(cap, b"used_dltensor")
    del cap
    assert _live_exports() == before + 1  # t holds the producer's tensor
    assert np.array_equal(t.numpy(), np.arange(8))
    assert np.from_dlpack(t).ctypes.data == host.ctypes.data  # no copy anywhere
    gc.collect()
    t.close()  # the deleter, once: the producer's tensor is unmapped and let go
    assert _live_exports() == before
    assert np.array_equal(src.numpy(), np.arange(8))


def test_exported_tensor_outlives_its_name(ctx):
    t = ctx.tensor(np.full((4, 4), 2.5, dtype=np.float32))
    v = np.from_dlpack(t)
    del t
    gc.collect()
    assert (v == 2.5).all()
    a = pagoda.empty_host(ctx, (16,))
    a[...] = 1.0
    t2 = pagoda.from_dlpack(a, ctx)
    del a
    gc.collect()
    assert (t2.numpy() == 1.0).all()


def test_from_dlpack_errors(ctx):
    with pytest.raises(pagoda.InvalidArgumentError, match="__dlpack__"):
        pagoda.from_dlpack([1.0, 2.0], ctx)


def test_torch_round_trip(ctx):
    pytest.importorskip("torch", reason="torch is not importable here: the test "
                        "python-dlpack-torch runs this with .deps-torch")
    dlpack_torch.check_round_trip(ctx)
    dlpack_torch.check_copies(ctx)
