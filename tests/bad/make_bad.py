#!/usr/bin/python3
"""Generate the hostile-input corpus in tests/bad/.

Run with the Debian python (it has onnx):   /usr/bin/python3 tests/bad/make_bad.py
The generated files are committed, so the tests never need python.

Every *.onnx file written here must be refused by `onnxq check` and `onnxq convert`
with exit code 2 and one stderr line. EXPECT (written here too) maps each file to an
extended regular expression the error line must match, so the test checks that the
*right* problem was reported, not just that something failed.

Wire-level damage (truncation, bit flips, bad varints, wrong wire types, deep nesting)
is done on raw bytes with the small encoder below, since the protobuf library refuses
to produce such files. Everything else is built with onnx.helper.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECT = []  # (file name, regex)


# ----------------------------------------------------------------- raw wire encoding
def varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wt):
    return varint(field << 3 | wt)


def ld(field, payload):
    return key(field, 2) + varint(len(payload)) + payload


def vi(field, v):
    return key(field, 0) + varint(v)


# ModelProto / GraphProto / NodeProto / AttributeProto / TypeProto field numbers
M_IR, M_OPSET, M_GRAPH = 1, 8, 7
G_NODE, G_NAME, G_INIT, G_INPUT, G_OUTPUT = 1, 2, 5, 11, 12
N_IN, N_OUT, N_NAME, N_OP, N_ATTR = 1, 2, 3, 4, 5
A_NAME, A_G, A_TYPE = 1, 6, 20
T_DIMS, T_DTYPE, T_FLOAT, T_INT32, T_NAME, T_RAW, T_DOUBLE = 1, 2, 4, 5, 8, 9, 10


def opset_bytes(version=13, domain=b""):
    return ld(M_OPSET, ld(1, domain) + vi(2, version))


def model_bytes(graph, opset=True):
    return vi(M_IR, 8) + (opset_bytes() if opset else b"") + ld(M_GRAPH, graph)


def value_info_bytes(name, elem=1, dims=(2, 3)):
    shape = b"".join(ld(1, vi(1, d)) for d in dims)
    tensor_type = vi(1, elem) + ld(2, shape)
    return ld(1, name) + ld(2, ld(1, tensor_type))


def add_graph_bytes(init):
    """X + W -> Y with the initializer W given as raw TensorProto bytes."""
    node = ld(N_IN, b"X") + ld(N_IN, b"W") + ld(N_OUT, b"Y") + ld(N_NAME, b"add0") + ld(N_OP, b"Add")
    return (ld(G_NODE, node) + ld(G_NAME, b"g") + ld(G_INIT, init)
            + ld(G_INPUT, value_info_bytes(b"X")) + ld(G_OUTPUT, value_info_bytes(b"Y")))


def packed(field, payload):
    return ld(field, payload)


# ----------------------------------------------------------------- onnx-built models
def save(name, data, regex):
    path = os.path.join(HERE, name)
    if isinstance(data, onnx.ModelProto):
        data = data.SerializeToString()
    with open(path, "wb") as f:
        f.write(data)
    EXPECT.append((name, regex))


def vinfo(name, elem=TensorProto.FLOAT, shape=(2, 3)):
    return helper.make_tensor_value_info(name, elem, list(shape))


def model(nodes, inits=(), inputs=None, outputs=None, opsets=(("", 13),), functions=(),
          sparse=(), name="g"):
    g = helper.make_graph(list(nodes), name,
                          inputs if inputs is not None else [vinfo("X")],
                          outputs if outputs is not None else [vinfo("Y")],
                          initializer=list(inits), sparse_initializer=list(sparse))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                          functions=list(functions))
    m.ir_version = 8
    return m


def w_tensor(name="W"):
    return numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), name)


def base_model():
    return model([helper.make_node("Add", ["X", "W"], ["Y"], name="add0")], [w_tensor()])


def rich_model():
    """A model with a Constant, an If with two subgraphs and an initializer: the victim of
    truncation and bit flips (more structure, more places to break)."""
    then_g = helper.make_graph(
        [helper.make_node("Add", ["X", "W"], ["t_out"], name="then_add")], "then_g", [],
        [vinfo("t_out")])
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["X", "W"], ["e_out"], name="else_sub")], "else_g", [],
        [vinfo("e_out")])
    nodes = [
        helper.make_node("Constant", [], ["cond"], name="const_cond",
                         value=helper.make_tensor("cond_value", TensorProto.BOOL, [], [1])),
        helper.make_node("If", ["cond"], ["Z"], name="if0", then_branch=then_g,
                         else_branch=else_g),
        helper.make_node("Relu", ["Z"], ["Y"], name="relu0"),
    ]
    return model(nodes, [w_tensor()])


def rawt(name, dtype, dims, raw):
    """A TensorProto with raw_data, without onnx.helper's size check."""
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    t.raw_data = raw
    return t


