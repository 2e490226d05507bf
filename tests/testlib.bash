#!/bin/bash
# Helpers for the shell suites, sourced after `set -u`:  . "$SRC/tests/testlib.bash"
# (named .bash so that tests/CMakeLists.txt, which runs every tests/*.sh, does not run it).

# skip REASON: an external reference is missing (tests/prereqs.sh lists them): the suite
# is skipped (exit 0), or fails when CI requires every reference (ONNXQ_REQUIRE_ALL=1).
skip() {
  if [ "${ONNXQ_REQUIRE_ALL:-0}" = 1 ]; then echo "FAIL: $1 (ONNXQ_REQUIRE_ALL=1)"; exit 1; fi
  echo "SKIP: $1"; exit 0
}

# note / bad MESSAGE: a line naming the suite ("verify.sh: ..."); bad marks it failed.
fail=0
note() { echo "${0##*/}: $*"; }
bad() { echo "${0##*/}: FAIL: $*"; fail=1; }

# workdir VAR [TEMPLATE]: VAR = a new folder (mktemp -d [TEMPLATE]), removed when the
# suite exits.
workdirs=()
workdir() {
  local d
  d=$(mktemp -d ${2:+"$2"}) || exit 1
  printf -v "$1" %s "$d"
  workdirs+=("$d")
  trap 'rm -rf "${workdirs[@]}"' EXIT
}

# calib_dumps MODEL SAMPLE...: `$EXE run MODEL --dump-all` on each calibration sample
# ($SRC/models/calib/sample_SAMPLE, with the suite's EXE, SRC, TMP) into $TMP/cd/SAMPLE;
# args = the --dump/--input pairs that tests/verify_make_qdq.py reads.
calib_dumps() {
  local model=$1 s
  shift
  args=()
  for s in "$@"; do
    mkdir -p "$TMP/cd/$s"
    "$EXE" run "$model" --input image="$SRC/models/calib/sample_$s/image.npy" --dump-all "$TMP/cd/$s" \
      >/dev/null || bad "run --dump-all calib $s"
    args+=(--dump "$TMP/cd/$s" --input image="$SRC/models/calib/sample_$s/image.npy")
  done
}

# the python that has onnx and numpy (Debian python3-onnx, python3-numpy)
PY=/usr/bin/python3

# ortnode_suite SCRIPT.js ARGS...: the whole suite is one node script run through
# tests/ortnode.bash; skipped (exit 0) without node, or when the script exits 77
# (onnxruntime-node missing: tests/ortlib.js printed SKIP).
ortnode_suite() {
  if ! command -v node >/dev/null; then
    echo "SKIP: node is not installed"
    exit 0
  fi
  bash "${BASH_SOURCE[0]%/*}/ortnode.bash" "$@"
  local rc=$?
  [ $rc = 77 ] && exit 0
  exit $rc
}
