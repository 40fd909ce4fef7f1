"""Pagoda from Python: OpenCL devices, contexts, tensors, ops and whole models.

    import numpy as np, pagoda
    print(pagoda.devices())
    with pagoda.Context("cpu") as ctx:
        a = ctx.tensor(np.random.rand(64, 32))
        b = ctx.tensor(np.random.rand(32, 16))
        c = pagoda.gemm(a, b).numpy()
        model = pagoda.load("vit_b16_timm.safetensors", ctx)
        print(model.classify(["cat.jpg"], topk=5))

The binding calls libpagoda's public C API (pagoda.h) and libpagoda-models (pagoda_models.h)
through ctypes; see python/pagoda/_capi.py.
"""

from ._capi import api as _api
from .device import Context, devices
from .errors import (
    AllocationError,
    BuildError,
    ClosedError,
    ConcurrentUseError,
    DeviceNotFoundError,
    Error,
    FormatError,
    InternalError,
    InvalidArgumentError,
    IOError,
    NoPlatformError,
    NotFoundError,
    OpenCLError,
    OutOfHostMemoryError,
    OutOfResourcesError,
    ShapeError,
    TooLargeError,
    UnsupportedError,
)
from .models import Model, imagenet_label, load, preprocess, random_model
from .ops import absolute as abs
from .ops import amax as max
from .ops import amin as min
from .ops import power as pow
from .ops import (
    Conv2d,
    Linear,
    NonLocal,
    absolute,
    add,
    amax,
    amin,
    argmax,
    argmin,
    attention,
    attention_qkv,
    attention_uniform,
    avg_pool2d,
    avgpool2d,
    batch_norm,
    bias_add,
    clip,
    concat,
    concatenate,
    conv2d,
    depth_to_space,
    div,
    divide,
    erf,
    exp,
    gelu,
    gather,
    gemm,
    global_avgpool,
    global_maxpool,
    group_norm,
    layernorm,
    linear,
    log,
    log_softmax,
    matmul,
    max_pool2d,
    maximum,
    maxpool2d,
    mean,
    minimum,
    mul,
    multiply,
    nchw_to_nhwc,
    neg,
    negative,
    nonlocal_,
    pad,
    patch_embed,
    power,
    prod,
    relu,
    rms_norm,
    rsqrt,
    scale,
    sigmoid,
    silu,
    slice_,
    softmax,
    space_to_depth,
    sqrt,
    sub,
    subtract,
    sum,
    take,
    tanh,
    transpose,
    where,
)
from .dlpack import empty_host, from_dlpack, host_alignment
from .tensor import Tensor
from .text import Bert, Tokenizer, load_text

__version__ = "0.1.0"

__all__ = [
    "AllocationError", "BuildError", "ClosedError", "ConcurrentUseError", "Context", "Conv2d",
    "DeviceNotFoundError", "Error", "FormatError", "IOError", "InternalError",
    "InvalidArgumentError", "Linear", "Model", "NoPlatformError", "NonLocal", "NotFoundError",
    "OpenCLError", "OutOfHostMemoryError", "OutOfResourcesError", "ShapeError", "Tensor",
    "TooLargeError", "UnsupportedError", "add", "attention", "attention_qkv", "attention_uniform",
    "avgpool2d",
    "bias_add", "conv2d", "devices", "gelu", "gemm", "global_avgpool", "imagenet_label",
    "layernorm", "linear", "load", "maxpool2d", "nchw_to_nhwc", "nonlocal_", "patch_embed",
    "preprocess", "random_model", "relu", "scale", "softmax",
    # broadcasting elementwise ops and reductions
    "abs", "absolute", "amax", "amin", "argmax", "argmin", "clip", "div", "divide", "erf", "exp",
    "log", "max", "maximum", "mean", "min", "minimum", "mul", "multiply", "neg", "negative",
    "pow", "power", "prod", "rsqrt", "sigmoid", "silu", "sqrt", "sub", "subtract", "sum", "tanh",
    "where",
    # normalisation over any axis
    "batch_norm", "group_norm", "log_softmax", "rms_norm", "matmul",
    "avg_pool2d", "global_maxpool", "max_pool2d",
    # layout
    "concat", "concatenate", "depth_to_space", "gather", "pad", "slice_", "space_to_depth",
    "take", "transpose",
    # interop: DLPack and host memory shared with CPU devices
    "empty_host", "from_dlpack", "host_alignment",
    # text: tokenizers and BERT-family encoders
    "Bert", "Tokenizer", "load_text",
]
