/* quantize-weights: weight-only quantization of the constant B of MatMul (and Gemm) in
 * blocks along the reduction axis, with round to nearest (algo=rtn) or GPTQ (algo=gptq,
 * calibration samples: include/onnxq/gptq.h). Activations stay float. Output as
 *   format=qdq          B -> DequantizeLinear(Bq int4/uint4/int8/uint8, scale[, zp];
 *                       axis, block_size) [-> Cast to float when the scales are float16]
 *                       (opset 21)
 *   format=matmulnbits  the node -> com.microsoft MatMulNBits(A, B packed uint8
 *                       [N, n_blocks, blob], scales [N*n_blocks][, zero_points packed
 *                       [N * ceil(n_blocks*bits/8)]], bias) with K, N, bits, block_size,
 *                       accuracy_level (onnxruntime's layout)
 * docs/passes/quantize-weights.md, docs/weight-only.md. */
#include "pass-impl.h"

#include <inttypes.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "onnxq/calib.h"
#include "onnxq/awq.h"
#include "onnxq/exec.h"
#include "onnxq/gptq.h"
#include "onnxq/quant.h"

#define WHO "quantize-weights"

typedef struct wq_cfg {
    oq_wq_spec spec;
    bool nbits;              /* format=matmulnbits */
    int32_t scale_dtype;     /* FLOAT or FLOAT16 */
    int64_t accuracy_level;
    bool gptq, sequential, progress, act_order;
    bool awq, awq_fold_only;  /* algo=awq; awq-fold-only: scales folded, weights left float */
    bool awq_clip;            /* awq: clip search per block after the scaling */
    int awq_grid;
    int64_t chunk;            /* inputs per sweep (gptq 0: 1 if sequential, else all; awq 0: all) */
    bool cache;               /* gptq: sweeps run one segment on the cached boundary values */
    double damp;
    int threads;
    bool progress_rtn;       /* RTN: "weight n of N, ETA" (progress_step) */
    const char *op_types;
    regex_t inc, exc;
    bool has_inc, has_exc;
} wq_cfg;

/* One MatMul/Gemm whose B is quantized. */
typedef struct wq_target {
    oq_node *node;
    oq_value *w;             /* the float initializer */
    int64_t K, N;
    bool trans;              /* B stored [N, K] (Gemm transB=1) */
    int32_t wdt;             /* B's type: float32, float16 or bfloat16 (scales and bias of that type) */
    int32_t *q;              /* [K*N] after quantization */
    float *scales;           /* [nb*N] */
    int32_t *zps;
    uint8_t *q8;             /* non-sequential GPTQ in chunks: q kept in a byte until the end */
    float *clip;             /* AWQ clip search: the range ratio per block [nb*N], or NULL */
    int group;               /* GPTQ: index of its input group */
} wq_target;

/* GPTQ: the targets that read one activation value share its statistics. */
typedef struct wq_group {
    oq_value *x;
    int64_t K;
    oq_gptq_stats h;
    bool awq;                /* AWQ: statistics in a (x^T x and sum |x|), not h */
    oq_awq_stats a;
    oq_status st;            /* first error seen by the observer */
    oq_diag *d;
} wq_group;

/* Is n a node whose B this pass quantizes? Fills t; *why gets the reason when a node of a
 * selected op type is left alone (NULL: not a candidate at all). */
static bool select_node(const wq_cfg *c, oq_node *n, wq_target *t, const char **why)
{
    *why = NULL;
    memset(t, 0, sizeof *t);
    bool mm = oq_pass_is_op(n, "MatMul"), gemm = oq_pass_is_op(n, "Gemm");
    if ((!mm && !gemm) || !oq_pass_name_in_list(c->op_types, n->op_type) || n->n_inputs < 2 || n->n_outputs < 1)
        return false;
    if (!oq_pass_node_name_selected(n, c->has_inc ? &c->inc : NULL, c->has_exc ? &c->exc : NULL))
        return false;
    oq_value *w = n->inputs[1];
    if (!w || w->kind != OQ_VALUE_INITIALIZER || w->is_graph_input || !w->initializer)
        return false; /* activation x activation: nothing to quantize here */
    oq_tensor *wt = w->initializer;
    if ((wt->dtype != OQ_DTYPE_FLOAT && wt->dtype != OQ_DTYPE_FLOAT16 && wt->dtype != OQ_DTYPE_BFLOAT16) ||
        wt->rank != 2) {
        *why = "B is not a 2-D float32, float16 or bfloat16 tensor";
        return false;
    }
    t->wdt = wt->dtype;
    t->node = n;
    t->w = w;
    t->trans = gemm && oq_node_attr_int(n, "transB", 0) != 0;
    t->K = t->trans ? wt->dims[1] : wt->dims[0];
    t->N = t->trans ? wt->dims[0] : wt->dims[1];
    if (t->K <= 0 || t->N <= 0) {
        *why = "B is empty";
        return false;
    }
    if (c->nbits && gemm) {
        if (oq_node_attr_int(n, "transA", 0) != 0 || oq_node_attr_float(n, "alpha", 1.0f) != 1.0f) {
            *why = "Gemm with transA or alpha != 1 has no MatMulNBits form";
            return false;
        }
        oq_value *cv = n->n_inputs > 2 ? n->inputs[2] : NULL;
        oq_tensor *ct = cv ? oq_value_const_tensor(cv) : NULL;
        if (cv && (oq_node_attr_float(n, "beta", 1.0f) != 1.0f || !ct || ct->dtype != wt->dtype ||
                   ct->rank != 1 || ct->dims[0] != t->N)) {
            *why = "Gemm's C is not a constant 1-D bias of N values (beta 1)";
            return false;
        }
    }
    return true;
}

/* W as [K, N] float (transposed from [N, K] for Gemm transB=1); malloc'ed. */
static float *weight_kn(const wq_target *t, oq_diag *d)
{
    const void *src = oq_tensor_data(t->w->initializer, d);
    if (!src)
        return NULL;
    float *w = malloc((size_t)(t->K * t->N) * sizeof(float));
    if (!w)
        return NULL;
    const float *f = src;
    const uint16_t *h = src;
    float *lut = NULL; /* float16: every value's float, 256 KB, cheaper than a call per element */
    if (t->wdt == OQ_DTYPE_FLOAT16 && (lut = malloc(65536 * sizeof(float))) != NULL)
        for (uint32_t u = 0; u < 65536; u++)
            lut[u] = oq_half_to_float((uint16_t)u);
    for (int64_t k = 0; k < t->K; k++)
        for (int64_t n = 0; n < t->N; n++) {
            int64_t i = t->trans ? n * t->K + k : k * t->N + n;
            w[k * t->N + n] = t->wdt == OQ_DTYPE_FLOAT16    ? (lut ? lut[h[i]] : oq_half_to_float(h[i]))
                              : t->wdt == OQ_DTYPE_BFLOAT16 ? oq_bfloat16_to_float(h[i])
                                                            : f[i];
        }
    free(lut);
    /* the float copy is all that is needed now: give back the mapped input's pages */
    oq_tensor_release(t->w->initializer);
    return w;
}

/* The stored scales' type: the weight's for float16 and bfloat16 (the type of the
 * DequantizeLinear output or MatMulNBits input A it must match), else the option's. */
