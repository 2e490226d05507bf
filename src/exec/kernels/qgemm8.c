/* uint8 x int8 GEMM micro-kernels of the integer QDQ groups (src/exec/qgemm8.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/qgemm8.h"

oq_q8_isa oq_q8_cpu(void)
{
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    const char *env = getenv("ONNXQ_QGEMM_ISA");
    if (env && strcmp(env, "generic") == 0)
        return OQ_Q8_NONE;
    bool want512 = !env || strcmp(env, "avx512") == 0;
    if (want512 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw"))
        return OQ_Q8_VNNI;
    if (__builtin_cpu_supports("avx2"))
        return OQ_Q8_AVX2;
#endif
    return OQ_Q8_NONE;
}

void oq_q8_pack(int8_t *dst, int64_t K, int64_t N, int8_t (*b)(const void *ctx, int64_t k, int64_t n),
                const void *ctx)
{
    int64_t K4 = oq_q8_k4(K), np = (N + OQ_Q8_NR - 1) / OQ_Q8_NR;
    for (int64_t p = 0; p < np; p++) {
        int8_t *panel = dst + p * K4 * OQ_Q8_NR;
        for (int64_t k = 0; k < K4; k++)
            for (int64_t c = 0; c < OQ_Q8_NR; c++) {
                int64_t n = p * OQ_Q8_NR + c;
                panel[(k / 4) * OQ_Q8_NR * 4 + c * 4 + k % 4] = k < K && n < N ? b(ctx, k, n) : 0;
            }
    }
}

bool oq_q8_pairs_safe(const int8_t *packed, int64_t K, int64_t N)
{
    int64_t K4 = oq_q8_k4(K), np = (N + OQ_Q8_NR - 1) / OQ_Q8_NR;
    const int8_t *q = packed;
    for (int64_t i = 0; i < np * K4 * OQ_Q8_NR; i += 2, q += 2) {
        int w0 = q[0], w1 = q[1];
        if ((w0 > 0 && w1 > 0 && w0 + w1 > 128) || (w0 < 0 && w1 < 0 && -(w0 + w1) > 128))
            return false;
    }
    return true;
}

static inline int32_t ld32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* portable: the same sums as the vector kernels (pairs saturated when sat) */
static void tile_generic(const uint8_t *A, int64_t lda, int mr, const int8_t *panel, int64_t K4,
                         int32_t *C, bool sat)
{
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < OQ_Q8_NR; c++) {
            uint32_t acc = 0;
            for (int64_t k = 0; k < K4; k += 2) {
                const int8_t *w = panel + (k / 4) * OQ_Q8_NR * 4 + c * 4 + k % 4;
                int32_t p = (int32_t)A[r * lda + k] * w[0] + (int32_t)A[r * lda + k + 1] * w[1];
                if (sat)
                    p = p > 32767 ? 32767 : p < -32768 ? -32768 : p;
                acc += (uint32_t)p;
            }
            C[r * OQ_Q8_NR + c] = (int32_t)acc;
        }
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static void
tile_vnni(const uint8_t *A, int64_t lda, int mr, const int8_t *panel, int64_t K4, int32_t *C)
{
    const uint8_t *a[OQ_Q8_MR];
    for (int r = 0; r < OQ_Q8_MR; r++)
        a[r] = A + (r < mr ? r : 0) * lda;
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0,
            c7 = c0;
    for (int64_t k = 0; k < K4; k += 4) {
        __m512i b = _mm512_loadu_si512(panel + k * OQ_Q8_NR);
        c0 = _mm512_dpbusd_epi32(c0, _mm512_set1_epi32(ld32(a[0] + k)), b);
        c1 = _mm512_dpbusd_epi32(c1, _mm512_set1_epi32(ld32(a[1] + k)), b);
        c2 = _mm512_dpbusd_epi32(c2, _mm512_set1_epi32(ld32(a[2] + k)), b);
        c3 = _mm512_dpbusd_epi32(c3, _mm512_set1_epi32(ld32(a[3] + k)), b);
        c4 = _mm512_dpbusd_epi32(c4, _mm512_set1_epi32(ld32(a[4] + k)), b);
        c5 = _mm512_dpbusd_epi32(c5, _mm512_set1_epi32(ld32(a[5] + k)), b);
        c6 = _mm512_dpbusd_epi32(c6, _mm512_set1_epi32(ld32(a[6] + k)), b);
        c7 = _mm512_dpbusd_epi32(c7, _mm512_set1_epi32(ld32(a[7] + k)), b);
    }
    __m512i c[OQ_Q8_MR] = {c0, c1, c2, c3, c4, c5, c6, c7};
    for (int r = 0; r < mr; r++)
        _mm512_storeu_si512(C + r * OQ_Q8_NR, c[r]);
}

