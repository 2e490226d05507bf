/* IR: build graphs through the API, edit them, and check use-def after every edit
 * against a from-scratch recomputation; subgraph scoping; the structural checker on
 * good and broken graphs; toposort; dtype helpers; float16/bfloat16 conversions
 * against hand-computed bit patterns. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir-impl.h"
#include "onnxq/onnxq.h"
#include "testutil.h"

/* ------------------------------------------------------------ helpers */

static oq_model *new_model(void)
{
    oq_model *m = oq_model_new();
    cr_assert_not_null(m);
    oq_model_set_opset(m, "", 17);
    return m;
}

static oq_value *val(oq_graph *g, const char *name)
{
    oq_value *v = oq_graph_new_value(g, name);
    cr_assert_not_null(v, "new value \"%s\"", name);
    return v;
}

static oq_node *node1(oq_graph *g, const char *op, const char *name, oq_value *in, oq_value *out)
{
    oq_node *n = oq_node_new(g, op, NULL, name, &in, 1, &out, 1);
    cr_assert_not_null(n);
    return n;
}

static oq_node *node2(oq_graph *g, const char *op, const char *name, oq_value *a, oq_value *b,
                      oq_value *out)
{
    oq_value *in[2] = {a, b};
    oq_node *n = oq_node_new(g, op, NULL, name, in, 2, &out, 1);
    cr_assert_not_null(n);
    return n;
}

static oq_type *f32(oq_model *m)
{
    int64_t d = 4;
    return oq_type_tensor(m, OQ_DTYPE_FLOAT, &d, NULL, 1);
}

/* Does v's use list hold exactly (node, index) `count` times? */
static size_t use_count(const oq_value *v, const oq_node *n, size_t index)
{
    size_t c = 0;
    for (size_t i = 0; i < v->n_uses; i++)
        if (v->uses[i].node == n && v->uses[i].index == index)
            c++;
    return c;
}

/* Recompute every use list of every scope below g from the node inputs and compare
 * it, as a multiset, with what the editing functions maintained. Also: every node
 * output's producer back-pointer. */
typedef struct {
    const oq_graph *scopes[64];
    size_t n;
} scopes_t;

static void collect_scopes(const oq_graph *g, scopes_t *s)
{
    cr_assert(s->n < 64);
    s->scopes[s->n++] = g;
    for (const oq_node *n = g->first; n; n = n->next) {
        oq_graph *subs[8];
        size_t k = oq_node_subgraphs(n, subs, 8);
        for (size_t i = 0; i < k && i < 8; i++)
            collect_scopes(subs[i], s);
    }
}

static void assert_usedef(const oq_graph *root)
{
    scopes_t s = {{0}, 0};
    collect_scopes(root, &s);
    for (size_t a = 0; a < s.n; a++) {
        const oq_value_table *vt = s.scopes[a]->values;
        for (size_t slot = 0; slot < oq_vt_capacity(vt); slot++) {
            const oq_value *v = oq_vt_slot(vt, slot);
            if (!v)
                continue;
            size_t expect = 0;
            for (size_t b = 0; b < s.n; b++)
                for (const oq_node *n = s.scopes[b]->first; n; n = n->next)
                    for (size_t k = 0; k < n->n_inputs; k++)
                        if (n->inputs[k] == v) {
                            expect++;
                            cr_assert_eq(use_count(v, n, k), 1,
                                         "value \"%s\": use (%s, %zu) recorded %zu times",
                                         v->name, n->name ? n->name : "?", k, use_count(v, n, k));
                        }
            cr_assert_eq(v->n_uses, expect, "value \"%s\" has %zu uses, expected %zu", v->name,
                         v->n_uses, expect);
            if (v->kind == OQ_VALUE_NODE) {
                cr_assert_not_null(v->producer, "value \"%s\"", v->name);
                cr_assert(v->producer->attached, "value \"%s\": producer detached", v->name);
                cr_assert_eq(v->producer->outputs[v->producer_index], v);
            }
        }
    }
}

/* Node order as a string "a,b,c". */
static const char *order(const oq_graph *g)
{
    static char buf[512];
    size_t used = 0;
    buf[0] = 0;
    for (const oq_node *n = g->first; n; n = n->next) {
        int k = snprintf(buf + used, sizeof buf - used, "%s%s", used ? "," : "", n->name);
        used += (size_t)k;
    }
    /* the back links must agree with the forward ones */
    size_t cnt = 0;
    for (const oq_node *n = g->last; n; n = n->prev)
        cnt++;
    cr_assert_eq(cnt, g->n_nodes, "prev links give %zu nodes, n_nodes is %zu", cnt, g->n_nodes);
    return buf;
}

/* The checker's errors as one-line strings; returns the number of errors. */
static size_t check_lines(const oq_model *m, char lines[][512], size_t max)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_status st = oq_model_check(m, &d);
    size_t k = 0;
    for (size_t i = 0; i < d.count; i++) {
        if (d.entries[i].severity != OQ_SEV_ERROR)
            continue;
        if (k < max) {
            oq_diag_format(&d.entries[i], lines[k], 512);
            cr_assert_null(strchr(lines[k], '\n'), "diag spans lines: %s", lines[k]);
        }
        k++;
    }
    cr_assert_eq(st == OQ_OK, k == 0, "status %d but %zu errors", (int)st, k);
    oq_diag_free(&d);
    return k;
}

static void assert_check_ok(const oq_model *m)
{
    char lines[4][512];
    size_t k = check_lines(m, lines, 4);
    cr_assert_eq(k, 0, "checker rejected a good model: %s", k ? lines[0] : "");
}

/* The checker must fail with exactly one error line equal to `want`. */
static void assert_check_error(const oq_model *m, const char *want)
{
    char lines[4][512];
    size_t k = check_lines(m, lines, 4);
    cr_assert_eq(k, 1, "expected one error \"%s\", got %zu (first: %s)", want, k,
                 k ? lines[0] : "-");
    cr_assert_str_eq(lines[0], want);
}

/* x -> Relu(r) -> a -> Neg(n) -> b ; Add(s)(a, b) -> c ; output c */
typedef struct {
    oq_model *m;
    oq_graph *g;
    oq_value *x, *a, *b, *c;
    oq_node *relu, *neg, *add;
} chain;

static chain make_chain(void)
{
    chain ch;
    ch.m = new_model();
    ch.g = ch.m->graph;
    ch.x = val(ch.g, "x");
    ch.a = val(ch.g, "a");
    ch.b = val(ch.g, "b");
    ch.c = val(ch.g, "c");
    cr_assert_not_null(oq_graph_add_input(ch.g, ch.x, f32(ch.m)));
    ch.relu = node1(ch.g, "Relu", "r", ch.x, ch.a);
    ch.neg = node1(ch.g, "Neg", "n", ch.a, ch.b);
    ch.add = node2(ch.g, "Add", "s", ch.a, ch.b, ch.c);
    oq_graph_append(ch.g, ch.relu);
    oq_graph_append(ch.g, ch.neg);
    oq_graph_append(ch.g, ch.add);
    cr_assert_not_null(oq_graph_add_output(ch.g, ch.c, f32(ch.m)));
    return ch;
}

/* ------------------------------------------------------------ building and editing */

Test(build, chain_use_def_is_exact)
{
    chain ch = make_chain();
    cr_assert_str_eq(order(ch.g), "r,n,s");
    cr_assert_eq(ch.g->n_nodes, 3);
    cr_assert_eq(ch.x->kind, OQ_VALUE_INPUT);
    cr_assert(ch.x->is_graph_input);
    cr_assert_eq(ch.a->kind, OQ_VALUE_NODE);
    cr_assert_eq(ch.a->producer, ch.relu);
    cr_assert_eq(ch.b->producer, ch.neg);
    cr_assert_eq(ch.c->producer, ch.add);
    cr_assert_eq(ch.c->producer_index, 0);
    cr_assert_eq(ch.x->n_uses, 1);
    cr_assert_eq(use_count(ch.x, ch.relu, 0), 1);
    cr_assert_eq(ch.a->n_uses, 2);
    cr_assert_eq(use_count(ch.a, ch.neg, 0), 1);
    cr_assert_eq(use_count(ch.a, ch.add, 0), 1);
    cr_assert_eq(ch.b->n_uses, 1);
    cr_assert_eq(use_count(ch.b, ch.add, 1), 1);
    cr_assert_eq(ch.c->n_uses, 0);
    cr_assert(oq_value_is_graph_output(ch.c));
    cr_assert(!oq_value_is_graph_output(ch.a));
    cr_assert_eq(oq_graph_node_index(ch.g, ch.add), 2);
    cr_assert_eq(oq_graph_find_value(ch.g, "b"), ch.b);
    cr_assert_null(oq_graph_find_value(ch.g, "nope"));
    /* names are SSA per scope: a second "a" is refused */
    cr_assert_null(oq_graph_new_value(ch.g, "a"));
    assert_usedef(ch.g);
    assert_check_ok(ch.m);
    oq_model_free(ch.m);
}