def write_tensor_case(name, tensor, regex):
    save(name, model([helper.make_node("Add", ["X", tensor.name], ["Y"], name="add0")], [tensor]),
         regex)


# ----------------------------------------------------------------- wire-level cases
def wire_cases():
    save("empty.onnx", b"", r"empty file")
    save("zeros.onnx", bytes(64), r"invalid field number")
    save("text.onnx", b"this is not an onnx model, just some text\n", r"ModelProto|not a valid")
    save("zip_header.onnx", b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(20),
         r"invalid field number|wire type")

    rich = rich_model().SerializeToString()
    n = len(rich)
    # truncation: inside the first key, inside the opset, inside the graph at several points
    for cut in (1, 3, n // 5, n // 3, n // 2, (2 * n) // 3, n - 1):
        save("truncated_%d.onnx" % cut, rich[:cut],
             r"truncated|past the end|no graph|corrupt|imports no operator set")

    # bit flips at chosen places (found with the wire walker below)
    spots = walk(rich)

    def flip(name, pos, mask, regex):
        b = bytearray(rich)
        b[pos] ^= mask
        save(name, bytes(b), regex)

    flip("bitflip_graph_wiretype.onnx", spots["graph_key"], 0x01, r"wire type|invalid")
    flip("bitflip_graph_length.onnx", spots["graph_len"], 0x80,
         r"past the end|truncated|malformed|invalid field number")
    flip("bitflip_graph_length_high.onnx", spots["graph_len"] + 1 if spots["graph_len_bytes"] > 1
         else spots["graph_len"], 0x40, r"past the end|truncated|malformed|wire type")
    flip("bitflip_ir_version_key.onnx", 0, 0x04, r"wire type|past the end|invalid|malformed|truncated")
    flip("bitflip_opset_len.onnx", spots["opset_len"], 0x20, r"past the end|truncated|wire type|invalid")
    flip("bitflip_dtype.onnx", spots["w_dtype"], 0x40, r"\"W\".*data_type")
    flip("bitflip_dims.onnx", spots["w_dims"], 0x10, r"\"W\".*raw_data")
    flip("bitflip_node_name_key.onnx", spots["node_key"], 0x02, r"wire type|invalid|past the end|malformed|truncated")

    # varints
    good_graph = add_graph_bytes(raw_w())
    save("varint_overlong_key.onnx", b"\x88" + b"\x80" * 10 + b"\x00", r"malformed field key")
    save("varint_overlong_value.onnx", key(M_IR, 0) + b"\xff" * 10 + b"\x01" + ld(M_GRAPH, good_graph),
         r"malformed varint")
    save("varint_tenth_byte.onnx", key(M_IR, 0) + b"\xff" * 9 + b"\x7f" + ld(M_GRAPH, good_graph),
         r"malformed varint")
    save("varint_truncated.onnx", ld(M_GRAPH, good_graph) + key(M_IR, 0) + b"\x80\x80",
         r"truncated varint")
    save("varint_length_overlong.onnx", key(M_GRAPH, 2) + b"\x80" * 10 + b"\x00", r"malformed length")
    save("field_number_zero.onnx", b"\x02\x00" + model_bytes(good_graph), r"invalid field number")
    save("field_number_huge.onnx", varint((1 << 32) << 3) + b"\x00", r"invalid field number")

    # wire types
    save("wiretype_graph_varint.onnx", vi(M_IR, 8) + opset_bytes() + vi(M_GRAPH, 5),
         r"graph .*wire type 0")
    save("wiretype_irversion_bytes.onnx", ld(M_IR, b"\x08") + opset_bytes() + ld(M_GRAPH, good_graph),
         r"ir_version .*wire type 2")
    save("wiretype_group.onnx", model_bytes(good_graph) + key(30, 3) + key(30, 4),
         r"invalid wire type 3")
    bad_dims = key(T_DIMS, 5) + b"\x02\x00\x00\x00" + vi(T_DTYPE, 1) + ld(T_NAME, b"W")
    save("wiretype_dims_fixed32.onnx", model_bytes(add_graph_bytes(bad_dims)), r"dims .*wire type 5")

    # lengths
    save("length_past_end.onnx", vi(M_IR, 8) + key(M_GRAPH, 2) + varint(1000) + good_graph,
         r"length 1000 runs past the end")
    save("length_huge.onnx", vi(M_IR, 8) + key(M_GRAPH, 2) + varint(1 << 62) + good_graph,
         r"runs past the end")
    nested_past = ld(G_NODE, key(N_NAME, 2) + varint(50) + b"abc")
    save("length_past_end_nested.onnx", model_bytes(nested_past), r"NodeProto\.name .*past the end")

    # packed repeated scalars that protobuf-c must never see
    def tensor_with(payload):
        return payload + vi(T_DTYPE, 1) + ld(T_NAME, b"W")
    dims23 = packed(T_DIMS, varint(2) + varint(3))
    save("packed_float_len7.onnx",
         model_bytes(add_graph_bytes(tensor_with(dims23 + packed(T_FLOAT, bytes(7))))),
         r"float_data .*multiple of 4")
    save("packed_double_len12.onnx",
         model_bytes(add_graph_bytes(dims23 + vi(T_DTYPE, 11) + ld(T_NAME, b"W")
                                     + packed(T_DOUBLE, bytes(12)))),
         r"double_data .*multiple of 8")
    save("packed_dims_bad_varint.onnx",
         model_bytes(add_graph_bytes(tensor_with(packed(T_DIMS, b"\x02\x83")))),
         r"dims .*packed")
    save("packed_int32_overlong.onnx",
         model_bytes(add_graph_bytes(dims23 + vi(T_DTYPE, 6) + ld(T_NAME, b"W")
                                     + packed(T_INT32, b"\xff" * 11))),
         r"int32_data .*packed")

    # nesting deeper than 100
    save("deep_graph_if_105.onnx", deep_if_model(105), r"graphs nested deeper than 100")
    save("deep_graph_if_101.onnx", deep_if_model(101), r"graphs nested deeper than 100")
    save("deep_type_sequence_105.onnx", deep_type_model(105, 4), r"types nested deeper than 100")
    save("deep_type_optional_101.onnx", deep_type_model(101, 9), r"types nested deeper than 100")
    save("deep_graph_in_function.onnx", deep_function_model(103), r"graphs nested deeper than 100")
    save("deep_graph_1000.onnx", deep_if_model(1000), r"graphs nested deeper than 100")
    # controls at the limit: exactly 100 levels load (the runner checks they do)
    with open(os.path.join(HERE, "good_deep_graph_100.onnx.ok"), "wb") as f:
        f.write(model_bytes(deep_if_graph(100) + ld(G_INPUT, value_info_bytes(b"c", 9, ()))))
    with open(os.path.join(HERE, "good_deep_type_100.onnx.ok"), "wb") as f:
        f.write(deep_type_model(100, 4))


def raw_w():
    return (packed(T_DIMS, varint(2) + varint(3)) + vi(T_DTYPE, 1) + ld(T_NAME, b"W")
            + ld(T_RAW, np.arange(6, dtype=np.float32).tobytes()))


def if_node(sub):
    attr = ld(A_NAME, b"then_branch") + vi(A_TYPE, 5) + ld(A_G, sub)
    return ld(N_IN, b"c") + ld(N_OUT, b"y") + ld(N_OP, b"If") + ld(N_ATTR, attr)


def deep_if_graph(levels):
    g = ld(G_NAME, b"leaf")
    for _ in range(levels - 1):
        g = ld(G_NODE, if_node(g)) + ld(G_NAME, b"g")
    return g


def deep_if_model(levels):
    return model_bytes(deep_if_graph(levels))


def deep_type_model(levels, field):
    # field 4 = TypeProto.sequence_type, 9 = optional_type; both hold elem_type (field 1)
    t = ld(1, vi(1, 1))  # tensor_type { elem_type: FLOAT }
    for _ in range(levels - 1):
        t = ld(field, ld(1, t))
    graph = ld(G_NAME, b"g") + ld(G_INPUT, ld(1, b"X") + ld(2, t))
    return model_bytes(graph)


def deep_function_model(levels):
    fn = ld(1, b"f") + ld(4, b"x") + ld(5, b"y") + ld(7, if_node(deep_if_graph(levels))) + ld(10, b"local")
    return model_bytes(ld(G_NAME, b"g")) + ld(25, fn)


def walk(buf):
    """Find byte offsets of interesting fields in a serialized rich_model()."""
    spots = {}

    def rd_varint(b, p):
        v = s = 0
        while True:
            c = b[p]
            p += 1
            v |= (c & 0x7F) << s
            s += 7
            if not c & 0x80:
                return v, p

    def fields(b, start, end):
        p = start
        while p < end:
            kpos = p
            k, p = rd_varint(b, p)
            wt = k & 7
            if wt == 0:
                vpos = p
                v, p = rd_varint(b, p)
                yield k >> 3, wt, kpos, vpos, v, None
            elif wt == 2:
                lpos = p
                n, p = rd_varint(b, p)
                yield k >> 3, wt, kpos, lpos, p, p + n
                p += n
            elif wt == 5:
                p += 4
            elif wt == 1:
                p += 8

    for f, wt, kpos, a, b_, c in fields(buf, 0, len(buf)):
        if f == M_GRAPH:
            spots["graph_key"] = kpos
            spots["graph_len"] = a
            spots["graph_len_bytes"] = b_ - a
            for gf, gwt, gk, ga, gb, gc in fields(buf, b_, c):
                if gf == G_NODE and "node_key" not in spots:
                    for nf, nwt, nk, na, nb, nc in fields(buf, gb, gc):
                        if nf == N_NAME:
                            spots["node_key"] = nk
                if gf == G_INIT:
                    for tf, twt, tk, ta, tb, tc in fields(buf, gb, gc):
                        if tf == T_DTYPE:
                            spots["w_dtype"] = ta
                        if tf == T_DIMS and "w_dims" not in spots:
                            spots["w_dims"] = tb if twt == 2 else ta
        if f == M_OPSET:
            spots["opset_len"] = a
    return spots


# ----------------------------------------------------------------- tensor payloads
def tensor_cases():
    t = rawt("W", TensorProto.FLOAT, [-1, 3], b"")
    write_tensor_case("dims_negative.onnx", t, r"\"W\".*dimension 0 is negative")
    t = rawt("W", TensorProto.FLOAT, [3, -2], b"")
    write_tensor_case("dims_negative_second.onnx", t, r"\"W\".*dimension 1 is negative")
    t = rawt("W", TensorProto.FLOAT, [1 << 40, 1 << 40], b"")
    write_tensor_case("dims_overflow.onnx", t, r"\"W\".*overflow")
    t = rawt("W", TensorProto.FLOAT, [1 << 31, 1 << 31, 4], b"")
    write_tensor_case("dims_overflow_three.onnx", t, r"\"W\".*overflow")
    t = rawt("W", TensorProto.FLOAT, [1 << 61], b"")
    write_tensor_case("dims_bytes_overflow.onnx", t, r"\"W\".*(overflow|raw_data)")
    t = rawt("W", TensorProto.FLOAT, [2, 3], bytes(20))
    write_tensor_case("raw_data_short.onnx", t, r"\"W\".*raw_data has 20 bytes.*24")
    t = rawt("W", TensorProto.FLOAT, [2, 3], bytes(28))
    write_tensor_case("raw_data_long.onnx", t, r"\"W\".*raw_data has 28 bytes.*24")
    t = rawt("W", 22, [5], bytes(2))  # INT4 (onnx 1.12 predates it)
    write_tensor_case("raw_data_int4_short.onnx", t, r"\"W\".*raw_data has 2 bytes.*3")
    t = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[2, 3], float_data=[1.0] * 5)
    write_tensor_case("float_data_count.onnx", t, r"\"W\".*float_data has 5 values.*6")
    t = TensorProto(name="W", data_type=TensorProto.INT64, dims=[2, 3], int64_data=[1] * 7)
    write_tensor_case("int64_data_count.onnx", t, r"\"W\".*int64_data has 7 values.*6")
    t = helper.make_tensor("W", TensorProto.FLOAT, [2, 3], vals=[1.0] * 6)
    t.data_type = TensorProto.INT64
    write_tensor_case("typed_field_wrong_dtype.onnx", t, r"\"W\".*float_data cannot hold")
    t = w_tensor()
    t.data_type = 99
    write_tensor_case("dtype_invalid.onnx", t, r"\"W\".*invalid data_type 99")
    t = w_tensor()
    t.data_type = 0
    write_tensor_case("dtype_undefined.onnx", t, r"\"W\".*invalid data_type 0")
    t = w_tensor()
    t.float_data.extend([1.0] * 6)
    write_tensor_case("data_in_two_fields.onnx", t, r"\"W\".*more than one field")
    t = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[2, 3])
    write_tensor_case("no_data.onnx", t, r"\"W\".*no data")
    t = rawt("W", TensorProto.STRING, [2], b"abcdefgh")
    write_tensor_case("string_raw_data.onnx", t, r"\"W\".*string")
    # a bad tensor inside a Constant attribute
    bad = rawt("C", TensorProto.FLOAT, [2, 3], bytes(7))
    save("constant_raw_data_short.onnx",
         model([helper.make_node("Constant", [], ["C"], name="const0", value=bad),
                helper.make_node("Add", ["X", "C"], ["Y"], name="add0")]),
         r"\"C\".*raw_data has 7 bytes")
    # sparse initializers: negative dims, out-of-range indices, bad index shape
    vals = numpy_helper.from_array(np.array([1.0, 2.0], dtype=np.float32), "S")
    idx = numpy_helper.from_array(np.array([1, 9], dtype=np.int64), "S_idx")
    sp = helper.make_sparse_tensor(vals, idx, [2, 3])
    save("sparse_index_out_of_range.onnx",
         model([helper.make_node("Add", ["X", "S"], ["Y"], name="add0")], sparse=[sp]),
         r"\"S\".*index")
    idx = numpy_helper.from_array(np.array([1, 2], dtype=np.int64), "S_idx")
    sp = helper.make_sparse_tensor(vals, idx, [2, -3])
    save("sparse_dims_negative.onnx",
         model([helper.make_node("Add", ["X", "S"], ["Y"], name="add0")], sparse=[sp]),
         r"\"S\".*negative")
    idx = numpy_helper.from_array(np.array([1, 2, 3], dtype=np.int64), "S_idx")
    sp = helper.make_sparse_tensor(vals, idx, [2, 3])
    save("sparse_index_count.onnx",
         model([helper.make_node("Add", ["X", "S"], ["Y"], name="add0")], sparse=[sp]),
         r"\"S\".*indices")


