/* Empirical bias correction of a QDQ model: include/onnxq/biascorr.h */
#include "onnxq/biascorr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bc_layer {
    oq_node *node;         /* the quantized model's Conv / ConvTranspose / Gemm */
    const oq_value *fv;    /* its output in the float model */
    oq_tensor *bias;       /* the int32 initializer behind its bias DequantizeLinear */
    int64_t c;             /* output channels (bias length) */
    double *scale;         /* [c] the bias step of each channel */
    double *fsum, *fsq, *qsum; /* [c] float sums and squares, quantized sums */
    int64_t fcount, qcount;    /* elements per channel summed */
    bool bad;              /* an output that is not float [N, C, ...]: not corrected */
} bc_layer;

typedef struct bc_ctx {
    bc_layer *l;
    size_t n;
    size_t w0, w1;         /* the layers [w0, w1) the quantized pass measures (a wave) */
    size_t seen;           /* of which observed in this run */
    oq_plan *plan;         /* the quantized plan: stopped once the wave is seen */
    bool float_pass;
} bc_ctx;

static bool op_is(const oq_node *n, const char *op)
{
    return n && oq_domain_is_default(n->domain) && strcmp(n->op_type, op) == 0;
}

static const oq_node *producer_dq(const oq_value *v)
{
    const oq_node *p = v && v->kind == OQ_VALUE_NODE ? v->producer : NULL;
    return op_is(p, "DequantizeLinear") && p->n_inputs >= 2 && p->inputs[0] && p->inputs[1] ? p : NULL;
}

/* Add the per-channel sums of t (float [N, C, ...]) to sum (and sq when not NULL). */
static void accumulate(bc_layer *L, const oq_rt_tensor *t, double *sum, double *sq, int64_t *count)
{
    size_t axis = 1;
    if (t->dtype != OQ_DTYPE_FLOAT || t->rank < 2 || t->dims[axis] != L->c || (!t->data && oq_rt_tensor_numel(t) > 0)) {
        L->bad = true;
        return;
    }
    int64_t outer = 1, inner = 1;
    for (size_t k = 0; k < t->rank; k++)
        if (k < axis)
            outer *= t->dims[k];
        else if (k > axis)
            inner *= t->dims[k];
    const float *x = t->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t ch = 0; ch < L->c; ch++) {
            const float *p = x + (o * L->c + ch) * inner;
            double s = 0, s2 = 0;
            for (int64_t i = 0; i < inner; i++) {
                s += p[i];
                s2 += (double)p[i] * p[i];
            }
            sum[ch] += s;
            if (sq)
                sq[ch] += s2;
        }
    *count += outer * inner;
}

static void observe(const oq_node *node, size_t out_index, const oq_rt_tensor *t, void *user)
{
    bc_ctx *c = user;
    if (c->float_pass) {
        for (size_t j = 0; j < c->n; j++)
            if (c->l[j].fv == node->outputs[out_index] && !c->l[j].bad)
                accumulate(&c->l[j], t, c->l[j].fsum, c->l[j].fsq, &c->l[j].fcount);
        return;
    }
    if (out_index != 0)
        return;
    for (size_t j = c->w0; j < c->w1; j++)
        if (node == c->l[j].node) {
            if (!c->l[j].bad)
                accumulate(&c->l[j], t, c->l[j].qsum, NULL, &c->l[j].qcount);
            if (++c->seen == c->w1 - c->w0) /* the rest of the graph is not needed */
                oq_plan_stop(c->plan);
        }
}

/* n's output in the float model: the output of the node of the same name and op type (the
 * quantized model renames the outputs that get a QuantizeLinear, "_prequant"), else the value
 * of the same name. */
