"""The layout ops (transpose, slice_, concat, take, pad, depth_to_space, space_to_depth)
against NumPy on every device: random shapes of rank 0 to 8 with 1s and empty dims, values
compared bit for bit (a NaN with a payload, -0 and the infinities among them), and the
errors."""

from __future__ import annotations

import numpy as np
import pytest

import pagoda

SIZES = [1, 2, 3, 5, 7, 1, 4, 13, 0]
CASES = 100


def shape_of(rng, lo=0, hi=8, limit=3000):
    nd = int(rng.integers(lo, hi + 1))
    shape, n = [], 1
    for _ in range(nd):
        s = SIZES[int(rng.integers(0, len(SIZES) - 1))] if rng.integers(0, 25) else 0
        if s and n * s > limit:
            s = 1
        shape.append(s)
        n *= max(s, 1)
    return tuple(shape)


def values(rng, shape):
    x = (np.arange(int(np.prod(shape)), dtype=np.float32) +
         rng.random(int(np.prod(shape))).astype(np.float32)).reshape(shape)
    special = np.array([np.uint32(0x7FC01234).view(np.float32), -0.0, np.inf, -np.inf],
                       np.float32)
    flat = x.reshape(-1)
    for i in range(0, flat.size, 37):
        flat[i] = special[(i // 37) % 4]
    return x


def same_bits(got, want, what):
    got = np.asarray(got, np.float32)
    want = np.array(want, np.float32, order="C")  # (ascontiguousarray makes 0-d 1-d)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), f"{what}: values differ"


def test_transpose(ctx, rng):
    for i in range(CASES):
        x = values(rng, shape_of(rng))
        axes = None if i % 7 == 3 else list(rng.permutation(x.ndim))
        same_bits(pagoda.transpose(ctx.tensor(x), axes).numpy(), np.transpose(x, axes),
                  f"transpose {x.shape} {axes}")


def bound(rng, n):
    k = int(rng.integers(0, 12))
    return None if k == 0 else int(rng.integers(-2 * n - 2, 2 * n + 3))


def test_slice(ctx, rng):
    for _ in range(CASES):
        x = values(rng, shape_of(rng))
        nd = x.ndim
        axes = list(rng.permutation(nd)[:int(rng.integers(0, nd + 1))]) if nd else []
        starts = [bound(rng, x.shape[a]) for a in axes]
        ends = [bound(rng, x.shape[a]) for a in axes]
        steps = [int(rng.choice([1, 2, 3, -1, -2, -7])) for _ in axes]
        index = [slice(None)] * nd
        for a, b, e, s in zip(axes, starts, ends, steps):
            index[a] = slice(b, e, s)
        neg = [a - nd if a % 2 else a for a in axes]
        got = pagoda.slice_(ctx.tensor(x), starts, ends, neg, steps).numpy()
        same_bits(got, x[tuple(index)], f"slice {x.shape} {index}")


def test_concat(ctx, rng):
    for i in range(CASES):
        base = list(shape_of(rng, 1))
        axis = int(rng.integers(0, len(base)))
        parts = []
        for _ in range(int(rng.integers(1, 5))):
            s = list(base)
            s[axis] = int(rng.choice([0, 1, 2, 5, 7]))
            parts.append(values(rng, s))
        ax = axis if i % 2 else axis - len(base)
        same_bits(pagoda.concat([ctx.tensor(p) for p in parts], ax).numpy(),
                  np.concatenate(parts, ax), f"concat {[p.shape for p in parts]} axis {ax}")


def test_take(ctx, rng):
    for i in range(CASES):
        shape = list(shape_of(rng, 1, 6))
        axis = int(rng.integers(0, len(shape)))
        shape[axis] = shape[axis] or 3
        x = values(rng, shape)
        ishape = tuple(int(rng.integers(0, 4)) for _ in range(int(rng.integers(0, 3))))
        idx = rng.integers(-shape[axis], shape[axis], size=ishape)
        same_bits(pagoda.take(ctx.tensor(x), idx, axis).numpy(), np.take(x, idx, axis),
                  f"take {x.shape} {ishape} axis {axis}")


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad(ctx, rng, mode):
    for i in range(CASES // 4 + 1):
        shape = [s or (0 if mode == "constant" else 2) for s in shape_of(rng, 0, 5, 500)]
        x = values(rng, shape)
        width = np.array([(int(rng.integers(0, 2 * s + 3)), int(rng.integers(0, 2 * s + 3)))
                          for s in shape], np.int64).reshape(len(shape), 2)
        value = float(i) - 0.5
        kw = {"constant_values": value} if mode == "constant" else {}
        want = np.pad(x, width, mode, **kw) if x.ndim else x  # (numpy.pad refuses 0-d)
        same_bits(pagoda.pad(ctx.tensor(x), width, mode, value).numpy(), want,
                  f"pad {mode} {x.shape} {width}")
    # a negative width crops (ONNX Pad): as padding by the positive widths, then cropping
    x = values(rng, (4, 6))
    kw = {"constant_values": 9.0} if mode == "constant" else {}
    same_bits(pagoda.pad(ctx.tensor(x), [(-1, 2), (3, -2)], mode, 9.0).numpy(),
              np.pad(x, [(0, 2), (3, 0)], mode, **kw)[1:, :7], f"pad {mode} crop")


def test_depth_space(ctx, rng):
    for i in range(CASES // 2):
        b = int(rng.integers(1, 4))
        n, c, h, w = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 6)),
                      int(rng.integers(1, 6)))
        x = values(rng, (n, c * b * b, h, w))
        dcr = x.reshape(n, b, b, c, h, w).transpose(0, 3, 4, 1, 5, 2).reshape(n, c, h * b, w * b)
        crd = x.reshape(n, c, b, b, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(n, c, h * b, w * b)
        same_bits(pagoda.depth_to_space(ctx.tensor(x), b).numpy(), dcr, "depth_to_space DCR")
        same_bits(pagoda.depth_to_space(ctx.tensor(x), b, "CRD").numpy(), crd,
                  "depth_to_space CRD")
        same_bits(pagoda.space_to_depth(ctx.tensor(dcr), b).numpy(), x, "space_to_depth")
        tc = ctx.tensor(crd)
        same_bits(pagoda.space_to_depth(tc, b, "CRD").numpy(), x, "space_to_depth CRD")
        assert tc.shape == crd.shape  # the input's temporary 6-D shape is undone


def test_errors(ctx):
    a = ctx.tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(pagoda.InvalidArgumentError, match="perm must name each of x's 2 dims"):
        pagoda.transpose(a, [1, 1])
    with pytest.raises(pagoda.InvalidArgumentError, match="slice: axis -1 is named twice"):
        pagoda.slice_(a, [0, 0], [1, 1], [1, -1])
    with pytest.raises(pagoda.InvalidArgumentError, match="the step of axis 0 is 0"):
        pagoda.slice_(a, [0], [1], [0], [0])
    with pytest.raises(pagoda.ShapeError, match="every tensor must have xs.0.'s dims"):
        pagoda.concat([a, np.zeros((3, 3), np.float32)], 1)
    with pytest.raises(pagoda.InvalidArgumentError, match=r"indices\[1\] = 3 is outside \[-3, 3\)"):
        pagoda.take(a, [0, 3], 1)
    with pytest.raises(pagoda.InvalidArgumentError, match="indices must be integers"):
        pagoda.take(a, [0.5], 1)
    with pytest.raises(pagoda.InvalidArgumentError, match="reflect padding has nothing"):
        pagoda.pad(ctx.tensor(np.zeros((0, 2), np.float32)), 1, "reflect")
    with pytest.raises(pagoda.InvalidArgumentError, match="mode 'symmetric' is not one of"):
        pagoda.pad(a, 1, "symmetric")
    with pytest.raises(pagoda.ShapeError, match="not a multiple of the block size squared"):
        pagoda.depth_to_space(ctx.tensor(np.zeros((1, 3, 2, 2), np.float32)), 2)
    with pytest.raises(pagoda.ShapeError, match="out is"):
        pagoda.transpose(a, out=ctx.tensor(np.zeros((2, 3), np.float32)))


def test_winograd_option():
    """conv_algo="winograd" is taken (the C enum has it)."""
    if not pagoda.devices():
        pytest.skip("no OpenCL device")
    with pagoda.Context(env=False, conv_algo="winograd") as c:
        x = np.random.default_rng(3).standard_normal((1, 8, 8, 4)).astype(np.float32)  # NHWC
        w = np.random.default_rng(4).standard_normal((5, 4, 3, 3)).astype(np.float32)
        got = pagoda.conv2d(c.tensor(x), w, padding=1).numpy()
        xp = np.pad(x.astype(np.float64), [(0, 0), (1, 1), (1, 1), (0, 0)])
        want = np.zeros((1, 8, 8, 5))
        for i in range(3):
            for j in range(3):
                want += np.einsum("nhwc,oc->nhwo", xp[:, i:i + 8, j:j + 8, :], w[:, :, i, j])
        assert np.allclose(got, want, rtol=1e-4, atol=1e-4)
