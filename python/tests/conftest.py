"""Shared fixtures: one context per OpenCL device found (PoCL, Intel's CPU runtime, rusticl in
CI), the golden data folder, NumPy references in double precision."""

from __future__ import annotations

import os

import numpy as np
import pytest

import pagoda

DATA = os.environ.get("PAGODA_TEST_DATA") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data")


def device_key(d) -> str:
    """The device's key in test names, as tests/harness.c's pgd_test_device_key gives it."""
    if "Portable Computing Language" in d["platform"] or "PoCL" in d["platform_version"]:
        return "pocl"
    if "rusticl" in d["platform"]:
        return "rusticl"
    if "Intel" in d["platform"] and d["type"] == "cpu":
        return "intel"
    return "gpu" if d["type"] == "gpu" else "other"


def _devices():
    """Every device, or those $PAGODA_TEST_DEVICE names (a key of device_key or a "P:D"
    selector): meson runs the suite once per device, as python@pocl, python@intel, ..."""
    try:
        found = pagoda.devices()
    except pagoda.NoPlatformError:
        return []
    want = os.environ.get("PAGODA_TEST_DEVICE")
    if not want:
        return found
    return [d for d in found if want in (device_key(d), d["selector"])]


DEVICES = _devices()


def pytest_collection_modifyitems(config, items):
    if not DEVICES:
        skip = pytest.mark.skip(reason="no OpenCL device")
        for it in items:
            it.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    # meson's convention: a device test that finds no device exits 77 (reported as skipped).
    if not DEVICES and exitstatus == 0:
        session.exitstatus = 77


@pytest.fixture(scope="session", params=[d["selector"] for d in DEVICES] or ["none"],
                ids=[d["name"].split(" ")[0][:24] for d in DEVICES] or ["none"])
def ctx(request):
    """A context on each device in turn (session-wide: kernels are built once per device)."""
    if request.param == "none":
        pytest.skip("no OpenCL device")
    c = pagoda.Context(request.param, env=False,
                       cache_dir=os.environ.get("PAGODA_CACHE_DIR") or None)
    yield c
    c.close()


@pytest.fixture(scope="session")
def any_ctx():
    """One context on the default device (the first one $PAGODA_TEST_DEVICE names, if set), for
    tests of the binding itself."""
    if not DEVICES:
        pytest.skip("no OpenCL device")
    sel = DEVICES[0]["selector"] if os.environ.get("PAGODA_TEST_DEVICE") else None
    c = pagoda.Context(sel, env=False, cache_dir=os.environ.get("PAGODA_CACHE_DIR") or None)
    yield c
    c.close()


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def slow_device(ctx) -> bool:
    """rusticl on llvmpipe runs at a fraction of a GFLOP/s: big cases are kept off it."""
    return ctx.device["software_rasteriser"]


def rows_close(got, want, rtol=1e-3, what=""):
    """The input-dependent part of a batch's outputs on its own (tests/harness.c's
    pgd_test_diff_error): each row minus row 0 of got against the same of want, within rtol of
    that difference's size. Random goldens leave much of an output to biases, where a slip such
    as a wrong head count would hide below allclose's tolerance."""
    g = np.asarray(got, dtype=np.float64).reshape(len(got), -1)
    w = np.asarray(want, dtype=np.float64).reshape(len(want), -1)
    assert len(w) > 1, f"{what}: one row, nothing to subtract"
    dw, dg = w[1:] - w[:1], g[1:] - g[:1]
    scale = np.abs(dw).max()
    assert scale > 0, f"{what}: the golden's rows are all equal"
    err = np.abs(dg - dw).max() / scale
    assert err <= rtol, f"{what}: rows minus row 0 off by {err:.3g} of their size (> {rtol})"


def allclose(got, want, rtol, atol, what=""):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    bad = ~(np.abs(got - want) <= atol + rtol * np.abs(want))
    if bad.any():
        i = np.flatnonzero(bad)[0]
        raise AssertionError(f"{what}: {bad.sum()} of {got.size} elements differ; first at "
                             f"{np.unravel_index(i, got.shape)}: got {got.flat[i]!r}, "
                             f"want {want.flat[i]!r}")
