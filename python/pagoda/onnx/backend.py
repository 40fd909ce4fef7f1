"""ONNX's backend interface (onnx.backend.base.Backend) over Pagoda's graph path, so that
ONNX's own backend test suite runs against Pagoda:

    import onnx.backend.test, pagoda.onnx.backend
    globals().update(onnx.backend.test.BackendTest(pagoda.onnx.backend, __name__)
                     .include("test_relu_").test_cases)

prepare(model, device="CPU") loads the model (an onnx.ModelProto, its bytes or a path) on
pagoda.onnx.default_context() — "CPU" stands for Pagoda's default device, whatever kind it is
($PAGODA_DEVICE selects one); "CUDA" is not supported — and returns a BackendRep whose
run(inputs) takes a list in input order (or a dict by name) and returns the outputs as a
namedtuple-like tuple. run_node runs one NodeProto as a one-node model.

Old opsets: the C loader reads opsets 11 and newer; with convert_opset=True (the default here)
a model of an older opset is converted to opset 13 by ONNX's own onnx.version_converter first
(what it cannot convert is pagoda.UnsupportedError).

Integer and bool inputs: Pagoda's graph inputs are float32 device tensors. With
constant_inputs=True (the default here, not in pagoda.onnx.load) inputs declared integer or
bool (a Reshape's shape, a Gather's indices, a Slice's starts) are bound as initialisers of
the model at run time — as an exporter stores them — and the graph is loaded again for each
new set of their values; with constant_inputs=False they raise pagoda.UnsupportedError.
Errors: pagoda.UnsupportedError (also NotImplementedError) for what Pagoda lacks (an op, an
attribute, a dtype: the message names it), other pagoda.Error subclasses for the rest.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from ..device import Context
from ..errors import ShapeError, UnsupportedError
from . import DTYPES, FLOAT_TYPES, TYPE_NAMES, OnnxModel, default_context, load


def _as_model(model: Any) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray, memoryview)):
        return onnx.load_model_from_string(bytes(model))
    return onnx.load(os.fspath(model))


def _refusal(vis: List[Any], what: str) -> Optional[str]:
    """Why a graph input or output cannot be a Pagoda tensor (a sequence, an optional, a map,
    a type NumPy and Pagoda lack such as float8 or int4), or None."""
    for vi in vis:
        kind = vi.type.WhichOneof("value")
        if kind not in (None, "tensor_type"):
            return (f"pagoda.onnx: {what} '{vi.name}' is a {kind.replace('_type', '')} "
                    f"(Pagoda's graphs take and give tensors)")
        et = vi.type.tensor_type.elem_type
        if kind and et not in DTYPES and et not in FLOAT_TYPES:
            name = TYPE_NAMES.get(et) or TensorProto.DataType.Name(et).lower()
            return f"pagoda.onnx: {what} '{vi.name}' has dtype {name}"
    return None


class PagodaRep(BackendRep):
    """A model prepared on a Pagoda context. run(inputs) → the outputs in order."""

    def __init__(self, model: onnx.ModelProto, ctx: Context, constant_inputs: bool = True,
                 path: Optional[str] = None) -> None:
        self.proto = model
        self.ctx = ctx
        self.constant_inputs = constant_inputs
        inits = {t.name for t in model.graph.initializer}
        self._all_inputs = [i for i in model.graph.input if i.name not in inits]
        self._fixed = [i.name for i in self._all_inputs
                       if i.type.tensor_type.elem_type not in FLOAT_TYPES]
        self._cache: Tuple[Optional[bytes], Optional[OnnxModel]] = (None, None)
        self.model: Optional[OnnxModel] = None
        self.converted_from = 0  # the opset the model was converted from, 0 if not
        self.input_names = [i.name for i in self._all_inputs]
        self.output_names = [o.name for o in model.graph.output]
        self._refused = _refusal(list(self._all_inputs), "input") or \
            _refusal(list(model.graph.output), "output")
        if self._refused:
            return
        if not (constant_inputs and self._fixed):
            # external data: a path places it; a proto in memory carries it inline or not at all
            self.model = load(path if path else model.SerializeToString(), ctx)

    def _bound(self, feeds: Dict[str, Any]) -> OnnxModel:
        """The model with the integer inputs' values stored as initialisers."""
        key = b"".join(np.asarray(feeds[n]).dtype.str.encode() + repr(np.shape(feeds[n])).encode()
                       + np.ascontiguousarray(feeds[n]).tobytes() for n in self._fixed)
        if self._cache[0] == key and self._cache[1] is not None and not self._cache[1].closed:
            return self._cache[1]
        m = onnx.ModelProto()
        m.CopyFrom(self.proto)
        keep = [i for i in m.graph.input if i.name not in self._fixed]
        del m.graph.input[:]
        m.graph.input.extend(keep)
        for n in self._fixed:
            want = self._declared(n)
            a = np.asarray(feeds[n])
            np_t = helper.tensor_dtype_to_np_dtype(want) if want else a.dtype
            m.graph.initializer.append(numpy_helper.from_array(a.astype(np_t), n))
        if self._cache[1] is not None:
            self._cache[1].close()
        model = load(m.SerializeToString(), self.ctx)
        self._cache = (key, model)
        return model

    def _declared(self, name: str) -> int:
        for i in self._all_inputs:
            if i.name == name:
                return i.type.tensor_type.elem_type
        return 0

    def run(self, inputs: Any, **kwargs: Any) -> Tuple[Any, ...]:
        if self._refused:
            raise UnsupportedError(self._refused)
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            inputs = list(inputs)
            if len(inputs) > len(self.input_names):
                raise ValueError(f"pagoda.onnx.backend: {len(inputs)} inputs for a model of "
                                 f"{len(self.input_names)}")
            feeds = dict(zip(self.input_names, inputs))
        for n in self._fixed:
            if n in feeds and not self.constant_inputs:
                raise UnsupportedError(
                    f"pagoda.onnx: input '{n}' is declared "
                    f"{TYPE_NAMES.get(self._declared(n), self._declared(n))}: Pagoda's graph "
                    f"inputs are float tensors")
        model = self._bound(feeds) if self.constant_inputs and self._fixed else self.model
        assert model is not None
        rest = {k: v for k, v in feeds.items() if k not in self._fixed or not self.constant_inputs}
        try:
            outs = model(**rest)
        except ShapeError as e:
            if not self.converted_from:
                raise
            # the converter kept declarations the old op's inputs do not meet (Scan 8's batch)
            raise UnsupportedError(f"pagoda.onnx.backend: the model of opset "
                                   f"{self.converted_from} as onnx.version_converter converted "
                                   f"it does not take these inputs: {e}") from None
        return namedtupledict("Outputs", self.output_names)(*outs)


