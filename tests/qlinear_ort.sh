#!/bin/bash
# Integer arithmetic targets (docs/run.md "Arithmetic targets") on the hand-built QDQ
# models of tests/qlinear_models.py:
#  1. onnxq run --target avx2 / ort-x86-vnni equal, bit for bit, an independent numpy
#     emulation of the two arithmetics (on every machine), at 1 and 2 threads and with
#     each dot product variant (ONNXQ_QGEMM_ISA); the reference target equals a run
#     without --target;
#  2. onnxq --target avx2 equals onnxruntime (graph optimizations on: its fused kernels)
#     run under `qemu-x86_64 -cpu Haswell` (an AVX2 CPU without VNNI), bit for bit;
#  3. native onnxruntime equals ort-x86-vnni when this CPU has VNNI (avx512_vnni or
#     avx_vnni in /proc/cpuinfo), avx2 otherwise; on float depthwise convolutions between
#     a DequantizeLinear and a float output (+ HardSwish; channel counts that onnxruntime
#     runs as NCHWc and others that go to its Conv kernel), and on Sigmoid (float output,
#     x * Sigmoid(x), a DQ -> Sigmoid -> Q table) every integer target equals onnxruntime
#     natively and under qemu Haswell, bit for bit (its NCHWc arithmetic, its one-row
#     SGEMM, MLAS logistic); and under qemu Haswell only (AVX2's NCHWc block of 8, the one
#     emulated), on float Convs with one group (a 3-channel stem, 1x1 layers with 64 and
#     264 input channels, stride 2, 3x3, 5x5, dilation 2 without bias); DQ(a), DQ(b) -> Add | Mul -> Q (QLinearAdd / QLinearMul:
#     same shapes, either operand broadcast, a constant operand, int8) is in step 1-3;
#  4. a DQ -> elementwise chain -> Q run as a table, DQ(a), float b -> Mul -> Q in
#     one pass, and the float islands of a squeeze-excitation block (a DQ -> chain -> float
#     table, float a, float b -> Mul | Add -> Q in one pass) equal the nodes run one by one.
# usage: bash qlinear_ort.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
exe=$1 src=$2 bin=${3:-/tmp}
# the native comparisons need onnxq's host arithmetic to be this CPU's (a CI stage that
# exports ONNXQ_HOST_CPU=avx2 on an AVX-512 machine would compare the AVX2 NCHWc block
# with native onnxruntime); the Haswell comparisons set it themselves
unset ONNXQ_HOST_CPU
. "$src/tests/testlib.bash"
/usr/bin/python3 -c "import onnx, numpy" 2>/dev/null || skip "python3-onnx / python3-numpy missing"
workdir work "$bin/qlinear_ort.XXXXXX"
/usr/bin/python3 "$src/tests/qlinear_models.py" "$work" || { echo "FAIL: model generation"; exit 1; }
fail=0
for c in $(cat "$work/cases.txt"); do
  for t in avx2 ort-x86-vnni reference none; do
    for th in 1 2; do
      opt=(--target "$t"); [ "$t" = none ] && opt=()
      mkdir -p "$work/onnxq_${t}_$th"
      if ! "$exe" run "$work/$c.onnx" --input "x=$work/$c.x.npy" "${opt[@]}" --threads $th \
           --output-dir "$work/onnxq_${t}_$th/$c" --npy >/dev/null 2>"$work/err"; then
        echo "FAIL: onnxq run $c --target $t"; cat "$work/err"; fail=1
      fi
    done
  done
done
# the portable scalar dot product (ONNXQ_QGEMM_ISA=generic) and AVX2 on any x86 CPU
for isa in generic avx2; do
  for t in avx2 ort-x86-vnni; do
    mkdir -p "$work/isa_${isa}_$t"
    for c in $(cat "$work/cases.txt"); do
      ONNXQ_QGEMM_ISA=$isa "$exe" run "$work/$c.onnx" --input "x=$work/$c.x.npy" --target $t --threads 2 \
        --output-dir "$work/isa_${isa}_$t/$c" --npy >/dev/null 2>"$work/err" || { echo "FAIL: $c $isa $t"; cat "$work/err"; fail=1; }
    done
  done
