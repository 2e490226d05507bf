/* Reading and writing: a model built with the API survives write + read (checked by
 * our reader and independently by python3-onnx), external data (fresh data file,
 * aligned offsets, mmapped views, data beside the model, a file made by onnx's own
 * writer), refusal to write onto the input, full devices, and the > 2 GiB path. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <dirent.h>
#include <unistd.h>

#include "io/io-impl.h"
#include "ir/ir-impl.h"
#include "onnxq/onnxq.h"
#include "onnxq/tensor_io.h"
#include "testutil.h"

#define PY "/usr/bin/python3"

/* ------------------------------------------------------------ helpers */

static char *path_in(const char *dir, const char *name)
{
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

static void rm_rf(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static int run(char **out, const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return tu_run(cmd, out);
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        if (*s == '\n')
            n++;
    return n;
}

/* Names in dir other than "." and ".."; returns the count and the names joined by ','. */
static size_t list_dir(const char *dir, char *buf, size_t size)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    size_t n = 0, used = 0;
    buf[0] = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        int k = snprintf(buf + used, size - used, "%s%s", n ? "," : "", e->d_name);
        if (k > 0 && (size_t)k < size - used)
            used += (size_t)k;
        n++;
    }
    closedir(d);
    return n;
}

static void assert_same_bytes(const char *a, const char *b)
{
    size_t la, lb;
    void *pa = tu_read_file(a, &la), *pb = tu_read_file(b, &lb);
    cr_assert(pa && pb, "%s / %s", a, b);
    cr_assert_eq(la, lb, "%s has %zu bytes, %s has %zu", a, la, b, lb);
    cr_assert_eq(memcmp(pa, pb, la), 0, "%s and %s differ", a, b);
    free(pa);
    free(pb);
}

static bool have_python_onnx(void)
{
    return tu_run(PY " -c 'import onnx, numpy'", NULL) == 0;
}

/* The mapping in /proc/self/maps that contains p, or "" (path of the mapped file). */
static void mapping_of(const void *p, char *path, size_t size)
{
    path[0] = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert_not_null(f);
    char line[4096];
    uintptr_t x = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) != 2)
            continue;
        if (x >= lo && x < hi) {
            char *slash = strchr(line, '/');
            if (slash) {
                slash[strcspn(slash, "\n")] = 0;
                snprintf(path, size, "%s", slash);
            }
            break;
        }
    }
    fclose(f);
}

static oq_model *read_ok(const char *path)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_model *m = NULL;
    oq_status st = oq_model_read(path, NULL, &m, &d);
    const oq_diag_entry *e = oq_diag_first_error(&d);
    cr_assert_eq(st, OQ_OK, "%s: %s", path, e ? e->message : "?");
    oq_diag_free(&d);
    return m;
}

static void write_ok(oq_model *m, const char *path, const oq_write_options *o)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_status st = oq_model_write(m, path, o, &d);
    const oq_diag_entry *e = oq_diag_first_error(&d);
    cr_assert_eq(st, OQ_OK, "%s: %s", path, e ? e->message : "?");
    oq_diag_free(&d);
}

static oq_value *val(oq_graph *g, const char *name)
{
    oq_value *v = oq_graph_new_value(g, name);
    cr_assert_not_null(v);
    return v;
}

/* A model that exercises most of the IR:
 *   inputs x: float32[N,4], c: bool[]
 *   initializers w: float32[4,4] = 0.5*i, q: int4[5] packed, idx: int64[3]
 *   h = MatMul(x, w)                         "mm"
 *   k = Constant(value = float32[2] {1.5,-2})  "cst"
 *   z = com.example.Custom(h, idx, k) with int/float/string/ints/floats attributes
 *   y = If(c) { then: t = Neg(h) ; else: e = Abs(z) }
 *   outputs y: float32[N,4] */
static oq_model *build_model(void)
{
    oq_model *m = oq_model_new();
    cr_assert_not_null(m);
    oq_model_set_opset(m, "", 17);
    oq_model_set_opset(m, "com.example", 1);
    m->has_ir_version = true;
    m->ir_version = 8;
    m->producer_name = oq_model_strdup(m, "onnxq-test");
    m->producer_version = oq_model_strdup(m, "0.1");
    m->doc_string = oq_model_strdup(m, "built by test_io");
    oq_model_set_metadata(m, "author", "test");
    oq_graph *g = m->graph;
    g->name = oq_model_strdup(m, "g");
    int64_t d2[2] = {-1, 4};
    const char *names[2] = {"N", NULL};
    oq_value *x = val(g, "x"), *c = val(g, "c");
    oq_graph_add_input(g, x, oq_type_tensor(m, OQ_DTYPE_FLOAT, d2, names, 2));
    oq_graph_add_input(g, c, oq_type_tensor(m, OQ_DTYPE_BOOL, NULL, NULL, 0));
    float w[16];
    for (int i = 0; i < 16; i++)
        w[i] = 0.5f * (float)i;
    int64_t d44[2] = {4, 4};
    cr_assert_not_null(oq_graph_add_initializer(g, "w", OQ_DTYPE_FLOAT, d44, 2, w, sizeof w));
    uint8_t q[3] = {0x21, 0xF7, 0x08}; /* int4 {1, 2, 7, -1, -8} */
    int64_t d5 = 5;
    cr_assert_not_null(oq_graph_add_initializer(g, "q", OQ_DTYPE_INT4, &d5, 1, q, 3));
    int64_t idx[3] = {0, -1, 1LL << 40};
    int64_t d3 = 3;
    cr_assert_not_null(oq_graph_add_initializer(g, "idx", OQ_DTYPE_INT64, &d3, 1, idx, sizeof idx));

    oq_value *h = val(g, "h"), *k = val(g, "k"), *z = val(g, "z"), *y = val(g, "y");
    oq_value *mm_in[2] = {x, oq_graph_find_value(g, "w")};
    oq_node *mm = oq_node_new(g, "MatMul", NULL, "mm", mm_in, 2, &h, 1);
    oq_graph_append(g, mm);
    oq_node *cst = oq_node_new(g, "Constant", NULL, "cst", NULL, 0, &k, 1);
    float kv[2] = {1.5f, -2.0f};
    int64_t d2b = 2;
    oq_node_set_attr_tensor(cst, "value", oq_tensor_new(m, "", OQ_DTYPE_FLOAT, &d2b, 1, kv, sizeof kv));
    oq_graph_append(g, cst);
    oq_value *cin[3] = {h, oq_graph_find_value(g, "idx"), k};
    oq_node *cus = oq_node_new(g, "Custom", "com.example", "cus", cin, 3, &z, 1);
    oq_node_set_attr_int(cus, "axis", -3);
    oq_node_set_attr_float(cus, "alpha", 0.125f);
    oq_node_set_attr_string(cus, "mode", "reflect");
    int64_t ints[4] = {1, -2, 3, 1LL << 50};
    oq_node_set_attr_ints(cus, "pads", ints, 4);
    float fl[2] = {0.25f, -8.0f};
    oq_node_set_attr_floats(cus, "scales", fl, 2);
    cus->doc_string = oq_model_strdup(m, "a custom op");
    oq_graph_append(g, cus);
    oq_node *iff = oq_node_new(g, "If", NULL, "if", &c, 1, &y, 1);
    oq_graph *tg = tu_add_subgraph(iff, "then_branch");
    oq_graph *eg = tu_add_subgraph(iff, "else_branch");
    oq_value *t = val(tg, "t"), *e = val(eg, "e");
    oq_graph_append(tg, oq_node_new(tg, "Neg", NULL, "tneg", &h, 1, &t, 1));
    oq_graph_add_output(tg, t, oq_type_tensor(m, OQ_DTYPE_FLOAT, d2, names, 2));
    oq_graph_append(eg, oq_node_new(eg, "Abs", NULL, "eabs", &z, 1, &e, 1));
    oq_graph_add_output(eg, e, oq_type_tensor(m, OQ_DTYPE_FLOAT, d2, names, 2));
    oq_graph_append(g, iff);
    oq_graph_add_output(g, y, oq_type_tensor(m, OQ_DTYPE_FLOAT, d2, names, 2));
    oq_diag dg;
    oq_diag_init(&dg);
    cr_assert_eq(oq_model_check(m, &dg), OQ_OK);
    oq_diag_free(&dg);
    return m;
}

