/* The kernel registry: every family's table, searched by (domain, op type, opset,
 * dtypes). Rows are tried in family order, then table order. */
#include "exec/exec-impl.h"

#include <string.h>

typedef struct family {
    const char *name;
    const oq_kernel *rows;
    const size_t *count;
} family;

static const family families[] = {
#define OQ_X(fam) {#fam, oq_kernels_##fam, &oq_kernels_##fam##_count},
    OQ_KERNEL_FAMILIES(OQ_X)
#undef OQ_X
};

static bool same_domain(const char *a, const char *b)
{
    bool da = oq_domain_is_default(a), db = oq_domain_is_default(b);
    if (da || db)
        return da && db;
    return strcmp(a, b) == 0;
}

static bool type_accepted(const oq_kernel *r, const oq_kctx *k, const oq_rt_tensor *const *in,
                          size_t n_in)
{
    if (r->types) {
        if ((size_t)r->type_input >= n_in || !in[r->type_input])
            return false;
        int32_t dt = in[r->type_input]->dtype;
        if (dt <= 0 || dt >= 64 || !(r->types & (UINT64_C(1) << dt)))
            return false;
    }
    return !r->type_ok || r->type_ok(k, in, n_in);
}

const oq_kernel *oq_kernel_find(const oq_kctx *k, const char *domain, const char *op_type,
                                int64_t opset, const oq_rt_tensor *const *in, size_t n_in,
                                oq_kernel_miss *why)
{
    oq_kernel_miss miss = OQ_KMISS_OP;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        for (size_t i = 0; i < *families[f].count; i++) {
            const oq_kernel *r = &families[f].rows[i];
            if (strcmp(r->op_type, op_type) != 0 || !same_domain(r->domain, domain))
                continue;
            if (opset < r->since || (r->until && opset > r->until)) {
                if (miss == OQ_KMISS_OP)
                    miss = OQ_KMISS_OPSET;
                continue;
            }
            miss = OQ_KMISS_DTYPE;
            if (type_accepted(r, k, in, n_in)) {
                if (why)
                    *why = OQ_KMISS_NONE;
                return r;
            }
        }
    }
    if (why)
        *why = miss;
    return NULL;
}

bool oq_exec_supports(const char *domain, const char *op_type, int64_t opset)
{
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (size_t i = 0; i < *families[f].count; i++) {
            const oq_kernel *r = &families[f].rows[i];
            if (strcmp(r->op_type, op_type) == 0 && same_domain(r->domain, domain) &&
                opset >= r->since && (!r->until || opset <= r->until))
                return true;
        }
    return false;
}
