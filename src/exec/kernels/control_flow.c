/* Control flow: If and Loop. Subgraphs are compiled once into subplans (prepare) that
 * read the node's outer-scope values; since the output shapes are only known after the
 * branch or the loop ran, the work happens in infer at run time and run copies the
 * results out. Sequence-typed values are not supported. */
#include <stdlib.h>
#include <string.h>

#include "exec/kernel.h"

#define MAX_IO 64

typedef struct cf_state {
    oq_plan *sub[2];              /* If: then, else; Loop: body */
    size_t n_res;
    oq_rt_tensor res[MAX_IO];     /* results of the last run, owned */
} cf_state;

static void cf_release(void *p)
{
    cf_state *s = p;
    if (!s)
        return;
    for (int i = 0; i < 2; i++)
        oq_plan_free(s->sub[i]);
    for (size_t i = 0; i < s->n_res; i++)
        oq_rt_tensor_release(&s->res[i]);
    free(s);
}

static void clear_res(cf_state *s)
{
    for (size_t i = 0; i < s->n_res; i++)
        oq_rt_tensor_release(&s->res[i]);
    s->n_res = 0;
}

static oq_status copy_results(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    cf_state *s = k->state;
    for (size_t i = 0; i < n_out && i < s->n_res; i++)
        if (s->res[i].nbytes)
            memcpy(out[i].data, s->res[i].data, (size_t)s->res[i].nbytes);
    clear_res(s);
    return OQ_OK;
}

static oq_status set_outputs_from_res(oq_kctx *k, oq_rt_tensor *out, size_t n_out)
{
    cf_state *s = k->state;
    if (s->n_res < n_out)
        return oq_k_error(k, OQ_ERR_INVALID, "subgraph produced %zu values, the node has %zu "
                          "outputs", s->n_res, n_out);
    for (size_t i = 0; i < n_out; i++) {
        if (out[i].dtype != s->res[i].dtype)
            return oq_k_error(k, OQ_ERR_INVALID, "output %zu is %s, expected %s", i,
                              oq_dtype_name(s->res[i].dtype), oq_dtype_name(out[i].dtype));
        oq_status st = oq_k_set_out(k, &out[i], s->res[i].dtype, s->res[i].dims, s->res[i].rank);
        if (st)
            return st;
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ If ----------- */

static oq_status prepare_if(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in)
{
    cf_state *s = calloc(1, sizeof(*s));
    if (!s)
        return OQ_ERR_NOMEM;
    k->state = s;
    oq_attr *a[2] = {oq_node_attr(k->node, "then_branch"), oq_node_attr(k->node, "else_branch")};
    for (int i = 0; i < 2; i++) {
        if (!a[i] || !a[i]->g)
            return oq_k_error(k, OQ_ERR_INVALID, "missing %s", i ? "else_branch" : "then_branch");
        oq_status st = oq_k_subplan_compile(k, a[i]->g, NULL, 0, &s->sub[i]);
        if (st)
            return st;
        if (oq_k_subplan_n_inputs(s->sub[i]) != 0)
            return oq_k_error(k, OQ_ERR_INVALID, "a branch must not have inputs");
    }
    return OQ_OK;
}

static oq_status infer_if(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    cf_state *s = k->state;
    if (n_out > MAX_IO)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "more than %d outputs", MAX_IO);
    for (size_t i = 0; i < n_out; i++) {
        const oq_rt_tensor *t = oq_k_subplan_output(s->sub[0], i);
        if (!t)
            return oq_k_error(k, OQ_ERR_INVALID, "then_branch has fewer outputs than the node");
        out[i].dtype = t->dtype;
    }
    if (k->compile_time)
        return oq_k_defer(k, out, n_out);
    bool cond = ((const uint8_t *)in[0]->data)[0] != 0;
    clear_res(s);
    oq_plan *sp = s->sub[cond ? 0 : 1];
    size_t n = oq_k_subplan_n_outputs(sp);
    if (n > MAX_IO)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "too many branch outputs");
    oq_status st = oq_k_subplan_run(k, sp, NULL, 0, s->res, n);
    if (st)
        return st;
    s->n_res = n;
    return set_outputs_from_res(k, out, n_out);
}

