/* Private to src/io: the protobuf-c structs live here and nowhere else. */
#ifndef ONNXQ_IO_IMPL_H
#define ONNXQ_IO_IMPL_H
#include <protobuf-c/protobuf-c.h>

#include "ir/ir-impl.h"
#include "onnx.pb-c.h"

#define OQ_MAX_GRAPH_DEPTH 100
#define OQ_MAX_TYPE_DEPTH 100

/* Walk the wire bytes of a message without building it: checks varints, lengths,
 * wire types against the schema, and graph/type nesting depth; and refuses a message
 * whose unpacking would take more memory than oq_memory_limit() allows. */
oq_status oq_wire_scan(const uint8_t *data, size_t len, const ProtobufCMessageDescriptor *desc,
                       oq_diag *d);
/* The memory a read may take: ONNXQ_MAX_MEMORY, else 3/4 of physical memory (capped by
 * RLIMIT_AS / RLIMIT_DATA); *how says which. 0: unknown. */
uint64_t oq_memory_limit(const char **how);

/* Per-model I/O state (model->io): mappings that tensor data is borrowed from. */
typedef struct oq_mapping {
    struct oq_mapping *next;
    void *addr;
    size_t len;
    char *path;
} oq_mapping;

typedef struct oq_stream_sink oq_stream_sink; /* src/io/stream_out.c */

typedef struct oq_io_state {
    oq_model_io base; /* first: the callbacks the IR calls (ir/ir-impl.h) */
    oq_mapping *maps;
    oq_stream_sink *sink; /* oq_model_stream_begin: the output's data file, being written */
} oq_io_state;

/* The state of m, created (with the callbacks installed) on first use; the reader
 * creates it for every model it makes. NULL when out of memory. */
oq_io_state *oq_io_state_get(oq_model *m);

/* Resolve, check and map the external data of t (relative to m->dir). */
oq_status oq_io_map_external(oq_model *m, oq_tensor *t, oq_diag *d);
/* Parse the external_data entries. */
oq_status oq_external_parse(const oq_tensor *t, oq_external *out, oq_diag *d);

/* Streaming output (src/io/stream_out.c). */
oq_status oq_io_stream_tensor(oq_model *m, const char *name, int32_t dtype, const int64_t *dims, size_t rank,
                              const void *data, int64_t nbytes, oq_tensor **out, oq_diag *d);
void oq_io_release_tensor(oq_model *m, oq_tensor *t);
/* Remove the data file being streamed (the model was not written). */
void oq_io_stream_abort(oq_model *m);
/* Is t's data in the stream sink (written by oq_io_stream_tensor, still referring to it)? */
bool oq_io_stream_has(oq_model *m, const oq_tensor *t);
/* Map a streamed tensor's bytes back from the data file being written. */
oq_status oq_io_stream_map(oq_model *m, oq_tensor *t, oq_diag *d);

/* Large raw_data borrowed from the mapped model file (src/io/raw_borrow.c). */
#define OQ_RAW_BORROW_MIN 4096
typedef struct oq_raw_refs {
    const uint8_t *data;
    size_t len;
} oq_raw_refs;
/* Build a copy of a validated ModelProto with every TensorProto.raw_data of at least
 * OQ_RAW_BORROW_MIN bytes replaced by a marker. Returns 1 (skeleton and refs are
 * malloc'ed), 0 (nothing to borrow: use the original bytes) or -1 (out of memory). */
int oq_raw_skeleton(const uint8_t *data, size_t len, uint8_t **skel, size_t *skel_len,
                    oq_raw_refs **refs, size_t *n_refs);
/* Point t's raw_data at the payload its marker names and drop the marker. */
bool oq_raw_restore(oq_tensor *t, const oq_raw_refs *refs, size_t n_refs);

/* Allocator that takes memory from an arena (free is a no-op). */
void oq_pb_allocator_init(ProtobufCAllocator *al, oq_arena *a);

/* Atomic output file. */
typedef struct oq_outfile {
    char *final_path;
    char *tmp_path;
    int fd;
    uint8_t *buf;
    size_t used, cap;
    int err;             /* errno of the first failure */
    uint64_t written;
    int slot;            /* in the table oq_remove_temp_files() empties, or -1 */
} oq_outfile;

oq_status oq_outfile_open(oq_outfile *f, const char *path, oq_diag *d);
void oq_outfile_write(oq_outfile *f, const void *p, size_t n);
/* Write out the buffered bytes (f->written then counts them). */
void oq_outfile_flush(oq_outfile *f);
/* Flush, fsync, rename. On any failure the temp file is removed and the previous file
 * at path is left as it was. */
oq_status oq_outfile_commit(oq_outfile *f, oq_diag *d);
void oq_outfile_abort(oq_outfile *f);
/* True when a and b name the same file (same device and inode). */
bool oq_same_file(const char *a, const char *b);

#endif