static const oq_value *float_twin(oq_model *fm, const oq_node *n)
{
    const oq_node *hit = NULL;
    if (n->name && *n->name)
        for (const oq_node *f = fm->graph->first; f; f = f->next)
            if (f->name && strcmp(f->name, n->name) == 0 && strcmp(f->op_type, n->op_type) == 0) {
                if (hit) /* two of them: the name says nothing */
                    return NULL;
                hit = f;
            }
    if (hit)
        return hit->n_outputs >= 1 ? hit->outputs[0] : NULL;
    const oq_value *v = oq_graph_find_local(fm->graph, n->outputs[0]->name);
    return v && v->kind == OQ_VALUE_NODE && op_is(v->producer, n->op_type) ? v : NULL;
}

/* The layer behind quantized node n, or false (with *skip when n is a quantized layer that
 * cannot be corrected). */
static bool alloc_layer(oq_model *fm, oq_node *n, bc_layer *L, oq_tensor *bias)
{
    const oq_value *fv = float_twin(fm, n);
    if (!fv)
        return false;
    memset(L, 0, sizeof *L);
    L->node = n;
    L->fv = fv;
    L->bias = bias;
    L->c = oq_tensor_numel(bias);
    L->scale = calloc((size_t)L->c, sizeof *L->scale);
    L->fsum = calloc((size_t)L->c, sizeof *L->fsum);
    L->fsq = calloc((size_t)L->c, sizeof *L->fsq);
    L->qsum = calloc((size_t)L->c, sizeof *L->qsum);
    return true; /* the caller checks the buffers */
}

static bool find_layer(oq_model *fm, oq_node *n, bc_layer *L, bool *skip)
{
    *skip = false;
    if (!(op_is(n, "Conv") || op_is(n, "ConvTranspose") || op_is(n, "Gemm")) || n->n_inputs < 1 ||
        !producer_dq(n->inputs[0]))
        return false;
    *skip = true; /* quantized: from here on, a reason not to correct it is a skip */
    if (n->n_inputs < 3 || !n->outputs[0] || n->n_outputs < 1)
        return false;
    const oq_value *b = n->inputs[2];
    const oq_node *dq = producer_dq(b);
    if (!dq || b->n_uses != 1 || oq_value_is_graph_output(b))
        return false;
    oq_value *bq = dq->inputs[0];
    if (bq->kind != OQ_VALUE_INITIALIZER || bq->is_graph_input || bq->n_uses != 1 || !bq->initializer ||
        bq->initializer->dtype != OQ_DTYPE_INT32)
        return false;
    if (dq->n_inputs > 2 && dq->inputs[2]) { /* a zero point, if any, must be 0 */
        oq_tensor *z = oq_value_const_tensor(dq->inputs[2]);
        const int32_t *zp = z && z->dtype == OQ_DTYPE_INT32 ? oq_tensor_data(z, NULL) : NULL;
        if (!zp)
            return false;
        for (int64_t i = 0; i < oq_tensor_numel(z); i++)
            if (zp[i] != 0)
                return false;
    }
    oq_tensor *st = oq_value_const_tensor(dq->inputs[1]);
    int64_t c = oq_tensor_numel(bq->initializer), ns = st ? oq_tensor_numel(st) : -1;
    const float *sp = st && st->dtype == OQ_DTYPE_FLOAT ? oq_tensor_data(st, NULL) : NULL;
    if (c < 1 || !sp || (ns != 1 && ns != c) || !oq_tensor_data(bq->initializer, NULL))
        return false;
    if (!alloc_layer(fm, n, L, bq->initializer))
        return false;
    if (!L->scale || !L->fsum || !L->fsq || !L->qsum)
        return true; /* the caller checks the buffers */
    for (int64_t i = 0; i < c; i++)
        L->scale[i] = sp[ns == 1 ? 0 : i];
    *skip = false;
    return true;
}

/* anc[j * words + k / 64] bit k: layer k is upstream of layer j (its output reaches j's
 * inputs). NULL on out of memory. */
