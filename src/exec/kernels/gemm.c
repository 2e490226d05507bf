/* Gemm and MatMul, and the blocked float GEMM the convolutions use. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernel.h"

/* The float GEMM. A is packed once per call (or ahead of time, for constant weights:
 * oq_k_sgemm_pack_a) into blocks of MR rows stored k-major, so a micro-kernel reads it
 * as one stream. B is consumed in panels of OQ_SGEMM_NR (16) columns: each panel is
 * copied (or produced, e.g. by im2col, through a pack callback) into a contiguous K x 16
 * buffer, zero-padded past N, which stays in cache while blocks of MR rows of A pass
 * over it; or, for a stride-1 convolution on a zero-padded input (b_off), the kernels
 * read each panel row in place. A micro-kernel accumulates an MR x 16 tile over all of K
 * in registers, always in k order starting from zero; the epilogue (shared C code) then
 * combines the
 * tile with C or the bias. Every element of C is therefore computed by the same
 * operations whichever tile, panel or thread range it falls in, so the result does not
 * depend on the thread count. The instruction set is chosen once per process:
 * AVX-512F or AVX2 with FMA (fused multiply-add: one rounding per step) when the CPU has
 * it, else portable C (multiply, then add: ISO C mode does not contract). FMA-capable
 * machines thus round differently from the portable path; AVX-512 and AVX2+FMA give
 * identical results (both are one fused operation per element and step). */
#define NR OQ_SGEMM_NR

/* A is packed per block of mr rows as K x mr (ap[k * mr + q] is row q, column k), so
 * a micro-kernel reads one sequential stream for A and one for the panel. */
typedef void (*sgemm_micro_fn)(const float *ap, const float *panel, int64_t K, float *tile);

/* portable: 4 x 16 */
static void micro_generic(const float *ap, const float *panel, int64_t K, float *tile)
{
    float c0[NR], c1[NR], c2[NR], c3[NR];
    for (int c = 0; c < NR; c++)
        c0[c] = c1[c] = c2[c] = c3[c] = 0.0f;
    for (int64_t k = 0; k < K; k++) {
        const float *bp = panel + k * NR;
        float v0 = ap[4 * k], v1 = ap[4 * k + 1], v2 = ap[4 * k + 2], v3 = ap[4 * k + 3];
        for (int c = 0; c < NR; c++) {
            float bv = bp[c];
            c0[c] += v0 * bv;
            c1[c] += v1 * bv;
            c2[c] += v2 * bv;
            c3[c] += v3 * bv;
        }
    }
    memcpy(tile, c0, sizeof c0);
    memcpy(tile + NR, c1, sizeof c1);
    memcpy(tile + 2 * NR, c2, sizeof c2);
    memcpy(tile + 3 * NR, c3, sizeof c3);
}

#if defined(__GNUC__) && defined(__x86_64__)
#define OQ_HAVE_X86_PATHS 1
#include <immintrin.h>

/* AVX2 + FMA: 6 x 16 (12 ymm accumulators). Row k of the B panel is at p0 + k * NR, or
 * with off (B read in place) at p0 + off[k]; the body is inlined into each kernel with
 * off either NULL or not (as for AVX-512 below). */
#define OQ_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* one accumulated row q (row i0 + q of C): to the tile, or with g straight into C with the
 * bias or beta (epilogue_avx2 writes its full rows through this too) */
OQ_AVX2_INLINE void out_row_avx2(const oq_sgemm_ex *g, float *tile, int64_t i0, int64_t n0,
                                 int q, __m256 t0, __m256 t1)
{
    if (!g) {
        _mm256_storeu_ps(tile + q * NR, t0);
        _mm256_storeu_ps(tile + q * NR + 8, t1);
        return;
    }
    float *c = g->C + (i0 + q) * g->ldc + n0;
    if (g->bias) {
        __m256 bv = _mm256_set1_ps(g->bias[i0 + q]);
        t0 = _mm256_add_ps(bv, t0);
        t1 = _mm256_add_ps(bv, t1);
    } else if (g->beta == 1.0f) {
        t0 = _mm256_add_ps(_mm256_loadu_ps(c), t0);
        t1 = _mm256_add_ps(_mm256_loadu_ps(c + 8), t1);
    } else if (g->beta != 0.0f) {
        __m256 b = _mm256_set1_ps(g->beta);
        t0 = _mm256_add_ps(_mm256_mul_ps(b, _mm256_loadu_ps(c)), t0);
        t1 = _mm256_add_ps(_mm256_mul_ps(b, _mm256_loadu_ps(c + 8)), t1);
    }
    _mm256_storeu_ps(c, t0);
    _mm256_storeu_ps(c + 8, t1);
}

/* g NULL: the tile; else a full 6 x 16 block of C at row i0, column n0 */
OQ_AVX2_INLINE void micro_body_avx2(const float *ap, const float *p0, const int64_t *off,
                                    int64_t K, float *tile, const oq_sgemm_ex *g, int64_t i0,
                                    int64_t n0)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t k = 0; k < K; k++, ap += 6) {
        const float *panel = off ? p0 + off[k] : p0 + k * NR;
        __m256 b0 = _mm256_loadu_ps(panel), b1 = _mm256_loadu_ps(panel + 8);
        __m256 v = _mm256_broadcast_ss(ap);
        c00 = _mm256_fmadd_ps(v, b0, c00);
        c01 = _mm256_fmadd_ps(v, b1, c01);
        v = _mm256_broadcast_ss(ap + 1);
        c10 = _mm256_fmadd_ps(v, b0, c10);
        c11 = _mm256_fmadd_ps(v, b1, c11);
        v = _mm256_broadcast_ss(ap + 2);
        c20 = _mm256_fmadd_ps(v, b0, c20);
        c21 = _mm256_fmadd_ps(v, b1, c21);
        v = _mm256_broadcast_ss(ap + 3);
        c30 = _mm256_fmadd_ps(v, b0, c30);
        c31 = _mm256_fmadd_ps(v, b1, c31);
        v = _mm256_broadcast_ss(ap + 4);
        c40 = _mm256_fmadd_ps(v, b0, c40);
        c41 = _mm256_fmadd_ps(v, b1, c41);
        v = _mm256_broadcast_ss(ap + 5);
        c50 = _mm256_fmadd_ps(v, b0, c50);
        c51 = _mm256_fmadd_ps(v, b1, c51);
    }
    out_row_avx2(g, tile, i0, n0, 0, c00, c01);
    out_row_avx2(g, tile, i0, n0, 1, c10, c11);
    out_row_avx2(g, tile, i0, n0, 2, c20, c21);
    out_row_avx2(g, tile, i0, n0, 3, c30, c31);
    out_row_avx2(g, tile, i0, n0, 4, c40, c41);
    out_row_avx2(g, tile, i0, n0, 5, c50, c51);
}

__attribute__((target("avx2,fma"))) static void micro_avx2(const float *ap, const float *panel,
                                                           int64_t K, float *tile)
{
    micro_body_avx2(ap, panel, NULL, K, tile, NULL, 0, 0);
}

