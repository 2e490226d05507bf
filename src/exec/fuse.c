/* Elementwise chains fused into one pass over their producer's output.
 *
 * A step (the head: Conv, Gemm, an elementwise op, ...) with one float output is often
 * followed by a chain of elementwise steps that read only that output, values of the
 * chain and constants: PaddleOCR's `Conv Mul Add Add Clip Mul Div Mul Add` (scale,
 * shift, x * relu6(x + 3) / 6, scale, shift), a quantized model's QuantizeLinear ->
 * DequantizeLinear pairs between them. Run one by one, each step reads and writes the
 * whole tensor. Here the chain is compiled into a small program over registers (one
 * per chain value, blocks of 256 elements in L1) that runs over the head's output in
 * place, and the chain's last value takes over the head's buffer. The head's kernel is
 * offered the program as a post function (kernel.h oq_k_post): Conv runs it on pieces
 * of its output as soon as they are final, while they are in cache; for other heads it
 * runs in one pass after the kernel. Scale-and-shift pairs (Mul, Add) and the
 * HardSwish quadruple (Add, Clip, Mul, Div) are joined into one op each (ew_join).
 *
 * When: the members are the steps right after the head, each an op below whose inputs
 * are chain values or constants (scalars, or per-channel vectors on axis 1 of the
 * head's output); every chain value but the last is read only inside the chain and is
 * not a graph output. Shapes are checked on every run (the head's shape may change);
 * a run with an observer set, or whose shapes do not fit, runs the steps one by one,
 * so the observer still sees every value.
 *
 * Exactness: every op computes per element exactly what its kernel computes
 * (elementwise.c, quant_ops.c), in the same order of operands, with AVX-512, AVX2 or
 * scalar code that give the same results (chosen once; ONNXQ_SGEMM_ISA=avx2|generic
 * restricts it), so a fused chain is bit-identical to the steps run separately.
 * ONNXQ_PLAN_FUSE=0 turns fusion off.
 *
 * Ops: Add Sub Mul Div (opset >= 7), Clip, Relu, HardSigmoid, HardSwish, and a
 * QuantizeLinear whose only reader is the DequantizeLinear right after it (per
 * tensor, 8/16-bit): y = (float)(clamp(round(x / s1) + z1) - z2) * s2. */
#include "exec/plan-impl.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define EW_MAX_REGS 16
#define EW_MAX_OPS 32
#define EW_BLOCK 256

typedef enum ew_code { EW_ADD, EW_SUB, EW_MUL, EW_DIV, EW_CLIP, EW_RELU, EW_HSIG, EW_HSWISH,
                       EW_FQ,
                       /* pairs and quadruples of the ops above, joined at compile time
                          (ew_join): the same operations in registers */
                       EW_AFFINE, /* Mul(x, a) then Add(., b) */
                       EW_HSW6    /* Add(x, a), Clip(., f0, f1), Mul(x, .), Div(., b) */
} ew_code;

/* operands of op: binary ops and joined ops have two (a, b); the others one (a) */
#define EW_TWO_ARGS(code) ((code) <= EW_DIV || (code) >= EW_AFFINE)

/* an operand: a register, or a constant (scalar or per-channel) */
typedef struct ew_arg {
    int reg;                  /* >= 0: register; -1: constant */
    const oq_rt_tensor *c;    /* the constant (a plan slot's tensor) */
} ew_arg;

typedef struct ew_op {
    ew_code code;
    int dst;
    ew_arg a, b;              /* binary ops; unary ops use a (a register) */
    float f0, f1;             /* Clip lo/hi, HardSigmoid alpha/beta, FQ s1/s2 */
    int x;                    /* joined ops: the register input; a and b are constants */
    int ord;                  /* joined ops: bit 0 / bit 1: the first / second binary op
                                 of the pair has its constant (AFFINE, HSW6 Add) or the
                                 clipped value (HSW6 Mul) as first operand */
    int32_t z1, z2, lo, hi;   /* FQ: zero points, range of the integer type */
} ew_op;

typedef struct ew_run {
    const struct ew_group *g;
    float *x;                 /* the head's output, overwritten with the chain's result */
    int64_t inner, C;         /* elements per channel row, channels */
    const float *cv[EW_MAX_OPS][2]; /* constant operands: per-channel (NULL: scalar) */
    float cs[EW_MAX_OPS][2];        /* scalar constants */
} ew_run;

struct ew_group {
    size_t first, last;       /* member steps (the head is first - 1) */
    size_t out_slot;          /* the chain's last value */
    int n_ops, n_regs;
    ew_op ops[EW_MAX_OPS];
    ew_run run;               /* the current run (a plan runs one run at a time) */
    oq_k_post post;           /* offered to the head's kernel: run_block per channel piece */
};

/* ------------------------------------------------------------------ compile ------ */

