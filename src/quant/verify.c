/* onnxq verify: float vs quantized model, per output and per layer, streaming.
 * Design and matching rule: include/onnxq/verify.h and docs/verify.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/calib.h"
#include "onnxq/satcheck.h"
#include "onnxq/stats.h"
#include "onnxq/verify.h"
#include "quant/quant-impl.h"

/* ------------------------------------------------------------ error sums ---- */

/* one pair of values into the sums */
static inline void err_add_one(oq_err_acc *a, double xv, double yv)
{
    if (!isfinite(xv) || !isfinite(yv)) {
        a->nonfinite++;
        return;
    }
    double dd = xv - yv, ad = fabs(dd);
    a->sxx += xv * xv;
    a->syy += yv * yv;
    a->sxy += xv * yv;
    a->sdd += dd * dd;
    a->sad += ad;
    if (ad > a->maxad)
        a->maxad = ad;
    a->n++;
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
/* four lanes of double sums (a different order of the same additions: the sums agree
 * to rounding); a group of four with a non-finite value goes element by element */
__attribute__((target("avx2,fma"))) static int64_t err_acc_avx2(oq_err_acc *a, const float *x,
                                                               const float *y, int64_t n)
{
    __m256d sxx = _mm256_setzero_pd(), syy = sxx, sxy = sxx, sdd = sxx, sad = sxx, mx = sxx;
    const __m256d absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
    uint64_t cnt = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m128 xf = _mm_loadu_ps(x + i), yf = _mm_loadu_ps(y + i);
        if (_mm_movemask_ps(_mm_cmpord_ps(_mm_sub_ps(xf, xf), _mm_sub_ps(yf, yf))) != 0xf) {
            for (int j = 0; j < 4; j++)
                err_add_one(a, x[i + j], y[i + j]);
            continue;
        }
        __m256d xv = _mm256_cvtps_pd(xf), yv = _mm256_cvtps_pd(yf);
        __m256d dd = _mm256_sub_pd(xv, yv), ad = _mm256_and_pd(dd, absmask);
        sxx = _mm256_add_pd(sxx, _mm256_mul_pd(xv, xv));
        syy = _mm256_add_pd(syy, _mm256_mul_pd(yv, yv));
        sxy = _mm256_add_pd(sxy, _mm256_mul_pd(xv, yv));
        sdd = _mm256_add_pd(sdd, _mm256_mul_pd(dd, dd));
        sad = _mm256_add_pd(sad, ad);
        mx = _mm256_max_pd(mx, ad);
        cnt += 4;
    }
    double l[6][4];
    _mm256_storeu_pd(l[0], sxx);
    _mm256_storeu_pd(l[1], syy);
    _mm256_storeu_pd(l[2], sxy);
    _mm256_storeu_pd(l[3], sdd);
    _mm256_storeu_pd(l[4], sad);
    _mm256_storeu_pd(l[5], mx);
    a->sxx += (l[0][0] + l[0][1]) + (l[0][2] + l[0][3]);
    a->syy += (l[1][0] + l[1][1]) + (l[1][2] + l[1][3]);
    a->sxy += (l[2][0] + l[2][1]) + (l[2][2] + l[2][3]);
    a->sdd += (l[3][0] + l[3][1]) + (l[3][2] + l[3][3]);
    a->sad += (l[4][0] + l[4][1]) + (l[4][2] + l[4][3]);
    for (int j = 0; j < 4; j++)
        if (l[5][j] > a->maxad)
            a->maxad = l[5][j];
    a->n += cnt;
    return i;
}
#endif

void oq_err_acc_add_f32(oq_err_acc *a, const float *x, const float *y, int64_t n)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (n >= 16 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        int64_t done = err_acc_avx2(a, x, y, n);
        x += done;
        y += done;
        n -= done;
    }
#endif
    double sxx = 0, syy = 0, sxy = 0, sdd = 0, sad = 0, mx = a->maxad;
    uint64_t cnt = 0, bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double xv = x[i], yv = y[i];
        if (!isfinite(xv) || !isfinite(yv)) {
            bad++;
            continue;
        }
        double dd = xv - yv, ad = fabs(dd);
        sxx += xv * xv;
        syy += yv * yv;
        sxy += xv * yv;
        sdd += dd * dd;
        sad += ad;
        if (ad > mx)
            mx = ad;
        cnt++;
    }
    a->sxx += sxx;
    a->syy += syy;
    a->sxy += sxy;
    a->sdd += sdd;
    a->sad += sad;
    a->maxad = mx;
    a->n += cnt;
    a->nonfinite += bad;
}

bool oq_err_acc_add(oq_err_acc *a, const void *x, int32_t xdt, const void *y, int32_t ydt,
                    int64_t n)
{
    if (xdt == OQ_DTYPE_FLOAT && ydt == OQ_DTYPE_FLOAT) {
        oq_err_acc_add_f32(a, x, y, n);
        return true;
    }
    if (!oq_stats_dtype_supported(xdt) || !oq_stats_dtype_supported(ydt))
        return false;
    enum { CHUNK = 256 };
    double xb[CHUNK], yb[CHUNK];
    for (int64_t s = 0; s < n; s += CHUNK) {
        int64_t c = n - s < CHUNK ? n - s : CHUNK;
        if (!oq_elems_to_double(x, xdt, s, c, xb) || !oq_elems_to_double(y, ydt, s, c, yb))
            return false;
        for (int64_t i = 0; i < c; i++)
            err_add_one(a, xb[i], yb[i]);
    }
    return true;
}

double oq_err_sqnr_db(const oq_err_acc *a)
{
    if (a->n == 0)
        return NAN;
    if (a->sdd == 0)
        return INFINITY;
    if (a->sxx == 0)
        return -INFINITY;
    return 10.0 * log10(a->sxx / a->sdd);
}

double oq_err_cosine(const oq_err_acc *a)
{
    if (a->n == 0)
        return NAN;
    if (a->sxx == 0 && a->syy == 0)
        return 1.0;
    if (a->sxx == 0 || a->syy == 0)
        return 0.0;
    double c = a->sxy / (sqrt(a->sxx) * sqrt(a->syy));
    return c > 1 ? 1 : c < -1 ? -1 : c;
}

double oq_err_mean_abs(const oq_err_acc *a)
{
    return a->n ? a->sad / (double)a->n : NAN;
}

/* ------------------------------------------------------------ session ------- */

oq_verify_options oq_verify_options_default(void)
{
    oq_verify_options o;
    memset(&o, 0, sizeof o);
    o.isolated = true;
    o.class_topk = 5;
    o.arith = OQ_ARITH_REFERENCE;
    o.arith_loss = true;
    o.float_ranges = true;
    return o;
}

typedef struct out_map {
    size_t qidx;          /* index in the quantized plan's outputs */
} out_map;

/* The slices of one graph output: the Concat, the ops between it and the output (Concat
 * side first), and the part boundaries of the current sample along the output's axis. */
typedef struct out_slices {
    const oq_node *concat;    /* NULL: the output is judged whole */
    const oq_node **ops;
    size_t n_ops;
    size_t n;                 /* parts (Concat inputs) */
    int64_t *bounds;          /* [n + 1] */
} out_slices;

/* A tensor shape seen by the float observer in sample stamp - 1. */
typedef struct shape_rec {
    uint64_t stamp;
    size_t rank;
    int64_t dims[OQ_RT_MAX_RANK];
} shape_rec;

struct oq_verify {
    oq_verify_options opt;
    oq_model *fm, *qm, *im;
    uint8_t *im_buf;
    oq_plan *fp, *qp, *ip;
    size_t n_fin, n_fout, n_qin, n_qout;
    size_t *qin_from;         /* quant plan input i -> float plan input index */
    size_t *qout_of;          /* float output i -> quant plan output index */
    oq_verify_output *outs;
    out_slices *osl;          /* [n_fout] */
    int32_t *f_shape;         /* float value id -> shapes[] index, -1 */
    shape_rec *shapes;
    size_t n_shapes;
    oq_verify_layer *layers;
    size_t n_layers;
    int64_t *layer_input;     /* layer -> float plan input index (graph-input layers), -1 */
    uint32_t *layer_fid;      /* layer -> float value id (node-output layers) */
    oq_verify_weight *weights;
    size_t n_weights;
    uint32_t *weight_fid;     /* float initializer value id */
    oq_tensor **weight_ref;   /* the float weight each is compared with */
    oq_model *wref;           /* the float model after constant-to-initializer and
                               * fold-batchnorm (as onnxq quantize prepares it), for weights
                               * that only exist there (folded: W_bnfold); NULL until needed */
    bool wref_tried;
    /* side tables by value id */
    uint32_t n_fids, n_qids, n_iids;
    int32_t *f_layer;         /* float value -> layer, -1 */
    bool *f_store;            /* float value copied per sample */
    int32_t *q_layer;         /* quant value -> layer, -1 */
    int32_t *q_weight;        /* quant value -> weight, -1 */
    int32_t *i_layer;         /* isolation value -> layer, -1 */
    /* arith != reference: Q output value -> layer (a fused group's T is not produced),
     * and per layer the sample (+1) in which T was already compared through it */
    int32_t *qq_layer, *iq_layer;
    uint64_t *q_seen, *i_seen;
    oq_satcheck *sc;          /* arith_loss */
    int64_t *sc_of;           /* layer -> satcheck layer, -1 */
    size_t *sc_out;           /* float output i -> satcheck output */
    oq_rt_tensor *store;      /* by float value id, this sample only */
    int64_t store_bytes, peak_store_bytes;
    /* isolation plan inputs: float value id to feed, or UINT32_MAX = original input */
    uint32_t *iin_fid;
    size_t *iin_from;
    size_t n_iin;
    bool iso_tried;
    /* per-run state */
    const oq_rt_tensor *cur_inputs;
    bool nomem;
    uint64_t samples;
};

