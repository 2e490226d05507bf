#!/usr/bin/env python3
"""Weight-only int4 with the Python peers, for bench/llm/run.sh.

    python bench/llm/peer_wq.py TOOL IN OUT [--block 32]

TOOL: ort-default (onnxruntime.quantization.matmul_nbits_quantizer, DefaultWeightOnlyQuantConfig:
its blockwise round-to-nearest through MLAS, symmetric), ort-hqq (HQQWeightOnlyQuantConfig,
4 bits, its default 20 iterations), nncf (nncf.compress_weights, INT4_SYM, group_size=block,
ratio 1.0, the ONNX backend). Run it in the peers venv (bench/zoo/peers-venv.sh: onnxruntime
1.30, nncf 3.4, torch) under a memory limit (run.sh uses prlimit --as). Prints one JSON line
with the seconds of load, quantize and save; a failure is printed as a result (exit 1).
"""
import argparse
import json
import os
import sys
import time
import traceback


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool", choices=["ort-default", "ort-hqq", "nncf"])
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--block", type=int, default=32)
    a = ap.parse_args()
    res = {"tool": a.tool, "in": a.inp, "out": a.out, "block": a.block}
    t0 = time.time()
    try:
        import onnx
        # onnxruntime's quantizer needs the data in the ModelProto; NNCF reads external data
        # itself (backend_params external_data_dir; with the data loaded it serializes the
        # model and fails over 2 GB)
        model = onnx.load(a.inp, load_external_data=a.tool != "nncf")
        res["load_s"] = round(time.time() - t0, 1)
        t1 = time.time()
        if a.tool.startswith("ort-"):
            from onnxruntime.quantization import matmul_nbits_quantizer as mnq
            if a.tool == "ort-default":
                cfg = mnq.DefaultWeightOnlyQuantConfig(block_size=a.block, is_symmetric=True)
            else:
                cfg = mnq.HQQWeightOnlyQuantConfig(block_size=a.block, bits=4)
            q = mnq.MatMulNBitsQuantizer(model, algo_config=cfg)
            q.process()
            res["quantize_s"] = round(time.time() - t1, 1)
            t2 = time.time()
            q.model.save_model_to_file(a.out, use_external_data_format=True)
        else:
            import nncf
            from nncf.onnx.quantization.backend_parameters import BackendParameters
            adv = nncf.AdvancedCompressionParameters(
                backend_params={BackendParameters.EXTERNAL_DATA_DIR: os.path.dirname(os.path.abspath(a.inp))})
            qm = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT4_SYM, group_size=a.block, ratio=1.0,
                                       advanced_parameters=adv)
            res["quantize_s"] = round(time.time() - t1, 1)
            t2 = time.time()
            onnx.save(qm, a.out, save_as_external_data=True, all_tensors_to_one_file=True,
                      location=os.path.basename(a.out) + ".data")
        res["save_s"] = round(time.time() - t2, 1)
        res["ok"] = True
    except BaseException as e:  # MemoryError included: a result, not a crash
        res["ok"] = False
        res["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        traceback.print_exc(limit=3)
    res["total_s"] = round(time.time() - t0, 1)
    print(json.dumps(res), flush=True)
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
