#!/bin/bash
# Install, build and run every test: a normal build (-Werror) and an
# AddressSanitizer + UndefinedBehaviorSanitizer build. This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps.sh --test
export ONNXQ_CACHE="${ONNXQ_CACHE:-$HOME/.cache/onnxq}"
export ONNXQ_REQUIRE_ALL=1   # suites may not skip for a missing reference (tests/prereqs.sh)
bash .ci/fetch-models.sh >/dev/null
JOBS=$(nproc)
echo "== build (Release, -Werror)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DONNXQ_WERROR=ON >/dev/null
cmake --build build -j"$JOBS" >/dev/null
echo "== tests"
ctest --test-dir build --output-on-failure -j"$JOBS"
# The suites labelled "ort" again, with onnxruntime under qemu-x86_64 -cpu Haswell (its
# AVX2 integer kernels: u8 x s8 pairs saturate in int16) and onnxq's host arithmetic
# forced to avx2: what an AMD/Intel CPU without VNNI computes, so that a VNNI machine
# cannot land a test that only holds on VNNI (tests/CMakeLists.txt, tests/ortnode.bash).
# On a CPU without VNNI the run above already was that (onnxruntime's own AVX2 kernels,
# onnxq's host arithmetic avx2), so the emulated one would only repeat it, 3-4x slower.
host_arith=$(./build/onnxq quantize models/shapes_cnn.onnx -o /dev/null --calib-random 1 \
  --target host --print-config | sed -n 's/^ *"host_cpu": "\([^"]*\)".*/\1/p')
if [ "$host_arith" = avx2 ]; then
  echo "== onnxruntime comparisons on an emulated AVX2-only CPU: skipped, this CPU has no VNNI" \
    "(onnxq host arithmetic: $host_arith): the run above used onnxruntime's AVX2 kernels"
else
  echo "== onnxruntime comparisons on an emulated AVX2-only CPU (qemu Haswell)"
  ONNXQ_ORT_CPU=haswell ONNXQ_HOST_CPU=avx2 ONNXQ_QUICK=1 \
    ctest --test-dir build --output-on-failure -j"$JOBS" -L ort
fi
echo "== Python package (wheel, pytest)"
bash .ci/test-python.sh
echo "== build (ASan + UBSan)"
cmake -S . -B build-san -DCMAKE_BUILD_TYPE=Debug -DONNXQ_WERROR=ON -DONNXQ_SANITIZE=ON >/dev/null
cmake --build build-san -j"$JOBS" >/dev/null
echo "== tests under ASan + UBSan"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The suites that sweep every backend model or many real-model samples run on a subset
# here (ONNXQ_QUICK=1); the normal build above runs them in full.
export ONNXQ_QUICK=1
ctest --test-dir build-san --output-on-failure -j"$JOBS"
