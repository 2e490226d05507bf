/* onnxq executor — the private kernel interface.
 *
 * A kernel is one row of a table: (domain, op type, opset range, accepted dtypes) and
 * three hooks. Each operator family lives in one file under src/exec/kernels/ and
 * exports one table (see OQ_KERNEL_FAMILIES below); the registry picks, per node, the
 * row whose key matches the node's domain, op type and opset and whose type check
 * accepts the input dtypes. Rows are tried in table order, so list specialised rows
 * first.
 *
 * Life of a node:
 *   compile: prepare(k, in)            once; parse attributes into k->state. Inputs
 *                                      that are constants (initializers, Constant
 *                                      outputs) have data; others have data == NULL.
 *            infer(k, in, out)         with what is known at compile time: set every
 *                                      output's dtype (always) and dims (when
 *                                      possible; call oq_k_defer() otherwise).
 *   run:     infer(k, in, out)         again, now with every input's data and shape
 *                                      (shapes may change from run to run);
 *            [outputs are allocated by the executor from the memory plan]
 *            run(k, in, out)           compute. Must not keep pointers to in/out data.
 *   free:    release(k->state)
 *
 * Operators whose output shapes are only known after computing (If, Loop, ...) may do
 * the work in infer at run time, keep the result in k->state and copy it out in run.
 *
 * Conventions:
 *  - n_in is the node's input count; in[i] is NULL for an omitted optional input, and
 *    in[] has OQ_K_IN_PAD more NULL entries past n_in, so optional trailing inputs can
 *    be tested as in[i] without checking n_in (for i < n_in + OQ_K_IN_PAD). The
 *    executor checks that the first `min_inputs` inputs are present. out has n_out
 *    entries (the node's output count); omitted optional outputs still get storage
 *    and may be computed or left alone.
 *  - Errors: return oq_k_error(k, code, fmt, ...) which records a diagnostic naming
 *    the model file, node and op type. Never print, exit or abort.
 *  - Threads: use oq_k_parallel_for() over independent output ranges only; the result
 *    must be bit-identical for any thread count (no split reductions). A parallel-for
 *    called from inside a range runs serially on the calling thread.
 *  - Scratch: oq_k_scratch() gives temporary memory shared by all nodes of the plan;
 *    it is valid until the hook that asked for it returns (infer and run do not share
 *    contents).
 */
#ifndef ONNXQ_EXEC_KERNEL_H
#define ONNXQ_EXEC_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnxq/exec.h"
#include "onnxq/ir.h"

/* NULL entries after the last input in the in[] array given to kernels */
#define OQ_K_IN_PAD 16

/* rank of a tensor whose shape is not known at compile time */
#define OQ_RT_UNKNOWN_RANK ((size_t)-1)

/* dtype bit for kernel type masks */
#define OQ_T(n) (UINT64_C(1) << OQ_DTYPE_##n)
#define OQ_T_FLOATS (OQ_T(FLOAT) | OQ_T(DOUBLE) | OQ_T(FLOAT16))
#define OQ_T_SINTS (OQ_T(INT8) | OQ_T(INT16) | OQ_T(INT32) | OQ_T(INT64))
#define OQ_T_UINTS (OQ_T(UINT8) | OQ_T(UINT16) | OQ_T(UINT32) | OQ_T(UINT64))
#define OQ_T_INTS (OQ_T_SINTS | OQ_T_UINTS)
#define OQ_T_NUMERIC (OQ_T_FLOATS | OQ_T_INTS)
#define OQ_T_ALL (OQ_T_NUMERIC | OQ_T(BOOL) | OQ_T(BFLOAT16))

typedef struct oq_pool oq_pool;
typedef struct oq_kernel oq_kernel;

/* An elementwise function the executor may ask a kernel to apply to its float output 0
 * as soon as parts of it are final (fused elementwise chains, src/exec/fuse.c):
 * fn(ctx, x, n, channel) replaces x[0 .. n) -- n consecutive elements of one channel
 * (axis 1) -- by the chain's result, element by element. */