/* ------------------------------------------------------------------ Loop --------- */

/* Loop(M?, cond?, v_initial...) with body(iter_num, cond_in, v_in...) ->
 * (cond_out, v_out..., scan_out...). Outputs: v_final..., scan outputs stacked on a new
 * first axis. */
static oq_status prepare_loop(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in)
{
    cf_state *s = calloc(1, sizeof(*s));
    if (!s)
        return OQ_ERR_NOMEM;
    k->state = s;
    oq_attr *a = oq_node_attr(k->node, "body");
    if (!a || !a->g)
        return oq_k_error(k, OQ_ERR_INVALID, "missing body");
    if (n_in > MAX_IO)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "too many inputs");
    oq_rt_tensor it, c;
    memset(&it, 0, sizeof it);
    memset(&c, 0, sizeof c);
    it.dtype = OQ_DTYPE_INT64;
    c.dtype = OQ_DTYPE_BOOL;
    const oq_rt_tensor *hints[MAX_IO + 2] = {&it, &c};
    for (size_t i = 2; i < n_in; i++)
        hints[i] = in[i];
    return oq_k_subplan_compile(k, a->g, hints, n_in, &s->sub[0]);
}

static oq_status infer_loop(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    cf_state *s = k->state;
    oq_plan *body = s->sub[0];
    size_t n_v = n_in - 2, n_body_out = oq_k_subplan_n_outputs(body);
    if (n_in < 2 || n_body_out < 1 + n_v || n_out != n_body_out - 1 || n_out > MAX_IO)
        return oq_k_error(k, OQ_ERR_INVALID, "body outputs do not match the loop's values");
    size_t n_scan = n_out - n_v;
    for (size_t i = 0; i < n_out; i++)
        out[i].dtype = oq_k_subplan_output(body, 1 + i)->dtype;
    if (k->compile_time)
        return oq_k_defer(k, out, n_out);
    clear_res(s);
    int64_t max_trip = in[0] && oq_rt_tensor_numel(in[0]) ? oq_k_get_int(in[0], 0) : INT64_MAX;
    bool cond = in[1] && oq_rt_tensor_numel(in[1]) ? ((const uint8_t *)in[1]->data)[0] != 0 : true;
    /* loop-carried values: start from copies of the inputs */
    oq_rt_tensor *cur = calloc(n_v + 2, sizeof(oq_rt_tensor));
    oq_rt_tensor *bout = calloc(n_body_out + 1, sizeof(oq_rt_tensor));
    oq_rt_tensor *bin = calloc(n_v + 2, sizeof(oq_rt_tensor));
    /* scan outputs: growing byte buffers */
    char **scan = calloc(n_scan + 1, sizeof(char *));
    int64_t *scan_bytes = calloc(n_scan + 1, sizeof(int64_t));
    oq_rt_tensor *scan_elem = calloc(n_scan + 1, sizeof(oq_rt_tensor));
    oq_status st = OQ_OK;
    int64_t iters = 0, iter_val = 0;
    bool cond_val = cond;
    if (!cur || !bout || !bin || !scan || !scan_bytes || !scan_elem) {
        st = OQ_ERR_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < n_v; i++) {
        st = oq_rt_tensor_alloc(&cur[i], in[2 + i]->dtype, in[2 + i]->dims, in[2 + i]->rank);
        if (st)
            goto done;
        if (in[2 + i]->nbytes)
            memcpy(cur[i].data, in[2 + i]->data, (size_t)in[2 + i]->nbytes);
    }
    while (iters < max_trip && cond) {
        int64_t one = 1;
        iter_val = iters;
        cond_val = cond;
        oq_rt_tensor_borrow(&bin[0], OQ_DTYPE_INT64, &one, 0, &iter_val);
        uint8_t cv = cond_val ? 1 : 0;
        oq_rt_tensor_borrow(&bin[1], OQ_DTYPE_BOOL, &one, 0, &cv);
        for (size_t i = 0; i < n_v; i++)
            bin[2 + i] = cur[i], bin[2 + i].owned = false;
        st = oq_k_subplan_run(k, body, bin, oq_k_subplan_n_inputs(body) < n_v + 2
                                                ? oq_k_subplan_n_inputs(body) : n_v + 2,
                              bout, n_body_out);
        if (st)
            goto done;
        cond = bout[0].nbytes ? ((const uint8_t *)bout[0].data)[0] != 0 : false;
        for (size_t i = 0; i < n_v; i++) {
            oq_rt_tensor_release(&cur[i]);
            cur[i] = bout[1 + i];
            memset(&bout[1 + i], 0, sizeof bout[1 + i]);
        }
        for (size_t j = 0; j < n_scan; j++) {
            oq_rt_tensor *e = &bout[1 + n_v + j];
            if (iters == 0)
                scan_elem[j] = *e, scan_elem[j].data = NULL, scan_elem[j].owned = false;
            else if (e->rank != scan_elem[j].rank ||
                     memcmp(e->dims, scan_elem[j].dims, e->rank * sizeof(int64_t)) != 0) {
                st = oq_k_error(k, OQ_ERR_INVALID, "scan output %zu changes shape", j);
                goto done;
            }
            char *nb = realloc(scan[j], (size_t)(scan_bytes[j] + e->nbytes + 1));
            if (!nb) {
                st = OQ_ERR_NOMEM;
                goto done;
            }
            scan[j] = nb;
            if (e->nbytes)
                memcpy(scan[j] + scan_bytes[j], e->data, (size_t)e->nbytes);
            scan_bytes[j] += e->nbytes;
        }
        oq_rt_tensor_release(&bout[0]);
        for (size_t j = 0; j < n_scan; j++)
            oq_rt_tensor_release(&bout[1 + n_v + j]);
        iters++;
    }
    for (size_t i = 0; i < n_v; i++) {
        s->res[i] = cur[i];
        memset(&cur[i], 0, sizeof cur[i]);
    }
    for (size_t j = 0; j < n_scan; j++) {
        oq_rt_tensor *r = &s->res[n_v + j];
        int64_t d[OQ_RT_MAX_RANK];
        const oq_rt_tensor *el = iters ? &scan_elem[j] : oq_k_subplan_output(body, 1 + n_v + j);
        size_t rank = el->rank == OQ_RT_UNKNOWN_RANK ? 0 : el->rank;
        if (rank + 1 > OQ_RT_MAX_RANK) {
            st = oq_k_error(k, OQ_ERR_UNSUPPORTED, "scan output rank too large");
            goto done;
        }
        d[0] = iters;
        for (size_t t = 0; t < rank; t++)
            d[1 + t] = el->dims[t] < 0 ? 0 : el->dims[t];
        st = oq_rt_tensor_alloc(r, out[n_v + j].dtype, d, rank + 1);
        if (st)
            goto done;
        if (r->nbytes)
            memcpy(r->data, scan[j], (size_t)r->nbytes);
    }
    s->n_res = n_out;
    st = set_outputs_from_res(k, out, n_out);
done:
    for (size_t i = 0; cur && i < n_v; i++)
        oq_rt_tensor_release(&cur[i]);
    for (size_t i = 0; bout && i < n_body_out; i++)
        oq_rt_tensor_release(&bout[i]);
    for (size_t j = 0; scan && j < n_scan; j++)
        free(scan[j]);
    free(cur);
    free(bout);
    free(bin);
    free(scan);
    free(scan_bytes);
    free(scan_elem);
    if (st)
        clear_res(s);
    return st;
}

