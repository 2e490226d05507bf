/* Elementwise operators: unary math and activations, binary arithmetic and
 * comparisons with multidirectional broadcasting, variadic Sum/Max/Min/Mean, Where,
 * logical ops, Clip, Cast. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

#include "exec/kernel.h"

/* the type-generic macros below compare unsigned values with 0 on purpose */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wtype-limits"
#endif

/* ------------------------------------------------------------------ op ids ------- */

#define EW_OPS(X)                                                                      \
    X(Abs) X(Neg) X(Sqrt) X(Exp) X(Log) X(Reciprocal) X(Floor) X(Ceil) X(Round)        \
    X(Relu) X(LeakyRelu) X(Sigmoid) X(HardSigmoid) X(HardSwish) X(Tanh) X(Erf) X(Sign) \
    X(Softplus) X(Softsign) X(Elu) X(Selu) X(Celu) X(Mish) X(ThresholdedRelu) X(Gelu)  \
    X(Sin) X(Cos) X(Tan) X(Asin) X(Acos) X(Atan) X(Sinh) X(Cosh) X(Asinh) X(Acosh)     \
    X(Atanh) X(Shrink) X(IsNaN) X(IsInf) X(Not) X(Identity)                                      \
    X(Add) X(Sub) X(Mul) X(Div) X(Pow) X(Max) X(Min) X(Sum) X(Mean) X(PRelu) X(Mod)    \
    X(Equal) X(Less) X(Greater) X(LessOrEqual) X(GreaterOrEqual) X(And) X(Or) X(Xor)   \
    X(BitShift) X(BitwiseAnd) X(BitwiseOr) X(BitwiseXor) X(BitwiseNot)

typedef enum ew_op {
#define OQ_X(n) OP_##n,
    EW_OPS(OQ_X)
#undef OQ_X
    OP_COUNT
} ew_op;

static const char *const ew_names[] = {
#define OQ_X(n) #n,
    EW_OPS(OQ_X)
#undef OQ_X
};

typedef struct ew_state {
    ew_op op;
    double alpha, beta, gamma;
    int64_t flag;        /* Mod fmod, BitShift direction (1 = right), IsInf detect bits,
                            Gelu tanh approximation */
} ew_state;

