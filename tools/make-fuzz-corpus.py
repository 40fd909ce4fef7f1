#!/usr/bin/env python3
"""tools/make-fuzz-corpus.py OUTDIR — seed corpora for the libFuzzer targets in tests/fuzz.

Writes OUTDIR/{safetensors,npy,image,model_config,resnet_config,labels,bench_spec,options,
jpeg,png,webp,gat_graph,memnet_story,detr_config,csv,results,eval_lists,http_header,serve}/: for each reader a few valid tiny files and
one file per rejection rule (so the fuzzer starts with every error path reached), all small.
Standard library only (PNG and BMP are written by hand; JPEG seeds are added when Pillow is
importable). Run at fuzz time by tools/fuzz.sh; nothing here is committed.
"""
import io
import json
import os
import struct
import sys
import zlib


def st_file(entries, meta=None, raw_header=None, pad_data=b"", header_len=None):
    """A safetensors file from [(name, dtype, shape, bytes)], offsets in order."""
    hdr, data, at = {}, b"", 0
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dtype, shape, blob in entries:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(blob)]}
        data += blob
        at += len(blob)
    h = raw_header if raw_header is not None else json.dumps(hdr, separators=(",", ":")).encode()
    n = len(h) if header_len is None else header_len
    return struct.pack("<Q", n) + h + data + pad_data


def f32(*vals):
    return struct.pack("<%df" % len(vals), *vals)


def safetensors_seeds():
    s = {}
    s["valid-f32"] = st_file([("a", "F32", [2, 3], f32(*range(6))), ("b", "F32", [1], f32(1.5))])
    s["valid-f16-bf16"] = st_file([("h", "F16", [2], struct.pack("<2H", 0x3C00, 0x7C00)),
                                   ("b", "BF16", [2], struct.pack("<2H", 0x3F80, 0x7FC1))])
    s["valid-f64-i64"] = st_file([("d", "F64", [2], struct.pack("<2d", 1e300, -0.0)),
                                  ("n", "I64", [], struct.pack("<q", 7))])
    s["valid-meta"] = st_file([("x", "F32", [1, 1, 1], f32(2))], meta={"format": "pt", "num_heads": "3"})
    s["valid-empty"] = st_file([])
    s["valid-zero-size"] = st_file([("z", "F32", [0, 4], b""), ("y", "U8", [3], b"abc")])
    s["err-short"] = b"\x01\x00\x00"
    s["err-header-limit"] = struct.pack("<Q", 100000001) + b"{}"
    s["err-header-past-end"] = struct.pack("<Q", 64) + b"{}"
    s["err-utf8"] = st_file([], raw_header=b'{"\xff\xfe":1}')
    s["err-json"] = st_file([], raw_header=b'{"a":')
    s["err-duplicate"] = st_file([], raw_header=b'{"a":{},"a":{}}')
    s["err-not-object"] = st_file([], raw_header=b"[1,2]")
    s["err-meta-not-object"] = st_file([], raw_header=b'{"__metadata__":[]}')
    s["err-meta-value"] = st_file([], raw_header=b'{"__metadata__":{"k":1}}')
    s["err-dtype"] = st_file([("a", "F33", [1], f32(0))])
    s["err-shape-type"] = st_file([("a", "F32", "1", f32(0))])
    s["err-dims"] = st_file([("a", "F32", [1] * 9, f32(0))])
    s["err-negative-dim"] = st_file([("a", "F32", [-1], f32(0))])
    s["err-overflow"] = st_file([("a", "F32", [2**62, 2**62], f32(0))])
    s["err-size-mismatch"] = st_file([("a", "F32", [2], f32(0))])
    s["err-empty-name"] = st_file([("", "F32", [1], f32(0))])
    s["err-extra-key"] = st_file([], raw_header=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":0}}',
                                 pad_data=f32(0))
    s["err-offsets-start"] = st_file([], raw_header=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}',
                                     pad_data=f32(0, 0))
    s["err-gap"] = st_file([], raw_header=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                           b'"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}', pad_data=f32(0, 0, 0))
    s["err-overlap"] = st_file([], raw_header=b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                               b'"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', pad_data=f32(0, 0))
    s["err-trailing"] = st_file([("a", "F32", [1], f32(0))], pad_data=b"xx")
    s["err-offsets-order"] = st_file([], raw_header=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}',
                                     pad_data=f32(0))
    return s


# ---- ViT checkpoints in the three namings, tiny (dim 4, patch 2, 2x2 grid, 2 blocks) ----

