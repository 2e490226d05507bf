/* Executor: plan/run API, thread-count independence, memory reuse, observers,
 * dynamic shapes, error messages, QuantizeLinear exactness, tensor files. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/exec.h"
#include "onnxq/onnxq.h"
#include "onnxq/tensor_io.h"
#include "testutil.h"

static uint64_t rng_state = 42;
static float frand(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng_state >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

static oq_value *add_input(oq_model *m, const char *name, int32_t dt, const int64_t *dims,
                           const char *const *names, size_t rank)
{
    oq_value *v = oq_graph_new_value(m->graph, name);
    oq_graph_add_input(m->graph, v, oq_type_tensor(m, dt, dims, names, rank));
    return v;
}

static oq_node *add_node(oq_model *m, const char *op, const char *name, oq_value **ins,
                         size_t n_in, const char *out_name, oq_value **out)
{
    oq_value *o = oq_graph_new_value(m->graph, out_name);
    oq_node *n = oq_node_new(m->graph, op, NULL, name, ins, n_in, &o, 1);
    oq_graph_append(m->graph, n);
    *out = o;
    return n;
}

/* x[1,C,H,W] -> Conv(3x3, pad 1, groups 2, bias) -> Relu -> y */
static oq_model *conv_model(int64_t C, int64_t M, int64_t H, int64_t W, float **wout,
                            float **bout)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    int64_t xd[4] = {1, C, H, W};
    oq_value *x = add_input(m, "x", OQ_DTYPE_FLOAT, xd, NULL, 4);
    int64_t wd[4] = {M, C / 2, 3, 3};
    size_t wn = (size_t)(M * (C / 2) * 9);
    float *w = malloc(wn * sizeof(float)), *b = malloc((size_t)M * sizeof(float));
    for (size_t i = 0; i < wn; i++)
        w[i] = frand();
    for (int64_t i = 0; i < M; i++)
        b[i] = frand();
    oq_value *wv = oq_graph_add_initializer(m->graph, "w", OQ_DTYPE_FLOAT, wd, 4, w,
                                            (int64_t)(wn * sizeof(float)));
    int64_t bd[1] = {M};
    oq_value *bv = oq_graph_add_initializer(m->graph, "b", OQ_DTYPE_FLOAT, bd, 1, b,
                                            (int64_t)((size_t)M * sizeof(float)));
    oq_value *ins[3] = {x, wv, bv}, *c, *y;
    oq_node *conv = add_node(m, "Conv", "conv0", ins, 3, "c", &c);
    int64_t pads[4] = {1, 1, 1, 1};
    oq_node_set_attr_ints(conv, "pads", pads, 4);
    oq_node_set_attr_int(conv, "group", 2);
    add_node(m, "Relu", "relu0", &c, 1, "y", &y);
    oq_graph_add_output(m->graph, y, NULL);
    *wout = w;
    *bout = b;
    return m;
}

