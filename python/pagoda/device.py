"""Devices and contexts."""

from __future__ import annotations

import threading
import weakref
from ctypes import POINTER, byref, c_int64, c_size_t, c_void_p, sizeof
from typing import Any, Callable, Dict, List, Optional

from ._capi import CtxOptions, DeviceInfo, DeviceLowp, MemoryStats, api, c_integer
from .errors import ClosedError, ConcurrentUseError, InvalidArgumentError, raise_from


def _s(b: bytes) -> str:
    return b.decode("utf-8", "replace")


_DOT_NAMES = ("signed", "unsigned", "mixed", "sat_signed", "sat_unsigned", "sat_mixed")


def _lowp_dict(d: DeviceInfo) -> Dict[str, Any]:
    """The low-precision capabilities, as `pagoda devices --json` writes them."""
    lp = DeviceLowp()
    lp.size = sizeof(lp)
    err = c_void_p()
    if api.pgd_device_get_lowp(byref(d), byref(lp), byref(err)):
        api.pgd_error_destroy(err)
        lp = DeviceLowp()
    def bits(v: int) -> List[str]:
        return [n for i, n in enumerate(_DOT_NAMES) if v & (1 << i)]
    return {
        "fp16_arithmetic": bool(lp.fp16),
        "integer_dot_product": bool(lp.int_dot),
        "integer_dot_product_packed": bool(lp.int_dot_caps & 1),
        "dot8_accelerated": bits(lp.dot8_accel),
        "dot8_packed_accelerated": bits(lp.dot8_packed_accel),
        "bf16_conversions": bool(lp.bf16_conversions),
    }


def _device_dict(d: DeviceInfo) -> Dict[str, Any]:
    """The fields of `pagoda devices --json` for one device (same names, same values)."""
    return {
        "selector": f"{d.platform_index}:{d.device_index}",
        "platform_index": d.platform_index,
        "device_index": d.device_index,
        "name": _s(d.name),
        "vendor": _s(d.vendor),
        "platform": _s(d.platform),
        "platform_version": _s(d.platform_version),
        "driver_version": _s(d.driver_version),
        "version": _s(d.version),
        "opencl_c_version": _s(d.c_version),
        "type": _s(api.pgd_device_type_name(d.type)),
        "software_rasteriser": bool(d.software_rasteriser),
        "compute_units": d.compute_units,
        "clock_mhz": d.clock_mhz,
        "global_mem_bytes": d.global_mem,
        "max_alloc_bytes": d.max_alloc,
        "local_mem_bytes": d.local_mem,
        "local_mem_type": "local" if d.local_mem_dedicated else "global",
        "max_work_group_size": d.max_work_group,
        "max_work_item_sizes": [d.max_work_item[i] for i in range(3)],
        "fp16": bool(d.fp16),
        "fp64": bool(d.fp64),
        "subgroups": bool(d.subgroups),
        "images": bool(d.images),
        "unified_memory": bool(d.unified_memory),
        "preferred_vector_width_float": d.pref_vector_float,
        "low_precision": _lowp_dict(d),
    }


def devices() -> List[Dict[str, Any]]:
    """Every OpenCL device of every platform, as dicts with the fields of
    `pagoda devices --json` (selector, name, type, global_mem_bytes, ..., default).

    Raises NoPlatformError when no OpenCL platform or device is installed."""
    lst = POINTER(DeviceInfo)()
    n = c_size_t()
    err = c_void_p()
    raise_from(api.pgd_devices_list(byref(lst), byref(n), byref(err)), err)
    try:
        out = [_device_dict(lst[i]) for i in range(n.value)]
        idx = c_size_t()
        e2 = c_void_p()
        rc = api.pgd_device_select(lst, n, None, byref(idx), byref(e2))
        if e2.value:
            api.pgd_error_destroy(e2)
        for i, d in enumerate(out):
            d["default"] = rc == 0 and i == idx.value
        return out
    finally:
        api.pgd_free(lst)