Test(build, unique_names_and_fresh_values)
{
    oq_model *m = new_model();
    oq_graph *g = m->graph;
    val(g, "t");
    val(g, "t_1");
    oq_value *v = oq_graph_new_value(g, NULL);
    cr_assert_not_null(v);
    cr_assert_str_eq(v->name, "t_2");
    char *u = oq_graph_unique_name(g, "w");
    cr_assert_str_eq(u, "w");
    cr_assert_eq(oq_value_rename(v, "t"), OQ_ERR_USAGE);
    cr_assert_eq(oq_value_rename(v, "renamed"), OQ_OK);
    cr_assert_eq(oq_graph_find_local(g, "renamed"), v);
    cr_assert_null(oq_graph_find_local(g, "t_2"));
    oq_model_free(m);
}

Test(edit, insert_after_and_reroute_uses)
{
    chain ch = make_chain();
    /* put an Identity after Relu and make every consumer of a read its output */
    oq_value *a2 = val(ch.g, "a2");
    oq_node *id = oq_node_new(ch.g, "Identity", NULL, "id", NULL, 0, &a2, 1);
    cr_assert_not_null(id);
    oq_graph_insert_after(ch.g, ch.relu, id);
    cr_assert_str_eq(order(ch.g), "r,id,n,s");
    assert_usedef(ch.g);
    oq_value_replace_all_uses(ch.a, a2);
    cr_assert_eq(ch.a->n_uses, 0);
    cr_assert_eq(a2->n_uses, 2);
    cr_assert_eq(use_count(a2, ch.neg, 0), 1);
    cr_assert_eq(use_count(a2, ch.add, 0), 1);
    assert_usedef(ch.g);
    cr_assert_eq(oq_node_set_input(id, 0, ch.a), OQ_OK);
    cr_assert_eq(id->n_inputs, 1);
    cr_assert_eq(ch.a->n_uses, 1);
    cr_assert_eq(use_count(ch.a, id, 0), 1);
    assert_usedef(ch.g);
    assert_check_ok(ch.m);
    oq_model_free(ch.m);
}

Test(edit, insert_before_head_and_tail)
{
    chain ch = make_chain();
    oq_value *x2 = val(ch.g, "x2");
    oq_node *pre = node1(ch.g, "Abs", "pre", ch.x, x2);
    oq_graph_insert_before(ch.g, ch.relu, pre);
    cr_assert_str_eq(order(ch.g), "pre,r,n,s");
    cr_assert_eq(ch.g->first, pre);
    cr_assert_eq(use_count(ch.x, pre, 0), 1);
    cr_assert_eq(ch.x->n_uses, 2);
    oq_value *d = val(ch.g, "d");
    oq_node *post = node1(ch.g, "Sqrt", "post", ch.c, d);
    oq_graph_insert_after(ch.g, ch.add, post); /* after the last node = append */
    cr_assert_str_eq(order(ch.g), "pre,r,n,s,post");
    cr_assert_eq(ch.g->last, post);
    oq_value *e = val(ch.g, "e");
    oq_node *mid = node1(ch.g, "Exp", "mid", x2, e);
    oq_graph_insert_before(ch.g, ch.add, mid);
    cr_assert_str_eq(order(ch.g), "pre,r,n,mid,s,post");
    cr_assert_eq(ch.g->n_nodes, 6);
    assert_usedef(ch.g);
    assert_check_ok(ch.m);
    oq_model_free(ch.m);
}

Test(edit, remove_node_drops_uses_and_undefines_outputs)
{
    chain ch = make_chain();
    oq_node_remove(ch.neg);
    cr_assert_str_eq(order(ch.g), "r,s");
    cr_assert_eq(ch.g->n_nodes, 2);
    cr_assert(!ch.neg->attached);
    cr_assert_eq(ch.a->n_uses, 1);
    cr_assert_eq(use_count(ch.a, ch.add, 0), 1);
    cr_assert_eq(ch.b->kind, OQ_VALUE_UNDEFINED);
    cr_assert_null(ch.b->producer);
    cr_assert_eq(ch.b->n_uses, 1); /* Add still reads it: now dangling */
    assert_usedef(ch.g);
    assert_check_error(ch.m, "node \"s\" (Add): input \"b\" is not produced by any node, graph input or initializer");
    /* removing twice is harmless; removing the head and the tail keeps the links */
    oq_node_remove(ch.neg);
    oq_node_remove(ch.relu);
    cr_assert_str_eq(order(ch.g), "s");
    cr_assert_eq(ch.g->first, ch.add);
    cr_assert_eq(ch.g->last, ch.add);
    oq_node_remove(ch.add);
    cr_assert_null(ch.g->first);
    cr_assert_null(ch.g->last);
    cr_assert_eq(ch.g->n_nodes, 0);
    cr_assert_eq(ch.x->n_uses, 0);
    cr_assert_eq(ch.a->n_uses, 0);
    cr_assert_eq(ch.b->n_uses, 0);
    assert_usedef(ch.g);
    /* and re-appending brings the uses back */
    oq_graph_append(ch.g, ch.relu);
    cr_assert_eq(ch.a->producer, ch.relu);
    cr_assert_eq(use_count(ch.x, ch.relu, 0), 1);
    assert_usedef(ch.g);
    oq_model_free(ch.m);
}

Test(edit, set_input_with_repeated_value_and_growth)
{
    chain ch = make_chain();
    /* Add(a, a): two uses from the same node, different slots */
    cr_assert_eq(oq_node_set_input(ch.add, 1, ch.a), OQ_OK);
    cr_assert_eq(ch.a->n_uses, 3);
    cr_assert_eq(use_count(ch.a, ch.add, 0), 1);
    cr_assert_eq(use_count(ch.a, ch.add, 1), 1);
    cr_assert_eq(ch.b->n_uses, 0);
    assert_usedef(ch.g);
    /* now replace slot 1 only */
    cr_assert_eq(oq_node_set_input(ch.add, 1, ch.x), OQ_OK);
    cr_assert_eq(use_count(ch.a, ch.add, 0), 1);
    cr_assert_eq(use_count(ch.a, ch.add, 1), 0);
    cr_assert_eq(use_count(ch.x, ch.add, 1), 1);
    assert_usedef(ch.g);
    /* grow to slot 3: slot 2 stays an omitted optional input */
    cr_assert_eq(oq_node_set_input(ch.add, 3, ch.b), OQ_OK);
    cr_assert_eq(ch.add->n_inputs, 4);
    cr_assert_null(ch.add->inputs[2]);
    cr_assert_eq(use_count(ch.b, ch.add, 3), 1);
    assert_usedef(ch.g);
    cr_assert_eq(oq_node_add_input(ch.add, ch.c), OQ_OK); /* its own output: a cycle */
    cr_assert_eq(use_count(ch.c, ch.add, 4), 1);
    assert_usedef(ch.g);
    /* clearing an input */
    cr_assert_eq(oq_node_set_input(ch.add, 4, NULL), OQ_OK);
    cr_assert_eq(ch.c->n_uses, 0);
    assert_usedef(ch.g);
    /* a detached node records no uses until it is inserted */
    oq_value *q = val(ch.g, "q");
    oq_node *det = oq_node_new(ch.g, "Neg", NULL, "det", NULL, 0, &q, 1);
    cr_assert_eq(oq_node_set_input(det, 0, ch.x), OQ_OK);
    cr_assert_eq(use_count(ch.x, det, 0), 0);
    oq_graph_append(ch.g, det);
    cr_assert_eq(use_count(ch.x, det, 0), 1);
    assert_usedef(ch.g);
    assert_check_ok(ch.m);
    oq_model_free(ch.m);
}

