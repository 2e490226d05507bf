/* The calibration sample source of a pass's options (data=DIR, images=DIR with its
 * conversion options, or random=N), shared by calibrate and quantize-weights. */
#include "pass-impl.h"

#include "onnxq/calib.h"

#include <stdlib.h>
#include <string.h>

/* "HxW" -> height, width; "" -> 0, 0. */
static bool parse_size(const char *s, int64_t *h, int64_t *w)
{
    *h = *w = 0;
    if (!s || !*s)
        return true;
    char *end;
    long long a = strtoll(s, &end, 10);
    if (end == s || (*end != 'x' && *end != 'X'))
        return false;
    const char *t = end + 1;
    long long b = strtoll(t, &end, 10);
    if (end == t || *end || a <= 0 || b <= 0 || a > 1 << 16 || b > 1 << 16)
        return false;
    *h = a;
    *w = b;
    return true;
}

bool oq_pass_calib_source_given(const oq_pass_options *opts)
{
    return *oq_pass_opt_string(opts, "data", "") || *oq_pass_opt_string(opts, "images", "") ||
           oq_pass_opt_int(opts, "random", 0) > 0 || oq_pass_opt_int(opts, "feed", 0) > 0;
}

oq_status oq_pass_calib_source(const oq_pass_options *opts, const char *who, oq_calib_source **out, oq_diag *d)
{
    *out = NULL;
    const char *data = oq_pass_opt_string(opts, "data", "");
    const char *images = oq_pass_opt_string(opts, "images", "");
    int64_t nrand = oq_pass_opt_int(opts, "random", 0);
    int64_t feed = oq_pass_opt_int(opts, "feed", 0);
    int nsrc = (*data != 0) + (*images != 0) + (nrand > 0) + (feed > 0);
    if (nsrc != 1)
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: give exactly one of data=DIR, images=DIR, random=N (got %d)", who,
                             nsrc);
    int64_t h, w;
    if (!parse_size(oq_pass_opt_string(opts, "size", ""), &h, &w))
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: size must be HxW, e.g. 224x224", who);
    oq_calib_source *src = NULL;
    oq_status st;
    if (feed > 0) {
        st = oq_calib_source_from_feed_id((uint64_t)feed, &src, d);
    } else if (*data) {
        st = oq_calib_source_dir(data, &src, d);
    } else if (*images) {
        oq_image_opts io;
        oq_image_opts_default(&io, h, w); /* 0x0: the model input's fixed H, W */
        if (oq_pass_opt_bool(opts, "grey", false))
            io.channels = 1;
        if (!oq_image_parse_triple(oq_pass_opt_string(opts, "mean", "0,0,0"), io.mean) ||
            !oq_image_parse_triple(oq_pass_opt_string(opts, "std", "1,1,1"), io.std))
            return oq_diag_error(d, OQ_ERR_USAGE, "%s: mean and std are three numbers a,b,c", who);
        for (int i = 0; i < 3; i++)
            if (!(io.std[i] != 0))
                return oq_diag_error(d, OQ_ERR_USAGE, "%s: std must not be 0", who);
        io.bgr = oq_pass_opt_bool(opts, "bgr", false);
        const char *lay = oq_pass_opt_string(opts, "layout", "nchw");
        if (strcmp(lay, "nchw") == 0)
            io.layout = OQ_LAYOUT_NCHW;
        else if (strcmp(lay, "nhwc") == 0)
            io.layout = OQ_LAYOUT_NHWC;
        else
            return oq_diag_error(d, OQ_ERR_USAGE, "%s: layout \"%s\" unknown (nchw, nhwc)", who, lay);
        io.scale = (float)oq_pass_opt_float(opts, "scale", 255.0);
        if (!(io.scale > 0))
            return oq_diag_error(d, OQ_ERR_USAGE, "%s: scale must be > 0", who);
        st = oq_calib_source_images(images, &io, &src, d);
    } else {
        st = oq_calib_source_random((uint64_t)nrand, (uint64_t)oq_pass_opt_int(opts, "seed", 1), h, w, &src, d);
    }
    if (st == OQ_OK)
        st = oq_calib_source_set_dims(src, oq_pass_opt_string(opts, "dims", ""), d);
    if (st == OQ_OK)
        st = oq_calib_source_set_values(src, oq_pass_opt_string(opts, "values", ""), d);
    if (st != OQ_OK) {
        oq_calib_source_free(src);
        return st;
    }
    int64_t lim = oq_pass_opt_int(opts, "max-samples", 0);
    if (lim > 0)
        oq_calib_source_limit(src, (uint64_t)lim);
    *out = src;
    return OQ_OK;
}