static bool is_float_const(const oq_plan *p, size_t sl)
{
    return sl != NO_SLOT && p->slots[sl].kind == SLOT_CONST &&
           p->slots[sl].t.dtype == OQ_DTYPE_FLOAT && p->slots[sl].t.rank <= OQ_RT_MAX_RANK &&
           (p->slots[sl].t.data || oq_rt_tensor_numel(&p->slots[sl].t) == 0);
}

/* scalar float constant (numel 1) */
static bool const_scalar(const oq_plan *p, size_t sl, float *v)
{
    if (!is_float_const(p, sl) || oq_rt_tensor_numel(&p->slots[sl].t) != 1)
        return false;
    *v = *(const float *)p->slots[sl].t.data;
    return true;
}

/* integer scalar (zero point) of an 8/16-bit type */
static bool const_int_scalar(const oq_plan *p, size_t sl, int32_t dt, int32_t *v)
{
    if (sl == NO_SLOT || p->slots[sl].kind != SLOT_CONST || p->slots[sl].t.dtype != dt ||
        oq_rt_tensor_numel(&p->slots[sl].t) != 1 || !p->slots[sl].t.data)
        return false;
    const void *d = p->slots[sl].t.data;
    switch (dt) {
    case OQ_DTYPE_INT8: *v = *(const int8_t *)d; return true;
    case OQ_DTYPE_UINT8: *v = *(const uint8_t *)d; return true;
    case OQ_DTYPE_INT16: *v = *(const int16_t *)d; return true;
    case OQ_DTYPE_UINT16: *v = *(const uint16_t *)d; return true;
    default: return false;
    }
}

static bool qrange16(int32_t dt, int32_t *lo, int32_t *hi)
{
    switch (dt) {
    case OQ_DTYPE_INT8: *lo = -128; *hi = 127; return true;
    case OQ_DTYPE_UINT8: *lo = 0; *hi = 255; return true;
    case OQ_DTYPE_INT16: *lo = -32768; *hi = 32767; return true;
    case OQ_DTYPE_UINT16: *lo = 0; *hi = 65535; return true;
    default: return false;
    }
}

static bool is_op(const oq_node *n, const char *op)
{
    return oq_domain_is_default(n->domain) && strcmp(n->op_type, op) == 0;
}

/* register of slot sl, or -1 */
static int reg_of(const size_t *regs, int n_regs, size_t sl)
{
    for (int r = 0; r < n_regs; r++)
        if (regs[r] == sl)
            return r;
    return -1;
}

/* The op of step si reading chain registers, or false. *used: steps consumed (2 for a
 * Q/DQ pair). */
