/* Saturation check: a QDQ model with the reference arithmetic vs a target's integer
 * arithmetic, per activation QuantizeLinear and per graph output. include/onnxq/satcheck.h */
#include "onnxq/satcheck.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/grow.h"
#include "onnxq/stats.h"
#include "quant/quant-impl.h"

struct oq_satcheck {
    oq_model *qm;
    oq_arith arith;
    int threads;
    oq_plan *rp, *tp;
    /* the isolation copy: every layer's Q output is read by its consumers from an added
     * graph input carrying the reference run's tensor, so each Q output measures the
     * target's arithmetic on the reference inputs (its own loss, not the drift of the
     * layers before it). Built after the first reference run (dtypes and ranks known). */
    oq_model *im;
    uint8_t *im_buf;
    oq_plan *ip;
    bool iso_tried;
    uint32_t n_iids;
    int32_t *ilayer;           /* isolation value id (Q output) -> layer, -1 */
    size_t *iin_layer;         /* isolation plan input -> layer (SIZE_MAX: original input) */
    size_t *iin_from;          /* original input -> reference plan input */
    size_t n_in, n_out;
    size_t *tin_from;          /* target plan input -> reference plan input */
    size_t *tout_of;           /* reference output i -> target plan output */
    oq_satcheck_layer *layers;
    size_t n_layers;
    uint32_t n_ids;
    int32_t *qlayer;           /* value id (Q output) -> layer, -1 */
    oq_rt_tensor *store;       /* by layer: the reference run's Q output, this sample */
    oq_satcheck_output *outs;
    oq_tensor_observer ref_fn;
    void *ref_user;
    bool nomem;
    uint64_t samples;
    /* float-output layers (a Gemm/MatMul group with no Q after it): by layer, whether it
     * is one and the range of its reference values seen so far (its scale follows it) */
    bool *flt;
    float *flo, *fhi;
};

/* The integer type of a DequantizeLinear's data: the constant's, else its zero point's
 * (the same type), else the value's; OQ_DTYPE_UNDEFINED when unknown. */
static int32_t dq_dtype(const oq_node *dq, const oq_tensor **data)
{
    const oq_value *v = dq->inputs[0];
    const oq_tensor *t = oq_value_const_tensor(v);
    *data = t && t->has_dtype ? t : NULL;
    if (!(t && t->has_dtype) && dq->n_inputs > 2 && dq->inputs[2])
        t = oq_value_const_tensor(dq->inputs[2]);
    return t && t->has_dtype ? t->dtype : v->type && v->type->has_elem_type ? v->type->elem_type : OQ_DTYPE_UNDEFINED;
}

static const oq_node *dq_of(const oq_node *n, size_t i)
{
    const oq_value *v = i < n->n_inputs ? n->inputs[i] : NULL;
    const oq_node *p = v && v->kind == OQ_VALUE_NODE ? v->producer : NULL;
    return oq_quant_op_is(p, "DequantizeLinear") && p->n_inputs >= 1 && p->inputs[0] ? p : NULL;
}

/* Only the u8 x s8 (and s8 x s8) products of Conv, ConvTranspose, Gemm and MatMul groups
 * can saturate: such a node whose weight side (input 1) is int8 may, unless the weight is
 * a constant in which no pair that the kernels add in one int16 exceeds 128 steps (the
 * pair limit, oq_weight_pairs_fit); an int8 input 0 against a uint8 input 1 is not
 * modelled and counts as "may". */