static bool is_float_dtype(int32_t dt)
{
    return dt == OQ_DTYPE_FLOAT || dt == OQ_DTYPE_DOUBLE || dt == OQ_DTYPE_FLOAT16 ||
           dt == OQ_DTYPE_BFLOAT16;
}

static bool same_shape(const oq_rt_tensor *a, const oq_rt_tensor *b)
{
    if (a->rank != b->rank)
        return false;
    for (size_t i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

/* The quantizer's range for a DequantizeLinear node fed by a QuantizeLinear. */
static void layer_qparams(oq_verify_layer *L, const oq_node *dq)
{
    double s, zp = 0;
    int32_t zdt = OQ_DTYPE_UINT8;
    L->quantized = true;
    if (!oq_quant_const_scalar(dq->n_inputs > 1 ? dq->inputs[1] : NULL, &s, NULL))
        return;
    if (dq->n_inputs > 2 && dq->inputs[2] && !oq_quant_const_scalar(dq->inputs[2], &zp, &zdt))
        return;
    int32_t qmin, qmax;
    if (oq_qrange(zdt, false, &qmin, &qmax) != OQ_OK)
        return;
    L->has_qrange = true;
    L->scale = (float)s;
    L->zero_point = (int32_t)zp;
    L->qdtype = zdt;
    L->qmin = ((double)qmin - zp) * (double)(float)s;
    L->qmax = ((double)qmax - zp) * (double)(float)s;
}

static oq_verify_layer *add_layer(oq_verify *v, size_t *cap, oq_diag *d)
{
    if (v->n_layers == *cap) {
        size_t nc = *cap ? *cap * 2 : 32;
        oq_verify_layer *nl = realloc(v->layers, nc * sizeof *nl);
        int64_t *ni = realloc(v->layer_input, nc * sizeof *ni);
        if (nl)
            v->layers = nl;
        if (ni)
            v->layer_input = ni;
        uint32_t *nf = realloc(v->layer_fid, nc * sizeof *nf);
        if (nf)
            v->layer_fid = nf;
        if (!nl || !ni || !nf) {
            oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
            return NULL;
        }
        *cap = nc;
    }
    oq_verify_layer *L = &v->layers[v->n_layers];
    memset(L, 0, sizeof *L);
    oq_observer_init(&L->obs, OQ_OBSERVER_HISTOGRAM, OQ_NAN_IGNORE);
    v->layer_input[v->n_layers] = -1;
    v->layer_fid[v->n_layers] = UINT32_MAX;
    v->n_layers++;
    return L;
}

/* Producer of a quantized value: the DequantizeLinear whose input comes from a Q. */
static const oq_node *qdq_dequant(const oq_value *qv)
{
    if (!qv || qv->kind != OQ_VALUE_NODE || !oq_quant_op_is(qv->producer, "DequantizeLinear"))
        return NULL;
    const oq_node *dq = qv->producer;
    const oq_value *in = dq->n_inputs ? dq->inputs[0] : NULL;
    if (!in || in->kind != OQ_VALUE_NODE || !oq_quant_op_is(in->producer, "QuantizeLinear"))
        return NULL;
    return dq;
}

/* The float model prepared as onnxq quantize prepares it before quantizing (a copy,
 * by the caller's oq_verify_options.prepare_reference), so that folded weights have a
 * float counterpart. No callback or a failure leaves v->wref NULL: those weights are
 * then not compared. */
static void prepare_wref(oq_verify *v)
{
    v->wref_tried = true;
    if (!v->opt.prepare_reference)
        return;
    uint8_t *buf = NULL;
    size_t len = 0;
    oq_diag d;
    oq_diag_init(&d);
    oq_model *m = NULL;
    if (oq_model_write_buffer(v->fm, &buf, &len, &d) != OQ_OK)
        goto done;
    if (oq_model_read_buffer(buf, len, "verify: float model copy", NULL, &m, &d) != OQ_OK)
        goto done;
    if (v->opt.prepare_reference(m, v->opt.prepare_user, &d) != OQ_OK)
        goto done;
    v->wref = m;
    m = NULL;
done:
    oq_model_free(m);
    free(buf);
    oq_diag_free(&d);
}
static oq_status find_layers(oq_verify *v, oq_diag *d)
{
    oq_graph *fg = v->fm->graph, *qg = v->qm->graph;
    size_t cap = 0;
    /* graph inputs (not initializers), quantized as X -> Q -> DQ -> X_dequant */
    for (size_t i = 0; i < v->n_fin; i++) {
        const char *name = oq_plan_input_name(v->fp, i);
        size_t len = strlen(name);
        char *dn = malloc(len + 9);
        if (!dn)
            return oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
        memcpy(dn, name, len);
        memcpy(dn + len, "_dequant", 9);
        oq_value *qv = oq_graph_find_local(qg, dn);
        free(dn);
        const oq_node *dq = qdq_dequant(qv);
        if (!dq)
            continue;
        oq_verify_layer *L = add_layer(v, &cap, d);
        if (!L)
            return OQ_ERR_NOMEM;
        L->name = name;
        L->node = "";
        L->op_type = "input";
        L->order = 0;
        layer_qparams(L, dq);
        v->layer_input[v->n_layers - 1] = (int64_t)i;
        v->q_layer[qv->id] = (int32_t)(v->n_layers - 1);
        if (v->opt.arith != OQ_ARITH_REFERENCE && L->has_qrange && dq->inputs[0]->id < v->n_qids)
            v->qq_layer[dq->inputs[0]->id] = (int32_t)(v->n_layers - 1);
    }
    size_t order = 1;
    for (oq_node *n = fg->first; n; n = n->next, order++) {
        for (size_t k = 0; k < n->n_outputs; k++) {
            oq_value *fv = n->outputs[k];
            if (!fv || !fv->name || !*fv->name)
                continue;
            oq_value *qv = oq_graph_find_local(qg, fv->name);
            if (!qv || qv->kind != OQ_VALUE_NODE)
                continue;
            v->f_store[fv->id] = true;
            oq_verify_layer *L = add_layer(v, &cap, d);
            if (!L)
                return OQ_ERR_NOMEM;
            L->name = fv->name;
            L->node = n->name ? n->name : "";
            L->op_type = n->op_type;
            L->order = order;
            L->act = oq_calib_act_of(fv);
            if (!oq_act_is_gated(L->act.kind))
                L->act.kind = OQ_ACT_NONE;
            L->act_name = oq_act_name(L->act.kind);
            const oq_node *dq = qdq_dequant(qv);
            if (dq)
                layer_qparams(L, dq);
            if (v->opt.arith != OQ_ARITH_REFERENCE && dq && L->has_qrange &&
                dq->inputs[0]->id < v->n_qids)
                v->qq_layer[dq->inputs[0]->id] = (int32_t)(v->n_layers - 1);
            v->layer_fid[v->n_layers - 1] = fv->id;
            v->f_layer[fv->id] = (int32_t)(v->n_layers - 1);
            v->q_layer[qv->id] = (int32_t)(v->n_layers - 1);
        }
    }
    /* weights: DequantizeLinear of a constant whose output names a float initializer, in
     * the float model or, for weights onnxq quantize prepared (Constant nodes turned into
     * initializers, BatchNorm folded into W_bnfold), in a copy of it prepared the same way */
    size_t wcap = 0;
    for (oq_node *n = qg->first; n; n = n->next) {
        if (!oq_quant_op_is(n, "DequantizeLinear") || !n->n_inputs || !n->inputs[0] ||
            !oq_value_const_tensor(n->inputs[0]) || !n->n_outputs || !n->outputs[0])
            continue;
        oq_value *fv = oq_graph_find_local(fg, n->outputs[0]->name);
        if (!fv || !fv->initializer) {
            if (!v->wref_tried)
                prepare_wref(v);
            fv = v->wref ? oq_graph_find_local(v->wref->graph, n->outputs[0]->name) : NULL;
        }
        if (!fv || !fv->initializer)
            continue;
        if (v->n_weights == wcap) {
            size_t nc = wcap ? wcap * 2 : 16;
            oq_verify_weight *nw = realloc(v->weights, nc * sizeof *nw);
            if (nw)
                v->weights = nw;
            uint32_t *ni = realloc(v->weight_fid, nc * sizeof *ni);
            if (ni)
                v->weight_fid = ni;
            oq_tensor **nr = realloc(v->weight_ref, nc * sizeof *nr);
            if (nr)
                v->weight_ref = nr;
            if (!nw || !ni || !nr)
                return oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
            wcap = nc;
        }
        oq_verify_weight *W = &v->weights[v->n_weights];
        memset(W, 0, sizeof *W);
        W->name = fv->name;
        W->consumer_op = fv->n_uses ? fv->uses[0].node->op_type : "";
        oq_tensor *st = n->n_inputs > 1 && n->inputs[1] ? oq_value_const_tensor(n->inputs[1]) : NULL;
        W->channels = st ? oq_tensor_numel(st) : 1;
        W->per_channel = W->channels > 1;
        v->weight_fid[v->n_weights] = fv->id;
        v->weight_ref[v->n_weights] = fv->initializer;
        v->q_weight[n->outputs[0]->id] = (int32_t)v->n_weights;
        v->n_weights++;
    }
    return OQ_OK;
}

/* x and y through the layer's activation (f(x) vs f(y)), into the sums */
static void acc_add_act(oq_err_acc *a, const oq_act *act, const float *x, const float *y, int64_t n)
{
    enum { CHUNK = 256 };
    float fx[CHUNK], fy[CHUNK];
    for (int64_t o = 0; o < n; o += CHUNK) {
        int64_t c = n - o < CHUNK ? n - o : CHUNK;
        for (int64_t i = 0; i < c; i++) {
            fx[i] = (float)oq_act_value(act, x[o + i]);
            fy[i] = (float)oq_act_value(act, y[o + i]);
        }
        oq_err_acc_add_f32(a, fx, fy, c);
    }
}

static void layer_acc_add_f32(const oq_verify_layer *L, oq_err_acc *a, const float *x, const float *y, int64_t n)
{
    if (L->act.kind != OQ_ACT_NONE)
        acc_add_act(a, &L->act, x, y, n);
    else
        oq_err_acc_add_f32(a, x, y, n);
}

/* float reference tensor of layer li for the current sample, or NULL */
static const oq_rt_tensor *layer_ref(const oq_verify *v, size_t li)
{
    if (v->layer_input[li] >= 0)
        return &v->cur_inputs[v->layer_input[li]];
    uint32_t fid = v->layer_fid[li];
    if (fid == UINT32_MAX || !v->store[fid].data)
        return NULL;
    return &v->store[fid];
}

static void compare_into(oq_verify_layer *L, oq_err_acc *acc, const oq_rt_tensor *ref,
                         const oq_rt_tensor *t)
{
    if (!ref || !is_float_dtype(ref->dtype) || !is_float_dtype(t->dtype))
        return;
    if (!same_shape(ref, t)) {
        L->shape_mismatch = true;
        return;
    }
    int64_t n = oq_rt_tensor_numel(t);
    if (n > 0 && L->act.kind != OQ_ACT_NONE && ref->dtype == OQ_DTYPE_FLOAT && t->dtype == OQ_DTYPE_FLOAT)
        acc_add_act(acc, &L->act, ref->data, t->data, n);
    else if (n > 0)
        oq_err_acc_add(acc, ref->data, ref->dtype, t->data, t->dtype, n);
}

/* A QuantizeLinear output q of layer L (seen when the target's arithmetic fused the
 * group and did not produce T): compare dequant(q) with the float reference. */
static void compare_quantized(oq_verify_layer *L, oq_err_acc *acc, const oq_rt_tensor *ref,
                              const oq_rt_tensor *t)
{
    if (!ref || ref->dtype != OQ_DTYPE_FLOAT || !oq_stats_dtype_supported(t->dtype))
        return;
    if (!same_shape(ref, t)) {
        L->shape_mismatch = true;
        return;
    }
    enum { CHUNK = 256 };
    double q[CHUNK];
    float y[CHUNK];
    const float *x = ref->data;
    int64_t n = oq_rt_tensor_numel(t);
    if (t->dtype == OQ_DTYPE_UINT8 || t->dtype == OQ_DTYPE_INT8) {
        /* 8 bits: the 256 dequantized values once */
        float tab[256];
        bool s8 = t->dtype == OQ_DTYPE_INT8;
        for (int v = 0; v < 256; v++)
            tab[v] = oq_dequantize_value(s8 ? (int8_t)v : v, L->scale, L->zero_point);
        const uint8_t *b = t->data;
        for (int64_t o = 0; o < n; o += CHUNK) {
            int64_t c = n - o < CHUNK ? n - o : CHUNK;
            for (int64_t i = 0; i < c; i++)
                y[i] = tab[b[o + i]];
            layer_acc_add_f32(L, acc, x + o, y, c);
        }
        return;
    }
    for (int64_t o = 0; o < n; o += CHUNK) {
        int64_t c = n - o < CHUNK ? n - o : CHUNK;
        if (!oq_elems_to_double(t->data, t->dtype, o, c, q))
            return;
        for (int64_t i = 0; i < c; i++)
            y[i] = oq_dequantize_value_inline((int32_t)q[i], L->scale, L->zero_point);
        layer_acc_add_f32(L, acc, x + o, y, c);
    }
}

#if defined(__GNUC__) && defined(__x86_64__)
/* y = DQ(Q(x)) and the count of x outside [lo, hi], 8 at a time, the numbers of
 * oq_quantize_value / oq_dequantize_value (a block with a NaN is left to the caller:
 * returns where it stopped). Q's rounding in float equals the double one: an integer
 * beyond 2^24 clamps either way. */
__attribute__((target("avx2"))) static int64_t qdq_avx2(const float *x, float *y, int64_t m,
                                                        float scale, int32_t zp, int32_t qmin,
                                                        int32_t qmax, float lo, float hi,
                                                        uint64_t *clipped)
{
    const __m256 sc = _mm256_set1_ps(scale), z = _mm256_set1_ps((float)zp);
    const __m256 qlo = _mm256_set1_ps((float)qmin), qhi = _mm256_set1_ps((float)qmax);
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    const __m256i zi = _mm256_set1_epi32(zp);
    uint64_t c = 0;
    int64_t i = 0;
    for (; i + 8 <= m; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
            break;
        c += (uint64_t)__builtin_popcount(
            (unsigned)_mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(v, vlo, _CMP_LT_OQ),
                                                      _mm256_cmp_ps(v, vhi, _CMP_GT_OQ))));
        __m256 r = _mm256_round_ps(_mm256_div_ps(v, sc), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        r = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(r, z), qlo), qhi);
        __m256i q = _mm256_sub_epi32(_mm256_cvtps_epi32(r), zi);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_cvtepi32_ps(q), sc));
    }
    *clipped += c;
    return i;
}
#endif

