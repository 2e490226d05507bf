/* fold-constants: evaluate nodes whose inputs are all constant with the executor's
 * kernels (oq_exec_eval_node) and replace their outputs by initializers.
 *
 * Constant inputs: initializers that are not graph inputs (an initializer listed as a
 * graph input is only a default and may be overridden), outputs of Constant nodes
 * with a `value` tensor, and values folded earlier in the same run. Shape and Size
 * also fold when their input's shape is known at compile time (main graph only; the
 * shapes come from the executor's compile-time inference, oq_exec_infer_shapes).
 *
 * Never folded: nondeterministic operators (Random*, Multinomial, Bernoulli, Dropout
 * with a training_mode input), nodes with subgraphs (If, Loop, Scan, ...), nodes
 * without inputs, and nodes whose produced tensors would exceed `max-bytes`. Nodes in
 * subgraphs fold only when every input is constant, so a node that reads a
 * non-constant outer value stays. Operators without a kernel are left alone (counted
 * in `nodes_unsupported`). */
#include "pass-impl.h"
#include "onnxq/exec.h"

#include <stdlib.h>
#include <string.h>

typedef struct shape_info {
    bool known;      /* rank and every dim known */
    size_t rank;
    int64_t dims[OQ_RT_MAX_RANK];
} shape_info;

typedef struct ctx {
    oq_model *m;
    oq_pass_result *res;
    oq_diag *d;
    int64_t max_bytes;
    bool weights_only;    /* fold only what ends as a layer's weight (below) */
    shape_info *shapes;   /* by value id, main graph only (NULL when not inferred) */
    uint32_t n_shapes;
} ctx;

static bool never_fold(const oq_node *n)
{
    static const char *const ops[] = {"Constant", "RandomNormal", "RandomUniform",
                                      "RandomNormalLike", "RandomUniformLike", "Multinomial",
                                      "Bernoulli"};
    if (!oq_domain_is_default(n->domain))
        return strncmp(n->op_type, "Random", 6) == 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(n->op_type, ops[i]) == 0)
            return true;
    if (strcmp(n->op_type, "Dropout") == 0 && n->n_inputs > 2 && n->inputs[2])
        return true;
    oq_graph *subs[1];
    return oq_node_subgraphs(n, subs, 1) > 0;
}

/* The constant tensor behind v (not an overridable graph input), or NULL. */
static oq_tensor *const_of(const oq_value *v)
{
    if (!v || v->is_graph_input)
        return NULL;
    oq_tensor *t = oq_value_const_tensor(v);
    if (!t || !t->has_dtype || t->dtype == OQ_DTYPE_STRING || t->rank > OQ_RT_MAX_RANK)
        return NULL;
    return t;
}

static void shape_cb(const oq_value *v, int32_t dtype, size_t rank, const int64_t *dims,
                     const void *data, void *user)
{
    ctx *c = user;
    (void)dtype;
    (void)data;
    if (v->id >= c->n_shapes || rank == OQ_EXEC_UNKNOWN_RANK || rank > OQ_RT_MAX_RANK)
        return;
    shape_info *s = &c->shapes[v->id];
    s->rank = rank;
    s->known = true;
    for (size_t j = 0; j < rank; j++) {
        s->dims[j] = dims[j];
        if (dims[j] < 0)
            s->known = false;
    }
}

/* Compile-time shapes of the main graph; a model the executor cannot compile simply
 * gets no Shape/Size folding. */
static oq_status infer(ctx *c)
{
    c->n_shapes = c->m->next_id;
    c->shapes = calloc((size_t)c->n_shapes + 1, sizeof(*c->shapes));
    if (!c->shapes)
        return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
    oq_diag tmp;
    oq_diag_init(&tmp);
    if (oq_exec_infer_shapes(c->m, shape_cb, c, NULL, &tmp) != OQ_OK)
        memset(c->shapes, 0, ((size_t)c->n_shapes + 1) * sizeof(*c->shapes));
    oq_diag_free(&tmp);
    return OQ_OK;
}

static bool dims_only_op(const oq_node *n)
{
    return oq_pass_is_op(n, "Shape") || oq_pass_is_op(n, "Size");
}