static oq_status ew_prepare(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in)
{
    ew_state *s = calloc(1, sizeof(*s));
    if (!s)
        return OQ_ERR_NOMEM;
    k->state = s;
    const oq_node *n = k->node;
    s->op = OP_COUNT;
    for (int i = 0; i < OP_COUNT; i++)
        if (strcmp(n->op_type, ew_names[i]) == 0)
            s->op = (ew_op)i;
    if (s->op == OP_COUNT)
        return oq_k_error(k, OQ_ERR_INTERNAL, "no elementwise op");
    switch (s->op) {
    case OP_LeakyRelu: s->alpha = oq_node_attr_float(n, "alpha", 0.01f); break;
    case OP_HardSigmoid:
        s->alpha = oq_node_attr_float(n, "alpha", 0.2f);
        s->beta = oq_node_attr_float(n, "beta", 0.5f);
        break;
    case OP_Sigmoid: s->flag = (k->ort & OQ_K_ORT_LOGISTIC) != 0; break;
    case OP_Elu: case OP_Celu: s->alpha = oq_node_attr_float(n, "alpha", 1.0f); break;
    case OP_ThresholdedRelu: s->alpha = oq_node_attr_float(n, "alpha", 1.0f); break;
    case OP_Shrink:
        s->alpha = oq_node_attr_float(n, "lambd", 0.5f);
        s->beta = oq_node_attr_float(n, "bias", 0.0f);
        break;
    case OP_Selu:
        s->alpha = oq_node_attr_float(n, "alpha", 1.67326319217681884765625f);
        s->gamma = oq_node_attr_float(n, "gamma", 1.05070102214813232421875f);
        break;
    case OP_Mod: s->flag = oq_node_attr_int(n, "fmod", 0); break;
    case OP_BitShift: {
        const char *d = oq_node_attr_string(n, "direction", "");
        if (strcmp(d, "RIGHT") == 0) s->flag = 1;
        else if (strcmp(d, "LEFT") == 0) s->flag = 0;
        else return oq_k_error(k, OQ_ERR_INVALID, "BitShift direction must be LEFT or RIGHT");
        break;
    }
    case OP_IsInf:
        s->flag = (oq_node_attr_int(n, "detect_positive", 1) ? 1 : 0) |
                  (oq_node_attr_int(n, "detect_negative", 1) ? 2 : 0);
        break;
    case OP_Gelu: {
        const char *a = oq_node_attr_string(n, "approximate", "none");
        if (strcmp(a, "tanh") == 0) s->flag = 1;
        else if (strcmp(a, "none") != 0)
            return oq_k_error(k, OQ_ERR_INVALID, "Gelu approximate must be none or tanh");
        break;
    }
    default: break;
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ infer -------- */

static bool is_bool_op(ew_op op)
{
    switch (op) {
    case OP_Equal: case OP_Less: case OP_Greater: case OP_LessOrEqual: case OP_GreaterOrEqual:
    case OP_IsNaN: case OP_IsInf:
        return true;
    default:
        return false;
    }
}

/* Before opset 7 a binary op's B is aligned with A at `axis` (broadcast=1), and PRelu's
 * 1-D slope runs along the channels. Returns the inputs to use, with B reshaped. */
static const oq_rt_tensor *const *legacy_inputs(const oq_kctx *k, const oq_rt_tensor *const *in,
                                                size_t n_in, oq_rt_tensor *view,
                                                const oq_rt_tensor **buf)
{
    const ew_state *s = k->state;
    if (k->opset >= 7 || n_in != 2 || !in[0] || !in[1] || in[0]->rank == OQ_RT_UNKNOWN_RANK ||
        in[1]->rank == OQ_RT_UNKNOWN_RANK)
        return in;
    int64_t axis = -1;
    size_t ra = in[0]->rank, rb = in[1]->rank;
    if (s->op == OP_PRelu) {
        if (rb == 1 && ra >= 2 && in[1]->dims[0] == in[0]->dims[1] && in[0]->dims[1] != 1)
            axis = 1;
    } else if (oq_node_attr_int(k->node, "broadcast", 0) && oq_node_attr(k->node, "axis")) {
        axis = oq_k_axis(oq_node_attr_int(k->node, "axis", 0), ra);
    }
    if (axis < 0 || (size_t)axis + rb > ra)
        return in;
    *view = *in[1];
    view->rank = ra;
    for (size_t i = 0; i < ra; i++)
        view->dims[i] = ((int64_t)i >= axis && i < (size_t)axis + rb) ? in[1]->dims[i - (size_t)axis] : 1;
    buf[0] = in[0];
    buf[1] = view;
    return buf;
}

static oq_status infer_ew(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    const ew_state *s = k->state;
    oq_rt_tensor lview;
    const oq_rt_tensor *lbuf[2];
    in = legacy_inputs(k, in, n_in, &lview, lbuf);
    if (n_in < 1 || !in[0])
        return oq_k_error(k, OQ_ERR_INVALID, "missing input");
    out[0].dtype = is_bool_op(s->op) ? OQ_DTYPE_BOOL : in[0]->dtype;
    if (!oq_k_shapes_known(in, n_in))
        return oq_k_defer(k, out, n_out);
    int64_t dims[OQ_RT_MAX_RANK];
    size_t rank = 0;
    oq_status st = oq_k_broadcast(k, in, n_in, dims, &rank);
    if (st != OQ_OK)
        return st;
    return oq_k_set_out(k, &out[0], out[0].dtype, dims, rank);
}

/* ------------------------------------------------------------------ unary -------- */

typedef struct unary_job {
    const ew_state *s;
    const void *a;
    void *o;
} unary_job;

#define UNARY_FLOAT(T, SUF)                                                                   \
    static void unary_##SUF(void *arg, int64_t b, int64_t e, int w)                           \
    {                                                                                          \
        const unary_job *j = arg;                                                              \
        const T *a = (const T *)j->a + b;                                                      \
        T *o = (T *)j->o + b;                                                                  \
        int64_t n = e - b;                                                                     \
        const T al = (T)j->s->alpha, be = (T)j->s->beta, ga = (T)j->s->gamma;                 \
        const T one = 1, zero = 0;                                                             \
        (void)w;                                                                               \
        switch (j->s->op) {                                                                    \
        case OP_Abs: for (int64_t i = 0; i < n; i++) o[i] = fabs(a[i]); break;                \
        case OP_Neg: for (int64_t i = 0; i < n; i++) o[i] = -a[i]; break;                     \
        case OP_Sqrt: for (int64_t i = 0; i < n; i++) o[i] = sqrt(a[i]); break;               \
        case OP_Exp: for (int64_t i = 0; i < n; i++) o[i] = exp(a[i]); break;                 \
        case OP_Log: for (int64_t i = 0; i < n; i++) o[i] = log(a[i]); break;                 \
        case OP_Reciprocal: for (int64_t i = 0; i < n; i++) o[i] = one / a[i]; break;         \
        case OP_Floor: for (int64_t i = 0; i < n; i++) o[i] = floor(a[i]); break;             \
        case OP_Ceil: for (int64_t i = 0; i < n; i++) o[i] = ceil(a[i]); break;               \
        case OP_Round: for (int64_t i = 0; i < n; i++) o[i] = nearbyint(a[i]); break;         \
        case OP_Relu: for (int64_t i = 0; i < n; i++) o[i] = a[i] > zero ? a[i] : zero; break;\
        case OP_LeakyRelu:                                                                     \
            for (int64_t i = 0; i < n; i++) o[i] = a[i] < zero ? al * a[i] : a[i];             \
            break;                                                                             \
        case OP_Sigmoid:                                                                       \
            if (j->s->flag) { /* OQ_K_ORT_LOGISTIC: float32 only (run_unary) */                \
                oq_k_ort_logistic((const float *)(const void *)a, (float *)(void *)o, n);      \
                break;                                                                         \
            }                                                                                  \
            for (int64_t i = 0; i < n; i++) {                                                  \
                T x = a[i];                                                                    \
                o[i] = x >= zero ? one / (one + exp(-x)) : exp(x) / (one + exp(x));            \
            }                                                                                  \
            break;                                                                             \
        case OP_HardSigmoid:                                                                   \
            for (int64_t i = 0; i < n; i++) o[i] = fmax(zero, fmin(one, al * a[i] + be));     \
            break;                                                                             \
        case OP_HardSwish: /* alpha x + beta as the spec writes it, alpha = (T)(1/6) */       \
            for (int64_t i = 0; i < n; i++)                                                    \
                o[i] = a[i] * fmax(zero, fmin(one, a[i] * ((T)1 / (T)6) + (T)0.5));            \
            break;                                                                             \
        case OP_Tanh: for (int64_t i = 0; i < n; i++) o[i] = tanh(a[i]); break;               \
        case OP_Erf: for (int64_t i = 0; i < n; i++) o[i] = erf(a[i]); break;                 \
        case OP_Sign:                                                                          \
            for (int64_t i = 0; i < n; i++)                                                    \
                o[i] = a[i] > zero ? one : a[i] < zero ? -one : a[i];                          \
            break;                                                                             \
        case OP_Softplus:                                                                      \
            for (int64_t i = 0; i < n; i++) {                                                  \
                T x = a[i];                                                                    \
                o[i] = x > zero ? x + log1p(exp(-x)) : log1p(exp(x));                          \
            }                                                                                  \
            break;                                                                             \
        case OP_Softsign: for (int64_t i = 0; i < n; i++) o[i] = a[i] / (one + fabs(a[i])); break; \
        case OP_Elu:                                                                           \
            for (int64_t i = 0; i < n; i++) o[i] = a[i] < zero ? al * (exp(a[i]) - one) : a[i];\
            break;                                                                             \
        case OP_Selu:                                                                          \
            for (int64_t i = 0; i < n; i++)                                                    \
                o[i] = a[i] <= zero ? ga * (al * exp(a[i]) - al) : ga * a[i];                  \
            break;                                                                             \
        case OP_Celu:                                                                          \
            for (int64_t i = 0; i < n; i++)                                                    \
                o[i] = fmax(zero, a[i]) + fmin(zero, al * (exp(a[i] / al) - one));             \
            break;                                                                             \
        case OP_Mish:                                                                          \
            for (int64_t i = 0; i < n; i++) {                                                  \
                T x = a[i];                                                                    \
                T sp = x > zero ? x + log1p(exp(-x)) : log1p(exp(x));                          \
                o[i] = x * tanh(sp);                                                           \
            }                                                                                  \
            break;                                                                             \
        case OP_ThresholdedRelu: for (int64_t i = 0; i < n; i++) o[i] = a[i] > al ? a[i] : zero; break; \
        case OP_Gelu:                                                                          \
            for (int64_t i = 0; i < n; i++) {                                                  \
                T x = a[i];                                                                    \
                if (j->s->flag)                                                                \
                    o[i] = (T)0.5 * x *                                                        \
                           (one + tanh((T)0.7978845608028654 * (x + (T)0.044715 * x * x * x)));\
                else                                                                           \
                    o[i] = (T)0.5 * x * (one + erf(x * (T)0.7071067811865476));                \
            }                                                                                  \
            break;                                                                             \
        case OP_Shrink:                                                                        \
            for (int64_t i = 0; i < n; i++)                                                    \
                o[i] = a[i] < -al ? a[i] + be : a[i] > al ? a[i] - be : zero;                  \
            break;                                                                             \
        case OP_Sin: for (int64_t i = 0; i < n; i++) o[i] = sin(a[i]); break;                 \
        case OP_Cos: for (int64_t i = 0; i < n; i++) o[i] = cos(a[i]); break;                 \
        case OP_Tan: for (int64_t i = 0; i < n; i++) o[i] = tan(a[i]); break;                 \
        case OP_Asin: for (int64_t i = 0; i < n; i++) o[i] = asin(a[i]); break;               \
        case OP_Acos: for (int64_t i = 0; i < n; i++) o[i] = acos(a[i]); break;               \
        case OP_Atan: for (int64_t i = 0; i < n; i++) o[i] = atan(a[i]); break;               \
        case OP_Sinh: for (int64_t i = 0; i < n; i++) o[i] = sinh(a[i]); break;               \
        case OP_Cosh: for (int64_t i = 0; i < n; i++) o[i] = cosh(a[i]); break;               \
        case OP_Asinh: for (int64_t i = 0; i < n; i++) o[i] = asinh(a[i]); break;             \
        case OP_Acosh: for (int64_t i = 0; i < n; i++) o[i] = acosh(a[i]); break;             \
        case OP_Atanh: for (int64_t i = 0; i < n; i++) o[i] = atanh(a[i]); break;             \
        default: break;                                                                        \
        }                                                                                      \
    }
UNARY_FLOAT(float, f32s)

/* onnxruntime's logistic (kernel.h oq_k_ort_logistic): the constants of MLAS
 * logistic.cpp, the fused multiply-adds of its FMA3 kernel; vector and scalar code give
 * the same bits (fmaf is the same single rounding as vfmadd). */
static const float ORT_LOG_LO = -18.0f, ORT_LOG_HI = 18.0f;
static const float ORT_LOG_A[5] = {4.37031012579801e-11f, 1.15627324459942e-07f,
                                   6.08574864600143e-05f, 8.51377133304701e-03f,
                                   2.48287947061529e-01f};
static const float ORT_LOG_B[6] = {6.10247389755681e-13f, 5.76102136993427e-09f,
                                   6.29106785017040e-06f, 1.70198817374094e-03f,
                                   1.16817656904453e-01f, 9.93151921023180e-01f};

static float ort_logistic1(float x)
{
    float v = x < ORT_LOG_LO ? ORT_LOG_LO : x; /* a NaN stays a NaN */
    v = v > ORT_LOG_HI ? ORT_LOG_HI : v;
    float v2 = v * v;
    float p = fmaf(v2, ORT_LOG_A[0], ORT_LOG_A[1]);
    for (int i = 2; i < 5; i++)
        p = fmaf(p, v2, ORT_LOG_A[i]);
    p = p * v;
    float q = fmaf(v2, ORT_LOG_B[0], ORT_LOG_B[1]);
    for (int i = 2; i < 6; i++)
        q = fmaf(q, v2, ORT_LOG_B[i]);
    float y = p / q + 0.5f;
    return y < 0.0f ? 0.0f : y > 1.0f ? 1.0f : y;
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx2,fma"))) static int64_t ort_logistic_avx2(const float *x, float *y,
                                                                     int64_t n)
{
    const __m256 lo = _mm256_set1_ps(ORT_LOG_LO), hi = _mm256_set1_ps(ORT_LOG_HI);
    const __m256 half = _mm256_set1_ps(0.5f), zero = _mm256_setzero_ps(),
                 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_loadu_ps(x + i)));
        __m256 v2 = _mm256_mul_ps(v, v);
        __m256 p = _mm256_fmadd_ps(v2, _mm256_set1_ps(ORT_LOG_A[0]), _mm256_set1_ps(ORT_LOG_A[1]));
        for (int k = 2; k < 5; k++)
            p = _mm256_fmadd_ps(p, v2, _mm256_set1_ps(ORT_LOG_A[k]));
        p = _mm256_mul_ps(p, v);
        __m256 q = _mm256_fmadd_ps(v2, _mm256_set1_ps(ORT_LOG_B[0]), _mm256_set1_ps(ORT_LOG_B[1]));
        for (int k = 2; k < 6; k++)
            q = _mm256_fmadd_ps(q, v2, _mm256_set1_ps(ORT_LOG_B[k]));
        __m256 r = _mm256_add_ps(_mm256_div_ps(p, q), half);
        _mm256_storeu_ps(y + i, _mm256_min_ps(_mm256_max_ps(r, zero), one));
    }
    return i;
}
#endif

