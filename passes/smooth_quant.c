/* smooth-quant: SmoothQuant (Xiao et al. 2022, arXiv:2211.10438) before calibration.
 * For every float activation X that feeds MatMul / Gemm layers with a constant weight,
 * per input channel j (X's last axis):
 *   s_j = max|X_j|^alpha / max(max|W_j,:|^(1-alpha), 1e-5), clamped to [1e-5, 1e5]
 * (max|X_j| over the calibration samples and every other axis; max|W_j,:| over every
 * layer that reads X; a channel X never leaves 0 keeps s_j = 1), then X_j <- X_j / s_j
 * and W_j,: <- W_j,: * s_j: the model computes the same function, with the activation
 * outliers moved into the weights (which are quantized per channel).
 * The 1/s goes into X's producer when every use of X is such a layer and the producer
 * is linear per channel: LayerNormalization (scale and bias), Mul by a constant,
 * MatMul / Gemm with a constant weight (its output columns and bias), or an Add of a
 * constant or a Relu / LeakyRelu after one of these; otherwise a Mul(X, 1/s) is
 * inserted in front of the layers. Statistics come from the executor's observers (oq_calib_run) with the same
 * data options as calibrate. Per layer: one note, and JSON in the model's
 * metadata_props under OQ_SMOOTH_METADATA_KEY (onnxq quantize moves it into its --json
 * report).
 * search=true chooses alpha per X instead (or leaves X alone): among inputs whose largest
 * channel peak is at least outlier-ratio times the median one, each candidate (off, 0.3 ..
 * 0.9) is judged by the error of the group's layer outputs computed on rows of X kept
 * from the held-out calibration samples (every OQ_CALIB_HOLDOUT_EVERY-th), with X/s
 * quantized to 8 bits over the range the other samples gave and W*s to int8 per output
 * column; the smallest error wins. docs/passes/smooth-quant.md */
#include "pass-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "onnxq/calib.h"

#define SQ_MIN 1e-5
#define SQ_MAX 1e5

typedef struct sq_layer {
    oq_node *n;
    bool w_transposed; /* Gemm transB=1: W is [N, K] */
    double w_before;   /* max |W| of this layer in the float model */
    const char *split_mm; /* the float MatMul of the channels split off (model's string) */
} sq_layer;

typedef struct sq_group {
    oq_value *x;
    int64_t K;
    sq_layer *layers;
    size_t n_layers;
    float *xmax;       /* K running abs maxima */
    bool seen;
    uint64_t nonfinite;
    double *s;         /* K scales (phase 1) */
    double x_before, x_after;
    /* search: per channel min/max over the fit samples, up to n_cap rows of X (K floats
     * each) sampled from the held-out samples, the choice */
    float *fmin, *fmax;
    float *amin, *amax;   /* per channel over every sample (calibrate's one-pass mode) */
    /* one-pass mode: the tensors before X that a fold through Relu/LeakyRelu/Add would
     * also scale (the inputs of those nodes, from X up), their per-channel extremes */
    oq_value *chain[OQ_SQ_CHAIN_MAX];
    char *chain_orig[OQ_SQ_CHAIN_MAX];
    float *cmin[OQ_SQ_CHAIN_MAX], *cmax[OQ_SQ_CHAIN_MAX];
    int n_chain;
    bool chain_bad;       /* a chain tensor without K channels last */
    float *rows;
    uint32_t *row_sample;  /* the held-out sample each row came from */
    int64_t n_rows, n_cap;
    uint64_t rows_seen, rng;
    bool fit_seen;
    double alpha;         /* chosen (or the fixed alpha); < 0: left alone */
    double ratio;         /* largest / median channel peak */
    double err_off, err_best; /* search: relative output error unsmoothed / chosen */
    /* search with split-ratio: the outlier channels taken out of the quantized layers
     * (ascending; n_split 0: none), computed by a float MatMul of their own */
    int64_t *split;
    int64_t n_split;
    double err_nosplit;   /* the error of the best choice without the split */
    double split_gain_mean_db, split_se_db; /* the split's gain per held-out sample: mean,
                                               standard error of the mean */
    int n_split_samples;  /* held-out samples the split was judged on */
    char *orig_name;   /* X's name in the float model (a fold renames X) */
    char where[300];   /* where 1/s went (phase 2) */
    const char *now;   /* what the layers read after phase 2 */
} sq_group;

typedef struct sq_ctx {
    sq_group *groups;
    size_t n_groups;
    int32_t *by_id;    /* value id -> group, -1 */
    uint32_t n_ids;
    oq_status st;
    oq_diag *d;
    bool search;
    bool held_now;      /* search: the current sample is held out */
    uint64_t next_sample;
    bool all_minmax;    /* keep amin/amax (oq_sq_begin for calibrate) */
    int32_t *chain_by_id; /* value id -> group * OQ_SQ_CHAIN_MAX + chain index, -1 */
    oq_sq_params p;
} sq_ctx;

/* ------------------------------------------------------------ matching */

static bool is_float_const(const oq_value *v, size_t rank)
{
    oq_tensor *t = v ? oq_value_const_tensor(v) : NULL;
    return t && oq_dtype_is_float(t->dtype) && (rank == 0 || t->rank == rank);
}

/* A layer SmoothQuant rewrites: MatMul(X, W) or Gemm(X, W[, C]) with transA=0 and a
 * constant 2-D weight; X not constant. *K: X's channel count. */
static bool layer_of(const oq_node *n, int64_t *K, bool *wt)
{
    bool mm = oq_pass_is_op(n, "MatMul"), gemm = oq_pass_is_op(n, "Gemm");
    if ((!mm && !gemm) || n->n_inputs < 2 || !n->inputs[0] || !n->inputs[1] || oq_value_const_tensor(n->inputs[0]) ||
        !is_float_const(n->inputs[1], 2))
        return false;
    if (gemm && oq_node_attr_int(n, "transA", 0) != 0)
        return false;
    int32_t et = oq_pass_value_elem_type(n->inputs[0]);
    if (et >= 0 && et != OQ_DTYPE_FLOAT)
        return false;
    oq_tensor *w = oq_value_const_tensor(n->inputs[1]);
    *wt = gemm && oq_node_attr_int(n, "transB", 0) != 0;
    *K = w->dims[*wt ? 1 : 0];
    return *K > 0;
}

static oq_status collect(sq_ctx *c, oq_graph *g)
{
    for (oq_node *n = g->first; n; n = n->next) {
        int64_t K;
        bool wt;
        if (!layer_of(n, &K, &wt))
            continue;
        oq_value *x = n->inputs[0];
        if (x->id >= c->n_ids)
            continue;
        sq_group *gr;
        if (c->by_id[x->id] >= 0) {
            gr = &c->groups[c->by_id[x->id]];
            if (gr->K != K)
                continue; /* not a valid model; the checker or the executor says so */
        } else {
            sq_group *ng = realloc(c->groups, (c->n_groups + 1) * sizeof(*ng));
            if (!ng)
                return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
            c->groups = ng;
            gr = &c->groups[c->n_groups];
            memset(gr, 0, sizeof(*gr));
            gr->x = x;
            gr->K = K;
            gr->xmax = calloc((size_t)K, sizeof(float));
            if (!gr->xmax)
                return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
            c->by_id[x->id] = (int32_t)c->n_groups++;
        }
        sq_layer *nl = realloc(gr->layers, (gr->n_layers + 1) * sizeof(*nl));
        if (!nl)
            return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        gr->layers = nl;
        gr->layers[gr->n_layers].n = n;
        gr->layers[gr->n_layers].w_transposed = wt;
        gr->n_layers++;
    }
    return OQ_OK;
}

/* ------------------------------------------------------------ statistics */

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static bool row_finite(const float *r, int64_t K)
{
    for (int64_t j = 0; j < K; j++)
        if (!isfinite(r[j]))
            return false;
    return true;
}

/* search: fit samples give per-channel min/max, held-out samples rows (reservoir
 * sampling, a fixed seed per group: the same rows for the same samples) */
static void search_observe(sq_ctx *c, sq_group *g, const oq_rt_tensor *t)
{
    const float *x = t->data;
    int64_t K = g->K, n = oq_rt_tensor_numel(t) / K;
    if (!g->fmin) {
        g->fmin = malloc((size_t)K * sizeof(float));
        g->fmax = malloc((size_t)K * sizeof(float));
        g->rows = g->n_cap > 0 ? malloc((size_t)(g->n_cap * K) * sizeof(float)) : NULL;
        g->row_sample = g->n_cap > 0 ? malloc((size_t)g->n_cap * sizeof(uint32_t)) : NULL;
        if (!g->fmin || !g->fmax || (g->n_cap > 0 && (!g->rows || !g->row_sample))) {
            c->st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
            return;
        }
        for (int64_t j = 0; j < K; j++) {
            g->fmin[j] = INFINITY;
            g->fmax[j] = -INFINITY;
        }
    }
    for (int64_t i = 0; i < n; i++) {
        const float *r = x + i * K;
        if (!row_finite(r, K))
            continue;
        if (!c->held_now) {
            for (int64_t j = 0; j < K; j++) {
                if (r[j] < g->fmin[j])
                    g->fmin[j] = r[j];
                if (r[j] > g->fmax[j])
                    g->fmax[j] = r[j];
            }
            g->fit_seen = true;
            continue;
        }
        int64_t slot = -1;
        if (g->n_rows < g->n_cap)
            slot = g->n_rows++;
        else if (g->n_cap > 0) {
            uint64_t k = splitmix(&g->rng) % (g->rows_seen + 1);
            if (k < (uint64_t)g->n_cap)
                slot = (int64_t)k;
        }
        g->rows_seen++;
        if (slot >= 0) {
            memcpy(g->rows + slot * K, r, (size_t)K * sizeof(float));
            g->row_sample[slot] = (uint32_t)(c->next_sample - 1);
        }
    }
}