static int32_t scale_dtype_of(const wq_cfg *c, const wq_target *t)
{
    return t->wdt == OQ_DTYPE_FLOAT ? c->scale_dtype : t->wdt;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "weight i of n, ETA": on a terminal a line redrawn after every weight, else a line every
 * 10 s (logs of long runs); the ETA from the bytes done so far. */
typedef struct wq_progress {
    bool on, tty;
    double t0, last;
    int64_t done, total;
} wq_progress;

static void progress_step(wq_progress *p, size_t i, size_t n, const wq_target *t)
{
    if (!p->on)
        return;
    p->done += oq_dtype_nbytes(t->wdt, t->K * t->N);
    double el = now_s() - p->t0;
    if (!p->tty && el - p->last < 10)
        return;
    p->last = el;
    double eta = p->done > 0 ? el * (double)(p->total - p->done) / (double)p->done : 0;
    fprintf(stderr, "%s" WHO ": weight %zu of %zu (%.0f%% of the bytes), %.0f s, ETA %.0f s%s", p->tty ? "\r" : "",
            i + 1, n, 100.0 * (double)p->done / (double)(p->total ? p->total : 1), el, eta, p->tty ? "\033[K" : "\n");
    if (p->tty && i + 1 == n)
        fprintf(stderr, "\r\033[K");
}

/* GPTQ: "layer inputs i-j of N (name), t s, ETA s" before each chunk's pass, redrawn on a
 * terminal, a line every 10 s in a log; the ETA from the chunks done so far. */
static void gptq_progress(wq_progress *p, size_t g0, size_t g1, size_t n, const char *name)
{
    if (!p->on)
        return;
    double el = now_s() - p->t0;
    if (!p->tty && el - p->last < 10)
        return;
    p->last = el;
    char eta[48] = "";
    if (g0 > 0)
        snprintf(eta, sizeof eta, ", ETA %.0f s", el * (double)(n - g0) / (double)g0);
    fprintf(stderr, "%s" WHO ": gptq: layer inputs %zu-%zu of %zu (\"%s\"), %.0f s%s%s", p->tty ? "\r" : "", g0 + 1, g1,
            n, name, el, eta, p->tty ? "\033[K" : "\n");
}

/* ------------------------------------------------------------------ GPTQ statistics */

typedef struct sweep_ctx {
    wq_group *groups;
    size_t n;
    size_t seen;             /* groups whose input this sample has given */
    oq_plan *plan;           /* stopped once every group has seen its input */
} sweep_ctx;

static void group_add(wq_group *g, const oq_rt_tensor *t)
{
    bool half = t->dtype == OQ_DTYPE_FLOAT16;
    if (g->st != OQ_OK)
        return;
    if ((t->dtype != OQ_DTYPE_FLOAT && !half) || t->rank < 1 || t->dims[t->rank - 1] != g->K) {
        g->st = oq_diag_error(g->d, OQ_ERR_INVALID, WHO ": activation \"%s\" is not float or float16 with a last dim of %" PRId64,
                              g->x->name, g->K);
        return;
    }
    int64_t rows = oq_rt_tensor_numel(t) / g->K;
    if (!half) {
        g->st = g->awq ? oq_awq_stats_add(&g->a, t->data, rows, g->d) : oq_gptq_stats_add(&g->h, t->data, rows, g->d);
        return;
    }
    /* float16 activations (a float16 model): widened, some rows at a time */
    int64_t step = (((int64_t)1 << 20) + g->K - 1) / g->K;
    float *f = malloc((size_t)(step * g->K) * sizeof(float));
    if (!f) {
        g->st = oq_diag_error(g->d, OQ_ERR_NOMEM, "out of memory");
        return;
    }
    const uint16_t *h = t->data;
    for (int64_t r0 = 0; r0 < rows && g->st == OQ_OK; r0 += step) {
        int64_t nr = rows - r0 < step ? rows - r0 : step;
        oq_half_to_float_n(h + r0 * g->K, f, nr * g->K);
        g->st = g->awq ? oq_awq_stats_add(&g->a, f, nr, g->d) : oq_gptq_stats_add(&g->h, f, nr, g->d);
    }
    free(f);
}

static void on_tensor(const oq_node *node, size_t out_index, const oq_rt_tensor *t, void *user)
{
    sweep_ctx *s = user;
    if (node->graph != node->graph->model->graph || out_index >= node->n_outputs)
        return;
    const oq_value *v = node->outputs[out_index];
    for (size_t i = 0; i < s->n; i++)
        if (s->groups[i].x == v) {
            group_add(&s->groups[i], t);
            s->seen++;
        }
    if (s->seen >= s->n && s->plan) /* the rest of the model is not needed for this sample */
        oq_plan_stop(s->plan);
}

/* Run every sample through the model as it is now and accumulate the statistics of
 * groups[0..n). */
static oq_status sweep(oq_model *m, const wq_cfg *c, oq_calib_source *src, wq_group *groups, size_t n, oq_diag *d)
{
    sweep_ctx sc = {groups, n, 0, NULL};
    oq_plan_options po = oq_plan_options_default();
    po.threads = c->threads;
    po.on_tensor = on_tensor;
    po.user = &sc;
    oq_plan *p = NULL;
    oq_status st = oq_plan_compile(m, &po, &p, d);
    if (st != OQ_OK)
        return st;
    sc.plan = p;
    size_t nin = oq_plan_n_inputs(p);
    oq_rt_tensor *in = calloc(nin ? nin : 1, sizeof *in);
    if (!in) {
        oq_plan_free(p);
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    }
    uint64_t ns = oq_calib_source_count(src);
    for (uint64_t k = 0; k < ns && st == OQ_OK; k++) {
        char label[512] = "";
        st = oq_calib_source_sample(src, p, k, in, nin, label, sizeof label, d);
        if (st != OQ_OK)
            break;
        sc.seen = 0;
        for (size_t i = 0; i < nin; i++) /* a target reading a graph input directly */
            for (size_t j = 0; j < n; j++)
                if (strcmp(groups[j].x->name, oq_plan_input_name(p, i)) == 0 && groups[j].x->is_graph_input) {
                    group_add(&groups[j], &in[i]);
                    sc.seen++;
                }
        st = oq_plan_run(p, in, nin, NULL, 0, d);
        if (st != OQ_OK)
            oq_diag_add(d, OQ_SEV_NOTE, st, NULL, NULL, NULL, WHO ": while running sample %s", label);
        for (size_t i = 0; i < nin; i++)
            oq_rt_tensor_release(&in[i]);
        for (size_t j = 0; j < n && st == OQ_OK; j++)
            st = groups[j].st;
    }
    free(in);
    oq_plan_free(p);
    return st;
}

/* ------------------------------------------------------------------ segments ------- */

/* Sweeps in segments (cache=true). A chunk's sweep runs only the nodes after the previous
 * chunk's boundary node up to its own (the last producer of the chunk's inputs), on the
 * values that cross the previous boundary (the frontier: produced at or before it, read
 * after it), kept per sample from the previous segment; the model's inputs come from the
 * samples each time. Over all chunks the model runs once per sample instead of once per
 * chunk, in memory for one frontier per sample (a decoder's residual stream and the
 * tables every block reads). The graph is cut in place for the compile and the runs, and
 * put back before anything else touches it. */
typedef struct seg_state {
    bool on;
    oq_node *bound;          /* the last node run so far (NULL: none) */
    size_t nf;               /* frontier values after `bound` */
    oq_value **fv;
    oq_rt_tensor *ft;        /* [sample * nf + i] */
    uint64_t ns;
    int64_t budget;          /* bytes the cache may hold */
} seg_state;

/* A quarter of the machine's memory (the cache of one frontier per sample). */
static int64_t seg_budget(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (int64_t)pages * psz / 4 : (int64_t)1 << 31;
}

static void seg_drop(seg_state *ss)
{
    for (uint64_t i = 0; ss->ft && i < ss->ns * ss->nf; i++)
        oq_rt_tensor_release(&ss->ft[i]);
    free(ss->ft);
    free(ss->fv);
    ss->ft = NULL;
    ss->fv = NULL;
    ss->nf = 0;
}

static bool has_subgraph(const oq_node *n)
{
    for (size_t a = 0; a < n->n_attrs; a++)
        if (n->attrs[a]->g || n->attrs[a]->n_graphs)
            return true;
    return false;
}

/* g's nodes first..last (n of them) as the whole graph, with these inputs and outputs;
 * uncut_graph puts back what cut_graph saved. */
typedef struct graph_cut {
    oq_node *first, *last, *seg_first, *seg_last, *after, *before;
    size_t n_nodes, n_inputs, n_outputs;
    oq_vinfo **inputs, **outputs;
} graph_cut;

static void cut_graph(oq_graph *g, oq_node *first, oq_node *last, size_t n, oq_vinfo **ins, size_t nin,
                      oq_vinfo **outs, size_t nout, graph_cut *c)
{
    *c = (graph_cut){g->first, g->last, first, last, last->next, first->prev, g->n_nodes, g->n_inputs,
                     g->n_outputs, g->inputs, g->outputs};
    g->first = first;
    g->last = last;
    first->prev = NULL;
    last->next = NULL;
    g->n_nodes = n;
    g->inputs = ins;
    g->n_inputs = nin;
    g->outputs = outs;
    g->n_outputs = nout;
}

static void uncut_graph(oq_graph *g, const graph_cut *c)
{
    c->seg_last->next = c->after;
    c->seg_first->prev = c->before;
    g->first = c->first;
    g->last = c->last;
    g->n_nodes = c->n_nodes;
    g->inputs = c->inputs;
    g->n_inputs = c->n_inputs;
    g->outputs = c->outputs;
    g->n_outputs = c->n_outputs;
}

/* One segmented sweep for groups[0..n). false in *fallback when the graph does not allow
 * it (a chunk input read before the previous boundary and not kept, a subgraph, a cache
 * over budget): the caller then sweeps from the inputs and stops using segments. */
static oq_status seg_sweep(oq_model *m, const wq_cfg *c, oq_calib_source *src, seg_state *ss, wq_group *groups,
                           size_t n, bool *fallback, oq_diag *d)
{
    oq_graph *g = m->graph;
    *fallback = false;
    size_t nid = (size_t)m->next_id + 1, nn = 0;
    int64_t *pos = malloc(nid * sizeof(int64_t));
    oq_status st = OQ_OK;
    if (!pos)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nid; i++)
        pos[i] = -1;
    int64_t pb = -1; /* position of the previous boundary */
    for (oq_node *x = g->first; x; x = x->next, nn++) {
        if (x->id < nid)
            pos[x->id] = (int64_t)nn;
        if (x == ss->bound)
            pb = (int64_t)nn;
        if (has_subgraph(x))
            *fallback = true;
    }
    if (ss->bound && pb < 0)
        *fallback = true; /* the boundary node was rewritten away */
#define POS_OF(v) ((v)->kind == OQ_VALUE_NODE && (v)->producer && (v)->producer->id < nid ? pos[(v)->producer->id] : -1)
    /* the boundary: the last producer of the chunk's inputs */
    oq_node *b = ss->bound;
    int64_t bp = pb;
    for (size_t j = 0; j < n && !*fallback; j++) {
        oq_value *x = groups[j].x;
        int64_t p = POS_OF(x);
        if (p > bp) {
            bp = p;
            b = x->producer;
        } else if (p >= 0 && p <= pb) { /* produced before: must be in the frontier */
            bool kept = false;
            for (size_t i = 0; i < ss->nf; i++)
                kept |= ss->fv[i] == x;
            if (!kept)
                *fallback = true;
        }
    }
    if (bp == pb) /* nothing to run: a model input among the chunk's is read by the ordinary sweep */
        for (size_t j = 0; j < n; j++)
            if (POS_OF(groups[j].x) < 0)
                *fallback = true;
    /* the new frontier: produced at or before b, read after b */
    size_t cap = 16, nf = 0;
    oq_value **fv = malloc(cap * sizeof *fv);
    uint8_t *mark = calloc(nid, 1);
    if (!fv || !mark)
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    int64_t pi = 0;
    for (oq_node *x = g->first; x && st == OQ_OK && !*fallback; x = x->next, pi++) {
        if (pi <= bp)
            continue;
        for (size_t i = 0; i < x->n_inputs; i++) {
            oq_value *v = x->inputs[i];
            if (!v || v->id >= nid || mark[v->id] || POS_OF(v) < 0 || POS_OF(v) > bp)
                continue;
            mark[v->id] = 1;
            if (nf == cap) {
                oq_value **t = realloc(fv, 2 * cap * sizeof *fv);
                if (!t) {
                    st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
                    break;
                }
                fv = t;
                cap *= 2;
            }
            fv[nf++] = v;
        }
    }
    free(mark);
    if (st != OQ_OK || *fallback) {
        free(fv);
        free(pos);
        return st;
    }
    /* the segment (pb, bp]: cut the graph there, inputs = model inputs + old frontier,
     * outputs = the new frontier values the segment produces */
    oq_node *first = ss->bound ? ss->bound->next : g->first;
    size_t nseg = (size_t)(bp - pb);
    size_t nout = 0, nin0 = g->n_inputs;
    for (size_t i = 0; i < nf; i++)
        nout += POS_OF(fv[i]) > pb;
    oq_vinfo *vin = calloc(ss->nf + 1, sizeof *vin), *vout = calloc(nout + 1, sizeof *vout);
    oq_vinfo **ins = calloc(nin0 + ss->nf + 1, sizeof *ins), **outs = calloc(nout + 1, sizeof *outs);
    size_t *outmap = calloc(nout + 1, sizeof *outmap);
    oq_rt_tensor *nt = calloc((size_t)ss->ns * (nf ? nf : 1), sizeof *nt);
    oq_rt_tensor *in = NULL;
    oq_plan *p = NULL;
    if (!vin || !vout || !ins || !outs || !outmap || !nt) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < nin0; i++)
        ins[i] = g->inputs[i];
    for (size_t i = 0; i < ss->nf; i++) {
        const oq_rt_tensor *t0 = &ss->ft[i];
        int64_t dims[OQ_RT_MAX_RANK];
        for (size_t r = 0; r < t0->rank; r++)
            dims[r] = -1; /* samples may differ in length */
        vin[i].value = ss->fv[i];
        vin[i].type = oq_type_tensor(m, t0->dtype, dims, NULL, t0->rank);
        ins[nin0 + i] = &vin[i];
    }
    for (size_t i = 0, o = 0; i < nf; i++)
        if (POS_OF(fv[i]) > pb) {
            vout[o].value = fv[i];
            outs[o] = &vout[o];
            outmap[o++] = i;
        }
    if (nseg > 0) {
        graph_cut saved;
        cut_graph(g, first, b, nseg, ins, nin0 + ss->nf, outs, nout, &saved);
        sweep_ctx sc = {groups, n, 0, NULL};
        oq_plan_options po = oq_plan_options_default();
        po.threads = c->threads;
        po.on_tensor = on_tensor;
        po.user = &sc;
        st = oq_plan_compile(m, &po, &p, d);
        size_t npi = p ? oq_plan_n_inputs(p) : 0, n0 = npi >= ss->nf ? npi - ss->nf : 0;
        in = calloc(npi + 1, sizeof *in);
        if (st == OQ_OK && !in)
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        oq_rt_tensor *out = calloc(nout + 1, sizeof *out);
        if (st == OQ_OK && !out)
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        int64_t held = 0;
        for (uint64_t k = 0; k < ss->ns && st == OQ_OK; k++) {
            char label[512] = "";
            st = oq_calib_source_sample(src, p, k, in, n0, label, sizeof label, d);
            for (size_t i = 0; i < ss->nf && st == OQ_OK; i++) {
                const oq_rt_tensor *t = &ss->ft[k * ss->nf + i];
                oq_rt_tensor_borrow(&in[n0 + i], t->dtype, t->dims, t->rank, t->data);
            }
            sc.seen = 0;
            for (size_t i = 0; i < npi && st == OQ_OK; i++) /* chunk inputs read from the cache or the sample */
                for (size_t j = 0; j < n; j++)
                    if (strcmp(groups[j].x->name, oq_plan_input_name(p, i)) == 0)
                        group_add(&groups[j], &in[i]);
            if (st == OQ_OK)
                st = oq_plan_run(p, in, npi, out, nout, d);
            if (st != OQ_OK)
                oq_diag_add(d, OQ_SEV_NOTE, st, NULL, NULL, NULL, WHO ": while running sample %s", label);
            for (size_t i = 0; i < npi; i++)
                oq_rt_tensor_release(&in[i]);
            for (size_t o = 0; o < nout && st == OQ_OK; o++) {
                nt[k * nf + outmap[o]] = out[o];
                held += out[o].nbytes;
                memset(&out[o], 0, sizeof out[o]);
            }
            for (size_t j = 0; j < n && st == OQ_OK; j++)
                st = groups[j].st;
            if (st == OQ_OK && k == 0 && held * (int64_t)ss->ns > ss->budget) {
                *fallback = true; /* the frontier would not fit: sweep from the inputs */
                break;
            }
        }
        free(out);
        oq_plan_free(p);
        p = NULL;
        uncut_graph(g, &saved);
    } else { /* every input of the chunk is in the frontier (model inputs: below) */
        for (uint64_t k = 0; k < ss->ns && st == OQ_OK; k++)
            for (size_t i = 0; i < ss->nf; i++)
                for (size_t j = 0; j < n; j++)
                    if (ss->fv[i] == groups[j].x)
                        group_add(&groups[j], &ss->ft[k * ss->nf + i]);
        for (size_t j = 0; j < n && st == OQ_OK; j++)
            st = groups[j].st;
    }
    if (st == OQ_OK && !*fallback) { /* values carried over from the old frontier */
        for (size_t i = 0; i < nf; i++) {
            if (POS_OF(fv[i]) > pb)
                continue;
            for (size_t o = 0; o < ss->nf; o++)
                if (ss->fv[o] == fv[i])
                    for (uint64_t k = 0; k < ss->ns; k++) {
                        nt[k * nf + i] = ss->ft[k * ss->nf + o];
                        memset(&ss->ft[k * ss->nf + o], 0, sizeof ss->ft[0]);
                    }
        }
        seg_drop(ss);
        ss->fv = fv;
        ss->ft = nt;
        ss->nf = nf;
        ss->bound = b;
        fv = NULL;
        nt = NULL;
    }
