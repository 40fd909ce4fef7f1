"""ONNX models from Python: pagoda.onnx.load(path_or_bytes, ctx) over the C graph path
(pgd_graph_*: the same loader, checks, fusions and ops as `pagoda run MODEL.onnx`).

    import numpy as np, pagoda.onnx
    model = pagoda.onnx.load("resnet50.onnx")          # a path, bytes, or an onnx.ModelProto
    print(model.inputs, model.outputs)                 # names, dtypes, shapes as declared
    logits, = model(np.random.rand(1, 3, 224, 224))    # positional in input order ...
    outs = model(input=x)                              # ... or by name: a list in output order
    print(model.report()["unsupported"])               # `pagoda info`'s report as a dict

The graph computes in float32 on the device. Inputs declared float (float32, float16, double,
bfloat16) take float arrays (float64 and float16 are converted to float32; float64 values beyond float32's range are
refused); the outputs come
back in their declared type (float16/double outputs are float32 results converted; integer and
bool outputs, e.g. ArgMax's indices or a comparison, are the float32 results cast). Integer or
bool inputs, and float arrays for inputs declared integer, raise pagoda.UnsupportedError (also
a NotImplementedError): Pagoda's device tensors are float32 and integer data of a model
(shapes, axes, indices) must be initialisers or come from Shape. pagoda.onnx.backend is ONNX's
backend interface (onnx.backend.base.Backend) over the same models.
"""

from __future__ import annotations

import json
import os
import threading
from ctypes import byref, c_char_p, c_void_p, cast
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from .._capi import MAX_DIMS, GraphIO, api
from ..device import Context
from ..errors import InvalidArgumentError, ShapeError, UnsupportedError, raise_from
from ..tensor import Handle, Tensor

# ONNX TensorProto.DataType codes -> NumPy dtypes (the ones a model's inputs and outputs use).
DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
          7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
          13: np.uint64}
FLOAT_TYPES = (1, 10, 11, 16)  # float, float16, double, bfloat16
TYPE_NAMES = {0: "undefined", 1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16",
              6: "int32", 7: "int64", 8: "string", 9: "bool", 10: "float16", 11: "double",
              12: "uint32", 13: "uint64", 14: "complex64", 15: "complex128", 16: "bfloat16"}

_default_ctx: Optional[Context] = None
_default_lock = threading.Lock()


def default_context() -> Context:
    """The context pagoda.onnx uses when none is given: one per process, on $PAGODA_DEVICE or
    the best device, made on first use."""
    global _default_ctx
    with _default_lock:
        if _default_ctx is None or _default_ctx.closed:
            _default_ctx = Context()
        return _default_ctx


def _io_dict(io: GraphIO) -> Dict[str, Any]:
    shape: Optional[List[Any]] = None
    if io.ndim >= 0:
        shape = [(io.dim_name[d].decode() if io.dim_name[d] else None) if io.shape[d] < 0
                 else int(io.shape[d]) for d in range(min(io.ndim, MAX_DIMS))]
    return {"name": io.name.decode(), "elem_type": int(io.elem_type),
            "type": TYPE_NAMES.get(io.elem_type, str(io.elem_type)),
            "dtype": DTYPES.get(io.elem_type), "shape": shape}