/* ------------------------------------------------------------------ Scan --------- */

/* slice t of x along axis a (the axis removed), into an owned tensor */
static oq_status take_slice(const oq_rt_tensor *x, size_t a, int64_t t, oq_rt_tensor *out)
{
    int64_t d[OQ_RT_MAX_RANK] = {0}, outer = 1, inner = 1;
    size_t r = 0;
    for (size_t i = 0; i < x->rank; i++) {
        if (i != a)
            d[r++] = x->dims[i];
        if (i < a)
            outer *= x->dims[i];
        else if (i > a)
            inner *= x->dims[i];
    }
    oq_status st = oq_rt_tensor_alloc(out, x->dtype, d, r);
    if (st)
        return st;
    size_t es = (size_t)oq_dtype_bits(x->dtype) / 8;
    int64_t L = x->dims[a];
    for (int64_t o = 0; o < outer; o++)
        memcpy((char *)out->data + (size_t)(o * inner) * es,
               (const char *)x->data + (size_t)((o * L + t) * inner) * es, (size_t)inner * es);
    return OQ_OK;
}

typedef struct scan_cfg {
    size_t n_state, n_scan_in, n_scan_out;
    int64_t in_axis[MAX_IO], in_dir[MAX_IO], out_axis[MAX_IO], out_dir[MAX_IO];
} scan_cfg;