#undef POS_OF
done:
    if (nt)
        for (uint64_t i = 0; i < ss->ns * nf; i++)
            oq_rt_tensor_release(&nt[i]);
    free(nt);
    free(fv);
    free(in);
    free(vin);
    free(vout);
    free(ins);
    free(outs);
    free(outmap);
    free(pos);
    return st;
}

/* ------------------------------------------------------------------ rewriting ------ */

static int32_t bits_of(int32_t dt)
{
    return dt == OQ_DTYPE_INT4 || dt == OQ_DTYPE_UINT4 ? 4 : 8;
}

static bool is_signed(int32_t dt)
{
    return dt == OQ_DTYPE_INT4 || dt == OQ_DTYPE_INT8;
}


/* base + suffix, not the name of a node of g yet (oq_pass_unique_name2 looks at values
 * only): a weight that several MatMuls read is quantized once for each, and onnxruntime
 * refuses a model with two nodes of one name */
static bool node_named(const oq_graph *g, const char *name)
{
    for (const oq_node *n = g->first; n; n = n->next)
        if (n->name && strcmp(n->name, name) == 0)
            return true;
    return false;
}

static char *unique_node_name(oq_graph *g, const char *base, const char *suffix)
{
    char buf[600];
    snprintf(buf, sizeof buf, "%.500s%s", base, suffix);
    for (unsigned long k = 1; node_named(g, buf); k++)
        snprintf(buf, sizeof buf, "%.500s%s_%lu", base, suffix, k);
    return oq_pass_unique_name2(g, buf, "");
}
static oq_status rewrite_qdq(oq_model *m, const wq_cfg *c, wq_target *t, int64_t *qbytes, oq_diag *d)
{
    oq_graph *g = t->node->graph;
    int32_t dt = c->spec.dtype;
    int64_t K = t->K, N = t->N, nb = oq_wq_n_blocks(K, c->spec.block);
    const char *base = oq_model_strdup(m, t->w->name);
    /* back to B's layout: [K, N], or [N, K] for transB */
    int64_t wdims[2] = {t->trans ? N : K, t->trans ? K : N}, sdims[2] = {t->trans ? N : nb, t->trans ? nb : N};
    int32_t *qv = malloc((size_t)(K * N) * sizeof(int32_t)), *zv = malloc((size_t)(nb * N) * sizeof(int32_t));
    float *sv = malloc((size_t)(nb * N) * sizeof(float));
    int64_t qn = oq_dtype_nbytes(dt, K * N), zn = oq_dtype_nbytes(dt, nb * N), sn = 0;
    void *qb = malloc((size_t)qn), *zb = malloc((size_t)(zn ? zn : 1)), *sb = NULL;
    oq_status st = OQ_OK;
    if (!qv || !zv || !sv || !qb || !zb || !base) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    bool zp_needed = false;
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++)
            qv[t->trans ? n * K + k : k * N + n] = t->q[k * N + n];
    for (int64_t b = 0; b < nb; b++)
        for (int64_t n = 0; n < N; n++) {
            int64_t i = t->trans ? n * nb + b : b * N + n;
            sv[i] = t->scales[b * N + n];
            zv[i] = t->zps[b * N + n];
            zp_needed |= zv[i] != 0;
        }
    int32_t sdt = scale_dtype_of(c, t);
    sb = oq_pass_scale_bytes(sv, nb * N, sdt, &sn);
    if (!sb || oq_pack_ints(dt, qv, K * N, qb, d) != OQ_OK || oq_pack_ints(dt, zv, nb * N, zb, d) != OQ_OK) {
        st = sb ? OQ_ERR_INVALID : oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    char *nq = oq_pass_unique_name2(g, base, "_wq"), *ns = oq_pass_unique_name2(g, base, "_wscale");
    oq_value *vq = nq ? oq_graph_add_initializer(g, nq, dt, wdims, 2, qb, qn) : NULL;
    oq_value *vs = vq && ns ? oq_graph_add_initializer(g, ns, sdt, sdims, 2, sb, sn) : NULL;
    oq_value *vz = NULL;
    if (vs && zp_needed) {
        char *nz = oq_pass_unique_name2(g, base, "_wzero_point");
        vz = nz ? oq_graph_add_initializer(g, nz, dt, sdims, 2, zb, zn) : NULL;
    }
    char *nd = oq_pass_unique_name2(g, base, "_wdequantized"), *ndn = unique_node_name(g, base, "_DequantizeLinear");
    oq_value *vd = nd ? oq_graph_new_value(g, nd) : NULL;
    oq_value *in[3] = {vq, vs, vz};
    oq_node *dq = vs && vd && ndn && (vz || !zp_needed) ? oq_node_new(g, "DequantizeLinear", "", ndn, in, vz ? 3 : 2, &vd, 1)
                                                       : NULL;
    if (!dq) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    oq_node_set_attr_int(dq, "axis", t->trans ? 1 : 0);
    oq_node_set_attr_int(dq, "block_size", c->spec.block);
    oq_graph_insert_before(g, t->node, dq);
    oq_value *wf = vd;
    if (sdt != t->wdt) { /* DequantizeLinear's output has the scale's type: back to the weight's */
        char *nc = oq_pass_unique_name2(g, base, "_wfloat"), *ncn = unique_node_name(g, base, "_Cast");
        wf = nc ? oq_graph_new_value(g, nc) : NULL;
        oq_node *cast = wf && ncn ? oq_node_new(g, "Cast", "", ncn, &vd, 1, &wf, 1) : NULL;
        if (!cast) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            goto done;
        }
        oq_node_set_attr_int(cast, "to", t->wdt);
        oq_graph_insert_before(g, t->node, cast);
    }
    oq_value *old = t->w;
    st = oq_node_set_input(t->node, 1, wf);
    if (st != OQ_OK) {
        oq_diag_error(d, st, "out of memory");
        goto done;
    }
    oq_pass_drop_if_unused(old);
    *qbytes = qn + sn + (vz ? zn : 0);
