"""DLPack (https://dmlc.github.io/dlpack/latest/) for Pagoda's tensors: the structures of dlpack.h
(the unversioned ABI of DLPack 0.6 to 0.8 in "dltensor" capsules, and DLPack 1.0's versioned
one in "dltensor_versioned" capsules, given to consumers that ask with max_version), the export
behind
Tensor.__dlpack__ and the import behind pagoda.from_dlpack.

Memory is shared, never copied, where the device's memory is the host's
(CL_DEVICE_HOST_UNIFIED_MEMORY: PoCL's and Intel's CPU devices, rusticl on llvmpipe):

- export maps the tensor (pgd_tensor_map) and hands out that address; the tensor stays alive and
  mapped until the consumer calls the deleter (NumPy and PyTorch do when their array dies);
- import wraps the producer's memory (pgd_tensor_wrap_host) when it is CPU memory of float32,
  row-major contiguous and aligned to pagoda.host_alignment(ctx) bytes; the producer's tensor
  stays alive until the Pagoda tensor is closed.

Anything else is copied: export from a device whose memory is not the host's, import of another
dtype (converted to float32), another layout, unaligned memory, or memory of another device type.

Capsule protocol: the producer's capsule is named "dltensor"; a consumer that takes ownership
renames it "used_dltensor" and calls the deleter exactly once. A capsule never consumed calls
the deleter when it is destroyed."""

from __future__ import annotations

import ctypes
import threading
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    byref,
    c_char_p,
    c_int,
    c_int64,
    c_uint8,
    c_uint16,
    c_uint64,
    c_void_p,
)
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

import numpy as np

from ._capi import MAX_DIMS, api
from .errors import ClosedError, InvalidArgumentError, raise_from

if TYPE_CHECKING:
    from .device import Context
    from .tensor import Tensor

K_DL_CPU = 1  # DLDeviceType kDLCPU
K_DL_FLOAT = 2  # DLDataTypeCode kDLFloat