static oq_status scan_config(oq_kctx *k, size_t n_in, size_t n_out, scan_cfg *c)
{
    memset(c, 0, sizeof *c);
    size_t first = k->opset < 9 ? 1 : 0; /* Scan-8: sequence_lens comes first */
    int64_t m = oq_node_attr_int(k->node, "num_scan_inputs", -1);
    if (m <= 0 || (size_t)m + first > n_in || n_in > MAX_IO)
        return oq_k_error(k, OQ_ERR_INVALID, "bad num_scan_inputs");
    c->n_scan_in = (size_t)m;
    c->n_state = n_in - first - c->n_scan_in;
    if (n_out < c->n_state)
        return oq_k_error(k, OQ_ERR_INVALID, "fewer outputs than states");
    c->n_scan_out = n_out - c->n_state;
    const int64_t *v;
    int64_t n;
    if ((n = oq_node_attr_ints(k->node, k->opset < 9 ? "directions" : "scan_input_directions", &v)) >= 0)
        for (int64_t i = 0; i < n && i < MAX_IO; i++)
            c->in_dir[i] = v[i];
    if ((n = oq_node_attr_ints(k->node, "scan_input_axes", &v)) >= 0)
        for (int64_t i = 0; i < n && i < MAX_IO; i++)
            c->in_axis[i] = v[i];
    if ((n = oq_node_attr_ints(k->node, "scan_output_axes", &v)) >= 0)
        for (int64_t i = 0; i < n && i < MAX_IO; i++)
            c->out_axis[i] = v[i];
    if ((n = oq_node_attr_ints(k->node, "scan_output_directions", &v)) >= 0)
        for (int64_t i = 0; i < n && i < MAX_IO; i++)
            c->out_dir[i] = v[i];
    return OQ_OK;
}

static oq_status prepare_scan(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in)
{
    cf_state *s = calloc(1, sizeof(*s));
    if (!s)
        return OQ_ERR_NOMEM;
    k->state = s;
    oq_attr *a = oq_node_attr(k->node, "body");
    if (!a || !a->g)
        return oq_k_error(k, OQ_ERR_INVALID, "missing body");
    if (n_in > MAX_IO)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "too many inputs");
    size_t first = k->opset < 9 ? 1 : 0;
    const oq_rt_tensor *hints[MAX_IO];
    for (size_t i = first; i < n_in; i++)
        hints[i - first] = in[i];
    return oq_k_subplan_compile(k, a->g, hints, n_in - first, &s->sub[0]);
}

