/* Sampling: RoiAlign, Resize / Upsample (nearest, linear, cubic; every coordinate transformation
 * mode; N-D) and GridSample (2-D; bilinear, nearest, bicubic; zeros, border, reflection
 * padding; align_corners) with PyTorch's grid_sample semantics, as the ONNX spec
 * defines. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernel.h"

enum { PAD_ZEROS, PAD_BORDER, PAD_REFLECT };

static double reflect(double x, double twice_lo, double twice_hi)
{
    if (twice_lo == twice_hi)
        return 0;
    double mn = twice_lo / 2, span = (twice_hi - twice_lo) / 2;
    x = fabs(x - mn);
    double extra = fmod(x, span);
    int64_t flips = (int64_t)floor(x / span);
    return flips % 2 == 0 ? extra + mn : span - extra + mn;
}

static double pad_coord(double c, int64_t size, int pad, bool align)
{
    if (pad == PAD_BORDER) {
        c = c < 0 ? 0 : c > (double)(size - 1) ? (double)(size - 1) : c;
    } else if (pad == PAD_REFLECT) {
        c = align ? reflect(c, 0, 2.0 * (double)(size - 1)) : reflect(c, -1, 2.0 * (double)size - 1);
        c = c < 0 ? 0 : c > (double)(size - 1) ? (double)(size - 1) : c;
    }
    return c;
}

static double unnorm(double g, int64_t size, bool align)
{
    return align ? (g + 1) / 2 * (double)(size - 1) : ((g + 1) * (double)size - 1) / 2;
}

static double pixel(const float *img, int64_t H, int64_t W, int64_t y, int64_t x)
{
    return (y >= 0 && y < H && x >= 0 && x < W) ? img[y * W + x] : 0.0;
}

static double cubic1(double x, double A) { return ((A + 2) * x - (A + 3)) * x * x + 1; }
static double cubic2(double x, double A) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }

static oq_status infer_gs(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, 2))
        return oq_k_defer(k, out, n_out);
    const oq_rt_tensor *x = in[0], *g = in[1];
    if (x->rank != 4 || g->rank != 4 || g->dims[3] != 2 || g->dims[0] != x->dims[0])
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "only 2-D sampling: X [N,C,H,W], grid [N,H,W,2]");
    int64_t d[4] = {x->dims[0], x->dims[1], g->dims[1], g->dims[2]};
    return oq_k_set_out(k, &out[0], x->dtype, d, 4);
}

static oq_status run_gs(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                        oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *X = in[0], *G = in[1];
    const char *mode = oq_node_attr_string(k->node, "mode", k->opset >= 20 ? "linear" : "bilinear");
    const char *pm = oq_node_attr_string(k->node, "padding_mode", "zeros");
    bool align = oq_node_attr_int(k->node, "align_corners", 0) != 0;
    int pad = strcmp(pm, "border") == 0 ? PAD_BORDER : strcmp(pm, "reflection") == 0 ? PAD_REFLECT
                                                                                     : PAD_ZEROS;
    int m = (strcmp(mode, "bilinear") == 0 || strcmp(mode, "linear") == 0) ? 0
            : strcmp(mode, "nearest") == 0                                  ? 1
            : (strcmp(mode, "bicubic") == 0 || strcmp(mode, "cubic") == 0)  ? 2
                                                                            : -1;
    if (m < 0)
        return oq_k_error(k, OQ_ERR_INVALID, "unknown mode %s", mode);
    int64_t N = X->dims[0], C = X->dims[1], H = X->dims[2], W = X->dims[3];
    int64_t Ho = G->dims[1], Wo = G->dims[2];
    const float *xd = X->data, *gd = G->data;
    float *y = out[0].data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            const float *img = xd + (n * C + c) * H * W;
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    const float *gp = gd + ((n * Ho + oh) * Wo + ow) * 2;
                    double ix = unnorm(gp[0], W, align), iy = unnorm(gp[1], H, align), v = 0;
                    if (m == 0) {
                        ix = pad_coord(ix, W, pad, align);
                        iy = pad_coord(iy, H, pad, align);
                        int64_t x0 = (int64_t)floor(ix), y0 = (int64_t)floor(iy);
                        double tx = ix - (double)x0, ty = iy - (double)y0;
                        v = pixel(img, H, W, y0, x0) * (1 - tx) * (1 - ty) +
                            pixel(img, H, W, y0, x0 + 1) * tx * (1 - ty) +
                            pixel(img, H, W, y0 + 1, x0) * (1 - tx) * ty +
                            pixel(img, H, W, y0 + 1, x0 + 1) * tx * ty;
                    } else if (m == 1) {
                        ix = pad_coord(ix, W, pad, align);
                        iy = pad_coord(iy, H, pad, align);
                        v = pixel(img, H, W, (int64_t)nearbyint(iy), (int64_t)nearbyint(ix));
                    } else {
                        const double A = -0.75;
                        int64_t x0 = (int64_t)floor(ix), y0 = (int64_t)floor(iy);
                        double tx = ix - (double)x0, ty = iy - (double)y0;
                        double cx[4] = {cubic2(tx + 1, A), cubic1(tx, A), cubic1(1 - tx, A),
                                        cubic2(2 - tx, A)};
                        double cy[4] = {cubic2(ty + 1, A), cubic1(ty, A), cubic1(1 - ty, A),
                                        cubic2(2 - ty, A)};
                        for (int a = 0; a < 4; a++)
                            for (int b = 0; b < 4; b++) {
                                double yy = (double)(y0 - 1 + a), xx = (double)(x0 - 1 + b);
                                int64_t py, px;
                                if (pad == PAD_ZEROS) {
                                    py = (int64_t)yy;
                                    px = (int64_t)xx;
                                } else {
                                    py = (int64_t)pad_coord(yy, H, pad, align);
                                    px = (int64_t)pad_coord(xx, W, pad, align);
                                }
                                v += pixel(img, H, W, py, px) * cy[a] * cx[b];
                            }
                    }
                    y[((n * C + c) * Ho + oh) * Wo + ow] = (float)v;
                }
        }
    return OQ_OK;
}

/* ------------------------------------------------------------------ Resize ------- */

