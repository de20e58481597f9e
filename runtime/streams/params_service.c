/* runtime/streams/params_service.c: the parameter service: checks incoming blobs, forwards them on
 * PUB as they arrive, keeps the latest verified one and serves INFO_REQ/FETCH (see params.h). A
 * relay (params_relay.c) opens one without an input and feeds it through params_impl.h.
 * Bytes sent are counted per PUB peer (a socket monitor follows PUB's connections). */
#include "runtime/streams/params_impl.h"

#include "runtime/base/clock.h"
#include "runtime/base/crc32c.h"
#include "runtime/streams/curve.h"
#include "runtime/base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct gb_param_service {
    gb_param_service_opts o;
    void *in, *pub, *fetch;
    void *mon; /* PAIR: PUB's connect/disconnect events (NULL: not followed) */
    void *zctx; /* for CURVE's refusal count (PUB's failed handshakes come through mon) */
    uint64_t relayed_incoming; /* relay mode: the serial the relay assembles (0: none) */
    char ep_in[256], ep_pub[256], ep_fetch[256];
    param_blob *latest;   /* verified */
    param_blob *incoming; /* being assembled */
    uint64_t in_expected; /* next offset of incoming */
    uint32_t in_crc;
    uint64_t in_progress_ns; /* when incoming began or last got a chunk (gb_now_ns) */
    uint64_t in_deadline_ns; /* incoming is abandoned after this, whatever arrives */
    uint64_t serial;         /* the last serial given (params.h, "Order") */
    uint64_t seq;
    gb_wire_msg msg;
    gb_wire_header hdr;
    gb_param_service_stats st;
};

/* Follows PUB's peers with a socket monitor (over inproc, so the context must be the one PUB
 * lives in): sent_bytes counts a forwarded frame once per peer connected. */
static int follow_peers(gb_param_service *s, void *zctx, void *pub, gb_error *err)
{
    /* a name never used before in this process: a closed monitor's may still be bound */
    static atomic_ullong next;
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://gb-params-peers-%llu",
             (unsigned long long)atomic_fetch_add(&next, 1));
    /* libzmq keeps one monitor a socket: this one also reports PUB's failed CURVE handshakes
     * (bound with gb_curve_bind_monitored) */
    s->zctx = zctx;
    if (zmq_socket_monitor(pub, ep, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED |
                                        ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                        ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0)
        return gb_wire_zmq_error(err, "parameter service: zmq_socket_monitor");
    /* libzmq's I/O thread sends events blocking: the queue must never fill (no bound on our
     * side), and the monitor must be stopped before this end closes (gb_param_service_close),
     * or an event for a peer that leaves later blocks that I/O thread, and every socket it
     * serves, for good */
    int linger = 0, unbounded = 0;
    s->mon = zmq_socket(zctx, ZMQ_PAIR);
    if (!s->mon || zmq_setsockopt(s->mon, ZMQ_LINGER, &linger, sizeof linger) ||
        zmq_setsockopt(s->mon, ZMQ_RCVHWM, &unbounded, sizeof unbounded) ||
        zmq_connect(s->mon, ep) != 0)
        return gb_wire_zmq_error(err, "parameter service: monitor connect");
    return 0;
}

/* Binds one socket; a peer sending a frame over max_frame is disconnected (gb_wire_set_max_frame:
 * the input takes chunks and layouts, PUB and the fetch ROUTER only small requests). */
