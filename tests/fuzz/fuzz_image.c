/* libFuzzer target for the image decoder (PNG via libpng, JPEG via libjpeg, as read by
 * --calib-images): bytes -> oq_image_decode -> oq_image_to_tensor. Any input may be
 * rejected, but:
 *   - nothing may crash, exit (libpng/libjpeg error handlers) or trip ASan/UBSan,
 *   - a rejected input must leave no pixels and record at least one error,
 *   - an accepted image has width, height > 0 and width*height*3 readable bytes (all
 *     read), and converts to tensors (3-channel NCHW resized down, 1-channel NHWC
 *     resized up) whose values are finite and within [0, 1] for scale 255, mean 0,
 *     std 1. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "onnxq/image.h"
#include "onnxq/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void convert(const oq_image *img, int64_t h, int64_t w, int channels,
                    oq_image_layout layout, oq_diag *d)
{
    oq_image_opts o;
    oq_image_opts_default(&o, h, w);
    o.channels = channels;
    o.layout = layout;
    int64_t n = oq_image_tensor_numel(&o);
    if (n != channels * h * w)
        abort();
    float *out = malloc((size_t)n * sizeof *out);
    if (!out)
        return;
    if (oq_image_to_tensor(img, &o, out, d) != OQ_OK)
        abort();
    for (int64_t i = 0; i < n; i++)
        if (!(out[i] >= 0.0f && out[i] <= 1.0f))
            abort();
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_image img = {0};
    oq_status st = oq_image_decode(data, size, "fuzz.img", &img, &d);
    if (st != OQ_OK) {
        if (d.errors == 0 || img.rgb)
            abort();
        oq_diag_free(&d);
        return 0;
    }
    if (img.width <= 0 || img.height <= 0 || !img.rgb)
        abort();
    unsigned sum = 0;
    for (int64_t i = 0; i < img.width * img.height * 3; i++)
        sum += img.rgb[i];
    if (sum == 0xFFFFFFFFu)
        d.warnings++;
    convert(&img, 3, 2, 3, OQ_LAYOUT_NCHW, &d);
    convert(&img, img.height < 64 ? img.height + 1 : 5, img.width < 64 ? img.width + 2 : 7, 1,
            OQ_LAYOUT_NHWC, &d);
    oq_image_free(&img);
    oq_diag_free(&d);
    return 0;
}