Test(edit, replace_all_uses_keeps_graph_outputs)
{
    chain ch = make_chain();
    oq_value *c2 = val(ch.g, "c2");
    oq_node *id = node1(ch.g, "Identity", "id", ch.c, c2);
    oq_graph_append(ch.g, id);
    oq_value_replace_all_uses(ch.b, ch.x);
    cr_assert_eq(ch.b->n_uses, 0);
    cr_assert_eq(ch.add->inputs[1], ch.x);
    cr_assert_eq(use_count(ch.x, ch.add, 1), 1);
    /* replacing c's uses does not rename the graph output c */
    oq_value_replace_all_uses(ch.c, ch.a);
    cr_assert_eq(id->inputs[0], ch.a);
    cr_assert(oq_value_is_graph_output(ch.c));
    assert_usedef(ch.g);
    oq_graph_replace_output(ch.g, ch.c, c2);
    cr_assert_eq(ch.g->outputs[0]->value, c2);
    cr_assert(!oq_value_is_graph_output(ch.c));
    /* from == to is a no-op */
    size_t before = ch.a->n_uses;
    oq_value_replace_all_uses(ch.a, ch.a);
    cr_assert_eq(ch.a->n_uses, before);
    assert_usedef(ch.g);
    assert_check_ok(ch.m);
    oq_model_free(ch.m);
}

Test(edit, set_output_moves_the_producer)
{
    chain ch = make_chain();
    oq_value *b2 = val(ch.g, "b2");
    cr_assert_eq(oq_node_set_output(ch.neg, 0, b2), OQ_OK);
    cr_assert_eq(b2->producer, ch.neg);
    cr_assert_eq(b2->kind, OQ_VALUE_NODE);
    cr_assert_eq(ch.b->kind, OQ_VALUE_UNDEFINED);
    cr_assert_null(ch.b->producer);
    assert_check_error(ch.m, "node \"s\" (Add): input \"b\" is not produced by any node, graph input or initializer");
    oq_value_replace_all_uses(ch.b, b2);
    assert_usedef(ch.g);
    assert_check_ok(ch.m);
    oq_model_free(ch.m);
}

Test(edit, initializers)
{
    oq_model *m = new_model();
    oq_graph *g = m->graph;
    float w[6] = {1, 2, 3, 4, 5, 6};
    int64_t dims[2] = {2, 3};
    oq_value *wv = oq_graph_add_initializer(g, "w", OQ_DTYPE_FLOAT, dims, 2, w, sizeof w);
    cr_assert_not_null(wv);
    cr_assert_str_eq(wv->name, "w");
    cr_assert_eq(wv->kind, OQ_VALUE_INITIALIZER);
    cr_assert_eq(g->n_initializers, 1);
    cr_assert_eq(g->initializers[0], wv->initializer);
    cr_assert_str_eq(wv->initializer->name, "w");
    cr_assert_not_null(wv->type);
    cr_assert_eq(wv->type->elem_type, OQ_DTYPE_FLOAT);
    cr_assert_eq(wv->type->shape->rank, 2);
    cr_assert_eq(wv->type->shape->dims[1].value, 3);
    cr_assert_eq(oq_value_const_tensor(wv), wv->initializer);
    oq_diag d;
    oq_diag_init(&d);
    const float *p = oq_tensor_data(wv->initializer, &d);
    cr_assert_not_null(p);
    cr_assert_eq(memcmp(p, w, sizeof w), 0);
    cr_assert_eq(wv->initializer->view_nbytes, (int64_t)sizeof w);
    /* a second one with the same base name gets a fresh name */
    oq_value *w2 = oq_graph_add_initializer(g, "w", OQ_DTYPE_FLOAT, dims, 2, w, sizeof w);
    cr_assert_str_eq(w2->name, "w_1");
    cr_assert_eq(g->n_initializers, 2);
    /* wrong byte count is refused */
    cr_assert_null(oq_graph_add_initializer(g, "bad", OQ_DTYPE_FLOAT, dims, 2, w, 20));
    /* replacing the tensor keeps one entry */
    int64_t one = 1;
    float z = 7;
    oq_tensor *t = oq_tensor_new(m, "ignored", OQ_DTYPE_FLOAT, &one, 1, &z, 4);
    cr_assert_eq(oq_graph_set_initializer(g, wv, t), OQ_OK);
    cr_assert_eq(g->n_initializers, 2);
    cr_assert_eq(g->initializers[0], t);
    cr_assert_str_eq(t->name, "w");
    /* used by a node, then removed: the node's input dangles */
    oq_value *y = val(g, "y");
    oq_node *n = node1(g, "Neg", "neg", wv, y);
    oq_graph_append(g, n);
    oq_graph_add_output(g, y, NULL);
    assert_check_ok(m);
    oq_graph_remove_initializer(g, wv);
    cr_assert_eq(g->n_initializers, 1);
    cr_assert_eq(g->initializers[0], w2->initializer);
    cr_assert_eq(wv->kind, OQ_VALUE_UNDEFINED);
    assert_check_error(m, "node \"neg\" (Neg): input \"w\" is not produced by any node, graph input or initializer");
    /* an input with a default: removing the initializer keeps it an input */
    oq_graph_add_input(g, w2, NULL);
    cr_assert_eq(w2->kind, OQ_VALUE_INPUT);
    cr_assert_not_null(w2->initializer);
    oq_graph_remove_initializer(g, w2);
    cr_assert_eq(w2->kind, OQ_VALUE_INPUT);
    cr_assert_eq(g->n_initializers, 0);
    oq_diag_free(&d);
    oq_model_free(m);
}

Test(edit, attributes)
{
    chain ch = make_chain();
    oq_node *n = ch.relu;
    cr_assert_not_null(oq_node_set_attr_int(n, "axis", 3));
    cr_assert_not_null(oq_node_set_attr_float(n, "alpha", 0.25f));
    cr_assert_not_null(oq_node_set_attr_string(n, "mode", "constant"));
    int64_t ints[3] = {1, -2, 3};
    cr_assert_not_null(oq_node_set_attr_ints(n, "pads", ints, 3));
    float fl[2] = {0.5f, 1.5f};
    cr_assert_not_null(oq_node_set_attr_floats(n, "scales", fl, 2));
    cr_assert_eq(n->n_attrs, 5);
    cr_assert_eq(oq_node_attr_int(n, "axis", -1), 3);
    cr_assert_eq(oq_node_attr_int(n, "missing", -7), -7);
    cr_assert_eq(oq_node_attr_float(n, "alpha", 0), 0.25f);
    cr_assert_str_eq(oq_node_attr_string(n, "mode", "x"), "constant");
    cr_assert_str_eq(oq_node_attr_string(n, "nope", "dflt"), "dflt");
    const int64_t *iv;
    cr_assert_eq(oq_node_attr_ints(n, "pads", &iv), 3);
    cr_assert_eq(iv[1], -2);
    cr_assert_eq(oq_node_attr_ints(n, "axis", &iv), -1); /* wrong type */
    cr_assert_null(iv);
    /* same name replaces, in place */
    oq_node_set_attr_int(n, "axis", -1);
    cr_assert_eq(n->n_attrs, 5);
    cr_assert_str_eq(n->attrs[0]->name, "axis");
    cr_assert_eq(oq_node_attr_int(n, "axis", 0), -1);
    cr_assert(oq_node_remove_attr(n, "alpha"));
    cr_assert(!oq_node_remove_attr(n, "alpha"));
    cr_assert_eq(n->n_attrs, 4);
    cr_assert_null(oq_node_attr(n, "alpha"));
    int64_t two = 2;
    int32_t tv[2] = {5, 6};
    oq_tensor *t = oq_tensor_new(ch.m, "v", OQ_DTYPE_INT32, &two, 1, tv, sizeof tv);
    cr_assert_not_null(oq_node_set_attr_tensor(n, "value", t));
    assert_check_ok(ch.m);
    oq_model_free(ch.m);
}

/* ------------------------------------------------------------ subgraphs */

/* main: inputs cond, x; a = Relu(x); y = If(cond) { then: t = Neg(a); else: e = Abs(x) } */
typedef struct {
    chain ch;
    oq_value *cond, *y, *t, *e;
    oq_node *iff, *tneg, *eabs;
    oq_graph *then_g, *else_g;
} ifm;