static void layer_observe_float(oq_verify_layer *L, const oq_rt_tensor *t, bool ranges)
{
    if (t->dtype != OQ_DTYPE_FLOAT)
        return;
    int64_t n = oq_rt_tensor_numel(t);
    if (n <= 0)
        return;
    const float *x = t->data;
    if (ranges)
        oq_observer_update(&L->obs, x, n, NULL, NULL, NULL);
    int32_t qmin, qmax;
    if (L->has_qrange && oq_qrange(L->qdtype, false, &qmin, &qmax) == OQ_OK) {
        enum { CHUNK = 512 };
        float y[CHUNK];
        uint64_t c = 0;
        /* clipped: saturated by more than rounding would move it, x < qmin - s/2 or
         * x > qmax + s/2 (a value within half a step of an end rounds there anyway: SiLU's
         * minimum, -0.2785, just below a range whose zero point rounded it to -0.2774, is
         * not clipped). Float bounds with the same comparisons as the double ones: x < lo
         * iff x < flo (the least float >= lo), x > hi iff x > fhi (the greatest float <= hi) */
        double lo = L->qmin - 0.5 * (double)L->scale, hi = L->qmax + 0.5 * (double)L->scale;
        float flo = (float)lo, fhi = (float)hi;
        if ((double)flo < lo)
            flo = nextafterf(flo, INFINITY);
        if ((double)fhi > hi)
            fhi = nextafterf(fhi, -INFINITY);
        for (int64_t s = 0; s < n; s += CHUNK) {
            int64_t m = n - s < CHUNK ? n - s : CHUNK;
            int64_t i = 0;
#if defined(__GNUC__) && defined(__x86_64__)
            if (__builtin_cpu_supports("avx2"))
                i = qdq_avx2(x + s, y, m, L->scale, L->zero_point, qmin, qmax, flo, fhi, &c);
#endif
            for (; i < m; i++) {
                float xv = x[s + i];
                c += (xv < lo) | (xv > hi);
                y[i] = oq_dequantize_value_inline(
                    oq_quantize_value_inline(xv, L->scale, L->zero_point, qmin, qmax), L->scale,
                    L->zero_point);
            }
            layer_acc_add_f32(L, &L->own, x + s, y, m);
        }
        L->clipped += (double)c;
    }
}

/* ------------------------------------------------------------ float cache ----- */

typedef struct float_cache_entry {
    oq_rt_tensor *outputs;    /* the float outputs (owned copies), NULL until stored */
    size_t n_outputs;
    shape_rec *shapes;        /* the shapes recorded for the slices (stamp != 0: seen) */
    size_t n_shapes;
} float_cache_entry;

struct oq_verify_float_cache {
    float_cache_entry *e;
    size_t n;
};

oq_verify_float_cache *oq_verify_float_cache_new(void)
{
    return calloc(1, sizeof(oq_verify_float_cache));
}

void oq_verify_float_cache_free(oq_verify_float_cache *c)
{
    if (!c)
        return;
    for (size_t k = 0; k < c->n; k++) {
        for (size_t i = 0; c->e[k].outputs && i < c->e[k].n_outputs; i++)
            oq_rt_tensor_release(&c->e[k].outputs[i]);
        free(c->e[k].outputs);
        free(c->e[k].shapes);
    }
    free(c->e);
    free(c);
}

/* Entry k (made empty when new); NULL when out of memory. */
static float_cache_entry *cache_entry(oq_verify_float_cache *c, uint64_t k)
{
    if (k >= c->n) {
        size_t n = (size_t)k + 1;
        float_cache_entry *ne = realloc(c->e, n * sizeof *ne);
        if (!ne)
            return NULL;
        memset(ne + c->n, 0, (n - c->n) * sizeof *ne);
        c->e = ne;
        c->n = n;
    }
    return &c->e[k];
}

