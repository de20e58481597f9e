/* tests/fuzz/fuzz_wire.c: libFuzzer target for the wire header decoder and frame checks.
 * Input: [n: 1 byte][n frame lengths: u32 little-endian each][header bytes]. Properties: the
 * decoder never crashes or reads out of bounds (ASan), rejects with GB_EPROTO and a message, and
 * a header it accepts re-encodes to bytes that decode to the same header (attributes included),
 * and every runtime message table (runtime/streams/wire_messages.h) reads it without harm. */
#include "runtime/streams/wire.h"
#include "runtime/streams/wire_messages.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void same_header(const gb_wire_header *a, const gb_wire_header *b)
{
    int same = a->type == b->type && a->protocol == b->protocol && a->role == b->role &&
               a->index == b->index && a->seq == b->seq &&
               a->policy_version == b->policy_version && a->status == b->status &&
               strcmp(a->text, b->text) == 0 &&
               a->ntensors == b->ntensors && a->nattrs == b->nattrs && a->nwords == b->nwords;
    for (int k = 0; same && k < a->nattrs; k++) {
        const gb_wire_attr *x = &a->attrs[k], *y = &b->attrs[k];
        same = strcmp(x->key, y->key) == 0 && x->kind == y->kind && x->first == y->first &&
               x->n == y->n && (x->kind != GB_WIRE_ATTR_INT || x->i == y->i);
    }
    for (int i = 0; same && i < a->nwords; i++)
        same = strcmp(a->words[i], b->words[i]) == 0;
    for (int t = 0; same && t < a->ntensors; t++) {
        const gb_tensor_desc *x = &a->tensors[t], *y = &b->tensors[t];
        same = strcmp(x->name, y->name) == 0 && x->dtype == y->dtype && x->rank == y->rank;
        for (int i = 0; same && i < x->rank; i++)
            same = x->shape[i] == y->shape[i];
    }
    if (!same)
        abort();
}

/* Every runtime message table reads an accepted header without crashing: 0, or GB_EPROTO with a
 * message; a struct it fills holds only values within the table's bounds. */
static void check_tables(const gb_wire_header *h)
{
    for (int k = 0; k < gb_wire_runtime_nschemas; k++) {
        const gb_wire_schema *s = gb_wire_runtime_schemas[k];
        int64_t out[64]; /* larger than every runtime message struct */
        gb_error err;
        err.msg[0] = '\0';
        int rc = gb_wire_schema_read(s, h, out, &err);
        if (rc != 0 && (rc != GB_EPROTO || err.msg[0] == '\0'))
            abort();
        for (int a = 0; rc == 0 && a < s->nattrs; a++) {
            const gb_wire_attr_spec *f = &s->attrs[a];
            int64_t v;
            memcpy(&v, (const char *)out + f->offset, sizeof v);
            if (f->kind == GB_WIRE_ATTR_INT && gb_wire_attr_find(h, f->name) &&
                (v < f->min || v > f->max))
                abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t lens[64];
    int n = 0;
    const uint8_t *p = data;
    size_t left = size;
    if (left > 0) {
        n = p[0] % 40;
        p++;
        left--;
        if (left < (size_t)n * 4) {
            n = 0;
        } else {
            for (int i = 0; i < n; i++, p += 4)
                lens[i] = (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 |
                          (size_t)p[3] << 24;
            left -= (size_t)n * 4;
        }
    }
    /* the header in its own allocation, so ASan sees any read past its end */
    uint8_t *hdr = malloc(left ? left : 1);
    if (!hdr)
        return 0;
    memcpy(hdr, p, left);
    static gb_wire_header h, h2;
    gb_error err;
    err.msg[0] = '\0';
    int rc = gb_wire_decode_header(hdr, left, &h, &err);
    if (rc != 0) {
        if (rc != GB_EPROTO || err.msg[0] == '\0' || h.type != 0)
            abort();
    } else {
        rc = gb_wire_check_frames(&h, lens, n, &err);
        if (rc != 0 && rc != GB_EPROTO)
            abort();
        check_tables(&h);
        static unsigned char buf[GB_WIRE_HEADER_MAX];
        size_t len;
        if (gb_wire_encode_header(&h, buf, sizeof buf, &len, &err) == 0) {
            if (gb_wire_decode_header(buf, len, &h2, &err) != 0)
                abort();
            same_header(&h, &h2);
        }
    }
    free(hdr);
    return 0;
}
