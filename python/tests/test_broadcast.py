"""The broadcasting elementwise ops and reductions against NumPy (computed in float64 from the
same float32 inputs), on every device: shapes of rank 0 to 8 with 1s, primes and empty dims,
scalars, axis= and keepdims= as NumPy takes them, NaN and inf, and the errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pagoda

_erf = np.vectorize(math.erf, otypes=[np.float64])

BINARY = {
    "add": (pagoda.add, np.add),
    "sub": (pagoda.sub, np.subtract),
    "mul": (pagoda.mul, np.multiply),
    "div": (pagoda.div, np.divide),
    "pow": (pagoda.pow, np.power),
    "maximum": (pagoda.maximum, np.maximum),
    "minimum": (pagoda.minimum, np.minimum),
}

SHAPE_PAIRS = [
    ((), ()),
    ((), (3,)),
    ((5, 1), (1, 7)),
    ((2, 3, 4), (4,)),
    ((1,), (13, 1)),
    ((2, 1, 7, 1, 5), (3, 7, 4, 1)),
    ((2, 1, 2, 1, 3, 1, 2, 1), (1, 3, 1, 2, 1, 1, 1, 5)),
    ((0, 3), (1, 3)),
    ((4, 0), (4, 1)),
    ((31, 17), (31, 17)),
    ((257,), ()),
    ((3, 1, 65), (1, 64, 1)),
]


def dev(ctx, a):
    return ctx.tensor(a)


def near(got, want, rtol, atol, what):
    """got (float32) against want (float64): NaN where NaN, the same inf, else close."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    w32 = want.astype(np.float32).astype(np.float64)
    with np.errstate(invalid="ignore"):
        ok = np.where(np.isnan(want), np.isnan(got),
                      np.where(np.isinf(w32), got == w32,
                               (np.abs(got - want) <= atol + rtol * np.abs(want))
                               | (got == w32)))  # what float32 can hold (underflow)
    assert ok.all(), (f"{what}: {(~ok).sum()} of {ok.size} differ; first got "
                      f"{got[~ok][0]!r}, want {want[~ok][0]!r}")


@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=lambda s: f"{s[0]}-{s[1]}")
def test_binary_broadcast(ctx, rng, shapes):
    sa, sb = shapes
    a = np.asarray(rng.uniform(-4, 4, sa), np.float32)
    b = np.asarray(rng.uniform(-4, 4, sb), np.float32)
    pos = np.asarray(rng.uniform(0.1, 4, sa), np.float32)
    ta, tb, tp = dev(ctx, a), dev(ctx, b), dev(ctx, pos)
    for name, (ours, theirs) in BINARY.items():
        first, tfirst = (pos, tp) if name == "pow" else (a, ta)
        with np.errstate(all="ignore"):
            want = theirs(first.astype(np.float64), b.astype(np.float64))
        got = ours(tfirst, tb, ctx=ctx).numpy()
        near(got, want, 1e-5, 1e-6, f"{name} {sa} {sb}")
        # Both ways round, NumPy arrays taken as they are.
        with np.errstate(all="ignore"):
            want = theirs(b.astype(np.float64), first.astype(np.float64))
        near(ours(tb, first, ctx=ctx).numpy(), want, 1e-5, 1e-5, f"{name} {sb} {sa}")


def test_scalars_and_where(ctx, rng):
    x = rng.uniform(-2, 2, (3, 4)).astype(np.float32)
    tx = ctx.tensor(x)
    near(pagoda.mul(tx, 2.5).numpy(), x * 2.5, 1e-6, 0, "x * 2.5")
    near(pagoda.sub(1, tx).numpy(), 1.0 - x.astype(np.float64), 1e-6, 1e-7, "1 - x")
    assert pagoda.add(np.float32(1), np.float32(2), ctx=ctx).shape == ()
    cond = x > 0
    got = pagoda.where(cond, tx, np.zeros((4,), np.float32)).numpy()
    near(got, np.where(cond, x, 0), 0, 0, "where bool")
    c = rng.integers(0, 2, (3, 1)).astype(np.float32)
    got = pagoda.where(c, tx, -1.0).numpy()
    near(got, np.where(c != 0, x, -1.0), 0, 0, "where broadcast")
    near(pagoda.where(np.float32(np.nan), 1.0, 2.0, ctx=ctx).numpy(), 1.0, 0, 0, "NaN is true")