static bool member_op(const oq_plan *p, size_t si, const size_t *regs, int n_regs, ew_op *op,
                      size_t *used)
{
    const step *s = &p->steps[si];
    const oq_node *n = s->node;
    memset(op, 0, sizeof *op);
    *used = 1;
    if (s->n_imp || s->n_out != 1 || s->out_slots[0] == NO_SLOT)
        return false;
    if (!oq_domain_is_default(n->domain))
        return false;
    int64_t opset = s->k.opset;
    bool bin = is_op(n, "Add") || is_op(n, "Sub") || is_op(n, "Mul") || is_op(n, "Div");
    if (bin) {
        if (opset < 7 || s->n_in != 2)
            return false;
        ew_arg ar[2];
        for (int i = 0; i < 2; i++) {
            size_t sl = s->in_slots[i];
            if (sl == NO_SLOT)
                return false;
            ar[i].reg = reg_of(regs, n_regs, sl);
            ar[i].c = NULL;
            if (ar[i].reg < 0) {
                if (!is_float_const(p, sl))
                    return false;
                ar[i].c = &p->slots[sl].t;
            }
        }
        if (ar[0].reg < 0 && ar[1].reg < 0)
            return false;
        op->code = is_op(n, "Add") ? EW_ADD : is_op(n, "Sub") ? EW_SUB : is_op(n, "Mul") ? EW_MUL
                                                                                     : EW_DIV;
        op->a = ar[0];
        op->b = ar[1];
        return true;
    }
    if (s->n_in < 1 || s->in_slots[0] == NO_SLOT)
        return false;
    op->a.reg = reg_of(regs, n_regs, s->in_slots[0]);
    if (op->a.reg < 0)
        return false;
    if (is_op(n, "Relu") && s->n_in == 1) {
        op->code = EW_RELU;
        return true;
    }
    if (is_op(n, "HardSigmoid") && s->n_in == 1) {
        op->code = EW_HSIG;
        op->f0 = oq_node_attr_float(n, "alpha", 0.2f);
        op->f1 = oq_node_attr_float(n, "beta", 0.5f);
        return true;
    }
    if (is_op(n, "HardSwish") && s->n_in == 1 && opset >= 14) {
        op->code = EW_HSWISH;
        return true;
    }
    if (is_op(n, "Clip")) {
        op->code = EW_CLIP;
        op->f0 = -INFINITY;
        op->f1 = INFINITY;
        if (opset < 11) {
            if (s->n_in != 1)
                return false;
            op->f0 = oq_node_attr_float(n, "min", -INFINITY);
            op->f1 = oq_node_attr_float(n, "max", INFINITY);
            return true;
        }
        for (size_t i = 1; i < s->n_in && i < 3; i++) {
            size_t sl = s->in_slots[i];
            if (sl == NO_SLOT)
                continue;
            if (!is_float_const(p, sl))
                return false;
            int64_t cnt = oq_rt_tensor_numel(&p->slots[sl].t);
            if (cnt == 0)
                continue; /* as the kernel: an empty bound is no bound */
            if (i == 1)
                op->f0 = *(const float *)p->slots[sl].t.data;
            else
                op->f1 = *(const float *)p->slots[sl].t.data;
        }
        return s->n_in <= 3;
    }
    if (is_op(n, "QuantizeLinear") && si + 1 < p->n_steps) {
        const step *dq = &p->steps[si + 1];
        size_t qsl = s->out_slots[0];
        const slot *qs = &p->slots[qsl];
        int32_t qdt = qs->compiled.dtype;
        if (!is_op(dq->node, "DequantizeLinear") || dq->n_imp || dq->n_out != 1 ||
            dq->out_slots[0] == NO_SLOT || dq->n_in < 2 || dq->in_slots[0] != qsl ||
            qs->is_output || qs->last_use != si + 1 || !qrange16(qdt, &op->lo, &op->hi))
            return false;
        for (size_t i = 1; i < dq->n_in; i++)
            if (dq->in_slots[i] == qsl)
                return false;
        if (oq_node_attr_int(n, "block_size", 0) || oq_node_attr_int(dq->node, "block_size", 0))
            return false;
        if (s->n_in < 2 || !const_scalar(p, s->in_slots[1], &op->f0) ||
            !const_scalar(p, dq->in_slots[1], &op->f1))
            return false;
        op->z1 = op->z2 = 0;
        if (s->n_in > 2 && s->in_slots[2] != NO_SLOT &&
            !const_int_scalar(p, s->in_slots[2], qdt, &op->z1))
            return false;
        if (dq->n_in > 2 && dq->in_slots[2] != NO_SLOT &&
            !const_int_scalar(p, dq->in_slots[2], qdt, &op->z2))
            return false;
        if (p->slots[dq->out_slots[0]].compiled.dtype != OQ_DTYPE_FLOAT)
            return false;
        op->code = EW_FQ;
        *used = 2;
        return true;
    }
    return false;
}

/* first step reading each slot (NO_SLOT: none) */
static size_t *first_readers(const oq_plan *p)
{
    size_t *fr = malloc((p->n_slots + 1) * sizeof(size_t));
    if (!fr)
        return NULL;
    for (size_t i = 0; i < p->n_slots; i++)
        fr[i] = NO_SLOT;
    for (size_t si = p->n_steps; si-- > 0;) {
        const step *s = &p->steps[si];
        for (size_t i = 0; i < s->n_in; i++)
            if (s->in_slots[i] != NO_SLOT)
                fr[s->in_slots[i]] = si;
        for (size_t i = 0; i < s->n_imp; i++)
            fr[s->imp_slots[i]] = si;
    }
    return fr;
}

/* is register r read by an op outside ops[from .. to]? */
static bool reg_read_elsewhere(const ew_group *g, int r, int from, int to)
{
    for (int k = 0; k < g->n_ops; k++) {
        if (k >= from && k <= to)
            continue;
        const ew_op *o = &g->ops[k];
        if (o->a.reg == r || (EW_TWO_ARGS(o->code) && o->b.reg == r) ||
            (o->code >= EW_AFFINE && o->x == r))
            return true;
    }
    return false;
}

/* one register operand and one constant: which is which (false when not so) */
static bool reg_const(const ew_op *o, int *reg, const ew_arg **c, bool *const_first)
{
    if (o->a.reg >= 0 && o->b.reg < 0) {
        *reg = o->a.reg;
        *c = &o->b;
        *const_first = false;
        return true;
    }
    if (o->a.reg < 0 && o->b.reg >= 0) {
        *reg = o->b.reg;
        *c = &o->a;
        *const_first = true;
        return true;
    }
    return false;
}

/* Join Mul+Add (scale and shift) and the HardSwish quadruple of PaddleOCR into one op
 * each where the values between them are read by nothing else: fewer passes over the
 * registers, the same operations in the same order. */
