/* onnxq — weight rounding for static quantization: the int8 weights of a QDQ model's Conv,
 * Gemm and MatMul layers rounded again with GPTQ (oq_gptq_round_fixed), each layer's
 * scales kept, so that the layer's output error over the calibration samples' inputs is
 * least rather than each weight's own error (round to nearest).
 *
 *   oq_wround_options o = oq_wround_options_default();
 *   o.float_weight = fn;  o.user = ...;   // the float data behind an int8 initializer
 *   o.pair_limit = true;                  // ort-x86: keep the int16 pairs unsaturated
 *   oq_weight_round(qm, src, &o, &r, &d);
 *
 * The inputs are the quantized model's own: each layer's input as the model computes it
 * (after its activation QuantizeLinear/DequantizeLinear, with the upstream weights as they
 * were), in ONNX reference arithmetic. A Conv's input is read as the rows of its im2col
 * matrix in the (kh, kw, cin) order of onnxruntime's kernels, so that the pair limit
 * pairs rows (2i, 2i+1). Memory: the Hessians of one group of layer inputs at a time
 * (K x K doubles each), within max_bytes; one pass over the samples per group.
 * docs/quantize.md "Weight rounding". */
#ifndef ONNXQ_WROUND_H
#define ONNXQ_WROUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnxq/calib.h"
#include "onnxq/ir.h"
#include "onnxq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default of oq_wround_options.max_bytes: 512 MiB. */
#define OQ_WROUND_MAX_BYTES (512ull << 20)

typedef struct oq_wround_options {
    int threads;            /* executor threads (<= 0: one per CPU) */
    bool pair_limit;        /* same-sign weight pairs within 128 steps (ort-x86) */
    double damp;            /* GPTQ dampening, a fraction of the mean Hessian diagonal (0.01) */
    uint64_t max_samples;   /* at most this many samples of src (0: all; default 64) */
    const uint64_t *sample_index; /* the samples used, by index (NULL: the first ones) */
    size_t n_sample_index;
    uint64_t max_bytes;     /* Hessians held at once (0: OQ_WROUND_MAX_BYTES) */
    /* the float data (numel values, the initializer's layout) behind int8 initializer
     * `name`, or NULL: that layer is skipped */
    const float *(*float_weight)(const char *name, int64_t numel, void *user);
    void *user;
} oq_wround_options;

oq_wround_options oq_wround_options_default(void);

typedef struct oq_wround_result {
    size_t layers;          /* layers rounded again */
    size_t skipped;         /* quantized Conv/Gemm/MatMul left as they were (grouped
                             * convolution, shared weight, no float data, not int8 symmetric,
                             * input never seen) */
    int64_t values, changed;/* weights, of which rounded differently */
    /* each layer's output error over the samples' inputs (oq_gptq_proxy_error) with the
     * weights rounded to nearest (before) and again (after): the gain 10 log10(before /
     * after) in dB, mean over the layers and the smallest, at worst_node */
    double mean_gain_db, worst_gain_db;
    char worst_node[256];
    uint64_t samples;
    size_t passes;          /* passes over the samples (groups of layer inputs) */
} oq_wround_result;

oq_status oq_weight_round(oq_model *qm, oq_calib_source *src, const oq_wround_options *o, oq_wround_result *r,
                          oq_diag *d);

#ifdef __cplusplus
}
#endif
#endif
