/* PNG (libpng) and JPEG (libjpeg) decoding to 8-bit RGB, bilinear resize and conversion
 * to a normalised float tensor. Conventions: include/onnxq/image.h. */
#include "onnxq/image.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>
#include <jerror.h>

#include "ir/grow.h"

#define MAX_PIXELS ((int64_t)1 << 28)
/* libjpeg's working memory: a progressive 8192x8192 RGB image needs about 400 MB */
#define JPEG_MAX_MEMORY (512L << 20)

void oq_image_free(oq_image *img)
{
    if (!img)
        return;
    free(img->rgb);
    img->rgb = NULL;
    img->width = img->height = 0;
}

static oq_status check_dims(int64_t w, int64_t h, const char *name, oq_diag *d)
{
    if (w <= 0 || h <= 0)
        return oq_diag_error(d, OQ_ERR_PARSE, "%s: image has size %" PRId64 "x%" PRId64, name,
                             w, h);
    if (w > MAX_PIXELS / h)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED,
                             "%s: image of %" PRId64 "x%" PRId64 " pixels is too large", name, w,
                             h);
    return OQ_OK;
}

/* -------------------------------------------------------------------- PNG ---- */

/* All state that changes after setjmp lives here, on the heap. */
typedef struct png_ctx {
    const uint8_t *data;
    size_t size, pos;
    char msg[256];
    uint8_t *pixels;
    png_bytep *rows;
} png_ctx;

static void png_on_error(png_structp png, png_const_charp msg)
{
    png_ctx *c = png_get_error_ptr(png);
    snprintf(c->msg, sizeof(c->msg), "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static void png_read_mem(png_structp png, png_bytep out, png_size_t n)
{
    png_ctx *c = png_get_io_ptr(png);
    if (n > c->size - c->pos)
        png_error(png, "file is truncated");
    memcpy(out, c->data + c->pos, n);
    c->pos += n;
}

static oq_status decode_png(const uint8_t *data, size_t size, const char *name, oq_image *img,
                            oq_diag *d)
{
    png_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return oq_diag_error(d, OQ_ERR_NOMEM, "%s: out of memory", name);
    c->data = data;
    c->size = size;
    oq_status st = OQ_OK;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, c, png_on_error,
                                             png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
        free(c);
        return oq_diag_error(d, OQ_ERR_NOMEM, "%s: out of memory", name);
    }
    if (setjmp(png_jmpbuf(png))) {
        st = oq_diag_error(d, OQ_ERR_PARSE, "%s: corrupt PNG: %s", name, c->msg);
        goto done;
    }
    png_set_read_fn(png, c, png_read_mem);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int ct = png_get_color_type(png, info), bd = png_get_bit_depth(png, info);
    if ((st = check_dims((int64_t)w, (int64_t)h, name, d)) != OQ_OK)
        goto done;
    if (ct == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (ct == PNG_COLOR_TYPE_GRAY && bd < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (bd == 16)
        png_set_scale_16(png);
    if (ct == PNG_COLOR_TYPE_GRAY || ct == PNG_COLOR_TYPE_GRAY_ALPHA)
        png_set_gray_to_rgb(png);
    if (ct & PNG_COLOR_MASK_ALPHA)
        png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)w * 3) {
        st = oq_diag_error(d, OQ_ERR_UNSUPPORTED, "%s: unsupported PNG pixel format", name);
        goto done;
    }
    c->pixels = malloc((size_t)w * h * 3);
    c->rows = malloc((size_t)h * sizeof(png_bytep));
    if (!c->pixels || !c->rows) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "%s: out of memory", name);
        goto done;
    }
    for (png_uint_32 y = 0; y < h; y++)
        c->rows[y] = c->pixels + (size_t)y * w * 3;
    png_read_image(png, c->rows);
    png_read_end(png, NULL);
    img->width = w;
    img->height = h;
    img->rgb = c->pixels;
    c->pixels = NULL;
done:
    png_destroy_read_struct(&png, &info, NULL);
    free(c->pixels);
    free(c->rows);
    free(c);
    return st;
}

/* ------------------------------------------------------------------- JPEG ---- */

typedef struct jpg_ctx {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr jerr;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
    char warn[JMSG_LENGTH_MAX];
    uint8_t *pixels;
    bool created;
} jpg_ctx;

static void jpg_error_exit(j_common_ptr ci)
{
    jpg_ctx *c = (jpg_ctx *)ci->client_data;
    ci->err->format_message(ci, c->msg);
    longjmp(c->jb, 1);
}

