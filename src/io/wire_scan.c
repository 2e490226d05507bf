/* A schema-aware pre-scan of protobuf wire bytes.
 *
 * protobuf-c unpacks recursively and reports failure only as NULL. Before handing it
 * bytes we walk them once: every varint is at most 10 bytes, every length fits in what
 * remains, wire types match the schema, and graphs/types do not nest deeper than the
 * limits (so a hostile file cannot exhaust the stack), and packed repeated scalars hold a
 * whole number of well-formed elements (protobuf-c would only say "failed"). Errors name
 * the message, field and byte offset. */
#include "io/io-impl.h"

#include <string.h>

typedef struct scan_ctx {
    const uint8_t *base;
    oq_diag *d;
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
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                const ProtobufCMessageDescriptor *sub = f->descriptor;
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

oq_status oq_wire_scan(const uint8_t *data, size_t len, const ProtobufCMessageDescriptor *desc,
                       oq_diag *d)
{
    scan_ctx c = {data, d};
    return scan(&c, data, len, desc, desc == &onnx__graph_proto__descriptor ? 1 : 0,
                desc == &onnx__type_proto__descriptor ? 1 : 0);
}