Test(exec, conv_matches_naive_reference_and_is_thread_independent)
{
    const int64_t C = 6, M = 8, H = 17, W = 23;
    float *w, *b;
    oq_model *m = conv_model(C, M, H, W, &w, &b);
    size_t xn = (size_t)(C * H * W);
    float *x = malloc(xn * sizeof(float));
    for (size_t i = 0; i < xn; i++)
        x[i] = frand();
    /* independent reference: direct grouped convolution in double */
    double *ref = calloc((size_t)(M * H * W), sizeof(double));
    for (int64_t mo = 0; mo < M; mo++) {
        int64_t g = mo / (M / 2);
        for (int64_t oh = 0; oh < H; oh++)
            for (int64_t ow = 0; ow < W; ow++) {
                double acc = b[mo];
                for (int64_t ci = 0; ci < C / 2; ci++)
                    for (int64_t kh = 0; kh < 3; kh++)
                        for (int64_t kw = 0; kw < 3; kw++) {
                            int64_t ih = oh + kh - 1, iw = ow + kw - 1;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                continue;
                            acc += (double)x[((g * (C / 2) + ci) * H + ih) * W + iw] *
                                   w[((mo * (C / 2) + ci) * 3 + kh) * 3 + kw];
                        }
                ref[(mo * H + oh) * W + ow] = acc > 0 ? acc : 0;
            }
    }
    int64_t xd[4] = {1, C, H, W};
    oq_rt_tensor in;
    cr_assert_eq(oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, xd, 4, x), OQ_OK);
    oq_rt_tensor first;
    memset(&first, 0, sizeof first);
    for (int threads = 1; threads <= 4; threads++) {
        oq_diag d;
        oq_diag_init(&d);
        oq_plan_options o = oq_plan_options_default();
        o.threads = threads;
        oq_plan *p;
        cr_assert_eq(oq_plan_compile(m, &o, &p, &d), OQ_OK);
        oq_rt_tensor out;
        cr_assert_eq(oq_plan_run(p, &in, 1, &out, 1, &d), OQ_OK);
        cr_assert_eq(out.rank, 4);
        cr_assert_eq(out.dims[1], M);
        const float *y = out.data;
        for (int64_t i = 0; i < M * H * W; i++)
            cr_assert(fabs(y[i] - ref[i]) <= 1e-4 + 1e-4 * fabs(ref[i]), "element %lld: %g vs %g",
                      (long long)i, y[i], ref[i]);
        if (threads == 1)
            first = out;
        else {
            cr_assert_eq(memcmp(first.data, out.data, (size_t)out.nbytes), 0,
                         "result with %d threads differs from 1 thread", threads);
            oq_rt_tensor_release(&out);
        }
        oq_plan_free(p);
        oq_diag_free(&d);
    }
    oq_rt_tensor_release(&first);
    free(ref);
    free(x);
    free(w);
    free(b);
    oq_model_free(m);
}

typedef struct obs {
    int calls;
    float first_of_r3;
} obs;

static void observer(const oq_node *n, size_t idx, const oq_rt_tensor *t, void *user)
{
    obs *o = user;
    o->calls++;
    if (strcmp(n->name, "r3") == 0)
        o->first_of_r3 = ((const float *)t->data)[0];
}

typedef struct stop_obs {
    oq_plan *plan;
    int calls;
    const char *stop_at;
} stop_obs;

static void stopping_observer(const oq_node *n, size_t idx, const oq_rt_tensor *t, void *user)
{
    (void)idx, (void)t;
    stop_obs *o = user;
    o->calls++;
    if (o->stop_at && strcmp(n->name, o->stop_at) == 0)
        oq_plan_stop(o->plan);
}

/* oq_plan_stop from the observer ends the run after that node: OQ_OK, no outputs; the
 * next run is whole again */
Test(exec, observer_can_stop_a_run)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    int64_t dims[1] = {4};
    oq_value *v = add_input(m, "x", OQ_DTYPE_FLOAT, dims, NULL, 1);
    for (int i = 0; i < 6; i++) {
        char nn[16], vn[16];
        snprintf(nn, sizeof nn, "r%d", i);
        snprintf(vn, sizeof vn, "v%d", i);
        add_node(m, "Neg", nn, &v, 1, vn, &v);
    }
    oq_graph_add_output(m->graph, v, NULL);
    stop_obs ob = {NULL, 0, "r2"};
    oq_plan_options o = oq_plan_options_default();
    o.on_tensor = stopping_observer;
    o.user = &ob;
    oq_diag d;
    oq_diag_init(&d);
    oq_plan *p;
    cr_assert_eq(oq_plan_compile(m, &o, &p, &d), OQ_OK);
    ob.plan = p;
    float x[4] = {1, 2, 3, 4};
    oq_rt_tensor in, out;
    oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, dims, 1, x);
    cr_assert_eq(oq_plan_run(p, &in, 1, &out, 1, &d), OQ_OK);
    cr_assert_eq(ob.calls, 3, "r0, r1, r2 observed, then the run stopped (got %d)", ob.calls);
    cr_assert_null(out.data);
    ob.calls = 0;
    ob.stop_at = NULL;
    cr_assert_eq(oq_plan_run(p, &in, 1, &out, 1, &d), OQ_OK);
    cr_assert_eq(ob.calls, 6);
    cr_assert_float_eq(((float *)out.data)[3], 4.0f, 0); /* six negations */
    oq_rt_tensor_release(&out);
    oq_plan_free(p);
    oq_diag_free(&d);
    oq_model_free(m);
}