/* every sample's per-channel min/max (finite rows only, as the search's) */
static void minmax_observe(sq_ctx *c, int64_t K, float **mn, float **mx, const oq_rt_tensor *t)
{
    const float *x = t->data;
    int64_t n = oq_rt_tensor_numel(t) / K;
    if (!*mn) {
        *mn = malloc((size_t)K * sizeof(float));
        *mx = malloc((size_t)K * sizeof(float));
        if (!*mn || !*mx) {
            c->st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
            return;
        }
        for (int64_t j = 0; j < K; j++) {
            (*mn)[j] = INFINITY;
            (*mx)[j] = -INFINITY;
        }
    }
    float *lo = *mn, *hi = *mx;
    for (int64_t i = 0; i < n; i++) {
        const float *r = x + i * K;
        if (!row_finite(r, K))
            continue;
        for (int64_t j = 0; j < K; j++) {
            if (r[j] < lo[j])
                lo[j] = r[j];
            if (r[j] > hi[j])
                hi[j] = r[j];
        }
    }
}

/* a tensor of a group's fold chain */
static void chain_observe(sq_ctx *c, const oq_value *v, const oq_rt_tensor *t)
{
    int32_t e = c->chain_by_id[v->id];
    sq_group *g = &c->groups[e / OQ_SQ_CHAIN_MAX];
    int k = e % OQ_SQ_CHAIN_MAX;
    if (t->rank == 0 || t->dims[t->rank - 1] != g->K) {
        g->chain_bad = true; /* broadcast in: not per channel of X; calibrate runs again */
        return;
    }
    if (oq_rt_tensor_numel(t) > 0)
        minmax_observe(c, g->K, &g->cmin[k], &g->cmax[k], t);
}

static void begin_sample(const char *label, void *user)
{
    (void)label;
    sq_ctx *c = user;
    c->held_now = oq_calib_sample_held_out(c->next_sample++);
}

static void observe(sq_ctx *c, const oq_value *v, const oq_rt_tensor *t)
{
    if (c->st != OQ_OK || !v || v->id >= c->n_ids || t->dtype != OQ_DTYPE_FLOAT)
        return;
    if (c->chain_by_id && c->chain_by_id[v->id] >= 0)
        chain_observe(c, v, t);
    if (c->by_id[v->id] < 0)
        return;
    sq_group *g = &c->groups[c->by_id[v->id]];
    if (t->rank == 0 || t->dims[t->rank - 1] != g->K) {
        char buf[64];
        c->st = oq_diag_error(c->d, OQ_ERR_INVALID, "smooth-quant: tensor \"%s\" is %s, expected %lld channels last",
                              v->name, oq_rt_tensor_describe(t, buf, sizeof buf), (long long)g->K);
        return;
    }
    if (oq_rt_tensor_numel(t) <= 0)
        return;
    c->st = oq_absmax_per_channel_update(g->xmax, t->data, t->dims, t->rank, -1, &g->nonfinite, v->name, c->d);
    g->seen = true;
    if ((c->all_minmax || c->search) && c->st == OQ_OK) /* search: the split's range */
        minmax_observe(c, g->K, &g->amin, &g->amax, t);
    if (c->search && c->st == OQ_OK)
        search_observe(c, g, t);
}

static void on_tensor(const oq_node *node, size_t out_index, const oq_rt_tensor *t, void *user)
{
    if (out_index < node->n_outputs)
        observe(user, node->outputs[out_index], t);
}

static void on_input(const oq_value *v, const oq_rt_tensor *t, void *user)
{
    observe(user, v, t);
}

static oq_status check(void *user)
{
    return ((sq_ctx *)user)->st;
}

/* ------------------------------------------------------------ rewriting */

/* The value's constant as doubles; NULL (with d) on failure. */
static double *const_values(const oq_value *v, int64_t *n, oq_diag *d)
{
    double *out = NULL;
    if (oq_pass_tensor_to_double(oq_value_const_tensor(v), &out, n, d) != OQ_OK)
        return NULL;
    return out;
}

/* Replace input idx of node n (a constant) by c * f along axis `axis` of its dims (f has
 * dims[axis] entries, or K entries broadcast over the last axis when `last_k` > 0: a
 * constant whose last dim is 1, or a scalar, is expanded to K there). */
static oq_status scale_const(oq_node *n, size_t idx, const double *f, int64_t axis_from_end, int64_t last_k,
                             const char *suffix, oq_diag *d)
{
    oq_value *v = n->inputs[idx];
    oq_tensor *t = oq_value_const_tensor(v);
    int64_t cnt;
    double *vals = const_values(v, &cnt, d);
    if (!vals)
        return OQ_ERR_INVALID;
    int64_t dims[OQ_RT_MAX_RANK];
    size_t rank = t->rank;
    for (size_t i = 0; i < rank; i++)
        dims[i] = t->dims[i];
    double *nv = vals;
    if (last_k > 0 && (rank == 0 || dims[rank - 1] == 1)) { /* broadcast the K axis in */
        if (rank == 0) {
            rank = 1;
            dims[0] = 1;
        }
        dims[rank - 1] = last_k;
        nv = malloc((size_t)(cnt * last_k) * sizeof(double));
        if (!nv) {
            free(vals);
            return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        }
        for (int64_t i = 0; i < cnt; i++)
            for (int64_t j = 0; j < last_k; j++)
                nv[i * last_k + j] = vals[i];
        free(vals);
        cnt *= last_k;
    }
    size_t ax = rank - 1 - (size_t)axis_from_end;
    int64_t ch = dims[ax], inner = oq_dims_numel(dims + ax + 1, rank - ax - 1);
    for (int64_t i = 0; i < cnt; i++)
        nv[i] *= f[(i / inner) % ch];
    char base[256];
    snprintf(base, sizeof base, "%s_%s", v->name ? v->name : "c", suffix);
    oq_value *nc = oq_pass_new_initializer(n->graph, base, t->dtype, dims, rank, nv);
    free(nv);
    if (!nc)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    oq_node_set_input(n, idx, nc);
    oq_pass_drop_if_unused(v);
    return OQ_OK;
}

/* The index of n's only constant input among the first two, or -1. */
static int const_input(const oq_node *n)
{
    if (n->n_inputs != 2 || !n->inputs[0] || !n->inputs[1])
        return -1;
    bool c0 = is_float_const(n->inputs[0], 0), c1 = is_float_const(n->inputs[1], 0);
    if (c0 == c1)
        return -1;
    return c0 ? 0 : 1;
}

/* A constant whose last dim is 1 or K (any rank up to the output's). */
static bool broadcasts_over_k(const oq_value *v, int64_t K)
{
    oq_tensor *t = oq_value_const_tensor(v);
    return t && t->rank < OQ_RT_MAX_RANK && (t->rank == 0 || t->dims[t->rank - 1] == 1 || t->dims[t->rank - 1] == K);
}

static bool single_use(const oq_value *v)
{
    return v->n_uses == 1 && !oq_value_is_graph_output(v);
}

/* Can x's producer absorb a per-channel factor on its output x (K channels, last axis)? */
static bool can_fold(const oq_value *x, int64_t K, int depth)
{
    const oq_node *p = x->kind == OQ_VALUE_NODE ? x->producer : NULL;
    if (!p || depth > 8 || p->n_outputs < 1 || p->outputs[0] != x)
        return false;
    if (oq_pass_is_op(p, "LayerNormalization")) {
        int64_t r = oq_pass_value_rank(x), axis = oq_node_attr_int(p, "axis", -1);
        if (!(axis == -1 || (r > 0 && axis == r - 1)) || p->n_inputs < 2 || !is_float_const(p->inputs[1], 0))
            return false;
        oq_tensor *s = oq_value_const_tensor(p->inputs[1]);
        if (s->rank == 0 || oq_tensor_numel(s) != K || s->dims[s->rank - 1] != K)
            return false;
        if (p->n_inputs > 2 && p->inputs[2]) {
            oq_tensor *b = oq_value_const_tensor(p->inputs[2]);
            if (!b || !oq_dtype_is_float(b->dtype) || b->rank == 0 || oq_tensor_numel(b) != K ||
                b->dims[b->rank - 1] != K)
                return false;
        }
        return true;
    }
    if (oq_pass_is_op(p, "Mul")) {
        int ci = const_input(p);
        return ci >= 0 && broadcasts_over_k(p->inputs[ci], K);
    }
    int64_t k2;
    bool wt;
    if (layer_of(p, &k2, &wt)) {
        oq_tensor *w = oq_value_const_tensor(p->inputs[1]);
        if (w->dims[wt ? 0 : 1] != K)
            return false;
        if (oq_pass_is_op(p, "Gemm") && p->n_inputs > 2 && p->inputs[2] &&
            !(is_float_const(p->inputs[2], 0) && broadcasts_over_k(p->inputs[2], K)))
            return false;
        return true;
    }
    if (oq_pass_is_op(p, "Add")) {
        int ci = const_input(p);
        if (ci < 0 || !broadcasts_over_k(p->inputs[ci], K))
            return false;
        const oq_value *u = p->inputs[1 - ci];
        return single_use(u) && can_fold(u, K, depth + 1);
    }
    if (oq_pass_is_op(p, "Relu") || oq_pass_is_op(p, "LeakyRelu")) {
        /* f(u / s) = f(u) / s for s > 0 (every s is >= 1e-5) */
        const oq_value *u = p->n_inputs == 1 ? p->inputs[0] : NULL;
        return u && single_use(u) && can_fold(u, K, depth + 1);
    }
    return false;
}