static const void *tdata(oq_tensor *t, int64_t want_nbytes)
{
    oq_diag d;
    oq_diag_init(&d);
    const void *p = oq_tensor_data(t, &d);
    cr_assert_not_null(p, "tensor %s", t->name);
    cr_assert_eq(t->view_nbytes, want_nbytes, "tensor %s: %lld bytes", t->name, (long long)t->view_nbytes);
    oq_diag_free(&d);
    return p;
}

static const char *input_name(const oq_node *n, size_t i)
{
    return n->inputs[i] ? n->inputs[i]->name : "";
}

/* Compare the re-read model with what build_model() made, by hand-known values. */
static void assert_is_built_model(oq_model *m)
{
    cr_assert_eq(m->ir_version, 8);
    cr_assert_str_eq(m->producer_name, "onnxq-test");
    cr_assert_str_eq(m->producer_version, "0.1");
    cr_assert_str_eq(m->doc_string, "built by test_io");
    cr_assert_eq(m->metadata.count, 1);
    cr_assert_str_eq(m->metadata.items[0].key, "author");
    cr_assert_str_eq(m->metadata.items[0].value, "test");
    cr_assert_eq(m->n_opsets, 2);
    cr_assert_eq(oq_model_opset(m, ""), 17);
    cr_assert_eq(oq_model_opset(m, "com.example"), 1);
    oq_graph *g = m->graph;
    cr_assert_str_eq(g->name, "g");
    cr_assert_eq(g->n_inputs, 2);
    oq_type *tx = g->inputs[0]->type;
    cr_assert_str_eq(g->inputs[0]->value->name, "x");
    cr_assert_eq(tx->elem_type, OQ_DTYPE_FLOAT);
    cr_assert_eq(tx->shape->rank, 2);
    cr_assert_eq(tx->shape->dims[0].kind, OQ_DIM_PARAM);
    cr_assert_str_eq(tx->shape->dims[0].param, "N");
    cr_assert_eq(tx->shape->dims[1].kind, OQ_DIM_VALUE);
    cr_assert_eq(tx->shape->dims[1].value, 4);
    cr_assert_eq(g->inputs[1]->type->elem_type, OQ_DTYPE_BOOL);
    cr_assert_eq(g->inputs[1]->type->shape->rank, 0);

    cr_assert_eq(g->n_initializers, 3);
    oq_tensor *w = g->initializers[0], *q = g->initializers[1], *idx = g->initializers[2];
    cr_assert_str_eq(w->name, "w");
    cr_assert_eq(w->dtype, OQ_DTYPE_FLOAT);
    cr_assert_eq(w->rank, 2);
    const float *wp = tdata(w, 64);
    for (int i = 0; i < 16; i++)
        cr_assert_eq(wp[i], 0.5f * (float)i);
    cr_assert_str_eq(q->name, "q");
    cr_assert_eq(q->dtype, OQ_DTYPE_INT4);
    cr_assert_eq(q->dims[0], 5);
    const uint8_t *qp = tdata(q, 3);
    cr_assert(qp[0] == 0x21 && qp[1] == 0xF7 && qp[2] == 0x08);
    const int64_t *ip = tdata(idx, 24);
    cr_assert(ip[0] == 0 && ip[1] == -1 && ip[2] == (1LL << 40));

    cr_assert_eq(g->n_nodes, 4);
    oq_node *mm = g->first, *cst = mm->next, *cus = cst->next, *iff = cus->next;
    cr_assert_str_eq(mm->name, "mm");
    cr_assert_str_eq(mm->op_type, "MatMul");
    cr_assert_str_eq(input_name(mm, 0), "x");
    cr_assert_str_eq(input_name(mm, 1), "w");
    cr_assert_eq(mm->inputs[1]->kind, OQ_VALUE_INITIALIZER);
    cr_assert_str_eq(cst->op_type, "Constant");
    oq_tensor *kt = oq_value_const_tensor(cst->outputs[0]);
    cr_assert_not_null(kt);
    const float *kp = tdata(kt, 8);
    cr_assert(kp[0] == 1.5f && kp[1] == -2.0f);
    cr_assert_str_eq(cus->domain, "com.example");
    cr_assert_str_eq(cus->doc_string, "a custom op");
    cr_assert_eq(cus->n_inputs, 3);
    cr_assert_str_eq(input_name(cus, 0), "h");
    cr_assert_str_eq(input_name(cus, 1), "idx");
    cr_assert_str_eq(input_name(cus, 2), "k");
    cr_assert_eq(cus->inputs[0]->producer, mm);
    cr_assert_eq(cus->inputs[2]->producer, cst);
    cr_assert_eq(cus->n_attrs, 5);
    cr_assert_eq(oq_node_attr_int(cus, "axis", 0), -3);
    cr_assert_eq(oq_node_attr_float(cus, "alpha", 0), 0.125f);
    cr_assert_str_eq(oq_node_attr_string(cus, "mode", ""), "reflect");
    /* the attribute's own bytes, NUL-terminated at load: nothing allocated per call (kernels
     * read string attributes while a model runs, from several threads) */
    cr_assert_eq(oq_node_attr_string(cus, "mode", ""), oq_node_attr_string(cus, "mode", ""));
    cr_assert_eq(oq_node_attr(cus, "mode")->s.data[oq_node_attr(cus, "mode")->s.len], 0);
    const int64_t *pads;
    cr_assert_eq(oq_node_attr_ints(cus, "pads", &pads), 4);
    cr_assert(pads[0] == 1 && pads[1] == -2 && pads[2] == 3 && pads[3] == (1LL << 50));
    oq_attr *sc = oq_node_attr(cus, "scales");
    cr_assert_eq(sc->type, OQ_ATTR_FLOATS);
    cr_assert(sc->n_floats == 2 && sc->floats[0] == 0.25f && sc->floats[1] == -8.0f);

    cr_assert_str_eq(iff->op_type, "If");
    oq_graph *subs[2];
    cr_assert_eq(oq_node_subgraphs(iff, subs, 2), 2);
    cr_assert_eq(subs[0]->parent, g);
    cr_assert_eq(subs[0]->owner, iff);
    cr_assert_str_eq(subs[0]->name, "then_branch");
    oq_node *tneg = subs[0]->first;
    cr_assert_str_eq(tneg->op_type, "Neg");
    /* the captured outer value is the main graph's h, with the use recorded */
    cr_assert_eq(tneg->inputs[0], mm->outputs[0]);
    bool found = false;
    for (size_t i = 0; i < mm->outputs[0]->n_uses; i++)
        found = found || mm->outputs[0]->uses[i].node == tneg;
    cr_assert(found);
    cr_assert_eq(subs[1]->first->inputs[0], cus->outputs[0]);
    cr_assert_str_eq(subs[1]->outputs[0]->value->name, "e");
    cr_assert_eq(g->n_outputs, 1);
    cr_assert_str_eq(g->outputs[0]->value->name, "y");
    cr_assert_eq(g->outputs[0]->value->producer, iff);
}

