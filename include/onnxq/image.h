/* onnxq — images as model input (calibration without code: --calib-images).
 *
 * Decoding: PNG (libpng) and JPEG (libjpeg), recognised by their signature, not by the
 * file name. Every image is converted to 8-bit RGB: grey is replicated, palettes are
 * expanded, 16-bit samples are scaled to 8 bits with rounding (v * 255 / 65535), alpha is
 * dropped (not composited). CMYK JPEGs are refused.
 *
 * Tensor conversion (oq_image_to_tensor), in this order:
 *  1. resize to height x width with bilinear interpolation, half-pixel centres
 *     (align_corners = false): output pixel (y, x) samples the source at
 *         sy = (y + 0.5) * in_h / out_h - 0.5,   sx = (x + 0.5) * in_w / out_w - 0.5,
 *     clamped to [0, in - 1], weights (1 - f, f) between floor and floor + 1. This is
 *     cv2.resize INTER_LINEAR and ONNX Resize(linear, half_pixel) with edge clamping;
 *     there is no antialiasing when shrinking (PIL's BILINEAR filter widens its support
 *     when shrinking, so it differs there). Computed in float from the 8-bit samples
 *     (cv2 rounds back to uint8; we do not).
 *     Each result is clamped to the range of its four source pixels (float rounding could
 *     leave it by one step: a flat 255 image gave 255.00002);
 *  2. optional RGB -> BGR channel swap (or 1 channel: grey = 0.299 R + 0.587 G + 0.114 B,
 *     clamped to the range of R, G, B, so a grey pixel keeps its value exactly);
 *  3. v = (pixel / scale - mean[c]) / std[c], c in the output channel order;
 *  4. layout NCHW ([1, C, H, W]) or NHWC ([1, H, W, C]).
 *
 * A corrupt, truncated or unsupported file gives one error naming the file; the library
 * never exits (libjpeg's and libpng's error handlers are replaced).
 */
#ifndef ONNXQ_IMAGE_H
#define ONNXQ_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnxq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A decoded image: 8-bit RGB, interleaved, row-major (height rows of width*3 bytes). */
typedef struct oq_image {
    int64_t width, height;
    uint8_t *rgb; /* malloc'ed; oq_image_free releases it */
} oq_image;

/* Read a PNG or JPEG file. Images larger than 2^28 pixels are refused. */
oq_status oq_image_read(const char *path, oq_image *img, oq_diag *d);
/* Decode from memory; `name` is used in messages. */
oq_status oq_image_decode(const void *data, size_t size, const char *name, oq_image *img,
                          oq_diag *d);
void oq_image_free(oq_image *img);

typedef enum oq_image_layout { OQ_LAYOUT_NCHW = 0, OQ_LAYOUT_NHWC = 1 } oq_image_layout;

typedef struct oq_image_opts {
    int64_t height, width;  /* output size (> 0) */
    int channels;           /* 3 (default) or 1 */
    bool bgr;               /* swap to B, G, R (3 channels only) */
    oq_image_layout layout; /* default NCHW */
    float scale;            /* pixels are divided by this first (default 255) */
    float mean[3];          /* default 0 */
    float std[3];           /* default 1 */
} oq_image_opts;

void oq_image_opts_default(oq_image_opts *o, int64_t height, int64_t width);
/* Parse three numbers "a,b,c" (per-channel mean or std); false when malformed. */
bool oq_image_parse_triple(const char *s, float out[3]);

/* Number of floats oq_image_to_tensor writes: channels * height * width (-1 if bad). */
int64_t oq_image_tensor_numel(const oq_image_opts *o);

/* Convert a decoded image; out holds oq_image_tensor_numel(o) floats. */
oq_status oq_image_to_tensor(const oq_image *img, const oq_image_opts *o, float *out,
                             oq_diag *d);

/* Read + convert in one call. */
oq_status oq_image_load(const char *path, const oq_image_opts *o, float *out, oq_diag *d);

/* The image files of a directory for --calib-images: regular files whose name ends in
 * .png, .jpg or .jpeg (any case), sorted by name (strcmp), as full paths. *paths is one
 * malloc'ed array of malloc'ed strings; free with oq_image_dir_free. An empty directory
 * is an error naming it. */
oq_status oq_image_dir_list(const char *dir, char ***paths, size_t *count, oq_diag *d);
void oq_image_dir_free(char **paths, size_t count);

/* The resize alone, on float planes: src is in_h x in_w x c interleaved, dst out_h x
 * out_w x c interleaved (the convention above). */
void oq_resize_bilinear(const float *src, int64_t in_h, int64_t in_w, int c, float *dst,
                        int64_t out_h, int64_t out_w);

#ifdef __cplusplus
}
#endif
#endif
