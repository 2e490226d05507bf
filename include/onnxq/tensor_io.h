/* onnxq — tensor files: ONNX TensorProto (.pb, as in the ONNX backend test data) and
 * NumPy .npy (format versions 1-3, little-endian, C order).
 *
 * Tensors read are checked like model tensors (dims, element counts, payload sizes);
 * NaN and Inf are allowed in the data. The result is an owned oq_rt_tensor: release it
 * with oq_rt_tensor_release().
 */
#ifndef ONNXQ_TENSOR_IO_H
#define ONNXQ_TENSOR_IO_H

#include "onnxq/exec.h"
#include "onnxq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read a .npy (recognised by its magic bytes) or TensorProto file. *name (optional)
 * receives the TensorProto name as a malloc'ed string (NULL for .npy or no name). */
oq_status oq_tensor_file_read(const char *path, oq_rt_tensor *out, char **name, oq_diag *d);
/* Same, from memory; `what` names the data in messages. */
oq_status oq_tensor_buffer_read(const void *data, size_t len, const char *what,
                                oq_rt_tensor *out, char **name, oq_diag *d);

/* Write t as a TensorProto (raw_data) named `name` (may be NULL). Atomic. */
oq_status oq_tensor_file_write_pb(const char *path, const oq_rt_tensor *t, const char *name,
                                  oq_diag *d);
/* Write t as .npy version 1.0 (refused for dtypes NumPy has no code for: bfloat16,
 * 4-bit, float8). Atomic. */
oq_status oq_tensor_file_write_npy(const char *path, const oq_rt_tensor *t, oq_diag *d);
/* Write n bytes to path atomically (temporary file beside it, fsync, rename): a
 * failure leaves the previous file as it was. For reports (JSON, HTML). */
oq_status oq_file_write_atomic(const char *path, const void *data, size_t n, oq_diag *d);

#ifdef __cplusplus
}
#endif
#endif