__attribute__((target("avx2,fma"))) static void micro_off_avx2(const float *ap, const float *b,
                                                               const int64_t *off, int64_t K,
                                                               float *tile)
{
    micro_body_avx2(ap, b, off, K, tile, NULL, 0, 0);
}

/* a full block straight into C (no tile in between): B packed (off NULL) or in place */
__attribute__((target("avx2,fma"))) static void micro_c_avx2(const float *ap, const float *b,
                                                             const int64_t *off, int64_t K,
                                                             const oq_sgemm_ex *g, int64_t i0,
                                                             int64_t n0)
{
    if (off)
        micro_body_avx2(ap, b, off, K, NULL, g, i0, n0);
    else
        micro_body_avx2(ap, b, NULL, K, NULL, g, i0, n0);
}

/* AVX-512F kernels. Row k of the B panel is at p0 + k * NR, or with off (B read in
 * place) at p0 + off[k]; the second panel of micro2 at p1 + k * NR, or right after the
 * first (p0 + off[k] + NR). The bodies are inlined into each kernel with off either NULL
 * or not, so each kernel's loop has no test in it. */
#define OQ_AVX512_INLINE __attribute__((target("avx512f"), always_inline)) static inline

/* 12 x 16 (12 zmm accumulators, B row in one register) */
OQ_AVX512_INLINE void micro_body_avx512(const float *ap, const float *p0, const int64_t *off,
                                        int64_t K, float *tile)
{
    __m512 c[12];
    for (int q = 0; q < 12; q++)
        c[q] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k++, ap += 12) {
        __m512 b = _mm512_loadu_ps(off ? p0 + off[k] : p0 + k * NR);
#pragma GCC unroll 12
        for (int q = 0; q < 12; q++)
            c[q] = _mm512_fmadd_ps(_mm512_set1_ps(ap[q]), b, c[q]);
    }
    for (int q = 0; q < 12; q++)
        _mm512_storeu_ps(tile + q * NR, c[q]);
}

/* 12 x 32, two adjacent panels at once (24 zmm accumulators): twice the multiply-adds
 * per broadcast of A; every element is the same sum as in the 12 x 16 kernel */
OQ_AVX512_INLINE void micro2_body_avx512(const float *ap, const float *p0, const float *p1,
                                         const int64_t *off, int64_t K, float *t0, float *t1)
{
    __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0,
           c7 = c0, c8 = c0, c9 = c0, c10 = c0, c11 = c0;
    __m512 d0 = c0, d1 = c0, d2 = c0, d3 = c0, d4 = c0, d5 = c0, d6 = c0, d7 = c0, d8 = c0,
           d9 = c0, d10 = c0, d11 = c0;
    for (int64_t k = 0; k < K; k++, ap += 12) {
        const float *r0 = off ? p0 + off[k] : p0 + k * NR, *r1 = off ? r0 + NR : p1 + k * NR;
        __m512 b = _mm512_loadu_ps(r0), bb = _mm512_loadu_ps(r1);
        __m512 v;
#define OQ_ROW2(I)                                  \
        v = _mm512_set1_ps(ap[I]);                  \
        c##I = _mm512_fmadd_ps(v, b, c##I);         \
        d##I = _mm512_fmadd_ps(v, bb, d##I);
        OQ_ROW2(0) OQ_ROW2(1) OQ_ROW2(2) OQ_ROW2(3) OQ_ROW2(4) OQ_ROW2(5)
        OQ_ROW2(6) OQ_ROW2(7) OQ_ROW2(8) OQ_ROW2(9) OQ_ROW2(10) OQ_ROW2(11)
#undef OQ_ROW2
    }
    __m512 cs[12] = {c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11};
    __m512 ds[12] = {d0, d1, d2, d3, d4, d5, d6, d7, d8, d9, d10, d11};
    for (int q = 0; q < 12; q++) {
        _mm512_storeu_ps(t0 + q * NR, cs[q]);
        _mm512_storeu_ps(t1 + q * NR, ds[q]);
    }
}

__attribute__((target("avx512f"))) static void micro_avx512(const float *ap, const float *panel,
                                                            int64_t K, float *tile)
{
    micro_body_avx512(ap, panel, NULL, K, tile);
}

__attribute__((target("avx512f"))) static void micro2_avx512(const float *ap, const float *p0,
                                                             const float *p1, int64_t K,
                                                             float *t0, float *t1)
{
    micro2_body_avx512(ap, p0, p1, NULL, K, t0, t1);
}

__attribute__((target("avx512f"))) static void micro_off_avx512(const float *ap, const float *b,
                                                                const int64_t *off, int64_t K,
                                                                float *tile)
{
    micro_body_avx512(ap, b, off, K, tile);
}

__attribute__((target("avx512f"))) static void micro2_off_avx512(const float *ap, const float *b,
                                                                 const int64_t *off, int64_t K,
                                                                 float *t0, float *t1)
{
    micro2_body_avx512(ap, b, NULL, off, K, t0, t1);
}
#endif

#define MR_MAX 12

typedef void (*sgemm_micro2_fn)(const float *ap, const float *p0, const float *p1, int64_t K,
                                float *t0, float *t1);

typedef void (*sgemm_micro_off_fn)(const float *ap, const float *b, const int64_t *off,
                                   int64_t K, float *tile);
typedef void (*sgemm_micro2_off_fn)(const float *ap, const float *b, const int64_t *off,
                                    int64_t K, float *t0, float *t1);

typedef struct sgemm_isa {
    sgemm_micro_fn micro;
    int mr;
    sgemm_micro2_fn micro2; /* two panels at once, or NULL */
    /* B in place (oq_sgemm_ex.b_off), or NULL: the rows are then copied into a panel */
    sgemm_micro_off_fn micro_off;
    sgemm_micro2_off_fn micro2_off;
    /* a full mr x NR block straight into C with the epilogue, or NULL */
    void (*micro_c)(const float *ap, const float *b, const int64_t *off, int64_t K,
                    const oq_sgemm_ex *g, int64_t i0, int64_t n0);
} sgemm_isa;

/* 0 unknown, else 1 + index into isas; written once, racing writers store the same value */
static _Atomic int isa_choice;

