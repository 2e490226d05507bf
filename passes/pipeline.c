/* Pipelines: parse "a,b{x=1,y=foo},c", print back canonically, run with
 * instrumentation (verify-each, timing, statistics, fixed-point reruns). */
#include "pass-impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ option values */

const char *oq_opt_type_name(oq_opt_type t)
{
    switch (t) {
    case OQ_OPT_INT: return "int";
    case OQ_OPT_FLOAT: return "float";
    case OQ_OPT_BOOL: return "bool";
    case OQ_OPT_STRING: return "string";
    }
    return "?";
}

void oq_option_value_free(oq_pass_option_value *v)
{
    free((char *)v->s);
    v->s = NULL;
}

static char *dup_n(const char *s, size_t n)
{
    char *r = malloc(n + 1);
    if (r) {
        memcpy(r, s, n);
        r[n] = 0;
    }
    return r;
}

/* Shortest %g form that reads back as exactly v. */
static void format_double(double v, char *buf, size_t size)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    /* integral values print without an exponent: 1000, not 1e+03 */
    if (strchr(buf, 'e') && v == floor(v) && fabs(v) < 1e15)
        snprintf(buf, size, "%.0f", v);
}

oq_status oq_option_parse_value(const oq_pass_option_def *def, const char *text, size_t len,
                                oq_pass_option_value *out)
{
    memset(out, 0, sizeof(*out));
    out->name = def->name;
    out->type = def->type;
    char *s = dup_n(text, len);
    if (!s)
        return OQ_ERR_NOMEM;
    char buf[64];
    char *end = NULL;
    switch (def->type) {
    case OQ_OPT_INT: {
        errno = 0;
        long long v = len ? strtoll(s, &end, 10) : 0;
        if (!len || errno || *end)
            goto bad;
        out->i = v;
        out->f = (double)v;
        snprintf(buf, sizeof buf, "%lld", v);
        break;
    }
    case OQ_OPT_FLOAT: {
        errno = 0;
        double v = len ? strtod(s, &end) : 0;
        if (!len || errno || *end || !isfinite(v))
            goto bad;
        out->f = v;
        format_double(v, buf, sizeof buf);
        break;
    }
    case OQ_OPT_BOOL: {
        static const char *yes[] = {"1", "true", "yes", "on"}, *no[] = {"0", "false", "no", "off"};
        int which = -1;
        for (int k = 0; k < 4; k++) {
            if (strcmp(s, yes[k]) == 0)
                which = 1;
            if (strcmp(s, no[k]) == 0)
                which = 0;
        }
        if (which < 0)
            goto bad;
        out->i = which;
        snprintf(buf, sizeof buf, "%s", which ? "true" : "false");
        break;
    }
    case OQ_OPT_STRING:
        out->s = s;
        out->is_set = true;
        return OQ_OK;
    }
    free(s);
    out->s = dup_n(buf, strlen(buf));
    if (!out->s)
        return OQ_ERR_NOMEM;
    out->is_set = true;
    return OQ_OK;
bad:
    free(s);
    return OQ_ERR_USAGE;
}

const oq_pass_option_value *oq_pass_option_find(const oq_pass_options *o, const char *name)
{
    if (!o)
        return NULL;
    for (size_t i = 0; i < o->count; i++)
        if (strcmp(o->values[i].name, name) == 0)
            return &o->values[i];
    return NULL;
}

int64_t oq_pass_opt_int(const oq_pass_options *o, const char *name, int64_t dflt)
{
    const oq_pass_option_value *v = oq_pass_option_find(o, name);
    return v && v->is_set && (v->type == OQ_OPT_INT || v->type == OQ_OPT_BOOL) ? v->i : dflt;
}

double oq_pass_opt_float(const oq_pass_options *o, const char *name, double dflt)
{
    const oq_pass_option_value *v = oq_pass_option_find(o, name);
    return v && v->is_set && (v->type == OQ_OPT_FLOAT || v->type == OQ_OPT_INT) ? v->f : dflt;
}

