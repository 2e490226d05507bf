/* Signal processing: DFT, STFT (direct O(n^2) transforms in double), HannWindow
 * HammingWindow BlackmanWindow. */
#include <math.h>
#include <string.h>

#include "exec/kernel.h"

static oq_status infer_window(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = (int32_t)oq_node_attr_int(k->node, "output_datatype", OQ_DTYPE_FLOAT);
    if (!in[0]->data)
        return oq_k_defer(k, out, n_out);
    int64_t n = oq_k_get_int(in[0], 0);
    if (n < 0)
        return oq_k_error(k, OQ_ERR_INVALID, "negative size");
    return oq_k_set_out(k, &out[0], out[0].dtype, &n, 1);
}

static oq_status run_window(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    int64_t N = out[0].dims[0];
    bool periodic = oq_node_attr_int(k->node, "periodic", 1) != 0;
    double D = periodic ? (double)N : (double)(N - 1);
    const char *op = k->node->op_type;
    const double pi = 3.14159265358979323846;
    for (int64_t n = 0; n < N; n++) {
        double x = D > 0 ? 2 * pi * (double)n / D : 0, v;
        if (strcmp(op, "HannWindow") == 0)
            v = 0.5 - 0.5 * cos(x);
        else if (strcmp(op, "HammingWindow") == 0)
            v = 25.0 / 46.0 - (1 - 25.0 / 46.0) * cos(x);
        else
            v = 0.42 - 0.5 * cos(x) + 0.08 * cos(2 * x);
        oq_k_set_f64(&out[0], n, v);
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ DFT ---------- */

static const double TWO_PI = 6.28318530717958647692;

static oq_status dft_geo(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, int64_t *axis,
                         int64_t *len, int64_t *out_len, bool *need)
{
    const oq_rt_tensor *x = in[0];
    *need = false;
    if (x->rank < 2 || (x->dims[x->rank - 1] != 1 && x->dims[x->rank - 1] != 2))
        return oq_k_error(k, OQ_ERR_INVALID, "input must end with a dimension of 1 (real) or 2 "
                          "(complex)");
    int64_t a = oq_node_attr_int(k->node, "axis", 1);
    if (a < 0)
        a += (int64_t)x->rank - 1;
    if (a < 0 || a >= (int64_t)x->rank - 1)
        return oq_k_error(k, OQ_ERR_INVALID, "axis out of range");
    *axis = a;
    *len = x->dims[a];
    if (n_in > 1 && in[1]) {
        if (!in[1]->data) {
            *need = true;
            return OQ_OK;
        }
        *len = oq_k_get_int(in[1], 0);
        if (*len <= 0)
            return oq_k_error(k, OQ_ERR_INVALID, "dft_length must be positive");
    }
    bool onesided = oq_node_attr_int(k->node, "onesided", 0) != 0;
    *out_len = onesided ? *len / 2 + 1 : *len;
    return OQ_OK;
}

static oq_status infer_dft(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    int64_t axis = 0, len = 0, olen = 0;
    bool need;
    oq_status st = dft_geo(k, in, n_in, &axis, &len, &olen, &need);
    if (st)
        return st;
    if (need)
        return oq_k_defer(k, out, n_out);
    int64_t d[OQ_RT_MAX_RANK];
    memcpy(d, in[0]->dims, in[0]->rank * sizeof(int64_t));
    d[axis] = olen;
    d[in[0]->rank - 1] = 2;
    return oq_k_set_out(k, &out[0], in[0]->dtype, d, in[0]->rank);
}

/* DFT of length `len` of the n_sig complex samples (re, im), zero-padded or truncated
 * to len; writes the first olen bins. Inverse divides by len. */
static void dft1(const double *re, const double *im, int64_t n_sig, int64_t len, int64_t olen,
                 bool inverse, double *ore, double *oim)
{
    double sign = inverse ? 1.0 : -1.0;
    for (int64_t kk = 0; kk < olen; kk++) {
        double sr = 0, si = 0;
        for (int64_t j = 0; j < n_sig && j < len; j++) {
            double ang = sign * TWO_PI * (double)((j * kk) % len) / (double)len;
            double c = cos(ang), s = sin(ang);
            sr += re[j] * c - im[j] * s;
            si += re[j] * s + im[j] * c;
        }
        ore[kk] = inverse ? sr / (double)len : sr;
        oim[kk] = inverse ? si / (double)len : si;
    }
}

static oq_status run_dft(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    int64_t axis = 0, len = 0, olen = 0;
    bool need;
    oq_status st = dft_geo(k, in, n_in, &axis, &len, &olen, &need);
    if (st)
        return st;
    bool inverse = oq_node_attr_int(k->node, "inverse", 0) != 0;
    int64_t cin = x->dims[x->rank - 1], n = x->dims[axis], outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; i++)
        outer *= x->dims[i];
    for (size_t i = (size_t)axis + 1; i + 1 < x->rank; i++)
        inner *= x->dims[i];
    int64_t m = n > len ? n : len;
    double *buf = oq_k_scratch(k, (size_t)(2 * m + 2 * olen + 4) * sizeof(double));
    if (!buf)
        return OQ_ERR_NOMEM;
    double *re = buf, *im = buf + m, *ore = im + m, *oim = ore + olen;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            for (int64_t j = 0; j < n; j++) {
                int64_t src = ((o * n + j) * inner + i) * cin;
                re[j] = oq_k_get_f64(x, src);
                im[j] = cin == 2 ? oq_k_get_f64(x, src + 1) : 0;
            }
            dft1(re, im, n, len, olen, inverse, ore, oim);
            for (int64_t kk = 0; kk < olen; kk++) {
                int64_t dst = ((o * olen + kk) * inner + i) * 2;
                oq_k_set_f64(&out[0], dst, ore[kk]);
                oq_k_set_f64(&out[0], dst + 1, oim[kk]);
            }
        }
    return OQ_OK;
}

