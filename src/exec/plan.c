/* Compile a plan: order, dtypes, shapes, one kernel per node, lifetimes, subplans;
 * and the plan queries. Running is in run.c. */
#include "exec/plan-impl.h"
#include "exec/qgroup.h"
#include "ir/grow.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

oq_plan_options oq_plan_options_default(void)
{
    oq_plan_options o;
    memset(&o, 0, sizeof o);
    return o;
}

/* ------------------------------------------------------------------ helpers ------ */

oq_status oq_plan_node_error(const oq_plan *p, oq_diag *d, const oq_node *n, oq_status code,
                             const char *fmt, ...)
{
    char msg[1024], lb[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return oq_diag_add(d, OQ_SEV_ERROR, code, p->file,
                       n ? oq_node_label(n, lb, sizeof lb) : NULL, n ? n->op_type : NULL, "%s",
                       msg);
}

static oq_status set_from_tensor(oq_rt_tensor *rt, oq_tensor *t, oq_diag *d)
{
    if (!t->has_dtype || t->dtype == OQ_DTYPE_STRING)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "tensor \"%s\": %s tensors are not supported",
                             t->name ? t->name : "", oq_dtype_name(t->dtype));
    if (t->rank > OQ_RT_MAX_RANK)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "tensor \"%s\": rank %zu exceeds %d",
                             t->name ? t->name : "", t->rank, OQ_RT_MAX_RANK);
    const void *data = oq_tensor_data(t, d);
    if (!data && oq_tensor_numel(t) != 0)
        return OQ_ERR_INVALID;
    return oq_rt_tensor_borrow(rt, t->dtype, t->dims, t->rank, (void *)data);
}

/* Constant node: the tensor of its value* attribute. */
static oq_status constant_value(oq_plan *p, oq_node *n, slot *s, oq_diag *d)
{
    for (size_t i = 0; i < n->n_attrs; i++) {
        oq_attr *a = n->attrs[i];
        const char *nm = a->name ? a->name : "";
        int64_t one = 1;
        if (strcmp(nm, "value") == 0 && a->t)
            return set_from_tensor(&s->t, a->t, d);
        if (strcmp(nm, "value_float") == 0 || strcmp(nm, "value_int") == 0) {
            bool f = nm[6] == 'f';
            s->const_mem = malloc(8);
            if (!s->const_mem)
                return OQ_ERR_NOMEM;
            if (f)
                *(float *)s->const_mem = a->f;
            else
                *(int64_t *)s->const_mem = a->i;
            return oq_rt_tensor_borrow(&s->t, f ? OQ_DTYPE_FLOAT : OQ_DTYPE_INT64, &one, 0,
                                       s->const_mem);
        }
        if (strcmp(nm, "value_floats") == 0 || strcmp(nm, "value_ints") == 0) {
            bool f = nm[6] == 'f';
            int64_t cnt = (int64_t)(f ? a->n_floats : a->n_ints);
            s->const_mem = malloc((size_t)(cnt ? cnt : 1) * 8);
            if (!s->const_mem)
                return OQ_ERR_NOMEM;
            if (cnt)
                memcpy(s->const_mem, f ? (void *)a->floats : (void *)a->ints,
                       (size_t)cnt * (f ? 4 : 8));
            return oq_rt_tensor_borrow(&s->t, f ? OQ_DTYPE_FLOAT : OQ_DTYPE_INT64, &cnt, 1,
                                       s->const_mem);
        }
    }
    return oq_plan_node_error(p, d, n, OQ_ERR_UNSUPPORTED,
                      "Constant without a supported value attribute (value, value_float(s), "
                      "value_int(s))");
}

void oq_plan_tensor_from_type(oq_rt_tensor *rt, const oq_type *ty)
{
    memset(rt, 0, sizeof(*rt));
    rt->rank = OQ_RT_UNKNOWN_RANK;
    if (!ty || ty->kind != OQ_TYPE_TENSOR)
        return;
    rt->dtype = ty->has_elem_type ? ty->elem_type : 0;
    if (ty->shape && ty->shape->rank <= OQ_RT_MAX_RANK) {
        rt->rank = ty->shape->rank;
        for (size_t j = 0; j < rt->rank; j++) {
            const oq_dim *dm = &ty->shape->dims[j];
            rt->dims[j] = dm->kind == OQ_DIM_VALUE ? dm->value : -1;
        }
    }
}

int64_t oq_plan_tensor_bytes(const oq_rt_tensor *t)
{
    int64_t n = oq_rt_tensor_numel(t);
    return n < 0 ? -1 : oq_dtype_nbytes(t->dtype, n);
}

/* ------------------------------------------------------------------ compile ------ */

static bool defined_within(const oq_value *v, const oq_graph *g)
{
    for (const oq_graph *s = v->graph; s; s = s->parent)
        if (s == g)
            return true;
    return false;
}

static int add_unique(oq_value ***arr, size_t *n, size_t *cap, oq_value *v)
{
    for (size_t i = 0; i < *n; i++)
        if ((*arr)[i] == v)
            return 0;
    oq_value **na = oq_grow(*arr, *n, cap, sizeof(*na), 8);
    if (!na)
        return -1;
    *arr = na;
    (*arr)[(*n)++] = v;
    return 0;
}

/* values read inside sub (at any depth) that are defined outside it */
static int collect_refs(const oq_graph *sub, const oq_graph *g, oq_value ***arr, size_t *n,
                        size_t *cap)
{
    for (oq_node *nd = g->first; nd; nd = nd->next) {
        for (size_t i = 0; i < nd->n_inputs; i++) {
            oq_value *v = nd->inputs[i];
            if (v && v->name && *v->name && !defined_within(v, sub) && add_unique(arr, n, cap, v))
                return -1;
        }
        oq_graph *subs[16];
        size_t ns = oq_node_subgraphs(nd, subs, 16);
        for (size_t j = 0; j < ns && j < 16; j++)
            if (collect_refs(sub, subs[j], arr, n, cap))
                return -1;
    }
    for (size_t i = 0; i < g->n_outputs; i++) {
        oq_value *v = g->outputs[i]->value;
        if (v && !defined_within(v, sub) && add_unique(arr, n, cap, v))
            return -1;
    }
    return 0;
}