class OnnxModel(Handle):
    """An ONNX graph loaded on a context (pagoda.onnx.load). Calling it runs one forward pass:
    `model(x0, x1, ...)` with the inputs in declaration order, or `model(name=x, ...)`, gives
    a list of NumPy arrays in the order of `model.outputs` (`model.run(feeds)` gives a dict by
    output name). `inputs` / `outputs` are lists of {"name", "elem_type", "type", "dtype",
    "shape"} (shape: ints, a symbolic dim's name, None for an unnamed unknown dim; None when the
    file gives no shape)."""

    def __init__(self, ctx: Context, h: int) -> None:
        super().__init__(ctx, h, api.pgd_graph_destroy)
        self.inputs: List[Dict[str, Any]] = []
        self.outputs: List[Dict[str, Any]] = []
        for i in range(api.pgd_graph_num_inputs(h)):
            io = GraphIO()
            api.pgd_graph_get_input(h, i, byref(io))
            self.inputs.append(_io_dict(io))
        for i in range(api.pgd_graph_num_outputs(h)):
            io = GraphIO()
            api.pgd_graph_get_output(h, i, byref(io))
            self.outputs.append(_io_dict(io))

    @property
    def input_names(self) -> List[str]:
        return [i["name"] for i in self.inputs]

    @property
    def output_names(self) -> List[str]:
        return [o["name"] for o in self.outputs]

    def __repr__(self) -> str:
        if self._h is None:
            return "<pagoda.onnx.OnnxModel closed>"
        return (f"<pagoda.onnx.OnnxModel inputs={self.input_names} "
                f"outputs={self.output_names}>")

    def _feed(self, k: int, value: Any) -> np.ndarray:
        spec = self.inputs[k]
        if isinstance(value, Tensor):
            value = value.numpy()
        a = np.asarray(value)
        et = spec["elem_type"]
        if et not in FLOAT_TYPES and et != 0:
            raise UnsupportedError(
                f"pagoda.onnx: input '{spec['name']}' is declared {spec['type']}: Pagoda's "
                f"graph inputs are float tensors (integer and bool data of a model — shapes, "
                f"axes, indices — must be initialisers or come from Shape)")
        if a.dtype.kind != "f":
            raise UnsupportedError(
                f"pagoda.onnx: input '{spec['name']}' is a {a.dtype} array: the input is "
                f"declared {spec['type']} and Pagoda computes in float32 (float64 and float16 "
                f"arrays are converted; integer, bool and other arrays are not)")
        if a.ndim > MAX_DIMS:
            raise ShapeError(f"pagoda.onnx: input '{spec['name']}' has {a.ndim} dims "
                             f"(at most {MAX_DIMS})")
        shape = spec["shape"]
        if shape is not None and (len(shape) != a.ndim or any(
                isinstance(d, int) and d != s for d, s in zip(shape, a.shape))):
            raise ShapeError(f"pagoda.onnx: input '{spec['name']}' is {list(a.shape)}, the "
                             f"model declares {shape}")
        with np.errstate(over="ignore"):
            out = np.ascontiguousarray(a, dtype=np.float32)
        if a.dtype.itemsize > 4 and a.size and not np.array_equal(
                np.isfinite(out), np.isfinite(a)):
            # float64 values beyond float32's range would become inf: wrong results, refused
            raise UnsupportedError(
                f"pagoda.onnx: input '{spec['name']}' holds float64 values outside float32's "
                f"range (Pagoda computes in float32)")
        return out.reshape(()) if a.ndim == 0 else out

    def _arrays(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> List[np.ndarray]:
        names = self.input_names
        if len(args) > len(names):
            raise InvalidArgumentError(f"pagoda.onnx: {len(args)} inputs given, the model has "
                                       f"{len(names)} ({', '.join(names)})")
        vals: List[Any] = list(args) + [None] * (len(names) - len(args))
        for k, v in kwargs.items():
            if k not in names:
                raise InvalidArgumentError(f"pagoda.onnx: the model has no input '{k}' (its "
                                           f"inputs: {', '.join(names)})")
            if vals[names.index(k)] is not None:
                raise InvalidArgumentError(f"pagoda.onnx: input '{k}' given twice")
            vals[names.index(k)] = v
        missing = [n for n, v in zip(names, vals) if v is None]
        if missing:
            raise InvalidArgumentError(f"pagoda.onnx: missing input(s) {', '.join(missing)}")
        return [self._feed(k, v) for k, v in enumerate(vals)]

    def __call__(self, *args: Any, **kwargs: Any) -> List[np.ndarray]:
        """One forward pass: a list of NumPy arrays in the order of `outputs`."""
        arrays = self._arrays(args, kwargs)
        ctx = self._ctx
        ins: List[Tensor] = []
        try:
            ins = [ctx.tensor(a) for a in arrays]
            nout = len(self.outputs)
            cin = (c_void_p * max(len(ins), 1))(*[t._handle() for t in ins])
            cout = (c_void_p * max(nout, 1))()
            h = ctx._enter()
            try:
                err = c_void_p()
                raise_from(api.pgd_graph_run(self._handle(), cin, cout, byref(err)), err)
                outs = [Tensor(ctx, cout[i], api.pgd_tensor_destroy) for i in range(nout)]
            finally:
                ctx._exit()
            del h
            try:
                return [self._result(k, t.numpy()) for k, t in enumerate(outs)]
            finally:
                for t in outs:
                    t.close()
        finally:
            for t in ins:
                t.close()

    def _result(self, k: int, a: np.ndarray) -> np.ndarray:
        et = self.outputs[k]["elem_type"]
        dt = DTYPES.get(et)
        if dt is None or dt == np.float32:
            return a
        if et in FLOAT_TYPES:
            return a.astype(dt)
        if dt == np.bool_:
            return a != 0
        return np.rint(a).astype(dt)

    forward = __call__

    def run(self, feeds: Dict[str, Any]) -> Dict[str, np.ndarray]:
        """One forward pass with a dict of inputs by name: a dict of outputs by name."""
        return dict(zip(self.output_names, self(**feeds)))

    def report(self) -> Dict[str, Any]:
        """The graph's report (as `pagoda info MODEL.onnx --json`): file, opset, producer,
        parameters, inputs and outputs, op histogram, fused groups, unsupported nodes."""
        self._ctx._enter()
        try:
            p = api.pgd_graph_report(self._handle())
        finally:
            self._ctx._exit()
        if not p:
            raise InvalidArgumentError("pagoda.onnx: the report could not be made")
        try:
            return json.loads(cast(p, c_char_p).value.decode("utf-8", "replace"))
        finally:
            api.pgd_free(p)

    @property
    def flops(self) -> float:
        """Floating-point operations of the last run's matrix products, convolutions and
        attention (2 per multiply-add)."""
        return float(api.pgd_graph_flops(self._handle()))


ModelSource = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, Any]


