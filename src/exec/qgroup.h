/* Private to src/exec: the QDQ groups a plan runs as one integer kernel when its
 * arithmetic is not the reference (oq_plan_options.arith), and the kernel's view of
 * them (src/exec/kernels/qlinear.c).
 *
 * A group is what onnxruntime's CPU execution provider fuses into QLinearConv,
 * QLinearMatMul or QGemm (onnxruntime/core/optimizer/qdq_transformer/selectors_actions/
 * qdq_selectors.cc, qdq_selector_action_transformer.cc; docs/run.md "Arithmetic
 * targets"):
 *
 *   DQ(x) ─┐
 *   DQ(W) ─┼─▶ Conv | Gemm | MatMul [─▶ Relu | Clip made redundant by Q] ─▶ Q ─▶ y
 *   DQ(B) ─┘   (optional int32 bias)
 *
 * and DQ(x) ─▶ Softmax ─▶ Q (QLinearSoftmax: a lookup table of exponentials).
 *
 * Not an onnxruntime fusion but the same numbers: DQ(x) ─▶ elementwise float ops ─▶ Q,
 * where every other operand is a scalar constant and nothing outside reads the
 * intermediates (a HardSwish between two quantized convolutions), depends on each 8-bit
 * value of x alone; it runs as a 256-entry table computed at plan time by the very
 * kernels the nodes would run (OQ_QG_LUT; the float ops run per element either way).
 * Likewise DQ(a), float b ─▶ Add | Mul ─▶ Q (per tensor, 8-bit) runs the same DQ rows,
 * float op and Q rows as the three nodes, on pieces that stay in cache (OQ_QG_BIN).
 * DQ(a), DQ(b) ─▶ Add | Mul ─▶ Q is onnxruntime's QLinearAdd / QLinearMul: under an
 * integer target it computes MLAS' arithmetic (OQ_QG_BIN with ort_bin), not the nodes'.
 *
 * Two more of these same-number groups have their own step op and kernel
 * (src/exec/kernels/quant_ops.c), for the float islands of a squeeze-excitation block
 * (DQ -> HardSigmoid, Mul -> h -> GlobalAveragePool ... gate g; Mul(h, g) -> Q):
 *  - DQ(x) -> elementwise chain -> a float value read by anything (OQ_QG_FTAB, op
 *    OQ_QGROUP_OP_FTAB): the LUT's float twin, a table of 256 floats computed at plan
 *    time by the nodes' own kernels; the DQ is skipped when only the chain reads it;
 *  - float a, float b (activations) -> Add | Mul -> Q (OQ_QG_FBIN, op OQ_QGROUP_OP_FBIN):
 *    the float op and the Q row of the two nodes on pieces of 256 values.
 * ONNXQ_NO_LUT=1 turns off every same-number group (LUT, BIN, FTAB, FBIN).
 *
 * A Gemm or MatMul with no Q after it has a float output: QGemm without y_scale,
 * y = float(acc + C) * (x_scale * w_scale), or MatMulIntegerToFloat,
 * y = float(acc) * (x_scale * w_scale); a MatMul followed by an Add of a DequantizeLinear
 * of an int32 [N] bias is a QGemm with that bias (onnxruntime's MatMulAddFusion runs
 * first) and the group's output is the Add's.
 *
 * The plan runs the group's output node (the Q; for a float output the anchor or the
 * Add) as one step of the fused kernel (its run-time inputs are x's quantized tensor, and
 * B's for a MatMul of two activations; the rest is constant), does not run the anchor
 * and the Relu/Clip, and does not run a DequantizeLinear whose output only the group
 * reads. Their intermediate tensors are not produced: an observer sees the group's
 * output.
 */
#ifndef ONNXQ_EXEC_QGROUP_H
#define ONNXQ_EXEC_QGROUP_H

#include "exec/kernel.h"

/* domain and op type of the fused step (kernel family "qlinear") */
#define OQ_QGROUP_DOMAIN "onnxq.internal"
#define OQ_QGROUP_OP "QLinearGroup"
/* the same-number float groups (kernel family "quant_ops") */
#define OQ_QGROUP_OP_FTAB "DequantizeTable"
#define OQ_QGROUP_OP_FBIN "QuantizeFloatBinary"

