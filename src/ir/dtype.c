#include "onnxq/ir.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    int bits;
} dtype_table[] = {
#define OQ_X(n, v, b, s) [v] = {s, b},
    OQ_DTYPE_LIST(OQ_X)
#undef OQ_X
};
_Static_assert(sizeof(dtype_table) / sizeof(dtype_table[0]) == OQ_DTYPE_COUNT,
               "dtype table out of sync with OQ_DTYPE_LIST");

bool oq_dtype_valid(int32_t dtype)
{
    return dtype > 0 && dtype < OQ_DTYPE_COUNT;
}

const char *oq_dtype_name(int32_t dtype)
{
    if (dtype < 0 || dtype >= OQ_DTYPE_COUNT)
        return "?";
    return dtype_table[dtype].name;
}

oq_dtype oq_dtype_from_name(const char *name)
{
    if (!name)
        return OQ_DTYPE_UNDEFINED;
    for (int i = 1; i < OQ_DTYPE_COUNT; i++)
        if (strcmp(dtype_table[i].name, name) == 0)
            return (oq_dtype)i;
    if (strcmp(name, "float") == 0) return OQ_DTYPE_FLOAT;
    if (strcmp(name, "double") == 0) return OQ_DTYPE_DOUBLE;
    if (strcmp(name, "half") == 0) return OQ_DTYPE_FLOAT16;
    return OQ_DTYPE_UNDEFINED;
}

int oq_dtype_bits(int32_t dtype)
{
    return oq_dtype_valid(dtype) ? dtype_table[dtype].bits : 0;
}

int64_t oq_dtype_nbytes(int32_t dtype, int64_t n)
{
    int bits = oq_dtype_bits(dtype);
    if (bits == 0 || n < 0)
        return -1;
    if (bits == 4)
        return n / 2 + (n & 1);
    int64_t b = bits / 8;
    if (n > INT64_MAX / b)
        return -1;
    return n * b;
}

bool oq_dtype_is_float(int32_t t)
{
    return t == OQ_DTYPE_FLOAT || t == OQ_DTYPE_DOUBLE || t == OQ_DTYPE_FLOAT16 ||
           t == OQ_DTYPE_BFLOAT16 || (t >= OQ_DTYPE_FLOAT8E4M3FN && t <= OQ_DTYPE_FLOAT8E5M2FNUZ);
}

bool oq_dtype_is_signed(int32_t t)
{
    return t == OQ_DTYPE_INT8 || t == OQ_DTYPE_INT16 || t == OQ_DTYPE_INT32 ||
           t == OQ_DTYPE_INT64 || t == OQ_DTYPE_INT4;
}

bool oq_dtype_is_integer(int32_t t)
{
    return oq_dtype_is_signed(t) || t == OQ_DTYPE_UINT8 || t == OQ_DTYPE_UINT16 ||
           t == OQ_DTYPE_UINT32 || t == OQ_DTYPE_UINT64 || t == OQ_DTYPE_UINT4;
}

int64_t oq_dims_numel(const int64_t *dims, size_t rank)
{
    int64_t n = 1;
    for (size_t i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return -1;
        if (dims[i] != 0 && n > INT64_MAX / dims[i])
            return -1;
        n *= dims[i];
    }
    return n;
}

/* ---- float16 / bfloat16 ---- */

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float oq_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0) {
        if (man == 0)
            return u2f(sign);
        /* subnormal: man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (exp == 31)
        return u2f(sign | 0x7f800000u | (man << 13));
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t oq_float_to_half(float f)
{
    uint32_t u = f2u(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t exp = (u >> 23) & 0xff;
    uint32_t man = u & 0x7fffff;
    if (exp == 0xff) /* inf / nan */
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10)
            return sign;
        man |= 0x800000;
        int shift = 14 - e;
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
        half++; /* may carry into exponent: correct (rounds up to inf at the top) */
    return (uint16_t)(sign | half);
}

float oq_bfloat16_to_float(uint16_t b)
{
    return u2f((uint32_t)b << 16);
}

uint16_t oq_float_to_bfloat16(float f)
{
    uint32_t u = f2u(f);
    if (isnan(f))
        return (uint16_t)((u >> 16) | 0x40);
    uint32_t rounding = 0x7fff + ((u >> 16) & 1);
    return (uint16_t)((u + rounding) >> 16);
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx,f16c"))) static void h2f_f16c(const uint16_t *h, float *f, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++)
        f[i] = oq_half_to_float(h[i]);
}

__attribute__((target("avx,f16c"))) static void f2h_f16c(const float *f, uint16_t *h, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) /* round to nearest even, as oq_float_to_half */
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(f + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        h[i] = oq_float_to_half(f[i]);
}

static bool have_f16c(void)
{
    static int have = -1; /* racing writers store the same value */
    if (have < 0) {
        __builtin_cpu_init();
        have = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
    }
    return have;
}
#endif

void oq_half_to_float_n(const uint16_t *h, float *f, int64_t n)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (have_f16c()) {
        h2f_f16c(h, f, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        f[i] = oq_half_to_float(h[i]);
}

void oq_float_to_half_n(const float *f, uint16_t *h, int64_t n)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (have_f16c()) {
        f2h_f16c(f, h, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        h[i] = oq_float_to_half(f[i]);
}