bool oq_satcheck_can_saturate(const oq_model *m, oq_arith arith)
{
    if (arith != OQ_ARITH_AVX2 || !m || !m->graph)
        return false;
    for (const oq_node *n = m->graph->first; n; n = n->next) {
        bool conv = oq_quant_op_is(n, "Conv") || oq_quant_op_is(n, "ConvTranspose");
        if (!conv && !oq_quant_op_is(n, "Gemm") && !oq_quant_op_is(n, "MatMul"))
            continue;
        const oq_node *da = dq_of(n, 0), *dw = dq_of(n, 1);
        const oq_tensor *wt = NULL, *at = NULL;
        int32_t ta = da ? dq_dtype(da, &at) : OQ_DTYPE_FLOAT, tw = dw ? dq_dtype(dw, &wt) : OQ_DTYPE_FLOAT;
        if (ta == OQ_DTYPE_FLOAT || tw == OQ_DTYPE_FLOAT)
            continue; /* not an integer group */
        if (ta == OQ_DTYPE_UNDEFINED || tw == OQ_DTYPE_UNDEFINED)
            return true;
        if (tw == OQ_DTYPE_INT8) {
            const int8_t *q = wt ? oq_tensor_data((oq_tensor *)wt, NULL) : NULL;
            if (!q || oq_quant_op_is(n, "ConvTranspose") || !oq_weight_pairs_fit(n, q, wt->dims, wt->rank))
                return true;
        } else if (ta == OQ_DTYPE_INT8) {
            return true;
        }
    }
    return false;
}

static void on_ref(const oq_node *node, size_t idx, const oq_rt_tensor *t, void *user)
{
    oq_satcheck *s = user;
    if (s->ref_fn)
        s->ref_fn(node, idx, t, s->ref_user);
    const oq_value *val = node->outputs[idx];
    if (!val || val->id >= s->n_ids || s->qlayer[val->id] < 0)
        return;
    oq_rt_tensor *st = &s->store[s->qlayer[val->id]];
    if (st->data || st->rank)
        oq_rt_tensor_release(st);
    if (oq_rt_tensor_alloc(st, t->dtype, t->dims, t->rank) != OQ_OK) {
        s->nomem = true;
        return;
    }
    if (t->nbytes > 0)
        memcpy(st->data, t->data, (size_t)t->nbytes);
}

static void on_iso(const oq_node *node, size_t idx, const oq_rt_tensor *t, void *user)
{
    oq_satcheck *s = user;
    const oq_value *val = node->outputs[idx];
    if (!val || val->id >= s->n_iids || s->ilayer[val->id] < 0)
        return;
    oq_satcheck_layer *L = &s->layers[s->ilayer[val->id]];
    const oq_rt_tensor *r = &s->store[s->ilayer[val->id]];
    int64_t n = oq_rt_tensor_numel(t);
    if (!r->data || r->rank != t->rank || oq_rt_tensor_numel(r) != n ||
        !oq_stats_dtype_supported(r->dtype) || !oq_stats_dtype_supported(t->dtype))
        return;
    enum { CHUNK = 256 };
    double qa[CHUNK], qb[CHUNK];
    float xa[CHUNK], xb[CHUNK];
    for (int64_t o = 0; o < n; o += CHUNK) {
        int64_t c = n - o < CHUNK ? n - o : CHUNK;
        if (!oq_elems_to_double(r->data, r->dtype, o, c, qa) ||
            !oq_elems_to_double(t->data, t->dtype, o, c, qb))
            return;
        size_t li = (size_t)s->ilayer[val->id];
        for (int64_t i = 0; i < c; i++) {
            if (s->flt[li]) {
                xa[i] = (float)qa[i];
                xb[i] = (float)qb[i];
                s->flo[li] = xa[i] < s->flo[li] ? xa[i] : s->flo[li];
                s->fhi[li] = xa[i] > s->fhi[li] ? xa[i] : s->fhi[li];
            } else {
                xa[i] = oq_dequantize_value((int32_t)qa[i], L->scale, L->zero_point);
                xb[i] = oq_dequantize_value((int32_t)qb[i], L->scale, L->zero_point);
            }
        }
        oq_err_acc_add_f32(&L->err, xa, xb, c);
    }
    if (s->flt[s->ilayer[val->id]]) {
        /* the uint8 step of the range seen so far: the rounding noise a Q would add */
        size_t li = (size_t)s->ilayer[val->id];
        float lo = s->flo[li] < 0 ? s->flo[li] : 0, hi = s->fhi[li] > 0 ? s->fhi[li] : 0;
        L->scale = (hi - lo) / 255.0f;
    }
}

