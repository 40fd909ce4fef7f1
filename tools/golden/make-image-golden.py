#!/usr/bin/python3
"""Makes the preprocessing golden data for tests/test_image.c.

Writes into tests/data/ a few small PNG test images (RGB, 8 bit; PNG so that every decoder
yields the same pixels) and, per image and preset, the expected 3 x 224 x 224 float32 CHW output
subsampled with stride 7 (elements 0, 7, 14, ...: 21504 little-endian float32 values) as
<image>.<preset>.f32.

The reference is torchvision 0.14's transforms on PIL images when `import torchvision` works,
else the same steps written with PIL and numpy (Image.resize, crop at int(round((H - 224) / 2)),
(v / 255 - mean) / std in float32). Both are run when both are available and must agree.

Run from the repository root: tools/golden/make-image-golden.py
"""
import os
import sys

import numpy as np
from PIL import Image

import goldenlib

STRIDE = 7
CROP = 224
OUT = goldenlib.DATA

PRESETS = {
    # name: (resize, filter, mean, std); resize int = shorter side, tuple = exact (w, h)
    "torchvision": (256, Image.BILINEAR, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    "timm": (248, Image.BICUBIC, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
    "hf": ((224, 224), Image.BILINEAR, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
}


def make_images():
    rng = np.random.default_rng(20261202)
    imgs = {}
    # 300 x 200: smooth gradients plus noise plus a hard-edged box (ringing for bicubic).
    h, w = 200, 300
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([x * 255.0 / (w - 1), y * 255.0 / (h - 1), (x + y) * 127.0 / (w + h)], -1)
    a += rng.normal(0, 12, a.shape)
    a[60:120, 100:180] = (250, 10, 240)
    imgs["grad_300x200"] = np.clip(np.rint(a), 0, 255).astype(np.uint8)
    # 97 x 143 (portrait, odd): uniform noise, worst case for rounding differences.
    imgs["noise_97x143"] = rng.integers(0, 256, (143, 97, 3), dtype=np.uint8)
    # 13 x 7: upscaling in both directions, checkerboard with noise.
    c = ((np.mgrid[0:7, 0:13].sum(0) % 2) * 200 + 20)[..., None].repeat(3, -1).astype(float)
    c += rng.normal(0, 20, c.shape)
    imgs["checker_13x7"] = np.clip(np.rint(c), 0, 255).astype(np.uint8)
    return imgs


def ref_pil(img, preset):
    size, flt, mean, std = PRESETS[preset]
    w, h = img.size
    if isinstance(size, int):
        short, long_ = (w, h) if w <= h else (h, w)
        nl = int(size * long_ / short)
        nw, nh = (size, nl) if w <= h else (nl, size)
    else:
        nw, nh = size
    r = img.resize((nw, nh), flt)
    top = int(round((nh - CROP) / 2.0))
    left = int(round((nw - CROP) / 2.0))
    r = r.crop((left, top, left + CROP, top + CROP))
    a = np.asarray(r, dtype=np.uint8).astype(np.float32) / np.float32(255)
    a = (a - np.array(mean, np.float32)) / np.array(std, np.float32)
    return a.transpose(2, 0, 1).astype(np.float32)


def ref_torchvision(img, preset):
    import torchvision.transforms as T
    from torchvision.transforms import InterpolationMode as IM

    size, flt, mean, std = PRESETS[preset]
    interp = IM.BICUBIC if flt == Image.BICUBIC else IM.BILINEAR
    if isinstance(size, int):
        resize = T.Resize(size, interpolation=interp)
    else:
        resize = T.Resize((size[1], size[0]), interpolation=interp)
    t = T.Compose([resize, T.CenterCrop(CROP), T.ToTensor(), T.Normalize(mean, std)])
    return t(img).numpy().astype(np.float32)


def main():
    try:
        import torchvision  # noqa: F401

        have_tv = True
    except Exception:
        have_tv = False
    os.makedirs(OUT, exist_ok=True)
    for name, arr in make_images().items():
        img = Image.fromarray(arr, "RGB")
        png = os.path.join(OUT, name + ".png")
        img.save(png, optimize=True)
        img = Image.open(png).convert("RGB")  # what a decoder returns
        assert np.array_equal(np.asarray(img), arr)
        for preset in PRESETS:
            want = ref_pil(img, preset)
            if have_tv:
                tv = ref_torchvision(img, preset)
                diff = float(np.abs(tv - want).max())
                assert diff < 1e-6, (name, preset, diff)
                want = tv
            sub = want.reshape(-1)[::STRIDE].astype("<f4")
            sub.tofile(os.path.join(OUT, "%s.%s.f32" % (name, preset)))
        print("%s: %dx%d" % (name, arr.shape[1], arr.shape[0]))
    print("reference:", "torchvision " + __import__("torchvision").__version__ if have_tv
          else "PIL + numpy", "; PIL", Image.__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