# ----------------------------------------------------------------- graph structure
def graph_cases():
    m = base_model()
    del m.opset_import[:]
    save("opset_missing.onnx", m, r"imports no operator set|no opset")
    m = model([helper.make_node("Add", ["X", "W"], ["Y"], name="add0", domain="com.example")],
              [w_tensor()])
    save("opset_missing_domain.onnx", m, r"add0.*com\.example.*no opset")
    m = model([helper.make_node("Relu", ["X"], ["Z"], name="relu_a"),
               helper.make_node("Neg", ["X"], ["Z"], name="neg_b"),
               helper.make_node("Add", ["Z", "W"], ["Y"], name="add0")], [w_tensor()])
    save("duplicate_output.onnx", m, r"neg_b.*\"Z\" is produced more than once")
    m = model([helper.make_node("Relu", ["X"], ["X"], name="relu_x"),
               helper.make_node("Add", ["X", "W"], ["Y"], name="add0")], [w_tensor()])
    save("output_is_graph_input.onnx", m, r"relu_x.*\"X\" is also a graph input")
    m = model([helper.make_node("Add", ["X", "nowhere"], ["Y"], name="add0")])
    save("dangling_input.onnx", m, r"add0.*\"nowhere\" is not produced")
    m = model([helper.make_node("Add", ["X", "W"], ["Y"], name="add0")], [w_tensor()],
              outputs=[vinfo("Y"), vinfo("Q")])
    save("output_not_produced.onnx", m, r"graph output \"Q\" is not produced")
    m = model([helper.make_node("Add", ["X", "Z"], ["Y"], name="add0"),
               helper.make_node("Relu", ["X"], ["Z"], name="relu0")])
    save("not_topological.onnx", m, r"add0.*\"Z\" is used before")
    m = model([helper.make_node("", ["X"], ["Y"], name="noop")])
    save("node_without_op.onnx", m, r"noop.*no op_type")
    m = base_model()
    m.graph.ClearField("name")
    m.ClearField("graph")
    save("no_graph.onnx", m, r"no graph")
    # attributes
    # attribute type 99: python-protobuf refuses unknown enum values, so patch the bytes
    m = base_model()
    m.graph.node[0].attribute.extend([helper.make_attribute("strange", 3)])
    b = m.SerializeToString()
    at = b.index(b"\xa0\x01\x02", b.index(b"strange"))  # AttributeProto.type = INT
    save("attr_unknown_type.onnx", b[:at + 2] + b"\x63" + b[at + 3:],
         r"add0.*\"strange\".*unknown type 99")
    m = model([helper.make_node("If", ["c"], ["Y"], name="if0")],
              inputs=[vinfo("c", TensorProto.BOOL, ())])
    a = m.graph.node[0].attribute.add()
    a.name = "then_branch"
    a.type = onnx.AttributeProto.GRAPH
    save("attr_graph_missing.onnx", m, r"if0.*\"then_branch\".*no value")
    m = base_model()
    a = m.graph.node[0].attribute.add()
    a.i = 3
    a.type = onnx.AttributeProto.INT
    save("attr_without_name.onnx", m, r"add0.*attribute without a name")
    # subgraph problems: dangling input inside a branch
    then_g = helper.make_graph([helper.make_node("Add", ["X", "ghost"], ["t"], name="then_add")],
                               "then_g", [], [vinfo("t")])
    else_g = helper.make_graph([helper.make_node("Identity", ["X"], ["e"], name="else_id")],
                               "else_g", [], [vinfo("e")])
    m = model([helper.make_node("If", ["c"], ["Y"], name="if0", then_branch=then_g,
                                else_branch=else_g)],
              inputs=[vinfo("X"), vinfo("c", TensorProto.BOOL, ())])
    save("subgraph_dangling_input.onnx", m, r"then_add.*\"ghost\" is not produced")
    # several problems at once: only the first is printed, with a count
    m = model([helper.make_node("Add", ["X", "a"], ["Y"], name="add0"),
               helper.make_node("Add", ["X", "b"], ["Y"], name="add1")],
              outputs=[vinfo("Y"), vinfo("Q")])
    save("many_errors.onnx", m, r"add0.*\"a\" is not produced.*more error")