/* A Gemm or MatMul whose inputs 0 and 1 come from DequantizeLinear and whose float output
 * no QuantizeLinear reads: onnxruntime runs it as QGemm with a float output or
 * MatMulIntegerToFloat, integer products all the same (insert-qdq's placement by value
 * leaves such outputs float where only float ops read them). */
static bool float_output_group(const oq_node *n)
{
    if (!(oq_quant_op_is(n, "Gemm") || oq_quant_op_is(n, "MatMul")) || !dq_of(n, 0) || !dq_of(n, 1) || n->n_outputs < 1 ||
        !n->outputs[0])
        return false;
    const oq_value *o = n->outputs[0];
    for (size_t i = 0; i < o->n_uses; i++)
        if (oq_quant_op_is(o->uses[i].node, "QuantizeLinear"))
            return false;
    return true;
}

/* A zeroed layer at the end of s->layers (grown as needed), not yet counted; NULL: out of
 * memory. */
static oq_satcheck_layer *new_layer(oq_satcheck *s, size_t *cap)
{
    oq_satcheck_layer *nl = oq_grow(s->layers, s->n_layers, cap, sizeof *nl, 32);
    if (!nl)
        return NULL;
    s->layers = nl;
    memset(&nl[s->n_layers], 0, sizeof *nl);
    return &nl[s->n_layers];
}

static oq_status find_layers(oq_satcheck *s, oq_diag *d)
{
    oq_graph *g = s->qm->graph;
    size_t cap = 0;
    for (oq_node *dq = g->first; dq; dq = dq->next) {
        if (!oq_quant_op_is(dq, "DequantizeLinear") || dq->n_inputs < 2 || !dq->n_outputs || !dq->outputs[0])
            continue;
        oq_value *qv = dq->inputs[0];
        if (!qv || qv->kind != OQ_VALUE_NODE || !oq_quant_op_is(qv->producer, "QuantizeLinear") ||
            qv->id >= s->n_ids || s->qlayer[qv->id] >= 0)
            continue;
        oq_node *q = qv->producer;
        oq_value *src = q->n_inputs ? q->inputs[0] : NULL;
        double sc, zp = 0;
        if (!src || oq_value_const_tensor(src) || !oq_quant_const_scalar(dq->inputs[1], &sc, NULL) ||
            (dq->n_inputs > 2 && dq->inputs[2] && !oq_quant_const_scalar(dq->inputs[2], &zp, NULL)))
            continue;
        oq_satcheck_layer *L = new_layer(s, &cap);
        if (!L)
            return oq_diag_error(d, OQ_ERR_NOMEM, "satcheck: out of memory");
        L->tensor = dq->outputs[0]->name ? dq->outputs[0]->name : "";
        L->qtensor = qv->name ? qv->name : "";
        if (src->kind == OQ_VALUE_NODE && src->producer) {
            L->node = src->producer->name ? src->producer->name : "";
            L->op_type = src->producer->op_type;
        } else {
            L->node = "";
            L->op_type = "input";
        }
        L->scale = (float)sc;
        L->zero_point = (int32_t)zp;
        const oq_value *pv = src;
        while (pv && pv->kind == OQ_VALUE_NODE && pv->producer &&
               (oq_quant_op_is(pv->producer, "Relu") || oq_quant_op_is(pv->producer, "Clip")) && pv->producer->n_inputs)
            pv = pv->producer->inputs[0];
        const oq_node *pn = pv && pv->kind == OQ_VALUE_NODE ? pv->producer : NULL;
        L->product = oq_quant_op_is(pn, "Conv") || oq_quant_op_is(pn, "ConvTranspose") || oq_quant_op_is(pn, "Gemm") ||
                     oq_quant_op_is(pn, "MatMul");
        s->qlayer[qv->id] = (int32_t)s->n_layers++;
    }
    size_t n_q = s->n_layers;
    for (oq_node *n = g->first; n; n = n->next) {
        if (!float_output_group(n) || n->outputs[0]->id >= s->n_ids || s->qlayer[n->outputs[0]->id] >= 0)
            continue;
        oq_satcheck_layer *L = new_layer(s, &cap);
        if (!L)
            return oq_diag_error(d, OQ_ERR_NOMEM, "satcheck: out of memory");
        L->tensor = L->qtensor = n->outputs[0]->name ? n->outputs[0]->name : "";
        L->node = n->name ? n->name : "";
        L->op_type = n->op_type;
        L->product = true;
        s->qlayer[n->outputs[0]->id] = (int32_t)s->n_layers++;
    }
    s->store = calloc(s->n_layers + 1, sizeof *s->store);
    s->flt = calloc(s->n_layers + 1, sizeof *s->flt);
    s->flo = calloc(s->n_layers + 1, sizeof *s->flo);
    s->fhi = calloc(s->n_layers + 1, sizeof *s->fhi);
    if (!s->store || !s->flt || !s->flo || !s->fhi)
        return oq_diag_error(d, OQ_ERR_NOMEM, "satcheck: out of memory");
    for (size_t i = n_q; i < s->n_layers; i++) {
        s->flt[i] = true;
        s->flo[i] = INFINITY;
        s->fhi[i] = -INFINITY;
    }
    return OQ_OK;
}

