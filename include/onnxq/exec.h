/* onnxq — the reference executor: compile a plan once, run it many times.
 *
 *   oq_plan *plan;
 *   oq_plan_options o = oq_plan_options_default();
 *   o.threads = 4;
 *   if (oq_plan_compile(model, &o, &plan, &diag) != OQ_OK) ...   // errors name the node
 *   oq_rt_tensor in[1], out[1];
 *   oq_rt_tensor_borrow(&in[0], OQ_DTYPE_FLOAT, dims, 4, data);   // caller's buffer
 *   oq_plan_run(plan, in, 1, out, 1, &diag);                       // out[] malloc'ed
 *   ... oq_rt_tensor_release(&out[0]); oq_plan_free(plan);
 *
 * Compiling orders the nodes, infers dtypes and (where the graph inputs allow) shapes,
 * chooses one kernel per node by (domain, op type, opset, dtypes) and prepares each
 * node's private state. An operator, dtype or opset without a kernel is an error at
 * compile time naming the node, its op type, domain and opset.
 *
 * Running binds the graph inputs (symbolic dims take the sizes of the given tensors;
 * shapes are re-inferred on every run), executes the nodes in order, and hands every
 * produced tensor to the observer (if any) right after it is computed. Intermediate
 * buffers are recycled as soon as their last consumer has run, so the observer must
 * copy what it wants to keep. Initializers and Constant outputs are used in place.
 *
 * Constant folding: a node whose inputs are all constant (initializers, Constant
 * outputs, outputs of other such nodes) and that has no subgraph -- the
 * DequantizeLinear of a weight, shape arithmetic -- is evaluated once, when the plan is
 * compiled, with the same kernel, and its outputs are then held by the plan like
 * initializers (bit-identical to computing them on every run). The folded outputs hold
 * at most twice the bytes of the graph's initializers and Constant tensors (at least
 * 1 MiB); nodes that do not fit run on every run as before. The observer still sees every folded output once
 * per run, at the start of the run, in plan order (before the outputs of the other
 * nodes).
 *
 * Results do not depend on the thread count: work is split over independent output
 * ranges only, never over reductions.
 *
 * The model must outlive the plan and must not be edited while a plan uses it. A plan
 * runs one oq_plan_run at a time (it owns its buffers); use one plan per thread to run
 * in parallel. The observer sees the outputs of the nodes of the main graph and of the
 * subgraphs that run (the branch an If takes, every iteration of a Loop or Scan body;
 * node->graph tells which graph), but not those of Constant nodes, whose tensors are
 * the model's. The input observer sees the inputs of a Loop/Scan body at every
 * iteration (the main graph's inputs are the caller's own).
 */
#ifndef ONNXQ_EXEC_H
#define ONNXQ_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnxq/ir.h"
#include "onnxq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Highest tensor rank the executor handles. */
#define OQ_RT_MAX_RANK 8

/* A tensor at run time. `data` is dense, C order, little-endian, in the layout of
 * oq_tensor_data() (bool one byte per element, 4-bit types packed two per byte).
 * owned: the tensor's data was malloc'ed for it and oq_rt_tensor_release() frees it;
 * otherwise the data is borrowed (caller's buffer, model initializer, plan buffer). */
typedef struct oq_rt_tensor {
    int32_t dtype;                  /* oq_dtype */
    size_t rank;
    int64_t dims[OQ_RT_MAX_RANK];
    void *data;                     /* NULL only when numel == 0 or not yet known */
    int64_t nbytes;                 /* bytes of data (oq_dtype_nbytes(dtype, numel)) */
    bool owned;
} oq_rt_tensor;

int64_t oq_rt_tensor_numel(const oq_rt_tensor *t);   /* -1 on bad dims or overflow */
/* Fill t to describe data the caller keeps (not copied, not freed by onnxq). */
oq_status oq_rt_tensor_borrow(oq_rt_tensor *t, int32_t dtype, const int64_t *dims,
                              size_t rank, void *data);