done
# compare A B [A B ...]: every pair equal bit for bit, per case
cmp_sets() {
  /usr/bin/python3 - "$work" "$@" <<'PY'
import sys, numpy as np
work, pairs = sys.argv[1], sys.argv[2:]
bad = 0
for c in open(f'{work}/cases.txt').read().split():
    for a, b in zip(pairs[0::2], pairs[1::2]):
        ya, yb = (np.load(p.replace('{c}', c).replace('{w}', work)) for p in (a, b))
        if ya.shape != yb.shape or not np.array_equal(ya.view(np.uint32), yb.view(np.uint32)):
            n = int((ya != yb).sum()) if ya.shape == yb.shape else -1
            print(f'FAIL {c}: {a} != {b} ({n} of {ya.size} differ)')
            bad = 1
print('compared', len(open(f'{work}/cases.txt').read().split()), 'models:', ' '.join(
    f'{a}=={b}' for a, b in zip(pairs[0::2], pairs[1::2])).replace('{w}/', '').replace('{c}', '*'))
sys.exit(bad)
PY
}
cmp_sets '{w}/onnxq_avx2_1/{c}/y.npy' '{w}/{c}.avx2.npy' \
         '{w}/onnxq_avx2_2/{c}/y.npy' '{w}/{c}.avx2.npy' \
         '{w}/onnxq_ort-x86-vnni_1/{c}/y.npy' '{w}/{c}.exact.npy' \
         '{w}/onnxq_ort-x86-vnni_2/{c}/y.npy' '{w}/{c}.exact.npy' \
         '{w}/onnxq_reference_1/{c}/y.npy' '{w}/onnxq_none_1/{c}/y.npy' \
         '{w}/isa_generic_avx2/{c}/y.npy' '{w}/{c}.avx2.npy' \
         '{w}/isa_generic_ort-x86-vnni/{c}/y.npy' '{w}/{c}.exact.npy' \
         '{w}/isa_avx2_avx2/{c}/y.npy' '{w}/{c}.avx2.npy' \
         '{w}/isa_avx2_ort-x86-vnni/{c}/y.npy' '{w}/{c}.exact.npy' || fail=1
# the hand-computed case: x = [255, 255] u8, w = [127, 127] s8, y_scale 256:
# avx2 accumulates 32767 (-> 128 * 256), exact 64770 (-> 253 * 256)
/usr/bin/python3 - "$work" <<'PY' || fail=1
import sys, numpy as np
w = sys.argv[1]
a = np.load(f'{w}/onnxq_avx2_1/mm_hand_u8s8/y.npy').ravel().tolist()
e = np.load(f'{w}/onnxq_ort-x86-vnni_1/mm_hand_u8s8/y.npy').ravel().tolist()
u = np.load(f'{w}/onnxq_avx2_1/mm_hand_u8u8/y.npy').ravel().tolist()
ok = a == [32768.0] and e == [64768.0] and u == [130048.0]
print(('ok  ' if ok else 'FAIL') + f' hand-computed: avx2 {a} (want [32768.0]), exact {e} (want [64768.0]), u8u8 avx2 {u} (want [130048.0])')
sys.exit(0 if ok else 1)
PY
# onnxruntime
# DQ -> elementwise chain -> Q (or -> a float value) as a table, and DQ(a) with a float b
# or two floats -> Add | Mul -> Q in one pass (docs/run.md): the same bytes as the nodes run
# one by one (ONNXQ_NO_LUT=1)
# and as the reference target; within one step of a numpy float32 evaluation (float
# rounding of the chain, of GlobalAveragePool's sum) on all but 2 elements
# (gen: the portable C code of the rows, tables and kernels)
for c in $(cat "$work/lut_cases.txt"); do
  for v in lut nolut ref avx2 gen; do
    mkdir -p "$work/lut_$v"; opt=(--target host); [ $v = ref ] && opt=(--target reference); [ $v = avx2 ] && opt=(--target avx2)
    env $([ $v = nolut ] && echo ONNXQ_NO_LUT=1) $([ $v = gen ] && echo ONNXQ_QUANT_ISA=generic ONNXQ_QGEMM_ISA=generic) \
      "$exe" run "$work/$c.onnx" --input "x=$work/$c.x.npy" \
      "${opt[@]}" --output-dir "$work/lut_$v/$c" --npy >/dev/null 2>"$work/err" ||
      { echo "FAIL: $c $v"; cat "$work/err"; fail=1; }
  done
done
/usr/bin/python3 - "$work" <<'PY' || fail=1
import sys, numpy as np
w = sys.argv[1]
bad = 0
for c in open(f'{w}/lut_cases.txt').read().split():
    y = {v: np.load(f'{w}/lut_{v}/{c}/y.npy') for v in ('lut', 'nolut', 'ref', 'avx2', 'gen')}
    ref = np.load(f'{w}/{c}.exact.npy')
    same = all(np.array_equal(y['lut'].view(np.uint32), y[v].view(np.uint32)) for v in ('nolut', 'ref', 'avx2', 'gen'))
    steps = np.abs(y['lut'] - ref) / np.float32(0.03)
    off = int((steps > 0.5).sum())
    ok = same and steps.max() < 1.5 and off <= 2
    print(('ok  ' if ok else 'FAIL') + f' {c}: fused == nodes one by one == reference == avx2 == portable C: {same}; '
          f'{off} of {ref.size} one step from numpy')
    bad |= not ok
