#include "testutil.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "ir/ir-impl.h"

int tu_run(const char *cmd, char **out)
{
    char *full = malloc(strlen(cmd) + 16);
    sprintf(full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    free(full);
    if (!p)
        return -1;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (cap - len < 1024) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    buf[len] = 0;
    int rc = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

char *tu_tmpdir(void)
{
    char *t = strdup("/tmp/onnxq-test-XXXXXX");
    return mkdtemp(t) ? t : NULL;
}

int tu_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, len, f);
    return (fclose(f) == 0 && w == len) ? 0 : -1;
}

void *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b && len)
        *len = (size_t)n;
    return b;
}

oq_node *tu_find_node(oq_model *m, const char *name)
{
    for (oq_node *n = m->graph->first; n; n = n->next)
        if (n->name && strcmp(n->name, name) == 0)
            return n;
    return NULL;
}

oq_value *tu_input_1xc(oq_model *m, const char *name, int64_t c)
{
    int64_t d[2] = {1, c};
    oq_value *v = oq_graph_new_value(m->graph, name);
    oq_graph_add_input(m->graph, v, oq_type_tensor(m, OQ_DTYPE_FLOAT, d, NULL, 2));
    return v;
}

oq_value *tu_node(oq_model *m, const char *op, const char *name, oq_value *a, oq_value *b,
                  oq_value *c, const char *out)
{
    oq_value *ins[3] = {a, b, c};
    size_t n = c ? 3 : b ? 2 : 1;
    oq_value *o = oq_graph_new_value(m->graph, out);
    oq_graph_append(m->graph, oq_node_new(m->graph, op, NULL, name, ins, n, &o, 1));
    return o;
}

/* rank 0: oq_tensor_set_data reads one dim even then, so never pass NULL */
static const int64_t NO_DIMS[1] = {1};

oq_value *tu_scalar_f(oq_model *m, const char *name, float v)
{
    return oq_graph_add_initializer(m->graph, name, OQ_DTYPE_FLOAT, NO_DIMS, 0, &v, 4);
}

oq_value *tu_scalar_u8(oq_model *m, const char *name, uint8_t v)
{
    return oq_graph_add_initializer(m->graph, name, OQ_DTYPE_UINT8, NO_DIMS, 0, &v, 1);
}

oq_value *tu_qdq_u8(oq_model *m, oq_value *pre, const char *t, const char *out, float s,
                    uint8_t zp)
{
    char b1[64], b2[64], b3[64], b4[64], b5[64];
    snprintf(b1, sizeof b1, "%s_scale", t);
    snprintf(b2, sizeof b2, "%s_zero_point", t);
    snprintf(b3, sizeof b3, "%s_quantized", t);
    snprintf(b4, sizeof b4, "%s_QuantizeLinear", t);
    snprintf(b5, sizeof b5, "%s_DequantizeLinear", t);
    oq_value *sv = tu_scalar_f(m, b1, s), *zv = tu_scalar_u8(m, b2, zp);
    oq_value *q = tu_node(m, "QuantizeLinear", b4, pre, sv, zv, b3);
    return tu_node(m, "DequantizeLinear", b5, q, sv, zv, out);
}

oq_value *tu_weight_dq_i8(oq_model *m, const char *name, const int8_t *q, const int64_t *dims,
                          float s)
{
    char b1[64], b2[64], b3[64], b4[64];
    snprintf(b1, sizeof b1, "%s_quantized", name);
    snprintf(b2, sizeof b2, "%s_scale", name);
    snprintf(b3, sizeof b3, "%s_zero_point", name);
    snprintf(b4, sizeof b4, "%s_DequantizeLinear", name);
    oq_value *qv = oq_graph_add_initializer(m->graph, b1, OQ_DTYPE_INT8, dims, 2, q,
                                            (size_t)(dims[0] * dims[1]));
    int8_t z = 0;
    oq_value *zv = oq_graph_add_initializer(m->graph, b3, OQ_DTYPE_INT8, NO_DIMS, 0, &z, 1);
    return tu_node(m, "DequantizeLinear", b4, qv, tu_scalar_f(m, b2, s), zv, name);
}

const int8_t tu_mm_w1q[4 * 3] = {50, -20, 10, 30, 40, -60, -70, 15, 25, 5, -35, 80};
const int8_t tu_mm_w2q[3 * 2] = {60, -40, -25, 70, 45, 30};
float tu_mm_w1[4 * 3], tu_mm_w2[3 * 2];

