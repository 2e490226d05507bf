/* A schema-aware pre-scan of protobuf wire bytes.
 *
 * protobuf-c unpacks recursively and reports failure only as NULL. Before handing it
 * bytes we walk them once: every varint is at most 10 bytes, every length fits in what
 * remains, wire types match the schema, and graphs/types do not nest deeper than the
 * limits (so a hostile file cannot exhaust the stack), and packed repeated scalars hold a
 * whole number of well-formed elements (protobuf-c would only say "failed"). Errors name
 * the message, field and byte offset. */
#include "io/io-impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct scan_ctx {
    const uint8_t *base;
    oq_diag *d;
    /* what unpacking (protobuf-c) and the IR built from it will allocate, estimated */
    uint64_t msgs;      /* messages */
    uint64_t elems;     /* repeated scalar elements */
    uint64_t str_bytes; /* string / bytes payloads, unknown fields */
    uint64_t est;       /* bytes */
} scan_ctx;

static int read_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (*pos >= len)
            return -1; /* truncated */
        uint8_t b = p[(*pos)++];
        if (i == 9 && b > 1)
            return -2; /* overlong */
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -2;
}

/* A packed repeated scalar (wire type 2 on a field whose element is a varint or a fixed
 * width): the payload must be a whole number of elements, each varint well formed. */
static oq_status check_packed(scan_ctx *c, const uint8_t *p, size_t len, int elem_wire,
                              const ProtobufCMessageDescriptor *desc,
                              const ProtobufCFieldDescriptor *f, size_t at)
{
    if (elem_wire == 5 || elem_wire == 1) {
        size_t w = elem_wire == 5 ? 4 : 8;
        if (len % w)
            return oq_diag_error(c->d, OQ_ERR_PARSE,
                                 "%s.%s at byte %zu: packed payload of %zu bytes is not a "
                                 "multiple of %zu", desc->short_name, f->name, at, len, w);
        c->elems += len / w;
        c->est += len;
        return OQ_OK;
    }
    size_t pos = 0;
    uint64_t v;
    while (pos < len) {
        size_t start = pos;
        int r = read_varint(p, len, &pos, &v);
        if (r)
            return oq_diag_error(c->d, OQ_ERR_PARSE,
                                 "%s.%s at byte %zu: %s varint in packed payload (element at "
                                 "byte %zu)", desc->short_name, f->name, at,
                                 r == -1 ? "truncated" : "malformed",
                                 (size_t)(p - c->base) + start);
        c->elems++;
        c->est += 8; /* a varint of 1 byte unpacks to 4 or 8 */
    }
    return OQ_OK;
}

static int expected_wire(const ProtobufCFieldDescriptor *f, int *alt)
{
    *alt = -1;
    bool rep = f->label == PROTOBUF_C_LABEL_REPEATED;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_BOOL: case PROTOBUF_C_TYPE_ENUM:
        if (rep) *alt = 2;
        return 0;
    case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_DOUBLE:
        if (rep) *alt = 2;
        return 1;
    case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_SFIXED32: case PROTOBUF_C_TYPE_FLOAT:
        if (rep) *alt = 2;
        return 5;
    default:
        return 2;
    }
}

static oq_status scan(scan_ctx *c, const uint8_t *p, size_t len,
                      const ProtobufCMessageDescriptor *desc, int gdepth, int tdepth)
{
    size_t pos = 0;
    while (pos < len) {
        size_t at = (size_t)(p - c->base) + pos;
        uint64_t key;
        int r = read_varint(p, len, &pos, &key);
        if (r)
            return oq_diag_error(c->d, OQ_ERR_PARSE, "%s at byte %zu: %s field key", desc->short_name,
                                 at, r == -1 ? "truncated" : "malformed");
        uint32_t tag = (uint32_t)(key >> 3);
        int wt = (int)(key & 7);
        if (tag == 0 || key >> 3 > 0x1fffffff)
            return oq_diag_error(c->d, OQ_ERR_PARSE, "%s at byte %zu: invalid field number",
                                 desc->short_name, at);
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(desc, tag);
        if (f) {
            int alt, want = expected_wire(f, &alt);
            if (wt != want && wt != alt)
                return oq_diag_error(c->d, OQ_ERR_PARSE,
                                     "%s.%s at byte %zu: wire type %d, expected %d",
                                     desc->short_name, f->name, at, wt, want);
        }
        uint64_t v;
        if (!f) /* kept as an unknown field */
            c->est += 48;
        else if (f->label == PROTOBUF_C_LABEL_REPEATED && f->type != PROTOBUF_C_TYPE_MESSAGE && wt != 2) {
            c->elems++;
            c->est += 8;
        }
        switch (wt) {
        case 0:
            r = read_varint(p, len, &pos, &v);
            if (r)
                return oq_diag_error(c->d, OQ_ERR_PARSE, "%s.%s at byte %zu: %s varint",
                                     desc->short_name, f ? f->name : "?", at,
                                     r == -1 ? "truncated" : "malformed");
            break;
        case 1:
            if (len - pos < 8)
                return oq_diag_error(c->d, OQ_ERR_PARSE, "%s at byte %zu: truncated 64-bit field",
                                     desc->short_name, at);
            pos += 8;
            break;
        case 5:
            if (len - pos < 4)
                return oq_diag_error(c->d, OQ_ERR_PARSE, "%s at byte %zu: truncated 32-bit field",
                                     desc->short_name, at);
            pos += 4;
            break;
        case 2: {
            r = read_varint(p, len, &pos, &v);
            if (r)
                return oq_diag_error(c->d, OQ_ERR_PARSE, "%s.%s at byte %zu: %s length",
                                     desc->short_name, f ? f->name : "?", at,
                                     r == -1 ? "truncated" : "malformed");
            if (v > len - pos)
                return oq_diag_error(c->d, OQ_ERR_PARSE,
                                     "%s.%s at byte %zu: length %llu runs past the end "
                                     "(%zu bytes left): file truncated or corrupt",
                                     desc->short_name, f ? f->name : "?", at,
                                     (unsigned long long)v, len - pos);
            if (v > UINT32_MAX)
                return oq_diag_error(c->d, OQ_ERR_PARSE, "%s.%s at byte %zu: field over 4 GiB",
                                     desc->short_name, f ? f->name : "?", at);
            if (f && f->label == PROTOBUF_C_LABEL_REPEATED) {
                int alt, elem = expected_wire(f, &alt);
                if (elem != 2) {
                    oq_status s = check_packed(c, p + pos, (size_t)v, elem, desc, f, at);
                    if (s)
                        return s;
                }
            }
            if (!f || f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_BYTES) {
                c->str_bytes += v;
                c->est += v + 32;
            }
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                const ProtobufCMessageDescriptor *sub = f->descriptor;
                /* the unpacked struct, its slot in the parent's array, and what the IR
                 * builds for it (nodes, values, attributes: a few times the struct) */
                c->msgs++;
                c->est += 3 * ((uint64_t)sub->sizeof_message + 32);
                int g = gdepth, t = tdepth;
                if (sub == &onnx__graph_proto__descriptor && ++g > OQ_MAX_GRAPH_DEPTH)
                    return oq_diag_error(c->d, OQ_ERR_INVALID,
                                         "graphs nested deeper than %d levels (at byte %zu)",
                                         OQ_MAX_GRAPH_DEPTH, at);
                if (sub == &onnx__type_proto__descriptor && ++t > OQ_MAX_TYPE_DEPTH)
                    return oq_diag_error(c->d, OQ_ERR_INVALID,
                                         "types nested deeper than %d levels (at byte %zu)",
                                         OQ_MAX_TYPE_DEPTH, at);
                oq_status s = scan(c, p + pos, (size_t)v, sub, g, t);
                if (s)
                    return s;
            }
            pos += (size_t)v;
            break;
        }
        default:
            return oq_diag_error(c->d, OQ_ERR_PARSE, "%s at byte %zu: invalid wire type %d",
                                 desc->short_name, at, wt);
        }
    }
    return OQ_OK;
}