/* x -> Neg -> Relu ... a chain of 10 unary nodes */
Test(exec, buffers_are_reused_and_observer_sees_every_tensor)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    int64_t dims[1] = {1000};
    oq_value *v = add_input(m, "x", OQ_DTYPE_FLOAT, dims, NULL, 1);
    for (int i = 0; i < 10; i++) {
        char nn[16], vn[16];
        snprintf(nn, sizeof nn, "r%d", i);
        snprintf(vn, sizeof vn, "v%d", i);
        add_node(m, i % 2 ? "Abs" : "Neg", nn, &v, 1, vn, &v);
    }
    oq_graph_add_output(m->graph, v, NULL);
    obs ob = {0, 0};
    oq_plan_options o = oq_plan_options_default();
    o.threads = 2;
    o.on_tensor = observer;
    o.user = &ob;
    oq_diag d;
    oq_diag_init(&d);
    oq_plan *p;
    cr_assert_eq(oq_plan_compile(m, &o, &p, &d), OQ_OK);
    /* static shapes: the compile-time estimate is two 4000-byte buffers (64-rounded) */
    cr_assert_eq(oq_plan_peak_bytes(p), 2 * 4032);
    float x[1000];
    for (int i = 0; i < 1000; i++)
        x[i] = (float)i + 1;
    oq_rt_tensor in, out;
    oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, dims, 1, x);
    cr_assert_eq(oq_plan_run(p, &in, 1, &out, 1, &d), OQ_OK);
    cr_assert_eq(ob.calls, 10);
    /* r0 Neg, r1 Abs, r2 Neg, r3 Abs: positive again */
    cr_assert_float_eq(ob.first_of_r3, 1.0f, 0);
    cr_assert_float_eq(((float *)out.data)[999], 1000.0f, 0);
    cr_assert_eq(oq_plan_total_bytes(p), 10 * 4000);
    cr_assert_eq(oq_plan_peak_bytes(p), 2 * 4032);
    oq_rt_tensor_release(&out);
    oq_plan_free(p);
    oq_diag_free(&d);
    oq_model_free(m);
}

/* Four weights made by constant-only nodes (Neg of an initializer, as a weight's
 * DequantizeLinear), all listed before the chain x -> MatMul w0 -> ... -> MatMul w3 that
 * reads them (QDQ writers put them first). Not folded (no_fold), each is made just before
 * its MatMul and freed after: the pool holds one 64 KB weight, not four, and the results
 * and the observer's order of the chain are those of the graph. */
Test(exec, constant_only_nodes_run_before_their_first_consumer)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    int64_t xd[2] = {1, 128}, wd[2] = {128, 128};
    static float w[128 * 128];
    for (int i = 0; i < 128 * 128; i++)
        w[i] = (i % 129 == 0) ? -1.0f : 0.0f; /* Neg gives the identity */
    oq_value *x = add_input(m, "x", OQ_DTYPE_FLOAT, xd, NULL, 2), *wv[4];
    for (int i = 0; i < 4; i++) {
        char in[8], nn[8], vn[8];
        snprintf(in, sizeof in, "wi%d", i);
        snprintf(nn, sizeof nn, "neg%d", i);
        snprintf(vn, sizeof vn, "w%d", i);
        oq_value *iv = oq_graph_add_initializer(m->graph, in, OQ_DTYPE_FLOAT, wd, 2, w, sizeof w);
        add_node(m, "Neg", nn, &iv, 1, vn, &wv[i]);
    }
    oq_value *v = x;
    for (int i = 0; i < 4; i++) {
        char nn[8], vn[8];
        snprintf(nn, sizeof nn, "mm%d", i);
        snprintf(vn, sizeof vn, "y%d", i);
        oq_value *ins[2] = {v, wv[i]};
        add_node(m, "MatMul", nn, ins, 2, vn, &v);
    }
    oq_graph_add_output(m->graph, v, NULL);
    oq_plan_options o = oq_plan_options_default();
    o.threads = 1;
    o.no_fold = true;
    oq_diag d;
    oq_diag_init(&d);
    oq_plan *p;
    cr_assert_eq(oq_plan_compile(m, &o, &p, &d), OQ_OK);
    float xs[128];
    for (int i = 0; i < 128; i++)
        xs[i] = (float)i - 60;
    oq_rt_tensor in, out;
    oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, xd, 2, xs);
    cr_assert_eq(oq_plan_run(p, &in, 1, &out, 1, &d), OQ_OK);
    for (int i = 0; i < 128; i++)
        cr_assert_float_eq(((float *)out.data)[i], xs[i], 0);
    /* one 65536-byte weight and the [1, 128] activations around it, not four weights */
    int64_t peak = oq_plan_peak_bytes(p);
    cr_assert(peak >= 65536 && peak < 2 * 65536, "pool %lld bytes", (long long)peak);
    oq_rt_tensor_release(&out);
    oq_plan_free(p);
    oq_diag_free(&d);
    oq_model_free(m);
}

