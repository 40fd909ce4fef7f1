#!/usr/bin/env python3
"""Makes the decoder golden data for tests/test_decode.c: small JPEG, PNG and WebP files and
the RGB pixels Pillow decodes from each.

Writes into tests/data/decode/:
  NAME.jpg / NAME.png / NAME.webp   the encoded file (17x13 .. 64x48 pixels)
  NAME.rgb                          Image.open(file).convert("RGB") as raw bytes (h * w * 3)
  NAME.torchvision.f32              for two of them: torchvision's Resize(256, bilinear),
                                    CenterCrop(224), ToTensor, Normalize(ImageNet) on the PIL
                                    image, float32 CHW, every 7th element (as make-image-golden.py)
  NAME.upright.rgb                  for the EXIF-oriented files: ImageOps.exif_transpose's pixels
  MANIFEST                          one line per file: NAME FILE WIDTH HEIGHT KIND
The files cover: JPEG at qualities 10..95 with 4:4:4, 4:2:2 and 4:2:0 chroma, progressive,
optimised Huffman tables, restart intervals, greyscale, (Adobe, inverted) CMYK and YCCK
(tools/golden/make-ycck-jpeg.c, built with cc and libjpeg), odd sizes;
PNG grey 1/2/4/8/16 bit, grey+alpha 8/16, RGB 8/16, RGBA 8/16, palette with and without tRNS,
tRNS on grey and RGB, palette indices past the end of PLTE;
WebP lossy and lossless, with and without alpha. The 16-bit PNGs and the low-bit greys are
written by hand here (Pillow does not write them), everything else by Pillow.

Run with a Python that has Pillow, numpy and torchvision, from the repository root, e.g. the
peers venv: /path/to/peers-venv/bin/python tools/golden/make-decode-golden.py
(or python3 -m venv v && v/bin/pip install pillow numpy torch torchvision). Pillow links
libjpeg-turbo (Debian's, or the one in its wheel) and libwebp; their decoders are specified
bit-exactly for the settings used here (accurate integer IDCT, fancy upsampling), so the
pixels do not depend on the version.
"""
import io
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np
from PIL import Image

import goldenlib

OUT = os.path.join(goldenlib.DATA, "decode")
STRIDE = 7


