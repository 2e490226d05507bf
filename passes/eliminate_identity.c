/* eliminate-identity: remove nodes that copy their input unchanged: Identity, Dropout
 * in inference (its mask unused), Reshape to the input's own static shape, Transpose
 * with the identity permutation, Cast to the input's own element type.
 *
 * Graph outputs keep their names: when the removed node's output is a graph output,
 * the producer of its input is made to produce that name instead; when that is not
 * possible (the input is a graph input, an initializer, another graph output, or
 * comes from an enclosing scope) the node stays. Option constants-only: only the nodes
 * whose input is a constant (onnxq quantize: a weight behind an Identity is then the
 * initializer insert-qdq quantizes as a weight; the activations' Identity nodes stay,
 * which decide where insert-qdq's pairs go as before). */
#include "pass-impl.h"

#include <string.h>

typedef struct ctx {
    oq_pass_result *res;
    oq_diag *d;
    bool constants_only; /* only nodes whose input is a constant (an initializer) */
} ctx;

/* Static dims of v (all known), or -1. */
static int64_t static_shape(const oq_value *v, int64_t *dims, size_t max)
{
    const oq_type *t = v->type;
    if (!t && v->initializer) {
        if (v->initializer->rank > max)
            return -1;
        if (v->initializer->rank)
            memcpy(dims, v->initializer->dims, v->initializer->rank * sizeof(int64_t));
        return (int64_t)v->initializer->rank;
    }
    if (!t || t->kind != OQ_TYPE_TENSOR || !t->shape || t->shape->rank > max)
        return -1;
    for (size_t i = 0; i < t->shape->rank; i++) {
        if (t->shape->dims[i].kind != OQ_DIM_VALUE)
            return -1;
        dims[i] = t->shape->dims[i].value;
    }
    return (int64_t)t->shape->rank;
}

static int32_t elem_type(const oq_value *v)
{
    if (v->type && v->type->kind == OQ_TYPE_TENSOR && v->type->has_elem_type)
        return v->type->elem_type;
    oq_tensor *t = oq_value_const_tensor(v);
    return t ? t->dtype : -1;
}

static bool is_noop(oq_node *n, oq_diag *d)
{
    if (n->n_inputs < 1 || !n->inputs[0] || n->n_outputs < 1 || !n->outputs[0])
        return false;
    oq_value *x = n->inputs[0];
    if (oq_pass_is_op(n, "Identity"))
        return n->n_inputs == 1 && n->n_outputs == 1;
    if (oq_pass_is_op(n, "Dropout")) {
        for (size_t i = 1; i < n->n_outputs; i++)
            if (n->outputs[i] && oq_pass_value_refs(n->outputs[i]) > 0)
                return false; /* the mask is used */
        if (oq_node_attr_int(n, "is_test", 1) == 0 && oq_node_opset(n) < 7)
            return false;
        if (n->n_inputs >= 3 && n->inputs[2]) { /* training_mode */
            oq_tensor *t = oq_value_const_tensor(n->inputs[2]);
            const uint8_t *b = t && t->dtype == OQ_DTYPE_BOOL && oq_tensor_numel(t) == 1
                                   ? oq_tensor_data(t, d) : NULL;
            if (!b || *b)
                return false;
        }
        return true;
    }
    if (oq_pass_is_op(n, "Cast")) {
        int32_t et = elem_type(x);
        oq_attr *to = oq_node_attr(n, "to");
        return et > 0 && to && to->i == et;
    }
    if (oq_pass_is_op(n, "Transpose")) {
        const int64_t *perm;
        int64_t np = oq_node_attr_ints(n, "perm", &perm);
        if (np < 0) {
            int64_t dims[16];
            int64_t r = static_shape(x, dims, 16);
            if (r < 0 && x->type && x->type->kind == OQ_TYPE_TENSOR && x->type->shape)
                r = (int64_t)x->type->shape->rank;
            return r == 0 || r == 1;
        }
        for (int64_t i = 0; i < np; i++)
            if (perm[i] != i)
                return false;
        return true;
    }
    if (oq_pass_is_op(n, "Reshape") && n->n_inputs >= 2 && n->inputs[1]) {
        int64_t in[16], want[16];
        int64_t r = static_shape(x, in, 16);
        if (r < 0)
            return false;
        int64_t k = oq_pass_const_ints(n->inputs[1], want, 16, d);
        if (k != r)
            return false;
        bool allowzero = oq_node_attr_int(n, "allowzero", 0) != 0;
        int neg = 0;
        for (int64_t i = 0; i < r; i++) {
            if (want[i] == 0 && !allowzero)
                continue; /* copies the input dim */
            if (want[i] == -1) {
                neg++;
                continue;
            }
            if (want[i] != in[i])
                return false;
        }
        /* one -1 with every other dim equal means the -1 is in[i] too, unless some
         * dim is 0 (then the inferred value is ambiguous: leave it) */
        if (neg > 1)
            return false;
        if (neg == 1)
            for (int64_t i = 0; i < r; i++)
                if (in[i] == 0)
                    return false;
        return true;
    }
    return false;
}

static oq_status run_graph(oq_graph *g, void *vc)
{
    ctx *c = vc;
    for (oq_node *n = g->first; n;) {
        oq_node *next = n->next;
        if (!is_noop(n, c->d) || (c->constants_only && !oq_value_const_tensor(n->inputs[0]))) {
            n = next;
            continue;
        }
        oq_value *x = n->inputs[0], *y = n->outputs[0];
        if (oq_value_is_graph_output(y)) {
            /* keep the output name: rename by rewiring x's producer */
            oq_node *p = x->producer;
            if (x->kind != OQ_VALUE_NODE || !p || p->graph != g || oq_value_is_graph_output(x) ||
                x->is_graph_input || x->initializer) {
                oq_pass_stat_add(c->res, "kept_for_graph_output", 1);
                n = next;
                continue;
            }
            size_t idx = x->producer_index;
            oq_pass_remove_node(n);
            oq_value_replace_all_uses(x, y);
            oq_node_set_output(p, idx, y);
            x->kind = OQ_VALUE_UNDEFINED;
            x->producer = NULL;
            if (!y->type && x->type)
                y->type = x->type;
        } else {
            oq_pass_remove_node(n);
            oq_value_replace_all_uses(y, x);
        }
        oq_pass_stat_add(c->res, "nodes_removed", 1);
        c->res->changed = true;
        n = next;
    }
    return OQ_OK;
}

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    ctx c = {res, d, oq_pass_opt_bool(o, "constants-only", false)};
    return oq_pass_for_each_graph(m, run_graph, &c);
}

static const oq_pass_option_def options[] = {
    {"constants-only", OQ_OPT_BOOL, "false",
     "only nodes that copy a constant (Identity(initializer): how the TorchScript exporter shares a "
     "weight), activations untouched"},
};

const oq_pass oq_pass_eliminate_identity = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "eliminate-identity",
    .summary = "remove Identity, inference Dropout and no-op Reshape/Transpose/Cast",
    .run = run,
    .options = options,
    .n_options = sizeof options / sizeof options[0],
};
