"""pagoda.onnx: ONNX models from a path, bytes or a ModelProto through the C graph path
(pgd_graph_load / pgd_graph_load_memory), NumPy in and out, and ONNX's backend interface
(pagoda.onnx.backend) driven by onnx.backend.test.BackendTest itself."""

from __future__ import annotations

import os
import unittest

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import pagoda  # noqa: E402
import pagoda.onnx  # noqa: E402
import pagoda.onnx.backend  # noqa: E402

RNG = np.random.default_rng(7)
W = RNG.standard_normal((6, 4)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)


def mlp(opset=17, elem=TensorProto.FLOAT):
    """y = relu(x @ W + B), z = x * 2: two outputs, weights as initialisers."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]),
             helper.make_node("Add", ["h", "B"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"]),
             helper.make_node("Mul", ["x", "two"], ["z"])]
    g = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", elem, ["batch", 6])],
        [helper.make_tensor_value_info("y", elem, ["batch", 4]),
         helper.make_tensor_value_info("z", elem, ["batch", 6])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B"),
         numpy_helper.from_array(np.array(2, np.float32), "two")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def want(x):
    x = x.astype(np.float64)
    return np.maximum(x @ W + B, 0), x * 2


def test_load_proto_bytes_path(any_ctx, tmp_path):
    m = mlp()
    path = tmp_path / "mlp.onnx"
    onnx.save(m, str(path))
    x = RNG.standard_normal((3, 6)).astype(np.float32)
    y0, z0 = want(x)
    for src in (m, m.SerializeToString(), str(path), path):
        model = pagoda.onnx.load(src, any_ctx)
        assert model.input_names == ["x"] and model.output_names == ["y", "z"]
        assert model.inputs[0]["shape"] == ["batch", 6] and model.inputs[0]["type"] == "float"
        y, z = model(x)
        np.testing.assert_allclose(y, y0, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(z, z0, rtol=1e-6)
        y2, z2 = model(x=x)
        np.testing.assert_array_equal(y, y2)
        d = model.run({"x": x[:1]})
        assert list(d) == ["y", "z"] and d["y"].shape == (1, 4)
        rep = model.report()
        assert rep["ops"] == {"MatMul": 1, "Add": 1, "Relu": 1, "Mul": 1}
        assert rep["unsupported"] == []
        model.close()
    assert pagoda.onnx.load(m, any_ctx).report()["file"] == "<memory>"
    assert pagoda.onnx.load(m.SerializeToString(), any_ctx, name="mine.onnx").report()["file"] \
        == "mine.onnx"


def test_dtypes(any_ctx):
    model = pagoda.onnx.load(mlp(), any_ctx)
    x = RNG.standard_normal((2, 6))
    y0, _ = want(x.astype(np.float32))
    np.testing.assert_allclose(model(x)[0], y0, rtol=1e-5, atol=1e-5)  # float64 converted
    np.testing.assert_allclose(model(x.astype(np.float16))[0],
                               want(x.astype(np.float16).astype(np.float32))[0], rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(pagoda.UnsupportedError, match="int64 array") as e:
        model(np.ones((2, 6), np.int64))
    assert isinstance(e.value, NotImplementedError)
    with pytest.raises(pagoda.ShapeError, match="declares"):
        model(np.ones((2, 5), np.float32))
    with pytest.raises(pagoda.InvalidArgumentError, match="no input 'q'"):
        model(q=x)
    with pytest.raises(pagoda.InvalidArgumentError, match="missing"):
        model()
    # a model declared float16: float32 computation, float16 results
    h = pagoda.onnx.load(mlp(elem=TensorProto.FLOAT16).SerializeToString(), any_ctx)
    y, z = h(x.astype(np.float16))
    assert y.dtype == np.float16 and z.dtype == np.float16
    # an input declared int64 is refused, naming it
    g = helper.make_graph([helper.make_node("Identity", ["i"], ["o"])], "g",
                          [helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("o", TensorProto.INT64, [2])])
    im = pagoda.onnx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
                          any_ctx)
    with pytest.raises(pagoda.UnsupportedError, match="'i' is declared int64"):
        im(np.array([1, 2]))


def test_newest_opset(any_ctx):
    """ONNX 1.23 writes opset 28 (the loader stopped at 25 before)."""
    model = pagoda.onnx.load(mlp(opset=28), any_ctx)
    x = RNG.standard_normal((1, 6)).astype(np.float32)
    np.testing.assert_allclose(model(x)[0], want(x)[0], rtol=1e-5, atol=1e-5)
    with pytest.raises(pagoda.UnsupportedError, match="opset 29"):
        pagoda.onnx.load(mlp(opset=29), any_ctx)


def test_external_data(any_ctx, tmp_path):
    m = mlp()
    path = tmp_path / "ext.onnx"
    onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="ext.data", size_threshold=0)
    data = path.read_bytes()
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    y0, _ = want(x)
    np.testing.assert_allclose(pagoda.onnx.load(path, any_ctx)(x)[0], y0, rtol=1e-5, atol=1e-5)
    # bytes with the file's name: the external data is found beside it
    np.testing.assert_allclose(pagoda.onnx.load(data, any_ctx, name=str(path))(x)[0], y0,
                               rtol=1e-5, atol=1e-5)
    # bytes without a name: nowhere to read it from
    with pytest.raises(pagoda.FormatError, match="external data.*without a name"):
        pagoda.onnx.load(data, any_ctx)
    with pytest.raises(pagoda.IOError, match="ext.data"):
        pagoda.onnx.load(data, any_ctx, name=str(tmp_path / "sub" / "x.onnx"))


def test_hostile(any_ctx, tmp_path):
    good = mlp().SerializeToString()
    for bad in (b"\xff\xff\xff", good[: len(good) // 2]):
        with pytest.raises(pagoda.FormatError, match="<memory>: not an ONNX model"):
            pagoda.onnx.load(bad, any_ctx)
    with pytest.raises(pagoda.Error):
        pagoda.onnx.load(b"", any_ctx)
    with pytest.raises(pagoda.InvalidArgumentError):
        pagoda.onnx.load(12, any_ctx)
    with pytest.raises(pagoda.NotFoundError if hasattr(pagoda, "NotFoundError") else pagoda.Error):
        pagoda.onnx.load(tmp_path / "missing.onnx", any_ctx)


def test_backend_run_node():
    node = helper.make_node("Sigmoid", ["x"], ["y"])
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    (y,) = pagoda.onnx.backend.run_node(node, [x])
    np.testing.assert_allclose(y, 1 / (1 + np.exp(-x.astype(np.float64))), rtol=1e-5)
    assert pagoda.onnx.backend.supports_device("CPU")
    assert not pagoda.onnx.backend.supports_device("CUDA")
    # an integer input bound as a constant: Reshape's shape
    node = helper.make_node("Reshape", ["x", "s"], ["y"])
    (y,) = pagoda.onnx.backend.run_node(node, [x, np.array([4, 3], np.int64)])
    np.testing.assert_array_equal(y, x.reshape(4, 3))


def test_backend_suite_cases():
    """A few of ONNX's backend test cases through onnx.backend.test.BackendTest itself."""
    import onnx.backend.test

    bt = onnx.backend.test.BackendTest(pagoda.onnx.backend, __name__)
    for name in ("test_relu", "test_softmax_axis_0", "test_reshape_reordered_all_dims",
                 "test_matmul_2d", "test_transpose_all_permutations_0"):
        bt.include(f"^{name}_c")
    suite = unittest.TestSuite()
    for case in bt.test_cases.values():
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    result = unittest.TextTestRunner(stream=open(os.devnull, "w"), verbosity=0).run(suite)
    # the runner skips what no pattern includes, and the CUDA variants
    ran = result.testsRun - len(result.skipped)
    assert not result.failures and not result.errors, result.failures + result.errors
    assert ran == 5, (ran, result.testsRun, len(result.skipped))