/* Keep copies of this sample's float outputs fo and the shapes the slices read. */
static oq_status cache_store(float_cache_entry *ce, const oq_verify *v, const oq_rt_tensor *fo, oq_diag *d)
{
    ce->outputs = calloc(v->n_fout + 1, sizeof *ce->outputs);
    ce->shapes = malloc((v->n_shapes + 1) * sizeof *ce->shapes);
    if (!ce->outputs || !ce->shapes) {
        free(ce->outputs);
        free(ce->shapes);
        ce->outputs = NULL;
        ce->shapes = NULL;
        return oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
    }
    ce->n_outputs = v->n_fout;
    for (size_t i = 0; i < v->n_fout; i++) {
        if (!fo[i].rank && !fo[i].data)
            continue;
        if (oq_rt_tensor_alloc(&ce->outputs[i], fo[i].dtype, fo[i].dims, fo[i].rank) != OQ_OK)
            return oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
        if (fo[i].nbytes > 0)
            memcpy(ce->outputs[i].data, fo[i].data, (size_t)fo[i].nbytes);
    }
    ce->n_shapes = v->n_shapes;
    for (size_t i = 0; i < v->n_shapes; i++) {
        ce->shapes[i] = v->shapes[i];
        ce->shapes[i].stamp = v->shapes[i].stamp == v->samples + 1; /* seen in this sample */
    }
    return OQ_OK;
}

static void on_float(const oq_node *node, size_t idx, const oq_rt_tensor *t, void *user)
{
    oq_verify *v = user;
    const oq_value *val = node->outputs[idx];
    if (!val || val->id >= v->n_fids)
        return;
    if (v->f_shape[val->id] >= 0) {
        shape_rec *r = &v->shapes[v->f_shape[val->id]];
        r->stamp = v->samples + 1;
        r->rank = t->rank;
        memcpy(r->dims, t->dims, sizeof r->dims);
    }
    if (v->f_store[val->id] && !v->store[val->id].data && !v->store[val->id].rank) {
        oq_rt_tensor *s = &v->store[val->id];
        if (oq_rt_tensor_alloc(s, t->dtype, t->dims, t->rank) != OQ_OK) {
            v->nomem = true;
            return;
        }
        if (t->nbytes > 0)
            memcpy(s->data, t->data, (size_t)t->nbytes);
        v->store_bytes += t->nbytes;
        if (v->store_bytes > v->peak_store_bytes)
            v->peak_store_bytes = v->store_bytes;
    }
    int32_t li = v->f_layer[val->id];
    if (li >= 0)
        layer_observe_float(&v->layers[li], t, v->opt.float_ranges);
}

static void on_quant_weight(const oq_node *node, size_t idx, const oq_rt_tensor *t, void *user);

static void on_quant(const oq_node *node, size_t idx, const oq_rt_tensor *t, void *user)
{
    oq_verify *v = user;
    const oq_value *val = node->outputs[idx];
    if (!val || val->id >= v->n_qids)
        return;
    int32_t qi = v->qq_layer[val->id];
    if (qi >= 0) {
        compare_quantized(&v->layers[qi], &v->layers[qi].acc, layer_ref(v, (size_t)qi), t);
        v->q_seen[qi] = v->samples + 1;
    }
    int32_t li = v->q_layer[val->id];
    if (li >= 0 && v->q_seen[li] != v->samples + 1)
        compare_into(&v->layers[li], &v->layers[li].acc, layer_ref(v, (size_t)li), t);
    on_quant_weight(node, idx, t, user);
}

/* The quantized weights (DequantizeLinear of constants): seen by the quantized plan with
 * the reference arithmetic; a fused group's DequantizeLinear of W is not run otherwise,
 * so with a target's arithmetic the reference run of arith_loss shows them. */
static void on_quant_weight(const oq_node *node, size_t idx, const oq_rt_tensor *t, void *user)
{
    oq_verify *v = user;
    const oq_value *val = node->outputs[idx];
    if (!val || val->id >= v->n_qids)
        return;
    int32_t wi = v->q_weight[val->id];
    if (wi >= 0 && v->samples == 0) {
        oq_verify_weight *W = &v->weights[wi];
        oq_tensor *ft = v->weight_ref[wi];
        const void *fd = ft ? oq_tensor_data(ft, NULL) : NULL;
        int64_t n = ft ? oq_tensor_numel(ft) : -1;
        if (fd && n == oq_rt_tensor_numel(t) && W->err.n == 0)
            oq_err_acc_add(&W->err, fd, ft->dtype, t->data, t->dtype, n);
    }
}

static void on_iso(const oq_node *node, size_t idx, const oq_rt_tensor *t, void *user)
{
    oq_verify *v = user;
    const oq_value *val = node->outputs[idx];
    if (!val || val->id >= v->n_iids)
        return;
    int32_t qi = v->iq_layer ? v->iq_layer[val->id] : -1;
    if (qi >= 0) {
        compare_quantized(&v->layers[qi], &v->layers[qi].iso, layer_ref(v, (size_t)qi), t);
        v->i_seen[qi] = v->samples + 1;
    }
    int32_t li = v->i_layer[val->id];
    if (li >= 0 && v->i_seen[li] != v->samples + 1)
        compare_into(&v->layers[li], &v->layers[li].iso, layer_ref(v, (size_t)li), t);
}

static oq_status plan_for(oq_model *m, const oq_verify *v, oq_tensor_observer fn,
                          oq_arith arith, oq_plan **p, oq_diag *d)
{
    oq_plan_options po = oq_plan_options_default();
    po.arith = arith;
    po.threads = v->opt.threads;
    po.on_tensor = fn;
    po.user = (void *)v;
    return oq_plan_compile(m, &po, p, d);
}

/* The reference-vs-target comparison (oq_satcheck) on the quantized model, its layers
 * matched to ours by T (a graph input's T is X_dequant) and its outputs by name. */
static oq_status setup_arith_loss(oq_verify *v, oq_diag *d)
{
    oq_status st = oq_satcheck_new(v->qm, v->opt.arith, v->opt.threads, &v->sc, d);
    if (st != OQ_OK)
        return st;
    oq_satcheck_set_ref_observer(v->sc, on_quant_weight, v);
    v->sc_of = malloc((v->n_layers + 1) * sizeof *v->sc_of);
    v->sc_out = calloc(v->n_fout + 1, sizeof *v->sc_out);
    if (!v->sc_of || !v->sc_out)
        return oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
    size_t ns = oq_satcheck_n_layers(v->sc);
    for (size_t li = 0; li < v->n_layers; li++) {
        v->sc_of[li] = -1;
        const char *nm = v->layers[li].name;
        size_t ln = strlen(nm);
        bool input = v->layer_input[li] >= 0;
        for (size_t k = 0; k < ns; k++) {
            const char *t = oq_satcheck_layer_at(v->sc, k)->tensor;
            if (input ? strncmp(t, nm, ln) == 0 && strcmp(t + ln, "_dequant") == 0 : strcmp(t, nm) == 0) {
                v->sc_of[li] = (int64_t)k;
                v->layers[li].has_arith = true;
                break;
            }
        }
    }
    for (size_t i = 0; i < v->n_fout; i++) {
        size_t k = 0;
        while (k < oq_satcheck_n_outputs(v->sc) &&
               strcmp(oq_satcheck_output_at(v->sc, k)->name, v->outs[i].name) != 0)
            k++;
        v->sc_out[i] = k; /* the quantized model has every float output (checked above) */
    }
    return OQ_OK;
}

/* ------------------------------------------------------------ slices -------- */
/* A graph output made by a Concat is judged per Concat input (include/onnxq/verify.h,
 * docs/verify.md "Slices"). The Concat is found from the output back through the ops
 * below; the part boundaries follow the Concat's axis through them with the shapes the
 * float observer records on every sample. */

static bool op_in(const oq_node *n, const char *const *ops)
{
    for (size_t i = 0; ops[i]; i++)
        if (oq_quant_op_is(n, ops[i]))
            return true;
    return false;
}