static int bind_one(void *zctx, int type, const char *ep, char *out, size_t cap, void **sock,
                    int hwm_opt, int hwm, uint64_t max_frame, gb_param_service *follow,
                    gb_error *err)
{
    *sock = zmq_socket(zctx, type);
    if (!*sock)
        return gb_wire_zmq_error(err, "parameter service: zmq_socket");
    int linger = 0;
    if (zmq_setsockopt(*sock, ZMQ_LINGER, &linger, sizeof linger) ||
        (hwm_opt && zmq_setsockopt(*sock, hwm_opt, &hwm, sizeof hwm)))
        return gb_wire_zmq_error(err, "parameter service: setsockopt");
    int rc = gb_wire_set_max_frame(*sock, max_frame, err);
    if (rc)
        return rc;
    /* before the bind: peers retrying their connect are accepted the moment it listens */
    if (follow && (rc = follow_peers(follow, zctx, *sock, err)))
        return rc;
    if ((follow ? gb_curve_bind_monitored(zctx, *sock, ep) : gb_curve_bind(zctx, *sock, ep)) !=
        0) {
        int rc = gb_wire_zmq_error(err, "parameter service: bind");
        gb_error_prefix(err, "%s", ep);
        return rc;
    }
    size_t len = cap;
    if (zmq_getsockopt(*sock, ZMQ_LAST_ENDPOINT, out, &len) != 0)
        return gb_wire_zmq_error(err, "parameter service: ZMQ_LAST_ENDPOINT");
    return 0;
}

/* Reads the monitor's queued events into pub_peers. Each event is two frames: 6 bytes (u16
 * event, u32 value), then the peer's address. */
