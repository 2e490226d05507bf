/* Run a plan: bind inputs, infer shapes, take buffers from the pool (reused once the
 * last reader has run), call the kernels, hand tensors to the observer. */
#include "exec/plan-impl.h"
#include "ir/grow.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ memory ------- */

/* Best fit among free buffers: the smallest free one that is large enough; else grow
 * the largest free one; else a new buffer. Sizes are rounded to 64 bytes. */
static size_t pick_buffer(buffer *bufs, size_t n, size_t need, bool *grow)
{
    size_t best = NO_SLOT, largest = NO_SLOT;
    for (size_t i = 0; i < n; i++) {
        if (bufs[i].in_use)
            continue;
        if (bufs[i].cap >= need && (best == NO_SLOT || bufs[i].cap < bufs[best].cap))
            best = i;
        if (largest == NO_SLOT || bufs[i].cap > bufs[largest].cap)
            largest = i;
    }
    *grow = best == NO_SLOT && largest != NO_SLOT;
    return best != NO_SLOT ? best : largest;
}

static size_t round64(int64_t n)
{
    return ((size_t)(n > 0 ? n : 1) + 63) & ~(size_t)63;
}

/* Simulate the run-time buffer reuse with compile-time sizes. */
int64_t oq_plan_estimate_peak(oq_plan *p)
{
    size_t cap = p->n_slots + 1, nb = 0;
    buffer *b = calloc(cap, sizeof(*b));
    size_t *held = calloc(p->n_slots + 1, sizeof(size_t));
    int64_t total = -1;
    if (!b || !held)
        goto done;
    for (size_t i = 0; i < p->n_slots; i++)
        held[i] = NO_SLOT;
    for (size_t si = 0; si < p->n_steps; si++) {
        step *s = &p->steps[si];
        for (size_t o = 0; o < s->n_out; o++) {
            size_t sl = s->out_slots[o];
            if (sl == NO_SLOT)
                continue;
            int64_t nbytes = oq_plan_tensor_bytes(&p->slots[sl].compiled);
            if (nbytes < 0)
                goto done; /* dynamic shapes: no estimate */
            size_t need = round64(nbytes);
            bool grow;
            size_t k = pick_buffer(b, nb, need, &grow);
            if (k == NO_SLOT) {
                k = nb++;
                b[k].cap = need;
            } else if (grow) {
                b[k].cap = need;
            }
            b[k].in_use = true;
            held[sl] = k;
        }
        for (size_t i = 0; i < s->n_in; i++) {
            size_t sl = s->in_slots[i];
            if (sl != NO_SLOT && p->slots[sl].last_use == si && !p->slots[sl].is_output &&
                held[sl] != NO_SLOT) {
                b[held[sl]].in_use = false;
                held[sl] = NO_SLOT;
            }
        }
        for (size_t o = 0; o < s->n_out; o++) {
            size_t sl = s->out_slots[o];
            if (sl != NO_SLOT && p->slots[sl].last_use == NO_SLOT && !p->slots[sl].is_output &&
                held[sl] != NO_SLOT) {
                b[held[sl]].in_use = false;
                held[sl] = NO_SLOT;
            }
        }
    }
    total = 0;
    for (size_t i = 0; i < nb; i++)
        total += (int64_t)b[i].cap;
done:
    free(b);
    free(held);
    return total < 0 ? 0 : total;
}