static uint64_t *ancestors(const oq_model *qm, const bc_layer *l, size_t n, size_t *words)
{
    uint32_t maxid = 0;
    for (const oq_node *nd = qm->graph->first; nd; nd = nd->next)
        for (size_t i = 0; i < nd->n_inputs + nd->n_outputs; i++) {
            const oq_value *v = i < nd->n_inputs ? nd->inputs[i] : nd->outputs[i - nd->n_inputs];
            if (v && v->id > maxid)
                maxid = v->id;
        }
    *words = (n + 63) / 64;
    uint64_t *anc = calloc(n * *words + 1, sizeof *anc);
    int32_t *layer_of = malloc(((size_t)maxid + 1) * sizeof *layer_of); /* output value id -> layer */
    uint32_t *mark = calloc((size_t)maxid + 1, sizeof *mark);
    const oq_value **stack = malloc(((size_t)maxid + 1) * sizeof *stack);
    if (!anc || !layer_of || !mark || !stack) {
        free(anc);
        anc = NULL;
        goto out;
    }
    for (uint32_t i = 0; i <= maxid; i++)
        layer_of[i] = -1;
    for (size_t j = 0; j < n; j++)
        layer_of[l[j].node->outputs[0]->id] = (int32_t)j;
    for (size_t j = 0; j < n; j++) { /* depth-first up from layer j's inputs */
        size_t sp = 0;
        for (size_t i = 0; i < l[j].node->n_inputs; i++) {
            const oq_value *v = l[j].node->inputs[i];
            if (v && v->id <= maxid && mark[v->id] != j + 1) {
                mark[v->id] = (uint32_t)j + 1;
                stack[sp++] = v;
            }
        }
        while (sp > 0) {
            const oq_value *v = stack[--sp];
            if (layer_of[v->id] >= 0)
                anc[j * *words + (size_t)layer_of[v->id] / 64] |= 1ull << (layer_of[v->id] % 64);
            const oq_node *p = v->kind == OQ_VALUE_NODE ? v->producer : NULL;
            for (size_t i = 0; p && i < p->n_inputs; i++) {
                const oq_value *u = p->inputs[i];
                if (u && u->id <= maxid && mark[u->id] != j + 1) {
                    mark[u->id] = (uint32_t)j + 1;
                    stack[sp++] = u;
                }
            }
        }
    }
out:
    free(layer_of);
    free(mark);
    free(stack);
    return anc;
}

static void free_layers(bc_layer *l, size_t n)
{
    for (size_t j = 0; l && j < n; j++) {
        free(l[j].scale);
        free(l[j].fsum);
        free(l[j].fsq);
        free(l[j].qsum);
    }
    free(l);
}

oq_biascorr_options oq_biascorr_options_default(void)
{
    oq_biascorr_options o;
    memset(&o, 0, sizeof o);
    o.arith = OQ_ARITH_REFERENCE;
    o.max_samples = 16;
    return o;
}

/* Compile the quantized plan; map[i]: the float plan's input feeding its input i. */
static oq_status compile_q(oq_model *qm, const oq_plan_options *po, const oq_plan *fp, oq_plan **qp, size_t *map,
                           oq_diag *d)
{
    oq_status st = oq_plan_compile(qm, po, qp, d);
    if (st != OQ_OK)
        return st;
    size_t nf = oq_plan_n_inputs(fp), nq = oq_plan_n_inputs(*qp);
    if (nq != nf)
        return oq_diag_error(d, OQ_ERR_INVALID, "bias correction: the float and quantized models have %zu and %zu "
                             "inputs", nf, nq);
    for (size_t i = 0; i < nq; i++) {
        size_t m = nf;
        for (size_t f = 0; f < nf && m == nf; f++)
            if (strcmp(oq_plan_input_name(*qp, i), oq_plan_input_name(fp, f)) == 0)
                m = f;
        if (m == nf)
            return oq_diag_error(d, OQ_ERR_INVALID, "bias correction: input \"%s\" of the quantized model is not an "
                                 "input of the float model", oq_plan_input_name(*qp, i));
        map[i] = m;
    }
    return OQ_OK;
}

