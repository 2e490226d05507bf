/* Image decoding, resize and normalisation. Images are written in the test with libpng
 * and libjpeg; expected values are hand-computed. */
#include <criterion/criterion.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "onnxq/image.h"
#include "testutil.h"

static char *tmp;

static void setup(void)
{
    tmp = tu_tmpdir();
    cr_assert(tmp);
}

static void teardown(void)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    tu_run(cmd, NULL);
    free(tmp);
}

static char *path_of(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%s/%s", tmp, name);
    return buf[k];
}

/* Write a PNG: `data` holds h rows of w * channels samples of bit_depth bits (16-bit
 * samples as uint16_t, converted to big endian here; < 8 bits one sample per byte, packed
 * here). */
static void write_png(const char *path, int w, int h, int color_type, int bit_depth,
                      const void *data, const png_color *palette, int npal)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    cr_assert(png && info);
    if (setjmp(png_jmpbuf(png)))
        cr_assert_fail("libpng write error");
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, bit_depth, color_type,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (palette)
        png_set_PLTE(png, info, palette, npal);
    png_write_info(png, info);
    int ch = color_type == PNG_COLOR_TYPE_RGB ? 3 : color_type == PNG_COLOR_TYPE_RGBA ? 4
           : color_type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2 : 1;
    int per_row = w * ch;
    png_bytep row = calloc((size_t)per_row * 2 + 8, 1);
    for (int y = 0; y < h; y++) {
        if (bit_depth == 16) {
            const uint16_t *s = (const uint16_t *)data + (size_t)y * per_row;
            for (int i = 0; i < per_row; i++) {
                row[2 * i] = (png_byte)(s[i] >> 8);
                row[2 * i + 1] = (png_byte)(s[i] & 0xff);
            }
        } else if (bit_depth < 8) {
            const uint8_t *s = (const uint8_t *)data + (size_t)y * per_row;
            memset(row, 0, (size_t)per_row);
            for (int i = 0; i < per_row; i++) {
                int bit = i * bit_depth;
                row[bit / 8] |= (png_byte)(s[i] << (8 - bit_depth - bit % 8));
            }
        } else {
            memcpy(row, (const uint8_t *)data + (size_t)y * per_row, (size_t)per_row);
        }
        png_write_row(png, row);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(row);
    fclose(f);
}

static void write_jpeg(const char *path, int w, int h, int comps, const uint8_t *data)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = comps == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 100, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW r = (JSAMPROW)(data + (size_t)c.next_scanline * w * comps);
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    fclose(f);
}

static void decode_ok(const char *path, oq_image *img)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_status st = oq_image_read(path, img, &d);
    char line[512] = "";
    if (d.count)
        oq_diag_format(&d.entries[0], line, sizeof(line));
    cr_assert_eq(st, OQ_OK, "%s", line);
    oq_diag_free(&d);
}

static void px(const oq_image *img, int x, int y, int r, int g, int b, int tol)
{
    const uint8_t *p = img->rgb + ((size_t)y * img->width + x) * 3;
    cr_assert(abs(p[0] - r) <= tol && abs(p[1] - g) <= tol && abs(p[2] - b) <= tol,
              "pixel (%d,%d) = (%d,%d,%d), expected (%d,%d,%d)", x, y, p[0], p[1], p[2], r, g,
              b);
}

TestSuite(image, .init = setup, .fini = teardown);

Test(image, png_rgb_exact)
{
    const uint8_t rgb[2 * 3 * 3] = {255, 0, 0, 0, 255, 0, 0, 0, 255, /* row 0 */
                                    10, 20, 30, 128, 129, 130, 0, 0, 0};
    write_png(path_of("a.png"), 3, 2, PNG_COLOR_TYPE_RGB, 8, rgb, NULL, 0);
    oq_image img;
    decode_ok(path_of("a.png"), &img);
    cr_assert(img.width == 3 && img.height == 2);
    cr_assert_eq(memcmp(img.rgb, rgb, sizeof(rgb)), 0);
    oq_image_free(&img);
}

