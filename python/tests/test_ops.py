"""Every op of the binding against a NumPy double-precision reference, on every device, at the
tolerances of the C suites (tests/test_gemm.c, test_attention.c, test_norm.c, test_conv.c,
test_patch.c, test_nonlocal_op.c)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pagoda
from conftest import allclose, slow_device

_erf = np.vectorize(math.erf)


def f32(rng, *shape, amp=1.0):
    return rng.uniform(-amp, amp, shape).astype(np.float32)


# ---- GEMM and linear ---------------------------------------------------------------------------

GEMM_CASES = [  # (batch or 0, M, N, K, trans_a, trans_b, shared B)
    (0, 1, 1, 1, False, False, False),
    (0, 7, 13, 5, False, False, False),
    (0, 33, 17, 65, True, False, False),
    (0, 19, 31, 23, False, True, False),
    (0, 64, 64, 64, True, True, False),
    (3, 5, 9, 11, False, False, False),
    (2, 17, 6, 40, False, True, True),
]


@pytest.mark.parametrize("case", GEMM_CASES, ids=lambda c: "x".join(map(str, c[:4])))
def test_gemm(ctx, rng, case):
    batch, M, N, K, ta, tb, shared = case
    sa = (K, M) if ta else (M, K)
    sb = (N, K) if tb else (K, N)
    a = f32(rng, *((batch,) + sa if batch else sa))
    b = f32(rng, *((batch,) + sb if batch and not shared else sb))
    want = np.matmul(np.swapaxes(a, -1, -2) if ta else a, np.swapaxes(b, -1, -2) if tb else b,
                     dtype=np.float64)
    got = pagoda.gemm(ctx.tensor(a), ctx.tensor(b), trans_a=ta, trans_b=tb).numpy()
    tol = 2e-6 * K + 1e-5
    allclose(got, want.astype(np.float64), tol, tol, f"gemm {case}")


def test_gemm_epilogue(ctx, rng):
    M, N, K = 21, 34, 19
    a, b, c0 = f32(rng, M, K), f32(rng, K, N), f32(rng, M, N)
    bias, res = f32(rng, N), f32(rng, M, N)
    c = ctx.tensor(c0)
    out = pagoda.gemm(a, b, c=c, alpha=0.5, beta=2.0, bias=ctx.tensor(bias), act="gelu",
                      residual=res, ctx=ctx)
    assert out is c
    z = 0.5 * (a.astype(np.float64) @ b) + 2.0 * c0 + bias
    want = 0.5 * z * (1 + _erf(z / math.sqrt(2))) + res
    tol = 2e-6 * K + 1e-5
    allclose(out.numpy(), want, tol, tol, "gemm alpha/beta/bias/gelu/residual")


def test_linear(ctx, rng):
    x, w, b, r = f32(rng, 2, 5, 24), f32(rng, 10, 24), f32(rng, 10), f32(rng, 2, 5, 10)
    lin = pagoda.Linear(ctx, w, b)
    y = lin(ctx.tensor(x), act="relu", residual=r).numpy()
    want = np.maximum(x.astype(np.float64) @ w.T + b, 0) + r
    allclose(y, want, 1e-4, 1e-5, "linear")
    y2 = pagoda.linear(ctx.tensor(x), w).numpy()
    allclose(y2, x.astype(np.float64) @ w.T, 1e-4, 1e-5, "linear without bias")
    lin.close()
    with pytest.raises(pagoda.ClosedError):
        lin(x)


# ---- attention -----------------------------------------------------------------------------


def ref_attention(q, k, v, mask=None, scale=None, causal=False):
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    nq, nk, d = q.shape[2], k.shape[2], q.shape[3]
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(d) if scale is None else scale)
    if mask is not None:
        s = s + mask
    if causal:
        i = np.arange(nq)[:, None]
        j = np.arange(nk)[None, :]
        s = np.where(j <= i + (0 if causal == "top_left" else nk - nq), s, -np.inf)
    mx = np.max(s, axis=-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0)
    e = np.exp(s - mx)
    den = e.sum(axis=-1, keepdims=True)
    p = np.divide(e, den, out=np.zeros_like(e), where=den > 0)
    return p @ v, p


@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 4), (2, 3, 5, 7, 8), (1, 2, 17, 33, 12),
                                   (2, 2, 9, 9, 64)], ids=str)
def test_attention(ctx, rng, shape):
    B, H, nq, nk, d = shape
    q, k, v = f32(rng, B, H, nq, d), f32(rng, B, H, nk, d), f32(rng, B, H, nk, d)
    o = pagoda.attention(ctx.tensor(q), k, v).numpy()
    want, _ = ref_attention(q, k, v)
    allclose(o, want, 1e-4, 1e-5, f"attention {shape}")


def test_attention_mask_causal_probs(ctx, rng):
    B, H, nq, nk, d = 2, 3, 6, 10, 8
    q, k, v = f32(rng, B, H, nq, d), f32(rng, B, H, nk, d), f32(rng, B, H, nk, d)
    mask = f32(rng, nq, nk, amp=2.0)
    mask[1, :] = -np.inf  # a fully masked row gives zeros
    o, p = pagoda.attention(ctx.tensor(q), k, v, mask=mask, scale=0.3, causal=True, probs=True)
    want, wp = ref_attention(q, k, v, mask[None, None], 0.3, True)
    allclose(o.numpy(), want, 1e-4, 1e-5, "attention mask+causal")
    allclose(p.numpy(), wp, 1e-4, 1e-6, "attention probabilities")
    full = f32(rng, B, H, nq, nk)
    o2, p2 = pagoda.attention(ctx.tensor(q), k, v, mask=full, probs=1, probs_rows=(2, 5))
    want2, wp2 = ref_attention(q, k, v, full)
    allclose(o2.numpy(), want2, 1e-4, 1e-5, "attention full mask")
    allclose(p2.numpy(), wp2[:, 1:2, 2:5], 1e-4, 1e-6, "attention probs of head 1, rows 2..5")


def test_attention_qkv(ctx, rng):
    B, N, H, D = 2, 7, 3, 8
    qkv = f32(rng, B, N, 3 * H * D)
    got = pagoda.attention_qkv(ctx.tensor(qkv), H).numpy()
    t = qkv.reshape(B, N, 3, H, D).transpose(2, 0, 3, 1, 4)
    want, _ = ref_attention(t[0], t[1], t[2])
    allclose(got, want.transpose(0, 2, 1, 3).reshape(B, N, H * D), 1e-4, 1e-5, "attention_qkv")


# ---- row ops ---------------------------------------------------------------------------------


@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 7), (5, 768), (2, 1031)])
def test_row_ops(ctx, rng, rows, cols):
    x = f32(rng, rows, cols, amp=3.0)
    w, b = f32(rng, cols), f32(rng, cols)
    xd = x.astype(np.float64)
    mu = xd.mean(-1, keepdims=True)
    var = ((xd - mu) ** 2).mean(-1, keepdims=True)
    tx = ctx.tensor(x)
    allclose(pagoda.layernorm(tx, w, b, 1e-6).numpy(), (xd - mu) / np.sqrt(var + 1e-6) * w + b,
             1e-4, 2e-4, "layernorm")
    allclose(pagoda.layernorm(tx, eps=1e-5).numpy(), (xd - mu) / np.sqrt(var + 1e-5),
             1e-4, 2e-4, "layernorm without affine")
    e = np.exp(0.7 * xd - (0.7 * xd).max(-1, keepdims=True))
    allclose(pagoda.softmax(tx, 0.7).numpy(), e / e.sum(-1, keepdims=True), 1e-4, 1e-6,
             "softmax")
    allclose(pagoda.gelu(tx).numpy(), 0.5 * xd * (1 + _erf(xd / math.sqrt(2))), 1e-5, 1e-5,
             "gelu")
    th = 0.5 * xd * (1 + np.tanh(math.sqrt(2 / math.pi) * (xd + 0.044715 * xd ** 3)))
    allclose(pagoda.gelu(tx, approximate="tanh").numpy(), th, 1e-5, 1e-5, "gelu tanh")
    allclose(pagoda.relu(tx).numpy(), np.maximum(xd, 0), 0, 0, "relu")
    allclose(pagoda.bias_add(tx, b).numpy(), xd + b, 1e-6, 1e-6, "bias_add")
    allclose(pagoda.scale(tx, -1.5).numpy(), -1.5 * xd, 1e-6, 1e-6, "scale")
    allclose(pagoda.add(tx, x).numpy(), 2 * xd, 1e-6, 1e-6, "add")


# ---- convolution, pooling, patch embedding (NHWC) -------------------------------------------


def ref_conv_nhwc(x, w, b, stride, pad, dil, groups):
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, h, wd, cin = x.shape
    cout, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (pad[0], pad[0]), (pad[1], pad[1]), (0, 0)))
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    y = np.zeros((n, oh, ow, cout))
    og = cout // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, i * dil[0]: i * dil[0] + stride[0] * (oh - 1) + 1: stride[0],
                           j * dil[1]: j * dil[1] + stride[1] * (ow - 1) + 1: stride[1],
                           g * cg:(g + 1) * cg]
                y[..., g * og:(g + 1) * og] += patch @ w[g * og:(g + 1) * og, :, i, j].T
    return y + (0 if b is None else b)


CONV_CASES = [  # n, h, w, cin, cout, k, stride, pad, dil, groups
    (1, 5, 5, 3, 4, 1, 1, 0, 1, 1),
    (2, 9, 7, 3, 8, 3, 1, 1, 1, 1),
    (1, 11, 13, 4, 6, 3, 2, 1, 1, 2),
    (1, 8, 8, 6, 6, 3, 1, 1, 1, 6),
    (1, 12, 10, 5, 7, 7, 2, 3, 1, 1),
    (1, 9, 9, 4, 4, 3, 1, 2, 2, 1),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "-".join(map(str, c)))
def test_conv2d(ctx, rng, case):
    n, h, w, cin, cout, k, s, p, d, g = case
    x = f32(rng, n, h, w, cin)
    wt = f32(rng, cout, cin // g, k, k)
    b = f32(rng, cout)
    want = ref_conv_nhwc(x, wt, b, (s, s), (p, p), (d, d), g)
    res = f32(rng, *want.shape)
    got = pagoda.conv2d(ctx.tensor(x), wt, b, stride=s, padding=p, dilation=d, groups=g,
                        act="relu", residual=res).numpy()
    allclose(got, np.maximum(want + res, 0), 1e-4, 1e-5 + 2e-6 * cin * k * k / g, f"conv {case}")


def test_conv2d_batchnorm(ctx, rng):
    x, wt = f32(rng, 1, 6, 6, 3), f32(rng, 5, 3, 3, 3)
    bn = {"weight": f32(rng, 5), "bias": f32(rng, 5), "running_mean": f32(rng, 5),
          "running_var": rng.uniform(0.5, 2, 5).astype(np.float32), "eps": 1e-5}
    conv = pagoda.Conv2d(ctx, wt, None, padding=1, bn=bn)
    got = conv(ctx.tensor(x)).numpy()
    y = ref_conv_nhwc(x, wt, None, (1, 1), (1, 1), (1, 1), 1)
    want = (y - bn["running_mean"]) / np.sqrt(bn["running_var"].astype(np.float64) + 1e-5) * \
        bn["weight"] + bn["bias"]
    allclose(got, want, 1e-4, 1e-5, "conv + folded batch norm")
    assert conv.algorithm(6, 6) in ("gemm", "implicit", "im2col", "direct")
    assert conv.algorithm(6, 6, n=3) == conv.algorithm(6, 6)  # 3 -> 5 channels: no Winograd
    with pytest.raises(ValueError):
        conv.algorithm(6, 6, n=0)


def test_conv2d_winograd(ctx, rng):
    """A wide 3x3 layer: Winograd F(2x2, 3x3) on CPU devices once the batch has 32 tiles of 2x2
    outputs (7x7: 16 an image), against the float64 reference."""
    wt, b = f32(rng, 64, 64, 3, 3, amp=0.1), f32(rng, 64)
    conv = pagoda.Conv2d(ctx, wt, b, padding=1)
    one, two = conv.algorithm(7, 7), conv.algorithm(7, 7, n=2)
    assert one != "winograd"
    assert two == conv.algorithm(16, 16) and two in ("winograd", "im2col")
    x = f32(rng, 2, 7, 7, 64)
    got = conv(ctx.tensor(x)).numpy()
    want = ref_conv_nhwc(x, wt, b, (1, 1), (1, 1), (1, 1), 1)
    allclose(got, want, 1e-4, 1e-5 + 2e-6 * 64 * 9, f"wide 3x3 conv ({two})")


@pytest.mark.parametrize("k,s,p", [(1, 1, 0), (2, 2, 0), (3, 2, 1), (3, 1, 1)])
def test_pools(ctx, rng, k, s, p):
    x = f32(rng, 2, 7, 9, 5)
    xd = x.astype(np.float64)
    n, h, w, c = x.shape
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    xm = np.pad(xd, ((0, 0), (p, p), (p, p), (0, 0)), constant_values=-np.inf)
    xa = np.pad(xd, ((0, 0), (p, p), (p, p), (0, 0)))
    wm = np.full((n, oh, ow, c), -np.inf)
    wa = np.zeros((n, oh, ow, c))
    for i in range(k):
        for j in range(k):
            wm = np.maximum(wm, xm[:, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s])
            wa += xa[:, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s]
    tx = ctx.tensor(x)
    allclose(pagoda.maxpool2d(tx, k, s, p).numpy(), wm, 1e-5, 1e-6, "maxpool2d")
    allclose(pagoda.avgpool2d(tx, k, s, p).numpy(), wa / (k * k), 1e-5, 1e-6, "avgpool2d")
    allclose(pagoda.global_avgpool(tx).numpy(), xd.mean(axis=(1, 2)), 1e-5, 1e-6,
             "global_avgpool")
    allclose(pagoda.nchw_to_nhwc(tx).numpy(), x.transpose(0, 2, 3, 1), 0, 0, "nchw_to_nhwc")


@pytest.mark.parametrize("tokens", ["none", "cls", "cls+dist"])
def test_patch_embed(ctx, rng, tokens):
    B, C, H, W, P, D = 2, 3, 12, 8, 4, 6
    img, wt, b = f32(rng, B, C, H, W), f32(rng, D, C, P, P), f32(rng, D)
    extra = {"none": 0, "cls": 1, "cls+dist": 2}[tokens]
    cls = f32(rng, D) if extra >= 1 else None
    dist = f32(rng, D) if extra == 2 else None
    T = extra + (H // P) * (W // P)
    pos = f32(rng, T, D)
    got = pagoda.patch_embed(ctx.tensor(img), wt, b, cls=cls, dist=dist, pos=pos).numpy()
    conv = ref_conv_nhwc(img.transpose(0, 2, 3, 1), wt, b, (P, P), (0, 0), (1, 1), 1)
    toks = [np.broadcast_to(t.astype(np.float64), (B, 1, D)) for t in (cls, dist) if t is not None]
    want = np.concatenate(toks + [conv.reshape(B, -1, D)], axis=1) + pos
    K = C * P * P
    allclose(got, want, 1e-4, 1e-5 + 2e-6 * K, f"patch_embed {tokens}")


# ---- non-local blocks --------------------------------------------------------------------------


def ref_nonlocal(x, p, mode, sub):
    x = x.astype(np.float64)
    B, H, W, C = x.shape
    Ci = p["g_weight"].shape[0]

    def proj(name):
        return x @ p[name + "_weight"].reshape(Ci, C).T.astype(np.float64) + p[name + "_bias"]

    def pool(t):
        if not sub:
            return t.reshape(B, H * W, -1)
        h2, w2 = H // 2, W // 2
        t = t[:, : 2 * h2, : 2 * w2].reshape(B, h2, 2, w2, 2, -1).max(axis=(2, 4))
        return t.reshape(B, h2 * w2, -1)

    g = pool(proj("g"))
    if mode == "gaussian":
        th, ph = x.reshape(B, H * W, C), pool(x)
    else:
        th, ph = proj("theta").reshape(B, H * W, Ci), pool(proj("phi"))
    n = ph.shape[1]
    if mode in ("embedded_gaussian", "gaussian"):
        s = th @ np.swapaxes(ph, 1, 2)
        e = np.exp(s - s.max(-1, keepdims=True))
        f = e / e.sum(-1, keepdims=True)
    elif mode == "dot_product":
        f = th @ np.swapaxes(ph, 1, 2) / n
    else:
        cw = p["concat_weight"].reshape(-1).astype(np.float64)
        f = np.maximum((th @ cw[:Ci])[:, :, None] + (ph @ cw[Ci:])[:, None, :], 0) / n
    y = f @ g
    wy = y @ p["w_weight"].reshape(C, Ci).T.astype(np.float64) + p["w_bias"]
    bn = p["bn"]
    wy = (wy - bn["running_mean"]) / np.sqrt(bn["running_var"] + bn["eps"]) * bn["weight"] + \
        bn["bias"]
    return x + wy.reshape(B, H, W, C), f


@pytest.mark.parametrize("mode", ["embedded_gaussian", "gaussian", "dot_product", "concatenation"])
@pytest.mark.parametrize("sub", [False, True], ids=["full", "sub"])
def test_nonlocal(ctx, rng, mode, sub):
    B, H, W, C = 2, 5, 6, 8
    Ci = C // 2
    p = {k: f32(rng, Ci, C, 1, 1, amp=0.5) for k in ("theta_weight", "phi_weight", "g_weight")}
    p.update({k: f32(rng, Ci, amp=0.1) for k in ("theta_bias", "phi_bias", "g_bias")})
    p["w_weight"], p["w_bias"] = f32(rng, C, Ci, 1, 1, amp=0.5), f32(rng, C, amp=0.1)
    p["bn"] = {"weight": f32(rng, C), "bias": f32(rng, C), "running_mean": f32(rng, C, amp=0.1),
               "running_var": rng.uniform(0.5, 1.5, C).astype(np.float32), "eps": 1e-5}
    if mode == "concatenation":
        p["concat_weight"] = f32(rng, 1, 2 * Ci, 1, 1)
    x = f32(rng, B, H, W, C)
    want, f = ref_nonlocal(x, p, mode, sub)
    block = pagoda.NonLocal(ctx, C, Ci, mode=mode, subsample=sub, **p)
    tx = ctx.tensor(x)
    qi, qj = 3, 4
    aff = block.affinity(tx, qi, qj)
    z = block(tx).numpy()
    mag = np.abs(want).max()
    allclose(z, want, 1e-4, 1e-4 * mag, f"nonlocal {mode} sub={sub}")
    gh, gw = block.key_grid(H, W)
    wa = f[:, qi * W + qj, :].reshape(B, gh, gw)
    allclose(aff, wa, 1e-4, 1e-6 + 1e-5 * np.abs(wa).max(), f"affinity {mode} sub={sub}")
    z2 = pagoda.nonlocal_(tx, C, Ci, mode=mode, subsample=sub, **p).numpy()
    allclose(z2, z, 0, 0, "nonlocal_ function = NonLocal")


def test_big_gemm_not_on_rusticl(ctx, rng):
    """One ViT-sized GEMM per device (off llvmpipe, where it would take seconds)."""
    if slow_device(ctx):
        pytest.skip("software rasteriser")
    a, b = f32(rng, 197, 768), f32(rng, 768, 384)
    got = pagoda.gemm(a, b, ctx=ctx).numpy()
    tol = 2e-6 * 768 + 1e-5
    allclose(got, a.astype(np.float64) @ b, tol, tol, "gemm 197x384x768")


# ---- hard attention (top-k and sampled) -------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 5, 9])
def test_attention_topk(ctx, rng, k):
    B, H, nq, nk, d = 2, 2, 5, 9, 8
    # grid-valued inputs: scores are exact, so the k highest keys are unambiguous up to ties,
    # which go to the lower key index (a stable sort on -score)
    q = rng.integers(-3, 4, (B, H, nq, d)).astype(np.float32) / 4
    kk = rng.integers(-3, 4, (B, H, nk, d)).astype(np.float32) / 4
    v = f32(rng, B, H, nk, d)
    o, p = pagoda.attention(ctx.tensor(q), kk, v, mode="topk", topk=k, probs=True)
    s = q.astype(np.float64) @ np.swapaxes(kk, -1, -2) / math.sqrt(d)
    keep = np.zeros_like(s, dtype=bool)
    order = np.argsort(-s, axis=-1, kind="stable")[..., :k]
    np.put_along_axis(keep, order, True, axis=-1)
    s = np.where(keep, s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    wp = e / e.sum(-1, keepdims=True)
    allclose(p.numpy(), wp, 1e-4, 1e-6, f"top-{k} probabilities")
    allclose(o.numpy(), wp @ v.astype(np.float64), 1e-4, 1e-5, f"top-{k} output")


def test_attention_sample(ctx, rng):
    B, H, nq, nk, d, seed = 2, 3, 4, 7, 4, 987654321
    q, k, v = f32(rng, B, H, nq, d), f32(rng, B, H, nk, d), f32(rng, B, H, nk, d)
    o, p = pagoda.attention(ctx.tensor(q), k, v, mode="sample", seed=seed, probs=True)
    o, p = o.numpy(), p.numpy()
    _, sp = ref_attention(q, k, v)
    for b in range(B):
        for h in range(H):
            for i in range(nq):
                row = p[b, h, i]
                assert sorted(row.tolist()) == [0.0] * (nk - 1) + [1.0], "not one-hot"
                j = int(np.argmax(row))
                u = pagoda.attention_uniform(seed, b, h, i, H, nq)
                cdf = np.cumsum(sp[b, h, i])
                want = int(np.searchsorted(cdf, u, side="right"))
                # a draw within float rounding of a boundary may go either way
                assert j == want or abs(cdf[min(j, want)] - u) < 1e-5, (b, h, i, j, want)
                np.testing.assert_array_equal(o[b, h, i], v[b, h, j])
    o2, _ = pagoda.attention(ctx.tensor(q), k, v, mode="sample", seed=seed, probs=True)
    np.testing.assert_array_equal(o2.numpy(), o)  # a pure function of the seed
    with pytest.raises(pagoda.InvalidArgumentError):
        pagoda.attention(ctx.tensor(q), k, v, mode="topk")
    with pytest.raises(pagoda.InvalidArgumentError):
        pagoda.attention(ctx.tensor(q), k, v, mode="hard")


@pytest.mark.parametrize("causal", [False, True, "top_left"])
def test_attention_gqa_layouts_and_alignment(ctx, rng, causal):
    """Grouped-query and multi-query attention (K/V with fewer heads, repeated per query head
    in the reference as PyTorch's enable_gqa does), the token-major layout 'bshd' read in
    place, and both causal alignments with nq != nk."""
    for B, H, Hkv, nq, nk, d in [(2, 4, 2, 5, 9, 8), (1, 6, 1, 7, 3, 16), (2, 3, 3, 9, 4, 4),
                                 (1, 8, 4, 13, 13, 32)]:
        q = rng.standard_normal((B, H, nq, d)).astype(np.float32)
        k = rng.standard_normal((B, Hkv, nk, d)).astype(np.float32)
        v = rng.standard_normal((B, Hkv, nk, d)).astype(np.float32)
        rep = H // Hkv
        want, _ = ref_attention(q, np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1),
                                causal=causal)
        got = pagoda.attention(ctx.tensor(q), ctx.tensor(k), ctx.tensor(v), causal=causal)
        assert np.allclose(got.numpy(), want, rtol=1e-4, atol=1e-5), (B, H, Hkv, nq, nk, d)
        t = (0, 2, 1, 3)
        got = pagoda.attention(ctx.tensor(q.transpose(t).copy()),
                               ctx.tensor(k.transpose(t).copy()),
                               ctx.tensor(v.transpose(t).copy()), causal=causal, layout="bshd")
        assert got.shape == (B, nq, H, d)
        assert np.allclose(got.numpy(), want.transpose(t), rtol=1e-4, atol=1e-5)
    with pytest.raises(pagoda.ShapeError, match="a head count dividing 4"):
        pagoda.attention(ctx.tensor(q[:, :4]), ctx.tensor(k[:, :3]), ctx.tensor(v[:, :3]))
    with pytest.raises(pagoda.InvalidArgumentError, match="causal is False, True"):
        pagoda.attention(ctx.tensor(q), ctx.tensor(q), ctx.tensor(q), causal="diagonal")


def test_attention_value_head_larger(ctx, rng):
    """A value head size larger than the key's (grouped heads too): o takes v's head size."""
    for H, Hkv, dk, dv in [(2, 2, 8, 10), (4, 2, 4, 12), (3, 1, 8, 21)]:
        q = rng.standard_normal((2, H, 5, dk)).astype(np.float32)
        k = rng.standard_normal((2, Hkv, 7, dk)).astype(np.float32)
        v = rng.standard_normal((2, Hkv, 7, dv)).astype(np.float32)
        rep = H // Hkv
        want, _ = ref_attention(q, np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1),
                                causal="top_left")
        got = pagoda.attention(ctx.tensor(q), ctx.tensor(k), ctx.tensor(v), causal="top_left")
        assert got.shape == (2, H, 5, dv)
        assert np.allclose(got.numpy(), want, rtol=1e-4, atol=1e-5), (H, Hkv, dk, dv)


def ref_attention_ext(q, k, v, mask=None, causal=None, softcap=0.0, window=None, lens=None,
                      past=0):
    """The extended attention in double from its definition: the visible keys of query i at
    position p (after `past` cached keys for 'after_past', bottom-right of each sequence's key
    count, or top-left), soft-capped scores, a bool or additive mask. Returns (o, probs)."""
    B, H, nq, d = q.shape
    rep = H // k.shape[1]
    k, v = np.repeat(k, rep, 1).astype(np.float64), np.repeat(v, rep, 1).astype(np.float64)
    nk = k.shape[2]
    s = np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k) / np.sqrt(d)
    if softcap:
        s = softcap * np.tanh(s / softcap)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == np.bool_ else s + mask
    i, j = np.arange(nq)[:, None], np.arange(nk)[None, :]
    vis = np.ones((B, 1, nq, nk), bool)
    for b in range(B):
        nkb = nk if lens is None else lens[b]
        p = i + (past if causal == "after_past" else 0 if causal == "top_left" else nkb - nq)
        ok = (j < nkb) & (i >= 0)
        if causal:
            ok &= j <= p
        if window is not None:
            if window[0] is not None:
                ok &= p - j <= window[0]
            if window[1] is not None:
                ok &= j - p <= window[1]
        vis[b, 0] = ok
    s = np.where(vis, s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isneginf(m), 0, m))
    tot = e.sum(-1, keepdims=True)
    p = np.where(tot > 0, e / np.where(tot > 0, tot, 1), 0)
    return p @ v, p


@pytest.mark.parametrize("causal", [False, "bottom_right", "top_left"])
def test_attention_extended(ctx, rng, causal):
    """Soft-capping, boolean and broadcast masks, sliding windows, per-sequence key counts, a
    value head smaller than the key's and the probabilities as scores, together."""
    B, H, Hkv, nq, nk, dk, dv = 2, 4, 2, 5, 11, 8, 3
    q, k = f32(rng, B, H, nq, dk, amp=2), f32(rng, B, Hkv, nk, dk, amp=2)
    v = f32(rng, B, Hkv, nk, dv)
    mask = rng.uniform(size=(B, 1, 1, nk)) > 0.3
    lens = [11, 6]
    for window in [(2, 1), (None, 0), (4, None)]:
        o, p = pagoda.attention(ctx.tensor(q), ctx.tensor(k), ctx.tensor(v), mask=mask,
                                causal=causal, softcap=3.0, window=window, kv_lens=lens,
                                window_align="top_left" if causal == "top_left" else
                                "bottom_right", scores="probs")
        want, wp = ref_attention_ext(q, k, v, mask, causal or "bottom_right", 3.0, window,
                                     lens) if causal else ref_attention_ext(
            q, k, v, mask, None, 3.0, window, lens)
        assert np.allclose(o.numpy(), want, rtol=1e-4, atol=1e-5), window
        assert np.allclose(p.numpy(), wp, rtol=1e-4, atol=1e-6), window
    # additive masks broadcast from [nq, nk] and [B, H, 1, nk]; raw and masked scores
    for shape in [(nq, nk), (B, H, 1, nk)]:
        am = f32(rng, *shape, amp=2)
        o, raw = pagoda.attention(ctx.tensor(q), ctx.tensor(k), ctx.tensor(v), mask=am,
                                  scores="raw")
        want, _ = ref_attention_ext(q, k, v, np.broadcast_to(am, (B, H, nq, nk)))
        assert np.allclose(o.numpy(), want, rtol=1e-4, atol=1e-5), shape
        sc = np.einsum("bhid,bhjd->bhij", q.astype(np.float64),
                       np.repeat(k, 2, 1).astype(np.float64)) / np.sqrt(dk)
        assert np.allclose(raw.numpy(), sc, rtol=1e-4, atol=1e-5)
        _, msk = pagoda.attention(ctx.tensor(q), ctx.tensor(k), ctx.tensor(v), mask=am,
                                  causal="top_left", scores="masked")
        wm = np.where(np.tril(np.ones((nq, nk), bool)), sc + am, -np.inf)
        assert np.array_equal(np.isneginf(msk.numpy()), np.isneginf(wm))
        fin = ~np.isneginf(wm)
        assert np.allclose(msk.numpy()[fin], wm[fin], rtol=1e-4, atol=1e-5)


def test_attention_kv_cache(ctx, rng):
    """A decoder's steps: each call appends its keys and values to the caches in place and
    attends over all of them; equal to one attention over the concatenated keys."""
    B, H, Hkv, d, cap = 2, 4, 1, 8, 32
    kc, vc = ctx.tensor(np.zeros((B, Hkv, cap, d), np.float32)), ctx.tensor(
        np.zeros((B, Hkv, cap, d), np.float32))
    ks, vs, past = [], [], 0
    for n in [7, 1, 1, 3]:
        q, k, v = f32(rng, B, H, n, d), f32(rng, B, Hkv, n, d), f32(rng, B, Hkv, n, d)
        ks.append(k), vs.append(v)
        o = pagoda.attention(ctx.tensor(q), ctx.tensor(k), ctx.tensor(v), k_cache=kc,
                             v_cache=vc, past=past, causal="after_past")
        want, _ = ref_attention_ext(q, np.concatenate(ks, 2), np.concatenate(vs, 2),
                                    causal="after_past", past=past)
        assert np.allclose(o.numpy(), want, rtol=1e-4, atol=1e-5), past
        past += n
        np.testing.assert_array_equal(kc.numpy()[:, :, :past], np.concatenate(ks, 2))
        assert not kc.numpy()[:, :, past:].any()
    with pytest.raises(pagoda.ShapeError, match="must hold"):
        pagoda.attention(ctx.tensor(q), ctx.tensor(k), ctx.tensor(v), k_cache=kc, v_cache=vc,
                         past=cap)
    with pytest.raises(pagoda.InvalidArgumentError, match="pagoda Tensor"):
        pagoda.attention(ctx.tensor(q), ctx.tensor(k), ctx.tensor(v),
                         k_cache=np.zeros((B, Hkv, cap, d), np.float32), v_cache=vc)
    with pytest.raises(pagoda.InvalidArgumentError, match="softcap"):
        pagoda.attention(ctx.tensor(q), ctx.tensor(k), ctx.tensor(v), softcap=-1.0)
    with pytest.raises(pagoda.InvalidArgumentError, match="scores is"):
        pagoda.attention(ctx.tensor(q), ctx.tensor(k), ctx.tensor(v), scores="logits")


def test_attention_float16(ctx, rng):
    """float16 q, k and v (half storage, float arithmetic, one rounding of the output) give a
    float16 result within half precision of the double reference on the rounded inputs."""
    q, k, v = (f32(rng, 2, 4, n, 8, amp=2).astype(np.float16) for n in (5, 9, 9))
    o = pagoda.attention(q, k[:, :2], v[:, :2], causal="top_left", softcap=4.0, ctx=ctx)
    assert o.dtype == np.float16 and o.shape == (2, 4, 5, 8)
    want, _ = ref_attention_ext(q.astype(np.float32), k[:, :2].astype(np.float32),
                                v[:, :2].astype(np.float32), causal="top_left", softcap=4.0)
    assert np.allclose(o.astype(np.float64), want, rtol=1e-3, atol=1e-3)
    with pytest.raises(pagoda.InvalidArgumentError, match="out= with float16"):
        pagoda.attention(q, k, v, out=ctx.tensor(np.zeros((2, 4, 5, 8), np.float32)))