/* the implicit inputs of node n (malloc'ed array, may be NULL when none) */
static int node_implicit(const oq_node *n, oq_value ***arr, size_t *count)
{
    oq_graph *subs[16];
    size_t ns = oq_node_subgraphs(n, subs, 16), cap = 0;
    *arr = NULL;
    *count = 0;
    for (size_t j = 0; j < ns && j < 16; j++)
        if (collect_refs(subs[j], subs[j], arr, count, &cap))
            return -1;
    return 0;
}

/* min-heap of node indices */
static void heap_push(size_t *h, size_t *n, size_t v)
{
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static size_t heap_pop(size_t *h, size_t *n)
{
    size_t top = h[0], v = h[--(*n)], i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= v)
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
    return top;
}

/* Stable topological order (Kahn, taking ready nodes in list order). A node depends on
 * the producers of its inputs and of its implicit inputs (imp[i], n_imp[i]). */
static oq_status order_nodes(oq_plan *p, oq_value ***imp, size_t *n_imp, oq_node ***order,
                             size_t *count, oq_diag *d)
{
    oq_graph *g = p->graph;
    size_t n = g->n_nodes, k = 0, n_edges = 0;
    oq_node **out = calloc(n + 1, sizeof(*out));
    size_t *indeg = calloc(n + 1, sizeof(*indeg));
    oq_node **all = calloc(n + 1, sizeof(*all));
    size_t *first = calloc(n + 2, sizeof(size_t)), *edges = NULL, *fill = NULL, *heap = NULL, *rank = NULL;
    bool *konst = NULL;
    size_t n_heap = 0;
    oq_status st = OQ_OK;
    if (!out || !indeg || !all || !first) {
        st = OQ_ERR_NOMEM;
        goto done;
    }
    size_t i = 0;
    for (oq_node *nd = g->first; nd && i < n; nd = nd->next, i++) {
        all[i] = nd;
        nd->priv = (void *)(uintptr_t)i; /* reset below */
    }
    n = i;
    /* producer index of dependency j of node i, or n when not a node of g */
#define DEP_COUNT(i) (all[i]->n_inputs + n_imp[i])
#define DEP(i, j) ((j) < all[i]->n_inputs ? all[i]->inputs[j] : imp[i][(j) - all[i]->n_inputs])
#define PRODUCER(v)                                                                          \
    (((v) && (v)->kind == OQ_VALUE_NODE && (v)->producer && (v)->producer->graph == g &&     \
      (size_t)(uintptr_t)(v)->producer->priv < n &&                                          \
      all[(size_t)(uintptr_t)(v)->producer->priv] == (v)->producer)                         \
         ? (size_t)(uintptr_t)(v)->producer->priv                                            \
         : n)
    for (i = 0; i < n; i++)
        for (size_t j = 0; j < DEP_COUNT(i); j++)
            if (PRODUCER(DEP(i, j)) < n) {
                first[PRODUCER(DEP(i, j)) + 1]++;
                indeg[i]++;
                n_edges++;
            }
    for (i = 0; i < n; i++)
        first[i + 1] += first[i];
    edges = malloc((n_edges + 1) * sizeof(size_t));
    fill = calloc(n + 1, sizeof(size_t));
    if (!edges || !fill) {
        st = OQ_ERR_NOMEM;
        goto done;
    }
    for (i = 0; i < n; i++)
        for (size_t j = 0; j < DEP_COUNT(i); j++) {
            size_t pi = PRODUCER(DEP(i, j));
            if (pi < n)
                edges[first[pi] + fill[pi]++] = i;
        }
#undef DEP_COUNT
#undef DEP
#undef PRODUCER
    /* Stable order: among the ready nodes the one that comes first in the graph runs
     * next, so a graph already in a valid order runs in that order (exporters write a
     * memory-friendly order; a FIFO would run every ready node before the nodes they
     * unlock and keep all their outputs alive at once). A node that reads only
     * initializers, directly or through such nodes (a weight's DequantizeLinear: QDQ
     * writers put them first), ranks with its first consumer: in a plan that does not
     * fold them (no_fold, or over the fold budget) each weight is made when it is needed
     * and freed after, instead of every weight held from the start (and a run stopped
     * early never makes the ones after). Heap entries: rank * (n + 1) + index. */
    heap = malloc((n + 1) * sizeof(size_t));
    rank = malloc((n + 1) * sizeof(size_t));
    konst = calloc(n + 1, sizeof(bool));
    if (!heap || !rank || !konst) {
        st = OQ_ERR_NOMEM;
        goto done;
    }
    for (i = 0; i < n; i++) {
        oq_node *nd = all[i];
        bool c = nd->n_inputs > 0 && n_imp[i] == 0;
        for (size_t j = 0; c && j < nd->n_inputs; j++) {
            const oq_value *v = nd->inputs[j];
            if (!v || !v->name || !*v->name)
                continue; /* an omitted optional input */
            size_t pi = v->kind == OQ_VALUE_NODE && v->producer && v->producer->graph == g ?
                            (size_t)(uintptr_t)v->producer->priv : n;
            c = v->kind == OQ_VALUE_INITIALIZER || (pi < i && all[pi] == v->producer && konst[pi]);
        }
        konst[i] = c;
        rank[i] = i;
    }
    for (i = n; i-- > 0;)
        if (konst[i] && first[i] < first[i + 1]) {
            rank[i] = n;
            for (size_t e = first[i]; e < first[i + 1]; e++)
                if (rank[edges[e]] < rank[i])
                    rank[i] = rank[edges[e]];
        }
    for (i = 0; i < n; i++)
        if (!indeg[i])
            heap_push(heap, &n_heap, rank[i] * (n + 1) + i);
    while (n_heap) {
        size_t pi = heap_pop(heap, &n_heap) % (n + 1);
        out[k++] = all[pi];
        for (size_t e = first[pi]; e < first[pi + 1]; e++)
            if (--indeg[edges[e]] == 0)
                heap_push(heap, &n_heap, rank[edges[e]] * (n + 1) + edges[e]);
    }
    if (k != n) {
        for (i = 0; i < n; i++)
            if (indeg[i]) {
                st = oq_plan_node_error(p, d, all[i], OQ_ERR_INVALID,
                                "graph has a cycle or an input that is never produced");
                break;
            }
    }
done:
    for (i = 0; all && i < n; i++)
        all[i]->priv = NULL;
    free(indeg);
    free(all);
    free(first);
    free(edges);
    free(fill);
    free(heap);
    free(rank);
    free(konst);
    if (st != OQ_OK) {
        free(out);
        return st;
    }
    *order = out;
    *count = k;
    return OQ_OK;
}

