"""Whole models: pagoda.load(path, ctx) over libpagoda-models (apps/models, the same code the CLI
runs), image decoding and preprocessing through libpagoda's presets."""

from __future__ import annotations

import io
import os
import struct
from ctypes import POINTER, byref, c_double, c_float, c_int, c_void_p
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._capi import PREPROCESS_SIZE, ModelInfo, ModelOptions, api, c_integer
from .device import Context
from .errors import InvalidArgumentError, ShapeError, raise_from
from .tensor import Handle, Tensor, as_float32

PRESETS = {"torchvision": 0, "timm": 1, "hf": 2}
_PRESET_NAMES = {v: k for k, v in PRESETS.items()}
ImageLike = Union[str, "os.PathLike[str]", bytes, np.ndarray, Any]


def _fp(a: np.ndarray) -> Any:
    return a.ctypes.data_as(POINTER(c_float))


def _bmp(rgb: np.ndarray) -> bytes:
    """A 24-bit BMP of an [H, W, 3] uint8 array: the container pgd_image_load_memory reads
    for pixels that arrive as an array (the library decodes files, not raw pixels)."""
    h, w, _ = rgb.shape
    row = (w * 3 + 3) & ~3
    px = np.zeros((h, row), dtype=np.uint8)
    px[:, : w * 3] = rgb[::-1, :, ::-1].reshape(h, w * 3)  # bottom-up rows, BGR
    head = struct.pack("<2sIHHI", b"BM", 54 + px.size, 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, px.size, 2835, 2835, 0, 0)
    return head + info + px.tobytes()


def _image_bytes(img: ImageLike) -> Tuple[Optional[str], Optional[bytes], str]:
    """(path, None, name) for a file, (None, encoded bytes, name) otherwise."""
    if isinstance(img, (str, os.PathLike)):
        p = os.fspath(img)
        return p, None, p
    if isinstance(img, (bytes, bytearray, memoryview)):
        return None, bytes(img), "<bytes>"
    if isinstance(img, np.ndarray):
        a = img
        if a.ndim == 2:
            a = np.repeat(a[:, :, None], 3, axis=2)
        if a.ndim != 3 or a.shape[2] not in (3, 4) or a.dtype != np.uint8:
            raise ShapeError(f"pagoda: an image array is [H, W, 3] (or 4, or [H, W]) uint8, not "
                             f"{list(a.shape)} {a.dtype} (a preprocessed float [3, H, W] array "
                             f"goes to model(batch) directly)")
        return None, _bmp(np.ascontiguousarray(a[:, :, :3])), "<array>"
    if hasattr(img, "save") and hasattr(img, "convert"):  # a PIL image
        buf = io.BytesIO()
        img.convert("RGB").save(buf, format="PNG")
        return None, buf.getvalue(), "<PIL image>"
    raise InvalidArgumentError(f"pagoda: not an image: {type(img).__name__} (a path, encoded "
                               f"bytes, a PIL image or an [H, W, 3] uint8 array)")


def preprocess(image: ImageLike, preset: str = "torchvision") -> np.ndarray:
    """Decodes an image (a JPEG/PNG/BMP path, encoded bytes, a PIL image, or an [H, W, 3]
    uint8 array) and preprocesses it with a preset as the CLI does: "torchvision" (shorter
    side 256, crop 224, ImageNet mean/std), "timm" (248 bicubic, crop 224, 0.5/0.5) or "hf"
    (224 x 224, 0.5/0.5). Returns [3, 224, 224] float32."""
    if preset not in PRESETS:
        raise InvalidArgumentError(f"pagoda: preset is one of {', '.join(PRESETS)}, not "
                                   f"{preset!r}")
    path, data, name = _image_bytes(image)
    h = c_void_p()
    err = c_void_p()
    if path is not None:
        raise_from(api.pgd_image_load(path.encode(), byref(h), byref(err)), err)
    else:
        assert data is not None
        buf = (np.frombuffer(data, dtype=np.uint8) if data else np.zeros(1, np.uint8))
        raise_from(api.pgd_image_load_memory(buf.ctypes.data, len(data), name.encode(), byref(h),
                                             byref(err)), err)
    try:
        out = np.empty((3, PREPROCESS_SIZE, PREPROCESS_SIZE), dtype=np.float32)
        err = c_void_p()
        raise_from(api.pgd_image_preprocess(h, PRESETS[preset], _fp(out), byref(err)), err)
        return out
    finally:
        api.pgd_image_destroy(h)


def imagenet_label(i: int) -> Optional[str]:
    r = api.pgd_model_imagenet_label(c_integer(i, c_int, "imagenet_label: index"))
    return r.decode() if r else None


