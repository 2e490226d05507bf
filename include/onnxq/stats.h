/* onnxq — statistics over tensor data (weights, activations).
 *
 * Used by `onnxq dump --stats`, and meant for verify / quantize as well:
 *  - oq_elems_to_double() decodes any numeric ONNX element type to double
 *    (float16, bfloat16, float8 variants, double, every int type incl. 4-bit, bool);
 *  - oq_stats_compute() gives min, max, mean, std (population, ddof 0), zero / NaN /
 *    Inf counts over a dense buffer, accumulated in double with two passes
 *    (compensated sum for the mean, then the sum of squared deviations);
 *  - oq_stats_channel_minmax() gives per-channel min/max along one axis;
 *  - oq_weight_channel_axis() says which axis is the output channel of a weight input
 *    of Conv / ConvTranspose / Gemm / MatMul.
 *
 * min, max, mean and std are taken over the finite elements only; NaN and +-Inf are
 * counted separately. When there is no finite element they are NaN.
 * Precision: int64/uint64 values beyond 2^53 are rounded when converted to double.
 */
#ifndef ONNXQ_STATS_H
#define ONNXQ_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnxq/ir.h"
#include "onnxq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oq_stats {
    int64_t count;     /* elements examined */
    int64_t finite;    /* finite elements: min/max/mean/std are over these */
    int64_t zeros;     /* elements equal to 0 (also -0.0) */
    int64_t nans;
    int64_t pos_infs, neg_infs;
    double min, max;   /* NaN when finite == 0 */
    double mean, std;  /* population std (divide by finite); NaN when finite == 0 */
} oq_stats;

/* True for element types oq_elems_to_double can decode (every numeric type and bool;
 * not string, complex or undefined). */
bool oq_stats_dtype_supported(int32_t dtype);

/* Decode elements [start, start+count) of a dense native-layout buffer (as given by
 * oq_tensor_data: little-endian, 4-bit types packed two per byte, low nibble first,
 * bool one byte) into out[0..count). The buffer need not be aligned.
 * Returns false for an unsupported dtype. */
bool oq_elems_to_double(const void *data, int32_t dtype, int64_t start, int64_t count,
                        double *out);

/* Statistics over n elements of a dense buffer. OQ_ERR_UNSUPPORTED for a dtype
 * oq_stats_dtype_supported() refuses; OQ_ERR_USAGE for n < 0. */
oq_status oq_stats_compute(const void *data, int32_t dtype, int64_t n, oq_stats *out);

/* Per-channel min and max (finite values only; NaN for a channel without any) along
 * `axis` of a dense buffer with the given dims. mins/maxs hold dims[axis] entries. */
oq_status oq_stats_channel_minmax(const void *data, int32_t dtype, const int64_t *dims,
                                  size_t rank, size_t axis, double *mins, double *maxs);

/* Convenience wrappers on a tensor (decodes/maps its data; errors name the tensor). */
oq_status oq_tensor_stats(oq_tensor *t, oq_stats *out, oq_diag *d);
oq_status oq_tensor_channel_minmax(oq_tensor *t, size_t axis, double *mins, double *maxs,
                                   oq_diag *d);

/* Output-channel axis of input `input_index` of node n when that input is a weight
 * with `rank` dims: Conv input 1 -> 0, ConvTranspose input 1 -> 1, Gemm input 1 ->
 * 0 if transB=1 else 1, MatMul input 1 -> rank-1 (rank >= 2). -1 otherwise. */
int oq_weight_channel_axis(const oq_node *n, size_t input_index, size_t rank);

#ifdef __cplusplus
}
#endif
#endif
