#!/usr/bin/python3
"""Write an ONNX model holding SIZE_MIB MiB of float32 initializers as raw_data.

usage: make_load_models.py SIZE_MIB OUT.onnx

The data is split into 64 MiB tensors (the last one smaller), each consumed by an
Identity node whose output is a graph output. Values are a cheap deterministic ramp,
so generating 1 GiB takes a couple of seconds.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    size = int(sys.argv[1]) << 20
    out = sys.argv[2]
    chunk = 64 << 20
    inits, nodes, outputs = [], [], []
    i = 0
    while size > 0:
        n = min(chunk, size)
        a = np.arange(n // 4, dtype=np.float32)
        a *= np.float32(1e-3)
        a += np.float32(i)
        name = "w%d" % i
        inits.append(numpy_helper.from_array(a, name))
        nodes.append(helper.make_node("Identity", [name], ["y%d" % i], name="id%d" % i))
        outputs.append(helper.make_tensor_value_info("y%d" % i, TensorProto.FLOAT, [n // 4]))
        size -= n
        i += 1
    g = helper.make_graph(nodes, "load_bench", [], outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="bench/make_load_models.py")
    with open(out, "wb") as f:
        f.write(m.SerializeToString())


if __name__ == "__main__":
    main()