static void jpg_emit(j_common_ptr ci, int level)
{
    if (level < 0) { /* a warning: corrupt data, premature end of file */
        jpg_ctx *c = (jpg_ctx *)ci->client_data;
        if (ci->err->num_warnings == 0)
            ci->err->format_message(ci, c->warn);
        ci->err->num_warnings++;
    }
}

static void jpg_output(j_common_ptr ci)
{
    (void)ci;
}

static oq_status decode_jpeg(const uint8_t *data, size_t size, const char *name, oq_image *img,
                             oq_diag *d)
{
    jpg_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return oq_diag_error(d, OQ_ERR_NOMEM, "%s: out of memory", name);
    oq_status st = OQ_OK;
    c->cinfo.err = jpeg_std_error(&c->jerr);
    c->jerr.error_exit = jpg_error_exit;
    c->jerr.emit_message = jpg_emit;
    c->jerr.output_message = jpg_output;
    c->cinfo.client_data = c;
    if (setjmp(c->jb)) {
        if (c->jerr.msg_code == JERR_NO_BACKING_STORE) /* over JPEG_MAX_MEMORY */
            st = oq_diag_error(d, OQ_ERR_UNSUPPORTED, "%s: JPEG needs more than %d MB to decode "
                               "(a progressive image this large is not supported)", name,
                               (int)(JPEG_MAX_MEMORY >> 20));
        else
            st = oq_diag_error(d, OQ_ERR_PARSE, "%s: corrupt JPEG: %s", name, c->msg);
        goto done;
    }
    jpeg_create_decompress(&c->cinfo);
    c->cinfo.client_data = c; /* jpeg_create_decompress clears the struct */
    c->created = true;
    jpeg_mem_src(&c->cinfo, data, (unsigned long)size);
    /* libjpeg's own buffers (a progressive image keeps every coefficient of the whole
     * image) are capped: past the cap it fails instead of using a backing store */
    c->cinfo.mem->max_memory_to_use = JPEG_MAX_MEMORY;
    jpeg_read_header(&c->cinfo, TRUE);
    /* the declared size before any buffer is sized from it */
    if ((st = check_dims(c->cinfo.image_width, c->cinfo.image_height, name, d)) != OQ_OK)
        goto done;
    if (c->cinfo.jpeg_color_space == JCS_CMYK || c->cinfo.jpeg_color_space == JCS_YCCK) {
        st = oq_diag_error(d, OQ_ERR_UNSUPPORTED, "%s: CMYK JPEG images are not supported",
                           name);
        goto done;
    }
    c->cinfo.out_color_space = JCS_RGB;
    jpeg_start_decompress(&c->cinfo);
    int64_t w = c->cinfo.output_width, h = c->cinfo.output_height;
    if ((st = check_dims(w, h, name, d)) != OQ_OK)
        goto done;
    if (c->cinfo.output_components != 3) {
        st = oq_diag_error(d, OQ_ERR_UNSUPPORTED, "%s: JPEG decodes to %d components", name,
                           c->cinfo.output_components);
        goto done;
    }
    c->pixels = malloc((size_t)(w * h * 3));
    if (!c->pixels) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "%s: out of memory", name);
        goto done;
    }
    while (c->cinfo.output_scanline < c->cinfo.output_height) {
        JSAMPROW row = c->pixels + (size_t)c->cinfo.output_scanline * (size_t)w * 3;
        jpeg_read_scanlines(&c->cinfo, &row, 1);
    }
    jpeg_finish_decompress(&c->cinfo);
    if (c->jerr.num_warnings) {
        st = oq_diag_error(d, OQ_ERR_PARSE, "%s: corrupt or truncated JPEG: %s", name, c->warn);
        goto done;
    }
    img->width = w;
    img->height = h;
    img->rgb = c->pixels;
    c->pixels = NULL;
done:
    if (c->created)
        jpeg_destroy_decompress(&c->cinfo);
    free(c->pixels);
    free(c);
    return st;
}

/* ----------------------------------------------------------------- public ---- */

oq_status oq_image_decode(const void *data, size_t size, const char *name, oq_image *img,
                          oq_diag *d)
{
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    const uint8_t *b = data;
    if (!name)
        name = "image";
    memset(img, 0, sizeof(*img));
    if (size >= 8 && !memcmp(b, png_sig, 8))
        return decode_png(b, size, name, img, d);
    if (size >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF)
        return decode_jpeg(b, size, name, img, d);
    return oq_diag_error(d, OQ_ERR_PARSE, "%s: not a PNG or JPEG file", name);
}