/* Fill in[i] for node n; false when some input is not constant. */
static bool gather_inputs(ctx *c, const oq_node *n, oq_rt_tensor *buf, const oq_rt_tensor **in)
{
    static const unsigned char dummy[8];
    for (size_t i = 0; i < n->n_inputs; i++) {
        const oq_value *v = n->inputs[i];
        in[i] = NULL;
        if (!v || !v->name || !*v->name)
            continue;
        oq_tensor *t = const_of(v);
        if (t) {
            const void *data = oq_tensor_data(t, NULL);
            if (!data && oq_tensor_numel(t) != 0)
                return false;
            if (oq_rt_tensor_borrow(&buf[i], t->dtype, t->dims, t->rank, (void *)data) != OQ_OK)
                return false;
            in[i] = &buf[i];
            continue;
        }
        /* Shape/Size read only the dims: a statically known shape is enough */
        if (i == 0 && dims_only_op(n) && c->shapes && v->graph == c->m->graph &&
            v->id < c->n_shapes && c->shapes[v->id].known) {
            const shape_info *s = &c->shapes[v->id];
            memset(&buf[i], 0, sizeof buf[i]);
            buf[i].dtype = OQ_DTYPE_UINT8;
            buf[i].rank = s->rank;
            memcpy(buf[i].dims, s->dims, s->rank * sizeof(int64_t));
            buf[i].data = (void *)dummy; /* never read by Shape/Size */
            in[i] = &buf[i];
            continue;
        }
        return false;
    }
    return true;
}

static oq_status fold_node(ctx *c, oq_graph *g, oq_node *n, bool *folded)
{
    oq_rt_tensor *buf = calloc(n->n_inputs + 1, sizeof(*buf));
    const oq_rt_tensor **in = calloc(n->n_inputs + 1, sizeof(*in));
    oq_rt_tensor *out = calloc(n->n_outputs + 1, sizeof(*out));
    oq_tensor **made = calloc(n->n_outputs + 1, sizeof(*made));
    oq_diag tmp;
    oq_status st = OQ_OK;
    char lb[64];
    *folded = false;
    oq_diag_init(&tmp);
    if (!buf || !in || !out || !made) {
        st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (!gather_inputs(c, n, buf, in))
        goto done;
    if (oq_exec_eval_node(c->m, n, in, n->n_inputs, c->max_bytes, out, n->n_outputs, &tmp) !=
        OQ_OK) {
        const char *msg = tmp.count ? tmp.entries[tmp.count - 1].message : "evaluation failed";
        bool too_big = msg && strstr(msg, "over the cap") != NULL;
        oq_pass_stat_add(c->res, too_big ? "nodes_over_cap" : "nodes_unsupported", 1);
        if (!too_big)
            oq_diag_add(c->d, OQ_SEV_WARNING, OQ_OK, NULL, oq_node_label(n, lb, sizeof lb),
                        n->op_type, "not folded: %s", msg ? msg : "evaluation failed");
        goto done;
    }
    for (size_t o = 0; o < n->n_outputs; o++) {
        oq_value *v = n->outputs[o];
        if (!v || !v->name || !*v->name)
            continue;
        made[o] = oq_tensor_new(c->m, v->name, out[o].dtype, out[o].dims, out[o].rank,
                                out[o].data, out[o].nbytes);
        if (!made[o]) {
            st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
            goto done;
        }
        oq_pass_stat_add(c->res, "bytes_folded", out[o].nbytes);
    }
    oq_node_remove(n);
    for (size_t o = 0; o < n->n_outputs; o++) {
        if (!made[o])
            continue;
        st = oq_graph_set_initializer(g, n->outputs[o], made[o]);
        if (st != OQ_OK) {
            st = oq_diag_error(c->d, st, "initializer \"%s\": cannot add", n->outputs[o]->name);
            goto done;
        }
    }
    *folded = true;
done:
    for (size_t o = 0; out && o < n->n_outputs; o++)
        oq_rt_tensor_release(&out[o]);
    oq_diag_free(&tmp);
    free(buf);
    free(in);
    free(out);
    free(made);
    return st;
}

/* weights-only: is input slot i of n where a layer reads its weight? (Conv/ConvTranspose
 * W, MatMul/Gemm B: what insert-qdq and quantize-dynamic quantize per channel when it is an
 * initializer) Or a Pad's pads, constant_value or axes: a zero Pad with constant pads
 * folds into the Conv after it (fold-pad), where a computed one stays a float Pad between
 * a DequantizeLinear and a QuantizeLinear in onnxruntime (PyTorch exports "same" padding
 * as a chain of Shape-free ops ending in a Cast) */
static bool weight_slot(const oq_node *n, size_t i)
{
    if (!oq_domain_is_default(n->domain))
        return false;
    if (!strcmp(n->op_type, "Pad"))
        return i >= 1;
    return i == 1 && (!strcmp(n->op_type, "Conv") || !strcmp(n->op_type, "ConvTranspose") ||
                      !strcmp(n->op_type, "MatMul") || !strcmp(n->op_type, "Gemm"));
}

/* weights-only: every reader of v reads it as a weight, or is a node with only constant
 * inputs besides v whose outputs all end as weights (a chain such as Cast -> Transpose ->
 * MatMul's B, or weight normalization's ReduceL2 / Div / Mul). */
static bool feeds_weights(const oq_value *v, int depth)
{
    if (!v || oq_value_is_graph_output(v) || v->n_uses == 0 || depth > 8)
        return false;
    for (size_t u = 0; u < v->n_uses; u++) {
        const oq_node *n = v->uses[u].node;
        if (weight_slot(n, v->uses[u].index))
            continue;
        if (never_fold(n) || oq_pass_is_op(n, "QuantizeLinear") || oq_pass_is_op(n, "DequantizeLinear"))
            return false;
        for (size_t i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] && n->inputs[i] != v && *n->inputs[i]->name && !const_of(n->inputs[i]))
                return false;
        for (size_t o = 0; o < n->n_outputs; o++)
            if (n->outputs[o] && !feeds_weights(n->outputs[o], depth + 1))
                return false;
    }
    return true;
}