Test(image, png_gray_palette_alpha_16bit)
{
    oq_image img;
    /* 8-bit grey is replicated */
    const uint8_t g[4] = {0, 77, 200, 255};
    write_png(path_of("g.png"), 2, 2, PNG_COLOR_TYPE_GRAY, 8, g, NULL, 0);
    decode_ok(path_of("g.png"), &img);
    px(&img, 1, 0, 77, 77, 77, 0);
    px(&img, 0, 1, 200, 200, 200, 0);
    oq_image_free(&img);
    /* 2-bit grey expands to 0, 85, 170, 255 */
    const uint8_t g2[4] = {0, 1, 2, 3};
    write_png(path_of("g2.png"), 4, 1, PNG_COLOR_TYPE_GRAY, 2, g2, NULL, 0);
    decode_ok(path_of("g2.png"), &img);
    px(&img, 1, 0, 85, 85, 85, 0);
    px(&img, 2, 0, 170, 170, 170, 0);
    px(&img, 3, 0, 255, 255, 255, 0);
    oq_image_free(&img);
    /* palette */
    const png_color pal[3] = {{1, 2, 3}, {250, 128, 7}, {9, 99, 199}};
    const uint8_t idx[3] = {2, 0, 1};
    write_png(path_of("p.png"), 3, 1, PNG_COLOR_TYPE_PALETTE, 8, idx, pal, 3);
    decode_ok(path_of("p.png"), &img);
    px(&img, 0, 0, 9, 99, 199, 0);
    px(&img, 1, 0, 1, 2, 3, 0);
    px(&img, 2, 0, 250, 128, 7, 0);
    oq_image_free(&img);
    /* RGBA: alpha dropped, colour kept */
    const uint8_t rgba[8] = {10, 20, 30, 0, 40, 50, 60, 255};
    write_png(path_of("ra.png"), 2, 1, PNG_COLOR_TYPE_RGBA, 8, rgba, NULL, 0);
    decode_ok(path_of("ra.png"), &img);
    px(&img, 0, 0, 10, 20, 30, 0);
    px(&img, 1, 0, 40, 50, 60, 0);
    oq_image_free(&img);
    /* 16-bit: 257*k -> k */
    const uint16_t s16[6] = {0, 257 * 100, 65535, 257 * 3, 257 * 254, 257 * 128};
    write_png(path_of("16.png"), 2, 1, PNG_COLOR_TYPE_RGB, 16, s16, NULL, 0);
    decode_ok(path_of("16.png"), &img);
    px(&img, 0, 0, 0, 100, 255, 0);
    px(&img, 1, 0, 3, 254, 128, 0);
    oq_image_free(&img);
}

Test(image, jpeg_solid_colours)
{
    /* 32x16: left 16x16 block one colour, right block another; quality 100. JPEG is
     * lossy (colour conversion and chroma subsampling round), so allow +-3. */
    enum { W = 32, H = 16 };
    uint8_t rgb[W * H * 3];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uint8_t *p = rgb + (y * W + x) * 3;
            if (x < 16) {
                p[0] = 200; p[1] = 30; p[2] = 60;
            } else {
                p[0] = 20; p[1] = 180; p[2] = 240;
            }
        }
    write_jpeg(path_of("c.jpg"), W, H, 3, rgb);
    oq_image img;
    decode_ok(path_of("c.jpg"), &img);
    cr_assert(img.width == W && img.height == H);
    px(&img, 4, 4, 200, 30, 60, 3);
    px(&img, 27, 11, 20, 180, 240, 3);
    oq_image_free(&img);
    /* greyscale JPEG: a flat 8x8 block of 100 is exact at quality 100 */
    uint8_t g[8 * 8];
    memset(g, 100, sizeof(g));
    write_jpeg(path_of("g.jpg"), 8, 8, 1, g);
    decode_ok(path_of("g.jpg"), &img);
    px(&img, 3, 5, 100, 100, 100, 0);
    oq_image_free(&img);
}