static ifm make_if(void)
{
    ifm s;
    s.ch = make_chain();
    oq_graph *g = s.ch.g;
    s.cond = val(g, "cond");
    oq_graph_add_input(g, s.cond, NULL);
    s.y = val(g, "y");
    s.iff = oq_node_new(g, "If", NULL, "if", &s.cond, 1, &s.y, 1);
    s.then_g = tu_add_subgraph(s.iff, "then_branch");
    s.else_g = tu_add_subgraph(s.iff, "else_branch");
    s.t = val(s.then_g, "t");
    s.tneg = node1(s.then_g, "Neg", "tneg", s.ch.a, s.t); /* reads an outer value */
    oq_graph_append(s.then_g, s.tneg);
    oq_graph_add_output(s.then_g, s.t, NULL);
    s.e = val(s.else_g, "e");
    s.eabs = node1(s.else_g, "Abs", "eabs", s.ch.x, s.e);
    oq_graph_append(s.else_g, s.eabs);
    oq_graph_add_output(s.else_g, s.e, NULL);
    oq_graph_insert_after(g, s.ch.relu, s.iff);
    oq_graph_add_output(g, s.y, NULL);
    return s;
}

Test(subgraph, outer_scope_lookup_and_uses)
{
    ifm s = make_if();
    cr_assert_str_eq(order(s.ch.g), "r,if,n,s");
    cr_assert_eq(s.then_g->parent, s.ch.g);
    cr_assert_eq(s.then_g->owner, s.iff);
    cr_assert_eq(oq_graph_find_value(s.then_g, "a"), s.ch.a);
    cr_assert_null(oq_graph_find_local(s.then_g, "a"));
    cr_assert_eq(oq_graph_find_local(s.then_g, "t"), s.t);
    cr_assert_null(oq_graph_find_value(s.ch.g, "t")); /* inner names do not leak out */
    cr_assert_null(oq_graph_find_value(s.else_g, "t")); /* nor into a sibling */
    cr_assert_eq(use_count(s.ch.a, s.tneg, 0), 1);
    cr_assert_eq(s.ch.a->n_uses, 3);
    oq_graph *subs[4];
    cr_assert_eq(oq_node_subgraphs(s.iff, subs, 4), 2);
    cr_assert_eq(subs[0], s.then_g);
    cr_assert_eq(subs[1], s.else_g);
    /* a fresh name avoids outer names too */
    char *u = oq_graph_unique_name(s.then_g, "a");
    cr_assert_str_eq(u, "a_1");
    assert_usedef(s.ch.g);
    assert_check_ok(s.ch.m);
    /* replace_all_uses reaches into subgraphs */
    oq_value_replace_all_uses(s.ch.a, s.ch.x);
    cr_assert_eq(s.tneg->inputs[0], s.ch.x);
    cr_assert_eq(use_count(s.ch.x, s.tneg, 0), 1);
    cr_assert_eq(s.ch.a->n_uses, 0);
    assert_usedef(s.ch.g);
    assert_check_ok(s.ch.m);
    oq_model_free(s.ch.m);
}

Test(subgraph, outer_graph_may_not_read_inner_values)
{
    ifm s = make_if();
    cr_assert_eq(oq_node_set_input(s.ch.add, 1, s.t), OQ_OK);
    assert_usedef(s.ch.g);
    assert_check_error(s.ch.m, "node \"s\" (Add): input \"t\" is a value of a subgraph of node \"if\" (If) and is not visible here");
    oq_model_free(s.ch.m);
}

Test(subgraph, sibling_branch_may_not_read_the_other)
{
    ifm s = make_if();
    cr_assert_eq(oq_node_set_input(s.eabs, 0, s.t), OQ_OK);
    assert_check_error(s.ch.m, "node \"eabs\" (Abs): input \"t\" is a value of a subgraph of node \"if\" (If) and is not visible here");
    oq_model_free(s.ch.m);
}

Test(subgraph, graph_output_of_inner_value)
{
    ifm s = make_if();
    oq_graph_add_output(s.ch.g, s.e, NULL);
    assert_check_error(s.ch.m, "graph output \"e\" is a value of another graph scope and is not visible here");
    oq_model_free(s.ch.m);
}

Test(subgraph, outer_value_produced_after_the_owner)
{
    ifm s = make_if();
    /* then-branch reads b, which Neg produces after the If node */
    cr_assert_eq(oq_node_set_input(s.tneg, 0, s.ch.b), OQ_OK);
    assert_check_error(s.ch.m, "node \"tneg\" (Neg): input \"b\" from an enclosing graph is produced after this subgraph's node");
    /* toposort sees the capture and moves If after Neg */
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_graph_toposort(s.ch.g, &d), OQ_OK);
    cr_assert_str_eq(order(s.ch.g), "r,n,if,s");
    assert_check_ok(s.ch.m);
    oq_diag_free(&d);
    oq_model_free(s.ch.m);
}

Test(subgraph, inner_output_may_not_redefine_an_outer_name)
{
    ifm s = make_if();
    /* "a" is defined before the If node, so the subgraph may not define it again */
    oq_value *shadow = val(s.else_g, "a"); /* allowed by the builder: local scope only */
    cr_assert_neq(shadow, s.ch.a);
    cr_assert_eq(oq_graph_find_value(s.else_g, "a"), shadow);
    oq_node *k = node1(s.else_g, "Neg", "shadowing", s.e, shadow);
    oq_graph_append(s.else_g, k);
    assert_check_error(s.ch.m, "node \"shadowing\" (Neg): output \"a\" redefines a value of an enclosing graph (names must be unique across nested scopes)");
    oq_model_free(s.ch.m);
}

Test(subgraph, inner_output_may_reuse_a_name_defined_later_outside)
{
    /* as in the ONNX checker: "b" is produced after the If node, so it is not in
     * scope yet when the subgraph is checked */
    ifm s = make_if();
    oq_value *inner = val(s.else_g, "b");
    oq_node *k = node1(s.else_g, "Neg", "later", s.e, inner);
    oq_graph_append(s.else_g, k);
    assert_check_ok(s.ch.m);
    oq_model_free(s.ch.m);
}

Test(subgraph, misparented_subgraph)
{
    ifm s = make_if();
    s.else_g->parent = NULL;
    assert_check_error(s.ch.m, "node \"if\" (If): subgraph of attribute \"else_branch\" is not scoped under the graph of its node");
    oq_model_free(s.ch.m);
}

/* ------------------------------------------------------------ checker: broken graphs */

Test(check, ssa_violation)
{
    chain ch = make_chain();
    /* a second node also writing a */
    oq_node *dup = node1(ch.g, "Abs", "dup", ch.x, ch.a);
    oq_graph_append(ch.g, dup);
    cr_assert_eq(ch.a->producer, ch.relu); /* the first producer stays */
    assert_check_error(ch.m, "node \"dup\" (Abs): output \"a\" is produced more than once");
    oq_node_remove(dup);
    assert_check_ok(ch.m);
    /* writing a graph input */
    oq_node *w = node1(ch.g, "Abs", "wx", ch.c, ch.x);
    oq_graph_append(ch.g, w);
    assert_check_error(ch.m, "node \"wx\" (Abs): output \"x\" is also a graph input or initializer");
    oq_model_free(ch.m);
}

Test(check, use_before_def)
{
    chain ch = make_chain();
    oq_node_remove(ch.relu);
    oq_graph_append(ch.g, ch.relu); /* Relu moves to the end */
    cr_assert_str_eq(order(ch.g), "n,s,r");
    char lines[4][512];
    size_t k = check_lines(ch.m, lines, 4);
    cr_assert_eq(k, 2);
    cr_assert_str_eq(lines[0], "node \"n\" (Neg): input \"a\" is used before the node that produces it (graph is not in topological order)");
    cr_assert_str_eq(lines[1], "node \"s\" (Add): input \"a\" is used before the node that produces it (graph is not in topological order)");
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_graph_toposort(ch.g, &d), OQ_OK);
    cr_assert_eq(d.count, 0);
    cr_assert_str_eq(order(ch.g), "r,n,s");
    assert_check_ok(ch.m);
    assert_usedef(ch.g);
    oq_diag_free(&d);
    oq_model_free(ch.m);
}