void oq_k_ort_logistic(const float *x, float *y, int64_t n)
{
    int64_t i = 0;
#if defined(__GNUC__) && defined(__x86_64__)
    if (oq_k_cpu_avx2() && __builtin_cpu_supports("fma"))
        i = ort_logistic_avx2(x, y, n);
#endif
    for (; i < n; i++)
        y[i] = ort_logistic1(x[i]);
}

/* Relu, HardSigmoid and HardSwish with AVX2, element for element the scalar results:
 * max_ps(x, 0) is "x > 0 ? x : 0"; min_ps(v, 1) is "v < 1 ? v : 1" and gives 1 for a
 * NaN v as fmin(1, v) does; the following max_ps(w, 0) sees no NaN. */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx2"))) static bool unary_f32_avx2(const unary_job *j, int64_t b,
                                                           int64_t e)
{
    const float *a = (const float *)j->a + b;
    float *o = (float *)j->o + b;
    int64_t n = e - b, i = 0;
    __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
    if (j->s->op == OP_Relu) {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(o + i, _mm256_max_ps(_mm256_loadu_ps(a + i), zero));
        for (; i < n; i++)
            o[i] = a[i] > 0.0f ? a[i] : 0.0f;
        return true;
    }
    if (j->s->op == OP_HardSigmoid) {
        float al = (float)j->s->alpha, be = (float)j->s->beta;
        __m256 va = _mm256_set1_ps(al), vb = _mm256_set1_ps(be);
        for (; i + 8 <= n; i += 8) {
            __m256 v = _mm256_add_ps(_mm256_mul_ps(va, _mm256_loadu_ps(a + i)), vb);
            _mm256_storeu_ps(o + i, _mm256_max_ps(_mm256_min_ps(v, one), zero));
        }
        for (; i < n; i++)
            o[i] = fmaxf(0.0f, fminf(1.0f, al * a[i] + be));
        return true;
    }
    if (j->s->op == OP_HardSwish) { /* x * max(0, min(1, x * (1/6) + 0.5)), the same way */
        const float sixth = 1.0f / 6.0f;
        __m256 vs = _mm256_set1_ps(sixth), half = _mm256_set1_ps(0.5f);
        for (; i + 8 <= n; i += 8) {
            __m256 x = _mm256_loadu_ps(a + i);
            __m256 v = _mm256_add_ps(_mm256_mul_ps(x, vs), half);
            _mm256_storeu_ps(o + i, _mm256_mul_ps(x, _mm256_max_ps(_mm256_min_ps(v, one), zero)));
        }
        for (; i < n; i++)
            o[i] = a[i] * fmaxf(0.0f, fminf(1.0f, a[i] * sixth + 0.5f));
        return true;
    }
    return false;
}
#endif

/* Sigmoid, Erf and Tanh with AVX2 and FMA: within 2 ulp of the exact function (the
 * scalar rows call expf / erff / tanhf, within 1 ulp); tests/test_exec_fast.c measures
 * them against double precision. A block of 8 with a lane outside the vector code's range
 * (NaN, Inf, |x| > 87 for Sigmoid, > 100 for Erf, > 9 for Tanh) goes through the scalar
 * formula. */
#if defined(__GNUC__) && defined(__x86_64__)
/* e^x for x in [-87, 88]: x = n ln2 + r with ln2 in two parts (Cody and Waite), |r| <=
 * ln2 / 2, e^r by Cephes' expf polynomial, 2^n through the exponent field (n in
 * [-126, 127]: a normal number). */
__attribute__((target("avx2,fma"))) static inline __m256 exp8_avx2(__m256 x)
{
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    __m256 y = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

/* erf: the faithfully rounded approximation of N. Juffa (stackoverflow.com/a/35148199,
 * the one onnxruntime's MLAS uses): |x| <= 0.927734375, x + x P(x^2); above,
 * 1 - exp(Q(|x|)) with the sign of x. Both branches are evaluated and blended. */
__attribute__((target("avx2,fma"))) static inline __m256 erf8_avx2(__m256 a)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 t = _mm256_andnot_ps(sign, a), s = _mm256_mul_ps(a, a);
    __m256 r = _mm256_fmadd_ps(_mm256_set1_ps(-1.72853470e-5f), t, _mm256_set1_ps(3.83197126e-4f));
    __m256 u = _mm256_fmadd_ps(_mm256_set1_ps(-3.88396438e-3f), t, _mm256_set1_ps(2.42546219e-2f));
    r = _mm256_fmadd_ps(r, s, u);
    r = _mm256_fmadd_ps(r, t, _mm256_set1_ps(-1.06777877e-1f));
    r = _mm256_fmadd_ps(r, t, _mm256_set1_ps(-6.34846687e-1f));
    r = _mm256_fmadd_ps(r, t, _mm256_set1_ps(-1.28717512e-1f));
    r = _mm256_fmadd_ps(r, t, _mm256_sub_ps(_mm256_setzero_ps(), t));
    r = _mm256_max_ps(r, _mm256_set1_ps(-87.0f)); /* e^-87 already leaves 1 - e == 1 */
    __m256 big = _mm256_sub_ps(_mm256_set1_ps(1.0f), exp8_avx2(r));
    big = _mm256_or_ps(big, _mm256_and_ps(a, sign));
    __m256 q = _mm256_set1_ps(-5.96761703e-4f);
    q = _mm256_fmadd_ps(q, s, _mm256_set1_ps(4.99119423e-3f));
    q = _mm256_fmadd_ps(q, s, _mm256_set1_ps(-2.67681349e-2f));
    q = _mm256_fmadd_ps(q, s, _mm256_set1_ps(1.12819925e-1f));
    q = _mm256_fmadd_ps(q, s, _mm256_set1_ps(-3.76125336e-1f));
    q = _mm256_fmadd_ps(q, s, _mm256_set1_ps(1.28379166e-1f));
    __m256 small = _mm256_fmadd_ps(q, a, a);
    return _mm256_blendv_ps(small, big, _mm256_cmp_ps(t, _mm256_set1_ps(0.927734375f), _CMP_GT_OQ));
}

/* tanh: |x| < 0.625, x + x z P(z) with z = x^2 (Cephes' tanhf polynomial); above,
 * (1 - e) / (1 + e) with e = e^(-2|x|) and the sign of x. Both branches are evaluated
 * and blended. */
__attribute__((target("avx2,fma"))) static inline __m256 tanh8_avx2(__m256 x)
{
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    __m256 ax = _mm256_andnot_ps(sign, x), z = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954e-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
    __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
    __m256 ex = exp8_avx2(_mm256_mul_ps(ax, _mm256_set1_ps(-2.0f)));
    __m256 big = _mm256_div_ps(_mm256_sub_ps(one, ex), _mm256_add_ps(one, ex));
    big = _mm256_or_ps(big, _mm256_and_ps(x, sign));
    return _mm256_blendv_ps(small, big, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_GE_OQ));
}

/* Sigmoid (reference arithmetic), Erf and Tanh: 8 lanes at a time; a block with a lane
 * outside the vector range, and the tail, go through the scalar row (unary_f32s). */