done:
    free(qv);
    free(zv);
    free(sv);
    free(qb);
    free(zb);
    free(sb);
    return st;
}

static oq_status rewrite_nbits(oq_model *m, const wq_cfg *c, wq_target *t, int64_t *qbytes, oq_diag *d)
{
    oq_node *n = t->node;
    oq_graph *g = n->graph;
    int64_t K = t->K, N = t->N, B = c->spec.block, nb = oq_wq_n_blocks(K, B);
    int32_t bits = bits_of(c->spec.dtype), off = is_signed(c->spec.dtype) ? 1 << (bits - 1) : 0;
    int64_t blob = B * bits / 8, zrow = (nb * bits + 7) / 8;
    const char *base = oq_model_strdup(m, t->w->name);
    uint8_t *pb = calloc((size_t)(N * nb * blob), 1), *pz = calloc((size_t)(N * zrow), 1);
    float *ps = malloc((size_t)(N * nb) * sizeof(float));
    oq_status st = OQ_OK;
    if (!pb || !pz || !ps || !base) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* stored values are unsigned: q + 2^(bits-1) for a signed type (the symmetric zero
     * point 0 becomes MatMulNBits' default 2^(bits-1)); LSB first within each byte */
    bool zp_default = true;
    for (int64_t b = 0; b < nb; b++)           /* a block's rows of q [K, N] stay in cache */
        for (int64_t col = 0; col < N; col++) { /* across the columns (7b-shaped: 4.5x faster) */
            int32_t z = t->zps[b * N + col] + off;
            zp_default &= z == 1 << (bits - 1);
            ps[col * nb + b] = t->scales[b * N + col];
            int64_t zbit = b * bits;
            pz[col * zrow + zbit / 8] |= (uint8_t)(z << (zbit % 8));
            uint8_t *blk = pb + (col * nb + b) * blob;
            for (int64_t i = 0; i < B; i++) {
                int64_t k = b * B + i;
                int32_t u = k < K ? t->q[k * N + col] + off : z; /* padding dequantizes to 0 */
                int64_t bit = i * bits;
                blk[bit / 8] |= (uint8_t)(u << (bit % 8));
            }
        }
    int64_t bdims[3] = {N, nb, blob}, sdims[1] = {N * nb}, zdims[1] = {N * zrow};
    char *nq = oq_pass_unique_name2(g, base, "_wq"), *ns = oq_pass_unique_name2(g, base, "_wscale");
    oq_value *vq = nq ? oq_graph_add_initializer(g, nq, OQ_DTYPE_UINT8, bdims, 3, pb, N * nb * blob) : NULL;
    int64_t sn = 0; /* scales of A's type: the weight's */
    void *sb = oq_pass_scale_bytes(ps, N * nb, t->wdt, &sn);
    oq_value *vs = vq && ns && sb ? oq_graph_add_initializer(g, ns, t->wdt, sdims, 1, sb, sn) : NULL;
    free(sb);
    oq_value *vz = NULL;
    if (vs && !zp_default) {
        char *nz = oq_pass_unique_name2(g, base, "_wzero_point");
        vz = nz ? oq_graph_add_initializer(g, nz, OQ_DTYPE_UINT8, zdims, 1, pz, N * zrow) : NULL;
    }
    oq_value *bias = oq_pass_is_op(n, "Gemm") && n->n_inputs > 2 ? n->inputs[2] : NULL;
    oq_value *in[6] = {n->inputs[0], vq, vs, vz, NULL, bias};
    char *nn = oq_pass_unique_name2(g, n->name && *n->name ? n->name : "MatMulNBits", "_nbits");
    if (!vs || !nn || (!vz && !zp_default)) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* the new node takes the old one's place and output */
    oq_node *pos = n->next;
    oq_value *y = n->outputs[0];
    oq_pass_remove_node(n);
    oq_node *mn = oq_node_new(g, "MatMulNBits", "com.microsoft", nn, in, bias ? 6 : 4, &y, 1);
    if (!mn) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    oq_node_set_attr_int(mn, "K", K);
    oq_node_set_attr_int(mn, "N", N);
    oq_node_set_attr_int(mn, "bits", bits);
    oq_node_set_attr_int(mn, "block_size", B);
    oq_node_set_attr_int(mn, "accuracy_level", c->accuracy_level);
    oq_value *old = t->w;
    if (pos)
        oq_graph_insert_before(g, pos, mn);
    else
        oq_graph_append(g, mn);
    t->node = mn;
    oq_pass_drop_if_unused(old);
    *qbytes = N * nb * blob + sn + (vz ? N * zrow : 0);
done:
    free(pb);
    free(pz);
    free(ps);
    return st;
}

/* ------------------------------------------------------------------ run ------------ */

static oq_status parse_cfg(const oq_pass_options *opts, oq_model *m, wq_cfg *c, oq_diag *d)
{
    memset(c, 0, sizeof *c);
    const char *dt = oq_pass_opt_string(opts, "dtype", "int4");
    c->spec.dtype = oq_dtype_from_name(dt);
    if (c->spec.dtype != OQ_DTYPE_INT4 && c->spec.dtype != OQ_DTYPE_UINT4 && c->spec.dtype != OQ_DTYPE_INT8 &&
        c->spec.dtype != OQ_DTYPE_UINT8)
        return oq_diag_error(d, OQ_ERR_USAGE, WHO ": dtype \"%s\" unknown (int4, uint4, int8, uint8)", dt);
    c->spec.symmetric = oq_pass_opt_bool(opts, "symmetric", true);
    c->spec.block = oq_pass_opt_int(opts, "block-size", 32);
    if (c->spec.block < 16 || c->spec.block > 256 || (c->spec.block & (c->spec.block - 1)) != 0)
        return oq_diag_error(d, OQ_ERR_USAGE, WHO ": block-size %" PRId64 " must be a power of two in 16..256",
                             c->spec.block);
    const char *fmt = oq_pass_opt_string(opts, "format", "qdq");
    if (strcmp(fmt, "matmulnbits") == 0)
        c->nbits = true;
    else if (strcmp(fmt, "qdq") != 0)
        return oq_diag_error(d, OQ_ERR_USAGE, WHO ": format \"%s\" unknown (qdq, matmulnbits)", fmt);
    const char *sd = oq_pass_opt_string(opts, "scale-dtype", "auto");
    if (strcmp(sd, "auto") == 0)
        c->scale_dtype = OQ_DTYPE_FLOAT; /* onnxruntime turns DQ(float32 scales) -> MatMul into
                                          * MatMulNBits; a float16 DQ needs a Cast and is not fused */
    else if (strcmp(sd, "float32") == 0 || strcmp(sd, "float") == 0)
        c->scale_dtype = OQ_DTYPE_FLOAT;
    else if (strcmp(sd, "float16") == 0)
        c->scale_dtype = OQ_DTYPE_FLOAT16;
    else
        return oq_diag_error(d, OQ_ERR_USAGE, WHO ": scale-dtype \"%s\" unknown (auto, float16, float32)", sd);
    if (c->nbits && c->scale_dtype != OQ_DTYPE_FLOAT)
        return oq_diag_error(d, OQ_ERR_USAGE, WHO ": format=matmulnbits keeps float32 scales (the type of its input A)");
    c->spec.half_scales = c->scale_dtype == OQ_DTYPE_FLOAT16;
    c->accuracy_level = oq_pass_opt_int(opts, "accuracy-level", 0);
    if (c->accuracy_level < 0 || c->accuracy_level > 4)
        return oq_diag_error(d, OQ_ERR_USAGE, WHO ": accuracy-level %" PRId64 " must be in 0..4", c->accuracy_level);
    const char *algo = oq_pass_opt_string(opts, "algo", "rtn");
    if (strcmp(algo, "gptq") == 0)
        c->gptq = true;
    else if (strcmp(algo, "awq") == 0)
        c->awq = true;
    else if (strcmp(algo, "rtn") != 0)
        return oq_diag_error(d, OQ_ERR_USAGE, WHO ": algo \"%s\" unknown (rtn, gptq, awq)", algo);
    if ((c->gptq || c->awq) && !oq_pass_calib_source_given(opts))
        return oq_diag_error(d, OQ_ERR_USAGE, WHO ": algo=%s needs calibration samples (data=DIR, images=DIR or random=N)",
                             algo);
    int64_t grid = oq_pass_opt_int(opts, "awq-grid", 20);
    if (grid < 1 || grid > 1000)
        return oq_diag_error(d, OQ_ERR_USAGE, WHO ": awq-grid %" PRId64 " must be in 1..1000", grid);
    c->awq_grid = (int)grid;
    c->awq_fold_only = oq_pass_opt_bool(opts, "awq-fold-only", false);
    c->awq_clip = oq_pass_opt_bool(opts, "awq-clip", true);
    if (c->awq_fold_only && !c->awq)
        return oq_diag_error(d, OQ_ERR_USAGE, WHO ": awq-fold-only needs algo=awq");
    c->damp = oq_pass_opt_float(opts, "damp", 0.01);
    if (!(c->damp >= 0 && c->damp <= 10))
        return oq_diag_error(d, OQ_ERR_USAGE, WHO ": damp %g must be in [0, 10]", c->damp);
    c->sequential = oq_pass_opt_bool(opts, "sequential", true);
    c->chunk = oq_pass_opt_int(opts, "chunk", 0);
    c->act_order = oq_pass_opt_bool(opts, "act-order", false);
    c->cache = oq_pass_opt_bool(opts, "cache", true);
    if (c->chunk < 0)
        return oq_diag_error(d, OQ_ERR_USAGE, WHO ": chunk %" PRId64 " must be >= 0", c->chunk);
    c->threads = (int)oq_pass_opt_int(opts, "threads", 0);
    c->progress = oq_pass_opt_bool(opts, "progress", false) && isatty(fileno(stderr)); /* a line redrawn in place */
    c->progress_rtn = oq_pass_opt_bool(opts, "progress", false); /* RTN: lines in a log too (progress_step) */
    c->op_types = oq_pass_opt_string(opts, "op-types", "MatMul,Gemm");
    oq_status st = oq_pass_compile_regex(WHO, "include-nodes", oq_pass_opt_string(opts, "include-nodes", ""), &c->inc, &c->has_inc, d);
    if (st == OQ_OK)
        st = oq_pass_compile_regex(WHO, "exclude-nodes", oq_pass_opt_string(opts, "exclude-nodes", ""), &c->exc, &c->has_exc, d);
    if (st == OQ_OK && !c->nbits && oq_model_opset(m, "") < 21)
        st = oq_diag_error(d, OQ_ERR_UNSUPPORTED,
                           WHO ": format=qdq writes blocked DequantizeLinear (opset 21); the model has opset %lld "
                           "(run upgrade-opset{to=21} first, or use format=matmulnbits)",
                           (long long)oq_model_opset(m, ""));
    return st;
}

static void free_cfg(wq_cfg *c)
{
    if (c->has_inc)
        regfree(&c->inc);
    if (c->has_exc)
        regfree(&c->exc);
}

static oq_status quantize_target(const wq_cfg *c, wq_target *t, const oq_gptq_stats *h, oq_pass_result *res,
                                 oq_diag *d)
{
    int64_t nb = oq_wq_n_blocks(t->K, c->spec.block);
    t->q = malloc((size_t)(t->K * t->N) * sizeof(int32_t));
    t->scales = malloc((size_t)(nb * t->N) * sizeof(float));
    t->zps = malloc((size_t)(nb * t->N) * sizeof(int32_t));
    float *w = weight_kn(t, d);
    wq_cfg ct = *c; /* float16 scales are rounded before use (a float16 weight's too) */
    ct.spec.half_scales = scale_dtype_of(c, t) == OQ_DTYPE_FLOAT16;
    c = &ct;
    oq_status st;
    char lbuf[128], what[300];
    const char *lb = oq_node_label(t->node, lbuf, sizeof lbuf); /* the node's name, or lbuf */
    snprintf(what, sizeof what, "node \"%s\", weight \"%s\"", lb, t->w->name);
    if (!t->q || !t->scales || !t->zps || !w) {
        free(w);
        return oq_diag_error(d, OQ_ERR_NOMEM, WHO ": %s: out of memory", what);
    }
    if (h) {
        double used = c->damp;
        st = oq_gptq_quantize_ordered(w, t->K, t->N, &c->spec, h, c->damp, c->act_order, t->q, t->scales, t->zps,
                                      &used, d);
        if (st == OQ_OK && used != c->damp)
            oq_diag_add(d, OQ_SEV_WARNING, OQ_OK, NULL, lb, t->node->op_type,
                        WHO ": weight \"%s\": GPTQ needed dampening %g (damp=%g was not enough)", t->w->name, used,
                        c->damp);
        if (st == OQ_OK)
            oq_pass_stat_add(res, "gptq_layers", 1);
    } else {
        st = oq_awq_rtn_clipped(w, t->K, t->N, &c->spec, t->clip, t->q, t->scales, t->zps, d); /* NULL: RTN */
    }
    if (st != OQ_OK)
        oq_diag_add(d, OQ_SEV_NOTE, st, NULL, lb, t->node->op_type, "while quantizing %s", what);
    free(w);
    return st;
}

static oq_status rewrite_target(oq_model *m, const wq_cfg *c, wq_target *t, oq_pass_result *res, oq_diag *d)
{
    int64_t qbytes = 0, fbytes = oq_dtype_nbytes(t->wdt, t->K * t->N);
    oq_status st = c->nbits ? rewrite_nbits(m, c, t, &qbytes, d) : rewrite_qdq(m, c, t, &qbytes, d);
    if (st != OQ_OK)
        return st;
    oq_pass_stat_add(res, "weights_quantized", 1);
    oq_pass_stat_add(res, t->wdt == OQ_DTYPE_FLOAT16 ? "weights_float16" : t->wdt == OQ_DTYPE_BFLOAT16 ? "weights_bfloat16"
                                                                        : "weights_float32", 1);
    oq_pass_stat_add(res, "weight_bytes_float", fbytes);
    oq_pass_stat_add(res, "weight_bytes_quantized", qbytes);
    return OQ_OK;
}

static void free_target(wq_target *t)
{
    free(t->q8);
    t->q8 = NULL;
    free(t->clip);
    t->clip = NULL;
    free(t->q);
    free(t->scales);
    free(t->zps);
    t->q = NULL;
    t->scales = NULL;
    t->zps = NULL;
}

/* Group the targets by the activation they read (and K): ts[i].group, *ng groups. */
static void make_groups(wq_target *ts, size_t nt, wq_group *gs, size_t *ng, oq_diag *d)
{
    *ng = 0;
    for (size_t i = 0; i < nt; i++) {
        oq_value *x = ts[i].node->inputs[0];
        size_t j = 0;
        while (j < *ng && !(gs[j].x == x && gs[j].K == ts[i].K))
            j++;
        if (j == *ng) {
            gs[j].x = x;
            gs[j].K = ts[i].K;
            gs[j].d = d;
            (*ng)++;
        }
        ts[i].group = (int)j;
    }
}

/* Non-sequential GPTQ in chunks: t's integers kept in one byte each (q + 128 for a
 * signed type) until every chunk has swept the float model. */
static oq_status stash_q(const wq_cfg *c, wq_target *t, oq_diag *d)
{
    int64_t n = t->K * t->N, off = is_signed(c->spec.dtype) ? 128 : 0;
    t->q8 = malloc((size_t)n);
    if (!t->q8)
        return oq_diag_error(d, OQ_ERR_NOMEM, WHO ": out of memory");
    for (int64_t i = 0; i < n; i++)
        t->q8[i] = (uint8_t)(t->q[i] + off);
    free(t->q);
    t->q = NULL;
    return OQ_OK;
}

static oq_status unstash_q(const wq_cfg *c, wq_target *t, oq_diag *d)
{
    int64_t n = t->K * t->N, off = is_signed(c->spec.dtype) ? 128 : 0;
    t->q = malloc((size_t)n * sizeof(int32_t));
    if (!t->q)
        return oq_diag_error(d, OQ_ERR_NOMEM, WHO ": out of memory");
    for (int64_t i = 0; i < n; i++)
        t->q[i] = (int32_t)t->q8[i] - (int32_t)off;
    free(t->q8);
    t->q8 = NULL;
    return OQ_OK;
}

/* The samples the options name and the targets' input groups (GPTQ and AWQ). */
static oq_status open_groups(const oq_pass_options *opts, wq_target *ts, size_t nt, oq_calib_source **src,
                             wq_group **gs, size_t *ng, oq_diag *d)
{
    oq_status st = oq_pass_calib_source(opts, WHO, src, d);
    if (st != OQ_OK)
        return st;
    *gs = calloc(nt ? nt : 1, sizeof **gs);
    if (!*gs) {
        oq_calib_source_free(*src);
        *src = NULL;
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    }
    make_groups(ts, nt, *gs, ng, d);
    return OQ_OK;
}

/* GPTQ: the statistics of `chunk` inputs at a time (one K x K matrix per input; a sweep
 * stops each sample once the chunk's inputs are computed), quantized before the next
 * chunk's sweep. sequential: the chunk's layers are rewritten at once, so later chunks
 * see the inputs that the quantized layers produce; otherwise every chunk sweeps the
 * float model and the layers are rewritten at the end (the same result whatever the
 * chunk, the integers kept in a byte each meanwhile). */
static oq_status run_gptq(oq_model *m, const oq_pass_options *opts, const wq_cfg *c, wq_target *ts, size_t nt,
                          oq_pass_result *res, oq_diag *d)
{
    oq_calib_source *src = NULL;
    wq_group *gs = NULL;
    size_t ng = 0;
    oq_status st = open_groups(opts, ts, nt, &src, &gs, &ng, d);
    if (st != OQ_OK)
        return st;
    size_t step = c->chunk > 0 ? (size_t)c->chunk : c->sequential ? 1 : ng;
    seg_state ss = {c->cache && step < ng, NULL, 0, NULL, NULL, oq_calib_source_count(src), seg_budget()};
    wq_progress pg = {c->progress_rtn, isatty(fileno(stderr)) != 0, now_s(), -1e9, 0, 0};
    for (size_t g0 = 0; g0 < ng && st == OQ_OK; g0 += step) {
        size_t g1 = g0 + step < ng ? g0 + step : ng;
        for (size_t j = g0; j < g1 && st == OQ_OK; j++)
            st = oq_gptq_stats_init(&gs[j].h, gs[j].K, d);
        if (st == OQ_OK)
            gptq_progress(&pg, g0, g1, ng, gs[g0].x->name);
        bool fallback = !ss.on;
        if (st == OQ_OK && ss.on) {
            st = seg_sweep(m, c, src, &ss, gs + g0, g1 - g0, &fallback, d);
            if (st == OQ_OK && !fallback)
                oq_pass_stat_add(res, "gptq_segment_sweeps", 1);
            if (st == OQ_OK && fallback) { /* from here on, every sweep from the model's inputs */
                ss.on = false;
                seg_drop(&ss);
                oq_pass_stat_add(res, "gptq_cache_given_up", 1);
                for (size_t j = g0; j < g1 && st == OQ_OK; j++) { /* what the segment had added */
                    oq_gptq_stats_free(&gs[j].h);
                    st = oq_gptq_stats_init(&gs[j].h, gs[j].K, d);
                }
            }
        }
        if (st == OQ_OK && fallback)
            st = sweep(m, c, src, gs + g0, g1 - g0, d);
        if (st == OQ_OK)
            oq_pass_stat_add(res, "gptq_sweeps", 1);
        for (size_t i = 0; i < nt && st == OQ_OK; i++) {
            if ((size_t)ts[i].group < g0 || (size_t)ts[i].group >= g1)
                continue;
            if (gs[ts[i].group].h.rows == 0) {
                oq_diag_add(d, OQ_SEV_WARNING, OQ_OK, NULL, ts[i].node->name, ts[i].node->op_type,
                            WHO ": input \"%s\" was never computed on the samples: round to nearest",
                            gs[ts[i].group].x->name);
                st = quantize_target(c, &ts[i], NULL, res, d);
            } else {
                st = quantize_target(c, &ts[i], &gs[ts[i].group].h, res, d);
            }
            if (st == OQ_OK && !c->sequential) { /* rewritten at the end, in node order */
                st = stash_q(c, &ts[i], d);
                continue;
            }
            if (st == OQ_OK)
                st = rewrite_target(m, c, &ts[i], res, d);
            free_target(&ts[i]);
        }
        for (size_t j = g0; j < g1; j++)
            oq_gptq_stats_free(&gs[j].h);
    }
    for (size_t i = 0; i < nt && st == OQ_OK; i++) /* non-sequential: the stashed chunks */
        if (ts[i].q8) {
            st = unstash_q(c, &ts[i], d);
            if (st == OQ_OK)
                st = rewrite_target(m, c, &ts[i], res, d);
            free_target(&ts[i]);
        }
    seg_drop(&ss);
    if (pg.on && pg.tty)
        fprintf(stderr, "\r\033[K");
    oq_pass_stat_add(res, "samples", (int64_t)oq_calib_source_count(src));
    for (size_t j = 0; j < ng; j++)
        oq_gptq_stats_free(&gs[j].h);
    free(gs);
    oq_calib_source_free(src);
    return st;
}

/* ------------------------------------------------------------------ AWQ ------------ */

/* Every use of x is input 0 of a target of group gi (x may then be scaled). */
static bool only_group_uses(const oq_value *x, const wq_target *ts, size_t nt, int gi)
{
    if (!x || oq_value_is_graph_output(x) || x->n_uses == 0)
        return false;
    for (size_t u = 0; u < x->n_uses; u++) {
        bool ok = false;
        for (size_t i = 0; i < nt && !ok; i++)
            ok = ts[i].group == gi && ts[i].node == x->uses[u].node && x->uses[u].index == 0;
        if (!ok)
            return false;
    }
    return true;
}

/* A constant float vector of K values along the last axis (leading dims 1), or NULL. */
/* float, float16, bfloat16: the weight types whose values AWQ scales (in their own type) */
static bool is_wfloat(int32_t dt)
{
    return dt == OQ_DTYPE_FLOAT || dt == OQ_DTYPE_FLOAT16 || dt == OQ_DTYPE_BFLOAT16;
}

static oq_tensor *const_vector(const oq_value *v, int64_t K)
{
    oq_tensor *t = v ? oq_value_const_tensor(v) : NULL;
    if (!t || !is_wfloat(t->dtype) || t->rank < 1 || t->dims[t->rank - 1] != K || oq_tensor_numel(t) != K)
        return NULL;
    return t;
}

/* Input slot `slot` of n <- a new initializer of t's type: t's values (dims of t) times f
 * (element k of the last axis, or of axis `axis` of a 2-D tensor when axis >= 0: f per
 * column), computed in float and rounded once to a float16 or bfloat16 t's type. */
static oq_status replace_scaled(oq_model *m, oq_node *n, size_t slot, const oq_tensor *t, const float *f, int col_axis,
                                const char *suffix, oq_diag *d)
{
    oq_graph *g = n->graph;
    oq_value *old = n->inputs[slot];
    const void *src = oq_tensor_data((oq_tensor *)t, d);
    int64_t numel = oq_tensor_numel(t);
    int32_t dt = t->dtype;
    if (!src || !is_wfloat(dt))
        return oq_diag_error(d, OQ_ERR_INVALID, WHO ": awq: cannot read \"%s\" as float", old->name);
    float *v = malloc((size_t)(numel ? numel : 1) * sizeof(float));
    if (!v)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    int64_t last = t->dims[t->rank - 1];
    const uint16_t *h = src;
    uint16_t *hv = (uint16_t *)v; /* float16 / bfloat16 results, written behind the reads */
    for (int64_t i = 0; i < numel; i++) {
        float x = dt == OQ_DTYPE_FLOAT16    ? oq_half_to_float(h[i])
                  : dt == OQ_DTYPE_BFLOAT16 ? oq_bfloat16_to_float(h[i])
                                            : ((const float *)src)[i];
        float y = x * (col_axis == 0 ? f[i / last] : f[i % last]);
        if (dt == OQ_DTYPE_FLOAT)
            v[i] = y;
        else
            hv[i] = dt == OQ_DTYPE_FLOAT16 ? oq_float_to_half(y) : oq_float_to_bfloat16(y);
    }
    char *name = oq_pass_unique_name2(g, old->name, suffix);
    oq_value *nv = name ? oq_graph_add_initializer(g, name, dt, t->dims, t->rank, v, oq_dtype_nbytes(dt, numel)) : NULL;
    free(v);
    if (!nv || oq_node_set_input(n, slot, nv) != OQ_OK)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    oq_pass_drop_if_unused(old);
    return OQ_OK;
}

typedef enum { FOLD_NONE, FOLD_NORM, FOLD_MATMUL } fold_kind;

/* Fold x * (1/s) into the op that produces x, when that op is only read by the group:
 * a normalization's scale (and bias), a Mul by a constant vector, or the columns of a
 * MatMul's constant B, directly or through one input of an element-wise Mul. */
static fold_kind fold_into_producer(oq_model *m, oq_value *x, const float *inv, int64_t K, oq_status *st, oq_diag *d)
{
    *st = OQ_OK;
    oq_node *p = x->kind == OQ_VALUE_NODE ? x->producer : NULL;
    if (!p || x->producer_index != 0)
        return FOLD_NONE;
    bool ms = p->domain && strcmp(p->domain, "com.microsoft") == 0;
    if ((oq_pass_is_op(p, "LayerNormalization") || oq_pass_is_op(p, "RMSNormalization") ||
         (ms && strcmp(p->op_type, "SimplifiedLayerNormalization") == 0)) &&
        p->n_inputs >= 2) {
        oq_tensor *sc = const_vector(p->inputs[1], K);
        oq_tensor *bi = p->n_inputs > 2 && p->inputs[2] ? const_vector(p->inputs[2], K) : NULL;
        if (!sc || (p->n_inputs > 2 && p->inputs[2] && !bi) || oq_node_attr_int(p, "axis", -1) != -1)
            return FOLD_NONE;
        *st = replace_scaled(m, p, 1, sc, inv, -1, "_awq", d);
        if (*st == OQ_OK && bi)
            *st = replace_scaled(m, p, 2, bi, inv, -1, "_awq", d);
        return FOLD_NORM;
    }
    if (oq_pass_is_op(p, "MatMul") && p->n_inputs == 2) {
        oq_tensor *b = p->inputs[1] ? oq_value_const_tensor(p->inputs[1]) : NULL;
        if (!b || !is_wfloat(b->dtype) || b->rank != 2 || b->dims[1] != K)
            return FOLD_NONE;
        *st = replace_scaled(m, p, 1, b, inv, -1, "_awq", d);
        return FOLD_MATMUL;
    }
    if (oq_pass_is_op(p, "Mul") && p->n_inputs == 2) {
        for (size_t i = 0; i < 2; i++) { /* Mul(a, c): c a constant vector (an RMSNorm's weight) */
            oq_tensor *c = const_vector(p->inputs[i], K);
            if (c && !oq_value_const_tensor(p->inputs[1 - i])) {
                *st = replace_scaled(m, p, i, c, inv, -1, "_awq", d);
                return FOLD_NORM;
            }
        }
        for (size_t i = 0; i < 2; i++) { /* Mul(act(gate), up): into up's columns */
            oq_value *u = p->inputs[i];
            oq_node *q = u && u->kind == OQ_VALUE_NODE ? u->producer : NULL;
            if (!q || !oq_pass_is_op(q, "MatMul") || u->n_uses != 1 || oq_value_is_graph_output(u) || q->n_inputs != 2)
                continue;
            oq_tensor *b = q->inputs[1] ? oq_value_const_tensor(q->inputs[1]) : NULL;
            if (!b || !is_wfloat(b->dtype) || b->rank != 2 || b->dims[1] != K)
                continue;
            *st = replace_scaled(m, q, 1, b, inv, -1, "_awq", d);
            return FOLD_MATMUL;
        }
    }
    return FOLD_NONE;
}

/* Group gi: x -> x * (1/s) for its targets, W -> diag(s) W. */
static oq_status apply_awq(oq_model *m, wq_target *ts, size_t nt, int gi, oq_value *x, const float *s, int64_t K,
                           oq_pass_result *res, oq_diag *d)
{
    float *inv = malloc((size_t)K * sizeof(float));
    if (!inv)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    for (int64_t k = 0; k < K; k++)
        inv[k] = 1.0f / s[k];
    oq_status st = OQ_OK;
    for (size_t i = 0; i < nt && st == OQ_OK; i++) { /* the weights first: x's producer may be one */
        if (ts[i].group != gi)
            continue;
        oq_tensor *wt = ts[i].node->inputs[1]->initializer;
        st = replace_scaled(m, ts[i].node, 1, wt, s, ts[i].trans ? -1 : 0, "_awq", d);
    }
    fold_kind fk = FOLD_NONE;
    if (st == OQ_OK && only_group_uses(x, ts, nt, gi))
        fk = fold_into_producer(m, x, inv, K, &st, d);
    if (st == OQ_OK && fk == FOLD_NONE) { /* a Mul before the group's first target */
        oq_graph *g = ts[0].node->graph;
        size_t first = 0;
        while (ts[first].group != gi)
            first++;
        int64_t dims[1] = {K};
        char *ni = oq_pass_unique_name2(g, x->name, "_awq_inv_scale"), *nx = oq_pass_unique_name2(g, x->name, "_awq");
        char *nn = oq_pass_unique_name2(g, x->name, "_awq_Mul");
        int32_t xdt = ts[first].wdt; /* x has the weights' type (MatMul's inputs share one) */
        uint16_t *hi = xdt == OQ_DTYPE_FLOAT ? NULL : malloc((size_t)K * sizeof(uint16_t));
        for (int64_t k = 0; hi && k < K; k++)
            hi[k] = xdt == OQ_DTYPE_FLOAT16 ? oq_float_to_half(inv[k]) : oq_float_to_bfloat16(inv[k]);
        oq_value *vi = !ni || (xdt != OQ_DTYPE_FLOAT && !hi) ? NULL
                       : hi ? oq_graph_add_initializer(g, ni, xdt, dims, 1, hi, K * 2)
                            : oq_graph_add_initializer(g, ni, OQ_DTYPE_FLOAT, dims, 1, inv, K * 4);
        free(hi);
        oq_value *vx = vi && nx ? oq_graph_new_value(g, nx) : NULL;
        oq_value *in[2] = {x, vi};
        oq_node *mul = vx && nn ? oq_node_new(g, "Mul", "", nn, in, 2, &vx, 1) : NULL;
        if (!mul) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        } else {
            oq_graph_insert_before(g, ts[first].node, mul);
            for (size_t i = 0; i < nt && st == OQ_OK; i++)
                if (ts[i].group == gi)
                    st = oq_node_set_input(ts[i].node, 0, vx);
        }
    }
    if (st == OQ_OK)
        oq_pass_stat_add(res, fk == FOLD_NORM ? "awq_folded_norm" : fk == FOLD_MATMUL ? "awq_folded_matmul" : "awq_mul_inserted", 1);
    free(inv);
    return st;
}