Test(check, undefined_input_and_output)
{
    chain ch = make_chain();
    oq_value *ghost = val(ch.g, "ghost");
    oq_node_set_input(ch.neg, 0, ghost);
    assert_check_error(ch.m, "node \"n\" (Neg): input \"ghost\" is not produced by any node, graph input or initializer");
    oq_node_set_input(ch.neg, 0, ch.a);
    oq_graph_add_output(ch.g, ghost, NULL);
    assert_check_error(ch.m, "graph output \"ghost\" is not produced by any node, graph input or initializer");
    oq_model_free(ch.m);
}

Test(check, missing_opset)
{
    chain ch = make_chain();
    oq_value *z = val(ch.g, "z");
    oq_node *n = oq_node_new(ch.g, "Gelu", "com.example", "custom", &ch.c, 1, &z, 1);
    oq_graph_append(ch.g, n);
    assert_check_error(ch.m, "node \"custom\" (Gelu): domain \"com.example\" is used but no opset is imported for it");
    oq_model_set_opset(ch.m, "com.example", 1);
    assert_check_ok(ch.m);
    cr_assert_eq(oq_node_opset(n), 1);
    cr_assert_eq(oq_node_opset(ch.relu), 17);
    oq_model_free(ch.m);

    /* no opset_import at all */
    oq_model *m = oq_model_new();
    oq_value *x = val(m->graph, "x"), *y = val(m->graph, "y");
    oq_graph_add_input(m->graph, x, NULL);
    oq_graph_append(m->graph, node1(m->graph, "Relu", "r", x, y));
    oq_graph_add_output(m->graph, y, NULL);
    char lines[4][512];
    size_t k = check_lines(m, lines, 4);
    cr_assert_eq(k, 2);
    cr_assert_str_eq(lines[0], "model imports no operator set (opset_import is empty)");
    cr_assert_str_eq(lines[1], "node \"r\" (Relu): domain \"ai.onnx\" is used but no opset is imported for it");
    oq_model_free(m);
}

Test(check, bad_attributes)
{
    chain ch = make_chain();
    int64_t ints[2] = {1, 2};
    oq_attr *a = oq_node_set_attr_ints(ch.relu, "perm", ints, 2);
    assert_check_ok(ch.m);
    /* declared ints, but a graph is set as well */
    a->g = oq_graph_new_in(ch.m, ch.g, ch.relu);
    assert_check_error(ch.m, "node \"r\" (Relu): attribute \"perm\" is declared ints but holds a graph value");
    a->g = NULL;
    /* declared int, holds a float */
    oq_attr *b = oq_node_set_attr_int(ch.neg, "axis", 1);
    b->has_f = true;
    assert_check_error(ch.m, "node \"n\" (Neg): attribute \"axis\" is declared int but holds a float value");
    b->has_f = false;
    /* unknown type */
    b->type = 99;
    assert_check_error(ch.m, "node \"n\" (Neg): attribute \"axis\" has unknown type 99");
    b->type = OQ_ATTR_INT;
    /* tensor type without a tensor */
    oq_attr *t = oq_node_set_attr_tensor(ch.add, "value", NULL);
    assert_check_error(ch.m, "node \"s\" (Add): attribute \"value\" of type tensor has no value");
    /* a tensor whose raw_data does not match its dims */
    int64_t three = 3;
    float v[3] = {1, 2, 3};
    t->t = oq_tensor_new(ch.m, "k", OQ_DTYPE_FLOAT, &three, 1, v, sizeof v);
    assert_check_ok(ch.m);
    t->t->raw.len = 8;
    assert_check_error(ch.m, "node \"s\" (Add): attribute \"value\" tensor \"k\": raw_data has 8 bytes, float32[3] needs 12");
    t->t->raw.len = 12;
    t->t->dims[0] = -3;
    assert_check_error(ch.m, "node \"s\" (Add): attribute \"value\" tensor \"k\": dimension 0 is negative (-3)");
    t->t->dims[0] = 3;
    /* untyped (IR v1 style) attribute holding two kinds */
    oq_attr *u = oq_node_set_attr_int(ch.add, "mixed", 1);
    u->has_type = false;
    u->type = 0;
    assert_check_ok(ch.m);
    u->has_s = true;
    assert_check_error(ch.m, "node \"s\" (Add): attribute \"mixed\" holds values of more than one type (int and string)");
    oq_model_free(ch.m);
}

Test(check, invalid_initializer_and_subgraph_tensor)
{
    ifm s = make_if();
    int64_t d2[2] = {2, 2};
    uint8_t q[2] = {0x21, 0x43}; /* four int4 values packed two per byte */
    oq_value *w = oq_graph_add_initializer(s.ch.g, "q4", OQ_DTYPE_INT4, d2, 2, q, 2);
    cr_assert_not_null(w);
    assert_check_ok(s.ch.m);
    w->initializer->raw.len = 4; /* one byte per element: wrong for int4 */
    assert_check_error(s.ch.m, "initializer \"q4\": raw_data has 4 bytes, int4[4] needs 2");
    w->initializer->raw.len = 2;
    /* a Constant inside a subgraph with an overflowing shape */
    oq_value *k = val(s.then_g, "k");
    oq_node *cst = oq_node_new(s.then_g, "Constant", NULL, "cst", NULL, 0, &k, 1);
    int64_t one = 1;
    float f = 1;
    oq_tensor *t = oq_tensor_new(s.ch.m, "kt", OQ_DTYPE_FLOAT, &one, 1, &f, 4);
    oq_node_set_attr_tensor(cst, "value", t);
    oq_graph_append(s.then_g, cst);
    assert_check_ok(s.ch.m);
    int64_t huge[2] = {INT64_MAX / 2, 4};
    t->dims = huge;
    t->rank = 2;
    assert_check_error(s.ch.m, "node \"cst\" (Constant): attribute \"value\" tensor \"kt\": element count overflows int64");
    oq_model_free(s.ch.m);
}

/* ------------------------------------------------------------ toposort */

static char *names_of_order(const oq_graph *g)
{
    return strdup(order(g));
}

Test(topo, keeps_a_valid_order)
{
    /* two independent chains interleaved in a valid but not "canonical" order */
    oq_model *m = new_model();
    oq_graph *g = m->graph;
    oq_value *x = val(g, "x");
    oq_graph_add_input(g, x, NULL);
    const char *nm[6] = {"b1", "a1", "b2", "a2", "a3", "b3"};
    oq_value *prev_a = x, *prev_b = x;
    for (int i = 0; i < 6; i++) {
        char vn[8];
        snprintf(vn, sizeof vn, "v%s", nm[i]);
        oq_value *o = val(g, vn);
        bool is_a = nm[i][0] == 'a';
        oq_node *n = node1(g, "Relu", nm[i], is_a ? prev_a : prev_b, o);
        oq_graph_append(g, n);
        if (is_a)
            prev_a = o;
        else
            prev_b = o;
    }
    char *before = names_of_order(g);
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_graph_toposort(g, &d), OQ_OK);
    cr_assert_str_eq(order(g), before);
    cr_assert_str_eq(order(g), "b1,a1,b2,a2,a3,b3");
    free(before);
    oq_diag_free(&d);
    oq_model_free(m);
}

