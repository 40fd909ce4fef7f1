#!/usr/bin/env python3
"""make-bad-images.py DIR — the damaged images of tests/data (and tests/data/fuzz-regress, with an
image- prefix) that stb_image 2.27 decodes by inventing pixels: a BMP cut in half, a BMP declaring
8192 x 8192 pixels in 1000 bytes, a PNG with one compressed byte flipped (stored deflate blocks,
so it still inflates; only the chunk CRC tells), the intact PNG, and a PNG without IEND."""
import struct, zlib, sys, os
out = sys.argv[1]
def bmp(w, h, bpp=24, pixels=None):
    stride = (w * bpp // 8 + 3) & ~3
    data = pixels if pixels is not None else bytes((x * 7 + y * 13) & 255 for y in range(h) for x in range(stride))
    off = 14 + 40
    hdr = b"BM" + struct.pack("<IHHI", off + len(data), 0, 0, off)
    dib = struct.pack("<IiiHHIIiiII", 40, w, h, 1, bpp, 0, len(data), 2835, 2835, 0, 0)
    return hdr + dib + data
full = bmp(32, 32)
open(os.path.join(out, "bmp-truncated-half.bmp"), "wb").write(full[: len(full) // 2])
# 8192 x 8192 declared, 1000 bytes in all
b = bmp(8192, 8192, 24, pixels=b"")
b = b + bytes(1000 - len(b))
open(os.path.join(out, "bmp-8192-in-1000-bytes.bmp"), "wb").write(b)
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
w, h = 16, 16
raw = b"".join(b"\0" + bytes((x * 16 + y) & 255 for x in range(w * 3)) for y in range(h))
z = bytearray(zlib.compress(raw, 0))  # stored blocks: any byte change still decodes
idat = chunk(b"IDAT", bytes(z))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + idat + chunk(b"IEND", b"")
open(os.path.join(out, "png-ok-16x16.png"), "wb").write(png)
bad = bytearray(png)
k = png.index(b"IDAT") + 4 + 40  # a pixel byte inside the stored block
bad[k] ^= 0x55
open(os.path.join(out, "png-corrupt-idat.png"), "wb").write(bytes(bad))
open(os.path.join(out, "png-no-iend.png"), "wb").write(png[: png.index(b"IEND") - 4])
