/* runtime/streams/params.c: parameter blobs, the layout's wire form, and the publisher (see
 * params.h). */
#include "runtime/streams/params_impl.h"

#include "runtime/base/crc32c.h"
#include "runtime/base/le.h"
#include "runtime/streams/curve.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* ---- blobs and layouts ----------------------------------------------------------------------- */

const gb_param_blob *gb_param_blob_retain(const gb_param_blob *b)
{
    if (b)
        atomic_fetch_add(&((param_blob *)b)->refs, 1);
    return b;
}

void gb_param_blob_release(const gb_param_blob *b)
{
    if (!b)
        return;
    param_blob *p = (param_blob *)b;
    if (atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    free(p->data);
    free(p->layout);
    free(p->layout_raw);
    free(p);
}

void param_blob_free_zmq(void *data, void *hint)
{
    (void)data;
    gb_param_blob_release(hint);
}

int gb_param_blob_find(const gb_param_blob *b, const char *name)
{
    for (int i = 0; i < b->nlayout; i++)
        if (strcmp(b->layout[i].name, name) == 0)
            return i;
    return -1;
}

void gb_param_entry_append(gb_param_entry *e, uint64_t *total, uint64_t align, const char *name,
                           gb_dtype dtype, int64_t d0, int64_t d1)
{
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->dtype = dtype;
    e->rank = d1 > 0 ? 2 : 1;
    e->shape[0] = d0;
    e->shape[1] = d1;
    e->offset = (*total + align - 1) / align * align;
    *total = e->offset + (uint64_t)(d0 * (d1 > 0 ? d1 : 1)) * gb_dtype_size(dtype);
}

int gb_param_layout_fits(const gb_param_entry *sent, int count, size_t len,
                         const gb_param_entry *own, int own_count, uint64_t own_bytes,
                         gb_error *err)
{
    if (count != own_count)
        return gb_error_set(err, GB_EINVAL, "import: %d tensors sent, model has %d", count,
                            own_count);
    if (len != own_bytes)
        return gb_error_set(err, GB_EINVAL, "import: %zu bytes sent, model needs %llu", len,
                            (unsigned long long)own_bytes);
    for (int i = 0; i < count; i++) {
        const gb_param_entry *a = &sent[i], *b = &own[i];
        int same = strncmp(a->name, b->name, sizeof a->name) == 0 && a->dtype == b->dtype &&
                   a->rank == b->rank && a->offset == b->offset;
        for (int d = 0; same && d < b->rank; d++)
            same = a->shape[d] == b->shape[d];
        if (!same)
            return gb_error_set(err, GB_EINVAL, "import: entry %d (%.*s) does not match the "
                                "model's %s", i, (int)sizeof a->name, a->name, b->name);
    }
    return 0;
}

int gb_param_layout_check(const gb_param_entry *layout, int n, uint64_t bytes, gb_error *err)
{
    if (n < 0 || n > GB_PARAM_MAX_ENTRIES)
        return gb_error_set(err, GB_EINVAL, "parameter layout: %d entries, at most %d", n,
                            GB_PARAM_MAX_ENTRIES);
    for (int i = 0; i < n; i++) {
        const gb_param_entry *e = &layout[i];
        size_t nl = strnlen(e->name, GB_PARAM_NAME_MAX);
        if (nl == 0 || nl == GB_PARAM_NAME_MAX)
            return gb_error_set(err, GB_EINVAL, "parameter layout entry %d: name empty or not "
                                "NUL-terminated within %d bytes", i, GB_PARAM_NAME_MAX);
        if (!gb_dtype_valid((int)e->dtype) || e->rank < 0 || e->rank > GB_PARAM_MAX_RANK)
            return gb_error_set(err, GB_EINVAL, "parameter layout entry '%s': dtype %d or rank "
                                "%d invalid", e->name, (int)e->dtype, e->rank);
        uint64_t size = gb_dtype_size(e->dtype);
        for (int d = 0; d < e->rank; d++) {
            if (e->shape[d] < 0)
                return gb_error_set(err, GB_EINVAL, "parameter layout entry '%s': shape[%d] < 0",
                                    e->name, d);
            uint64_t dim = (uint64_t)e->shape[d];
            if (dim && size > UINT64_MAX / 4 / dim)
                return gb_error_set(err, GB_EINVAL, "parameter layout entry '%s': size "
                                    "overflows", e->name);
            size *= dim;
        }
        if (e->offset > bytes || size > bytes - e->offset)
            return gb_error_set(err, GB_EINVAL, "parameter layout entry '%s': bytes [%llu, "
                                "+%llu) outside the blob (%llu bytes)", e->name,
                                (unsigned long long)e->offset, (unsigned long long)size,
                                (unsigned long long)bytes);
    }
    return 0;
}

int gb_param_layout_encode(const gb_param_entry *layout, int n, unsigned char **raw, size_t *len,
                           gb_error *err)
{
    size_t bytes = (size_t)n * PARAM_RECORD_BYTES;
    unsigned char *r = calloc(bytes ? bytes : 1, 1);
    if (!r)
        return gb_error_set(err, GB_ENOMEM, "parameter layout: out of memory");
    for (int i = 0; i < n; i++) {
        unsigned char *p = r + (size_t)i * PARAM_RECORD_BYTES;
        const gb_param_entry *e = &layout[i];
        memcpy(p, e->name, strnlen(e->name, GB_PARAM_NAME_MAX));
        gb_put_le32(p + 128, (uint32_t)e->dtype);
        gb_put_le32(p + 132, (uint32_t)e->rank);
        for (int d = 0; d < GB_PARAM_MAX_RANK; d++)
            gb_put_le64(p + 136 + 8 * d, d < e->rank ? (uint64_t)e->shape[d] : 0);
        gb_put_le64(p + 200, e->offset);
    }
    *raw = r;
    *len = bytes;
    return 0;
}

int gb_param_layout_decode(const void *raw, int n, uint64_t bytes, gb_param_entry *out,
                           gb_error *err)
{
    for (int i = 0; i < n; i++) {
        const unsigned char *p = (const unsigned char *)raw + (size_t)i * PARAM_RECORD_BYTES;
        gb_param_entry *e = &out[i];
        memcpy(e->name, p, GB_PARAM_NAME_MAX);
        uint32_t dtype = gb_get_le32(p + 128), rank = gb_get_le32(p + 132);
        e->dtype = dtype < GB_DTYPE_COUNT ? (gb_dtype)dtype : GB_DTYPE_COUNT;
        e->rank = rank <= GB_PARAM_MAX_RANK ? (int)rank : -1;
        for (int d = 0; d < GB_PARAM_MAX_RANK; d++) {
            uint64_t v = gb_get_le64(p + 136 + 8 * d);
            e->shape[d] = v > (uint64_t)INT64_MAX ? -1 : (int64_t)v;
        }
        e->offset = gb_get_le64(p + 200);
    }
    int rc = gb_param_layout_check(out, n, bytes, err);
    if (rc && err)
        err->code = GB_EPROTO;
    return rc ? GB_EPROTO : 0;
}

param_blob *param_blob_new(int64_t version, uint64_t bytes, uint64_t chunk_bytes,
                           const void *layout_raw, size_t layout_raw_len, gb_error *err)
{
    if (layout_raw_len % PARAM_RECORD_BYTES != 0 ||
        layout_raw_len / PARAM_RECORD_BYTES > GB_PARAM_MAX_ENTRIES) {
        gb_error_set(err, GB_EPROTO, "parameter layout: %zu bytes is not a whole number of "
                     "entries (at most %d)", layout_raw_len, GB_PARAM_MAX_ENTRIES);
        return NULL;
    }
    int n = (int)(layout_raw_len / PARAM_RECORD_BYTES);
    param_blob *b = calloc(1, sizeof *b);
    if (!b)
        goto nomem;
    atomic_init(&b->refs, 1);
    b->chunk_bytes = chunk_bytes;
    b->layout = calloc(n ? (size_t)n : 1, sizeof *b->layout);
    b->layout_raw = malloc(layout_raw_len ? layout_raw_len : 1);
    b->data = malloc(bytes ? bytes : 1);
    if (!b->layout || !b->layout_raw || !b->data)
        goto nomem;
    memcpy(b->layout_raw, layout_raw, layout_raw_len);
    b->layout_raw_len = layout_raw_len;
    if (gb_param_layout_decode(layout_raw, n, bytes, b->layout, err)) {
        gb_param_blob_release(&b->pub);
        return NULL;
    }
    b->pub.version = version;
    b->pub.bytes = bytes;
    b->pub.nlayout = n;
    b->pub.layout = b->layout;
    b->pub.data = b->data;
    return b;
nomem:
    gb_error_set(err, GB_ENOMEM, "parameter blob version %lld: cannot allocate %llu bytes",
                 (long long)version, (unsigned long long)bytes);
    if (b)
        gb_param_blob_release(&b->pub);
    return NULL;
}

/* ---- publisher ------------------------------------------------------------------------------- */

struct gb_param_publisher {
    void *sock;
    void *mon;              /* sock's connections (ZMQ_EVENT_CONNECTED), read by reconnected */
    uint64_t connects, connects_seen;
    gb_param_publisher_opts o;
    uint64_t seq;
    int64_t last_version;
    int active;             /* between begin and end */
    int64_t version;
    uint64_t total, written;
    uint32_t crc;
    zmq_msg_t chunk;        /* being filled */
    size_t chunk_fill;
    int chunk_open;
    gb_wire_header hdr;
};

int gb_param_publisher_open(gb_param_publisher **out, void *zctx,
                            const gb_param_publisher_opts *o, gb_error *err)
{
    *out = NULL;
    if (!o->service_endpoint || o->chunk_bytes == 0 || o->chunk_bytes > GB_PARAM_CHUNK_MAX ||
        o->timeout_ms <= 0)
        return gb_error_set(err, GB_EINVAL, "parameter publisher: need an endpoint, chunk_bytes "
                            "in 1..%llu and timeout_ms > 0",
                            (unsigned long long)GB_PARAM_CHUNK_MAX);
    gb_param_publisher *p = calloc(1, sizeof *p);
    if (!p)
        return gb_error_set(err, GB_ENOMEM, "parameter publisher: out of memory");
    int rc;
    p->o = *o;
    p->o.service_endpoint = NULL;
    p->last_version = -1;
    p->sock = zmq_socket(zctx, ZMQ_PUSH);
    if (!p->sock) {
        rc = gb_wire_zmq_error(err, "parameter publisher: zmq_socket(PUSH)");
        goto fail;
    }
    int linger = 2000, hwm = 8, imm = 1;
    if (zmq_setsockopt(p->sock, ZMQ_LINGER, &linger, sizeof linger) ||
        zmq_setsockopt(p->sock, ZMQ_SNDHWM, &hwm, sizeof hwm) ||
        zmq_setsockopt(p->sock, ZMQ_IMMEDIATE, &imm, sizeof imm) ||
        zmq_setsockopt(p->sock, ZMQ_SNDTIMEO, &o->timeout_ms, sizeof o->timeout_ms)) {
        rc = gb_wire_zmq_error(err, "parameter publisher: setsockopt");
        goto fail;
    }
    /* the monitor's reading end before the connect, so that no connection goes unseen; its
     * queue unbounded and the monitor stopped before it closes (libzmq's I/O thread sends the
     * events blocking: params_service.c, follow_peers) */
    static atomic_ullong next_monitor;
    char mon_ep[64];
    int unbounded = 0, zero = 0;
    snprintf(mon_ep, sizeof mon_ep, "inproc://gb-params-publisher-%llu",
             (unsigned long long)atomic_fetch_add(&next_monitor, 1));
    if (zmq_socket_monitor(p->sock, mon_ep, ZMQ_EVENT_CONNECTED) != 0 ||
        !(p->mon = zmq_socket(zctx, ZMQ_PAIR)) ||
        zmq_setsockopt(p->mon, ZMQ_LINGER, &zero, sizeof zero) ||
        zmq_setsockopt(p->mon, ZMQ_RCVHWM, &unbounded, sizeof unbounded) ||
        zmq_connect(p->mon, mon_ep) != 0) {
        rc = gb_wire_zmq_error(err, "parameter publisher: its connections' monitor");
        goto fail;
    }
    if (gb_curve_connect(zctx, p->sock, o->service_endpoint) != 0) {
        rc = gb_wire_zmq_error(err, "parameter publisher: connect");
        gb_error_prefix(err, "%s", o->service_endpoint);
        goto fail;
    }
    *out = p;
    return 0;
fail:
    gb_param_publisher_close(p);
    return rc;
}

void gb_param_publisher_close(gb_param_publisher *p)
{
    if (!p)
        return;
    if (p->chunk_open)
        zmq_msg_close(&p->chunk);
    if (p->sock && p->mon)
        zmq_socket_monitor(p->sock, NULL, 0);
    if (p->mon)
        zmq_close(p->mon);
    if (p->sock)
        zmq_close(p->sock);
    free(p);
}

int gb_param_publisher_reconnected(gb_param_publisher *p)
{
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    /* each event is two frames: its number and value, then the endpoint */
    while (zmq_msg_recv(&frame, p->mon, ZMQ_DONTWAIT) >= 0) {
        if (zmq_msg_size(&frame) >= 2) {
            uint16_t event;
            memcpy(&event, zmq_msg_data(&frame), sizeof event);
            p->connects += event == ZMQ_EVENT_CONNECTED;
        }
        if (zmq_msg_more(&frame))
            zmq_msg_recv(&frame, p->mon, ZMQ_DONTWAIT);
    }
    zmq_msg_close(&frame);
    int again = p->connects > 1 && p->connects > p->connects_seen;
    p->connects_seen = p->connects;
    return again;
}

/* Sends h with q's attributes (kind sc) and the payload pl. */
static int pub_send(gb_param_publisher *p, gb_wire_header *h, const gb_wire_schema *sc,
                    const gb_msg_param *q, const gb_wire_payload *pl, gb_error *err)
{
    h->seq = ++p->seq;
    int rc = gb_wire_schema_write(sc, q, h, err);
    if (rc == 0)
        rc = gb_wire_send(p->sock, NULL, 0, h, pl, 0, err);
    if (rc) {
        p->active = 0;
        gb_error_prefix(err, "parameter version %lld", (long long)p->version);
    }
    return rc;
}

int gb_param_publish_begin(gb_param_publisher *p, int64_t version, const gb_param_entry *layout,
                           int nlayout, uint64_t total_bytes, gb_error *err)
{
    if (version < p->last_version)
        return gb_error_set(err, GB_EINVAL, "parameter version %lld: versions must not "
                            "decrease (last %lld)", (long long)version,
                            (long long)p->last_version);
    if (total_bytes > (uint64_t)INT64_MAX)
        return gb_error_set(err, GB_EINVAL, "parameter blob too large");
    int rc = gb_param_layout_check(layout, nlayout, total_bytes, err);
    if (rc)
        return rc;
    unsigned char *raw;
    size_t raw_len;
    if ((rc = gb_param_layout_encode(layout, nlayout, &raw, &raw_len, err)))
        return rc;
    if (p->chunk_open) {
        zmq_msg_close(&p->chunk);
        p->chunk_open = 0;
    }
    p->version = version;
    p->total = total_bytes;
    p->written = 0;
    p->crc = 0;
    p->active = 1;
    p->last_version = version;
    gb_wire_header *h = &p->hdr;
    gb_wire_header_init(h, GB_MSG_PARAM_BEGIN, p->o.role, p->o.index);
    h->policy_version = version;
    gb_msg_param q = {.version = version, .total = (int64_t)total_bytes,
                      .chunk = (int64_t)p->o.chunk_bytes};
    h->ntensors = 1;
    int64_t shape = (int64_t)raw_len;
    gb_wire_set_tensor(&h->tensors[0], "layout", GB_DTYPE_UINT8, 1, &shape, NULL);
    gb_wire_payload pl = {raw, NULL, NULL, NULL};
    rc = pub_send(p, h, &gb_schema_param_begin, &q, &pl, err);
    free(raw);
    return rc;
}

static int flush_chunk(gb_param_publisher *p, gb_error *err)
{
    gb_wire_header *h = &p->hdr;
    gb_wire_header_init(h, GB_MSG_PARAM_CHUNK, p->o.role, p->o.index);
    h->policy_version = p->version;
    gb_msg_param q = {.version = p->version, .offset = (int64_t)(p->written - p->chunk_fill)};
    h->ntensors = 1;
    int64_t shape = (int64_t)p->chunk_fill;
    gb_wire_set_tensor(&h->tensors[0], "data", GB_DTYPE_UINT8, 1, &shape, NULL);
    if (zmq_msg_size(&p->chunk) != p->chunk_fill) { /* the last chunk is shorter */
        zmq_msg_t last;
        if (zmq_msg_init_size(&last, p->chunk_fill) != 0)
            return gb_wire_zmq_error(err, "parameter publisher: zmq_msg_init_size");
        memcpy(zmq_msg_data(&last), zmq_msg_data(&p->chunk), p->chunk_fill);
        zmq_msg_close(&p->chunk);
        zmq_msg_move(&p->chunk, &last);
        zmq_msg_close(&last);
    }
    gb_wire_payload pl = {NULL, NULL, NULL, &p->chunk};
    int rc = pub_send(p, h, &gb_schema_param_chunk, &q, &pl, err);
    zmq_msg_close(&p->chunk); /* empty after a send; frees it after a failure */
    p->chunk_open = 0;
    p->chunk_fill = 0;
    return rc;
}

int gb_param_publish_write(gb_param_publisher *p, const void *data, size_t len, gb_error *err)
{
    if (!p->active)
        return gb_error_set(err, GB_EINVAL, "parameter publish: write without begin (or after "
                            "a failed send)");
    if (len > p->total - p->written)
        return gb_error_set(err, GB_EINVAL, "parameter version %lld: writes exceed the declared "
                            "%llu bytes", (long long)p->version, (unsigned long long)p->total);
    p->crc = gb_crc32c(p->crc, data, len);
    const unsigned char *src = data;
    while (len > 0) {
        if (!p->chunk_open) {
            uint64_t left = p->total - p->written;
            size_t size = (size_t)(left < p->o.chunk_bytes ? left : p->o.chunk_bytes);
            if (zmq_msg_init_size(&p->chunk, size) != 0)
                return gb_wire_zmq_error(err, "parameter publisher: zmq_msg_init_size");
            p->chunk_open = 1;
            p->chunk_fill = 0;
        }
        size_t room = zmq_msg_size(&p->chunk) - p->chunk_fill;
        size_t n = len < room ? len : room;
        memcpy((char *)zmq_msg_data(&p->chunk) + p->chunk_fill, src, n);
        p->chunk_fill += n;
        p->written += n;
        src += n;
        len -= n;
        if (p->chunk_fill == zmq_msg_size(&p->chunk)) {
            int rc = flush_chunk(p, err);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int gb_param_publish_end(gb_param_publisher *p, gb_error *err)
{
    if (!p->active)
        return gb_error_set(err, GB_EINVAL, "parameter publish: end without begin (or after a "
                            "failed send)");
    if (p->written != p->total)
        return gb_error_set(err, GB_EINVAL, "parameter version %lld: %llu of %llu bytes written",
                            (long long)p->version, (unsigned long long)p->written,
                            (unsigned long long)p->total);
    int rc;
    if (p->chunk_open && (rc = flush_chunk(p, err)))
        return rc;
    gb_wire_header *h = &p->hdr;
    gb_wire_header_init(h, GB_MSG_PARAM_END, p->o.role, p->o.index);
    h->policy_version = p->version;
    gb_msg_param q = {.version = p->version, .total = (int64_t)p->total,
                      .crc = (int64_t)p->crc};
    rc = pub_send(p, h, &gb_schema_param_end, &q, NULL, err);
    p->active = 0;
    return rc;
}

int gb_param_publish(gb_param_publisher *p, int64_t version, const gb_param_entry *layout,
                     int nlayout, const void *data, uint64_t bytes, gb_error *err)
{
    int rc = gb_param_publish_begin(p, version, layout, nlayout, bytes, err);
    if (!rc)
        rc = gb_param_publish_write(p, data, (size_t)bytes, err);
    if (!rc)
        rc = gb_param_publish_end(p, err);
    return rc;
}