/* four rows: vpmaddubsw (int16 pair sums, saturating), vpmaddwd with ones (exact int32) */
__attribute__((target("avx2"))) static void tile4_avx2(const uint8_t *const *a, int mr,
                                                       const int8_t *panel, int64_t K4, int32_t *C)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
            c30 = c00, c31 = c00;
    for (int64_t k = 0; k < K4; k += 4) {
        __m256i b0 = _mm256_loadu_si256((const __m256i *)(panel + k * OQ_Q8_NR));
        __m256i b1 = _mm256_loadu_si256((const __m256i *)(panel + k * OQ_Q8_NR + 32));
        __m256i a0 = _mm256_set1_epi32(ld32(a[0] + k)), a1 = _mm256_set1_epi32(ld32(a[1] + k));
        __m256i a2 = _mm256_set1_epi32(ld32(a[2] + k)), a3 = _mm256_set1_epi32(ld32(a[3] + k));
        c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(_mm256_maddubs_epi16(a0, b0), ones));
        c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(_mm256_maddubs_epi16(a0, b1), ones));
        c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(_mm256_maddubs_epi16(a1, b0), ones));
        c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(_mm256_maddubs_epi16(a1, b1), ones));
        c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(_mm256_maddubs_epi16(a2, b0), ones));
        c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(_mm256_maddubs_epi16(a2, b1), ones));
        c30 = _mm256_add_epi32(c30, _mm256_madd_epi16(_mm256_maddubs_epi16(a3, b0), ones));
        c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(_mm256_maddubs_epi16(a3, b1), ones));
    }
    __m256i c[8] = {c00, c01, c10, c11, c20, c21, c30, c31};
    for (int r = 0; r < mr; r++) {
        _mm256_storeu_si256((__m256i *)(C + r * OQ_Q8_NR), c[2 * r]);
        _mm256_storeu_si256((__m256i *)(C + r * OQ_Q8_NR + 8), c[2 * r + 1]);
    }
}

static void tile_avx2(const uint8_t *A, int64_t lda, int mr, const int8_t *panel, int64_t K4,
                      int32_t *C)
{
    for (int r0 = 0; r0 < mr; r0 += 4) {
        const uint8_t *a[4];
        int m = mr - r0 < 4 ? mr - r0 : 4;
        for (int r = 0; r < 4; r++)
            a[r] = A + (r0 + (r < m ? r : 0)) * lda;
        tile4_avx2(a, m, panel, K4, C + r0 * OQ_Q8_NR);
    }
}