/* ------------------------------------------------------------ write / read */

Test(io, api_model_round_trip)
{
    char *dir = tu_tmpdir();
    char *p1 = path_in(dir, "a.onnx"), *p2 = path_in(dir, "b.onnx");
    oq_model *m = build_model();
    write_ok(m, p1, NULL);
    oq_model *r = read_ok(p1);
    assert_is_built_model(r);
    /* writing the re-read model gives the same bytes; so does the buffer writer */
    write_ok(r, p2, NULL);
    assert_same_bytes(p1, p2);
    uint8_t *b1, *b2;
    size_t l1, l2;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_model_write_buffer(m, &b1, &l1, &d), OQ_OK);
    cr_assert_eq(oq_model_write_buffer(r, &b2, &l2, &d), OQ_OK);
    cr_assert_eq(l1, l2);
    cr_assert_eq(memcmp(b1, b2, l1), 0);
    /* and reading from memory gives the same model */
    oq_model *r2 = NULL;
    cr_assert_eq(oq_model_read_buffer(b1, l1, "mem", NULL, &r2, &d), OQ_OK);
    assert_is_built_model(r2);
    free(b1);
    free(b2);
    oq_diag_free(&d);
    oq_model_free(r2);
    oq_model_free(r);
    oq_model_free(m);
    free(p1);
    free(p2);
    rm_rf(dir);
    free(dir);
}

Test(io, api_model_read_by_python_onnx)
{
    if (!have_python_onnx())
        cr_skip_test("python3-onnx not available at " PY);
    char *dir = tu_tmpdir();
    char *p = path_in(dir, "a.onnx");
    oq_model *m = build_model();
    write_ok(m, p, NULL);
    char *out = NULL;
    int rc = run(&out,
                 PY " -c '\n"
                 "import onnx, onnx.numpy_helper as nh, sys\n"
                 "m = onnx.load(sys.argv[1])\n"
                 "onnx.checker.check_model(m)\n"
                 "g = m.graph\n"
                 "print(m.producer_name, m.ir_version, sorted((o.domain, o.version) for o in m.opset_import))\n"
                 "print([(n.name, n.op_type, list(n.input), list(n.output)) for n in g.node])\n"
                 "print([d.dim_param or d.dim_value for d in g.input[0].type.tensor_type.shape.dim])\n"
                 "print(nh.to_array(g.initializer[0]).reshape(-1).tolist())\n"
                 "print(g.initializer[1].data_type, g.initializer[1].raw_data.hex())\n"
                 "print(nh.to_array(g.initializer[2]).tolist())\n"
                 "a = {x.name: onnx.helper.get_attribute_value(x) for x in g.node[2].attribute}\n"
                 "print(a[\"axis\"], a[\"alpha\"], a[\"mode\"], a[\"pads\"], a[\"scales\"])\n"
                 "print(nh.to_array(g.node[1].attribute[0].t).tolist())\n"
                 "t = g.node[3].attribute[0].g\n"
                 "print(t.name, [(n.op_type, list(n.input)) for n in t.node], [o.name for o in t.output])\n"
                 "' '%s'",
                 p);
    const char *want =
        "onnxq-test 8 [('', 17), ('com.example', 1)]\n"
        "[('mm', 'MatMul', ['x', 'w'], ['h']), ('cst', 'Constant', [], ['k']), "
        "('cus', 'Custom', ['h', 'idx', 'k'], ['z']), ('if', 'If', ['c'], ['y'])]\n"
        "['N', 4]\n"
        "[0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0, 6.5, 7.0, 7.5]\n"
        "22 21f708\n"
        "[0, -1, 1099511627776]\n"
        "-3 0.125 b'reflect' [1, -2, 3, 1125899906842624] [0.25, -8.0]\n"
        "[1.5, -2.0]\n"
        "then_branch [('Neg', ['h'])] ['t']\n";
    cr_assert_eq(rc, 0, "python3-onnx rejected the file:\n%s", out);
    cr_assert_str_eq(out, want);
    free(out);
    oq_model_free(m);
    free(p);
    rm_rf(dir);
    free(dir);
}

/* ------------------------------------------------------------ external data */

/* A model with three initializers: big (40000 B), mid (3000 B, int8), tiny (40 B). */
static void write_ext_source(const char *path, float *big, int8_t *mid, float *tiny)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 17);
    oq_graph *g = m->graph;
    for (int i = 0; i < 10000; i++)
        big[i] = (float)i * 0.25f - 7.0f;
    for (int i = 0; i < 3000; i++)
        mid[i] = (int8_t)(i * 7);
    for (int i = 0; i < 10; i++)
        tiny[i] = (float)-i;
    int64_t db[2] = {100, 100}, dm = 3000, dt = 10;
    oq_value *b = oq_graph_add_initializer(g, "big", OQ_DTYPE_FLOAT, db, 2, big, 40000);
    oq_value *mi = oq_graph_add_initializer(g, "mid", OQ_DTYPE_INT8, &dm, 1, mid, 3000);
    oq_value *ti = oq_graph_add_initializer(g, "tiny", OQ_DTYPE_FLOAT, &dt, 1, tiny, 40);
    oq_value *o1 = val(g, "o1"), *o2 = val(g, "o2"), *o3 = val(g, "o3");
    oq_graph_append(g, oq_node_new(g, "Identity", NULL, "i1", &b, 1, &o1, 1));
    oq_graph_append(g, oq_node_new(g, "Identity", NULL, "i2", &mi, 1, &o2, 1));
    oq_graph_append(g, oq_node_new(g, "Identity", NULL, "i3", &ti, 1, &o3, 1));
    oq_graph_add_output(g, o1, NULL);
    oq_graph_add_output(g, o2, NULL);
    oq_graph_add_output(g, o3, NULL);
    write_ok(m, path, NULL);
    oq_model_free(m);
}