/* Multiply x's producer's output channels by f (can_fold was true). x now holds other
 * numbers than the float model's tensor of that name: it is renamed NAME_smoothed, so
 * that tools matching tensors by name (verify's per-layer table, the fallback ranking)
 * do not compare the two. */
static oq_status fold(oq_value *x, int64_t K, const double *f, oq_diag *d)
{
    oq_node *p = x->producer;
    oq_status st;
    char base[300];
    snprintf(base, sizeof base, "%s_smoothed", x->name ? x->name : "x");
    char *nn = oq_graph_unique_name(x->graph, base);
    if (!nn || oq_value_rename(x, nn) != OQ_OK)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    if (oq_pass_is_op(p, "LayerNormalization")) {
        st = scale_const(p, 1, f, 0, 0, "smooth", d);
        if (st == OQ_OK && p->n_inputs > 2 && p->inputs[2])
            st = scale_const(p, 2, f, 0, 0, "smooth", d);
        return st;
    }
    if (oq_pass_is_op(p, "Mul"))
        return scale_const(p, (size_t)const_input(p), f, 0, K, "smooth", d);
    if (oq_pass_is_op(p, "Relu") || oq_pass_is_op(p, "LeakyRelu"))
        return fold(p->inputs[0], K, f, d);
    if (oq_pass_is_op(p, "Add")) {
        int ci = const_input(p);
        st = fold(p->inputs[1 - ci], K, f, d);
        return st == OQ_OK ? scale_const(p, (size_t)ci, f, 0, K, "smooth", d) : st;
    }
    bool wt = oq_pass_is_op(p, "Gemm") && oq_node_attr_int(p, "transB", 0) != 0;
    st = scale_const(p, 1, f, wt ? 1 : 0, 0, "smooth", d); /* output columns of W */
    if (st == OQ_OK && oq_pass_is_op(p, "Gemm") && p->n_inputs > 2 && p->inputs[2])
        st = scale_const(p, 2, f, 0, K, "smooth", d);
    return st;
}

/* "folded into Relu "r" -> Add "a" -> MatMul "m"": the nodes fold() changes, from x up. */
static void describe_fold(const oq_value *x, char *buf, size_t size)
{
    size_t len = (size_t)snprintf(buf, size, "folded into");
    for (const oq_node *p = x->producer; p && len < size;) {
        char lb[200];
        len += (size_t)snprintf(buf + len, size - len, "%s %s \"%s\"", len > 11 ? " ->" : "", p->op_type,
                                oq_node_label(p, lb, sizeof lb));
        if (oq_pass_is_op(p, "Relu") || oq_pass_is_op(p, "LeakyRelu"))
            p = p->inputs[0]->producer;
        else if (oq_pass_is_op(p, "Add"))
            p = p->inputs[1 - const_input(p)]->producer;
        else
            p = NULL;
    }
}

/* Does every use of v belong to the group's layers (as their input 0)? */
static bool layers_alone_read(const sq_group *g, const oq_value *v)
{
    if (oq_value_is_graph_output(v))
        return false;
    for (size_t i = 0; i < v->n_uses; i++) {
        bool found = false;
        for (size_t k = 0; k < g->n_layers && !found; k++)
            found = v->uses[i].node == g->layers[k].n && v->uses[i].index == 0;
        if (!found)
            return false;
    }
    return true;
}

/* ... of X itself */
static bool only_layers_use(const sq_group *g)
{
    return layers_alone_read(g, g->x);
}

/* max |W_j,:| of layer l per input channel j, folded into wmax (max over layers). */
static oq_status weight_absmax(const sq_layer *l, int64_t K, double *wmax, double *overall, oq_diag *d)
{
    int64_t n;
    double *w = const_values(l->n->inputs[1], &n, d);
    if (!w)
        return OQ_ERR_INVALID;
    int64_t N = n / K;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = l->w_transposed ? i % K : i / N;
        double a = fabs(w[i]);
        if (a > wmax[j])
            wmax[j] = a;
        if (a > *overall)
            *overall = a;
    }
    free(w);
    return OQ_OK;
}

static void json_num(FILE *f, const char *key, double v)
{
    fprintf(f, ",\"%s\":%.9g", key, isfinite(v) ? v : 0.0);
}

/* A JSON string (names are ONNX names: escape what JSON needs). */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

/* ------------------------------------------------------------ search */

static const double search_alphas[] = {0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9};
#define SQ_SEARCH_COLS 64   /* output columns per layer the error is computed on */

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* largest / median of the nonzero channel peaks (0 when none) */
static double peak_ratio(const float *xmax, int64_t K)
{
    float *v = malloc((size_t)K * sizeof(float));
    int64_t n = 0;
    if (!v)
        return 0;
    for (int64_t j = 0; j < K; j++)
        if (xmax[j] > 0)
            v[n++] = xmax[j];
    double r = 0;
    if (n > 0) {
        qsort(v, (size_t)n, sizeof(float), cmp_float);
        r = v[n - 1] / v[n / 2];
    }
    free(v);
    return r;
}

typedef struct sq_eval_layer {
    double *w;      /* nc x K: the sampled columns of W (column c: K input channels) */
    double *yref;   /* n_rows x nc: X W in double */
    double sig;     /* sum yref^2 */
    double *sig_s;  /* the same per held-out sample (sq_samples) */
    int64_t nc;
} sq_eval_layer;

/* The held-out samples the rows came from, numbered densely: row r is of sample
 * of[r] (0 <= of[r] < n) */
typedef struct sq_samples {
    int *of;
    int n;
} sq_samples;

static void eval_layers_free(sq_eval_layer *el, size_t n)
{
    for (size_t k = 0; el && k < n; k++) {
        free(el[k].w);
        free(el[k].yref);
        free(el[k].sig_s);
    }
    free(el);
}

/* The relative output error (mean over the layers of sum (yq - y)^2 / sum y^2) with
 * X/s on 8 bits over the fit range and W*s int8 per column; s NULL: unsmoothed. The
 * channels ex marks (NULL: none) are split off: exact in float, outside the range of
 * X/s and of the weight columns. */
/* sum a[j] * b[j]: eight partial sums (fixed order: the same result on every run) */
static double dot(const float *a, const float *b, int64_t n)
{
    float p[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++)
            p[k] += a[j + k] * b[j + k];
    double t = 0;
    for (int k = 0; k < 8; k++)
        t += p[k];
    for (; j < n; j++)
        t += (double)a[j] * b[j];
    return t;
}

static double eval_error(const sq_group *g, const sq_eval_layer *el, const double *s,
                         const unsigned char *ex, float *xq, float *wq, const sq_samples *ss, double *per)
{
    int64_t K = g->K;
    double lo = 0, hi = 0;
    for (int64_t j = 0; j < K; j++) {
        if (!(g->fmax[j] >= g->fmin[j]) || (ex && ex[j]))
            continue; /* not seen, or split off */
        double sj = s ? s[j] : 1.0;
        if (g->fmin[j] / sj < lo)
            lo = g->fmin[j] / sj;
        if (g->fmax[j] / sj > hi)
            hi = g->fmax[j] / sj;
    }
    double sx = (hi - lo) / 255.0;
    if (!(sx > 0))
        sx = 1;
    double zp = nearbyint(-lo / sx);
    double total = 0;
    for (size_t k = 0; k < g->n_layers; k++) {
        const sq_eval_layer *l = &el[k];
        for (int64_t c = 0; c < l->nc; c++) {
            double m = 0;
            const double *wc = l->w + c * K;
            for (int64_t j = 0; j < K; j++) {
                double a = ex && ex[j] ? 0 : fabs(wc[j] * (s ? s[j] : 1.0));
                if (a > m)
                    m = a;
            }
            double sw = m > 0 ? m / 127.0 : 1.0;
            for (int64_t j = 0; j < K; j++) {
                double v = wc[j] * (s ? s[j] : 1.0);
                wq[c * K + j] = (float)(ex && ex[j] ? v : nearbyint(v / sw) * sw);
            }
        }
        double err = 0, *pl = per ? per + k * (size_t)ss->n : NULL;
        if (pl)
            memset(pl, 0, (size_t)ss->n * sizeof(double));
        for (int64_t r = 0; r < g->n_rows; r++) {
            const float *x = g->rows + r * K;
            double er = 0;
            for (int64_t j = 0; j < K; j++) {
                double v = x[j] / (s ? s[j] : 1.0), q = nearbyint(v / sx) + zp;
                q = q < 0 ? 0 : q > 255 ? 255 : q;
                xq[j] = (float)(ex && ex[j] ? v : (q - zp) * sx);
            }
            for (int64_t c = 0; c < l->nc; c++) {
                double e = dot(xq, wq + c * K, K) - l->yref[r * l->nc + c];
                er += e * e;
            }
            err += er;
            if (pl)
                pl[ss->of[r]] += er;
        }
        total += l->sig > 0 ? err / l->sig : 0;
    }
    return total / (double)g->n_layers;
}