bool oq_pass_opt_bool(const oq_pass_options *o, const char *name, bool dflt)
{
    const oq_pass_option_value *v = oq_pass_option_find(o, name);
    return v && v->is_set && (v->type == OQ_OPT_BOOL || v->type == OQ_OPT_INT) ? v->i != 0 : dflt;
}

const char *oq_pass_opt_string(const oq_pass_options *o, const char *name, const char *dflt)
{
    const oq_pass_option_value *v = oq_pass_option_find(o, name);
    return v && v->is_set && v->s ? v->s : dflt;
}

/* ------------------------------------------------------------ pipelines */

typedef struct pl_entry {
    const oq_pass *pass;
    oq_pass_option_value *values;
    oq_pass_options opts;
} pl_entry;

struct oq_pipeline {
    pl_entry *entries;
    size_t count;
};

void oq_pipeline_free(oq_pipeline *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->count; i++) {
        for (size_t k = 0; k < p->entries[i].opts.count; k++)
            oq_option_value_free(&p->entries[i].values[k]);
        free(p->entries[i].values);
    }
    free(p->entries);
    free(p);
}

size_t oq_pipeline_length(const oq_pipeline *p)
{
    return p->count;
}

const oq_pass *oq_pipeline_pass(const oq_pipeline *p, size_t i)
{
    return i < p->count ? p->entries[i].pass : NULL;
}

const oq_pass_options *oq_pipeline_options(const oq_pipeline *p, size_t i)
{
    return i < p->count ? &p->entries[i].opts : NULL;
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.';
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Characters a bare (unquoted) value may hold. */
static bool bare_char(char c)
{
    return c && !is_space(c) && c != ',' && c != '{' && c != '}' && c != '=' && c != '"' &&
           c != '\\';
}

typedef struct parser {
    const char *text;
    size_t pos;
    size_t *err_pos;
    oq_diag *d;
} parser;

static oq_status perr(parser *p, size_t at, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static oq_status perr(parser *p, size_t at, const char *fmt, ...)
{
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->err_pos)
        *p->err_pos = at;
    return oq_diag_add(p->d, OQ_SEV_ERROR, OQ_ERR_USAGE, NULL, NULL, NULL,
                       "pipeline, column %zu: %s", at + 1, msg);
}

static void skip_ws(parser *p)
{
    while (is_space(p->text[p->pos]))
        p->pos++;
}

static void list_options(const oq_pass *pass, char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; i < pass->n_options && off < size; i++)
        off += (size_t)snprintf(buf + off, size - off, "%s%s", i ? ", " : "", pass->options[i].name);
    if (!pass->n_options)
        snprintf(buf, size, "none");
}