Test(image, resize_hand_computed)
{
    /* 2x2 -> 4x4 (one channel): source coordinate (i + 0.5) * 2/4 - 0.5 = -0.25, 0.25,
     * 0.75, 1.25 -> clamped 0, 0.25, 0.75, 1: weights of the second pixel 0, .25, .75, 1 */
    const float src[4] = {0.0f, 4.0f, 8.0f, 12.0f};
    float dst[16];
    oq_resize_bilinear(src, 2, 2, 1, dst, 4, 4);
    const float row0[4] = {0.0f, 1.0f, 3.0f, 4.0f};
    const float col0[4] = {0.0f, 2.0f, 6.0f, 8.0f};
    for (int i = 0; i < 4; i++) {
        cr_assert_float_eq(dst[i], row0[i], 1e-6, "row0[%d] = %g", i, dst[i]);
        cr_assert_float_eq(dst[i * 4], col0[i], 1e-6, "col0[%d] = %g", i, dst[i * 4]);
    }
    /* (1,1): y 0.25, x 0.25: 0.75*(0.75*0 + 0.25*4) + 0.25*(0.75*8 + 0.25*12) = 3 */
    cr_assert_float_eq(dst[5], 3.0f, 1e-6);
    /* 4 -> 2 (a row): (i + 0.5)*2 - 0.5 = 0.5, 2.5: means of pairs, no antialias */
    const float s4[4] = {1.0f, 3.0f, 10.0f, 20.0f};
    float d2[2];
    oq_resize_bilinear(s4, 1, 4, 1, d2, 1, 2);
    cr_assert_float_eq(d2[0], 2.0f, 1e-6);
    cr_assert_float_eq(d2[1], 15.0f, 1e-6);
    /* 3 -> 2: (i + 0.5)*1.5 - 0.5 = 0.25, 1.75 */
    const float s3[3] = {0.0f, 8.0f, 16.0f};
    oq_resize_bilinear(s3, 1, 3, 1, d2, 1, 2);
    cr_assert_float_eq(d2[0], 2.0f, 1e-6);
    cr_assert_float_eq(d2[1], 14.0f, 1e-6);
    /* same size is a copy; 2 channels stay separate */
    const float s22[4] = {1.0f, -1.0f, 5.0f, -5.0f};
    float d22[4];
    oq_resize_bilinear(s22, 1, 2, 2, d22, 1, 2);
    cr_assert_eq(memcmp(s22, d22, sizeof(d22)), 0);
    /* 1 -> 3: every output is the single pixel */
    oq_resize_bilinear(s3 + 1, 1, 1, 1, d2, 1, 2);
    cr_assert(d2[0] == 8.0f && d2[1] == 8.0f);
}