static oq_external ext_of(const oq_tensor *t)
{
    oq_external e;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_external_parse(t, &e, &d), OQ_OK);
    oq_diag_free(&d);
    return e;
}

Test(io, external_data_convert_reload_fresh_aligned_mapped)
{
    char *dir = tu_tmpdir();
    char *in = path_in(dir, "in.onnx"), *out = path_in(dir, "out.onnx");
    char *data = path_in(dir, "out.onnx.data"), *keep = path_in(dir, "keep.data");
    float big[10000], tiny[10];
    int8_t mid[3000];
    write_ext_source(in, big, mid, tiny);

    /* an existing data file, bigger than the new one, hard-linked to see if it is
     * written in place or appended to */
    size_t junk_len = 1 << 20;
    uint8_t *junk = malloc(junk_len);
    memset(junk, 0xAB, junk_len);
    cr_assert_eq(tu_write_file(data, junk, junk_len), 0);
    cr_assert_eq(link(data, keep), 0);
    struct stat st_old, st_new;
    cr_assert_eq(stat(data, &st_old), 0);

    char *outp = NULL;
    int rc = run(&outp, "'%s' convert '%s' '%s' --external-data", ONNXQ_EXE, in, out);
    cr_assert_eq(rc, 0, "%s", outp);
    free(outp);
    cr_assert_eq(stat(data, &st_new), 0);
    cr_assert_neq(st_new.st_ino, st_old.st_ino, "data file was rewritten in place");
    size_t kl;
    uint8_t *kb = tu_read_file(keep, &kl);
    cr_assert_eq(kl, junk_len);
    cr_assert_eq(memcmp(kb, junk, junk_len), 0, "the old data file was modified");
    free(kb);

    oq_model *m = read_ok(out);
    oq_tensor *tb = m->graph->initializers[0], *tm = m->graph->initializers[1],
              *tt = m->graph->initializers[2];
    cr_assert(oq_tensor_is_external(tb));
    cr_assert(oq_tensor_is_external(tm));
    cr_assert(!oq_tensor_is_external(tt), "a 40-byte tensor is under the 1024-byte threshold");
    oq_external eb = ext_of(tb), em = ext_of(tm);
    cr_assert_str_eq(eb.location, "out.onnx.data");
    cr_assert_str_eq(em.location, "out.onnx.data");
    cr_assert_eq(eb.offset % 64, 0);
    cr_assert_eq(em.offset % 64, 0);
    cr_assert_eq(eb.length, 40000);
    cr_assert_eq(em.length, 3000);
    int64_t end = eb.offset + eb.length > em.offset + em.length ? eb.offset + eb.length
                                                                : em.offset + em.length;
    cr_assert_eq((int64_t)st_new.st_size, end, "data file has %lld bytes, tensors end at %lld",
                 (long long)st_new.st_size, (long long)end);
    /* identical bytes */
    cr_assert_eq(memcmp(tdata(tb, 40000), big, 40000), 0);
    cr_assert_eq(memcmp(tdata(tm, 3000), mid, 3000), 0);
    cr_assert_eq(memcmp(tdata(tt, 40), tiny, 40), 0);
    /* external tensors are views into a mapping of the data file, not copies */
    cr_assert(tb->view_borrowed);
    cr_assert(tm->view_borrowed);
    char mp[4096];
    mapping_of(tb->view, mp, sizeof mp);
    char real[4096];
    cr_assert_not_null(realpath(data, real));
    cr_assert_str_eq(mp, real, "view of \"big\" is not in a mapping of the data file");
    mapping_of(tm->view, mp, sizeof mp);
    cr_assert_str_eq(mp, real);
    /* the data between tensors is zero padding */
    size_t dl;
    uint8_t *db = tu_read_file(data, &dl);
    int64_t lo = eb.offset < em.offset ? eb.offset + eb.length : em.offset + em.length;
    int64_t hi = eb.offset < em.offset ? em.offset : eb.offset;
    for (int64_t i = lo; i < hi; i++)
        cr_assert_eq(db[i], 0);
    free(db);
    oq_model_free(m);

    /* convert the external model again to another name: the new file is fresh too, and
     * converting back to inline gives the bytes of the original model */
    char *back = path_in(dir, "back.onnx");
    rc = run(&outp, "'%s' convert '%s' '%s' --inline", ONNXQ_EXE, out, back);
    cr_assert_eq(rc, 0, "%s", outp);
    free(outp);
    assert_same_bytes(in, back);
    free(back);
    free(junk);
    free(in);
    free(out);
    free(data);
    free(keep);
    rm_rf(dir);
    free(dir);
}

Test(io, external_data_found_beside_the_model_from_another_cwd)
{
    char *dir = tu_tmpdir();
    char *sub = path_in(dir, "models");
    cr_assert_eq(mkdir(sub, 0755), 0);
    char *in = path_in(dir, "in.onnx"), *out = path_in(sub, "m.onnx");
    float big[10000], tiny[10];
    int8_t mid[3000];
    write_ext_source(in, big, mid, tiny);
    char *o = NULL;
    cr_assert_eq(run(&o, "'%s' convert '%s' '%s' --external-data --data-name w.bin", ONNXQ_EXE, in, out), 0, "%s", o);
    free(o);
    /* read by a relative path from a different working directory */
    char cwd[4096];
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    cr_assert_eq(chdir(dir), 0);
    oq_model *m = read_ok("models/m.onnx");
    cr_assert_eq(chdir("/"), 0);
    cr_assert_str_eq(ext_of(m->graph->initializers[0]).location, "w.bin");
    cr_assert_eq(memcmp(tdata(m->graph->initializers[0], 40000), big, 40000), 0);
    cr_assert_eq(memcmp(tdata(m->graph->initializers[1], 3000), mid, 3000), 0);
    oq_model_free(m);
    /* the CLI from yet another directory */
    cr_assert_eq(run(&o, "cd / && '%s' check '%s'", ONNXQ_EXE, out), 0, "%s", o);
    free(o);
    /* a data file missing beside the model is an error naming the tensor */
    char *wbin = path_in(sub, "w.bin"), *moved = path_in(dir, "w.bin");
    cr_assert_eq(rename(wbin, moved), 0);
    int rc = run(&o, "'%s' check '%s'", ONNXQ_EXE, out);
    cr_assert_eq(rc, 2, "%s", o);
    cr_assert_eq(count_lines(o), 1, "%s", o);
    cr_assert(strstr(o, "tensor \"big\"") && strstr(o, "w.bin"), "%s", o);
    free(o);
    cr_assert_eq(chdir(cwd), 0);
    free(wbin);
    free(moved);
    free(in);
    free(out);
    free(sub);
    rm_rf(dir);
    free(dir);
}

