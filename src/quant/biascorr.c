/* Empirical bias correction of a QDQ model: include/onnxq/biascorr.h */
#include "onnxq/biascorr.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quant/quant-impl.h"

typedef struct bc_layer {
    oq_node *node;         /* the quantized model's Conv / ConvTranspose / Gemm */
    const oq_value *fv;    /* its output in the float model */
    oq_tensor *bias;       /* the int32 initializer behind its bias DequantizeLinear */
    int64_t c;             /* output channels (bias length) */
    double *scale;         /* [c] the bias step of each channel */
    double *fsq;           /* [c] the float output's sums of squares */
    int64_t fcount, qcount;    /* elements per channel summed, over every sample */
    bool bad;              /* an output that is not float [N, C, ...]: not corrected */
    /* per sample k: the channel sums of the float output fs[k * c + ch] over fn[k]
     * elements, of the quantized output qs, qn (summed in sample order where they are
     * used, so the lockstep result does not depend on which thread came last) */
    double *fs, *qs;
    int64_t *fn, *qn;
    bool *qbad;            /* [samples] that sample's output was not float [N, C, ...] */
    float *add;            /* [c] the correction, in output units, added in place */
    int32_t *nb;           /* [c] the corrected int32 bias (written to the model at the end) */
    bool corrected;        /* nb holds a correction */
} bc_layer;

typedef struct bc_ctx {
    bc_layer *l;
    size_t n;
    size_t w0, w1;         /* the layers [w0, w1) the quantized pass measures (a wave) */
    size_t seen;           /* of which observed in this run */
    size_t k, ns;          /* the sample being run, of ns */
    oq_plan *plan;         /* the plan running: stopped once every layer (float pass) or the
                            * wave (quantized pass) is seen */
    bool float_pass;
} bc_ctx;

/* Bytes of the float weights a quantized run makes: each DequantizeLinear of a constant
 * (an initializer) writes numel floats per run. */
static double dequantized_weight_bytes(const oq_model *qm)
{
    double b = 0;
    for (const oq_node *n = qm->graph->first; n; n = n->next) {
        if (!oq_quant_op_is(n, "DequantizeLinear") || n->n_inputs < 1 || !n->inputs[0])
            continue;
        const oq_tensor *t = oq_value_const_tensor(n->inputs[0]);
        int64_t numel = t ? oq_tensor_numel(t) : -1;
        if (numel > 0)
            b += 4.0 * (double)numel;
    }
    return b;
}

/* Add the per-channel sums of t (float [N, C, ...]) to sum (and sq when not NULL); false
 * when t is not such a tensor. */
static bool accumulate(const bc_layer *L, const oq_rt_tensor *t, double *sum, double *sq, int64_t *count)
{
    size_t axis = 1;
    if (t->dtype != OQ_DTYPE_FLOAT || t->rank < 2 || t->dims[axis] != L->c || (!t->data && oq_rt_tensor_numel(t) > 0))
        return false;
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
    return true;
}

static void observe(const oq_node *node, size_t out_index, const oq_rt_tensor *t, void *user)
{
    bc_ctx *c = user;
    if (c->float_pass) {
        for (size_t j = 0; j < c->n; j++)
            if (c->l[j].fv == node->outputs[out_index]) {
                bc_layer *L = &c->l[j];
                if (!L->bad)
                    L->bad = !accumulate(L, t, L->fs + c->k * (size_t)L->c, L->fsq, &L->fn[c->k]);
                if (++c->seen == c->n) /* every layer measured: the rest of the graph is not needed */
                    oq_plan_stop(c->plan);
            }
        return;
    }
    if (out_index != 0)
        return;
    for (size_t j = c->w0; j < c->w1; j++)
        if (node == c->l[j].node) {
            bc_layer *L = &c->l[j];
            if (!L->bad)
                L->bad = !accumulate(L, t, L->qs + c->k * (size_t)L->c, NULL, &L->qn[c->k]);
            if (++c->seen == c->w1 - c->w0) /* the rest of the graph is not needed */
                oq_plan_stop(c->plan);
        }
}