Test(image, tensor_layout_bgr_normalisation)
{
    /* 2x1 RGB image: (255, 0, 51), (0, 102, 255). */
    const uint8_t rgb[6] = {255, 0, 51, 0, 102, 255};
    write_png(path_of("t.png"), 2, 1, PNG_COLOR_TYPE_RGB, 8, rgb, NULL, 0);
    oq_image_opts o;
    oq_image_opts_default(&o, 1, 2);
    float out[6];
    cr_assert_eq(oq_image_tensor_numel(&o), 6);
    /* defaults: /255, NCHW: R plane (1, 0), G plane (0, 0.4), B plane (0.2, 1) */
    cr_assert_eq(oq_image_load(path_of("t.png"), &o, out, NULL), OQ_OK);
    const float nchw[6] = {1.0f, 0.0f, 0.0f, 0.4f, 0.2f, 1.0f};
    for (int i = 0; i < 6; i++)
        cr_assert_float_eq(out[i], nchw[i], 1e-6, "nchw[%d] = %g", i, out[i]);
    /* NHWC + BGR: (B, G, R) per pixel: (0.2, 0, 1), (1, 0.4, 0) */
    o.layout = OQ_LAYOUT_NHWC;
    o.bgr = true;
    cr_assert_eq(oq_image_load(path_of("t.png"), &o, out, NULL), OQ_OK);
    const float nhwc[6] = {0.2f, 0.0f, 1.0f, 1.0f, 0.4f, 0.0f};
    for (int i = 0; i < 6; i++)
        cr_assert_float_eq(out[i], nhwc[i], 1e-6, "nhwc[%d] = %g", i, out[i]);
    /* mean/std in output channel order (after the swap), scale 1:
     * c0 = (B - 50) / 2: (51-50)/2 = 0.5, (255-50)/2 = 102.5
     * c1 = (G - 100) / 4: -25, 0.5;  c2 = (R - 0) / 0.5: 510, 0 */
    o.layout = OQ_LAYOUT_NCHW;
    o.scale = 1.0f;
    o.mean[0] = 50.0f; o.mean[1] = 100.0f; o.mean[2] = 0.0f;
    o.std[0] = 2.0f; o.std[1] = 4.0f; o.std[2] = 0.5f;
    cr_assert_eq(oq_image_load(path_of("t.png"), &o, out, NULL), OQ_OK);
    const float norm[6] = {0.5f, 102.5f, -25.0f, 0.5f, 510.0f, 0.0f};
    for (int i = 0; i < 6; i++)
        cr_assert_float_eq(out[i], norm[i], 1e-4, "norm[%d] = %g", i, out[i]);
    /* resize inside the conversion: 2x1 -> 4x1 of the R channel: 255, 191.25, 63.75, 0 */
    oq_image_opts_default(&o, 1, 4);
    o.scale = 1.0f;
    float up[12];
    cr_assert_eq(oq_image_load(path_of("t.png"), &o, up, NULL), OQ_OK);
    const float r4[4] = {255.0f, 191.25f, 63.75f, 0.0f};
    for (int i = 0; i < 4; i++)
        cr_assert_float_eq(up[i], r4[i], 1e-4, "r[%d] = %g", i, up[i]);
    /* one channel: grey = 0.299 R + 0.587 G + 0.114 B: 0.299*255 + 0.114*51 = 82.059 */
    oq_image_opts_default(&o, 1, 2);
    o.channels = 1;
    o.scale = 1.0f;
    cr_assert_eq(oq_image_load(path_of("t.png"), &o, out, NULL), OQ_OK);
    cr_assert_float_eq(out[0], 82.059f, 1e-3);
    cr_assert_float_eq(out[1], 0.587f * 102 + 0.114f * 255, 1e-3);
    /* bad options */
    o.std[0] = 0.0f;
    cr_assert_eq(oq_image_load(path_of("t.png"), &o, out, NULL), OQ_ERR_USAGE);
}

static void expect_error(const char *path, oq_status code, const char *what)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_image img;
    cr_assert_eq(oq_image_read(path, &img, &d), code, "%s", path);
    cr_assert_eq(d.errors, 1, "%s: %zu errors", path, d.errors);
    char line[1024];
    oq_diag_format(&d.entries[0], line, sizeof(line));
    cr_log_info("%s", line);
    cr_assert(strstr(line, path), "message does not name the file: %s", line);
    if (what)
        cr_assert(strstr(line, what), "message: %s", line);
    cr_assert_null(img.rgb);
    oq_diag_free(&d);
}

/* Found by fuzz_image: a white pixel converted to one channel gave 1.0000001 (the float
 * weights 0.299f + 0.587f + 0.114f times 255 round to 255.00002). A grey pixel (R = G = B)
 * must give its own value exactly, and no value may leave [0, 1] with scale 255. */