oq_status oq_satcheck_new(oq_model *qm, oq_arith arith, int threads, oq_satcheck **out, oq_diag *d)
{
    oq_status st;
    *out = NULL;
    if (!qm || !qm->graph)
        return oq_diag_error(d, OQ_ERR_USAGE, "satcheck: the model has no graph");
    oq_satcheck *s = calloc(1, sizeof *s);
    if (!s)
        return oq_diag_error(d, OQ_ERR_NOMEM, "satcheck: out of memory");
    s->qm = qm;
    oq_plan_options po = oq_plan_options_default();
    po.threads = threads;
    po.user = s;
    po.on_tensor = on_ref;
    po.arith = OQ_ARITH_REFERENCE;
    st = oq_plan_compile(qm, &po, &s->rp, d);
    if (st != OQ_OK)
        goto fail;
    po.on_tensor = NULL;
    po.arith = arith;
    s->arith = arith;
    s->threads = threads;
    st = oq_plan_compile(qm, &po, &s->tp, d);
    if (st != OQ_OK)
        goto fail;
    s->n_in = oq_plan_n_inputs(s->rp);
    s->n_out = oq_plan_n_outputs(s->rp);
    s->n_ids = qm->next_id;
    s->tin_from = calloc(s->n_in + 1, sizeof *s->tin_from);
    s->tout_of = calloc(s->n_out + 1, sizeof *s->tout_of);
    s->outs = calloc(s->n_out + 1, sizeof *s->outs);
    s->qlayer = malloc((s->n_ids + 1) * sizeof *s->qlayer);
    if (!s->tin_from || !s->tout_of || !s->outs || !s->qlayer) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "satcheck: out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i <= s->n_ids; i++)
        s->qlayer[i] = -1;
    /* the same model twice: the same inputs and outputs, matched by name all the same */
    for (size_t i = 0; i < oq_plan_n_inputs(s->tp); i++) {
        size_t k = 0;
        while (k < s->n_in && strcmp(oq_plan_input_name(s->rp, k), oq_plan_input_name(s->tp, i)) != 0)
            k++;
        if (k == s->n_in) {
            st = oq_diag_error(d, OQ_ERR_INTERNAL, "satcheck: plans disagree on input \"%s\"",
                               oq_plan_input_name(s->tp, i));
            goto fail;
        }
        s->tin_from[i] = k;
    }
    for (size_t i = 0; i < s->n_out; i++) {
        size_t k = 0;
        while (k < oq_plan_n_outputs(s->tp) &&
               strcmp(oq_plan_output_name(s->tp, k), oq_plan_output_name(s->rp, i)) != 0)
            k++;
        if (k == oq_plan_n_outputs(s->tp)) {
            st = oq_diag_error(d, OQ_ERR_INTERNAL, "satcheck: plans disagree on output \"%s\"",
                               oq_plan_output_name(s->rp, i));
            goto fail;
        }
        s->tout_of[i] = k;
        s->outs[i].name = oq_plan_output_name(s->rp, i);
    }
    st = find_layers(s, d);
    if (st != OQ_OK)
        goto fail;
    *out = s;
    return OQ_OK;
fail:
    oq_satcheck_free(s);
    return st;
}