/* AWQ: one sweep of the float model for every input's statistics, alpha searched and
 * the scales folded input by input (each fold keeps the float function, so the statistics
 * stay those of the model being changed), then round to nearest of the scaled weights. */
static oq_status run_awq(oq_model *m, const oq_pass_options *opts, const wq_cfg *c, wq_target *ts, size_t nt,
                         oq_pass_result *res, oq_diag *d)
{
    oq_calib_source *src = NULL;
    wq_group *gs = NULL;
    size_t ng = 0;
    oq_status st = open_groups(opts, ts, nt, &src, &gs, &ng, d);
    if (st != OQ_OK)
        return st;
    const float **ws = calloc(nt, sizeof *ws);
    int64_t *ns = calloc(nt, sizeof *ns);
    if (!ws || !ns)
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    size_t step = c->chunk > 0 ? (size_t)c->chunk : ng; /* inputs per sweep */
    for (size_t j = 0; j < ng && st == OQ_OK; j++) {
        if (j % step == 0) { /* the next chunk's statistics, on the model as folded so far */
            size_t g1 = j + step < ng ? j + step : ng;
            for (size_t i = j; i < g1 && st == OQ_OK; i++) {
                gs[i].awq = true;
                st = oq_awq_stats_init(&gs[i].a, gs[i].K, d);
            }
            if (st == OQ_OK && c->progress)
                fprintf(stderr, "\r" WHO ": awq: inputs %zu-%zu of %zu (\"%s\")\033[K", j + 1, g1, ng, gs[j].x->name);
            if (st == OQ_OK)
                st = sweep(m, c, src, gs + j, g1 - j, d);
            if (st == OQ_OK)
                oq_pass_stat_add(res, "awq_sweeps", 1);
            if (st != OQ_OK)
                break;
        }
        if (gs[j].a.h.rows == 0) {
            oq_diag_add(d, OQ_SEV_WARNING, OQ_OK, NULL, NULL, NULL,
                        WHO ": input \"%s\" was never computed on the samples: round to nearest", gs[j].x->name);
            continue;
        }
        size_t n = 0;
        for (size_t i = 0; i < nt && st == OQ_OK; i++) {
            if (ts[i].group != (int)j)
                continue;
            ts[i].w = ts[i].node->inputs[1]; /* an earlier fold may have replaced it */
            float *w = weight_kn(&ts[i], d);
            if (!w)
                st = oq_diag_error(d, OQ_ERR_NOMEM, WHO ": out of memory");
            ws[n] = w;
            ns[n++] = ts[i].N;
        }
        float *s = malloc((size_t)gs[j].K * sizeof(float));
        oq_awq_result r;
        if (st == OQ_OK && !s)
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        if (st == OQ_OK)
            st = oq_awq_search(&gs[j].a, ws, ns, n, &c->spec, c->awq_grid, s, &r, d);
        if (st == OQ_OK) {
            oq_diag_add(d, OQ_SEV_NOTE, OQ_OK, NULL, NULL, NULL,
                        WHO ": awq: input \"%s\" (%zu layer%s): alpha %.2f, output error %.4g (round to nearest %.4g)",
                        gs[j].x->name, n, n == 1 ? "" : "s", r.alpha, r.err, r.err_rtn);
            oq_pass_stat_add(res, "awq_inputs", 1);
            if (r.alpha > 0) { /* the scaled copies are rounded and dropped: not streamed */
                oq_model_stream_hold(m, true);
                st = apply_awq(m, ts, nt, (int)j, gs[j].x, s, gs[j].K, res, d);
                oq_model_stream_hold(m, false);
            }
        }
        /* clip search on the weights as they will be rounded (scaled; a later fold into
         * their columns scales a whole column, which leaves the chosen ratios alone) */
        for (size_t i = 0; i < nt && st == OQ_OK && c->awq_clip && !c->awq_fold_only; i++) {
            if (ts[i].group != (int)j)
                continue;
            ts[i].w = ts[i].node->inputs[1];
            float *w = weight_kn(&ts[i], d);
            int64_t nb = oq_wq_n_blocks(ts[i].K, c->spec.block);
            ts[i].clip = malloc((size_t)(nb * ts[i].N) * sizeof(float));
            double e0 = 0, e1 = 0;
            if (!w || !ts[i].clip)
                st = oq_diag_error(d, OQ_ERR_NOMEM, WHO ": out of memory");
            else
                st = oq_awq_clip_search(&gs[j].a.h, r.alpha > 0 ? s : NULL, w, ts[i].N, &c->spec, 20, ts[i].clip, &e0,
                                        &e1, d);
            free(w);
            for (int64_t b = 0; st == OQ_OK && b < nb * ts[i].N; b++)
                if (ts[i].clip[b] < 1.0f)
                    oq_pass_stat_add(res, "awq_clipped_blocks", 1);
        }
        if (st != OQ_OK)
            oq_diag_add(d, OQ_SEV_NOTE, st, NULL, NULL, NULL, WHO ": awq: while scaling the layers that read \"%s\"",
                        gs[j].x->name);
        free(s);
        for (size_t i = 0; i < n; i++)
            free((float *)ws[i]);
        oq_awq_stats_free(&gs[j].a);
    }
    free(ws);
    free(ns);
    if (c->progress)
        fprintf(stderr, "\r\033[K");
    oq_pass_stat_add(res, "samples", (int64_t)oq_calib_source_count(src));
    for (size_t j = 0; j < ng; j++)
        oq_awq_stats_free(&gs[j].a);
    free(gs);
    oq_calib_source_free(src);
    for (size_t i = 0; i < nt && st == OQ_OK && !c->awq_fold_only; i++) { /* round the scaled weights */
        ts[i].w = ts[i].node->inputs[1];
        st = quantize_target(c, &ts[i], NULL, res, d);
        if (st == OQ_OK)
            st = rewrite_target(m, c, &ts[i], res, d);
        free_target(&ts[i]);
    }
    return st;
}