Test(topo, sorts_a_shuffled_graph_stably)
{
    /* diamond plus a tail, appended in a scrambled order:
     *   p = Relu(x); q = Neg(p); r = Abs(p); s = Add(q, r); t = Exp(s); u = Sqrt(x)
     * appended as t, s, u, r, q, p. Stable Kahn over that list: ready nodes are u
     * (index 2) and p (index 5); u first, then p; then r (3) and q (4) become ready
     * -> r, q; then s, t. */
    oq_model *m = new_model();
    oq_graph *g = m->graph;
    oq_value *x = val(g, "x"), *p = val(g, "P"), *q = val(g, "Q"), *r = val(g, "R"),
             *s = val(g, "S"), *t = val(g, "T"), *u = val(g, "U");
    oq_graph_add_input(g, x, NULL);
    oq_node *np = node1(g, "Relu", "p", x, p);
    oq_node *nq = node1(g, "Neg", "q", p, q);
    oq_node *nr = node1(g, "Abs", "r", p, r);
    oq_node *ns = node2(g, "Add", "s", q, r, s);
    oq_node *nt = node1(g, "Exp", "t", s, t);
    oq_node *nu = node1(g, "Sqrt", "u", x, u);
    oq_node *shuffled[6] = {nt, ns, nu, nr, nq, np};
    for (int i = 0; i < 6; i++)
        oq_graph_append(g, shuffled[i]);
    oq_graph_add_output(g, t, NULL);
    oq_graph_add_output(g, u, NULL);
    cr_assert_neq(oq_model_check(m, NULL), OQ_OK);
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_graph_toposort(g, &d), OQ_OK);
    cr_assert_str_eq(order(g), "u,p,r,q,s,t");
    cr_assert_eq(g->first, nu);
    cr_assert_eq(g->last, nt);
    cr_assert_eq(g->n_nodes, 6);
    assert_usedef(g);
    assert_check_ok(m);
    /* sorting again changes nothing */
    cr_assert_eq(oq_graph_toposort(g, &d), OQ_OK);
    cr_assert_str_eq(order(g), "u,p,r,q,s,t");
    oq_diag_free(&d);
    oq_model_free(m);
}

Test(topo, reports_a_node_on_the_cycle)
{
    /* d0 = Relu(x) feeds nothing of the cycle; the cycle is c1 -> c2 -> c3 -> c1;
     * "down" reads the cycle but is not on it and comes first in the list. */
    oq_model *m = new_model();
    oq_graph *g = m->graph;
    oq_value *x = val(g, "x"), *v1 = val(g, "v1"), *v2 = val(g, "v2"), *v3 = val(g, "v3"),
             *dv = val(g, "dv"), *d0 = val(g, "d0");
    oq_graph_add_input(g, x, NULL);
    oq_graph_append(g, node1(g, "Sigmoid", "down", v3, dv));
    oq_graph_append(g, node1(g, "Relu", "first", x, d0));
    oq_graph_append(g, node2(g, "Add", "c1", v3, x, v1));
    oq_graph_append(g, node1(g, "Neg", "c2", v1, v2));
    oq_graph_append(g, node1(g, "Abs", "c3", v2, v3));
    char *before = names_of_order(g);
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_graph_toposort(g, &d), OQ_ERR_INVALID);
    cr_assert_str_eq(order(g), before); /* untouched */
    const oq_diag_entry *e = oq_diag_first_error(&d);
    cr_assert_not_null(e);
    cr_assert(strcmp(e->node, "c1") == 0 || strcmp(e->node, "c2") == 0 ||
              strcmp(e->node, "c3") == 0, "named node %s is not on the cycle", e->node);
    char line[512];
    oq_diag_format(e, line, sizeof line);
    cr_assert_null(strchr(line, '\n'));
    /* the path printed is the cycle in data-flow order, closed, whatever node it starts at */
    const char *expect[3] = {
        "\"c1\" -> \"c2\" -> \"c3\" -> \"c1\"",
        "\"c2\" -> \"c3\" -> \"c1\" -> \"c2\"",
        "\"c3\" -> \"c1\" -> \"c2\" -> \"c3\"",
    };
    bool found = false;
    for (int i = 0; i < 3; i++)
        found = found || strstr(line, expect[i]) != NULL;
    cr_assert(found, "cycle not described: %s", line);
    cr_assert(strstr(line, "(3 nodes on the cycle)"), "%s", line);
    free(before);
    oq_diag_free(&d);
    oq_model_free(m);
}

Test(topo, self_loop)
{
    oq_model *m = new_model();
    oq_graph *g = m->graph;
    oq_value *x = val(g, "x"), *y = val(g, "y");
    oq_graph_add_input(g, x, NULL);
    oq_graph_append(g, node1(g, "Relu", "ok", x, val(g, "z")));
    oq_graph_append(g, node2(g, "Add", "selfish", x, y, y));
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_graph_toposort(g, &d), OQ_ERR_INVALID);
    char line[512];
    oq_diag_format(oq_diag_first_error(&d), line, sizeof line);
    cr_assert_str_eq(line, "node \"selfish\" (Add): graph has a cycle: \"selfish\" -> \"selfish\" (1 node on the cycle)");
    oq_diag_free(&d);
    oq_model_free(m);
}

Test(topo, cycle_through_a_subgraph_capture)
{
    /* If's then-branch reads b; b = Neg(y) where y is the If's output: a cycle that only
     * exists through the capture. */
    ifm s = make_if();
    oq_node_set_input(s.tneg, 0, s.ch.b);
    oq_node_set_input(s.ch.neg, 0, s.y);
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_graph_toposort(s.ch.g, &d), OQ_ERR_INVALID);
    const oq_diag_entry *e = oq_diag_first_error(&d);
    cr_assert(strcmp(e->node, "if") == 0 || strcmp(e->node, "n") == 0, "%s", e->node);
    oq_diag_free(&d);
    oq_model_free(s.ch.m);
}

Test(topo, empty_and_single)
{
    oq_model *m = new_model();
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_graph_toposort(m->graph, &d), OQ_OK);
    oq_value *x = val(m->graph, "x");
    oq_graph_add_input(m->graph, x, NULL);
    oq_graph_append(m->graph, node1(m->graph, "Relu", "only", x, val(m->graph, "y")));
    cr_assert_eq(oq_graph_toposort(m->graph, &d), OQ_OK);
    cr_assert_str_eq(order(m->graph), "only");
    oq_diag_free(&d);
    oq_model_free(m);
}

Test(topo, large_reversed_chain)
{
    /* 20000 nodes appended in reverse: the sort must restore the chain (and be fast) */
    enum { N = 20000 };
    oq_model *m = new_model();
    oq_graph *g = m->graph;
    oq_value **v = malloc((N + 1) * sizeof *v);
    oq_node **n = malloc(N * sizeof *n);
    char nm[32];
    for (int i = 0; i <= N; i++) {
        snprintf(nm, sizeof nm, "v%d", i);
        v[i] = val(g, nm);
    }
    oq_graph_add_input(g, v[0], NULL);
    for (int i = 0; i < N; i++) {
        snprintf(nm, sizeof nm, "n%d", i);
        n[i] = node1(g, "Relu", nm, v[i], v[i + 1]);
    }
    for (int i = N - 1; i >= 0; i--)
        oq_graph_append(g, n[i]);
    oq_graph_add_output(g, v[N], NULL);
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_graph_toposort(g, &d), OQ_OK);
    int i = 0;
    for (oq_node *p = g->first; p; p = p->next, i++)
        cr_assert_eq(p, n[i], "position %d", i);
    cr_assert_eq(i, N);
    assert_check_ok(m);
    free(v);
    free(n);
    oq_diag_free(&d);
    oq_model_free(m);
}

/* ------------------------------------------------------------ dtype helpers */

Test(dtype, nbytes_and_packing)
{
    /* 4-bit types: two per byte, rounded up */
    int64_t n4[] = {0, 1, 2, 3, 7, 8, 1001};
    int64_t b4[] = {0, 1, 1, 2, 4, 4, 501};
    for (size_t i = 0; i < sizeof n4 / sizeof n4[0]; i++) {
        cr_assert_eq(oq_dtype_nbytes(OQ_DTYPE_INT4, n4[i]), b4[i], "int4 n=%lld", (long long)n4[i]);
        cr_assert_eq(oq_dtype_nbytes(OQ_DTYPE_UINT4, n4[i]), b4[i]);
    }
    cr_assert_eq(oq_dtype_nbytes(OQ_DTYPE_INT4, INT64_MAX), INT64_MAX / 2 + 1);
    cr_assert_eq(oq_dtype_nbytes(OQ_DTYPE_FLOAT, 3), 12);
    cr_assert_eq(oq_dtype_nbytes(OQ_DTYPE_BOOL, 3), 3);
    cr_assert_eq(oq_dtype_nbytes(OQ_DTYPE_FLOAT16, 3), 6);
    cr_assert_eq(oq_dtype_nbytes(OQ_DTYPE_FLOAT8E5M2, 5), 5);
    cr_assert_eq(oq_dtype_nbytes(OQ_DTYPE_COMPLEX128, 2), 32);
    cr_assert_eq(oq_dtype_nbytes(OQ_DTYPE_INT64, INT64_MAX / 8), INT64_MAX / 8 * 8);
    cr_assert_eq(oq_dtype_nbytes(OQ_DTYPE_INT64, INT64_MAX / 8 + 1), -1);
    cr_assert_eq(oq_dtype_nbytes(OQ_DTYPE_FLOAT, -1), -1);
    cr_assert_eq(oq_dtype_nbytes(OQ_DTYPE_STRING, 1), -1);
    cr_assert_eq(oq_dtype_nbytes(OQ_DTYPE_UNDEFINED, 1), -1);
    cr_assert_eq(oq_dtype_nbytes(99, 1), -1);
    cr_assert_eq(oq_dtype_bits(OQ_DTYPE_INT4), 4);
    cr_assert_eq(oq_dtype_bits(OQ_DTYPE_BFLOAT16), 16);
    cr_assert_eq(oq_dtype_bits(-3), 0);
}