/* onnxruntime's float arithmetic for the float ops of a QDQ model (kernel.h OQ_K_ORT_*).
 * With graph optimizations on, onnxruntime's NchwcTransformer (nchwc_transformer.cc
 * TransformConv) runs a Conv whose weight is a 4-D float initializer and whose bias is
 * absent or a float initializer of one value per output channel with its NCHWc kernels;
 * for a depthwise Conv (weight [C, 1, kh, kw], group C > 1) onnxruntime 1.30 needs C to
 * be a multiple of 4, whatever the CPU's block (oq_k_ort_nchwc_block, which must exist): it
 * pads the channels up to whole blocks (measured with AVX-512 and under qemu Haswell: 4,
 * 12, 20, 24, 88 channels run NCHWc, 2, 5, 6, 30 do not). (A weight from a Constant node, which
 * onnxruntime also folds into an initializer, is not recognised: onnxq's quantized models
 * keep weights as initializers.) A float Conv with one group runs MLAS' NCHWc kernels too
 * (ort_conv_nchwc). Sigmoid is MLAS' logistic approximation.
 * Only these are emulated; every other float op keeps onnxq's own rounding
 * (docs/run.md). */
static const oq_tensor *float_initializer(const oq_value *v, size_t rank)
{
    if (!v || v->kind != OQ_VALUE_INITIALIZER || v->is_graph_input || !v->initializer)
        return NULL;
    const oq_tensor *t = v->initializer;
    return t->dtype == OQ_DTYPE_FLOAT && t->rank == rank ? t : NULL;
}

/* A Conv onnxruntime's NchwcTransformer takes as a float NCHWc convolution: a 4-D float
 * initializer weight and a bias absent or a float initializer per output channel; the
 * weight, or NULL. */
static const oq_tensor *nchwc_float_conv_weight(const oq_node *n, int block)
{
    if (block <= 0 || !n || strcmp(n->op_type, "Conv") != 0 || !oq_domain_is_default(n->domain) ||
        n->n_inputs < 2 || n->n_outputs < 1 || !n->inputs[0])
        return NULL;
    const oq_tensor *w = float_initializer(n->inputs[1], 4);
    if (!w)
        return NULL;
    if (n->n_inputs > 2 && n->inputs[2]) {
        const oq_tensor *b = float_initializer(n->inputs[2], 1);
        if (!b || b->dims[0] != w->dims[0])
            return NULL;
    }
    return w;
}

static bool ort_dw_nchwc(const oq_node *n, int block)
{
    const oq_tensor *w = nchwc_float_conv_weight(n, block);
    int64_t group = w ? oq_node_attr_int(n, "group", 1) : 0;
    return w && group > 1 && w->dims[1] == 1 && w->dims[0] == group && w->dims[0] % 4 == 0;
}

/* A float Conv with one group that onnxruntime rewrites to NCHWc (fewer input channels than
 * a block or a multiple of it, output channels a multiple of 4): its sums are emulated only
 * for the AVX2 block of 8, where they were measured (conv.c conv_ort_nchwc). */
static bool ort_conv_nchwc(const oq_node *n, int block)
{
    const oq_tensor *w = block == 8 ? nchwc_float_conv_weight(n, block) : NULL;
    return w && oq_node_attr_int(n, "group", 1) == 1 && w->dims[0] % 4 == 0 &&
           (w->dims[1] < block || w->dims[1] % block == 0);
}

/* A GlobalAveragePool whose input onnxruntime has in NCHWc layout: a graph input, or a
 * float Conv it rewrites to NCHWc (constant 4-D weight; one group: fewer input channels
 * than a block or a multiple of it; depthwise; otherwise whole blocks per group), possibly
 * through the activations it keeps in NCHWc. Measured with onnxruntime 1.30: a pool after
 * a graph input or such a Conv (+ HardSwish) runs NCHWc, after a DequantizeLinear or a
 * Relu of a graph input it does not. (The channel count, a multiple of the block, is
 * checked at run time: pool.c.) */
static bool ort_gap_nchwc_input(const oq_node *n, int block)
{
    static const char *const acts[] = {"Relu", "Clip", "Sigmoid", "Tanh", "HardSigmoid",
                                       "HardSwish", "LeakyRelu"};
    if (block <= 0 || n->n_inputs < 1)
        return false;
    const oq_value *v = n->inputs[0];
    for (int depth = 0; v && depth < 4; depth++) {
        if (v->kind == OQ_VALUE_INPUT)
            return true;
        if (v->kind != OQ_VALUE_NODE || !v->producer || !oq_domain_is_default(v->producer->domain))
            return false;
        const oq_node *p = v->producer;
        if (strcmp(p->op_type, "Conv") == 0) {
            const oq_tensor *w = p->n_inputs > 1 ? float_initializer(p->inputs[1], 4) : NULL;
            int64_t group = oq_node_attr_int(p, "group", 1);
            if (!w || group < 1 || w->dims[0] % group)
                return false;
            int64_t cin = w->dims[1], mg = w->dims[0] / group;
            if (group == 1)
                return cin < block || cin % block == 0;
            return (cin == 1 && mg == 1) || (cin % block == 0 && mg % block == 0);
        }
        bool act = false;
        for (size_t i = 0; i < sizeof acts / sizeof *acts; i++)
            act |= strcmp(p->op_type, acts[i]) == 0;
        if (!act || p->n_inputs < 1)
            return false;
        v = p->inputs[0];
    }
    return false;
}

