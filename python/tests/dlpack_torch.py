"""PyTorch <-> Pagoda through DLPack with no copy on CPU devices, checked by data pointer.

Run by pytest (python/tests/test_dlpack.py, where torch is importable) and on its own by meson's
test "python-dlpack-torch" with an interpreter that has torch (tools/setup's .deps-torch):

    python python/tests/dlpack_torch.py

On its own it checks every OpenCL device found and exits 0, 1 on a failure, or 77 (skipped) when
torch or every device is missing, saying which."""

from __future__ import annotations

import gc
import sys

import numpy as np

import pagoda


def aligned_torch(ctx: pagoda.Context, shape):
    """A float32 torch tensor whose data is aligned as ctx's device needs to share it (torch's
    own allocator aligns to 64 bytes; PoCL and Intel's runtime want 128, rusticl 512)."""
    import torch

    n = int(np.prod(shape))
    al = pagoda.host_alignment(ctx)
    raw = torch.empty(n + al // 4)
    off = ((-raw.data_ptr()) % al) // 4
    return raw[off:off + n].view(*shape)


def check_round_trip(ctx: pagoda.Context) -> None:
    """torch -> pagoda -> op -> torch: the same memory all along, on a device sharing the host's
    memory; a copy with the same values elsewhere."""
    import torch

    x = aligned_torch(ctx, (6, 10))
    x.copy_(torch.linspace(-3, 3, 60).view(6, 10))
    t = pagoda.from_dlpack(x, ctx)
    shares = pagoda.host_alignment(ctx) > 0
    y = torch.from_dlpack(t)
    assert torch.equal(x, y)
    if not shares:
        return
    assert y.data_ptr() == x.data_ptr(), (hex(x.data_ptr()), hex(y.data_ptr()))
    print(f"  torch {hex(x.data_ptr())} -> pagoda -> torch {hex(y.data_ptr())}: same memory")
    # Pagoda writes what torch reads, and the other way round.
    t.fill(1.5)
    ctx.finish()
    assert float(x.sum()) == 1.5 * 60
    x[2, 3] = -7.0
    assert t.numpy()[2, 3] == -7.0
    r = pagoda.relu(t)
    z = torch.from_dlpack(r)
    assert float(z[2, 3]) == 0.0 and float(z[0, 0]) == 1.5
    # The Pagoda tensor keeps torch's memory alive: torch's references dropped first.
    ptr = x.data_ptr()
    del x, y
    gc.collect()
    assert t.numpy()[0, 0] == 1.5
    y2 = torch.from_dlpack(t)
    assert y2.data_ptr() == ptr
    # And torch keeps the exported Pagoda tensor alive.
    del t
    gc.collect()
    assert float(y2[0, 0]) == 1.5 and float(y2[2, 3]) == -7.0


def check_copies(ctx: pagoda.Context) -> None:
    """What cannot be shared is copied with the same values: float64, a transposed view."""
    import torch

    d = torch.arange(12, dtype=torch.float64).view(3, 4)
    assert np.array_equal(pagoda.from_dlpack(d, ctx).numpy(), d.numpy().astype(np.float32))
    tr = aligned_torch(ctx, (4, 3))
    tr.copy_(torch.arange(12.0).view(4, 3))
    t = pagoda.from_dlpack(tr.t(), ctx)
    assert np.array_equal(t.numpy(), tr.t().numpy())
    assert torch.from_dlpack(t).data_ptr() != tr.data_ptr()


def main() -> int:
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print(f"SKIP: torch is not importable ({e}): tools/setup makes .deps-torch "
              f"(PAGODA_TORCH=1)")
        return 77
    try:
        devs = pagoda.devices()
    except pagoda.NoPlatformError as e:
        print(f"SKIP: {e}")
        return 77
    for d in devs:
        print(f"{d['selector']} {d['name']}")
        with pagoda.Context(d["selector"], env=False) as ctx:
            check_round_trip(ctx)
            check_copies(ctx)
    print(f"ok: {len(devs)} devices")
    return 0


if __name__ == "__main__":
    sys.exit(main())
