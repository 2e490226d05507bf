#!/usr/bin/python3
"""Extra fuzz seeds for parts of the schema the backend models do not use: training_info,
COO sparse initializers,
GRAPHS attributes, sparse Constant values, ref_attr_name in functions, segments,
quantization annotations, metadata_props. Run: /usr/bin/python3 tests/fuzz/make_seeds.py"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")


def vi(name, shape=(2, 3), t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, list(shape))


def save(name, m):
    m.ir_version = 8
    onnx.checker.check_model(m)
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(m.SerializeToString())


def main():
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "W")
    # training_info with an initialization and an algorithm graph
    g = helper.make_graph([helper.make_node("Add", ["X", "W"], ["Y"], name="add0")], "g",
                          [vi("X")], [vi("Y")], initializer=[w])
    algo = helper.make_graph([helper.make_node("Sub", ["W", "X"], ["W_new"], name="step")],
                             "algo", [], [vi("W_new")])
    init = helper.make_graph([helper.make_node("Constant", [], ["W_init"], name="winit",
                                               value=numpy_helper.from_array(np.zeros((2, 3), np.float32), "z"))],
                             "init", [], [vi("W_init")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    ti = m.training_info.add()
    ti.initialization.CopyFrom(init)
    ti.algorithm.CopyFrom(algo)
    b = ti.update_binding.add()
    b.key, b.value = "W", "W_new"
    b = ti.initialization_binding.add()
    b.key, b.value = "W", "W_init"
    helper.set_model_props(m, {"author": "fuzz", "purpose": "seed"})
    m.graph.quantization_annotation.add(tensor_name="W").quant_parameter_tensor_names.add(
        key="SCALE_TENSOR", value="W")
    m.graph.node[0].doc_string = "a node"
    with open(os.path.join(HERE, "training_info.onnx"), "wb") as f:
        m.ir_version = 8
        f.write(m.SerializeToString())

    # a GRAPHS attribute and a TYPE_PROTO attribute on a custom-domain node, a segment
    sub = helper.make_graph([helper.make_node("Identity", ["X"], ["s"], name="sid")], "sub", [],
                            [vi("s")])
    n = helper.make_node("Custom", ["X"], ["Y"], name="custom0", domain="com.example")
    a = n.attribute.add()
    a.name, a.type = "branches", onnx.AttributeProto.GRAPHS
    a.graphs.extend([sub, sub])
    a = n.attribute.add()
    a.name, a.type = "tp", onnx.AttributeProto.TYPE_PROTO
    a.tp.CopyFrom(helper.make_sequence_type_proto(helper.make_tensor_type_proto(1, [2, "N"])))
    seg = numpy_helper.from_array(np.arange(4, dtype=np.int64), "seg")
    seg.segment.begin, seg.segment.end = 0, 4
    g = helper.make_graph([n], "g", [vi("X")], [vi("Y")], initializer=[seg],
                          value_info=[vi("s2", ("N", 3))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                            helper.make_opsetid("com.example", 1)])
    with open(os.path.join(HERE, "graphs_attr.onnx"), "wb") as f:
        m.ir_version = 8
        f.write(m.SerializeToString())

    # Constant with a sparse_value; int32_data holding float16 and int8; uint64 data
    vals = numpy_helper.from_array(np.array([5.0, 6.0], np.float32), "sv")
    idx = numpy_helper.from_array(np.array([0, 5], np.int64), "si")
    nodes = [helper.make_node("Constant", [], ["C"], name="csparse",
                              sparse_value=helper.make_sparse_tensor(vals, idx, [2, 3])),
             helper.make_node("Add", ["X", "C"], ["Y"], name="add0")]
    inits = [helper.make_tensor("h", TensorProto.FLOAT16, [2], [1.0, 2.0]),
             helper.make_tensor("i8", TensorProto.INT8, [3], [1, -2, 3]),
             helper.make_tensor("u64", TensorProto.UINT64, [2], [1, 2]),
             helper.make_tensor("u32", TensorProto.UINT32, [2], [1, 2]),
             helper.make_tensor("s", TensorProto.STRING, [2], [b"a", b"bc"]),
             helper.make_tensor("d", TensorProto.DOUBLE, [1], [1.5]),
             TensorProto(name="c64", data_type=TensorProto.COMPLEX64, dims=[1], float_data=[1.0, 2.0])]
    g = helper.make_graph(nodes, "g", [vi("X")], [vi("Y")], initializer=inits)
    save("sparse_constant_typed.onnx",
         helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))

    # a function attribute used through ref_attr_name
    fn = helper.make_function("local", "Scale", ["x"], ["y"],
                              [helper.make_node("Constant", [], ["k"], name="fk"),
                               helper.make_node("Mul", ["x", "k"], ["y"], name="fmul")],
                              [helper.make_opsetid("", 13)], attributes=[])
    ref = fn.node[0].attribute.add()
    ref.name, ref.ref_attr_name, ref.type = "value_float", "alpha", onnx.AttributeProto.FLOAT
    fn.attribute.append("alpha")  # (onnx 1.12 has no attribute_proto defaults)
    g = helper.make_graph([helper.make_node("Scale", ["X"], ["Y"], name="call0", domain="local", alpha=2.0)],
                          "g", [vi("X")], [vi("Y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                            helper.make_opsetid("local", 1)], functions=[fn])
    with open(os.path.join(HERE, "function_attrs.onnx"), "wb") as f:
        m.ir_version = 8
        f.write(m.SerializeToString())

    # a sparse initializer in coordinate (COO) form
    vals = numpy_helper.from_array(np.array([1.0, 2.0], dtype=np.float32), "S")
    idx = numpy_helper.from_array(np.array([[0, 1], [1, 2]], dtype=np.int64), "S_idx")
    g = helper.make_graph([helper.make_node("Add", ["X", "S"], ["Y"], name="add0")], "g",
                          [vi("X")], [vi("Y")],
                          sparse_initializer=[helper.make_sparse_tensor(vals, idx, [2, 3])])
    save("sparse_coo.onnx", helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))


if __name__ == "__main__":
    main()