static void ew_join(ew_group *g)
{
    for (int k = 0; k + 1 < g->n_ops; k++) {
        ew_op *o0 = &g->ops[k], *o1 = &g->ops[k + 1];
        int r0, r1;
        const ew_arg *c0, *c1;
        bool f0, f1;
        if (o0->code == EW_MUL && o1->code == EW_ADD && reg_const(o0, &r0, &c0, &f0) &&
            reg_const(o1, &r1, &c1, &f1) && r1 == o0->dst &&
            !reg_read_elsewhere(g, o0->dst, k + 1, k + 1)) {
            ew_op j = *o1;
            j.code = EW_AFFINE;
            j.x = r0;
            j.a = *c0;
            j.b = *c1;
            j.ord = (f0 ? 1 : 0) | (f1 ? 2 : 0);
            *o0 = j;
            memmove(o1, o1 + 1, (size_t)(g->n_ops - k - 2) * sizeof *o1);
            g->n_ops--;
            continue;
        }
        if (k + 3 < g->n_ops) {
            ew_op *o2 = &g->ops[k + 2], *o3 = &g->ops[k + 3];
            int r3;
            const ew_arg *c3;
            bool f3;
            if (o0->code == EW_ADD && reg_const(o0, &r0, &c0, &f0) && o1->code == EW_CLIP &&
                o1->a.reg == o0->dst && o2->code == EW_MUL && o2->a.reg >= 0 &&
                o2->b.reg >= 0 &&
                ((o2->a.reg == r0 && o2->b.reg == o1->dst) ||
                 (o2->b.reg == r0 && o2->a.reg == o1->dst)) &&
                o3->code == EW_DIV && o3->a.reg == o2->dst && o3->b.reg < 0 &&
                reg_const(o3, &r3, &c3, &f3) && !reg_read_elsewhere(g, o0->dst, k + 1, k + 1) &&
                !reg_read_elsewhere(g, o1->dst, k + 2, k + 2) &&
                !reg_read_elsewhere(g, o2->dst, k + 3, k + 3)) {
                ew_op j = *o3;
                j.code = EW_HSW6;
                j.x = r0;
                j.a = *c0;
                j.b = *c3;
                j.f0 = o1->f0;
                j.f1 = o1->f1;
                j.ord = (f0 ? 1 : 0) | (o2->a.reg == o1->dst ? 2 : 0);
                *o0 = j;
                memmove(o1, o1 + 3, (size_t)(g->n_ops - k - 4) * sizeof *o1);
                g->n_ops -= 3;
                continue;
            }
        }
    }
}

/* the longest valid chain after head step h, or NULL */
static ew_group *build_group(const oq_plan *p, size_t h, const size_t *fr)
{
    const step *hs = &p->steps[h];
    if (hs->n_out != 1 || hs->out_slots[0] == NO_SLOT || hs->n_imp)
        return NULL;
    size_t v0 = hs->out_slots[0];
    if (p->slots[v0].compiled.dtype != OQ_DTYPE_FLOAT)
        return NULL;
    ew_group g;
    memset(&g, 0, sizeof g);
    size_t regs[EW_MAX_REGS], ends[EW_MAX_OPS];
    int n_regs = 1;
    regs[0] = v0;
    size_t si = h + 1;
    while (si < p->n_steps && g.n_ops < EW_MAX_OPS && n_regs < EW_MAX_REGS) {
        ew_op op;
        size_t used;
        if (!member_op(p, si, regs, n_regs, &op, &used))
            break;
        const step *last = &p->steps[si + used - 1];
        op.dst = n_regs;
        regs[n_regs++] = last->out_slots[0];
        ends[g.n_ops] = si + used - 1;
        g.ops[g.n_ops++] = op;
        si += used;
    }
    /* shrink until every register but the last is read only inside the chain */
    while (g.n_ops > 0) {
        size_t end = ends[g.n_ops - 1];
        bool ok = true;
        for (int r = 0; r < g.n_ops && ok; r++) { /* registers 0 .. n_ops - 1 */
            const slot *s = &p->slots[regs[r]];
            ok = !s->is_output && s->last_use != NO_SLOT && s->last_use <= end &&
                 fr[regs[r]] > h;
        }
        if (ok)
            break;
        g.n_ops--;
    }
    if (g.n_ops == 0)
        return NULL;
    ew_group *out = malloc(sizeof *out);
    if (!out)
        return NULL;
    g.first = h + 1;
    g.last = ends[g.n_ops - 1];
    g.n_regs = g.n_ops + 1;
    g.out_slot = regs[g.n_ops];
    ew_join(&g);
    *out = g;
    return out;
}

oq_status oq_plan_fuse_chains(oq_plan *p)
{
    const char *env = getenv("ONNXQ_PLAN_FUSE");
    if (env && strcmp(env, "0") == 0)
        return OQ_OK;
    size_t *fr = first_readers(p);
    if (!fr)
        return OQ_ERR_NOMEM;
    for (size_t h = 0; h + 1 < p->n_steps; h++) {
        ew_group *g = build_group(p, h, fr);
        if (!g)
            continue;
        p->steps[h].group = g;
        h = g->last; /* members are not heads (the next head comes after the chain) */
    }
    free(fr);
    return OQ_OK;
}