static oq_status acquire(oq_plan *p, slot *s, oq_rt_tensor *t)
{
    int64_t nbytes = oq_plan_tensor_bytes(t);
    if (nbytes < 0)
        return OQ_ERR_INVALID;
    t->nbytes = nbytes;
    p->total_bytes += nbytes;
    size_t need = round64(nbytes);
    bool grow = false;
    size_t k = s->prev_buf;
    /* Same buffer as in the previous run when it is free and large enough: with the
     * same shapes every run then repeats the first run's assignment, so the pool stops
     * growing after one run (best fit from a pool left by an earlier run can pick
     * differently and grow a buffer on every run). */
    if (k >= p->n_bufs || p->bufs[k].in_use || p->bufs[k].cap < need)
        k = pick_buffer(p->bufs, p->n_bufs, need, &grow);
    if (k == NO_SLOT) {
        buffer *nb = oq_grow(p->bufs, p->n_bufs, &p->cap_bufs, sizeof(*nb), 16);
        if (!nb)
            return OQ_ERR_NOMEM;
        p->bufs = nb;
        k = p->n_bufs++;
        p->bufs[k].data = NULL;
        p->bufs[k].cap = 0;
        p->bufs[k].in_use = false;
        grow = true;
    }
    if (grow) {
        free(p->bufs[k].data);
        p->bufs[k].data = aligned_alloc(64, need);
        p->bufs[k].cap = p->bufs[k].data ? need : 0;
        if (!p->bufs[k].data)
            return OQ_ERR_NOMEM;
    }
    p->bufs[k].in_use = true;
    s->buf = k;
    s->prev_buf = k;
    t->data = p->bufs[k].data;
    t->owned = false;
    return OQ_OK;
}

static void release_slot(oq_plan *p, slot *s)
{
    if (s->kind == SLOT_NODE && s->buf != NO_SLOT) {
        p->bufs[s->buf].in_use = false;
        s->buf = NO_SLOT;
    }
}

/* ------------------------------------------------------------------ run ---------- */

static oq_status bind_inputs(oq_plan *p, const oq_rt_tensor *inputs, size_t n_inputs, oq_diag *d)
{
    if (n_inputs != p->n_inputs)
        return oq_diag_error(d, OQ_ERR_USAGE, "the model has %zu inputs, %zu given", p->n_inputs,
                             n_inputs);
    /* a subgraph's inputs come from its kernel (Loop: the iteration number and condition
     * are scalars), not from the caller: a body that declares them [1] (paddle2onnx's Loop
     * bodies do; onnxruntime runs them) gets the one element with its declared shape */
    bool body = p->model && p->graph != p->model->graph;
    for (size_t i = 0; i < n_inputs; i++) {
        slot *s = &p->slots[p->inputs[i]];
        oq_rt_tensor one;
        const oq_rt_tensor *t = &inputs[i];
        const oq_rt_tensor *c = &s->compiled;
        if (body && t->dtype == c->dtype && t->rank <= 1 && c->rank != OQ_RT_UNKNOWN_RANK && c->rank <= 1 &&
            t->rank != c->rank && oq_rt_tensor_numel(t) == 1 && (c->rank == 0 || c->dims[0] == 1 || c->dims[0] < 0)) {
            one = *t;
            one.rank = c->rank;
            if (c->rank)
                one.dims[0] = 1;
            t = &one;
        }
        char a[160], b[160];
        bool ok = t->dtype == c->dtype && t->rank <= OQ_RT_MAX_RANK;
        if (ok && c->rank != OQ_RT_UNKNOWN_RANK) {
            ok = t->rank == c->rank;
            for (size_t j = 0; ok && j < t->rank; j++)
                if (c->dims[j] >= 0 && c->dims[j] != t->dims[j])
                    ok = false;
        }
        if (!ok) {
            /* symbolic dims by name, as dump shows them: float32[N,3,24,24] */
            oq_rt_tensor_describe(c, b, sizeof b);
            if (c->rank != OQ_RT_UNKNOWN_RANK) {
                size_t o = (size_t)snprintf(b, sizeof b, "%s[", oq_dtype_name(c->dtype));
                for (size_t j = 0; j < c->rank && o < sizeof b; j++) {
                    const char *sym = c->dims[j] < 0 ? oq_plan_input_dim_name(p, i, j) : NULL;
                    if (c->dims[j] >= 0)
                        o += (size_t)snprintf(b + o, sizeof b - o, j ? ",%lld" : "%lld", (long long)c->dims[j]);
                    else
                        o += (size_t)snprintf(b + o, sizeof b - o, "%s%s", j ? "," : "", sym ? sym : "?");
                }
                if (o < sizeof b)
                    snprintf(b + o, sizeof b - o, "]");
            }
            return oq_diag_error(d, OQ_ERR_USAGE, "input \"%s\": got %s, the model expects %s",
                                 s->value->name, oq_rt_tensor_describe(t, a, sizeof a), b);
        }
        int64_t nb = oq_plan_tensor_bytes(t);
        if (nb < 0 || (nb > 0 && !t->data))
            return oq_diag_error(d, OQ_ERR_USAGE, "input \"%s\": bad dims or no data",
                                 s->value->name);
        s->t = *t;
        s->t.nbytes = nb;
        s->t.owned = false;
    }
    return OQ_OK;
}