UNARY = {
    "exp": (pagoda.exp, np.exp),
    "log": (pagoda.log, np.log),
    "sqrt": (pagoda.sqrt, np.sqrt),
    "rsqrt": (pagoda.rsqrt, lambda v: 1 / np.sqrt(v)),
    "erf": (pagoda.erf, _erf),
    "tanh": (pagoda.tanh, np.tanh),
    "sigmoid": (pagoda.sigmoid, lambda v: 1 / (1 + np.exp(-v))),
    "silu": (pagoda.silu, lambda v: np.where(v == -np.inf, 0, v / (1 + np.exp(-v)))),
    "abs": (pagoda.abs, np.abs),
    "neg": (pagoda.neg, np.negative),
    "relu": (pagoda.relu, lambda v: np.where(v < 0, 0, v)),
    "clip": (lambda t, **kw: pagoda.clip(t, -0.5, 2.0, **kw), lambda v: np.clip(v, -0.5, 2.0)),
    "clip_lo": (lambda t, **kw: pagoda.clip(t, a_min=1.0, **kw), lambda v: np.clip(v, 1.0, None)),
}


@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 0), (2, 3, 5, 7), (2,) * 8, (4097,)])
def test_unary(ctx, rng, shape):
    x = np.asarray(rng.uniform(-6, 6, shape), np.float32)
    if x.size >= 4:
        x.flat[:4] = [np.nan, np.inf, -np.inf, 0.0]
    tx = dev(ctx, x)
    for name, (ours, theirs) in UNARY.items():
        with np.errstate(all="ignore"):
            want = theirs(x.astype(np.float64))
        near(ours(tx, ctx=ctx).numpy(), want, 1e-5, 1e-6, f"{name} {shape}")


REDUCE = {
    "sum": (pagoda.sum, np.sum),
    "mean": (pagoda.mean, np.mean),
    "max": (pagoda.max, np.max),
    "min": (pagoda.min, np.min),
    "prod": (pagoda.prod, np.prod),
    "argmax": (pagoda.argmax, None),
    "argmin": (pagoda.argmin, None),
}

REDUCE_CASES = [  # (shape, axis)
    ((), None),
    ((7,), None),
    ((7,), 0),
    ((3, 5), 1),
    ((3, 5), -2),
    ((3, 5), (0, 1)),
    ((2, 3, 4, 5), (1, 3)),
    ((2, 3, 4, 5), (-1, 0)),
    ((2, 3, 4, 5), ()),
    ((2, 1, 3, 1, 2, 1, 3, 2), (0, 2, 4, 6)),
    ((13, 1000), 1),
    ((1000, 13), 0),
    ((70001,), None),
    ((4, 0), 0),
]


def _np_arg(fn, x, axis, keepdims):
    """NumPy's argmax over a set of axes: the axes moved last and flattened in order."""
    if axis is None:
        r = fn(x)
        return np.reshape(r, (1,) * x.ndim) if keepdims else r
    axes = [axis] if isinstance(axis, int) else [a % x.ndim for a in axis]
    if isinstance(axis, int) or len(axes) == 1:
        return fn(x, axis=axes[0], keepdims=keepdims)
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(x, kept + sorted(axes)).reshape([x.shape[d] for d in kept] + [-1])
    r = fn(moved, axis=-1)
    if keepdims:
        r = r.reshape([1 if d in axes else x.shape[d] for d in range(x.ndim)])
    return r


