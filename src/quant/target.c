/* Deployment targets: one row each (include/onnxq/target.h, docs/quantize.md). */
#include "onnxq/target.h"

#include <stdlib.h>
#include <string.h>

#include "onnxq/ir.h"

#define GENERIC_OPS "Conv,ConvTranspose,Gemm,MatMul"
/* onnxruntime's CPU provider has no integer ConvTranspose: DQ -> ConvTranspose -> Q runs in
 * float plus two conversions, so it stays float (docs/quantize.md, placement rules) */
#define ORT_OPS "Conv,Gemm,MatMul"

static const oq_target rows[] = {
    {"generic", "plain QDQ for any consumer: uint8 activations, int8 symmetric weights, reference arithmetic",
     OQ_DTYPE_UINT8, OQ_DTYPE_INT8, true, GENERIC_OPS, OQ_PLACE_PLAIN, OQ_ARITH_REFERENCE, NULL},
    {"ort-x86",
     "onnxruntime on any x86-64 CPU (AVX2 included): uint8 activations, int8 symmetric weights "
     "rounded so that no pair saturates AVX2's int16 (U8S8, pair limit), onnxruntime CPU placement",
     OQ_DTYPE_UINT8, OQ_DTYPE_INT8, true, ORT_OPS, OQ_PLACE_ORT_CPU, OQ_ARITH_AVX2, NULL},
    {"ort-x86-vnni",
     "onnxruntime on AVX-512 VNNI / AVX-VNNI / AMX CPUs: uint8 activations, int8 symmetric weights "
     "(U8S8), onnxruntime CPU placement",
     OQ_DTYPE_UINT8, OQ_DTYPE_INT8, true, ORT_OPS, OQ_PLACE_ORT_CPU, OQ_ARITH_EXACT, NULL},
    {"reference", "the arithmetic of the ONNX spec (float between DequantizeLinear and QuantizeLinear)",
     OQ_DTYPE_UINT8, OQ_DTYPE_INT8, true, GENERIC_OPS, OQ_PLACE_PLAIN, OQ_ARITH_REFERENCE, "generic"},
    {"avx2", "onnxruntime's integer kernels on an AVX2 CPU without VNNI", OQ_DTYPE_UINT8, OQ_DTYPE_INT8,
     true, ORT_OPS, OQ_PLACE_ORT_CPU, OQ_ARITH_AVX2, "ort-x86"},
};

#define N_ROWS (sizeof rows / sizeof rows[0])

size_t oq_target_count(void)
{
    return N_ROWS;
}

const oq_target *oq_target_at(size_t i)
{
    return i < N_ROWS ? &rows[i] : NULL;
}

static const oq_target *by_name(const char *name)
{
    for (size_t i = 0; i < N_ROWS; i++)
        if (strcmp(rows[i].name, name) == 0)
            return &rows[i];
    return NULL;
}

static const char *host_reason = "";

/* true: the CPU has an exact u8 x s8 dot product that onnxruntime's MLAS uses
 * (platform.cpp: AVX512VNNI or AVXVNNI dispatch) */
static bool cpu_has_vnni(const char **why)
{
#if defined(__x86_64__) || defined(_M_X64)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw")) {
        *why = "avx512-vnni";
        return true;
    }
    unsigned a = 0, b = 0, c = 0, d = 0;
    /* AVX-VNNI: CPUID.(EAX=7,ECX=1):EAX bit 4 (needs GCC 11+ for __builtin_cpu_supports) */
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0u), "c"(0u));
    if (a >= 7) {
        __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7u), "c"(1u));
        if ((a >> 4) & 1u) {
            *why = "avx-vnni";
            return true;
        }
    }
    *why = __builtin_cpu_supports("avx2") ? "avx2" : "x86-64 without avx2";
    return false;
#else
    *why = "non-x86";
    return true;
#endif
}