_ENUMS = {
    "gemm_backend": {"auto": 0, "pagoda": 1, "clblast": 2},
    "gemm_tuning": {"create": 0, "request": 1},
    "conv_algo": {"auto": 0, "gemm": 1, "implicit": 2, "im2col": 3, "direct": 4,
                  "winograd": 5, "depthwise": 6},
    "attention": {"auto": 0, "rows": 1, "tiled": 2, "generic": 3, "kt": 4},
}
_STRINGS = ("device", "cache_dir", "kernel_dir", "kernel_params")
_INTS = ("global_mem_limit", "max_alloc_limit")
# The test and tuning knobs (pgd_ctx_options.knobs), set by key: the library checks them.
_KNOBS = ("gemm_k_chunk", "conv_mb", "conv_chunk_bytes", "row_wg", "max_launch_rows",
          "nl_key_chunk", "attn_key_block", "max_batch")
_BOOLS = ("profiling", "profile_print_at_destroy", "weights_f16")
# Named knobs: a text value the library checks (precision: "f32", "f16" or "int8"; a device
# without the capability refuses the context with UnsupportedError naming the extension).
_NAMED_KNOBS = ("precision",)
_FIELD_TYPES = dict(CtxOptions._fields_)


def _options(env: bool, kw: Dict[str, Any]) -> tuple:
    o = CtxOptions()
    api.pgd_ctx_options_init_size(byref(o), sizeof(o))
    if env:
        err = c_void_p()
        raise_from(api.pgd_ctx_options_from_env(byref(o), byref(err)), err)
    keep = []  # the bytes objects the structure points into, alive until the context copied them
    for k, v in kw.items():
        if v is None:
            continue
        if k in _STRINGS:
            if not isinstance(v, str):
                raise InvalidArgumentError(f"Context: {k} wants a str, not {type(v).__name__}")
            b = v.encode()
            if b"\0" in b:
                raise InvalidArgumentError(f"Context: {k} holds a NUL character")
            keep.append(b)
            setattr(o, k, b)
        elif k in _ENUMS:
            table = _ENUMS[k]
            if v not in table:
                raise InvalidArgumentError(
                    f"Context: {k} wants one of {', '.join(table)}, not {v!r}")
            setattr(o, k, table[v])
        elif k in _INTS:
            if isinstance(v, bool):
                raise InvalidArgumentError(f"Context: {k} wants a whole number >= 0, not {v!r}")
            # The field's own C type (int or 64-bit) bounds it; 2**62 keeps sums of sizes
            # inside 64 bits.
            setattr(o, k, c_integer(v, _FIELD_TYPES[k], f"Context: {k}", 0, 2**62 - 1))
        elif k in _KNOBS:
            if isinstance(v, bool):
                raise InvalidArgumentError(f"Context: {k} wants a whole number >= 0, not {v!r}")
            v = c_integer(v, c_int64, f"Context: {k}", 0)
            err = c_void_p()
            raise_from(api.pgd_ctx_options_set_knob(byref(o), k.encode(),
                                                    str(v).encode() if v else None,
                                                    byref(err)), err)
        elif k in _NAMED_KNOBS:
            if not isinstance(v, str):
                raise InvalidArgumentError(f"Context: {k} wants a str, not {type(v).__name__}")
            err = c_void_p()
            raise_from(api.pgd_ctx_options_set_knob(byref(o), k.encode(), v.encode(),
                                                    byref(err)), err)
        elif k in _BOOLS:
            setattr(o, k, 1 if v else 0)
        else:
            known = sorted(_STRINGS + tuple(_ENUMS) + _INTS + _KNOBS + _BOOLS + _NAMED_KNOBS)
            raise InvalidArgumentError(
                f"Context: unknown option {k!r} (the fields and knobs of pgd_ctx_options: "
                f"{', '.join(known)})")
    return o, keep