/* n's output in the float model: the output of the node of the same name and op type (the
 * quantized model renames the outputs that get a QuantizeLinear, "_prequant"), else the value
 * of the same name. A node whose output holds other numbers than its float twin's is no
 * layer to correct: smooth-quant renames such outputs (the inliers of a split, "_inliers";
 * 1/s folded into the layer, "_smoothed"), and comparing them with the float model's took
 * the outlier part for an error (ResNet-50's fc Gemm: a correction of 1.2 times its output's
 * RMS, 40.5 -> 7.6 dB, and bias correction thrown away for every layer). */
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
    if (hit) {
        const oq_value *fv = hit->n_outputs >= 1 ? hit->outputs[0] : NULL;
        const char *qn = n->outputs[0] ? n->outputs[0]->name : NULL, *fn = fv ? fv->name : NULL;
        size_t len = fn ? strlen(fn) : 0;
        if (!qn || !fn || strncmp(qn, fn, len) != 0 || (qn[len] && strncmp(qn + len, "_prequant", 9) != 0))
            return NULL;
        return fv;
    }
    const oq_value *v = oq_graph_find_local(fm->graph, n->outputs[0]->name);
    return v && v->kind == OQ_VALUE_NODE && oq_quant_op_is(v->producer, n->op_type) ? v : NULL;
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
    L->fsq = calloc((size_t)L->c, sizeof *L->fsq);
    return true; /* the caller checks the buffers */
}

