#!/usr/bin/env bash
# Layering (ARCHITECTURE.md): include/ <- src/ir/ <- src/io/, src/exec/ <- src/quant/ <-
# passes/ <- src/cli/. Checked on the built objects: no symbol that an object of a lower
# layer uses may be defined by an object of a higher one. In particular src/ir/ calls
# nothing in src/io/ (external data is mapped through the callbacks io installs,
# ir/ir-impl.h oq_model_io_ops), and src/quant/ calls nothing in passes/ (verify's
# reference copy of the float model is prepared by the caller's
# oq_verify_options.prepare_reference, e.g. oq_pass_prepare_float_reference).
# Usage: layering.sh ONNXQ SOURCE_DIR BUILD_DIR
set -u
build=${3:?usage: layering.sh ONNXQ SOURCE_DIR BUILD_DIR}
obj=$build/CMakeFiles/onnxq_obj.dir
dir() { if [ "$1" = passes ]; then echo "$obj/passes"; else echo "$obj/src/$1"; fi; }
defs() { nm --defined-only -g "$(dir "$1")"/*.o | awk 'NF == 3 { print $3 }' | sort -u; }
uses() { nm -u "$(dir "$1")"/*.o | awk '{ print $NF }' | sort -u; }
fail=0
check() { # LOW HIGH...: LOW uses nothing HIGH defines
    local low=$1 high
    shift
    ls "$(dir "$low")"/*.o >/dev/null 2>&1 || { echo "FAIL: no objects in $(dir "$low")"; fail=1; return; }
    for high in "$@"; do
        local bad
        bad=$(comm -12 <(uses "$low") <(defs "$high") | tr '\n' ' ')
        if [ -n "$bad" ]; then
            echo "FAIL: $low calls $high: $bad"
            fail=1
        else
            echo "ok: $low calls nothing in $high"
        fi
    done
}
check ir io exec quant passes
check io quant passes
check exec io quant passes
check quant passes
exit $fail
