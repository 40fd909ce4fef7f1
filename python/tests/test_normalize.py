"""Normalisation over any axis (softmax and log_softmax with axis=, layernorm with axis= and
return_stats, rms_norm, batch_norm, group_norm) and matmul against NumPy in float64 on every
device."""

from __future__ import annotations

import numpy as np
import pytest

import pagoda

CASES = 50


def shape_of(rng, lo=1, hi=5, limit=3000):
    shape, n = [], 1
    for _ in range(int(rng.integers(lo, hi + 1))):
        s = int(rng.choice([1, 2, 3, 5, 7, 13, 17, 64]))
        s = 1 if n * s > limit else s
        shape.append(s)
        n *= s
    return tuple(shape)


def close(got, want, rtol, atol, what):
    got = np.asarray(got, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    with np.errstate(invalid="ignore"):
        same = (got == want) | (np.isnan(got) & np.isnan(want))  # infinities, NaN
        err = np.where(same, 0.0, np.abs(got - want) - rtol * np.abs(want))
    assert (err <= atol).all(), f"{what}: off by {np.nanmax(err):.3g}"


def test_softmax_axis(ctx, rng):
    for i in range(CASES):
        x = (rng.standard_normal(shape_of(rng)) * 3).astype(np.float32)
        axis = int(rng.integers(-x.ndim, x.ndim))
        d = x.astype(np.float64)
        e = d - d.max(axis=axis, keepdims=True)
        lse = np.log(np.exp(e).sum(axis=axis, keepdims=True))
        close(pagoda.softmax(ctx.tensor(x), axis=axis).numpy(), np.exp(e - lse), 2e-5, 1e-7,
              f"softmax {x.shape} axis {axis}")
        close(pagoda.log_softmax(ctx.tensor(x), axis).numpy(), e - lse, 2e-5, 2e-5,
              f"log_softmax {x.shape} axis {axis}")


def test_layernorm_axis_and_stats(ctx, rng):
    for i in range(CASES):
        x = rng.standard_normal(shape_of(rng)).astype(np.float32) + (50 if i % 3 == 0 else 0)
        axis = int(rng.integers(-x.ndim, x.ndim))
        a = axis % x.ndim
        w = rng.standard_normal(x.shape[a:]).astype(np.float32)
        b = rng.standard_normal(x.shape[a:]).astype(np.float32)
        d = x.astype(np.float64)
        red = tuple(range(a, x.ndim))
        mean = d.mean(axis=red, keepdims=True)
        rstd = 1 / np.sqrt(((d - mean) ** 2).mean(axis=red, keepdims=True) + 1e-5)
        y, m, s = pagoda.layernorm(ctx.tensor(x), w, b, axis=axis, return_stats=True)
        close(y.numpy(), (d - mean) * rstd * w + b, 1e-4, 1e-4, f"layernorm {x.shape} {axis}")
        close(m.numpy(), mean, 1e-5, 1e-5, "mean")
        close(s.numpy(), rstd, 1e-3, 1e-5, "rstd")
        ms = (d * d).mean(axis=red, keepdims=True)
        close(pagoda.rms_norm(ctx.tensor(x), w, axis=axis).numpy(), d / np.sqrt(ms + 1e-5) * w,
              1e-4, 1e-5, f"rms_norm {x.shape} {axis}")


def test_batch_and_group_norm(ctx, rng):
    for i in range(CASES):
        g = int(rng.integers(1, 4))
        shape = list(shape_of(rng, 2, 4, 1000))
        shape[1] = g * int(rng.integers(1, 4))
        x = rng.standard_normal(shape).astype(np.float32)
        c = shape[1]
        mean, w, b = (rng.standard_normal(c).astype(np.float32) for _ in range(3))
        var = (rng.random(c) + 0.5).astype(np.float32)
        d = x.astype(np.float64)
        per = (1, c) + (1,) * (x.ndim - 2)
        want = ((d - mean.reshape(per)) / np.sqrt(var.reshape(per).astype(np.float64) + 1e-5)
                * w.reshape(per) + b.reshape(per))
        close(pagoda.batch_norm(ctx.tensor(x), mean, var, w, b).numpy(), want, 1e-5, 1e-5,
              f"batch_norm {x.shape}")
        grp = d.reshape(shape[0], g, -1)
        gm = grp.mean(axis=2, keepdims=True)
        gn = ((grp - gm) / np.sqrt(((grp - gm) ** 2).mean(axis=2, keepdims=True) + 1e-5))
        want = gn.reshape(shape) * w.reshape(per) + b.reshape(per)
        close(pagoda.group_norm(ctx.tensor(x), g, w, b).numpy(), want, 1e-4, 1e-4,
              f"group_norm {x.shape} groups {g}")


def test_errors(ctx):
    a = ctx.tensor(np.zeros((2, 3, 4), np.float32))
    with pytest.raises(pagoda.InvalidArgumentError, match="softmax: axis 3 is outside"):
        pagoda.softmax(a, axis=3)
    with pytest.raises(pagoda.ShapeError, match="weight must have x's dims from axis 1 on"):
        pagoda.layernorm(a, np.ones(5, np.float32), np.ones(5, np.float32), axis=1)
    with pytest.raises(pagoda.InvalidArgumentError, match="2 groups do not divide the 3"):
        pagoda.group_norm(a, 2)
    with pytest.raises(pagoda.ShapeError, match="var must be 1-D"):
        c3 = np.ones(3, np.float32)
        pagoda.batch_norm(a, c3, np.ones(4, np.float32), c3, c3)


def test_matmul_broadcasts(ctx, rng):
    """pagoda.matmul against numpy.matmul: batch dims broadcasting both ways, 1-D operands."""
    for i in range(CASES):
        batch = [int(rng.integers(1, 4)) for _ in range(int(rng.integers(0, 4)))]
        m, k, n = (int(rng.choice([1, 2, 5, 7, 17])) for _ in range(3))
        sa = [d if rng.integers(0, 2) else 1 for d in batch[int(rng.integers(0, len(batch) + 1)):]]
        sb = [d if rng.integers(0, 2) else 1 for d in batch[int(rng.integers(0, len(batch) + 1)):]]
        a = rng.standard_normal(sa + [m, k] if i % 9 else [k]).astype(np.float32)
        b = rng.standard_normal(sb + [k, n] if i % 7 else [k]).astype(np.float32)
        want = np.matmul(a.astype(np.float64), b.astype(np.float64))
        close(pagoda.matmul(ctx.tensor(a), ctx.tensor(b)).numpy(), want, 1e-4, 1e-4,
              f"matmul {a.shape} @ {b.shape}")
    with pytest.raises(pagoda.ShapeError, match="do not broadcast: 2 vs 3"):
        pagoda.matmul(ctx.tensor(np.zeros((2, 3, 4), np.float32)), np.zeros((3, 4, 5), np.float32))


def _torch_like_pool(x, k, s, pads, dil, ceil, mode, include):
    """The pool in float64 by loops (NHWC), PyTorch's rules: -inf padding for max, the padded
    extent counted for average with include, ceil mode dropping a window that starts past the
    leading padding."""
    n, h, w, c = x.shape
    (kh, kw), (sh, sw), (dh, dw), (pt, pl, pb, pr) = k, s, dil, pads

    def size(i, k_, s_, d_, p0, p1):
        q = i + p0 + p1 - (d_ * (k_ - 1) + 1)
        o = (-(-q // s_) if ceil else q // s_) + 1
        return o - 1 if ceil and (o - 1) * s_ >= i + p0 else o

    oh, ow = size(h, kh, sh, dh, pt, pb), size(w, kw, sw, dw, pl, pr)
    y = np.zeros((n, oh, ow, c))
    idx = np.full((n, oh, ow, c), -1.0)
    for i in range(oh):
        for j in range(ow):
            rows = [i * sh - pt + a * dh for a in range(kh)]
            cols = [j * sw - pl + b * dw for b in range(kw)]
            taps = [(r, q) for r in rows for q in cols if 0 <= r < h and 0 <= q < w]
            padded = sum(1 for r in rows for q in cols if -pt <= r < h + pb and -pl <= q < w + pr)
            if not taps:  # a window wholly in the padding
                y[:, i, j, :] = -np.inf if mode == "max" else (0 / padded if include and padded
                                                                else np.nan)
            elif mode == "max":
                vals = np.stack([x[:, r, q, :] for r, q in taps])
                y[:, i, j, :] = vals.max(axis=0)
                best = vals.argmax(axis=0)
                idx[:, i, j, :] = np.array([r * w + q for r, q in taps])[best]
            else:
                tot = sum(x[:, r, q, :].astype(np.float64) for r, q in taps)
                y[:, i, j, :] = tot / (padded if include else len(taps))
    return y, idx


def test_general_pools(ctx, rng):
    for i in range(20):
        x = rng.standard_normal((2, int(rng.integers(5, 12)), int(rng.integers(5, 10)), 3))
        x = x.astype(np.float32)
        k = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        s = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        dil = (1 + i % 2, 1)
        pads = (int(rng.integers(0, 2)), int(rng.integers(0, 2)), int(rng.integers(0, 2)),
                int(rng.integers(0, 2)))
        ceil = bool(i % 3 == 0)
        y, idx = pagoda.max_pool2d(ctx.tensor(x), k, s, pads, dil, ceil, return_indices=True)
        wy, wi = _torch_like_pool(x, k, s, pads, dil, ceil, "max", True)
        close(y.numpy(), wy, 0, 0, f"max_pool2d case {i}")
        assert np.array_equal(idx.numpy(), wi), f"max_pool2d indices case {i}"
        include = bool(i % 2)
        got = pagoda.avg_pool2d(ctx.tensor(x), k, s, pads, ceil, include, dil)
        wy, _ = _torch_like_pool(x, k, s, pads, dil, ceil, "avg", include)
        close(got.numpy(), wy, 1e-5, 1e-6, f"avg_pool2d case {i}")
    g = pagoda.global_maxpool(ctx.tensor(x)).numpy()
    assert np.array_equal(g, x.max(axis=(1, 2)))


def test_conv2d_pads_per_side_and_same(ctx, rng):
    """conv2d with (top, left, bottom, right) pads and auto_pad 'same'/'same_lower', against
    the layer on x padded by NumPy."""
    x = rng.standard_normal((1, 7, 6, 3)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    for pads in [(1, 0, 2, 1), (0, 2, 0, 0), (3, 1, 0, 2)]:
        got = pagoda.conv2d(ctx.tensor(x), w, padding=pads, stride=(2, 1)).numpy()
        xp = np.pad(x, [(0, 0), (pads[0], pads[2]), (pads[1], pads[3]), (0, 0)])
        want = pagoda.conv2d(ctx.tensor(xp), w, stride=(2, 1)).numpy()
        assert np.array_equal(got, want), pads
    for mode in ("same", "same_lower"):
        got = pagoda.conv2d(ctx.tensor(x), w, padding=mode, stride=2).numpy()
        assert got.shape == (1, 4, 3, 4), (mode, got.shape)
        # kernel 3x2, stride 2: H 7 needs 2 rows of padding (1 + 1), W 6 needs 0
        xp = np.pad(x, [(0, 0), (1, 1), (0, 0), (0, 0)])
        want = pagoda.conv2d(ctx.tensor(xp), w, stride=2).numpy()
        assert np.array_equal(got, want), mode
    with pytest.raises(pagoda.InvalidArgumentError, match="is not 'same' or 'same_lower'"):
        pagoda.conv2d(ctx.tensor(x), w, padding="valid2")