static oq_status parse_options(parser *p, pl_entry *e)
{
    const oq_pass *pass = e->pass;
    p->pos++; /* '{' */
    for (;;) {
        while (is_space(p->text[p->pos]) || p->text[p->pos] == ',')
            p->pos++;
        char c = p->text[p->pos];
        if (c == '}') {
            p->pos++;
            return OQ_OK;
        }
        if (!c)
            return perr(p, p->pos, "missing '}' after the options of \"%s\"", pass->name);
        size_t kstart = p->pos;
        while (name_char(p->text[p->pos]))
            p->pos++;
        if (p->pos == kstart)
            return perr(p, p->pos, "expected an option name, got '%c'", c);
        size_t klen = p->pos - kstart;
        size_t idx = pass->n_options;
        for (size_t i = 0; i < pass->n_options; i++)
            if (strlen(pass->options[i].name) == klen &&
                memcmp(pass->options[i].name, p->text + kstart, klen) == 0)
                idx = i;
        if (idx == pass->n_options) {
            char opts[1024];
            list_options(pass, opts, sizeof opts);
            return perr(p, kstart, "pass \"%s\" has no option \"%.*s\" (options: %s)", pass->name,
                        (int)klen, p->text + kstart, opts);
        }
        if (e->values[idx].explicit_set)
            return perr(p, kstart, "option \"%s\" given twice", pass->options[idx].name);
        skip_ws(p);
        if (p->text[p->pos] != '=')
            return perr(p, p->pos, "expected '=' after option \"%s\"", pass->options[idx].name);
        p->pos++;
        skip_ws(p);
        size_t vstart = p->pos;
        char *val = NULL;
        size_t vlen = 0;
        if (p->text[p->pos] == '"') {
            size_t cap = strlen(p->text + p->pos) + 1;
            val = malloc(cap);
            if (!val)
                return oq_diag_error(p->d, OQ_ERR_NOMEM, "out of memory");
            p->pos++;
            for (;;) {
                char q = p->text[p->pos];
                if (!q) {
                    free(val);
                    return perr(p, vstart, "unterminated quoted value");
                }
                if (q == '"') {
                    p->pos++;
                    break;
                }
                if (q == '\\') {
                    char nx = p->text[p->pos + 1];
                    if (nx != '"' && nx != '\\') {
                        free(val);
                        return perr(p, p->pos, "unknown escape in quoted value (only \\\" and \\\\)");
                    }
                    q = nx;
                    p->pos++;
                }
                val[vlen++] = q;
                p->pos++;
            }
            val[vlen] = 0;
        } else {
            while (bare_char(p->text[p->pos]))
                p->pos++;
            vlen = p->pos - vstart;
            if (!vlen)
                return perr(p, vstart, "expected a value for option \"%s\"", pass->options[idx].name);
            val = dup_n(p->text + vstart, vlen);
            if (!val)
                return oq_diag_error(p->d, OQ_ERR_NOMEM, "out of memory");
        }
        oq_pass_option_value v;
        oq_status s = oq_option_parse_value(&pass->options[idx], val, vlen, &v);
        if (s != OQ_OK) {
            oq_status r = perr(p, vstart, "option \"%s\" of pass \"%s\" needs %s %s, got \"%s\"",
                               pass->options[idx].name, pass->name,
                               pass->options[idx].type == OQ_OPT_INT ? "an" : "a",
                               pass->options[idx].type == OQ_OPT_BOOL ? "bool (true/false/1/0)"
                                                                      : oq_opt_type_name(pass->options[idx].type),
                               val);
            free(val);
            return r;
        }
        free(val);
        oq_option_value_free(&e->values[idx]);
        e->values[idx] = v;
        e->values[idx].explicit_set = true;
        char after = p->text[p->pos];
        if (after && after != ',' && after != '}' && !is_space(after))
            return perr(p, p->pos, "unexpected '%c' after the value of \"%s\"", after,
                        pass->options[idx].name);
    }
}