static sgemm_isa pick_isa(void)
{
    static const sgemm_isa isas[] = {
        {micro_generic, 4, NULL, NULL, NULL, NULL},
#ifdef OQ_HAVE_X86_PATHS
        {micro_avx2, 6, NULL, micro_off_avx2, NULL, micro_c_avx2},
        {micro_avx512, 12, micro2_avx512, micro_off_avx512, micro2_off_avx512, NULL},
#endif
    };
    int c = atomic_load_explicit(&isa_choice, memory_order_relaxed);
    if (!c) {
        c = 1;
#ifdef OQ_HAVE_X86_PATHS
        __builtin_cpu_init();
        const char *env = getenv("ONNXQ_SGEMM_ISA"); /* testing: generic, avx2 */
        bool want512 = !env || strcmp(env, "avx512") == 0 || strcmp(env, "auto") == 0;
        bool want256 = want512 || strcmp(env, "avx2") == 0;
        if (want512 && __builtin_cpu_supports("avx512f"))
            c = 3;
        else if (want256 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            c = 2;
#endif
        atomic_store_explicit(&isa_choice, c, memory_order_relaxed);
    }
    return isas[c - 1];
}

/* copy columns n0 .. n0+nv-1 of a row-major B into a K x NR panel, zero-padded
 * (compiled twice: plain, and for AVX-512 where a 64-byte row is one register move) */
static inline __attribute__((always_inline)) void pack_plain_body(const oq_sgemm_ex *g,
                                                                  int64_t n0, int64_t nv,
                                                                  float *dst)
{
    const float *src = g->B + n0;
    for (int64_t k = 0; k < g->K; k++, src += g->ldb, dst += NR) {
        if (nv == NR) {
            memcpy(dst, src, NR * sizeof(float));
        } else {
            memcpy(dst, src, (size_t)nv * sizeof(float));
            memset(dst + nv, 0, (size_t)(NR - nv) * sizeof(float));
        }
    }
}

static void pack_plain_generic(const oq_sgemm_ex *g, int64_t n0, int64_t nv, float *dst)
{
    pack_plain_body(g, n0, nv, dst);
}

#ifdef OQ_HAVE_X86_PATHS
__attribute__((target("avx512f"))) static void pack_plain_avx512(const oq_sgemm_ex *g,
                                                                 int64_t n0, int64_t nv,
                                                                 float *dst)
{
    pack_plain_body(g, n0, nv, dst);
}
#endif

static void pack_plain(const sgemm_isa *isa, const oq_sgemm_ex *g, int64_t n0, int64_t nv,
                       float *dst)
{
#ifdef OQ_HAVE_X86_PATHS
    if (isa->micro2) { /* the AVX-512 row of the table */
        pack_plain_avx512(g, n0, nv, dst);
        return;
    }
#endif
    (void)isa;
    pack_plain_generic(g, n0, nv, dst);
}

/* combine an accumulated tile with C: rows i0.., columns n0.. (mv x nv valid) */
static void epilogue(const oq_sgemm_ex *g, const float *tile, int64_t i0, int64_t mv,
                     int64_t n0, int64_t nv)
{
    for (int64_t r = 0; r < mv; r++) {
        const float *t = tile + r * NR;
        float *c = g->C + (i0 + r) * g->ldc + n0;
        if (g->bias) {
            float bv = g->bias[i0 + r];
            for (int64_t x = 0; x < nv; x++)
                c[x] = bv + t[x];
        } else if (g->beta == 0.0f) {
            memcpy(c, t, (size_t)nv * sizeof(float));
        } else if (g->beta == 1.0f) {
            for (int64_t x = 0; x < nv; x++)
                c[x] = c[x] + t[x];
        } else {
            float beta = g->beta;
            for (int64_t x = 0; x < nv; x++)
                c[x] = beta * c[x] + t[x];
        }
    }
}

#ifdef OQ_HAVE_X86_PATHS
/* the epilogue for full 16-column rows: the same operations, 8 lanes at a time (as
 * micro_c_avx2 writes a block straight into C: out_row_avx2). Only on machines whose
 * kernels use FMA (r->isa.mr > 4); C11 mode keeps mul + add unfused (-ffp-contract=off). */
__attribute__((target("avx2,fma"))) static void epilogue_avx2(const oq_sgemm_ex *g,
                                                              const float *tile, int64_t i0,
                                                              int64_t mv, int64_t n0)
{
    for (int64_t r = 0; r < mv; r++) {
        const float *t = tile + r * NR;
        out_row_avx2(g, NULL, i0, n0, (int)r, _mm256_loadu_ps(t), _mm256_loadu_ps(t + 8));
    }
}
#endif

typedef struct sgemm_run {
    const oq_sgemm_ex *g;
    sgemm_isa isa;
    bool by_panels;     /* parallel items are column panels (else blocks of mr rows) */
    float *panels;      /* one K x NR panel buffer per range (worker index) */
    const float *ap;    /* A packed: per block of mr rows, K x mr */
} sgemm_run;

/* the post function on rows i .. i+mv-1, columns n0 .. n0+nv-1 of C */
static void post_rows(const oq_sgemm_ex *g, int64_t i, int64_t mv, int64_t n0, int64_t nv)
{
    for (int64_t r = 0; r < mv; r++)
        g->post->fn(g->post->ctx, g->C + (i + r) * g->ldc + n0, nv, g->post_row0 + i + r);
}

static void tile_out(const sgemm_run *r, const float *tile, int64_t i, int64_t mv, int64_t n0,
                     int64_t nv)
{
#ifdef OQ_HAVE_X86_PATHS
    if (nv == NR && r->isa.mr > 4) { /* an AVX2 or AVX-512 machine */
        epilogue_avx2(r->g, tile, i, mv, n0);
        return;
    }
#endif
    epilogue(r->g, tile, i, mv, n0, nv);
}

/* all row blocks in [mb, me) (mb a multiple of mr) against one panel: packed, or with
   off, B rows in place */
static void rows_x_panel(const sgemm_run *r, const float *panel, const int64_t *off,
                         int64_t mb, int64_t me, int64_t n0, int64_t nv)
{
    const int mr = r->isa.mr;
    const int64_t K = r->g->K;
    float tile[MR_MAX * NR];
    for (int64_t i = mb; i < me; i += mr) {
        if (r->isa.micro_c && nv == NR && me - i >= mr) {
            r->isa.micro_c(r->ap + i * K, panel, off, K, r->g, i, n0);
            continue;
        }
        if (off)
            r->isa.micro_off(r->ap + i * K, panel, off, K, tile);
        else
            r->isa.micro(r->ap + i * K, panel, K, tile);
        tile_out(r, tile, i, me - i < mr ? me - i : mr, n0, nv);
    }
}

/* the same for two adjacent panels (the first one full) with micro2 */
static void rows_x_panel2(const sgemm_run *r, const float *p0, const float *p1,
                          const int64_t *off, int64_t mb, int64_t me, int64_t n0, int64_t nv1)
{
    const int mr = r->isa.mr;
    const int64_t K = r->g->K;
    float t0[MR_MAX * NR], t1[MR_MAX * NR];
    for (int64_t i = mb; i < me; i += mr) {
        if (off)
            r->isa.micro2_off(r->ap + i * K, p0, off, K, t0, t1);
        else
            r->isa.micro2(r->ap + i * K, p0, p1, K, t0, t1);
        int64_t mv = me - i < mr ? me - i : mr;
        tile_out(r, t0, i, mv, n0, NR);
        tile_out(r, t1, i, mv, n0 + NR, nv1);
    }
}

/* A into blocks of mr rows, each K x mr; rows past M repeat the last row */
static void pack_a(int64_t M, int64_t K, const float *A, int64_t lda, int mr, float *dst)
{
    const float *rows[MR_MAX];
    for (int64_t i0 = 0; i0 < M; i0 += mr) {
        for (int q = 0; q < mr; q++)
            rows[q] = A + (i0 + q < M ? i0 + q : M - 1) * lda;
        for (int64_t k = 0; k < K; k++)
            for (int q = 0; q < mr; q++)
                *dst++ = rows[q][k];
    }
}

size_t oq_k_sgemm_packed_a_floats(int64_t M, int64_t K)
{
    int mr = pick_isa().mr;
    return (size_t)((M + mr - 1) / mr) * (size_t)mr * (size_t)(K > 0 ? K : 1);
}

void oq_k_sgemm_pack_a(int64_t M, int64_t K, const float *A, int64_t lda, float *dst)
{
    pack_a(M, K, A, lda, pick_isa().mr, dst);
}

int oq_k_sgemm_mr(void) { return pick_isa().mr; }

/* panels: NR columns of C each; with b_off, panels do not cross rows of b_row_w columns */
static int64_t panel_count(const oq_sgemm_ex *g)
{
    if (g->b_off)
        return g->b_rows * ((g->b_row_w + NR - 1) / NR);
    return (g->N + NR - 1) / NR;
}

/* panel p: its first column n0 and width nv, and with b_off where its B rows start
   (relative to b_off[k]) and whether the next panel continues the same row */
static void panel_at(const oq_sgemm_ex *g, int64_t p, int64_t *n0, int64_t *nv,
                     const float **bsrc, bool *row_goes_on)
{
    if (!g->b_off) {
        *n0 = p * NR;
        *nv = g->N - *n0 < NR ? g->N - *n0 : NR;
        *bsrc = NULL;
        *row_goes_on = true;
        return;
    }
    int64_t pw = (g->b_row_w + NR - 1) / NR, row = p / pw, c0 = (p % pw) * NR;
    *n0 = row * g->b_row_w + c0;
    *nv = g->b_row_w - c0 < NR ? g->b_row_w - c0 : NR;
    *bsrc = g->B + row * g->b_ldrow + c0;
    *row_goes_on = p % pw + 1 < pw;
}

/* a panel from B rows in place, for kernels that cannot read them there */
static void pack_off(const oq_sgemm_ex *g, const float *bsrc, int64_t nv, float *dst)
{
    for (int64_t k = 0; k < g->K; k++, dst += NR) {
        memcpy(dst, bsrc + g->b_off[k], (size_t)nv * sizeof(float));
        if (nv < NR)
            memset(dst + nv, 0, (size_t)(NR - nv) * sizeof(float));
    }
}

static void make_panel(const sgemm_run *r, int64_t n0, int64_t nv, const float *bsrc,
                       float *dst)
{
    const oq_sgemm_ex *g = r->g;
    if (g->b_off)
        pack_off(g, bsrc, nv, dst);
    else if (g->pack)
        g->pack(g->pack_ctx, n0, nv, dst);
    else
        pack_plain(&r->isa, g, n0, nv, dst);
}

static void sgemm_range(void *arg, int64_t b, int64_t e, int w)
{
    const sgemm_run *r = arg;
    const oq_sgemm_ex *g = r->g;
    size_t per = (size_t)(g->K > 0 ? g->K : 1) * NR;
    float *panel = r->panels + (size_t)w * 2 * per, *panel2 = panel + per;
    int64_t pb = r->by_panels ? b : 0;
    int64_t pe = r->by_panels ? e : panel_count(g);
    /* rows by whole blocks: packed A is addressed by block (ap + i * K for i a multiple
       of mr), whatever ranges the pool cuts */
    int64_t mb = r->by_panels ? 0 : b * r->isa.mr;
    int64_t me = r->by_panels ? g->M : (e * r->isa.mr < g->M ? e * r->isa.mr : g->M);
    bool in_place = g->b_off && r->isa.micro_off;
    /* the post function runs on pieces of up to POST_COLS columns of the range's rows
       as soon as they are final, while they are still in cache (panels follow each
       other in C's columns) */
    enum { POST_COLS = 256 };
    int64_t post_from = -1, end = 0;
    for (int64_t p = pb; p < pe; p++) {
        int64_t n0, nv;
        const float *bsrc;
        bool goes_on;
        panel_at(g, p, &n0, &nv, &bsrc, &goes_on);
        if (post_from < 0)
            post_from = n0;
        if (g->post && n0 - post_from >= POST_COLS) {
            post_rows(g, mb, me - mb, post_from, n0 - post_from);
            post_from = n0;
        }
        if (r->isa.micro2 && p + 1 < pe && nv == NR && goes_on) {
            int64_t n1, nv1;
            const float *bsrc1;
            bool goes_on1;
            panel_at(g, p + 1, &n1, &nv1, &bsrc1, &goes_on1);
            if (in_place && nv1 == NR) {
                rows_x_panel2(r, bsrc, NULL, g->b_off, mb, me, n0, nv1);
            } else {
                make_panel(r, n0, nv, bsrc, panel);
                make_panel(r, n1, nv1, bsrc1, panel2);
                rows_x_panel2(r, panel, panel2, NULL, mb, me, n0, nv1);
            }
            end = n1 + nv1;
            p++;
            continue;
        }
        if (in_place && nv == NR) {
            rows_x_panel(r, bsrc, g->b_off, mb, me, n0, nv);
        } else {
            make_panel(r, n0, nv, bsrc, panel);
            rows_x_panel(r, panel, NULL, mb, me, n0, nv);
        }
        end = n0 + nv;
    }
    if (g->post && post_from >= 0 && end > post_from)
        post_rows(g, mb, me - mb, post_from, end - post_from);
}

#ifdef OQ_HAVE_X86_PATHS
/* One row of A (M = 1: a classifier head, a step of an unrolled RNN, a batch-1 pooled
 * layer) times a row-major B, GEMV_COLS columns at a time: each element is the sum the FMA
 * micro-kernels form (0, then a[k] * b[k][n] fused in, k in order), and the epilogue is
 * out_row_avx2's, so the result is bit-identical to the blocked path; B is read once, in
 * place, where the blocked path copied it into panels first (half of an unrolled LSTM's
 * run). */
typedef struct gemv_job {
    const oq_sgemm_ex *g;
    int64_t cols;             /* per block, a multiple of 8, at most GEMV_COLS */
} gemv_job;

#define GEMV_COLS 512 /* columns per block: their sums stay in L1 while B streams by */

/* columns [s0 * cols, s1 * cols) of C */
__attribute__((target("avx2,fma"))) static void gemv_avx2(void *arg, int64_t s0, int64_t s1, int worker)
{
    (void)worker;
    const oq_sgemm_ex *g = ((const gemv_job *)arg)->g;
    int64_t cols = ((const gemv_job *)arg)->cols;
    const float *a = g->A;
    float acc[GEMV_COLS] __attribute__((aligned(32)));
    for (int64_t s = s0; s < s1; s++) {
        int64_t n0 = s * cols, nv = g->N - n0 < cols ? g->N - n0 : cols, n8 = nv & ~(int64_t)7;
        memset(acc, 0, (size_t)nv * sizeof(float));
        const float *b = g->B + n0;
        for (int64_t kk = 0; kk < g->K; kk++, b += g->ldb) { /* row by row: B read in order */
            __m256 v = _mm256_broadcast_ss(a + kk);
            int64_t x = 0;
            for (; x < n8; x += 8)
                _mm256_store_ps(acc + x, _mm256_fmadd_ps(v, _mm256_loadu_ps(b + x), _mm256_load_ps(acc + x)));
            for (; x < nv; x++)
                acc[x] = fmaf(a[kk], b[x], acc[x]);
        }
        float *c = g->C + n0;
        for (int64_t x = 0; x < nv; x++) /* out_row_avx2's epilogue, element by element */
            c[x] = g->bias ? g->bias[0] + acc[x]
                   : g->beta == 1.0f ? c[x] + acc[x]
                   : g->beta != 0.0f ? g->beta * c[x] + acc[x]
                                     : acc[x];
    }
}
#endif

oq_status oq_k_sgemm_ex(const oq_kctx *k, const oq_sgemm_ex *g)
{
    if (g->M <= 0 || g->N <= 0)
        return OQ_OK;
    sgemm_run r = {g, pick_isa(), true, NULL, NULL};
#ifdef OQ_HAVE_X86_PATHS
    /* M = 1 with B as it is: the FMA kernels' sums without the panels (gemv_avx2) */
    if (g->M == 1 && r.isa.mr > 4 && !g->A_packed && !g->pack && !g->b_off && !g->post && g->B) {
        int threads = k ? oq_k_threads(k) : 1;
        bool one = !k || threads <= 1 || (double)g->N * (double)(g->K + 1) < 65536.0 * 2;
        int64_t cols = one ? GEMV_COLS : (g->N + threads - 1) / threads; /* a block per thread at least */
        cols = cols < 64 ? 64 : cols > GEMV_COLS ? GEMV_COLS : (cols + 7) & ~(int64_t)7;
        gemv_job j = {g, cols};
        int64_t strips = (g->N + cols - 1) / cols;
        if (one)
            gemv_avx2(&j, 0, strips, 0);
        else
            oq_k_parallel_for(k, strips, 1, gemv_avx2, &j);
        return OQ_OK;
    }
#endif
    int64_t panels = panel_count(g);
    int threads = k ? oq_k_threads(k) : 1;
    double work = (double)g->M * (double)g->N * (double)(g->K + 1);
    bool serial = !k || threads <= 1 || work < 65536.0 * 2;
    size_t k1 = (size_t)(g->K > 0 ? g->K : 1), per = k1 * NR;
    int64_t mblocks = (g->M + r.isa.mr - 1) / r.isa.mr;
    if (k1 > SIZE_MAX / sizeof(float) / NR / 512 ||
        (uint64_t)mblocks > SIZE_MAX / sizeof(float) / MR_MAX / k1)
        return OQ_ERR_NOMEM;
    size_t a_elems = g->A_packed ? 0 : (size_t)mblocks * (size_t)r.isa.mr * k1;
    size_t panel_elems = 2 * per * (size_t)(serial ? 1 : threads);
    float *buf = malloc((panel_elems + a_elems) * sizeof(float));
    if (!buf)
        return OQ_ERR_NOMEM;
    r.panels = buf;
    if (g->A_packed) {
        r.ap = g->A_packed;
    } else {
        pack_a(g->M, g->K, g->A, g->lda, r.isa.mr, buf + panel_elems);
        r.ap = buf + panel_elems;
    }
    /* below ~64k multiply-adds per thread the dispatch costs more than it saves */
    if (serial) {
        r.by_panels = true;
        sgemm_range(&r, 0, panels, 0);
        free(buf);
        return OQ_OK;
    }
    if (panels >= 4 * threads || g->M < 4 * r.isa.mr * threads) {
        r.by_panels = true;
        oq_k_parallel_for(k, panels, 1, sgemm_range, &r);
    } else {
        r.by_panels = false;
        /* blocks of mr rows, a thread's share each (rows cut at multiples of mr: a range
         * of rows per thread of ceil(blocks / threads) blocks came out as fewer ranges than
         * threads, one with 2 threads, and with 3 or more cut inside a block, whose rows
         * then read another block's packed A) */
        oq_k_parallel_for(k, mblocks, mblocks / threads > 0 ? mblocks / threads : 1, sgemm_range, &r);
    }
    free(buf);
    return OQ_OK;
}

/* dst[c * ldd + r] = alpha * src[r * lds + c] for r < rows, c < cols, in 32 x 32 tiles
 * (a column of the source at a time would miss the cache on every element) */
static void transpose_scaled(const float *src, int64_t lds, int64_t rows, int64_t cols, float alpha, float *dst,
                             int64_t ldd)
{
    enum { T = 32 };
    for (int64_t r0 = 0; r0 < rows; r0 += T)
        for (int64_t c0 = 0; c0 < cols; c0 += T) {
            int64_t r1 = r0 + T < rows ? r0 + T : rows, c1 = c0 + T < cols ? c0 + T : cols;
            for (int64_t c = c0; c < c1; c++)
                for (int64_t r = r0; r < r1; r++)
                    dst[c * ldd + r] = alpha * src[r * lds + c];
        }
}

oq_status oq_k_sgemm(const oq_kctx *k, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                float beta, float *C, int64_t ldc)
{
    float *ta = NULL, *tb = NULL;
    if (trans_a || alpha != 1.0f) {
        /* op(A) scaled by alpha: the same product alpha * a[i][k] the kernel would form */
        ta = malloc((size_t)(M * K > 0 ? M * K : 1) * sizeof(float));
        if (!ta)
            return OQ_ERR_NOMEM;
        if (trans_a)
            transpose_scaled(A, lda, K, M, alpha, ta, K);
        else
            for (int64_t i = 0; i < M; i++)
                for (int64_t kk = 0; kk < K; kk++)
                    ta[i * K + kk] = alpha * A[i * lda + kk];
        A = ta;
        lda = K;
    }
    if (trans_b) {
        tb = malloc((size_t)(N * K > 0 ? N * K : 1) * sizeof(float));
        if (!tb) {
            free(ta);
            return OQ_ERR_NOMEM;
        }
        transpose_scaled(B, ldb, N, K, 1.0f, tb, N);
        B = tb;
        ldb = N;
    }
    oq_sgemm_ex g;
    memset(&g, 0, sizeof g);
    g.M = M;
    g.N = N;
    g.K = K;
    g.A = A;
    g.lda = lda;
    g.B = B;
    g.ldb = ldb;
    g.C = C;
    g.ldc = ldc;
    g.beta = beta;
    oq_status st = oq_k_sgemm_ex(k, &g);
    free(ta);
    free(tb);
    return st;
}

/* ------------------------------------------------------------------ Gemm --------- */

static oq_status infer_gemm(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, n_in))
        return oq_k_defer(k, out, n_out);
    if (in[0]->rank != 2 || in[1]->rank != 2)
        return oq_k_error(k, OQ_ERR_INVALID, "A and B must be 2-D");
    bool ta = oq_node_attr_int(k->node, "transA", 0), tb = oq_node_attr_int(k->node, "transB", 0);
    int64_t M = in[0]->dims[ta ? 1 : 0], K = in[0]->dims[ta ? 0 : 1];
    int64_t K2 = in[1]->dims[tb ? 1 : 0], N = in[1]->dims[tb ? 0 : 1];
    if (K != K2)
        return oq_k_error(k, OQ_ERR_INVALID, "inner dimensions differ (%lld, %lld)",
                          (long long)K, (long long)K2);
    int64_t d[2] = {M, N};
    if (n_in > 2 && in[2]) {
        oq_rt_tensor o;
        memset(&o, 0, sizeof o);
        o.rank = 2;
        o.dims[0] = M;
        o.dims[1] = N;
        const oq_rt_tensor *two[2] = {&o, in[2]};
        int64_t bd[OQ_RT_MAX_RANK];
        size_t br = 0;
        oq_status st = oq_k_broadcast(k, two, 2, bd, &br);
        if (st)
            return st;
        if (br != 2 || bd[0] != M || bd[1] != N)
            return oq_k_error(k, OQ_ERR_INVALID, "C does not broadcast to [M, N]");
    }
    return oq_k_set_out(k, &out[0], in[0]->dtype, d, 2);
}