FAMILIES = {
    "timm": ("patch_embed.proj.weight", "patch_embed.proj.bias", "cls_token", "dist_token", "pos_embed",
             "norm.weight", "norm.bias", "head.weight", "head.bias",
             "blocks.%d.norm1.weight", "blocks.%d.norm1.bias", "blocks.%d.attn.qkv.weight",
             "blocks.%d.attn.qkv.bias", "blocks.%d.attn.proj.weight", "blocks.%d.attn.proj.bias",
             "blocks.%d.norm2.weight", "blocks.%d.norm2.bias", "blocks.%d.mlp.fc1.weight",
             "blocks.%d.mlp.fc1.bias", "blocks.%d.mlp.fc2.weight", "blocks.%d.mlp.fc2.bias"),
    "hf": ("vit.embeddings.patch_embeddings.projection.weight",
           "vit.embeddings.patch_embeddings.projection.bias", "vit.embeddings.cls_token",
           "vit.embeddings.distillation_token", "vit.embeddings.position_embeddings",
           "vit.layernorm.weight", "vit.layernorm.bias", "classifier.weight", "classifier.bias",
           "vit.encoder.layer.%d.layernorm_before.weight", "vit.encoder.layer.%d.layernorm_before.bias",
           "vit.encoder.layer.%d.attention.attention.query.weight",
           "vit.encoder.layer.%d.attention.attention.query.bias",
           "vit.encoder.layer.%d.attention.output.dense.weight",
           "vit.encoder.layer.%d.attention.output.dense.bias",
           "vit.encoder.layer.%d.layernorm_after.weight", "vit.encoder.layer.%d.layernorm_after.bias",
           "vit.encoder.layer.%d.intermediate.dense.weight", "vit.encoder.layer.%d.intermediate.dense.bias",
           "vit.encoder.layer.%d.output.dense.weight", "vit.encoder.layer.%d.output.dense.bias"),
    "torchvision": ("conv_proj.weight", "conv_proj.bias", "class_token", None, "encoder.pos_embedding",
                    "encoder.ln.weight", "encoder.ln.bias", "heads.head.weight", "heads.head.bias",
                    "encoder.layers.encoder_layer_%d.ln_1.weight", "encoder.layers.encoder_layer_%d.ln_1.bias",
                    "encoder.layers.encoder_layer_%d.self_attention.in_proj_weight",
                    "encoder.layers.encoder_layer_%d.self_attention.in_proj_bias",
                    "encoder.layers.encoder_layer_%d.self_attention.out_proj.weight",
                    "encoder.layers.encoder_layer_%d.self_attention.out_proj.bias",
                    "encoder.layers.encoder_layer_%d.ln_2.weight", "encoder.layers.encoder_layer_%d.ln_2.bias",
                    "encoder.layers.encoder_layer_%d.mlp.0.weight", "encoder.layers.encoder_layer_%d.mlp.0.bias",
                    "encoder.layers.encoder_layer_%d.mlp.3.weight", "encoder.layers.encoder_layer_%d.mlp.3.bias"),
}


def vit_tensors(fam, dim=4, patch=2, grid=2, depth=2, mlp=8, classes=3, dist=False, drop=()):
    n = FAMILIES[fam]
    extra = 2 if dist else 1
    t = {n[0]: [dim, 3, patch, patch], n[1]: [dim], n[2]: [1, 1, dim],
         n[4]: [1, grid * grid + extra, dim], n[5]: [dim], n[6]: [dim], n[7]: [classes, dim], n[8]: [classes]}
    if dist:
        t[n[3]] = [1, 1, dim]
    for b in range(depth):
        blk = [[dim], [dim], [3 * dim, dim], [3 * dim], [dim, dim], [dim], [dim], [dim],
               [mlp, dim], [mlp], [dim, mlp], [dim]]
        for tmpl, shape in zip(n[9:], blk):
            name = tmpl % b
            if fam == "hf" and "query" in name:
                shape = [dim, dim] if len(shape) == 2 else [dim]
                for part in ("query", "key", "value"):
                    t[name.replace("query", part)] = shape
            else:
                t[name] = shape
    for d in drop:
        t.pop(d, None)
    return t


def vit_file(tensors, meta=None, dtype="F16"):
    size = {"F16": 2, "F32": 4}[dtype]
    entries = []
    for name, shape in tensors.items():
        count = 1
        for v in shape:
            count *= v
        entries.append((name, dtype, shape, bytes(count * size)))
    return st_file(entries, meta=meta)


def model_seeds():
    s = {}
    for fam in FAMILIES:
        s["vit-" + fam] = vit_file(vit_tensors(fam))
    s["vit-deit"] = vit_file(vit_tensors("timm", dist=True))
    s["vit-meta-heads"] = vit_file(vit_tensors("timm", dim=8), meta={"num_heads": "2"})
    s["vit-f32-192"] = vit_file(vit_tensors("timm", dim=192, patch=1, grid=1, depth=1, mlp=1, classes=1), dtype="F32")
    t = vit_tensors("timm")
    s["err-no-pos"] = vit_file(vit_tensors("timm", drop=["pos_embed"]))
    t = vit_tensors("timm")
    t["patch_embed.proj.weight"] = [4, 3, 2, 3]
    s["err-patch-shape"] = vit_file(t)
    t = vit_tensors("timm")
    t["pos_embed"] = [1, 4, 4]
    s["err-grid"] = vit_file(t)
    s["err-no-blocks"] = vit_file(vit_tensors("timm", depth=0))
    s["err-no-fc1"] = vit_file(vit_tensors("timm", drop=["blocks.0.mlp.fc1.weight"]))
    s["err-no-head"] = vit_file(vit_tensors("torchvision", drop=["heads.head.weight"]))
    s["err-heads"] = vit_file(vit_tensors("timm", dim=6), meta={"num_heads": "4"})
    s["err-not-vit"] = vit_file({"conv1.weight": [4, 3, 3, 3], "fc.weight": [3, 4]})
    return s


