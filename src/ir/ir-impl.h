/* Private helpers shared by src/ir and src/io. */
#ifndef ONNXQ_IR_IMPL_H
#define ONNXQ_IR_IMPL_H
#include "onnxq/ir.h"
#include "ir/arena.h"

/* Value table: name -> value, per graph scope. */
oq_value_table *oq_vt_new(oq_arena *a);
oq_value *oq_vt_get(const oq_value_table *t, const char *name);
int oq_vt_put(oq_value_table *t, oq_value *v);   /* 0 ok, -1 OOM */
void oq_vt_del(oq_value_table *t, const char *name);
/* Iterate: returns the i-th slot's value or NULL (empty slot); count = capacity. */
size_t oq_vt_capacity(const oq_value_table *t);
oq_value *oq_vt_slot(const oq_value_table *t, size_t i);

oq_graph *oq_graph_new_in(oq_model *m, oq_graph *parent, oq_node *owner);
/* Find or create the value named `name` visible from g; when it does not exist
 * anywhere, an undefined value is created in g. */
oq_value *oq_graph_resolve(oq_graph *g, const char *name);

int oq_value_add_use(oq_value *v, oq_node *n, size_t index);
void oq_value_remove_use(oq_value *v, oq_node *n, size_t index);

/* Array append helpers on the arena. Return 0 on success. */
int oq_push_ptr(oq_arena *a, void ***arr, size_t *count, void *item);
#define OQ_PUSH(a, arr, count, item) oq_push_ptr((a), (void ***)(arr), (count), (item))

/* How the reader serves a model it created (ARCHITECTURE.md, Layering: ir/ never calls
 * io/). model->io, when set, points to the reader's per-model state, whose first member is
 * an oq_model_io: the IR maps lazily loaded external data and releases the reader's
 * mappings through these callbacks. A model without io (oq_model_new) has neither. */
typedef struct oq_model_io_ops {
    /* Map t's external data and set t->view (t belongs to m). */
    oq_status (*map_external)(oq_model *m, oq_tensor *t, oq_diag *d);
    /* Called by oq_model_free before the arena goes: unmap files, free buffers. */
    void (*release)(oq_model *m);
    /* Streaming output (oq_model_stream_begin): write a new initializer's bytes to the
     * output's data file now and make *out a tensor that only refers to them; *out stays
     * NULL when the model is not streaming or the tensor is under the size threshold. */
    oq_status (*stream_tensor)(oq_model *m, const char *name, int32_t dtype, const int64_t *dims, size_t rank,
                               const void *data, int64_t nbytes, oq_tensor **out, oq_diag *d);
    /* Give back the pages t's data occupies in a mapped file (oq_tensor_release). */
    void (*release_tensor)(oq_model *m, oq_tensor *t);
} oq_model_io_ops;

typedef struct oq_model_io {
    const oq_model_io_ops *ops;
    int hold;    /* oq_model_stream_hold: new initializers stay in the model while > 0 */
} oq_model_io;

#endif