static void bias_row(const void *st, void *o, const void *const *in, const int64_t *inc,
                     int64_t n)
{
    float beta = *(const float *)st;
    const float *c = in[0];
    float *y = o;
    for (int64_t i = 0; i < n; i++)
        y[i] = beta * c[i * inc[0]];
}

/* A constant B under transB: transposed once per plan (shared by the nodes that read the
 * same weight) instead of on every run, where it cost more than the product itself when
 * M is small (a classifier head, the steps of an unrolled LSTM). The same numbers reach
 * the same GEMM call. */
typedef struct gemm_state {
    const void *src;        /* the weight it was made from, N x K */
    int64_t N, K;
    const float *bt;        /* K x N, plan-owned */
} gemm_state;

enum { GEMM_SHARED_TRANSPOSED = 1 };

static void make_transposed(const void *src, int64_t rows, int64_t cols, void *dst)
{
    transpose_scaled(src, cols, rows, cols, 1.0f, dst, rows);
}

static oq_status prepare_gemm(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in)
{
    const oq_rt_tensor *b = n_in > 1 ? in[1] : NULL;
    if (!b || !b->data || b->dtype != OQ_DTYPE_FLOAT || b->rank != 2 || !oq_node_attr_int(k->node, "transB", 0))
        return OQ_OK;
    int64_t N = b->dims[0], K = b->dims[1];
    if (N <= 0 || K <= 0)
        return OQ_OK;
    const float *bt = oq_k_shared(k, b->data, GEMM_SHARED_TRANSPOSED, N, K, (size_t)N * (size_t)K * sizeof(float),
                                  make_transposed);
    gemm_state *s = bt ? malloc(sizeof *s) : NULL;
    if (!s)
        return OQ_OK; /* transposed per run */
    *s = (gemm_state){b->data, N, K, bt};
    k->state = s;
    return OQ_OK;
}

