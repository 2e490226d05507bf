#ifndef ONNXQ_TESTUTIL_H
#define ONNXQ_TESTUTIL_H
#include "onnxq/onnxq.h"
/* Run a shell command, capturing stdout+stderr into *out (malloc'ed); returns exit code. */
int tu_run(const char *cmd, char **out);
/* A fresh empty temporary directory (malloc'ed path). */
char *tu_tmpdir(void);
/* Write a file; returns 0 on success. */
int tu_write_file(const char *path, const void *data, size_t len);
/* Read a whole file (malloc'ed), NULL on error. */
void *tu_read_file(const char *path, size_t *len);

/* Deterministic random numbers (splitmix64 on *state): uniform in [0, 1), and N(0, 1) by
 * Box-Muller from two uniforms. */
double tu_urand(uint64_t *state);
float tu_nrand(uint64_t *state);

/* ---- graph builders (the IR API) ---- */
/* The node of m named name, or NULL. */
oq_node *tu_find_node(oq_model *m, const char *name);
/* A new subgraph, named attr and scoped under n's graph, held by n's graph-valued
 * attribute attr (If then_branch, Loop body, ...). */
oq_graph *tu_add_subgraph(oq_node *n, const char *attr);
/* Run `/usr/bin/python3 SOURCE_DIR/tests/SCRIPT 'ARG'` (a check against onnxruntime),
 * log its output and assert it passed; exit status 77 skips the test (onnxruntime-node
 * not available). */
void tu_ort_check(const char *script, const char *arg);
/* A float graph input of shape [1, c]. */
oq_value *tu_input_1xc(oq_model *m, const char *name, int64_t c);
/* Appends op (node name) on inputs a[, b[, c]] (b, c NULL when absent); returns its one
 * output, a new value named out. */
oq_value *tu_node(oq_model *m, const char *op, const char *name, oq_value *a, oq_value *b,
                  oq_value *c, const char *out);
/* Scalar (rank 0) initializers. */
oq_value *tu_scalar_f(oq_model *m, const char *name, float v);
oq_value *tu_scalar_u8(oq_model *m, const char *name, uint8_t v);
/* Activation pre -> QuantizeLinear -> DequantizeLinear -> out, uint8 with zero point zp,
 * named after t as the QDQ conventions say (t_scale, t_zero_point, t_quantized,
 * t_QuantizeLinear, t_DequantizeLinear). */
oq_value *tu_qdq_u8(oq_model *m, oq_value *pre, const char *t, const char *out, float s,
                    uint8_t zp);
/* Weight name = DequantizeLinear(name_quantized: int8 q of 2-D dims, name_scale = s,
 * name_zero_point = 0). */
oq_value *tu_weight_dq_i8(oq_model *m, const char *name, const int8_t *q, const int64_t *dims,
                          float s);

/* ---- the two-layer MatMul model of test_verify.c and test_fallback.c ----
 * float: x[1,4] -> mm1 (w1 [4,3]) -> y1 -> mm2 (w2 [3,2]) -> y2
 * quant: x -> QDQ -> mm1(DQ w1) -> QDQ y1 -> mm2(DQ w2) -> QDQ y2 */
#define TU_MM_SX 0.03125f /* x: uint8, zp 128, range [-4, 3.97] (coarse) */
#define TU_MM_SW 0.01f    /* weights: int8 symmetric per tensor */
#define TU_MM_SY1 0.02f   /* y1: uint8, zp 128 */
#define TU_MM_SY2 0.01f   /* y2: uint8, zp 100: clips below -1.0 */
#define TU_MM_ZY2 100
extern const int8_t tu_mm_w1q[4 * 3], tu_mm_w2q[3 * 2];
/* The float weights, set by tu_mm_make_weights(): near the int8 grid so that weight
 * quantization shows. */
extern float tu_mm_w1[4 * 3], tu_mm_w2[3 * 2];
void tu_mm_make_weights(void);
oq_model *tu_mm_float_model(void);
oq_model *tu_mm_quant_model(void);
/* By hand: uint8 QuantizeLinear + DequantizeLinear of v in float32 (division, round half
 * to even), and out[n] = a[k] @ w[k, n] summed in float, k ascending. */
float tu_hq_u8(float v, float s, int zp);
void tu_matmul(const float *a, const float *w, int k, int n, float *out);
#endif
