/* Borrow large raw_data payloads from the mapped model file.
 *
 * protobuf-c copies every bytes field while unpacking, so a model with 1 GiB of
 * raw_data costs a 1 GiB allocation and memcpy before anything else happens (about
 * 60% of `onnxq convert` on such a model). Instead, after the wire pre-scan has
 * validated the bytes, we build a skeleton of the file: the same messages, but each
 * TensorProto.raw_data of at least OQ_RAW_BORROW_MIN bytes is replaced by a small
 * marker field (field number OQ_RAW_MARK_TAG, 8-byte index). protobuf-c unpacks the
 * skeleton (small), keeps the marker as an unknown field, and the reader then points
 * the tensor's raw_data at the payload inside the mapping, which stays alive as long
 * as the model (it is registered in the model's I/O state).
 *
 * Enclosing messages get 5-byte (non-minimal) length prefixes in the skeleton so that
 * the skeleton is written in one pass; protobuf-c accepts those. The skeleton is only
 * ever unpacked, never written out. A TensorProto holding raw_data more than once is
 * copied through unchanged; a file in which any TensorProto already uses the marker's
 * field number is not rewritten at all (plain unpack, as before). */
#include "io/io-impl.h"

#include <stdlib.h>
#include <string.h>

#define OQ_RAW_MARK_TAG 0x1ffffff0u

typedef struct bld {
    const uint8_t *base;
    uint8_t *out;        /* NULL in the counting pass */
    size_t len, cap;
    oq_raw_refs *refs;
    size_t n_refs;
    int oom;
    int conflict;        /* a TensorProto of the input uses the marker's field number */
} bld;

static int varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 10 && *pos < len; i++) {
        uint8_t b = p[(*pos)++];
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

static void emit(bld *b, const void *p, size_t n)
{
    if (b->oom)
        return;
    if (!b->out) {
        b->len += n;
        return;
    }
    if (b->cap - b->len < n) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc - b->len < n)
            nc *= 2;
        uint8_t *no = realloc(b->out, nc);
        if (!no) {
            b->oom = 1;
            return;
        }
        b->out = no;
        b->cap = nc;
    }
    memcpy(b->out + b->len, p, n);
    b->len += n;
}

static void emit_varint(bld *b, uint64_t v)
{
    uint8_t buf[10];
    size_t n = 0;
    do {
        buf[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            buf[n] |= 0x80;
        n++;
    } while (v);
    emit(b, buf, n);
}

/* May the raw_data of this TensorProto be replaced? Exactly one raw_data field of at
 * least OQ_RAW_BORROW_MIN bytes, and no field with the marker's number. */
static bool tensor_borrowable(const uint8_t *p, size_t len, int *conflict)
{
    size_t pos = 0;
    int n_raw = 0;
    bool big = false;
    while (pos < len) {
        uint64_t key, v;
        if (varint(p, len, &pos, &key))
            return false;
        uint32_t tag = (uint32_t)(key >> 3);
        int wt = (int)(key & 7);
        if (tag == OQ_RAW_MARK_TAG) {
            *conflict = 1;
            return false;
        }
        switch (wt) {
        case 0:
            if (varint(p, len, &pos, &v))
                return false;
            break;
        case 1:
            pos += 8;
            break;
        case 5:
            pos += 4;
            break;
        case 2:
            if (varint(p, len, &pos, &v) || v > len - pos)
                return false;
            if (tag == 9) {
                n_raw++;
                big = v >= OQ_RAW_BORROW_MIN;
            }
            pos += (size_t)v;
            break;
        default:
            return false;
        }
    }
    return pos == len && n_raw == 1 && big;
}

static int rewrite(bld *b, const uint8_t *p, size_t len, const ProtobufCMessageDescriptor *desc,
                   int depth)
{
    if (depth > 2 * OQ_MAX_GRAPH_DEPTH + 2 * OQ_MAX_TYPE_DEPTH + 16)
        return -1;
    bool is_tensor = desc == &onnx__tensor_proto__descriptor;
    bool borrow = is_tensor && tensor_borrowable(p, len, &b->conflict);
    size_t pos = 0;
    while (pos < len && !b->oom) {
        size_t start = pos;
        uint64_t key, v;
        if (varint(p, len, &pos, &key))
            return -1;
        size_t key_end = pos;
        uint32_t tag = (uint32_t)(key >> 3);
        int wt = (int)(key & 7);
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(desc, tag);
        switch (wt) {
        case 0:
            if (varint(p, len, &pos, &v))
                return -1;
            break;
        case 1:
            if (len - pos < 8)
                return -1;
            pos += 8;
            break;
        case 5:
            if (len - pos < 4)
                return -1;
            pos += 4;
            break;
        case 2: {
            if (varint(p, len, &pos, &v) || v > len - pos)
                return -1;
            if (borrow && tag == 9) {
                /* the marker: field OQ_RAW_MARK_TAG, 8 bytes, little-endian index */
                uint64_t idx = b->n_refs;
                if (b->out) {
                    b->refs[idx].data = p + pos;
                    b->refs[idx].len = (size_t)v;
                }
                b->n_refs++;
                emit_varint(b, ((uint64_t)OQ_RAW_MARK_TAG << 3) | 2);
                emit_varint(b, 8);
                uint8_t le[8];
                for (int i = 0; i < 8; i++)
                    le[i] = (uint8_t)(idx >> (8 * i));
                emit(b, le, 8);
                pos += (size_t)v;
                continue;
            }
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                emit(b, p + start, key_end - start); /* the key as it was */
                size_t len_at = b->len;
                uint8_t five[5] = {0x80, 0x80, 0x80, 0x80, 0x00};
                emit(b, five, 5);
                size_t body_at = b->len;
                int r = rewrite(b, p + pos, (size_t)v, f->descriptor, depth + 1);
                if (r)
                    return r;
                if (b->out && !b->oom) {
                    uint64_t n = b->len - body_at;
                    if (n >> 35)
                        return -1;
                    for (int i = 0; i < 5; i++)
                        b->out[len_at + (size_t)i] =
                            (uint8_t)(((n >> (7 * i)) & 0x7f) | (i < 4 ? 0x80 : 0));
                }
                pos += (size_t)v;
                continue;
            }
            pos += (size_t)v;
            break;
        }
        default:
            return -1;
        }
        emit(b, p + start, pos - start);
    }
    return b->oom ? -2 : 0;
}