static oq_status run_gemm(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    bool ta = oq_node_attr_int(k->node, "transA", 0), tb = oq_node_attr_int(k->node, "transB", 0);
    float alpha = oq_node_attr_float(k->node, "alpha", 1.0f);
    float beta = oq_node_attr_float(k->node, "beta", 1.0f);
    int64_t M = out[0].dims[0], N = out[0].dims[1];
    int64_t K = in[0]->dims[ta ? 0 : 1];
    float b2 = 0.0f;
    if (n_in > 2 && in[2] && beta != 0.0f) {
        oq_k_bcast_apply(k, in + 2, 1, &out[0], bias_row, &beta);
        b2 = 1.0f;
    }
    const gemm_state *s = k->state;
    if (tb && s && s->src == in[1]->data && s->N == in[1]->dims[0] && s->K == in[1]->dims[1])
        return oq_k_sgemm(k, ta, false, M, N, K, alpha, in[0]->data, in[0]->dims[1], s->bt, N, b2, out[0].data, N);
    return oq_k_sgemm(k, ta, tb, M, N, K, alpha, in[0]->data, in[0]->dims[1], in[1]->data,
                      in[1]->dims[1], b2, out[0].data, N);
}

/* ------------------------------------------------------------------ MatMul ------- */

typedef struct mm_shape {
    int64_t M, N, K, batch;
    int64_t bdims[OQ_RT_MAX_RANK];
    size_t brank;
} mm_shape;