/* s for alpha from per-channel peaks xm and weight peaks wmax */
static void scales_for(const float *xm, const double *wmax, int64_t K, double alpha, double *s)
{
    for (int64_t j = 0; j < K; j++) {
        if (!(xm[j] > 0)) {
            s[j] = 1.0;
            continue;
        }
        double wp = pow(wmax[j], 1.0 - alpha);
        if (wp < SQ_MIN)
            wp = SQ_MIN;
        double v = pow(xm[j], alpha) / wp;
        s[j] = v < SQ_MIN ? SQ_MIN : v > SQ_MAX ? SQ_MAX : v;
    }
}

/* The least eval_error over the candidate alphas (*alpha: its alpha); s is scratch */
static double best_of_alphas(const sq_group *g, const sq_eval_layer *el, const float *fitpeak, const double *wmax,
                             double *s, const unsigned char *ex, float *xq, float *wq, double *alpha)
{
    double best = INFINITY;
    *alpha = -1;
    for (size_t a = 0; a < sizeof search_alphas / sizeof search_alphas[0]; a++) {
        scales_for(fitpeak, wmax, g->K, search_alphas[a], s);
        double e = eval_error(g, el, s, ex, xq, wq, NULL, NULL);
        if (e < best) {
            best = e;
            *alpha = search_alphas[a];
        }
    }
    return best;
}

/* The outlier channels (ascending in *out, their count returned; 0 when there are none
 * or no more than half the channels are ordinary): peak >= ratio times the median
 * nonzero peak, at most K / 32 of them (the largest). */
static int64_t outlier_channels(const float *peak, int64_t K, double ratio, int64_t **out)
{
    *out = NULL;
    float *v = malloc((size_t)K * sizeof(float));
    int64_t n = 0, nz = 0;
    if (!v)
        return 0;
    for (int64_t j = 0; j < K; j++)
        if (peak[j] > 0)
            v[nz++] = peak[j];
    if (nz < 2) {
        free(v);
        return 0;
    }
    qsort(v, (size_t)nz, sizeof(float), cmp_float);
    double thr = ratio * v[nz / 2];
    int64_t cap = K / 32 > 0 ? K / 32 : 1;
    for (int64_t j = nz - 1; j >= 0 && v[j] >= thr; j--)
        n++;
    if (n > cap) { /* the cap largest: raise the threshold to the cap-th peak */
        n = cap;
        thr = v[nz - cap];
    }
    free(v);
    if (n == 0 || !(*out = malloc((size_t)n * sizeof(int64_t))))
        return 0;
    int64_t k = 0;
    for (int64_t j = 0; j < K && k < n; j++)
        if (peak[j] > 0 && peak[j] >= thr)
            (*out)[k++] = j;
    return k;
}

/* A gain counts when it exceeds split-z (default SQ_SPLIT_Z) standard errors over the
 * held-out samples (as calibration's choice, OQ_JUDGE_Z in src/job/job-impl.h), judged on
 * at least SQ_SPLIT_MIN_SAMPLES of them; split-z 0: no such rule */
#define SQ_SPLIT_Z 2.0
#define SQ_SPLIT_MIN_SAMPLES 3

/* sample i's relative error (eval_error's figure on its rows alone) from the per-sample
 * sums per (n_layers x ss->n) */
static double sample_error(const sq_group *g, const sq_eval_layer *el, const sq_samples *ss, const double *per, int i)
{
    double total = 0;
    for (size_t k = 0; k < g->n_layers; k++)
        total += el[k].sig_s[i] > 0 ? per[k * (size_t)ss->n + i] / el[k].sig_s[i] : 0;
    return total / (double)g->n_layers;
}

/* The mean over the held-out samples of each one's gain of a over b in dB (clamped to
 * +-150 dB, as verify's scores), and its standard error (*se); per sample, not the
 * pooled sums, so that one sample with large values cannot decide alone (the rule
 * calibration's choice follows, docs/calibration.md) */
static double sample_gain(const sq_group *g, const sq_eval_layer *el, const sq_samples *ss, const double *a,
                          const double *b, double *se)
{
    int n = ss->n;
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++) {
        double ea = sample_error(g, el, ss, a, i), eb = sample_error(g, el, ss, b, i);
        double gi = ea > 0 && eb > 0 ? 10 * log10(eb / ea) : ea > 0 ? -150 : eb > 0 ? 150 : 0;
        gi = gi > 150 ? 150 : gi < -150 ? -150 : gi;
        sum += gi;
        sq += gi * gi;
    }
    double mean = sum / n, var = (sq - n * mean * mean) / (n - 1);
    *se = sqrt((var > 0 ? var : 0) / n);
    return mean;
}

/* search, after alpha: split the outlier channels off (into a float MatMul of their
 * own) when that cuts the held-out error of the choice made without it by more than
 * split-min-gain-db and its mean gain per held-out sample is more than split-z standard
 * errors (it adds a Gather, and per layer a MatMul and an Add, at run time; with 8
 * calibration samples, 2 held out, 1-7 dB gains on classifier Gemms turned into 0.6-4.5
 * dB losses on other samples: bench/arch_sweep); alpha is then the best one with the
 * split, or 0 (not smoothed) */
static oq_status search_split(sq_group *g, const sq_eval_layer *el, const sq_samples *ss, const float *fitpeak,
                              const double *wmax, double *s, float *xq, float *wq, const oq_sq_params *p,
                              double fold_gain_db, oq_diag *d)
{
    int64_t K = g->K, *idx = NULL;
    int64_t n = outlier_channels(fitpeak, K, p->split_ratio, &idx);
    if (n == 0)
        return OQ_OK;
    unsigned char *ex = calloc((size_t)K, 1);
    if (!ex) {
        free(idx);
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    }
    for (int64_t k = 0; k < n; k++)
        ex[idx[k]] = 1;
    double best_alpha, best = best_of_alphas(g, el, fitpeak, wmax, s, ex, xq, wq, &best_alpha);
    /* the split alone (no smoothing) unless smoothing gains as much as it must without
     * the split (fold_gain_db: min-gain-db where 1/s folds into X's producer, else
     * min-gain-mul-db) */
    double e0 = eval_error(g, el, NULL, ex, xq, wq, NULL, NULL);
    if (!(best <= pow(10.0, -fold_gain_db / 10.0) * e0)) {
        best = e0;
        best_alpha = 0; /* s = 1 */
    }
    bool take = best < pow(10.0, -p->split_gain_db / 10.0) * g->err_best;
    g->n_split_samples = ss->n;
    g->split_se_db = INFINITY;
    g->split_gain_mean_db = 0;
    if (take && ss->n >= SQ_SPLIT_MIN_SAMPLES) { /* the gain against its noise */
        double *with = malloc(g->n_layers * (size_t)ss->n * sizeof(double));
        double *without = malloc(g->n_layers * (size_t)ss->n * sizeof(double));
        if (!with || !without) {
            free(with);
            free(without);
            free(ex);
            free(idx);
            return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        }
        if (best_alpha > 0)
            scales_for(fitpeak, wmax, K, best_alpha, s);
        eval_error(g, el, best_alpha > 0 ? s : NULL, ex, xq, wq, ss, with);
        if (g->alpha >= 0)
            scales_for(fitpeak, wmax, K, g->alpha, s);
        eval_error(g, el, g->alpha >= 0 ? s : NULL, NULL, xq, wq, ss, without);
        g->split_gain_mean_db = sample_gain(g, el, ss, with, without, &g->split_se_db);
        free(with);
        free(without);
    }
    take = take && (p->split_z == 0 || g->split_gain_mean_db > p->split_z * g->split_se_db);
    free(ex);
    if (take) {
        g->err_best = best;
        g->alpha = best_alpha;
        g->split = idx;
        g->n_split = n;
    } else
        free(idx);
    return OQ_OK;
}

/* search: g->alpha = the candidate with the smallest held-out output error, or -1 (left
 * alone) when X has no outlier channels, there is nothing to judge on, or the best
 * candidate does not cut the error by min-gain-db (1/s folded into X's producer: free)
 * or min-gain-mul-db (a Mul would be inserted: one more float op at run time); then the
 * split (search_split) */