Test(exec, symbolic_dims_are_bound_per_run)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    int64_t dims[2] = {-1, 3};
    const char *names[2] = {"batch", NULL};
    oq_value *x = add_input(m, "x", OQ_DTYPE_FLOAT, dims, names, 2), *s, *y;
    add_node(m, "Shape", "shape", &x, 1, "s", &s);
    oq_value *ins[2] = {x, s};
    add_node(m, "Reshape", "reshape", ins, 2, "y", &y);
    oq_value *t;
    add_node(m, "Transpose", "tr", &y, 1, "t", &t);
    oq_graph_add_output(m->graph, t, NULL);
    oq_diag d;
    oq_diag_init(&d);
    oq_plan *p;
    cr_assert_eq(oq_plan_compile(m, NULL, &p, &d), OQ_OK);
    cr_assert_str_eq(oq_plan_input_dim_name(p, 0, 0), "batch");
    for (int64_t b = 1; b <= 3; b++) {
        float x0[9];
        for (int i = 0; i < 9; i++)
            x0[i] = (float)i;
        int64_t xd[2] = {b, 3};
        oq_rt_tensor in, out;
        oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, xd, 2, x0);
        cr_assert_eq(oq_plan_run(p, &in, 1, &out, 1, &d), OQ_OK);
        cr_assert_eq(out.dims[0], 3);
        cr_assert_eq(out.dims[1], b);
        /* transpose of [[0,1,2],[3,4,5]..]: out[1][b-1] = x[b-1][1] */
        cr_assert_float_eq(((float *)out.data)[1 * b + (b - 1)], (float)((b - 1) * 3 + 1), 0);
        oq_rt_tensor_release(&out);
    }
    /* a wrong fixed dim is refused with the input named */
    float z[4] = {0};
    int64_t bad[2] = {2, 2};
    oq_rt_tensor in, out;
    oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, bad, 2, z);
    cr_assert_eq(oq_plan_run(p, &in, 1, &out, 1, &d), OQ_ERR_USAGE);
    char buf[512];
    oq_diag_format(oq_diag_first_error(&d), buf, sizeof buf);
    cr_assert(strstr(buf, "\"x\"") && strstr(buf, "float32[2,2]"), "%s", buf);
    oq_plan_free(p);
    oq_diag_free(&d);
    oq_model_free(m);
}

Test(exec, unsupported_op_is_an_error_before_running)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 17);
    int64_t dims[1] = {4};
    oq_value *x = add_input(m, "x", OQ_DTYPE_FLOAT, dims, NULL, 1), *y, *z;
    add_node(m, "Relu", "ok_node", &x, 1, "y", &y);
    add_node(m, "FrobnicateTensor", "bad_node", &y, 1, "z", &z);
    oq_graph_add_output(m->graph, z, NULL);
    oq_diag d;
    oq_diag_init(&d);
    oq_plan *p = (oq_plan *)1;
    cr_assert_eq(oq_plan_compile(m, NULL, &p, &d), OQ_ERR_UNSUPPORTED);
    cr_assert_null(p);
    char buf[512];
    oq_diag_format(oq_diag_first_error(&d), buf, sizeof buf);
    cr_assert(strstr(buf, "bad_node") && strstr(buf, "FrobnicateTensor") &&
              strstr(buf, "ai.onnx") && strstr(buf, "opset 17"), "%s", buf);
    oq_diag_free(&d);
    oq_model_free(m);
}