Test(image, grey_of_equal_channels_is_exact)
{
    /* one pixel per grey level 0..255, R = G = B (the old code gave 15.000001 for 15 with
     * gcc, 255.00002 for 255 with clang) */
    static uint8_t px[256 * 3];
    for (int g = 0; g < 256; g++)
        px[3 * g] = px[3 * g + 1] = px[3 * g + 2] = (uint8_t)g;
    oq_image img = {.width = 256, .height = 1, .rgb = px};
    oq_image_opts o;
    oq_image_opts_default(&o, 1, 256);
    o.channels = 1;
    static float out[256];
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_image_to_tensor(&img, &o, out, &d), OQ_OK);
    for (int g = 0; g < 256; g++)
        cr_assert_eq(out[g], (float)g / 255.0f, "grey %d gave %.9g", g, out[g]);
    /* resized up from a flat image (fuzz_image: a white 5x4 image resized to 6x7 gave
     * 1.0000001): every output is the flat value, for every level, both channel counts */
    static uint8_t flat[5 * 4 * 3];
    static float big[3 * 6 * 7];
    for (int g = 0; g < 256; g++) {
        memset(flat, g, sizeof flat);
        oq_image f = {.width = 5, .height = 4, .rgb = flat};
        for (int ch = 1; ch <= 3; ch += 2) {
            oq_image_opts_default(&o, 6, 7);
            o.channels = ch;
            cr_assert_eq(oq_image_to_tensor(&f, &o, big, &d), OQ_OK);
            for (int i = 0; i < ch * 6 * 7; i++)
                cr_assert_eq(big[i], (float)g / 255.0f, "grey %d, %d channels, [%d]: %.9g", g,
                             ch, i, big[i]);
        }
    }
    oq_diag_free(&d);
}

Test(image, corrupt_and_truncated)
{
    /* a real image to damage */
    enum { W = 64, H = 64 };
    uint8_t *rgb = malloc(W * H * 3);
    for (int i = 0; i < W * H * 3; i++)
        rgb[i] = (uint8_t)(i * 37 + (i >> 7));
    write_png(path_of("ok.png"), W, H, PNG_COLOR_TYPE_RGB, 8, rgb, NULL, 0);
    write_jpeg(path_of("ok.jpg"), W, H, 3, rgb);
    free(rgb);
    size_t n;
    uint8_t *png = tu_read_file(path_of("ok.png"), &n);
    cr_assert(png && n > 100);
    tu_write_file(path_of("trunc.png"), png, n / 2);
    png[n / 2] ^= 0x55; /* IDAT payload: CRC mismatch */
    tu_write_file(path_of("crc.png"), png, n);
    tu_write_file(path_of("header.png"), png, 12);
    free(png);
    uint8_t *jpg = tu_read_file(path_of("ok.jpg"), &n);
    cr_assert(jpg && n > 100);
    tu_write_file(path_of("trunc.jpg"), jpg, n / 2);
    tu_write_file(path_of("hdr.jpg"), jpg, 40);
    for (size_t i = n / 3; i < n / 3 + 64; i++) /* garbage inside the entropy-coded data */
        jpg[i] = 0xFF;
    tu_write_file(path_of("bad.jpg"), jpg, n);
    free(jpg);
    tu_write_file(path_of("text.png"), "hello, not an image", 19);
    tu_write_file(path_of("empty.jpg"), "", 0);

    expect_error(path_of("trunc.png"), OQ_ERR_PARSE, "PNG");
    expect_error(path_of("crc.png"), OQ_ERR_PARSE, "PNG");
    expect_error(path_of("header.png"), OQ_ERR_PARSE, "PNG");
    expect_error(path_of("trunc.jpg"), OQ_ERR_PARSE, "JPEG");
    expect_error(path_of("hdr.jpg"), OQ_ERR_PARSE, "JPEG");
    expect_error(path_of("bad.jpg"), OQ_ERR_PARSE, "JPEG");
    expect_error(path_of("text.png"), OQ_ERR_PARSE, "not a PNG or JPEG");
    expect_error(path_of("empty.jpg"), OQ_ERR_PARSE, "not a PNG or JPEG");
    expect_error(path_of("missing.png"), OQ_ERR_IO, "cannot open");
    /* the undamaged ones still decode */
    oq_image img;
    decode_ok(path_of("ok.png"), &img);
    oq_image_free(&img);
    decode_ok(path_of("ok.jpg"), &img);
    oq_image_free(&img);
}