static bool weight_feeder(const oq_node *n)
{
    if (oq_pass_is_op(n, "QuantizeLinear") || oq_pass_is_op(n, "DequantizeLinear") || dims_only_op(n))
        return false;
    for (size_t o = 0; o < n->n_outputs; o++)
        if (!n->outputs[o] || !feeds_weights(n->outputs[o], 0))
            return false;
    return n->n_outputs > 0;
}

static oq_status run_graph(oq_graph *g, void *vc)
{
    ctx *c = vc;
    for (oq_node *n = g->first; n;) {
        oq_node *next = n->next;
        if (n->n_inputs == 0 || never_fold(n) || (c->weights_only && !weight_feeder(n))) {
            n = next;
            continue;
        }
        bool folded;
        oq_status st = fold_node(c, g, n, &folded);
        if (st != OQ_OK)
            return st;
        if (folded) {
            oq_pass_stat_add(c->res, oq_pass_is_op(n, "Shape") || oq_pass_is_op(n, "Size")
                                         ? "shapes_folded" : "nodes_folded", 1);
            c->res->changed = true;
        }
        n = next;
    }
    return OQ_OK;
}

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    ctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.res = res;
    c.d = d;
    c.max_bytes = oq_pass_opt_int(o, "max-bytes", 1 << 20);
    c.weights_only = oq_pass_opt_bool(o, "weights-only", false);
    if (c.max_bytes < 0)
        return oq_diag_error(d, OQ_ERR_USAGE, "fold-constants: max-bytes must be >= 0, got %lld",
                             (long long)c.max_bytes);
    oq_status st = infer(&c);
    if (st == OQ_OK)
        st = oq_pass_for_each_graph(m, run_graph, &c);
    free(c.shapes);
    return st;
}

static const oq_pass_option_def options[] = {
    {"max-bytes", OQ_OPT_INT, "1048576",
     "largest tensor (bytes) a folded node may produce; larger results stay computed"},
    {"weights-only", OQ_OPT_BOOL, "false",
     "fold only nodes whose outputs all end as a layer's weight (Conv/ConvTranspose W, "
     "MatMul/Gemm B) or a Pad's pads, through other such nodes: Transpose/Cast/Reshape of a weight, "
     "weight normalization, computed \"same\" padding"},
};

const oq_pass oq_pass_fold_constants = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "fold-constants",
    .summary = "evaluate nodes whose inputs are constant (and Shape/Size of static shapes) "
               "with the executor's kernels",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .run = run,
    .iterative = true,
    .max_iterations = 8,
};