__attribute__((target("avx2,fma"))) static bool unary_f32_transcendental(const unary_job *j, int64_t b,
                                                                         int64_t e)
{
    bool sig = j->s->op == OP_Sigmoid && !j->s->flag, th = j->s->op == OP_Tanh;
    if (!sig && !th && j->s->op != OP_Erf)
        return false;
    const float *a = (const float *)j->a;
    float *o = (float *)j->o;
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f),
                 lim = _mm256_set1_ps(sig ? 87.0f : th ? 9.0f : 100.0f);
    int64_t i = b;
    for (; i + 8 <= e; i += 8) {
        __m256 x = _mm256_loadu_ps(a + i), ax = _mm256_andnot_ps(sign, x);
        if (_mm256_movemask_ps(_mm256_cmp_ps(ax, lim, _CMP_LE_OQ)) != 0xff) {
            unary_f32s((void *)j, i, i + 8, 0);
            continue;
        }
        if (th) {
            _mm256_storeu_ps(o + i, tanh8_avx2(x));
            continue;
        }
        if (!sig) {
            _mm256_storeu_ps(o + i, erf8_avx2(x));
            continue;
        }
        /* 1 / (1 + e^-x), or e^x / (1 + e^x) below 0: both from e^-|x| */
        __m256 ex = exp8_avx2(_mm256_sub_ps(_mm256_setzero_ps(), ax)), den = _mm256_add_ps(one, ex);
        __m256 num = _mm256_blendv_ps(one, ex, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
        _mm256_storeu_ps(o + i, _mm256_div_ps(num, den));
    }
    if (i < e)
        unary_f32s((void *)j, i, e, 0);
    return true;
}
#endif

static void unary_f32(void *arg, int64_t b, int64_t e, int w)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (oq_k_cpu_avx2() && unary_f32_avx2(arg, b, e))
        return;
    if (oq_k_cpu_avx2() && __builtin_cpu_supports("fma") && unary_f32_transcendental(arg, b, e))
        return;
#endif
    unary_f32s(arg, b, e, w);
}
UNARY_FLOAT(double, f64)

/* Integer Abs / Neg / Sign / Relu; wrap-around like two's complement hardware. */
#define UNARY_INT(T, SUF, SIGNED)                                                             \
    static void unary_##SUF(void *arg, int64_t b, int64_t e, int w)                           \
    {                                                                                          \
        const unary_job *j = arg;                                                              \
        const T *a = (const T *)j->a + b;                                                      \
        T *o = (T *)j->o + b;                                                                  \
        int64_t n = e - b;                                                                     \
        (void)w;                                                                               \
        for (int64_t i = 0; i < n; i++) {                                                      \
            T x = a[i];                                                                        \
            switch (j->s->op) {                                                                \
            case OP_Abs: o[i] = (SIGNED && x < 0) ? (T)(0 - (uint64_t)x) : x; break;           \
            case OP_Neg: o[i] = (T)(0 - (uint64_t)x); break;                                   \
            case OP_Sign: o[i] = (T)(x > 0 ? 1 : (SIGNED && x < 0) ? -1 : 0); break;           \
            case OP_Relu: o[i] = (SIGNED && x < 0) ? 0 : x; break;                             \
            case OP_BitwiseNot: o[i] = (T)~x; break;                                           \
            case OP_Identity: o[i] = x; break;                                                 \
            case OP_Shrink: {                                                                  \
                double xd = (double)x;                                                         \
                double r = xd < -j->s->alpha ? xd + j->s->beta                                 \
                           : xd > j->s->alpha ? xd - j->s->beta : 0.0;                         \
                o[i] = (T)r;                                                                   \
                break;                                                                         \
            }                                                                                  \
            default: o[i] = x; break;                                                          \
            }                                                                                  \
        }                                                                                      \
    }
UNARY_INT(int8_t, i8, 1)
UNARY_INT(int16_t, i16, 1)
UNARY_INT(int32_t, i32, 1)
UNARY_INT(int64_t, i64, 1)
UNARY_INT(uint8_t, u8, 0)
UNARY_INT(uint16_t, u16, 0)
UNARY_INT(uint32_t, u32, 0)
UNARY_INT(uint64_t, u64, 0)

static void unary_half(void *arg, int64_t b, int64_t e, int w)
{
    const unary_job *j = arg;
    const uint16_t *a = (const uint16_t *)j->a;
    uint16_t *o = (uint16_t *)j->o;
    float buf[256], res[256];
    for (int64_t i = b; i < e; i += 256) {
        int64_t m = e - i < 256 ? e - i : 256;
        oq_half_to_float_n(a + i, buf, m);
        unary_job sub = {j->s, buf, res};
        unary_f32(&sub, 0, m, w);
        oq_float_to_half_n(res, o + i, m);
    }
}

static void bool_unary(void *arg, int64_t b, int64_t e, int w)
{
    const unary_job *j = arg;
    const ew_state *s = j->s;
    uint8_t *o = j->o;
    (void)w;
    if (s->op == OP_Not) {
        const uint8_t *a = j->a;
        for (int64_t i = b; i < e; i++)
            o[i] = !a[i];
        return;
    }
    /* IsNaN / IsInf on float or double (a->dtype coded in alpha: 1 double) */
    for (int64_t i = b; i < e; i++) {
        double x = s->beta != 0 ? ((const double *)j->a)[i] : ((const float *)j->a)[i];
        if (s->op == OP_IsNaN)
            o[i] = isnan(x);
        else
            o[i] = isinf(x) && (((s->flag & 1) && x > 0) || ((s->flag & 2) && x < 0));
    }
}

/* Float Sigmoid / Erf / Tanh compute blocks of 8 in vector code and the rest of a range
 * in scalar code (within 2 and 1 ulp of the function: not the same bits), and a block with
 * a lane out of the vector code's range wholly in scalar code: a range must start at a
 * multiple of 8 for each element's result not to depend on where the thread count cut
 * the ranges (PP-OCR det's Sigmoid differed in 6 elements between 1 and 3 threads). The
 * items of unary_blocks are blocks of UNARY_BLOCK elements. */
#define UNARY_BLOCK 256
typedef struct unary_blocks_job {
    oq_range_fn fn;
    void *arg;
    int64_t n;
} unary_blocks_job;

static void unary_blocks(void *arg, int64_t b, int64_t e, int w)
{
    const unary_blocks_job *u = arg;
    int64_t lo = b * UNARY_BLOCK, hi = e * UNARY_BLOCK < u->n ? e * UNARY_BLOCK : u->n;
    u->fn(u->arg, lo, hi, w);
}

static oq_status run_unary(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    ew_state *s = k->state, f32_only;
    unary_job j = {s, in[0]->data, out[0].data};
    if (s->op == OP_Sigmoid && s->flag && in[0]->dtype != OQ_DTYPE_FLOAT) {
        f32_only = *s; /* onnxruntime's logistic is for float32 only */
        f32_only.flag = 0;
        j.s = &f32_only;
    }
    int64_t n = oq_rt_tensor_numel(&out[0]);
    oq_range_fn fn = NULL;
    if (s->op == OP_Not || s->op == OP_IsNaN || s->op == OP_IsInf) {
        s->beta = in[0]->dtype == OQ_DTYPE_DOUBLE;
        if (s->op != OP_Not && in[0]->dtype == OQ_DTYPE_FLOAT16) {
            float *tmp = oq_k_scratch(k, (size_t)n * sizeof(float) + 1);
            if (!tmp)
                return OQ_ERR_NOMEM;
            for (int64_t i = 0; i < n; i++)
                tmp[i] = oq_half_to_float(((const uint16_t *)in[0]->data)[i]);
            j.a = tmp;
        }
        fn = bool_unary;
    } else {
        switch (in[0]->dtype) {
        case OQ_DTYPE_FLOAT: fn = unary_f32; break;
        case OQ_DTYPE_DOUBLE: fn = unary_f64; break;
        case OQ_DTYPE_FLOAT16: fn = unary_half; break;
        case OQ_DTYPE_INT8: fn = unary_i8; break;
        case OQ_DTYPE_INT16: fn = unary_i16; break;
        case OQ_DTYPE_INT32: fn = unary_i32; break;
        case OQ_DTYPE_INT64: fn = unary_i64; break;
        case OQ_DTYPE_UINT8: fn = unary_u8; break;
        case OQ_DTYPE_UINT16: fn = unary_u16; break;
        case OQ_DTYPE_UINT32: fn = unary_u32; break;
        case OQ_DTYPE_UINT64: fn = unary_u64; break;
        default: return oq_k_error(k, OQ_ERR_UNSUPPORTED, "dtype %s", oq_dtype_name(in[0]->dtype));
        }
    }
    if (fn == unary_f32 || fn == unary_half) {
        unary_blocks_job u = {fn, &j, n};
        oq_k_parallel_for(k, (n + UNARY_BLOCK - 1) / UNARY_BLOCK, 16384 / UNARY_BLOCK, unary_blocks, &u);
        return OQ_OK;
    }
    oq_k_parallel_for(k, n, 16384, fn, &j);
    return OQ_OK;
}