Test(io, external_data_written_by_python_onnx)
{
    if (!have_python_onnx())
        cr_skip_test("python3-onnx not available at " PY);
    char *dir = tu_tmpdir();
    char *p = path_in(dir, "py.onnx");
    char *o = NULL;
    /* onnx's own writer: two tensors in one external file, values known in closed form */
    int rc = run(&o,
                 PY " -c '\n"
                 "import numpy as np, onnx, sys\n"
                 "from onnx import helper as h, numpy_helper as nh, TensorProto as T\n"
                 "a = (np.arange(6000, dtype=np.float32) * 0.5 - 3).reshape(60, 100)\n"
                 "b = np.arange(2000, dtype=np.int64) * -3\n"
                 "g = h.make_graph([h.make_node(\"Add\", [\"a\", \"a\"], [\"y\"])], \"g\", [],\n"
                 "                 [h.make_tensor_value_info(\"y\", T.FLOAT, [60, 100])],\n"
                 "                 [nh.from_array(a, \"a\"), nh.from_array(b, \"b\")])\n"
                 "m = h.make_model(g, opset_imports=[h.make_opsetid(\"\", 17)])\n"
                 "onnx.save_model(m, sys.argv[1], save_as_external_data=True, all_tensors_to_one_file=True,\n"
                 "                location=\"weights.bin\", size_threshold=1024)\n"
                 "' '%s'",
                 p);
    cr_assert_eq(rc, 0, "%s", o);
    free(o);
    oq_model *m = read_ok(p);
    oq_tensor *a = m->graph->initializers[0], *b = m->graph->initializers[1];
    cr_assert(oq_tensor_is_external(a) && oq_tensor_is_external(b));
    const float *ap = tdata(a, 24000);
    for (int i = 0; i < 6000; i++)
        cr_assert_eq(ap[i], (float)i * 0.5f - 3.0f, "a[%d]", i);
    const int64_t *bp = tdata(b, 16000);
    for (int i = 0; i < 2000; i++)
        cr_assert_eq(bp[i], (int64_t)i * -3, "b[%d]", i);
    oq_model_free(m);
    free(p);
    rm_rf(dir);
    free(dir);
}

/* ------------------------------------------------------------ refusing to clobber the input */

Test(io, refuses_to_write_onto_the_input)
{
    char *dir = tu_tmpdir();
    char *in = path_in(dir, "in.onnx"), *sym = path_in(dir, "sym.onnx"),
         *hard = path_in(dir, "hard.onnx"), *copy = path_in(dir, "copy.onnx");
    float big[10000], tiny[10];
    int8_t mid[3000];
    write_ext_source(in, big, mid, tiny);
    cr_assert_eq(run(NULL, "cp '%s' '%s'", in, copy), 0);
    cr_assert_eq(symlink("in.onnx", sym), 0);
    cr_assert_eq(link(in, hard), 0);
    const char *targets[3] = {in, sym, hard};
    for (int i = 0; i < 3; i++) {
        char *o = NULL;
        int rc = run(&o, "'%s' convert '%s' '%s'", ONNXQ_EXE, in, targets[i]);
        cr_assert_eq(rc, 2, "target %s: exit %d\n%s", targets[i], rc, o);
        cr_assert_eq(count_lines(o), 1, "%s", o);
        cr_assert(strstr(o, "refusing to overwrite the input model"), "%s", o);
        cr_assert(strstr(o, targets[i]), "message does not name %s: %s", targets[i], o);
        free(o);
        /* also through the other direction: reading the link, writing the file */
        rc = run(&o, "'%s' convert '%s' '%s'", ONNXQ_EXE, targets[i], in);
        cr_assert_eq(rc, 2, "%s", o);
        free(o);
    }
    struct stat st;
    cr_assert_eq(lstat(sym, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "the symlink was replaced");
    assert_same_bytes(in, copy);
    assert_same_bytes(hard, copy);
    char names[256];
    cr_assert_eq(list_dir(dir, names, sizeof names), 4, "left behind: %s", names);

    /* the data file of an external-data input is protected as well */
    char *ext = path_in(dir, "ext.onnx"), *ext2 = path_in(dir, "ext2.onnx");
    char *o = NULL;
    cr_assert_eq(run(&o, "'%s' convert '%s' '%s' --external-data", ONNXQ_EXE, in, ext), 0, "%s", o);
    free(o);
    char *extdata = path_in(dir, "ext.onnx.data"), *extcopy = path_in(dir, "ext.data.copy");
    cr_assert_eq(run(NULL, "cp '%s' '%s'", extdata, extcopy), 0);
    int rc = run(&o, "'%s' convert '%s' '%s' --data-name ext.onnx.data", ONNXQ_EXE, ext, ext2);
    cr_assert_eq(rc, 2, "%s", o);
    cr_assert_eq(count_lines(o), 1, "%s", o);
    cr_assert(strstr(o, "refusing to overwrite a file the input model reads"), "%s", o);
    free(o);
    assert_same_bytes(extdata, extcopy);
    cr_assert_eq(access(ext2, F_OK), -1);
    free(ext);
    free(ext2);
    free(extdata);
    free(extcopy);
    free(in);
    free(sym);
    free(hard);
    free(copy);
    rm_rf(dir);
    free(dir);
}

/* ------------------------------------------------------------ full devices */

Test(io, dev_full_as_output)
{
    char *dir = tu_tmpdir();
    char *in = path_in(dir, "in.onnx");
    float big[10000], tiny[10];
    int8_t mid[3000];
    write_ext_source(in, big, mid, tiny);
    struct stat before, after;
    cr_assert_eq(stat("/dev/full", &before), 0);
    cr_assert(S_ISCHR(before.st_mode));
    char *o = NULL;
    int rc = run(&o, "'%s' convert '%s' /dev/full", ONNXQ_EXE, in);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, o);
    cr_assert_eq(count_lines(o), 1, "%s", o);
    cr_assert_str_eq(o, "/dev/full: is not a regular file (character device); refusing to replace it\n");
    free(o);
    /* the device node is still there, and nothing was created beside it */
    cr_assert_eq(stat("/dev/full", &after), 0);
    cr_assert(S_ISCHR(after.st_mode));
    cr_assert_eq(after.st_rdev, before.st_rdev);
    cr_assert_eq(run(&o, "ls -a /dev | grep -c '^\\.full' || true"), 0);
    cr_assert_str_eq(o, "0\n", "temporary file left in /dev");
    free(o);
    free(in);
    rm_rf(dir);
    free(dir);
}

static char mounted[512];

static void unmount_tmpfs(void)
{
    if (mounted[0])
        umount2(mounted, MNT_DETACH);
    mounted[0] = 0;
}