/* ops that move elements (row-major order kept: Reshape and friends; or permuted) */
static const char *const RESHAPE_OPS[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", NULL};
/* ops that map each element to the element at the same position */
static const char *const UNARY_OPS[] = {"Identity", "Cast", "Relu", "Sigmoid", "Tanh", "Neg",
                                        "Abs", "LeakyRelu", "HardSigmoid", "HardSwish", "Elu",
                                        "Selu", "Softplus", "Exp", "Erf", "Sqrt", "Clip", NULL};
static const char *const CONST_BINARY_OPS[] = {"Add", "Sub", "Mul", "Div", NULL};

/* The input of n the slices are followed through, or NULL when n is not such an op. The
 * other inputs of an elementwise op must be constants; its output shape is checked on
 * every sample (a constant that broadcasts to a larger shape stops the split). */
static const oq_value *slice_through(const oq_node *n)
{
    if (!n->n_inputs || !n->inputs[0] || n->n_outputs < 1 || !n->outputs[0])
        return NULL;
    if (oq_quant_op_is(n, "Transpose") || op_in(n, RESHAPE_OPS))
        return n->inputs[0];
    if (op_in(n, UNARY_OPS)) {
        for (size_t i = 1; i < n->n_inputs; i++)
            if (n->inputs[i] && !oq_value_const_tensor(n->inputs[i]))
                return NULL; /* Clip with a computed bound */
        return oq_value_const_tensor(n->inputs[0]) ? NULL : n->inputs[0];
    }
    if (op_in(n, CONST_BINARY_OPS) && n->n_inputs == 2 && n->inputs[1]) {
        bool c0 = oq_value_const_tensor(n->inputs[0]) != NULL;
        bool c1 = oq_value_const_tensor(n->inputs[1]) != NULL;
        if (c0 != c1)
            return c0 ? n->inputs[1] : n->inputs[0];
    }
    return NULL;
}

static oq_status want_shape(oq_verify *v, const oq_value *val, oq_diag *d)
{
    if (!val || val->id >= v->n_fids || v->f_shape[val->id] >= 0 || oq_value_const_tensor(val))
        return OQ_OK;
    shape_rec *ns = realloc(v->shapes, (v->n_shapes + 1) * sizeof *ns);
    if (!ns)
        return oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
    v->shapes = ns;
    memset(&ns[v->n_shapes], 0, sizeof *ns);
    v->f_shape[val->id] = (int32_t)v->n_shapes++;
    return OQ_OK;
}

/* O judged whole: one slice, the output (float value fv) itself. */
static void set_whole(oq_verify_output *O, const oq_value *fv)
{
    oq_verify_slice *sl = &O->slices[0];
    O->n_slices = 1;
    sl->tensor = O->name;
    sl->node = fv && fv->kind == OQ_VALUE_NODE && fv->producer->name ? fv->producer->name : "";
    sl->op_type = !fv                       ? ""
                  : fv->kind == OQ_VALUE_NODE ? fv->producer->op_type
                  : fv->is_graph_input        ? "input"
                                              : "constant";
    sl->axis = -1;
    sl->start = sl->end = 0;
    sl->err = O->err;
}

/* For each float output: its Concat (through the ops of slice_through), and the shapes to
 * record. */
static oq_status find_slices(oq_verify *v, oq_diag *d)
{
    enum { MAX_DEPTH = 64 };
    oq_graph *fg = v->fm->graph;
    for (size_t i = 0; i < v->n_fout; i++) {
        out_slices *S = &v->osl[i];
        const oq_value *x = oq_graph_find_local(fg, v->outs[i].name);
        const oq_node *chain[MAX_DEPTH];
        size_t depth = 0;
        const oq_node *concat = NULL;
        while (x && x->kind == OQ_VALUE_NODE && x->producer && x->producer->graph == fg &&
               depth < MAX_DEPTH) {
            const oq_node *p = x->producer;
            if (oq_quant_op_is(p, "Concat")) {
                concat = p;
                break;
            }
            const oq_value *in = slice_through(p);
            if (!in || p->outputs[0] != x)
                break;
            chain[depth++] = p;
            x = in;
        }
        bool ok = concat && concat->n_outputs >= 1 && concat->outputs[0] == x &&
                  concat->n_inputs >= 2 && concat->n_inputs <= OQ_VERIFY_MAX_SLICES;
        for (size_t k = 0; ok && k < concat->n_inputs; k++)
            ok = concat->inputs[k] != NULL;
        oq_verify_output *O = &v->outs[i];
        size_t n = ok ? concat->n_inputs : 1;
        O->slices = calloc(n, sizeof *O->slices);
        if (!O->slices)
            return oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
        set_whole(O, oq_graph_find_local(fg, O->name));
        if (!ok)
            continue;
        S->ops = malloc((depth + 1) * sizeof *S->ops);
        S->bounds = calloc(n + 1, sizeof *S->bounds);
        if (!S->ops || !S->bounds)
            return oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
        for (size_t k = 0; k < depth; k++)
            S->ops[k] = chain[depth - 1 - k];
        S->n_ops = depth;
        S->n = n;
        S->concat = concat;
        O->n_slices = n;
        O->concat = concat->name ? concat->name : "";
        for (size_t k = 0; k < n; k++) {
            const oq_value *in = concat->inputs[k];
            oq_verify_slice *sl = &O->slices[k];
            sl->tensor = in->name ? in->name : "";
            sl->node = in->kind == OQ_VALUE_NODE && in->producer->name ? in->producer->name : "";
            sl->op_type = in->kind == OQ_VALUE_NODE    ? in->producer->op_type
                          : in->is_graph_input         ? "input"
                                                       : "constant";
            sl->axis = -1;
            oq_status st = want_shape(v, in, d);
            if (st != OQ_OK)
                return st;
        }
        oq_status st = want_shape(v, concat->outputs[0], d);
        for (size_t k = 0; st == OQ_OK && k < depth; k++)
            st = want_shape(v, chain[k]->outputs[0], d);
        if (st != OQ_OK)
            return st;
    }
    return OQ_OK;
}

/* The shape of a float tensor in the current sample, or NULL. */
static const int64_t *value_dims(const oq_verify *v, const oq_value *val, size_t *rank)
{
    if (val->is_graph_input && v->cur_inputs)
        for (size_t k = 0; k < v->n_fin; k++)
            if (strcmp(oq_plan_input_name(v->fp, k), val->name) == 0) {
                *rank = v->cur_inputs[k].rank;
                return v->cur_inputs[k].dims;
            }
    if (val->id < v->n_fids && v->f_shape[val->id] >= 0) {
        const shape_rec *r = &v->shapes[v->f_shape[val->id]];
        if (r->stamp == v->samples + 1) {
            *rank = r->rank;
            return r->dims;
        }
    }
    oq_tensor *t = oq_value_const_tensor(val);
    if (t && t->rank <= OQ_RT_MAX_RANK) {
        *rank = t->rank;
        return t->dims;
    }
    return NULL;
}

static int64_t dims_prod(const int64_t *d, size_t from, size_t to)
{
    int64_t p = 1;
    for (size_t i = from; i < to; i++)
        p *= d[i];
    return p;
}

/* The part boundaries of output oi in this sample, along *axis of the output f (shape
 * checked against f). NULL on success, else why the output cannot be split. */
static const char *map_slices(const oq_verify *v, size_t oi, const oq_rt_tensor *f, int64_t *axis)
{
    const out_slices *S = &v->osl[oi];
    const oq_node *c = S->concat;
    int64_t *b = S->bounds;
    size_t r;
    const int64_t *cd = value_dims(v, c->outputs[0], &r);
    if (!cd || r == 0 || r > OQ_RT_MAX_RANK)
        return "the Concat's output shape is unknown";
    int64_t cur[OQ_RT_MAX_RANK];
    memcpy(cur, cd, r * sizeof *cur);
    int64_t a = oq_node_attr_int(c, "axis", 0);
    if (a < 0)
        a += (int64_t)r;
    if (a < 0 || a >= (int64_t)r)
        return "the Concat's axis is out of range";
    size_t unknown = SIZE_MAX;
    int64_t known = 0;
    b[0] = 0;
    for (size_t k = 0; k < S->n; k++) {
        size_t ir;
        const int64_t *id = value_dims(v, c->inputs[k], &ir);
        if (!id) {
            if (unknown != SIZE_MAX)
                return "the shapes of the Concat's inputs are unknown";
            unknown = k;
            b[k + 1] = -1;
            continue;
        }
        if (ir != r || id[a] < 0)
            return "a Concat input's shape does not match";
        b[k + 1] = id[a];
        known += id[a];
    }
    if (unknown != SIZE_MAX)
        b[unknown + 1] = cur[a] - known;
    for (size_t k = 0; k < S->n; k++) {
        if (b[k + 1] < 0)
            return "a Concat input's shape does not match";
        b[k + 1] += b[k];
    }
    if (b[S->n] != cur[a])
        return "the Concat's input sizes do not add up to its output";
    size_t cr = r;
    for (size_t j = 0; j < S->n_ops; j++) {
        const oq_node *op = S->ops[j];
        size_t orank;
        const int64_t *od = j + 1 == S->n_ops ? f->dims : value_dims(v, op->outputs[0], &orank);
        if (j + 1 == S->n_ops)
            orank = f->rank;
        if (!od || orank == 0 || orank > OQ_RT_MAX_RANK)
            return "a shape between the Concat and the output is unknown";
        if (oq_quant_op_is(op, "Transpose")) {
            const int64_t *perm = NULL;
            int64_t np = oq_node_attr_ints(op, "perm", &perm);
            if (orank != cr || (np >= 0 && (size_t)np != cr))
                return "a Transpose's permutation does not match";
            int64_t na = -1;
            for (size_t i = 0; i < cr; i++)
                if ((np >= 0 ? perm[i] : (int64_t)(cr - 1 - i)) == a)
                    na = (int64_t)i;
            if (na < 0 || od[na] != cur[a])
                return "a Transpose's permutation does not match";
            a = na;
        } else if (op_in(op, RESHAPE_OPS)) {
            int64_t outer = dims_prod(cur, 0, (size_t)a), inner = dims_prod(cur, (size_t)a + 1, cr);
            int64_t span = cur[a] * inner, na = -1, in2 = 0;
            for (size_t bi = orank; bi-- > 0 && na < 0;) {
                in2 = dims_prod(od, bi + 1, orank);
                if (in2 <= 0 || dims_prod(od, 0, bi) != outer || od[bi] * in2 != span)
                    continue;
                bool whole = true;
                for (size_t k = 0; k <= S->n && whole; k++)
                    whole = (b[k] * inner) % in2 == 0;
                if (whole)
                    na = (int64_t)bi;
            }
            if (na < 0)
                return "a reshape mixes the parts";
            for (size_t k = 0; k <= S->n; k++)
                b[k] = b[k] * inner / in2;
            a = na;
        } else {
            bool same = orank == cr;
            for (size_t i = 0; same && i < cr; i++)
                same = od[i] == cur[i];
            if (!same)
                return "an elementwise op after the Concat changes the shape";
        }
        memcpy(cur, od, orank * sizeof *cur);
        cr = orank;
    }
    if (cr != f->rank)
        return "the output's shape does not match";
    for (size_t i = 0; i < cr; i++)
        if (cur[i] != f->dims[i])
            return "the output's shape does not match";
    *axis = a;
    return NULL;
}

/* Add this sample's elements of each slice of output oi (f, q: float and quantized). */
static void compare_slices(oq_verify *v, size_t oi, const oq_rt_tensor *f, const oq_rt_tensor *q)
{
    oq_verify_output *O = &v->outs[oi];
    const out_slices *S = &v->osl[oi];
    const char *why = NULL;
    int64_t a = -1;
    if (S->concat && !O->slice_note)
        why = map_slices(v, oi, f, &a);
    if (!S->concat || O->slice_note || why) {
        if (why) {
            /* judged whole from now on, over every sample */
            O->slice_note = why;
            set_whole(O, oq_graph_find_local(v->fm->graph, O->name));
        }
        O->slices[0].err = O->err;
        return;
    }
    int64_t outer = dims_prod(f->dims, 0, (size_t)a), inner = dims_prod(f->dims, (size_t)a + 1, f->rank);
    int64_t dim = f->dims[a];
    int64_t fe = oq_dtype_nbytes(f->dtype, 1), qe = oq_dtype_nbytes(q->dtype, 1);
    for (size_t k = 0; k < S->n; k++) {
        oq_verify_slice *sl = &O->slices[k];
        sl->axis = a;
        sl->start = S->bounds[k];
        sl->end = S->bounds[k + 1];
        int64_t len = (sl->end - sl->start) * inner;
        if (len <= 0)
            continue;
        for (int64_t o = 0; o < outer; o++) {
            int64_t off = (o * dim + sl->start) * inner;
            oq_err_acc_add(&sl->err, (const char *)f->data + off * fe, f->dtype,
                           (const char *)q->data + off * qe, q->dtype, len);
        }
    }
}

double oq_verify_output_worst(const oq_verify_output *o, size_t *slice, const oq_err_acc **err)
{
    size_t best = SIZE_MAX;
    double db = NAN;
    for (size_t k = 0; k < o->n_slices; k++) {
        if (!o->slices[k].err.n)
            continue;
        double s = oq_err_sqnr_db(&o->slices[k].err);
        if (best == SIZE_MAX || s < db) {
            best = k;
            db = s;
        }
    }
    if (best == SIZE_MAX)
        db = oq_err_sqnr_db(&o->err);
    if (slice)
        *slice = best;
    if (err)
        *err = best == SIZE_MAX ? &o->err : &o->slices[best].err;
    return db;
}

/* An output with no element compared and none skipped as NaN/Inf: not a float tensor (an
 * ArgMax or TopK index, a shape), or empty on every sample: SQNR says nothing about it. */
bool oq_verify_output_judged(const oq_verify_output *o)
{
    if (o->err.n || o->err.nonfinite)
        return true;
    for (size_t k = 0; k < o->n_slices; k++)
        if (o->slices[k].err.n || o->slices[k].err.nonfinite)
            return true;
    return false;
}

double oq_verify_worst(const oq_verify *v, size_t *output, size_t *slice)
{
    size_t wo = SIZE_MAX, ws = SIZE_MAX;
    double db = INFINITY;
    size_t judged = 0;
    for (size_t i = 0; i < v->n_fout; i++)
        judged += oq_verify_output_judged(&v->outs[i]);
    for (size_t i = 0; i < v->n_fout; i++) {
        size_t k;
        if (judged && !oq_verify_output_judged(&v->outs[i]))
            continue; /* integer outputs do not decide while a float one can */
        double s = oq_verify_output_worst(&v->outs[i], &k, NULL);
        if (wo == SIZE_MAX || isnan(s) || s < db) {
            wo = i;
            ws = k;
            db = s;
            if (isnan(s))
                break;
        }
    }
    if (output)
        *output = wo;
    if (slice)
        *slice = ws;
    return wo == SIZE_MAX ? NAN : db;
}

char *oq_verify_slice_label(const oq_verify_output *o, size_t slice, char *buf, size_t size)
{
    if (!size)
        return buf;
    if (slice >= o->n_slices || o->slices[slice].axis < 0)
        snprintf(buf, size, "%s", o->name);
    else
        snprintf(buf, size, "%s[%lld:%lld..%lld]", o->name, (long long)o->slices[slice].axis,
                 (long long)o->slices[slice].start, (long long)o->slices[slice].end);
    return buf;
}

oq_status oq_verify_new(oq_model *fm, oq_model *qm, const oq_verify_options *o,
                        oq_verify **out, oq_diag *d)
{
    oq_status st;
    *out = NULL;
    if (!fm || !qm || !fm->graph || !qm->graph)
        return oq_diag_error(d, OQ_ERR_USAGE, "verify: a model has no graph");
    oq_verify *v = calloc(1, sizeof *v);
    if (!v)
        return oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
    v->opt = o ? *o : oq_verify_options_default();
    if (v->opt.class_topk < 1)
        v->opt.class_topk = 1;
    v->fm = fm;
    v->qm = qm;
    st = plan_for(fm, v, on_float, OQ_ARITH_REFERENCE, &v->fp, d);
    if (st != OQ_OK)
        goto fail;
    st = plan_for(qm, v, on_quant, v->opt.arith, &v->qp, d);
    if (st != OQ_OK)
        goto fail;
    v->n_fin = oq_plan_n_inputs(v->fp);
    v->n_fout = oq_plan_n_outputs(v->fp);
    v->n_qin = oq_plan_n_inputs(v->qp);
    v->n_qout = oq_plan_n_outputs(v->qp);
    v->qin_from = calloc(v->n_qin + 1, sizeof *v->qin_from);
    v->qout_of = calloc(v->n_fout + 1, sizeof *v->qout_of);
    v->outs = calloc(v->n_fout + 1, sizeof *v->outs);
    v->osl = calloc(v->n_fout + 1, sizeof *v->osl);
    v->n_fids = fm->next_id;
    v->n_qids = qm->next_id;
    v->f_layer = malloc((v->n_fids + 1) * sizeof *v->f_layer);
    v->f_store = calloc(v->n_fids + 1, sizeof *v->f_store);
    v->store = calloc(v->n_fids + 1, sizeof *v->store);
    v->f_shape = malloc((v->n_fids + 1) * sizeof *v->f_shape);
    v->q_layer = malloc((v->n_qids + 1) * sizeof *v->q_layer);
    v->q_weight = malloc((v->n_qids + 1) * sizeof *v->q_weight);
    v->qq_layer = malloc((v->n_qids + 1) * sizeof *v->qq_layer);
    if (!v->qin_from || !v->qout_of || !v->outs || !v->osl || !v->f_shape || !v->f_layer ||
        !v->f_store || !v->store || !v->q_layer || !v->q_weight || !v->qq_layer) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i <= v->n_fids; i++)
        v->f_layer[i] = v->f_shape[i] = -1;
    for (uint32_t i = 0; i <= v->n_qids; i++)
        v->q_layer[i] = v->q_weight[i] = v->qq_layer[i] = -1;
    for (size_t i = 0; i < v->n_qin; i++) {
        const char *qn = oq_plan_input_name(v->qp, i);
        size_t k = 0;
        while (k < v->n_fin && strcmp(oq_plan_input_name(v->fp, k), qn) != 0)
            k++;
        if (k == v->n_fin) {
            st = oq_diag_error(d, OQ_ERR_INVALID,
                               "the quantized model has an input \"%s\" the float model lacks",
                               qn);
            goto fail;
        }
        v->qin_from[i] = k;
    }
    for (size_t i = 0; i < v->n_fout; i++) {
        const char *fn = oq_plan_output_name(v->fp, i);
        size_t k = 0;
        while (k < v->n_qout && strcmp(oq_plan_output_name(v->qp, k), fn) != 0)
            k++;
        if (k == v->n_qout) {
            st = oq_diag_error(d, OQ_ERR_INVALID,
                               "the quantized model has no output \"%s\" (float model output)",
                               fn);
            goto fail;
        }
        v->qout_of[i] = k;
        v->outs[i].name = fn;
        v->outs[i].class_scores = true;
    }
    st = find_slices(v, d);
    if (st != OQ_OK)
        goto fail;
    st = v->opt.outputs_only ? OQ_OK : find_layers(v, d);
    if (st != OQ_OK)
        goto fail;
    v->q_seen = calloc(v->n_layers + 1, sizeof *v->q_seen);
    v->i_seen = calloc(v->n_layers + 1, sizeof *v->i_seen);
    if (!v->q_seen || !v->i_seen) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
        goto fail;
    }
    if (v->opt.arith != OQ_ARITH_REFERENCE && v->opt.arith_loss) {
        st = setup_arith_loss(v, d);
        if (st != OQ_OK)
            goto fail;
    }
    *out = v;
    return OQ_OK;