/* Allocate zeroed data for dtype/dims (owned). */
oq_status oq_rt_tensor_alloc(oq_rt_tensor *t, int32_t dtype, const int64_t *dims,
                             size_t rank);
/* Free owned data; reset t to an empty tensor. Safe on zeroed or borrowed tensors. */
void oq_rt_tensor_release(oq_rt_tensor *t);
/* Format "float32[1,3,224,224]" into buf. */
const char *oq_rt_tensor_describe(const oq_rt_tensor *t, char *buf, size_t size);

/* Called for every tensor a node produces (out_index: the node's output slot), after
 * the node ran and before the buffer can be reused. `t` is valid only during the call. */
typedef void (*oq_tensor_observer)(const oq_node *node, size_t out_index,
                                   const oq_rt_tensor *t, void *user);

/* Called for every graph input of a subgraph body (Loop/Scan: iteration number,
 * condition, loop-carried and scanned values) each time the body runs. */
typedef void (*oq_input_observer)(const oq_value *v, const oq_rt_tensor *t, void *user);

/* The integer arithmetic a plan uses for quantized (QDQ) groups. The deployment targets
 * of include/onnxq/target.h name one each; docs/run.md says what each computes. */
typedef enum oq_arith {
    OQ_ARITH_REFERENCE = 0, /* ONNX QDQ semantics: float math between DequantizeLinear and
                             * QuantizeLinear (the spec; onnxruntime without optimizations) */
    OQ_ARITH_EXACT = 1,     /* integer kernels, exact int32 accumulation (onnxruntime's fused
                             * kernels on AVX-512 VNNI / AVX-VNNI / AMX CPUs) */
    OQ_ARITH_AVX2 = 2       /* OQ_ARITH_EXACT plus the int16 saturation of adjacent u8 x s8
                             * product pairs (vpmaddubsw) of onnxruntime's AVX2 kernels */
} oq_arith;

typedef struct oq_plan_options {
    int threads;                    /* <= 0: one per online CPU; 1: no worker threads */
    oq_tensor_observer on_tensor;   /* may be NULL */
    void *user;                     /* passed to on_tensor */
    oq_arith arith;                 /* default OQ_ARITH_REFERENCE */
    bool no_fold;                   /* true: do not evaluate constant nodes at compile time
                                     * (also ONNXQ_PLAN_FOLD=0 in the environment) */
    oq_input_observer on_input;     /* may be NULL; gets `user` too */
} oq_plan_options;

oq_plan_options oq_plan_options_default(void);

typedef struct oq_plan oq_plan;

/* Compile a plan for model->graph. On failure *out is NULL and d names the problem. */
oq_status oq_plan_compile(oq_model *model, const oq_plan_options *opts, oq_plan **out,
                          oq_diag *d);
void oq_plan_free(oq_plan *p);

/* Time spent per operator (onnxq run --profile): after oq_plan_set_profile(p, true)
 * every run adds each step's wall time. oq_plan_profile fills up to max entries, one per
 * kernel op type (an integer QDQ group under its kernel's name; a fused activation chain
 * with the op it follows), largest total first, and returns how many there are; *runs
 * gets the number of runs timed. */
typedef struct oq_profile_entry {
    const char *op_type;
    double ms;        /* total over the runs */
    int64_t nodes;    /* steps of this op type in the plan */
} oq_profile_entry;
oq_status oq_plan_set_profile(oq_plan *p, bool on);
size_t oq_plan_profile(const oq_plan *p, oq_profile_entry *out, size_t max, int64_t *runs);

/* The plan's interface: graph inputs that are not initializers, and graph outputs,
 * in graph order. Dims of -1 are symbolic or unknown (see oq_plan_input_dim_name). */
size_t oq_plan_n_inputs(const oq_plan *p);
size_t oq_plan_n_outputs(const oq_plan *p);
const char *oq_plan_input_name(const oq_plan *p, size_t i);
const char *oq_plan_output_name(const oq_plan *p, size_t i);
/* Declared dtype and shape of input i (rank 0 and dtype UNDEFINED when not declared;
 * *has_shape false when the rank is unknown). */