static oq_status build_isolation(oq_satcheck *s, oq_diag *d)
{
    size_t len = 0;
    oq_read_options ro = {true, true};
    oq_status st = oq_model_write_buffer(s->qm, &s->im_buf, &len, d);
    if (st == OQ_OK)
        st = oq_model_read_buffer(s->im_buf, len, "satcheck isolation model", &ro, &s->im, d);
    if (st != OQ_OK)
        return st;
    oq_graph *g = s->im->graph;
    size_t n_orig = g->n_inputs;
    size_t *added = calloc(s->n_layers + 1, sizeof *added);
    if (!added)
        return oq_diag_error(d, OQ_ERR_NOMEM, "satcheck: out of memory");
    size_t n_added = 0;
    for (size_t i = 0; i < s->n_layers; i++) {
        const oq_rt_tensor *r = &s->store[i];
        oq_value *qv = oq_graph_find_local(g, s->layers[i].qtensor);
        bool out = qv && oq_value_is_graph_output(qv);
        if (!qv || qv->kind != OQ_VALUE_NODE || !r->data || (out && !s->flt[i]))
            continue; /* a float-output layer may be a graph output: its readers still get the reference */
        size_t ln = strlen(s->layers[i].qtensor);
        char *base = malloc(ln + 16);
        if (!base)
            goto nomem;
        memcpy(base, s->layers[i].qtensor, ln);
        memcpy(base + ln, "__satcheck_ref", 15);
        char *name = oq_graph_unique_name(g, base);
        free(base);
        oq_value *nv = name ? oq_graph_new_value(g, name) : NULL;
        int64_t dims[OQ_RT_MAX_RANK];
        for (size_t j = 0; j < r->rank; j++)
            dims[j] = -1;
        oq_type *ty = nv ? oq_type_tensor(s->im, r->dtype, dims, NULL, r->rank) : NULL;
        if (!ty || !oq_graph_add_input(g, nv, ty))
            goto nomem;
        oq_value_replace_all_uses(qv, nv);
        if (!out && !oq_graph_add_output(g, qv, NULL))
            goto nomem;
        added[n_added++] = i;
    }
    oq_plan_options po = oq_plan_options_default();
    po.threads = s->threads;
    po.user = s;
    po.on_tensor = on_iso;
    po.arith = s->arith;
    st = oq_plan_compile(s->im, &po, &s->ip, d);
    if (st != OQ_OK) {
        free(added);
        return st;
    }
    s->n_iids = s->im->next_id;
    size_t ni = oq_plan_n_inputs(s->ip);
    s->ilayer = malloc((s->n_iids + 1) * sizeof *s->ilayer);
    s->iin_layer = calloc(ni + 1, sizeof *s->iin_layer);
    s->iin_from = calloc(ni + 1, sizeof *s->iin_from);
    if (!s->ilayer || !s->iin_layer || !s->iin_from)
        goto nomem;
    for (uint32_t i = 0; i <= s->n_iids; i++)
        s->ilayer[i] = -1;
    for (size_t k = 0; k < n_added; k++) {
        oq_value *qv = oq_graph_find_local(g, s->layers[added[k]].qtensor);
        if (qv && qv->id < s->n_iids)
            s->ilayer[qv->id] = (int32_t)added[k];
    }
    for (size_t i = 0; i < ni; i++) {
        const char *nm = oq_plan_input_name(s->ip, i);
        s->iin_layer[i] = SIZE_MAX;
        size_t k = 0;
        while (k < s->n_in && strcmp(oq_plan_input_name(s->rp, k), nm) != 0)
            k++;
        if (k < s->n_in) {
            s->iin_from[i] = k;
            continue;
        }
        size_t j = 0;
        while (j < n_added && strcmp(g->inputs[n_orig + j]->value->name, nm) != 0)
            j++;
        if (j == n_added) {
            free(added);
            return oq_diag_error(d, OQ_ERR_INTERNAL, "satcheck: isolation input \"%s\" unknown", nm);
        }
        s->iin_layer[i] = added[j];
    }
    free(added);
    return OQ_OK;
nomem:
    free(added);
    return oq_diag_error(d, OQ_ERR_NOMEM, "satcheck: out of memory building the isolation model");
}

