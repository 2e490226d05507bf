/* GridSample (2-D; bilinear, nearest, bicubic; zeros, border, reflection padding;
 * align_corners) with PyTorch's grid_sample semantics, as the ONNX spec defines. */
#include <math.h>
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

const oq_kernel oq_kernels_sample[] = {
    {"", "GridSample", 16, 0, 0, OQ_T(FLOAT), NULL, NULL, infer_gs, run_gs, NULL, 2},
};
OQ_KERNEL_TABLE_END(sample);