uint32_t oq_k_ort_hints(oq_arith arith, const oq_node *n)
{
    if (arith == OQ_ARITH_REFERENCE || !n)
        return 0;
    int block = oq_k_ort_nchwc_block();
    if (ort_dw_nchwc(n, block))
        return OQ_K_ORT_DW_NCHWC;
    if (ort_conv_nchwc(n, block))
        return OQ_K_ORT_CONV_NCHWC;
    /* any other grouped float Conv runs onnxruntime's Conv kernel; conv.c emulates its
       depthwise sums (MLAS' one-row SGEMM, x86 with AVX) */
    if (oq_k_ort_sgemm_m1() && strcmp(n->op_type, "Conv") == 0 && oq_domain_is_default(n->domain) &&
        oq_node_attr_int(n, "group", 1) > 1)
        return OQ_K_ORT_DW_M1;
    /* GlobalAveragePool runs MlasPool (with and without graph optimizations) or, on an
       NCHWc input, MlasNchwcPool (pool.c checks the channel count) */
    if (oq_k_ort_sgemm_m1() && strcmp(n->op_type, "GlobalAveragePool") == 0 &&
        oq_domain_is_default(n->domain))
        return OQ_K_ORT_GAP | (ort_gap_nchwc_input(n, block) ? OQ_K_ORT_GAP_NCHWC : 0);
    /* Sigmoid runs MlasComputeLogistic, with and without graph optimizations (also inside
       the QuickGelu onnxruntime fuses from x * Sigmoid(x)); its FMA kernels wherever the
       NCHWc ones exist (AVX2 and FMA) */
    if (block > 0 && strcmp(n->op_type, "Sigmoid") == 0 && oq_domain_is_default(n->domain))
        return OQ_K_ORT_LOGISTIC;
    return 0;
}