const oq_target *oq_target_host(void)
{
    const char *env = getenv("ONNXQ_HOST_CPU");
    if (env && strcmp(env, "avx2") == 0) {
        host_reason = "forced by ONNXQ_HOST_CPU=avx2";
        return by_name("ort-x86");
    }
    if (env && strcmp(env, "vnni") == 0) {
        host_reason = "forced by ONNXQ_HOST_CPU=vnni";
        return by_name("ort-x86-vnni");
    }
    const char *why = "";
    bool vnni = cpu_has_vnni(&why);
    host_reason = why;
    return by_name(vnni ? "ort-x86-vnni" : "ort-x86");
}

const char *oq_target_host_reason(void)
{
    if (!*host_reason)
        (void)oq_target_host();
    return host_reason;
}

const oq_target *oq_target_find(const char *name)
{
    if (!name)
        return NULL;
    if (strcmp(name, "host") == 0)
        return oq_target_host();
    return by_name(name);
}

const char *oq_target_names(void)
{
    return "generic, ort-x86, ort-x86-vnni, host, reference, avx2";
}

/* onnxruntime 1.30, CPU execution provider: the op types of each QDQ rule in
 * qdq_selector_action_transformer.cc (CreateSelectorActionRegistry). Conv, MatMul and Gemm
 * run as integer kernels only with a quantized weight (insert-qdq's selected nodes). */
static const struct {
    const char *op;
    oq_op_role role;
} ort_cpu_roles[] = {
    /* ConvQDQRules: QLinearConv needs the Q after it */
    {"Conv", OQ_ROLE_INT_QOUT},
    /* MatMulQDQRules (MatMulSelector allows MatMulIntegerToFloat), GemmQDQRules (optional Q),
     * DropDQNodesRules (ArgMax) */
    {"MatMul", OQ_ROLE_INT},
    {"Gemm", OQ_ROLE_INT},
    {"ArgMax", OQ_ROLE_INT},
    /* UnaryOpQDQRules, BinaryOpQDQRules, VariadicOpQDQRules, WhereQDQRules */
    {"AveragePool", OQ_ROLE_INT_QOUT},
    {"GlobalAveragePool", OQ_ROLE_INT_QOUT},
    {"LeakyRelu", OQ_ROLE_INT_QOUT},
    {"Sigmoid", OQ_ROLE_INT_QOUT},
    {"Softmax", OQ_ROLE_INT_QOUT},
    {"Add", OQ_ROLE_INT_QOUT},
    {"Mul", OQ_ROLE_INT_QOUT},
    {"Concat", OQ_ROLE_INT_QOUT},
    {"Where", OQ_ROLE_INT_QOUT},
    /* DropQDQNodesRules (equal parameters on both sides), SplitQDQRules */
    {"Expand", OQ_ROLE_PASS},
    {"Flatten", OQ_ROLE_PASS},
    {"Gather", OQ_ROLE_PASS},
    {"GatherElements", OQ_ROLE_PASS},
    {"Reshape", OQ_ROLE_PASS},
    {"Slice", OQ_ROLE_PASS},
    {"Squeeze", OQ_ROLE_PASS},
    {"Tile", OQ_ROLE_PASS},
    {"Transpose", OQ_ROLE_PASS},
    {"Unsqueeze", OQ_ROLE_PASS},
    {"MaxPool", OQ_ROLE_PASS},
    {"ReduceMax", OQ_ROLE_PASS},
    {"ReduceMin", OQ_ROLE_PASS},
    {"Resize", OQ_ROLE_PASS},
    {"Split", OQ_ROLE_PASS},
};

oq_op_role oq_target_op_role(uint32_t placement, const char *op_type)
{
    if (placement != OQ_PLACE_ORT_CPU || !op_type)
        return OQ_ROLE_FLOAT;
    for (size_t i = 0; i < sizeof ort_cpu_roles / sizeof ort_cpu_roles[0]; i++)
        if (strcmp(ort_cpu_roles[i].op, op_type) == 0)
            return ort_cpu_roles[i].role;
    return OQ_ROLE_FLOAT;
}

const char *oq_arith_name(oq_arith a)
{
    switch (a) {
    case OQ_ARITH_REFERENCE: return "reference";
    case OQ_ARITH_EXACT: return "exact";
    case OQ_ARITH_AVX2: return "avx2";
    }
    return "?";
}
