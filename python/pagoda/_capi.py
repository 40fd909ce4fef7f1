"""ctypes declarations of the public C API (pagoda.h) and of libpagoda-models (pagoda_models.h).

Nothing else of the C library is used: the structures below mirror the public header field for
field, and every function is declared with its argument and result types so that ctypes checks
and converts them. ctypes releases the GIL around every foreign call (CDLL), so long calls
(a forward pass, a kernel build) let other Python threads run.

The libraries are found, in order: inside the installed package (a wheel built by meson-python
puts libpagoda and libpagoda-models there), then in the folders of $PAGODA_LIB_DIR
(colon-separated; the test suite points it at a build tree), then by the system's loader.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import operator
import os
from ctypes import (
    POINTER,
    Structure,
    byref,
    c_char,
    c_char_p,
    c_double,
    c_float,
    c_int,
    c_int64,
    c_size_t,
    c_uint,
    c_uint64,
    c_void_p,
)

MAX_DIMS = 8
PREPROCESS_SIZE = 224


def c_integer(value: object, ctype: type, what: str, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """`value` as a Python int for a C argument or structure field of type `ctype` (c_int,
    c_int64, c_uint64, c_size_t, ...), checked against that type's range and, when given,
    [minimum, maximum]. Every wrapper converts its integer arguments through here: ctypes
    itself keeps the low bits of an int that does not fit, silently (2**64 becomes 0,
    2**32 + 2 becomes 2). Accepts int, bool and NumPy integers (anything with __index__);
    anything else, or a value out of range, raises pagoda.InvalidArgumentError naming `what`."""
    from .errors import InvalidArgumentError

    try:
        v = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidArgumentError(f"pagoda: {what} wants an integer, not {value!r} "
                                   f"({type(value).__name__})") from None
    bits = 8 * ctypes.sizeof(ctype)
    signed = ctype(-1).value == -1  # type: ignore[operator]
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if minimum is not None:
        lo = max(lo, minimum)
    if maximum is not None:
        hi = min(hi, maximum)
    if not lo <= v <= hi:
        raise InvalidArgumentError(f"pagoda: {what} is {v}, outside {lo}..{hi}")
    return v


def _candidates(stem: str) -> list[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [here] + [d for d in os.environ.get("PAGODA_LIB_DIR", "").split(os.pathsep) if d]
    found = []
    for d in dirs:
        # libpagoda.so.0.1.0 / libpagoda.so.0 / libpagoda.so, whichever the install kept.
        for pat in (stem + ".so", stem + ".so.[0-9]*", stem + ".dylib", stem + "*.dll"):
            found += sorted(glob.glob(os.path.join(d, pat)))
    return found


def _load(stem: str, short: str) -> ctypes.CDLL:
    errors = []
    for path in _candidates(stem):
        try:
            return ctypes.CDLL(path)
        except OSError as e:  # a broken candidate: try the next, report all
            errors.append(f"{path}: {e}")
    sys_name = ctypes.util.find_library(short)
    if sys_name:
        try:
            return ctypes.CDLL(sys_name)
        except OSError as e:
            errors.append(f"{sys_name}: {e}")
    raise ImportError(
        f"pagoda: cannot load {stem} (looked in the package, $PAGODA_LIB_DIR and the system's "
        f"library path){': ' + '; '.join(errors) if errors else ''}"
    )


lib = _load("libpagoda", "pagoda")
mlib = _load("libpagoda-models", "pagoda-models")

# ---- structures (pagoda.h) ------------------------------------------------------------------


class DeviceInfo(Structure):
    _fields_ = [
        ("platform_index", c_int),
        ("device_index", c_int),
        ("name", c_char * 256),
        ("vendor", c_char * 256),
        ("platform", c_char * 256),
        ("platform_version", c_char * 256),
        ("driver_version", c_char * 256),
        ("version", c_char * 256),
        ("c_version", c_char * 128),
        ("opencl_c_major", c_int),
        ("opencl_c_minor", c_int),
        ("type", c_int),
        ("software_rasteriser", c_int),
        ("compute_units", c_uint),
        ("clock_mhz", c_uint),
        ("global_mem", c_uint64),
        ("max_alloc", c_uint64),
        ("local_mem", c_uint64),
        ("local_mem_dedicated", c_int),
        ("max_work_group", c_size_t),
        ("max_work_item", c_size_t * 3),
        ("max_dims", c_uint),
        ("fp16", c_int),
        ("fp64", c_int),
        ("subgroups", c_int),
        ("images", c_int),
        ("unified_memory", c_int),
        ("pref_vector_float", c_uint),
        ("mem_base_align", c_uint),
    ]


class DeviceLowp(Structure):
    """pgd_device_lowp: carries its size (set before pgd_device_get_lowp)."""
    _fields_ = [
        ("size", c_size_t),
        ("fp16", c_int),
        ("half_fp_config", c_uint),
        ("int_dot", c_int),
        ("int_dot_caps", c_uint),
        ("dot8_accel", c_uint),
        ("dot8_packed_accel", c_uint),
        ("bf16_conversions", c_int),
    ]


KNOBS_MAX = 512  # PGD_KNOBS_MAX


class CtxOptions(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("device", c_char_p),
        ("cache_dir", c_char_p),
        ("kernel_dir", c_char_p),
        ("profiling", c_int),
        ("profile_print_at_destroy", c_int),
        ("gemm_backend", c_int),
        ("gemm_tuning", c_int),
        ("conv_algo", c_int),
        ("attention", c_int),
        ("global_mem_limit", c_uint64),
        ("max_alloc_limit", c_uint64),
        ("kernel_params", c_char_p),
        ("weights_f16", c_int),
        ("knobs", c_char * KNOBS_MAX),
    ]


class MemoryStats(Structure):
    _fields_ = [
        ("live_bytes", c_uint64),
        ("peak_bytes", c_uint64),
        ("idle_bytes", c_uint64),
        ("idle_buffers", c_size_t),
        ("reused", c_uint64),
    ]


class GemmArgs(Structure):
    _fields_ = [
        ("trans_a", c_int),
        ("trans_b", c_int),
        ("alpha", c_float),
        ("beta", c_float),
        ("bias", c_void_p),
        ("act", c_int),
        ("residual", c_void_p),
    ]


class View(Structure):
    _fields_ = [
        ("t", c_void_p),
        ("offset", c_int64),
        ("batch_stride", c_int64),
        ("head_stride", c_int64),
        ("token_stride", c_int64),
    ]


class AttentionArgs(Structure):
    _fields_ = [
        ("batch", c_int64),
        ("heads", c_int64),
        ("nq", c_int64),
        ("nk", c_int64),
        ("head_dim", c_int64),
        ("scale", c_float),
        ("causal", c_int),
        ("q", View),
        ("k", View),
        ("v", View),
        ("o", View),
        ("mask", View),
        ("probs", c_void_p),
        ("probs_head", c_int),
        ("probs_q0", c_int64),
        ("probs_q1", c_int64),
        ("mode", c_int),
        ("topk", c_int64),
        ("seed", c_uint64),
    ]


class Conv2dDesc(Structure):
    _fields_ = [
        ("cin", c_int64),
        ("cout", c_int64),
        ("kh", c_int),
        ("kw", c_int),
        ("stride_h", c_int),
        ("stride_w", c_int),
        ("pad_h", c_int),
        ("pad_w", c_int),
        ("dil_h", c_int),
        ("dil_w", c_int),
        ("groups", c_int),
    ]


FloatP = POINTER(c_float)


class BatchNorm(Structure):
    _fields_ = [
        ("weight", FloatP),
        ("bias", FloatP),
        ("mean", FloatP),
        ("var", FloatP),
        ("eps", c_float),
    ]


class NonlocalDesc(Structure):
    _fields_ = [
        ("channels", c_int64),
        ("inner", c_int64),
        ("mode", c_int),
        ("subsample", c_int),
        ("unfused", c_int),
    ]


class NonlocalParams(Structure):
    _fields_ = [
        ("theta_weight", FloatP),
        ("theta_bias", FloatP),
        ("phi_weight", FloatP),
        ("phi_bias", FloatP),
        ("g_weight", FloatP),
        ("g_bias", FloatP),
        ("w_weight", FloatP),
        ("w_bias", FloatP),
        ("bn", POINTER(BatchNorm)),
        ("concat_weight", FloatP),
    ]


# ---- structures (pagoda_models.h) ------------------------------------------------------------


class ModelOptions(Structure):
    _fields_ = [
        ("heads", c_int),
        ("nonlocal_spec", c_char_p),
        ("nonlocal_mode", c_char_p),
        ("subsample_set", c_int),
        ("subsample", c_int),
    ]


class BertInfo(Structure):
    _fields_ = [
        ("arch", c_char * 16),
        ("layers", c_int),
        ("hidden", c_int),
        ("heads", c_int),
        ("vocab", c_int),
        ("positions", c_int),
        ("type_vocab", c_int),
        ("pad_id", c_int),
        ("mlm", c_int),
    ]


class ModelInfo(Structure):
    _fields_ = [
        ("family", c_int),
        ("family_name", c_char * 16),
        ("naming", c_char * 16),
        ("description", c_char * 256),
        ("classes", c_int),
        ("input_h", c_int),
        ("input_w", c_int),
        ("patch", c_int),
        ("depth", c_int),
        ("width", c_int),
        ("heads", c_int),
        ("nonlocal_blocks", c_int),
        ("preprocess", c_int),
        ("has_attention_maps", c_int),
        ("has_affinity", c_int),
        ("headless", c_int),
    ]


# ---- functions --------------------------------------------------------------------------------

class PoolDesc(Structure):
    """pgd_pool_desc."""

    _fields_ = [("mode", c_int), ("kh", c_int), ("kw", c_int), ("sh", c_int), ("sw", c_int),
                ("dh", c_int), ("dw", c_int), ("pad_top", c_int), ("pad_left", c_int),
                ("pad_bottom", c_int), ("pad_right", c_int), ("ceil_mode", c_int),
                ("count_include_pad", c_int)]


class AttentionExt(Structure):
    """pgd_attention_ext."""

    _fields_ = [("size", c_size_t), ("kv_heads", c_int64), ("v_head_dim", c_int64),
                ("softcap", c_float), ("mask_bool", c_int), ("window", c_int),
                ("window_align", c_int), ("window_left", c_int64), ("window_right", c_int64),
                ("kv_lens", POINTER(c_int64)), ("scores", c_void_p), ("scores_kind", c_int),
                ("k_cache", View), ("v_cache", View), ("past", c_int64), ("half_io", c_int)]


class GraphIO(Structure):
    """pgd_graph_io."""

    _fields_ = [("name", c_char_p), ("elem_type", c_int), ("ndim", c_int),
                ("shape", c_int64 * MAX_DIMS), ("dim_name", c_char_p * MAX_DIMS)]


ErrP = POINTER(c_void_p)  # pgd_error ** (the error itself stays opaque)
I64P = POINTER(c_int64)
V = c_void_p


def _fn(library, name, restype, *argtypes):
    f = getattr(library, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_DECLS = [
    # status and errors
    ("pgd_status_name", c_char_p, c_int),
    ("pgd_status_str", c_char_p, c_int),
    ("pgd_error_get_code", c_int, V),
    ("pgd_error_get_message", c_char_p, V),
    ("pgd_error_get_cl_code", c_int, V),
    ("pgd_error_get_log", c_char_p, V),
    ("pgd_error_destroy", None, V),
    # devices and contexts
    ("pgd_devices_list", c_int, POINTER(POINTER(DeviceInfo)), POINTER(c_size_t), ErrP),
    ("pgd_free", None, c_void_p),
    ("pgd_device_get_lowp", c_int, POINTER(DeviceInfo), POINTER(DeviceLowp), ErrP),
    ("pgd_device_select", c_int, POINTER(DeviceInfo), c_size_t, c_char_p, POINTER(c_size_t), ErrP),
    ("pgd_device_type_name", c_char_p, c_int),
    ("pgd_ctx_options_init_size", None, POINTER(CtxOptions), c_size_t),
    ("pgd_ctx_options_set_knob", c_int, POINTER(CtxOptions), c_char_p, c_char_p, ErrP),
    ("pgd_ctx_options_from_env", c_int, POINTER(CtxOptions), ErrP),
    ("pgd_ctx_create_with_options", c_int, POINTER(CtxOptions), POINTER(V), ErrP),
    ("pgd_ctx_destroy", None, V),
    ("pgd_ctx_get_device", POINTER(DeviceInfo), V),
    ("pgd_ctx_finish", c_int, V, ErrP),
    ("pgd_ctx_get_memory_stats", None, V, POINTER(MemoryStats)),
    ("pgd_ctx_get_cache_dir", c_char_p, V),
    ("pgd_ctx_get_kernel_params", c_char_p, V, c_char_p, c_size_t),
    ("pgd_ctx_set_profiling", None, V, c_int),
    # tensors
    ("pgd_tensor_create", c_int, V, c_int, I64P, POINTER(V), ErrP),
    ("pgd_tensor_create_from", c_int, V, c_int, I64P, V, POINTER(V), ErrP),
    ("pgd_tensor_destroy", None, V),
    ("pgd_tensor_get_ndim", c_int, V),
    ("pgd_tensor_get_dim", c_int64, V, c_int),
    ("pgd_tensor_get_numel", c_int64, V),
    ("pgd_tensor_reshape", c_int, V, c_int, I64P, ErrP),
    ("pgd_tensor_upload", c_int, V, V, ErrP),
    ("pgd_tensor_download", c_int, V, V, ErrP),
    ("pgd_tensor_fill", c_int, V, c_float, ErrP),
    # host views (interop)
    ("pgd_ctx_host_alignment", c_size_t, V),
    ("pgd_tensor_wrap_host", c_int, V, V, c_int, I64P, POINTER(V), ErrP),
    ("pgd_tensor_host_data", V, V),
    ("pgd_tensor_map", c_int, V, POINTER(V), ErrP),
    ("pgd_tensor_unmap", c_int, V, V, ErrP),
    ("pgd_tensor_copy", c_int, V, c_int64, V, c_int64, c_int64, ErrP),
    # ops
    ("pgd_gemm", c_int, V, POINTER(GemmArgs), V, V, V, ErrP),
    ("pgd_linear_create", c_int, V, V, V, POINTER(V), ErrP),
    ("pgd_linear_destroy", None, V),
    ("pgd_linear_forward", c_int, V, V, V, c_int, V, V, ErrP),
    ("pgd_attention", c_int, V, POINTER(AttentionArgs), ErrP),
    ("pgd_attention_qkv", c_int, V, V, c_int64, V, ErrP),
    ("pgd_attention_uniform", c_float, c_uint64, c_int64, c_int64, c_int64, c_int64, c_int64),
    ("pgd_layernorm", c_int, V, V, V, V, c_float, V, ErrP),
    ("pgd_gelu", c_int, V, V, V, c_int, ErrP),
    ("pgd_relu", c_int, V, V, V, ErrP),
    ("pgd_softmax", c_int, V, V, c_float, V, ErrP),
    ("pgd_scale", c_int, V, V, c_float, V, ErrP),
    ("pgd_add", c_int, V, V, V, V, ErrP),
    ("pgd_bias_add", c_int, V, V, V, V, ErrP),
    ("pgd_patch_embed", c_int, V, V, V, V, V, V, V, V, ErrP),
    ("pgd_pos_embed_resize", c_int, V, V, c_int, c_int, c_int, c_int, c_int, c_int, V, ErrP),
    ("pgd_nchw_to_nhwc", c_int, V, V, V, ErrP),
    ("pgd_conv2d_create", c_int, V, POINTER(Conv2dDesc), FloatP, FloatP, POINTER(BatchNorm),
     POINTER(V), ErrP),
    ("pgd_conv2d_destroy", None, V),
    ("pgd_conv2d_out_size", None, POINTER(Conv2dDesc), c_int64, c_int64, I64P, I64P),
    ("pgd_conv2d_forward", c_int, V, V, V, c_int, V, V, ErrP),
    ("pgd_conv2d_algorithm", c_char_p, V, V, c_int64, c_int64),
    ("pgd_conv2d_algorithm_batch", c_char_p, V, V, c_int64, c_int64, c_int64),
    ("pgd_maxpool2d", c_int, V, V, c_int, c_int, c_int, V, ErrP),
    ("pgd_avgpool2d", c_int, V, V, c_int, c_int, c_int, V, ErrP),
    ("pgd_global_avgpool", c_int, V, V, V, ErrP),
    ("pgd_nonlocal_create", c_int, V, POINTER(NonlocalDesc), POINTER(NonlocalParams), POINTER(V),
     ErrP),
    ("pgd_nonlocal_destroy", None, V),
    ("pgd_nonlocal_key_grid", c_int64, POINTER(NonlocalDesc), c_int64, c_int64, I64P, I64P),
    ("pgd_nonlocal_forward", c_int, V, V, V, V, ErrP),
    ("pgd_nonlocal_affinity", c_int, V, V, V, c_int64, c_int64, FloatP, I64P, I64P, ErrP),
    # images
    ("pgd_image_load", c_int, c_char_p, POINTER(V), ErrP),
    ("pgd_image_load_memory", c_int, V, c_size_t, c_char_p, POINTER(V), ErrP),
    ("pgd_image_destroy", None, V),
    ("pgd_image_get_width", c_int, V),
    ("pgd_image_get_height", c_int, V),
    ("pgd_image_preprocess", c_int, V, c_int, FloatP, ErrP),
    # broadcasting elementwise ops and reductions
    ("pgd_binary", c_int, V, c_int, V, V, V, ErrP),
    ("pgd_where", c_int, V, V, V, V, V, ErrP),
    ("pgd_unary", c_int, V, c_int, V, V, ErrP),
    ("pgd_clip", c_int, V, V, c_float, c_float, V, ErrP),
    ("pgd_reduce", c_int, V, c_int, V, POINTER(c_int), c_int, c_int, V, ErrP),
    ("pgd_matmul", c_int, V, V, V, V, ErrP),
    ("pgd_attention_gqa", c_int, V, POINTER(AttentionArgs), c_int64, ErrP),
    ("pgd_attention_ex", c_int, V, POINTER(AttentionArgs), POINTER(AttentionExt), ErrP),
    ("pgd_pool2d_output_size", c_int, POINTER(PoolDesc), c_int64, c_int64, POINTER(c_int64),
     POINTER(c_int64), ErrP),
    ("pgd_pool2d", c_int, V, V, POINTER(PoolDesc), V, V, ErrP),
    ("pgd_global_maxpool", c_int, V, V, V, ErrP),
    ("pgd_conv2d_forward_pads", c_int, V, V, V, POINTER(c_int), c_int, V, V, ErrP),
    ("pgd_conv2d_same_pads", None, POINTER(Conv2dDesc), c_int64, c_int64, c_int, POINTER(c_int)),
    # normalisation over any axis
    ("pgd_softmax_axis", c_int, V, V, c_int, c_float, c_int, V, ErrP),
    ("pgd_layernorm_axis", c_int, V, V, c_int, V, V, c_float, V, V, V, ErrP),
    ("pgd_rmsnorm", c_int, V, V, c_int, V, c_float, V, ErrP),
    ("pgd_batch_norm", c_int, V, V, V, V, V, V, c_float, V, ErrP),
    ("pgd_group_norm", c_int, V, V, c_int, V, V, c_float, V, ErrP),
    # layout
    ("pgd_transpose", c_int, V, V, POINTER(c_int), V, ErrP),
    ("pgd_slice", c_int, V, V, c_int, POINTER(c_int), POINTER(c_int64), POINTER(c_int64),
     POINTER(c_int64), V, ErrP),
    ("pgd_concat", c_int, V, c_int, POINTER(V), c_int, V, ErrP),
    ("pgd_gather", c_int, V, V, c_int, POINTER(c_int64), c_int, POINTER(c_int64), V, ErrP),
    ("pgd_pad", c_int, V, V, POINTER(c_int64), c_int, c_float, V, ErrP),
    ("pgd_depth_to_space", c_int, V, V, c_int, c_int, V, ErrP),
    ("pgd_space_to_depth", c_int, V, V, c_int, V, ErrP),
    # ONNX graphs (the report is malloc'd: freed with the C library's free, libc below)
    ("pgd_graph_load", c_int, V, c_char_p, POINTER(V), ErrP),
    ("pgd_graph_load_memory", c_int, V, V, c_size_t, c_char_p, POINTER(V), ErrP),
    ("pgd_graph_destroy", None, V),
    ("pgd_graph_num_inputs", c_int, V),
    ("pgd_graph_num_outputs", c_int, V),
    ("pgd_graph_get_input", c_int, V, c_int, POINTER(GraphIO)),
    ("pgd_graph_get_output", c_int, V, c_int, POINTER(GraphIO)),
    ("pgd_graph_run", c_int, V, POINTER(V), POINTER(V), ErrP),
    ("pgd_graph_flops", c_double, V),
    ("pgd_graph_report", V, V),
]

_MODEL_DECLS = [
    ("pgd_model_load", c_int, V, c_char_p, POINTER(ModelOptions), POINTER(V), ErrP),
    ("pgd_model_random", c_int, V, c_char_p, POINTER(V), ErrP),
    ("pgd_model_destroy", None, V),
    ("pgd_model_get_info", c_int, V, POINTER(ModelInfo)),
    ("pgd_model_forward", c_int, V, FloatP, c_int, c_int, c_int, FloatP, POINTER(c_double), ErrP),
    ("pgd_model_attention_maps", c_int, V, FloatP, c_int, c_int, c_int, FloatP, FloatP, FloatP,
     ErrP),
    ("pgd_model_affinity_grid", c_int64, V, c_int, c_int, POINTER(c_int), POINTER(c_int)),
    ("pgd_model_affinity", c_int, V, FloatP, c_int, c_int, c_int, c_double, c_double, FloatP,
     FloatP, POINTER(c_int), POINTER(c_int), ErrP),
    ("pgd_model_set_pool", c_int, V, c_int, ErrP),
    ("pgd_model_imagenet_label", c_char_p, c_int),
    # the tokenizers and the BERT-family encoders (pagoda.text)
    ("pgd_tokenizer_load", c_int, c_char_p, c_char_p, c_int, POINTER(V), ErrP),
    ("pgd_tokenizer_encode", c_int, V, c_char_p, ctypes.c_size_t, c_int,
     POINTER(POINTER(ctypes.c_int32)), POINTER(ctypes.c_size_t), ErrP),
    ("pgd_tokenizer_decode", c_int, V, POINTER(ctypes.c_int32), ctypes.c_size_t, c_int,
     POINTER(V), POINTER(ctypes.c_size_t), ErrP),
    ("pgd_tokenizer_token", V, V, ctypes.c_int32, POINTER(ctypes.c_size_t)),
    ("pgd_tokenizer_id", ctypes.c_int32, V, c_char_p, ctypes.c_size_t),
    ("pgd_tokenizer_vocab_size", ctypes.c_int32, V),
    ("pgd_tokenizer_release", None, V),
    ("pgd_tokenizer_free", None, V),
    ("pgd_bert_load", c_int, V, c_char_p, POINTER(V), ErrP),
    ("pgd_bert_get_info", c_int, V, POINTER(BertInfo)),
    ("pgd_bert_forward", c_int, V, c_int, c_int, V, V, V, FloatP, FloatP, FloatP, ErrP),
    ("pgd_bert_destroy", None, V),
]


class _Api:
    """The declared functions as attributes: api.pgd_tensor_create(...)."""


api = _Api()
# free() of the C library libpagoda uses (for the strings it returns malloc'd).
libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
libc.free.restype = None
libc.free.argtypes = [c_void_p]
for _name, _res, *_args in _DECLS:
    setattr(api, _name, _fn(lib, _name, _res, *_args))
for _name, _res, *_args in _MODEL_DECLS:
    setattr(api, _name, _fn(mlib, _name, _res, *_args))

__all__ = ["api", "lib", "mlib", "byref", "c_void_p", "c_int64", "c_float", "c_int", "c_double"]