static oq_status compile_step(oq_plan *p, step *s, size_t si, size_t *slot_of, oq_value **imp,
                              size_t n_imp, oq_diag *d)
{
    oq_node *n = s->node;
    const char *dom = oq_domain_is_default(n->domain) ? "ai.onnx" : n->domain;
    int64_t opset = oq_node_opset(n);
    s->k.node = n;
    s->k.plan = p;
    s->k.opset = opset;
    s->k.pool = p->pool;
    s->k.diag = d;
    s->k.file = p->file;
    s->k.ort = oq_k_ort_hints(p->arith, n);
    s->n_in = n->n_inputs;
    s->n_out = n->n_outputs;
    s->in_slots = calloc(s->n_in + 1, sizeof(size_t));
    s->out_slots = calloc(s->n_out + 1, sizeof(size_t));
    s->in = calloc(s->n_in + OQ_K_IN_PAD, sizeof(*s->in)); /* NULL past n_in */
    s->out = calloc(s->n_out + 1, sizeof(*s->out));
    s->tmp_buf = calloc(s->n_out + 1, sizeof(size_t));
    if (!s->in_slots || !s->out_slots || !s->in || !s->out || !s->tmp_buf)
        return OQ_ERR_NOMEM;
    for (size_t i = 0; i < s->n_in; i++) {
        oq_value *v = n->inputs[i];
        s->in_slots[i] = NO_SLOT;
        if (!v || !v->name || !*v->name)
            continue;
        size_t sl = v->id < p->model->next_id ? slot_of[v->id] : NO_SLOT;
        if (sl == NO_SLOT)
            return oq_plan_node_error(p, d, n, OQ_ERR_UNSUPPORTED,
                              "input \"%s\" is not produced in this graph (outer-scope values "
                              "are not supported)", v->name);
        s->in_slots[i] = sl;
        p->slots[sl].last_use = si;
        s->in[i] = &p->slots[sl].compiled;
        if (p->slots[sl].compiled.dtype == OQ_DTYPE_UNDEFINED)
            return oq_plan_node_error(p, d, n, OQ_ERR_UNSUPPORTED, "input \"%s\" has no known dtype",
                              v->name);
    }
    s->n_imp = n_imp;
    s->imp_vals = imp;
    s->imp_slots = calloc(n_imp + 1, sizeof(size_t));
    s->imp = calloc(n_imp + 1, sizeof(*s->imp));
    if (!s->imp_slots || !s->imp)
        return OQ_ERR_NOMEM;
    for (size_t i = 0; i < n_imp; i++) {
        oq_value *v = imp[i];
        size_t sl = v->id < p->model->next_id ? slot_of[v->id] : NO_SLOT;
        if (sl == NO_SLOT)
            return oq_plan_node_error(p, d, n, OQ_ERR_INVALID,
                              "subgraph reads \"%s\", which is not defined before the node",
                              v->name);
        s->imp_slots[i] = sl;
        p->slots[sl].last_use = si;
        s->imp[i] = &p->slots[sl].compiled;
    }
    s->k.n_implicit = n_imp;
    s->k.implicit_values = (const oq_value *const *)imp;
    s->k.implicit = s->imp;
    oq_kernel_miss why;
    const oq_kernel *kr = oq_kernel_find(&s->k, n->domain, n->op_type, opset,
                                         (const oq_rt_tensor *const *)s->in, s->n_in, &why);
    if (!kr) {
        char tb[256];
        size_t o = 0;
        tb[0] = 0;
        for (size_t i = 0; i < s->n_in && o < sizeof tb; i++)
            o += (size_t)snprintf(tb + o, sizeof tb - o, "%s%s", i ? ", " : "",
                                  s->in[i] ? oq_dtype_name(s->in[i]->dtype) : "-");
        const char *what = why == OQ_KMISS_OP      ? "operator not supported"
                           : why == OQ_KMISS_OPSET ? "operator not supported at this opset"
                                                   : "input dtypes not supported";
        return oq_plan_node_error(p, d, n, OQ_ERR_UNSUPPORTED, "%s: %s (domain %s, opset %lld, inputs %s)",
                          what, n->op_type, dom, (long long)opset, tb);
    }
    s->k.kernel = kr;
    for (int i = 0; i < kr->min_inputs; i++)
        if ((size_t)i >= s->n_in || !s->in[i])
            return oq_plan_node_error(p, d, n, OQ_ERR_INVALID, "required input %d is missing "
                              "(%s needs at least %d inputs)", i, n->op_type, kr->min_inputs);
    oq_status st = OQ_OK;
    if (kr->prepare) {
        s->k.compile_time = true;
        st = kr->prepare(&s->k, (const oq_rt_tensor *const *)s->in, s->n_in);
        if (st != OQ_OK)
            return st;
    }
    for (size_t o = 0; o < s->n_out; o++)
        memset(&s->out[o], 0, sizeof s->out[o]);
    s->k.compile_time = true;
    s->k.deferred = false;
    st = kr->infer(&s->k, (const oq_rt_tensor *const *)s->in, s->n_in, s->out, s->n_out);
    /* scratch used at compile time (prepare or infer) goes back to the plan */
    if (s->k.scratch) {
        if (s->k.scratch_size > p->scratch_size) {
            free(p->scratch);
            p->scratch = s->k.scratch;
            p->scratch_size = s->k.scratch_size;
        } else {
            free(s->k.scratch);
        }
        s->k.scratch = NULL;
        s->k.scratch_size = 0;
    }
    if (st != OQ_OK)
        return st;
    for (size_t o = 0; o < s->n_out; o++) {
        oq_value *v = n->outputs[o];
        s->out_slots[o] = NO_SLOT;
        if (!v || !v->name || !*v->name)
            continue;
        size_t sl = slot_of[v->id];
        s->out_slots[o] = sl;
        p->slots[sl].compiled = s->out[o];
        p->slots[sl].compiled.data = NULL;
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ folding ------ */

/* Bytes the folded outputs of graph g may hold: twice its initializers and Constant
 * tensors, at least 1 MiB (shape arithmetic in a graph without initializers). Called
 * before the Constant nodes have slots: they are counted from the graph. */
static int64_t fold_budget(const oq_plan *p)
{
    int64_t b = 0;
    for (size_t i = 0; i < p->n_slots; i++)
        if (p->slots[i].kind == SLOT_CONST) {
            int64_t nb = oq_plan_tensor_bytes(&p->slots[i].t);
            if (nb > 0 && b <= INT64_MAX / 4 - nb)
                b += nb;
        }
    for (const oq_node *n = p->graph->first; n; n = n->next) {
        if (strcmp(n->op_type, "Constant") != 0 || !oq_domain_is_default(n->domain))
            continue;
        for (size_t i = 0; i < n->n_attrs; i++) {
            const oq_attr *a = n->attrs[i];
            if (!a->name || strcmp(a->name, "value") != 0 || !a->t || !a->t->has_dtype)
                continue;
            int64_t nb = oq_dtype_nbytes(a->t->dtype, oq_tensor_numel(a->t));
            if (nb > 0 && b <= INT64_MAX / 4 - nb)
                b += nb;
        }
    }
    b *= 2;
    return b < ((int64_t)1 << 20) ? (int64_t)1 << 20 : b;
}

/* Can step s (compiled) be evaluated now? Every present input is a constant slot, the
 * node has inputs and no subgraph, and its op is not random. */
static bool foldable(const oq_plan *p, const step *s)
{
    const oq_node *n = s->node;
    size_t present = 0;
    if (s->n_imp)
        return false;
    oq_graph *subs[1];
    if (oq_node_subgraphs(n, subs, 1) > 0)
        return false;
    if (strncmp(n->op_type, "Random", 6) == 0 || strcmp(n->op_type, "Bernoulli") == 0 ||
        strcmp(n->op_type, "Multinomial") == 0 || strcmp(n->op_type, "Dropout") == 0)
        return false;
    for (size_t i = 0; i < s->n_in; i++) {
        if (s->in_slots[i] == NO_SLOT)
            continue;
        if (p->slots[s->in_slots[i]].kind != SLOT_CONST)
            return false;
        present++;
    }
    return present > 0;
}

static void step_free(step *s)
{
    if (s->k.kernel && s->k.kernel->release && s->k.state)
        s->k.kernel->release(s->k.state);
    free(s->in_slots);
    free(s->out_slots);
    free(s->in);
    free(s->out);
    free(s->tmp_buf);
    free(s->imp_vals);
    free(s->imp_slots);
    free(s->imp);
    free(s->k.scratch);
    free(s->k.wide);
    oq_plan_group_free(s->group);
    memset(s, 0, sizeof *s);
}

/* Evaluate the last compiled step now when its inputs are all constant: run its
 * kernel (infer and run, exactly as a run would) on the constant inputs, keep the
 * outputs in the plan as constant slots, and drop the step. A step that cannot be
 * folded (not constant, over the budget, or its kernel fails: the run reports that)
 * stays. Fails only on out-of-memory. */
static oq_status fold_step(oq_plan *p, oq_diag *d)
{
    step *s = &p->steps[p->n_steps - 1];
    if (!p->fold || !foldable(p, s))
        return OQ_OK;
    const oq_kernel *kr = s->k.kernel;
    oq_diag quiet;
    oq_diag_init(&quiet);
    oq_rt_tensor *res = calloc(s->n_out + 1, sizeof(*res));
    oq_status st = res ? OQ_OK : OQ_ERR_NOMEM;
    int64_t bytes = 0;
    bool ok = st == OQ_OK;
    for (size_t i = 0; ok && i < s->n_in; i++)
        s->in[i] = s->in_slots[i] == NO_SLOT ? NULL : &p->slots[s->in_slots[i]].t;
    for (size_t o = 0; ok && o < s->n_out; o++) {
        memset(&s->out[o], 0, sizeof s->out[o]);
        s->out[o].dtype = s->out_slots[o] != NO_SLOT ? p->slots[s->out_slots[o]].compiled.dtype
                                                     : OQ_DTYPE_UNDEFINED;
    }
    s->k.diag = &quiet;
    s->k.compile_time = false;
    s->k.deferred = false;
    if (ok) {
        s->k.scratch = p->scratch;
        s->k.scratch_size = p->scratch_size;
        ok = kr->infer(&s->k, s->in, s->n_in, s->out, s->n_out) == OQ_OK;
    }
    for (size_t o = 0; ok && o < s->n_out; o++) {
        if (s->out[o].dtype == OQ_DTYPE_UNDEFINED)
            s->out[o].dtype = OQ_DTYPE_UINT8; /* omitted output the kernel did not type */
        int64_t nb = oq_plan_tensor_bytes(&s->out[o]);
        if (nb < 0 || (s->out_slots[o] != NO_SLOT &&
                       (s->out[o].dtype != p->slots[s->out_slots[o]].compiled.dtype)))
            ok = false;
        else if (s->out_slots[o] != NO_SLOT)
            bytes += nb;
    }
    if (ok && bytes > p->fold_budget - p->folded_bytes)
        ok = false;
    for (size_t o = 0; ok && o < s->n_out; o++) {
        st = oq_rt_tensor_alloc(&res[o], s->out[o].dtype, s->out[o].dims, s->out[o].rank);
        if (st != OQ_OK)
            ok = false;
        else
            s->out[o] = res[o];
    }
    if (ok)
        ok = kr->run(&s->k, s->in, s->n_in, s->out, s->n_out) == OQ_OK;
    if (res) {
        p->scratch = s->k.scratch;
        p->scratch_size = s->k.scratch_size;
        s->k.scratch = NULL;
        s->k.scratch_size = 0;
    }
    free(s->k.wide); /* a folded float16 node's widened copies */
    s->k.wide = NULL;
    s->k.wide_size = 0;
    s->k.diag = d;
    oq_diag_free(&quiet);
    if (ok && p->n_folded + s->n_out > p->cap_folded) {
        size_t nc = (p->cap_folded + s->n_out) * 2;
        folded_out *nf = realloc(p->folded, nc * sizeof(*nf));
        if (!nf) {
            st = OQ_ERR_NOMEM;
            ok = false;
        } else {
            p->folded = nf;
            p->cap_folded = nc;
        }
    }
    if (!ok) {
        for (size_t o = 0; res && o < s->n_out; o++)
            oq_rt_tensor_release(&res[o]);
        free(res);
        return st;
    }
    for (size_t o = 0; o < s->n_out; o++) {
        size_t sl = s->out_slots[o];
        if (sl == NO_SLOT) {
            oq_rt_tensor_release(&res[o]);
            continue;
        }
        slot *os = &p->slots[sl];
        os->kind = SLOT_CONST;
        os->folded = true;
        os->const_mem = res[o].data;
        os->t = res[o];
        os->t.owned = false;
        os->compiled = os->t;
        p->folded[p->n_folded].node = s->node;
        p->folded[p->n_folded].out_index = o;
        p->folded[p->n_folded].slot = sl;
        p->n_folded++;
    }
    p->folded_bytes += bytes;
    free(res);
    step_free(s);
    p->n_steps--;
    return OQ_OK;
}


/* Compile graph g. A subplan (outer_vals != NULL) shares `pool` and binds the outer
 * values at run time; input_hints give dtypes for subgraph inputs without a type. */
static oq_status compile_graph(oq_model *model, oq_graph *g, const oq_plan_options *opts,
                               oq_pool *pool, oq_value *const *outer_vals,
                               const oq_rt_tensor *const *outer_t, size_t n_outer,
                               const oq_rt_tensor *const *hints, size_t n_hints, oq_plan **out,
                               oq_diag *d)
{
    oq_plan_options opt = opts ? *opts : oq_plan_options_default();
    oq_node **order = NULL;
    size_t n_order = 0;
    size_t *slot_of = NULL;
    oq_value ***imp = NULL;
    size_t *n_imp = NULL;
    size_t n_nodes = 0;
    oq_status st = OQ_OK;
    *out = NULL;
    oq_plan *p = calloc(1, sizeof(*p));
    if (!p)
        return OQ_ERR_NOMEM;
    p->model = model;
    p->graph = g;
    p->file = model->path;
    p->threads = pool ? oq_pool_threads(pool) : opt.threads > 0 ? opt.threads : oq_cpu_count();
    p->on_tensor = opt.on_tensor;
    p->on_input = opt.on_input;
    p->user = opt.user;
    p->pool = pool ? pool : oq_pool_new(p->threads);
    p->owns_pool = !pool;
    if (!p->pool) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "cannot start %d threads", p->threads);
        goto fail;
    }
    slot_of = malloc((model->next_id + 1) * sizeof(size_t));
    size_t max_slots = g->n_inputs + g->n_initializers + n_outer;
    for (oq_node *n = g->first; n; n = n->next)
        n_nodes++;
    imp = calloc(n_nodes + 1, sizeof(*imp));
    n_imp = calloc(n_nodes + 1, sizeof(*n_imp));
    p->outer = calloc(n_outer + 1, sizeof(size_t));
    p->outer_src = calloc(n_outer + 1, sizeof(size_t));
    if (!imp || !n_imp || !p->outer || !p->outer_src) {
        st = OQ_ERR_NOMEM;
        goto fail;
    }
    for (oq_node *n = g->first; n; n = n->next)
        max_slots += n->n_outputs;
    p->slots = calloc(max_slots + 1, sizeof(slot));
    p->inputs = calloc(g->n_inputs + 1, sizeof(size_t));
    p->outputs = calloc(g->n_outputs + 1, sizeof(size_t));
    if (!slot_of || !p->slots || !p->inputs || !p->outputs) {
        st = OQ_ERR_NOMEM;
        goto fail;
    }
    for (size_t i = 0; i <= model->next_id; i++)
        slot_of[i] = NO_SLOT;
    {
        size_t ni = 0;
        for (oq_node *n = g->first; n; n = n->next, ni++)
            if (node_implicit(n, &imp[ni], &n_imp[ni])) {
                st = OQ_ERR_NOMEM;
                goto fail;
            }
    }

#define NEW_SLOT(v, kd)                                   \
    do {                                                  \
        slot *s_ = &p->slots[p->n_slots];                 \
        s_->value = (v);                                  \
        s_->kind = (kd);                                  \
        s_->last_use = NO_SLOT;                           \
        s_->buf = NO_SLOT;                                \
        s_->prev_buf = NO_SLOT;                           \
        slot_of[(v)->id] = p->n_slots++;                  \
    } while (0)

    /* outer-scope values (subplans) */
    for (size_t i = 0; i < n_outer; i++) {
        oq_value *v = outer_vals[i];
        if (v->id >= model->next_id || slot_of[v->id] != NO_SLOT)
            continue;
        NEW_SLOT(v, SLOT_OUTER);
        p->slots[p->n_slots - 1].compiled = *outer_t[i];
        p->slots[p->n_slots - 1].compiled.data = outer_t[i]->data;
        p->outer_src[p->n_outer] = i;
        p->outer[p->n_outer++] = p->n_slots - 1;
    }
    /* initializers (also those listed as graph inputs: they are defaults, used as is) */
    for (size_t i = 0; i < g->n_initializers; i++) {
        oq_tensor *t = g->initializers[i];
        oq_value *v = t->name ? oq_graph_find_local(g, t->name) : NULL;
        if (!v || v->id >= model->next_id || slot_of[v->id] != NO_SLOT)
            continue;
        NEW_SLOT(v, SLOT_CONST);
        slot *s = &p->slots[p->n_slots - 1];
        st = set_from_tensor(&s->t, t, d);
        if (st != OQ_OK)
            goto fail;
        s->compiled = s->t;
    }
    for (size_t i = 0; i < g->n_inputs; i++) {
        oq_value *v = g->inputs[i]->value;
        if (!v || slot_of[v->id] != NO_SLOT)
            continue;
        NEW_SLOT(v, SLOT_INPUT);
        slot *s = &p->slots[p->n_slots - 1];
        oq_plan_tensor_from_type(&s->compiled, g->inputs[i]->type ? g->inputs[i]->type : v->type);
        if (p->n_inputs < n_hints && hints[p->n_inputs]) {
            /* subgraph input: a missing dtype comes from the caller; shapes may change
               from iteration to iteration, so only declared dims are kept */
            if (s->compiled.dtype == OQ_DTYPE_UNDEFINED)
                s->compiled.dtype = hints[p->n_inputs]->dtype;
        }
        p->inputs[p->n_inputs++] = p->n_slots - 1;
        if (s->compiled.dtype == OQ_DTYPE_UNDEFINED) {
            st = oq_diag_error(d, OQ_ERR_UNSUPPORTED, "graph input \"%s\" has no tensor type",
                               v->name);
            goto fail;
        }
    }
    st = order_nodes(p, imp, n_imp, &order, &n_order, d);
    if (st != OQ_OK)
        goto fail;
    /* integer arithmetic: the QDQ groups that run as one kernel (exec/qgroup.h) */
    p->arith = opt.arith;
    if (!outer_vals && (st = oq_qgroups_find(model, g, opt.arith, &p->qgroups)) != OQ_OK)
        goto fail;
    {
        const char *env = getenv("ONNXQ_PLAN_FOLD");
        p->fold = !opt.no_fold && !(env && strcmp(env, "0") == 0);
        p->fold_budget = fold_budget(p);
    }
    p->steps = calloc(n_order + 1, sizeof(step));
    if (!p->steps) {
        st = OQ_ERR_NOMEM;
        goto fail;
    }
    for (size_t i = 0; i < n_order; i++) {
        oq_node *n = order[i];
        bool is_const = strcmp(n->op_type, "Constant") == 0 && oq_domain_is_default(n->domain);
        for (size_t o = 0; o < n->n_outputs; o++) {
            oq_value *v = n->outputs[o];
            if (!v || !v->name || !*v->name)
                continue;
            if (slot_of[v->id] != NO_SLOT) {
                st = oq_plan_node_error(p, d, n, OQ_ERR_INVALID, "value \"%s\" is defined twice", v->name);
                goto fail;
            }
            NEW_SLOT(v, is_const ? SLOT_CONST : SLOT_NODE);
        }
        if (is_const) {
            if (n->n_outputs != 1 || !n->outputs[0]) {
                st = oq_plan_node_error(p, d, n, OQ_ERR_INVALID, "Constant must have one output");
                goto fail;
            }
            slot *s = &p->slots[slot_of[n->outputs[0]->id]];
            st = constant_value(p, n, s, d);
            if (st != OQ_OK)
                goto fail;
            s->compiled = s->t;
            continue;
        }
        oq_node *sn = oq_qgroups_step_node(p->qgroups, n);
        if (!sn)
            continue; /* part of a fused group */
        step *s = &p->steps[p->n_steps];
        s->node = sn;
        p->n_steps++;
        size_t ni = 0;
        for (oq_node *x = g->first; x && x != n; x = x->next)
            ni++;
        st = compile_step(p, s, p->n_steps - 1, slot_of, imp[ni], n_imp[ni], d);
        imp[ni] = NULL; /* owned by the step now */
        s->node = n;    /* messages and observers name the graph's node */
        if (st != OQ_OK)
            goto fail;
        st = fold_step(p, d);
        if (st != OQ_OK)
            goto fail;
    }
#undef NEW_SLOT
    for (size_t i = 0; i < g->n_outputs; i++) {
        oq_value *v = g->outputs[i]->value;
        size_t sl = v && v->id < model->next_id ? slot_of[v->id] : NO_SLOT;
        if (sl == NO_SLOT) {
            st = oq_diag_error(d, OQ_ERR_INVALID, "graph output \"%s\" is never produced",
                               v && v->name ? v->name : "");
            goto fail;
        }
        p->slots[sl].is_output = true;
        p->outputs[p->n_outputs++] = sl;
    }
    if (opt.arith == OQ_ARITH_REFERENCE) {
        st = oq_plan_fuse_chains(p);
        if (st != OQ_OK)
            goto fail;
    }
    p->peak_estimate = oq_plan_estimate_peak(p);
    st = OQ_OK;
    *out = p;
    p = NULL;
fail:
    for (size_t i = 0; imp && i < n_nodes; i++)
        free(imp[i]);
    free(imp);
    free(n_imp);
    free(order);
    free(slot_of);
    oq_plan_free(p);
    return st;
}