def photo(w, h, seed, channels=3):
    """Smooth gradients, a disc, a hard-edged box and noise: chroma edges for the upsampler."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(float)
    r = x * 255 / max(w - 1, 1)
    g = y * 255 / max(h - 1, 1)
    b = 128 + 100 * np.sin(x / 3.0) * np.cos(y / 4.0)
    a = np.stack([r, g, b, (x + y) * 255 / (w + h)], -1)[..., :channels]
    disc = (x - w / 2) ** 2 + (y - h / 2) ** 2 < (min(w, h) / 3) ** 2
    a[disc] = [230, 30, 60, 128][:channels]
    a[h // 5:h // 3, w // 6:w // 2] = [20, 200, 240, 255][:channels]
    a += rng.normal(0, 10, a.shape)
    return np.clip(np.rint(a), 0, 255).astype(np.uint8)


def png_chunk(kind, data):
    return (struct.pack(">I", len(data)) + kind + data +
            struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def png_bytes(samples, depth, color_type, palette=None, trns=None):
    """A PNG of the given samples (h x w x channels integers) written by hand: any bit depth."""
    h, w = samples.shape[:2]
    rows = []
    for yy in range(h):
        row = samples[yy].reshape(-1)
        if depth == 16:
            raw = row.astype(">u2").tobytes()
        elif depth == 8:
            raw = row.astype(np.uint8).tobytes()
        else:  # pack 1/2/4-bit samples, most significant first
            per = 8 // depth
            vals = list(row) + [0] * (-len(row) % per)
            raw = bytes(sum(int(vals[i + k]) << (8 - depth * (k + 1)) for k in range(per))
                        for i in range(0, len(vals), per))
        rows.append(b"\0" + raw)
    out = b"\x89PNG\r\n\x1a\n"
    out += png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 0))
    if palette is not None:
        out += png_chunk(b"PLTE", bytes(palette))
    if trns is not None:
        out += png_chunk(b"tRNS", bytes(trns))
    out += png_chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
    out += png_chunk(b"IEND", b"")
    return out


def pil_bytes(img, fmt, **kw):
    b = io.BytesIO()
    img.save(b, fmt, **kw)
    return b.getvalue()


def ycck_jpeg():
    """tools/golden/make-ycck-jpeg.c's YCCK JPEG (Pillow cannot write YCCK), compiled with cc against
    libjpeg; where that fails, the committed file is reused."""
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "ycck")
        try:
            subprocess.run(["cc", "-o", exe, os.path.join(here, "make-ycck-jpeg.c"), "-ljpeg"],
                           check=True)
            return subprocess.run([exe], check=True, capture_output=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            print("YCCK: cannot build tools/golden/make-ycck-jpeg.c (%s); reusing the committed file" % e)
            with open(os.path.join(OUT, "jpeg_ycck.jpg"), "rb") as f:
                return f.read()


def _exif8():
    ex = Image.Exif()
    ex[0x0112] = 8
    return ex.tobytes()


def cases():
    rgb = {s: Image.fromarray(photo(*s, seed=s[0] * 100 + s[1])) for s in
           [(17, 13), (31, 17), (33, 21), (37, 27), (45, 29), (64, 48), (23, 19)]}
    out = []
    # JPEG: quality x subsampling (0 = 4:4:4, 1 = 4:2:2, 2 = 4:2:0) x size
    out.append(("jpeg_q95_444", "jpg", pil_bytes(rgb[(33, 21)], "JPEG", quality=95,
                                                 subsampling=0)))
    out.append(("jpeg_q75_422", "jpg", pil_bytes(rgb[(31, 17)], "JPEG", quality=75,
                                                 subsampling=1)))
    out.append(("jpeg_q50_420", "jpg", pil_bytes(rgb[(17, 13)], "JPEG", quality=50,
                                                 subsampling=2)))
    out.append(("jpeg_q10_420_odd", "jpg", pil_bytes(rgb[(37, 27)], "JPEG", quality=10)))
    out.append(("jpeg_q90_420_progressive", "jpg",
                pil_bytes(rgb[(64, 48)], "JPEG", quality=90, progressive=True)))
    out.append(("jpeg_q85_422_optimized", "jpg",
                pil_bytes(rgb[(45, 29)], "JPEG", quality=85, subsampling=1, optimize=True)))
    out.append(("jpeg_q80_420_restart", "jpg",
                pil_bytes(rgb[(64, 48)], "JPEG", quality=80, restart_marker_blocks=2)))
    out.append(("jpeg_q100_444_progressive", "jpg",
                pil_bytes(rgb[(23, 19)], "JPEG", quality=100, subsampling=0, progressive=True)))
    out.append(("jpeg_gray_q85", "jpg", pil_bytes(rgb[(37, 27)].convert("L"), "JPEG",
                                                  quality=85)))
    out.append(("jpeg_gray_progressive", "jpg", pil_bytes(rgb[(17, 13)].convert("L"), "JPEG",
                                                          quality=70, progressive=True)))
    out.append(("jpeg_cmyk_q90", "jpg", pil_bytes(rgb[(33, 21)].convert("CMYK"), "JPEG",
                                                  quality=90)))
    out.append(("jpeg_ycck", "jpg", ycck_jpeg()))
    # PNG written by Pillow: 8-bit RGB, RGBA, L, LA, P with and without transparency
    out.append(("png_rgb8", "png", pil_bytes(rgb[(31, 17)], "PNG")))
    rgba = Image.fromarray(photo(33, 21, 7, channels=4), "RGBA")
    out.append(("png_rgba8", "png", pil_bytes(rgba, "PNG")))
    out.append(("png_gray8", "png", pil_bytes(rgb[(23, 19)].convert("L"), "PNG")))
    out.append(("png_la8", "png", pil_bytes(rgba.convert("LA"), "PNG")))
    pal = rgb[(45, 29)].quantize(colors=200)
    out.append(("png_palette8", "png", pil_bytes(pal, "PNG")))
    pal16 = rgb[(17, 13)].quantize(colors=16)
    out.append(("png_palette4_trns", "png", pil_bytes(pal16, "PNG", transparency=3, bits=4)))
    # PNG written by hand: 16-bit and low-bit depths
    rng = np.random.default_rng(2212)
    g16 = (photo(37, 27, 3, channels=1)[..., 0].astype(np.int64) * 257 +
           rng.integers(0, 257, (27, 37)))
    g16[:4, :] = rng.integers(0, 256, (4, 37))  # some values <= 255 (kept by Pillow's clip)
    out.append(("png_gray16", "png", png_bytes(g16[..., None], 16, 0)))
    rgb16 = photo(33, 21, 4).astype(np.int64) * 257 + rng.integers(0, 257, (21, 33, 3))
    out.append(("png_rgb16", "png", png_bytes(rgb16, 16, 2)))
    rgba16 = photo(17, 13, 5, channels=4).astype(np.int64) * 257 + rng.integers(0, 257,
                                                                                  (13, 17, 4))
    out.append(("png_rgba16", "png", png_bytes(rgba16, 16, 6)))
    la16 = photo(23, 19, 6, channels=2).astype(np.int64) * 257 + rng.integers(0, 257,
                                                                               (19, 23, 2))
    out.append(("png_la16", "png", png_bytes(la16, 16, 4)))
    # tRNS on grey and RGB (Pillow ignores it in convert("RGB")), and palette indices past the
    # end of PLTE (Pillow gives black, as libpng does)
    gt = (np.arange(12 * 5).reshape(5, 12) * 4)
    out.append(("png_gray8_trns", "png", png_bytes(gt[..., None], 8, 0, trns=b"\x00\x10")))
    out.append(("png_gray16_trns", "png", png_bytes(gt[..., None] * 250, 16, 0,
                                                    trns=b"\x03\xe8")))
    rt = np.arange(12 * 5 * 3).reshape(5, 12, 3) * 2 % 256
    out.append(("png_rgb8_trns", "png", png_bytes(rt, 8, 2, trns=b"\x00\x02\x00\x04\x00\x06")))
    idx = np.arange(16 * 3).reshape(3, 16) % 16
    out.append(("png_palette4_past_plte", "png",
                png_bytes(idx[..., None], 4, 3, palette=range(10, 130, 10))))
    for bits in (1, 2, 4):
        g = rng.integers(0, 1 << bits, (13, 19))
        out.append(("png_gray%d" % bits, "png", png_bytes(g[..., None], bits, 0)))
    # EXIF orientations (ignored when decoding, as Pillow; NAME.upright.rgb is what
    # ImageOps.exif_transpose gives, for --exif-rotate)
    for o in range(1, 9):
        ex = Image.Exif()
        ex[0x0112] = o
        out.append(("jpeg_exif_o%d" % o, "jpg", pil_bytes(rgb[(17, 13)], "JPEG", quality=90,
                                                          exif=ex.tobytes())))
    ex = Image.Exif()
    ex[0x0112] = 6
    out.append(("png_exif_o6", "png", pil_bytes(rgb[(23, 19)], "PNG", exif=ex.tobytes())))
    out.append(("webp_exif_o8", "webp", pil_bytes(rgb[(31, 17)], "WEBP", lossless=True,
                                                  exif=_exif8())))
    # WebP
    out.append(("webp_lossy_q80", "webp", pil_bytes(rgb[(31, 17)], "WEBP", quality=80)))
    out.append(("webp_lossy_q30_odd", "webp", pil_bytes(rgb[(45, 29)], "WEBP", quality=30)))
    out.append(("webp_lossless", "webp", pil_bytes(rgb[(33, 21)], "WEBP", lossless=True)))
    out.append(("webp_lossy_alpha", "webp", pil_bytes(rgba, "WEBP", quality=70)))
    out.append(("webp_lossless_alpha", "webp", pil_bytes(rgba, "WEBP", lossless=True,
                                                         exact=True)))
    return out


def torchvision_ref(img):
    import torchvision.transforms as T
    from torchvision.transforms import InterpolationMode as IM

    t = T.Compose([T.Resize(256, interpolation=IM.BILINEAR), T.CenterCrop(224), T.ToTensor(),
                   T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    return t(img).numpy().astype(np.float32)


def main():
    os.makedirs(OUT, exist_ok=True)
    manifest = []
    total = 0
    for name, ext, data in cases():
        path = os.path.join(OUT, name + "." + ext)
        with open(path, "wb") as f:
            f.write(data)
        img = Image.open(path)
        mode = img.mode
        rgb = img.convert("RGB")
        px = np.asarray(rgb, dtype=np.uint8)
        px.tofile(os.path.join(OUT, name + ".rgb"))
        if "exif" in name:
            from PIL import ImageOps
            up = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
            np.asarray(up, dtype=np.uint8).tofile(os.path.join(OUT, name + ".upright.rgb"))
        w, h = rgb.size
        manifest.append("%s %s.%s %d %d %s" % (name, name, ext, w, h, mode))
        total += len(data) + px.nbytes
        if name in ("jpeg_q90_420_progressive", "png_rgb16"):
            ref = torchvision_ref(Image.open(path).convert("RGB"))
            sub = ref.reshape(-1)[::STRIDE].astype("<f4")
            sub.tofile(os.path.join(OUT, name + ".torchvision.f32"))
            total += sub.nbytes
        print("%-28s %-5s %2dx%-2d %-5s %5d bytes" % (name, ext, w, h, mode, len(data)))
    with open(os.path.join(OUT, "MANIFEST"), "w") as f:
        f.write("\n".join(manifest) + "\n")
    from PIL import features
    print("%d files, %d bytes; Pillow %s, libjpeg-turbo %s, libwebp %s" % (
        len(manifest), total, Image.__version__, features.version("jpg"),
        features.version("webp")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
