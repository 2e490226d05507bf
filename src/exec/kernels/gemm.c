/* Gemm and MatMul, and the blocked float GEMM the convolutions use. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernel.h"

typedef struct sgemm_job {
    int64_t M, N, K;
    float alpha, beta;
    const float *A;   /* M x K, row-major, lda */
    int64_t lda;
    const float *B;   /* K x N, row-major, ldb */
    int64_t ldb;
    float *C;
    int64_t ldc;
} sgemm_job;

/* The micro-kernel: a 4 x 16 block of C accumulated in registers over all of K, then
 * added to C. Columns are the outer loop: a K x 16 panel of B is copied to a contiguous
 * buffer and stays in cache while every row block of A passes over it. Every element is summed in k order from
 * zero by the same operations whichever path (block, row tail, column tail) computes
 * it, and ISO C mode does not contract a*b+c into FMA, so the result does not depend
 * on how rows are split between threads, nor on the instruction set used. */
#define MR 4
#define NR 16

#define SGEMM_BODY                                                                     \
    {                                                                                  \
        const sgemm_job *j = arg;                                                      \
        const int64_t K = j->K, N = j->N, lda = j->lda, ldb = j->ldb, ldc = j->ldc;    \
        const float alpha = j->alpha;                                                  \
        for (int64_t i = b; i < e; i++) {                                              \
            float *c = j->C + i * ldc;                                                 \
            if (j->beta == 0.0f)                                                       \
                memset(c, 0, (size_t)N * sizeof(float));                               \
            else if (j->beta != 1.0f)                                                  \
                for (int64_t n = 0; n < N; n++)                                        \
                    c[n] *= j->beta;                                                   \
        }                                                                              \
        int64_t n0 = 0;                                                                \
        float *panel = K > 0 && N >= NR ? malloc((size_t)K * NR * sizeof(float)) : NULL; \
        for (; panel && n0 + NR <= N; n0 += NR) {                                      \
            for (int64_t k = 0; k < K; k++)                                            \
                memcpy(panel + k * NR, j->B + k * ldb + n0, NR * sizeof(float));       \
            int64_t i = b;                                                             \
            for (; i + MR <= e; i += MR) {                                             \
                float c0[NR], c1[NR], c2[NR], c3[NR];                                  \
                for (int c = 0; c < NR; c++)                                           \
                    c0[c] = c1[c] = c2[c] = c3[c] = 0.0f;                              \
                const float *a0 = j->A + i * lda, *a1 = a0 + lda, *a2 = a1 + lda,      \
                            *a3 = a2 + lda;                                            \
                for (int64_t k = 0; k < K; k++) {                                      \
                    const float *bp = panel + k * NR;                                  \
                    float v0 = alpha * a0[k], v1 = alpha * a1[k], v2 = alpha * a2[k],  \
                          v3 = alpha * a3[k];                                          \
                    for (int c = 0; c < NR; c++) {                                     \
                        float bv = bp[c];                                              \
                        c0[c] += v0 * bv;                                              \
                        c1[c] += v1 * bv;                                              \
                        c2[c] += v2 * bv;                                              \
                        c3[c] += v3 * bv;                                              \
                    }                                                                  \
                }                                                                      \
                float *d0 = j->C + i * ldc + n0;                                       \
                for (int c = 0; c < NR; c++) {                                         \
                    d0[c] += c0[c];                                                    \
                    d0[ldc + c] += c1[c];                                              \
                    d0[2 * ldc + c] += c2[c];                                          \
                    d0[3 * ldc + c] += c3[c];                                          \
                }                                                                      \
            }                                                                          \
            for (; i < e; i++) {                                                       \
                float acc[NR];                                                         \
                memset(acc, 0, sizeof acc);                                            \
                const float *a = j->A + i * lda;                                       \
                for (int64_t k = 0; k < K; k++) {                                      \
                    const float *bp = panel + k * NR;                                  \
                    float av = alpha * a[k];                                           \
                    for (int c = 0; c < NR; c++)                                       \
                        acc[c] += av * bp[c];                                          \
                }                                                                      \
                for (int c = 0; c < NR; c++)                                           \
                    j->C[i * ldc + n0 + c] += acc[c];                                  \
            }                                                                          \
        }                                                                              \
        for (int64_t i = b; i < e && n0 < N; i++)                                      \
            for (int64_t n = n0; n < N; n++) {                                         \
                float acc = 0.0f;                                                      \
                const float *a = j->A + i * lda;                                       \
                for (int64_t k = 0; k < K; k++)                                        \
                    acc += (alpha * a[k]) * j->B[k * ldb + n];                         \
                j->C[i * ldc + n] += acc;                                              \
            }                                                                          \
        free(panel);                                                                   \
    }

static void sgemm_rows_generic(void *arg, int64_t b, int64_t e, int w)
SGEMM_BODY

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define OQ_HAVE_AVX2_PATH 1
/* the same code compiled for AVX2 (wider vectors; no FMA, see above) */
__attribute__((target("avx2"))) static void sgemm_rows_avx2(void *arg, int64_t b, int64_t e,
                                                             int w)
