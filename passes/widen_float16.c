/* widen-float16: a float16 model computed in float32 inside, with the same interface.
 *
 * Every float16 initializer and Constant becomes float32 (exact: float32 holds every
 * float16), Cast / EyeLike / random ops / ConstantOfShape that make float16 make float32,
 * and value types follow. The main graph's float16 inputs stay float16 and are cast to
 * float32 where they enter (a Cast after each); its float16 outputs are cast back from
 * float32 by a Cast writing the output's name. Subgraph inputs and outputs are internal:
 * they become float32.
 *
 * What it is for: onnxq quantize (static and dynamic) on a model exported in float16
 * (GPU exports, `--fp16`): calibration, Q/DQ and bias correction then run on float32
 * tensors, the QDQ model keeps the float16 interface, and onnxruntime runs it (its CPU
 * provider computes float16 by inserting the same Casts). Before, the executor refused a
 * float16 Conv and dynamic mode found no float weight to quantize; onnxruntime's
 * quantize_static writes float16 DequantizeLinear scales that onnxruntime itself refuses
 * below opset 19 (docs/passes/widen-float16.md). */
#include "pass-impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct ctx {
    oq_pass_result *res;
    oq_diag *d;
    oq_model *m;
    oq_node **keep;       /* the Casts to float16 this pass made for the outputs */
    size_t n_keep, cap_keep;
} ctx;

#define F16 OQ_DTYPE_FLOAT16
#define F32 OQ_DTYPE_FLOAT

static void widen_type(oq_type *t)
{
    if (t && (t->kind == OQ_TYPE_TENSOR || t->kind == OQ_TYPE_SPARSE_TENSOR) && t->has_elem_type && t->elem_type == F16)
        t->elem_type = F32;
    else if (t && t->elem)
        widen_type(t->elem); /* sequence / optional of float16 tensors */
}

/* A float32 copy of float16 tensor t (same name), or NULL on error (in d). */
static oq_tensor *widened(ctx *c, oq_tensor *t)
{
    const uint16_t *h = oq_tensor_data(t, c->d);
    if (!h && oq_tensor_numel(t) > 0)
        return NULL;
    int64_t n = oq_tensor_numel(t);
    float *f = malloc((size_t)(n > 0 ? n : 1) * sizeof *f);
    if (!f) {
        oq_diag_error(c->d, OQ_ERR_NOMEM, "widen-float16: out of memory for \"%s\"", t->name ? t->name : "");
        return NULL;
    }
    if (n > 0)
        oq_half_to_float_n(h, f, n);
    oq_tensor *w = oq_tensor_new(c->m, t->name, F32, t->dims, t->rank, f, n * (int64_t)sizeof *f);
    free(f);
    if (!w)
        oq_diag_error(c->d, OQ_ERR_NOMEM, "widen-float16: out of memory for \"%s\"", t->name ? t->name : "");
    return w;
}

static oq_status widen_initializers(ctx *c, oq_graph *g)
{
    for (size_t i = 0; i < g->n_initializers; i++) {
        oq_tensor *t = g->initializers[i];
        if (t->dtype != F16)
            continue;
        oq_value *v = oq_graph_find_local(g, t->name);
        oq_tensor *w = widened(c, t);
        if (!w || !v)
            return w ? oq_diag_error(c->d, OQ_ERR_INTERNAL, "widen-float16: initializer \"%s\" has no value", t->name)
                     : OQ_ERR_INVALID;
        oq_status st = oq_graph_set_initializer(g, v, w);
        if (st != OQ_OK)
            return st;
        widen_type(v->type);
        oq_pass_stat_add(c->res, "initializers_widened", 1);
    }
    return OQ_OK;
}

/* dtype-valued attributes that make float16 */
static oq_status widen_node(ctx *c, oq_node *n)
{
    if (!oq_domain_is_default(n->domain))
        return OQ_OK;
    for (size_t i = 0; i < c->n_keep; i++)
        if (c->keep[i] == n)
            return OQ_OK;
    static const char *const dtype_ops[] = {"EyeLike", "RandomNormal", "RandomUniform", "RandomNormalLike",
                                            "RandomUniformLike", "Bernoulli", "Multinomial"};
    if (oq_pass_is_op(n, "Cast")) {
        oq_attr *to = oq_node_attr(n, "to");
        if (to && to->i == F16) {
            oq_node_set_attr_int(n, "to", F32);
            oq_pass_stat_add(c->res, "casts_to_float32", 1);
        }
    }
    for (size_t i = 0; i < sizeof dtype_ops / sizeof dtype_ops[0]; i++)
        if (oq_pass_is_op(n, dtype_ops[i]) && oq_node_attr_int(n, "dtype", 0) == F16)
            oq_node_set_attr_int(n, "dtype", F32);
    if (oq_pass_is_op(n, "Constant") || oq_pass_is_op(n, "ConstantOfShape")) {
        oq_attr *a = oq_node_attr(n, "value");
        if (a && a->t && a->t->dtype == F16) {
            oq_tensor *w = widened(c, a->t);
            if (!w)
                return OQ_ERR_INVALID;
            oq_node_set_attr_tensor(n, "value", w);
            oq_pass_stat_add(c->res, "constants_widened", 1);
        }
    }
    for (size_t o = 0; o < n->n_outputs; o++)
        if (n->outputs[o])
            widen_type(n->outputs[o]->type);
    return OQ_OK;
}