static oq_status search_alpha(sq_group *g, const oq_sq_params *p, oq_diag *d)
{
    int64_t K = g->K;
    g->alpha = -1;
    g->ratio = peak_ratio(g->xmax, K);
    if (!(g->ratio >= p->outlier_ratio) || g->n_rows == 0 || !g->fit_seen)
        return OQ_OK;
    oq_status st = OQ_OK;
    sq_eval_layer *el = calloc(g->n_layers, sizeof(*el));
    double *wmax = calloc((size_t)K, sizeof(double));
    double *s = malloc((size_t)K * sizeof(double));
    float *xq = malloc((size_t)K * sizeof(float));
    float *fitpeak = malloc((size_t)K * sizeof(float));
    float *wq = NULL;
    sq_samples ss = {malloc((size_t)g->n_rows * sizeof(int)), 0};
    if (!el || !wmax || !s || !xq || !fitpeak || !ss.of) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t j = 0; j < K; j++) {
        double a = g->fmax[j] >= g->fmin[j] ? fmax(fabs(g->fmin[j]), fabs(g->fmax[j])) : 0;
        fitpeak[j] = (float)a;
    }
    /* the samples of the rows, numbered 0.. in order of first appearance */
    for (int64_t r = 0; r < g->n_rows; r++) {
        int64_t q = 0;
        while (q < r && g->row_sample[q] != g->row_sample[r])
            q++;
        ss.of[r] = q < r ? ss.of[q] : ss.n++;
    }
    int64_t max_nc = 0;
    for (size_t k = 0; k < g->n_layers && st == OQ_OK; k++) {
        sq_layer *ly = &g->layers[k];
        double dummy = 0;
        if ((st = weight_absmax(ly, K, wmax, &dummy, d)) != OQ_OK)
            break;
        int64_t n;
        double *w = const_values(ly->n->inputs[1], &n, d);
        if (!w) {
            st = OQ_ERR_INVALID;
            break;
        }
        int64_t N = n / K, nc = N < SQ_SEARCH_COLS ? N : SQ_SEARCH_COLS;
        sq_eval_layer *l = &el[k];
        l->nc = nc;
        l->w = malloc((size_t)(K * nc) * sizeof(double));
        l->yref = malloc((size_t)(g->n_rows * nc) * sizeof(double));
        l->sig_s = calloc((size_t)ss.n, sizeof(double));
        if (!l->w || !l->yref || !l->sig_s) {
            free(w);
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            break;
        }
        for (int64_t c = 0; c < nc; c++) {
            int64_t col = c * N / nc; /* evenly spread */
            for (int64_t j = 0; j < K; j++)
                l->w[c * K + j] = ly->w_transposed ? w[col * K + j] : w[j * N + col];
        }
        free(w);
        for (int64_t r = 0; r < g->n_rows; r++)
            for (int64_t c = 0; c < nc; c++) {
                double y = 0;
                for (int64_t j = 0; j < K; j++)
                    y += (double)g->rows[r * K + j] * l->w[c * K + j];
                l->yref[r * nc + c] = y;
                l->sig += y * y;
                l->sig_s[ss.of[r]] += y * y;
            }
        if (nc > max_nc)
            max_nc = nc;
    }
    if (st != OQ_OK)
        goto done;
    if (!(wq = malloc((size_t)(K * max_nc) * sizeof(float)))) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    g->err_off = g->err_best = eval_error(g, el, NULL, NULL, xq, wq, NULL, NULL);
    double best_alpha, best = best_of_alphas(g, el, fitpeak, wmax, s, NULL, xq, wq, &best_alpha);
    double need_db = only_layers_use(g) && can_fold(g->x, K, 0) ? p->min_gain_db : p->min_gain_mul_db;
    double gain = pow(10.0, -need_db / 10.0);
    if (best <= gain * g->err_off) {
        g->err_best = best;
        g->alpha = best_alpha;
    }
    g->err_nosplit = g->err_best;
    if (p->split_ratio > 0 &&
        (st = search_split(g, el, &ss, fitpeak, wmax, s, xq, wq, p, need_db, d)) != OQ_OK)
        goto done;
done:
    eval_layers_free(el, g->n_layers);
    free(wmax);
    free(s);
    free(xq);
    free(fitpeak);
    free(wq);
    free(ss.of);
    return st;
}

/* Phase 1, from the weights as they are in the float model: s per channel, and the
 * maxima before and after for the report. */
static oq_status compute_scales(sq_group *g, double alpha, oq_diag *d)
{
    int64_t K = g->K;
    double *wmax = calloc((size_t)K, sizeof(double));
    g->s = malloc((size_t)K * sizeof(double));
    oq_status st = OQ_OK;
    if (!wmax || !g->s) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < g->n_layers && st == OQ_OK; k++) {
        g->layers[k].w_before = 0.0; /* weight_absmax raises it */
        st = weight_absmax(&g->layers[k], K, wmax, &g->layers[k].w_before, d);
    }
    if (st != OQ_OK)
        goto done;
    if (g->n_split > 0 && alpha == 0) /* the split alone: X is not smoothed */
        for (int64_t j = 0; j < K; j++)
            g->s[j] = 1.0;
    else
        scales_for(g->xmax, wmax, K, alpha, g->s);
    for (int64_t k = 0; k < g->n_split; k++)
        g->s[g->split[k]] = 1.0; /* split off: computed in float as they are */
    for (int64_t j = 0, k = 0; j < K; j++) {
        if (k < g->n_split && g->split[k] == j) {
            k++;
            continue;
        }
        double xm = g->xmax[j];
        if (xm > g->x_before)
            g->x_before = xm;
        if (xm / g->s[j] > g->x_after)
            g->x_after = xm / g->s[j];
    }
done:
    free(wmax);
    return st;
}

/* Phase 2: W * s in every layer, 1/s into X's producer or a new Mul. */
static oq_status apply_scales(sq_group *g, oq_pass_result *res, oq_diag *d)
{
    int64_t K = g->K;
    double *inv = malloc((size_t)K * sizeof(double));
    oq_status st = OQ_OK;
    if (!inv)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; j < K; j++)
        inv[j] = 1.0 / g->s[j];
    const char *xname = g->orig_name;
    char *where = g->where;
    size_t wsize = sizeof g->where;
    if (only_layers_use(g) && can_fold(g->x, K, 0)) {
        describe_fold(g->x, where, wsize);
        st = fold(g->x, K, inv, d);
        if (st != OQ_OK)
            goto done;
        g->now = g->x->name;
        oq_pass_stat_add(res, "scales_folded", 1);
    } else {
        oq_graph *gr = g->x->kind == OQ_VALUE_NODE && g->x->producer ? g->x->producer->graph : g->layers[0].n->graph;
        char base[300];
        snprintf(base, sizeof base, "%s_smooth_scale", xname);
        oq_value *sv = oq_pass_new_initializer(gr, base, OQ_DTYPE_FLOAT, &K, 1, inv);
        snprintf(base, sizeof base, "%s_smooth", xname);
        char *oname = oq_graph_unique_name(gr, base);
        oq_value *out = oname ? oq_graph_new_value(gr, oname) : NULL;
        oq_value *ins[2] = {g->x, sv};
        oq_node *mul = sv && out ? oq_node_new(gr, "Mul", "", oname, ins, 2, &out, 1) : NULL;
        if (!mul) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            goto done;
        }
        if (g->x->kind == OQ_VALUE_NODE && g->x->producer)
            oq_graph_insert_after(gr, g->x->producer, mul);
        else
            oq_graph_insert_before(gr, gr->first, mul);
        for (size_t k = 0; k < g->n_layers; k++)
            oq_node_set_input(g->layers[k].n, 0, out);
        snprintf(where, wsize, "Mul \"%s\" inserted", oname);
        g->now = out->name;
        oq_pass_stat_add(res, "muls_inserted", 1);
    }
    for (size_t k = 0; k < g->n_layers && st == OQ_OK; k++) {
        sq_layer *l = &g->layers[k];
        st = scale_const(l->n, 1, g->s, l->w_transposed ? 0 : 1, 0, "smooth", d);
        oq_pass_stat_add(res, "layers_smoothed", 1);
    }
done:
    free(inv);
    return st;
}

/* Phase 2b, for a group with channels split off: their weight rows are zeroed in every
 * layer (so the layer's 8-bit input may clip them: calibrate gives it the range of the
 * other channels), and a float MatMul of the split channels (Gather on X's last axis)
 * times those rows is added to each layer's output, after its bias Add when it has one
 * (onnxruntime fuses MatMul + bias). The names of the new nodes go to kn, those of the
 * two values the Add joins to kv: insert-qdq leaves them float. */