typedef struct oq_k_post {
    void (*fn)(const void *ctx, float *x, int64_t n, int64_t channel);
    const void *ctx;
} oq_k_post;

/* Per-node context handed to every hook. */
typedef struct oq_kctx {
    const oq_node *node;
    const oq_kernel *kernel;
    int64_t opset;           /* opset of the node's domain in the model */
    void *state;             /* the node's private state (set by prepare) */
    bool compile_time;       /* infer called at compile time: data/dims may be unknown */
    bool deferred;           /* set by oq_k_defer() */
    /* owned by the executor */
    oq_pool *pool;
    oq_diag *diag;
    const char *file;        /* model path for messages */
    void *scratch;           /* per-plan scratch buffer (oq_k_scratch) */
    size_t scratch_size;
    void *wide;              /* per-plan buffer of oq_k_run_widened (beside scratch, which the */
    size_t wide_size;        /* widened kernel may use itself) */
    /* implicit inputs: values defined outside the node's subgraphs that they read
       (If/Loop/Scan). Set at compile time (compiled dtypes/shapes) and at run time. */
    size_t n_implicit;
    const oq_value *const *implicit_values;
    const oq_rt_tensor *const *implicit;
    /* run only, may be NULL: apply post->fn to every element of output 0 once it is
       final, and set post_done (else the executor applies it after run) */
    const oq_k_post *post;
    bool post_done;
    /* the plan the node belongs to (NULL in oq_exec_eval_node): subplans of If/Loop/Scan
       take its observers at run time */
    const oq_plan *plan;
    /* OQ_K_ORT_*: how onnxruntime's optimized CPU graph computes this node's float
       arithmetic, set before prepare when the plan runs an integer target (plan.c
       oq_k_ort_hints), so the target's float ops round as onnxruntime's do; 0 otherwise */
    uint32_t ort;
} oq_kctx;

/* oq_kctx.ort flags (docs/run.md "Float operations under an integer target"). */
#define OQ_K_ORT_DW_NCHWC 1u    /* Conv: a depthwise convolution onnxruntime runs with its
                                 * NCHWc kernel: per output acc = +0, acc = fma(w, x, acc)
                                 * for every tap inside the input in (kh, kw) order, then
                                 * acc + bias */
#define OQ_K_ORT_DW_M1 4u       /* Conv: a float depthwise convolution onnxruntime runs with
                                 * its Conv kernel (not NCHWc): MLAS' one-row SGEMM on x86
                                 * with AVX, conv.c dw_m1_generic */
#define OQ_K_ORT_GAP 8u          /* GlobalAveragePool (float): onnxruntime's sums: MLAS'
                                 * global pooling kernel (four running sums), or with
                                 * OQ_K_ORT_GAP_NCHWC (an input onnxruntime keeps NCHWc)
                                 * and C a multiple of the block, one sum in order; pool.c */
#define OQ_K_ORT_GAP_NCHWC 16u
#define OQ_K_ORT_CONV_NCHWC 32u  /* Conv with one group, 2-D: onnxruntime's NCHWc kernel
                                 * (block 8, AVX2 with FMA): per output a sum of partial
                                 * sums, each from +0 by fused multiply-adds (one per input
                                 * channel below a block; per 128 channels for a 1x1 kernel
                                 * without padding; else per block of channels, over
                                 * (kh, kw, c)), then + bias; conv.c conv_ort_nchwc */
#define OQ_K_ORT_LOGISTIC 2u    /* Sigmoid (float): onnxruntime's MLAS logistic (its FMA3 /
                                 * AVX-512 kernels): a rational function of x clamped to
                                 * [-18, 18], oq_k_ort_logistic */

/* onnxruntime's logistic on x86 with FMA (MLAS MlasLogisticKernelFma3, the coefficients of
 * logistic.cpp): v = clamp(x, -18, 18), v2 = v * v, p = v * (((a9 v2 + a7) v2 + a5) v2 +
 * a3) v2 + a1), q = ((((b10 v2 + b8) v2 + b6) v2 + b4) v2 + b2) v2 + b0, each "u v2 + c"
 * one fused multiply-add, then p / q + 0.5 clamped to [0, 1]. y may be x. */