/* Independent reference: saturate(round_half_even(x / s) + zp), NaN -> zp. */
static int ref_q(float x, float s, int zp)
{
    float q = x / s;
    if (isnan(q))
        return zp;
    if (isinf(q))
        return q > 0 ? 127 : -128;
    double f = floor((double)q), r = (double)q - f;
    double n = r > 0.5 ? f + 1 : r < 0.5 ? f : (fmod(f, 2) == 0 ? f : f + 1);
    n += zp;
    return n < -128 ? -128 : n > 127 ? 127 : (int)n;
}

Test(exec, quantize_linear_is_exact)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    enum { N = 4096 };
    int64_t dims[1] = {N};
    oq_value *x = add_input(m, "x", OQ_DTYPE_FLOAT, dims, NULL, 1);
    float s = 0.3f; /* with x = k * 0.05: x / s and x * (1 / s) round apart 48 times */
    int8_t zp = 3;
    int64_t scalar[1] = {0}; /* rank 0: the dims pointer is not read */
    oq_value *sv = oq_graph_add_initializer(m->graph, "s", OQ_DTYPE_FLOAT, scalar, 0, &s, 4);
    oq_value *zv = oq_graph_add_initializer(m->graph, "zp", OQ_DTYPE_INT8, scalar, 0, &zp, 1);
    oq_value *ins[3] = {x, sv, zv}, *y;
    add_node(m, "QuantizeLinear", "q", ins, 3, "y", &y);
    oq_graph_add_output(m->graph, y, NULL);
    float xs[N];
    /* halves (ties), values where x/s and x*(1/s) round differently, specials */
    int i = 0;
    for (; i < 2000; i++)
        xs[i] = ((float)i - 1000.0f) * 0.05f;
    for (; i < N - 4; i++)
        xs[i] = frand() * 20.0f;
    xs[N - 4] = NAN;
    xs[N - 3] = INFINITY;
    xs[N - 2] = -INFINITY;
    xs[N - 1] = 1e30f;
    int differ = 0;
    for (int j = 0; j < N; j++)
        if (ref_q(xs[j], s, 0) != ref_q(xs[j] * (1.0f / s), 1.0f, 0))
            differ++;
    cr_assert(differ > 0, "test data should separate division from reciprocal multiplication");
    oq_diag d;
    oq_diag_init(&d);
    oq_plan *p;
    cr_assert_eq(oq_plan_compile(m, NULL, &p, &d), OQ_OK);
    oq_rt_tensor in, out;
    oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, dims, 1, xs);
    cr_assert_eq(oq_plan_run(p, &in, 1, &out, 1, &d), OQ_OK);
    cr_assert_eq(out.dtype, OQ_DTYPE_INT8);
    for (int j = 0; j < N; j++)
        cr_assert_eq(((int8_t *)out.data)[j], ref_q(xs[j], s, zp), "x=%.9g: got %d want %d", xs[j],
                     ((int8_t *)out.data)[j], ref_q(xs[j], s, zp));
    cr_assert_eq(((int8_t *)out.data)[N - 4], 3);    /* NaN -> zero point */
    cr_assert_eq(((int8_t *)out.data)[N - 3], 127);  /* +Inf -> max */
    cr_assert_eq(((int8_t *)out.data)[N - 2], -128); /* -Inf -> min */
    oq_rt_tensor_release(&out);
    oq_plan_free(p);
    oq_diag_free(&d);
    oq_model_free(m);
}