static oq_status mm_geometry(oq_kctx *k, const oq_rt_tensor *a, const oq_rt_tensor *b,
                             mm_shape *s, int64_t *od, size_t *orank)
{
    if (a->rank == 0 || b->rank == 0)
        return oq_k_error(k, OQ_ERR_INVALID, "MatMul inputs must have rank >= 1");
    oq_rt_tensor ab, bb;
    memset(&ab, 0, sizeof ab);
    memset(&bb, 0, sizeof bb);
    s->M = a->rank == 1 ? 1 : a->dims[a->rank - 2];
    s->K = a->dims[a->rank - 1];
    int64_t kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2];
    s->N = b->rank == 1 ? 1 : b->dims[b->rank - 1];
    if (s->K != kb)
        return oq_k_error(k, OQ_ERR_INVALID, "inner dimensions differ (%lld, %lld)",
                          (long long)s->K, (long long)kb);
    ab.rank = a->rank > 2 ? a->rank - 2 : 0;
    bb.rank = b->rank > 2 ? b->rank - 2 : 0;
    memcpy(ab.dims, a->dims, ab.rank * 8);
    memcpy(bb.dims, b->dims, bb.rank * 8);
    const oq_rt_tensor *two[2] = {&ab, &bb};
    oq_status st = oq_k_broadcast(k, two, 2, s->bdims, &s->brank);
    if (st)
        return st;
    s->batch = oq_dims_numel(s->bdims, s->brank);
    size_t r = 0;
    for (size_t i = 0; i < s->brank; i++)
        od[r++] = s->bdims[i];
    if (a->rank > 1)
        od[r++] = s->M;
    if (b->rank > 1)
        od[r++] = s->N;
    *orank = r;
    return OQ_OK;
}

static oq_status infer_matmul(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, 2))
        return oq_k_defer(k, out, n_out);
    mm_shape s;
    int64_t od[OQ_RT_MAX_RANK];
    size_t r = 0;
    oq_status st = mm_geometry(k, in[0], in[1], &s, od, &r);
    return st ? st : oq_k_set_out(k, &out[0], in[0]->dtype, od, r);
}

