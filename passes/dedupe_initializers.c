/* dedupe-initializers: initializers with the same element type, dims and bytes are
 * stored once; every use of a duplicate reads the first one. Initializers that are
 * also graph inputs (overridable defaults) or graph outputs keep their identity. */
#include "pass-impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct ctx {
    oq_pass_result *res;
    oq_diag *d;
} ctx;

typedef struct item {
    uint64_t hash;
    oq_value *v;
    const void *data;
    int64_t nbytes;
} item;

static uint64_t fnv(const void *p, int64_t n, uint64_t h)
{
    const uint8_t *b = p;
    for (int64_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

static int cmp_item(const void *a, const void *b)
{
    const item *x = a, *y = b;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    return x->v->id < y->v->id ? -1 : x->v->id > y->v->id;
}

static bool same(const item *a, const item *b)
{
    const oq_tensor *s = a->v->initializer, *t = b->v->initializer;
    return s->dtype == t->dtype && s->rank == t->rank && a->nbytes == b->nbytes &&
           (s->rank == 0 || memcmp(s->dims, t->dims, s->rank * sizeof(int64_t)) == 0) &&
           (a->nbytes == 0 || memcmp(a->data, b->data, (size_t)a->nbytes) == 0);
}

static oq_status run_graph(oq_graph *g, void *vc)
{
    ctx *c = vc;
    oq_status st = OQ_OK;
    size_t n = 0;
    item *items = calloc(g->n_initializers ? g->n_initializers : 1, sizeof(*items));
    if (!items)
        return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < g->n_initializers; i++) {
        oq_tensor *t = g->initializers[i];
        oq_value *v = t->name ? oq_graph_find_local(g, t->name) : NULL;
        if (!v || v->initializer != t || v->is_graph_input || oq_value_is_graph_output(v) ||
            t->dtype == OQ_DTYPE_STRING)
            continue;
        const void *data = oq_tensor_data(t, c->d);
        if (!data) {
            st = OQ_ERR_INVALID;
            goto done;
        }
        uint64_t h = fnv(t->dims, (int64_t)(t->rank * sizeof(int64_t)), 1469598103934665603ull);
        h = fnv(&t->dtype, sizeof t->dtype, h);
        items[n].hash = fnv(data, t->view_nbytes, h);
        items[n].v = v;
        items[n].data = data;
        items[n].nbytes = t->view_nbytes;
        n++;
    }
    qsort(items, n, sizeof *items, cmp_item);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && items[j].hash == items[i].hash)
            j++;
        /* within a hash bucket (sorted by id: first created wins) compare bytes */
        for (size_t a = i; a < j; a++) {
            if (!items[a].v)
                continue;
            for (size_t b = a + 1; b < j; b++) {
                if (!items[b].v || !same(&items[a], &items[b]))
                    continue;
                oq_value *dup = items[b].v;
                oq_value_replace_all_uses(dup, items[a].v);
                oq_graph_remove_initializer(g, dup);
                oq_pass_stat_add(c->res, "initializers_removed", 1);
                oq_pass_stat_add(c->res, "bytes_saved", items[b].nbytes);
                c->res->changed = true;
                items[b].v = NULL;
            }
        }
        i = j;
    }
done:
    free(items);
    return st;
}

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    ctx c = {res, d};
    return oq_pass_for_each_graph(m, run_graph, &c);
}

const oq_pass oq_pass_dedupe_initializers = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "dedupe-initializers",
    .summary = "store identical initializers (same type, dims and bytes) once",
    .run = run,
};
