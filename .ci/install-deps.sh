#!/bin/bash
# Install what onnxq needs on Debian 12 (run as root). With --test, also what the test
# suites need: the ONNX backend test data, python3-onnx (model checker), graphviz (dump
# --dot check), npm (real models and onnxruntime-node),
# python3-pil and fonts (models/make_text_images.py), chromium (verify --html check),
# qemu-user (onnxruntime on an emulated AVX2-only CPU: tests/ortnode.bash, tests/ort_cpu.sh,
# tests/qlinear_ort.sh).
# espeak-ng and sox (speech for the silero VAD test, tests/silero_vad.sh), man-db and
# groff-base (man -l renders onnxq.1: tests/man_page.sh). The libFuzzer targets
# (tests/fuzz/run.sh) need clang and libclang-rt-14-dev, installed by hand: not in CI.
set -euo pipefail
PKGS="cmake make gcc pkg-config libprotobuf-c-dev protobuf-c-compiler libcriterion-dev libpng-dev libjpeg-dev libcjson-dev"
if [ "${1:-}" = "--test" ]; then
    PKGS="$PKGS libonnx-testdata python3-onnx python3-numpy graphviz"
    PKGS="$PKGS python3-pil fonts-dejavu-core fonts-liberation fonts-freefont-ttf"
    PKGS="$PKGS chromium qemu-user"
    PKGS="$PKGS espeak-ng sox"
    PKGS="$PKGS man-db groff-base"
    command -v npm >/dev/null || PKGS="$PKGS npm"
fi
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