static oq_status run_plan(oq_plan *p, const oq_rt_tensor *inputs, size_t n_inputs,
                         const oq_rt_tensor *const *outer, oq_rt_tensor *outputs,
                         size_t n_outputs, oq_diag *d);

oq_status oq_plan_run(oq_plan *p, const oq_rt_tensor *inputs, size_t n_inputs,
                      oq_rt_tensor *outputs, size_t n_outputs, oq_diag *d)
{
    p->stop = false;
    oq_status st = run_plan(p, inputs, n_inputs, NULL, outputs, n_outputs, d);
    p->stop = false;
    if (p->prof_ns)
        p->prof_runs++;
    return st;
}

void oq_plan_stop(oq_plan *p) { p->stop = true; }

oq_status oq_plan_set_profile(oq_plan *p, bool on)
{
    free(p->prof_ns);
    p->prof_ns = NULL;
    p->prof_runs = 0;
    if (on && !(p->prof_ns = calloc(p->n_steps + 1, sizeof *p->prof_ns)))
        return OQ_ERR_NOMEM;
    return OQ_OK;
}

static int cmp_profile(const void *a, const void *b)
{
    double x = ((const oq_profile_entry *)a)->ms, y = ((const oq_profile_entry *)b)->ms;
    return x > y ? -1 : x < y;
}

size_t oq_plan_profile(const oq_plan *p, oq_profile_entry *out, size_t max, int64_t *runs)
{
    if (runs)
        *runs = p->prof_runs;
    if (!p->prof_ns)
        return 0;
    oq_profile_entry *all = calloc(p->n_steps + 1, sizeof *all);
    if (!all)
        return 0;
    size_t n = 0;
    for (size_t si = 0; si < p->n_steps; si++) {
        const oq_kernel *kr = p->steps[si].k.kernel;
        const char *op = kr ? kr->op_type : p->steps[si].node->op_type;
        size_t j = 0;
        while (j < n && strcmp(all[j].op_type, op) != 0)
            j++;
        if (j == n)
            all[n++].op_type = op;
        all[j].ms += p->prof_ns[si] / 1e6;
        all[j].nodes++;
    }
    qsort(all, n, sizeof *all, cmp_profile);
    for (size_t i = 0; i < n && i < max; i++)
        out[i] = all[i];
    free(all);
    return n;
}

oq_status oq_k_subplan_run(oq_kctx *k, oq_plan *sp, const oq_rt_tensor *inputs, size_t n_inputs,
                           oq_rt_tensor *outputs, size_t n_outputs)
{
    if (k->plan) { /* the enclosing plan's observers see the body's tensors too */
        sp->on_tensor = k->plan->on_tensor;
        sp->on_input = k->plan->on_input;
        sp->user = k->plan->user;
    }
    return run_plan(sp, inputs, n_inputs, k->implicit, outputs, n_outputs, k->diag);
}

/* Call a kernel entry (infer or run) with the plan's scratch buffer lent to it; the
 * kernel may grow it, and the plan keeps whatever it ends up with. */