__attribute__((target("avx2"))) static int64_t sum_avx2(const uint8_t *a, int64_t n)
{
    __m256i acc = _mm256_setzero_si256(), z = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        acc = _mm256_add_epi64(acc, _mm256_sad_epu8(_mm256_loadu_si256((const __m256i *)(a + i)), z));
    __m128i s = _mm_add_epi64(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    int64_t sum = _mm_cvtsi128_si64(s) + _mm_extract_epi64(s, 1);
    for (; i < n; i++)
        sum += a[i];
    return sum;
}
#endif

static void requant_generic(const int32_t *acc, int mr, const int64_t *rowsum, const oq_q8_out *o,
                            int64_t n0, void *out)
{
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < OQ_Q8_NR; c++) {
            int64_t n = n0 + c;
            int32_t a = (int32_t)((uint32_t)acc[r * OQ_Q8_NR + c] +
                                  (uint32_t)o->colm[n] * (uint32_t)rowsum[r] + (uint32_t)o->colc[n]);
            float f = (float)a * o->scale[n];
            if (o->float_out) {
                ((float *)out)[r * OQ_Q8_NR + c] = f;
                continue;
            }
            f = f < o->fmin ? o->fmin : f;
            f = f > o->fmax ? o->fmax : f;
            int32_t v = (int32_t)nearbyintf(f) + o->yzp;
            ((uint8_t *)out)[r * OQ_Q8_NR + c] = (uint8_t)v;
        }
}

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx512f,avx512bw"))) static void
requant_avx512(const int32_t *acc, int mr, const int64_t *rowsum, const oq_q8_out *o, int64_t n0,
               void *out)
{
    __m512i cm = _mm512_loadu_si512(o->colm + n0), cc = _mm512_loadu_si512(o->colc + n0);
    __m512 sc = _mm512_loadu_ps(o->scale + n0);
    __m512 lo = _mm512_set1_ps(o->fmin), hi = _mm512_set1_ps(o->fmax);
    __m512i zp = _mm512_set1_epi32(o->yzp);
    /* a row sum of 0 (symmetric weights: none is computed) adds colm * 0 = 0: skipped,
     * the same int32 sum */
    if (o->float_out) {
        for (int r = 0; r < mr; r++) {
            __m512i a = _mm512_add_epi32(_mm512_loadu_si512(acc + r * OQ_Q8_NR), cc);
            if (rowsum[r])
                a = _mm512_add_epi32(a, _mm512_mullo_epi32(cm, _mm512_set1_epi32((int32_t)(uint32_t)rowsum[r])));
            _mm512_storeu_ps((float *)out + r * OQ_Q8_NR, _mm512_mul_ps(_mm512_cvtepi32_ps(a), sc));
        }
        return;
    }
    for (int r = 0; r < mr; r++) {
        __m512i a = _mm512_add_epi32(_mm512_loadu_si512(acc + r * OQ_Q8_NR), cc);
        if (rowsum[r])
            a = _mm512_add_epi32(a, _mm512_mullo_epi32(cm, _mm512_set1_epi32((int32_t)(uint32_t)rowsum[r])));
        __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(a), sc);
        f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
        __m512i v = _mm512_add_epi32(_mm512_cvtps_epi32(f), zp);
        _mm_storeu_si128((__m128i *)((uint8_t *)out + r * OQ_Q8_NR), _mm512_cvtepi32_epi8(v));
    }
}

__attribute__((target("avx2"))) static void requant_avx2(const int32_t *acc, int mr,
                                                         const int64_t *rowsum, const oq_q8_out *o,
                                                         int64_t n0, void *out)
{
    __m256 lo = _mm256_set1_ps(o->fmin), hi = _mm256_set1_ps(o->fmax);
    __m256i zp = _mm256_set1_epi32(o->yzp);
    for (int h = 0; h < 2; h++) {
        __m256i cm = _mm256_loadu_si256((const __m256i *)(o->colm + n0 + 8 * h));
        __m256i cc = _mm256_loadu_si256((const __m256i *)(o->colc + n0 + 8 * h));
        __m256 sc = _mm256_loadu_ps(o->scale + n0 + 8 * h);
        for (int r = 0; r < mr; r++) {
            __m256i a = _mm256_add_epi32(
                _mm256_loadu_si256((const __m256i *)(acc + r * OQ_Q8_NR + 8 * h)),
                _mm256_add_epi32(_mm256_mullo_epi32(cm, _mm256_set1_epi32((int32_t)(uint32_t)rowsum[r])), cc));
            __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(a), sc);
            if (o->float_out) {
                _mm256_storeu_ps((float *)out + r * OQ_Q8_NR + 8 * h, f);
                continue;
            }
            f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);
            __m256i v = _mm256_add_epi32(_mm256_cvtps_epi32(f), zp);
            /* the low byte of each lane (values already in range) */
            __m256i b = _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                                                0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
            int32_t w0 = _mm_cvtsi128_si32(_mm256_castsi256_si128(b));
            int32_t w1 = _mm_cvtsi128_si32(_mm256_extracti128_si256(b, 1));
            uint8_t *d = (uint8_t *)out + r * OQ_Q8_NR + 8 * h;
            memcpy(d, &w0, 4);
            memcpy(d + 4, &w1, 4);
        }
    }
}
#endif