static oq_status run(oq_model *m, const oq_pass_options *opts, oq_pass_result *res, oq_diag *d)
{
    wq_cfg c;
    oq_status st = parse_cfg(opts, m, &c, d);
    if (st != OQ_OK) {
        free_cfg(&c);
        return st;
    }
    oq_graph *g = m->graph;
    size_t cap = 0, nt = 0;
    for (oq_node *n = g->first; n; n = n->next)
        cap++;
    wq_target *ts = calloc(cap ? cap : 1, sizeof *ts);
    if (!ts) {
        free_cfg(&c);
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    }
    for (oq_node *n = g->first; n; n = n->next) {
        const char *why = NULL;
        if (select_node(&c, n, &ts[nt], &why)) {
            nt++;
        } else if (why) {
            char lb[128];
            oq_diag_add(d, OQ_SEV_NOTE, OQ_OK, NULL, oq_node_label(n, lb, sizeof lb), n->op_type, WHO ": left in float: %s",
                        why);
            oq_pass_stat_add(res, "nodes_skipped", 1);
        }
    }
    if (nt > 0 && c.nbits && oq_model_opset(m, "com.microsoft") < 1)
        oq_model_set_opset(m, "com.microsoft", 1);
    if (c.gptq && nt > 0) {
        st = run_gptq(m, opts, &c, ts, nt, res, d);
    } else if (c.awq && nt > 0) {
        st = run_awq(m, opts, &c, ts, nt, res, d);
    } else {
        wq_progress pg = {c.progress_rtn, isatty(fileno(stderr)) != 0, now_s(), 0, 0, 0};
        for (size_t i = 0; i < nt; i++)
            pg.total += oq_dtype_nbytes(ts[i].wdt, ts[i].K * ts[i].N);
        for (size_t i = 0; i < nt && st == OQ_OK; i++) {
            st = quantize_target(&c, &ts[i], NULL, res, d);
            if (st == OQ_OK)
                st = rewrite_target(m, &c, &ts[i], res, d);
            if (st == OQ_OK)
                progress_step(&pg, i, nt, &ts[i]);
            free_target(&ts[i]);
        }
    }
    for (size_t i = 0; i < nt; i++)
        free_target(&ts[i]);
    free(ts);
    free_cfg(&c);
    if (st == OQ_OK && nt > 0) {
        res->changed = true;
        oq_pass_prune_value_info(g);
    }
    return st;
}

