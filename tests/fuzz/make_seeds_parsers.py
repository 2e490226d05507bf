#!/usr/bin/python3
"""Seeds for the parser fuzz targets other than the model reader (fuzz_tensor, fuzz_image,
fuzz_json, fuzz_pipeline): a few small valid inputs each, so libFuzzer starts inside the
format. Run: /usr/bin/python3 tests/fuzz/make_seeds_parsers.py (needs python3-numpy,
python3-onnx, python3-pil)."""
import io
import os

import numpy as np
from onnx import numpy_helper
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))


def put(kind, name, data):
    d = os.path.join(HERE, "seeds-" + kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def npy(a, version=None):
    b = io.BytesIO()
    if version:
        np.lib.format.write_array(b, a, version=version)
    else:
        np.save(b, a)
    return b.getvalue()


def main():
    # tensors: .npy versions 1-3, several dtypes, scalar, empty; TensorProto raw and typed
    put("tensor", "f32_2x3.npy", npy(np.arange(6, dtype=np.float32).reshape(2, 3)))
    put("tensor", "i64_scalar.npy", npy(np.array(7, dtype=np.int64)))
    put("tensor", "bool_4.npy", npy(np.array([1, 0, 1, 1], dtype=bool)))
    put("tensor", "f16_empty_v2.npy", npy(np.zeros((0, 3), np.float16), version=(2, 0)))
    put("tensor", "u8_v3.npy", npy(np.arange(5, dtype=np.uint8), version=(3, 0)))
    put("tensor", "f32_raw.pb",
        numpy_helper.from_array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(1, 2, 3),
                                "x").SerializeToString())
    t = numpy_helper.from_array(np.array([1, -2, 3], np.int32), "typed")
    t.int32_data.extend(np.frombuffer(t.raw_data, np.int32).tolist())
    t.ClearField("raw_data")
    put("tensor", "i32_typed.pb", t.SerializeToString())

    # images: PNG (RGB, grey, palette, RGBA, 16-bit grey) and JPEG (RGB, grey)
    rgb = Image.fromarray(np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3) * 4, "RGB")

    def img(im, fmt, **kw):
        b = io.BytesIO()
        im.save(b, fmt, **kw)
        return b.getvalue()
    put("image", "rgb.png", img(rgb, "PNG"))
    put("image", "grey.png", img(rgb.convert("L"), "PNG"))
    put("image", "palette.png", img(rgb.convert("P"), "PNG"))
    put("image", "rgba.png", img(rgb.convert("RGBA"), "PNG"))
    put("image", "grey16.png",
        img(Image.fromarray(np.arange(12, dtype=np.uint16).reshape(3, 4) * 5000), "PNG"))
    put("image", "rgb.jpg", img(rgb, "JPEG", quality=50))
    put("image", "grey.jpg", img(rgb.convert("L"), "JPEG", quality=50))

    # JSON: a quantize config, an overrides file, a calibration table, escapes/numbers
    put("json", "config.json",
        '{"version":1,"activation_dtype":"uint8","weight_dtype":"int8","per_channel":true,\n'
        ' "calibration":{"method":"percentile","percentile":99.99},"exclude":["Conv_0"]}\n')
    put("json", "overrides.json",
        '{"nodes":{"Conv_0":{"skip":true},"MatMul_1":{"weight_dtype":"int16"}},'
        '"tensors":{"x":{"min":-1.5,"max":2.5e0}}}')
    put("json", "calib_table.json",
        '{"samples":8,"method":"minmax","percentile":99.99,"tensors":{"input":[-1,1,-1,1],'
        '"conv_out":[0,6.5,0,6.25],"a\\"b":[1e-3,2E+2,-0.0,3]}}')
    put("json", "escapes.json",
        '["\\u00e9\\ud83d\\ude00\\n\\t\\\\\\/", -0, 1.5e308, 4.9e-324, null, true, false, {}]')

    # pipelines: plain, with options of each type, quoted values
    put("pipeline", "plain.txt", "constant-to-initializer,eliminate-identity,eliminate-dead")
    put("pipeline", "options.txt",
        "fold-batchnorm,upgrade-opset{to=17},calibrate{random=2 seed=3 percentile=99.9 "
        "symmetric=true}")
    put("pipeline", "quoted.txt", 'calibrate{data="a,b\\"c" values="sr=16000"},fold-bias')
    put("pipeline", "prep.txt",
        "constant-to-initializer,upgrade-opset{to=14},fold-batchnorm,fuse-activations,"
        "fold-linear,eliminate-dead")


if __name__ == "__main__":
    main()