static void release_store(oq_satcheck *s)
{
    for (size_t i = 0; s->store && i < s->n_layers; i++)
        if (s->store[i].data || s->store[i].rank)
            oq_rt_tensor_release(&s->store[i]);
}

oq_status oq_satcheck_sample(oq_satcheck *s, const oq_rt_tensor *inputs, size_t n_inputs, oq_diag *d)
{
    oq_status st;
    if (n_inputs != s->n_in)
        return oq_diag_error(d, OQ_ERR_USAGE, "satcheck: %zu inputs given, the model has %zu", n_inputs,
                             s->n_in);
    size_t nt_in = oq_plan_n_inputs(s->tp), nt_out = oq_plan_n_outputs(s->tp);
    oq_rt_tensor *ro = calloc(s->n_out + 1, sizeof *ro), *to = calloc(nt_out + 1, sizeof *to);
    oq_rt_tensor *tin = calloc(nt_in + 1, sizeof *tin);
    if (!ro || !to || !tin) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "satcheck: out of memory");
        goto done;
    }
    s->nomem = false;
    st = oq_plan_run(s->rp, inputs, n_inputs, ro, s->n_out, d);
    if (st != OQ_OK)
        goto done;
    if (s->nomem) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "satcheck: out of memory storing the reference tensors");
        goto done;
    }
    for (size_t i = 0; i < nt_in; i++) {
        tin[i] = inputs[s->tin_from[i]];
        tin[i].owned = false;
    }
    st = oq_plan_run(s->tp, tin, nt_in, to, nt_out, d);
    if (st != OQ_OK)
        goto done;
    for (size_t i = 0; i < s->n_out; i++) {
        const oq_rt_tensor *a = &ro[i], *b = &to[s->tout_of[i]];
        int64_t n = oq_rt_tensor_numel(a);
        if (a->rank == b->rank && n == oq_rt_tensor_numel(b) && n > 0)
            oq_err_acc_add(&s->outs[i].err, a->data, a->dtype, b->data, b->dtype, n);
    }
    if (!s->iso_tried) {
        s->iso_tried = true;
        st = build_isolation(s, d);
        if (st != OQ_OK)
            goto done;
    }
    {
        size_t ni = oq_plan_n_inputs(s->ip);
        oq_rt_tensor *iin = calloc(ni + 1, sizeof *iin);
        if (!iin) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "satcheck: out of memory");
            goto done;
        }
        for (size_t i = 0; i < ni && st == OQ_OK; i++) {
            const oq_rt_tensor *src = s->iin_layer[i] == SIZE_MAX ? &inputs[s->iin_from[i]]
                                                                 : &s->store[s->iin_layer[i]];
            if (!src->data && !src->rank)
                st = oq_diag_error(d, OQ_ERR_INVALID, "satcheck: tensor \"%s\" was not computed",
                                   oq_plan_input_name(s->ip, i));
            iin[i] = *src;
            iin[i].owned = false;
        }
        oq_rt_tensor none;
        memset(&none, 0, sizeof none);
        if (st == OQ_OK)
            st = oq_plan_run(s->ip, iin, ni, &none, 0, d);
        free(iin);
        if (st != OQ_OK)
            goto done;
    }
    s->samples++;