Test(image, random_damage_never_crashes)
{
    /* 300 damaged variants (truncation + random bytes) of a PNG and a JPEG: each either
     * decodes or gives exactly one error naming the input (ASan/UBSan run this too). */
    enum { W = 24, H = 20 };
    uint8_t rgb[W * H * 3];
    for (int i = 0; i < W * H * 3; i++)
        rgb[i] = (uint8_t)(i * 11);
    write_png(path_of("r.png"), W, H, PNG_COLOR_TYPE_RGB, 8, rgb, NULL, 0);
    write_jpeg(path_of("r.jpg"), W, H, 3, rgb);
    const char *names[2] = {"r.png", "r.jpg"};
    uint64_t s = 0x1234567;
    for (int f = 0; f < 2; f++) {
        size_t n;
        uint8_t *orig = tu_read_file(path_of(names[f]), &n);
        uint8_t *buf = malloc(n);
        for (int t = 0; t < 150; t++) {
            memcpy(buf, orig, n);
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            size_t len = (t % 3 == 0) ? (size_t)(s >> 33) % n : n;
            int flips = 1 + (int)((s >> 20) % 8);
            for (int k = 0; k < flips; k++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                size_t pos = 8 + (size_t)(s >> 33) % (n - 8);
                buf[pos] = (uint8_t)(s >> 13);
            }
            oq_diag d;
            oq_diag_init(&d);
            oq_image img;
            oq_status st = oq_image_decode(buf, len, names[f], &img, &d);
            if (st == OQ_OK) { /* damage may also hit the size fields */
                cr_assert(img.width > 0 && img.height > 0 && img.rgb);
                cr_assert_eq(d.errors, 0);
                oq_image_free(&img);
            } else {
                cr_assert_eq(d.errors, 1);
                cr_assert(strstr(d.entries[0].message, names[f]));
            }
            oq_diag_free(&d);
        }
        free(buf);
        free(orig);
    }
}

Test(image, dir_list)
{
    const uint8_t g[1] = {7};
    write_png(path_of("b.png"), 1, 1, PNG_COLOR_TYPE_GRAY, 8, g, NULL, 0);
    write_jpeg(path_of("a.JPG"), 1, 1, 1, g);
    write_png(path_of("c.jpeg"), 1, 1, PNG_COLOR_TYPE_GRAY, 8, g, NULL, 0); /* content decides */
    tu_write_file(path_of("notes.txt"), "x", 1);
    tu_write_file(path_of(".hidden.png"), "x", 1);
    char **p;
    size_t n;
    cr_assert_eq(oq_image_dir_list(tmp, &p, &n, NULL), OQ_OK);
    cr_assert_eq(n, 3);
    cr_assert(strstr(p[0], "/a.JPG") && strstr(p[1], "/b.png") && strstr(p[2], "/c.jpeg"));
    oq_image img;
    decode_ok(p[2], &img); /* a PNG named .jpeg decodes by its signature */
    px(&img, 0, 0, 7, 7, 7, 0);
    oq_image_free(&img);
    oq_image_dir_free(p, n);
    char *empty = path_of("empty");
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "mkdir '%s'", empty);
    tu_run(cmd, NULL);
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_image_dir_list(empty, &p, &n, &d), OQ_ERR_USAGE);
    cr_assert(strstr(d.entries[0].message, "empty"));
    oq_diag_free(&d);
    cr_assert_eq(oq_image_dir_list(path_of("nope"), &p, &n, NULL), OQ_ERR_IO);
}