Test(io, full_tmpfs_keeps_the_previous_output, .fini = unmount_tmpfs)
{
    char *dir = tu_tmpdir();
    char *mnt = path_in(dir, "mnt");
    cr_assert_eq(mkdir(mnt, 0755), 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=64k") == 0)
        snprintf(mounted, sizeof mounted, "%s", mnt);
    else {
        int e = errno;
        rm_rf(dir);
        cr_skip_test("cannot mount a 64 KiB tmpfs (%s): full-device test skipped", strerror(e));
    }
    /* a small model that fits and a large one (~200 KB) that does not */
    char *small = path_in(dir, "small.onnx"), *large = path_in(dir, "large.onnx");
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 17);
    int64_t n = 50000;
    float *buf = calloc((size_t)n, sizeof(float));
    for (int64_t i = 0; i < n; i++)
        buf[i] = (float)i;
    oq_value *w = oq_graph_add_initializer(m->graph, "w", OQ_DTYPE_FLOAT, &n, 1, buf, n * 4);
    oq_value *y = val(m->graph, "y");
    oq_graph_append(m->graph, oq_node_new(m->graph, "Identity", NULL, "id", &w, 1, &y, 1));
    oq_graph_add_output(m->graph, y, NULL);
    write_ok(m, large, NULL);
    oq_model_free(m);
    free(buf);
    m = oq_model_new();
    oq_model_set_opset(m, "", 17);
    int64_t four = 4;
    float f4[4] = {1, 2, 3, 4};
    w = oq_graph_add_initializer(m->graph, "w", OQ_DTYPE_FLOAT, &four, 1, f4, 16);
    y = val(m->graph, "y");
    oq_graph_append(m->graph, oq_node_new(m->graph, "Identity", NULL, "id", &w, 1, &y, 1));
    oq_graph_add_output(m->graph, y, NULL);
    write_ok(m, small, NULL);
    oq_model_free(m);

    char *out = path_in(mnt, "out.onnx"), *prev = path_in(dir, "prev.onnx");
    char *o = NULL;
    cr_assert_eq(run(&o, "'%s' convert '%s' '%s'", ONNXQ_EXE, small, out), 0, "%s", o);
    free(o);
    cr_assert_eq(run(NULL, "cp '%s' '%s'", out, prev), 0);

    /* inline: the model file itself does not fit */
    int rc = run(&o, "'%s' convert '%s' '%s'", ONNXQ_EXE, large, out);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, o);
    cr_assert_eq(count_lines(o), 1, "%s", o);
    cr_assert(strstr(o, out) && strstr(o, "No space left on device"), "%s", o);
    free(o);
    assert_same_bytes(out, prev);
    char names[512];
    size_t cnt = list_dir(mnt, names, sizeof names);
    cr_assert_eq(cnt, 1, "left in the full directory: %s", names);
    cr_assert_str_eq(names, "out.onnx");

    /* external data: the data file does not fit; the model and an existing data file
     * stay as they were */
    char *ext_data = path_in(mnt, "out.onnx.data");
    cr_assert_eq(tu_write_file(ext_data, "old", 3), 0);
    rc = run(&o, "'%s' convert '%s' '%s' --external-data", ONNXQ_EXE, large, out);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, o);
    cr_assert_eq(count_lines(o), 1, "%s", o);
    cr_assert(strstr(o, "No space left on device"), "%s", o);
    free(o);
    assert_same_bytes(out, prev);
    size_t l;
    char *old = tu_read_file(ext_data, &l);
    cr_assert(l == 3 && memcmp(old, "old", 3) == 0);
    free(old);
    cnt = list_dir(mnt, names, sizeof names);
    cr_assert_eq(cnt, 2, "left in the full directory: %s", names);

    /* and once space is back, the same command works */
    cr_assert_eq(unlink(ext_data), 0);
    cr_assert_eq(umount(mnt), 0);
    mounted[0] = 0;
    free(ext_data);
    free(out);
    free(prev);
    free(small);
    free(large);
    free(mnt);
    rm_rf(dir);
    free(dir);
}

/* ------------------------------------------------------------ > 2 GiB */

/* A tensor of 2 GiB + 64 KiB of raw bytes, borrowed from a sparse file so the test
 * needs no RAM for it: the writer must switch to external data on its own. Runs in a
 * few seconds (it writes 2 GiB to the temp directory). Set ONNXQ_SKIP_2GB=1 to skip. */
Test(io, over_2gib_goes_external_automatically, .timeout = 120)
{
    if (getenv("ONNXQ_SKIP_2GB"))
        cr_skip_test("ONNXQ_SKIP_2GB is set");
    char *dir = tu_tmpdir();
    char *src = path_in(dir, "src.bin"), *out = path_in(dir, "big.onnx");
    const int64_t nbytes = (2LL << 30) + (64 << 10);
    int fd = open(src, O_RDWR | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0);
    cr_assert_eq(ftruncate(fd, nbytes), 0);
    /* markers at known places; everything else reads as zero */
    const int64_t marks[4] = {0, 1 << 20, (2LL << 30) - 1, nbytes - 1};
    for (int i = 0; i < 4; i++) {
        uint8_t b = (uint8_t)(0x11 * (i + 1));
        cr_assert_eq(pwrite(fd, &b, 1, marks[i]), 1);
    }
    uint8_t *map = mmap(NULL, (size_t)nbytes, PROT_READ, MAP_SHARED, fd, 0);
    cr_assert_neq(map, MAP_FAILED);
    close(fd);

    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 17);
    int64_t tiny = 1;
    uint8_t z = 0;
    oq_value *w = oq_graph_add_initializer(m->graph, "huge", OQ_DTYPE_UINT8, &tiny, 1, &z, 1);
    oq_tensor *t = w->initializer;
    t->dims[0] = nbytes; /* point the tensor at the mapped file: no copy */
    t->raw.data = map;
    t->raw.len = (size_t)nbytes;
    t->view = map;
    t->view_nbytes = nbytes;
    oq_value *y = val(m->graph, "y");
    oq_graph_append(m->graph, oq_node_new(m->graph, "Identity", NULL, "id", &w, 1, &y, 1));
    oq_graph_add_output(m->graph, y, NULL);
    write_ok(m, out, NULL); /* default options: keep as is, but > 2 GiB must go external */
    oq_model_free(m);
    munmap(map, (size_t)nbytes);
    unlink(src);

    struct stat st;
    cr_assert_eq(stat(out, &st), 0);
    cr_assert_lt(st.st_size, 4096, "model file is %lld bytes", (long long)st.st_size);
    char *data = path_in(dir, "big.onnx.data");
    cr_assert_eq(stat(data, &st), 0);
    cr_assert_eq(st.st_size, nbytes);
    m = read_ok(out);
    oq_tensor *r = m->graph->initializers[0];
    cr_assert(oq_tensor_is_external(r));
    const uint8_t *p = tdata(r, nbytes);
    cr_assert(r->view_borrowed);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(p[marks[i]], 0x11 * (i + 1), "marker %d", i);
    cr_assert_eq(p[12345], 0);
    oq_model_free(m);
    /* --inline must refuse, clearly, and leave nothing behind */
    char *inl = path_in(dir, "inline.onnx");
    char *o = NULL;
    int rc = run(&o, "'%s' convert '%s' '%s' --inline", ONNXQ_EXE, out, inl);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, o); /* the job cannot be done: 1 */
    cr_assert_eq(count_lines(o), 1, "%s", o);
    cr_assert(strstr(o, "over the 2 GiB protobuf limit"), "%s", o);
    free(o);
    cr_assert_eq(access(inl, F_OK), -1);
    char names[512];
    cr_assert_eq(list_dir(dir, names, sizeof names), 2, "%s", names);
    free(inl);
    free(data);
    free(src);
    free(out);
    rm_rf(dir);
    free(dir);
}

