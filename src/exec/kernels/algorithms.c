/* Algorithms over whole tensors: Einsum (explicit and implicit output, ellipsis,
 * repeated labels = diagonals), Unique, NonMaxSuppression. Reference loops:
 * correctness first. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernel.h"

#define MAXL 64   /* labels: 52 letters + ellipsis dims */

typedef struct ein {
    size_t n_ops;
    size_t op_rank[8];
    int op_lab[8][OQ_RT_MAX_RANK];
    size_t out_rank;
    int out_lab[OQ_RT_MAX_RANK];
    int64_t dim[MAXL];
    bool used[MAXL];
} ein;

static int letter_id(char c)
{
    if (c >= 'a' && c <= 'z')
        return c - 'a';
    if (c >= 'A' && c <= 'Z')
        return 26 + c - 'A';
    return -1;
}

/* parse one term into labels; ellipsis dims get ids 52.. aligned to the right */
static oq_status parse_term(const oq_kctx *k, const char *s, size_t len, size_t rank, int *lab,
                            size_t *n, size_t *ell_n)
{
    size_t letters = 0;
    bool ell = false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            if (i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.')
                return oq_k_error(k, OQ_ERR_INVALID, "bad ellipsis");
            ell = true;
            i += 2;
        } else if (letter_id(s[i]) >= 0) {
            letters++;
        } else {
            return oq_k_error(k, OQ_ERR_INVALID, "bad character '%c' in equation", s[i]);
        }
    }
    if (rank != (size_t)-1 && (letters > rank || (!ell && letters != rank)))
        return oq_k_error(k, OQ_ERR_INVALID, "term \"%.*s\" does not match rank %zu", (int)len, s,
                          rank);
    size_t en = ell ? (rank == (size_t)-1 ? *ell_n : rank - letters) : 0;
    size_t j = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            for (size_t e = 0; e < en; e++)
                lab[j++] = 52 + (int)(en <= *ell_n ? *ell_n - en + e : e);
            i += 2;
        } else {
            lab[j++] = letter_id(s[i]);
        }
    }
    *n = j;
    if (rank != (size_t)-1 && en > *ell_n)
        *ell_n = en;
    return OQ_OK;
}

static oq_status ein_parse(const oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, ein *e)
{
    memset(e, 0, sizeof *e);
    const char *eq0 = oq_node_attr_string(k->node, "equation", "");
    char eq[512];
    size_t L = 0;
    for (const char *p = eq0; *p && L + 1 < sizeof eq; p++)
        if (*p != ' ')
            eq[L++] = *p;
    eq[L] = 0;
    char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : L;
    if (n_in > 8)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "more than 8 operands");
    /* first pass: ellipsis width = max over operands */
    size_t ell_n = 0, start = 0, op = 0;
    for (size_t i = 0; i <= lhs_len; i++) {
        if (i == lhs_len || eq[i] == ',') {
            if (op >= n_in)
                return oq_k_error(k, OQ_ERR_INVALID, "more terms than inputs");
            oq_status st = parse_term(k, eq + start, i - start, in[op]->rank, e->op_lab[op],
                                      &e->op_rank[op], &ell_n);
            if (st)
                return st;
            op++;
            start = i + 1;
        }
    }
    if (op != n_in)
        return oq_k_error(k, OQ_ERR_INVALID, "%zu terms for %zu inputs", op, n_in);
    e->n_ops = n_in;
    /* re-parse so that every operand's ellipsis aligns to the right of ell_n */
    start = 0;
    op = 0;
    for (size_t i = 0; i <= lhs_len; i++)
        if (i == lhs_len || eq[i] == ',') {
            size_t en = ell_n;
            parse_term(k, eq + start, i - start, in[op]->rank, e->op_lab[op], &e->op_rank[op], &en);
            /* parse_term placed ellipsis ids at 52 + (ell_n - own) .. : shift to align */
            op++;
            start = i + 1;
        }
    for (size_t o = 0; o < n_in; o++)
        for (size_t j = 0; j < e->op_rank[o]; j++) {
            int l = e->op_lab[o][j];
            int64_t d = in[o]->dims[j];
            if (!e->used[l] || e->dim[l] == 1)
                e->dim[l] = d;
            else if (d != 1 && d != e->dim[l])
                return oq_k_error(k, OQ_ERR_INVALID, "label dimension mismatch");
            e->used[l] = true;
        }
    if (arrow) {
        size_t en = ell_n;
        oq_status st = parse_term(k, arrow + 2, strlen(arrow + 2), (size_t)-1, e->out_lab,
                                  &e->out_rank, &en);
        if (st)
            return st;
    } else {
        for (size_t i = 0; i < ell_n; i++)
            e->out_lab[e->out_rank++] = 52 + (int)i;
        int count[52] = {0};
        for (size_t o = 0; o < n_in; o++)
            for (size_t j = 0; j < e->op_rank[o]; j++)
                if (e->op_lab[o][j] < 52)
                    count[e->op_lab[o][j]]++;
        /* alphabetical: lowercase before uppercase as in ASCII? numpy uses ASCII order */
        for (int c = 26; c < 52; c++)
            if (count[c] == 1)
                e->out_lab[e->out_rank++] = c;
        for (int c = 0; c < 26; c++)
            if (count[c] == 1)
                e->out_lab[e->out_rank++] = c;
    }
    if (e->out_rank > OQ_RT_MAX_RANK)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "output rank too large");
    return OQ_OK;
}