static oq_status apply_split(sq_group *g, oq_model *m, cJSON *kn, cJSON *kv, oq_pass_result *res, oq_diag *d)
{
    int64_t K = g->K, n = g->n_split;
    oq_node *l0 = g->layers[0].n;
    oq_graph *gr = l0->graph;
    oq_value *xs = l0->inputs[0];
    bool layers_only = layers_alone_read(g, xs); /* X, or the smoothing's Mul */
    double *mask = malloc((size_t)K * sizeof(double));
    oq_status st = OQ_OK;
    if (!mask)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; j < K; j++)
        mask[j] = 1.0;
    for (int64_t k = 0; k < n; k++)
        mask[g->split[k]] = 0.0;
    char base[300];
    snprintf(base, sizeof base, "%s_split_index", g->orig_name);
    char *iname = oq_graph_unique_name(gr, base);
    oq_value *iv = iname ? oq_graph_new_value(gr, iname) : NULL;
    oq_tensor *it = iv ? oq_tensor_new(m, iname, OQ_DTYPE_INT64, &n, 1, g->split, n * (int64_t)sizeof(int64_t)) : NULL;
    snprintf(base, sizeof base, "%s_outliers", g->orig_name);
    char *oname = oq_graph_unique_name(gr, base);
    oq_value *xo = oname ? oq_graph_new_value(gr, oname) : NULL;
    oq_value *gins[2] = {xs, iv};
    oq_node *gat = it && xo && oq_graph_set_initializer(gr, iv, it) == OQ_OK
                       ? oq_node_new(gr, "Gather", "", oname, gins, 2, &xo, 1)
                       : NULL;
    if (!gat || !oq_node_set_attr_int(gat, "axis", -1)) {
        free(mask);
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    }
    if (xs->kind == OQ_VALUE_NODE && xs->producer)
        oq_graph_insert_after(gr, xs->producer, gat);
    else
        oq_graph_insert_before(gr, gr->first, gat);
    if (!layers_only) {
        /* X is read by more than the layers (a residual Add: a smoothing there would have
           inserted a Mul, which only the layers read): their input range must not clip the
           split channels for the other readers, so the layers read Mul(X, mask) */
        snprintf(base, sizeof base, "%s_split_mask", g->orig_name);
        oq_value *mv = oq_pass_new_initializer(gr, base, OQ_DTYPE_FLOAT, &K, 1, mask);
        snprintf(base, sizeof base, "%s_inliers", g->orig_name);
        char *mname = oq_graph_unique_name(gr, base);
        oq_value *xm = mname ? oq_graph_new_value(gr, mname) : NULL;
        oq_value *mins[2] = {xs, mv};
        oq_node *mul = mv && xm ? oq_node_new(gr, "Mul", "", mname, mins, 2, &xm, 1) : NULL;
        if (!mul) {
            free(mask);
            return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        }
        oq_graph_insert_after(gr, gat, mul);
        for (size_t k = 0; k < g->n_layers; k++)
            oq_node_set_input(g->layers[k].n, 0, xm);
        g->now = xm->name;
        oq_pass_stat_add(res, "split_masks_inserted", 1);
    }
    for (size_t k = 0; k < g->n_layers && st == OQ_OK; k++) {
        sq_layer *l = &g->layers[k];
        int64_t cnt;
        double *w = const_values(l->n->inputs[1], &cnt, d);
        if (!w) {
            st = OQ_ERR_INVALID;
            break;
        }
        int64_t N = cnt / K, dims[2] = {n, N};
        double ga = oq_pass_is_op(l->n, "Gemm") ? oq_node_attr_float(l->n, "alpha", 1.0f) : 1.0;
        double *wo = malloc((size_t)(n * N) * sizeof(double));
        if (!wo) {
            free(w);
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            break;
        }
        for (int64_t r = 0; r < n; r++)
            for (int64_t col = 0; col < N; col++)
                wo[r * N + col] = ga * (l->w_transposed ? w[col * K + g->split[r]] : w[g->split[r] * N + col]);
        free(w);
        char lb[200];
        const char *lname = oq_node_label(l->n, lb, sizeof lb);
        snprintf(base, sizeof base, "%s_outlier_weight", lname);
        oq_value *wv = oq_pass_new_initializer(gr, base, OQ_DTYPE_FLOAT, dims, 2, wo);
        free(wo);
        /* where the product joins: the layer's output, or its bias Add's */
        oq_node *at = l->n;
        oq_value *y = l->n->outputs[0];
        if (y && y->n_uses == 1 && !oq_value_is_graph_output(y) && oq_pass_is_op(y->uses[0].node, "Add") &&
            y->uses[0].node->n_inputs == 2 && y->uses[0].node->n_outputs == 1 &&
            oq_value_const_tensor(y->uses[0].node->inputs[1 - y->uses[0].index])) {
            /* the layer's own output holds other numbers now (the inlier part): a new
               name, so that tools matching tensors by name (verify, the fallback's
               ranking) leave it out instead of reporting a false error */
            at = y->uses[0].node;
            size_t ui = y->uses[0].index;
            snprintf(base, sizeof base, "%s_inliers", y->name ? y->name : lname);
            char *lyn = oq_graph_unique_name(gr, base);
            oq_value *ly = lyn ? oq_graph_new_value(gr, lyn) : NULL;
            if (!ly || oq_node_set_output(l->n, 0, ly) != OQ_OK || oq_node_set_input(at, ui, ly) != OQ_OK) {
                st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
                break;
            }
            cJSON_AddItemToArray(kv, cJSON_CreateString(ly->name));
            y = at->outputs[0];
        }
        snprintf(base, sizeof base, "%s_outliers", lname);
        char *pname = oq_graph_unique_name(gr, base);
        oq_value *yo = pname ? oq_graph_new_value(gr, pname) : NULL;
        snprintf(base, sizeof base, "%s_inliers", y && y->name ? y->name : lname);
        char *yiname = oq_graph_unique_name(gr, base);
        oq_value *yi = yiname ? oq_graph_new_value(gr, yiname) : NULL;
        oq_value *pins[2] = {xo, wv};
        oq_node *mm = wv && yo ? oq_node_new(gr, "MatMul", "", pname, pins, 2, &yo, 1) : NULL;
        snprintf(base, sizeof base, "%s_add_outliers", lname);
        char *aname = oq_graph_unique_name(gr, base);
        if (!mm || !yi || !y || !aname) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            break;
        }
        if ((st = oq_node_set_output(at, 0, yi)) != OQ_OK)
            break;
        oq_value *ains[2] = {yi, yo};
        oq_node *add = oq_node_new(gr, "Add", "", aname, ains, 2, &y, 1);
        if (!add) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            break;
        }
        oq_graph_insert_after(gr, at, mm);
        oq_graph_insert_after(gr, mm, add);
        if ((st = scale_const(l->n, 1, mask, l->w_transposed ? 0 : 1, 0, "split", d)) != OQ_OK)
            break;
        /* float: the MatMul, the Gather, and the parts the Add joins (made after
           calibration's run: no ranges, and nothing gains from a Q/DQ on them) */
        cJSON_AddItemToArray(kn, cJSON_CreateString(pname));
        if (k == 0)
            cJSON_AddItemToArray(kn, cJSON_CreateString(oname));
        cJSON_AddItemToArray(kv, cJSON_CreateString(yi->name));
        cJSON_AddItemToArray(kv, cJSON_CreateString(yo->name));
        l->split_mm = mm->name;
        oq_pass_stat_add(res, "layers_split", 1);
    }
    if (st == OQ_OK)
        oq_pass_stat_add(res, "channels_split", n);
    free(mask);
    return st;
}

/* Phase 3, after every group is applied (a fold may rescale another group's layer):
 * one note per layer and its JSON record, with the weights as they are now. */
static bool channel_range(const sq_group *g, const float *lo, const float *hi, bool skip_split, float *mn,
                          float *mx);

static oq_status report_group(const sq_group *g, FILE *js, bool *first, oq_diag *d)
{
    double *wm = calloc((size_t)g->K, sizeof(double));
    if (!wm)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    oq_status st = OQ_OK;
    for (size_t k = 0; k < g->n_layers && st == OQ_OK; k++) {
        const sq_layer *l = &g->layers[k];
        double w_after = 0;
        if ((st = weight_absmax(l, g->K, wm, &w_after, d)) != OQ_OK)
            break;
        char lbuf[200];
        const char *lb = oq_node_label(l->n, lbuf, sizeof lbuf);
        char why[300] = "";
        if (g->err_off > 0 && g->n_split > 0) /* chosen by search, with channels split off */
            snprintf(why, sizeof why,
                     "; alpha %.1f and %lld outlier channel(s) split off into the float MatMul \"%s\": held-out "
                     "output SQNR %.1f -> %.1f dB (%.1f without the split; per sample %+.1f +-%.2f dB, %d samples)",
                     g->alpha, (long long)g->n_split, l->split_mm ? l->split_mm : "", -10 * log10(g->err_off),
                     -10 * log10(g->err_best), -10 * log10(g->err_nosplit), g->split_gain_mean_db, g->split_se_db,
                     g->n_split_samples);
        else if (g->err_off > 0) /* chosen by search */
            snprintf(why, sizeof why, "; alpha %.1f: held-out output SQNR %.1f -> %.1f dB", g->alpha,
                     -10 * log10(g->err_off), -10 * log10(g->err_best));
        oq_diag_add(d, OQ_SEV_NOTE, OQ_OK, NULL, lb, l->n->op_type,
                    "smooth-quant: input \"%s\" (%lld channels): 1/s %s; max|X| %.6g -> %.6g, max|W| %.6g -> %.6g%s",
                    g->orig_name, (long long)g->K, g->where, g->x_before, g->x_after, l->w_before, w_after, why);
        fputs(*first ? "{\"node\":" : ",{\"node\":", js);
        *first = false;
        json_str(js, lb);
        fputs(",\"op\":", js);
        json_str(js, l->n->op_type);
        fputs(",\"input\":", js);
        json_str(js, g->orig_name);
        fputs(",\"smoothed_input\":", js);
        json_str(js, g->now);
        fprintf(js, ",\"channels\":%lld,\"scale_to\":", (long long)g->K);
        json_str(js, g->where);
        json_num(js, "x_max_before", g->x_before);
        json_num(js, "x_max_after", g->x_after);
        json_num(js, "w_max_before", l->w_before);
        json_num(js, "w_max_after", w_after);
        json_num(js, "alpha", g->alpha);
        if (g->err_off > 0) {
            fputs(",\"range\":\"minmax\"", js); /* what the search judged: calibrate follows */
            json_num(js, "peak_ratio", g->ratio);
            json_num(js, "heldout_sqnr_db_before", -10 * log10(g->err_off));
            json_num(js, "heldout_sqnr_db_after", -10 * log10(g->err_best));
        }
        float smin, smax;
        if (g->n_split > 0 && channel_range(g, g->amin, g->amax, true, &smin, &smax)) {
            /* the layer's input range without the split channels: calibrate sets it */
            json_num(js, "split_min", smin);
            json_num(js, "split_max", smax);
        }
        if (g->n_split > 0) {
            fprintf(js, ",\"split_channels\":%lld,\"split_matmul\":", (long long)g->n_split);
            json_str(js, l->split_mm ? l->split_mm : "");
            json_num(js, "heldout_sqnr_db_without_split", -10 * log10(g->err_nosplit));
            json_num(js, "split_gain_per_sample_db", g->split_gain_mean_db);
            json_num(js, "split_gain_se_db", g->split_se_db);
            fprintf(js, ",\"split_heldout_samples\":%d", g->n_split_samples);
        }
        fputc('}', js);
    }
    free(wm);
    return st;
}