done:
    for (size_t i = 0; ro && i < s->n_out; i++)
        oq_rt_tensor_release(&ro[i]);
    for (size_t i = 0; to && i < nt_out; i++)
        oq_rt_tensor_release(&to[i]);
    free(ro);
    free(to);
    free(tin);
    release_store(s);
    return st;
}

oq_status oq_satcheck_run_source(oq_satcheck *s, oq_calib_source *src, uint64_t max_samples, oq_diag *d)
{
    uint64_t ns = oq_calib_source_count(src);
    if (max_samples > 0 && ns > max_samples)
        ns = max_samples;
    oq_rt_tensor *in = calloc(s->n_in + 1, sizeof *in);
    if (!in)
        return oq_diag_error(d, OQ_ERR_NOMEM, "satcheck: out of memory");
    oq_status st = OQ_OK;
    for (uint64_t k = 0; k < ns && st == OQ_OK; k++) {
        char label[512];
        st = oq_calib_source_sample(src, s->rp, k, in, s->n_in, label, sizeof label, d);
        if (st == OQ_OK)
            st = oq_satcheck_sample(s, in, s->n_in, d);
        for (size_t i = 0; i < s->n_in; i++)
            oq_rt_tensor_release(&in[i]);
    }
    free(in);
    return st;
}

void oq_satcheck_free(oq_satcheck *s)
{
    if (!s)
        return;
    release_store(s);
    oq_plan_free(s->rp);
    oq_plan_free(s->tp);
    oq_plan_free(s->ip);
    oq_model_free(s->im);
    free(s->im_buf);
    free(s->ilayer);
    free(s->iin_layer);
    free(s->iin_from);
    free(s->tin_from);
    free(s->tout_of);
    free(s->layers);
    free(s->qlayer);
    free(s->store);
    free(s->flt);
    free(s->flo);
    free(s->fhi);
    free(s->outs);
    free(s);
}

const oq_plan *oq_satcheck_plan(const oq_satcheck *s) { return s->rp; }
void oq_satcheck_set_ref_observer(oq_satcheck *s, oq_tensor_observer fn, void *user)
{
    s->ref_fn = fn;
    s->ref_user = user;
}
uint64_t oq_satcheck_n_samples(const oq_satcheck *s) { return s->samples; }
size_t oq_satcheck_n_layers(const oq_satcheck *s) { return s->n_layers; }
const oq_satcheck_layer *oq_satcheck_layer_at(const oq_satcheck *s, size_t i)
{
    return i < s->n_layers ? &s->layers[i] : NULL;
}
size_t oq_satcheck_n_outputs(const oq_satcheck *s) { return s->n_out; }
const oq_satcheck_output *oq_satcheck_output_at(const oq_satcheck *s, size_t i)
{
    return i < s->n_out ? &s->outs[i] : NULL;
}

double oq_satcheck_loss_db(const oq_satcheck_layer *L)
{
    if (L->err.n == 0)
        return NAN;
    double eq = (double)L->err.n * (double)L->scale * (double)L->scale / 12.0;
    if (!(eq > 0))
        return L->err.sdd > 0 ? INFINITY : 0.0;
    return 10.0 * log10(1.0 + L->err.sdd / eq);
}
