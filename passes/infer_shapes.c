/* infer-shapes: fill the main graph's value_info (and graph outputs without a type)
 * with the dtypes and shapes the executor infers at compile time
 * (oq_exec_infer_shapes).
 *
 * Symbolic dims: the graph inputs' dim_params are unknown to the executor, so the
 * model is also compiled with every dim_param bound to probe sizes: three bindings
 * with multiples of 32 (the alignment convolutional models need), and a fourth with
 * odd sizes that is used only when the model accepts it. A dim that equals the probe
 * of parameter P in every binding used is written as P; a dim that is the same in
 * every binding is written as that number; any other dim (N*2, N-1, ...) is written
 * unknown. So a dim named P is exact for every size when the odd probe compiled, and
 * for multiples of 32 otherwise (e.g. a detector whose upsampling path restores H
 * only when H is a multiple of 32). If a required probe fails to compile, only the
 * plain compile's shapes are used. When the executor cannot compile the graph as a
 * whole (an operator without a kernel), shapes are inferred node by node around the
 * unsupported nodes and no probing is done.
 *
 * Existing information is kept: a dim already given as a number is never changed, a
 * dim_param is only replaced by a number, and a value whose declared element type or
 * rank disagrees with the inference keeps its declaration (with a warning). */
#include "pass-impl.h"
#include "onnxq/exec.h"

#include <stdlib.h>
#include <string.h>

#define N_PROBES 3        /* required probes: multiples of 32 */
#define N_ALL_PROBES 4    /* plus one optional probe with odd sizes */
#define MAX_PARAMS 16

typedef struct info {
    bool seen;
    int32_t dtype;
    size_t rank;                 /* OQ_EXEC_UNKNOWN_RANK */
    int64_t dims[OQ_RT_MAX_RANK];
} info;

typedef struct run_ctx {
    info *tab;
    uint32_t n;
} run_ctx;

static void cb(const oq_value *v, int32_t dtype, size_t rank, const int64_t *dims,
               const void *data, void *user)
{
    run_ctx *r = user;
    (void)data;
    if (v->id >= r->n)
        return;
    info *x = &r->tab[v->id];
    x->seen = true;
    x->dtype = dtype;
    x->rank = rank > OQ_RT_MAX_RANK ? OQ_EXEC_UNKNOWN_RANK : rank;
    if (x->rank != OQ_EXEC_UNKNOWN_RANK)
        memcpy(x->dims, dims, rank * sizeof(int64_t));
}

static int64_t probe_size(int probe, size_t param)
{
    static const int64_t base[N_PROBES] = {5, 20, 9}, step[N_PROBES] = {1, 3, 5};
    if (probe >= N_PROBES)
        return 37 + 6 * (int64_t)param;
    return 32 * (base[probe] + step[probe] * (int64_t)param);
}

/* Compile with the graph inputs' dim_params bound to the probe sizes of `probe`
 * (probe < 0: unbound). Returns false when the compile fails. */
static bool compile_once(oq_model *m, int probe, char **params, size_t n_params, run_ctx *r)
{
    oq_graph *g = m->graph;
    oq_type **saved = calloc(g->n_inputs + 1, sizeof(*saved));
    bool ok = saved != NULL;
    for (size_t i = 0; ok && probe >= 0 && i < g->n_inputs; i++) {
        oq_vinfo *vi = g->inputs[i];
        oq_type *t = vi->type ? vi->type : vi->value ? vi->value->type : NULL;
        saved[i] = vi->type;
        if (!t || t->kind != OQ_TYPE_TENSOR || !t->shape || t->shape->rank > OQ_RT_MAX_RANK)
            continue;
        int64_t dims[OQ_RT_MAX_RANK];
        for (size_t j = 0; j < t->shape->rank; j++) {
            const oq_dim *dm = &t->shape->dims[j];
            dims[j] = dm->kind == OQ_DIM_VALUE ? dm->value : -1;
            for (size_t k = 0; dm->kind == OQ_DIM_PARAM && dm->param && k < n_params; k++)
                if (strcmp(params[k], dm->param) == 0)
                    dims[j] = probe_size(probe, k);
        }
        oq_type *nt = oq_type_tensor(m, t->has_elem_type ? t->elem_type : 0, dims, NULL,
                                     t->shape->rank);
        if (!nt)
            ok = false;
        else
            vi->type = nt;
    }
    if (ok) {
        oq_diag tmp;
        oq_diag_init(&tmp);
        memset(r->tab, 0, (size_t)r->n * sizeof(info));
        bool complete = false;
        ok = oq_exec_infer_shapes(m, cb, r, &complete, &tmp) == OQ_OK && complete;
        oq_diag_free(&tmp);
    }
    for (size_t i = 0; saved && probe >= 0 && i < g->n_inputs; i++)
        g->inputs[i]->type = saved[i];
    free(saved);
    return ok;
}

