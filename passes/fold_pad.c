/* fold-pad: a Pad of zeros in front of Conv layers, folded into their pads attribute.
 *
 * Pad(x, pads) with mode "constant" and value 0 (the default), constant non-negative pads
 * that touch only the spatial axes (not N, not C), whose every use is the data input of a
 * float Conv with auto_pad NOTSET or VALID: each such Conv reads x and adds the Pad's
 * begin/end amounts to its own pads. A Conv pads with zeros, so it computes the same sums;
 * onnxruntime does this itself (PadFusion) on a float model, but not once the Pad sits
 * between a DequantizeLinear and a QuantizeLinear, where it runs in float with a Q/DQ pair
 * of its own (PyTorch exports "same" padding this way: EfficientNet-Lite, TF-converted
 * MobileNets). Pad-2 (pads and value attributes) and Pad-11+ (inputs, constant_value,
 * axes) are handled; a computed pads input is left (fold-constants first). */
#include "pass-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAD_MAX_RANK 8

typedef struct ctx {
    oq_pass_result *res;
    oq_diag *d;
} ctx;

/* The Pad's amounts per axis of its rank-r input: begin[i], end[i] (false: not a
 * constant zero Pad this pass folds). */
static bool zero_pad_amounts(const oq_node *p, int64_t r, int64_t *begin, int64_t *end, oq_diag *d)
{
    if (!oq_pass_is_zero_pad(p) || r < 3 || r > PAD_MAX_RANK)
        return false;
    int64_t pads[2 * PAD_MAX_RANK], n;
    if (oq_node_opset(p) < 11) {
        const int64_t *v;
        n = oq_node_attr_ints(p, "pads", &v);
        if (n != 2 * r)
            return false;
        memcpy(pads, v, (size_t)n * sizeof(int64_t));
    } else {
        if (p->n_inputs < 2 || !p->inputs[1])
            return false;
        n = oq_pass_const_ints(p->inputs[1], pads, 2 * PAD_MAX_RANK, d);
        if (n < 0)
            return false;
        int64_t axes[PAD_MAX_RANK], na = r;
        if (p->n_inputs >= 4 && p->inputs[3] && *p->inputs[3]->name) { /* Pad-18 axes */
            na = oq_pass_const_ints(p->inputs[3], axes, PAD_MAX_RANK, d);
            if (na <= 0)
                return false;
        } else
            for (int64_t i = 0; i < r; i++)
                axes[i] = i;
        if (n != 2 * na)
            return false;
        int64_t full[2 * PAD_MAX_RANK] = {0};
        bool seen[PAD_MAX_RANK] = {false};
        for (int64_t i = 0; i < na; i++) {
            int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
            if (a < 0 || a >= r || seen[a])
                return false;
            seen[a] = true;
            full[a] = pads[i];
            full[r + a] = pads[na + i];
        }
        memcpy(pads, full, (size_t)(2 * r) * sizeof(int64_t));
    }
    for (int64_t i = 0; i < r; i++) {
        begin[i] = pads[i];
        end[i] = pads[r + i];
        if (begin[i] < 0 || end[i] < 0 || (i < 2 && (begin[i] != 0 || end[i] != 0)))
            return false;
    }
    return true;
}

/* A float Conv reading v as its data input, with pads it can take more of. */
static bool conv_takes_pads(const oq_node *c, size_t index, int64_t r)
{
    if (!oq_pass_is_op(c, "Conv") || index != 0)
        return false;
    const char *ap = oq_node_attr_string(c, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0)
        return false;
    const int64_t *v;
    int64_t n = oq_node_attr_ints(c, "pads", &v);
    return n <= 0 || n == 2 * (r - 2); /* -1: no pads attribute */
}

static void fold_into(oq_node *c, const int64_t *begin, const int64_t *end, int64_t r, oq_value *x)
{
    int64_t s = r - 2, pads[2 * PAD_MAX_RANK] = {0};
    const int64_t *v;
    bool valid = strcmp(oq_node_attr_string(c, "auto_pad", "NOTSET"), "VALID") == 0;
    if (!valid && oq_node_attr_ints(c, "pads", &v) == 2 * s)
        memcpy(pads, v, (size_t)(2 * s) * sizeof(int64_t));
    for (int64_t i = 0; i < s; i++) {
        pads[i] += begin[2 + i];
        pads[s + i] += end[2 + i];
    }
    oq_node_set_attr_ints(c, "pads", pads, (size_t)(2 * s));
    if (valid)
        oq_node_set_attr_string(c, "auto_pad", "NOTSET");
    oq_node_set_input(c, 0, x);
}

static oq_status run_graph(oq_graph *g, void *vc)
{
    ctx *c = vc;
    for (oq_node *n = g->first; n;) {
        oq_node *next = n->next;
        if (!oq_pass_is_op(n, "Pad") || n->n_inputs < 1 || !n->inputs[0] || n->n_outputs < 1 || !n->outputs[0]) {
            n = next;
            continue;
        }
        oq_value *x = n->inputs[0], *y = n->outputs[0];
        int64_t r = oq_pass_value_rank(x), begin[PAD_MAX_RANK], end[PAD_MAX_RANK];
        bool ok = y->n_uses > 0 && !oq_value_is_graph_output(y) && oq_pass_value_elem_type(x) == OQ_DTYPE_FLOAT &&
                  zero_pad_amounts(n, r, begin, end, c->d);
        for (size_t u = 0; ok && u < y->n_uses; u++)
            ok = conv_takes_pads(y->uses[u].node, y->uses[u].index, r);
        if (!ok) {
            oq_pass_stat_add(c->res, "pads_left", 1);
            n = next;
            continue;
        }
        while (y->n_uses > 0) /* fold_into rewires the use away */
            fold_into(y->uses[0].node, begin, end, r, x);
        oq_value *in[4] = {NULL};
        for (size_t i = 1; i < n->n_inputs && i < 4; i++)
            in[i] = n->inputs[i];
        oq_pass_remove_node(n);
        for (size_t i = 1; i < 4; i++)
            if (in[i])
                oq_pass_drop_if_unused(in[i]);
        oq_pass_stat_add(c->res, "pads_folded", 1);
        c->res->changed = true;
        n = next;
    }
    return OQ_OK;
}

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    (void)o;
    ctx c = {res, d};
    return oq_pass_for_each_graph(m, run_graph, &c);
}

const oq_pass oq_pass_fold_pad = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "fold-pad",
    .summary = "fold a zero constant Pad into the pads of the Conv layers that read it",
    .run = run,
};