/* ------------------------------------------------------------------ STFT --------- */

static oq_status stft_geo(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, int64_t *step,
                          int64_t *fl, int64_t *frames, int64_t *bins, bool *need)
{
    const oq_rt_tensor *x = in[0], *win = n_in > 2 ? in[2] : NULL, *flt = n_in > 3 ? in[3] : NULL;
    *need = !in[1]->data || (flt && !flt->data);
    if (*need)
        return OQ_OK;
    if (x->rank != 3 || (x->dims[2] != 1 && x->dims[2] != 2))
        return oq_k_error(k, OQ_ERR_INVALID, "signal must be [batch, length, 1 or 2]");
    *step = oq_k_get_int(in[1], 0);
    *fl = flt ? oq_k_get_int(flt, 0) : win ? win->dims[0] : 0;
    if (*step <= 0 || *fl <= 0 || *fl > x->dims[1] || (win && win->dims[0] != *fl))
        return oq_k_error(k, OQ_ERR_INVALID, "bad frame_step, frame_length or window");
    *frames = (x->dims[1] - *fl) / *step + 1;
    bool onesided = oq_node_attr_int(k->node, "onesided", 1) != 0 && x->dims[2] == 1;
    *bins = onesided ? *fl / 2 + 1 : *fl;
    return OQ_OK;
}

static oq_status infer_stft(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, n_in))
        return oq_k_defer(k, out, n_out);
    int64_t step = 0, fl = 0, frames = 0, bins = 0;
    bool need;
    oq_status st = stft_geo(k, in, n_in, &step, &fl, &frames, &bins, &need);
    if (st)
        return st;
    if (need)
        return oq_k_defer(k, out, n_out);
    int64_t d[4] = {in[0]->dims[0], frames, bins, 2};
    return oq_k_set_out(k, &out[0], in[0]->dtype, d, 4);
}

static oq_status run_stft(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0], *win = n_in > 2 ? in[2] : NULL;
    int64_t step = 0, fl = 0, frames = 0, bins = 0;
    bool need;
    oq_status st = stft_geo(k, in, n_in, &step, &fl, &frames, &bins, &need);
    if (st)
        return st;
    int64_t B = x->dims[0], N = x->dims[1], c = x->dims[2];
    double *buf = oq_k_scratch(k, (size_t)(2 * fl + 2 * bins + 4) * sizeof(double));
    if (!buf)
        return OQ_ERR_NOMEM;
    double *re = buf, *im = buf + fl, *ore = im + fl, *oim = ore + bins;
    for (int64_t b = 0; b < B; b++)
        for (int64_t f = 0; f < frames; f++) {
            for (int64_t j = 0; j < fl; j++) {
                int64_t src = (b * N + f * step + j) * c;
                double w = win ? oq_k_get_f64(win, j) : 1.0;
                re[j] = oq_k_get_f64(x, src) * w;
                im[j] = c == 2 ? oq_k_get_f64(x, src + 1) * w : 0;
            }
            dft1(re, im, fl, fl, bins, false, ore, oim);
            for (int64_t kk = 0; kk < bins; kk++) {
                int64_t dst = ((b * frames + f) * bins + kk) * 2;
                oq_k_set_f64(&out[0], dst, ore[kk]);
                oq_k_set_f64(&out[0], dst + 1, oim[kk]);
            }
        }
    return OQ_OK;
}