Test(dtype, numel_overflow)
{
    cr_assert_eq(oq_dims_numel(NULL, 0), 1); /* scalar */
    int64_t a[] = {2, 3, 4};
    cr_assert_eq(oq_dims_numel(a, 3), 24);
    int64_t z[] = {2, 0, INT64_MAX};
    cr_assert_eq(oq_dims_numel(z, 3), 0);
    int64_t neg[] = {2, -1};
    cr_assert_eq(oq_dims_numel(neg, 2), -1);
    /* 3037000499^2 = 9223372030926249001 fits, 3037000500^2 does not */
    int64_t fit[] = {3037000499LL, 3037000499LL};
    cr_assert_eq(oq_dims_numel(fit, 2), 9223372030926249001LL);
    int64_t over[] = {3037000500LL, 3037000500LL};
    cr_assert_eq(oq_dims_numel(over, 2), -1);
    int64_t big[] = {INT64_MAX, 1};
    cr_assert_eq(oq_dims_numel(big, 2), INT64_MAX);
    int64_t big2[] = {INT64_MAX / 2 + 1, 2};
    cr_assert_eq(oq_dims_numel(big2, 2), -1);
    int64_t many[64];
    for (int i = 0; i < 64; i++)
        many[i] = 2;
    cr_assert_eq(oq_dims_numel(many, 62), (int64_t)1 << 62);
    cr_assert_eq(oq_dims_numel(many, 63), -1);
}

Test(dtype, names)
{
    cr_assert_str_eq(oq_dtype_name(OQ_DTYPE_FLOAT), "float32");
    cr_assert_str_eq(oq_dtype_name(OQ_DTYPE_INT4), "int4");
    cr_assert_str_eq(oq_dtype_name(77), "?");
    cr_assert_eq(oq_dtype_from_name("float"), OQ_DTYPE_FLOAT);
    cr_assert_eq(oq_dtype_from_name("float32"), OQ_DTYPE_FLOAT);
    cr_assert_eq(oq_dtype_from_name("half"), OQ_DTYPE_FLOAT16);
    cr_assert_eq(oq_dtype_from_name("uint4"), OQ_DTYPE_UINT4);
    cr_assert_eq(oq_dtype_from_name("float33"), OQ_DTYPE_UNDEFINED);
    cr_assert(oq_dtype_is_signed(OQ_DTYPE_INT4));
    cr_assert(!oq_dtype_is_signed(OQ_DTYPE_UINT4));
    cr_assert(oq_dtype_is_integer(OQ_DTYPE_UINT64));
    cr_assert(!oq_dtype_is_integer(OQ_DTYPE_BOOL));
    cr_assert(oq_dtype_is_float(OQ_DTYPE_FLOAT8E4M3FNUZ));
}

/* ------------------------------------------------------------ float16 / bfloat16 */

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

Test(half, float_to_half_bit_patterns)
{
    struct { float f; uint16_t h; } c[] = {
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {1.0f, 0x3C00},
        {-2.0f, 0xC000},
        {0.5f, 0x3800},
        {65504.0f, 0x7BFF},             /* largest finite */
        {65519.0f, 0x7BFF},             /* below the midpoint to 65536 */
        {65520.0f, 0x7C00},             /* midpoint: ties to even = infinity */
        {1.0e6f, 0x7C00},
        {-1.0e6f, 0xFC00},
        {0x1p-14f, 0x0400},             /* smallest normal */
        {0x1p-24f, 0x0001},             /* smallest subnormal */
        {0x1p-25f, 0x0000},             /* half of it: tie, rounds to even (0) */
        {0x1.8p-25f, 0x0001},           /* 0.75 of it: rounds up */
        {0x1.8p-24f, 0x0002},           /* 1.5 ulp: tie between 1 and 2 -> 2 */
        {0x1.4p-23f, 0x0002},           /* 2.5 ulp: tie between 2 and 3 -> 2 */
        {0x1.cp-23f, 0x0004},           /* 3.5 ulp: tie between 3 and 4 -> 4 */
        {0x1p-26f, 0x0000},
        {0x1.ff8p-15f, 0x03FF},         /* largest subnormal: 1023 * 2^-24 */
        {0x1.ffcp-15f, 0x0400},         /* 1023.5 ulp: tie, 1023 odd -> 1024 (normal) */
        {0x1.002p0f, 0x3C00},           /* 1 + 2^-11: tie -> even 0x3C00 */
        {0x1.006p0f, 0x3C02},           /* 1 + 3*2^-11: tie -> even 0x3C02 */
        {0x1.00200002p0f, 0x3C00},      /* not representable in float: == 1+2^-11 */
        {0x1.0020040p0f, 0x3C01},       /* just above the tie */
        {0.333333343f, 0x3555},
        {3.14159274f, 0x4248},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        cr_assert_eq(oq_float_to_half(c[i].f), c[i].h, "%a -> 0x%04x, expected 0x%04x", (double)c[i].f,
                     oq_float_to_half(c[i].f), c[i].h);
    cr_assert_eq(oq_float_to_half(INFINITY), 0x7C00);
    cr_assert_eq(oq_float_to_half(-INFINITY), 0xFC00);
    uint16_t n = oq_float_to_half(NAN);
    cr_assert_eq(n & 0x7C00, 0x7C00);
    cr_assert_neq(n & 0x03FF, 0, "NaN became infinity: 0x%04x", n);
    /* a signalling NaN whose payload sits only in the low mantissa bits stays a NaN */
    n = oq_float_to_half(bits_f(0xFF800001u));
    cr_assert_eq(n & 0xFC00, 0xFC00);
    cr_assert_neq(n & 0x03FF, 0);
}

Test(half, half_to_float_bit_patterns)
{
    cr_assert_eq(oq_half_to_float(0x3C00), 1.0f);
    cr_assert_eq(oq_half_to_float(0x0001), 0x1p-24f);
    cr_assert_eq(oq_half_to_float(0x03FF), 0x1.ff8p-15f);
    cr_assert_eq(oq_half_to_float(0x0400), 0x1p-14f);
    cr_assert_eq(oq_half_to_float(0x7BFF), 65504.0f);
    cr_assert_eq(oq_half_to_float(0x3555), 0.333251953125f);
    cr_assert_eq(oq_half_to_float(0xC000), -2.0f);
    cr_assert_eq(f_bits(oq_half_to_float(0x8000)), 0x80000000u);
    cr_assert_eq(f_bits(oq_half_to_float(0x8001)), f_bits(-0x1p-24f));
    cr_assert(isinf(oq_half_to_float(0x7C00)) && oq_half_to_float(0x7C00) > 0);
    cr_assert(isinf(oq_half_to_float(0xFC00)) && oq_half_to_float(0xFC00) < 0);
    cr_assert(isnan(oq_half_to_float(0x7E00)));
    cr_assert(isnan(oq_half_to_float(0x7C01)));
    cr_assert(isnan(oq_half_to_float(0xFFFF)));
}

Test(half, every_half_round_trips)
{
    for (uint32_t h = 0; h <= 0xFFFF; h++) {
        float f = oq_half_to_float((uint16_t)h);
        uint16_t back = oq_float_to_half(f);
        bool is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x03FF);
        if (is_nan) {
            cr_assert(isnan(f), "0x%04x", h);
            cr_assert_eq(back & 0x7C00, 0x7C00);
            cr_assert_neq(back & 0x03FF, 0);
            cr_assert_eq(back & 0x8000, h & 0x8000);
        } else {
            cr_assert_eq(back, h, "0x%04x -> %a -> 0x%04x", h, (double)f, back);
        }
    }
}

