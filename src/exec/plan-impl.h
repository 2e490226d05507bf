/* Private to src/exec: the plan's data structures, shared by plan.c (compile, queries)
 * and run.c (memory and execution). */
#ifndef ONNXQ_PLAN_IMPL_H
#define ONNXQ_PLAN_IMPL_H
#include "exec/exec-impl.h"

#define NO_SLOT ((size_t)-1)

typedef enum slot_kind { SLOT_CONST = 0, SLOT_INPUT = 1, SLOT_NODE = 2, SLOT_OUTER = 3 } slot_kind;

typedef struct buffer {
    void *data;
    size_t cap;
    bool in_use;
} buffer;

typedef struct slot {
    oq_value *value;
    slot_kind kind;
    oq_rt_tensor t;           /* current tensor (for CONST: borrowed from the model) */
    oq_rt_tensor compiled;    /* compile-time dtype/shape */
    size_t last_use;          /* last step that reads it; NO_SLOT: never read */
    bool is_output;
    size_t buf;               /* buffer index while alive, NO_SLOT otherwise */
    size_t prev_buf;          /* buffer it had in the previous run (reused first) */
    void *const_mem;          /* owned memory for Constant attributes (value_floats...)
                                 and for the outputs of folded nodes */
    bool folded;              /* CONST computed at compile time by a node (fold_step) */
} slot;

/* An output of a node evaluated at compile time (plan.c fold_step): the observer is
 * still called with it on every run. */
typedef struct folded_out {
    const oq_node *node;
    size_t out_index;
    size_t slot;
} folded_out;

typedef struct ew_group ew_group; /* fuse.c */

/* A buffer made from a constant once per plan and shared by the nodes that ask for it
 * (oq_k_shared) */
typedef struct shared_buf {
    const void *src;
    uint32_t kind;
    int64_t a, b;
    void *data;
} shared_buf;

typedef struct step {
    oq_node *node;
    oq_kctx k;
    size_t n_in, n_out;
    size_t *in_slots;         /* NO_SLOT for omitted inputs */
    size_t *out_slots;
    const oq_rt_tensor **in;
    oq_rt_tensor *out;
    size_t *tmp_buf;          /* run time: buffers of discarded outputs */
    /* implicit inputs: outer-scope values read by the node's subgraphs */
    size_t n_imp;
    oq_value **imp_vals;
    size_t *imp_slots;
    const oq_rt_tensor **imp;
    ew_group *group;          /* elementwise chain fused after this step (fuse.c), or NULL */
} step;

struct oq_plan {
    oq_model *model;
    oq_graph *graph;
    const char *file;
    size_t n_slots;
    slot *slots;
    size_t n_steps;
    step *steps;
    size_t n_inputs, n_outputs;
    size_t *inputs, *outputs;   /* slot indices */
    oq_pool *pool;
    int threads;
    bool stop;                      /* oq_plan_stop: end the run after this node */
    double *prof_ns;                /* oq_plan_set_profile: time per step over the runs */
    int64_t prof_runs;
    oq_tensor_observer on_tensor;
    oq_input_observer on_input;
    void *user;
    size_t n_bufs, cap_bufs;
    buffer *bufs;
    int64_t peak_estimate, total_bytes;
    void *scratch;
    size_t scratch_size;
    void *wide;                /* oq_kctx.wide, lent to each step like scratch */
    size_t wide_size;
    bool owns_pool;
    size_t n_outer;            /* subplans: slots bound from the enclosing plan */
    size_t *outer;             /* their slots */
    size_t *outer_src;         /* their index in the enclosing kernel's implicit inputs */
    struct oq_qgroups *qgroups; /* fused QDQ groups (arith != reference), exec/qgroup.h */
    oq_arith arith;            /* the arithmetic it was compiled for (oq_k_arith) */
    /* constant folding at compile time (plan.c fold_step) */
    bool fold;                 /* evaluate nodes whose inputs are all constant */
    int64_t fold_budget;       /* bytes the folded outputs may hold in all */
    int64_t folded_bytes;
    size_t n_folded, cap_folded;
    folded_out *folded;        /* in plan order */
    size_t n_shared, cap_shared;
    shared_buf *shared;        /* oq_k_shared */
    size_t shared_bytes;
};

/* diagnostic naming the model file, node and op */
oq_status oq_plan_node_error(const oq_plan *p, oq_diag *d, const oq_node *n, oq_status code,
                             const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
/* Elementwise chains (fuse.c): find them after compiling (steps[h].group). At run time,
 * once step si's outputs are allocated: begin returns the post function to hand to
 * its kernel when this run can fuse (no observer, shapes fit), else NULL; after the
 * kernel ran, end (only after a non-NULL begin) runs the chain over the output unless
 * the kernel applied it, and hands the output buffer to the chain's last value:
 * *last is the chain's last step (skip to it), *final_slot that value. */
oq_status oq_plan_fuse_chains(oq_plan *p);
const oq_k_post *oq_plan_group_begin(oq_plan *p, size_t si);
void oq_plan_group_end(oq_plan *p, size_t si, bool applied, size_t *last, size_t *final_slot);
void oq_plan_group_free(ew_group *g);

/* bytes of t's data, -1 when its shape is not known */
int64_t oq_plan_tensor_bytes(const oq_rt_tensor *t);
/* What a value's declared type says of its tensor: dtype (0 if not given), rank and dims
 * (-1 for a symbolic or missing dim); rank OQ_RT_UNKNOWN_RANK when the type has no
 * shape, one of more than OQ_RT_MAX_RANK dims or is not a tensor type. No data. */
void oq_plan_tensor_from_type(oq_rt_tensor *rt, const oq_type *ty);
/* peak of intermediate buffers with compile-time shapes (0 when shapes are dynamic) */
int64_t oq_plan_estimate_peak(oq_plan *p);

#endif