class DLDevice(Structure):
    _fields_ = [("device_type", c_int), ("device_id", c_int)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(Structure):
    pass


DELETER = CFUNCTYPE(None, POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", c_void_p),
    ("deleter", DELETER),
]

class DLPackVersion(Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(Structure):
    pass


DELETER_VERSIONED = CFUNCTYPE(None, POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", c_void_p),
    ("deleter", DELETER_VERSIONED),
    ("flags", c_uint64),
    ("dl_tensor", DLTensor),
]
FLAG_IS_COPIED = 1 << 1  # DLPACK_FLAG_BITMASK_IS_COPIED

# The capsule functions of the C API. Called with the GIL held (PYFUNCTYPE): the capsule's
# destructor runs while the capsule is being freed, so it gets the object as a raw pointer.
_NAME = b"dltensor"
_USED = b"used_dltensor"
_NAME_VERSIONED = b"dltensor_versioned"
_CAPSULE_DESTRUCTOR = ctypes.PYFUNCTYPE(None, c_void_p)
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, c_void_p, c_char_p, _CAPSULE_DESTRUCTOR)(
    ("PyCapsule_New", ctypes.pythonapi))
_capsule_is_valid = ctypes.PYFUNCTYPE(c_int, ctypes.py_object, c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_get = ctypes.PYFUNCTYPE(c_void_p, ctypes.py_object, c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_capsule_set_name = ctypes.PYFUNCTYPE(c_int, ctypes.py_object, c_char_p)(
    ("PyCapsule_SetName", ctypes.pythonapi))
_raw_is_valid = ctypes.PYFUNCTYPE(c_int, c_void_p, c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_raw_get = ctypes.PYFUNCTYPE(c_void_p, c_void_p, c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))

# What an exported DLManagedTensor keeps alive, by its address, until its deleter runs: the
# structure itself, its shape and strides arrays, and the owner of the memory (the mapped Tensor,
# or the NumPy copy) with the function that lets it go.
_exports: Dict[int, Tuple[Any, ...]] = {}
_exports_lock = threading.Lock()


def _deleter(mt: Any) -> None:
    addr = mt if isinstance(mt, int) else ctypes.cast(mt, c_void_p).value
    with _exports_lock:
        entry = _exports.pop(addr, None)
    if entry is not None and entry[-1] is not None:
        entry[-1]()


def _on_capsule_freed(cap: int) -> None:
    # A capsule nobody consumed still owns its tensor: call the deleter (the protocol's rule).
    for name in (_NAME, _NAME_VERSIONED):
        if _raw_is_valid(cap, name):
            ptr = _raw_get(cap, name)
            if ptr:
                _deleter(ptr)


_DELETER_FN = DELETER(_deleter)
_DELETER_VERSIONED_FN = DELETER_VERSIONED(_deleter)
_CAPSULE_FN = _CAPSULE_DESTRUCTOR(_on_capsule_freed)


def _capsule(data: int, shape: Tuple[int, ...], owner: Any, release: Any,
             versioned: bool = False) -> Any:
    """A capsule over `data` (float32, CPU, row-major `shape`): "dltensor_versioned" (DLPack
    1.0, writable, IS_COPIED when owner is a copy) when versioned, else "dltensor"."""
    n = len(shape)
    dims = (c_int64 * max(n, 1))(*shape)
    strides = (c_int64 * max(n, 1))()
    s = 1
    for i in range(n - 1, -1, -1):
        strides[i] = s
        s *= shape[i]
    if versioned:
        mt: Any = DLManagedTensorVersioned()
        mt.version = DLPackVersion(1, 0)
        mt.flags = FLAG_IS_COPIED if release is None else 0
        mt.deleter = _DELETER_VERSIONED_FN
    else:
        mt = DLManagedTensor()
        mt.deleter = _DELETER_FN
    mt.dl_tensor.data = data
    mt.dl_tensor.device = DLDevice(K_DL_CPU, 0)
    mt.dl_tensor.ndim = n
    mt.dl_tensor.dtype = DLDataType(K_DL_FLOAT, 32, 1)
    mt.dl_tensor.shape = ctypes.cast(dims, POINTER(c_int64))
    mt.dl_tensor.strides = ctypes.cast(strides, POINTER(c_int64))
    mt.dl_tensor.byte_offset = 0
    addr = ctypes.addressof(mt)
    with _exports_lock:
        _exports[addr] = (mt, dims, strides, owner, release)
    return _capsule_new(addr, _NAME_VERSIONED if versioned else _NAME, _CAPSULE_FN)


def _ctx_handle(ctx: "Context") -> int:
    if ctx._h is None:
        raise ClosedError("pagoda: the context is closed")
    return ctx._h


def shares_memory(ctx: "Context") -> bool:
    """Whether tensors on ctx's device can share memory with the host (DLPack, host views)."""
    return api.pgd_ctx_host_alignment(_ctx_handle(ctx)) > 0


def export(t: "Tensor", copy: Optional[bool] = None, versioned: bool = False) -> Any:
    """A capsule over t's memory (mapped: no copy) where the device shares the host's memory
    and copy is not True; else over a NumPy copy (BufferError when copy=False). versioned: a
    DLPack 1.0 "dltensor_versioned" capsule, else the unversioned "dltensor"."""
    ctx = t._ctx
    if copy is not True and shares_memory(ctx):
        ctx._enter()
        try:
            th = t._handle()
            ptr = c_void_p()
            err = c_void_p()
            raise_from(api.pgd_tensor_map(th, byref(ptr), byref(err)), err)
        finally:
            ctx._exit()
        addr = ptr.value

        def release(tensor: Any = t, th: int = th, addr: Any = addr) -> None:
            # The unmap holds the tensor until it ran (queued by the context when another
            # thread holds it), so the tensor cannot be freed before its unmap.
            if not tensor.closed:
                tensor._ctx._release(
                    lambda h, keep=tensor: api.pgd_tensor_unmap(h, addr, None), th)

        return _capsule(addr, t.shape, t, release, versioned)
    if copy is False:
        raise BufferError(f"pagoda: the memory of '{ctx.device['name']}' is not the host's: a "
                          f"DLPack export needs a copy (copy=False was asked)")
    a = t.numpy()
    return _capsule(a.ctypes.data, t.shape, a, None, versioned)


def _compact(shape: Tuple[int, ...], strides: Optional[Tuple[int, ...]]) -> bool:
    if strides is None:
        return True
    want = 1
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1 and s != want:
            return False
        want *= d
    return True


def _wrap_capsule(ctx: "Context", cap: Any) -> Optional["Tensor"]:
    """A tensor over the memory of a producer's capsule, or None (the capsule untouched) when
    it cannot be shared."""
    from .tensor import Tensor

    if not _capsule_is_valid(cap, _NAME):
        return None
    mtp = ctypes.cast(_capsule_get(cap, _NAME), POINTER(DLManagedTensor))
    dl = mtp.contents.dl_tensor
    if dl.device.device_type != K_DL_CPU or not 0 <= dl.ndim <= MAX_DIMS:
        return None
    if (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) != (K_DL_FLOAT, 32, 1):
        return None
    shape = tuple(dl.shape[i] for i in range(dl.ndim))
    strides = tuple(dl.strides[i] for i in range(dl.ndim)) if dl.strides else None
    data = (dl.data or 0) + dl.byte_offset
    align = api.pgd_ctx_host_alignment(_ctx_handle(ctx))
    if not _compact(shape, strides) or not data or data % align:
        return None
    dims = (c_int64 * max(len(shape), 1))(*shape)
    out = c_void_p()
    err = c_void_p()
    h = ctx._enter()
    try:
        rc = api.pgd_tensor_wrap_host(h, data, len(shape), dims, byref(out), byref(err))
        if rc:
            api.pgd_error_destroy(err)  # the driver would copy: the caller copies instead
            return None
        _capsule_set_name(cap, _USED)  # ours now: the deleter is called when the tensor goes
        deleter = mtp.contents.deleter

        def destroy(th: int, mtp: Any = mtp, deleter: Any = deleter) -> None:
            api.pgd_tensor_destroy(th)
            if deleter:
                deleter(mtp)

        return Tensor(ctx, out.value, destroy, shape)
    finally:
        ctx._exit()


def from_dlpack(obj: Any, ctx: "Context", copy: Optional[bool] = None) -> "Tensor":
    """A pagoda.Tensor on ctx holding obj's data: any object with __dlpack__ (a NumPy array, a
    PyTorch tensor, another pagoda.Tensor).

    No copy where ctx's device shares the host's memory and obj is CPU memory of float32,
    row-major contiguous and aligned to host_alignment(ctx) bytes: the tensor then uses obj's
    memory (writes by either side are seen by the other once the work using it is done; ctx's
    ops must not run while obj's owner writes it), and obj's producer keeps it alive until the
    tensor is closed. Otherwise the data is copied (and converted to float32); copy=False then
    raises BufferError, copy=True always copies."""
    from .tensor import Tensor, as_float32

    if not hasattr(obj, "__dlpack__"):
        raise InvalidArgumentError(f"pagoda.from_dlpack: {type(obj).__name__} has no __dlpack__ "
                                   f"(DLPack producers: NumPy arrays, PyTorch tensors, ...)")
    if copy is not True and shares_memory(ctx):
        on_cpu = True
        if hasattr(obj, "__dlpack_device__"):
            on_cpu = int(obj.__dlpack_device__()[0]) == K_DL_CPU
        if on_cpu:
            t = _wrap_capsule(ctx, obj.__dlpack__())
            if t is not None:
                return t
    if copy is False:
        raise BufferError("pagoda.from_dlpack: the data cannot be shared with the device (not "
                          "float32, not contiguous, not aligned to host_alignment(ctx) bytes, not "
                          "CPU memory, or a device whose memory is not the host's) and "
                          "copy=False was asked")
    return Tensor.from_array(ctx, as_float32(np.from_dlpack(obj), "from_dlpack"))


def host_alignment(ctx: "Context") -> int:
    """The alignment in bytes memory needs to be shared with ctx's device without a copy
    (pagoda.from_dlpack); 0 when the device's memory is not the host's."""
    return int(api.pgd_ctx_host_alignment(_ctx_handle(ctx)))


def empty_host(ctx: "Context", shape: Any) -> np.ndarray:
    """An uninitialised float32 ndarray aligned for ctx's device (host_alignment), so that
    pagoda.from_dlpack shares it without a copy."""
    n = int(np.prod(shape, dtype=np.int64))
    align = max(host_alignment(ctx), 64)
    raw = np.empty(n * 4 + align, dtype=np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start:start + n * 4].view(np.float32).reshape(shape)