/* ------------------------------------------------------------------ run ---------- */


/* Is constant c usable against a head of dims d (rank r)? *per_channel on axis 1. */
static bool const_fits(const oq_rt_tensor *c, const int64_t *d, size_t r, bool *per_channel)
{
    int64_t n = oq_rt_tensor_numel(c);
    *per_channel = false;
    if (c->rank > r || n < 1)
        return false;
    if (n == 1)
        return true;
    if (r < 2 || n != d[1])
        return false;
    for (size_t j = 0; j < c->rank; j++) {
        size_t hj = j + (r - c->rank);
        if (c->dims[j] != (hj == 1 ? d[1] : 1))
            return false;
    }
    *per_channel = true;
    return true;
}

/* scalar semantics of each op (elementwise.c, quant_ops.c) */
static float fq_one(float x, const ew_op *op)
{
    float q = x / op->f0;
    int64_t v;
    if (isnan(q)) {
        v = op->z1;
    } else if (isinf(q)) {
        v = q > 0 ? op->hi : op->lo;
    } else {
        double r = nearbyint((double)q) + (double)op->z1;
        if (r < op->lo)
            r = op->lo;
        if (r > op->hi)
            r = op->hi;
        v = (int64_t)r;
    }
    return (float)(v - op->z2) * op->f1;
}

/* d[i] for i in [i0, n): a and b are arrays (NULL: the constant ca / cb) */
static void op_scalar(const ew_op *op, float *d, const float *a, const float *b, float ca,
                      float cb, int64_t i0, int64_t n)
{
    const float f0 = op->f0, f1 = op->f1;
#define EW_LOOP(EXPR)                                   \
    for (int64_t i = i0; i < n; i++) {                  \
        float x = a ? a[i] : ca, y = b ? b[i] : cb;     \
        (void)y;                                        \
        d[i] = (EXPR);                                  \
    }                                                   \
    break;
    switch (op->code) {
    case EW_ADD: EW_LOOP(x + y)
    case EW_SUB: EW_LOOP(x - y)
    case EW_MUL: EW_LOOP(x * y)
    case EW_DIV: EW_LOOP(x / y)
    case EW_CLIP: EW_LOOP((x < f0 ? f0 : x) > f1 ? f1 : (x < f0 ? f0 : x))
    case EW_RELU: EW_LOOP(x > 0.0f ? x : 0.0f)
    case EW_HSIG: EW_LOOP(fmaxf(0.0f, fminf(1.0f, f0 * x + f1)))
    case EW_HSWISH: EW_LOOP(x * fmaxf(0.0f, fminf(1.0f, x * (1.0f / 6.0f) + 0.5f)))
    case EW_FQ: EW_LOOP(fq_one(x, op))
    case EW_AFFINE: {
        bool c1 = op->ord & 1, c2 = op->ord & 2;
        EW_LOOP(c2 ? cb + (c1 ? ca * x : x * ca) : (c1 ? ca * x : x * ca) + cb)
    }
    case EW_HSW6: {
        bool c1 = op->ord & 1, c2 = op->ord & 2;
        for (int64_t i = i0; i < n; i++) {
            float x = a[i];
            float t = c1 ? ca + x : x + ca;
            float v = t < f0 ? f0 : t;
            v = v > f1 ? f1 : v;
            d[i] = (c2 ? v * x : x * v) / cb;
        }
        break;
    }
    }
#undef EW_LOOP
}

#if defined(__GNUC__) && defined(__x86_64__)
#define OQ_HAVE_EW_AVX2 1
#include <immintrin.h>
/* the same operations 8 lanes at a time: max_ps/min_ps pick their second operand on
 * NaN, which gives the scalar code's NaN results (see elementwise.c) */
