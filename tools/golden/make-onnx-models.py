#!/usr/bin/env python3
"""tools/golden/make-onnx-models.py OUTDIR | --regress DIR — small valid and hostile ONNX models.

Writes OUTDIR/NAME.onnx for each model below (the seed corpus of the onnx fuzz target, written
by tools/dev/fuzz into build-fuzz/corpus-seed/onnx; tests/cli_onnx_hostile.py imports this file
for its hostile cases). Valid models: a convolution, MatMul + Add + Softmax, a shape subgraph
(Shape, Gather, Unsqueeze, Concat, Reshape, Slice, Expand, Tile, Range, ...), external data
(read from the model file itself, which is beside the model wherever it is written), Constant
nodes of every attribute kind and an If with subgraphs. Hostile ones: each rule of
runtime/graph/graph_load.c broken once. --regress writes DIR/onnx-NAME.onnx, the inputs that
once broke the loader or the host evaluator (committed in tests/data/fuzz-regress). Needs the
onnx package (tools/setup installs it in .deps/py-venv); exit 77 without it.
"""
import os
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    print("make-onnx-models: the onnx package is not installed", file=sys.stderr)
    sys.exit(77)

OPSET = 17
F = TensorProto.FLOAT
I64 = TensorProto.INT64


def model(nodes, inputs, outputs, inits=(), opset=OPSET, name="g"):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="make-onnx-models")
    m.ir_version = 8
    return m


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def ints(name, vals):
    return const(name, np.array(vals, dtype=np.int64))


def conv_model():
    rng = np.random.default_rng(0)
    w = const("W", rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    b = const("B", rng.standard_normal(4).astype(np.float32))
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["Y"], name="pool")]
    return model(nodes, [vi("X", ["batch", 3, 8, 8])], [vi("Y", None)], [w, b])


def mlp_model():
    rng = np.random.default_rng(1)
    w = const("W", rng.standard_normal((4, 5)).astype(np.float32))
    b = const("b", rng.standard_normal(5).astype(np.float32))
    nodes = [helper.make_node("MatMul", ["X", "W"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "b"], ["a"], name="add"),
             helper.make_node("Softmax", ["a"], ["Y"], name="softmax", axis=-1)]
    return model(nodes, [vi("X", [2, 4])], [vi("Y", [2, 5])], [w, b])


