/* onnxq — deployment targets: where a quantized model will run.
 *
 * One table describes each target: the integer formats its runtime runs without loss,
 * the QDQ placement rules insert-qdq follows for it, and the integer arithmetic its
 * runtime performs (which the executor can emulate, include/onnxq/exec.h oq_arith).
 * `quantize --target`, `run --target`, `verify --target` and the fallback search all read
 * this table by the same names, so what onnxq predicts and what the runtime does cannot
 * drift apart. Adding a target is adding a row (src/quant/target.c). docs/quantize.md
 * lists the targets; docs/run.md their arithmetic.
 *
 *   generic       plain QDQ, no runtime-specific choice; reference arithmetic
 *   ort-x86       onnxruntime on any x86-64 CPU: uint8 activations, uint8 symmetric weights
 *                 (zero point 128: the U8U8 kernels widen to 16 bits and never saturate);
 *                 arithmetic of an AVX2 CPU without VNNI (the default target)
 *   ort-x86-vnni  onnxruntime on AVX-512 VNNI / AVX-VNNI / AMX CPUs: uint8 activations,
 *                 int8 symmetric weights (U8S8, the fastest there); exact arithmetic
 *   host          ort-x86-vnni or ort-x86, whichever matches the CPU onnxq runs on
 * Names for the arithmetic alone (run, verify): reference (= generic), avx2 (= ort-x86).
 */
#ifndef ONNXQ_TARGET_H
#define ONNXQ_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnxq/exec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Placement rule sets (insert-qdq): which QDQ groups the target's runtime fuses. */
#define OQ_PLACE_PLAIN   0u  /* QDQ around the selected ops only (onnxq's generic rules) */
#define OQ_PLACE_ORT_CPU 1u  /* onnxruntime CPU execution provider fusion rules
                              * (qdq_selector_action_transformer.cc) */

typedef struct oq_target {
    const char *name;
    const char *summary;      /* one line, for --help and --print-config */
    int32_t act_dtype;        /* OQ_DTYPE_*: activations */
    int32_t weight_dtype;     /* OQ_DTYPE_*: weights */
    bool weight_symmetric;    /* uint8 symmetric weights have zero point 128 */
    const char *op_types;     /* the op types quantize selects by default */
    uint32_t placement;       /* OQ_PLACE_* */
    oq_arith arith;           /* what its runtime computes for a fused QDQ group */
    const char *alias_of;     /* NULL, or the row this name stands for */
} oq_target;

/* What a target's runtime does with an operator whose activation inputs come from
 * DequantizeLinear (placement by value, insert-qdq; docs/passes/insert-qdq.md). For
 * OQ_PLACE_ORT_CPU the rows are onnxruntime 1.30's CPU QDQ fusions
 * (qdq_transformer/selectors_actions/qdq_selector_action_transformer.cc). */
typedef enum oq_op_role {
    OQ_ROLE_FLOAT = 0,     /* runs in float: a Q/DQ read only by such ops buys nothing */
    OQ_ROLE_INT = 1,       /* integer kernel from its DQ inputs; a Q on its output is optional
                            * (MatMul -> MatMulIntegerToFloat, Gemm -> QGemm with float output,
                            * ArgMax reads the integers) */
    OQ_ROLE_INT_QOUT = 2,  /* integer kernel only when every input comes from a DQ and its
                            * output goes to a Q (QLinearConv, QLinearAdd, QLinearConcat, ...) */
    OQ_ROLE_PASS = 3       /* data movement run on the quantized tensor when the DQ before and
                            * the Q after have equal parameters (DropQDQNodesRules, Split) */
} oq_op_role;

/* The role of an operator (default domain) under a placement rule set. OQ_PLACE_PLAIN has
 * no runtime to consult: every op is OQ_ROLE_FLOAT there (insert-qdq keeps its plain rules). */
oq_op_role oq_target_op_role(uint32_t placement, const char *op_type);

/* The row for a name ("host" resolved from cpuid), or NULL for an unknown name. An
 * alias returns its row. */
const oq_target *oq_target_find(const char *name);

/* The target matching this CPU: ort-x86-vnni where the CPU has a u8 x s8 dot product
 * with exact int32 accumulation (AVX-512 VNNI, AVX-VNNI; AMX CPUs have VNNI), ort-x86
 * on other x86-64 CPUs, and ort-x86-vnni elsewhere (exact arithmetic: ARM's dot
 * products do not saturate). ONNXQ_HOST_CPU=avx2|vnni overrides the detection (tests). */
const oq_target *oq_target_host(void);

/* What the detection saw, for messages: "avx512-vnni", "avx-vnni", "avx2", "non-x86" or
 * "forced by ONNXQ_HOST_CPU=...". */
const char *oq_target_host_reason(void);

/* All rows, aliases included, in table order. */
size_t oq_target_count(void);
const oq_target *oq_target_at(size_t i);

/* "generic, ort-x86, ort-x86-vnni, host, reference, avx2": for usage messages. */
const char *oq_target_names(void);

/* The name of an arithmetic ("reference", "exact", "avx2"). */
const char *oq_arith_name(oq_arith a);

#ifdef __cplusplus
}
#endif
#endif