/* one Scan-9 style pass over states st[] and scan inputs sc[]; results into res[] */
static oq_status scan_pass(oq_kctx *k, oq_plan *body, const scan_cfg *c,
                           const oq_rt_tensor *const *st0, const oq_rt_tensor *const *sc,
                           oq_rt_tensor *res)
{
    size_t ns = c->n_state, ni = c->n_scan_in, no = c->n_scan_out;
    int64_t L = -1;
    size_t in_ax[MAX_IO];
    for (size_t i = 0; i < ni; i++) {
        int64_t ax = oq_k_axis(c->in_axis[i], sc[i]->rank);
        if (ax < 0)
            return oq_k_error(k, OQ_ERR_INVALID, "bad scan_input_axes");
        in_ax[i] = (size_t)ax;
        if (L >= 0 && sc[i]->dims[ax] != L)
            return oq_k_error(k, OQ_ERR_INVALID, "scan inputs differ in length");
        L = sc[i]->dims[ax];
    }
    oq_rt_tensor bin[MAX_IO], bout[MAX_IO], cur[MAX_IO], elems[MAX_IO];
    memset(bin, 0, sizeof bin);
    memset(bout, 0, sizeof bout);
    memset(cur, 0, sizeof cur);
    memset(elems, 0, sizeof elems);
    char *acc[MAX_IO] = {NULL};
    oq_status st = OQ_OK;
    for (size_t i = 0; i < ns; i++) {
        st = oq_rt_tensor_alloc(&cur[i], st0[i]->dtype, st0[i]->dims, st0[i]->rank);
        if (st)
            goto done;
        if (st0[i]->nbytes)
            memcpy(cur[i].data, st0[i]->data, (size_t)st0[i]->nbytes);
    }
    for (int64_t t = 0; t < L; t++) {
        for (size_t i = 0; i < ns; i++)
            bin[i] = cur[i], bin[i].owned = false;
        for (size_t i = 0; i < ni; i++) {
            oq_rt_tensor_release(&bin[ns + i]);
            st = take_slice(sc[i], in_ax[i], c->in_dir[i] ? L - 1 - t : t, &bin[ns + i]);
            if (st)
                goto done;
        }
        st = oq_k_subplan_run(k, body, bin, ns + ni, bout, ns + no);
        if (st)
            goto done;
        for (size_t i = 0; i < ns; i++) {
            oq_rt_tensor_release(&cur[i]);
            cur[i] = bout[i];
            memset(&bout[i], 0, sizeof bout[i]);
        }
        for (size_t j = 0; j < no; j++) {
            oq_rt_tensor *e = &bout[ns + j];
            if (t == 0) {
                elems[j] = *e;
                elems[j].data = NULL;
                elems[j].owned = false;
                acc[j] = malloc((size_t)(e->nbytes * L + 1));
                if (!acc[j]) {
                    st = OQ_ERR_NOMEM;
                    goto done;
                }
            } else if (e->nbytes != elems[j].nbytes) {
                st = oq_k_error(k, OQ_ERR_INVALID, "scan output %zu changes shape", j);
                goto done;
            }
            if (e->nbytes)
                memcpy(acc[j] + (size_t)(t * e->nbytes), e->data, (size_t)e->nbytes);
            oq_rt_tensor_release(e);
        }
    }
    for (size_t i = 0; i < ns; i++) {
        res[i] = cur[i];
        memset(&cur[i], 0, sizeof cur[i]);
    }
    for (size_t j = 0; j < no; j++) {
        /* stack the L elements along out_axis (an inserted axis), reversed if asked */
        const oq_rt_tensor *el = L > 0 ? &elems[j] : oq_k_subplan_output(body, ns + j);
        size_t er = el->rank == OQ_RT_UNKNOWN_RANK ? 0 : el->rank;
        int64_t ax = oq_k_axis(c->out_axis[j], er + 1);
        if (ax < 0 || er + 1 > OQ_RT_MAX_RANK) {
            st = oq_k_error(k, OQ_ERR_INVALID, "bad scan_output_axes");
            goto done;
        }
        int64_t d[OQ_RT_MAX_RANK], outer = 1, inner = 1;
        for (size_t i = 0, q = 0; i < er + 1; i++) {
            if ((int64_t)i == ax) {
                d[i] = L < 0 ? 0 : L;
                continue;
            }
            d[i] = el->dims[q] < 0 ? 0 : el->dims[q];
            if ((int64_t)i < ax)
                outer *= d[i];
            else
                inner *= d[i];
            q++;
        }
        st = oq_rt_tensor_alloc(&res[ns + j], el->dtype, d, er + 1);
        if (st)
            goto done;
        size_t es = (size_t)oq_dtype_bits(el->dtype) / 8;
        for (int64_t t = 0; t < L; t++) {
            int64_t dst_t = c->out_dir[j] ? L - 1 - t : t;
            for (int64_t o = 0; o < outer; o++)
                memcpy((char *)res[ns + j].data + (size_t)((o * L + dst_t) * inner) * es,
                       acc[j] + (size_t)(t * elems[j].nbytes) + (size_t)(o * inner) * es,
                       (size_t)inner * es);
        }
    }
done:
    for (size_t i = 0; i < MAX_IO; i++) {
        oq_rt_tensor_release(&cur[i]);
        oq_rt_tensor_release(&bout[i]);
        free(acc[i]);
    }
    for (size_t i = 0; i < ni; i++)
        oq_rt_tensor_release(&bin[ns + i]);
    if (st)
        for (size_t i = 0; i < ns + no; i++)
            oq_rt_tensor_release(&res[i]);
    return st;
}