def load(model: ModelSource, ctx: Optional[Context] = None, *,
         name: Optional[str] = None) -> OnnxModel:
    """Loads an ONNX model on `ctx` (None: pagoda.onnx.default_context()). `model` is a path
    (external data is read beside it), the serialized bytes, or an onnx.ModelProto. For bytes,
    `name` labels the model in messages and places its external data as if it were a file of
    that name (None: "<memory>", and a model with external data is refused)."""
    if ctx is None:
        ctx = default_context()
    if not isinstance(ctx, Context):
        raise InvalidArgumentError(f"pagoda.onnx.load: ctx is a pagoda.Context, not "
                                   f"{type(ctx).__name__}")
    if hasattr(model, "SerializeToString"):
        model = model.SerializeToString()
    out = c_void_p()
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
        label = None if name is None else os.fspath(name).encode()
        if label is not None and b"\0" in label:
            raise InvalidArgumentError("pagoda.onnx.load: the name holds a NUL character")
        buf = np.frombuffer(data, dtype=np.uint8) if data else np.zeros(1, np.uint8)
        h = ctx._enter()
        try:
            err = c_void_p()
            raise_from(api.pgd_graph_load_memory(h, buf.ctypes.data, len(data), label,
                                                 byref(out), byref(err)), err)
            return OnnxModel(ctx, out.value)
        finally:
            ctx._exit()
    if not isinstance(model, (str, os.PathLike)):
        raise InvalidArgumentError(f"pagoda.onnx.load: a path, bytes or an onnx.ModelProto, "
                                   f"not {type(model).__name__}")
    p = os.fspath(model).encode()
    if b"\0" in p:
        raise InvalidArgumentError("pagoda.onnx.load: the path holds a NUL character")
    h = ctx._enter()
    try:
        err = c_void_p()
        raise_from(api.pgd_graph_load(h, p, byref(out), byref(err)), err)
        return OnnxModel(ctx, out.value)
    finally:
        ctx._exit()


__all__ = ["OnnxModel", "default_context", "load", "DTYPES"]