oq_status oq_image_read(const char *path, oq_image *img, oq_diag *d)
{
    oq_status st = OQ_OK;
    uint8_t *buf = NULL;
    memset(img, 0, sizeof(*img));
    FILE *f = fopen(path, "rb");
    if (!f)
        return oq_diag_error(d, OQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        st = oq_diag_error(d, OQ_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
        goto fail;
    }
    long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
        st = oq_diag_error(d, OQ_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        goto fail;
    }
    if (n > ((long)1 << 30)) {
        st = oq_diag_error(d, OQ_ERR_UNSUPPORTED, "%s: image file larger than 1 GiB", path);
        goto fail;
    }
    buf = malloc((size_t)n + 1);
    if (!buf) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        st = oq_diag_error(d, OQ_ERR_IO, "%s: read error", path);
        goto fail;
    }
    st = oq_image_decode(buf, (size_t)n, path, img, d);
fail:
    free(buf);
    fclose(f);
    return st;
}

void oq_image_opts_default(oq_image_opts *o, int64_t height, int64_t width)
{
    memset(o, 0, sizeof(*o));
    o->height = height;
    o->width = width;
    o->channels = 3;
    o->layout = OQ_LAYOUT_NCHW;
    o->scale = 255.0f;
    for (int k = 0; k < 3; k++) {
        o->mean[k] = 0.0f;
        o->std[k] = 1.0f;
    }
}

int64_t oq_image_tensor_numel(const oq_image_opts *o)
{
    if (o->height <= 0 || o->width <= 0 || (o->channels != 1 && o->channels != 3))
        return -1;
    if (o->width > MAX_PIXELS / o->height)
        return -1;
    return o->height * o->width * o->channels;
}

/* Half-pixel source coordinate of output index i: two taps and the weight of the
 * second. */
static void tap(int64_t i, int64_t in, int64_t out, int64_t *a, int64_t *b, float *f)
{
    double s = ((double)i + 0.5) * (double)in / (double)out - 0.5;
    if (s < 0.0)
        s = 0.0;
    if (s > (double)(in - 1))
        s = (double)(in - 1);
    int64_t t = (int64_t)floor(s);
    *a = t;
    *b = t + 1 < in ? t + 1 : in - 1;
    *f = (float)(s - (double)t);
}

/* Weights (1 - fx, fx) along x, then (1 - fy, fy) along y. Float rounding can step out
 * of the four neighbours' range (four 255s gave 255.00002, so 1.0000001 after / 255,
 * found by fuzz_image): the result is clamped back into it. */
static float bilinear(float p00, float p01, float p10, float p11, float fx, float fy)
{
    float top = (1.0f - fx) * p00 + fx * p01;
    float bot = (1.0f - fx) * p10 + fx * p11;
    float v = (1.0f - fy) * top + fy * bot;
    float lo = fminf(fminf(p00, p01), fminf(p10, p11));
    float hi = fmaxf(fmaxf(p00, p01), fmaxf(p10, p11));
    return v < lo ? lo : v > hi ? hi : v;
}

void oq_resize_bilinear(const float *src, int64_t in_h, int64_t in_w, int c, float *dst,
                        int64_t out_h, int64_t out_w)
{
    for (int64_t y = 0; y < out_h; y++) {
        int64_t y0, y1;
        float fy;
        tap(y, in_h, out_h, &y0, &y1, &fy);
        for (int64_t x = 0; x < out_w; x++) {
            int64_t x0, x1;
            float fx;
            tap(x, in_w, out_w, &x0, &x1, &fx);
            for (int k = 0; k < c; k++) {
                float p00 = src[(y0 * in_w + x0) * c + k], p01 = src[(y0 * in_w + x1) * c + k];
                float p10 = src[(y1 * in_w + x0) * c + k], p11 = src[(y1 * in_w + x1) * c + k];
                dst[(y * out_w + x) * c + k] = bilinear(p00, p01, p10, p11, fx, fy);
            }
        }
    }
}