__attribute__((target("avx2"))) static void op_avx2(const ew_op *op, float *d, const float *a,
                                                    const float *b, float ca, float cb,
                                                    int64_t n)
{
    const float cav[8] = {ca, ca, ca, ca, ca, ca, ca, ca}, cbv[8] = {cb, cb, cb, cb, cb, cb, cb, cb};
    const float *ap = a ? a : cav, *bp = b ? b : cbv;
    const int64_t sa = a ? 1 : 0, sb = b ? 1 : 0;
    const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
    const __m256 f0 = _mm256_set1_ps(op->f0), f1 = _mm256_set1_ps(op->f1);
    int64_t i = 0;
#define EW_VLOOP(EXPR)                                  \
    for (; i + 8 <= n; i += 8) {                        \
        __m256 x = _mm256_loadu_ps(ap + i * sa);        \
        __m256 y = _mm256_loadu_ps(bp + i * sb);        \
        (void)y;                                        \
        _mm256_storeu_ps(d + i, (EXPR));                \
    }                                                   \
    break;
    switch (op->code) {
    case EW_ADD: EW_VLOOP(_mm256_add_ps(x, y))
    case EW_SUB: EW_VLOOP(_mm256_sub_ps(x, y))
    case EW_MUL: EW_VLOOP(_mm256_mul_ps(x, y))
    case EW_DIV: EW_VLOOP(_mm256_div_ps(x, y))
    case EW_CLIP: EW_VLOOP(_mm256_min_ps(f1, _mm256_max_ps(f0, x)))
    case EW_RELU: EW_VLOOP(_mm256_max_ps(x, zero))
    case EW_HSIG:
        EW_VLOOP(_mm256_max_ps(_mm256_min_ps(_mm256_add_ps(_mm256_mul_ps(f0, x), f1), one), zero))
    case EW_HSWISH: {
        const __m256 sixth = _mm256_set1_ps(1.0f / 6.0f), half = _mm256_set1_ps(0.5f);
        EW_VLOOP(_mm256_mul_ps(
            x, _mm256_max_ps(_mm256_min_ps(_mm256_add_ps(_mm256_mul_ps(x, sixth), half), one), zero)))
    }
    case EW_FQ: { /* as quant_ops.c's q_row_avx2 then dq_row_avx2 */
        const __m256 lo = _mm256_set1_ps((float)(op->lo - op->z1)),
                     hi = _mm256_set1_ps((float)(op->hi - op->z1));
        const __m256i z1 = _mm256_set1_epi32(op->z1), z2 = _mm256_set1_epi32(op->z2);
        for (; i + 8 <= n; i += 8) {
            __m256 q = _mm256_div_ps(_mm256_loadu_ps(ap + i * sa), f0);
            __m256 t = _mm256_round_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            t = _mm256_blendv_ps(t, zero, _mm256_cmp_ps(q, q, _CMP_UNORD_Q));
            t = _mm256_min_ps(_mm256_max_ps(t, lo), hi);
            __m256i iv = _mm256_sub_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(t), z1), z2);
            _mm256_storeu_ps(d + i, _mm256_mul_ps(_mm256_cvtepi32_ps(iv), f1));
        }
        break;
    }
    case EW_AFFINE: {
        const __m256 va = _mm256_set1_ps(ca), vb = _mm256_set1_ps(cb);
        const bool c1 = op->ord & 1, c2 = op->ord & 2;
        for (; i + 8 <= n; i += 8) {
            __m256 x = _mm256_loadu_ps(a + i);
            __m256 t = c1 ? _mm256_mul_ps(va, x) : _mm256_mul_ps(x, va);
            _mm256_storeu_ps(d + i, c2 ? _mm256_add_ps(vb, t) : _mm256_add_ps(t, vb));
        }
        break;
    }
    case EW_HSW6: {
        const __m256 va = _mm256_set1_ps(ca), vb = _mm256_set1_ps(cb);
        const bool c1 = op->ord & 1, c2 = op->ord & 2;
        for (; i + 8 <= n; i += 8) {
            __m256 x = _mm256_loadu_ps(a + i);
            __m256 t = c1 ? _mm256_add_ps(va, x) : _mm256_add_ps(x, va);
            t = _mm256_min_ps(f1, _mm256_max_ps(f0, t));
            t = c2 ? _mm256_mul_ps(t, x) : _mm256_mul_ps(x, t);
            _mm256_storeu_ps(d + i, _mm256_div_ps(t, vb));
        }
        break;
    }
    }
#undef EW_VLOOP
    if (i < n)
        op_scalar(op, d, a, b, ca, cb, i, n);
}

/* 16 lanes: the same operations as op_avx2 (vmaxps/vminps/vrndscaleps/vdivps behave
 * alike on 512-bit registers); the tail goes to op_avx2 */