def shape_model():
    """The shape arithmetic exporters emit, on the input's shape and on constants."""
    inits = [ints("zero", [0]), ints("minus1", [-1]), ints("ax0", [0]), ints("st", [0]),
             ints("en", [2]), ints("rep", [2, 1]), ints("shp", [2, 3]),
             const("c23", np.arange(6, dtype=np.float32).reshape(2, 3)),
             const("lim", np.array(5, dtype=np.int64)), const("one", np.array(1, dtype=np.int64)),
             const("z", np.array(0, dtype=np.int64)), ints("sidx", [[1, 2], [0, -1]]),
             const("sup", np.array([7, 8], dtype=np.float32)), ints("shp4", [4, 5])]
    n = helper.make_node
    nodes = [n("Shape", ["X"], ["s"], name="shape"),
             n("Gather", ["s", "z"], ["s0"], name="gather", axis=0),
             n("Unsqueeze", ["s0", "ax0"], ["s0u"], name="unsq"),
             n("Concat", ["s0u", "minus1"], ["tgt"], name="concat", axis=0),
             n("Reshape", ["X", "tgt"], ["Y"], name="reshape"),
             n("Slice", ["c23", "st", "en", "zero"], ["sl"], name="slice"),
             n("Expand", ["c23", "shp"], ["ex"], name="expand"),
             n("Tile", ["c23", "rep"], ["ti"], name="tile"),
             n("Range", ["z", "lim", "one"], ["rg"], name="range"),
             n("ConstantOfShape", ["shp"], ["cos"], name="cos",
               value=helper.make_tensor("v", F, [1], [2.5])),
             n("Transpose", ["ti"], ["tr"], name="transpose", perm=[1, 0]),
             n("ReduceSum", ["tr", "zero"], ["rs"], name="rsum", keepdims=0),
             n("Cast", ["rg"], ["rgf"], name="cast", to=F),
             n("Less", ["rgf", "rgf"], ["lt"], name="less"),
             n("Where", ["lt", "rgf", "rgf"], ["wh"], name="where"),
             n("Squeeze", ["s0u", "ax0"], ["sq"], name="squeeze"),
             n("Flatten", ["ex"], ["fl"], name="flatten", axis=1),
             n("Size", ["X"], ["sz"], name="size"),
             n("Mul", ["sz", "s0"], ["mu"], name="mul"),
             n("Div", ["mu", "lim"], ["dv"], name="div"),
             n("Mod", ["mu", "lim"], ["md"], name="mod"),
             n("Sqrt", ["rgf"], ["sqr"], name="sqrt"),
             n("ScatterND", ["c23", "sidx", "sup"], ["sc"], name="scatternd"),
             n("CumSum", ["c23", "one"], ["cu"], name="cumsum", exclusive=1, reverse=1),
             n("Resize", ["c23", "", "", "shp4"], ["rz"], name="resize",
               coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
             n("Sin", ["rgf"], ["sn"], name="sin"), n("Erf", ["rgf"], ["ef"], name="erf")]
    outs = [vi("Y", None)] + [vi(x, None, t) for x, t in
                              (("sl", F), ("rs", F), ("wh", F), ("cos", F), ("fl", F), ("dv", I64),
                               ("md", I64), ("sq", I64), ("sqr", F), ("sc", F), ("cu", F),
                               ("rz", F), ("sn", F), ("ef", F))]
    return model(nodes, [vi("X", ["batch", 3, 4])], outs, inits)


def constants_model():
    n = helper.make_node
    t = helper.make_tensor("t", F, [2, 2], [1, 2, 3, 4])
    nodes = [n("Constant", [], ["c_t"], name="ct", value=t),
             n("Constant", [], ["c_f"], name="cf", value_float=1.5),
             n("Constant", [], ["c_fs"], name="cfs", value_floats=[1.0, 2.0]),
             n("Constant", [], ["c_i"], name="ci", value_int=3),
             n("Constant", [], ["c_is"], name="cis", value_ints=[4, 5, 6]),
             n("Constant", [], ["c_s"], name="cs", value_string="hello"),
             n("Constant", [], ["c_ss"], name="css", value_strings=["a", "b"]),
             n("Add", ["c_t", "c_f"], ["Y"], name="add")]
    return model(nodes, [], [vi("Y", [2, 2]), vi("c_is", [3], I64), vi("c_fs", [2])])


def typed_model():
    """Initialisers of each data type, raw and typed."""
    inits = []
    for i, dt in enumerate([np.float16, np.float64, np.int8, np.uint8, np.int16, np.uint16,
                            np.int32, np.uint32, np.int64, np.uint64, np.bool_]):
        inits.append(const("t%d" % i, np.arange(3).astype(dt)))
    t = helper.make_tensor("typed", F, [3], [1.0, 2.0, 3.0])  # float_data, not raw
    inits.append(t)
    inits.append(helper.make_tensor("bf", TensorProto.BFLOAT16, [2], [0x3F80, 0x4000]))
    nodes = [helper.make_node("Identity", ["typed"], ["Y"], name="id")]
    return model(nodes, [], [vi("Y", [3])], inits)


def external_model(location="model.onnx", offset=0, length=16, dims=(4,)):
    """W's bytes from `location` (the model file itself by default)."""
    w = TensorProto()
    w.name = "W"
    w.data_type = F
    w.dims.extend(dims)
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = w.external_data.add()
            e.key, e.value = k, str(v)
    nodes = [helper.make_node("Add", ["X", "W"], ["Y"], name="add")]
    return model(nodes, [vi("X", [4])], [vi("Y", [4])], [w])


def if_model(depth=1):
    """An If whose branches hold If nodes, `depth` levels."""
    def branch(d, tag):
        if d == 0:
            nodes = [helper.make_node("Identity", ["X"], ["o" + tag], name="id" + tag)]
        else:
            nodes = [helper.make_node("If", ["cond"], ["o" + tag], name="if" + tag,
                                      then_branch=branch(d - 1, tag + "t"),
                                      else_branch=branch(d - 1, tag + "e"))]
        return helper.make_graph(nodes, "b" + tag, [], [vi("o" + tag, [2])])
    nodes = [helper.make_node("If", ["cond"], ["Y"], name="if", then_branch=branch(depth - 1, "t"),
                              else_branch=branch(depth - 1, "e"))]
    return model(nodes, [vi("cond", [], TensorProto.BOOL), vi("X", [2])], [vi("Y", [2])])


def valid_models():
    return {"valid-conv": conv_model(), "valid-mlp": mlp_model(), "valid-shape": shape_model(),
            "valid-constants": constants_model(), "valid-typed": typed_model(),
            "valid-external": external_model(), "valid-if": if_model(2)}


# ---- hostile models: each a rule of graph_load.c broken ----------------------------------


def nested_bytes(levels):
    """A ModelProto whose graph nests `levels` If subgraphs: Graph > Node > Attribute > Graph.
    Written by hand (onnx's own serialiser recurses too)."""
    def ld(field, payload):
        key = bytes([(field << 3) | 2])
        n, v = len(payload), b""
        while True:
            b = n & 0x7F
            n >>= 7
            v += bytes([b | (0x80 if n else 0)])
            if not n:
                break
        return key + v + payload
    g = b""
    for lv in range(levels):
        attr = ld(1, b"then_branch") + b"\xa0\x01\x05" + ld(6, g)  # type (field 20) GRAPH, g
        node = ld(4, b"If") + ld(5, attr)                            # op_type, attribute
        if lv == levels - 1:
            node += ld(2, b"o")                                      # the outermost If's output
        g = ld(1, node)                                              # GraphProto.node
    g += ld(12, ld(1, b"o"))                                         # GraphProto.output
    opset = ld(8, bytes([(2 << 3) | 0, OPSET]))
    return bytes([(1 << 3) | 0, 8]) + opset + ld(7, g)


def raw_tensor(name, dims, nbytes, dtype=F):
    t = TensorProto()
    t.name, t.data_type = name, dtype
    t.dims.extend(dims)
    t.raw_data = b"\0" * nbytes
    return t


def one_init_model(t):
    nodes = [helper.make_node("Identity", [t.name], ["Y"], name="id")]
    return model(nodes, [], [vi("Y", None)], [t])


def hostile_models():
    """name -> (bytes or ModelProto, words the error must contain)."""
    mlp = mlp_model().SerializeToString()
    n = helper.make_node
    h = {}
    h["truncated"] = (mlp[:len(mlp) // 2], ["truncated or malformed"])
    h["random-bytes"] = (bytes(np.random.default_rng(7).integers(0, 256, 512, dtype=np.uint8)),
                         ["ONNX"])
    h["raw-short"] = (one_init_model(raw_tensor("T", [2, 3], 20)), ["'T'", "20 bytes", "24"])
    h["raw-long"] = (one_init_model(raw_tensor("T", [2, 3], 28)), ["'T'", "28 bytes", "24"])
    h["dim-2p62"] = (one_init_model(raw_tensor("T", [2**62], 4)), ["'T'", "4611686018427387904"])
    h["dims-2p62-squared"] = (one_init_model(raw_tensor("T", [2**31, 2**31, 2**31], 0)), ["'T'"])
    h["dims-zero-2p62"] = (one_init_model(raw_tensor("T", [0, 2**62], 0)), ["'T'",
                                                                          "4611686018427387904"])
    h["dim-negative"] = (one_init_model(raw_tensor("T", [2, -3], 24)), ["'T'", "-3"])
    h["cycle"] = (model([n("Relu", ["b"], ["a"], name="r1"), n("Relu", ["a"], ["b"], name="r2")],
                        [vi("X", [1])], [vi("a", [1])]), ["cycle", "node 'r"])
    h["missing-input"] = (model([n("Relu", ["nowhere"], ["Y"], name="r")], [vi("X", [1])],
                                [vi("Y", [1])]), ["node 'r'", "'nowhere'", "not produced"])
    h["produced-twice"] = (model([n("Relu", ["X"], ["Y"], name="r1"),
                                  n("Relu", ["X"], ["Y"], name="r2")], [vi("X", [1])],
                                 [vi("Y", [1])]), ["node 'r2'", "'Y'", "produced twice"])
    h["ext-dotdot"] = (external_model("../model.onnx"), ["'W'", ".."])
    h["ext-absolute"] = (external_model("/etc/passwd"), ["'W'", "/etc/passwd"])
    # data.bin: 64 bytes the test writes beside the model
    h["ext-past-end"] = (external_model("data.bin", offset=1 << 40), ["'W'", "1099511627776"])
    h["ext-length-wrong"] = (external_model("data.bin", length=12), ["'W'", "12"])
    h["ext-past-file"] = (external_model("data.bin", offset=60), ["'W'", "60"])
    h["ext-missing-file"] = (external_model("no-such-file.bin"), ["'W'", "no-such-file.bin"])
    h["opset-9"] = (model([n("Relu", ["X"], ["Y"], name="r")], [vi("X", [1])], [vi("Y", [1])],
                          opset=9), ["opset 9"])
    h["nested-200"] = (nested_bytes(200), ["nested more than 64"])
    h["no-graph"] = (bytes([8, 8]), ["no graph"])
    return h


def regress_models():
    """Inputs that once broke the loader or the host evaluator (tests/data/fuzz-regress/onnx-*,
    run through the onnx fuzz target by the fuzz-regress test)."""
    n = helper.make_node
    big = 2**62
    r = {}
    # Shape and Size nodes without their input read an index never set
    r["shape-no-input"] = model([n("Shape", [], ["Y"], name="s")], [], [vi("Y", None, I64)])
    r["shape-empty-input"] = model([n("Shape", [""], ["Y"], name="s")], [], [vi("Y", None, I64)])
    # a zero dim let the others be 2^62, which Concat added
    t = raw_tensor("T", [0, big], 0)
    r["concat-zero-2p62"] = model([n("Concat", ["T", "T"], ["Y"], name="c", axis=1)], [],
                                  [vi("Y", None)], [t])
    # a scalar result (Size) copied its dims from a NULL pointer
    r["size-scalar"] = model([n("Size", ["T"], ["Y"], name="s")], [], [vi("Y", None, I64)],
                             [raw_tensor("T", [0, 3], 0)])
    # Reshape's target dims multiplied without an overflow check
    r["reshape-overflow"] = model([n("Reshape", ["T", "S"], ["Y"], name="r")], [],
                                  [vi("Y", None)],
                                  [raw_tensor("T", [0], 0), ints("S", [2**40, 2**40, -1])])
    # float to int64 casts of values out of range, INT64_MIN / -1
    r["cast-huge"] = model([n("Cast", ["T"], ["Y"], name="c", to=I64)], [], [vi("Y", None, I64)],
                           [const("T", np.array([1e30, -np.inf, np.nan], dtype=np.float32))])
    r["div-int-min"] = model([n("Div", ["A", "B"], ["Y"], name="d")], [], [vi("Y", None, I64)],
                             [ints("A", [-2**63]), ints("B", [-1])])
    r["slice-step-min"] = model([n("Slice", ["T", "s", "e", "a", "p"], ["Y"], name="sl")], [],
                                [vi("Y", None)],
                                [const("T", np.zeros(4, np.float32)), ints("s", [3]),
                                 ints("e", [0]), ints("a", [0]), ints("p", [-2**63])])
    r["tile-overflow"] = model([n("Tile", ["T", "R"], ["Y"], name="t")], [], [vi("Y", None)],
                               [const("T", np.zeros(4, np.float32)), ints("R", [big])])
    # Flatten: an axis past the rank was taken as the rank; a leading zero dim flattened
    # [0, 3] to [0, 0]
    r["flatten-axis-9"] = model([n("Flatten", ["T"], ["Y"], name="f", axis=9)], [],
                                [vi("Y", None)], [const("T", np.zeros((2, 3), np.float32))])
    r["flatten-zero"] = model([n("Flatten", ["T"], ["Y"], name="f", axis=1)], [],
                              [vi("Y", None)], [raw_tensor("T", [0, 3], 0)])
    # Resize (host, nearest): an empty dim resized to 3 read x[-1]; a scale of 1e30 cast out
    # of int64's range; CumSum: a float axis of 1e30 cast likewise
    r["resize-empty"] = model([n("Resize", ["T", "", "", "S"], ["Y"], name="rs")], [],
                              [vi("Y", None)], [raw_tensor("T", [0, 2], 0), ints("S", [3, 2])])
    r["resize-scale-huge"] = model([n("Resize", ["T", "", "C"], ["Y"], name="rs")], [],
                                   [vi("Y", None)], [const("T", np.zeros((2, 2), np.float32)),
                                                     const("C", np.array([1e30, 1],
                                                                         np.float32))])
    r["cumsum-axis-huge"] = model([n("CumSum", ["T", "A"], ["Y"], name="cs")], [],
                                  [vi("Y", None)], [const("T", np.zeros(3, np.float32)),
                                                    const("A", np.array(1e30, np.float32))])
    return r


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--regress":
        os.makedirs(sys.argv[2], exist_ok=True)
        for name, m in regress_models().items():
            with open(os.path.join(sys.argv[2], "onnx-%s.onnx" % name), "wb") as f:
                f.write(m.SerializeToString())
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n")[0])
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    items = {k: v for k, v in valid_models().items()}
    items.update({"bad-" + k: v[0] for k, v in hostile_models().items()})
    items["deep-ok-20"] = nested_bytes(20)
    for name, m in items.items():
        data = m if isinstance(m, bytes) else m.SerializeToString()
        with open(os.path.join(out, name + ".onnx"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