oq_status oq_plan_compile(oq_model *model, const oq_plan_options *opts, oq_plan **out,
                          oq_diag *d)
{
    *out = NULL;
    if (!model || !model->graph)
        return oq_diag_error(d, OQ_ERR_USAGE, "no model graph to compile");
    return compile_graph(model, model->graph, opts, NULL, NULL, NULL, 0, NULL, 0, out, d);
}

oq_status oq_k_subplan_compile(oq_kctx *k, oq_graph *g, const oq_rt_tensor *const *input_hints,
                               size_t n_hints, oq_plan **out)
{
    oq_model *m = g->model;
    oq_plan_options o = oq_plan_options_default();
    return compile_graph(m, g, &o, k->pool, (oq_value *const *)k->implicit_values, k->implicit,
                         k->n_implicit, input_hints, n_hints, out, k->diag);
}

const oq_rt_tensor *oq_k_subplan_output(const oq_plan *sp, size_t i)
{
    return i < sp->n_outputs ? &sp->slots[sp->outputs[i]].compiled : NULL;
}

size_t oq_k_subplan_n_inputs(const oq_plan *sp) { return sp->n_inputs; }
size_t oq_k_subplan_n_outputs(const oq_plan *sp) { return sp->n_outputs; }

void oq_plan_free(oq_plan *p)
{
    if (!p)
        return;
    free(p->prof_ns);
    for (size_t i = 0; i < p->n_steps; i++)
        step_free(&p->steps[i]); /* k.scratch: only set if a hook failed while holding it */
    for (size_t i = 0; i < p->n_slots; i++)
        free(p->slots[i].const_mem);
    for (size_t i = 0; i < p->n_bufs; i++)
        free(p->bufs[i].data);
    free(p->bufs);
    free(p->steps);
    free(p->slots);
    free(p->inputs);
    free(p->outputs);
    free(p->scratch);
    free(p->wide);
    free(p->outer);
    free(p->outer_src);
    oq_qgroups_free(p->qgroups);
    free(p->folded);
    for (size_t i = 0; i < p->n_shared; i++)
        free(p->shared[i].data);
    free(p->shared);
    if (p->owns_pool)
        oq_pool_free(p->pool);
    free(p);
}