/* Correct layer L from its measured sums; *changed: a bias value moved. */
static oq_status correct(oq_model *qm, oq_plan **qp, bc_layer *L, oq_biascorr_result *r, double *steps_sum,
                         size_t *steps_n, bool *changed, oq_diag *d)
{
    *changed = false;
    const int32_t *old = oq_tensor_data(L->bias, d);
    if (!old)
        return OQ_ERR_INVALID;
    int32_t *nb = malloc((size_t)L->c * sizeof *nb);
    if (!nb)
        return oq_diag_error(d, OQ_ERR_NOMEM, "bias correction: out of memory");
    double ms = 0; /* the float output's mean square, over all channels */
    for (int64_t ch = 0; ch < L->c; ch++)
        ms += L->fsq[ch] / (double)L->fcount;
    double rms = sqrt(ms / (double)L->c);
    for (int64_t ch = 0; ch < L->c; ch++) {
        double delta = L->fsum[ch] / (double)L->fcount - L->qsum[ch] / (double)L->qcount, s = L->scale[ch];
        double step = isfinite(delta) && s > 0 && isfinite(s) ? nearbyint(delta / s) : 0;
        double v = (double)old[ch] + (isfinite(step) ? step : 0);
        v = v > 2147483647.0 ? 2147483647.0 : v < -2147483648.0 ? -2147483648.0 : v;
        nb[ch] = (int32_t)v;
        *changed |= nb[ch] != old[ch];
        *steps_sum += fabs(v - (double)old[ch]);
        (*steps_n)++;
        double rel = rms > 0 ? fabs((v - (double)old[ch]) * s) / rms : 0;
        if (rel > r->max_rel_shift) {
            r->max_rel_shift = rel;
            snprintf(r->max_rel_node, sizeof r->max_rel_node, "%s", L->node->name ? L->node->name : "");
        }
    }
    oq_status st = OQ_OK;
    if (*changed) { /* the model must not change under a plan: drop it, compile again next time */
        oq_plan_free(*qp);
        *qp = NULL;
        st = oq_tensor_set_data(qm, L->bias, OQ_DTYPE_INT32, L->bias->dims, L->bias->rank, nb,
                                L->c * (int64_t)sizeof *nb);
    }
    free(nb);
    if (st != OQ_OK)
        return oq_diag_error(d, st, "bias correction: cannot update bias \"%s\"", L->bias->name ? L->bias->name : "");
    return OQ_OK;
}