typedef struct rs_params {
    double scale[OQ_RT_MAX_RANK];
    int64_t out[OQ_RT_MAX_RANK];
    double roi[2 * OQ_RT_MAX_RANK];
    bool has_roi;
} rs_params;

static oq_status resize_params(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                               rs_params *p, bool *need)
{
    size_t r = in[0]->rank;
    bool upsample = strcmp(k->node->op_type, "Upsample") == 0;
    const oq_rt_tensor *sc = NULL, *sz = NULL, *roi = NULL;
    *need = false;
    memset(p, 0, sizeof *p);
    if (upsample && k->opset < 9) {
        oq_attr *a = oq_node_attr(k->node, "scales");
        if (!a || a->n_floats != r)
            return oq_k_error(k, OQ_ERR_INVALID, "scales attribute must have %zu entries", r);
        for (size_t i = 0; i < r; i++)
            p->scale[i] = a->floats[i];
    } else if (upsample || k->opset < 11) {
        sc = n_in > 1 ? in[1] : NULL;
    } else {
        roi = n_in > 1 ? in[1] : NULL;
        sc = n_in > 2 ? in[2] : NULL;
        sz = n_in > 3 ? in[3] : NULL;
        if (sc && oq_rt_tensor_numel(sc) == 0)
            sc = NULL;
        if (roi && oq_rt_tensor_numel(roi) == 0)
            roi = NULL;
    }
    if (!(upsample && k->opset < 9) && !sc && !sz)
        return oq_k_error(k, OQ_ERR_INVALID, "scales or sizes is required");
    if ((sc && !sc->data) || (sz && !sz->data) || (roi && !roi->data)) {
        *need = true;
        return OQ_OK;
    }
    if (oq_node_attr(k->node, "axes"))
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "the axes attribute is not supported");
    if (sz) {
        if (oq_rt_tensor_numel(sz) != (int64_t)r)
            return oq_k_error(k, OQ_ERR_INVALID, "sizes must have %zu entries", r);
        const char *kar = oq_node_attr_string(k->node, "keep_aspect_ratio_policy", "stretch");
        if (strcmp(kar, "stretch") != 0)
            return oq_k_error(k, OQ_ERR_UNSUPPORTED, "keep_aspect_ratio_policy %s", kar);
        for (size_t i = 0; i < r; i++) {
            p->out[i] = oq_k_get_int(sz, (int64_t)i);
            p->scale[i] = in[0]->dims[i] ? (double)p->out[i] / (double)in[0]->dims[i] : 1.0;
        }
    } else {
        if (sc) {
            if (oq_rt_tensor_numel(sc) != (int64_t)r)
                return oq_k_error(k, OQ_ERR_INVALID, "scales must have %zu entries", r);
            for (size_t i = 0; i < r; i++)
                p->scale[i] = oq_k_get_f64(sc, (int64_t)i);
        }
        for (size_t i = 0; i < r; i++) {
            if (p->scale[i] <= 0)
                return oq_k_error(k, OQ_ERR_INVALID, "scales must be positive");
            p->out[i] = (int64_t)floor((double)in[0]->dims[i] * (float)p->scale[i]);
        }
    }
    if (roi) {
        if (oq_rt_tensor_numel(roi) != 2 * (int64_t)r)
            return oq_k_error(k, OQ_ERR_INVALID, "roi must have %zu entries", 2 * r);
        for (size_t i = 0; i < 2 * r; i++)
            p->roi[i] = oq_k_get_f64(roi, (int64_t)i);
        p->has_roi = true;
    }
    return OQ_OK;
}