class Context:
    """An OpenCL context and queue on one device: where tensors live and ops run.

    `device` is a selector as for `pagoda devices` ("cpu", "gpu", "1:0", a name fragment such
    as "pocl" or "llvmpipe"); None means $PAGODA_DEVICE or the best device. The keyword
    arguments are the fields of pgd_ctx_options and its knobs by key (cache_dir, kernel_dir,
    profiling, gemm_backend="auto"|"pagoda"|"clblast", conv_algo="auto"|"gemm"|"implicit"|
    "im2col"|"direct"|"winograd"|"depthwise", attention="auto"|"rows"|"tiled"|"generic", max_batch,
    kernel_params, row_wg, precision="f32"|"f16"|"int8", ...).
    With env=True (the default) the PAGODA_* environment variables are read first, as the CLI
    does, and the keywords override them.

    Use it as a context manager, or call close(): every tensor, layer and model made on it is
    freed then, before the context itself. A context serves one thread at a time: a call from
    a second thread while one is running raises ConcurrentUseError.
    """

    def __init__(self, device: Optional[str] = None, *, env: bool = True, **options: Any) -> None:
        self._h: Optional[int] = None
        self._lock = threading.RLock()
        self._children: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._pending: List[tuple] = []  # (destroy function, handle) released by the GC
        if device is not None:
            options["device"] = device
        o, keep = _options(env, options)
        h = c_void_p()
        err = c_void_p()
        raise_from(api.pgd_ctx_create_with_options(byref(o), byref(h), byref(err)), err)
        del keep
        self._h = h.value

    # ---- use by one thread at a time -------------------------------------------------------

    def _enter(self) -> int:
        if not self._lock.acquire(blocking=False):
            raise ConcurrentUseError(
                "pagoda: this context is in use by another thread (a context serves one thread "
                "at a time: give each thread its own Context, or serialise the calls)")
        if self._h is None:
            self._lock.release()
            raise ClosedError("pagoda: the context is closed")
        self._drain()
        return self._h

    def _exit(self) -> None:
        self._lock.release()

    def _drain(self) -> None:
        while self._pending:
            fn, h = self._pending.pop()
            fn(h)

    def _release(self, fn: Callable[[int], None], h: int) -> None:
        """Frees a child's handle now if the context is free, else at its next call (a GC in
        one thread must not touch a context another thread is using)."""
        if self._h is None:
            return  # the context freed it already
        if self._lock.acquire(blocking=False):
            try:
                if self._h is not None:
                    fn(h)
            finally:
                self._lock.release()
        else:
            self._pending.append((fn, h))

    def _adopt(self, child: Any) -> None:
        self._children.add(child)

    # ---- public -------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._h is None

    @property
    def device(self) -> Dict[str, Any]:
        """The device the context runs on (the fields of pagoda.devices())."""
        h = self._enter()
        try:
            d = _device_dict(api.pgd_ctx_get_device(h).contents)
            d.pop("default", None)
            return d
        finally:
            self._exit()

    def finish(self) -> None:
        """Waits for all queued work."""
        h = self._enter()
        try:
            err = c_void_p()
            raise_from(api.pgd_ctx_finish(h, byref(err)), err)
        finally:
            self._exit()

    def memory_stats(self) -> Dict[str, int]:
        """Device memory of live tensors (live_bytes, peak_bytes) and of the pool."""
        h = self._enter()
        try:
            s = MemoryStats()
            api.pgd_ctx_get_memory_stats(h, byref(s))
            return {k: getattr(s, k) for k, _ in MemoryStats._fields_}
        finally:
            self._exit()

    def kernel_params(self) -> str:
        """The GEMM kernel parameters in use and where they came from."""
        h = self._enter()
        try:
            from ctypes import create_string_buffer

            buf = create_string_buffer(128)
            src = api.pgd_ctx_get_kernel_params(h, buf, 128)
            return f"{buf.value.decode()} ({src.decode() if src else '?'})"
        finally:
            self._exit()

    def tensor(self, array: Any) -> "Tensor":
        """A device tensor holding a float32 copy of `array` (any array-like; float64 and
        integer arrays are converted, complex, object and bool arrays refused)."""
        from .tensor import Tensor

        return Tensor.from_array(self, array)

    def empty(self, shape: Any) -> "Tensor":
        """A device tensor of `shape` with undefined contents."""
        from .tensor import Tensor

        return Tensor.empty(self, shape)

    def close(self) -> None:
        """Frees every tensor, layer and model made on this context, then the context.
        Idempotent. Raises ConcurrentUseError if another thread is using the context."""
        if self._h is None:
            return
        if not self._lock.acquire(blocking=False):
            raise ConcurrentUseError("pagoda: cannot close a context another thread is using")
        try:
            if self._h is None:
                return
            self._drain()
            for child in list(self._children):
                child._free_locked()
            self._children = weakref.WeakSet()
            h, self._h = self._h, None
            api.pgd_ctx_destroy(h)
        finally:
            self._lock.release()

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if self._h is not None and not self._lock._is_owned():  # type: ignore[attr-defined]
                self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        if self._h is None:
            return "<pagoda.Context closed>"
        try:
            return f"<pagoda.Context on {self.device['name']!r}>"
        except Exception:
            return "<pagoda.Context>"


from .tensor import Tensor  # noqa: E402  (for the annotations above)