static oq_status infer_einsum(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, n_in))
        return oq_k_defer(k, out, n_out);
    ein e;
    oq_status st = ein_parse(k, in, n_in, &e);
    if (st)
        return st;
    int64_t d[OQ_RT_MAX_RANK];
    for (size_t i = 0; i < e.out_rank; i++)
        d[i] = e.used[e.out_lab[i]] ? e.dim[e.out_lab[i]] : 1;
    return oq_k_set_out(k, &out[0], in[0]->dtype, d, e.out_rank);
}

static oq_status run_einsum(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    ein e;
    oq_status st = ein_parse(k, in, n_in, &e);
    if (st)
        return st;
    int labs[MAXL];
    size_t nl = 0;
    bool in_out[MAXL] = {false};
    for (size_t i = 0; i < e.out_rank; i++) {
        labs[nl++] = e.out_lab[i];
        in_out[e.out_lab[i]] = true;
    }
    size_t n_free = nl;
    for (int l = 0; l < MAXL; l++)
        if (e.used[l] && !in_out[l])
            labs[nl++] = l;
    int64_t strides[8][MAXL];
    memset(strides, 0, sizeof strides);
    for (size_t o = 0; o < n_in; o++) {
        int64_t s = 1;
        for (size_t j = e.op_rank[o]; j-- > 0;) {
            if (in[o]->dims[j] != 1)
                strides[o][e.op_lab[o][j]] += s;
            s *= in[o]->dims[j];
        }
    }
    int64_t nout = oq_rt_tensor_numel(&out[0]), ncon = 1;
    for (size_t i = n_free; i < nl; i++)
        ncon *= e.dim[labs[i]];
    int64_t idx[MAXL];
    for (int64_t oi = 0; oi < nout; oi++) {
        int64_t rem = oi;
        for (size_t i = n_free; i-- > 0;) {
            int64_t d = e.used[labs[i]] ? e.dim[labs[i]] : 1;
            idx[i] = rem % d;
            rem /= d;
        }
        double acc = 0;
        for (int64_t ci = 0; ci < ncon; ci++) {
            int64_t r2 = ci;
            for (size_t i = nl; i-- > n_free;) {
                idx[i] = r2 % e.dim[labs[i]];
                r2 /= e.dim[labs[i]];
            }
            double prod = 1;
            for (size_t o = 0; o < n_in; o++) {
                int64_t off = 0;
                for (size_t i = 0; i < nl; i++)
                    off += idx[i] * strides[o][labs[i]];
                prod *= oq_k_get_f64(in[o], off);
            }
            acc += prod;
        }
        oq_k_set_f64(&out[0], oi, acc);
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ Unique ------- */

typedef struct uq {
    int64_t n_slices, slice, outer, len, inner;
    int64_t *first, *inverse, *count, *order;
    int64_t n_unique;
} uq;

static int slice_cmp(const oq_rt_tensor *x, int64_t outer, int64_t len, int64_t inner, int64_t a,
                     int64_t b)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double va = oq_k_get_f64(x, (o * len + a) * inner + i);
            double vb = oq_k_get_f64(x, (o * len + b) * inner + i);
            if (va != vb)
                return va < vb ? -1 : 1;
        }
    return 0;
}

