#!/usr/bin/python3
"""Cross-check onnxq's bilinear resize (src/io/image.c) against onnxruntime's Resize
(mode=linear, coordinate_transformation_mode=half_pixel, no antialias).

Usage: resize_ort_check.py DIR   (DIR/resize.json written by tests/test_image.c: a list of
{in_h, in_w, out_h, out_w, src: [...], ours: [...]}, one channel, row-major)
Exit 0 = all within 1e-4 (absolute, values in [0, 255]), 1 = mismatch, 77 = skip.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ortfind import find_ort_or_say_skip, run_cases_js  # noqa: E402

try:
    import numpy as np
    from onnx import helper, TensorProto
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)




def main():
    d = sys.argv[1]
    ort = find_ort_or_say_skip()
    if not ort:
        return 77
    cases = json.load(open(os.path.join(d, "resize.json")))
    for i, c in enumerate(cases):
        sizes = helper.make_tensor("sizes", TensorProto.INT64, [4],
                                   [1, 1, c["out_h"], c["out_w"]])
        node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear",
                                coordinate_transformation_mode="half_pixel")
        g = helper.make_graph(
            [node], f"r{i}",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, c["in_h"], c["in_w"]])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            initializer=[sizes])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
        m.ir_version = 8
        open(os.path.join(d, f"r{i}.onnx"), "wb").write(m.SerializeToString())
    res = run_cases_js(d, ort, "resize.json", """
    const s = await ort.InferenceSession.create(dir + '/r' + i + '.onnx');
    const r = await s.run({x: new ort.Tensor('float32', Float32Array.from(c.src), [1, 1, c.in_h, c.in_w])});
    out.push(Array.from(r.y.data));""")
    if res is None:
        return 1
    bad, worst = 0, 0.0
    for c, y in zip(cases, res):
        a = np.array(c["ours"], dtype=np.float64)
        b = np.array(y, dtype=np.float64)
        err = float(np.max(np.abs(a - b))) if a.size == b.size else float("inf")
        worst = max(worst, err)
        if err > 1e-4:
            bad += 1
            print(f"{c['in_h']}x{c['in_w']} -> {c['out_h']}x{c['out_w']}: max |diff| {err}")
    print(f"{len(cases)} resizes, max |onnxq - onnxruntime| = {worst:.3g}, {bad} over 1e-4")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