SGEMM_BODY
#endif

/* -1 unknown, 0 no, 1 yes; written once, racing writers store the same value */
static _Atomic int have_avx2 = -1;

static void sgemm_rows(void *arg, int64_t b, int64_t e, int w)
{
#ifdef OQ_HAVE_AVX2_PATH
    int have = atomic_load_explicit(&have_avx2, memory_order_relaxed);
    if (have < 0) {
        __builtin_cpu_init();
        have = __builtin_cpu_supports("avx2") ? 1 : 0;
        atomic_store_explicit(&have_avx2, have, memory_order_relaxed);
    }
    if (have) {
        sgemm_rows_avx2(arg, b, e, w);
        return;
    }
#endif
    sgemm_rows_generic(arg, b, e, w);
}

void oq_k_sgemm(const oq_kctx *k, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                float beta, float *C, int64_t ldc)
{
    float *ta = NULL, *tb = NULL;
    if (trans_a) {
        ta = malloc((size_t)(M * K > 0 ? M * K : 1) * sizeof(float));
        if (!ta)
            return;
        for (int64_t i = 0; i < M; i++)
            for (int64_t kk = 0; kk < K; kk++)
                ta[i * K + kk] = A[kk * lda + i];
        A = ta;
        lda = K;
    }
    if (trans_b) {
        tb = malloc((size_t)(N * K > 0 ? N * K : 1) * sizeof(float));
        if (!tb) {
            free(ta);
            return;
        }
        for (int64_t kk = 0; kk < K; kk++)
            for (int64_t n = 0; n < N; n++)
                tb[kk * N + n] = B[n * ldb + kk];
        B = tb;
        ldb = N;
    }
    sgemm_job j = {M, N, K, alpha, beta, A, lda, B, ldb, C, ldc};
    int64_t work = N * K;
    int64_t grain = work >= 65536 ? 4 : (65536 / (work ? work : 1) + 4) & ~(int64_t)3;
    if (k)
        oq_k_parallel_for(k, M, grain, sgemm_rows, &j);
    else
        sgemm_rows(&j, 0, M, 0);
    free(ta);
    free(tb);
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
    oq_k_sgemm(k, ta, tb, M, N, K, alpha, in[0]->data, in[0]->dims[1], in[1]->data,
               in[1]->dims[1], b2, out[0].data, N);
    return OQ_OK;
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

static oq_status run_matmul(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    mm_shape s;
    int64_t od[OQ_RT_MAX_RANK];
    size_t r = 0;
    oq_status st = mm_geometry(k, in[0], in[1], &s, od, &r);
    if (st)
        return st;
    if (in[0]->dtype == OQ_DTYPE_FLOAT) {
        for (int64_t bi = 0; bi < s.batch; bi++) {
            const float *A = (const float *)in[0]->data + batch_offset(in[0], &s, bi) * s.M * s.K;
            const float *B = (const float *)in[1]->data + batch_offset(in[1], &s, bi) * s.K * s.N;
            float *C = (float *)out[0].data + bi * s.M * s.N;
            oq_k_sgemm(k, false, false, s.M, s.N, s.K, 1.0f, A, s.K, B, s.N, 0.0f, C, s.N);
        }
        return OQ_OK;
    }
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
 * [M]), bzp per column of B (scalar or [N]). */
static oq_status int_matmul(oq_kctx *k, const oq_rt_tensor *a, const oq_rt_tensor *b,
                            const oq_rt_tensor *azp, const oq_rt_tensor *bzp, int64_t **acc_out,
                            mm_shape *s)
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
                for (int64_t kk = 0; kk < s->K; kk++)
                    sum += (ival(a, ao + i * s->K + kk) - az) * (ival(b, bo + kk * s->N + j) - bz);
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
    oq_status st = int_matmul(k, in[0], in[1], n_in > 2 ? in[2] : NULL, n_in > 3 ? in[3] : NULL,
                              &acc, &s);
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
    oq_status st = int_matmul(k, in[0], in[3], in[2], in[5], &acc, &s);
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
    {"", "Gemm", 1, 0, 0, OQ_T(FLOAT), same_types, NULL, infer_gemm, run_gemm, NULL, 2},
    {"", "MatMul", 1, 0, 0, OQ_T(FLOAT) | OQ_T(DOUBLE) | OQ_T_INTS, same_types, NULL,
     infer_matmul, run_matmul, NULL, 2},
    {"", "Det", 11, 0, 0, OQ_T_FLOATS, NULL, NULL, infer_det, run_det, NULL, 1},
    {"", "MatMulInteger", 10, 0, 0, OQ_T(INT8) | OQ_T(UINT8), NULL, NULL, infer_mmint, run_mmint,
     NULL, 2},
    {"", "QLinearMatMul", 10, 0, 0, OQ_T(INT8) | OQ_T(UINT8), NULL, NULL, infer_mmint, run_qlmm,
     NULL, 8},
};
OQ_KERNEL_TABLE_END(gemm);