@pytest.mark.parametrize("case", REDUCE_CASES, ids=lambda c: f"{c[0]}-{c[1]}")
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce(ctx, rng, case, keepdims):
    shape, axis = case
    x = np.asarray(rng.uniform(-4, 4, shape), np.float32)
    ties = np.floor(x)
    near1 = np.asarray(rng.uniform(0.9, 1.1, shape), np.float32)
    for name, (ours, theirs) in REDUCE.items():
        data = near1 if name == "prod" else ties if name.startswith("arg") else x
        axes = range(len(shape)) if axis is None else [axis] if isinstance(axis, int) else axis
        if name in ("max", "min", "argmax", "argmin") and any(shape[a] == 0 for a in axes):
            with pytest.raises(pagoda.ShapeError, match="no elements"):
                ours(dev(ctx, data), axis=axis, keepdims=keepdims, ctx=ctx)
            continue
        if name.startswith("arg"):
            if axis == ():
                continue  # NumPy's argmax takes no empty tuple
            want = _np_arg(np.argmax if name == "argmax" else np.argmin, data, axis, keepdims)
            got = ours(dev(ctx, data), axis=axis, keepdims=keepdims, ctx=ctx).numpy()
            assert got.shape == np.shape(want), f"{name} {shape} {axis}"
            assert np.array_equal(got, want), f"{name} {shape} {axis}: {got} vs {want}"
            continue
        with np.errstate(all="ignore"):
            want = theirs(data.astype(np.float64), axis=axis, keepdims=keepdims)
            mag = np.sum(np.abs(data.astype(np.float64)), axis=axis, keepdims=keepdims)
            if name == "mean":
                mag = np.mean(np.abs(data.astype(np.float64)), axis=axis, keepdims=keepdims)
        got = ours(dev(ctx, data), axis=axis, keepdims=keepdims, ctx=ctx).numpy()
        tol = 2e-5 * mag if name in ("sum", "mean") else 0
        near(got, want, 1e-4 if name == "prod" else 0, tol, f"{name} {shape} {axis}")


def test_reduce_nan(ctx):
    x = np.array([[1, np.nan, 3, np.nan], [np.inf, -np.inf, 2, 0]], np.float32)
    tx = ctx.tensor(x)
    with np.errstate(all="ignore"):
        for ours, theirs in ((pagoda.sum, np.sum), (pagoda.max, np.max), (pagoda.min, np.min),
                             (pagoda.mean, np.mean), (pagoda.prod, np.prod)):
            near(ours(tx, axis=1).numpy(), theirs(x.astype(np.float64), axis=1), 0, 0, "nan")
    assert list(pagoda.argmax(tx, axis=1).numpy()) == [1, 0]
    assert list(pagoda.argmin(tx, axis=1).numpy()) == [1, 1]
    assert pagoda.argmax(tx).numpy() == np.argmax(x)


def test_errors(ctx):
    a = ctx.tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(pagoda.ShapeError, match=r"mul: b \[4, 3\] does not broadcast with a "
                                                r"\[2, 3\]: dim -2"):
        pagoda.mul(a, np.zeros((4, 3), np.float32))
    with pytest.raises(pagoda.ShapeError, match=r"where: b \[2\] does not broadcast"):
        pagoda.where(a, a, np.zeros(2, np.float32))
    with pytest.raises(pagoda.ShapeError):
        pagoda.add(a, a, out=ctx.tensor(np.zeros((3, 2), np.float32)))
    with pytest.raises(pagoda.InvalidArgumentError, match="sum: axis 2 is out of range"):
        pagoda.sum(a, axis=2)
    with pytest.raises(pagoda.InvalidArgumentError, match="max: axis 1 is given twice"):
        pagoda.max(a, axis=(1, -1))
    with pytest.raises(pagoda.InvalidArgumentError, match="clip"):
        pagoda.clip(a, float("nan"), 1.0)
    # An `out` of the right shape is written.
    out = ctx.tensor(np.ones((2, 1), np.float32))
    assert pagoda.sum(a, axis=1, keepdims=True, out=out) is out
    assert (out.numpy() == 0).all()


def test_arg_last(ctx, rng):
    """argmax/argmin(last=True): the last extreme along one axis (ONNX's select_last_index)."""
    x = rng.integers(0, 3, size=(4, 7, 5)).astype(np.float32)  # many ties
    for axis in (0, 1, -1):
        for keep in (False, True):
            for fn, npf in ((pagoda.argmax, np.argmax), (pagoda.argmin, np.argmin)):
                n = x.shape[axis]
                want = n - 1 - npf(np.flip(x, axis), axis=axis)
                if keep:
                    want = np.expand_dims(want, axis)
                got = fn(ctx.tensor(x), axis=axis, keepdims=keep, last=True).numpy()
                assert np.array_equal(got, want), (fn.__name__, axis, keep)
    with pytest.raises(pagoda.InvalidArgumentError, match="last=True takes one int axis"):
        pagoda.argmax(ctx.tensor(x), axis=(0, 1), last=True)