static const oq_pass_option_def options[] = {
    {"dtype", OQ_OPT_STRING, "int4", "weight type: int4, uint4, int8, uint8"},
    {"block-size", OQ_OPT_INT, "32", "elements of the reduction axis per scale: a power of two in 16..256"},
    {"symmetric", OQ_OPT_BOOL, "true", "zero point at the type's middle (false: one zero point per block)"},
    {"format", OQ_OPT_STRING, "qdq", "qdq (blocked DequantizeLinear, opset 21) or matmulnbits (com.microsoft)"},
    {"scale-dtype", OQ_OPT_STRING, "auto", "qdq scales: float16 (smaller; onnxruntime does not fuse it) or float32 (auto: float32)"},
    {"accuracy-level", OQ_OPT_INT, "0", "matmulnbits: MatMulNBits accuracy_level 0..4 (4: int8 activations in onnxruntime)"},
    {"algo", OQ_OPT_STRING, "rtn", "rtn (round to nearest), gptq or awq (both need samples)"},
    {"awq-grid", OQ_OPT_INT, "20", "awq: alpha is searched in 0, 1/grid, ..., 1"},
    {"awq-clip", OQ_OPT_BOOL, "true", "awq: after the scaling, each block's range shrunk (to 0.5) where that lowers the output error"},
    {"awq-fold-only", OQ_OPT_BOOL, "false", "awq: fold the scales and leave the weights in float (checks the fold)"},
    {"damp", OQ_OPT_FLOAT, "0.01", "gptq: dampening, a fraction of the Hessian's mean diagonal"},
    {"sequential", OQ_OPT_BOOL, "true", "gptq: later layers see the quantized earlier ones (chunk by chunk)"},
    {"act-order", OQ_OPT_BOOL, "false", "gptq: features in order of decreasing input energy (blocks fixed beforehand)"},
    {"chunk", OQ_OPT_INT, "0", "gptq, awq: inputs whose statistics one sweep collects (0: gptq 1 if sequential, else all; awq all)"},
    {"cache", OQ_OPT_BOOL, "true", "gptq: each sweep runs only the nodes since the last chunk, on the values cached "
                                   "at its boundary (false: every sweep runs the model from its inputs; the same numbers)"},
    {"op-types", OQ_OPT_STRING, "MatMul,Gemm", "op types whose constant B is quantized"},
    OQ_PASS_NODE_FILTER_OPTIONS,
    OQ_PASS_CALIB_SOURCE_OPTIONS,
    {"threads", OQ_OPT_INT, "0", "gptq: executor threads (0: one per CPU)"},
    {"progress", OQ_OPT_BOOL, "false", "progress on stderr (weight n of N and ETA; gptq: input groups)"},
};

const oq_pass oq_pass_quantize_weights = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "quantize-weights",
    .summary = "weight-only blockwise quantization of MatMul/Gemm constant weights (RTN, GPTQ or AWQ; QDQ or MatMulNBits)",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .run = run,
};