/* one-pass mode: the tensors a fold of each group would scale besides X (describe_fold's
 * walk: the input of each Relu / LeakyRelu / Add(constant) from X up) */
static oq_status find_chains(sq_ctx *c)
{
    c->chain_by_id = malloc(c->n_ids * sizeof(int32_t));
    if (!c->chain_by_id)
        return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < c->n_ids; i++)
        c->chain_by_id[i] = -1;
    for (size_t gi = 0; gi < c->n_groups; gi++) {
        sq_group *g = &c->groups[gi];
        if (!only_layers_use(g) || !can_fold(g->x, g->K, 0))
            continue;
        for (const oq_node *p = g->x->producer; p && g->n_chain < OQ_SQ_CHAIN_MAX;) {
            oq_value *u = NULL;
            if (oq_pass_is_op(p, "Relu") || oq_pass_is_op(p, "LeakyRelu"))
                u = p->inputs[0];
            else if (oq_pass_is_op(p, "Add"))
                u = p->inputs[1 - const_input(p)];
            if (!u || u->id >= c->n_ids)
                break;
            c->chain_by_id[u->id] = (int32_t)(gi * OQ_SQ_CHAIN_MAX + (size_t)g->n_chain);
            g->chain[g->n_chain++] = u;
            p = u->kind == OQ_VALUE_NODE ? u->producer : NULL;
        }
    }
    return OQ_OK;
}

void oq_sq_params_default(oq_sq_params *p)
{
    memset(p, 0, sizeof *p);
    p->alpha = 0.5;
    p->outlier_ratio = 1.0;
    p->min_gain_db = 1.0;
    p->min_gain_mul_db = 3.0;
    p->split_ratio = 4.0;
    p->split_gain_db = 1.0;
    p->split_z = SQ_SPLIT_Z;
}

struct oq_sq_run {
    sq_ctx c;
    uint64_t samples;
};

void oq_sq_free(oq_sq_run *r)
{
    if (!r)
        return;
    sq_ctx *c = &r->c;
    for (size_t i = 0; i < c->n_groups; i++) {
        free(c->groups[i].layers);
        free(c->groups[i].xmax);
        free(c->groups[i].s);
        free(c->groups[i].orig_name);
        free(c->groups[i].fmin);
        free(c->groups[i].fmax);
        free(c->groups[i].amin);
        free(c->groups[i].amax);
        for (int k = 0; k < c->groups[i].n_chain; k++) {
            free(c->groups[i].chain_orig[k]);
            free(c->groups[i].cmin[k]);
            free(c->groups[i].cmax[k]);
        }
        free(c->groups[i].rows);
        free(c->groups[i].row_sample);
        free(c->groups[i].split);
    }
    free(c->groups);
    free(c->by_id);
    free(c->chain_by_id);
    free(r);
}

oq_status oq_sq_begin(oq_model *m, const oq_sq_params *p, bool all_minmax, oq_sq_run **out, oq_calib_hooks *h,
                      oq_diag *d)
{
    *out = NULL;
    memset(h, 0, sizeof *h);
    if (!(p->alpha >= 0 && p->alpha <= 1))
        return oq_diag_error(d, OQ_ERR_USAGE, "smooth-quant: alpha %g is outside [0, 1]", p->alpha);
    if (!(p->outlier_ratio >= 1))
        return oq_diag_error(d, OQ_ERR_USAGE, "smooth-quant: outlier-ratio %g must be >= 1", p->outlier_ratio);
    if (!(p->split_ratio == 0 || p->split_ratio >= 1) || !(p->split_gain_db >= 0) || !(p->split_z >= 0))
        return oq_diag_error(d, OQ_ERR_USAGE,
                             "smooth-quant: split-ratio must be 0 or >= 1, split-min-gain-db and split-z >= 0");
    if (!(p->min_gain_db >= 0) || !(p->min_gain_mul_db >= 0))
        return oq_diag_error(d, OQ_ERR_USAGE, "smooth-quant: min-gain-db and min-gain-mul-db must be >= 0");
    if (!m->graph)
        return oq_diag_error(d, OQ_ERR_INVALID, "model has no graph");
    oq_sq_run *r = calloc(1, sizeof *r);
    if (!r)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    sq_ctx *c = &r->c;
    c->d = d;
    c->p = *p;
    c->search = p->search;
    c->all_minmax = all_minmax;
    c->n_ids = m->next_id + 1;
    c->by_id = malloc(c->n_ids * sizeof(int32_t));
    oq_status st = OQ_OK;
    if (!c->by_id) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < c->n_ids; i++)
        c->by_id[i] = -1;
    if ((st = collect(c, m->graph)) != OQ_OK)
        goto fail;
    if (all_minmax && (st = find_chains(c)) != OQ_OK)
        goto fail;
    if (c->search) { /* rows kept for the search: at most 128 per input, 256 MiB in all */
        int64_t ksum = 0;
        for (size_t i = 0; i < c->n_groups; i++)
            ksum += c->groups[i].K;
        int64_t cap = (int64_t)(((int64_t)256 << 20) / (int64_t)sizeof(float) / (ksum > 0 ? ksum : 1));
        cap = cap > 128 ? 128 : cap < 16 ? 16 : cap;
        for (size_t i = 0; i < c->n_groups; i++) {
            c->groups[i].n_cap = cap;
            c->groups[i].rng = 0x5eed0000u + i;
        }
    }
    h->on_tensor = on_tensor;
    h->on_input = on_input;
    h->begin_sample = begin_sample;
    h->check = check;
    h->user = c;
    *out = r;
    return OQ_OK;
fail:
    oq_sq_free(r);
    return st;
}

size_t oq_sq_n_inputs(const oq_sq_run *r)
{
    return r ? r->c.n_groups : 0;
}

