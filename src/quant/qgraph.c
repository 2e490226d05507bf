/* Graph helpers shared by src/quant (quant-impl.h). */
#include <string.h>

#include "onnxq/ir.h"
#include "onnxq/stats.h"
#include "quant/quant-impl.h"

bool oq_quant_op_is(const oq_node *n, const char *op)
{
    return n && oq_domain_is_default(n->domain) && strcmp(n->op_type, op) == 0;
}

const oq_node *oq_quant_producer_dq(const oq_value *v)
{
    const oq_node *p = v && v->kind == OQ_VALUE_NODE ? v->producer : NULL;
    return oq_quant_op_is(p, "DequantizeLinear") && p->n_inputs >= 2 && p->inputs[0] && p->inputs[1] ? p : NULL;
}

bool oq_quant_const_scalar(const oq_value *v, double *out, int32_t *dtype)
{
    oq_tensor *t = v ? oq_value_const_tensor(v) : NULL;
    if (!t || oq_tensor_numel(t) != 1)
        return false;
    const void *p = oq_tensor_data(t, NULL);
    if (!p || !oq_elems_to_double(p, t->dtype, 0, 1, out))
        return false;
    if (dtype)
        *dtype = t->dtype;
    return true;
}