void oq_q8_requant(oq_q8_isa isa, const int32_t *acc, int mr, const int64_t *rowsum,
                   const oq_q8_out *o, int64_t n0, void *out)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (isa == OQ_Q8_VNNI) {
        requant_avx512(acc, mr, rowsum, o, n0, out);
        return;
    }
    if (isa == OQ_Q8_AVX2) {
        requant_avx2(acc, mr, rowsum, o, n0, out);
        return;
    }
#endif
    requant_generic(acc, mr, rowsum, o, n0, out);
}

void oq_q8_tile(oq_q8_isa isa, const uint8_t *A, int64_t lda, int mr, const int8_t *panel,
                int64_t K4, int32_t *C)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (isa == OQ_Q8_VNNI) {
        tile_vnni(A, lda, mr, panel, K4, C);
        return;
    }
    if (isa == OQ_Q8_AVX2) {
        tile_avx2(A, lda, mr, panel, K4, C);
        return;
    }
#endif
    tile_generic(A, lda, mr, panel, K4, C, isa == OQ_Q8_AVX2);
}

void oq_q8_transpose8(const uint8_t *in, uint8_t *out)
{
#if defined(__GNUC__) && defined(__x86_64__)
    __m128i r[8], a[8], b[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm_loadu_si128((const __m128i *)(in + 16 * i));
    for (int i = 0; i < 4; i++) { /* [c][r 2i, 2i+1] pairs */
        a[2 * i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]);     /* columns 0-7 */
        a[2 * i + 1] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]); /* columns 8-15 */
    }
    for (int h = 0; h < 2; h++) { /* [c][r 0-3] and [c][r 4-7] */
        b[4 * h] = _mm_unpacklo_epi16(a[h], a[2 + h]);      /* rows 0-3, columns 8h + 0-3 */
        b[4 * h + 1] = _mm_unpackhi_epi16(a[h], a[2 + h]);  /* columns 8h + 4-7 */
        b[4 * h + 2] = _mm_unpacklo_epi16(a[4 + h], a[6 + h]); /* rows 4-7 */
        b[4 * h + 3] = _mm_unpackhi_epi16(a[4 + h], a[6 + h]);
    }
    for (int h = 0; h < 2; h++)
        for (int q = 0; q < 2; q++) {
            __m128i lo = _mm_unpacklo_epi32(b[4 * h + q], b[4 * h + 2 + q]); /* 2 columns x 8 rows */
            __m128i hi = _mm_unpackhi_epi32(b[4 * h + q], b[4 * h + 2 + q]);
            int c = 8 * h + 4 * q;
            _mm_storeu_si128((__m128i *)(out + 8 * c), lo);
            _mm_storeu_si128((__m128i *)(out + 8 * c + 16), hi);
        }
#else
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < OQ_Q8_NR; c++)
            out[c * 8 + r] = in[r * OQ_Q8_NR + c];
#endif
}

int64_t oq_q8_sum(const uint8_t *a, int64_t n)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (__builtin_cpu_supports("avx2"))
        return sum_avx2(a, n);
#endif
    int64_t s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a[i];
    return s;
}
