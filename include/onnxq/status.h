/* onnxq — status codes and the diagnostics sink.
 *
 * Every library function that can fail returns an oq_status (0 = OQ_OK) and records
 * what went wrong in an oq_diag: message, file, node name and op type, so that the
 * CLI can print one actionable line per error. The library never calls exit() or
 * abort().
 */
#ifndef ONNXQ_STATUS_H
#define ONNXQ_STATUS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum oq_status {
    OQ_OK = 0,
    OQ_ERR_IO = 1,          /* cannot open/read/write a file, disk full */
    OQ_ERR_PARSE = 2,       /* bytes are not a valid protobuf / tensor file */
    OQ_ERR_INVALID = 3,     /* parses, but violates the ONNX rules we check */
    OQ_ERR_UNSUPPORTED = 4, /* valid, but onnxq cannot do it */
    OQ_ERR_NOMEM = 5,
    OQ_ERR_USAGE = 6,       /* a caller passed bad arguments */
    OQ_ERR_NUMERIC = 7,     /* NaN/Inf or overflow in data */
    OQ_ERR_INTERNAL = 8,
    OQ_ERR_STOPPED = 9      /* oq_stop_request() stopped the work (Ctrl-C in a front end) */
} oq_status;

const char *oq_status_name(oq_status s);
/* Ask the work running in this process (calibration and every sample loop built on
 * oq_calib_run, pipelines between passes) to stop at the next sample or pass: it returns
 * OQ_ERR_STOPPED with the error "stopped". Safe from a signal handler or another thread;
 * oq_stop_clear() before the next job. */
void oq_stop_request(void);
void oq_stop_clear(void);
bool oq_stop_requested(void);

typedef enum oq_severity { OQ_SEV_NOTE = 0, OQ_SEV_WARNING = 1, OQ_SEV_ERROR = 2 } oq_severity;

typedef struct oq_diag_entry {
    oq_severity severity;
    oq_status code;
    char *file;    /* may be NULL */
    char *node;    /* node name, may be NULL */
    char *op;      /* op type, may be NULL */
    char *message; /* never NULL */
    /* How bad this entry is among entries of its kind (0 unless set with
     * oq_diag_set_weight): a front end that shows one line for many entries of one
     * kind shows the one of largest weight. Appended in ABI 1.0's lifetime: plugins
     * never index entries, they add them through the host table. */
    double weight;
} oq_diag_entry;

typedef struct oq_diag {
    oq_diag_entry *entries;
    size_t count, cap;
    size_t errors, warnings;
    const char *file; /* default file name attached to new entries (borrowed) */
    /* Optional live sink: called for every entry as it is recorded. */
    void (*sink)(const oq_diag_entry *e, void *user);
    void *sink_user;
} oq_diag;

void oq_diag_init(oq_diag *d);
void oq_diag_free(oq_diag *d);
void oq_diag_clear(oq_diag *d);

/* Record an entry; returns `code` so callers can write `return oq_diag_error(...)`.
 * file/node/op may be NULL (file then defaults to d->file). d may be NULL. */
oq_status oq_diag_add(oq_diag *d, oq_severity sev, oq_status code, const char *file,
                      const char *node, const char *op, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 7, 8)))
#endif
    ;
oq_status oq_diag_vadd(oq_diag *d, oq_severity sev, oq_status code, const char *file,
                       const char *node, const char *op, const char *fmt, va_list ap);

/* Set the weight of the entry recorded last (no-op on an empty or NULL diag). */
void oq_diag_set_weight(oq_diag *d, double weight);

/* Whether entries a and b are of one kind: same severity, code and op type, and the
 * same message once numbers and quoted names are left out ("channel 7 (-0.8)" and
 * "channel 51 (-0.4)" are one kind). Front ends group repeated notes with it. */
bool oq_diag_same_kind(const oq_diag_entry *a, const oq_diag_entry *b);

#define oq_diag_error(d, code, ...) oq_diag_add((d), OQ_SEV_ERROR, (code), NULL, NULL, NULL, __VA_ARGS__)
#define oq_diag_warn(d, ...) oq_diag_add((d), OQ_SEV_WARNING, OQ_OK, NULL, NULL, NULL, __VA_ARGS__)

/* Format one entry as a single line without a trailing newline:
 *   model.onnx: node "conv_12" (Conv): weight has 3 dims, expected 4
 * Returns the number of characters that would have been written (snprintf rules). */
int oq_diag_format(const oq_diag_entry *e, char *buf, size_t size);

/* Add every entry of src to d (in order, weights kept). */
void oq_diag_append(oq_diag *d, const oq_diag *src);

/* The first error entry, or NULL. */
const oq_diag_entry *oq_diag_first_error(const oq_diag *d);

#ifdef __cplusplus
}
#endif
#endif
