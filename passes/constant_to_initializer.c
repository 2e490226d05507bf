/* constant-to-initializer: every Constant node becomes an initializer of its graph
 * holding the same tensor (value, value_float(s), value_int(s), value_string(s)).
 * sparse_value constants are left in place with a warning. */
#include "pass-impl.h"

#include <string.h>

typedef struct ctx {
    oq_pass_result *res;
    oq_diag *d;
} ctx;

static oq_tensor *string_tensor(oq_model *m, const oq_bytes *s, size_t n, size_t rank)
{
    oq_tensor *t = oq_model_alloc(m, sizeof(*t));
    if (!t)
        return NULL;
    t->has_dtype = true;
    t->dtype = OQ_DTYPE_STRING;
    t->rank = rank;
    t->dims = oq_model_alloc(m, sizeof(int64_t));
    t->string_data = oq_model_alloc(m, (n ? n : 1) * sizeof(oq_bytes));
    if (!t->dims || !t->string_data)
        return NULL;
    t->dims[0] = (int64_t)n;
    t->n_string_data = n;
    for (size_t i = 0; i < n; i++) {
        t->string_data[i].len = s[i].len;
        t->string_data[i].data = oq_model_memdup(m, s[i].data ? s[i].data : (const uint8_t *)"",
                                                 s[i].len ? s[i].len : 1);
        if (!t->string_data[i].data)
            return NULL;
    }
    t->model = m;
    return t;
}

/* The tensor a Constant node holds, or NULL (with a reason in *why). */
static oq_tensor *constant_tensor(oq_model *m, oq_node *n, const char **why)
{
    *why = NULL;
    if (n->n_attrs != 1) {
        *why = n->n_attrs ? "has more than one attribute" : "has no value attribute";
        return NULL;
    }
    oq_attr *a = n->attrs[0];
    const char *an = a->name ? a->name : "";
    int64_t one[1] = {0};
    if (strcmp(an, "value") == 0 && a->t)
        return a->t;
    if (strcmp(an, "value_float") == 0) {
        float f = a->f;
        return oq_tensor_new(m, NULL, OQ_DTYPE_FLOAT, one, 0, &f, 4);
    }
    if (strcmp(an, "value_int") == 0) {
        int64_t i = a->i;
        return oq_tensor_new(m, NULL, OQ_DTYPE_INT64, one, 0, &i, 8);
    }
    if (strcmp(an, "value_floats") == 0) {
        int64_t dims[1] = {(int64_t)a->n_floats};
        return oq_tensor_new(m, NULL, OQ_DTYPE_FLOAT, dims, 1, a->floats ? (const void *)a->floats : (const void *)"",
                             (int64_t)a->n_floats * 4);
    }
    if (strcmp(an, "value_ints") == 0) {
        int64_t dims[1] = {(int64_t)a->n_ints};
        return oq_tensor_new(m, NULL, OQ_DTYPE_INT64, dims, 1, a->ints ? (const void *)a->ints : (const void *)"",
                             (int64_t)a->n_ints * 8);
    }
    if (strcmp(an, "value_string") == 0)
        return string_tensor(m, &a->s, 1, 0);
    if (strcmp(an, "value_strings") == 0)
        return string_tensor(m, a->strings, a->n_strings, 1);
    if (strcmp(an, "sparse_value") == 0) {
        *why = "holds a sparse_value (sparse initializers are not produced by this pass)";
        return NULL;
    }
    *why = "has an unknown value attribute";
    return NULL;
}

static oq_status run_graph(oq_graph *g, void *vc)
{
    ctx *c = vc;
    oq_model *m = g->model;
    for (oq_node *n = g->first; n;) {
        oq_node *next = n->next;
        if (!oq_pass_is_op(n, "Constant") || n->n_outputs != 1 || !n->outputs[0]) {
            n = next;
            continue;
        }
        char lbl[64];
        const char *why;
        oq_tensor *t = constant_tensor(m, n, &why);
        if (!t) {
            if (!why)
                return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
            oq_diag_add(c->d, OQ_SEV_WARNING, OQ_OK, NULL, oq_node_label(n, lbl, sizeof lbl),
                        "Constant", "left in place: it %s", why);
            oq_pass_stat_add(c->res, "constants_skipped", 1);
            n = next;
            continue;
        }
        oq_value *v = n->outputs[0];
        oq_node_remove(n);
        oq_status s = oq_graph_set_initializer(g, v, t);
        if (s != OQ_OK)
            return oq_diag_error(c->d, s, "initializer \"%s\": cannot add", v->name);
        oq_pass_stat_add(c->res, "constants_converted", 1);
        c->res->changed = true;
        n = next;
    }
    return OQ_OK;
}

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    ctx c = {res, d};
    return oq_pass_for_each_graph(m, run_graph, &c);
}

const oq_pass oq_pass_constant_to_initializer = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "constant-to-initializer",
    .summary = "turn Constant nodes (every value_* form) into initializers",
    .run = run,
};
