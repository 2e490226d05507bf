/* libFuzzer target for the pipeline-string parser (--passes, opt PIPELINE):
 * text -> oq_pipeline_parse against the built-in registry. Any input may be rejected, but:
 *   - nothing may crash or trip ASan/UBSan,
 *   - a rejected input must return no pipeline, record an error and give an error
 *     position within the text (0..length),
 *   - an accepted pipeline prints (oq_pipeline_to_string) to a canonical text that parses
 *     again to a pipeline of the same passes and prints to the same text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/pass.h"
#include "onnxq/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static oq_registry *reg;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    oq_diag d;
    oq_diag_init(&d);
    if (!reg && oq_registry_new(&reg, &d) != OQ_OK)
        abort();
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    size_t len = strlen(text);
    oq_pipeline *p = NULL;
    size_t pos = (size_t)-1;
    oq_status st = oq_pipeline_parse(reg, text, &p, &pos, &d);
    free(text);
    if (st != OQ_OK) {
        if (p || d.errors == 0 || pos > len)
            abort();
        oq_diag_free(&d);
        return 0;
    }
    if (!p)
        abort();
    char *s1 = oq_pipeline_to_string(p);
    if (s1) {
        oq_pipeline *q = NULL;
        if (oq_pipeline_parse(reg, s1, &q, NULL, &d) != OQ_OK)
            abort();
        if (oq_pipeline_length(q) != oq_pipeline_length(p))
            abort();
        for (size_t i = 0; i < oq_pipeline_length(p); i++)
            if (oq_pipeline_pass(p, i) != oq_pipeline_pass(q, i))
                abort();
        char *s2 = oq_pipeline_to_string(q);
        if (!s2 || strcmp(s1, s2) != 0)
            abort();
        free(s2);
        oq_pipeline_free(q);
        free(s1);
    }
    oq_pipeline_free(p);
    oq_diag_free(&d);
    return 0;
}