# ---- .npy ----

def npy(header, body, version=1, magic=b"\x93NUMPY"):
    h = header.encode("latin-1")
    pad = (64 - (len(magic) + 2 + (2 if version == 1 else 4) + len(h) + 1) % 64) % 64
    h = h + b" " * pad + b"\n"
    ln = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    return magic + bytes([version, 0]) + ln + h + body


def npy_seeds():
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }"
    s = {}
    s["valid-f4-2d"] = npy(d % ("<f4", "False", "(2, 3)"), f32(*range(6)))
    s["valid-f8-1d"] = npy(d % ("<f8", "False", "(2,)"), struct.pack("<2d", 1.0, 2.0), version=2)
    s["valid-0d"] = npy(d % ("<f4", "False", "()"), f32(3))
    s["valid-empty"] = npy(d % ("<f4", "False", "(0, 5)"), b"", version=3)
    s["valid-4d"] = npy(d % ("<f4", "False", "(1, 3, 2, 2)"), f32(*range(12)))
    s["err-magic"] = b"\x93NUMPZ\x01\x00\x10\x00" + b" " * 16
    s["err-short"] = b"\x93NUMPY\x01"
    s["err-version"] = npy(d % ("<f4", "False", "(1,)"), f32(0), version=4)
    s["err-header-past-end"] = b"\x93NUMPY\x01\x00\xff\x7f{'descr'"
    s["err-missing-key"] = npy("{'descr': '<f4', 'shape': (1,), }", f32(0))
    s["err-dtype"] = npy(d % (">f4", "False", "(1,)"), f32(0))
    s["err-int"] = npy(d % ("<i8", "False", "(1,)"), bytes(8))
    s["err-fortran"] = npy(d % ("<f4", "True", "(1,)"), f32(0))
    s["err-shape-type"] = npy(d % ("<f4", "False", "[1]"), f32(0))
    s["err-shape-neg"] = npy(d % ("<f4", "False", "(-1,)"), f32(0))
    s["err-dims"] = npy(d % ("<f4", "False", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), f32(0))
    s["err-huge"] = npy(d % ("<f4", "False", "(99999999999999, 99999999999)"), f32(0))
    s["err-count"] = npy(d % ("<f4", "False", "(3,)"), f32(0, 1))
    return s


# ---- images ----

def png(width, height, color_type, bit_depth=8, rows=None, interlace=0, palette=None, bad_crc=False):
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color_type]
    bpr = (width * channels * bit_depth + 7) // 8
    if rows is None:
        rows = [bytes((x * 37 + y * 11) & 255 for x in range(bpr)) for y in range(height)]
    raw = b"".join(bytes([y % 5]) + r for y, r in enumerate(rows))

    def chunk(kind, data):
        crc = zlib.crc32(kind + data) ^ (1 if bad_crc else 0)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc & 0xFFFFFFFF)

    out = b"\x89PNG\r\n\x1a\n"
    out += chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, interlace))
    if palette is not None:
        out += chunk(b"PLTE", palette)
    out += chunk(b"IDAT", zlib.compress(raw))
    return out + chunk(b"IEND", b"")