static oq_status uq_compute(oq_kctx *k, const oq_rt_tensor *x, uq *u)
{
    oq_attr *aa = oq_node_attr(k->node, "axis");
    bool sorted = oq_node_attr_int(k->node, "sorted", 1) != 0;
    memset(u, 0, sizeof *u);
    if (aa) {
        int64_t axis = oq_k_axis(aa->i, x->rank);
        if (axis < 0)
            return oq_k_error(k, OQ_ERR_INVALID, "axis out of range");
        u->outer = 1;
        u->inner = 1;
        for (int64_t i = 0; i < axis; i++)
            u->outer *= x->dims[i];
        for (size_t i = (size_t)axis + 1; i < x->rank; i++)
            u->inner *= x->dims[i];
        u->len = x->dims[axis];
    } else {
        u->outer = 1;
        u->inner = 1;
        u->len = oq_rt_tensor_numel(x);
    }
    int64_t n = u->len;
    int64_t *mem = oq_k_scratch(k, (size_t)(5 * (n + 1)) * sizeof(int64_t));
    if (!mem)
        return OQ_ERR_NOMEM;
    u->first = mem;
    u->inverse = mem + (n + 1);
    u->count = mem + 2 * (n + 1);
    u->order = mem + 3 * (n + 1);
    int64_t *rep = mem + 4 * (n + 1); /* representative of each slice */
    /* unique by first occurrence */
    for (int64_t i = 0; i < n; i++) {
        int64_t j = 0;
        for (; j < u->n_unique; j++)
            if (slice_cmp(x, u->outer, u->len, u->inner, u->first[j], i) == 0)
                break;
        if (j == u->n_unique) {
            u->first[j] = i;
            u->count[j] = 0;
            u->n_unique++;
        }
        u->count[j]++;
        rep[i] = j;
    }
    for (int64_t j = 0; j < u->n_unique; j++)
        u->order[j] = u->first[j];
    if (sorted) {
        /* insertion sort of the unique slices (no global state for qsort) */
        for (int64_t a = 1; a < u->n_unique; a++) {
            int64_t v = u->order[a], b = a;
            while (b > 0 && slice_cmp(x, u->outer, u->len, u->inner, u->order[b - 1], v) > 0) {
                u->order[b] = u->order[b - 1];
                b--;
            }
            u->order[b] = v;
        }
    }
    /* order[j] = first index of the j-th output; map first-occurrence group -> output */
    for (int64_t j = 0; j < u->n_unique; j++)
        for (int64_t g = 0; g < u->n_unique; g++)
            if (u->first[g] == u->order[j])
                u->inverse[g] = j; /* group g is output j (inverse[] used as a map here) */
    for (int64_t i = 0; i < n; i++)
        rep[i] = u->inverse[rep[i]];
    for (int64_t i = 0; i < n; i++)
        u->inverse[i] = rep[i];
    return OQ_OK;
}