/* offset (in matrices) of batch index bi into a tensor with batch dims bd (broadcast) */
static int64_t batch_offset(const oq_rt_tensor *t, const mm_shape *s, int64_t bi)
{
    size_t tr = t->rank > 2 ? t->rank - 2 : 0;
    int64_t off = 0, stride = 1;
    for (size_t j = s->brank; j-- > 0;) {
        int64_t idx = bi % s->bdims[j];
        bi /= s->bdims[j];
        size_t off_r = s->brank - tr;
        if (j >= off_r) {
            int64_t d = t->dims[j - off_r];
            if (d != 1)
                off += idx * stride;
            stride *= d;
        }
    }
    return off;
}

typedef struct mm_batch_job {
    oq_kctx *k;
    const oq_rt_tensor *a, *b;
    oq_rt_tensor *c;
    const mm_shape *s;
    _Atomic oq_status st; /* the last failure, if any */
} mm_batch_job;

/* float MatMul, batch items b .. e-1 */
static void mm_batches(void *arg, int64_t b, int64_t e, int w)
{
    mm_batch_job *j = arg;
    const mm_shape *s = j->s;
    (void)w;
    for (int64_t bi = b; bi < e; bi++) {
        const float *A = (const float *)j->a->data + batch_offset(j->a, s, bi) * s->M * s->K;
        const float *B = (const float *)j->b->data + batch_offset(j->b, s, bi) * s->K * s->N;
        float *C = (float *)j->c->data + bi * s->M * s->N;
        oq_status st = oq_k_sgemm(j->k, false, false, s->M, s->N, s->K, 1.0f, A, s->K, B, s->N, 0.0f, C,
                                  s->N);
        if (st)
            atomic_store(&j->st, st);
    }
}

static oq_status mm_float(oq_kctx *k, const oq_rt_tensor *a, const oq_rt_tensor *b, oq_rt_tensor *c,
                          const mm_shape *s)
{
    mm_batch_job j = {k, a, b, c, s, OQ_OK};
    /* products too small to split (e.g. attention heads) run side by side instead */
    double work = (double)s->M * (double)s->N * (double)(s->K + 1);
    if (s->batch > 1 && work < 65536.0 * 2)
        oq_k_parallel_for(k, s->batch, 1, mm_batches, &j);
    else
        mm_batches(&j, 0, s->batch, 0);
    return atomic_load(&j.st);
}