int32_t oq_plan_input_info(const oq_plan *p, size_t i, size_t *rank, int64_t *dims,
                           bool *has_shape);
/* Symbolic name of dim j of input i, or NULL. */
const char *oq_plan_input_dim_name(const oq_plan *p, size_t i, size_t j);

/* Change the observer (NULL to remove) for later runs. */
void oq_plan_set_observer(oq_plan *p, oq_tensor_observer fn, void *user);
int oq_plan_threads(const oq_plan *p);

/* Run the plan. inputs[i] matches oq_plan_input_name(p, i); dtypes must match the
 * declared ones and fixed dims must match. outputs[i] receives newly allocated owned
 * tensors (release them with oq_rt_tensor_release). n_outputs may be smaller than
 * oq_plan_n_outputs (the rest are computed but not returned). */
oq_status oq_plan_run(oq_plan *p, const oq_rt_tensor *inputs, size_t n_inputs,
                      oq_rt_tensor *outputs, size_t n_outputs, oq_diag *d);

/* For an observer: end the current oq_plan_run once the node being observed is done (its
 * remaining outputs are still observed). The run then returns OQ_OK without outputs
 * (outputs[] are left empty). For tools that need a prefix of the graph. */
void oq_plan_stop(oq_plan *p);

/* Bytes of intermediate buffers the memory plan needs: after a run, the peak of the
 * last run; before any run, the compile-time estimate (0 when shapes are dynamic). */
int64_t oq_plan_peak_bytes(const oq_plan *p);
/* Sum of all intermediate tensor sizes of the last run (what no reuse would need). */
int64_t oq_plan_total_bytes(const oq_plan *p);

/* Is there a kernel for (domain, op_type) at this opset (any dtype)? For tools. */
bool oq_exec_supports(const char *domain, const char *op_type, int64_t opset);

/* ---- services for graph passes (src/exec/eval.c) ---------------------------------- */

/* Evaluate one node (without subgraphs) on the given tensors with the kernel a plan
 * would choose, through the same prepare/infer/run sequence, so the result is what
 * a plan computes. in[i] is NULL for an omitted input; n_in and n_out must equal the
 * node's counts. max_bytes >= 0 refuses (OQ_ERR_UNSUPPORTED, before allocating) any
 * named output larger than that. out[] receive owned tensors (release them). */
oq_status oq_exec_eval_node(const oq_model *model, const oq_node *node,
                            const oq_rt_tensor *const *in, size_t n_in, int64_t max_bytes,
                            oq_rt_tensor *out, size_t n_out, oq_diag *d);

/* rank reported for a value whose rank is not known at compile time */
#define OQ_EXEC_UNKNOWN_RANK ((size_t)-1)

/* Called once per value of the main graph the compiled plan knows (graph inputs,
 * initializers, Constant and node outputs): dtype, and rank/dims as inferred at compile
 * time (rank OQ_EXEC_UNKNOWN_RANK when unknown; dims < 0 are unknown). `data` is the
 * constant data for initializers and Constant outputs, else NULL. */
typedef void (*oq_shape_observer)(const oq_value *v, int32_t dtype, size_t rank,
                                  const int64_t *dims, const void *data, void *user);

/* Compile model->graph (symbolic and unknown dims of the graph inputs are unknown) and
 * report every value's compile-time dtype and shape through fn. When the graph does
 * not compile as a whole (an operator without a kernel, ...), inference goes node by
 * node in list order instead: a node without a kernel, with subgraphs, or whose
 * inference fails gets no report, nor do the values computed from it; *complete (may
 * be NULL) tells whether the whole graph compiled. Fails only on out-of-memory. */
oq_status oq_exec_infer_shapes(oq_model *model, oq_shape_observer fn, void *user, bool *complete,
                               oq_diag *d);

#ifdef __cplusplus
}
#endif
#endif