/* ------------------------------------------------------------------ MelWeightMatrix */

static oq_status infer_mel(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = (int32_t)oq_node_attr_int(k->node, "output_datatype", OQ_DTYPE_FLOAT);
    if (!oq_k_data_known(in, 5))
        return oq_k_defer(k, out, n_out);
    int64_t bins = oq_k_get_int(in[0], 0), dft = oq_k_get_int(in[1], 0);
    if (bins <= 0 || dft <= 0 || oq_k_get_int(in[2], 0) <= 0)
        return oq_k_error(k, OQ_ERR_INVALID, "num_mel_bins, dft_length, sample_rate must be > 0");
    int64_t d[2] = {dft / 2 + 1, bins};
    return oq_k_set_out(k, &out[0], out[0].dtype, d, 2);
}

/* triangular filters between mel-spaced frequencies, as the ONNX reference: the edge
 * mels in float32, the bin positions in double, floored to spectrogram bins */
static oq_status run_mel(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    int64_t nm = out[0].dims[1], ns = out[0].dims[0];
    int64_t dft = oq_k_get_int(in[1], 0), rate = oq_k_get_int(in[2], 0);
    float lo = (float)oq_k_get_f64(in[3], 0), hi = (float)oq_k_get_f64(in[4], 0);
    float lo_mel = 2595.0f * log10f(1.0f + lo / 700.0f);
    float hi_mel = 2595.0f * log10f(1.0f + hi / 700.0f);
    float step = (hi_mel - lo_mel) / (float)(nm + 2);
    int64_t *fb = oq_k_scratch(k, (size_t)(nm + 2) * sizeof(int64_t));
    if (!fb)
        return OQ_ERR_NOMEM;
    for (int64_t i = 0; i < nm + 2; i++) {
        double f = (double)i * (double)step + (double)lo_mel;
        f = 700.0 * (pow(10.0, f / 2595.0) - 1.0);
        fb[i] = (int64_t)floor((double)(dft + 1) * f / (double)rate);
    }
    memset(out[0].data, 0, (size_t)out[0].nbytes);
    for (int64_t i = 0; i < nm; i++) {
        int64_t l = fb[i], c = fb[i + 1], h = fb[i + 2];
        if (l < 0 || c < l || h < c || c >= ns || h > ns)
            return oq_k_error(k, OQ_ERR_INVALID, "filter %lld falls outside the spectrogram",
                              (long long)i);
        if (c == l)
            oq_k_set_f64(&out[0], c * nm + i, 1);
        else
            for (int64_t j = l; j <= c; j++)
                oq_k_set_f64(&out[0], j * nm + i, (double)(j - l) / (double)(c - l));
        if (h > c)
            for (int64_t j = c; j < h; j++)
                oq_k_set_f64(&out[0], j * nm + i, (double)(h - j) / (double)(h - c));
    }
    return OQ_OK;
}

#define I OQ_T(INT32) | OQ_T(INT64)
const oq_kernel oq_kernels_signal[] = {
    {"", "DFT", 17, 0, 0, OQ_T_FLOATS, NULL, NULL, infer_dft, run_dft, NULL, 1},
    {"", "MelWeightMatrix", 17, 0, 0, I, NULL, NULL, infer_mel, run_mel, NULL, 5},
    {"", "STFT", 17, 0, 0, OQ_T_FLOATS, NULL, NULL, infer_stft, run_stft, NULL, 2},
    {"", "HannWindow", 17, 0, 0, I, NULL, NULL, infer_window, run_window, NULL, 1},
    {"", "HammingWindow", 17, 0, 0, I, NULL, NULL, infer_window, run_window, NULL, 1},
    {"", "BlackmanWindow", 17, 0, 0, I, NULL, NULL, infer_window, run_window, NULL, 1},
};
OQ_KERNEL_TABLE_END(signal);