Test(tensor_io, pb_and_npy_round_trip_and_errors)
{
    char *dir = tu_tmpdir();
    char pb[1024], npy[1024], bad[1024];
    snprintf(pb, sizeof pb, "%s/t.pb", dir);
    snprintf(npy, sizeof npy, "%s/t.npy", dir);
    snprintf(bad, sizeof bad, "%s/bad.npy", dir);
    float v[6] = {1, -2, NAN, INFINITY, 5, 6};
    int64_t dims[2] = {2, 3};
    oq_rt_tensor t, r;
    oq_rt_tensor_borrow(&t, OQ_DTYPE_FLOAT, dims, 2, v);
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_tensor_file_write_pb(pb, &t, "t", &d), OQ_OK);
    cr_assert_eq(oq_tensor_file_write_npy(npy, &t, &d), OQ_OK);
    const char *files[2] = {pb, npy};
    for (int f = 0; f < 2; f++) {
        char *name = NULL;
        cr_assert_eq(oq_tensor_file_read(files[f], &r, &name, &d), OQ_OK, "%s", files[f]);
        cr_assert_eq(r.dtype, OQ_DTYPE_FLOAT);
        cr_assert_eq(r.rank, 2);
        cr_assert_eq(r.dims[1], 3);
        cr_assert_eq(memcmp(r.data, v, sizeof v), 0);
        if (f == 0)
            cr_assert_str_eq(name, "t");
        free(name);
        oq_rt_tensor_release(&r);
    }
    /* the .npy header is what numpy writes: check the text */
    size_t len;
    char *raw = tu_read_file(npy, &len);
    cr_assert(raw && strstr(raw + 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
    cr_assert_eq((10 + (unsigned char)raw[8] + 256 * (unsigned char)raw[9]) % 64, 0);
    free(raw);
    /* big-endian data is refused with a clear message */
    const char hdr[] = "\x93NUMPY\x01\x00\x36\x00{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }    \n";
    char buf[128];
    memcpy(buf, hdr, sizeof hdr - 1);
    memset(buf + sizeof hdr - 1, 0, 4);
    tu_write_file(bad, buf, sizeof hdr - 1 + 4);
    cr_assert_eq(oq_tensor_file_read(bad, &r, NULL, &d), OQ_ERR_UNSUPPORTED);
    char msg[512];
    oq_diag_format(oq_diag_first_error(&d), msg, sizeof msg);
    cr_assert(strstr(msg, "'>f4'") && strstr(msg, "bad.npy"), "%s", msg);
    /* a TensorProto whose raw_data does not match its dims is refused */
    oq_diag_clear(&d);
    const unsigned char badpb[] = {0x08, 0x04, 0x10, 0x01, 0x4a, 0x04, 0, 0, 0x80, 0x3f};
    cr_assert_neq(oq_tensor_buffer_read(badpb, sizeof badpb, "x.pb", &r, NULL, &d), OQ_OK);
    oq_diag_free(&d);
    free(dir);
}

/* np.save of a transposed array writes fortran_order True: the first index varies
 * fastest in the file. Read as numpy reads it: a[i,j,k] = file[i + 2j + 6k] for shape
 * (2, 3, 2); a[i,j] = file[i + 3j] for (3, 2) int64 (np.arange(6).reshape(2, 3).T). */
static void write_npy_raw(const char *path, const char *dict, const void *data, size_t nb)
{
    char buf[512];
    size_t hlen = strlen(dict) + 1; /* the trailing newline */
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    memcpy(buf + 10, dict, hlen - 1);
    buf[10 + hlen - 1] = '\n';
    memcpy(buf + 10 + hlen, data, nb);
    tu_write_file(path, buf, 10 + hlen + nb);
}

Test(tensor_io, npy_fortran_order_reads_as_numpy_does)
{
    char *dir = tu_tmpdir();
    char path[1024];
    snprintf(path, sizeof path, "%s/f.npy", dir);
    oq_diag d;
    oq_diag_init(&d);
    oq_rt_tensor r;
    float f[12];
    for (int i = 0; i < 12; i++)
        f[i] = (float)i;
    write_npy_raw(path, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3, 2), }", f, sizeof f);
    cr_assert_eq(oq_tensor_file_read(path, &r, NULL, &d), OQ_OK);
    cr_assert_eq(r.rank, 3);
    int n = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++, n++)
                cr_assert_eq(((float *)r.data)[n], (float)(i + 2 * j + 6 * k), "element %d", n);
    oq_rt_tensor_release(&r);
    int64_t e[6] = {0, 1, 2, 3, 4, 5};
    write_npy_raw(path, "{'descr': '<i8', 'fortran_order': True, 'shape': (3, 2), }", e, sizeof e);
    cr_assert_eq(oq_tensor_file_read(path, &r, NULL, &d), OQ_OK);
    const int64_t want[6] = {0, 3, 1, 4, 2, 5};
    cr_assert_arr_eq(r.data, want, sizeof want);
    oq_rt_tensor_release(&r);
    /* a header without the key is refused, naming the file */
    write_npy_raw(path, "{'descr': '<i8', 'shape': (3, 2), }", e, sizeof e);
    cr_assert_eq(oq_tensor_file_read(path, &r, NULL, &d), OQ_ERR_PARSE);
    char msg[512];
    oq_diag_format(oq_diag_first_error(&d), msg, sizeof msg);
    cr_assert(strstr(msg, "f.npy") && strstr(msg, "fortran_order"), "%s", msg);
    oq_diag_free(&d);
    free(dir);
}