oq_status oq_sq_finish(oq_sq_run *r, oq_model *m, uint64_t samples, oq_pass_result *res, oq_diag *d)
{
    sq_ctx *c = &r->c;
    oq_status st = OQ_OK;
    char *json = NULL;
    size_t json_len = 0;
    FILE *js = NULL;
    r->samples = samples;
    oq_pass_stat_add(res, "samples", (int64_t)samples);
    uint64_t nonfinite = 0;
    for (size_t i = 0; i < c->n_groups; i++)
        nonfinite += c->groups[i].nonfinite;
    if (nonfinite) {
        oq_pass_stat_add(res, "nonfinite_skipped", (int64_t)nonfinite);
        oq_diag_warn(d, "smooth-quant: %llu NaN/Inf values in MatMul/Gemm inputs left out of max|X|",
                     (unsigned long long)nonfinite);
    }
    js = open_memstream(&json, &json_len);
    if (!js)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    if (c->search)
        fputs("{\"alpha\":\"search\",\"layers\":[", js);
    else
        fprintf(js, "{\"alpha\":%.17g,\"layers\":[", c->p.alpha);
    bool first = true, changed = false;
    for (size_t i = 0; i < c->n_groups && st == OQ_OK; i++) {
        sq_group *g = &c->groups[i];
        g->orig_name = strdup(g->x->name ? g->x->name : "");
        g->alpha = c->p.alpha;
        bool chain_ok = true;
        for (int k = 0; k < g->n_chain; k++)
            chain_ok = chain_ok && (g->chain_orig[k] = strdup(g->chain[k]->name ? g->chain[k]->name : "")) != NULL;
        if (!g->orig_name || !chain_ok)
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        else if (!g->seen)
            oq_pass_stat_add(res, "inputs_not_observed", 1);
        else if (c->search &&
                 (st = search_alpha(g, &c->p, d)) != OQ_OK)
            break;
        else if (g->alpha < 0)
            oq_pass_stat_add(res, "inputs_left", 1);
        else
            st = compute_scales(g, g->alpha, d);
    }
    /* what insert-qdq leaves float: {"nodes": [...], "values": [...]}, with what an
       earlier run put there */
    cJSON *keep = NULL;
    const char *old = oq_model_get_metadata(m, OQ_KEEP_FLOAT_METADATA_KEY);
    if (!old || oq_json_parse(old, strlen(old), OQ_KEEP_FLOAT_METADATA_KEY, &keep, NULL) != OQ_OK ||
        !cJSON_IsObject(keep)) {
        cJSON_Delete(keep);
        keep = cJSON_CreateObject();
    }
    cJSON *kn = keep ? cJSON_GetObjectItemCaseSensitive(keep, "nodes") : NULL;
    cJSON *kv = keep ? cJSON_GetObjectItemCaseSensitive(keep, "values") : NULL;
    if (keep && !cJSON_IsArray(kn))
        kn = cJSON_AddArrayToObject(keep, "nodes");
    if (keep && !cJSON_IsArray(kv))
        kv = cJSON_AddArrayToObject(keep, "values");
    if (!keep || !kn || !kv)
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    int64_t n_split = 0;
    for (size_t i = 0; i < c->n_groups && st == OQ_OK; i++) {
        if (!c->groups[i].seen || c->groups[i].alpha < 0)
            continue;
        if (c->groups[i].n_split > 0 && c->groups[i].alpha == 0) { /* split only: X as it is */
            snprintf(c->groups[i].where, sizeof c->groups[i].where, "not applied (alpha 0: the split alone)");
            c->groups[i].now = c->groups[i].x->name;
        } else
            st = apply_scales(&c->groups[i], res, d);
        if (st == OQ_OK && c->groups[i].n_split > 0) {
            st = apply_split(&c->groups[i], m, kn, kv, res, d);
            n_split++;
        }
        changed = true;
    }
    if (st == OQ_OK && n_split > 0) {
        char *txt = cJSON_PrintUnformatted(keep);
        if (txt)
            oq_model_set_metadata(m, OQ_KEEP_FLOAT_METADATA_KEY, txt);
        else
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        cJSON_free(txt);
    }
    cJSON_Delete(keep);
    for (size_t i = 0; i < c->n_groups && st == OQ_OK; i++)
        if (c->groups[i].seen && c->groups[i].alpha >= 0)
            st = report_group(&c->groups[i], js, &first, d);
    fputs("]}", js);
    fclose(js);
    if (st == OQ_OK && changed) {
        res->changed = true;
        oq_pass_prune_value_info(m->graph);
        oq_model_set_metadata(m, OQ_SMOOTH_METADATA_KEY, json);
    }
    free(json);
    return st;
}

/* [min_j lo_j / s_j, max_j hi_j / s_j] over the channels seen (false: none), but for
 * the channels split off when skip_split */
static bool channel_range(const sq_group *g, const float *lo, const float *hi, bool skip_split, float *mn,
                          float *mx)
{
    if (!lo || !hi)
        return false;
    double a = INFINITY, b = -INFINITY;
    for (int64_t j = 0, k = 0; j < g->K; j++) {
        if (skip_split && k < g->n_split && g->split[k] == j) {
            k++;
            continue; /* the layers read it as 0 */
        }
        if (!(lo[j] <= hi[j]))
            continue; /* never finite */
        double inv = 1.0 / g->s[j];
        if (lo[j] * inv < a)
            a = lo[j] * inv;
        if (hi[j] * inv > b)
            b = hi[j] * inv;
    }
    if (!(a <= b))
        return false;
    if (skip_split && g->n_split > 0) { /* the zeros in place of the split channels */
        a = a < 0 ? a : 0;
        b = b > 0 ? b : 0;
    }
    *mn = (float)a;
    *mx = (float)b;
    return true;
}

bool oq_sq_smoothed(const oq_sq_run *r, size_t i, oq_sq_input *out)
{
    memset(out, 0, sizeof *out);
    if (!r || i >= r->c.n_groups)
        return false;
    const sq_group *g = &r->c.groups[i];
    if (!g->seen || g->alpha < 0 || !g->s)
        return false;
    out->orig = g->orig_name;
    out->now = g->now;
    bool folded = g->x->name && strcmp(g->x->name, g->orig_name) != 0;
    /* the split alone, the layers reading X itself: X's own entry gets the new range */
    out->replaced = folded || (g->now && strcmp(g->now, g->orig_name) == 0);
    out->judged_minmax = g->err_off > 0;
    /* X/s is X per channel times 1/s (s > 0): its extremes are the channels' extremes
     * scaled; so are those of the tensors a fold through Relu/LeakyRelu/Add scaled. */
    out->derived = channel_range(g, g->amin, g->amax, true, &out->min, &out->max) && !(folded && g->chain_bad);
    out->n_chain = 0;
    if (folded) /* the chain was scaled too */
        for (int k = 0; k < g->n_chain && out->derived; k++) {
            sq_chain_range *cr = &out->chain[out->n_chain++];
            cr->orig = g->chain_orig[k];
            cr->now = g->chain[k]->name;
            if (!g->cmin[k]) /* never observed (e.g. a branch not taken): no range to give */
                cr->now = NULL;
            else if (!channel_range(g, g->cmin[k], g->cmax[k], false, &cr->min, &cr->max))
                cr->now = NULL;
        }
    return true;
}

static oq_status run(oq_model *m, const oq_pass_options *opts, oq_pass_result *res, oq_diag *d)
{
    oq_sq_params p;
    oq_sq_params_default(&p);
    p.alpha = oq_pass_opt_float(opts, "alpha", 0.5);
    p.search = oq_pass_opt_bool(opts, "search", false);
    p.outlier_ratio = oq_pass_opt_float(opts, "outlier-ratio", 1.0);
    p.min_gain_db = oq_pass_opt_float(opts, "min-gain-db", 1.0);
    p.min_gain_mul_db = oq_pass_opt_float(opts, "min-gain-mul-db", 3.0);
    p.split_ratio = oq_pass_opt_float(opts, "split-ratio", 4.0);
    p.split_gain_db = oq_pass_opt_float(opts, "split-min-gain-db", 1.0);
    p.split_z = oq_pass_opt_float(opts, "split-z", SQ_SPLIT_Z);
    oq_sq_run *r = NULL;
    oq_calib_hooks h;
    oq_status st = oq_sq_begin(m, &p, false, &r, &h, d);
    if (st != OQ_OK)
        return st;
    oq_calib_source *src = NULL;
    if ((st = oq_pass_calib_source(opts, "smooth-quant", &src, d)) != OQ_OK || oq_sq_n_inputs(r) == 0)
        goto done;
    oq_calib_progress_state ps;
    memset(&ps, 0, sizeof ps);
    ps.what = "smooth-quant";
    h.threads = (int)oq_pass_opt_int(opts, "threads", 0);
    h.progress = oq_pass_opt_bool(opts, "progress", false) ? oq_calib_progress_stderr : NULL;
    h.progress_user = &ps;
    uint64_t samples = 0;
    if ((st = oq_calib_run(m, src, &h, &samples, d)) != OQ_OK)
        goto done;
    st = oq_sq_finish(r, m, samples, res, d);
done:
    oq_sq_free(r);
    oq_calib_source_free(src);
    return st;
}

static const oq_pass_option_def options[] = {
    {"alpha", OQ_OPT_FLOAT, "0.5", "migration strength in [0, 1]: 0 leaves X, 1 moves all of max|X| into W"},
    {"search", OQ_OPT_BOOL, "false",
     "choose alpha per input (0.3..0.9, or none) by the layer outputs' error on held-out calibration samples"},
    {"outlier-ratio", OQ_OPT_FLOAT, "1",
     "search: only inputs whose largest channel peak is at least this many times the median one"},
    {"min-gain-db", OQ_OPT_FLOAT, "1", "search: smooth only when the held-out output SQNR rises by this much"},
    {"min-gain-mul-db", OQ_OPT_FLOAT, "3",
     "search: the same where 1/s cannot be folded into X's producer and a Mul is inserted"},
    {"split-ratio", OQ_OPT_FLOAT, "4",
     "search: channels whose peak is at least this many times the median one (at most K/32) may be split off "
     "into a float MatMul of their own (0: never)"},
    {"split-min-gain-db", OQ_OPT_FLOAT, "1",
     "search: split them off when the held-out output SQNR rises by more than this over the best choice without"},
    {"split-z", OQ_OPT_FLOAT, "2",
     "search: and when the mean gain per held-out sample exceeds this many standard errors of it, on at least 3 "
     "samples (0: no such rule)"},
    OQ_PASS_CALIB_SOURCE_OPTIONS,
    {"threads", OQ_OPT_INT, "0", "executor threads (0: one per CPU)"},
    {"progress", OQ_OPT_BOOL, "false", "progress on stderr (a bar on a terminal)"},
};

const oq_pass oq_pass_smooth_quant = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "smooth-quant",
    .summary = "SmoothQuant: move activation outliers of MatMul/Gemm inputs into the weights (per-channel "
               "scales from calibration samples)",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .run = run,
};
