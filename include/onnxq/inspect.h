/* onnxq — inspecting a model: what `onnxq dump` shows (docs/dump.md), for any program.
 *
 *   oq_inspect in;
 *   if (oq_inspect_model(model, &in, &d) != OQ_OK) ...      // only out of memory fails
 *   in.n_nodes, in.ops[i].op_type / .count                  // op histogram, most used first
 *   in.params[OQ_DTYPE_FLOAT].elements[0]                   // float32 elements in initializers
 *   for (size_t i = 0; i < in.n_tensors; i++) {              // initializers, Constant tensors
 *       oq_inspect_stats s;
 *       if (oq_inspect_tensor_stats(&in.tensors[i], &s, &d) == OQ_OK && !s.skipped)
 *           ... s.s.min, s.s.max, s.s.mean, s.s.std, s.mins[k] / s.maxs[k] per channel ...
 *       oq_inspect_stats_free(&s);
 *   }
 *   oq_inspect_free(&in);
 *   char *t = oq_value_type_text(v);                        // "float32[1, 3, N, ?]"
 *   oq_inspect_write_dot(model, "m.onnx", stdout, &d);      // Graphviz (dump --dot)
 *
 * Every graph counts: the main graph and the subgraphs of If/Loop/Scan bodies (and any
 * GRAPH/GRAPHS attribute), depth first in node order. Strings point into the model (scopes
 * are allocated in it): they live as long as the model.
 */
#ifndef ONNXQ_INSPECT_H
#define ONNXQ_INSPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "onnxq/ir.h"
#include "onnxq/stats.h"
#include "onnxq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One row of the op histogram. */
typedef struct oq_inspect_op {
    const char *op_type;
    const char *domain;       /* "" for the default domain (ai.onnx) */
    int64_t count;            /* nodes in all graphs */
} oq_inspect_op;

/* An initializer, or the tensor of a Constant node's "value" attribute. */
typedef struct oq_inspect_tensor {
    oq_tensor *tensor;
    const char *name;         /* the value it defines (a Constant: its output) */
    bool constant;            /* a Constant node's tensor, else an initializer */
    const char *scope;        /* "" in the main graph, else the subgraph's path:
                               * "loop.body/If_0.then_branch" (node name or #index,
                               * attribute, "[k]" for a GRAPHS attribute) */
    oq_value *value;          /* the value it defines, or NULL */
    int64_t bytes;            /* data bytes (string tensors: the strings' lengths) */
} oq_inspect_tensor;

/* Parameters of one element type: [0] initializers, [1] Constant nodes (also the
 * scalar and list forms value_float(s), value_int(s), value_string(s), and the values of
 * sparse_value). Sparse initializers are not counted (n_sparse_initializers). */
typedef struct oq_inspect_params {
    int64_t tensors[2], elements[2], bytes[2];
} oq_inspect_params;

typedef struct oq_inspect {
    int64_t n_nodes;                   /* nodes in all graphs */
    int64_t n_sparse_initializers;
    oq_inspect_op *ops;                /* most used first, then by op type, then domain */
    size_t n_ops;
    oq_inspect_tensor *tensors;        /* graph order; a subgraph's after its node */
    size_t n_tensors;
    oq_inspect_params params[OQ_DTYPE_COUNT]; /* by element type (index: OQ_DTYPE_*) */
} oq_inspect;

/* Bytes of a tensor's data (string tensors: the strings' lengths; 0 when unknown). */
int64_t oq_inspect_tensor_bytes(const oq_tensor *t);

/* Summary, op histogram, tensors and parameter counts of m. Fails only when out of
 * memory (OQ_ERR_NOMEM; *out is then empty). Free with oq_inspect_free. */
oq_status oq_inspect_model(oq_model *m, oq_inspect *out, oq_diag *d);
void oq_inspect_free(oq_inspect *in);

/* Statistics of one tensor (oq_stats: min/max/mean/std over finite values, zero/NaN/Inf
 * counts) and, for a weight of Conv/ConvTranspose/Gemm/MatMul (its first such consumer),
 * min/max per output channel. */
typedef struct oq_inspect_stats {
    const char *skipped;      /* non-NULL: no statistics, and why: the dtype's name
                               * (string, complex), or "unreadable" */
    oq_stats s;
    int axis;                 /* output-channel axis, -1 when none */
    const oq_node *consumer;  /* the node the axis comes from (axis >= 0) */
    int64_t channels;         /* dims[axis] */
    double *mins, *maxs;      /* channels values each (axis >= 0); malloc'ed */
} oq_inspect_stats;

/* OQ_OK, also with s.skipped set for a dtype without statistics; an error when the data
 * cannot be read (named in d; s.skipped "unreadable") or memory runs out. When only the
 * per-channel part fails, the status is OQ_OK, axis is -1 and d holds the error.
 * Free with oq_inspect_stats_free (also after an error). */
oq_status oq_inspect_tensor_stats(const oq_inspect_tensor *t, oq_inspect_stats *s, oq_diag *d);
void oq_inspect_stats_free(oq_inspect_stats *s);

/* Types and shapes as dump prints them: "float32[1, 3, N, ?]" (a symbolic dimension by
 * its name, quoted when it has odd characters; "?" unknown; "[...]" unknown rank),
 * "seq(float32[...])", "map(int64, float32[])", "optional(...)", "sparse float32[4]".
 * Malloc'ed; NULL when out of memory. */
char *oq_type_text(const oq_type *t);
/* The best known type of a value: its type, else its initializer's or Constant node's
 * dtype and dims. NULL when unknown (or out of memory). */
char *oq_value_type_text(const oq_value *v);

/* The graph as Graphviz DOT (what `onnxq dump --dot` prints): one box per node (domain
 * and name shown), inputs, used initializers and outputs as separate shapes, edges
 * labelled with the value's type, subgraphs as dashed clusters tied to their node.
 * title: the graph's label (with the graph's name after it). OQ_ERR_NOMEM, or
 * OQ_ERR_IO when writing to f fails. */
oq_status oq_inspect_write_dot(oq_model *m, const char *title, FILE *f, oq_diag *d);

/* The document `onnxq dump --json` writes (schema onnxq.dump/1, docs/dump.md) for m to f:
 * header, opsets, metadata, op histogram, parameters, the graph with its nodes, attributes
 * and subgraphs, and with stats the statistics of every initializer and Constant tensor.
 * path names the model in the document. A tensor whose statistics cannot be computed is
 * handed to report (may be NULL) as it happens, with its diagnostics, and the document goes
 * on without them (res->stats_failed, OQ_ERR_IO); nesting deeper than the writer's limit
 * leaves it incomplete (res->incomplete, OQ_ERR_UNSUPPORTED). */
typedef struct oq_inspect_json_result {
    bool incomplete, oom, stats_failed;
} oq_inspect_json_result;
oq_status oq_inspect_write_json(oq_model *m, const char *path, bool stats, FILE *f,
                                void (*report)(const oq_diag *d, void *user), void *user,
                                oq_inspect_json_result *res, oq_diag *d);

#ifdef __cplusplus
}
#endif
#endif