static oq_status infer_resize(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    rs_params p;
    bool need;
    oq_status st = resize_params(k, in, n_in, &p, &need);
    if (st)
        return st;
    if (need)
        return oq_k_defer(k, out, n_out);
    return oq_k_set_out(k, &out[0], in[0]->dtype, p.out, in[0]->rank);
}

/* input coordinate of output coordinate o along an axis */
/* Input coordinate of output coordinate o along an axis, computed in float32 as the
 * ONNX reference (NumPy float32 scales) and onnxruntime do: 3 / 0.6f is 5 in float32
 * but 4.9999998 in double, which changes nearest-neighbour picks. */
/* out_: the output length in * scale, not rounded (what the reference uses for
 * align_corners and tf_crop_and_resize); out_int: the output's actual length (for
 * half_pixel_symmetric's adjustment, out_int / (in * scale)) */
static double src_coord(const char *ctm, double o_, double scale_, int64_t in_, double out_, int64_t out_int,
                        const rs_params *p, size_t axis, size_t rank)
{
    float o = (float)o_, scale = (float)scale_, in = (float)in_, out = (float)out_;
    float r;
    if (strcmp(ctm, "asymmetric") == 0)
        r = o / scale;
    else if (strcmp(ctm, "tf_half_pixel_for_nn") == 0)
        r = (o + 0.5f) / scale;
    else if (strcmp(ctm, "align_corners") == 0)
        r = out == 1 ? 0 : o * (in - 1) / (out - 1);
    else if (strcmp(ctm, "pytorch_half_pixel") == 0)
        r = out > 1 ? (o + 0.5f) / scale - 0.5f : 0;
    else if (strcmp(ctm, "tf_crop_and_resize") == 0) {
        float s = p->has_roi ? (float)p->roi[axis] : 0, e = p->has_roi ? (float)p->roi[axis + rank] : 1;
        r = out > 1 ? s * (in - 1) + o * (e - s) * (in - 1) / (out - 1) : 0.5f * (s + e) * (in - 1);
    } else if (strcmp(ctm, "half_pixel_symmetric") == 0) {
        /* the offset in float, the rest in double, then rounded to float: as onnxruntime
         * (its 0.5 literals are doubles), so a coordinate that lands on a whole number
         * stays on it for nearest's floor / ceil */
        float adj = (float)out_int / (scale * in);
        float c = in / 2.0f, off = c * (1 - adj);
        r = (float)((double)off + ((double)o + 0.5) / (double)scale - 0.5);
    } else {
        r = (o + 0.5f) / scale - 0.5f; /* half_pixel */
    }
    return r;
}

/* Keys cubic convolution kernel with parameter A at distance |d| <= 2 */
static double cubic_w(double d, double A)
{
    d = fabs(d);
    if (d <= 1)
        return ((A + 2) * d - (A + 3)) * d * d + 1;
    if (d < 2)
        return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
    return 0;
}