oq_status oq_image_to_tensor(const oq_image *img, const oq_image_opts *o, float *out,
                             oq_diag *d)
{
    int64_t numel = oq_image_tensor_numel(o);
    if (numel < 0)
        return oq_diag_error(d, OQ_ERR_USAGE,
                             "image size %" PRId64 "x%" PRId64 " with %d channel(s) is not valid",
                             o->height, o->width, o->channels);
    if (o->bgr && o->channels != 3)
        return oq_diag_error(d, OQ_ERR_USAGE, "BGR order needs 3 channels");
    if (!(o->scale > 0.0f) || !isfinite(o->scale))
        return oq_diag_error(d, OQ_ERR_USAGE, "image scale %g must be > 0", (double)o->scale);
    for (int k = 0; k < o->channels; k++)
        if (!(o->std[k] != 0.0f) || !isfinite(o->std[k]) || !isfinite(o->mean[k]))
            return oq_diag_error(d, OQ_ERR_USAGE, "image std[%d] = %g / mean[%d] = %g is not valid",
                                 k, (double)o->std[k], k, (double)o->mean[k]);
    if (!img->rgb || img->width <= 0 || img->height <= 0)
        return oq_diag_error(d, OQ_ERR_USAGE, "empty image");
    const int64_t H = o->height, W = o->width, C = o->channels;
    const int64_t iw = img->width;
    for (int64_t y = 0; y < H; y++) {
        int64_t y0, y1;
        float fy;
        tap(y, img->height, H, &y0, &y1, &fy);
        for (int64_t x = 0; x < W; x++) {
            int64_t x0, x1;
            float fx;
            tap(x, iw, W, &x0, &x1, &fx);
            float rgb[3];
            for (int k = 0; k < 3; k++) {
                float p00 = img->rgb[(y0 * iw + x0) * 3 + k], p01 = img->rgb[(y0 * iw + x1) * 3 + k];
                float p10 = img->rgb[(y1 * iw + x0) * 3 + k], p11 = img->rgb[(y1 * iw + x1) * 3 + k];
                rgb[k] = bilinear(p00, p01, p10, p11, fx, fy);
            }
            for (int64_t k = 0; k < C; k++) {
                float v;
                if (C == 1) {
                    v = 0.299f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2];
                    /* a weighted mean lies between its inputs; float rounding can step out
                     * (white gave 255.00002, so 1.0000001 after / 255): clamp it back */
                    float lo = fminf(rgb[0], fminf(rgb[1], rgb[2]));
                    float hi = fmaxf(rgb[0], fmaxf(rgb[1], rgb[2]));
                    v = v < lo ? lo : v > hi ? hi : v;
                } else
                    v = rgb[o->bgr ? 2 - k : k];
                v = (v / o->scale - o->mean[k]) / o->std[k];
                if (o->layout == OQ_LAYOUT_NHWC)
                    out[(y * W + x) * C + k] = v;
                else
                    out[(k * H + y) * W + x] = v;
            }
        }
    }
    return OQ_OK;
}

oq_status oq_image_load(const char *path, const oq_image_opts *o, float *out, oq_diag *d)
{
    oq_image img;
    oq_status st = oq_image_read(path, &img, d);
    if (st != OQ_OK)
        return st;
    st = oq_image_to_tensor(&img, o, out, d);
    oq_image_free(&img);
    return st;
}

/* ------------------------------------------------------------- directory ---- */

static bool ext_is(const char *ext, const char *want)
{
    for (; *ext && *want; ext++, want++)
        if (tolower((unsigned char)*ext) != *want)
            return false;
    return *ext == 0 && *want == 0;
}

static bool has_image_ext(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot)
        return false;
    return ext_is(dot + 1, "png") || ext_is(dot + 1, "jpg") || ext_is(dot + 1, "jpeg");
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void oq_image_dir_free(char **paths, size_t count)
{
    if (!paths)
        return;
    for (size_t i = 0; i < count; i++)
        free(paths[i]);
    free(paths);
}

oq_status oq_image_dir_list(const char *dir, char ***paths, size_t *count, oq_diag *d)
{
    oq_status st = OQ_OK;
    char **v = NULL;
    size_t n = 0, cap = 0;
    *paths = NULL;
    *count = 0;
    DIR *dp = opendir(dir);
    if (!dp)
        return oq_diag_error(d, OQ_ERR_IO, "%s: cannot open directory: %s", dir,
                             strerror(errno));
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        if (e->d_name[0] == '.' || !has_image_ext(e->d_name))
            continue;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *p = malloc(len);
        if (!p) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "%s: out of memory", dir);
            goto fail;
        }
        snprintf(p, len, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            free(p);
            continue;
        }
        char **nv = oq_grow(v, n, &cap, sizeof(*nv), 16);
        if (!nv) {
            free(p);
            st = oq_diag_error(d, OQ_ERR_NOMEM, "%s: out of memory", dir);
            goto fail;
        }
        v = nv;
        v[n++] = p;
    }
    if (n == 0) {
        st = oq_diag_error(d, OQ_ERR_USAGE, "%s: no .png, .jpg or .jpeg files", dir);
        goto fail;
    }
    qsort(v, n, sizeof(*v), cmp_str);
    closedir(dp);
    *paths = v;
    *count = n;
    return OQ_OK;
fail:
    closedir(dp);
    oq_image_dir_free(v, n);
    return st;
}

bool oq_image_parse_triple(const char *s, float out[3])
{
    char *end = NULL;
    for (int k = 0; k < 3; k++) {
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s)
            return false;
        out[k] = (float)v;
        if (k < 2) {
            if (*end != ',')
                return false;
            s = end + 1;
        }
    }
    return *end == 0;
}