Test(image, resize_matches_onnxruntime, .timeout = 300)
{
    /* up, down, non-integer ratios, 1-pixel sources: onnxq's resize against onnxruntime
     * Resize(linear, half_pixel) on random 8-bit-valued planes */
    const int sz[][4] = {{2, 2, 4, 4}, {4, 4, 2, 2}, {5, 7, 3, 11}, {7, 5, 13, 2}, {1, 6, 4, 3},
                         {6, 1, 3, 5}, {9, 9, 9, 9}, {3, 8, 7, 5}, {16, 10, 5, 3}, {4, 3, 17, 19}};
    const int ncase = (int)(sizeof(sz) / sizeof(sz[0]));
    char path[600];
    snprintf(path, sizeof(path), "%s/resize.json", tmp);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("[", f);
    unsigned s = 7;
    for (int i = 0; i < ncase; i++) {
        int ih = sz[i][0], iw = sz[i][1], oh = sz[i][2], ow = sz[i][3];
        float src[256], dst[512];
        for (int k = 0; k < ih * iw; k++) {
            s = s * 1103515245u + 12345u;
            src[k] = (float)((s >> 16) % 256);
        }
        oq_resize_bilinear(src, ih, iw, 1, dst, oh, ow);
        fprintf(f, "%s{\"in_h\": %d, \"in_w\": %d, \"out_h\": %d, \"out_w\": %d, \"src\": [",
                i ? ",\n" : "", ih, iw, oh, ow);
        for (int k = 0; k < ih * iw; k++)
            fprintf(f, "%s%.9g", k ? ", " : "", (double)src[k]);
        fputs("], \"ours\": [", f);
        for (int k = 0; k < oh * ow; k++)
            fprintf(f, "%s%.9g", k ? ", " : "", (double)dst[k]);
        fputs("]}", f);
    }
    fputs("]\n", f);
    fclose(f);
    tu_ort_check("resize_ort_check.py", tmp);
}

Test(image, parse_triple)
{
    float v[3] = {0, 0, 0};
    cr_assert(oq_image_parse_triple("0.485,0.456,0.406", v));
    cr_assert_float_eq(v[0], 0.485f, 1e-7);
    cr_assert_float_eq(v[1], 0.456f, 1e-7);
    cr_assert_float_eq(v[2], 0.406f, 1e-7);
    cr_assert(oq_image_parse_triple("-1,2e-3,3", v));
    cr_assert_float_eq(v[1], 0.002f, 1e-9);
    cr_assert_not(oq_image_parse_triple("1,2", v));
    cr_assert_not(oq_image_parse_triple("1,2,3,4", v));
    cr_assert_not(oq_image_parse_triple("1,,3", v));
    cr_assert_not(oq_image_parse_triple("a,b,c", v));
    cr_assert_not(oq_image_parse_triple("", v));
}

/* Found by fuzz_image (a 10 s timeout): a 200-byte progressive JPEG that declares
 * 65496x65496 pixels. The size was checked after jpeg_start_decompress, which had
 * already sized libjpeg's whole-image coefficient buffer from it. Now it is refused from
 * the header, and libjpeg's own memory is capped (512 MB): the same file declaring
 * 16383x16383 (under the 2^28-pixel limit; 537 MB of coefficients) is refused too. */
Test(image, jpeg_huge_declared_size_refused_from_header, .timeout = 20)
{
    FILE *f = fopen(ONNXQ_SOURCE_DIR "/tests/fuzz/seeds-image/found_progressive_65496x65496.jpg", "rb");
    cr_assert(f);
    uint8_t buf[512];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cr_assert(n > 180 && n < sizeof buf);
    oq_diag d;
    oq_diag_init(&d);
    oq_image img = {0};
    cr_assert_eq(oq_image_decode(buf, n, "huge.jpg", &img, &d), OQ_ERR_UNSUPPORTED);
    char msg[512] = "";
    oq_diag_format(oq_diag_first_error(&d), msg, sizeof msg);
    cr_assert(strstr(msg, "65496x65496 pixels is too large"), "%s", msg);
    cr_assert_null(img.rgb);
    oq_diag_free(&d);
    /* every SOF marker (0xFFC0..0xFFC2): height and width 16383 */
    for (size_t i = 0; i + 9 < n; i++)
        if (buf[i] == 0xFF && buf[i + 1] >= 0xC0 && buf[i + 1] <= 0xC2) {
            buf[i + 5] = buf[i + 7] = 0x3F;
            buf[i + 6] = buf[i + 8] = 0xFF;
        }
    oq_diag_init(&d);
    cr_assert_eq(oq_image_decode(buf, n, "big.jpg", &img, &d), OQ_ERR_UNSUPPORTED);
    oq_diag_format(oq_diag_first_error(&d), msg, sizeof msg);
    cr_assert(strstr(msg, "needs more than 512 MB"), "%s", msg);
    cr_assert_null(img.rgb);
    oq_diag_free(&d);
}