void oq_k_ort_logistic(const float *x, float *y, int64_t n);

/* oq_exec_eval_node as a plan compiled for arithmetic `arith` runs the node (its
 * OQ_K_ORT_* flags): the tables of a QDQ group under an integer target */
oq_status oq_exec_eval_node_arith(const oq_model *model, const oq_node *node,
                                  const oq_rt_tensor *const *in, size_t n_in, int64_t max_bytes,
                                  oq_rt_tensor *out, size_t n_out, oq_diag *d, oq_arith arith);
/* the OQ_K_ORT_* flags a plan of arithmetic `arith` gives node n (plan.c) */
uint32_t oq_k_ort_hints(oq_arith arith, const oq_node *n);

typedef oq_status (*oq_kernel_prepare_fn)(oq_kctx *k, const oq_rt_tensor *const *in,
                                          size_t n_in);
typedef oq_status (*oq_kernel_infer_fn)(oq_kctx *k, const oq_rt_tensor *const *in,
                                        size_t n_in, oq_rt_tensor *out, size_t n_out);
typedef oq_status (*oq_kernel_run_fn)(oq_kctx *k, const oq_rt_tensor *const *in,
                                      size_t n_in, oq_rt_tensor *out, size_t n_out);
typedef bool (*oq_kernel_type_fn)(const oq_kctx *k, const oq_rt_tensor *const *in,
                                  size_t n_in);

struct oq_kernel {
    const char *domain;          /* "" = the default ONNX domain */
    const char *op_type;
    int since, until;            /* opset range, inclusive; until 0 = no upper bound */
    int type_input;              /* which input `types` constrains (usually 0) */
    uint64_t types;              /* OQ_T(...) bits accepted for that input; 0 = any */
    oq_kernel_type_fn type_ok;   /* optional finer check (may be NULL) */
    oq_kernel_prepare_fn prepare;/* optional */
    oq_kernel_infer_fn infer;    /* required */
    oq_kernel_run_fn run;        /* required */
    void (*release)(void *state);/* optional; frees k->state */
    int min_inputs;              /* inputs that must be present (0 = none checked) */
};

/* Row helpers: OQ_KERNEL("Relu", 6, 0, OQ_T_FLOATS, prepare, infer, run) */
#define OQ_KERNEL(op, since, until, types, prep, inf, rn) \
    { "", (op), (since), (until), 0, (types), NULL, (prep), (inf), (rn), NULL, 1 }

/* ---- the tables: one per family file (src/exec/kernels/<family>.c) ---------------- */
#define OQ_KERNEL_FAMILIES(X) \
    X(elementwise)            \
    X(shape_ops)              \
    X(gemm)                   \
    X(conv)                   \
    X(pool)                   \
    X(norm)                   \
    X(reduce)                 \
    X(quant_ops)              \
    X(index_ops)              \
    X(loss)                   \
    X(rnn)                    \
    X(training)               \
    X(signal)                 \
    X(algorithms)             \
    X(sample)                 \
    X(control_flow)           \
    X(contrib)                \
    X(qlinear)                \
    X(attention)

#define OQ_X(fam)                                  \
    extern const oq_kernel oq_kernels_##fam[];     \
    extern const size_t oq_kernels_##fam##_count;
OQ_KERNEL_FAMILIES(OQ_X)
#undef OQ_X

/* A family's table, at the end of its file:
 *   const oq_kernel oq_kernels_conv[] = { ...rows... };
 *   OQ_KERNEL_TABLE_END(conv); */
#define OQ_KERNEL_TABLE_END(fam) \
    const size_t oq_kernels_##fam##_count = sizeof(oq_kernels_##fam) / sizeof(oq_kernel)

/* ---- helpers for kernels (src/exec/kutil.c) --------------------------------------- */