fail:
    oq_verify_free(v);
    return st;
}

/* ------------------------------------------------------------ isolation ----- */

/* The isolation model's graph input carrying float tensor `fname` (made on first
 * use). *out stays NULL when the float model has no stored tensor of that name. */
static oq_status iso_input(oq_verify *v, const char *fname, oq_value **out, oq_diag *d)
{
    oq_graph *g = v->im->graph;
    oq_value *fv = oq_graph_find_local(v->fm->graph, fname);
    *out = NULL;
    if (!fv || fv->id >= v->n_fids || !v->f_store[fv->id] || !v->store[fv->id].rank ||
        !v->store[fv->id].data)
        return OQ_OK;
    for (size_t i = 0; i < v->n_iin; i++)
        if (v->iin_fid[i] == fv->id) {
            *out = g->inputs[g->n_inputs - v->n_iin + i]->value;
            return OQ_OK;
        }
    size_t len = strlen(fname);
    char *base = malloc(len + 16);
    if (!base)
        return oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
    memcpy(base, fname, len);
    memcpy(base + len, "__verify_float", 15);
    char *name = oq_graph_unique_name(g, base);
    free(base);
    oq_value *nv = name ? oq_graph_new_value(g, name) : NULL;
    const oq_rt_tensor *s = &v->store[fv->id];
    int64_t dims[OQ_RT_MAX_RANK];
    for (size_t j = 0; j < s->rank; j++)
        dims[j] = -1;
    oq_type *ty = nv ? oq_type_tensor(v->im, s->dtype, dims, NULL, s->rank) : NULL;
    uint32_t *nf = realloc(v->iin_fid, (v->n_iin + 1) * sizeof *nf);
    if (nf)
        v->iin_fid = nf;
    if (!ty || !nf || !oq_graph_add_input(g, nv, ty))
        return oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory building the isolation model");
    v->iin_fid[v->n_iin++] = fv->id;
    *out = nv;
    return OQ_OK;
}