static int64_t nearest(const char *nm, double x)
{
    if (strcmp(nm, "floor") == 0)
        return (int64_t)floor(x);
    if (strcmp(nm, "ceil") == 0)
        return (int64_t)ceil(x);
    if (strcmp(nm, "round_prefer_ceil") == 0)
        return (int64_t)floor(x + 0.5);
    /* round_prefer_floor (default) */
    return x == floor(x) + 0.5 ? (int64_t)floor(x) : (int64_t)floor(x + 0.5);
}

static oq_status run_resize(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    rs_params p;
    bool need;
    oq_status st = resize_params(k, in, n_in, &p, &need);
    if (st)
        return st;
    const oq_rt_tensor *x = in[0];
    size_t r = x->rank;
    bool old = strcmp(k->node->op_type, "Upsample") == 0 || k->opset < 11;
    const char *mode = oq_node_attr_string(k->node, "mode", "nearest");
    const char *ctm = old ? "asymmetric"
                          : oq_node_attr_string(k->node, "coordinate_transformation_mode",
                                                "half_pixel");
    const char *nm = old ? "floor" : oq_node_attr_string(k->node, "nearest_mode",
                                                         "round_prefer_floor");
    bool linear = strcmp(mode, "linear") == 0 || strcmp(mode, "bilinear") == 0;
    bool cubic = strcmp(mode, "cubic") == 0 || strcmp(mode, "bicubic") == 0;
    if (!linear && !cubic && strcmp(mode, "nearest") != 0)
        return oq_k_error(k, OQ_ERR_INVALID, "unknown mode %s", mode);
    if (!oq_dtype_is_float(x->dtype) && (linear || cubic))
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "%s resize of %s", mode, oq_dtype_name(x->dtype));
    bool excl = oq_node_attr_int(k->node, "exclude_outside", 0) != 0;
    if (linear && excl)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "exclude_outside with linear mode");
    double cubic_a = oq_node_attr_float(k->node, "cubic_coeff_a", -0.75f);
    double extrap = oq_node_attr_float(k->node, "extrapolation_value", 0.0f);
    bool crop = strcmp(ctm, "tf_crop_and_resize") == 0;
    /* antialias (opset 18): linear and cubic stretch their kernel by 1 / scale on the axes
     * that shrink, over as many taps as it then covers (nearest ignores it) */
    bool aa = !old && k->opset >= 18 && oq_node_attr_int(k->node, "antialias", 0) != 0 && (linear || cubic);
    int64_t cs[OQ_RT_MAX_RANK], s = 1;
    for (size_t i = r; i-- > 0;) {
        cs[i] = s;
        s *= x->dims[i];
    }
    /* per-axis tables: ntap taps (source index, weight) per output coordinate: 4 for cubic,
     * 2 for linear, 1 for nearest; with antialias, 2 - 2 * floor(-w / scale) - 2 on a
     * shrinking axis (w = 1 linear, 2 cubic: the ONNX reference's footprint) */
    int ntap = cubic ? 4 : linear ? 2 : 1;
    if (aa)
        for (size_t a = 0; a < r; a++)
            if (p.scale[a] < 1 && p.scale[a] > 0) {
                double n = -2 * floor(-(cubic ? 2.0 : 1.0) / p.scale[a]);
                if (n > 4096)
                    return oq_k_error(k, OQ_ERR_UNSUPPORTED, "antialias with a scale of %g", p.scale[a]);
                ntap = (int)n > ntap ? (int)n : ntap;
            }
    int64_t total = 0;
    for (size_t a = 0; a < r; a++)
        total += out[0].dims[a];
    size_t per = (size_t)ntap * (sizeof(int64_t) + sizeof(double)) + 1;
    int64_t *tidx = oq_k_scratch(k, (size_t)total * per);
    if (!tidx)
        return OQ_ERR_NOMEM;
    double *twt = (double *)(void *)(tidx + total * ntap);
    unsigned char *outside = (unsigned char *)(twt + total * ntap);
    int64_t base[OQ_RT_MAX_RANK];
    int64_t pos = 0;
    for (size_t a = 0; a < r; a++) {
        base[a] = pos;
        int64_t id = x->dims[a];
        for (int64_t o = 0; o < out[0].dims[a]; o++, pos++) {
            /* the length the reference uses: in * scale, not rounded */
            double olen = (double)id * p.scale[a];
            double c = src_coord(ctm, (double)o, p.scale[a], id, olen, out[0].dims[a], &p, a, r);
            int64_t *ti = tidx + pos * ntap;
            double *tw = twt + pos * ntap;
            outside[pos] = crop && (c < 0 || c > (double)(id - 1));
            for (int t = 0; t < ntap; t++) {
                ti[t] = 0;
                tw[t] = 0;
            }
            if (aa && p.scale[a] < 1) {
                /* the ONNX reference: taps b - n/2 + 1 + t around b = ceil(c) - 1 (the pixel
                 * left of c, c itself when c is whole), weights kernel(scale * (t + 1 - n/2 -
                 * ratio)) normalized, edge padding (or excluded, then renormalized) */
                double sc = p.scale[a], w = cubic ? 2.0 : 1.0, ratio = c - floor(c);
                if (ratio == 0)
                    ratio = 1;
                int n = (int)(-2 * floor(-w / sc));
                int64_t b = (int64_t)ceil(c) - 1;
                double sum = 0;
                for (int t = 0; t < n; t++) {
                    double d = sc * ((double)t + 1 - n / 2 - ratio);
                    double cf = cubic ? cubic_w(d, cubic_a) : fmax(0.0, 1 - fabs(d));
                    int64_t src = b - n / 2 + 1 + t;
                    tw[t] = cf;
                    sum += cf;
                    ti[t] = src < 0 ? 0 : src >= id ? id - 1 : src;
                }
                double kept = 0;
                for (int t = 0; t < n; t++) {
                    tw[t] /= sum;
                    int64_t src = b - n / 2 + 1 + t;
                    if (excl && (src < 0 || src >= id))
                        tw[t] = 0;
                    kept += tw[t];
                }
                if (excl && kept != 0)
                    for (int t = 0; t < n; t++)
                        tw[t] /= kept;
            } else if (cubic) {
                if (c == floor(c)) {
                    int64_t n = (int64_t)c;
                    ti[0] = n < 0 ? 0 : n >= id ? id - 1 : n;
                    tw[0] = 1;
                    continue;
                }
                double f = floor(c), t0 = c - f;
                double cf[4] = {cubic_w(t0 + 1, cubic_a), cubic_w(t0, cubic_a),
                                cubic_w(1 - t0, cubic_a), cubic_w(2 - t0, cubic_a)};
                double sum = 0;
                for (int t = 0; t < 4; t++) {
                    int64_t src = (int64_t)f - 1 + t;
                    if (excl && (src < 0 || src >= id))
                        cf[t] = 0;
                    sum += cf[t];
                    ti[t] = src < 0 ? 0 : src >= id ? id - 1 : src; /* edge padding */
                }
                for (int t = 0; t < 4; t++)
                    tw[t] = excl && sum != 0 ? cf[t] / sum : cf[t];
            } else if (linear) {
                double cc = c < 0 ? 0 : c > (double)(id - 1) ? (double)(id - 1) : c;
                int64_t f = (int64_t)floor(cc);
                ti[0] = f;
                ti[1] = f + 1 < id ? f + 1 : f;
                tw[1] = cc - (double)f;
                tw[0] = 1 - tw[1];
            } else {
                int64_t n = nearest(nm, c);
                ti[0] = n < 0 ? 0 : n >= id ? id - 1 : n;
                tw[0] = 1;
            }
        }
    }
    int64_t n = oq_rt_tensor_numel(&out[0]);
    int64_t idx[OQ_RT_MAX_RANK] = {0};
    size_t es = oq_k_elsize(x->dtype);
    if (ntap == 1 && !crop && r >= 1 && es > 0 && n > 0) {
        /* nearest: a gather along the last axis for every row of the others; a row whose
         * source row is the previous row's (an upsampled height) is a copy of it */
        int64_t ow = out[0].dims[r - 1], rows = n / ow, prev = -1;
        const int64_t *lt = tidx + base[r - 1];
        for (int64_t row = 0; row < rows; row++) {
            int64_t off = 0;
            for (size_t a = 0; a + 1 < r; a++)
                off += tidx[base[a] + idx[a]] * cs[a];
            if (off == prev) {
                char *dst = (char *)out[0].data + (size_t)(row * ow) * es;
                memcpy(dst, dst - (size_t)ow * es, (size_t)ow * es);
            } else if (es == 4) {
                const float *src = (const float *)x->data + off;
                float *dst = (float *)out[0].data + row * ow;
                for (int64_t q = 0; q < ow; q++)
                    dst[q] = src[lt[q]];
            } else {
                const char *src = (const char *)x->data + (size_t)off * es;
                char *dst = (char *)out[0].data + (size_t)(row * ow) * es;
                for (int64_t q = 0; q < ow; q++)
                    memcpy(dst + (size_t)q * es, src + (size_t)lt[q] * es, es);
            }
            prev = off;
            for (size_t a = r - 1; a-- > 0;) {
                if (++idx[a] < out[0].dims[a])
                    break;
                idx[a] = 0;
            }
        }
        return OQ_OK;
    }
    int64_t *qs_heap = ntap > 4 ? malloc((size_t)r * (size_t)ntap * sizeof *qs_heap) : NULL;
    if (ntap > 4 && !qs_heap)
        return OQ_ERR_NOMEM;
    for (int64_t o = 0; o < n; o++) {
        bool out_side = false;
        for (size_t a = 0; a < r; a++)
            out_side |= outside[base[a] + idx[a]] != 0;
        if (out_side) {
            oq_k_set_f64(&out[0], o, extrap);
        } else if (ntap == 1) {
            int64_t off = 0;
            for (size_t a = 0; a < r; a++)
                off += tidx[base[a] + idx[a]] * cs[a];
            memcpy((char *)out[0].data + (size_t)o * es, (const char *)x->data + (size_t)off * es,
                   es);
        } else {
            /* only the taps with a nonzero weight on each axis (one on an axis that is not
             * resized), combined axis 0 fastest */
            int nt[OQ_RT_MAX_RANK], ti[OQ_RT_MAX_RANK];
            int64_t qsb[OQ_RT_MAX_RANK * 4], *qs = ntap <= 4 ? qsb : qs_heap;
            bool any = true;
            for (size_t a = 0; a < r; a++) {
                nt[a] = 0;
                ti[a] = 0;
                for (int t = 0; t < ntap; t++) {
                    int64_t q = (base[a] + idx[a]) * ntap + t;
                    if (twt[q] != 0)
                        qs[a * ntap + nt[a]++] = q;
                }
                any &= nt[a] > 0;
            }
            double acc = 0;
            while (any) {
                double w = 1;
                int64_t off = 0;
                for (size_t a = 0; a < r; a++) {
                    int64_t q = qs[a * ntap + ti[a]];
                    w *= twt[q];
                    off += tidx[q] * cs[a];
                }
                if (w != 0)
                    acc += w * (x->dtype == OQ_DTYPE_FLOAT ? (double)((const float *)x->data)[off] : oq_k_get_f64(x, off));
                size_t a = 0;
                for (; a < r; a++) {
                    if (++ti[a] < nt[a])
                        break;
                    ti[a] = 0;
                }
                any = a < r;
            }
            oq_k_set_f64(&out[0], o, acc);
        }
        for (size_t a = r; a-- > 0;) {
            if (++idx[a] < out[0].dims[a])
                break;
            idx[a] = 0;
        }
    }
    free(qs_heap);
    return OQ_OK;
}