oq_status oq_pipeline_parse(const oq_registry *reg, const char *text, oq_pipeline **out,
                            size_t *err_pos, oq_diag *d)
{
    parser p = {text, 0, err_pos, d};
    oq_status st = OQ_OK;
    *out = NULL;
    oq_pipeline *pl = calloc(1, sizeof(*pl));
    if (!pl)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    skip_ws(&p);
    if (!text[p.pos]) {
        st = perr(&p, p.pos, "empty pipeline");
        goto fail;
    }
    for (;;) {
        skip_ws(&p);
        size_t nstart = p.pos;
        while (name_char(text[p.pos]))
            p.pos++;
        if (p.pos == nstart) {
            st = text[p.pos] ? perr(&p, p.pos, "expected a pass name, got '%c'", text[p.pos])
                             : perr(&p, p.pos, "expected a pass name after ','");
            goto fail;
        }
        char name[128];
        size_t nlen = p.pos - nstart;
        snprintf(name, sizeof name, "%.*s", (int)(nlen < 127 ? nlen : 127), text + nstart);
        const oq_pass *pass = oq_registry_find(reg, name);
        if (!pass) {
            st = perr(&p, nstart, "unknown pass \"%s\" (onnxq passes lists them)", name);
            goto fail;
        }
        pl_entry *ne = realloc(pl->entries, (pl->count + 1) * sizeof(*ne));
        if (!ne) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            goto fail;
        }
        pl->entries = ne;
        pl_entry *e = &pl->entries[pl->count++];
        memset(e, 0, sizeof(*e));
        e->pass = pass;
        e->values = calloc(pass->n_options ? pass->n_options : 1, sizeof(oq_pass_option_value));
        if (!e->values) {
            pl->count--;
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            goto fail;
        }
        e->opts.struct_size = sizeof(oq_pass_options);
        e->opts.count = pass->n_options;
        e->opts.values = e->values;
        e->opts.pass_user = pass->user;
        for (size_t i = 0; i < pass->n_options; i++) {
            e->values[i].name = pass->options[i].name;
            e->values[i].type = pass->options[i].type;
        }
        skip_ws(&p);
        if (text[p.pos] == '{') {
            st = parse_options(&p, e);
            if (st != OQ_OK)
                goto fail;
        }
        for (size_t i = 0; i < pass->n_options; i++) {
            const oq_pass_option_def *od = &pass->options[i];
            if (e->values[i].explicit_set)
                continue;
            if (!od->default_value) {
                st = perr(&p, nstart, "pass \"%s\" needs option \"%s\" (%s), e.g. %s{%s=...}",
                          pass->name, od->name, od->help ? od->help : oq_opt_type_name(od->type),
                          pass->name, od->name);
                goto fail;
            }
            st = oq_option_parse_value(od, od->default_value, strlen(od->default_value), &e->values[i]);
            if (st != OQ_OK) {
                st = oq_diag_error(d, OQ_ERR_INTERNAL, "pass \"%s\": bad default for \"%s\"",
                                   pass->name, od->name);
                goto fail;
            }
        }
        skip_ws(&p);
        if (!text[p.pos])
            break;
        if (text[p.pos] != ',') {
            st = perr(&p, p.pos, "expected ',' or the end of the pipeline, got '%c'", text[p.pos]);
            goto fail;
        }
        p.pos++;
    }
    *out = pl;
    return OQ_OK;
fail:
    oq_pipeline_free(pl);
    return st;
}