/* ------------------------------------------------------------------ binary ------- */

#define ROW2(NAME, T, TO, EXPR)                                                        \
    static void NAME(const void *st, void *o_, const void *const *in, const int64_t *inc,\
                     int64_t n)                                                         \
    {                                                                                   \
        const T *a = in[0], *b = in[1];                                                 \
        TO *o = o_;                                                                     \
        const ew_state *s = st;                                                         \
        (void)s;                                                                        \
        if (inc[0] && inc[1]) {                                                         \
            for (int64_t i = 0; i < n; i++) {                                           \
                T x = a[i], y = b[i];                                                   \
                o[i] = (TO)(EXPR);                                                      \
            }                                                                           \
        } else if (inc[0]) {                                                            \
            T y = b[0];                                                                 \
            for (int64_t i = 0; i < n; i++) {                                           \
                T x = a[i];                                                             \
                o[i] = (TO)(EXPR);                                                      \
            }                                                                           \
        } else if (inc[1]) {                                                            \
            T x = a[0];                                                                 \
            for (int64_t i = 0; i < n; i++) {                                           \
                T y = b[i];                                                             \
                o[i] = (TO)(EXPR);                                                      \
            }                                                                           \
        } else {                                                                        \
            T x = a[0], y = b[0];                                                       \
            TO v = (TO)(EXPR);                                                          \
            for (int64_t i = 0; i < n; i++)                                             \
                o[i] = v;                                                               \
        }                                                                               \
    }

#define FLOAT_TYPES(X) X(FLOAT, float) X(DOUBLE, double)
#define SINT_TYPES(X) X(INT8, int8_t) X(INT16, int16_t) X(INT32, int32_t) X(INT64, int64_t)
#define UINT_TYPES(X) X(UINT8, uint8_t) X(UINT16, uint16_t) X(UINT32, uint32_t) X(UINT64, uint64_t)
#define INT_TYPES(X) SINT_TYPES(X) UINT_TYPES(X)
#define NUM_TYPES(X) FLOAT_TYPES(X) INT_TYPES(X)