oq_status oq_bias_correct(oq_model *fm, oq_model *qm, oq_calib_source *src, const oq_biascorr_options *o,
                          oq_biascorr_result *r, oq_diag *d)
{
    memset(r, 0, sizeof *r);
    bc_ctx c = {0};
    size_t cap = 0;
    oq_status st = OQ_OK;
    for (oq_node *n = qm->graph->first; n; n = n->next) {
        if (c.n == cap) {
            cap = cap ? 2 * cap : 16;
            bc_layer *g = realloc(c.l, cap * sizeof *g);
            if (!g) {
                free_layers(c.l, c.n);
                return oq_diag_error(d, OQ_ERR_NOMEM, "bias correction: out of memory");
            }
            c.l = g;
        }
        bool skip;
        if (find_layer(fm, n, &c.l[c.n], &skip)) {
            bc_layer *L = &c.l[c.n++];
            if (!L->scale || !L->fsum || !L->fsq || !L->qsum) {
                free_layers(c.l, c.n);
                return oq_diag_error(d, OQ_ERR_NOMEM, "bias correction: out of memory");
            }
        } else if (skip) {
            r->skipped++;
        }
    }
    if (c.n == 0) {
        free(c.l);
        return OQ_OK;
    }
    uint64_t ns = oq_calib_source_count(src);
    if (o->max_samples > 0 && ns > o->max_samples)
        ns = o->max_samples;
    oq_plan_options po = oq_plan_options_default();
    po.threads = o->threads;
    po.on_tensor = observe;
    po.user = &c;
    oq_plan *fp = NULL, *qp = NULL;
    oq_rt_tensor *cache = NULL, *in = NULL;
    uint64_t *anc = NULL;
    size_t *map = NULL, nf_in = 0, nq_in = 0;
    c.float_pass = true;
    st = oq_plan_compile(fm, &po, &fp, d);
    if (st != OQ_OK)
        goto out;
    nf_in = oq_plan_n_inputs(fp);
    cache = calloc((size_t)ns * nf_in + 1, sizeof *cache);
    in = calloc(nf_in + 1, sizeof *in);
    map = calloc(nf_in + 1, sizeof *map);
    if (!cache || !in || !map) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "bias correction: out of memory");
        goto out;
    }
    for (uint64_t k = 0; k < ns && st == OQ_OK; k++) {
        char label[512] = "";
        st = oq_calib_source_sample(src, fp, k, cache + k * nf_in, nf_in, label, sizeof label, d);
        if (st == OQ_OK)
            st = oq_plan_run(fp, cache + k * nf_in, nf_in, NULL, 0, d);
        if (st != OQ_OK)
            oq_diag_add(d, OQ_SEV_NOTE, st, NULL, NULL, NULL, "bias correction: float model, sample %s", label);
    }
    if (st != OQ_OK)
        goto out;
    r->samples = ns;
    c.float_pass = false;
    size_t keep = 0; /* the layers the float pass saw as float [N, C, ...] */
    for (size_t j = 0; j < c.n; j++) {
        if (c.l[j].bad || c.l[j].fcount == 0) {
            r->skipped++;
            bc_layer *L = &c.l[j];
            free(L->scale), free(L->fsum), free(L->fsq), free(L->qsum);
            continue;
        }
        c.l[keep++] = c.l[j];
    }
    c.n = keep;
    size_t words = 0;
    anc = c.n ? ancestors(qm, c.l, c.n, &words) : NULL;
    if (c.n && !anc) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "bias correction: out of memory");
        goto out;
    }
    double steps_sum = 0;
    size_t steps_n = 0;
    for (size_t j = 0; j < c.n && st == OQ_OK;) {
        /* a wave: j and the layers after it that none of the wave's layers feeds, so that
         * one run measures them all with every correction they depend on applied */
        size_t e = j + 1;
        for (; e < c.n; e++) {
            bool dep = false;
            for (size_t k = j; k < e && !dep; k++)
                dep = (anc[e * words + k / 64] >> (k % 64)) & 1;
            if (dep)
                break;
        }
        if (!qp) {
            st = compile_q(qm, &po, fp, &qp, map, d);
            if (st != OQ_OK)
                break;
            nq_in = oq_plan_n_inputs(qp);
        }
        c.w0 = j;
        c.w1 = e;
        c.plan = qp;
        for (uint64_t k = 0; k < ns && st == OQ_OK; k++) {
            for (size_t i = 0; i < nq_in; i++)
                in[i] = cache[k * nf_in + map[i]], in[i].owned = false;
            c.seen = 0;
            st = oq_plan_run(qp, in, nq_in, NULL, 0, d);
        }
        if (st != OQ_OK) {
            char lb[128];
            oq_diag_add(d, OQ_SEV_NOTE, st, NULL, oq_node_label(c.l[j].node, lb, sizeof lb), c.l[j].node->op_type,
                        "bias correction: while measuring this layer");
            break;
        }
        for (; j < e && st == OQ_OK; j++) {
            bc_layer *L = &c.l[j];
            if (L->bad || L->qcount == 0) {
                r->skipped++;
                continue;
            }
            r->layers++;
            bool changed;
            st = correct(qm, &qp, L, r, &steps_sum, &steps_n, &changed, d);
            if (changed)
                r->changed++;
            if (o->progress)
                o->progress(j + 1, c.n, L->node->name ? L->node->name : "", o->progress_user);
        }
        r->runs++;
    }
    r->mean_abs_steps = steps_n ? steps_sum / (double)steps_n : 0;
out:
    for (size_t k = 0; cache && k < (size_t)ns * nf_in; k++)
        oq_rt_tensor_release(&cache[k]);
    free(cache);
    free(in);
    free(map);
    free(anc);
    oq_plan_free(fp);
    oq_plan_free(qp);
    free_layers(c.l, c.n);
    return st;
}