static oq_status infer_scan(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    cf_state *s = k->state;
    scan_cfg c;
    oq_status st = scan_config(k, n_in, n_out, &c);
    if (st)
        return st;
    oq_plan *body = s->sub[0];
    if (oq_k_subplan_n_outputs(body) != n_out)
        return oq_k_error(k, OQ_ERR_INVALID, "body outputs do not match the node's outputs");
    for (size_t i = 0; i < n_out; i++)
        out[i].dtype = oq_k_subplan_output(body, i)->dtype;
    if (k->compile_time)
        return oq_k_defer(k, out, n_out);
    clear_res(s);
    size_t first = k->opset < 9 ? 1 : 0;
    if (!first) {
        st = scan_pass(k, body, &c, in, in + c.n_state, s->res);
    } else {
        /* Scan-8: a batch axis 0 on every input and output; scan axis 1 */
        if (in[0])
            return oq_k_error(k, OQ_ERR_UNSUPPORTED, "Scan-8 sequence_lens is not supported");
        int64_t B = in[1]->dims[0];
        oq_rt_tensor per[MAX_IO], r1[MAX_IO];
        const oq_rt_tensor *pp[MAX_IO];
        char *stack[MAX_IO] = {NULL};
        int64_t piece[MAX_IO] = {0};
        memset(per, 0, sizeof per);
        for (int64_t b = 0; b < B && !st; b++) {
            for (size_t i = 0; i < n_in - 1 && !st; i++) {
                oq_rt_tensor_release(&per[i]);
                st = take_slice(in[1 + i], 0, b, &per[i]);
                pp[i] = &per[i];
            }
            memset(r1, 0, sizeof r1);
            if (!st)
                st = scan_pass(k, body, &c, pp, pp + c.n_state, r1);
            for (size_t j = 0; j < n_out && !st; j++) {
                if (b == 0) {
                    piece[j] = r1[j].nbytes;
                    stack[j] = malloc((size_t)(piece[j] * B + 1));
                    s->res[j] = r1[j];
                    s->res[j].data = NULL;
                    s->res[j].owned = false;
                    if (!stack[j])
                        st = OQ_ERR_NOMEM;
                }
                if (!st && r1[j].nbytes != piece[j])
                    st = oq_k_error(k, OQ_ERR_INVALID, "batch entries differ in shape");
                if (!st && piece[j])
                    memcpy(stack[j] + (size_t)(b * piece[j]), r1[j].data, (size_t)piece[j]);
            }
            for (size_t j = 0; j < n_out; j++)
                oq_rt_tensor_release(&r1[j]);
        }
        for (size_t i = 0; i < MAX_IO; i++)
            oq_rt_tensor_release(&per[i]);
        for (size_t j = 0; j < n_out; j++) {
            if (!st) {
                int64_t d[OQ_RT_MAX_RANK];
                d[0] = B;
                memcpy(d + 1, s->res[j].dims, s->res[j].rank * sizeof(int64_t));
                oq_rt_tensor tmp;
                st = oq_rt_tensor_alloc(&tmp, s->res[j].dtype, d, s->res[j].rank + 1);
                if (!st && tmp.nbytes)
                    memcpy(tmp.data, stack[j], (size_t)tmp.nbytes);
                s->res[j] = tmp;
            }
            free(stack[j]);
        }
    }
    if (st) {
        for (size_t j = 0; j < n_out; j++)
            oq_rt_tensor_release(&s->res[j]);
        s->n_res = 0;
        return st;
    }
    s->n_res = n_out;
    return set_outputs_from_res(k, out, n_out);
}

const oq_kernel oq_kernels_control_flow[] = {
    {"", "Scan", 8, 0, 0, 0, NULL, prepare_scan, infer_scan, copy_results, cf_release, 0},
    {"", "If", 1, 0, 0, OQ_T(BOOL), NULL, prepare_if, infer_if, copy_results, cf_release, 1},
    {"", "Loop", 1, 0, 0, 0, NULL, prepare_loop, infer_loop, copy_results, cf_release, 0},
};
OQ_KERNEL_TABLE_END(control_flow);