# ----------------------------------------------------------------- external data
DATA = np.arange(16, dtype=np.float32).tobytes()  # 64 bytes; the tensors need 24 (or 8)

ATTACKS = [
    # name, external_data entries, expected message fragment
    ("absolute", {"location": "/etc/hostname"}, r"is absolute"),
    ("dotdot", {"location": "../bad/data.bin"}, r"contains \"\.\.\""),
    ("dotdot_inner", {"location": "realdir/../data.bin"}, r"contains \"\.\.\""),
    ("symlink_file", {"location": "link.bin"}, r"symbolic link"),
    ("symlink_dir", {"location": "linkdir/data.bin"}, r"symbolic link"),
    ("directory", {"location": "adir"}, r"not a regular file"),
    ("fifo", {"location": "fifo.bin"}, r"not a regular file"),
    ("missing_file", {"location": "no_such_file.bin"}, r"No such file"),
    ("offset_past_end", {"location": "data.bin", "offset": "4096"}, r"outside \"data\.bin\""),
    ("range_past_end", {"location": "data.bin", "offset": "48"}, r"outside \"data\.bin\""),
    ("length_mismatch", {"location": "data.bin", "length": "20"}, r"length (20|6) differs"),
    ("length_negative", {"location": "data.bin", "length": "-24"}, r"length \"-24\" is not"),
    ("offset_negative", {"location": "data.bin", "offset": "-8"}, r"offset \"-8\" is not"),
    ("offset_not_number", {"location": "data.bin", "offset": "12abc"}, r"offset \"12abc\" is not"),
    ("offset_overflow", {"location": "data.bin", "offset": "99999999999999999999999"},
     r"offset \"9+\" is not"),
    ("no_location", {"offset": "0", "length": "24"}, r"no location"),
]


