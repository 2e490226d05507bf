#!/bin/bash
# ONNXQ_ORT_CPU=haswell (tests/ortnode.bash) really changes onnxruntime's integer kernel:
# a QDQ MatMul x[1,2] (u8, scale 1, zp 0) x w[2,1] (s8 per tensor, scale 1), output
# quantized with scale 256 (u8, zp 0). For x = [255, 255], w = [127, 127] the exact int32
# sum is 2 * 255 * 127 = 64770 -> round(64770 / 256) = 253 -> 64768. MLAS's AVX2 U8S8
# kernel adds the pair of products with vpmaddubsw, which saturates in int16: 32767 ->
# round(32767 / 256) = 128 -> 32768. Optimized onnxruntime (QLinearMatMul) must give
# 32768 under Haswell on every host, natively 64768 on a host with AVX-512 VNNI or
# AVX-VNNI and 32768 on one without; with optimizations off (float reference math) 64768
# everywhere. usage: bash ort_cpu.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
SRC=$2 BIN=${3:-/tmp}
T="$BIN/ort_cpu"
rm -rf "$T"; mkdir -p "$T"
skip() { echo "SKIP: $1"; [ "${ONNXQ_REQUIRE_ALL:-0}" = 1 ] && exit 1; exit 0; }
command -v node >/dev/null || skip "node is not installed"
command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 is not installed (Debian qemu-user)"
/usr/bin/python3 - "$T" <<'PY' || { echo "FAIL: cannot build the model"; exit 1; }
import sys, numpy as np
from onnx import helper, numpy_helper, TensorProto, checker
d = sys.argv[1]
init = [numpy_helper.from_array(np.array(1, np.float32), "one"),
        numpy_helper.from_array(np.array(256, np.float32), "s_out"),
        numpy_helper.from_array(np.array(0, np.uint8), "zp_u8"),
        numpy_helper.from_array(np.array(0, np.int8), "zp_s8"),
        numpy_helper.from_array(np.array([[127], [127]], np.int8), "w_q")]
nodes = [helper.make_node("QuantizeLinear", ["x", "one", "zp_u8"], ["x_q"]),
         helper.make_node("DequantizeLinear", ["x_q", "one", "zp_u8"], ["x_dq"]),
         helper.make_node("DequantizeLinear", ["w_q", "one", "zp_s8"], ["w_dq"]),
         helper.make_node("MatMul", ["x_dq", "w_dq"], ["y"]),
         helper.make_node("QuantizeLinear", ["y", "s_out", "zp_u8"], ["y_q"]),
         helper.make_node("DequantizeLinear", ["y_q", "s_out", "zp_u8"], ["out"])]
g = helper.make_graph(nodes, "sat", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                      [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 1])], init)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
checker.check_model(m, full_check=True)
open(d + "/sat.onnx", "wb").write(m.SerializeToString())
np.save(d + "/x.npy", np.array([[255, 255]], np.float32))
PY
fail=0
run() { # label, expected, env...
  local label=$1 want=$2; shift 2
  env "$@" bash "$SRC/tests/ortnode.bash" "$SRC/tests/quantize_ort.js" "$T/sat.onnx" "$T/$label" x="$T/x.npy"
  local rc=$?
  [ $rc = 77 ] && skip "onnxruntime-node is missing"
  [ $rc = 0 ] || { echo "FAIL $label: onnxruntime run (exit $rc)"; fail=1; return; }
  local got
  got=$(/usr/bin/python3 -c "import numpy as np; print(int(np.load('$T/$label/out.npy').ravel()[0]))")
  if [ "$got" = "$want" ]; then echo "ok   $label: $got"
  else echo "FAIL $label: $got, expected $want"; fail=1; fi
}
if grep -qwE 'avx512_vnni|avx_vnni' /proc/cpuinfo; then native=64768; isa="VNNI"; else native=32768; isa="no VNNI"; fi
echo "host: $isa"
run native-opt "$native" ONNXQ_ORT_CPU=native
run native-noopt 64768 ONNXQ_ORT_CPU=native ONNXQ_ORT_OPT=disabled
run haswell-opt 32768 ONNXQ_ORT_CPU=haswell
run haswell-noopt 64768 ONNXQ_ORT_CPU=haswell ONNXQ_ORT_OPT=disabled
exit $fail