static oq_status infer_unique(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    for (size_t i = 1; i < n_out; i++)
        out[i].dtype = OQ_DTYPE_INT64;
    if (!in[0]->data || !oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    uq u;
    oq_status st = uq_compute(k, in[0], &u);
    if (st)
        return st;
    oq_attr *aa = oq_node_attr(k->node, "axis");
    int64_t d[OQ_RT_MAX_RANK];
    if (aa) {
        memcpy(d, in[0]->dims, in[0]->rank * 8);
        d[oq_k_axis(aa->i, in[0]->rank)] = u.n_unique;
        st = oq_k_set_out(k, &out[0], in[0]->dtype, d, in[0]->rank);
    } else {
        st = oq_k_set_out(k, &out[0], in[0]->dtype, &u.n_unique, 1);
    }
    if (!st && n_out > 1)
        st = oq_k_set_out(k, &out[1], OQ_DTYPE_INT64, &u.n_unique, 1);
    if (!st && n_out > 2)
        st = oq_k_set_out(k, &out[2], OQ_DTYPE_INT64, &u.len, 1);
    if (!st && n_out > 3)
        st = oq_k_set_out(k, &out[3], OQ_DTYPE_INT64, &u.n_unique, 1);
    return st;
}

static oq_status run_unique(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    uq u;
    oq_status st = uq_compute(k, x, &u);
    if (st)
        return st;
    size_t es = oq_k_elsize(x->dtype);
    for (int64_t j = 0; j < u.n_unique; j++) {
        int64_t src = u.order[j];
        for (int64_t o = 0; o < u.outer; o++)
            memcpy((char *)out[0].data + (size_t)((o * u.n_unique + j) * u.inner) * es,
                   (const char *)x->data + (size_t)((o * u.len + src) * u.inner) * es,
                   (size_t)u.inner * es);
        if (n_out > 1)
            ((int64_t *)out[1].data)[j] = src;
        if (n_out > 3) {
            int64_t c = 0;
            for (int64_t i = 0; i < u.len; i++)
                c += u.inverse[i] == j;
            ((int64_t *)out[3].data)[j] = c;
        }
    }
    if (n_out > 2)
        for (int64_t i = 0; i < u.len; i++)
            ((int64_t *)out[2].data)[i] = u.inverse[i];
    return OQ_OK;
}

/* ------------------------------------------------------------------ NMS ---------- */

typedef struct nms_cand {
    float score;
    int64_t box;
} nms_cand;

static int cand_cmp(const void *a, const void *b)
{
    const nms_cand *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return x->box < y->box ? -1 : x->box > y->box;
}

static void corners(const float *b, bool center, float *y1, float *x1, float *y2, float *x2)
{
    if (center) {
        *x1 = b[0] - b[2] / 2;
        *x2 = b[0] + b[2] / 2;
        *y1 = b[1] - b[3] / 2;
        *y2 = b[1] + b[3] / 2;
    } else {
        *y1 = fminf(b[0], b[2]);
        *y2 = fmaxf(b[0], b[2]);
        *x1 = fminf(b[1], b[3]);
        *x2 = fmaxf(b[1], b[3]);
    }
}

static float iou(const float *a, const float *b, bool center)
{
    float ay1, ax1, ay2, ax2, by1, bx1, by2, bx2;
    corners(a, center, &ay1, &ax1, &ay2, &ax2);
    corners(b, center, &by1, &bx1, &by2, &bx2);
    float ih = fminf(ay2, by2) - fmaxf(ay1, by1), iw = fminf(ax2, bx2) - fmaxf(ax1, bx1);
    if (ih <= 0 || iw <= 0)
        return 0;
    float inter = ih * iw;
    float uni = (ay2 - ay1) * (ax2 - ax1) + (by2 - by1) * (bx2 - bx1) - inter;
    return uni > 0 ? inter / uni : 0;
}

/* selected triples into sel (may be NULL to count) */
static int64_t nms(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, int64_t *sel)
{
    const oq_rt_tensor *boxes = in[0], *scores = in[1];
    int64_t maxo = n_in > 2 && in[2] && oq_rt_tensor_numel(in[2]) ? oq_k_get_int(in[2], 0) : 0;
    float thr = n_in > 3 && in[3] && oq_rt_tensor_numel(in[3]) ? ((const float *)in[3]->data)[0] : 0;
    bool has_st = n_in > 4 && in[4] && oq_rt_tensor_numel(in[4]);
    float sthr = has_st ? ((const float *)in[4]->data)[0] : 0;
    bool center = oq_node_attr_int(k->node, "center_point_box", 0) != 0;
    int64_t B = scores->dims[0], C = scores->dims[1], N = scores->dims[2], count = 0;
    nms_cand *c = oq_k_scratch(k, (size_t)(2 * N + 1) * sizeof(nms_cand));
    if (!c)
        return -1;
    int64_t *kept = (int64_t *)(void *)(c + N);
    const float *bx = boxes->data, *sc = scores->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t cl = 0; cl < C; cl++) {
            int64_t nc = 0, nk = 0;
            for (int64_t i = 0; i < N; i++) {
                float s = sc[(b * C + cl) * N + i];
                if (!has_st || s > sthr) {
                    c[nc].score = s;
                    c[nc++].box = i;
                }
            }
            qsort(c, (size_t)nc, sizeof *c, cand_cmp);
            for (int64_t i = 0; i < nc && nk < maxo; i++) {
                bool keep = true;
                for (int64_t j = 0; j < nk && keep; j++)
                    if (iou(bx + (b * N + c[i].box) * 4, bx + (b * N + kept[j]) * 4, center) > thr)
                        keep = false;
                if (!keep)
                    continue;
                kept[nk++] = c[i].box;
                if (sel) {
                    sel[count * 3] = b;
                    sel[count * 3 + 1] = cl;
                    sel[count * 3 + 2] = c[i].box;
                }
                count++;
            }
        }
    return count;
}

static oq_status infer_nms(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = OQ_DTYPE_INT64;
    if (!oq_k_data_known(in, n_in) || !oq_k_shapes_known(in, n_in))
        return oq_k_defer(k, out, n_out);
    if (in[0]->rank != 3 || in[0]->dims[2] != 4 || in[1]->rank != 3 ||
        in[1]->dims[2] != in[0]->dims[1] || in[1]->dims[0] != in[0]->dims[0])
        return oq_k_error(k, OQ_ERR_INVALID, "boxes must be [B,N,4] and scores [B,C,N]");
    int64_t n = nms(k, in, n_in, NULL);
    if (n < 0)
        return OQ_ERR_NOMEM;
    int64_t d[2] = {n, 3};
    return oq_k_set_out(k, &out[0], OQ_DTYPE_INT64, d, 2);
}

static oq_status run_nms(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    return nms(k, in, n_in, out[0].data) < 0 ? OQ_ERR_NOMEM : OQ_OK;
}

const oq_kernel oq_kernels_algorithms[] = {
    {"", "Einsum", 12, 0, 0, OQ_T_NUMERIC, NULL, NULL, infer_einsum, run_einsum, NULL, 1},
    {"", "Unique", 11, 0, 0, OQ_T_NUMERIC, NULL, NULL, infer_unique, run_unique, NULL, 1},
    {"", "NonMaxSuppression", 10, 0, 0, OQ_T(FLOAT), NULL, NULL, infer_nms, run_nms, NULL, 2},
};
OQ_KERNEL_TABLE_END(algorithms);