sys.exit(bad)
PY
if ! command -v node >/dev/null; then skip "node missing"; fi
node "$src/tests/qlinear_ort.js" "$work" "$work/ort_native" > "$work/ort.log" 2>&1
rc=$?
[ $rc = 77 ] && skip "onnxruntime-node missing"
[ $rc = 0 ] || { cat "$work/ort.log"; echo "FAIL: onnxruntime native"; exit 1; }
if grep -qw -e avx512_vnni -e avx_vnni /proc/cpuinfo; then host=ort-x86-vnni; else host=avx2; fi
echo "host CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) -> native onnxruntime expected to equal --target $host"
cmp_sets '{w}/ort_native/{c}.npy' "{w}/onnxq_${host}_1/{c}/y.npy" || fail=1
# float depthwise convolutions (+ HardSwish) and Sigmoid under every integer target:
# onnxruntime's NCHWc arithmetic and logistic (docs/run.md), the vector rows and the
# portable C code, 1 and 2 threads
run_fdw() { # LIST OUTPREFIX [ENV...]
  local list=$1 pre=$2; shift 2
  for c in $(cat "$work/$list"); do
    for t in host avx2 ort-x86-vnni; do
      for v in 1 2 gen avx2isa; do
        th=$v; e=(); [ $v = gen ] && { th=2; e=(ONNXQ_SGEMM_ISA=generic); }
        [ $v = avx2isa ] && { th=1; e=(ONNXQ_SGEMM_ISA=avx2); }
        mkdir -p "$work/${pre}_${t}_$v"
        env "$@" "${e[@]}" "$exe" run "$work/$c.onnx" --input "x=$work/$c.x.npy" --target $t \
          --threads $th --output-dir "$work/${pre}_${t}_$v/$c" --npy >/dev/null 2>"$work/err" ||
          { echo "FAIL: $c --target $t $v"; cat "$work/err"; fail=1; }
      done
    done
  done
}
fdw_cmp() { # LIST ORTDIR OUTPREFIX
  local pairs=()
  for t in host avx2 ort-x86-vnni; do
    for v in 1 2 gen avx2isa; do pairs+=("{w}/$2/{c}.npy" "{w}/${3}_${t}_$v/{c}/y.npy"); done
  done
  cp "$work/cases.txt" "$work/cases.saved"; cp "$work/$1" "$work/cases.txt"
  cmp_sets "${pairs[@]}" || fail=1
  cp "$work/cases.saved" "$work/cases.txt"
}
run_fdw fdw_cases.txt fdw
node "$src/tests/qlinear_ort.js" "$work" "$work/ort_fdw_native" fdw_cases.txt >> "$work/ort.log" 2>&1 ||
  { cat "$work/ort.log"; echo "FAIL: onnxruntime native (float depthwise)"; exit 1; }
fdw_cmp fdw_cases.txt ort_fdw_native fdw
if ! command -v qemu-x86_64 >/dev/null; then skip "qemu-x86_64 (qemu-user) missing"; fi
qemu-x86_64 -cpu Haswell "$(command -v node)" "$src/tests/qlinear_ort.js" "$work" "$work/ort_haswell" \
  2>&1 | grep -v "TCG doesn't support" > "$work/qemu.log"
[ "${PIPESTATUS[0]}" = 0 ] || { cat "$work/qemu.log"; echo "FAIL: onnxruntime under qemu Haswell"; exit 1; }
cmp_sets '{w}/ort_haswell/{c}.npy' '{w}/onnxq_avx2_1/{c}/y.npy' || fail=1
# the float depthwise models on Haswell: NCHWc block 8 (ONNXQ_HOST_CPU=avx2), so the 24
# channels of fdw24 take the NCHWc kernel too
qemu-x86_64 -cpu Haswell "$(command -v node)" "$src/tests/qlinear_ort.js" "$work" "$work/ort_fdw_haswell" \
  fdw_avx2_cases.txt 2>&1 | grep -v "TCG doesn't support" >> "$work/qemu.log"
[ "${PIPESTATUS[0]}" = 0 ] || { cat "$work/qemu.log"; echo "FAIL: onnxruntime under qemu Haswell (float depthwise)"; exit 1; }
run_fdw fdw_avx2_cases.txt fdwh ONNXQ_HOST_CPU=avx2
fdw_cmp fdw_avx2_cases.txt ort_fdw_haswell fdwh
[ $fail = 0 ] && echo "qlinear_ort: all equal" || echo "qlinear_ort: FAILED"
exit $fail