/* ------------------------------------------------------------ raw_data borrowed from the file */

Test(io, large_raw_data_is_borrowed_from_the_mapped_file)
{
    char *dir = tu_tmpdir();
    char *a = path_in(dir, "a.onnx"), *b = path_in(dir, "b.onnx");
    enum { N = 30000 };
    float *w = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++)
        w[i] = (float)i * 0.125f - 100.0f;
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 17);
    int64_t n = N, three = 3;
    uint8_t small[3] = {1, 2, 3};
    oq_value *sv = oq_graph_add_initializer(m->graph, "small", OQ_DTYPE_UINT8, &three, 1, small, 3);
    oq_value *wv = oq_graph_add_initializer(m->graph, "w", OQ_DTYPE_FLOAT, &n, 1, w, N * 4);
    oq_value *y = val(m->graph, "y"), *z = val(m->graph, "z");
    oq_graph_append(m->graph, oq_node_new(m->graph, "Identity", NULL, "i", &wv, 1, &y, 1));
    oq_graph_append(m->graph, oq_node_new(m->graph, "Identity", NULL, "j", &sv, 1, &z, 1));
    oq_graph_add_output(m->graph, y, NULL);
    oq_graph_add_output(m->graph, z, NULL);
    write_ok(m, a, NULL);
    oq_model_free(m);

    m = read_ok(a);
    oq_tensor *t = m->graph->initializers[1];
    cr_assert_str_eq(t->name, "w");
    cr_assert(t->has_raw);
    cr_assert_eq(t->raw.len, (size_t)N * 4);
    char real[4096], mp[4096];
    cr_assert_not_null(realpath(a, real));
    mapping_of(t->raw.data, mp, sizeof mp);
    cr_assert_str_eq(mp, real, "raw_data of \"w\" was copied, not borrowed");
    cr_assert_eq(t->unk.count, 0, "the internal marker leaked into the unknown fields");
    /* small payloads are copied as before */
    mapping_of(m->graph->initializers[0]->raw.data, mp, sizeof mp);
    cr_assert_str_neq(mp, real);
    /* typed access gets aligned data with the right values */
    const float *p = tdata(t, N * 4);
    cr_assert_eq((uintptr_t)p & 15, 0);
    cr_assert_eq(memcmp(p, w, N * 4), 0);
    write_ok(m, b, NULL);
    assert_same_bytes(a, b);
    const void *raw = t->raw.data;
    oq_model_free(m);
    /* freeing the model releases the mapping */
    mapping_of(raw, mp, sizeof mp);
    cr_assert_str_neq(mp, real, "the model file stays mapped after oq_model_free");
    free(w);
    free(a);
    free(b);
    rm_rf(dir);
    free(dir);
}

/* protobuf wire helpers for hand-made files */
typedef struct { uint8_t *p; size_t n, cap; } wbuf;
static void wb_bytes(wbuf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void wb_varint(wbuf *b, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            c |= 0x80;
        wb_bytes(b, &c, 1);
    } while (v);
}
static void wb_field(wbuf *b, uint32_t tag, const void *p, size_t n)
{
    wb_varint(b, ((uint64_t)tag << 3) | 2);
    wb_varint(b, n);
    wb_bytes(b, p, n);
}
static void wb_int(wbuf *b, uint32_t tag, uint64_t v)
{
    wb_varint(b, (uint64_t)tag << 3);
    wb_varint(b, v);
}

/* A TensorProto holding field number 0x1ffffff0 (which the reader uses internally to
 * mark borrowed raw_data) must come through unchanged, and so must one whose
 * raw_data appears twice (the last one wins, as protobuf says). */
Test(io, hand_made_tensors_with_the_marker_field_number)
{
    char *dir = tu_tmpdir();
    char *in = path_in(dir, "in.onnx"), *out = path_in(dir, "out.onnx");
    enum { NB = 8192 };
    uint8_t *raw = malloc(NB), *raw2 = malloc(NB);
    for (int i = 0; i < NB; i++) {
        raw[i] = (uint8_t)(i * 31);
        raw2[i] = (uint8_t)(i * 7 + 1);
    }
    uint8_t fake[8] = {0, 0, 0, 0, 0, 0, 0, 0}; /* "index 0" */
    wbuf t1 = {0}, t2 = {0}, t3 = {0}, g = {0}, op = {0}, mo = {0};
    /* t1: raw_data + a field with the marker's number */
    wb_int(&t1, 1, NB);
    wb_int(&t1, 2, OQ_DTYPE_UINT8);
    wb_field(&t1, 8, "a", 1);
    wb_field(&t1, 9, raw, NB);
    wb_field(&t1, 0x1ffffff0u, fake, 8);
    /* t2: raw_data twice: the second (raw2) counts */
    wb_int(&t2, 1, NB);
    wb_int(&t2, 2, OQ_DTYPE_UINT8);
    wb_field(&t2, 8, "b", 1);
    wb_field(&t2, 9, raw, NB);
    wb_field(&t2, 9, raw2, NB);
    /* t3: a plain one, borrowed */
    wb_int(&t3, 1, NB);
    wb_int(&t3, 2, OQ_DTYPE_UINT8);
    wb_field(&t3, 8, "c", 1);
    wb_field(&t3, 9, raw2, NB);
    wb_field(&g, 2, "g", 1);
    wb_field(&g, 5, t1.p, t1.n);
    wb_field(&g, 5, t2.p, t2.n);
    wb_field(&g, 5, t3.p, t3.n);
    wb_int(&op, 2, 17);
    wb_int(&mo, 1, 8);
    wb_field(&mo, 7, g.p, g.n);
    wb_field(&mo, 8, op.p, op.n);
    cr_assert_eq(tu_write_file(in, mo.p, mo.n), 0);

    /* second file: only t2 and t3, so the reader does borrow t3 */
    char *in2 = path_in(dir, "in2.onnx");
    wbuf g2 = {0}, mo2 = {0};
    wb_field(&g2, 2, "g", 1);
    wb_field(&g2, 5, t2.p, t2.n);
    wb_field(&g2, 5, t3.p, t3.n);
    wb_int(&mo2, 1, 8);
    wb_field(&mo2, 7, g2.p, g2.n);
    wb_field(&mo2, 8, op.p, op.n);
    cr_assert_eq(tu_write_file(in2, mo2.p, mo2.n), 0);
    oq_model *m = read_ok(in2);
    char real[4096], mp[4096];
    cr_assert_not_null(realpath(in2, real));
    mapping_of(m->graph->initializers[1]->raw.data, mp, sizeof mp);
    cr_assert_str_eq(mp, real, "t3 not borrowed");
    mapping_of(m->graph->initializers[0]->raw.data, mp, sizeof mp);
    cr_assert_str_neq(mp, real, "t2 (raw_data twice) must not be borrowed");
    cr_assert_eq(memcmp(tdata(m->graph->initializers[0], NB), raw2, NB), 0, "the last raw_data must win");
    cr_assert_eq(memcmp(tdata(m->graph->initializers[1], NB), raw2, NB), 0);
    cr_assert_eq(m->graph->initializers[1]->unk.count, 0);
    oq_model_free(m);
    free(g2.p);
    free(mo2.p);
    free(in2);

    m = read_ok(in);
    cr_assert_eq(m->graph->n_initializers, 3);
    oq_tensor *a = m->graph->initializers[0], *b = m->graph->initializers[1],
              *c = m->graph->initializers[2];
    cr_assert_eq(a->unk.count, 1, "the input's own field 0x1ffffff0 was lost");
    cr_assert_eq(a->unk.fields[0].tag, 0x1ffffff0u);
    cr_assert_eq(memcmp(tdata(a, NB), raw, NB), 0);
    cr_assert_eq(memcmp(tdata(b, NB), raw2, NB), 0, "the last raw_data must win");
    cr_assert_eq(memcmp(tdata(c, NB), raw2, NB), 0);
    cr_assert_eq(c->unk.count, 0);
    write_ok(m, out, NULL);
    oq_model_free(m);
    /* written back: t1 and t3 as they were; t2 with its one effective raw_data */
    m = read_ok(out);
    cr_assert_eq(m->graph->initializers[0]->unk.count, 1);
    cr_assert_eq(memcmp(tdata(m->graph->initializers[0], NB), raw, NB), 0);
    cr_assert_eq(memcmp(tdata(m->graph->initializers[1], NB), raw2, NB), 0);
    cr_assert_eq(memcmp(tdata(m->graph->initializers[2], NB), raw2, NB), 0);
    oq_model_free(m);
    free(t1.p);
    free(t2.p);
    free(t3.p);
    free(g.p);
    free(op.p);
    free(mo.p);
    free(raw);
    free(raw2);
    free(in);
    free(out);
    rm_rf(dir);
    free(dir);
}