/* float arithmetic */
#define GEN_F(D, T)                                                         \
    ROW2(add_##D, T, T, x + y)                                              \
    ROW2(sub_##D, T, T, x - y)                                              \
    ROW2(mul_##D, T, T, x * y)                                              \
    ROW2(div_##D, T, T, x / y)                                              \
    ROW2(max_##D, T, T, (x > y || x != x) ? x : y)                          \
    ROW2(min_##D, T, T, (x < y || x != x) ? x : y)                          \
    ROW2(pow_##D, T, T, pow(x, y))                                          \
    ROW2(prelu_##D, T, T, x < 0 ? x * y : x)                                \
    ROW2(mod_##D, T, T, s->flag ? fmod(x, y) : x - y * floor(x / y))
GEN_F(FLOATs, float)
GEN_F(DOUBLE, double)
#define max_FLOAT max_FLOATs
#define min_FLOAT min_FLOATs
/* x ^ 2 (LayerNorm's variance) as x * x: powf(x, 2) is x * x correctly rounded, so the
 * same number, NaN, Inf and subnormal cases included, without a powf call per element.
 * x ^ 3 (the tanh form of GELU) as (x * x) * x, two roundings: what onnxruntime's Pow
 * computes for a scalar exponent 3 (math/element_wise_ops.cc), not powf's one. */
static void pow_FLOAT(const void *st, void *o_, const void *const *in, const int64_t *inc, int64_t n)
{
    float e = !inc[1] ? ((const float *)in[1])[0] : 0.0f;
    if (inc[0] && !inc[1] && (e == 2.0f || e == 3.0f)) {
        const float *a = in[0];
        float *o = o_;
        if (e == 2.0f)
            for (int64_t i = 0; i < n; i++)
                o[i] = a[i] * a[i];
        else
            for (int64_t i = 0; i < n; i++)
                o[i] = a[i] * a[i] * a[i];
        return;
    }
    pow_FLOATs(st, o_, in, inc, n);
}
#define prelu_FLOAT prelu_FLOATs
#define mod_FLOAT mod_FLOATs

/* float + - * / with AVX2 when available: the same IEEE operation per element as the
 * scalar loop, so the result does not depend on which path runs. */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define VBIN(NAME, OP, VOP)                                                              \
    __attribute__((target("avx2"))) static void NAME##_avx2(                            \
        float *o, const float *a, const float *b, int64_t ia, int64_t ib, int64_t n)    \
    {                                                                                   \
        int64_t i = 0;                                                                  \
        if (ia && ib) {                                                                 \
            for (; i + 8 <= n; i += 8)                                                  \
                _mm256_storeu_ps(o + i, VOP(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i))); \
            for (; i < n; i++)                                                          \
                o[i] = a[i] OP b[i];                                                    \
        } else if (ia) {                                                                \
            __m256 y = _mm256_set1_ps(b[0]);                                            \
            for (; i + 8 <= n; i += 8)                                                  \
                _mm256_storeu_ps(o + i, VOP(_mm256_loadu_ps(a + i), y));                \
            for (; i < n; i++)                                                          \
                o[i] = a[i] OP b[0];                                                    \
        } else {                                                                        \
            __m256 x = _mm256_set1_ps(a[0]);                                            \
            for (; i + 8 <= n; i += 8)                                                  \
                _mm256_storeu_ps(o + i, VOP(x, _mm256_loadu_ps(b + i)));                \
            for (; i < n; i++)                                                          \
                o[i] = a[0] OP b[i];                                                    \
        }                                                                               \
    }                                                                                   \
    static void NAME##_FLOAT(const void *st, void *o, const void *const *in,           \
                             const int64_t *inc, int64_t n)                             \
    {                                                                                   \
        if ((inc[0] == 0 || inc[0] == 1) && (inc[1] == 0 || inc[1] == 1) &&             \
            (inc[0] || inc[1]) && oq_k_cpu_avx2())                                      \
            NAME##_avx2(o, in[0], in[1], inc[0], inc[1], n);                            \
        else                                                                            \
            NAME##_FLOATs(st, o, in, inc, n);                                           \
    }
VBIN(add, +, _mm256_add_ps)
VBIN(sub, -, _mm256_sub_ps)
VBIN(mul, *, _mm256_mul_ps)
VBIN(div, /, _mm256_div_ps)

/* o = min(max(a, lo), hi) with the scalar loop's NaN and signed-zero behaviour:
 * max_ps(lo, v) is "lo > v ? lo : v", min_ps(hi, v) is "hi < v ? hi : v". */
__attribute__((target("avx2"))) static void clip_avx2(float *o, const float *a, int64_t n,
                                                      float lo, float hi)
{
    __m256 l = _mm256_set1_ps(lo), h = _mm256_set1_ps(hi);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_min_ps(h, _mm256_max_ps(l, _mm256_loadu_ps(a + i))));
    for (; i < n; i++) {
        float v = a[i];
        v = v < lo ? lo : v;
        o[i] = v > hi ? hi : v;
    }
}
#define OQ_HAVE_CLIP_AVX2 1
#else
#define add_FLOAT add_FLOATs
#define sub_FLOAT sub_FLOATs
#define mul_FLOAT mul_FLOATs
#define div_FLOAT div_FLOATs
#endif

typedef struct clip_job {
    const float *a;
    float *o;
    float lo, hi;
} clip_job;

static void clip_range(void *arg, int64_t b, int64_t e, int w)
{
    const clip_job *j = arg;
    (void)w;
#ifdef OQ_HAVE_CLIP_AVX2
    if (oq_k_cpu_avx2()) {
        clip_avx2(j->o + b, j->a + b, e - b, j->lo, j->hi);
        return;
    }
#endif
    for (int64_t i = b; i < e; i++) {
        float v = j->a[i];
        v = v < j->lo ? j->lo : v;
        j->o[i] = v > j->hi ? j->hi : v;
    }
}

static void clip_float(oq_kctx *k, const float *a, float *o, int64_t n, float lo, float hi)
{
    clip_job j = {a, o, lo, hi};
    oq_k_parallel_for(k, n, 16384, clip_range, &j);
}

/* integer arithmetic: wrap-around; division by zero gives 0 (undefined in ONNX) */
#define GEN_I(D, T)                                                                  \
    ROW2(add_##D, T, T, (uint64_t)x + (uint64_t)y)                                   \
    ROW2(sub_##D, T, T, (uint64_t)x - (uint64_t)y)                                   \
    ROW2(mul_##D, T, T, (uint64_t)x * (uint64_t)y)                                   \
    ROW2(div_##D, T, T, y == 0 ? 0 : ((T)-1 < 0 && y == (T)-1) ? (T)(0 - (uint64_t)x) : x / y) \
    ROW2(max_##D, T, T, x > y ? x : y)                                               \
    ROW2(min_##D, T, T, x < y ? x : y)                                               \
    ROW2(pow_##D, T, T, int_pow((int64_t)x, (int64_t)y))                             \
    ROW2(prelu_##D, T, T, x < 0 ? (uint64_t)x * (uint64_t)y : (uint64_t)x)           \
    ROW2(mod_##D, T, T, int_mod((int64_t)x, (int64_t)y, s->flag))                    \
    ROW2(band_##D, T, T, x & y)                                                      \
    ROW2(bor_##D, T, T, x | y)                                                       \
    ROW2(bxor_##D, T, T, x ^ y)
#define GEN_SHIFT(D, T) \
    ROW2(shift_##D, T, T, (uint64_t)y >= 8 * sizeof(T) ? 0 : s->flag ? (x >> y) : (T)(x << y))

static int64_t int_pow(int64_t x, int64_t y)
{
    if (y < 0)
        return x == 1 ? 1 : (x == -1 ? ((y & 1) ? -1 : 1) : 0);
    uint64_t r = 1, b = (uint64_t)x;
    while (y) {
        if (y & 1)
            r *= b;
        b *= b;
        y >>= 1;
    }
    return (int64_t)r;
}

static int64_t int_mod(int64_t x, int64_t y, int64_t fmod_mode)
{
    if (y == 0)
        return 0;
    if (y == -1)
        return 0;
    int64_t r = x % y;
    if (!fmod_mode && r != 0 && ((r < 0) != (y < 0)))
        r += y;
    return r;
}
INT_TYPES(GEN_I)
UINT_TYPES(GEN_SHIFT)

/* comparisons -> bool */
#define GEN_CMP(D, T)                        \
    ROW2(eq_##D, T, uint8_t, x == y)         \
    ROW2(lt_##D, T, uint8_t, x < y)          \
    ROW2(gt_##D, T, uint8_t, x > y)          \
    ROW2(le_##D, T, uint8_t, x <= y)         \
    ROW2(ge_##D, T, uint8_t, x >= y)
NUM_TYPES(GEN_CMP)
ROW2(eq_BOOL, uint8_t, uint8_t, (x != 0) == (y != 0))
ROW2(and_BOOL, uint8_t, uint8_t, x && y)
ROW2(or_BOOL, uint8_t, uint8_t, x || y)
ROW2(xor_BOOL, uint8_t, uint8_t, (x != 0) != (y != 0))

#define CASE(D, NAME) case OQ_DTYPE_##D: return NAME##_##D;
#define PICK(NAME, TYPES)                                          \
    static oq_row_fn pick_##NAME(int32_t dt)                       \
    {                                                              \
        switch (dt) {                                              \
            TYPES(NAME##_CASE)                                     \
        default: return NULL;                                      \
        }                                                          \
    }
#define add_CASE(D, T) CASE(D, add)
#define sub_CASE(D, T) CASE(D, sub)
#define mul_CASE(D, T) CASE(D, mul)
#define div_CASE(D, T) CASE(D, div)
#define max_CASE(D, T) CASE(D, max)
#define min_CASE(D, T) CASE(D, min)
#define pow_CASE(D, T) CASE(D, pow)
#define prelu_CASE(D, T) CASE(D, prelu)
#define mod_CASE(D, T) CASE(D, mod)
#define band_CASE(D, T) CASE(D, band)
#define bor_CASE(D, T) CASE(D, bor)
#define bxor_CASE(D, T) CASE(D, bxor)
#define shift_CASE(D, T) CASE(D, shift)
#define eq_CASE(D, T) CASE(D, eq)
#define lt_CASE(D, T) CASE(D, lt)
#define gt_CASE(D, T) CASE(D, gt)
#define le_CASE(D, T) CASE(D, le)
#define ge_CASE(D, T) CASE(D, ge)
PICK(add, NUM_TYPES)
PICK(sub, NUM_TYPES)
PICK(mul, NUM_TYPES)
PICK(div, NUM_TYPES)
PICK(max, NUM_TYPES)
PICK(min, NUM_TYPES)
PICK(pow, NUM_TYPES)
PICK(prelu, NUM_TYPES)
PICK(mod, NUM_TYPES)
PICK(band, INT_TYPES)
PICK(bor, INT_TYPES)
PICK(bxor, INT_TYPES)
PICK(shift, UINT_TYPES)
PICK(eq, NUM_TYPES)
PICK(lt, NUM_TYPES)
PICK(gt, NUM_TYPES)
PICK(le, NUM_TYPES)
PICK(ge, NUM_TYPES)

static oq_row_fn binary_fn(ew_op op, int32_t dt)
{
    switch (op) {
    case OP_Add: case OP_Sum: case OP_Mean: return pick_add(dt);
    case OP_Sub: return pick_sub(dt);
    case OP_Mul: return pick_mul(dt);
    case OP_Div: return pick_div(dt);
    case OP_Max: return pick_max(dt);
    case OP_Min: return pick_min(dt);
    case OP_Pow: return pick_pow(dt);
    case OP_PRelu: return pick_prelu(dt);
    case OP_Mod: return pick_mod(dt);
    case OP_BitwiseAnd: return pick_band(dt);
    case OP_BitwiseOr: return pick_bor(dt);
    case OP_BitwiseXor: return pick_bxor(dt);
    case OP_BitShift: return pick_shift(dt);
    case OP_Equal: return dt == OQ_DTYPE_BOOL ? eq_BOOL : pick_eq(dt);
    case OP_Less: return pick_lt(dt);
    case OP_Greater: return pick_gt(dt);
    case OP_LessOrEqual: return pick_le(dt);
    case OP_GreaterOrEqual: return pick_ge(dt);
    case OP_And: return dt == OQ_DTYPE_BOOL ? and_BOOL : NULL;
    case OP_Or: return dt == OQ_DTYPE_BOOL ? or_BOOL : NULL;
    case OP_Xor: return dt == OQ_DTYPE_BOOL ? xor_BOOL : NULL;
    default: return NULL;
    }
}

/* Convert a float16 tensor to float32 in `buf` (numel floats). */
static void half_to_f32(const oq_rt_tensor *t, float *buf, oq_rt_tensor *view)
{
    oq_half_to_float_n(t->data, buf, oq_rt_tensor_numel(t));
    *view = *t;
    view->dtype = OQ_DTYPE_FLOAT;
    view->data = buf;
}

/* Copy in (broadcast) to out (same dtype). */
static void copy_row(const void *st, void *o, const void *const *in, const int64_t *inc,
                     int64_t n)
{
    size_t es = *(const size_t *)st;
    if (inc[0]) {
        memcpy(o, in[0], (size_t)n * es);
    } else {
        for (int64_t i = 0; i < n; i++)
            memcpy((char *)o + (size_t)i * es, in[0], es);
    }
}

static void mean_div(oq_rt_tensor *t, size_t count)
{
    int64_t n = oq_rt_tensor_numel(t);
    if (t->dtype == OQ_DTYPE_FLOAT)
        for (int64_t i = 0; i < n; i++)
            ((float *)t->data)[i] /= (float)count;
    else if (t->dtype == OQ_DTYPE_DOUBLE)
        for (int64_t i = 0; i < n; i++)
            ((double *)t->data)[i] /= (double)count;
}

static oq_status run_binary(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    const ew_state *s = k->state;
    oq_rt_tensor lview;
    const oq_rt_tensor *lbuf[2];
    in = legacy_inputs(k, in, n_in, &lview, lbuf);
    int32_t dt = in[0]->dtype;
    bool half = dt == OQ_DTYPE_FLOAT16;
    oq_rt_tensor views[8], outv = out[0];
    const oq_rt_tensor *args[8];
    size_t nargs = 0;
    for (size_t i = 0; i < n_in; i++)
        if (in[i])
            args[nargs++] = in[i];
    if (nargs == 0 || nargs > 8)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "%zu inputs", nargs);
    float *hbuf = NULL;
    if (half) {
        /* compute in float32, convert back at the end */
        size_t total = (size_t)oq_rt_tensor_numel(&out[0]);
        for (size_t i = 0; i < nargs; i++)
            total += (size_t)oq_rt_tensor_numel(args[i]);
        hbuf = oq_k_scratch(k, total * sizeof(float));
        if (!hbuf)
            return OQ_ERR_NOMEM;
        float *p = hbuf;
        outv.dtype = is_bool_op(s->op) ? OQ_DTYPE_BOOL : OQ_DTYPE_FLOAT;
        if (!is_bool_op(s->op)) {
            outv.data = p;
            p += oq_rt_tensor_numel(&out[0]);
        }
        for (size_t i = 0; i < nargs; i++) {
            half_to_f32(args[i], p, &views[i]);
            p += oq_rt_tensor_numel(args[i]);
            args[i] = &views[i];
        }
        dt = OQ_DTYPE_FLOAT;
    }
    /* Pow with a different exponent type: convert the exponent to the base type. */
    oq_rt_tensor expv;
    void *expbuf = NULL;
    if (s->op == OP_Pow && args[1]->dtype != dt) {
        int64_t n = oq_rt_tensor_numel(args[1]);
        expbuf = malloc((size_t)(n ? n : 1) * 8);
        if (!expbuf)
            return OQ_ERR_NOMEM;
        expv = *args[1];
        expv.dtype = dt;
        expv.data = expbuf;
        for (int64_t i = 0; i < n; i++)
            oq_k_set_f64(&expv, i, oq_k_get_f64(args[1], i));
        args[1] = &expv;
    }
    oq_row_fn fn = binary_fn(s->op, dt);
    if (!fn) {
        free(expbuf);
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "dtype %s", oq_dtype_name(dt));
    }
    if (nargs == 1) {
        size_t es = oq_k_elsize(dt);
        oq_k_bcast_apply(k, args, 1, &outv, copy_row, &es);
    } else {
        oq_k_bcast_apply(k, args, 2, &outv, fn, s);
        for (size_t i = 2; i < nargs; i++) {
            const oq_rt_tensor *pair[2] = {&outv, args[i]};
            oq_k_bcast_apply(k, pair, 2, &outv, fn, s);
        }
    }
    if (s->op == OP_Mean)
        mean_div(&outv, nargs);
    if (half && !is_bool_op(s->op)) {
        oq_float_to_half_n(outv.data, out[0].data, oq_rt_tensor_numel(&out[0]));
    }
    free(expbuf);
    return OQ_OK;
}

/* For Mean of integers nothing is defined; Sum/Max/Min of one input is a copy. */

/* ------------------------------------------------------------------ Where -------- */

static oq_status infer_where(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                             oq_rt_tensor *out, size_t n_out)
{
    if (n_in != 3 || !in[0] || !in[1] || !in[2])
        return oq_k_error(k, OQ_ERR_INVALID, "Where needs 3 inputs");
    out[0].dtype = in[1]->dtype;
    if (!oq_k_shapes_known(in, n_in))
        return oq_k_defer(k, out, n_out);
    int64_t dims[OQ_RT_MAX_RANK];
    size_t rank = 0;
    oq_status st = oq_k_broadcast(k, in, 3, dims, &rank);
    return st ? st : oq_k_set_out(k, &out[0], out[0].dtype, dims, rank);
}

static void where_row(const void *st, void *o, const void *const *in, const int64_t *inc,
                      int64_t n)
{
    size_t es = *(const size_t *)st;
    const uint8_t *c = in[0];
    const char *x = in[1], *y = in[2];
    char *out = o;
    for (int64_t i = 0; i < n; i++) {
        const char *src = c[i * inc[0]] ? x + (size_t)(i * inc[1]) * es : y + (size_t)(i * inc[2]) * es;
        memcpy(out + (size_t)i * es, src, es);
    }
}

static oq_status run_where(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    size_t es = oq_k_elsize(in[1]->dtype);
    if (!es || in[1]->dtype != in[2]->dtype)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "Where on %s", oq_dtype_name(in[1]->dtype));
    oq_k_bcast_apply(k, in, 3, &out[0], where_row, &es);
    return OQ_OK;
}

/* ------------------------------------------------------------------ Clip --------- */

static oq_status run_clip(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    const oq_node *n = k->node;
    const oq_rt_tensor *x = in[0];
    int64_t cnt = oq_rt_tensor_numel(x);
    int32_t dt = x->dtype;
    if (k->opset < 11) {
        float lo = oq_node_attr_float(n, "min", -INFINITY);
        float hi = oq_node_attr_float(n, "max", INFINITY);
        if (dt == OQ_DTYPE_FLOAT) {
            clip_float(k, x->data, out[0].data, cnt, lo, hi);
            return OQ_OK;
        }
        for (int64_t i = 0; i < cnt; i++) {
            double v = oq_k_get_f64(x, i);
            if (v < lo) v = lo;
            if (v > hi) v = hi;
            oq_k_set_f64(&out[0], i, v);
        }
        return OQ_OK;
    }
    const oq_rt_tensor *tlo = n_in > 1 ? in[1] : NULL, *thi = n_in > 2 ? in[2] : NULL;
    if (dt == OQ_DTYPE_FLOAT) {
        float lo = tlo && oq_rt_tensor_numel(tlo) ? ((const float *)tlo->data)[0] : -INFINITY;
        float hi = thi && oq_rt_tensor_numel(thi) ? ((const float *)thi->data)[0] : INFINITY;
        clip_float(k, x->data, out[0].data, cnt, lo, hi);
        return OQ_OK;
    }
    if (dt == OQ_DTYPE_INT64 || dt == OQ_DTYPE_UINT64) {
        /* exact in 64 bits */
        for (int64_t i = 0; i < cnt; i++) {
            if (dt == OQ_DTYPE_INT64) {
                int64_t v = ((const int64_t *)x->data)[i];
                if (tlo && oq_rt_tensor_numel(tlo) && v < ((const int64_t *)tlo->data)[0])
                    v = ((const int64_t *)tlo->data)[0];
                if (thi && oq_rt_tensor_numel(thi) && v > ((const int64_t *)thi->data)[0])
                    v = ((const int64_t *)thi->data)[0];
                ((int64_t *)out[0].data)[i] = v;
            } else {
                uint64_t v = ((const uint64_t *)x->data)[i];
                if (tlo && oq_rt_tensor_numel(tlo) && v < ((const uint64_t *)tlo->data)[0])
                    v = ((const uint64_t *)tlo->data)[0];
                if (thi && oq_rt_tensor_numel(thi) && v > ((const uint64_t *)thi->data)[0])
                    v = ((const uint64_t *)thi->data)[0];
                ((uint64_t *)out[0].data)[i] = v;
            }
        }
        return OQ_OK;
    }
    double lo = tlo && oq_rt_tensor_numel(tlo) ? oq_k_get_f64(tlo, 0) : -INFINITY;
    double hi = thi && oq_rt_tensor_numel(thi) ? oq_k_get_f64(thi, 0) : INFINITY;
    for (int64_t i = 0; i < cnt; i++) {
        double v = oq_k_get_f64(x, i);
        if (v < lo) v = lo;
        if (v > hi) v = hi;
        oq_k_set_f64(&out[0], i, v);
    }
    return OQ_OK;
}

static oq_status infer_first(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                             oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    return oq_k_set_out(k, &out[0], in[0]->dtype, in[0]->dims, in[0]->rank);
}

/* ------------------------------------------------------------------ Cast --------- */

static int32_t cast_target(const oq_kctx *k, const oq_rt_tensor *const *in)
{
    if (strcmp(k->node->op_type, "CastLike") == 0)
        return in[1] ? in[1]->dtype : 0;
    return (int32_t)oq_node_attr_int(k->node, "to", 0);
}

static bool cast_ok(const oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in)
{
    int32_t to = cast_target(k, in);
    uint64_t ok = OQ_T_NUMERIC | OQ_T(BOOL) | OQ_T(BFLOAT16);
    return to > 0 && to < 64 && (ok & (UINT64_C(1) << to)) && in[0] &&
           (ok & (UINT64_C(1) << in[0]->dtype));
}

static oq_status infer_cast(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = cast_target(k, in);
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    return oq_k_set_out(k, &out[0], out[0].dtype, in[0]->dims, in[0]->rank);
}

/* float -> integer without undefined behaviour: NaN -> 0, out of range saturates. */
static int64_t f2i(double v, int64_t lo, int64_t hi)
{
    if (v != v)
        return 0;
    if (v <= (double)lo)
        return lo;
    if (v >= (double)hi)
        return hi;
    return (int64_t)v;
}

static oq_status run_cast(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    oq_rt_tensor *y = &out[0];
    int64_t n = oq_rt_tensor_numel(x);
    int32_t from = x->dtype, to = y->dtype;
    if (from == to) {
        if (x->nbytes)
            memcpy(y->data, x->data, (size_t)x->nbytes);
        return OQ_OK;
    }
    bool fi = oq_dtype_is_float(from), ti = oq_dtype_is_float(to);
    for (int64_t i = 0; i < n; i++) {
        if (!fi && !ti) {
            /* integer/bool to integer/bool: two's complement truncation */
            uint64_t v;
            if (from == OQ_DTYPE_UINT64)
                v = ((const uint64_t *)x->data)[i];
            else
                v = (uint64_t)oq_k_get_int(x, i);
            switch (to) {
            case OQ_DTYPE_BOOL: ((uint8_t *)y->data)[i] = v != 0; break;
            case OQ_DTYPE_INT8: case OQ_DTYPE_UINT8: ((uint8_t *)y->data)[i] = (uint8_t)v; break;
            case OQ_DTYPE_INT16: case OQ_DTYPE_UINT16: ((uint16_t *)y->data)[i] = (uint16_t)v; break;
            case OQ_DTYPE_INT32: case OQ_DTYPE_UINT32: ((uint32_t *)y->data)[i] = (uint32_t)v; break;
            default: ((uint64_t *)y->data)[i] = v; break;
            }
            continue;
        }
        double v = oq_k_get_f64(x, i);
        if (from == OQ_DTYPE_INT64 && ti)
            v = (double)((const int64_t *)x->data)[i];
        switch (to) {
        case OQ_DTYPE_FLOAT: case OQ_DTYPE_DOUBLE: case OQ_DTYPE_FLOAT16: case OQ_DTYPE_BFLOAT16:
            if (from == OQ_DTYPE_FLOAT && to == OQ_DTYPE_FLOAT16)
                ((uint16_t *)y->data)[i] = oq_float_to_half(((const float *)x->data)[i]);
            else if (from == OQ_DTYPE_FLOAT && to == OQ_DTYPE_BFLOAT16)
                ((uint16_t *)y->data)[i] = oq_float_to_bfloat16(((const float *)x->data)[i]);
            else
                oq_k_set_f64(y, i, v);
            break;
        case OQ_DTYPE_BOOL: ((uint8_t *)y->data)[i] = v != 0; break;
        case OQ_DTYPE_INT8: ((int8_t *)y->data)[i] = (int8_t)f2i(v, INT8_MIN, INT8_MAX); break;
        case OQ_DTYPE_UINT8: ((uint8_t *)y->data)[i] = (uint8_t)f2i(v, 0, UINT8_MAX); break;
        case OQ_DTYPE_INT16: ((int16_t *)y->data)[i] = (int16_t)f2i(v, INT16_MIN, INT16_MAX); break;
        case OQ_DTYPE_UINT16: ((uint16_t *)y->data)[i] = (uint16_t)f2i(v, 0, UINT16_MAX); break;
        case OQ_DTYPE_INT32: ((int32_t *)y->data)[i] = (int32_t)f2i(v, INT32_MIN, INT32_MAX); break;
        case OQ_DTYPE_UINT32: ((uint32_t *)y->data)[i] = (uint32_t)f2i(v, 0, UINT32_MAX); break;
        case OQ_DTYPE_INT64: ((int64_t *)y->data)[i] = f2i(v, INT64_MIN, INT64_MAX); break;
        case OQ_DTYPE_UINT64:
            ((uint64_t *)y->data)[i] = v != v || v <= 0 ? 0 : v >= 18446744073709551615.0
                                                              ? UINT64_MAX : (uint64_t)v;
            break;
        default: return oq_k_error(k, OQ_ERR_UNSUPPORTED, "Cast to %s", oq_dtype_name(to));
        }
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ table -------- */

#define FL OQ_T_FLOATS
#define NUM OQ_T_NUMERIC
#define SNUM (OQ_T_FLOATS | OQ_T_SINTS)
#define U(op, since, types, mn) \
    {"", op, since, 0, 0, types, NULL, ew_prepare, infer_ew, run_unary, free, mn}
#define B(op, since, types, mn) \
    {"", op, since, 0, 0, types, NULL, ew_prepare, infer_ew, run_binary, free, mn}

const oq_kernel oq_kernels_elementwise[] = {
    U("Abs", 1, NUM, 1), U("Neg", 1, SNUM, 1), U("Sqrt", 1, FL, 1), U("Exp", 1, FL, 1), U("Log", 1, FL, 1),
    U("Reciprocal", 1, FL, 1), U("Floor", 1, FL, 1), U("Ceil", 1, FL, 1), U("Round", 11, FL, 1),
    U("Relu", 1, SNUM, 1), U("LeakyRelu", 1, FL, 1), U("Sigmoid", 1, FL, 1), U("HardSigmoid", 1, FL, 1),
    U("HardSwish", 14, FL, 1), U("Tanh", 1, FL, 1), U("Erf", 9, FL, 1), U("Sign", 9, NUM, 1),
    U("Softplus", 1, FL, 1), U("Softsign", 1, FL, 1), U("Elu", 1, FL, 1), U("Selu", 1, FL, 1),
    U("Celu", 12, FL, 1), U("Mish", 18, FL, 1), U("ThresholdedRelu", 10, FL, 1), U("Gelu", 20, FL, 1),
    U("Sin", 7, FL, 1), U("Cos", 7, FL, 1), U("Tan", 7, FL, 1), U("Asin", 7, FL, 1), U("Acos", 7, FL, 1),
    U("Atan", 7, FL, 1), U("Sinh", 9, FL, 1), U("Cosh", 9, FL, 1), U("Asinh", 9, FL, 1),
    U("Acosh", 9, FL, 1), U("Atanh", 9, FL, 1), U("IsNaN", 9, FL, 1), U("IsInf", 10, FL, 1),
    U("Shrink", 9, NUM, 1), U("Not", 1, OQ_T(BOOL), 1), U("BitwiseNot", 18, OQ_T_INTS, 1),
    B("Add", 1, NUM, 2), B("Sub", 1, NUM, 2), B("Mul", 1, NUM, 2), B("Div", 1, NUM, 2),
    B("Pow", 1, NUM, 2), B("PRelu", 1, NUM, 2), B("Mod", 10, NUM, 2),
    B("Max", 1, NUM, 1), B("Min", 1, NUM, 1), B("Sum", 1, NUM, 1), B("Mean", 1, FL, 1),
    B("Equal", 1, NUM | OQ_T(BOOL), 2), B("Less", 1, NUM, 2), B("Greater", 1, NUM, 2),
    B("LessOrEqual", 12, NUM, 2), B("GreaterOrEqual", 12, NUM, 2),
    B("And", 1, OQ_T(BOOL), 2), B("Or", 1, OQ_T(BOOL), 2), B("Xor", 1, OQ_T(BOOL), 2),
    B("BitShift", 11, OQ_T_UINTS, 2), B("BitwiseAnd", 18, OQ_T_INTS, 2),
    B("BitwiseOr", 18, OQ_T_INTS, 2), B("BitwiseXor", 18, OQ_T_INTS, 2),
    {"", "Where", 9, 0, 1, OQ_T_ALL, NULL, NULL, infer_where, run_where, NULL, 3},
    {"", "Clip", 1, 0, 0, NUM, NULL, NULL, infer_first, run_clip, NULL, 1},
    {"", "Cast", 6, 0, 0, 0, cast_ok, NULL, infer_cast, run_cast, NULL, 1},
    {"", "CastLike", 15, 0, 0, 0, cast_ok, NULL, infer_cast, run_cast, NULL, 2},
};

OQ_KERNEL_TABLE_END(elementwise);
