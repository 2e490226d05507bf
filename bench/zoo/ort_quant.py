"""onnxruntime's own quantizer, as its documentation recommends for x86 CPUs, run as a
separate process by run.py so that its wall time and memory are its own.
  ort_quant.py static  IN OUT --calib DIR [--reduce-range] [--per-tensor]
  ort_quant.py dynamic IN OUT
static: quant_pre_process (shape inference + onnxruntime graph optimization), then
quantize_static(QDQ, activations QUInt8, weights QInt8 (U8S8), per_channel=True,
MinMax calibration, same calibration samples as onnxq). dynamic: quant_pre_process, then
quantize_dynamic(QInt8 weights, per_channel=True).
Prints one JSON line: {"pre_s": .., "quant_s": .., "total_s": ..}."""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoolib  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["static", "dynamic"])
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--calib")
    ap.add_argument("--reduce-range", action="store_true")
    ap.add_argument("--per-tensor", action="store_true")
    ap.add_argument("--no-pre", action="store_true")
    a = ap.parse_args()
    # quant_pre_process's symbolic shape inference writes sym_shape_infer_temp.onnx and
    # <uuid>.data files into the current directory: work in a temporary one.
    a.inp, a.out = os.path.abspath(a.inp), os.path.abspath(a.out)
    if a.calib:
        a.calib = os.path.abspath(a.calib)
    scratch = tempfile.mkdtemp(prefix="ort_quant.")
    os.chdir(scratch)
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_dynamic, quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    notes = []

    def run(pre_process, opset13=False):
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as td:
            src = a.inp
            if opset13:  # what a user does next: the ONNX converter to opset 13
                import onnx
                from onnx import version_converter
                src = os.path.join(td, "op13.onnx")
                onnx.save(version_converter.convert_version(onnx.load(a.inp), 13), src)
            if pre_process:
                pre = os.path.join(td, "pre.onnx")
                try:
                    quant_pre_process(src, pre, skip_symbolic_shape=False)
                    src = pre
                except Exception as e:  # symbolic shape inference fails on some models
                    print("quant_pre_process with symbolic shapes failed (%s); retrying without"
                          % (str(e).strip().splitlines() or [repr(e)])[0][:160], file=sys.stderr)
                    try:
                        quant_pre_process(src, pre, skip_symbolic_shape=True)
                        src = pre
                    except Exception as e2:
                        notes.append("quant_pre_process failed (%s); quantized without it"
                                     % (str(e2).strip().splitlines() or [repr(e2)])[0][:160])
                        print(notes[-1], file=sys.stderr)
            t1 = time.perf_counter()
            if a.mode == "static":
                import onnx
                names = [i.name for i in onnx.load(src, load_external_data=False).graph.input]
                dirs = zoolib.sample_dirs(a.calib)

                class Reader(CalibrationDataReader):
                    def __init__(self):
                        self.it = iter(dirs)

                    def get_next(self):
                        d = next(self.it, None)
                        if d is None:
                            return None
                        return {n: np.load(os.path.join(d, n + ".npy")) for n in names
                                if os.path.exists(os.path.join(d, n + ".npy"))}

                quantize_static(src, a.out, Reader(), quant_format=QuantFormat.QDQ,
                                per_channel=not a.per_tensor, reduce_range=a.reduce_range,
                                activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
            else:
                quantize_dynamic(src, a.out, per_channel=not a.per_tensor,
                                 reduce_range=a.reduce_range, weight_type=QuantType.QInt8)
            t2 = time.perf_counter()
        return t0, t1, t2

    t0, t1, t2 = run(not a.no_pre)
    note = None
    if not a.no_pre and not notes:
        # quant_pre_process keeps the model's opset; on opset < 13 models (PaddleOCR)
        # quantize_static then writes per-channel DequantizeLinear with an axis that
        # onnxruntime refuses. Then do what a user would: quantize without pre-processing.
        import onnxruntime as ort
        try:
            ort.InferenceSession(a.out, providers=["CPUExecutionProvider"])
        except Exception as e:
            note = ("the quant_pre_process result was refused by onnxruntime (%s); "
                    "quantized without quant_pre_process" % str(e).split("failed:")[-1][:200])
            print(note, file=sys.stderr)
            t0, t1, t2 = run(False)
            try:
                ort.InferenceSession(a.out, providers=["CPUExecutionProvider"])
            except Exception as e:
                # still refused (opset 11: per-channel DequantizeLinear needs 13): convert the
                # float model to opset 13 with onnx.version_converter first, then as before
                note += ("; refused again (%s); converted to opset 13 with onnx.version_converter, "
                         "then quant_pre_process" % str(e).split("failed:")[-1][:120])
                print(note, file=sys.stderr)
                t0, t1, t2 = run(True, opset13=True)
    import shutil
    os.chdir("/")
    shutil.rmtree(scratch, ignore_errors=True)
    note = "; ".join(notes + ([note] if note else [])) or None
    print(json.dumps({"pre_s": t1 - t0, "quant_s": t2 - t1, "total_s": t2 - t0, "note": note}))


if __name__ == "__main__":
    main()