/* Found by fuzz_tensor: a bool TensorProto holding 80 in int32_data read as the byte 80.
 * numpy_helper.to_array gives True for any non-zero int32 (256 too, whose low byte is 0),
 * and raw_data bytes other than 0/1 read as 1, as .npy bools do. */
Test(tensor_io, bool_tensorproto_values_are_0_or_1)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_rt_tensor r;
    /* dims [4], data_type 9 (BOOL), int32_data packed [80, 0, 256, 1] */
    const unsigned char typed[] = {0x08, 0x04, 0x10, 0x09, 0x2a, 0x05, 0x50, 0x00, 0x80, 0x02, 0x01};
    cr_assert_eq(oq_tensor_buffer_read(typed, sizeof typed, "b.pb", &r, NULL, &d), OQ_OK);
    cr_assert_eq(r.dtype, OQ_DTYPE_BOOL);
    cr_assert_eq(r.nbytes, 4);
    const uint8_t want[4] = {1, 0, 1, 1};
    cr_assert_arr_eq(r.data, want, 4);
    oq_rt_tensor_release(&r);
    /* dims [4], BOOL, raw_data {7, 0, 255, 1} */
    const unsigned char raw[] = {0x08, 0x04, 0x10, 0x09, 0x4a, 0x04, 0x07, 0x00, 0xff, 0x01};
    cr_assert_eq(oq_tensor_buffer_read(raw, sizeof raw, "b.pb", &r, NULL, &d), OQ_OK);
    cr_assert_arr_eq(r.data, want, 4);
    oq_rt_tensor_release(&r);
    /* the fuzzer's input itself: no dims (a scalar), BOOL, int32_data [80] */
    const unsigned char found[] = {0x10, 0x09, 0x28, 0x50};
    cr_assert_eq(oq_tensor_buffer_read(found, sizeof found, "b.pb", &r, NULL, &d), OQ_OK);
    cr_assert_eq(r.rank, 0);
    cr_assert_eq(((uint8_t *)r.data)[0], 1);
    oq_rt_tensor_release(&r);
    cr_assert_eq(d.errors, 0);
    oq_diag_free(&d);
}

/* A real model: PaddleOCR rec (convolutions, depthwise, attention MatMuls, Softmax)
 * gives bit-identical results with 1, 2 and 3 threads. */
Test(exec, paddleocr_rec_is_thread_count_independent)
{
    const char *path = ONNXQ_CACHE_DIR "/ocr/package/assets/ch_PP-OCRv4_rec_infer.onnx";
    const char *env = getenv("ONNXQ_OCR_DIR");
    char buf[1024];
    if (env) {
        snprintf(buf, sizeof buf, "%s/ch_PP-OCRv4_rec_infer.onnx", env);
        path = buf;
    }
    FILE *f = fopen(path, "rb");
    if (!f)
        cr_skip_test("%s not found (set ONNXQ_OCR_DIR)", path);
    fclose(f);
    oq_diag d;
    oq_diag_init(&d);
    oq_model *m = NULL;
    cr_assert_eq(oq_model_read(path, NULL, &m, &d), OQ_OK);
    int64_t dims[4] = {1, 3, 48, 160};
    size_t n = 3 * 48 * 160;
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = frand();
    oq_rt_tensor in, ref;
    oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, dims, 4, x);
    for (int threads = 1; threads <= 3; threads++) {
        oq_plan_options o = oq_plan_options_default();
        o.threads = threads;
        oq_plan *p;
        cr_assert_eq(oq_plan_compile(m, &o, &p, &d), OQ_OK);
        oq_rt_tensor out;
        cr_assert_eq(oq_plan_run(p, &in, 1, &out, 1, &d), OQ_OK);
        if (threads == 1) {
            ref = out;
        } else {
            cr_assert_eq(out.nbytes, ref.nbytes);
            cr_assert_eq(memcmp(out.data, ref.data, (size_t)ref.nbytes), 0,
                         "%d threads differ from 1 thread", threads);
            oq_rt_tensor_release(&out);
        }
        oq_plan_free(p);
    }
    oq_rt_tensor_release(&ref);
    free(x);
    oq_model_free(m);
    oq_diag_free(&d);
}