static bool is_f16(const oq_type *t)
{
    return t && t->kind == OQ_TYPE_TENSOR && t->has_elem_type && t->elem_type == F16;
}

/* The main graph's float16 input x: a Cast to float32 right after it, read instead of x. */
static oq_status cast_input(ctx *c, oq_graph *g, oq_value *x)
{
    if (x->n_uses == 0)
        return OQ_OK;
    char *nm = oq_graph_unique_name(g, x->name);
    oq_value *x32 = nm ? oq_graph_new_value(g, nm) : NULL;
    if (!x32)
        return OQ_ERR_NOMEM;
    oq_value_replace_all_uses(x, x32);
    oq_node *cast = oq_node_new(g, "Cast", NULL, x32->name, &x, 1, &x32, 1);
    if (!cast)
        return OQ_ERR_NOMEM;
    oq_node_set_attr_int(cast, "to", F32);
    if (g->first)
        oq_graph_insert_before(g, g->first, cast);
    else
        oq_graph_append(g, cast);
    oq_pass_stat_add(c->res, "inputs_cast", 1);
    return OQ_OK;
}

/* The main graph's float16 output y (now float32 inside): its producer writes y32 and a
 * Cast to float16 writes y. */
static oq_status cast_output(ctx *c, oq_graph *g, oq_vinfo *vi)
{
    oq_value *y = vi->value;
    if (y->kind != OQ_VALUE_NODE || !y->producer)
        return OQ_OK; /* an input or initializer passed through: handled as what it is */
    char *nm = oq_graph_unique_name(g, y->name);
    oq_value *y32 = nm ? oq_graph_new_value(g, nm) : NULL;
    if (!y32)
        return OQ_ERR_NOMEM;
    oq_node *p = y->producer;
    size_t idx = y->producer_index;
    oq_value_replace_all_uses(y, y32);
    oq_node_set_output(p, idx, y32);
    oq_node *cast = oq_node_new(g, "Cast", NULL, y->name, &y32, 1, &y, 1);
    if (!cast)
        return OQ_ERR_NOMEM;
    oq_node_set_attr_int(cast, "to", F16);
    oq_graph_insert_after(g, p, cast);
    if (c->n_keep == c->cap_keep) {
        size_t cap = c->cap_keep ? 2 * c->cap_keep : 8;
        oq_node **k = realloc(c->keep, cap * sizeof *k);
        if (!k)
            return OQ_ERR_NOMEM;
        c->keep = k;
        c->cap_keep = cap;
    }
    c->keep[c->n_keep++] = cast;
    oq_pass_stat_add(c->res, "outputs_cast", 1);
    return OQ_OK;
}

/* An entry of the main graph's interface that stays float16 (an initializer behind it is
 * widened like any other, and its entry with it). Checked before and after the node types
 * are widened: neither a Cast this pass adds nor an input is a node output it widens. */
static bool interface_f16(const oq_graph *g, const oq_vinfo *vi)
{
    return g->parent == NULL && is_f16(vi->type) && !vi->value->initializer;
}

static oq_status run_graph(oq_graph *g, void *vc)
{
    ctx *c = vc;
    oq_status st = OQ_OK;
    /* the interface first, while its types still say float16 (a value's type may be the
     * same object as its graph output entry's) */
    for (size_t i = 0; i < g->n_outputs && st == OQ_OK; i++)
        if (interface_f16(g, g->outputs[i]) && g->outputs[i]->value->kind == OQ_VALUE_NODE)
            st = cast_output(c, g, g->outputs[i]);
    for (size_t i = 0; i < g->n_inputs && st == OQ_OK; i++)
        if (interface_f16(g, g->inputs[i]))
            st = cast_input(c, g, g->inputs[i]->value);
    if (st == OQ_OK)
        st = widen_initializers(c, g);
    for (oq_node *n = g->first; st == OQ_OK && n; n = n->next)
        st = widen_node(c, n);
    for (size_t i = 0; st == OQ_OK && i < g->n_value_info; i++) {
        widen_type(g->value_info[i]->type);
        widen_type(g->value_info[i]->value ? g->value_info[i]->value->type : NULL);
    }
    for (size_t i = 0; st == OQ_OK && i < g->n_outputs + g->n_inputs; i++) {
        oq_vinfo *vi = i < g->n_outputs ? g->outputs[i] : g->inputs[i - g->n_outputs];
        if (!interface_f16(g, vi)) {
            widen_type(vi->type);
            widen_type(vi->value ? vi->value->type : NULL);
        }
    }
    return st;
}

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    (void)o;
    ctx c = {res, d, m, NULL, 0, 0};
    oq_status st = oq_pass_for_each_graph(m, run_graph, &c);
    free(c.keep);
    for (size_t i = 0; i < res->n_stats; i++)
        if (res->stats[i].value > 0)
            res->changed = true;
    return st;
}

const oq_pass oq_pass_widen_float16 = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "widen-float16",
    .summary = "compute a float16 model in float32 inside, keeping its float16 inputs and outputs",
    .run = run,
};

oq_status oq_model_widen_float16(oq_model *m, bool *changed, oq_diag *d)
{
    oq_pass_result r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    oq_status st = run(m, NULL, &r, d);
    if (changed)
        *changed = st == OQ_OK && r.changed;
    return st;
}