__attribute__((target("avx512f"))) static void op_avx512(const ew_op *op, float *d,
                                                         const float *a, const float *b,
                                                         float ca, float cb, int64_t n)
{
    const float *ap = a, *bp = b;
    const __m512 vca = _mm512_set1_ps(ca), vcb = _mm512_set1_ps(cb);
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    const __m512 f0 = _mm512_set1_ps(op->f0), f1 = _mm512_set1_ps(op->f1);
    int64_t i = 0;
#define EW_ZLOOP(EXPR)                                      \
    for (; i + 16 <= n; i += 16) {                          \
        __m512 x = ap ? _mm512_loadu_ps(ap + i) : vca;      \
        __m512 y = bp ? _mm512_loadu_ps(bp + i) : vcb;      \
        (void)y;                                            \
        _mm512_storeu_ps(d + i, (EXPR));                    \
    }                                                       \
    break;
    switch (op->code) {
    case EW_ADD: EW_ZLOOP(_mm512_add_ps(x, y))
    case EW_SUB: EW_ZLOOP(_mm512_sub_ps(x, y))
    case EW_MUL: EW_ZLOOP(_mm512_mul_ps(x, y))
    case EW_DIV: EW_ZLOOP(_mm512_div_ps(x, y))
    case EW_CLIP: EW_ZLOOP(_mm512_min_ps(f1, _mm512_max_ps(f0, x)))
    case EW_RELU: EW_ZLOOP(_mm512_max_ps(x, zero))
    case EW_HSIG:
        EW_ZLOOP(_mm512_max_ps(_mm512_min_ps(_mm512_add_ps(_mm512_mul_ps(f0, x), f1), one), zero))
    case EW_HSWISH: {
        const __m512 sixth = _mm512_set1_ps(1.0f / 6.0f), half = _mm512_set1_ps(0.5f);
        EW_ZLOOP(_mm512_mul_ps(
            x, _mm512_max_ps(_mm512_min_ps(_mm512_add_ps(_mm512_mul_ps(x, sixth), half), one), zero)))
    }
    case EW_FQ: {
        const __m512 lo = _mm512_set1_ps((float)(op->lo - op->z1)),
                     hi = _mm512_set1_ps((float)(op->hi - op->z1));
        const __m512i z1 = _mm512_set1_epi32(op->z1), z2 = _mm512_set1_epi32(op->z2);
        for (; i + 16 <= n; i += 16) {
            __m512 q = _mm512_div_ps(ap ? _mm512_loadu_ps(ap + i) : vca, f0);
            __m512 t = _mm512_roundscale_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            t = _mm512_mask_mov_ps(t, _mm512_cmp_ps_mask(q, q, _CMP_UNORD_Q), zero);
            t = _mm512_min_ps(_mm512_max_ps(t, lo), hi);
            __m512i iv = _mm512_sub_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(t), z1), z2);
            _mm512_storeu_ps(d + i, _mm512_mul_ps(_mm512_cvtepi32_ps(iv), f1));
        }
        break;
    }
    case EW_AFFINE: {
        const bool c1 = op->ord & 1, c2 = op->ord & 2;
        for (; i + 16 <= n; i += 16) {
            __m512 x = _mm512_loadu_ps(a + i);
            __m512 t = c1 ? _mm512_mul_ps(vca, x) : _mm512_mul_ps(x, vca);
            _mm512_storeu_ps(d + i, c2 ? _mm512_add_ps(vcb, t) : _mm512_add_ps(t, vcb));
        }
        break;
    }
    case EW_HSW6: {
        const bool c1 = op->ord & 1, c2 = op->ord & 2;
        for (; i + 16 <= n; i += 16) {
            __m512 x = _mm512_loadu_ps(a + i);
            __m512 t = c1 ? _mm512_add_ps(vca, x) : _mm512_add_ps(x, vca);
            t = _mm512_min_ps(f1, _mm512_max_ps(f0, t));
            t = c2 ? _mm512_mul_ps(t, x) : _mm512_mul_ps(x, t);
            _mm512_storeu_ps(d + i, _mm512_div_ps(t, vcb));
        }
        break;
    }
    }
#undef EW_ZLOOP
    if (i < n)
        op_avx2(op, d + i, a ? a + i : NULL, b ? b + i : NULL, ca, cb, n - i);
}
#endif

/* 0 unknown, 1 portable, 2 AVX2, 3 AVX-512F; ONNXQ_SGEMM_ISA=generic|avx2 restricts it
 * (as for the GEMM). All compute the same numbers. */
static _Atomic int ew_isa;

static int ew_isa_get(void)
{
    int c = atomic_load_explicit(&ew_isa, memory_order_relaxed);
    if (!c) {
        c = 1;
#ifdef OQ_HAVE_EW_AVX2
        const char *env = getenv("ONNXQ_SGEMM_ISA");
        __builtin_cpu_init();
        if (oq_k_cpu_avx2())
            c = 2;
        if (c == 2 && (!env || strcmp(env, "avx2") != 0) && __builtin_cpu_supports("avx512f"))
            c = 3;
#endif
        atomic_store_explicit(&ew_isa, c, memory_order_relaxed);
    }
    return c;
}