static void copy_int_attrs(oq_node *to, const oq_node *from)
{
    static const char *const names[] = {"axis", "saturate", "block_size", "output_dtype"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        oq_attr *a = oq_node_attr(from, names[i]);
        if (a && a->has_i)
            oq_node_set_attr_int(to, names[i], a->i);
    }
}

/* position of a node in its graph's list (set in build_isolation's snapshot) */
static size_t node_pos(const oq_node *n)
{
    return (size_t)(uintptr_t)n->priv;
}

/* Build the isolation model from the quantized one (after the first float run, so
 * that the dtype and rank of every float tensor are known). */
static oq_status build_isolation(oq_verify *v, oq_diag *d)
{
    oq_status st;
    size_t len = 0, n_nodes = 0;
    oq_node **snap = NULL;
    oq_read_options ro = {true, true};
    st = oq_model_write_buffer(v->qm, &v->im_buf, &len, d);
    if (st != OQ_OK)
        return st;
    st = oq_model_read_buffer(v->im_buf, len, "isolation model", &ro, &v->im, d);
    if (st != OQ_OK)
        return st;
    oq_graph *g = v->im->graph;
    snap = calloc(g->n_nodes + 1, sizeof *snap);
    if (!snap)
        return oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
    for (oq_node *n = g->first; n; n = n->next) {
        n->priv = (void *)(uintptr_t)n_nodes;
        snap[n_nodes++] = n;
    }
    /* 1. activation Q -> DQ pairs: a copy quantizes the float tensor for consumers */
    for (size_t i = 0; i < n_nodes; i++) {
        oq_node *dq = snap[i];
        oq_value *tv = dq->n_outputs ? dq->outputs[0] : NULL;
        if (!tv || !qdq_dequant(tv))
            continue;
        oq_node *q = dq->inputs[0]->producer;
        oq_value *src = q->inputs[0];
        if (!src || src->is_graph_input || oq_value_const_tensor(src))
            continue;
        oq_value *fi;
        st = iso_input(v, tv->name, &fi, d);
        if (st != OQ_OK)
            goto fail;
        if (!fi)
            continue;
        oq_value *qo = oq_graph_new_value(g, NULL), *dqo = oq_graph_new_value(g, NULL);
        if (!qo || !dqo)
            goto nomem;
        oq_value *qin[3] = {fi, q->n_inputs > 1 ? q->inputs[1] : NULL,
                            q->n_inputs > 2 ? q->inputs[2] : NULL};
        oq_node *q2 = oq_node_new(g, "QuantizeLinear", q->domain, NULL, qin, q->n_inputs, &qo, 1);
        oq_value *dqin[3] = {qo, dq->n_inputs > 1 ? dq->inputs[1] : NULL,
                             dq->n_inputs > 2 ? dq->inputs[2] : NULL};
        oq_node *dq2 = oq_node_new(g, "DequantizeLinear", dq->domain, NULL, dqin, dq->n_inputs,
                                   &dqo, 1);
        if (!q2 || !dq2)
            goto nomem;
        copy_int_attrs(q2, q);
        copy_int_attrs(dq2, dq);
        /* right before the first consumer in graph order: the executor keeps the graph
         * order, so the copy's output lives only as long as the quantized model's T */
        oq_node *at = NULL;
        for (size_t u = 0; u < tv->n_uses; u++) {
            oq_node *c = tv->uses[u].node;
            if (c && c->graph == g && (!at || node_pos(c) < node_pos(at)))
                at = c;
        }
        oq_value_replace_all_uses(tv, dqo);
        if (at) {
            oq_graph_insert_before(g, at, q2);
            oq_graph_insert_before(g, at, dq2);
        } else {
            oq_graph_append(g, q2);
            oq_graph_append(g, dq2);
        }
    }
    /* 2. every other activation input reads the float tensor of the same name */
    for (size_t i = 0; i < n_nodes; i++) {
        oq_node *n = snap[i];
        if (oq_quant_op_is(n, "DequantizeLinear"))
            continue;
        for (size_t k = 0; k < n->n_inputs; k++) {
            oq_value *in = n->inputs[k];
            if (!in || in->is_graph_input || in->kind != OQ_VALUE_NODE ||
                oq_value_const_tensor(in))
                continue;
            if (oq_quant_op_is(in->producer, "DequantizeLinear"))
                continue;
            oq_value *fi;
            st = iso_input(v, in->name, &fi, d);
            if (st != OQ_OK)
                goto fail;
            if (!fi)
                continue;
            if (oq_node_set_input(n, k, fi) != OQ_OK)
                goto nomem;
        }
    }
    for (size_t i = 0; i < n_nodes; i++)
        snap[i]->priv = NULL;
    free(snap);
    snap = NULL;
    st = plan_for(v->im, v, on_iso, v->opt.arith, &v->ip, d);
    if (st != OQ_OK)
        return st;
    v->n_iids = v->im->next_id;
    v->i_layer = malloc((v->n_iids + 1) * sizeof *v->i_layer);
    v->iq_layer = malloc((v->n_iids + 1) * sizeof *v->iq_layer);
    v->iin_from = calloc(oq_plan_n_inputs(v->ip) + 1, sizeof *v->iin_from);
    if (!v->i_layer || !v->iq_layer || !v->iin_from)
        return oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
    for (uint32_t i = 0; i <= v->n_iids; i++)
        v->i_layer[i] = v->iq_layer[i] = -1;
    for (size_t li = 0; li < v->n_layers; li++) {
        oq_value *iv;
        if (v->layer_input[li] >= 0) {
            size_t ln = strlen(v->layers[li].name);
            char *dn = malloc(ln + 9);
            if (!dn)
                return oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
            memcpy(dn, v->layers[li].name, ln);
            memcpy(dn + ln, "_dequant", 9);
            iv = oq_graph_find_local(g, dn);
            free(dn);
        } else {
            iv = oq_graph_find_local(g, v->layers[li].name);
        }
        if (iv && iv->kind == OQ_VALUE_NODE && iv->id < v->n_iids) {
            v->i_layer[iv->id] = (int32_t)li;
            v->layers[li].has_iso = true;
            const oq_node *dq = qdq_dequant(iv);
            if (v->opt.arith != OQ_ARITH_REFERENCE && dq && v->layers[li].has_qrange &&
                dq->inputs[0]->id < v->n_iids)
                v->iq_layer[dq->inputs[0]->id] = (int32_t)li;
        }
    }
    /* plan inputs: original inputs by name, added ones from the float store */
    for (size_t i = 0; i < oq_plan_n_inputs(v->ip); i++) {
        const char *nm = oq_plan_input_name(v->ip, i);
        size_t k = 0;
        while (k < v->n_fin && strcmp(oq_plan_input_name(v->fp, k), nm) != 0)
            k++;
        if (k < v->n_fin) {
            v->iin_from[i] = k;
            continue;
        }
        size_t j = 0;
        while (j < v->n_iin && strcmp(g->inputs[g->n_inputs - v->n_iin + j]->value->name, nm) != 0)
            j++;
        if (j == v->n_iin)
            return oq_diag_error(d, OQ_ERR_INTERNAL, "verify: isolation input \"%s\" unknown", nm);
        v->iin_from[i] = v->n_fin + j;
    }
    return OQ_OK;
nomem:
    st = oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory building the isolation model");
fail:
    for (size_t i = 0; snap && i < n_nodes; i++)
        snap[i]->priv = NULL;
    free(snap);
    return st;
}

/* ------------------------------------------------------------ per sample ---- */

static void free_store(oq_verify *v)
{
    for (uint32_t i = 0; i < v->n_fids; i++)
        if (v->store[i].data || v->store[i].rank)
            oq_rt_tensor_release(&v->store[i]);
    v->store_bytes = 0;
}