/* float16 MatMul and Softmax (a float16 decoder's attention and projections): products of
 * float16 values summed in float32 and rounded once to float16. The values are multiples of
 * 1/8 below 4 in magnitude, so every float32 sum is exact and the expected float16 result
 * is the hand sum rounded once; softmax within one float16 step of expf's. */
Test(exec, float16_matmul_and_softmax_round_once_from_float32)
{
    enum { M = 3, K = 5, N = 4 };
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 17);
    int64_t xd[2] = {M, K}, wd[2] = {K, N};
    uint16_t xh[M * K], wh[K * N];
    float xf[M * K], wf[K * N];
    uint64_t rs = 11;
    for (int i = 0; i < M * K; i++) {
        xf[i] = (float)((int)(tu_urand(&rs) * 63) - 31) / 8.0f;
        xh[i] = oq_float_to_half(xf[i]);
        cr_assert_eq(oq_half_to_float(xh[i]), xf[i]);
    }
    for (int i = 0; i < K * N; i++) {
        wf[i] = (float)((int)(tu_urand(&rs) * 63) - 31) / 8.0f;
        wh[i] = oq_float_to_half(wf[i]);
    }
    oq_value *x = oq_graph_new_value(m->graph, "x");
    oq_graph_add_input(m->graph, x, oq_type_tensor(m, OQ_DTYPE_FLOAT16, xd, NULL, 2));
    oq_value *w = oq_graph_add_initializer(m->graph, "w", OQ_DTYPE_FLOAT16, wd, 2, wh, sizeof wh);
    oq_value *y = tu_node(m, "MatMul", "mm", x, w, NULL, "y");
    oq_value *s = tu_node(m, "Softmax", "sm", y, NULL, NULL, "s");
    oq_graph_add_output(m->graph, y, NULL);
    oq_graph_add_output(m->graph, s, NULL);
    oq_diag d;
    oq_diag_init(&d);
    oq_plan *p = NULL;
    cr_assert_eq(oq_plan_compile(m, NULL, &p, &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    oq_rt_tensor in, out[2];
    oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT16, xd, 2, xh);
    cr_assert_eq(oq_plan_run(p, &in, 1, out, 2, &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    cr_assert_eq(out[0].dtype, OQ_DTYPE_FLOAT16);
    cr_assert_eq(out[1].dtype, OQ_DTYPE_FLOAT16);
    const uint16_t *yh = out[0].data, *sh = out[1].data;
    for (int i = 0; i < M; i++) {
        float row[N], mx = -1e30f, sum = 0;
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += xf[i * K + k] * wf[k * N + j];
            row[j] = oq_half_to_float(oq_float_to_half(acc));
            cr_assert_eq(yh[i * N + j], oq_float_to_half(acc), "y[%d][%d]: %g, expected %g", i, j,
                         oq_half_to_float(yh[i * N + j]), acc);
            mx = row[j] > mx ? row[j] : mx;
        }
        for (int j = 0; j < N; j++)
            sum += expf(row[j] - mx);
        for (int j = 0; j < N; j++) {
            float e = expf(row[j] - mx) / sum, got = oq_half_to_float(sh[i * N + j]);
            cr_assert(fabsf(got - e) <= 1.0f / 1024 * (e > 1.0f / 16 ? e : 1.0f / 16), "softmax[%d][%d]: %g, expected %g",
                      i, j, got, e);
        }
    }
    oq_rt_tensor_release(&out[0]);
    oq_rt_tensor_release(&out[1]);
    oq_plan_free(p);
    oq_model_free(m);
    oq_diag_free(&d);
}