/* run the program over x[0, n) (one channel row or part of one), channel c */
static void run_block(const ew_run *r, float *x, int64_t n, int64_t c, int isa)
{
    const ew_group *g = r->g;
    float regs[EW_MAX_REGS][EW_BLOCK];
    (void)isa;
    for (int64_t b0 = 0; b0 < n; b0 += EW_BLOCK) {
        int64_t m = n - b0 < EW_BLOCK ? n - b0 : EW_BLOCK;
        float *in = x + b0;
        for (int k = 0; k < g->n_ops; k++) {
            const ew_op *op = &g->ops[k];
            const float *a = NULL, *b = NULL;
            float ca = 0, cb = 0;
            if (op->code >= EW_AFFINE) { /* register x, constants a and b */
                a = op->x == 0 ? in : regs[op->x];
                ca = r->cv[k][0] ? r->cv[k][0][c] : r->cs[k][0];
                cb = r->cv[k][1] ? r->cv[k][1][c] : r->cs[k][1];
            } else if (op->a.reg >= 0)
                a = op->a.reg == 0 ? in : regs[op->a.reg];
            else
                ca = r->cv[k][0] ? r->cv[k][0][c] : r->cs[k][0];
            if (op->code <= EW_DIV) { /* binary */
                if (op->b.reg >= 0)
                    b = op->b.reg == 0 ? in : regs[op->b.reg];
                else
                    cb = r->cv[k][1] ? r->cv[k][1][c] : r->cs[k][1];
            }
            /* the last op writes straight back into x (register 0 is not read after:
               every op reads registers written before it, and x is read as register 0
               only up to this op, element by element) */
            float *d = k == g->n_ops - 1 ? in : regs[op->dst];
#ifdef OQ_HAVE_EW_AVX2
            if (isa == 3) {
                op_avx512(op, d, a, b, ca, cb, m);
                continue;
            }
            if (isa == 2) {
                op_avx2(op, d, a, b, ca, cb, m);
                continue;
            }
#endif
            op_scalar(op, d, a, b, ca, cb, 0, m);
        }
    }
}

static void ew_range(void *arg, int64_t b, int64_t e, int w)
{
    const ew_run *r = arg;
    int isa = ew_isa_get();
    (void)w;
    /* items are elements; rows of `inner` share a channel */
    for (int64_t i = b; i < e;) {
        int64_t row = i / r->inner, end = (row + 1) * r->inner;
        if (end > e)
            end = e;
        run_block(r, r->x + i, end - i, r->C > 0 ? row % r->C : 0, isa);
        i = end;
    }
}

static void ew_post(const void *ctx, float *x, int64_t n, int64_t c)
{
    const ew_run *r = ctx;
    run_block(r, x, n, r->C > 0 ? c % r->C : 0, ew_isa_get());
}

const oq_k_post *oq_plan_group_begin(oq_plan *p, size_t si)
{
    step *s = &p->steps[si];
    ew_group *g = s->group;
    const oq_rt_tensor *t = &s->out[0];
    if (!g || p->on_tensor || t->dtype != OQ_DTYPE_FLOAT || !t->data)
        return NULL;
    int64_t n = oq_rt_tensor_numel(t);
    if (n <= 0)
        return NULL;
    ew_run *r = &g->run;
    memset(r, 0, sizeof *r);
    r->g = g;
    r->x = t->data;
    r->C = t->rank >= 2 ? t->dims[1] : 1;
    r->inner = 1;
    for (size_t j = 2; j < t->rank; j++)
        r->inner *= t->dims[j];
    if (t->rank < 2)
        r->inner = n;
    if (r->inner <= 0 || r->C <= 0)
        return NULL;
    for (int kk = 0; kk < g->n_ops; kk++) {
        const ew_op *op = &g->ops[kk];
        const ew_arg *args[2] = {&op->a, &op->b};
        int na = EW_TWO_ARGS(op->code) ? 2 : 1;
        for (int j = 0; j < na; j++) {
            if (args[j]->reg >= 0)
                continue;
            bool pc;
            if (!const_fits(args[j]->c, t->dims, t->rank, &pc))
                return NULL;
            if (pc)
                r->cv[kk][j] = args[j]->c->data;
            else
                r->cs[kk][j] = *(const float *)args[j]->c->data;
        }
    }
    g->post.fn = ew_post;
    g->post.ctx = r;
    return &g->post;
}

void oq_plan_group_end(oq_plan *p, size_t si, bool applied, size_t *last, size_t *final_slot)
{
    step *s = &p->steps[si];
    ew_group *g = s->group;
    ew_run *r = &g->run;
    slot *h = &p->slots[s->out_slots[0]];
    if (!applied) {
        int64_t n = oq_rt_tensor_numel(&h->t);
        oq_k_parallel_for(&s->k, n, r->inner >= 16384 ? r->inner : 16384, ew_range, r);
    }
    /* the chain's last value takes over the head's buffer */
    slot *f = &p->slots[g->out_slot];
    f->t = h->t;
    f->buf = h->buf;
    f->prev_buf = h->buf;
    h->buf = NO_SLOT;
    *last = g->last;
    *final_slot = g->out_slot;
}

void oq_plan_group_free(ew_group *g)
{
    free(g);
}