static void compare_output(oq_verify *v, oq_verify_output *o, const oq_rt_tensor *f,
                           const oq_rt_tensor *q)
{
    o->rank = f->rank;
    memcpy(o->dims, f->dims, sizeof o->dims);
    if (!is_float_dtype(f->dtype) || !is_float_dtype(q->dtype) || !same_shape(f, q)) {
        o->class_scores = false;
        return;
    }
    int64_t n = oq_rt_tensor_numel(f);
    if (n > 0) {
        oq_err_acc_add(&o->err, f->data, f->dtype, q->data, q->dtype, n);
        compare_slices(v, (size_t)(o - v->outs), f, q);
    }
    if (!(f->dtype == OQ_DTYPE_FLOAT && q->dtype == OQ_DTYPE_FLOAT && f->rank == 2 &&
          f->dims[1] >= 2)) {
        o->class_scores = false;
        return;
    }
    if (!o->class_scores)
        return;
    int64_t rows = f->dims[0], c = f->dims[1];
    int k = v->opt.class_topk < c ? v->opt.class_topk : (int)c;
    o->topk = k;
    const float *fx = f->data, *qx = q->data;
    for (int64_t r = 0; r < rows; r++) {
        const float *fr = fx + r * c, *qr = qx + r * c;
        int64_t fa = 0, qa = 0;
        for (int64_t j = 1; j < c; j++) {
            if (fr[j] > fr[fa])
                fa = j;
            if (qr[j] > qr[qa])
                qa = j;
        }
        int64_t above = 0;
        for (int64_t j = 0; j < c; j++)
            above += qr[j] > qr[fa];
        o->rows++;
        o->top1_agree += fa == qa;
        o->topk_agree += above < k;
    }
}

oq_status oq_verify_sample(oq_verify *v, const oq_rt_tensor *inputs, size_t n_inputs,
                           const char *what, oq_diag *d)
{
    oq_status st = OQ_OK;
    oq_rt_tensor *fo = NULL, *qo = NULL, *qin = NULL, *iin = NULL, *io = NULL;
    if (n_inputs != v->n_fin)
        return oq_diag_error(d, OQ_ERR_USAGE, "verify: %zu inputs given, the model has %zu",
                             n_inputs, v->n_fin);
    fo = calloc(v->n_fout + 1, sizeof *fo);
    qo = calloc(v->n_qout + 1, sizeof *qo);
    qin = calloc(v->n_qin + 1, sizeof *qin);
    if (!fo || !qo || !qin) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
        goto done;
    }
    v->cur_inputs = inputs;
    v->nomem = false;
    for (size_t li = 0; li < v->n_layers; li++)
        if (v->layer_input[li] >= 0)
            layer_observe_float(&v->layers[li], &inputs[v->layer_input[li]], v->opt.float_ranges);
    float_cache_entry *ce = v->opt.float_cache && v->opt.outputs_only ? cache_entry(v->opt.float_cache, v->samples) : NULL;
    if (v->opt.float_cache && v->opt.outputs_only && !ce) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
        goto done;
    }
    if (ce && ce->outputs) { /* this sample's float outputs and shapes, computed before */
        if (ce->n_outputs != v->n_fout || ce->n_shapes != v->n_shapes) {
            st = oq_diag_error(d, OQ_ERR_USAGE, "verify: a float cache shared by verifications of other float models");
            goto done;
        }
        for (size_t i = 0; i < v->n_fout; i++) {
            fo[i] = ce->outputs[i];
            fo[i].owned = false;
        }
        for (size_t i = 0; i < v->n_shapes; i++) {
            v->shapes[i] = ce->shapes[i];
            v->shapes[i].stamp = ce->shapes[i].stamp ? v->samples + 1 : 0;
        }
    } else {
        st = oq_plan_run(v->fp, inputs, n_inputs, fo, v->n_fout, d);
        if (st != OQ_OK)
            goto done;
        if (ce && (st = cache_store(ce, v, fo, d)) != OQ_OK)
            goto done;
    }
    if (v->nomem) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory storing float tensors%s%s",
                           what ? " for " : "", what ? what : "");
        goto done;
    }
    for (size_t i = 0; i < v->n_qin; i++)
        qin[i] = inputs[v->qin_from[i]]; /* shallow: borrowed view */
    for (size_t i = 0; i < v->n_qin; i++)
        qin[i].owned = false;
    st = oq_plan_run(v->qp, qin, v->n_qin, qo, v->n_qout, d);
    if (st != OQ_OK)
        goto done;
    for (size_t i = 0; i < v->n_fout; i++)
        compare_output(v, &v->outs[i], &fo[i], &qo[v->qout_of[i]]);
    if (v->sc) {
        st = oq_satcheck_sample(v->sc, qin, v->n_qin, d);
        if (st != OQ_OK)
            goto done;
        for (size_t li = 0; li < v->n_layers; li++)
            if (v->sc_of[li] >= 0)
                v->layers[li].arith = oq_satcheck_layer_at(v->sc, (size_t)v->sc_of[li])->err;
        for (size_t i = 0; i < v->n_fout; i++) {
            const oq_satcheck_output *so = oq_satcheck_output_at(v->sc, v->sc_out[i]);
            if (so)
                v->outs[i].arith = so->err;
        }
    }
    if (v->opt.isolated && !v->iso_tried) {
        /* a model the isolation cannot handle still gets the other numbers */
        oq_diag id;
        oq_diag_init(&id);
        v->iso_tried = true;
        if (build_isolation(v, &id) != OQ_OK) {
            char msg[512] = "unknown error";
            const oq_diag_entry *e = oq_diag_first_error(&id);
            if (e)
                oq_diag_format(e, msg, sizeof msg);
            oq_diag_warn(d, "verify: no isolated errors (the isolation model failed: %s)", msg);
            oq_plan_free(v->ip);
            v->ip = NULL;
            for (size_t li = 0; li < v->n_layers; li++)
                v->layers[li].has_iso = false;
        }
        oq_diag_free(&id);
    }
    if (v->ip) {
        size_t ni = oq_plan_n_inputs(v->ip), no = oq_plan_n_outputs(v->ip);
        iin = calloc(ni + 1, sizeof *iin);
        io = calloc(no + 1, sizeof *io);
        if (!iin || !io) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "verify: out of memory");
            goto done;
        }
        for (size_t i = 0; i < ni; i++) {
            size_t src = v->iin_from[i];
            const oq_rt_tensor *s =
                src < v->n_fin ? &inputs[src] : &v->store[v->iin_fid[src - v->n_fin]];
            if (!s->rank && !s->data) {
                st = oq_diag_error(d, OQ_ERR_INVALID,
                                   "verify: float tensor \"%s\" was not computed%s%s",
                                   oq_plan_input_name(v->ip, i), what ? " for " : "",
                                   what ? what : "");
                goto done;
            }
            iin[i] = *s;
            iin[i].owned = false;
        }
        st = oq_plan_run(v->ip, iin, ni, io, 0, d);
        if (st != OQ_OK)
            goto done;
    }
    v->samples++;
done:
    for (size_t i = 0; fo && i < v->n_fout; i++)
        oq_rt_tensor_release(&fo[i]);
    for (size_t i = 0; qo && i < v->n_qout; i++)
        oq_rt_tensor_release(&qo[i]);
    free(fo);
    free(qo);
    free(qin);
    free(iin);
    free(io);
    free_store(v);
    v->cur_inputs = NULL;
    return st;
}

void oq_verify_free(oq_verify *v)
{
    if (!v)
        return;
    if (v->store)
        free_store(v);
    oq_plan_free(v->fp);
    oq_plan_free(v->qp);
    oq_plan_free(v->ip);
    oq_model_free(v->im);
    free(v->im_buf);
    free(v->qin_from);
    free(v->qout_of);
    for (size_t i = 0; v->outs && i < v->n_fout; i++)
        free(v->outs[i].slices);
    for (size_t i = 0; v->osl && i < v->n_fout; i++) {
        free(v->osl[i].ops);
        free(v->osl[i].bounds);
    }
    free(v->outs);
    free(v->osl);
    free(v->f_shape);
    free(v->shapes);
    free(v->layers);
    free(v->layer_input);
    free(v->layer_fid);
    free(v->weights);
    free(v->weight_fid);
    free(v->weight_ref);
    oq_model_free(v->wref);
    free(v->f_layer);
    free(v->f_store);
    free(v->q_layer);
    free(v->q_weight);
    free(v->i_layer);
    free(v->iq_layer);
    free(v->qq_layer);
    free(v->q_seen);
    free(v->i_seen);
    oq_satcheck_free(v->sc);
    free(v->sc_of);
    free(v->sc_out);
    free(v->store);
    free(v->iin_fid);
    free(v->iin_from);
    free(v);
}

const oq_plan *oq_verify_float_plan(const oq_verify *v) { return v->fp; }
uint64_t oq_verify_n_samples(const oq_verify *v) { return v->samples; }
size_t oq_verify_n_outputs(const oq_verify *v) { return v->n_fout; }
const oq_verify_output *oq_verify_output_at(const oq_verify *v, size_t i)
{
    return i < v->n_fout ? &v->outs[i] : NULL;
}
size_t oq_verify_n_layers(const oq_verify *v) { return v->n_layers; }
const oq_verify_layer *oq_verify_layer_at(const oq_verify *v, size_t i)
{
    return i < v->n_layers ? &v->layers[i] : NULL;
}
size_t oq_verify_n_weights(const oq_verify *v) { return v->n_weights; }
const oq_verify_weight *oq_verify_weight_at(const oq_verify *v, size_t i)
{
    return i < v->n_weights ? &v->weights[i] : NULL;
}
bool oq_verify_has_isolation(const oq_verify *v) { return v->ip != NULL; }
int64_t oq_verify_peak_store_bytes(const oq_verify *v) { return v->peak_store_bytes; }