def bmp(width, height, bpp=24, palette_size=0, top_down=False):
    row = ((width * bpp + 31) // 32) * 4
    pixels = bytes(((i * 7) & 255) for i in range(row * height))
    pal = bytes(((i * 5) & 255) for i in range(4 * palette_size))
    off = 14 + 40 + len(pal)
    h = -height if top_down else height
    info = struct.pack("<IiiHHIIiiII", 40, width, h, 1, bpp, 0, len(pixels), 2835, 2835, palette_size, 0)
    return b"BM" + struct.pack("<IHHI", off + len(pixels), 0, 0, off) + info + pal + pixels


def image_seeds():
    s = {}
    s["png-gray"] = png(5, 3, 0)
    s["png-rgb"] = png(4, 4, 2)
    s["png-rgba"] = png(3, 2, 6)
    s["png-gray-alpha-16"] = png(2, 2, 4, bit_depth=16)
    s["png-palette"] = png(4, 2, 3, palette=bytes(range(12)))
    s["png-1bit"] = png(9, 2, 0, bit_depth=1)
    s["png-interlaced"] = png(9, 9, 2, interlace=1)
    s["bmp-24"] = bmp(5, 3)
    s["bmp-32-top-down"] = bmp(2, 2, bpp=32, top_down=True)
    s["bmp-8-palette"] = bmp(4, 3, bpp=8, palette_size=4)
    s["bmp-1"] = bmp(9, 2, bpp=1, palette_size=2)
    s["err-gif"] = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"
    s["err-pnm"] = b"P6\n1 1\n255\n\x00\x00\x00"
    s["err-unknown"] = b"hello, world"
    s["err-empty"] = b""
    s["err-png-truncated"] = png(4, 4, 2)[:40]
    s["err-png-crc"] = png(2, 2, 2, bad_crc=True)
    s["err-png-too-large"] = png(8193, 8193, 0, rows=[b""] * 1)[:33] + png(1, 1, 0)[33:]
    s["err-png-zero"] = png(1, 1, 0)[:16] + struct.pack(">II", 0, 1) + png(1, 1, 0)[24:]
    s["err-bmp-truncated"] = bmp(5, 3)[:60]
    s["err-jpeg-truncated"] = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"
    try:
        from PIL import Image  # optional: JPEG seeds
        img = Image.new("RGB", (9, 7))
        img.putdata([((x * 29) & 255, (y * 37) & 255, ((x + y) * 13) & 255) for y in range(7) for x in range(9)])
        for name, kw in {"jpeg-baseline": {}, "jpeg-progressive": {"progressive": True},
                         "jpeg-420": {"subsampling": 2}}.items():
            buf = io.BytesIO()
            img.save(buf, "JPEG", quality=80, **kw)
            s[name] = buf.getvalue()
        buf = io.BytesIO()
        img.convert("L").save(buf, "JPEG")
        s["jpeg-gray"] = buf.getvalue()
    except ImportError:
        pass
    return s


def decoder_seeds(image):
    """Seeds of the one-decoder targets (fuzz_jpeg, fuzz_png, fuzz_webp): the image seeds of
    that format plus the decoder golden files (tests/data/decode: every JPEG subsampling,
    progressive, grey, CMYK; PNG 1..16 bit, palette, alpha; WebP lossy/lossless, alpha)."""
    magic = {"jpeg": lambda b: b[:3] == b"\xff\xd8\xff",
             "png": lambda b: b[:8] == b"\x89PNG\r\n\x1a\n",
             "webp": lambda b: b[:4] == b"RIFF" and b[8:12] == b"WEBP"}
    out = {t: {k: v for k, v in image.items() if test(v)} for t, test in magic.items()}
    golden = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                          "decode")
    if os.path.isdir(golden):
        for name in sorted(os.listdir(golden)):
            with open(os.path.join(golden, name), "rb") as f:
                blob = f.read()
            for t, test in magic.items():
                if test(blob):
                    out[t]["golden-" + name] = blob
    out["jpeg"]["err-truncated-scan"] = out["jpeg"].get("golden-jpeg_q50_420.jpg", b"")[:400]
    return out


# ---- ResNet layouts as fuzz_resnet_config reads them: "spec|mode|sub", then "name d0 d1 …" ----