static bool find_layer(oq_model *fm, oq_node *n, bc_layer *L, bool *skip)
{
    *skip = false;
    if (!(oq_quant_op_is(n, "Conv") || oq_quant_op_is(n, "ConvTranspose") || oq_quant_op_is(n, "Gemm")) || n->n_inputs < 1 ||
        !oq_quant_producer_dq(n->inputs[0]))
        return false;
    *skip = true; /* quantized: from here on, a reason not to correct it is a skip */
    if (n->n_inputs < 3 || !n->outputs[0] || n->n_outputs < 1)
        return false;
    const oq_value *b = n->inputs[2];
    const oq_node *dq = oq_quant_producer_dq(b);
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
    if (!L->scale || !L->fsq)
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

/* Elements summed over the ns samples (per-sample counts n). */
static int64_t total(const int64_t *n, size_t ns)
{
    int64_t t = 0;
    for (size_t k = 0; k < ns; k++)
        t += n[k];
    return t;
}

static void free_layers(bc_layer *l, size_t n)
{
    for (size_t j = 0; l && j < n; j++) {
        free(l[j].scale);
        free(l[j].fsq);
        free(l[j].qs);
        free(l[j].qn);
        free(l[j].qbad);
        free(l[j].add);
        free(l[j].nb);
        free(l[j].fs);
        free(l[j].fn);
    }
    free(l);
}

oq_biascorr_options oq_biascorr_options_default(void)
{
    oq_biascorr_options o;
    memset(&o, 0, sizeof o);
    o.arith = OQ_ARITH_REFERENCE;
    o.max_samples = 16;
    const char *m = getenv("ONNXQ_BIASCORR_METHOD"); /* for comparisons: lockstep | waves */
    o.method = m && !strcmp(m, "lockstep") ? OQ_BIASCORR_LOCKSTEP : m && !strcmp(m, "waves") ? OQ_BIASCORR_WAVES
                                                                                            : OQ_BIASCORR_AUTO;
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

/* The corrected int32 bias of layer L from its measured sums (per sample fs, qs over fn,
 * qn elements, of ns samples; fsq over fcount) into nb[c], and the statistics into r;
 * *changed: a bias value moved.
 *
 * Each channel's correction is the mean error d shrunk by (1 - se^2 / d^2)+, se being the
 * standard error of d from the per-sample mean errors: a
 * shift that differs much from one input to the next is corrected less, one that is about
 * the same on every input almost fully. Without it the chain of corrections (each layer
 * measured with the upstream ones applied) fits the 16 samples and can hurt the others: on
 * held-out calibration samples YOLOv8n's class scores went from 9.5 dB without correction
 * to -0.1 dB with the plain mean, 10.5 dB shrunk; PaddleOCR rec 16.2 -> 16.5 plain, 22.2
 * shrunk (docs/quantize.md "Bias correction"). */
static void decide(const bc_layer *L, size_t ns, const int32_t *old, int32_t *nb, oq_biascorr_result *r,
                   double *steps_sum, size_t *steps_n, bool *changed)
{
    *changed = false;
    double ms = 0; /* the float output's mean square, over all channels */
    for (int64_t ch = 0; ch < L->c; ch++)
        ms += L->fsq[ch] / (double)L->fcount;
    double rms = sqrt(ms / (double)L->c);
    for (int64_t ch = 0; ch < L->c; ch++) {
        double fsum = 0, qsum = 0, m = 0, m2 = 0, s = L->scale[ch];
        size_t n = 0;
        for (size_t k = 0; k < ns; k++) {
            double f = L->fs[k * (size_t)L->c + (size_t)ch], q = L->qs[k * (size_t)L->c + (size_t)ch];
            fsum += f, qsum += q;
            if (L->fn[k] <= 0 || L->qn[k] <= 0)
                continue;
            double dk = f / (double)L->fn[k] - q / (double)L->qn[k];
            m += dk, m2 += dk * dk, n++;
        }
        double delta = fsum / (double)L->fcount - qsum / (double)L->qcount;
        double shrink = 1;
        if (n >= 2) {
            m /= (double)n;
            double var = (m2 / (double)n - m * m) * (double)n / (double)(n - 1), se2 = var > 0 ? var / (double)n : 0;
            shrink = m * m > 0 ? 1 - se2 / (m * m) : 0;
            shrink = shrink > 0 ? shrink : 0;
        }
        delta *= shrink;
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
}

static oq_status set_bias(oq_model *qm, bc_layer *L, const int32_t *nb, oq_diag *d)
{
    oq_status st = oq_tensor_set_data(qm, L->bias, OQ_DTYPE_INT32, L->bias->dims, L->bias->rank, nb,
                                      L->c * (int64_t)sizeof *nb);
    if (st != OQ_OK)
        return oq_diag_error(d, st, "bias correction: cannot update bias \"%s\"", L->bias->name ? L->bias->name : "");
    return OQ_OK;
}

/* Correct layer L from its measured sums; *changed: a bias value moved. */
static oq_status correct(oq_model *qm, oq_plan **qp, bc_layer *L, size_t ns, oq_biascorr_result *r,
                         double *steps_sum, size_t *steps_n, bool *changed, oq_diag *d)
{
    const int32_t *old = oq_tensor_data(L->bias, d);
    if (!old)
        return OQ_ERR_INVALID;
    int32_t *nb = malloc((size_t)L->c * sizeof *nb);
    if (!nb)
        return oq_diag_error(d, OQ_ERR_NOMEM, "bias correction: out of memory");
    decide(L, ns, old, nb, r, steps_sum, steps_n, changed);
    oq_status st = OQ_OK;
    if (*changed) { /* the model must not change under a plan: drop it, compile again next time */
        oq_plan_free(*qp);
        *qp = NULL;
        st = set_bias(qm, L, nb, d);
    }
    free(nb);
    return st;
}

/* ---- lockstep: every sample's quantized run at once, one thread (and one plan) per sample.
 * Each run stops at every layer's output until all samples have produced it; the last one to
 * arrive reduces the sums in sample order, decides the layer's correction, and every run adds
 * it to its output in place before the layer's consumers read it. Same corrections as the
 * waves (a layer is measured with every upstream correction applied), up to float rounding
 * (y + (b' - b) instead of a Conv that adds b'), in one pass. At most `threads` runs compute
 * at a time (a run waiting at a layer gives its turn away). */
typedef struct bc_sync {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t arrived;        /* runs waiting at the current layer */
    size_t active;         /* runs not finished */
    uint64_t gen;          /* layers passed */
    size_t at;             /* the layer being waited at (the first arrival sets it) */
    size_t tokens;         /* runs that may compute now */
    bool abort;            /* a run failed, or the runs disagree: stop every run */
} bc_sync;

typedef struct bc_lock {
    bc_ctx *c;
    bc_sync *sy;
    const oq_biascorr_options *o;
    const int32_t **old;   /* [n] each layer's int32 bias before correction */
    oq_biascorr_result *r;
    double steps_sum;
    size_t steps_n;
    size_t ns;
} bc_lock;

typedef struct bc_worker {
    bc_lock *lk;
    size_t k;              /* the sample */
    oq_plan *plan;
    oq_rt_tensor *in;
    size_t passed;         /* layers passed */
    oq_status st;
    oq_diag diag;
} bc_worker;

/* Under sy->mu: the last run arrived at layer j; decide its correction. */
static void lock_decide(bc_lock *lk, size_t j)
{
    bc_layer *L = &lk->c->l[j];
    bool bad = L->bad;
    for (size_t k = 0; k < lk->ns; k++)
        bad |= L->qbad[k];
    L->qcount = total(L->qn, lk->ns);
    L->corrected = false;
    memset(L->add, 0, (size_t)L->c * sizeof *L->add);
    if (bad || L->qcount == 0) {
        L->bad = true;
        lk->r->skipped++;
        return;
    }
    lk->r->layers++;
    bool changed;
    decide(L, lk->ns, lk->old[j], L->nb, lk->r, &lk->steps_sum, &lk->steps_n, &changed);
    if (changed) {
        lk->r->changed++;
        L->corrected = true;
        for (int64_t ch = 0; ch < L->c; ch++) { /* what DequantizeLinear gives for each, in float */
            float s = (float)L->scale[ch];
            L->add[ch] = (float)L->nb[ch] * s - (float)lk->old[j][ch] * s;
        }
    }
    if (lk->o->progress)
        lk->o->progress(j + 1, lk->c->n, L->node->name ? L->node->name : "", lk->o->progress_user);
}

static void lock_take(bc_sync *sy)
{
    while (sy->tokens == 0 && !sy->abort)
        pthread_cond_wait(&sy->cv, &sy->mu);
    if (sy->tokens > 0)
        sy->tokens--;
}

static void observe_lock(const oq_node *node, size_t out_index, const oq_rt_tensor *t, void *user)
{
    bc_worker *w = user;
    bc_lock *lk = w->lk;
    bc_ctx *c = lk->c;
    bc_sync *sy = lk->sy;
    if (out_index != 0)
        return;
    size_t j = 0;
    while (j < c->n && c->l[j].node != node)
        j++;
    if (j == c->n)
        return;
    bc_layer *L = &c->l[j];
    int64_t cnt = 0;
    double *qs = L->qs + w->k * (size_t)L->c;
    memset(qs, 0, (size_t)L->c * sizeof *qs);
    L->qbad[w->k] = !accumulate(L, t, qs, NULL, &cnt);
    L->qn[w->k] = cnt;
    pthread_mutex_lock(&sy->mu);
    if (sy->arrived == 0)
        sy->at = j;
    else if (sy->at != j) /* the runs meet the layers in one order (one plan, compiled alike) */
        sy->abort = true;
    sy->arrived++;
    sy->tokens++;
    uint64_t gen = sy->gen;
    if (!sy->abort && sy->arrived == sy->active) {
        lock_decide(lk, j);
        sy->arrived = 0;
        sy->gen++;
    } else {
        pthread_cond_broadcast(&sy->cv); /* the token given away */
        while (sy->gen == gen && !sy->abort)
            pthread_cond_wait(&sy->cv, &sy->mu);
    }
    pthread_cond_broadcast(&sy->cv);
    bool abort = sy->abort;
    if (!abort)
        lock_take(sy);
    pthread_mutex_unlock(&sy->mu);
    w->passed++;
    if (abort || w->passed == c->n) { /* failed elsewhere, or the rest of the graph is not needed */
        oq_plan_stop(w->plan);
        return;
    }
    if (L->corrected && t->data && t->dtype == OQ_DTYPE_FLOAT && !L->qbad[w->k]) {
        int64_t outer = 1, inner = 1;
        for (size_t a = 0; a < t->rank; a++)
            if (a < 1)
                outer *= t->dims[a];
            else if (a > 1)
                inner *= t->dims[a];
        float *x = t->data; /* the plan's buffer: the layer's consumers have not run yet */
        for (int64_t o = 0; o < outer; o++)
            for (int64_t ch = 0; ch < L->c; ch++) {
                float a = L->add[ch], *p = x + (o * L->c + ch) * inner;
                if (a != 0)
                    for (int64_t i = 0; i < inner; i++)
                        p[i] += a;
            }
    }
}

static void *lock_run(void *arg)
{
    bc_worker *w = arg;
    bc_sync *sy = w->lk->sy;
    pthread_mutex_lock(&sy->mu);
    lock_take(sy);
    bool abort = sy->abort;
    pthread_mutex_unlock(&sy->mu);
    w->st = abort ? OQ_OK : oq_plan_run(w->plan, w->in, oq_plan_n_inputs(w->plan), NULL, 0, &w->diag);
    pthread_mutex_lock(&sy->mu);
    sy->tokens++;
    sy->active--;
    if (w->st != OQ_OK)
        sy->abort = true;
    else if (!sy->abort && w->passed != w->lk->c->n) /* every run must meet every layer */
        sy->abort = true;
    pthread_cond_broadcast(&sy->cv);
    pthread_mutex_unlock(&sy->mu);
    return NULL;
}

/* The lockstep pass over ns cached samples (cache[k * nf_in + map[i]]). */
static oq_status lockstep(oq_model *qm, bc_ctx *c, const oq_plan *fp, const oq_rt_tensor *cache, size_t nf_in,
                          size_t ns, const oq_biascorr_options *o, oq_biascorr_result *r, oq_diag *d)
{
    oq_status st = OQ_OK;
    bc_sync sy;
    memset(&sy, 0, sizeof sy);
    bc_lock lk = {.c = c, .sy = &sy, .o = o, .r = r, .ns = ns};
    bc_worker *w = calloc(ns, sizeof *w);
    pthread_t *th = calloc(ns, sizeof *th);
    size_t *map = calloc(nf_in + 1, sizeof *map);
    lk.old = calloc(c->n + 1, sizeof *lk.old);
    size_t started = 0, compiled = 0;
    bool sync_ok = false;
    if (!w || !th || !map || !lk.old)
        goto nomem;
    for (size_t j = 0; j < c->n; j++) {
        bc_layer *L = &c->l[j];
        L->qbad = calloc(ns, sizeof *L->qbad);
        L->add = calloc((size_t)L->c, sizeof *L->add);
        L->nb = calloc((size_t)L->c, sizeof *L->nb);
        if (!L->qbad || !L->add || !L->nb)
            goto nomem;
        lk.old[j] = oq_tensor_data(L->bias, d);
        if (!lk.old[j]) {
            st = OQ_ERR_INVALID;
            goto out;
        }
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    size_t threads = o->threads > 0 ? (size_t)o->threads : ncpu > 0 ? (size_t)ncpu : 1;
    oq_plan_options po = oq_plan_options_default();
    po.threads = threads > ns ? (int)(threads / ns) : 1; /* results do not depend on it */
    po.no_fold = true; /* one plan per sample: no copy of every dequantized weight in each */
    for (size_t k = 0; k < ns; k++) {
        w[k].lk = &lk;
        w[k].k = k;
        oq_diag_init(&w[k].diag);
        po.on_tensor = observe_lock;
        po.user = &w[k];
        st = compile_q(qm, &po, fp, &w[k].plan, map, d);
        compiled = k + 1;
        if (st != OQ_OK)
            goto out;
        size_t nq = oq_plan_n_inputs(w[k].plan);
        w[k].in = calloc(nq + 1, sizeof *w[k].in);
        if (!w[k].in)
            goto nomem;
        for (size_t i = 0; i < nq; i++)
            w[k].in[i] = cache[k * nf_in + map[i]], w[k].in[i].owned = false;
    }
    if (pthread_mutex_init(&sy.mu, NULL) != 0)
        goto nomem;
    if (pthread_cond_init(&sy.cv, NULL) != 0) {
        pthread_mutex_destroy(&sy.mu);
        goto nomem;
    }
    sync_ok = true;
    sy.tokens = threads;
    sy.active = ns;
    for (; started < ns; started++)
        if (pthread_create(&th[started], NULL, lock_run, &w[started]) != 0) {
            pthread_mutex_lock(&sy.mu);
            sy.abort = true;
            sy.active -= ns - started; /* the runs never started */
            pthread_cond_broadcast(&sy.cv);
            pthread_mutex_unlock(&sy.mu);
            st = oq_diag_error(d, OQ_ERR_NOMEM, "bias correction: cannot start a thread");
            break;
        }
    for (size_t k = 0; k < started; k++)
        pthread_join(th[k], NULL);
    for (size_t k = 0; k < started && st == OQ_OK; k++)
        if (w[k].st != OQ_OK) { /* the first failed sample's messages */
            for (size_t e = 0; e < w[k].diag.count; e++) {
                const oq_diag_entry *en = &w[k].diag.entries[e];
                oq_diag_add(d, en->severity, en->code, en->file, en->node, en->op, "%s", en->message);
            }
            st = w[k].st;
            oq_diag_add(d, OQ_SEV_NOTE, st, NULL, NULL, NULL, "bias correction: quantized model, sample %zu", k);
        }
    if (st == OQ_OK && sy.abort)
        st = oq_diag_error(d, OQ_ERR_INTERNAL, "bias correction: the runs over the samples did not meet the same "
                           "layers");
    if (st == OQ_OK)
        r->runs = 1;

    r->mean_abs_steps = lk.steps_n ? lk.steps_sum / (double)lk.steps_n : 0;
    for (size_t k = 0; k < compiled; k++) { /* no plan may hold the old biases any more */
        oq_plan_free(w[k].plan);
        w[k].plan = NULL;
    }
    for (size_t j = 0; j < c->n && st == OQ_OK; j++)
        if (c->l[j].corrected)
            st = set_bias(qm, &c->l[j], c->l[j].nb, d);
    goto out;
nomem:
    st = oq_diag_error(d, OQ_ERR_NOMEM, "bias correction: out of memory");
out:
    if (sync_ok) {
        pthread_cond_destroy(&sy.cv);
        pthread_mutex_destroy(&sy.mu);
    }
    for (size_t k = 0; w && k < compiled; k++) {
        oq_plan_free(w[k].plan);
        free(w[k].in);
        oq_diag_free(&w[k].diag);
    }
    free(w);
    free(th);
    free(map);
    free(lk.old);
    return st;
}

/* The end of the wave that starts at layer j: j and the layers after it that none of the
 * wave's layers feeds, so that one run measures them all with every correction they
 * depend on applied (anc: ancestors(), words per row) */
static size_t wave_end(const uint64_t *anc, size_t words, size_t n, size_t j)
{
    size_t e = j + 1;
    for (; e < n; e++)
        for (size_t k = j; k < e; k++)
            if ((anc[e * words + k / 64] >> (k % 64)) & 1)
                return e;
    return e;
}

/* how many waves the pass per wave would take */
static size_t count_waves(const uint64_t *anc, size_t words, size_t n)
{
    size_t waves = 0;
    for (size_t j = 0; j < n; j = wave_end(anc, words, n, j))
        waves++;
    return waves;
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
            if (!L->scale || !L->fsq) {
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
    if (o->sample_index) {
        for (size_t i = 0; i < o->n_sample_index; i++)
            if (o->sample_index[i] >= ns) {
                free_layers(c.l, c.n);
                return oq_diag_error(d, OQ_ERR_INVALID, "bias correction: sample %llu of %llu",
                                     (unsigned long long)o->sample_index[i], (unsigned long long)ns);
            }
        ns = o->n_sample_index;
    }
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
    for (size_t j = 0; j < c.n; j++) { /* per-sample sums: decide()'s shrinkage */
        bc_layer *L = &c.l[j];
        size_t cells = (size_t)ns * (size_t)L->c + 1;
        L->fs = calloc(cells, sizeof *L->fs);
        L->qs = calloc(cells, sizeof *L->qs);
        L->fn = calloc((size_t)ns + 1, sizeof *L->fn);
        L->qn = calloc((size_t)ns + 1, sizeof *L->qn);
        if (!L->fs || !L->qs || !L->fn || !L->qn) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "bias correction: out of memory");
            goto out;
        }
    }
    c.ns = (size_t)ns;
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
        st = oq_calib_source_sample(src, fp, o->sample_index ? o->sample_index[k] : k, cache + k * nf_in, nf_in, label,
                                    sizeof label, d);
        c.seen = 0;
        c.k = (size_t)k;
        c.plan = fp;
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
        c.l[j].fcount = total(c.l[j].fn, (size_t)ns);
        if (c.l[j].bad || c.l[j].fcount == 0) {
            r->skipped++;
            bc_layer *L = &c.l[j];
            free(L->scale), free(L->fsq), free(L->fs), free(L->qs), free(L->fn), free(L->qn);
            continue;
        }
        c.l[keep++] = c.l[j];
    }
    c.n = keep;
    /* one pass with every sample's run at once when their buffers fit, else a pass per
     * wave. A quantized run holds about the float run's peak intermediates plus the float
     * copies of its weights (dequantized per run, not kept in the plan): the peak RSS the
     * lockstep pass adds per sample, measured, is within 15 % of that sum on EfficientNet-
     * Lite0, YOLOv8n, a ViT-S and a PicoDet (activation-heavy: 45 MB of intermediates, 7 MB
     * of weights; the ViT: 13 and 88). */
    uint64_t budget = o->max_bytes ? o->max_bytes : OQ_BIASCORR_MAX_BYTES;
    double per = (double)oq_plan_peak_bytes(fp) + dequantized_weight_bytes(qm), need = per * (double)ns;
    if (c.n && (o->method == OQ_BIASCORR_LOCKSTEP || (o->method == OQ_BIASCORR_AUTO && need <= (double)budget))) {
        st = lockstep(qm, &c, fp, cache, nf_in, (size_t)ns, o, r, d);
        goto out;
    }
    size_t words = 0;
    anc = c.n ? ancestors(qm, c.l, c.n, &words) : NULL;
    if (c.n && !anc) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "bias correction: out of memory");
        goto out;
    }
    /* AUTO, when not every sample's run fits and the waves are more than
     * OQ_BIASCORR_MAX_WAVES (a pass per wave costs a run per sample and wave: a fingerprint
     * model with 51 waves took 366 s on 16 samples): lockstep on the first samples that
     * fit, if there are at least OQ_BIASCORR_MIN_LOCKSTEP of them. With few waves, every
     * sample at about the lockstep pass's cost. */
    uint64_t fit = per > 0 ? (uint64_t)((double)budget / per) : ns;
    if (c.n && o->method == OQ_BIASCORR_AUTO && fit >= OQ_BIASCORR_MIN_LOCKSTEP &&
        count_waves(anc, words, c.n) > OQ_BIASCORR_MAX_WAVES) {
        r->samples = fit;
        for (size_t j = 0; j < c.n; j++) /* the float sums over those samples */
            c.l[j].fcount = total(c.l[j].fn, (size_t)fit);
        st = lockstep(qm, &c, fp, cache, nf_in, (size_t)fit, o, r, d);
        goto out;
    }
    double steps_sum = 0;
    size_t steps_n = 0;
    for (size_t j = 0; j < c.n && st == OQ_OK;) {
        size_t e = wave_end(anc, words, c.n, j); /* a wave: layers j .. e - 1 */
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
            c.k = (size_t)k;
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
            L->qcount = total(L->qn, (size_t)ns);
            if (L->bad || L->qcount == 0) {
                r->skipped++;
                continue;
            }
            r->layers++;
            bool changed = false;
            st = correct(qm, &qp, L, (size_t)ns, r, &steps_sum, &steps_n, &changed, d);
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