Test(half, bfloat16_bit_patterns)
{
    struct { uint32_t f; uint16_t b; } c[] = {
        {0x3F800000u, 0x3F80}, /* 1.0 */
        {0x40490FDBu, 0x4049}, /* pi: low half 0x0FDB < 0x8000 */
        {0x3F808000u, 0x3F80}, /* tie, 0x3F80 even: stays */
        {0x3F818000u, 0x3F82}, /* tie, 0x3F81 odd: up */
        {0x3F808001u, 0x3F81}, /* above the tie */
        {0x3F807FFFu, 0x3F80}, /* below the tie */
        {0xBF80FFFFu, 0xBF81}, /* negative rounds by magnitude */
        {0x7F7FFFFFu, 0x7F80}, /* FLT_MAX rounds to infinity */
        {0x7F7F7FFFu, 0x7F7F},
        {0x7F800000u, 0x7F80}, /* inf */
        {0xFF800000u, 0xFF80}, /* -inf */
        {0x00000001u, 0x0000}, /* tiny subnormal */
        {0x00008000u, 0x0000}, /* tie at zero: even */
        {0x00018000u, 0x0002}, /* tie, odd: up */
        {0x80000000u, 0x8000}, /* -0 */
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        cr_assert_eq(oq_float_to_bfloat16(bits_f(c[i].f)), c[i].b, "0x%08x -> 0x%04x, expected 0x%04x",
                     c[i].f, oq_float_to_bfloat16(bits_f(c[i].f)), c[i].b);
    uint16_t n = oq_float_to_bfloat16(bits_f(0x7F800001u)); /* NaN with a low payload */
    cr_assert_eq(n & 0x7F80, 0x7F80);
    cr_assert_neq(n & 0x007F, 0, "NaN became infinity: 0x%04x", n);
    n = oq_float_to_bfloat16(bits_f(0xFFFFFFFFu));
    cr_assert_eq(n & 0x7F80, 0x7F80);
    cr_assert_neq(n & 0x007F, 0);
    cr_assert_eq(oq_bfloat16_to_float(0x4049), 3.140625f);
    cr_assert_eq(oq_bfloat16_to_float(0xC000), -2.0f);
    cr_assert_eq(f_bits(oq_bfloat16_to_float(0x0001)), 0x00010000u);
    cr_assert(isnan(oq_bfloat16_to_float(0x7FC0)));
    /* every bfloat16 survives bf16 -> float -> bf16 */
    for (uint32_t b = 0; b <= 0xFFFF; b++) {
        bool is_nan = (b & 0x7F80) == 0x7F80 && (b & 0x7F);
        uint16_t back = oq_float_to_bfloat16(oq_bfloat16_to_float((uint16_t)b));
        if (!is_nan)
            cr_assert_eq(back, b, "0x%04x -> 0x%04x", b, back);
        else
            cr_assert(isnan(oq_bfloat16_to_float(back)), "0x%04x", b);
    }
}

Test(initializers, scalar_with_null_dims)
{
    oq_model *m = oq_model_new();
    float v = 2.5f;
    oq_value *s = oq_graph_add_initializer(m->graph, "s", OQ_DTYPE_FLOAT, NULL, 0, &v, 4);
    cr_assert_not_null(s);
    cr_assert_eq(s->initializer->rank, 0);
    cr_assert_eq(oq_tensor_numel(s->initializer), 1);
    const float *d = oq_tensor_data(s->initializer, NULL);
    cr_assert_not_null(d);
    cr_assert_eq(d[0], 2.5f);
    /* rank > 0 without dims is a usage error, not a crash */
    cr_assert_null(oq_graph_add_initializer(m->graph, "bad", OQ_DTYPE_FLOAT, NULL, 2, &v, 4));
    oq_model_free(m);
}

/* Repeated notes are grouped by kind (the CLI prints one line per kind): numbers and
 * quoted names do not make a new kind; other words, another op or severity do. */
Test(diag, same_kind_ignores_numbers_and_names)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_diag_add(&d, OQ_SEV_NOTE, OQ_OK, NULL, "c1", "Conv", "bias \"b1\" channel 7 (-0.80) raised from 1.2e-38 to 2.6e-08");
    oq_diag_add(&d, OQ_SEV_NOTE, OQ_OK, NULL, "c2", "Conv", "bias \"b_22\" channel 51 (+3) raised from 1 to 4.5E+02");
    oq_diag_set_weight(&d, 450.0);
    oq_diag_add(&d, OQ_SEV_NOTE, OQ_OK, NULL, "c2", "Gemm", "bias \"b_22\" channel 51 (+3) raised from 1 to 4.5E+02");
    oq_diag_add(&d, OQ_SEV_WARNING, OQ_OK, NULL, "c2", "Conv", "bias \"b_22\" channel 51 (+3) raised from 1 to 4.5E+02");
    oq_diag_add(&d, OQ_SEV_NOTE, OQ_OK, NULL, "c3", "Conv", "bias \"b\" channel 7 (-0.80) lowered from 1.2e-38 to 2.6e-08");
    oq_diag_add(&d, OQ_SEV_NOTE, OQ_OK, NULL, "c3", "Conv", "bias \"b\" channel 7 (-0.80) raised from 1.2e-38");
    cr_assert_eq(d.count, 6);
    cr_assert_eq(d.entries[0].weight, 0.0);
    cr_assert_eq(d.entries[1].weight, 450.0);
    cr_assert(oq_diag_same_kind(&d.entries[0], &d.entries[1]));
    cr_assert(oq_diag_same_kind(&d.entries[1], &d.entries[0]));
    cr_assert_not(oq_diag_same_kind(&d.entries[1], &d.entries[2]), "another op type");
    cr_assert_not(oq_diag_same_kind(&d.entries[1], &d.entries[3]), "another severity");
    cr_assert_not(oq_diag_same_kind(&d.entries[0], &d.entries[4]), "another word");
    cr_assert_not(oq_diag_same_kind(&d.entries[0], &d.entries[5]), "a shorter message");
    oq_diag_set_weight(NULL, 1.0); /* no-op */
    oq_diag_free(&d);
}

/* The array conversions (F16C where the CPU has it) give the scalar functions' bits:
 * every float16 value, and floats around every float16 value (midpoints, one float ulp
 * either side), the special values and odd lengths (the scalar tail). */
Test(half, array_conversions_equal_the_scalar_ones)
{
    uint16_t *h = malloc(65536 * sizeof(uint16_t)), *h2 = malloc(65536 * 5 * sizeof(uint16_t));
    float *f = malloc(65536 * sizeof(float)), *g = malloc(65536 * 5 * sizeof(float));
    for (uint32_t u = 0; u < 65536; u++)
        h[u] = (uint16_t)u;
    oq_half_to_float_n(h, f, 65535); /* odd: 7 values from the scalar tail */
    f[65535] = oq_half_to_float(h[65535]);
    for (uint32_t u = 0; u < 65536; u++) {
        float s = oq_half_to_float(h[u]);
        cr_assert(memcmp(&s, &f[u], 4) == 0 || (isnan(s) && isnan(f[u])), "0x%04x -> %a, scalar %a", u, (double)f[u],
                  (double)s);
    }
    int64_t n = 0;
    for (uint32_t u = 0; u < 65536; u++) {
        float v = oq_half_to_float((uint16_t)u), nx = oq_half_to_float((uint16_t)(u + 1));
        if (isnan(v))
            continue;
        g[n++] = v;
        g[n++] = nextafterf(v, INFINITY);
        g[n++] = nextafterf(v, -INFINITY);
        if (isfinite(nx) && isfinite(v) && (u & 0x7fff) != 0x7bff)
            g[n++] = v + (nx - v) / 2; /* the midpoint: ties to even */
    }
    g[n++] = NAN;
    g[n++] = -INFINITY;
    g[n++] = 1e30f;
    oq_float_to_half_n(g, h2, n);
    for (int64_t i = 0; i < n; i++) {
        uint16_t s = oq_float_to_half(g[i]);
        cr_assert_eq(h2[i], s, "%a -> 0x%04x, scalar 0x%04x", (double)g[i], h2[i], s);
    }
    free(h);
    free(h2);
    free(f);
    free(g);
}