const void *oq_k_shared(oq_kctx *k, const void *src, uint32_t kind, int64_t a, int64_t b, size_t bytes,
                        void (*make)(const void *src, int64_t a, int64_t b, void *dst))
{
    oq_plan *p = (oq_plan *)k->plan; /* the cache is the plan's, whatever the caller may change */
    if (!p || !src)
        return NULL;
    for (size_t i = 0; i < p->n_shared; i++) {
        const shared_buf *s = &p->shared[i];
        if (s->src == src && s->kind == kind && s->a == a && s->b == b)
            return s->data;
    }
    if (bytes > OQ_K_SHARED_MAX_BYTES - p->shared_bytes)
        return NULL;
    shared_buf *g = oq_grow(p->shared, p->n_shared, &p->cap_shared, sizeof *g, 8);
    if (!g)
        return NULL;
    p->shared = g;
    void *data = malloc(bytes ? bytes : 1);
    if (!data)
        return NULL;
    make(src, a, b, data);
    p->shared[p->n_shared++] = (shared_buf){src, kind, a, b, data};
    p->shared_bytes += bytes;
    return data;
}

/* ------------------------------------------------------------------ queries ------ */

size_t oq_plan_n_inputs(const oq_plan *p) { return p->n_inputs; }
size_t oq_plan_n_outputs(const oq_plan *p) { return p->n_outputs; }
const char *oq_plan_input_name(const oq_plan *p, size_t i)
{
    return i < p->n_inputs ? p->slots[p->inputs[i]].value->name : NULL;
}
const char *oq_plan_output_name(const oq_plan *p, size_t i)
{
    return i < p->n_outputs ? p->slots[p->outputs[i]].value->name : NULL;
}
int32_t oq_plan_input_info(const oq_plan *p, size_t i, size_t *rank, int64_t *dims,
                           bool *has_shape)
{
    if (i >= p->n_inputs)
        return OQ_DTYPE_UNDEFINED;
    const oq_rt_tensor *t = &p->slots[p->inputs[i]].compiled;
    bool known = t->rank != OQ_RT_UNKNOWN_RANK;
    if (has_shape)
        *has_shape = known;
    if (rank)
        *rank = known ? t->rank : 0;
    if (dims && known)
        memcpy(dims, t->dims, t->rank * sizeof(int64_t));
    return t->dtype;
}
const char *oq_plan_input_dim_name(const oq_plan *p, size_t i, size_t j)
{
    if (i >= p->n_inputs)
        return NULL;
    oq_value *v = p->slots[p->inputs[i]].value;
    const oq_type *ty = NULL;
    for (size_t k = 0; k < p->graph->n_inputs; k++)
        if (p->graph->inputs[k]->value == v)
            ty = p->graph->inputs[k]->type;
    if (!ty)
        ty = v->type;
    if (!ty || !ty->shape || j >= ty->shape->rank)
        return NULL;
    return ty->shape->dims[j].kind == OQ_DIM_PARAM ? ty->shape->dims[j].param : NULL;
}
void oq_plan_set_observer(oq_plan *p, oq_tensor_observer fn, void *user)
{
    p->on_tensor = fn;
    p->user = user;
}
int oq_plan_threads(const oq_plan *p) { return p->threads; }

static int64_t pool_bytes(const oq_plan *p)
{
    int64_t t = 0;
    for (size_t i = 0; i < p->n_bufs; i++)
        t += (int64_t)p->bufs[i].cap;
    return t;
}

int64_t oq_plan_peak_bytes(const oq_plan *p)
{
    return p->n_bufs ? pool_bytes(p) : p->peak_estimate;
}
int64_t oq_plan_total_bytes(const oq_plan *p) { return p->total_bytes; }


oq_arith oq_k_arith(const oq_kctx *k)
{
    return k && k->plan ? k->plan->arith : OQ_ARITH_REFERENCE;
}