def ext_tensor(name, entries, shape=(2, 3)):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(shape)
    t.data_location = TensorProto.EXTERNAL
    for k, v in entries.items():
        e = t.external_data.add()
        e.key = k
        e.value = v
    return t


def ext_models(entries):
    """The same external tensor in five places. Yields (placement, tensor name, model)."""
    # 1. graph initializer
    yield "init", "W_ext", model([helper.make_node("Add", ["X", "W_ext"], ["Y"], name="add0")],
                                 [ext_tensor("W_ext", entries)])
    # 2. Constant attribute
    yield "constant", "C_ext", model([
        helper.make_node("Constant", [], ["C"], name="const0", value=ext_tensor("C_ext", entries)),
        helper.make_node("Add", ["X", "C"], ["Y"], name="add0")])
    # 3. sparse initializer (the values tensor is external: 2 floats = 8 bytes)
    e2 = dict(entries)
    if e2.get("length") == "20":
        e2["length"] = "6"
    if e2.get("offset") == "48":
        e2["offset"] = "60"
    vals = ext_tensor("S_ext", e2, shape=(2,))
    idx = numpy_helper.from_array(np.array([1, 4], dtype=np.int64), "S_idx")
    yield "sparse", "S_ext", model([helper.make_node("Add", ["X", "S_ext"], ["Y"], name="add0")],
                                   sparse=[helper.make_sparse_tensor(vals, idx, [2, 3])])
    # 4. initializer of an If subgraph
    then_g = helper.make_graph([helper.make_node("Add", ["X", "T_ext"], ["t"], name="then_add")],
                               "then_g", [], [vinfo("t")], initializer=[ext_tensor("T_ext", entries)])
    else_g = helper.make_graph([helper.make_node("Identity", ["X"], ["e"], name="else_id")],
                               "else_g", [], [vinfo("e")])
    yield "subgraph", "T_ext", model(
        [helper.make_node("If", ["c"], ["Y"], name="if0", then_branch=then_g, else_branch=else_g)],
        inputs=[vinfo("X"), vinfo("c", TensorProto.BOOL, ())])
    # 5. a Constant inside a model-local function body
    fn = helper.make_function(
        "local", "AddConst", ["x"], ["y"],
        [helper.make_node("Constant", [], ["k"], name="fconst", value=ext_tensor("F_ext", entries)),
         helper.make_node("Add", ["x", "k"], ["y"], name="fadd")],
        [helper.make_opsetid("", 13)])
    yield "function", "F_ext", model(
        [helper.make_node("AddConst", ["X"], ["Y"], name="call0", domain="local")],
        opsets=(("", 13), ("local", 1)), functions=[fn])