def test_dropout_refused(any_ctx):
    """Dropout's mask output crashed the run (a graph output never computed: NULL read), and
    training_mode=true ran as the identity: both are refused now."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    m = helper.make_tensor_value_info("m", TensorProto.BOOL, [2, 3])
    g = helper.make_graph([helper.make_node("Dropout", ["x"], ["y", "m"])], "d", [x], [y, m])
    model = pagoda.onnx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
                             any_ctx)
    with pytest.raises(pagoda.UnsupportedError, match="mask output"):
        model(np.ones((2, 3), np.float32))
    g = helper.make_graph([helper.make_node("Dropout", ["x", "r", "t"], ["y"])], "d", [x], [y],
                          [numpy_helper.from_array(np.array(0.5, np.float32), "r"),
                           numpy_helper.from_array(np.array(True), "t")])
    model = pagoda.onnx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
                             any_ctx)
    with pytest.raises(pagoda.UnsupportedError, match="training_mode"):
        model(np.ones((2, 3), np.float32))
    # a mask that nothing reads (as onnx.version_converter leaves it) is never made: fine
    g = helper.make_graph([helper.make_node("Dropout", ["x"], ["y", "m"])], "d", [x], [y])
    model = pagoda.onnx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
                             any_ctx)
    v = RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(model(v)[0], v)


def one_node(node, ins, outs, inits=()):
    """A one-node model: ins/outs are (name, elem_type, shape)."""
    g = helper.make_graph([node], "n", [helper.make_tensor_value_info(*i) for i in ins],
                          [helper.make_tensor_value_info(*o) for o in outs], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_pad_constant_value_from_device(any_ctx):
    """Pad's constant_value given as a graph input (device data) was read as 0: wrong values.
    Refused now; as a constant it is used."""
    node = helper.make_node("Pad", ["x", "p", "v"], ["y"])
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    pads = numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "p")
    m = one_node(node, [("x", TensorProto.FLOAT, [2, 3]), ("v", TensorProto.FLOAT, [])],
                 [("y", TensorProto.FLOAT, [2, 5])], [pads])
    with pytest.raises(pagoda.UnsupportedError, match="constant_value"):
        pagoda.onnx.load(m, any_ctx)(x, np.float32(1.5))
    m = one_node(node, [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.FLOAT, [2, 5])],
                 [pads, numpy_helper.from_array(np.array(1.5, np.float32), "v")])
    np.testing.assert_array_equal(pagoda.onnx.load(m, any_ctx)(x)[0],
                                  np.pad(x, ((0, 0), (1, 1)), constant_values=1.5))


def test_scalar_outputs(any_ctx):
    """A reduction to a scalar and a vector-vector MatMul failed with a shape error ([1] for
    []): they give 0-d arrays now."""
    x = RNG.standard_normal(5).astype(np.float32)
    m = one_node(helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0),
                 [("x", TensorProto.FLOAT, [5])], [("y", TensorProto.FLOAT, [])])
    (y,) = pagoda.onnx.load(m, any_ctx)(x)
    assert y.shape == () and abs(float(y) - float(x.astype(np.float64).sum())) < 1e-5
    m = one_node(helper.make_node("MatMul", ["a", "b"], ["y"]),
                 [("a", TensorProto.FLOAT, [5]), ("b", TensorProto.FLOAT, [5])],
                 [("y", TensorProto.FLOAT, [])])
    (y,) = pagoda.onnx.load(m, any_ctx)(x, x)
    assert y.shape == () and abs(float(y) - float((x.astype(np.float64) ** 2).sum())) < 1e-4


def test_reduce_max_empty_refused(any_ctx):
    """ONNX's max of an empty set is -inf; Pagoda's op has none: unsupported, not a shape
    error."""
    m = one_node(helper.make_node("ReduceMax", ["x"], ["y"], keepdims=1),
                 [("x", TensorProto.FLOAT, [2, 0, 4])], [("y", TensorProto.FLOAT, [1, 1, 1])])
    with pytest.raises(pagoda.UnsupportedError, match="empty set"):
        pagoda.onnx.load(m, any_ctx)(np.zeros((2, 0, 4), np.float32))


def test_integer_output_named(any_ctx):
    """An integer value computed on the host as a graph output (Shape's) is refused naming the
    output and its type (the message named neither)."""
    m = one_node(helper.make_node("Shape", ["x"], ["s"]), [("x", TensorProto.FLOAT, [2, 3])],
                 [("s", TensorProto.INT64, [2])])
    with pytest.raises(pagoda.UnsupportedError, match="output 's' is an integer tensor"):
        pagoda.onnx.load(m, any_ctx)(np.zeros((2, 3), np.float32))


def test_float64_out_of_range_refused(any_ctx):
    """A float64 input beyond float32's range became inf silently (wrong results)."""
    model = pagoda.onnx.load(mlp(), any_ctx)
    x = np.ones((1, 6))
    x[0, 2] = 1e200
    with pytest.raises(pagoda.UnsupportedError, match="outside float32's range"):
        model(x)
    x[0, 2] = np.inf  # an infinity is a value float32 holds
    assert np.isinf(model(x)[1][0, 2])