static size_t collect_params(const oq_graph *g, char **params)
{
    size_t n = 0;
    for (size_t i = 0; i < g->n_inputs; i++) {
        const oq_type *t = g->inputs[i]->type;
        if (!t || t->kind != OQ_TYPE_TENSOR || !t->shape)
            continue;
        for (size_t j = 0; j < t->shape->rank; j++) {
            const oq_dim *dm = &t->shape->dims[j];
            if (dm->kind != OQ_DIM_PARAM || !dm->param || !*dm->param)
                continue;
            size_t k = 0;
            while (k < n && strcmp(params[k], dm->param) != 0)
                k++;
            if (k == n && n < MAX_PARAMS)
                params[n++] = dm->param;
        }
    }
    return n;
}

static oq_vinfo *find_vinfo(oq_vinfo **list, size_t n, const oq_value *v)
{
    for (size_t i = 0; i < n; i++)
        if (list[i]->value == v)
            return list[i];
    return NULL;
}

/* Merge the inferred type (dtype, rank, dims, names) into the existing one. Returns
 * NULL when nothing would change. */
static oq_type *merged(oq_model *m, const oq_type *old, int32_t dtype, size_t rank,
                       const int64_t *dims, char *const *names, const char *vname,
                       oq_diag *d)
{
    if (dtype == OQ_DTYPE_UNDEFINED)
        return NULL;
    if (old && old->kind != OQ_TYPE_TENSOR)
        return NULL;
    if (old && old->has_elem_type && old->elem_type != dtype) {
        oq_diag_warn(d, "value \"%s\": declared %s, inferred %s; declaration kept", vname,
                     oq_dtype_name(old->elem_type), oq_dtype_name(dtype));
        return NULL;
    }
    const oq_shape *os = old ? old->shape : NULL;
    if (rank == OQ_EXEC_UNKNOWN_RANK) {
        if (old && old->has_elem_type)
            return NULL;
        oq_type *t = oq_type_tensor(m, dtype, NULL, NULL, 0);
        if (t)
            t->shape = os ? (oq_shape *)os : NULL;
        return t;
    }
    if (os && os->rank != rank) {
        oq_diag_warn(d, "value \"%s\": declared rank %zu, inferred %zu; declaration kept",
                     vname, os->rank, rank);
        return NULL;
    }
    int64_t nd[OQ_RT_MAX_RANK];
    const char *nn[OQ_RT_MAX_RANK];
    bool change = !old || !old->has_elem_type || !os;
    for (size_t j = 0; j < rank; j++) {
        nd[j] = dims[j];
        nn[j] = dims[j] < 0 ? names[j] : NULL;
        if (!os)
            continue;
        const oq_dim *od = &os->dims[j];
        if (od->kind == OQ_DIM_VALUE) {
            nd[j] = od->value;
            nn[j] = NULL;
        } else if (od->kind == OQ_DIM_PARAM && dims[j] < 0) {
            nd[j] = -1;
            nn[j] = od->param;
        } else if (dims[j] >= 0 || (od->kind == OQ_DIM_UNSET && nn[j])) {
            change = true;
        }
    }
    return change ? oq_type_tensor(m, dtype, nd, nn, rank) : NULL;
}

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    (void)o;
    oq_graph *g = m->graph;
    uint32_t n = m->next_id;
    info *tab[N_ALL_PROBES + 1];
    run_ctx rc[N_ALL_PROBES + 1];
    char *params[MAX_PARAMS];
    oq_status st = OQ_OK;
    size_t n_params = g ? collect_params(g, params) : 0;
    int n_probes = 0;
    memset(tab, 0, sizeof tab);
    if (!g)
        return OQ_OK;
    for (int p = 0; p <= N_ALL_PROBES; p++) {
        tab[p] = calloc((size_t)n + 1, sizeof(info));
        rc[p].tab = tab[p];
        rc[p].n = n;
        if (!tab[p]) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    /* tab[0]: plain compile (errors here are the pass's errors) */
    bool complete = false;
    st = oq_exec_infer_shapes(m, cb, &rc[0], &complete, d);
    if (st != OQ_OK)
        goto done;
    if (n_params && complete) {
        n_probes = N_PROBES;
        for (int p = 0; p < N_PROBES && n_probes; p++)
            if (!compile_once(m, p, params, n_params, &rc[p + 1]))
                n_probes = 0;
        if (!n_probes)
            oq_pass_stat_add(res, "probe_compiles_failed", 1);
        else if (compile_once(m, N_PROBES, params, n_params, &rc[N_PROBES + 1]))
            n_probes = N_ALL_PROBES; /* the model also accepts odd sizes: check them too */
        if (n_probes)
            oq_pass_stat_add(res, "probes_used", n_probes);
    }
    for (oq_node *nd = g->first; nd; nd = nd->next)
        for (size_t oi = 0; oi < nd->n_outputs; oi++) {
            oq_value *v = nd->outputs[oi];
            if (!v || !v->name || !*v->name || v->id >= n || !tab[0][v->id].seen ||
                v->kind != OQ_VALUE_NODE)
                continue;
            info x = tab[0][v->id];
            char *names[OQ_RT_MAX_RANK] = {0};
            /* improve with the probes: rank, then each unknown dim */
            bool probes_agree = n_probes > 0;
            for (int p = 1; probes_agree && p <= n_probes; p++)
                probes_agree = tab[p][v->id].seen && tab[p][v->id].rank != OQ_EXEC_UNKNOWN_RANK &&
                               tab[p][v->id].rank == tab[1][v->id].rank &&
                               (x.rank == OQ_EXEC_UNKNOWN_RANK || x.rank == tab[1][v->id].rank);
            if (probes_agree) {
                if (x.rank == OQ_EXEC_UNKNOWN_RANK) {
                    x.rank = tab[1][v->id].rank;
                    for (size_t j = 0; j < x.rank; j++)
                        x.dims[j] = -1;
                }
                for (size_t j = 0; j < x.rank; j++) {
                    if (x.dims[j] >= 0)
                        continue;
                    bool same = true;
                    for (int p = 2; p <= n_probes; p++)
                        same = same && tab[p][v->id].dims[j] == tab[1][v->id].dims[j];
                    if (same) {
                        x.dims[j] = tab[1][v->id].dims[j];
                        continue;
                    }
                    for (size_t k = 0; k < n_params && !names[j]; k++) {
                        bool is_k = true;
                        for (int p = 1; p <= n_probes; p++)
                            is_k = is_k && tab[p][v->id].dims[j] == probe_size(p - 1, k);
                        if (is_k)
                            names[j] = params[k];
                    }
                }
            }
            oq_vinfo *out = find_vinfo(g->outputs, g->n_outputs, v);
            oq_vinfo *vi = out ? out : find_vinfo(g->value_info, g->n_value_info, v);
            const oq_type *old = vi ? vi->type : NULL;
            oq_type *t = merged(m, old, x.dtype, x.rank, x.dims, names, v->name, d);
            if (!t)
                continue;
            if (vi) {
                vi->type = t;
                oq_pass_stat_add(res, out ? "outputs_typed" : "value_info_refined", 1);
            } else if (!oq_graph_add_value_info(g, v, t)) {
                st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
                goto done;
            } else {
                oq_pass_stat_add(res, "value_info_added", 1);
            }
            v->type = t;
            res->changed = true;
        }
done:
    for (int p = 0; p <= N_ALL_PROBES; p++)
        free(tab[p]);
    return st;
}

const oq_pass oq_pass_infer_shapes = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "infer-shapes",
    .summary = "fill value_info with the dtypes and shapes (symbolic where dynamic) the "
               "executor infers",
    .run = run,
};
