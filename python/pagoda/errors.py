"""pagoda.Error and one subclass per status of pagoda.h's PGD_STATUS_MAP.

Every failing C call raises the subclass of its status carrying the C library's full message
(what failed, where and why); a build failure also carries the OpenCL build log. Subclasses
also derive from the closest built-in exception where one fits (ValueError for bad arguments
and shapes, OSError for files, MemoryError for host memory), so ordinary handlers catch them.
"""

from __future__ import annotations

from ctypes import c_void_p
from typing import Optional


class Error(Exception):
    """A failure reported by Pagoda. `status` is the C status code (a negative int), `name` its
    name ("PGD_ERR_SHAPE"), `message` the C library's message, `cl_code` the OpenCL error code
    behind it (0 if none) and `log` the build log of a PGD_ERR_BUILD (else None)."""

    status: int = 0

    def __init__(self, message: str, status: Optional[int] = None, cl_code: int = 0,
                 log: Optional[str] = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.message = message
        self.cl_code = cl_code
        self.log = log

    @property
    def name(self) -> str:
        from ._capi import api

        return api.pgd_status_name(self.status).decode()


class DeviceNotFoundError(Error, LookupError):
    status = -1


class AllocationError(Error):
    status = -4


class OutOfResourcesError(Error):
    status = -5


class OutOfHostMemoryError(Error, MemoryError):
    status = -6


class BuildError(Error):
    status = -11


class InvalidArgumentError(Error, ValueError):
    status = -30


class NoPlatformError(Error):
    status = -1001


class OpenCLError(Error):
    status = -1100


class IOError(Error, OSError):  # noqa: A001 - the status's own name, pagoda.IOError
    status = -1101


class FormatError(Error, ValueError):
    status = -1102


class ShapeError(Error, ValueError):
    status = -1103


class UnsupportedError(Error):
    status = -1104


class TooLargeError(Error, ValueError):
    status = -1105


class NotFoundError(Error, LookupError):
    status = -1106


class InternalError(Error):
    status = -1107


class ConcurrentUseError(Error, RuntimeError):
    """A context (or something on it) was used from a second thread while a call from another
    thread was still running. Pagoda's contexts serve one thread at a time."""

    status = -30


class ClosedError(Error, ValueError):
    """The context, tensor, layer or model was closed already."""

    status = -30


_BY_STATUS = {cls.status: cls for cls in (
    DeviceNotFoundError, AllocationError, OutOfResourcesError, OutOfHostMemoryError, BuildError,
    InvalidArgumentError, NoPlatformError, OpenCLError, IOError, FormatError, ShapeError,
    UnsupportedError, TooLargeError, NotFoundError, InternalError)}


def error_for(status: int, message: str, cl_code: int = 0, log: Optional[str] = None) -> Error:
    cls = _BY_STATUS.get(status, Error)
    return cls(message, status, cl_code, log)


def raise_from(rc: int, err: c_void_p, what: str = "") -> None:
    """Raises the Error of a failed call (rc != 0), freeing the C error object."""
    from ._capi import api

    if rc == 0:
        if err.value:
            api.pgd_error_destroy(err)
        return
    try:
        if err.value:
            msg = api.pgd_error_get_message(err).decode("utf-8", "replace")
            cl = api.pgd_error_get_cl_code(err)
            log = api.pgd_error_get_log(err)
            log = log.decode("utf-8", "replace") if log else None
        else:
            msg = api.pgd_status_str(rc).decode()
            if what:
                msg = f"{what}: {msg}"
            cl, log = 0, None
    finally:
        if err.value:
            api.pgd_error_destroy(err)
    raise error_for(rc, msg, cl, log)