/* Memory amplification: 200,000 empty NodeProtos are 400 KB on the wire (2 bytes each)
 * but about 90 MB once unpacked and converted. With ONNXQ_MAX_MEMORY below that the
 * reader refuses before unpacking, with one line giving the estimate, the counts and the
 * limit; without the limit the same bytes are read (and fail the model check: the nodes
 * have no op_type). A TensorProto of 1,000,000 packed int64 zeros (1 MB, each varint one
 * byte, 8 bytes once unpacked) is refused by the tensor-file reader the same way. */
static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        p[n++] = (uint8_t)(b | (v ? 0x80 : 0));
    } while (v);
    return n;
}

Test(io, memory_amplification_is_refused_up_front)
{
    const size_t n_nodes = 200000;
    size_t glen = 2 * n_nodes;
    uint8_t *buf = malloc(glen + 32);
    cr_assert(buf);
    size_t k = 0;
    buf[k++] = 0x08; /* ir_version = 8 */
    buf[k++] = 0x08;
    buf[k++] = 0x3a; /* graph, field 7, length-delimited */
    k += put_varint(buf + k, glen);
    for (size_t i = 0; i < n_nodes; i++) {
        buf[k++] = 0x0a; /* node, field 1 */
        buf[k++] = 0x00; /* empty */
    }
    oq_diag d;
    oq_diag_init(&d);
    oq_model *m = NULL;
    setenv("ONNXQ_MAX_MEMORY", "16M", 1);
    oq_status st = oq_model_read_buffer(buf, k, "many.onnx", NULL, &m, &d);
    unsetenv("ONNXQ_MAX_MEMORY");
    cr_assert_eq(st, OQ_ERR_INVALID);
    cr_assert_null(m);
    cr_assert_eq(d.count, 1);
    const char *msg = d.entries[0].message;
    cr_assert(strstr(msg, "200001 messages") && strstr(msg, "more than the limit of 16.0 MiB (ONNXQ_MAX_MEMORY)"),
              "%s", msg);
    /* the estimate is in MiB, between the struct sizes (> 40 MB) and 10x that */
    double mib = 0;
    cr_assert(sscanf(strstr(msg, "about ") + 6, "%lf MiB", &mib) == 1, "%s", msg);
    cr_assert(mib > 40 && mib < 400, "%s", msg);
    oq_diag_free(&d);

    oq_diag_init(&d);
    st = oq_model_read_buffer(buf, k, "many.onnx", NULL, &m, &d);
    cr_assert_neq(st, OQ_OK);
    cr_assert(d.count >= 1 && !strstr(d.entries[0].message, "memory"), "%s", d.entries[0].message);
    oq_diag_free(&d);
    free(buf);

    /* tensor file: dims [1000000], data_type INT64 (7), int64_data packed zeros */
    const size_t n = 1000000;
    uint8_t *t = malloc(n + 32);
    cr_assert(t);
    k = 0;
    t[k++] = 0x08; /* dims = 1000000 */
    k += put_varint(t + k, n);
    t[k++] = 0x10; /* data_type = 7 */
    t[k++] = 7;
    t[k++] = 0x3a; /* int64_data, field 7, packed */
    k += put_varint(t + k, n);
    memset(t + k, 0, n);
    k += n;
    char *dir = tu_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/big.pb", dir);
    cr_assert_eq(tu_write_file(path, t, k), 0);
    free(t);
    oq_rt_tensor rt;
    memset(&rt, 0, sizeof rt);
    oq_diag_init(&d);
    setenv("ONNXQ_MAX_MEMORY", "2M", 1);
    st = oq_tensor_file_read(path, &rt, NULL, &d);
    unsetenv("ONNXQ_MAX_MEMORY");
    cr_assert_eq(st, OQ_ERR_INVALID);
    cr_assert(d.count >= 1 && strstr(d.entries[0].message, "1000001 repeated values") /* + dims */, "%s",
              d.count ? d.entries[0].message : "");
    cr_assert(d.entries[0].file && strcmp(d.entries[0].file, path) == 0, "the error names the file");
    oq_diag_free(&d);
    oq_diag_init(&d);
    st = oq_tensor_file_read(path, &rt, NULL, &d);
    cr_assert_eq(st, OQ_OK, "%s", d.count ? d.entries[0].message : "");
    cr_assert_eq(oq_rt_tensor_numel(&rt), (int64_t)n);
    oq_rt_tensor_release(&rt);
    oq_diag_free(&d);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    tu_run(cmd, NULL);
    free(dir);
}