int oq_raw_skeleton(const uint8_t *data, size_t len, uint8_t **skel, size_t *skel_len,
                    oq_raw_refs **refs, size_t *n_refs)
{
    *skel = NULL;
    *skel_len = 0;
    *refs = NULL;
    *n_refs = 0;
    /* counting pass: is there anything to borrow? */
    bld c = {data, NULL, 0, 0, NULL, 0, 0, 0};
    /* nothing to borrow, or the file itself uses the marker's field number in a tensor
     * (then a marker could not be told from the file's own field): plain unpack */
    if (rewrite(&c, data, len, &onnx__model_proto__descriptor, 0) || c.n_refs == 0 || c.conflict)
        return 0;
    bld b = {data, NULL, 0, 0, NULL, 0, 0, 0};
    b.cap = c.len;
    b.out = malloc(c.len ? c.len : 1);
    b.refs = malloc(c.n_refs * sizeof(oq_raw_refs));
    if (!b.out || !b.refs) {
        free(b.out);
        free(b.refs);
        return -1;
    }
    int r = rewrite(&b, data, len, &onnx__model_proto__descriptor, 0);
    if (r || b.n_refs != c.n_refs || b.len != c.len) {
        free(b.out);
        free(b.refs);
        return r == -2 ? -1 : 0;
    }
    *skel = b.out;
    *skel_len = b.len;
    *refs = b.refs;
    *n_refs = b.n_refs;
    return 1;
}

bool oq_raw_restore(oq_tensor *t, const oq_raw_refs *refs, size_t n_refs)
{
    for (size_t i = 0; i < t->unk.count; i++) {
        oq_unknown_field *u = &t->unk.fields[i];
        /* protobuf-c keeps a length-delimited unknown field with its length prefix */
        if (u->tag != OQ_RAW_MARK_TAG || u->wire_type != 2 || u->len != 9 || u->data[0] != 8)
            continue;
        uint64_t idx = 0;
        for (int k = 0; k < 8; k++)
            idx |= (uint64_t)u->data[1 + k] << (8 * k);
        if (idx >= n_refs)
            return false;
        t->has_raw = true;
        t->raw.data = (uint8_t *)refs[idx].data; /* read-only mapping: never written */
        t->raw.len = refs[idx].len;
        memmove(u, u + 1, (t->unk.count - i - 1) * sizeof(*u));
        t->unk.count--;
        return true;
    }
    return false;
}
