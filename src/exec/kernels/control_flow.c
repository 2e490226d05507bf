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

const oq_kernel oq_kernels_control_flow[] = {
    {"", "If", 1, 0, 0, OQ_T(BOOL), NULL, prepare_if, infer_if, copy_results, cf_release, 1},
    {"", "Loop", 1, 0, 0, 0, NULL, prepare_loop, infer_loop, copy_results, cf_release, 0},
};
OQ_KERNEL_TABLE_END(control_flow);
