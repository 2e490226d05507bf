/* onnxq — what a target's integer arithmetic costs a QDQ model, layer by layer.
 *
 *   oq_satcheck *s;
 *   oq_satcheck_new(quant_model, OQ_ARITH_AVX2, threads, &s, &diag);
 *   for each sample: oq_satcheck_sample(s, inputs, n, &diag);   // inputs in plan order
 *   for each layer L = oq_satcheck_layer_at(s, i): oq_satcheck_loss_db(L) ...
 *   oq_satcheck_free(s);
 *
 * Per sample the quantized model runs twice: with the reference arithmetic (ONNX QDQ
 * semantics in float) and with the target's (oq_plan_options.arith). A layer is an
 * activation QuantizeLinear -> DequantizeLinear pair; its output compared is the
 * QuantizeLinear's (what a fused group produces), dequantized with the pair's scale and
 * zero point. A Gemm or MatMul group with no Q after it (a float output: QGemm without
 * y_scale, MatMulIntegerToFloat) is a layer too, its float output compared as it is, and
 * its scale that of a uint8 quantization of the reference values' range seen so far (so
 * its loss is measured against the rounding noise a Q there would add). Graph outputs are
 * compared too. Fixed-size sums: memory does not grow with
 * the number of samples; one sample's reference Q outputs are held at a time.
 *
 * The loss of a layer (docs/quantize.md "Saturation check"): the reference arithmetic
 * already loses the rounding noise of the layer's quantization, E_q = n * scale^2 / 12
 * over n elements; the target adds E_t = sum (target - reference)^2. The layer's SQNR
 * drops by loss = 10 log10(1 + E_t / E_q) dB (0 when the target computes the same).
 * `onnxq quantize` warns for layers whose loss exceeds 1 dB; `onnxq verify --target`
 * reports SQNR(target vs reference) per layer (include/onnxq/verify.h).
 */
#ifndef ONNXQ_SATCHECK_H
#define ONNXQ_SATCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnxq/calib.h"
#include "onnxq/exec.h"
#include "onnxq/verify.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oq_satcheck_layer {
    const char *tensor;   /* the DequantizeLinear's output (the float tensor's name) */
    const char *qtensor;  /* the QuantizeLinear's output */
    const char *node;     /* the node producing the quantized tensor ("" for an input) */
    const char *op_type;  /* its op type ("input" for a graph input) */
    float scale;
    int32_t zero_point;
    bool product;         /* computed by Conv / ConvTranspose / Gemm / MatMul (optionally
                           * through Relu / Clip): the groups whose u8 x s8 pairs saturate
                           * on AVX2 (the other integer kernels, QLinearSoftmax, round
                           * differently from reference but do not saturate) */
    oq_err_acc err;       /* reference (x) vs target (y), dequantized */
} oq_satcheck_layer;

typedef struct oq_satcheck_output {
    const char *name;
    oq_err_acc err;       /* reference vs target */
} oq_satcheck_output;

typedef struct oq_satcheck oq_satcheck;

/* Whether arith can make any layer of m lose to saturation: only OQ_ARITH_AVX2 saturates,
 * and only in a Conv/ConvTranspose/Gemm/MatMul group of the main graph with an int8
 * operand, unless that operand is an int8 constant weight within the pair limit
 * (oq_weight_pairs_fit); uint8 x uint8 (U8U8) and exact integer arithmetic differ from the
 * reference by rounding alone. */
bool oq_satcheck_can_saturate(const oq_model *m, oq_arith arith);

/* The model must outlive s. Layers: activation Q -> DQ pairs with a scalar scale and
 * zero point (per-channel activation pairs are not compared). */
oq_status oq_satcheck_new(oq_model *quant_model, oq_arith arith, int threads, oq_satcheck **out,
                          oq_diag *d);
void oq_satcheck_free(oq_satcheck *s);
/* Also hand every tensor of the reference run to fn (e.g. verify's weight comparison). */
void oq_satcheck_set_ref_observer(oq_satcheck *s, oq_tensor_observer fn, void *user);
/* The reference plan: its inputs define the order of `inputs`. */
const oq_plan *oq_satcheck_plan(const oq_satcheck *s);
oq_status oq_satcheck_sample(oq_satcheck *s, const oq_rt_tensor *inputs, size_t n_inputs,
                             oq_diag *d);
/* Run samples 0 .. min(max_samples, count) - 1 of src (max_samples 0: all). */
oq_status oq_satcheck_run_source(oq_satcheck *s, oq_calib_source *src, uint64_t max_samples,
                                 oq_diag *d);

uint64_t oq_satcheck_n_samples(const oq_satcheck *s);
size_t oq_satcheck_n_layers(const oq_satcheck *s);  /* in graph order */
const oq_satcheck_layer *oq_satcheck_layer_at(const oq_satcheck *s, size_t i);
size_t oq_satcheck_n_outputs(const oq_satcheck *s);
const oq_satcheck_output *oq_satcheck_output_at(const oq_satcheck *s, size_t i);
/* 10 log10(1 + E_t / E_q) (see above); NaN when nothing was compared. */
double oq_satcheck_loss_db(const oq_satcheck_layer *L);

#ifdef __cplusplus
}
#endif
#endif