def external_cases():
    with open(os.path.join(HERE, "data.bin"), "wb") as f:
        f.write(DATA)
    os.makedirs(os.path.join(HERE, "realdir"), exist_ok=True)
    with open(os.path.join(HERE, "realdir", "data.bin"), "wb") as f:
        f.write(DATA)
    os.makedirs(os.path.join(HERE, "adir"), exist_ok=True)
    with open(os.path.join(HERE, "adir", "README"), "w") as f:
        f.write("A directory named as external data location (must be refused).\n")
    for link, target in (("link.bin", "data.bin"), ("linkdir", "realdir")):
        p = os.path.join(HERE, link)
        if os.path.lexists(p):
            os.remove(p)
        os.symlink(target, p)
    for attack, entries, regex in ATTACKS:
        for where, tname, m in ext_models(entries):
            save("ext_%s_%s.onnx" % (where, attack), m, r"\"%s\".*%s" % (tname, regex))
    # a control: the same models with a good location load fine (checked by the runner)
    for where, tname, m in ext_models({"location": "data.bin"}):
        path = os.path.join(HERE, "good_ext_%s.onnx.ok" % where)
        with open(path, "wb") as f:
            f.write(m.SerializeToString())


def main():
    for f in os.listdir(HERE):
        if f.endswith(".onnx") or f.endswith(".onnx.ok"):
            os.remove(os.path.join(HERE, f))
    wire_cases()
    tensor_cases()
    graph_cases()
    external_cases()
    with open(os.path.join(HERE, "EXPECT"), "w") as f:
        f.write("# file<TAB>extended regex the single stderr line must match (made by make_bad.py)\n")
        for name, regex in EXPECT:
            f.write("%s\t%s\n" % (name, regex))
    print("%d bad files written to %s" % (len(EXPECT), HERE), file=sys.stderr)


if __name__ == "__main__":
    main()