/* ONNXQ_MAX_MEMORY (bytes, with an optional K, M, G or T suffix), else 3/4 of the
 * physical memory, and never more than RLIMIT_AS / RLIMIT_DATA. 0: no limit known. */
uint64_t oq_memory_limit(const char **how)
{
    const char *e = getenv("ONNXQ_MAX_MEMORY");
    if (e && *e) {
        char *end = NULL;
        errno = 0;
        double x = strtod(e, &end);
        double mul = 1;
        if (end && *end) {
            switch (*end) {
            case 'k': case 'K': mul = 1024.0; break;
            case 'm': case 'M': mul = 1048576.0; break;
            case 'g': case 'G': mul = 1073741824.0; break;
            case 't': case 'T': mul = 1099511627776.0; break;
            default: mul = 0;
            }
            if (end[1] && !(end[1] == 'B' || end[1] == 'b' || (end[1] == 'i' && end[2] == 'B')))
                mul = 0;
        }
        if (errno == 0 && mul > 0 && x > 0 && x * mul < 1.8e19) {
            *how = "ONNXQ_MAX_MEMORY";
            return (uint64_t)(x * mul);
        }
    }
    uint64_t lim = 0;
    *how = "3/4 of this machine's memory; set ONNXQ_MAX_MEMORY to change it";
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0)
        lim = (uint64_t)pages / 4 * 3 * (uint64_t)psz;
    struct rlimit rl;
    const int res[2] = {RLIMIT_AS, RLIMIT_DATA};
    for (int i = 0; i < 2; i++)
        if (getrlimit(res[i], &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
            (lim == 0 || (uint64_t)rl.rlim_cur < lim)) {
            lim = (uint64_t)rl.rlim_cur;
            *how = "the process's memory limit (ulimit -v / -d)";
        }
    return lim;
}

static void human(char *buf, size_t n, uint64_t b)
{
    if (b >= (uint64_t)1 << 30)
        snprintf(buf, n, "%.1f GiB", (double)b / 1073741824.0);
    else if (b >= (uint64_t)1 << 20)
        snprintf(buf, n, "%.1f MiB", (double)b / 1048576.0);
    else
        snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
}

oq_status oq_wire_scan(const uint8_t *data, size_t len, const ProtobufCMessageDescriptor *desc,
                       oq_diag *d)
{
    scan_ctx c = {data, d, 0, 0, 0, 0};
    oq_status st = scan(&c, data, len, desc, desc == &onnx__graph_proto__descriptor ? 1 : 0,
                        desc == &onnx__type_proto__descriptor ? 1 : 0);
    if (st != OQ_OK)
        return st;
    /* memory amplification: a few bytes on the wire (an empty NodeProto is 2) can cost
     * hundreds once unpacked; refuse up front what would not fit instead of being killed */
    const char *how = "";
    uint64_t lim = oq_memory_limit(&how);
    if (lim > 0 && c.est > lim) {
        char a[32], b[32];
        human(a, sizeof a, c.est);
        human(b, sizeof b, lim);
        return oq_diag_error(d, OQ_ERR_INVALID,
                             "reading it would take about %s of memory (%llu messages, %llu repeated "
                             "values, %llu bytes of strings in %zu bytes of file), more than the limit "
                             "of %s (%s)",
                             a, (unsigned long long)c.msgs, (unsigned long long)c.elems,
                             (unsigned long long)c.str_bytes, len, b, how);
    }
    return OQ_OK;
}
