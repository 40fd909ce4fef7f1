"""Device tensors (float32, contiguous, up to 8 dims) and the base of every object that lives on a
context."""

from __future__ import annotations

from ctypes import byref, c_int64, c_void_p
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Tuple

import numpy as np

from ._capi import MAX_DIMS, api, c_integer
from .errors import ClosedError, InvalidArgumentError, ShapeError, raise_from

if TYPE_CHECKING:
    from .device import Context


class Handle:
    """Something made on a context (a tensor, a layer, a model): freed by close(), by its
    context's close(), or when garbage-collected, and never after its context."""

    _destroy: Callable[[int], None]

    def __init__(self, ctx: "Context", h: int, destroy: Callable[[int], None]) -> None:
        self._ctx = ctx
        self._h: Optional[int] = h
        self._destroy = destroy
        ctx._adopt(self)

    @property
    def context(self) -> "Context":
        return self._ctx

    @property
    def closed(self) -> bool:
        return self._h is None

    def _free_locked(self) -> None:
        h, self._h = self._h, None
        if h is not None:
            self._destroy(h)

    def close(self) -> None:
        """Frees the object now (idempotent)."""
        if self._h is None or self._ctx._h is None:
            self._h = None
            return
        self._ctx._enter()
        try:
            self._free_locked()
        finally:
            self._ctx._exit()

    def _handle(self) -> int:
        if self._h is None:
            raise ClosedError(f"pagoda: the {type(self).__name__.lower()} is closed")
        return self._h

    def __del__(self) -> None:
        try:
            h = self._h
            if h is not None:
                self._h = None
                self._ctx._release(self._destroy, h)
        except Exception:
            pass


def as_float32(array: Any, what: str = "array") -> np.ndarray:
    """array as a C-contiguous float32 ndarray: floating and integer arrays are converted;
    bool, complex, object and string arrays are refused (InvalidArgumentError)."""
    a = np.asarray(array)
    if a.dtype.kind not in "fiu":
        raise InvalidArgumentError(
            f"pagoda: {what} has dtype {a.dtype}: Pagoda's tensors are float32 (floating and "
            f"integer arrays are converted; bool, complex, object and text are not)")
    out = np.ascontiguousarray(a, dtype=np.float32)
    return out.reshape(()) if a.ndim == 0 else out  # ascontiguousarray makes a 0-d array [1]


def _shape_arg(shape: Any, what: str) -> Tuple[int, ...]:
    try:
        dims = list(shape)
    except TypeError:
        dims = [shape]
    if not 0 <= len(dims) <= MAX_DIMS:
        raise ShapeError(f"pagoda: {what}: {len(dims)} dims; tensors have 0 to {MAX_DIMS}")
    s = tuple(c_integer(d, c_int64, f"{what}: size {i} of {dims}") for i, d in enumerate(dims))
    if any(d < 0 for d in s):
        raise ShapeError(f"pagoda: {what}: negative size in {list(s)}")
    return s


class Tensor(Handle):
    """A float32 tensor on a context's device. Make one with ctx.tensor(array) or
    ctx.empty(shape); read it back with t.numpy() (or np.asarray(t))."""

    _shape: Tuple[int, ...] = ()

    def __init__(self, ctx: "Context", h: int, destroy: Callable[[int], None],
                 shape: Tuple[int, ...] = ()) -> None:
        super().__init__(ctx, h, destroy)
        # Kept on the Python side (only reshape_ changes it): an op's shape checks then cost
        # no calls into the library.
        self._shape = shape or tuple(api.pgd_tensor_get_dim(h, i)
                                     for i in range(api.pgd_tensor_get_ndim(h)))

    @classmethod
    def empty(cls, ctx: "Context", shape: Sequence[int]) -> "Tensor":
        s = _shape_arg(shape, "empty")
        dims = (c_int64 * len(s))(*s)
        out = c_void_p()
        err = c_void_p()
        h = ctx._enter()
        try:
            raise_from(api.pgd_tensor_create(h, len(s), dims, byref(out), byref(err)), err)
            return cls(ctx, out.value, api.pgd_tensor_destroy, s)
        finally:
            ctx._exit()

    @classmethod
    def from_array(cls, ctx: "Context", array: Any) -> "Tensor":
        a = as_float32(array)
        s = _shape_arg(a.shape, "tensor")
        dims = (c_int64 * len(s))(*s)
        out = c_void_p()
        err = c_void_p()
        h = ctx._enter()
        try:
            # The array's own memory goes to the upload: no copy on the host beyond the
            # conversion to contiguous float32 (none when it already is).
            raise_from(api.pgd_tensor_create_from(h, len(s), dims, a.ctypes.data, byref(out),
                                                  byref(err)), err)
            return cls(ctx, out.value, api.pgd_tensor_destroy, s)
        finally:
            ctx._exit()

    @property
    def shape(self) -> Tuple[int, ...]:
        self._handle()
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    def numpy(self) -> np.ndarray:
        """A new float32 ndarray with the tensor's contents (waits for the device)."""
        self._ctx._enter()
        try:
            th = self._handle()
            out = np.empty(self._shape, dtype=np.float32)
            err = c_void_p()
            raise_from(api.pgd_tensor_download(th, out.ctypes.data, byref(err)), err)
            return out
        finally:
            self._ctx._exit()

    def upload(self, array: Any) -> None:
        """Overwrites the contents with `array` (same number of elements; reshaped as this)."""
        a = as_float32(array)
        if a.size != self.size:
            raise ShapeError(f"pagoda: upload of {a.size} elements into a tensor of "
                             f"{list(self.shape)} ({self.size})")
        self._ctx._enter()
        try:
            err = c_void_p()
            raise_from(api.pgd_tensor_upload(self._handle(), a.ctypes.data, byref(err)), err)
        finally:
            self._ctx._exit()

    def fill(self, value: float) -> "Tensor":
        self._ctx._enter()
        try:
            err = c_void_p()
            raise_from(api.pgd_tensor_fill(self._handle(), float(value), byref(err)), err)
            return self
        finally:
            self._ctx._exit()

    def reshape_(self, shape: Sequence[int]) -> "Tensor":
        """Changes the shape in place (same element count); returns self."""
        s = _shape_arg(shape, "reshape_")
        dims = (c_int64 * len(s))(*s)
        self._ctx._enter()
        try:
            err = c_void_p()
            raise_from(api.pgd_tensor_reshape(self._handle(), len(s), dims, byref(err)), err)
            self._shape = s
            return self
        finally:
            self._ctx._exit()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        if self._h is None:
            return "<pagoda.Tensor closed>"
        return f"<pagoda.Tensor shape={list(self.shape)} float32>"