/* Record an error naming the file, node and op; returns code. */
oq_status oq_k_error(const oq_kctx *k, oq_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Mark the outputs' shapes as not known yet (compile time only); returns OQ_OK.
 * Output dtypes must be set before. At run time this is an internal error. */
oq_status oq_k_defer(oq_kctx *k, oq_rt_tensor *out, size_t n_out);
/* True when every present input (non-NULL) has a known shape. */
bool oq_k_shapes_known(const oq_rt_tensor *const *in, size_t n_in);
/* The infer of a kernel whose first output is shaped and typed like input 0 (every output
 * typed like it; the others' dims are the kernel's to set). */
oq_status oq_k_infer_like_input0(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, oq_rt_tensor *out,
                                 size_t n_out);
/* True when every present input among the first n has data (always at run time). */
bool oq_k_data_known(const oq_rt_tensor *const *in, size_t n);

/* Set an output's dtype and dims (rank <= OQ_RT_MAX_RANK, checked). */
oq_status oq_k_set_out(const oq_kctx *k, oq_rt_tensor *out, int32_t dtype,
                       const int64_t *dims, size_t rank);

/* Multidirectional (numpy) broadcast of n shapes into out; error if incompatible. */
oq_status oq_k_broadcast(const oq_kctx *k, const oq_rt_tensor *const *in, size_t n,
                         int64_t *dims, size_t *rank);
/* Element strides of t broadcast to (dims, rank): 0 on broadcast axes. */
void oq_k_bcast_strides(const oq_rt_tensor *t, const int64_t *dims, size_t rank,
                        int64_t *strides);

/* Run fn over out (dims set, data allocated) as the broadcast of in[0..n), n <= 4:
 * fn(state, out_row, in_rows, inc, count) where inc[i] is 1 when input i advances
 * along the row and 0 when it is broadcast. Rows run in parallel. */
typedef void (*oq_row_fn)(const void *state, void *out, const void *const *in,
                          const int64_t *inc, int64_t count);
void oq_k_bcast_apply(const oq_kctx *k, const oq_rt_tensor *const *in, size_t n,
                      oq_rt_tensor *out, oq_row_fn fn, const void *state);

/* Normalise an axis in [-rank, rank) (or [-rank-1, rank] when `insert`); -1 if bad. */
int64_t oq_k_axis(int64_t axis, size_t rank);

/* Read an integer tensor (int32/int64) element as int64. */
int64_t oq_k_get_int(const oq_rt_tensor *t, int64_t i);
/* Read a numeric element as double (any numeric dtype, float16 included). */
double oq_k_get_f64(const oq_rt_tensor *t, int64_t i);
/* Store a double into a numeric element (C conversion for ints: caller saturates). */
void oq_k_set_f64(oq_rt_tensor *t, int64_t i, double v);
/* Byte size of one element (0 for 4-bit and string types). */
size_t oq_k_elsize(int32_t dtype);

/* Step the row-major index idx over dims[0..n) (last axis fastest) to the next one, keeping
 * *off = sum idx[i] * str[i]; after the last index it is back to all zeros. */
static inline void oq_k_index_next(int64_t *idx, const int64_t *dims, const int64_t *str, size_t n, int64_t *off)
{
    for (size_t a = n; a-- > 0;) {
        idx[a]++;
        *off += str[a];
        if (idx[a] < dims[a])
            return;
        *off -= str[a] * idx[a];
        idx[a] = 0;
    }
}

/* Temporary memory for the current run call (grows as needed, kept by the plan). */
void *oq_k_scratch(oq_kctx *k, size_t bytes);

/* The arithmetic the plan runs (oq_plan_options.arith; reference outside a plan): for the
 * integer ops whose result the target's runtime computes differently (MatMulInteger). */
oq_arith oq_k_arith(const oq_kctx *k);

/* Threads: run fn(arg, begin, end, worker) over [0, n) split into contiguous
 * ranges of at least `grain` items (possibly several per thread). worker is the index
 * of the thread running the range, in [0, oq_k_threads(k)); a thread runs one range at
 * a time, so per-worker scratch indexed by it is safe. */
typedef void (*oq_range_fn)(void *arg, int64_t begin, int64_t end, int worker);
void oq_k_parallel_for(const oq_kctx *k, int64_t n, int64_t grain, oq_range_fn fn, void *arg);
int oq_k_threads(const oq_kctx *k);

/* True when the CPU (and OS) support AVX2: kernels may then call functions compiled
 * with __attribute__((target("avx2"))) (GCC/Clang on x86-64 only; false elsewhere). */
bool oq_k_cpu_avx2(void);

/* The channel block of onnxruntime's NCHWc float kernels on this CPU (MLAS
 * MlasNchwcGetBlockSize): 16 with AVX-512F, 8 with AVX2 and FMA, 0 elsewhere (no NCHWc
 * graph). ONNXQ_HOST_CPU=avx2 gives 8, as for onnxruntime on an emulated Haswell. */
int oq_k_ort_nchwc_block(void);
/* onnxruntime's x86 MLAS runs one-row SGEMMs with MlasSgemmKernelM1Avx (CPUs with AVX;
 * OQ_K_ORT_DW_M1) */
bool oq_k_ort_sgemm_m1(void);

/* QuantizeLinear / DequantizeLinear row functions (src/exec/kernels/quant_ops.c): the
 * instruction set is chosen once per process ("avx512", "avx2" or "generic";
 * ONNXQ_QUANT_ISA=NAME restricts it). For tests: force one (false when this CPU lacks
 * it), and the name of the one in use. All compute the same numbers. */
bool oq_k_quant_set_isa(const char *name);
/* One per-tensor row of DequantizeLinear / QuantizeLinear (8- or 16-bit integers), with
 * the row functions the two kernels use: the same numbers. */
void oq_k_dq_row(const void *x, int32_t dt, int64_t n, int32_t zp, float s, float *out);
void oq_k_q_row(const float *x, int64_t n, float s, int32_t zp, int32_t dt, void *out);
const char *oq_k_quant_isa(void);

/* A float kernel on float16 data: the float16 inputs widened to float32 (exactly), fn run
 * on them with float32 outputs of the shapes in out[], each float32 output rounded once to
 * float16 into out[] (the float16 outputs; others are copied as they are). What
 * onnxruntime's CPU provider does for an op without a float16 kernel (its
 * InsertCastTransformer). For kernels whose float code reads and writes float only. */
oq_status oq_k_run_widened(oq_kctx *k, oq_kernel_run_fn fn, const oq_rt_tensor *const *in,
                           size_t n_in, oq_rt_tensor *out, size_t n_out);

/* ---- math shared by kernel families (src/exec/kernels/gemm.c) -------------------- */

/* C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C (row-major, leading dimensions in
 * elements; beta == 0 ignores C's old contents, NaN included). Parallel over column
 * panels or rows of C; every element is summed in the same k order by the same
 * operations whatever the thread count. OQ_ERR_NOMEM when a work buffer cannot be had
 * (C is then incomplete). */
oq_status oq_k_sgemm(const oq_kctx *k, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                float beta, float *C, int64_t ldc);

/* The same GEMM with more control: B either row-major (B, ldb) or produced panel by
 * panel by `pack` (columns n0 .. n0+nv-1 of B as a K x OQ_SGEMM_NR row-major block,
 * zero-padded past nv; e.g. im2col on the fly), alpha taken as 1, and C either
 * bias[i] + acc (bias != NULL), acc (beta 0), C + acc (beta 1) or beta * C + acc. */
#define OQ_SGEMM_NR 16
typedef struct oq_sgemm_ex oq_sgemm_ex;
struct oq_sgemm_ex {
    int64_t M, N, K;
    const float *A;
    int64_t lda;
    const float *B;
    int64_t ldb;
    void (*pack)(const void *ctx, int64_t n0, int64_t nv, float *dst);
    const void *pack_ctx;
    float *C;
    int64_t ldc;
    float beta;
    const float *bias;
    const oq_k_post *post;   /* may be NULL: applied to each row piece of C once final, */
    int64_t post_row0;       /* with channel post_row0 + row */
    const float *A_packed;   /* may be NULL: A as oq_k_sgemm_pack_a made it (A, lda unused) */
    /* B read in place (a stride-1 convolution on a zero-padded input): may be NULL.
     * N = b_rows * b_row_w; column c of row r (C column r * b_row_w + c) takes element k
     * from B[r * b_ldrow + c + b_off[k]] (only those elements are read). */
    const int64_t *b_off;
    int64_t b_rows, b_row_w, b_ldrow;
};
oq_status oq_k_sgemm_ex(const oq_kctx *k, const oq_sgemm_ex *g);

/* A packed ahead of time for oq_sgemm_ex.A_packed (constant weights: once per plan, not
 * on every call): the number of floats it takes, and the packing. The layout depends on
 * the instruction set the GEMM uses in this process. */
size_t oq_k_sgemm_packed_a_floats(int64_t M, int64_t K);
void oq_k_sgemm_pack_a(int64_t M, int64_t K, const float *A, int64_t lda, float *dst);
/* Rows of C per micro-kernel block in this process: 4 portable code, 6 AVX2, 12 AVX-512 */
int oq_k_sgemm_mr(void);

/* A buffer of `bytes` bytes derived from the constant data src (kind: what make does, the
 * caller's tag; a, b: its sizes), made by make(src, a, b, dst) once per plan and shared by
 * every node that asks with the same (src, kind, a, b): the 40 Gemms of an unrolled LSTM
 * read 4 weights. Call from prepare; valid until the plan is freed. NULL outside a plan,
 * when out of memory, or when the plan's shared buffers would pass OQ_K_SHARED_MAX_BYTES
 * (the caller then does the work per run). */
#define OQ_K_SHARED_MAX_BYTES ((size_t)512 << 20)
const void *oq_k_shared(oq_kctx *k, const void *src, uint32_t kind, int64_t a, int64_t b, size_t bytes,
                        void (*make)(const void *src, int64_t a, int64_t b, void *dst));

/* ---- control flow (src/exec/plan.c) ----------------------------------------------- */

/* Compile a subgraph of k's node into a plan that reads the node's implicit inputs
 * and shares its thread pool. input_hints[i] (may be NULL) gives the dtype of subgraph
 * input i when the subgraph does not declare it. Call from prepare. */
oq_status oq_k_subplan_compile(oq_kctx *k, oq_graph *g, const oq_rt_tensor *const *input_hints,
                               size_t n_hints, oq_plan **out);
/* Run it with the node's current implicit inputs; outputs are owned (release them). */
oq_status oq_k_subplan_run(oq_kctx *k, oq_plan *sp, const oq_rt_tensor *inputs,
                           size_t n_inputs, oq_rt_tensor *outputs, size_t n_outputs);
/* Compile-time dtype/shape of a subplan output (rank OQ_RT_UNKNOWN_RANK if unknown). */
const oq_rt_tensor *oq_k_subplan_output(const oq_plan *sp, size_t i);
size_t oq_k_subplan_n_inputs(const oq_plan *sp);
size_t oq_k_subplan_n_outputs(const oq_plan *sp);

/* ---- registry (src/exec/registry.c) ----------------------------------------------- */

/* Why a lookup failed. */
typedef enum oq_kernel_miss {
    OQ_KMISS_NONE = 0,
    OQ_KMISS_OP,        /* no kernel for this (domain, op type) at all */
    OQ_KMISS_OPSET,     /* op known, but not at this opset */
    OQ_KMISS_DTYPE      /* op and opset known, input dtypes not accepted */
} oq_kernel_miss;

const oq_kernel *oq_kernel_find(const oq_kctx *k, const char *domain, const char *op_type,
                                int64_t opset, const oq_rt_tensor *const *in, size_t n_in,
                                oq_kernel_miss *why);

#endif
