"""Pagoda's ops on device tensors.

Every op takes pagoda.Tensor arguments (NumPy arrays are accepted too and uploaded for the
call; give ctx= when no argument is a Tensor) and returns a new Tensor, or writes into `out=`.
Shapes are checked by the C library, whose errors (pagoda.ShapeError, ...) name both shapes.
Activations of the CNN ops (conv2d, pools, nonlocal) are NHWC, as in the C API.
"""

from __future__ import annotations

from ctypes import POINTER, byref, c_float, c_int, c_int64, c_uint64, c_void_p, cast, pointer
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import builtins
import math
import ctypes

import numpy as np

from ._capi import (
    AttentionArgs,
    AttentionExt,
    BatchNorm,
    Conv2dDesc,
    GemmArgs,
    NonlocalDesc,
    NonlocalParams,
    PoolDesc,
    View,
    api,
    c_integer,
)
from .device import Context
from .errors import InvalidArgumentError, ShapeError, raise_from
from .tensor import Handle, Tensor, as_float32

ArrayLike = Union[Tensor, np.ndarray, Sequence[Any]]
_ACTS = {None: 0, "none": 0, "relu": 1, "gelu": 2}


def _act(act: Optional[str]) -> int:
    if act not in _ACTS:
        raise InvalidArgumentError(f"pagoda: act wants None, 'relu' or 'gelu', not {act!r}")
    return _ACTS[act]


def _find_ctx(ctx: Optional[Context], args: Sequence[Any]) -> Context:
    for a in args:
        if isinstance(a, Tensor):
            if ctx is not None and a._ctx is not ctx:
                raise InvalidArgumentError("pagoda: a tensor of another context was given")
            ctx = a._ctx
    if ctx is None:
        raise InvalidArgumentError("pagoda: no argument is a pagoda.Tensor: give ctx=")
    return ctx