/* ------------------------------------------------------------------ RoiAlign ----- */

static oq_status infer_roi(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, 3))
        return oq_k_defer(k, out, n_out);
    const oq_rt_tensor *x = in[0], *rois = in[1], *bi = in[2];
    if (x->rank != 4 || rois->rank != 2 || rois->dims[1] != 4 || bi->rank != 1 ||
        bi->dims[0] != rois->dims[0])
        return oq_k_error(k, OQ_ERR_INVALID, "X must be [N,C,H,W], rois [R,4], batch_indices [R]");
    int64_t d[4] = {rois->dims[0], x->dims[1], oq_node_attr_int(k->node, "output_height", 1),
                    oq_node_attr_int(k->node, "output_width", 1)};
    return oq_k_set_out(k, &out[0], x->dtype, d, 4);
}

/* as onnxruntime and the ONNX reference: bilinear samples on a grid per bin; "max"
 * takes the largest weighted corner value of each sample */
static oq_status run_roi(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *X = in[0], *R = in[1], *BI = in[2];
    int64_t N = X->dims[0], C = X->dims[1], H = X->dims[2], W = X->dims[3];
    int64_t nr = R->dims[0], oh = out[0].dims[2], ow = out[0].dims[3];
    bool is_max = strcmp(oq_node_attr_string(k->node, "mode", "avg"), "max") == 0;
    int64_t sr = oq_node_attr_int(k->node, "sampling_ratio", 0);
    double scale = oq_node_attr_float(k->node, "spatial_scale", 1.0f);
    const char *ctm = oq_node_attr_string(k->node, "coordinate_transformation_mode",
                                          k->opset >= 16 ? "half_pixel" : "output_half_pixel");
    bool half = strcmp(ctm, "half_pixel") == 0;
    const float *xd = X->data;
    float *y = out[0].data;
    for (int64_t r = 0; r < nr; r++) {
        int64_t b = oq_k_get_int(BI, r);
        if (b < 0 || b >= N)
            return oq_k_error(k, OQ_ERR_INVALID, "batch index %lld out of range", (long long)b);
        double off = half ? 0.5 : 0.0;
        double x1 = oq_k_get_f64(R, r * 4) * scale - off, y1 = oq_k_get_f64(R, r * 4 + 1) * scale - off;
        double x2 = oq_k_get_f64(R, r * 4 + 2) * scale - off, y2 = oq_k_get_f64(R, r * 4 + 3) * scale - off;
        double rw = x2 - x1, rh = y2 - y1;
        if (!half) {
            rw = rw > 1 ? rw : 1;
            rh = rh > 1 ? rh : 1;
        }
        double bh = rh / (double)oh, bw = rw / (double)ow;
        int64_t gh = sr > 0 ? sr : (int64_t)ceil(rh / (double)oh);
        int64_t gw = sr > 0 ? sr : (int64_t)ceil(rw / (double)ow);
        double count = (double)(gh * gw > 1 ? gh * gw : 1);
        for (int64_t c = 0; c < C; c++) {
            const float *img = xd + (b * C + c) * H * W;
            for (int64_t ph = 0; ph < oh; ph++)
                for (int64_t pw = 0; pw < ow; pw++) {
                    double acc = 0;
                    bool first = true;
                    for (int64_t iy = 0; iy < gh; iy++)
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double yy = y1 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                            double xx = x1 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                            double v = 0;
                            if (!(yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W)) {
                                if (yy <= 0) yy = 0;
                                if (xx <= 0) xx = 0;
                                int64_t yl = (int64_t)yy, xl = (int64_t)xx, yh, xh;
                                if (yl >= H - 1) { yh = yl = H - 1; yy = (double)yl; } else yh = yl + 1;
                                if (xl >= W - 1) { xh = xl = W - 1; xx = (double)xl; } else xh = xl + 1;
                                double ly = yy - (double)yl, lx = xx - (double)xl;
                                double hy = 1 - ly, hx = 1 - lx;
                                double v1 = hy * hx * img[yl * W + xl], v2 = hy * lx * img[yl * W + xh];
                                double v3 = ly * hx * img[yh * W + xl], v4 = ly * lx * img[yh * W + xh];
                                if (is_max) {
                                    v = v1 > v2 ? v1 : v2;
                                    v = v > v3 ? v : v3;
                                    v = v > v4 ? v : v4;
                                } else {
                                    v = v1 + v2 + v3 + v4;
                                }
                            }
                            if (is_max)
                                acc = first || v > acc ? v : acc;
                            else
                                acc += v;
                            first = false;
                        }
                    y[((r * C + c) * oh + ph) * ow + pw] = (float)(is_max ? acc : acc / count);
                }
        }
    }
    return OQ_OK;
}

const oq_kernel oq_kernels_sample[] = {
    {"", "RoiAlign", 10, 0, 0, OQ_T(FLOAT), NULL, NULL, infer_roi, run_roi, NULL, 3},
    {"", "Resize", 10, 0, 0, OQ_T_ALL, NULL, NULL, infer_resize, run_resize, NULL, 1},
    {"", "Upsample", 7, 9, 0, OQ_T_ALL, NULL, NULL, infer_resize, run_resize, NULL, 1},
    {"", "GridSample", 16, 0, 0, OQ_T(FLOAT), NULL, NULL, infer_gs, run_gs, NULL, 2},
};
OQ_KERNEL_TABLE_END(sample);
