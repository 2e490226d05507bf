/* libFuzzer target for the tensor-file reader (.npy and TensorProto .pb, as read by
 * --calib, --data and `run --input`): bytes -> oq_tensor_buffer_read. Any input may be
 * rejected, but:
 *   - nothing may crash or trip ASan/UBSan,
 *   - a rejected input must return an empty tensor and record at least one error,
 *   - an accepted tensor must be consistent: rank <= OQ_RT_MAX_RANK, dims >= 0,
 *     nbytes == oq_dtype_nbytes(dtype, numel), data present when nbytes > 0 (every
 *     byte is read, so ASan sees a short buffer), bool elements 0 or 1. */
#include <stdint.h>
#include <stdlib.h>

#include "onnxq/ir.h"
#include "onnxq/status.h"
#include "onnxq/tensor_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_rt_tensor t;
    char *name = NULL;
    oq_status st = oq_tensor_buffer_read(data, size, "fuzz.npy", &t, &name, &d);
    if (st != OQ_OK) {
        if (d.errors == 0 || t.data || name)
            abort();
        oq_diag_free(&d);
        return 0;
    }
    if (t.rank > OQ_RT_MAX_RANK)
        abort();
    for (size_t i = 0; i < t.rank; i++)
        if (t.dims[i] < 0)
            abort();
    int64_t numel = oq_rt_tensor_numel(&t);
    if (numel < 0 || oq_dtype_nbytes(t.dtype, numel) != t.nbytes)
        abort();
    if (t.nbytes > 0 && !t.data)
        abort();
    const uint8_t *p = t.data;
    unsigned sum = 0;
    for (int64_t i = 0; i < t.nbytes; i++) {
        sum += p[i];
        if (t.dtype == OQ_DTYPE_BOOL && p[i] > 1)
            abort();
    }
    /* keep the loop */
    if (sum == 0xFFFFFFFFu)
        d.warnings++;
    oq_rt_tensor_release(&t);
    free(name);
    oq_diag_free(&d);
    return 0;
}
