/* upgrade-opset{to=N}: rewrite default-domain operators whose signature or semantics
 * changed between the model's opset and N (7 <= N <= 21), then import opset N.
 *
 * The model is scanned first; if any operator cannot be converted exactly, nothing is
 * changed and every such node is reported. See docs/passes/upgrade-opset.md for the
 * list of conversions. */
#include "pass-impl.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OQ_OPSET_MIN 7
#define OQ_OPSET_MAX 21

typedef struct up {
    oq_pass_result *res;
    oq_diag *d;
    int64_t from, to;
    int refusals;
    bool convert;   /* false: scan only */
} up;

static bool crosses(const up *u, int64_t v)
{
    return u->from < v && u->to >= v;
}

static void refuse(up *u, const oq_node *n, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void refuse(up *u, const oq_node *n, const char *fmt, ...)
{
    char lbl[64], msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    u->refusals++;
    oq_diag_add(u->d, OQ_SEV_ERROR, OQ_ERR_UNSUPPORTED, NULL, oq_node_label(n, lbl, sizeof lbl),
                n->op_type, "cannot upgrade from opset %lld to %lld: %s", (long long)u->from,
                (long long)u->to, msg);
}

static const char *base_name(const oq_node *n)
{
    return n->name && *n->name ? n->name : n->op_type;
}

static oq_value *add_ints(oq_node *n, const char *what, const int64_t *v, size_t cnt, bool scalar)
{
    char base[256];
    snprintf(base, sizeof base, "%.200s_%s", base_name(n), what);
    int64_t dims[1] = {(int64_t)cnt};
    return oq_graph_add_initializer(n->graph, base, OQ_DTYPE_INT64, dims, scalar ? 0 : 1, v,
                                    (int64_t)cnt * 8);
}

static oq_value *add_scalar(oq_node *n, const char *what, int32_t dtype, double v)
{
    char base[256];
    snprintf(base, sizeof base, "%.200s_%s", base_name(n), what);
    char *name = oq_graph_unique_name(n->graph, base);
    oq_value *val = name ? oq_graph_new_value(n->graph, name) : NULL;
    int64_t dims[1] = {1};
    oq_tensor *t = val ? oq_pass_tensor_from_double(n->graph->model, name, dtype, dims, 0, &v) : NULL;
    if (!t || oq_graph_set_initializer(n->graph, val, t) != OQ_OK)
        return NULL;
    return val;
}

/* Move an ints attribute to input `index` (earlier missing inputs become ""). Returns
 * false on OOM. Absent attribute: nothing to do. */
static bool ints_attr_to_input(up *u, oq_node *n, const char *attr, size_t index)
{
    const int64_t *vals;
    int64_t cnt = oq_node_attr_ints(n, attr, &vals);
    if (cnt < 0)
        return true;
    oq_value *v = add_ints(n, attr, vals, (size_t)cnt, false);
    if (!v)
        return false;
    while (n->n_inputs < index)
        oq_node_add_input(n, NULL);
    oq_node_set_input(n, index, v);
    oq_node_remove_attr(n, attr);
    oq_pass_stat_add(u->res, "attributes_to_inputs", 1);
    return true;
}

static int32_t float_dtype_of(up *u, const oq_value *x)
{
    int32_t t = oq_pass_value_elem_type(x);
    if (t == OQ_DTYPE_FLOAT || t == OQ_DTYPE_DOUBLE || t == OQ_DTYPE_FLOAT16)
        return t;
    if (t <= 0)
        oq_pass_stat_add(u->res, "assumed_float32", 1);
    return OQ_DTYPE_FLOAT;
}

static bool is_reduce(const oq_node *n)
{
    static const char *const r[] = {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                                    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                                    "ReduceSumSquare", NULL};
    for (size_t i = 0; r[i]; i++)
        if (oq_pass_is_op(n, r[i]))
            return true;
    return false;
}

static const char *const removed_at_10[] = {"Affine", "Crop", "DynamicSlice", "GRUUnit",
                                            "GivenTensorFill", "ImageScaler", "ParametricSoftplus",
                                            "Scale", "ScaledTanh", NULL};

/* ---- Softmax / LogSoftmax / Hardmax at 13 */
static bool conv_softmax(up *u, oq_node *n)
{
    if (!crosses(u, 13))
        return true;
    int64_t axis = oq_node_attr_int(n, "axis", 1);
    int64_t r = oq_pass_value_rank(n->inputs[0]);
    if (r > 0) {
        int64_t a = axis < 0 ? axis + r : axis;
        if (a == r - 1) {
            oq_node_set_attr_int(n, "axis", a);
            oq_pass_stat_add(u->res, "softmax_axis_kept", 1);
            return true;
        }
    }
    /* old semantics: softmax over the flattened [prod(d<axis), prod(d>=axis)] view */
    oq_graph *g = n->graph;
    oq_value *x = n->inputs[0], *y = n->outputs[0];
    oq_value *shape = oq_graph_new_value(g, NULL), *flat = oq_graph_new_value(g, NULL),
             *sm = oq_graph_new_value(g, NULL);
    if (!shape || !flat || !sm)
        return false;
    char nm[256];
    oq_node *shp = oq_node_new(g, "Shape", NULL, NULL, &x, 1, &shape, 1);
    oq_node *fl = oq_node_new(g, "Flatten", NULL, NULL, &x, 1, &flat, 1);
    oq_value *rin[2] = {sm, shape};
    oq_node *rs = oq_node_new(g, "Reshape", NULL, NULL, rin, 2, &y, 1);
    if (!shp || !fl || !rs)
        return false;
    snprintf(nm, sizeof nm, "%.200s_shape", base_name(n));
    shp->name = oq_graph_unique_name(g, nm);
    snprintf(nm, sizeof nm, "%.200s_flatten", base_name(n));
    fl->name = oq_graph_unique_name(g, nm);
    snprintf(nm, sizeof nm, "%.200s_reshape", base_name(n));
    rs->name = oq_graph_unique_name(g, nm);
    oq_node_set_attr_int(fl, "axis", axis);
    oq_node_set_output(n, 0, sm);
    oq_node_set_input(n, 0, flat);
    oq_node_set_attr_int(n, "axis", 1);
    oq_graph_insert_before(g, n, shp);
    oq_graph_insert_before(g, n, fl);
    oq_graph_insert_after(g, n, rs);
    oq_pass_stat_add(u->res, "softmax_flattened", 1);
    return true;
}

/* ---- Clip at 11 */
static bool conv_clip(up *u, oq_node *n)
{
    if (!crosses(u, 11))
        return true;
    oq_attr *mn = oq_node_attr(n, "min"), *mx = oq_node_attr(n, "max");
    if (!mn && !mx)
        return true;
    int32_t dt = float_dtype_of(u, n->inputs[0]);
    oq_value *vmin = NULL, *vmax = NULL;
    if (mn && !(vmin = add_scalar(n, "min", dt, (double)mn->f)))
        return false;
    if (mx && !(vmax = add_scalar(n, "max", dt, (double)mx->f)))
        return false;
    if (vmin || vmax)
        oq_node_set_input(n, 1, vmin);
    if (vmax)
        oq_node_set_input(n, 2, vmax);
    oq_node_remove_attr(n, "min");
    oq_node_remove_attr(n, "max");
    oq_pass_stat_add(u->res, "attributes_to_inputs", 1);
    return true;
}

/* ---- Upsample -> Resize, Resize 10 -> 11 */
static int nearest_mode_for(up *u, oq_node *n, oq_value *scales, const char **mode)
{
    oq_tensor *t = scales ? oq_value_const_tensor(scales) : NULL;
    double *v = NULL;
    int64_t cnt = 0;
    if (!t || oq_pass_tensor_to_double(t, &v, &cnt, NULL) != OQ_OK)
        return -1;
    bool up_ = true, down = true;
    for (int64_t i = 0; i < cnt; i++) {
        if (v[i] < 1.0)
            up_ = false;
        if (v[i] > 1.0)
            down = false;
    }
    free(v);
    if (up_)
        *mode = "floor";
    else if (down)
        *mode = "ceil";
    else
        return -1;
    return 0;
}

static bool check_resize_like(up *u, oq_node *n, bool upsample)
{
    const char *mode = oq_node_attr_string(n, "mode", "nearest");
    if (strcmp(mode, "nearest") != 0 && strcmp(mode, "linear") != 0) {
        refuse(u, n, "mode \"%s\" has no Resize equivalent", mode);
        return false;
    }
    if (strcmp(mode, "nearest") == 0) {
        const char *nm;
        oq_value *scales = n->n_inputs >= 2 ? n->inputs[1] : NULL;
        if (upsample)
            return true; /* Upsample scales are >= 1 by definition: floor */
        if (nearest_mode_for(u, n, scales, &nm) != 0) {
            refuse(u, n, "nearest rounding of opset-10 Resize depends on constant scales that are all >= 1 or all <= 1");
            return false;
        }
    }
    return true;
}

static bool conv_to_resize11(up *u, oq_node *n, bool upsample)
{
    /* inputs now: X, scales (Upsample attr scales moved to an input by the caller) */
    const char *mode = oq_node_attr_string(n, "mode", "nearest");
    bool nearest = strcmp(mode, "nearest") == 0;
    const char *nm = "floor";
    if (nearest && !upsample)
        nearest_mode_for(u, n, n->inputs[1], &nm);
    if (u->to >= 11) {
        oq_value *scales = n->inputs[1];
        oq_value *roi = NULL;
        if (u->to < 13) {
            int64_t z[1] = {0};
            char base[256];
            snprintf(base, sizeof base, "%.200s_roi", base_name(n));
            roi = oq_graph_add_initializer(n->graph, base, OQ_DTYPE_FLOAT, z, 1, "", 0);
            if (!roi)
                return false;
        }
        oq_node_set_input(n, 1, roi);
        oq_node_set_input(n, 2, scales);
        oq_node_set_attr_string(n, "coordinate_transformation_mode", "asymmetric");
        if (nearest)
            oq_node_set_attr_string(n, "nearest_mode", nm);
    }
    oq_node_set_attr_string(n, "mode", mode);
    return true;
}

static bool conv_upsample(up *u, oq_node *n)
{
    oq_attr *sa = oq_node_attr(n, "scales");
    if (sa && (crosses(u, 9) || u->to >= 10)) {
        int64_t dims[1] = {(int64_t)sa->n_floats};
        char base[256];
        snprintf(base, sizeof base, "%.200s_scales", base_name(n));
        oq_value *s = oq_graph_add_initializer(n->graph, base, OQ_DTYPE_FLOAT, dims, 1,
                                               sa->floats ? (const void *)sa->floats : (const void *)"",
                                               (int64_t)sa->n_floats * 4);
        if (!s)
            return false;
        oq_node_set_input(n, 1, s);
        oq_node_remove_attr(n, "scales");
        oq_pass_stat_add(u->res, "attributes_to_inputs", 1);
    }
    if (u->to < 10)
        return true;
    n->op_type = oq_model_strdup(n->graph->model, "Resize");
    oq_pass_stat_add(u->res, "upsample_to_resize", 1);
    return conv_to_resize11(u, n, true);
}

static bool conv_resize(up *u, oq_node *n)
{
    if (u->from == 10 && u->to >= 11)
        return conv_to_resize11(u, n, false);
    return true;
}

/* ---- BatchNormalization 9 / 14 */
static bool check_bn(up *u, oq_node *n)
{
    if (crosses(u, 9) && oq_node_attr_int(n, "spatial", 1) != 1) {
        refuse(u, n, "spatial=0 (per-activation statistics) was removed in opset 9");
        return false;
    }
    if (crosses(u, 14))
        for (size_t i = 1; i < n->n_outputs; i++)
            if (n->outputs[i] && oq_pass_value_refs(n->outputs[i]) > 0) {
                refuse(u, n, "training output %zu is used; its meaning changed in opset 14", i);
                return false;
            }
    return true;
}

static bool conv_bn(up *u, oq_node *n)
{
    if (crosses(u, 9))
        oq_node_remove_attr(n, "spatial");
    if (crosses(u, 14) && n->n_outputs > 1) {
        for (size_t i = 1; i < n->n_outputs; i++)
            oq_node_set_output(n, i, NULL);
        n->n_outputs = 1;
    }
    return true;
}

/* ---- Dropout 10 / 12 */
static bool check_dropout(up *u, oq_node *n)
{
    if (crosses(u, 10) && n->n_outputs > 1 && n->outputs[1] && oq_pass_value_refs(n->outputs[1]) > 0) {
        refuse(u, n, "the mask output is used and changes type to bool in opset 10");
        return false;
    }
    return true;
}

static bool conv_dropout(up *u, oq_node *n)
{
    if (crosses(u, 12)) {
        oq_attr *r = oq_node_attr(n, "ratio");
        if (r) {
            oq_value *v = add_scalar(n, "ratio", OQ_DTYPE_FLOAT, (double)r->f);
            if (!v)
                return false;
            oq_node_set_input(n, 1, v);
            oq_node_remove_attr(n, "ratio");
            oq_pass_stat_add(u->res, "attributes_to_inputs", 1);
        }
    }
    return true;
}

static bool conv_split(up *u, oq_node *n)
{
    if (crosses(u, 13) && !ints_attr_to_input(u, n, "split", 1))
        return false;
    if (crosses(u, 18) && (n->n_inputs < 2 || !n->inputs[1]) && !oq_node_attr(n, "num_outputs"))
        oq_node_set_attr_int(n, "num_outputs", (int64_t)n->n_outputs);
    return true;
}

static bool conv_pad(up *u, oq_node *n)
{
    if (!crosses(u, 11))
        return true;
    if (!ints_attr_to_input(u, n, "pads", 1))
        return false;
    oq_attr *val = oq_node_attr(n, "value");
    if (val) {
        if (val->f != 0.0f) {
            oq_value *v = add_scalar(n, "value", float_dtype_of(u, n->inputs[0]), (double)val->f);
            if (!v)
                return false;
            oq_node_set_input(n, 2, v);
        }
        oq_node_remove_attr(n, "value");
    }
    return true;
}

static bool conv_topk(up *u, oq_node *n)
{
    if (!crosses(u, 10))
        return true;
    oq_attr *k = oq_node_attr(n, "k");
    if (!k)
        return true;
    int64_t kv = k->i;
    oq_value *v = add_ints(n, "k", &kv, 1, false);
    if (!v)
        return false;
    oq_node_set_input(n, 1, v);
    oq_node_remove_attr(n, "k");
    oq_pass_stat_add(u->res, "attributes_to_inputs", 1);
    return true;
}

static bool conv_dft(up *u, oq_node *n)
{
    if (!crosses(u, 20))
        return true;
    int64_t axis = oq_node_attr_int(n, "axis", 1);
    oq_value *v = add_ints(n, "axis", &axis, 1, true);
    if (!v)
        return false;
    while (n->n_inputs < 2)
        oq_node_add_input(n, NULL);
    oq_node_set_input(n, 2, v);
    oq_node_remove_attr(n, "axis");
    oq_pass_stat_add(u->res, "attributes_to_inputs", 1);
    return true;
}

static bool conv_gridsample(up *u, oq_node *n)
{
    if (!crosses(u, 20))
        return true;
    const char *mode = oq_node_attr_string(n, "mode", "bilinear");
    if (strcmp(mode, "bilinear") == 0)
        oq_node_set_attr_string(n, "mode", "linear");
    else if (strcmp(mode, "bicubic") == 0)
        oq_node_set_attr_string(n, "mode", "cubic");
    return true;
}

/* Scan-only checks; false = refused (already reported). */
static bool check_node(up *u, oq_node *n)
{
    if (crosses(u, 10))
        for (size_t i = 0; removed_at_10[i]; i++)
            if (oq_pass_is_op(n, removed_at_10[i])) {
                refuse(u, n, "experimental operator %s was removed in opset 10", n->op_type);
                return false;
            }
    if (oq_pass_is_op(n, "Upsample") && u->to >= 10)
        return check_resize_like(u, n, true);
    if (oq_pass_is_op(n, "Resize") && u->from == 10 && u->to >= 11)
        return check_resize_like(u, n, false);
    if (oq_pass_is_op(n, "Resize") && crosses(u, 13) &&
        strcmp(oq_node_attr_string(n, "coordinate_transformation_mode", ""), "tf_half_pixel_for_nn") == 0) {
        refuse(u, n, "coordinate_transformation_mode tf_half_pixel_for_nn was removed in opset 13");
        return false;
    }
    if (oq_pass_is_op(n, "BatchNormalization"))
        return check_bn(u, n);
    if (oq_pass_is_op(n, "Dropout"))
        return check_dropout(u, n);
    if (oq_pass_is_op(n, "Scan") && crosses(u, 9)) {
        refuse(u, n, "Scan-8 (batched, sequence_lens) has no exact Scan-9 form here");
        return false;
    }
    if (oq_pass_is_op(n, "GroupNormalization") && crosses(u, 21)) {
        refuse(u, n, "scale and bias change from per-group to per-channel in opset 21");
        return false;
    }
    if (oq_pass_is_op(n, "Slice") && crosses(u, 10) && oq_node_attr(n, "steps")) {
        refuse(u, n, "unexpected steps attribute");
        return false;
    }
    return true;
}

static bool convert_node(up *u, oq_node *n)
{
    if (oq_pass_is_op(n, "Softmax") || oq_pass_is_op(n, "LogSoftmax") || oq_pass_is_op(n, "Hardmax"))
        return conv_softmax(u, n);
    if (oq_pass_is_op(n, "Clip"))
        return conv_clip(u, n);
    if (oq_pass_is_op(n, "Squeeze") || oq_pass_is_op(n, "Unsqueeze") || oq_pass_is_op(n, "ReduceSum"))
        return !crosses(u, 13) || ints_attr_to_input(u, n, "axes", 1);
    if (is_reduce(n))
        return !crosses(u, 18) || ints_attr_to_input(u, n, "axes", 1);
    if (oq_pass_is_op(n, "Split"))
        return conv_split(u, n);
    if (oq_pass_is_op(n, "Slice")) {
        if (!crosses(u, 10))
            return true;
        return ints_attr_to_input(u, n, "starts", 1) && ints_attr_to_input(u, n, "ends", 2) &&
               ints_attr_to_input(u, n, "axes", 3);
    }
    if (oq_pass_is_op(n, "Pad"))
        return conv_pad(u, n);
    if (oq_pass_is_op(n, "Upsample"))
        return conv_upsample(u, n);
    if (oq_pass_is_op(n, "Resize"))
        return conv_resize(u, n);
    if (oq_pass_is_op(n, "BatchNormalization"))
        return conv_bn(u, n);
    if (oq_pass_is_op(n, "Dropout"))
        return conv_dropout(u, n);
    if (oq_pass_is_op(n, "Scatter") && u->to >= 11) {
        n->op_type = oq_model_strdup(n->graph->model, "ScatterElements");
        oq_pass_stat_add(u->res, "scatter_to_scatter_elements", 1);
        return true;
    }
    if (oq_pass_is_op(n, "TopK"))
        return conv_topk(u, n);
    if (oq_pass_is_op(n, "DFT"))
        return conv_dft(u, n);
    if (oq_pass_is_op(n, "GridSample"))
        return conv_gridsample(u, n);
    return true;
}

static oq_status visit(oq_graph *g, void *vc)
{
    up *u = vc;
    for (oq_node *n = g->first; n;) {
        oq_node *next = n->next;
        if (!oq_domain_is_default(n->domain)) {
            n = next;
            continue;
        }
        if (!u->convert) {
            check_node(u, n);
        } else {
            if (!convert_node(u, n))
                return oq_diag_error(u->d, OQ_ERR_NOMEM, "out of memory");
            oq_pass_stat_add(u->res, "nodes_visited", 1);
        }
        n = next;
    }
    return OQ_OK;
}

static int64_t ir_for_opset(int64_t v)
{
    static const int64_t ir[22] = {0, 3, 3, 3, 3, 3, 3, 3, 3, 4, 5, 6, 7, 7, 7, 8, 8, 8, 8, 9, 9, 10};
    return v >= 0 && v <= 21 ? ir[v] : 10;
}

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    const oq_pass_option_value *tv = oq_pass_option_find(o, "to");
    if (!tv || !tv->is_set)
        return oq_diag_error(d, OQ_ERR_USAGE, "upgrade-opset: option \"to\" is required, e.g. upgrade-opset{to=17}");
    up u = {res, d, oq_model_opset(m, ""), tv->i, 0, false};
    if (u.to < OQ_OPSET_MIN || u.to > OQ_OPSET_MAX)
        return oq_diag_error(d, OQ_ERR_USAGE, "upgrade-opset: to=%lld is outside %d..%d",
                             (long long)u.to, OQ_OPSET_MIN, OQ_OPSET_MAX);
    if (u.from == 0) {
        /* e.g. a model of ai.onnx.ml or ai.onnx.preview.training operators only */
        oq_diag_add(d, OQ_SEV_NOTE, OQ_OK, NULL, NULL, NULL,
                    "upgrade-opset: the model imports no default-domain opset; nothing to upgrade");
        return OQ_OK;
    }
    if (u.from < OQ_OPSET_MIN)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "upgrade-opset: models below opset %d (this one: %lld) are not supported",
                             OQ_OPSET_MIN, (long long)u.from);
    if (u.to < u.from)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "upgrade-opset: the model is at opset %lld; downgrading to %lld is not supported",
                             (long long)u.from, (long long)u.to);
    if (u.to == u.from)
        return OQ_OK;
    for (size_t i = 0; i < m->n_functions; i++)
        for (size_t k = 0; k < m->functions[i]->n_opsets; k++)
            if (oq_domain_is_default(m->functions[i]->opsets[k].domain))
                return oq_diag_error(d, OQ_ERR_UNSUPPORTED,
                                     "upgrade-opset: model-local function \"%s\" imports the default domain; functions are not upgraded",
                                     m->functions[i]->name ? m->functions[i]->name : "");
    oq_status st = oq_pass_for_each_graph(m, visit, &u);
    if (st != OQ_OK)
        return st;
    if (u.refusals)
        return OQ_ERR_UNSUPPORTED;
    u.convert = true;
    st = oq_pass_for_each_graph(m, visit, &u);
    if (st != OQ_OK)
        return st;
    oq_model_set_opset(m, "", u.to);
    if (!m->has_ir_version || m->ir_version < ir_for_opset(u.to)) {
        m->has_ir_version = true;
        m->ir_version = ir_for_opset(u.to);
    }
    res->changed = true;
    return OQ_OK;
}

static const oq_pass_option_def options[] = {
    {"to", OQ_OPT_INT, NULL, "target opset of the default domain (7..21)"},
};

const oq_pass oq_pass_upgrade_opset = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "upgrade-opset",
    .summary = "convert default-domain operators to a newer opset (to=7..21)",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .run = run,
};