void tu_mm_make_weights(void)
{
    for (int i = 0; i < 12; i++)
        tu_mm_w1[i] = (float)tu_mm_w1q[i] * TU_MM_SW + 0.0045f * (float)((i % 3) - 1);
    for (int i = 0; i < 6; i++)
        tu_mm_w2[i] = (float)tu_mm_w2q[i] * TU_MM_SW - 0.0027f * (float)((i % 2) ? 1 : -1);
}

oq_model *tu_mm_float_model(void)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = tu_input_1xc(m, "x", 4);
    int64_t d1[2] = {4, 3}, d2[2] = {3, 2};
    oq_value *w1 = oq_graph_add_initializer(m->graph, "w1", OQ_DTYPE_FLOAT, d1, 2, tu_mm_w1,
                                            sizeof tu_mm_w1);
    oq_value *w2 = oq_graph_add_initializer(m->graph, "w2", OQ_DTYPE_FLOAT, d2, 2, tu_mm_w2,
                                            sizeof tu_mm_w2);
    oq_value *y1 = tu_node(m, "MatMul", "mm1", x, w1, NULL, "y1");
    oq_value *y2 = tu_node(m, "MatMul", "mm2", y1, w2, NULL, "y2");
    oq_graph_add_output(m->graph, y2, NULL);
    return m;
}

oq_model *tu_mm_quant_model(void)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = tu_input_1xc(m, "x", 4);
    int64_t d1[2] = {4, 3}, d2[2] = {3, 2};
    oq_value *w1 = tu_weight_dq_i8(m, "w1", tu_mm_w1q, d1, TU_MM_SW);
    oq_value *w2 = tu_weight_dq_i8(m, "w2", tu_mm_w2q, d2, TU_MM_SW);
    oq_value *xd = tu_qdq_u8(m, x, "x", "x_dequant", TU_MM_SX, 128);
    oq_value *p1 = tu_node(m, "MatMul", "mm1", xd, w1, NULL, "y1_prequant");
    oq_value *y1 = tu_qdq_u8(m, p1, "y1", "y1", TU_MM_SY1, 128);
    oq_value *p2 = tu_node(m, "MatMul", "mm2", y1, w2, NULL, "y2_prequant");
    oq_value *y2 = tu_qdq_u8(m, p2, "y2", "y2", TU_MM_SY2, TU_MM_ZY2);
    oq_graph_add_output(m->graph, y2, NULL);
    return m;
}

float tu_hq_u8(float v, float s, int zp)
{
    float q = rintf(v / s) + (float)zp; /* float32 division, round half to even */
    q = q < 0 ? 0 : q > 255 ? 255 : q;
    return (q - (float)zp) * s;
}

void tu_matmul(const float *a, const float *w, int k, int n, float *out)
{
    for (int j = 0; j < n; j++) {
        float s = 0;
        for (int i = 0; i < k; i++)
            s += a[i] * w[i * n + j];
        out[j] = s;
    }
}

oq_graph *tu_add_subgraph(oq_node *n, const char *attr)
{
    oq_model *m = n->graph->model;
    oq_graph *sg = oq_graph_new_in(m, n->graph, n);
    oq_attr *a = oq_model_alloc(m, sizeof *a);
    cr_assert(sg && a);
    a->name = oq_model_strdup(m, attr);
    a->has_type = true;
    a->type = OQ_ATTR_GRAPH;
    a->g = sg;
    cr_assert_eq(OQ_PUSH(m->arena, &n->attrs, &n->n_attrs, a), 0);
    sg->name = oq_model_strdup(m, attr);
    return sg;
}

void tu_ort_check(const char *script, const char *arg)
{
    char cmd[1200], *out = NULL;
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 '%s/tests/%s' '%s'", ONNXQ_SOURCE_DIR, script,
             arg);
    int rc = tu_run(cmd, &out);
    cr_log_info("%s", out);
    if (rc == 77) {
        free(out);
        cr_skip_test("onnxruntime-node not available");
    }
    cr_assert_eq(rc, 0, "%s", out);
    free(out);
}

double tu_urand(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

float tu_nrand(uint64_t *state)
{
    double u = tu_urand(state) + 1e-300; /* both draws in this order, as the tests wrote it */
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * tu_urand(state)));
}
