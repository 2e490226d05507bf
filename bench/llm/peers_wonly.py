#!/usr/bin/env python3
"""Int4 weight-only quantization of a decoder ONNX model by the peers, one variant per
run, so that time and peak RSS are the process's own (bench/llm/README.md):

    PY=$(bash bench/zoo/peers-venv.sh)/bin/python
    prlimit --as=16000000000 /usr/bin/time -f '%e s %M KB' \\
        $PY bench/llm/peers_wonly.py VARIANT model.onnx out.onnx [--calib DIR]

VARIANT:
  ort-default32 / ort-default128  onnxruntime.quantization.matmul_nbits_quantizer,
                                  DefaultWeightOnlyQuantConfig (blockwise RTN, symmetric,
                                  block 32 / 128, accuracy_level 0): MatMulNBits
  ort-hqq128                      HQQWeightOnlyQuantConfig (block 128, 4 bits)
  ort-kquant                      KQuantWeightOnlyQuantConfig (its defaults)
  ort-gptq                        GPTQWeightOnlyQuantConfig on the calibration samples
                                  (needs Intel neural_compressor)
  nncf-int4                       nncf.compress_weights(INT4_SYM, group 32, ratio 1, all
                                  layers, Gather ignored: every MatMul int4 as onnxq
                                  does, the embedding float), data-free
  nncf-awq                        the same with the calibration samples, awq=True
  nncf-awq-se                     awq=True, scale_estimation=True
The calibration samples are --calib DIR/NNN/input_ids.npy (bench/llm/train_decoder.py).
"""
import argparse
import glob
import os
import sys
import time

import numpy as np
import onnx


def samples(d):
    return [{"input_ids": np.load(f).astype(np.int64)} for f in sorted(glob.glob(os.path.join(d, "*", "input_ids.npy")))]


def ort_variant(v, m, calib):
    from onnxruntime.quantization import matmul_nbits_quantizer as mnq
    if v.startswith("ort-default"):
        cfg = mnq.DefaultWeightOnlyQuantConfig(block_size=int(v[len("ort-default"):]), is_symmetric=True,
                                               accuracy_level=0)
    elif v == "ort-hqq128":
        cfg = mnq.HQQWeightOnlyQuantConfig(block_size=128, bits=4)
    elif v == "ort-kquant":
        cfg = mnq.KQuantWeightOnlyQuantConfig()
    elif v == "ort-gptq":
        from onnxruntime.quantization.calibrate import CalibrationDataReader

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.it = iter(samples(calib))

            def get_next(self):
                return next(self.it, None)

            def rewind(self):
                self.it = iter(samples(calib))

        cfg = mnq.GPTQWeightOnlyQuantConfig(calibration_data_reader=Reader(), block_size=32)
    else:
        raise SystemExit(f"unknown variant {v}")
    q = mnq.MatMulNBitsQuantizer(m, algo_config=cfg)
    q.process()
    return q.model.model


def nncf_variant(v, m, calib):
    import nncf
    # every MatMul in int4 (the LM head too, as onnxq does), the embedding Gather left float
    kw = dict(mode=nncf.CompressWeightsMode.INT4_SYM, group_size=32, ratio=1.0, all_layers=True,
              ignored_scope=nncf.IgnoredScope(types=["Gather"]))
    if v in ("nncf-awq", "nncf-awq-se"):
        kw.update(dataset=nncf.Dataset(samples(calib)), awq=True, scale_estimation=v == "nncf-awq-se")
    elif v != "nncf-int4":
        raise SystemExit(f"unknown variant {v}")
    return nncf.compress_weights(m, **kw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("variant")
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--calib")
    a = ap.parse_args()
    t0 = time.time()
    m = onnx.load(a.model)
    out = (ort_variant if a.variant.startswith("ort-") else nncf_variant)(a.variant, m, a.calib)
    onnx.save(out, a.out)
    print(f"{a.variant}: {time.time() - t0:.2f} s -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
