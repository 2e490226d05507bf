/* onnxq — empirical bias correction of a QDQ model against its float model.
 *
 *   oq_biascorr_options o = oq_biascorr_options_default();
 *   o.threads = 2;                                // results do not depend on it
 *   oq_biascorr_result r;
 *   oq_bias_correct(float_model, quant_model, src, &o, &r, &d);   // edits quant_model
 *
 * Quantizing weights and activations shifts the mean of a layer's output: rounding errors
 * that do not average out (weights that all round the same way, ranges clipped by the
 * calibration percentile, errors carried from the layers before). The shift is systematic,
 * so later layers, normalizations and attention blocks amplify it. Bias correction (Nagel et
 * al., "Data-Free Quantization Through Weight Equalization and Bias Correction", 2019, sec.
 * 4.2, "empirical bias correction"; AIMET's `bias_correction`) measures, per output channel c
 * of each quantized layer, E[y_float_c - y_quant_c] over the calibration samples and adds it
 * to the layer's bias.
 *
 * Layers: Conv, ConvTranspose and Gemm nodes of the main graph whose data input comes from a
 * DequantizeLinear and whose bias is DequantizeLinear(int32 initializer, scale) used by that
 * node alone (what insert-qdq and fold-bias write); the output channel is axis 1. (The float
 * bias Adds after MatMuls are not corrected: on PaddleOCR rec's SVTR neck that made the
 * output worse, 14.6 -> 11.3 dB, although each layer's mean error went to ~0.) The float
 * model must hold the same layer outputs under the same value names (the float model after
 * the same preparation passes as the quantized one); a layer without a float twin is skipped.
 *
 * The layers are corrected one at a time in graph order, each measured with the corrections
 * of the layers before it already applied (correcting all at once over-corrects: a layer's
 * shift is partly inherited from its inputs). y_quant is computed with the reference
 * arithmetic, y_float once with the float model. The correction of channel c is the mean
 * error d_c shrunk by (1 - se_c^2 / d_c^2)+, se_c the standard error of d_c from the samples'
 * own mean errors: a shift the samples disagree on (its sign or size changes from one input
 * to the next) is corrected less, a consistent one almost fully (the plain mean fitted the
 * 16 samples and hurt others on YOLOv8n and PaddleOCR rec). It is rounded to the bias's
 * int32 step (scale_c): after the call, every corrected layer's mean error over the samples
 * is within half a step of what the shrinkage left (int32 clamping aside). Over at most
 * o.max_samples samples of src (read once and kept), or the samples o.sample_index names.
 *
 * Cost (o.method):
 * - OQ_BIASCORR_LOCKSTEP: one float pass, then ONE pass of the quantized model: every
 *   sample's run at once (a plan and a thread per sample, at most o.threads computing at a
 *   time), each waiting at every layer's output until all samples have produced it; the
 *   last to arrive sums the samples' outputs in sample order and decides the correction,
 *   and every run adds it to its output in place before the layer's consumers run. The same
 *   corrections as the waves up to float rounding (y + (b' - b) where a Conv would add b':
 *   a QuantizeLinear downstream may then round one element the other way; a correction is
 *   counted in int32 steps of s_in * s_w, far finer than an activation step, so later
 *   layers' corrections may differ by a few such steps). Memory: the samples' inputs plus
 *   max_samples x one quantized run's intermediate buffers (weights dequantized per run,
 *   not kept per plan).
 * - OQ_BIASCORR_WAVES: one float pass, then one pass of the quantized model per wave (the
 *   next layers of which none feeds another: parallel branches share a pass), each stopped
 *   (oq_plan_stop) once the wave's layers are computed, one sample at a time. Memory: one
 *   run's buffers.
 * - OQ_BIASCORR_AUTO (default): lockstep when samples x (the float run's peak
 *   intermediate bytes + the float bytes of the quantized model's dequantized weights)
 *   fit in o.max_bytes (default 1 GiB; what a quantized run holds, measured within 15 % on
 *   four models); else, when the waves would be more than OQ_BIASCORR_MAX_WAVES (4),
 *   lockstep on the first samples that fit when they are at least OQ_BIASCORR_MIN_LOCKSTEP
 *   (4; the result's samples says how many); else waves. The environment
 *   variable ONNXQ_BIASCORR_METHOD=lockstep|waves sets the default (for comparisons).
 * Results do not depend on o.threads. o.progress may be called from a worker thread (one
 * call at a time, in layer order).
 * o.arith is not used yet: the integer targets run a DQ -> Conv -> Q group as one kernel
 * and never produce the layer's float output; with weights within the pair limit they
 * compute the same Conv sums up to float rounding.
 */
#ifndef ONNXQ_BIASCORR_H
#define ONNXQ_BIASCORR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnxq/calib.h"
#include "onnxq/exec.h"
#include "onnxq/ir.h"
#include "onnxq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum oq_biascorr_method {
    OQ_BIASCORR_AUTO = 0,     /* lockstep when its buffers fit in max_bytes, else waves */
    OQ_BIASCORR_LOCKSTEP = 1, /* one pass: every sample's run at once, layer by layer */
    OQ_BIASCORR_WAVES = 2     /* one pass per wave of layers, one sample at a time */
} oq_biascorr_method;

/* Default of oq_biascorr_options.max_bytes: 1 GiB. */
#define OQ_BIASCORR_MAX_BYTES (1ull << 30)
/* AUTO, when the samples' runs do not fit in max_bytes: lockstep on fewer samples when at
 * least OQ_BIASCORR_MIN_LOCKSTEP fit and the waves would be more than OQ_BIASCORR_MAX_WAVES */
#define OQ_BIASCORR_MIN_LOCKSTEP 4
#define OQ_BIASCORR_MAX_WAVES 4

typedef struct oq_biascorr_options {
    int threads;            /* executor threads (<= 0: one per CPU) */
    oq_arith arith;         /* the quantized model's arithmetic (default reference) */
    uint64_t max_samples;   /* at most this many samples of src (0: all; default 16) */
    /* called after each layer (may be NULL) */
    void (*progress)(size_t done, size_t total, const char *node, void *user);
    void *progress_user;
    oq_biascorr_method method; /* default OQ_BIASCORR_AUTO */
    uint64_t max_bytes;     /* lockstep's bound on intermediate buffers (0: OQ_BIASCORR_MAX_BYTES) */
    /* the samples of src used, by index (NULL: the first max_samples); e.g. the ones a
     * later check on held-out samples does not judge with */
    const uint64_t *sample_index;
    size_t n_sample_index;
} oq_biascorr_options;

oq_biascorr_options oq_biascorr_options_default(void);

typedef struct oq_biascorr_result {
    size_t layers;          /* layers measured */
    size_t changed;         /* of which the bias changed */
    size_t skipped;         /* quantized Conv/ConvTranspose/Gemm not corrected (no int32 bias
                             * DequantizeLinear of their own, no float twin, not float) */
    uint64_t samples;
    size_t runs;            /* passes of the quantized model over the samples (lockstep: 1;
                             * waves: one per wave of layers that do not feed each other) */
    double mean_abs_steps;  /* mean |correction| over every channel of every layer, in bias steps */
    double max_rel_shift;   /* largest |correction| / (RMS of that layer's float output) */
    char max_rel_node[256]; /* where */
} oq_biascorr_result;

oq_status oq_bias_correct(oq_model *float_model, oq_model *quant_model, oq_calib_source *src,
                          const oq_biascorr_options *o, oq_biascorr_result *r, oq_diag *d);

#ifdef __cplusplus
}
#endif
#endif