static oq_status with_scratch(oq_plan *p, step *s, oq_kernel_run_fn fn)
{
    s->k.scratch = p->scratch;
    s->k.scratch_size = p->scratch_size;
    s->k.wide = p->wide;
    s->k.wide_size = p->wide_size;
    oq_status st = fn(&s->k, s->in, s->n_in, s->out, s->n_out);
    p->scratch = s->k.scratch;
    p->scratch_size = s->k.scratch_size;
    p->wide = s->k.wide;
    p->wide_size = s->k.wide_size;
    s->k.scratch = NULL;
    s->k.scratch_size = 0;
    s->k.wide = NULL;
    s->k.wide_size = 0;
    return st;
}
/* The outputs of the nodes folded at compile time, to the observer, once per run. */
static void observe_folded(oq_plan *p)
{
    if (!p->on_tensor)
        return;
    for (size_t i = 0; i < p->n_folded; i++) {
        const folded_out *f = &p->folded[i];
        p->on_tensor(f->node, f->out_index, &p->slots[f->slot].t, p->user);
    }
}

static oq_status run_plan(oq_plan *p, const oq_rt_tensor *inputs, size_t n_inputs,
                         const oq_rt_tensor *const *outer, oq_rt_tensor *outputs,
                         size_t n_outputs, oq_diag *d)
{
    oq_status st;
    /* outer-scope values: taken from the enclosing kernel's implicit inputs */
    for (size_t o = 0; o < p->n_outer; o++) {
        slot *os = &p->slots[p->outer[o]];
        if (!outer)
            return oq_diag_error(d, OQ_ERR_INTERNAL, "subplan run without outer values");
        os->t = *outer[p->outer_src[o]];
        os->t.owned = false;
    }
    for (size_t i = 0; i < n_outputs; i++)
        memset(&outputs[i], 0, sizeof outputs[i]);
    st = bind_inputs(p, inputs, n_inputs, d);
    if (st != OQ_OK)
        return st;
    if (outer && p->on_input) /* a body's inputs: Loop/Scan iteration values */
        for (size_t i = 0; i < p->n_inputs; i++)
            p->on_input(p->slots[p->inputs[i]].value, &p->slots[p->inputs[i]].t, p->user);
    p->total_bytes = 0;
    observe_folded(p);
    for (size_t si = 0; si < p->n_steps; si++) {
        step *s = &p->steps[si];
        const oq_kernel *kr = s->k.kernel;
        for (size_t i = 0; i < s->n_in; i++)
            s->in[i] = s->in_slots[i] == NO_SLOT ? NULL : &p->slots[s->in_slots[i]].t;
        for (size_t i = 0; i < s->n_imp; i++)
            s->imp[i] = &p->slots[s->imp_slots[i]].t;
        for (size_t o = 0; o < s->n_out; o++) {
            memset(&s->out[o], 0, sizeof s->out[o]);
            s->out[o].dtype = s->out_slots[o] != NO_SLOT
                                  ? p->slots[s->out_slots[o]].compiled.dtype
                                  : OQ_DTYPE_UNDEFINED;
        }
        s->k.diag = d;
        s->k.compile_time = false;
        s->k.deferred = false;
        st = with_scratch(p, s, kr->infer);
        if (st != OQ_OK)
            goto fail;
        for (size_t o = 0; o < s->n_out; o++) {
            size_t sl = s->out_slots[o];
            oq_rt_tensor *t = &s->out[o];
            if (sl != NO_SLOT && t->dtype != p->slots[sl].compiled.dtype) {
                st = oq_plan_node_error(p, d, s->node, OQ_ERR_INTERNAL,
                                "output %zu dtype changed between compile and run", o);
                goto fail;
            }
            if (sl == NO_SLOT && t->dtype == OQ_DTYPE_UNDEFINED)
                t->dtype = OQ_DTYPE_UINT8;
            slot tmp;
            slot *os = sl != NO_SLOT ? &p->slots[sl] : &tmp;
            memset(&tmp, 0, sizeof tmp);
            tmp.kind = SLOT_NODE;
            tmp.buf = NO_SLOT;
            tmp.prev_buf = NO_SLOT;
            st = acquire(p, os, t);
            if (st != OQ_OK) {
                st = oq_plan_node_error(p, d, s->node, st, "cannot allocate output %zu", o);
                goto fail;
            }
            s->tmp_buf[o] = tmp.buf; /* discarded output: freed right after the run */
        }
        const oq_k_post *post = s->group ? oq_plan_group_begin(p, si) : NULL;
        s->k.post = post;
        s->k.post_done = false;
        struct timespec t0;
        if (p->prof_ns)
            clock_gettime(CLOCK_MONOTONIC, &t0);
        st = with_scratch(p, s, kr->run);
        if (p->prof_ns) {
            struct timespec t1;
            clock_gettime(CLOCK_MONOTONIC, &t1);
            p->prof_ns[si] += (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
        }
        s->k.post = NULL;
        if (st != OQ_OK)
            goto fail;
        for (size_t o = 0; o < s->n_out; o++) {
            size_t sl = s->out_slots[o];
            if (sl == NO_SLOT) {
                if (s->tmp_buf[o] != NO_SLOT)
                    p->bufs[s->tmp_buf[o]].in_use = false;
                continue;
            }
            p->slots[sl].t = s->out[o];
            if (p->on_tensor)
                p->on_tensor(s->node, o, &p->slots[sl].t, p->user);
        }
        if (p->stop) { /* oq_plan_stop from the observer: the rest of the run is not wanted */
            p->stop = false;
            st = OQ_OK;
            goto fail;
        }
        for (size_t i = 0; i < s->n_in; i++) {
            size_t sl = s->in_slots[i];
            if (sl != NO_SLOT && p->slots[sl].last_use == si && !p->slots[sl].is_output)
                release_slot(p, &p->slots[sl]);
        }
        for (size_t i = 0; i < s->n_imp; i++) {
            size_t sl = s->imp_slots[i];
            if (p->slots[sl].last_use == si && !p->slots[sl].is_output)
                release_slot(p, &p->slots[sl]);
        }
        for (size_t o = 0; o < s->n_out; o++) {
            size_t sl = s->out_slots[o];
            if (sl != NO_SLOT && p->slots[sl].last_use == NO_SLOT && !p->slots[sl].is_output)
                release_slot(p, &p->slots[sl]);
        }
        if (post) {
            /* the chain ran over this step's output (in the kernel or in one pass):
               skip its steps */
            size_t last, fin;
            oq_plan_group_end(p, si, s->k.post_done, &last, &fin);
            si = last;
            if (p->slots[fin].last_use == NO_SLOT && !p->slots[fin].is_output)
                release_slot(p, &p->slots[fin]);
        }
    }
    for (size_t i = 0; i < n_outputs; i++) {
        const oq_rt_tensor *t = &p->slots[p->outputs[i]].t;
        st = oq_rt_tensor_alloc(&outputs[i], t->dtype, t->dims, t->rank);
        if (st != OQ_OK) {
            st = oq_diag_error(d, st, "cannot allocate output \"%s\"",
                               p->slots[p->outputs[i]].value->name);
            goto fail;
        }
        if (t->nbytes)
            memcpy(outputs[i].data, t->data, (size_t)t->nbytes);
    }
    st = OQ_OK;
    goto done;
fail:
    for (size_t i = 0; i < n_outputs; i++)
        oq_rt_tensor_release(&outputs[i]);
done:
    for (size_t i = 0; i < p->n_slots; i++)
        release_slot(p, &p->slots[i]);
    for (size_t b = 0; b < p->n_bufs; b++)
        p->bufs[b].in_use = false;
    return st;
}