class _Call:
    """One op call (a `with` block): holds the context for this thread, turns arrays into
    temporary tensors (freed at the end), checks that tensors belong to the context."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.temps: List[Tensor] = []

    def __enter__(self) -> "_Call":
        self.ctx._enter()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            for t in self.temps:
                t._free_locked()
        finally:
            self.ctx._exit()

    def t(self, x: Optional[ArrayLike], what: str) -> Optional[Tensor]:
        if x is None:
            return None
        if isinstance(x, Tensor):
            if x._ctx is not self.ctx:
                raise InvalidArgumentError(f"pagoda: {what} is a tensor of another context")
            x._handle()
            return x
        t = Tensor.from_array(self.ctx, as_float32(x, what))
        self.temps.append(t)
        return t

    def h(self, x: Optional[ArrayLike], what: str) -> Optional[int]:
        t = self.t(x, what)
        return None if t is None else t._handle()

    def out(self, out: Optional[Tensor], shape: Sequence[int], what: str = "out") -> Tensor:
        if out is None:
            return Tensor.empty(self.ctx, shape)
        t = self.t(out, what)
        assert t is not None
        if tuple(t.shape) != tuple(shape):
            raise ShapeError(f"pagoda: {what} is {list(t.shape)}, the op writes {list(shape)}")
        return t


def _call(ctx: Optional[Context], *args: Any) -> _Call:
    return _Call(_find_ctx(ctx, args))


def _run(rc_fn: Any, *args: Any) -> None:
    err = c_void_p()
    raise_from(rc_fn(*args, byref(err)), err)


# ---- GEMM and linear ---------------------------------------------------------------------------


def gemm(a: ArrayLike, b: ArrayLike, *, c: Optional[Tensor] = None, trans_a: bool = False,
         trans_b: bool = False, alpha: float = 1.0, beta: float = 0.0,
         bias: Optional[ArrayLike] = None, act: Optional[str] = None,
         residual: Optional[ArrayLike] = None, ctx: Optional[Context] = None) -> Tensor:
    """C = act(alpha·op(A)·op(B) + beta·C + bias) + residual, with op(X) = Xᵀ when trans_x.
    A, B and C are 2-D [rows, cols] or 3-D [batch, rows, cols] (a 2-D B is shared by every
    batch). `c` is the output (read when beta != 0); None allocates it."""
    with _call(ctx, a, b, c, bias, residual) as k:
        ta, tb = k.t(a, "a"), k.t(b, "b")
        assert ta is not None and tb is not None
        sa, sb = ta.shape, tb.shape
        if len(sa) not in (2, 3) or len(sb) not in (2, 3):
            raise ShapeError(f"pagoda: gemm: a {list(sa)} and b {list(sb)} must be 2-D or 3-D")
        m = sa[-1] if trans_a else sa[-2]
        n = sb[-2] if trans_b else sb[-1]
        shape = (sa[0], m, n) if len(sa) == 3 else (m, n)
        if c is None and beta != 0.0:
            raise InvalidArgumentError("pagoda: gemm: beta != 0 reads C: give c=")
        tc = k.out(c, shape, "c") if c is not None else Tensor.empty(k.ctx, shape)
        args = GemmArgs(int(bool(trans_a)), int(bool(trans_b)), float(alpha), float(beta),
                        k.h(bias, "bias"), _act(act), k.h(residual, "residual"))
        _run(api.pgd_gemm, k.ctx._h, byref(args), ta._handle(), tb._handle(), tc._handle())
        return tc


class Linear(Handle):
    """A linear layer y = act(x·Wᵀ + b) + residual with W [out, in] as PyTorch stores it,
    prepared once for the device."""

    def __init__(self, ctx: Context, weight: ArrayLike, bias: Optional[ArrayLike] = None) -> None:
        with _call(ctx, weight, bias) as k:
            w = k.t(weight, "weight")
            assert w is not None
            self.out_features, self.in_features = (w.shape + (0, 0))[:2]
            if w.ndim != 2:
                raise ShapeError(f"pagoda: Linear: weight is {list(w.shape)}, not [out, in]")
            out = c_void_p()
            _run(api.pgd_linear_create, ctx._h, w._handle(), k.h(bias, "bias"), byref(out))
            super().__init__(ctx, out.value, api.pgd_linear_destroy)

    def __call__(self, x: ArrayLike, *, act: Optional[str] = None,
                 residual: Optional[ArrayLike] = None, out: Optional[Tensor] = None) -> Tensor:
        with _call(self._ctx, x, residual, out) as k:
            tx = k.t(x, "x")
            assert tx is not None
            shape = tx.shape[:-1] + (self.out_features,)
            y = k.out(out, shape)
            _run(api.pgd_linear_forward, k.ctx._h, self._handle(), tx._handle(), _act(act),
                 k.h(residual, "residual"), y._handle())
            return y


def linear(x: ArrayLike, weight: ArrayLike, bias: Optional[ArrayLike] = None, *,
           act: Optional[str] = None, residual: Optional[ArrayLike] = None,
           ctx: Optional[Context] = None) -> Tensor:
    """y = act(x·Wᵀ + b) + residual (a Linear made and freed for this call)."""
    c = _find_ctx(ctx, (x, weight, bias, residual))
    layer = Linear(c, weight, bias)
    try:
        return layer(x, act=act, residual=residual)
    finally:
        layer.close()


# ---- attention ---------------------------------------------------------------------------------


def _view(t: Optional[Tensor], shape4: Sequence[int], bshd: bool = False) -> View:
    """The view of a [B, H, N, D] tensor, or with bshd of a [B, N, H, D] one, as B, H, N, D."""
    if t is None:
        return View(None, 0, 0, 0, 0)
    _, h, n, d = shape4
    if bshd:
        return View(t._handle(), 0, h * n * d, d, h * d)
    return View(t._handle(), 0, h * n * d, n * d, d)


_ATT_MODES = {"soft": 0, "topk": 1, "sample": 2}
_CAUSAL = {False: 0, True: 1, "bottom_right": 1, "top_left": 2, "after_past": 3}


def _mask_view(tm: Tensor, full: Tuple[int, int, int, int]) -> View:
    """The view of a mask that broadcasts (NumPy's rules, keys not broadcast) to full."""
    ms = tuple(tm.shape)
    ms4 = (1,) * (4 - len(ms)) + ms
    if not 1 <= len(ms) <= 4 or ms4[3] != full[3] or any(
            m not in (1, f) for m, f in zip(ms4[:3], full[:3])):
        raise ShapeError(f"pagoda: attention: mask {list(ms)} does not broadcast to "
                         f"{list(full)} (its last dim must be the key count)")
    strides = (ms4[1] * ms4[2] * ms4[3], ms4[2] * ms4[3], ms4[3])
    return View(tm._handle(), 0, *(0 if ms4[i] == 1 else strides[i] for i in range(3)))


def _cache_view(c: _Call, t: Any, what: str, shape: Tuple[int, int, int], bshd: bool,
                past: int, n: int) -> View:
    """A KV cache view: a Tensor [B, Hkv, cap, d] ([B, cap, Hkv, d] with bshd), cap >= past + n."""
    if not isinstance(t, Tensor):
        raise InvalidArgumentError(f"pagoda: attention: {what} must be a pagoda Tensor (the call "
                                   f"writes the new tokens into it)")
    tc = c.t(t, what)
    assert tc is not None
    sc = tuple(tc.shape)
    if len(sc) == 4 and bshd:
        sc = (sc[0], sc[2], sc[1], sc[3])
    B, H, d = shape
    if len(sc) != 4 or (sc[0], sc[1], sc[3]) != (B, H, d) or sc[2] < past + n:
        raise ShapeError(f"pagoda: attention: {what} {list(tc.shape)} must hold [{B}, {H}, "
                         f">= {past + n}, {d}] ({past} past tokens and {n} new)")
    return _view(tc, sc, bshd)


_SCORES = {"raw": 1, "masked": 2, "probs": 3}


def _halves(c: _Call, x: np.ndarray) -> Tensor:
    """A float16 array as a tensor of its IEEE halves, two a float (pgd_attention_ext.half_io)."""
    a = np.ascontiguousarray(x, dtype=np.float16).reshape(-1)
    if a.size % 2:
        a = np.append(a, np.float16(0))
    t = Tensor.from_array(c.ctx, a.view(np.float32))
    c.temps.append(t)
    return t


def _attention_ext(c: _Call, args: AttentionArgs, sizes: Tuple[int, ...], bshd: bool,
                   kw: Dict[str, Any]) -> Tuple[Any, Optional[Tensor], Any]:
    """pgd_attention_ext from attention()'s keywords, the scores tensor (or None) and what must
    stay alive during the call."""
    B, H, Hkv, Nq, Nk, D, Dv = sizes
    ext = AttentionExt()
    ext.size, ext.kv_heads, ext.v_head_dim = ctypes.sizeof(AttentionExt), Hkv, Dv
    ext.softcap = float(kw["softcap"] or 0.0)
    if not ext.softcap >= 0.0 or math.isinf(ext.softcap):
        raise InvalidArgumentError(f"pagoda: attention: softcap {kw['softcap']!r} must be a "
                                   f"positive finite number (or 0/None: none)")
    ext.mask_bool = int(bool(kw["mask_bool"]))
    ext.half_io = int(bool(kw["half"]))
    if kw["window"] is not None:
        left, right = kw["window"]
        ext.window = 1
        ext.window_left = -1 if left is None else c_integer(left, c_int64, "attention: window")
        ext.window_right = -1 if right is None else c_integer(right, c_int64, "attention: window")
    if kw["window_align"] not in _CAUSAL or kw["window_align"] is True:
        raise InvalidArgumentError(f"pagoda: attention: window_align is 'bottom_right', "
                                   f"'top_left' or 'after_past', not {kw['window_align']!r}")
    ext.window_align = _CAUSAL[kw["window_align"]]
    if args.causal:
        ext.window_align = 0
    keep: List[Any] = []
    past = 0
    if kw["k_cache"] is not None or kw["v_cache"] is not None or kw["past"]:
        if kw["k_cache"] is None or kw["v_cache"] is None:
            raise InvalidArgumentError("pagoda: attention: k_cache and v_cache go together")
        if kw["half"]:
            raise InvalidArgumentError("pagoda: attention: a KV cache with float16 inputs (the C "
                                       "API's half_io takes caches of halves)")
        past = c_integer(kw["past"], c_int64, "attention: past", 0)
        ext.k_cache = _cache_view(c, kw["k_cache"], "k_cache", (B, Hkv, D), bshd, past, Nk)
        ext.v_cache = _cache_view(c, kw["v_cache"], "v_cache", (B, Hkv, Dv), bshd, past, Nk)
        ext.past = past
    if kw["kv_lens"] is not None:
        lens = [c_integer(x, c_int64, "attention: kv_lens") for x in
                np.asarray(kw["kv_lens"]).reshape(-1).tolist()]
        if len(lens) != B:
            raise ShapeError(f"pagoda: attention: kv_lens has {len(lens)} entries for batch {B}")
        arr = (c_int64 * B)(*lens)
        keep.append(arr)
        ext.kv_lens = ctypes.cast(arr, POINTER(c_int64))
    sc = None
    if kw["scores"] is not None:
        if kw["scores"] not in _SCORES:
            raise InvalidArgumentError(f"pagoda: attention: scores is 'raw', 'masked' or "
                                       f"'probs', not {kw['scores']!r}")
        sc = Tensor.empty(c.ctx, (B, H, Nq, past + Nk))
        ext.scores, ext.scores_kind = sc._handle(), _SCORES[kw["scores"]]
    return ext, sc, keep


def attention(q: ArrayLike, k: ArrayLike, v: ArrayLike, *, mask: Optional[ArrayLike] = None,
              scale: Optional[float] = None, causal: Union[bool, str] = False,
              probs: Union[bool, int] = False, probs_rows: Optional[Tuple[int, int]] = None,
              mode: str = "soft", topk: int = 0, seed: int = 0, layout: str = "bhsd",
              softcap: Optional[float] = None, mask_bool: bool = False,
              window: Optional[Tuple[Optional[int], Optional[int]]] = None,
              window_align: str = "bottom_right", kv_lens: Optional[ArrayLike] = None,
              scores: Optional[str] = None, k_cache: Optional[Tensor] = None,
              v_cache: Optional[Tensor] = None, past: int = 0,
              out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Any:
    """Scaled-dot-product attention O = softmax(Q·Kᵀ·scale + mask)·V (fused, flash style).

    q [B, H, Nq, D], k [B, Hkv, Nk, D] and v [B, Hkv, Nk, Dv] with Hkv dividing H (fewer
    key/value heads: grouped or multi-query attention, query head h reading key/value head
    h // (H // Hkv) as PyTorch's enable_gqa, K and V never copied) and any value head size Dv;
    returns o [B, H, Nq, Dv]. layout="bshd" takes and gives [B, N, H, D] instead (the
    token-major layout of a fused projection), read in place through strided views. `mask` is
    additive, or boolean (a NumPy bool array, or mask_bool=True: 0 hides a key), of any shape
    that broadcasts to [B, H, Nq, Nk] with Nk as its last dim (e.g. [Nq, Nk], [B, 1, 1, Nk]).
    scale None means 1/sqrt(D). causal: True or "bottom_right" makes key j visible to query i
    iff j <= i + Nk - Nq (the last query sees every key), "top_left" iff j <= i (PyTorch's
    is_causal=True), "after_past" iff j <= past + i (queries following a cache's past tokens,
    as ONNX Attention with past_key). softcap > 0 turns each score s into softcap·tanh(s / softcap) before the
    mask. window=(left, right) keeps keys p - left <= j <= p + right (None: open), p the row's
    position under causal's alignment (or window_align's). kv_lens (one count a sequence)
    hides the keys past each sequence's count and aligns bottom-right to it. k_cache and
    v_cache (Tensors [B, Hkv, capacity, D / Dv]) with `past`: k and v are written into the
    caches at tokens [past, past + Nk) and the attention runs over the caches' first
    past + Nk tokens. scores="raw" | "masked" | "probs" also returns the scores [B, H, Nq,
    keys] (raw: q·k·scale soft-capped; masked: with the mask, -inf where hidden; probs: the
    weights). probs=True (all heads) or a head index also returns the probabilities
    [B, heads, q1 - q0, Nk] of query rows probs_rows = (q0, q1) (default all rows), for plain
    attention. Hard attention: mode="topk" keeps the `topk` highest scores of each row (ties to
    the lower key) and renormalises; mode="sample" draws one key per row from the softmax with
    `seed` (the same draw on every device: attention_uniform gives its uniform number).
    Probabilities and hard modes need Hkv == H, equal head sizes and none of the keywords
    after `layout`."""
    if mode not in _ATT_MODES:
        raise InvalidArgumentError(f"pagoda: attention: mode is soft, topk or sample, not "
                                   f"{mode!r}")
    if layout not in ("bhsd", "bshd"):
        raise InvalidArgumentError(f"pagoda: attention: layout is 'bhsd' or 'bshd', not "
                                   f"{layout!r}")
    if not isinstance(causal, (bool, str)) or causal not in _CAUSAL:
        raise InvalidArgumentError(f"pagoda: attention: causal is False, True, 'bottom_right', "
                                   f"'top_left' or 'after_past', not {causal!r}")
    bshd = layout == "bshd"
    topk = c_integer(topk, c_int64, "attention: topk", 0)
    if mode == "topk" and topk < 1:
        raise InvalidArgumentError(f"pagoda: attention: mode 'topk' needs topk >= 1, not {topk}")
    seed = c_integer(seed, c_uint64, "attention: seed")
    if mask is not None and not isinstance(mask, Tensor) and np.asarray(mask).dtype == np.bool_:
        mask, mask_bool = np.asarray(mask, dtype=np.float32), True
    half = all(isinstance(x, np.ndarray) and x.dtype == np.float16 for x in (q, k, v))
    if half and out is not None:
        raise InvalidArgumentError("pagoda: attention: out= with float16 inputs (the result is "
                                   "a new float16 array)")
    kw = dict(softcap=softcap, mask_bool=mask_bool, window=window, window_align=window_align,
              kv_lens=kv_lens, scores=scores, k_cache=k_cache, v_cache=v_cache, past=past,
              half=half)
    extended = (bool(softcap) or bool(mask_bool) or past != 0 or causal == "after_past" or half or
                any(kw[n] is not None for n in ("window", "kv_lens", "scores", "k_cache",
                                               "v_cache")))
    with _call(ctx, q, k, v, mask, out) as c:
        if half:  # q, k and v as halves, their shapes the arrays'
            tq, tk, tv = (_halves(c, x) for x in (q, k, v))  # type: ignore[arg-type]
            sq, sk, sv = (tuple(x.shape) for x in (q, k, v))  # type: ignore[union-attr]
        else:
            tq, tk, tv = c.t(q, "q"), c.t(k, "k"), c.t(v, "v")
            assert tq is not None and tk is not None and tv is not None
            sq, sk, sv = tq.shape, tk.shape, tv.shape
        if len(sq) != 4 or len(sk) != 4 or len(sv) != 4:
            raise ShapeError(f"pagoda: attention: q {list(sq)}, k {list(sk)} and v {list(sv)} "
                             f"must be 4-D [batch, heads, tokens, head_dim]" +
                             (" ([batch, tokens, heads, head_dim] with layout 'bshd')"
                              if bshd else ""))
        if bshd:  # as B, H, N, D from here on
            sq, sk, sv = ((x[0], x[2], x[1], x[3]) for x in (sq, sk, sv))
        B, H, Nq, D = sq
        Hkv, Nk, Dv = sk[1], sk[2], sv[3]
        if (sk != (B, Hkv, Nk, D) or sv[:3] != sk[:3] or Hkv < 1 or H % Hkv):
            raise ShapeError(f"pagoda: attention: k {list(sk)} and v {list(sv)} "
                             f"must both have q's batch, k q's head_dim, and a head count "
                             f"dividing {H} (q {list(sq)})")
        so = (B, H, Nq, Dv)
        oshape = (B, Nq, H, Dv) if bshd else so
        o = Tensor.empty(c.ctx, ((B * H * Nq * Dv + 1) // 2,)) if half else c.out(out, oshape)
        args = AttentionArgs()
        args.batch, args.heads, args.nq, args.nk, args.head_dim = B, H, Nq, Nk, D
        args.scale = 0.0 if scale is None else float(scale)
        if scale is not None and float(scale) == 0.0:
            raise InvalidArgumentError("pagoda: attention: scale 0 (None means 1/sqrt(D))")
        args.causal = _CAUSAL[causal]
        args.mode, args.topk, args.seed = _ATT_MODES[mode], topk, seed
        args.q, args.k, args.v, args.o = (_view(tq, sq, bshd), _view(tk, sk, bshd),
                                          _view(tv, sv, bshd), _view(o, so, bshd))
        ext, sc, keep = _attention_ext(c, args, (B, H, Hkv, Nq, Nk, D, Dv), bshd, kw)
        tm = c.t(mask, "mask")
        if tm is not None:
            args.mask = _mask_view(tm, (B, H, Nq, ext.past + Nk))
        p = None
        if probs is not False and probs is not None:
            head = -1 if probs is True else c_integer(probs, c_int, "attention: probs (head)")
            if head != -1 and not 0 <= head < H:
                raise InvalidArgumentError(f"pagoda: attention: probs head {head} of {H}")
            q0, q1 = (c_integer(r, c_int64, "attention: probs_rows") for r in
                      (probs_rows if probs_rows is not None else (0, Nq)))
            if not 0 <= q0 < q1 <= Nq:
                raise InvalidArgumentError(f"pagoda: attention: probs_rows ({q0}, {q1}) of {Nq}")
            p = Tensor.empty(c.ctx, (B, H if head < 0 else 1, q1 - q0, Nk))
            args.probs, args.probs_head, args.probs_q0, args.probs_q1 = p._handle(), head, q0, q1
        try:
            if Hkv == H and Dv == D and not extended:
                _run(api.pgd_attention, c.ctx._h, byref(args))
            else:
                _run(api.pgd_attention_ex, c.ctx._h, byref(args), byref(ext))
        except BaseException:
            for t in (p, sc):
                if t is not None:
                    t._free_locked()
            raise
        del keep
        res: Any = o
        if half:
            res = o.numpy().view(np.float16)[:B * H * Nq * Dv].reshape(oshape)
            o._free_locked()
        extra = [x for x in (p, sc) if x is not None]
        return (res, *extra) if extra else res


def attention_uniform(seed: int, b: int, h: int, i: int, heads: int, nq: int) -> float:
    """The uniform number in [0, 1) that mode="sample" draws for row i of head h of batch
    entry b: key j is picked when it is the first whose cumulative softmax weight exceeds u
    times the row's total."""
    args = [c_integer(seed, c_uint64, "attention_uniform: seed")] + [
        c_integer(v, c_int64, "attention_uniform: " + n)
        for v, n in ((b, "b"), (h, "h"), (i, "i"), (heads, "heads"), (nq, "nq"))]
    return float(api.pgd_attention_uniform(*args))


def attention_qkv(qkv: ArrayLike, heads: int, *, out: Optional[Tensor] = None,
                  ctx: Optional[Context] = None) -> Tensor:
    """Multi-head self-attention on a fused projection qkv [B, N, 3·H·D] (q|k|v, head, d as
    timm and torchvision lay it out) to [B, N, H·D]."""
    heads = c_integer(heads, c_int64, "attention_qkv: heads")
    with _call(ctx, qkv, out) as c:
        t = c.t(qkv, "qkv")
        assert t is not None
        s = t.shape
        if len(s) != 3 or heads < 1 or s[2] % (3 * heads):
            raise ShapeError(f"pagoda: attention_qkv: qkv {list(s)} is not [B, N, 3·{heads}·D]")
        o = c.out(out, (s[0], s[1], s[2] // 3))
        _run(api.pgd_attention_qkv, c.ctx._h, t._handle(), heads, o._handle())
        return o


# ---- row ops and elementwise -----------------------------------------------------------------


def _unary(fn: Any, x: ArrayLike, out: Optional[Tensor], ctx: Optional[Context], *extra: Any,
           what: str = "x") -> Tensor:
    with _call(ctx, x, out) as c:
        t = c.t(x, what)
        assert t is not None
        y = c.out(out, t.shape)
        fn(c.ctx._h, t._handle(), *extra, y._handle())
        return y


def layernorm(x: ArrayLike, weight: Optional[ArrayLike] = None, bias: Optional[ArrayLike] = None,
              eps: float = 1e-5, *, axis: int = -1, return_stats: bool = False,
              out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Any:
    """Layer normalisation over the dims from `axis` on (the last by default; ONNX
    LayerNormalization): (x - mean) / sqrt(var + eps) · weight + bias, weight and bias of
    x.shape[axis:] (both or neither). With return_stats, (y, mean, rstd): each group's mean and
    1 / sqrt(var + eps) with shape x.shape[:axis] + 1s, as ONNX gives them."""
    if (weight is None) != (bias is None):
        raise InvalidArgumentError("pagoda: layernorm: give weight and bias together, or neither")
    with _call(ctx, x, weight, bias, out) as c:
        t = c.t(x, "x")
        assert t is not None
        y = c.out(out, t.shape)
        nd = len(t.shape)
        if axis == -1 and not return_stats:
            _run(api.pgd_layernorm, c.ctx._h, t._handle(), c.h(weight, "weight"),
                 c.h(bias, "bias"), float(eps), y._handle())
            return y
        mean = rstd = None
        if return_stats and -nd <= axis < nd:
            a = axis % nd
            mean = c.out(None, list(t.shape[:a]) + [1] * (nd - a))
            rstd = c.out(None, list(t.shape[:a]) + [1] * (nd - a))
        _run(api.pgd_layernorm_axis, c.ctx._h, t._handle(),
             c_integer(axis, c_int, "layernorm: axis"), c.h(weight, "weight"), c.h(bias, "bias"),
             float(eps), y._handle(), mean._handle() if mean else None,
             rstd._handle() if rstd else None)
        return (y, mean, rstd) if return_stats else y


def rms_norm(x: ArrayLike, weight: Optional[ArrayLike] = None, eps: float = 1e-5, *,
             axis: int = -1, out: Optional[Tensor] = None,
             ctx: Optional[Context] = None) -> Tensor:
    """RMSNorm over the dims from `axis` on: x / sqrt(mean(x²) + eps) · weight (weight of
    x.shape[axis:], or None)."""
    with _call(ctx, x, weight, out) as c:
        t = _operand(c, x, "x")
        y = c.out(out, t.shape)
        _run(api.pgd_rmsnorm, c.ctx._h, t._handle(), c_integer(axis, c_int, "rms_norm: axis"),
             c.h(weight, "weight"), float(eps), y._handle())
        return y


def batch_norm(x: ArrayLike, mean: ArrayLike, var: ArrayLike, weight: ArrayLike,
               bias: ArrayLike, eps: float = 1e-5, *, out: Optional[Tensor] = None,
               ctx: Optional[Context] = None) -> Tensor:
    """Batch norm for inference on x [N, C, ...]: (x - mean) / sqrt(var + eps) · weight + bias
    per channel, each of those [C] (ONNX BatchNormalization, torch batch_norm with
    training=False)."""
    with _call(ctx, x, mean, var, weight, bias, out) as c:
        t = _operand(c, x, "x")
        y = c.out(out, t.shape)
        _run(api.pgd_batch_norm, c.ctx._h, t._handle(), c.h(mean, "mean"), c.h(var, "var"),
             c.h(weight, "weight"), c.h(bias, "bias"), float(eps), y._handle())
        return y


def group_norm(x: ArrayLike, groups: int, weight: Optional[ArrayLike] = None,
               bias: Optional[ArrayLike] = None, eps: float = 1e-5, *,
               out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    """Group norm on x [N, C, ...] (torch.nn.functional.group_norm): the channels in `groups`
    groups, each normalised with the dims after it, then · weight + bias per channel."""
    if (weight is None) != (bias is None):
        raise InvalidArgumentError("pagoda: group_norm: give weight and bias together, or neither")
    with _call(ctx, x, weight, bias, out) as c:
        t = _operand(c, x, "x")
        y = c.out(out, t.shape)
        _run(api.pgd_group_norm, c.ctx._h, t._handle(),
             c_integer(groups, c_int, "group_norm: groups"), c.h(weight, "weight"),
             c.h(bias, "bias"), float(eps), y._handle())
        return y


def gelu(x: ArrayLike, approximate: str = "none", *, out: Optional[Tensor] = None,
         ctx: Optional[Context] = None) -> Tensor:
    """GELU: the exact erf form, or approximate="tanh" (PyTorch's names)."""
    if approximate not in ("none", "tanh"):
        raise InvalidArgumentError(f"pagoda: gelu: approximate is 'none' or 'tanh', "
                                   f"not {approximate!r}")
    form = 1 if approximate == "tanh" else 0
    return _unary(lambda h, xh, yh: _run(api.pgd_gelu, h, xh, yh, form), x, out, ctx)


def relu(x: ArrayLike, *, out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    return _unary(lambda h, xh, yh: _run(api.pgd_relu, h, xh, yh), x, out, ctx)


def softmax(x: ArrayLike, scale: float = 1.0, *, axis: int = -1, out: Optional[Tensor] = None,
            ctx: Optional[Context] = None) -> Tensor:
    """softmax(scale · x) along `axis` (the last by default)."""
    if axis == -1:
        return _unary(lambda h, xh, yh: _run(api.pgd_softmax, h, xh, float(scale), yh), x, out,
                      ctx)
    return _softmax_axis(x, scale, axis, 0, out, ctx)


def log_softmax(x: ArrayLike, axis: int = -1, *, scale: float = 1.0,
                out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    """log(softmax(scale · x)) along `axis`, as scale·x - max - log Σ exp(scale·x - max)."""
    return _softmax_axis(x, scale, axis, 1, out, ctx)


def _softmax_axis(x: ArrayLike, scale: float, axis: int, log: int, out: Optional[Tensor],
                  ctx: Optional[Context]) -> Tensor:
    a = c_integer(axis, c_int, "softmax: axis")
    return _unary(lambda h, xh, yh: _run(api.pgd_softmax_axis, h, xh, a, float(scale), log, yh),
                  x, out, ctx)


def scale(x: ArrayLike, alpha: float, *, out: Optional[Tensor] = None,
          ctx: Optional[Context] = None) -> Tensor:
    return _unary(lambda h, xh, yh: _run(api.pgd_scale, h, xh, float(alpha), yh), x, out, ctx)


def bias_add(x: ArrayLike, bias: ArrayLike, *, out: Optional[Tensor] = None,
             ctx: Optional[Context] = None) -> Tensor:
    with _call(ctx, x, bias, out) as c:
        t = c.t(x, "x")
        assert t is not None
        y = c.out(out, t.shape)
        _run(api.pgd_bias_add, c.ctx._h, t._handle(), c.h(bias, "bias"), y._handle())
        return y


# ---- ViT embedding -----------------------------------------------------------------------------


def patch_embed(image: ArrayLike, weight: ArrayLike, bias: Optional[ArrayLike] = None, *,
                cls: Optional[ArrayLike] = None, dist: Optional[ArrayLike] = None,
                pos: Optional[ArrayLike] = None, out: Optional[Tensor] = None,
                ctx: Optional[Context] = None) -> Tensor:
    """ViT patch embedding: image [B, C, H, W] through a P x P stride-P convolution (weight
    [D, C, P, P], bias [D]) to [B, T, D], T = extra + (H/P)(W/P); the class token `cls` [D]
    and distillation token `dist` [D] first; `pos` [T, D] added to every token."""
    with _call(ctx, image, weight, bias, cls, dist, pos, out) as c:
        ti, tw = c.t(image, "image"), c.t(weight, "weight")
        assert ti is not None and tw is not None
        si, sw = ti.shape, tw.shape
        if len(si) != 4 or len(sw) != 4 or sw[2] < 1:
            raise ShapeError(f"pagoda: patch_embed: image {list(si)} and weight {list(sw)} must "
                             f"be [B, C, H, W] and [D, C, P, P]")
        extra = (cls is not None) + (dist is not None)
        T = extra + (si[2] // sw[2]) * (si[3] // sw[3])
        y = c.out(out, (si[0], T, sw[0]))
        _run(api.pgd_patch_embed, c.ctx._h, ti._handle(), tw._handle(), c.h(bias, "bias"),
             c.h(cls, "cls"), c.h(dist, "dist"), c.h(pos, "pos"), y._handle())
        return y


# ---- convolution and pooling (NHWC) ------------------------------------------------------------


def _pair(v: Union[int, Sequence[int]], what: str) -> Tuple[int, int]:
    """An int or a pair of ints, each for a C int."""
    if not hasattr(v, "__iter__"):
        x = c_integer(v, c_int, what)
        return x, x
    t = tuple(v)
    if len(t) != 2:
        raise InvalidArgumentError(f"pagoda: {what} wants an int or a pair, not {v!r}")
    return c_integer(t[0], c_int, what), c_integer(t[1], c_int, what)


def _host(a: Optional[ArrayLike], what: str, n: Optional[int] = None) -> Optional[np.ndarray]:
    if a is None:
        return None
    if isinstance(a, Tensor):
        a = a.numpy()
    h = as_float32(a, what)
    if n is not None and h.size != n:
        raise ShapeError(f"pagoda: {what} has {h.size} elements, {n} expected")
    return h


def _fp(a: Optional[np.ndarray]) -> Any:
    return None if a is None else a.ctypes.data_as(POINTER(c_float))


class Conv2d(Handle):
    """A 2-D convolution on NHWC activations, prepared once: weight [cout, cin/groups, kh, kw]
    (PyTorch's layout, host memory), bias [cout] or None, `bn` None or a dict of batch-norm
    weight, bias, running_mean, running_var (and eps) folded in."""

    def __init__(self, ctx: Context, weight: ArrayLike, bias: Optional[ArrayLike] = None, *,
                 stride: Union[int, Sequence[int]] = 1, padding: Union[int, Sequence[int]] = 0,
                 dilation: Union[int, Sequence[int]] = 1, groups: int = 1,
                 bn: Optional[Dict[str, Any]] = None) -> None:
        w = _host(weight, "weight")
        assert w is not None
        if w.ndim != 4:
            raise ShapeError(f"pagoda: Conv2d: weight is {list(w.shape)}, not [cout, cin/groups,"
                             f" kh, kw]")
        groups = c_integer(groups, c_int, "Conv2d: groups", 1)
        cout, cin_g, kh, kw = (c_integer(d, c_int64 if i < 2 else c_int, "Conv2d: weight size")
                               for i, d in enumerate(w.shape))
        b = _host(bias, "bias", cout)
        sh, sw = _pair(stride, "Conv2d: stride")
        ph, pw = _pair(padding, "Conv2d: padding")
        dh, dw = _pair(dilation, "Conv2d: dilation")
        cin = c_integer(cin_g * groups, c_int64, "Conv2d: cin")
        self.desc = Conv2dDesc(cin, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups)
        self.out_channels = cout
        bnd = None
        keep = []
        if bn is not None:
            arrs = [_host(bn[k], "bn." + k, cout) for k in
                    ("weight", "bias", "running_mean", "running_var")]
            keep = arrs
            bnd = BatchNorm(*[_fp(a) for a in arrs], float(bn.get("eps", 1e-5)))
        out = c_void_p()
        ctx._enter()
        try:
            _run(api.pgd_conv2d_create, ctx._h, byref(self.desc), _fp(w), _fp(b),
                 byref(bnd) if bnd is not None else None, byref(out))
            super().__init__(ctx, out.value, api.pgd_conv2d_destroy)
        finally:
            ctx._exit()
        del keep

    def out_size(self, h: int, w: int) -> Tuple[int, int]:
        oh, ow = c_int64(), c_int64()
        api.pgd_conv2d_out_size(byref(self.desc), c_integer(h, c_int64, "Conv2d.out_size: h"),
                                c_integer(w, c_int64, "Conv2d.out_size: w"), byref(oh), byref(ow))
        return oh.value, ow.value

    def algorithm(self, h: int, w: int, n: int = 1) -> str:
        """The algorithm a forward on n images of h x w uses ("gemm", "implicit", ...)."""
        n = c_integer(n, c_int64, "Conv2d.algorithm: n", 1)
        h = c_integer(h, c_int64, "Conv2d.algorithm: h")
        w = c_integer(w, c_int64, "Conv2d.algorithm: w")
        self._ctx._enter()
        try:
            r = api.pgd_conv2d_algorithm_batch(self._ctx._h, self._handle(), n, h, w)
            return r.decode() if r else "?"
        finally:
            self._ctx._exit()

    def __call__(self, x: ArrayLike, *, act: Optional[str] = None,
                 residual: Optional[ArrayLike] = None, out: Optional[Tensor] = None) -> Tensor:
        with _call(self._ctx, x, residual, out) as c:
            t = c.t(x, "x")
            assert t is not None
            s = t.shape
            if len(s) != 4:
                raise ShapeError(f"pagoda: conv2d: x is {list(s)}, not NHWC [N, H, W, C]")
            oh, ow = self.out_size(s[1], s[2])
            y = c.out(out, (s[0], oh, ow, self.out_channels))
            _run(api.pgd_conv2d_forward, c.ctx._h, self._handle(), t._handle(), _act(act),
                 c.h(residual, "residual"), y._handle())
            return y


def conv2d(x: ArrayLike, weight: ArrayLike, bias: Optional[ArrayLike] = None, *,
           stride: Union[int, Sequence[int]] = 1, padding: Union[int, str, Sequence[int]] = 0,
           dilation: Union[int, Sequence[int]] = 1, groups: int = 1,
           bn: Optional[Dict[str, Any]] = None, act: Optional[str] = None,
           residual: Optional[ArrayLike] = None, ctx: Optional[Context] = None) -> Tensor:
    """y = act(conv(x) + bias + residual) on NHWC x [N, H, W, cin] (a Conv2d made and freed
    for this call). padding: an int, (h, w), (top, left, bottom, right) per side, or ONNX's
    auto_pad "same" (SAME_UPPER) / "same_lower"; per-side pads pad x into a temporary."""
    c = _find_ctx(ctx, (x, residual))
    per_side = isinstance(padding, str) or (hasattr(padding, "__len__") and len(padding) == 4)
    layer = Conv2d(c, weight, bias, stride=stride, padding=0 if per_side else padding,
                   dilation=dilation, groups=groups, bn=bn)
    try:
        if not per_side:
            return layer(x, act=act, residual=residual)
        with _call(c, x, residual) as k:
            t = _operand(k, x, "x")
            s = t.shape
            if len(s) != 4:
                raise ShapeError(f"pagoda: conv2d: x is {list(s)}, not NHWC [N, H, W, C]")
            pads = (c_int * 4)()
            if isinstance(padding, str):
                if padding not in ("same", "same_lower"):
                    raise InvalidArgumentError(f"pagoda: conv2d: padding {padding!r} is not "
                                               "'same' or 'same_lower'")
                api.pgd_conv2d_same_pads(byref(layer.desc), s[1], s[2],
                                         int(padding == "same_lower"), pads)
            else:
                for i, v in enumerate(padding):
                    pads[i] = c_integer(v, c_int, "conv2d: padding")
            oh, ow = layer.out_size(s[1] + pads[0] + pads[2], s[2] + pads[1] + pads[3])
            y = k.out(None, (s[0], oh, ow, layer.out_channels))
            _run(api.pgd_conv2d_forward_pads, k.ctx._h, layer._handle(), t._handle(), pads,
                 _act(act), k.h(residual, "residual"), y._handle())
            return y
    finally:
        layer.close()


def _pool(fn: Any, x: ArrayLike, k: int, stride: Optional[int], padding: int,
          out: Optional[Tensor], ctx: Optional[Context], what: str) -> Tensor:
    k = c_integer(k, c_int, f"{what}: kernel_size")
    stride = k if stride is None else c_integer(stride, c_int, f"{what}: stride")
    padding = c_integer(padding, c_int, f"{what}: padding")
    with _call(ctx, x, out) as c:
        t = c.t(x, "x")
        assert t is not None
        s = t.shape
        if len(s) != 4:
            raise ShapeError(f"pagoda: {what}: x is {list(s)}, not NHWC [N, H, W, C]")
        if k < 1 or stride < 1 or padding < 0:
            raise InvalidArgumentError(f"pagoda: {what}: k {k}, stride {stride}, padding "
                                       f"{padding}: k >= 1, stride >= 1, padding >= 0")
        oh = (s[1] + 2 * padding - k) // stride + 1
        ow = (s[2] + 2 * padding - k) // stride + 1
        if oh < 1 or ow < 1:
            raise ShapeError(f"pagoda: {what}: a {k}x{k} window does not fit {list(s)}")
        y = c.out(out, (s[0], oh, ow, s[3]))
        _run(fn, c.ctx._h, t._handle(), k, stride, padding, y._handle())
        return y


def maxpool2d(x: ArrayLike, kernel_size: int, stride: Optional[int] = None, padding: int = 0, *,
              out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    """Max pooling, NHWC (PyTorch's floor rule; stride None means kernel_size)."""
    return _pool(api.pgd_maxpool2d, x, kernel_size, stride, padding, out, ctx, "maxpool2d")


def avgpool2d(x: ArrayLike, kernel_size: int, stride: Optional[int] = None, padding: int = 0, *,
              out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    """Average pooling, NHWC, zero padding counted (count_include_pad=True)."""
    return _pool(api.pgd_avgpool2d, x, kernel_size, stride, padding, out, ctx, "avgpool2d")


def _pool_general(mode: int, x: ArrayLike, kernel_size: Union[int, Sequence[int]],
                  stride: Union[None, int, Sequence[int]], padding: Union[int, Sequence[int]],
                  dilation: Union[int, Sequence[int]], ceil_mode: bool, include_pad: bool,
                  indices: bool, out: Optional[Tensor], ctx: Optional[Context],
                  what: str) -> Any:
    kh, kw = _pair(kernel_size, f"{what}: kernel_size")
    sh, sw = (kh, kw) if stride is None else _pair(stride, f"{what}: stride")
    dh, dw = _pair(dilation, f"{what}: dilation")
    pad = [padding] * 4 if isinstance(padding, (int, np.integer)) else list(padding)
    if len(pad) == 2:
        pad = pad * 2
    if len(pad) != 4:
        raise InvalidArgumentError(f"pagoda: {what}: padding is an int, (h, w) or (top, left, "
                                   f"bottom, right), not {padding!r}")
    d = PoolDesc(mode, kh, kw, sh, sw, dh, dw,
                 *(c_integer(p, c_int, f"{what}: padding") for p in pad),
                 int(bool(ceil_mode)), int(bool(include_pad)))
    with _call(ctx, x, out) as c:
        t = _operand(c, x, "x")
        s = t.shape
        if len(s) != 4:
            raise ShapeError(f"pagoda: {what}: x is {list(s)}, not NHWC [N, H, W, C]")
        oh, ow = c_int64(), c_int64()
        _run(api.pgd_pool2d_output_size, byref(d), s[1], s[2], byref(oh), byref(ow))
        y = c.out(out, (s[0], oh.value, ow.value, s[3]))
        idx = Tensor.empty(c.ctx, (s[0], oh.value, ow.value, s[3])) if indices else None
        try:
            _run(api.pgd_pool2d, c.ctx._h, t._handle(), byref(d), y._handle(),
                 idx._handle() if idx is not None else None)
        except BaseException:
            if idx is not None:
                idx._free_locked()
            raise
        return (y, idx) if indices else y


def max_pool2d(x: ArrayLike, kernel_size: Union[int, Sequence[int]],
               stride: Union[None, int, Sequence[int]] = None,
               padding: Union[int, Sequence[int]] = 0, dilation: Union[int, Sequence[int]] = 1,
               ceil_mode: bool = False, return_indices: bool = False, *,
               out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Any:
    """torch.nn.functional.max_pool2d on NHWC x, with ONNX's extras: rectangular windows,
    strides and dilations as pairs, padding as an int, (h, w) or (top, left, bottom, right) of
    any size. return_indices: also each max's index h·W + w in its channel's plane."""
    return _pool_general(0, x, kernel_size, stride, padding, dilation, ceil_mode, False,
                         return_indices, out, ctx, "max_pool2d")


def avg_pool2d(x: ArrayLike, kernel_size: Union[int, Sequence[int]],
               stride: Union[None, int, Sequence[int]] = None,
               padding: Union[int, Sequence[int]] = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, dilation: Union[int, Sequence[int]] = 1, *,
               out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    """torch.nn.functional.avg_pool2d on NHWC x (count_include_pad as PyTorch's), plus
    dilation and per-side padding as ONNX's AveragePool has them."""
    return _pool_general(1, x, kernel_size, stride, padding, dilation, ceil_mode,
                         count_include_pad, False, out, ctx, "avg_pool2d")


def global_maxpool(x: ArrayLike, *, out: Optional[Tensor] = None,
                   ctx: Optional[Context] = None) -> Tensor:
    """[N, H, W, C] → [N, C], the max over H and W (NaN wins)."""
    with _call(ctx, x, out) as c:
        t = _operand(c, x, "x")
        s = t.shape
        if len(s) != 4:
            raise ShapeError(f"pagoda: global_maxpool: x is {list(s)}, not NHWC [N, H, W, C]")
        y = c.out(out, (s[0], s[3]))
        _run(api.pgd_global_maxpool, c.ctx._h, t._handle(), y._handle())
        return y


def global_avgpool(x: ArrayLike, *, out: Optional[Tensor] = None,
                   ctx: Optional[Context] = None) -> Tensor:
    """[N, H, W, C] → [N, C], the mean over H and W."""
    with _call(ctx, x, out) as c:
        t = c.t(x, "x")
        assert t is not None
        s = t.shape
        if len(s) != 4:
            raise ShapeError(f"pagoda: global_avgpool: x is {list(s)}, not NHWC [N, H, W, C]")
        y = c.out(out, (s[0], s[3]))
        _run(api.pgd_global_avgpool, c.ctx._h, t._handle(), y._handle())
        return y


def nchw_to_nhwc(x: ArrayLike, *, out: Optional[Tensor] = None,
                 ctx: Optional[Context] = None) -> Tensor:
    with _call(ctx, x, out) as c:
        t = c.t(x, "x")
        assert t is not None
        s = t.shape
        if len(s) != 4:
            raise ShapeError(f"pagoda: nchw_to_nhwc: x is {list(s)}, not [N, C, H, W]")
        y = c.out(out, (s[0], s[2], s[3], s[1]))
        _run(api.pgd_nchw_to_nhwc, c.ctx._h, t._handle(), y._handle())
        return y


# ---- non-local blocks --------------------------------------------------------------------------

_NL_MODES = {"embedded_gaussian": 0, "gaussian": 1, "dot_product": 2, "concatenation": 3}


class NonLocal(Handle):
    """A non-local block (Wang et al. 2018) on NHWC x [B, H, W, C]: z = x + BN(W·y(x)).

    Weights are host arrays in PyTorch's layouts: theta_weight, phi_weight, g_weight
    [Ci, C, 1, 1] (or [Ci, C]) with *_bias [Ci]; w_weight [C, Ci, 1, 1] and w_bias [C];
    bn a dict (weight, bias, running_mean, running_var, eps) or None; concat_weight
    [1, 2·Ci, 1, 1] for mode "concatenation"."""

    def __init__(self, ctx: Context, channels: int, inner: Optional[int] = None, *,
                 mode: str = "embedded_gaussian", subsample: bool = False, unfused: bool = False,
                 **weights: Any) -> None:
        if mode not in _NL_MODES:
            raise InvalidArgumentError(f"pagoda: NonLocal: mode is one of {', '.join(_NL_MODES)}"
                                       f", not {mode!r}")
        channels = c_integer(channels, c_int64, "NonLocal: channels")
        inner = channels // 2 if inner is None else c_integer(inner, c_int64, "NonLocal: inner")
        known = ("theta_weight", "theta_bias", "phi_weight", "phi_bias", "g_weight", "g_bias",
                 "w_weight", "w_bias", "bn", "concat_weight")
        for k in weights:
            if k not in known:
                raise InvalidArgumentError(f"pagoda: NonLocal: unknown weight {k!r} "
                                           f"({', '.join(known)})")
        sizes = {"theta_weight": inner * channels, "phi_weight": inner * channels,
                 "g_weight": inner * channels, "theta_bias": inner, "phi_bias": inner,
                 "g_bias": inner, "w_weight": channels * inner, "w_bias": channels,
                 "concat_weight": 2 * inner}
        host = {k: _host(weights.get(k), k, n) for k, n in sizes.items()}
        self.desc = NonlocalDesc(channels, inner, _NL_MODES[mode], int(bool(subsample)),
                                 int(bool(unfused)))
        self.mode = mode
        bnd = None
        keep: List[Any] = []
        if weights.get("bn") is not None:
            bn = weights["bn"]
            arrs = [_host(bn[k], "bn." + k, channels) for k in
                    ("weight", "bias", "running_mean", "running_var")]
            keep = arrs
            bnd = BatchNorm(*[_fp(a) for a in arrs], float(bn.get("eps", 1e-5)))
        p = NonlocalParams(*[_fp(host[k]) for k in ("theta_weight", "theta_bias", "phi_weight",
                                                      "phi_bias", "g_weight", "g_bias",
                                                      "w_weight", "w_bias")],
                           pointer(bnd) if bnd is not None else None,
                           _fp(host["concat_weight"]))
        out = c_void_p()
        ctx._enter()
        try:
            _run(api.pgd_nonlocal_create, ctx._h, byref(self.desc), byref(p), byref(out))
            super().__init__(ctx, out.value, api.pgd_nonlocal_destroy)
        finally:
            ctx._exit()
        del keep, host

    def key_grid(self, h: int, w: int) -> Tuple[int, int]:
        gh, gw = c_int64(), c_int64()
        api.pgd_nonlocal_key_grid(byref(self.desc), c_integer(h, c_int64, "NonLocal: h"),
                                  c_integer(w, c_int64, "NonLocal: w"), byref(gh), byref(gw))
        return gh.value, gw.value

    def __call__(self, x: ArrayLike, *, out: Optional[Tensor] = None) -> Tensor:
        with _call(self._ctx, x, out) as c:
            t = c.t(x, "x")
            assert t is not None
            z = c.out(out, t.shape)
            _run(api.pgd_nonlocal_forward, c.ctx._h, self._handle(), t._handle(), z._handle())
            return z

    def affinity(self, x: ArrayLike, qi: int, qj: int) -> np.ndarray:
        """f(i, ·) of query position (qi, qj) on x's H x W grid for every batch item, as
        [B, gh, gw] (the key grid; halved with subsampling)."""
        with _call(self._ctx, x) as c:
            t = c.t(x, "x")
            assert t is not None
            s = t.shape
            if len(s) != 4:
                raise ShapeError(f"pagoda: NonLocal.affinity: x is {list(s)}, not [B, H, W, C]")
            gh, gw = self.key_grid(s[1], s[2])
            row = np.zeros((s[0], max(gh, 1), max(gw, 1)), dtype=np.float32)
            ogh, ogw = c_int64(), c_int64()
            _run(api.pgd_nonlocal_affinity, c.ctx._h, self._handle(), t._handle(),
                 c_integer(qi, c_int64, "NonLocal.affinity: qi"),
                 c_integer(qj, c_int64, "NonLocal.affinity: qj"),
                 row.ctypes.data_as(POINTER(c_float)), byref(ogh), byref(ogw))
            return row


def nonlocal_(x: ArrayLike, channels: Optional[int] = None, inner: Optional[int] = None, *,
              mode: str = "embedded_gaussian", subsample: bool = False,
              ctx: Optional[Context] = None, **weights: Any) -> Tensor:
    """One non-local block over x (a NonLocal made and freed for this call; `nonlocal` is a
    Python keyword, hence the underscore)."""
    c = _find_ctx(ctx, (x,))
    if channels is None:
        channels = (x.shape if isinstance(x, Tensor) else np.shape(x))[-1]
    block = NonLocal(c, channels, inner, mode=mode, subsample=subsample, **weights)
    try:
        return block(x)
    finally:
        block.close()


# ---- broadcasting elementwise ops and reductions (cl/broadcast.cl) ----------------------------
#
# NumPy's semantics: the binary ops and where broadcast their operands (Python numbers and
# 0-d arrays included), reductions take axis= (None: all, an int, or a tuple; () reduces
# nothing) and keepdims=. Everything is float32; argmax and argmin return the indices as a
# float32 Tensor (exact up to 2^24). NaN propagates as in NumPy (maximum, minimum, clip, max,
# argmax included). Shape errors come from the C library and name the operand. The reductions
# that share a builtin's name are amax, amin, absolute and power here (pagoda.max, .min, .abs
# and .pow in the package); `sum` is defined below, so this module must not use the builtin.

_BINARY = {"add": 0, "sub": 1, "mul": 2, "div": 3, "pow": 4, "max": 5, "min": 6}
_UNARY = {"exp": 0, "log": 1, "sqrt": 2, "rsqrt": 3, "erf": 4, "tanh": 5, "sigmoid": 6,
          "abs": 7, "neg": 8, "relu": 9, "gelu": 10, "gelu_tanh": 11, "silu": 12}
_REDUCE = {"sum": 0, "mean": 1, "max": 2, "min": 3, "prod": 4, "argmax": 5, "argmin": 6}


def _operand(c: _Call, x: ArrayLike, what: str) -> Tensor:
    t = c.t(x, what)  # a Python number or 0-d array becomes a rank-0 tensor
    assert t is not None
    return t


def _broadcast_out(c: _Call, out: Optional[Tensor], ts: Sequence[Tensor]) -> Tensor:
    try:
        shape = np.broadcast_shapes(*(t.shape for t in ts))
    except ValueError:
        # No broadcast shape: the C call reports it (naming the operand) before it looks at y.
        return ts[0]
    return c.out(out, shape)


def _binary(name: str, a: ArrayLike, b: ArrayLike, out: Optional[Tensor],
            ctx: Optional[Context]) -> Tensor:
    with _call(ctx, a, b, out) as c:
        ta, tb = _operand(c, a, "a"), _operand(c, b, "b")
        y = _broadcast_out(c, out, (ta, tb))
        _run(api.pgd_binary, c.ctx._h, _BINARY[name], ta._handle(), tb._handle(), y._handle())
        return y


def add(a: ArrayLike, b: ArrayLike, *, out: Optional[Tensor] = None,
        ctx: Optional[Context] = None) -> Tensor:
    """a + b with NumPy broadcasting."""
    return _binary("add", a, b, out, ctx)


def sub(a: ArrayLike, b: ArrayLike, *, out: Optional[Tensor] = None,
        ctx: Optional[Context] = None) -> Tensor:
    """a - b with NumPy broadcasting (numpy.subtract)."""
    return _binary("sub", a, b, out, ctx)


def mul(a: ArrayLike, b: ArrayLike, *, out: Optional[Tensor] = None,
        ctx: Optional[Context] = None) -> Tensor:
    """a * b with NumPy broadcasting (numpy.multiply)."""
    return _binary("mul", a, b, out, ctx)


def div(a: ArrayLike, b: ArrayLike, *, out: Optional[Tensor] = None,
        ctx: Optional[Context] = None) -> Tensor:
    """a / b with NumPy broadcasting (numpy.divide; x/0 is ±inf, 0/0 NaN)."""
    return _binary("div", a, b, out, ctx)


def power(a: ArrayLike, b: ArrayLike, *, out: Optional[Tensor] = None,
          ctx: Optional[Context] = None) -> Tensor:
    """a ** b with NumPy broadcasting (C's pow: a negative base to a non-integer is NaN)."""
    return _binary("pow", a, b, out, ctx)


def maximum(a: ArrayLike, b: ArrayLike, *, out: Optional[Tensor] = None,
            ctx: Optional[Context] = None) -> Tensor:
    """Elementwise max with NumPy broadcasting; NaN when either is NaN (numpy.maximum)."""
    return _binary("max", a, b, out, ctx)


def minimum(a: ArrayLike, b: ArrayLike, *, out: Optional[Tensor] = None,
            ctx: Optional[Context] = None) -> Tensor:
    """Elementwise min with NumPy broadcasting; NaN when either is NaN (numpy.minimum)."""
    return _binary("min", a, b, out, ctx)


def where(cond: ArrayLike, a: ArrayLike, b: ArrayLike, *, out: Optional[Tensor] = None,
          ctx: Optional[Context] = None) -> Tensor:
    """cond != 0 ? a : b, the three broadcast together (numpy.where; cond is float: NaN is
    true)."""
    with _call(ctx, cond, a, b, out) as c:
        if not isinstance(cond, Tensor) and np.asarray(cond).dtype == np.bool_:
            cond = np.asarray(cond, dtype=np.float32)  # as_float32 refuses bool
        tc, ta, tb = _operand(c, cond, "cond"), _operand(c, a, "a"), _operand(c, b, "b")
        y = _broadcast_out(c, out, (tc, ta, tb))
        _run(api.pgd_where, c.ctx._h, tc._handle(), ta._handle(), tb._handle(), y._handle())
        return y


def _elementwise(name: str, x: ArrayLike, out: Optional[Tensor],
                 ctx: Optional[Context]) -> Tensor:
    return _unary(lambda h, xh, yh: _run(api.pgd_unary, h, _UNARY[name], xh, yh), x, out, ctx)


def exp(x: ArrayLike, *, out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    return _elementwise("exp", x, out, ctx)


def log(x: ArrayLike, *, out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    return _elementwise("log", x, out, ctx)


def sqrt(x: ArrayLike, *, out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    return _elementwise("sqrt", x, out, ctx)


def rsqrt(x: ArrayLike, *, out: Optional[Tensor] = None,
          ctx: Optional[Context] = None) -> Tensor:
    """1 / sqrt(x)."""
    return _elementwise("rsqrt", x, out, ctx)


def erf(x: ArrayLike, *, out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    return _elementwise("erf", x, out, ctx)


def tanh(x: ArrayLike, *, out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    return _elementwise("tanh", x, out, ctx)


def sigmoid(x: ArrayLike, *, out: Optional[Tensor] = None,
            ctx: Optional[Context] = None) -> Tensor:
    """1 / (1 + exp(-x))."""
    return _elementwise("sigmoid", x, out, ctx)


def silu(x: ArrayLike, *, out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    """x * sigmoid(x) in one pass (swish); -inf gives 0."""
    return _elementwise("silu", x, out, ctx)


def absolute(x: ArrayLike, *, out: Optional[Tensor] = None,
             ctx: Optional[Context] = None) -> Tensor:
    """|x| (numpy.absolute; pagoda.abs)."""
    return _elementwise("abs", x, out, ctx)


def neg(x: ArrayLike, *, out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    """-x (numpy.negative)."""
    return _elementwise("neg", x, out, ctx)


def clip(x: ArrayLike, a_min: Optional[float] = None, a_max: Optional[float] = None, *,
         out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    """min(max(x, a_min), a_max) (numpy.clip with scalar bounds; None: no bound; a_max wins
    when a_min > a_max; NaN stays NaN)."""
    lo = -np.inf if a_min is None else float(a_min)
    hi = np.inf if a_max is None else float(a_max)
    return _unary(lambda h, xh, yh: _run(api.pgd_clip, h, xh, lo, hi, yh), x, out, ctx)


def _axes(axis: Union[None, int, Sequence[int]]) -> Any:
    if axis is None:
        return None, 0
    axes = [int(axis)] if isinstance(axis, (int, np.integer)) else [int(a) for a in axis]
    return (c_int * max(len(axes), 1))(*axes), len(axes)


def _reduced_shape(shape: Sequence[int], axes: Any, n: int, keepdims: bool) -> Tuple[int, ...]:
    nd = len(shape)
    red = set(range(nd)) if axes is None else {a + nd if a < 0 else a for a in axes[:n]}
    return tuple(1 if d in red else s for d, s in enumerate(shape) if keepdims or d not in red)


def _reduce(name: str, x: ArrayLike, axis: Union[None, int, Sequence[int]], keepdims: bool,
            out: Optional[Tensor], ctx: Optional[Context]) -> Tensor:
    axes, n = _axes(axis)
    with _call(ctx, x, out) as c:
        t = _operand(c, x, "x")
        nd = len(t.shape)
        bad = axes is not None and (any(not -nd <= a < nd for a in axes[:n])
                                    or len({a % nd for a in axes[:n]}) < n)
        # A bad axis: the C call names it before it looks at y.
        y = c.out(None, ()) if bad else c.out(out, _reduced_shape(t.shape, axes, n, keepdims))
        _run(api.pgd_reduce, c.ctx._h, _REDUCE[name], t._handle(), axes, n, int(bool(keepdims)),
             y._handle())
        return y


def sum(x: ArrayLike, axis: Union[None, int, Sequence[int]] = None, keepdims: bool = False, *,
        out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    """Sum over axis (numpy.sum; of nothing: 0)."""
    return _reduce("sum", x, axis, keepdims, out, ctx)


def mean(x: ArrayLike, axis: Union[None, int, Sequence[int]] = None, keepdims: bool = False, *,
         out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    """Mean over axis (numpy.mean; of nothing: NaN)."""
    return _reduce("mean", x, axis, keepdims, out, ctx)


def prod(x: ArrayLike, axis: Union[None, int, Sequence[int]] = None, keepdims: bool = False, *,
         out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    """Product over axis (numpy.prod; of nothing: 1)."""
    return _reduce("prod", x, axis, keepdims, out, ctx)


def amax(x: ArrayLike, axis: Union[None, int, Sequence[int]] = None, keepdims: bool = False, *,
         out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    """Maximum over axis (numpy.max; pagoda.max); NaN when any is NaN; an empty axis is a
    ShapeError."""
    return _reduce("max", x, axis, keepdims, out, ctx)


def amin(x: ArrayLike, axis: Union[None, int, Sequence[int]] = None, keepdims: bool = False, *,
         out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    """Minimum over axis (numpy.min; pagoda.min)."""
    return _reduce("min", x, axis, keepdims, out, ctx)


def argmax(x: ArrayLike, axis: Union[None, int, Sequence[int]] = None, keepdims: bool = False,
           *, last: bool = False, out: Optional[Tensor] = None,
           ctx: Optional[Context] = None) -> Tensor:
    """Index of the first maximum (the first NaN if any) over axis, as float32: along one axis
    its index there, over several the row-major index over them, over all (None) NumPy's flat
    index. last=True (one int axis): the last maximum instead (ONNX's select_last_index)."""
    if last:
        return _arg_last("argmax", x, axis, keepdims, out, ctx)
    return _reduce("argmax", x, axis, keepdims, out, ctx)


def _arg_last(name: str, x: ArrayLike, axis: Any, keepdims: bool, out: Optional[Tensor],
              ctx: Optional[Context]) -> Tensor:
    """The last extreme along one axis: the first one of x reversed along it, n - 1 - that."""
    if not isinstance(axis, (int, np.integer)):
        raise InvalidArgumentError(f"pagoda: {name}: last=True takes one int axis, not {axis!r}")
    c = _find_ctx(ctx, (x, out))
    rev = slice_(x, [-1], [None], [int(axis)], [-1], ctx=c)  # names a bad axis
    try:
        first = _reduce(name, rev, axis, keepdims, None, c)
        try:
            return _binary("sub", np.float32(rev.shape[int(axis)] - 1), first, out, c)
        finally:
            first.close()
    finally:
        rev.close()


def argmin(x: ArrayLike, axis: Union[None, int, Sequence[int]] = None, keepdims: bool = False,
           *, last: bool = False, out: Optional[Tensor] = None,
           ctx: Optional[Context] = None) -> Tensor:
    """Index of the first minimum over axis, as argmax (last=True: the last one)."""
    if last:
        return _arg_last("argmin", x, axis, keepdims, out, ctx)
    return _reduce("argmin", x, axis, keepdims, out, ctx)



# ---- matmul ----------------------------------------------------------------------------------


def _matmul_shape(sa: Tuple[int, ...], sb: Tuple[int, ...]) -> Optional[Tuple[int, ...]]:
    """numpy.matmul's result shape, or None where the operands do not fit."""
    if not sa or not sb:
        return None
    pa = (1,) + sa if len(sa) == 1 else sa
    pb = sb + (1,) if len(sb) == 1 else sb
    if pa[-1] != pb[-2]:
        return None
    try:
        batch = tuple(np.broadcast_shapes(pa[:-2], pb[:-2]))
    except ValueError:
        return None
    return batch + (() if len(sa) == 1 else (pa[-2],)) + (() if len(sb) == 1 else (pb[-1],))


def matmul(a: ArrayLike, b: ArrayLike, *, out: Optional[Tensor] = None,
           ctx: Optional[Context] = None) -> Tensor:
    """numpy.matmul(a, b): [..., M, K] @ [..., K, N] with the batch dims broadcasting both
    ways (a 1-D a is a row, a 1-D b a column, as in NumPy)."""
    with _call(ctx, a, b, out) as c:
        ta, tb = _operand(c, a, "a"), _operand(c, b, "b")
        shape = _matmul_shape(tuple(ta.shape), tuple(tb.shape))
        # Operands that do not fit: the C call names them before it looks at y.
        y = c.out(out, shape) if shape is not None else c.out(None, ())
        _run(api.pgd_matmul, c.ctx._h, ta._handle(), tb._handle(), y._handle())
        return y


# ---- layout ---------------------------------------------------------------------------------

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _ints(values: Sequence[Any], ctype: type, what: str) -> Any:
    vals = [c_integer(v, ctype, f"{what}[{i}]") for i, v in enumerate(values)]
    return (ctype * max(len(vals), 1))(*vals)


def transpose(x: ArrayLike, axes: Optional[Sequence[int]] = None, *,
              out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    """x with its dims permuted (numpy.transpose): the result's dim d is x's dim axes[d];
    None reverses them."""
    with _call(ctx, x, out) as c:
        t = _operand(c, x, "x")
        nd = len(t.shape)
        perm = list(range(nd))[::-1] if axes is None else [int(a) for a in axes]
        ok = sorted(perm) == list(range(nd))
        # A bad permutation: the C call names it before it looks at y.
        y = c.out(out, [t.shape[a] for a in perm]) if ok else c.out(None, ())
        p = None if axes is None else _ints(perm if ok else list(axes) + [0] * nd, c_int,
                                           "transpose: axes")
        _run(api.pgd_transpose, c.ctx._h, t._handle(), p, y._handle())
        return y


def slice_(x: ArrayLike, starts: Sequence[Optional[int]], ends: Sequence[Optional[int]],
           axes: Optional[Sequence[int]] = None, steps: Optional[Sequence[int]] = None, *,
           out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    """x[starts:ends:steps] along `axes` (ONNX Slice, clamped as Python slices are; None as a
    start or end means that end of the axis). axes None: 0, 1, ... for each start; steps None:
    1 each; a negative step walks backwards."""
    n = len(starts)
    if len(ends) != n or (axes is not None and len(axes) != n) or (steps is not None
                                                                   and len(steps) != n):
        raise InvalidArgumentError("pagoda: slice: starts, ends, axes and steps must be as long "
                                   f"as each other (starts has {n})")
    st = [1] * n if steps is None else [int(v) for v in steps]
    lo = [(_INT64_MAX if s < 0 else 0) if v is None else v for v, s in zip(starts, st)]
    hi = [(_INT64_MIN if s < 0 else _INT64_MAX) if v is None else v for v, s in zip(ends, st)]
    ax = list(range(n)) if axes is None else [int(a) for a in axes]
    with _call(ctx, x, out) as c:
        t = _operand(c, x, "x")
        shape = list(t.shape)
        nd = len(shape)
        ok = all(-nd <= a < nd for a in ax) and len({a % nd for a in ax}) == n and 0 not in st
        if ok:
            for a, b, e, s in zip(ax, lo, hi, st):
                a %= nd
                shape[a] = len(range(*slice(b, e, s).indices(shape[a])))
        y = c.out(out, shape) if ok else c.out(None, ())
        _run(api.pgd_slice, c.ctx._h, t._handle(), n, _ints(ax, c_int, "slice: axes"),
             _ints(lo, c_int64, "slice: starts"), _ints(hi, c_int64, "slice: ends"),
             _ints(st, c_int64, "slice: steps"), y._handle())
        return y


def concat(xs: Sequence[ArrayLike], axis: int = 0, *, out: Optional[Tensor] = None,
           ctx: Optional[Context] = None) -> Tensor:
    """The tensors joined along axis (numpy.concatenate, ONNX Concat)."""
    if len(xs) == 0:
        raise InvalidArgumentError("pagoda: concat: no tensors to join")
    with _call(ctx, *xs, out) as c:
        ts = [_operand(c, x, f"xs[{i}]") for i, x in enumerate(xs)]
        shape = list(ts[0].shape)
        nd = len(shape)
        ok = nd > 0 and -nd <= axis < nd and all(
            len(t.shape) == nd and all(d == axis % nd or t.shape[d] == shape[d]
                                       for d in range(nd)) for t in ts)
        if ok:
            shape[axis % nd] = builtins.sum(t.shape[axis % nd] for t in ts)
        y = c.out(out, shape) if ok else c.out(None, ())
        hs = (c_void_p * len(ts))(*(t._handle() for t in ts))
        _run(api.pgd_concat, c.ctx._h, len(ts), hs, c_integer(axis, c_int, "concat: axis"),
             y._handle())
        return y


concatenate = concat


def take(x: ArrayLike, indices: Any, axis: int = 0, *, out: Optional[Tensor] = None,
         ctx: Optional[Context] = None) -> Tensor:
    """numpy.take(x, indices, axis) (ONNX Gather): integer indices of any shape, negative ones
    counting from the end; the result's shape is x.shape[:axis] + indices.shape +
    x.shape[axis + 1:]."""
    idx = np.asarray(indices)
    if idx.size and not np.issubdtype(idx.dtype, np.integer):
        raise InvalidArgumentError(f"pagoda: take: indices must be integers, not {idx.dtype}")
    idx = np.array(idx, dtype=np.int64, order="C")  # (ascontiguousarray makes 0-d 1-d)
    with _call(ctx, x, out) as c:
        t = _operand(c, x, "x")
        nd = len(t.shape)
        ok = nd > 0 and -nd <= axis < nd and nd - 1 + idx.ndim <= 8
        a = axis % nd if ok else 0
        y = (c.out(out, list(t.shape[:a]) + list(idx.shape) + list(t.shape[a + 1:])) if ok
             else c.out(None, ()))
        ishape = (c_int64 * max(idx.ndim, 1))(*idx.shape)
        ptr = idx.ctypes.data_as(POINTER(c_int64)) if idx.size else None
        _run(api.pgd_gather, c.ctx._h, t._handle(), c_integer(axis, c_int, "take: axis"), ptr,
             idx.ndim, ishape, y._handle())
        return y


gather = take

_PAD = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}


def pad(x: ArrayLike, pad_width: Any, mode: str = "constant", constant_values: float = 0.0, *,
        out: Optional[Tensor] = None, ctx: Optional[Context] = None) -> Tensor:
    """numpy.pad with modes 'constant', 'reflect', 'edge' and 'wrap': pad_width is one int,
    one (before, after) pair, or a pair per dim; a negative width removes elements (ONNX Pad)."""
    if mode not in _PAD:
        raise InvalidArgumentError(f"pagoda: pad: mode {mode!r} is not one of "
                                   f"{', '.join(_PAD)}")
    with _call(ctx, x, out) as c:
        t = _operand(c, x, "x")
        nd = len(t.shape)
        w = np.asarray(pad_width)
        if w.size == 0 and nd == 0:
            w = np.zeros((0, 2), np.int64)
        elif w.ndim == 0:
            w = np.full((nd, 2), w)
        elif w.shape == (2,) or w.shape == (1, 2):
            w = np.tile(w.reshape(1, 2), (nd, 1))
        elif w.shape != (nd, 2):
            raise InvalidArgumentError(f"pagoda: pad: pad_width of shape {list(w.shape)} for a "
                                       f"tensor of {nd} dims (want an int, a pair or {nd} pairs)")
        if w.size and not np.issubdtype(w.dtype, np.integer):
            raise InvalidArgumentError(f"pagoda: pad: pad_width must be integers, not {w.dtype}")
        pads = [int(v) for v in w[:, 0]] + [int(v) for v in w[:, 1]]
        shape = [s + pads[d] + pads[nd + d] for d, s in enumerate(t.shape)]
        y = c.out(out, shape) if all(s >= 0 for s in shape) else c.out(None, ())
        _run(api.pgd_pad, c.ctx._h, t._handle(), _ints(pads, c_int64, "pad: pad_width"),
             _PAD[mode], float(constant_values), y._handle())
        return y


def depth_to_space(x: ArrayLike, block: int, mode: str = "DCR", *, out: Optional[Tensor] = None,
                   ctx: Optional[Context] = None) -> Tensor:
    """[N, C, H, W] to [N, C / block², H·block, W·block] (ONNX DepthToSpace; mode "CRD" is
    PyTorch's pixel_shuffle)."""
    modes = {"DCR": 0, "CRD": 1}
    if mode not in modes:
        raise InvalidArgumentError(f"pagoda: depth_to_space: mode {mode!r} is not DCR or CRD")
    b = c_integer(block, c_int, "depth_to_space: block")
    with _call(ctx, x, out) as c:
        t = _operand(c, x, "x")
        s = t.shape
        ok = len(s) == 4 and b >= 1 and s[1] % (b * b) == 0
        y = c.out(out, [s[0], s[1] // (b * b), s[2] * b, s[3] * b]) if ok else c.out(None, ())
        _run(api.pgd_depth_to_space, c.ctx._h, t._handle(), b, modes[mode], y._handle())
        return y


def space_to_depth(x: ArrayLike, block: int, mode: str = "DCR", *, out: Optional[Tensor] = None,
                   ctx: Optional[Context] = None) -> Tensor:
    """[N, C, H, W] to [N, C·block², H / block, W / block] (ONNX SpaceToDepth; mode "CRD", the
    inverse of depth_to_space's CRD and PyTorch's pixel_unshuffle, runs as one 6-D transpose)."""
    if mode not in ("DCR", "CRD"):
        raise InvalidArgumentError(f"pagoda: space_to_depth: mode {mode!r} is not DCR or CRD")
    b = c_integer(block, c_int, "space_to_depth: block")
    with _call(ctx, x, out) as c:
        t = _operand(c, x, "x")
        s = t.shape
        ok = len(s) == 4 and b >= 1 and s[2] % b == 0 and s[3] % b == 0
        y = c.out(out, [s[0], s[1] * b * b, s[2] // b, s[3] // b]) if ok else c.out(None, ())
        if mode == "DCR" or not ok:
            _run(api.pgd_space_to_depth, c.ctx._h, t._handle(), b, y._handle())
            return y
        n, ch, h, w = s
        # y[n, c·b² + i·b + j, h, w] = x[n, c, h·b + i, w·b + j]: x as [N, C, H/b, b, W/b, b]
        # transposed to [N, C, b, b, H/b, W/b]; both reshapes are undone before returning
        t.reshape_((n, ch, h // b, b, w // b, b))
        y.reshape_((n, ch, b, b, h // b, w // b))
        try:
            _run(api.pgd_transpose, c.ctx._h, t._handle(), (c_int * 6)(0, 1, 3, 5, 2, 4),
                 y._handle())
        finally:
            t.reshape_(s)
            y.reshape_((n, ch * b * b, h // b, w // b))
        return y


subtract, multiply, divide, negative = sub, mul, div, neg  # NumPy's long names

_ = cast  # re-exported helpers stay referenced
