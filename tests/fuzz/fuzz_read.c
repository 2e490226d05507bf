/* libFuzzer target for the reader: bytes -> oq_model_read_buffer -> oq_model_write_buffer
 * -> read again -> write again. Any input may be rejected, but:
 *   - nothing may crash or trip ASan/UBSan,
 *   - a rejected input must return no model and record at least one error,
 *   - every tensor of an accepted model must decode (oq_tensor_data),
 *   - an accepted model must write, re-read and re-write to the same bytes.
 *
 * External data is resolved relative to the working directory; the first call moves
 * into a fresh temporary directory under $TMPDIR holding one small data file ("data.bin"), so the fuzzer can
 * reach the external-data code without touching anything else. Give libFuzzer absolute
 * corpus paths (tests/fuzz/run.sh does). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onnxq/ir.h"
#include "onnxq/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Done on the first input rather than in LLVMFuzzerInitialize: with -jobs=N the parent
 * process must stay where it was started (it writes fuzz-N.log there). */
static void enter_sandbox(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    const char *tmp = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/onnxq-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(tmpl) || chdir(tmpl) != 0) {
        perror("onnxq fuzz: temporary directory");
        abort();
    }
    /* data.bin is what the external-data seeds (good_ext_*.onnx) point at:
     * float32 0..15, as tests/bad/make_bad.py writes it */
    FILE *f = fopen("data.bin", "wb");
    if (f) {
        for (int i = 0; i < 16; i++) {
            float v = (float)i;
            fwrite(&v, sizeof v, 1, f);
        }
        fclose(f);
    }
}

/* Every tensor the reader accepted must decode: what later code (dump --stats, the
 * executor, passes) reads through oq_tensor_data() was validated at load. Walks the
 * graph's initializers and the tensor attributes of its nodes, into subgraphs. */
static void decode_all(oq_graph *g, oq_diag *d, int depth)
{
    if (!g || depth > 200)
        return;
    for (size_t i = 0; i < g->n_initializers; i++)
        if (!oq_tensor_data(g->initializers[i], d))
            abort();
    for (oq_node *n = g->first; n; n = n->next)
        for (size_t k = 0; k < n->n_attrs; k++) {
            oq_attr *a = n->attrs[k];
            if (a->t && !oq_tensor_data(a->t, d))
                abort();
            decode_all(a->g, d, depth + 1);
            for (size_t j = 0; j < a->n_graphs; j++)
                decode_all(a->graphs[j], d, depth + 1);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enter_sandbox();
    oq_diag d;
    oq_diag_init(&d);
    oq_model *m = NULL;
    oq_status st = oq_model_read_buffer(data, size, "fuzz.onnx", NULL, &m, &d);
    if (st != OQ_OK) {
        /* a refusal must say why */
        if (m || d.errors == 0)
            abort();
        oq_diag_free(&d);
        return 0;
    }
    decode_all(m->graph, &d, 0);
    uint8_t *b1 = NULL, *b2 = NULL;
    size_t n1 = 0, n2 = 0;
    st = oq_model_write_buffer(m, &b1, &n1, &d);
    oq_model_free(m);
    m = NULL;
    if (st == OQ_OK) {
        oq_diag_clear(&d);
        /* what we wrote must read back (checker included) and write to the same bytes */
        if (oq_model_read_buffer(b1, n1, "fuzz-rt.onnx", NULL, &m, &d) != OQ_OK)
            abort();
        if (oq_model_write_buffer(m, &b2, &n2, &d) != OQ_OK)
            abort();
        if (n1 != n2 || memcmp(b1, b2, n1) != 0)
            abort();
    }
    oq_model_free(m);
    free(b1);
    free(b2);
    oq_diag_free(&d);
    return 0;
}