def resnet_lines(bottleneck=False, blocks=(1, 1, 1, 1), stem=4, widths=(2, 4, 4, 8), classes=3,
                 nl=(), nl_mode=None, concat=False):
    """The tensor lines of a tiny torchvision-named ResNet, with non-local blocks at nl ((L, B))."""
    lines = []

    def conv(name, cout, cin, k):
        lines.append("%s %d %d %d %d" % (name, cout, cin, k, k))

    def bn(prefix, c):
        for part in ("weight", "bias", "running_mean", "running_var"):
            lines.append("%s.%s %d" % (prefix, part, c))

    conv("conv1.weight", stem, 3, 7)
    bn("bn1", stem)
    cin = stem
    chans = {}
    for L in range(1, 5):
        w = widths[L - 1]
        out = w * 4 if bottleneck else w
        for B in range(blocks[L - 1]):
            c_in = cin if B == 0 else out
            chans[(L, B)] = c_in
            n = 3 if bottleneck else 2
            for k in range(1, n + 1):
                ci = c_in if k == 1 else w
                co = out if k == n else w
                kk = (3 if k == 2 else 1) if bottleneck else 3
                conv("layer%d.%d.conv%d.weight" % (L, B, k), co, ci, kk)
                bn("layer%d.%d.bn%d" % (L, B, k), co)
            if B == 0 and (L > 1 or c_in != out):
                conv("layer%d.%d.downsample.0.weight" % (L, B), out, c_in, 1)
                bn("layer%d.%d.downsample.1" % (L, B), out)
        cin = out
    lines.append("fc.weight %d %d" % (classes, cin))
    lines.append("fc.bias %d" % classes)
    for (L, B) in nl:
        C = chans[(L, B)]
        Ci = max(C // 2, 1)
        p = "nonlocal.layer%d.%d" % (L, B)
        for part in ("theta", "phi", "g"):
            conv(p + ".%s.weight" % part, Ci, C, 1)
            lines.append(p + ".%s.bias %d" % (part, Ci))
        conv(p + ".w.weight", C, Ci, 1)
        lines.append(p + ".w.bias %d" % C)
        bn(p + ".bn", C)
        if concat:
            lines.append(p + ".concat.weight 1 %d 1 1" % (2 * Ci))
    if nl_mode:
        lines.append("@nonlocal.mode %s" % nl_mode)
    return lines


def resnet_seeds():
    def text(opts, lines):
        return ("\n".join([opts] + lines) + "\n").encode()
    s = {}
    s["basic"] = text("||", resnet_lines())
    s["bottleneck"] = text("||", resnet_lines(bottleneck=True))
    s["blocks-2212"] = text("||", resnet_lines(blocks=(2, 2, 1, 2)))
    s["nl-file"] = text("||", resnet_lines(blocks=(1, 2, 2, 1), nl=[(3, 1)]) + ["@nonlocal.subsample true"])
    s["nl-concat"] = text("||", resnet_lines(nl=[(2, 0)], nl_mode="concatenation", concat=True))
    s["nl-spec"] = text("layer3.0,layer1.0|dot_product|1", resnet_lines(bottleneck=True))
    s["nl-spec-bad"] = text("layer9.0|gaussian|0", resnet_lines())
    s["nl-bad-key"] = text("||", resnet_lines() + ["nonlocal.layer01.0.theta.weight 1 1 1 1"])
    s["missing-fc"] = text("||", resnet_lines()[:-2])
    s["not-resnet"] = text("||", ["patch_embed.proj.weight 4 3 2 2"])
    return s


def labels_seeds():
    return {"three": b"tench\ngoldfish\ngreat white shark\n", "crlf": b"a\r\nb\r\n",
            "no-final-newline": b"x\ty\nz", "empty": b"", "blank-lines": b"\n\n\n",
            "utf8": "caf\u00e9\n\u732b\n\U0001F408\n".encode(), "nul": b"a\x00b\n",
            "bad-utf8": b"\xc0\xaf\n", "c1-control": b"\xc2\x9b[2J\n", "esc": b"\x1b[31m\n"}


def bench_seeds():
    items = ["gemm:197,768,768", "gemm_nn:64,64,64", "blas:8,8,8", "attention:197,12,64",
             "attention-unfused:197,12,64", "layernorm:197,768", "patch_embed:1,768",
             "conv:1,224,224,3,64,7,2", "nonlocal:56,56,256", "nonlocal-unfused:56,56,256",
             "vit_b16:8", "vit_s16:1", "vit_ti16:1", "resnet50:1", "resnet50-nl:8", "scale:4",
             "build", "peak", "kernels", "models", "gemm:0,1,1", "gemm:1,2", "conv:1,2,3",
             "vit_b16:-1", "frobnicate", "gemm:", ""]
    s = {"item-%d" % i: it.encode() for i, it in enumerate(items)}
    s["several"] = "\n".join(items[:8]).encode()
    return s


def options_seeds():
    good = ["cpu", "off", "cl", "1", "pagoda", "request", "4096", "im2col", "64", "512M",
            "tiled", "256", "65536", "2G", "1g", "8", "1024"]
    bad = ["1:0", "", "", "maybe", "fast", "", "0", "winograd", "4097", "12Q", "flash", "-1",
           "9223372036854775808", "18446744073709551616K", "0x10", "+1", "1e3"]
    s = {"all-good": "\n".join(good).encode(), "first-only": b"llvmpipe"}
    for i in range(3, len(good)):
        vals = good[:]
        vals[i] = bad[i]
        s["bad-%d" % i] = "\n".join(vals).encode()
    s["numbers"] = b"\x05-9223372036854775808\n1,2,3\n.5e-3\n5.\n1e999\n007\n-0"
    return s


def i64(*vals):
    return struct.pack("<%dq" % len(vals), *vals)


def gat_graph_seeds():
    """Graph files of `pagoda gat`: x [N, F], edge_index [2, E], optional y, masks."""
    x = ("x", "F32", [3, 2], f32(*range(6)))
    ei = ("edge_index", "I64", [2, 3], i64(0, 1, 2, 1, 2, 0))
    s = {"valid-minimal": st_file([x, ei]),
         "valid-full": st_file([x, ei, ("y", "I64", [3], i64(0, 1, 0)),
                                ("test_mask", "BOOL", [3], b"\x01\x00\x01"),
                                ("train_mask", "U8", [3], b"\x00\x01\x00"),
                                ("val_mask", "BOOL", [3], b"\x00\x00\x00")]),
         "valid-i32-labels": st_file([x, ("edge_index", "I32", [2, 1], struct.pack("<2i", 0, 1)),
                                      ("y", "I32", [3], struct.pack("<3i", 2, 1, 0))]),
         "valid-f16-no-edges": st_file([("x", "F16", [1, 1], struct.pack("<H", 0x3C00)),
                                        ("edge_index", "I64", [2, 0], b"")]),
         "err-no-x": st_file([ei]),
         "err-no-edges": st_file([x]),
         "err-x-1d": st_file([("x", "F32", [2], f32(1, 2)), ei]),
         "err-edges-3-rows": st_file([x, ("edge_index", "I64", [3, 1], i64(0, 1, 2))]),
         "err-edges-float": st_file([x, ("edge_index", "F32", [2, 1], f32(0, 1))]),
         "err-x-nan": st_file([("x", "F32", [1, 1], f32(float("nan"))), ei]),
         "err-y-negative": st_file([x, ei, ("y", "I64", [3], i64(0, -1, 0))]),
         "err-y-huge": st_file([x, ei, ("y", "I64", [3], i64(0, 2**40, 0))]),
         "err-y-shape": st_file([x, ei, ("y", "I64", [2], i64(0, 1))]),
         "err-mask-value": st_file([x, ei, ("test_mask", "U8", [3], b"\x00\x02\x01")]),
         "err-mask-dtype": st_file([x, ei, ("test_mask", "F32", [3], f32(0, 1, 0))]),
         "err-unknown": st_file([x, ei, ("edge_attr", "F32", [3], f32(0, 1, 0))])}
    return s


def memnet_story_seeds():
    """bAbI stories over fuzz_memnet_story's vocabulary (mary john went to the kitchen garden
    where is moved back a yes no; 4 words a sentence, memory 3)."""
    return {"valid-one": b"1 Mary went to the kitchen.\n2 Where is Mary?\tkitchen\t1\n",
            "valid-two-stories": b"1 John moved to the garden.\n2 Mary went back.\n"
                                 b"3 Where is John?\tgarden\t1\n1 Mary went a kitchen.\n"
                                 b"2 Where is Mary?\n",
            "valid-memory": b"".join(b"%d John went.\n" % i for i in range(1, 6))
                            + b"6 Where is John?\tno\n",
            "valid-crlf": b"1 Mary went.\r\n2 Where is Mary?\tyes\r\n",
            "err-no-question": b"1 Mary went to the kitchen.\n",
            "err-question-first": b"1 Where is Mary?\tkitchen\n",
            "err-unknown-word": b"1 Mary flew.\n2 Where is Mary?\n",
            "err-unknown-answer": b"1 Mary went.\n2 Where is Mary?\tparis\n",
            "err-long-sentence": b"1 Mary went to the kitchen back.\n2 Where is Mary?\n",
            "err-no-number": b"Mary went.\n",
            "err-no-space": b"1\tMary went.\n",
            "nul": b"1 Mary went.\x00x\n2 Where is Mary?\n",
            "empty": b""}


def detr_config_seeds():
    """config.json files as Hugging Face's save_pretrained writes them beside DETR weights,
    and the broken ones the reader must refuse or survive."""
    hf = {"architectures": ["DetrForObjectDetection"], "d_model": 256,
          "encoder_attention_heads": 8, "decoder_attention_heads": 8, "dilation": False,
          "id2label": {"0": "N/A", "1": "person", "2": "bicycle"},
          "label2id": {"N/A": 0, "person": 1, "bicycle": 2}, "num_queries": 100}
    s = {"valid-hf": json.dumps(hf, indent=2).encode(),
         "valid-dc5-4-heads": json.dumps(dict(hf, encoder_attention_heads=4,
                                              decoder_attention_heads=4, dilation=True)).encode(),
         "valid-empty-object": b"{}",
         "valid-unicode-labels": json.dumps({"id2label": {"0": "\u732b", "91": "caf\u00e9"}},
                                            ensure_ascii=False).encode(),
         "err-heads-zero": b'{"encoder_attention_heads": 0}',
         "err-heads-negative": b'{"decoder_attention_heads": -8}',
         "err-heads-huge": b'{"encoder_attention_heads": 4294967304}',
         "err-heads-string": b'{"encoder_attention_heads": "8"}',
         "err-dilation-string": b'{"dilation": "yes"}',
         "err-id2label-array": b'{"id2label": ["a", "b"]}',
         "err-id2label-values": b'{"id2label": {"0": 1, "x": "y", "-1": null}}',
         "err-array": b"[1, 2, 3]",
         "err-truncated": json.dumps(hf).encode()[:60],
         "err-duplicate-key": b'{"dilation": true, "dilation": false}',
         "err-nul": b'{"id2label": {"0": "a\u0000b"}}',
         "empty": b""}
    return s


def csv_seeds():
    """Results CSVs as `--output F.csv` writes them (the model record, the header, quoted
    fields) and records RFC 4180 refuses, for fuzz_csv's read / write-back round trip."""
    head = b'# pagoda_results {"family": "vit", "topk": 5}\r\nimage,source,rank,class,label,prob\r\n'
    return {"valid-results": head + b'0,a.png,1,281,tabby,0.5\r\n0,a.png,2,282,"tiger, cat",0.25\r\n',
            "valid-quotes": b'1,"say ""hi""",x\r\n2,"line\r\nend",y\r\n',
            "valid-empty-fields": b',,\r\n"",a,\n',
            "err-quote-inside": b'1,ab"c,2\r\n',
            "err-unclosed": b'1,"abc\r\n',
            "err-after-quote": b'1,"a"b,2\r\n',
            "unfinished": b'1,2,3'}


def results_seeds():
    """--resume inputs for fuzz_results: the first byte picks JSON lines (even) or CSV (odd), the
    rest is the file; the identity is {"model": "vit", "topk": 5, "classes": 3} and the images
    a.png, b,"c".png and d<LF>e.png."""
    ident = b'{"pagoda_results": {"model": "vit", "topk": 5, "classes": 3}}\n'
    csv_head = (b'# pagoda_results {"model": "vit", "topk": 5, "classes": 3}\r\n'
                b'image,source,rank,class,label,prob\r\n')
    return {"valid-jsonl": b"\x00" + ident + b'{"image": 0, "source": "a.png", "top": []}\n'
            + b'{"image": 2, "source": "d\\ne.png", "top": []}\n',
            "valid-jsonl-cut": b"\x00" + ident + b'{"image": 0, "source": "a.png"}\n{"ima',
            "err-jsonl-other-model": b'\x00{"pagoda_results": {"model": "swin"}}\n',
            "err-jsonl-no-record": b'\x00{"image": 0, "source": "a.png"}\n',
            "valid-csv": b"\x01" + csv_head + b'0,a.png,1,2,x,0.5\r\n1,"b,""c"".png",1,0,y,0.25\r\n'
            + b'2,"d\ne.png",1,1,z,0.1\r\n',
            "err-csv-bad-record": b"\x01" + csv_head + b'0,"a.png,1\r\n',
            "empty-csv": b"\x01"}


def eval_lists_seeds():
    """eval's side files for fuzz_eval_lists: first byte even, a --labels-map (NAME INDEX); odd, a
    labelled --list (PATH LABEL), over 10 classes."""
    return {"valid-map": b"\x00cat 3\ndog 4\n",
            "err-map-duplicate": b"\x00cat 3\ncat 4\n",
            "err-map-empty": b"\x00\n",
            "err-map-index": b"\x00cat 12\n",
            "valid-list": b"\x01a.png 0\nb.png 9 \n  c.png\t3\n",
            "err-list-label": b"\x01a.png -1\n",
            "err-list-no-label": b"\x01a.png\n"}


def http_header_seeds():
    """The hub's response headers as libcurl hands them to runtime/io/http.c: an LFS redirect,
    a small file's answer, a CDN's 206, the hub's errors, and malformed status lines."""
    commit = b"X-Repo-Commit: 0123456789abcdef0123456789abcdef01234567\r\n"
    return {"valid-lfs-redirect": b"HTTP/1.1 302 Found\r\n" + commit +
            b'X-Linked-Etag: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"\r\n'
            b"X-Linked-Size: 346293852\r\nLocation: https://cdn-lfs.hf.co/x?sig=1\r\n\r\n",
            "valid-small-file": b"HTTP/2 200\r\n" + commit + b'ETag: W/"1a2b"\r\n'
            b"Content-Length: 69665\r\n\r\n",
            "valid-range": b"HTTP/1.1 302 Found\r\nLocation: /a\r\n\r\nHTTP/1.1 206 Partial\r\n"
            b"Content-Range: bytes 500-999/1000\r\nContent-Length: 500\r\n\r\n",
            "err-gated": b"HTTP/1.1 401 Unauthorized\r\nX-Error-Code: GatedRepo\r\n"
            b"X-Error-Message: Access to model x is restricted\r\n\r\n",
            "err-retry": b"HTTP/1.1 429 Too Many\r\nRetry-After: 17\r\n\r\n",
            "err-status": b"HTTP/1.1 2x0 OK\r\nHTTP/1.1 99\r\nHTTP/\r\nContent-Length: -1\r\n"}


def serve_seeds(images):
    """fuzz_serve's requests: a flags byte (bit 0: the body passed --max-upload), the request
    line, then the body: the page, the API, uploads of the image seeds, and hostile ones."""
    def req(line, body=b"", flags=0):
        return bytes([flags]) + line + b"\n" + body
    png = images["png-rgb"]
    seeds = {"valid-page": req(b"GET /"), "valid-js": req(b"GET /app.js"),
             "valid-models": req(b"GET /api/models"), "valid-health": req(b"HEAD /api/health"),
             "valid-run": req(b"POST /api/run?model=random:vit_ti16&task=maps", png),
             "valid-detect": req(b"POST /api/run?model=detr.safetensors&task=detect&threshold=0.5",
                                 png),
             "err-traversal": req(b"POST /api/run?model=../../etc/passwd&task=..%2f", png),
             "err-args": req(b"POST /api/run?model=a&model=b&x&qx=1e999&qy=-0&" + b"k=v&" * 20),
             "err-too-large": req(b"POST /api/run?model=random:vit_ti16", png, 1),
             "err-not-image": req(b"POST /api/run?model=random:vit_ti16", b"GIF89a\x01\x00"),
             "err-method": req(b"DELETE /api/models?x=<script>"),
             "err-path": req(b"GET /../../etc/passwd\xff\x00"),
             "valid-gallery": req(b"GET /api/gallery?name=a.png"),
             "err-gallery": req(b"GET /api/gallery?name=../a.png&name=a.png"),
             "valid-heads": req(b"POST /api/run?model=random:dino&task=heads", png)}
    for name, blob in list(images.items())[:12]:
        seeds["img-" + name] = req(b"POST /api/run?model=random:vit_ti16&task=classify", blob)
    return seeds


def tokenizer_seeds():
    """fuzz_tokenizer's inputs: a mode byte, then files and text separated by \\0\\1."""
    sep = b"\x00\x01"
    vocab_txt = b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n##s\n,\n!\n"
    byte_chars = [chr(b) for b in range(33, 127)] + [chr(b) for b in range(161, 173)]
    byte_chars += [chr(b) for b in range(174, 256)] + [chr(256 + n) for n in range(68)]
    vocab = {c: i for i, c in enumerate(byte_chars)}
    vocab.update({"he": 256, "ll": 257, "hell": 258, "hello": 259, "<|endoftext|>": 260})
    vocab_json = json.dumps(vocab).encode()
    merges = b"#version: 0.2\nh e\nl l\nhe ll\nhell o\n"
    wp_json = json.dumps({"normalizer": {"type": "BertNormalizer", "lowercase": True},
                          "pre_tokenizer": {"type": "BertPreTokenizer"},
                          "decoder": {"type": "WordPiece", "prefix": "##"},
                          "added_tokens": [{"id": 4, "content": "[MASK]", "special": True,
                                            "lstrip": True, "normalized": False}],
                          "post_processor": {"type": "BertProcessing", "cls": ["[CLS]", 2],
                                             "sep": ["[SEP]", 3]},
                          "model": {"type": "WordPiece", "unk_token": "[UNK]",
                                    "vocab": {t: i for i, t in enumerate(
                                        vocab_txt.decode().split())}}}).encode()
    bpe_json = json.dumps({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True},
                           "decoder": {"type": "ByteLevel"},
                           "added_tokens": [{"id": 260, "content": "<|endoftext|>",
                                             "special": True}],
                           "model": {"type": "BPE", "vocab": vocab,
                                     "merges": ["h e", ["l", "l"], "he ll", "hell o"]}}).encode()
    text = "Hello, worlds! Héllo 中文 [MASK] <|endoftext|> it's  \t 123 😀‍👍".encode()
    return {"valid-wordpiece": b"\x04" + vocab_txt + sep + text,
            "valid-wordpiece-cased": b"\x00" + vocab_txt + sep + text,
            "valid-bpe": b"\x01" + vocab_json + sep + merges + sep + text,
            "valid-wordpiece-json": b"\x02" + wp_json + sep + text,
            "valid-bpe-json": b"\x02" + bpe_json + sep + text,
            "valid-fixed": b"\x03" + text,
            "err-fixed-utf8": b"\x03abc\xe2\x82 \xff",
            "err-vocab-dup": b"\x00[UNK]\na\na\n" + sep + b"a",
            "err-merges-unknown": b"\x01" + vocab_json + sep + b"zz q\n" + sep + b"x",
            "err-json-model": b"\x02{\"model\": {\"type\": \"Unigram\"}}" + sep + b"x"}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: tools/make-fuzz-corpus.py OUTDIR")
    out = sys.argv[1]
    sets = {"safetensors": safetensors_seeds(), "model_config": model_seeds(),
            "npy": npy_seeds(), "image": image_seeds(), "resnet_config": resnet_seeds(),
            "labels": labels_seeds(), "bench_spec": bench_seeds(), "options": options_seeds(),
            "gat_graph": gat_graph_seeds(), "memnet_story": memnet_story_seeds(),
            "detr_config": detr_config_seeds(), "csv": csv_seeds(),
            "results": results_seeds(), "eval_lists": eval_lists_seeds(),
            "http_header": http_header_seeds(),
            "tokenizer": tokenizer_seeds()}
    sets["model_config"].update({"st-" + k: v for k, v in sets["safetensors"].items() if k.startswith("valid")})
    sets.update(decoder_seeds(sets["image"]))
    sets["serve"] = serve_seeds(sets["image"])
    for target, seeds in sets.items():
        d = os.path.join(out, target)
        os.makedirs(d, exist_ok=True)
        for name, blob in seeds.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(blob)
        print("%s: %d seeds in %s" % (target, len(seeds), d))


if __name__ == "__main__":
    main()