class Model(Handle):
    """A model loaded on a context (pagoda.load or pagoda.random_model)."""

    def __init__(self, ctx: Context, h: int) -> None:
        super().__init__(ctx, h, api.pgd_model_destroy)
        info = ModelInfo()
        api.pgd_model_get_info(h, byref(info))
        self.family: str = info.family_name.decode()
        self.naming: str = info.naming.decode()
        self.description: str = info.description.decode("utf-8", "replace")
        self.classes: int = info.classes
        self.input_size: Tuple[int, int] = (info.input_h, info.input_w)
        self.patch: int = info.patch
        self.depth: int = info.depth
        self.width: int = info.width
        self.heads: int = info.heads
        self.nonlocal_blocks: int = info.nonlocal_blocks
        self.preset: str = _PRESET_NAMES.get(info.preprocess, "torchvision")
        self.has_attention_maps = bool(info.has_attention_maps)
        self.has_affinity = bool(info.has_affinity)
        self.headless = bool(info.headless)
        self.last_ms: float = 0.0

    def __repr__(self) -> str:
        return f"<pagoda.Model {self.description}>"

    def _batch(self, batch: Any) -> np.ndarray:
        if isinstance(batch, Tensor):
            batch = batch.numpy()
        x = as_float32(batch, "batch")
        if x.ndim == 3:
            x = x[None]
        if x.ndim != 4 or x.shape[1] != 3 or x.shape[0] < 1 or x.shape[2] < 1 or x.shape[3] < 1:
            raise ShapeError(f"pagoda: a batch is [B, 3, H, W] (or one [3, H, W] image), not "
                             f"{list(np.shape(batch))}")
        for d in x.shape:
            c_integer(d, c_int, f"a batch's size ({list(x.shape)})")
        return x

    def __call__(self, batch: Any) -> np.ndarray:
        """Logits [B, classes] (float32 NumPy) of a preprocessed batch [B, 3, H, W]."""
        x = self._batch(batch)
        B, _, H, W = x.shape
        logits = np.empty((B, self.classes), dtype=np.float32)
        t = c_double()
        self._ctx._enter()
        try:
            err = c_void_p()
            raise_from(api.pgd_model_forward(self._handle(), _fp(x), B, H, W, _fp(logits),
                                             byref(t), byref(err)), err)
        finally:
            self._ctx._exit()
        self.last_ms = t.value
        return logits

    forward = __call__

    def preprocess(self, images: Union[ImageLike, Sequence[ImageLike]]) -> np.ndarray:
        """Images (one or a list) preprocessed with this model's preset: [B, 3, 224, 224]."""
        if isinstance(images, (str, os.PathLike, bytes)) or hasattr(images, "convert") or (
                isinstance(images, np.ndarray) and images.dtype == np.uint8):
            images = [images]
        images = list(images)
        if not images:
            raise InvalidArgumentError("pagoda: no images given (an empty list)")
        return np.stack([preprocess(i, self.preset) for i in images])

    def _inputs(self, images: Any) -> np.ndarray:
        if isinstance(images, (np.ndarray, Tensor)) and (
                isinstance(images, Tensor) or images.dtype.kind == "f"):
            return self._batch(images)
        return self.preprocess(images)

    def classify(self, images: Any, topk: int = 5) -> List[List[Dict[str, Any]]]:
        """The top-k classes of each image: a list (one per image) of lists of
        {"index", "label", "probability", "logit"}, best first. `images` are paths, PIL
        images, uint8 [H, W, 3] arrays, or a preprocessed float batch [B, 3, H, W]."""
        topk = c_integer(topk, c_int, "classify: topk", 1, 100000)
        logits = self(self._inputs(images)).astype(np.float64)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs = e / e.sum(axis=1, keepdims=True)
        out = []
        for b in range(logits.shape[0]):
            order = np.argsort(-logits[b], kind="stable")[: min(topk, self.classes)]
            out.append([{"index": int(i),
                         "label": (imagenet_label(i) if self.classes == 1000 else None)
                         or f"class {int(i)}",
                         "probability": float(probs[b, i]), "logit": float(logits[b, i])}
                        for i in order])
        return out

    def features(self, images: Any, pool: str = "cls") -> np.ndarray:
        """Pooled features [B, width] of a headless ViT (a checkpoint without a classifier,
        as DINO's): the final-normed class token (pool="cls", what timm gives with
        num_classes=0) or the mean of the patch tokens (pool="mean"). Raises UnsupportedError
        for models with a classifier (their forward gives logits)."""
        if pool not in ("cls", "mean"):
            raise InvalidArgumentError(f"pagoda: pool is 'cls' or 'mean', not {pool!r}")
        x = self._inputs(images)
        self._ctx._enter()
        try:
            err = c_void_p()
            raise_from(api.pgd_model_set_pool(self._handle(), 0 if pool == "cls" else 1,
                                              byref(err)), err)
        finally:
            self._ctx._exit()
        return self(x)

    def attention_maps(self, images: Any) -> Tuple[np.ndarray, np.ndarray]:
        """ViT: (last, rollout), each [B, H/patch, W/patch]: the last block's class-token
        attention over the patches (mean over heads) and the attention rollout across all
        blocks. Raises UnsupportedError for other families."""
        x = self._inputs(images)
        B, _, H, W = x.shape
        p = max(self.patch, 1)
        last = np.zeros((B, max(H // p, 1), max(W // p, 1)), dtype=np.float32)
        roll = np.zeros_like(last)
        self._ctx._enter()
        try:
            err = c_void_p()
            raise_from(api.pgd_model_attention_maps(self._handle(), _fp(x), B, H, W, None,
                                                    _fp(last), _fp(roll), byref(err)), err)
        finally:
            self._ctx._exit()
        return last, roll

    def affinity(self, images: Any, query: Tuple[float, float] = (0.5, 0.5)) -> np.ndarray:
        """ResNet with a non-local block: the affinity row of the query point (x, y as
        fractions of the input's width and height) of the first non-local block, [B, gh, gw].
        The query's (row, column) on the block's own grid is kept in `last_query`. Raises UnsupportedError for models without one."""
        x = self._inputs(images)
        B, _, H, W = x.shape
        gh, gw = c_int(), c_int()
        cells = api.pgd_model_affinity_grid(self._handle(), H, W, byref(gh), byref(gw))
        row = np.zeros((B, max(gh.value, 1), max(gw.value, 1)), dtype=np.float32)
        qx, qy = (float(v) for v in query)
        qi, qj = c_int(), c_int()
        self._ctx._enter()
        try:
            err = c_void_p()
            raise_from(api.pgd_model_affinity(self._handle(), _fp(x), B, H, W, qx, qy, None,
                                              _fp(row), byref(qi), byref(qj), byref(err)), err)
        finally:
            self._ctx._exit()
        self.last_query = (qi.value, qj.value)
        return row if cells > 0 else row[:, :0, :0]


def load(path: Union[str, "os.PathLike[str]"], ctx: Context, *, heads: int = 0,
         nonlocal_spec: Optional[str] = None, nonlocal_mode: Optional[str] = None,
         subsample: Optional[bool] = None) -> Model:
    """Loads a .safetensors checkpoint on ctx, recognising the family as `pagoda classify`
    does: an MLP-Mixer (timm naming), a torchvision ResNet with or without non-local blocks
    (`pagoda nonlocal`) or a ViT (timm, Hugging Face or torchvision naming; `pagoda vit`). The
    keywords are those commands' options (--heads, --nonlocal, --mode, --subsample). A
    save_pretrained folder (or a file in one) whose config.json names a BERT-family model_type
    gives a pagoda.Bert (pagoda.text.load_text)."""
    if not isinstance(ctx, Context):
        raise InvalidArgumentError(f"pagoda.load: ctx is a pagoda.Context, not "
                                   f"{type(ctx).__name__}")
    from .text import is_text_model, load_text
    if is_text_model(path):
        return load_text(path, ctx)  # type: ignore[return-value]
    p = os.fspath(path).encode()
    if b"\0" in p:
        raise InvalidArgumentError("pagoda.load: the path holds a NUL character")
    keep = [s.encode() if s is not None else None for s in (nonlocal_spec, nonlocal_mode)]
    opt = ModelOptions(c_integer(heads, c_int, "load: heads", 0), keep[0], keep[1],
                       int(subsample is not None),
                       int(bool(subsample)))
    out = c_void_p()
    h = ctx._enter()
    try:
        err = c_void_p()
        raise_from(api.pgd_model_load(h, p, byref(opt), byref(out), byref(err)), err)
        return Model(ctx, out.value)
    finally:
        ctx._exit()


def random_model(name: str, ctx: Context) -> Model:
    """A model with seeded random weights, as `pagoda bench` times them: "vit_ti16",
    "vit_s16", "vit_b16", "vit_tiny", "resnet50", "resnet50-nl", "mixer_s16", "mixer_b16",
    "mixer_l16" or "mixer_tiny"."""
    out = c_void_p()
    h = ctx._enter()
    try:
        err = c_void_p()
        raise_from(api.pgd_model_random(h, name.encode(), byref(out), byref(err)), err)
        return Model(ctx, out.value)
    finally:
        ctx._exit()