typedef struct sbuf {
    char *s;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = (b->len + n + 1) * 2;
        char *ns = realloc(b->s, nc);
        if (!ns) {
            b->oom = true;
            return;
        }
        b->s = ns;
        b->cap = nc;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

static void sb_str(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

char *oq_pipeline_to_string(const oq_pipeline *p)
{
    sbuf b = {0};
    sb_put(&b, "", 0);
    for (size_t i = 0; i < p->count; i++) {
        const pl_entry *e = &p->entries[i];
        if (i)
            sb_str(&b, ",");
        sb_str(&b, e->pass->name);
        int n = 0;
        for (size_t k = 0; k < e->opts.count; k++) {
            const oq_pass_option_value *v = &e->values[k];
            if (!v->explicit_set)
                continue;
            sb_str(&b, n++ ? "," : "{");
            sb_str(&b, v->name);
            sb_str(&b, "=");
            const char *s = v->s ? v->s : "";
            bool bare = *s != 0;
            for (const char *q = s; *q; q++)
                if (!bare_char(*q))
                    bare = false;
            if (bare) {
                sb_str(&b, s);
            } else {
                sb_str(&b, "\"");
                for (const char *q = s; *q; q++) {
                    if (*q == '"' || *q == '\\')
                        sb_str(&b, "\\");
                    sb_put(&b, q, 1);
                }
                sb_str(&b, "\"");
            }
        }
        if (n)
            sb_str(&b, "}");
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* ------------------------------------------------------------ running */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void merge_result(oq_pass_result *acc, const oq_pass_result *r)
{
    acc->changed = acc->changed || r->changed;
    for (size_t i = 0; i < r->n_stats; i++)
        oq_pass_stat_add(acc, r->stats[i].name, r->stats[i].value);
}

oq_status oq_pipeline_run(const oq_pipeline *p, oq_model *m, const oq_pipeline_run_options *ro,
                          oq_diag *d)
{
    oq_pipeline_run_options dflt = {0};
    if (!ro)
        ro = &dflt;
    for (size_t i = 0; i < p->count; i++) {
        const pl_entry *e = &p->entries[i];
        const oq_pass *pass = e->pass;
        if (oq_stop_requested())
            return oq_diag_error(d, OQ_ERR_STOPPED, "stopped");
        oq_pass_result acc;
        memset(&acc, 0, sizeof acc);
        acc.struct_size = sizeof acc;
        int cap = pass->iterative ? (ro->max_iterations > 0 ? ro->max_iterations
                                     : pass->max_iterations > 0 ? pass->max_iterations : 16)
                                  : 1;
        int iters = 0;
        oq_status st = OQ_OK;
        if (ro->before_pass) {
            oq_pass_event bev = {i, pass, &e->opts, &acc, 0, 0.0, OQ_OK};
            ro->before_pass(&bev, m, ro->user);
        }
        double t0 = now_seconds();
        size_t errs_before = d ? d->errors : 0;
        for (;;) {
            oq_pass_result r;
            memset(&r, 0, sizeof r);
            r.struct_size = sizeof r;
            st = pass->run(m, &e->opts, &r, d);
            iters++;
            merge_result(&acc, &r);
            if (st != OQ_OK || !r.changed || iters >= cap)
                break;
        }
        double secs = now_seconds() - t0;
        if (st == OQ_OK && d && d->errors > errs_before)
            st = OQ_ERR_INTERNAL; /* reported an error but returned OK */
        if (st != OQ_OK)
            oq_diag_add(d, OQ_SEV_ERROR, st, NULL, NULL, NULL, "pass \"%s\" (#%zu in the pipeline) failed: %s",
                        pass->name, i + 1, oq_status_name(st));
        if (st == OQ_OK && ro->verify_each) {
            oq_diag cd;
            oq_diag_init(&cd);
            if (oq_model_check(m, &cd) != OQ_OK) {
                st = OQ_ERR_INVALID;
                oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_INVALID, NULL, NULL, NULL,
                            "pass \"%s\" (#%zu in the pipeline) broke the model; the checker says:",
                            pass->name, i + 1);
                for (size_t k = 0; k < cd.count; k++) {
                    const oq_diag_entry *ce = &cd.entries[k];
                    oq_diag_add(d, ce->severity, ce->code, ce->file, ce->node, ce->op, "%s",
                                ce->message);
                }
            }
            oq_diag_free(&cd);
        }
        if (ro->after_pass) {
            oq_pass_event ev = {i, pass, &e->opts, &acc, iters, secs, st};
            ro->after_pass(&ev, m, ro->user);
        }
        if (st != OQ_OK)
            return st;
    }
    return OQ_OK;
}

typedef struct simple_ctx {
    oq_pass_result *res;
} simple_ctx;

static void simple_after(const oq_pass_event *ev, oq_model *m, void *user)
{
    simple_ctx *c = user;
    if (c->res)
        merge_result(c->res, ev->result);
}

oq_status oq_pass_run_simple(const oq_registry *reg, const char *pipeline, oq_model *m,
                             oq_pass_result *res, oq_diag *d)
{
    oq_pipeline *pl = NULL;
    if (res) {
        memset(res, 0, sizeof(*res));
        res->struct_size = sizeof(*res);
    }
    oq_status st = oq_pipeline_parse(reg, pipeline, &pl, NULL, d);
    if (st != OQ_OK)
        return st;
    simple_ctx c = {res};
    oq_pipeline_run_options ro = {0};
    ro.after_pass = simple_after;
    ro.user = &c;
    st = oq_pipeline_run(pl, m, &ro, d);
    oq_pipeline_free(pl);
    return st;
}

oq_status oq_pass_prepare_float_reference(oq_model *m, void *user, oq_diag *d)
{
    oq_registry *reg = NULL;
    oq_status st = oq_registry_new(&reg, d);
    if (st == OQ_OK)
        st = oq_pass_run_simple(reg, "constant-to-initializer,fold-batchnorm", m, NULL, d);
    oq_registry_free(reg);
    return st;
}