MIN_OPSET = 11  # the oldest default-domain opset the C loader reads
CONVERT_TO = 13


def _opset(model: onnx.ModelProto) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return -1


def _convert(model: onnx.ModelProto) -> onnx.ModelProto:
    """A model of an opset older than the loader reads, converted by ONNX's own
    version_converter (semantics kept; what it cannot convert is unsupported)."""
    from onnx import version_converter

    try:
        return version_converter.convert_version(model, CONVERT_TO)
    except Exception as e:
        raise UnsupportedError(f"pagoda.onnx.backend: opset {_opset(model)} (Pagoda reads "
                               f"{MIN_OPSET} and newer) and onnx.version_converter cannot "
                               f"convert it to {CONVERT_TO}: {str(e).splitlines()[0][:200]}")


class PagodaBackend(Backend):
    """onnx.backend.base.Backend for Pagoda (see the module's docstring)."""

    @classmethod
    def is_compatible(cls, model: Any, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            return Device(device).type == DeviceType.CPU
        except Exception:
            return False

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", ctx: Optional[Context] = None,
                constant_inputs: bool = True, convert_opset: bool = True,
                **kwargs: Any) -> PagodaRep:
        if not cls.supports_device(device):
            raise UnsupportedError(f"pagoda.onnx.backend: device {device!r}: Pagoda runs on "
                                   f"its OpenCL device, given to ONNX as 'CPU'")
        path = os.fspath(model) if isinstance(model, (str, os.PathLike)) else None
        proto = _as_model(model)
        converted = 0
        if convert_opset and 0 <= _opset(proto) < MIN_OPSET:
            converted = _opset(proto)
            proto, path = _convert(proto), None
        rep = PagodaRep(proto, ctx or default_context(), constant_inputs, path)
        rep.converted_from = converted
        return rep

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> Tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Optional[Sequence[Tuple[Any, Tuple[int, ...]]]] = None,
                 **kwargs: Any) -> Tuple[Any, ...]:
        """One node as a one-node model: its inputs typed from the arrays given, its outputs
        from outputs_info (or float32 of unknown shape), opset kwargs["opset_version"] or
        the onnx package's own."""
        if isinstance(inputs, dict):
            arrays = [inputs[n] for n in node.input if n]
        else:
            arrays = list(inputs)
        names = [n for n in node.input if n]
        vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(
            np.asarray(a).dtype), np.shape(a)) for n, a in zip(names, arrays)]
        outs = [o for o in node.output if o]
        ovis = []
        for k, o in enumerate(outs):
            dt, shape = (outputs_info[k] if outputs_info and k < len(outputs_info)
                         else (np.float32, None))
            ovis.append(helper.make_tensor_value_info(
                o, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), shape))
        graph = helper.make_graph([node], "pagoda_run_node", vis, ovis)
        opset = kwargs.pop("opset_version", None) or onnx.defs.onnx_opset_version()
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        rep = cls.prepare(model, device, **kwargs)
        return rep.run(arrays)


prepare = PagodaBackend.prepare
run_model = PagodaBackend.run_model
run_node = PagodaBackend.run_node
supports_device = PagodaBackend.supports_device
is_compatible = PagodaBackend.is_compatible

__all__ = ["PagodaBackend", "PagodaRep", "is_compatible", "prepare", "run_model", "run_node",
           "supports_device"]