static void count_peers(gb_param_service *s)
{
    for (;;) {
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, s->mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        uint16_t id = 0;
        if (zmq_msg_size(&ev) >= 2)
            memcpy(&id, zmq_msg_data(&ev), 2);
        int more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        if (more) {
            zmq_msg_init(&addr);
            zmq_msg_recv(&addr, s->mon, 0);
            zmq_msg_close(&addr);
        }
        if (id == ZMQ_EVENT_ACCEPTED)
            s->st.pub_peers++;
        else if (id == ZMQ_EVENT_DISCONNECTED && s->st.pub_peers > 0)
            s->st.pub_peers--;
        else if (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
                 id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
            gb_curve_note_failed_handshake(s->zctx);
    }
}

int gb_param_service_open(gb_param_service **out, void *zctx, const gb_param_service_opts *o,
                          gb_error *err)
{
    *out = NULL;
    if (!o->pub_endpoint || !o->fetch_endpoint || o->pub_hwm < 0)
        return gb_error_set(err, GB_EINVAL, "parameter service: need pub and fetch endpoints");
    gb_param_service *s = calloc(1, sizeof *s);
    if (!s)
        return gb_error_set(err, GB_ENOMEM, "parameter service: out of memory");
    s->o = *o;
    s->o.in_endpoint = s->o.pub_endpoint = s->o.fetch_endpoint = NULL;
    if (s->o.stall_ms <= 0)
        s->o.stall_ms = GB_PARAM_STALL_MS;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s->serial = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    gb_wire_msg_init(&s->msg);
    int rc;
    if (!s->o.max_chunk_bytes || s->o.max_chunk_bytes > GB_PARAM_CHUNK_MAX)
        s->o.max_chunk_bytes = GB_PARAM_CHUNK_MAX;
    uint64_t in_frame = s->o.max_chunk_bytes > PARAM_LAYOUT_MAX ? s->o.max_chunk_bytes
                                                                : PARAM_LAYOUT_MAX;
    if ((o->in_endpoint && (rc = bind_one(zctx, ZMQ_PULL, o->in_endpoint, s->ep_in,
                                          sizeof s->ep_in, &s->in, ZMQ_RCVHWM, 16, in_frame,
                                          NULL, err))) ||
        (rc = bind_one(zctx, ZMQ_PUB, o->pub_endpoint, s->ep_pub, sizeof s->ep_pub, &s->pub,
                       ZMQ_SNDHWM, o->pub_hwm ? o->pub_hwm : 64, 0, s, err)) ||
        (rc = bind_one(zctx, ZMQ_ROUTER, o->fetch_endpoint, s->ep_fetch, sizeof s->ep_fetch,
                       &s->fetch, 0, 0, 0, NULL, err)))
        goto fail;
    *out = s;
    return 0;
fail:
    gb_param_service_close(s);
    return rc;
}

void gb_param_service_close(gb_param_service *s)
{
    if (!s)
        return;
    gb_wire_msg_release(&s->msg);
    if (s->pub)
        zmq_socket_monitor(s->pub, NULL, 0); /* first (none started: nothing): follow_peers */
    if (s->mon)
        zmq_close(s->mon);
    if (s->in)
        zmq_close(s->in);
    if (s->pub)
        zmq_close(s->pub);
    if (s->fetch)
        zmq_close(s->fetch);
    blob_put(s->latest);
    blob_put(s->incoming);
    free(s);
}

const char *gb_param_service_endpoint(const gb_param_service *s, const char *which)
{
    if (strcmp(which, "in") == 0)
        return s->ep_in;
    if (strcmp(which, "pub") == 0)
        return s->ep_pub;
    if (strcmp(which, "fetch") == 0)
        return s->ep_fetch;
    return NULL;
}

int64_t gb_param_service_version(const gb_param_service *s)
{
    return s->latest ? s->latest->pub.version : -1;
}

gb_param_service_stats gb_param_service_get_stats(const gb_param_service *s) { return s->st; }

/* Counts a rejected message and warns about it, rate-limited (gb_log_due): a peer that floods
 * malformed input must not flood the log. */
static void reject(gb_param_service *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reject(gb_param_service *s, const char *fmt, ...)
{
    s->st.rejected++;
    if (!gb_log_due(s->st.rejected))
        return;
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    GB_WARN("parameter service: %s (%llu messages rejected so far; logging the 1st, 2nd, 4th, "
            "...)", why, (unsigned long long)s->st.rejected);
}

/* Drops the unfinished version, counted and warned about (rate-limited like reject). */
static void abandon(gb_param_service *s, const char *why)
{
    if (!s->incoming)
        return;
    s->st.abandoned++;
    if (gb_log_due(s->st.abandoned))
        GB_WARN("parameter service: version %lld abandoned: %s (%llu abandoned so far)",
                (long long)s->incoming->pub.version, why, (unsigned long long)s->st.abandoned);
    blob_put(s->incoming);
    s->incoming = NULL;
}

/* The unfinished version past its bound (params.h, "Order") is abandoned. */
static void check_stall(gb_param_service *s, uint64_t now)
{
    if (!s->incoming)
        return;
    uint64_t stall = s->in_progress_ns + (uint64_t)s->o.stall_ms * 1000000ULL;
    if (now < stall && now < s->in_deadline_ns)
        return;
    s->st.timed_out++;
    abandon(s, now >= stall ? "no chunk within parameters' stall bound"
                            : "not finished within its size's time bound");
}

/* Forwards the current message (its attributes read into q) on PUB with the service as sender
 * and serial as its order: the data frame moved, or with copy set, a reference to it taken
 * (zmq_msg_copy shares the bytes, it copies nothing but frames small enough to live inside the
 * message). */
static void forward(gb_param_service *s, gb_wire_msg *m, const gb_msg_param *q, uint64_t serial,
                    int copy)
{
    gb_wire_header *h = &s->hdr;
    gb_wire_header_init(h, m->hdr.type, s->o.role, s->o.index);
    h->seq = ++s->seq;
    h->policy_version = m->hdr.policy_version;
    h->ntensors = m->hdr.ntensors;
    memcpy(h->tensors, m->hdr.tensors, (size_t)h->ntensors * sizeof h->tensors[0]);
    gb_msg_param out = *q;
    out.serial = (int64_t)serial;
    gb_error e;
    if (gb_wire_schema_write(param_stream_kind(h->type), &out, h, &e)) {
        GB_DEBUG("parameter service: publish failed: %s", e.msg);
        return;
    }
    zmq_msg_t ref;
    zmq_msg_init(&ref);
    zmq_msg_t *frame = m->nframes ? &m->frames[0] : NULL;
    if (frame && copy && zmq_msg_copy(&ref, frame) == 0)
        frame = &ref;
    uint64_t bytes = frame ? zmq_msg_size(frame) : 0;
    gb_wire_payload pl[1] = {{NULL, NULL, NULL, frame}};
    count_peers(s);
    if (gb_wire_send(s->pub, NULL, 0, h, h->ntensors ? pl : NULL, ZMQ_DONTWAIT, &e))
        GB_DEBUG("parameter service: publish failed: %s", e.msg);
    else if (h->type == GB_MSG_PARAM_CHUNK)
        s->st.sent_bytes += bytes * s->st.pub_peers;
    zmq_msg_close(&ref);
}

/* A version begins (q read from m): it replaces whatever is unfinished. */
static int on_begin(gb_param_service *s, gb_wire_msg *m, const gb_msg_param *q, uint64_t now,
                    gb_error *err)
{
    int64_t v = q->version;
    if ((uint64_t)q->chunk > s->o.max_chunk_bytes) {
        reject(s, "malformed begin of version %lld: chunk of %lld bytes, at most %llu",
               (long long)v, (long long)q->chunk, (unsigned long long)s->o.max_chunk_bytes);
        return 0;
    }
    abandon(s, "another version began");
    gb_tensor_view lv = gb_wire_msg_tensor(m, 0);
    s->incoming = param_blob_new(v, (uint64_t)q->total, (uint64_t)q->chunk, lv.data, lv.bytes,
                                 err);
    if (!s->incoming) {
        s->st.abandoned++;
        if (gb_log_due(s->st.abandoned))
            GB_ERROR("parameter service: version %lld dropped: %s (%llu abandoned so far)",
                     (long long)v, err->msg, (unsigned long long)s->st.abandoned);
        return err->code == GB_ENOMEM ? GB_ENOMEM : 0;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t wall = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    s->serial = wall > s->serial ? wall : s->serial + 1;
    s->incoming->serial = s->serial;
    s->in_expected = 0;
    s->in_crc = 0;
    s->in_progress_ns = now;
    uint64_t stall_ns = (uint64_t)s->o.stall_ms * 1000000ULL;
    s->in_deadline_ns = now + stall_ns +
                        (uint64_t)((double)q->total / (double)GB_PARAM_MIN_RATE * 1e9);
    forward(s, m, q, s->incoming->serial, 0);
    return 0;
}

static void on_chunk(gb_param_service *s, gb_wire_msg *m, const gb_msg_param *q, uint64_t now)
{
    if (!s->incoming || q->version != s->incoming->pub.version)
        return; /* the rest of an abandoned version */
    gb_tensor_view d = gb_wire_msg_tensor(m, 0);
    uint64_t off = (uint64_t)q->offset;
    if (off != s->in_expected || d.bytes > s->incoming->pub.bytes - off) {
        abandon(s, "chunk out of order or past the end");
        return;
    }
    memcpy(s->incoming->data + off, d.data, d.bytes);
    s->in_crc = gb_crc32c(s->in_crc, d.data, d.bytes);
    s->in_expected += d.bytes;
    s->in_progress_ns = now;
    forward(s, m, q, s->incoming->serial, 0);
}

static void on_end(gb_param_service *s, gb_wire_msg *m, const gb_msg_param *q)
{
    int64_t v = q->version;
    if (!s->incoming || v != s->incoming->pub.version)
        return;
    if ((uint64_t)q->total != s->incoming->pub.bytes || s->in_expected != (uint64_t)q->total) {
        abandon(s, "ended before all bytes arrived");
        return;
    }
    if ((uint32_t)q->crc != s->in_crc) {
        abandon(s, "CRC-32C mismatch");
        return;
    }
    s->incoming->pub.crc = (uint32_t)q->crc;
    if (s->latest && v <= s->latest->pub.version)
        GB_WARN("parameter service: version %lld replaces %lld: the publisher went back "
                "(restarted from a checkpoint, or %lld was not its)", (long long)v,
                (long long)s->latest->pub.version, (long long)s->latest->pub.version);
    blob_put(s->latest);
    s->latest = s->incoming;
    s->incoming = NULL;
    s->st.versions++;
    forward(s, m, q, s->latest->serial, 0);
}

/* One message from the publisher. The rule (params.h, "Order"): a BEGIN replaces whatever is
 * unfinished, whatever the numbers; a version that verifies becomes the latest. */
static int on_input(gb_param_service *s, gb_wire_msg *m, uint64_t now, gb_error *err)
{
    const gb_wire_schema *kind = param_stream_kind(m->hdr.type);
    gb_msg_param q = {0};
    gb_error e;
    /* with identities (curve.h): a trainer publishes, as itself; another's message is refused
     * without touching the version under way */
    if (m->peer[0] && (strncmp(m->peer, "trainer/", 8) != 0 ||
                       !gb_wire_peer_is(m, m->hdr.role, m->hdr.index))) {
        reject(s, "parameters as %s %d sent by %s", gb_role_name(m->hdr.role), m->hdr.index,
               m->peer);
        return 0;
    }
    if (!kind) {
        reject(s, "a %s message on the input", gb_msg_type_name(m->hdr.type));
        return 0;
    }
    if (gb_wire_schema_read(kind, &m->hdr, &q, &e)) {
        reject(s, "malformed input: %s", e.msg);
        if (m->hdr.type != GB_MSG_PARAM_BEGIN)
            abandon(s, "a malformed chunk or end");
        return 0;
    }
    if (m->hdr.type == GB_MSG_PARAM_BEGIN)
        return on_begin(s, m, &q, now, err);
    if (m->hdr.type == GB_MSG_PARAM_CHUNK)
        on_chunk(s, m, &q, now);
    else
        on_end(s, m, &q);
    return 0;
}

/* The answer to INFO_REQ: the latest version's description (h, payload pl). */
static void describe(gb_param_service *s, const gb_wire_header *q, gb_wire_header *h,
                     gb_wire_payload *pl, gb_error *e)
{
    param_blob *b = s->latest;
    gb_wire_header_init(h, GB_MSG_PARAM_INFO, s->o.role, s->o.index);
    h->seq = q->seq;
    gb_msg_param info = {.version = -1};
    info.incoming = (int64_t)(s->incoming ? s->incoming->serial : s->relayed_incoming);
    if (!b) {
        h->status = GB_ENOTFOUND;
    } else {
        h->policy_version = b->pub.version;
        info = (gb_msg_param){.version = b->pub.version, .total = (int64_t)b->pub.bytes,
                              .chunk = (int64_t)b->chunk_bytes, .crc = (int64_t)b->pub.crc,
                              .serial = (int64_t)b->serial, .incoming = info.incoming};
        h->ntensors = 1;
        int64_t n = (int64_t)b->layout_raw_len;
        gb_wire_set_tensor(&h->tensors[0], "layout", GB_DTYPE_UINT8, 1, &n, NULL);
        pl->data = b->layout_raw;
    }
    if (gb_wire_schema_write(&gb_schema_param_info, &info, h, e))
        GB_DEBUG("parameter service: info: %s", e->msg);
    s->st.infos++;
}

/* The answer to FETCH f: the bytes asked for (h, payload pl), or GB_ENOTFOUND. */
static void serve_fetch(gb_param_service *s, const gb_wire_header *q, const gb_msg_param *f,
                        gb_wire_header *h, gb_wire_payload *pl, gb_error *e)
{
    param_blob *b = s->latest;
    int64_t v = f->version, off = f->offset, len = f->length;
    gb_wire_header_init(h, GB_MSG_PARAM_DATA, s->o.role, s->o.index);
    h->seq = q->seq;
    gb_msg_param d = {.version = v, .offset = off};
    if (!b || v != b->pub.version || off < 0 || (uint64_t)off > b->pub.bytes || len <= 0 ||
        (uint64_t)len > s->o.max_chunk_bytes) {
        h->status = GB_ENOTFOUND;
        d = (gb_msg_param){.version = b ? b->pub.version : -1, .offset = off < 0 ? 0 : off};
    } else {
        uint64_t n = b->pub.bytes - (uint64_t)off;
        if (n > (uint64_t)len)
            n = (uint64_t)len;
        h->policy_version = v;
        h->ntensors = 1;
        int64_t shape = (int64_t)n;
        gb_wire_set_tensor(&h->tensors[0], "data", GB_DTYPE_UINT8, 1, &shape, NULL);
        gb_param_blob_retain(&b->pub); /* released by ZeroMQ when the frame is sent */
        *pl = (gb_wire_payload){b->data + off, param_blob_free_zmq, b, NULL};
        s->st.fetches++;
        s->st.sent_bytes += n;
    }
    if (gb_wire_schema_write(&gb_schema_param_data, &d, h, e))
        GB_DEBUG("parameter service: data: %s", e->msg);
}

static void on_fetch(gb_param_service *s, gb_wire_msg *m)
{
    const gb_wire_header *q = &m->hdr;
    gb_wire_header *h = &s->hdr;
    gb_wire_payload pl = {NULL, NULL, NULL, NULL};
    gb_msg_param f;
    gb_error e;
    if (q->type == GB_MSG_PARAM_INFO_REQ &&
        gb_wire_schema_read(&gb_schema_param_info_req, q, NULL, &e) == 0) {
        describe(s, q, h, &pl, &e);
    } else if (q->type == GB_MSG_PARAM_FETCH &&
               gb_wire_schema_read(&gb_schema_param_fetch, q, &f, &e) == 0) {
        serve_fetch(s, q, &f, h, &pl, &e);
    } else {
        s->st.rejected++;
        return;
    }
    if (gb_wire_send(s->fetch, m->route, m->route_len, h, h->ntensors ? &pl : NULL,
                     ZMQ_DONTWAIT, &e))
        GB_DEBUG("parameter service: reply not sent: %s", e.msg);
}

int gb_param_service_poll(gb_param_service *s, int timeout_ms, gb_error *err)
{
    gb_error local;
    if (!err)
        err = &local;
    if (s->incoming) { /* wake up for its bound (params.h, "Order") */
        uint64_t now = gb_now_ns(), due = s->in_progress_ns + (uint64_t)s->o.stall_ms * 1000000ULL;
        if (s->in_deadline_ns < due)
            due = s->in_deadline_ns;
        long left = due > now ? (long)((due - now) / 1000000ULL) + 1 : 0;
        if (timeout_ms < 0 || left < timeout_ms)
            timeout_ms = (int)left;
    }
    zmq_pollitem_t it[2] = {{s->fetch, 0, ZMQ_POLLIN, 0}, {s->in, 0, ZMQ_POLLIN, 0}};
    if (zmq_poll(it, s->in ? 2 : 1, timeout_ms) < 0)
        return gb_wire_zmq_error(err, "parameter service: zmq_poll");
    count_peers(s);
    int result = 0;
    for (int busy = 1; busy;) {
        busy = 0;
        check_stall(s, gb_now_ns()); /* a flood must not keep it alive */
        int rc = s->in ? gb_wire_recv(s->in, &s->msg, 0, ZMQ_DONTWAIT, err) : GB_EAGAIN;
        if (rc == 0) {
            busy = 1;
            int r = on_input(s, &s->msg, gb_now_ns(), err);
            if (r && !result)
                result = r;
        } else if (rc == GB_EPROTO) {
            busy = 1;
            reject(s, "rejected input: %s", err->msg);
        } else if (rc != GB_EAGAIN) {
            return rc;
        }
        gb_wire_msg_release(&s->msg);
        rc = gb_wire_recv(s->fetch, &s->msg, 1, ZMQ_DONTWAIT, err);
        if (rc == 0) {
            busy = 1;
            on_fetch(s, &s->msg);
        } else if (rc == GB_EPROTO) {
            busy = 1;
            s->st.rejected++;
        } else if (rc != GB_EAGAIN) {
            return rc;
        }
        gb_wire_msg_release(&s->msg);
    }
    check_stall(s, gb_now_ns());
    return result;
}

/* ---- relay mode (params_impl.h) -------------------------------------------------------------- */

void param_service_relay_forward(gb_param_service *s, gb_wire_msg *m)
{
    const gb_wire_schema *kind = param_stream_kind(m->hdr.type);
    gb_msg_param q;
    gb_error e;
    if (!kind || gb_wire_schema_read(kind, &m->hdr, &q, &e)) /* the subscriber checked it */
        return;
    forward(s, m, &q, (uint64_t)q.serial, 1);
}

void param_service_relay_state(gb_param_service *s, param_blob *latest, uint64_t incoming)
{
    if (latest != s->latest) {
        if (latest)
            gb_param_blob_retain(&latest->pub);
        blob_put(s->latest);
        s->latest = latest;
        if (latest)
            s->st.versions++;
    }
    s->relayed_incoming = incoming;
}

void *param_service_fetch_socket(gb_param_service *s) { return s->fetch; }