#define OQ_QG_LUT_MAX 16

typedef enum oq_qgroup_kind {
    OQ_QG_CONV = 0,
    OQ_QG_GEMM = 1,
    OQ_QG_MATMUL = 2,
    OQ_QG_SOFTMAX = 3,     /* DQ -> Softmax -> Q: QLinearSoftmax (qlinear_softmax.cc) */
    OQ_QG_DYN = 4,         /* (recognition only) */
    OQ_QG_LUT = 5,         /* DQ -> elementwise chain -> Q: a table */
    OQ_QG_BIN = 6,         /* DQ(a), DQ(b) or float b -> Add | Mul -> Q in one pass (dq_x: a,
                            * dq_w: b's DQ or NULL) */
    OQ_QG_FTAB = 7,        /* DQ -> elementwise chain -> float value: a table of floats
                            * (chain as for OQ_QG_LUT, q NULL, out the chain's last node) */
    OQ_QG_FBIN = 8         /* float a, float b -> Add | Mul -> Q in one pass (no DQ: dq_x
                            * NULL, anchor the Add | Mul) */
} oq_qgroup_kind;

typedef struct oq_qgroup {
    oq_node step;          /* the node the plan compiles: must stay the first member
                            * (the kernel finds the group from k->node) */
    oq_value *step_in[2];  /* x (quantized); MatMul with a non-constant B: B (quantized) */
    oq_value *step_out[1]; /* the output node's output */
    oq_qgroup_kind kind;
    oq_arith arith;
    oq_node *anchor;       /* Conv / Gemm / MatMul */
    oq_node *dq_x, *dq_w, *dq_b, *post;
    oq_node *q;            /* NULL: a float output */
    oq_node *add;          /* MatMul + Add(DQ(int32 bias)) with a float output, or NULL */
    oq_node *out;          /* the node whose output the group computes: q, add or anchor */
    bool x_shift;          /* int8 activation run as uint8 x + 128 (onnxruntime's
                            * QDQS8ToU8Transformer); output likewise */
    bool dyn_b;            /* MatMul whose B is an activation (per-tensor DQ) */
    bool b_shift;          /* that B is int8 run as uint8 + 128 */
    /* OQ_QG_LUT, OQ_QG_FTAB: the nodes between dq_x and q (FTAB: up to and with out), in
     * graph order, and the model (opsets) */
    oq_node *chain[OQ_QG_LUT_MAX];
    size_t n_chain;
    const oq_model *model;
    /* OQ_QG_BIN with one float operand (a squeeze-excitation gate): that value, else NULL */
    oq_value *bin_float;
    /* OQ_QG_BIN that onnxruntime fuses into QLinearAdd / QLinearMul (two DequantizeLinear
     * operands, the three types equal once its QDQS8ToU8Transformer has run): its MLAS
     * arithmetic, not the nodes' (qlinear.c bin_ort_row); found whatever ONNXQ_NO_LUT
     * says. bin_shift: that operand's (a, b) or the output's int8 pair runs as uint8 */
    bool ort_bin;
    bool bin_shift[3];
} oq_qgroup;

typedef struct oq_qgroups oq_qgroups;

/* Find the groups of g for this arithmetic. *out is NULL when there are none (always
 * for OQ_ARITH_REFERENCE). Fails only on out-of-memory. */
oq_status oq_qgroups_find(oq_model *m, oq_graph *g, oq_arith arith, oq_qgroups **out);
/* What the plan does with node n: returns n (compile it as is), NULL (skip it: part of
 * a group), or the group's step node (compile that in n's place: n is the group's Q). */
oq_node *oq_qgroups_step_node(const oq_qgroups *gs, oq_node *n);
size_t oq_qgroups_count(const oq_qgroups *gs);
void oq_qgroups_free(oq_qgroups *gs);

/* OQ_QG_FTAB (src/exec/kernels/quant_ops.c): dq_x and the chain evaluated one node at a
 * time by the kernels a plan would run (oq_exec_eval_node) on the 256 values of x's
 * 8-bit type (value i: the byte i); *out gets the chain's last value (256 elements,
 * owned: release it). */
oq_status oq_qgroup_eval_table(oq_kctx *k, const oq_qgroup *grp, oq_rt_tensor *out);

#endif