static oq_status run_matmul(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    mm_shape s;
    int64_t od[OQ_RT_MAX_RANK];
    size_t r = 0;
    oq_status st = mm_geometry(k, in[0], in[1], &s, od, &r);
    if (st)
        return st;
    if (in[0]->dtype == OQ_DTYPE_FLOAT16) /* products summed in float32, rounded once */
        return oq_k_run_widened(k, run_matmul, in, n_in, out, n_out);
    if (in[0]->dtype == OQ_DTYPE_FLOAT)
        return mm_float(k, in[0], in[1], &out[0], &s);
    /* other numeric types: plain triple loop in double (ints exact up to 2^53) */
    for (int64_t bi = 0; bi < s.batch; bi++) {
        int64_t ao = batch_offset(in[0], &s, bi) * s.M * s.K;
        int64_t bo = batch_offset(in[1], &s, bi) * s.K * s.N;
        for (int64_t i = 0; i < s.M; i++)
            for (int64_t j = 0; j < s.N; j++) {
                if (in[0]->dtype == OQ_DTYPE_INT64 || in[0]->dtype == OQ_DTYPE_INT32 ||
                    in[0]->dtype == OQ_DTYPE_UINT64 || in[0]->dtype == OQ_DTYPE_UINT32) {
                    uint64_t acc = 0;
                    for (int64_t kk = 0; kk < s.K; kk++)
                        acc += (uint64_t)oq_k_get_int(in[0], ao + i * s.K + kk) *
                               (uint64_t)oq_k_get_int(in[1], bo + kk * s.N + j);
                    if (in[0]->dtype == OQ_DTYPE_INT64 || in[0]->dtype == OQ_DTYPE_UINT64)
                        ((uint64_t *)out[0].data)[bi * s.M * s.N + i * s.N + j] = acc;
                    else
                        ((uint32_t *)out[0].data)[bi * s.M * s.N + i * s.N + j] = (uint32_t)acc;
                } else {
                    double acc = 0;
                    for (int64_t kk = 0; kk < s.K; kk++)
                        acc += oq_k_get_f64(in[0], ao + i * s.K + kk) *
                               oq_k_get_f64(in[1], bo + kk * s.N + j);
                    oq_k_set_f64(&out[0], bi * s.M * s.N + i * s.N + j, acc);
                }
            }
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ integer ----- */

static int64_t ival(const oq_rt_tensor *t, int64_t i)
{
    return t->dtype == OQ_DTYPE_INT8 ? ((const int8_t *)t->data)[i]
         : t->dtype == OQ_DTYPE_UINT8 ? ((const uint8_t *)t->data)[i]
                                      : oq_k_get_int(t, i);
}

/* acc = (A - azp) x (B - bzp), batched with broadcasting; azp per row of A (scalar or
 * [M]), bzp per column of B (scalar or [N]). pair_sat: the arithmetic of onnxruntime's
 * u8 x s8 kernels on an AVX2 CPU without VNNI (MLAS QgemmU8X8KernelAvx2.S, vpmaddubsw):
 * the raw products of reduction elements 2j and 2j+1 are added in a saturating int16
 * (K padded with a zero), the zero points are taken off afterwards from row and column
 * sums: sum(a b) - bzp sum(a) - azp sum(b) + K azp bzp. */
static oq_status int_matmul(oq_kctx *k, const oq_rt_tensor *a, const oq_rt_tensor *b,
                            const oq_rt_tensor *azp, const oq_rt_tensor *bzp, int64_t **acc_out,
                            mm_shape *s, bool pair_sat)
{
    int64_t od[OQ_RT_MAX_RANK];
    size_t r = 0;
    oq_status st = mm_geometry(k, a, b, s, od, &r);
    if (st)
        return st;
    int64_t total = s->batch * s->M * s->N;
    int64_t *acc = oq_k_scratch(k, (size_t)(total ? total : 1) * sizeof(int64_t));
    if (!acc)
        return OQ_ERR_NOMEM;
    int64_t naz = azp ? oq_rt_tensor_numel(azp) : 0, nbz = bzp ? oq_rt_tensor_numel(bzp) : 0;
    for (int64_t bi = 0; bi < s->batch; bi++) {
        int64_t ao = batch_offset(a, s, bi) * s->M * s->K, bo = batch_offset(b, s, bi) * s->K * s->N;
        for (int64_t i = 0; i < s->M; i++)
            for (int64_t j = 0; j < s->N; j++) {
                int64_t az = naz ? ival(azp, naz == 1 ? 0 : i) : 0;
                int64_t bz = nbz ? ival(bzp, nbz == 1 ? 0 : j) : 0;
                int64_t sum = 0;
                if (pair_sat) {
                    int64_t sa = 0, sb = 0;
                    for (int64_t kk = 0; kk < s->K; kk += 2) {
                        int64_t a0 = ival(a, ao + i * s->K + kk), b0 = ival(b, bo + kk * s->N + j);
                        int64_t a1 = kk + 1 < s->K ? ival(a, ao + i * s->K + kk + 1) : 0;
                        int64_t b1 = kk + 1 < s->K ? ival(b, bo + (kk + 1) * s->N + j) : 0;
                        int64_t pair = a0 * b0 + a1 * b1;
                        sum += pair > 32767 ? 32767 : pair < -32768 ? -32768 : pair;
                        sa += a0 + a1;
                        sb += b0 + b1;
                    }
                    sum += -bz * sa - az * sb + s->K * az * bz;
                } else {
                    for (int64_t kk = 0; kk < s->K; kk++)
                        sum += (ival(a, ao + i * s->K + kk) - az) * (ival(b, bo + kk * s->N + j) - bz);
                }
                acc[(bi * s->M + i) * s->N + j] = sum;
            }
    }
    *acc_out = acc;
    return OQ_OK;
}

static oq_status infer_mmint(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                             oq_rt_tensor *out, size_t n_out)
{
    bool ql = strcmp(k->node->op_type, "QLinearMatMul") == 0;
    if (ql && n_in < 8)
        return oq_k_error(k, OQ_ERR_INVALID, "needs 8 inputs");
    const oq_rt_tensor *ab[2] = {in[0], in[ql ? 3 : 1]};
    oq_status st = infer_matmul(k, ab, 2, out, n_out);
    out[0].dtype = ql ? in[7]->dtype : OQ_DTYPE_INT32;
    return st;
}

static oq_status run_mmint(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    mm_shape s;
    int64_t *acc;
    /* --target avx2: what onnxruntime computes for uint8 x int8 there (docs/run.md) */
    bool sat = oq_k_arith(k) == OQ_ARITH_AVX2 && in[0]->dtype == OQ_DTYPE_UINT8 && in[1]->dtype == OQ_DTYPE_INT8;
    oq_status st = int_matmul(k, in[0], in[1], n_in > 2 ? in[2] : NULL, n_in > 3 ? in[3] : NULL,
                              &acc, &s, sat);
    if (st)
        return st;
    for (int64_t i = 0; i < s.batch * s.M * s.N; i++)
        ((int32_t *)out[0].data)[i] = (int32_t)acc[i];
    return OQ_OK;
}

/* QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp) */
static oq_status run_qlmm(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    mm_shape s;
    int64_t *acc;
    oq_status st = int_matmul(k, in[0], in[3], in[2], in[5], &acc, &s, false);
    if (st)
        return st;
    int64_t nas = oq_rt_tensor_numel(in[1]), nbs = oq_rt_tensor_numel(in[4]);
    float ys = ((const float *)in[6]->data)[0];
    int64_t yz = ival(in[7], 0);
    double lo = in[7]->dtype == OQ_DTYPE_INT8 ? -128 : 0, hi = in[7]->dtype == OQ_DTYPE_INT8 ? 127 : 255;
    for (int64_t i = 0; i < s.batch * s.M * s.N; i++) {
        int64_t row = (i / s.N) % s.M, col = i % s.N;
        float as = ((const float *)in[1]->data)[nas == 1 ? 0 : row];
        float bs = ((const float *)in[4]->data)[nbs == 1 ? 0 : col];
        float v = (float)acc[i] * (as * bs / ys);
        double r = nearbyint((double)v) + (double)yz;
        r = r < lo ? lo : r > hi ? hi : r;
        if (in[7]->dtype == OQ_DTYPE_INT8)
            ((int8_t *)out[0].data)[i] = (int8_t)r;
        else
            ((uint8_t *)out[0].data)[i] = (uint8_t)r;
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ Det ---------- */

static oq_status infer_det(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    size_t r = in[0]->rank;
    if (r < 2 || in[0]->dims[r - 1] != in[0]->dims[r - 2])
        return oq_k_error(k, OQ_ERR_INVALID, "input must be [..., M, M]");
    return oq_k_set_out(k, &out[0], in[0]->dtype, in[0]->dims, r - 2);
}

/* LU decomposition with partial pivoting, in double */
static oq_status run_det(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    size_t r = in[0]->rank;
    int64_t M = in[0]->dims[r - 1], batch = oq_rt_tensor_numel(&out[0]);
    double *a = oq_k_scratch(k, (size_t)(M > 0 ? M * M : 1) * sizeof(double));
    if (!a)
        return OQ_ERR_NOMEM;
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t i = 0; i < M * M; i++)
            a[i] = oq_k_get_f64(in[0], b * M * M + i);
        double det = 1;
        for (int64_t c = 0; c < M; c++) {
            int64_t p = c;
            for (int64_t i = c + 1; i < M; i++)
                if (fabs(a[i * M + c]) > fabs(a[p * M + c]))
                    p = i;
            if (a[p * M + c] == 0) {
                det = 0;
                break;
            }
            if (p != c) {
                for (int64_t j = 0; j < M; j++) {
                    double t = a[c * M + j];
                    a[c * M + j] = a[p * M + j];
                    a[p * M + j] = t;
                }
                det = -det;
            }
            det *= a[c * M + c];
            for (int64_t i = c + 1; i < M; i++) {
                double f = a[i * M + c] / a[c * M + c];
                for (int64_t j = c; j < M; j++)
                    a[i * M + j] -= f * a[c * M + j];
            }
        }
        oq_k_set_f64(&out[0], b, det);
    }
    return OQ_OK;
}

static bool same_types(const oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in)
{
    return n_in >= 2 && in[0] && in[1] && in[0]->dtype == in[1]->dtype;
}

const oq_kernel oq_kernels_gemm[] = {
    {"", "Gemm", 1, 0, 0, OQ_T(FLOAT), same_types, prepare_gemm, infer_gemm, run_gemm, free, 2},
    {"", "MatMul", 1, 0, 0, OQ_T(FLOAT) | OQ_T(FLOAT16) | OQ_T(DOUBLE) | OQ_T_INTS, same_types, NULL,
     infer_matmul, run_matmul, NULL, 2},
    {"", "Det", 11, 0, 0, OQ_T_FLOATS, NULL, NULL, infer_det, run_det, NULL, 1},
    {"", "MatMulInteger", 10, 0, 0, OQ_T(INT8) | OQ_T(UINT8), NULL, NULL, infer_mmint, run_mmint,
     NULL, 2},
    {"", "QLinearMatMul", 10, 0, 0, OQ_T(INT8) | OQ_T(UINT8), NULL, NULL, infer_mmint, run_qlmm,
     NULL, 8},
};
OQ_KERNEL_TABLE_END(gemm);
