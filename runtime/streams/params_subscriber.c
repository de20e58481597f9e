/* runtime/streams/params_subscriber.c: the parameter subscriber: assembles blobs from the PUB
 * chunks, repairs or joins late through FETCH, applies only complete, CRC-checked versions.
 * Versions are ordered by the service's serial, never by their number (params.h, "Order"). */
#include "runtime/streams/params_impl.h"

#include "runtime/base/clock.h"
#include "runtime/base/crc32c.h"
#include "runtime/streams/curve.h"
#include "runtime/base/log.h"

#include <stdlib.h>
#include <string.h>

#define RETRY_SOON_NS 100000000ULL /* the service does not have our version yet: ask again */

enum { MODE_IDLE = 0, MODE_PUB = 1, MODE_FETCH = 2 };

struct gb_param_subscriber {
    gb_param_subscriber_opts o;
    void *sub, *dealer;
    param_blob *current;
    param_blob *asmb; /* being assembled */
    int mode;
    uint64_t expected; /* bytes of asmb present, in order */
    uint32_t crc_run;
    int have_crc;
    uint32_t crc_want;
    int needed_fetch;  /* asmb needed fetches */
    uint64_t next_req; /* next offset to fetch */
    uint64_t last_progress_ns;
    uint64_t next_info_ns; /* when to ask the service again (0: no timer) */
    uint64_t seq;
    uint64_t refused; /* serial of the last version refused as too large (0: none) */
    int applied_now;
    param_tap_fn *tap; /* a relay's: sees every PUB message taken in (params_impl.h) */
    void *tap_ctx;
    gb_wire_msg msg;
    gb_wire_header hdr;
    gb_param_subscriber_stats st;
};

int gb_param_subscriber_open(gb_param_subscriber **out, void *zctx,
                             const gb_param_subscriber_opts *o, gb_error *err)
{
    *out = NULL;
    if (!o->pub_endpoint || !o->fetch_endpoint || o->timeout_ms <= 0 || o->window < 0 ||
        o->recheck_ms < 0 || o->rcv_hwm < 0 || o->max_entries < 0 ||
        o->max_entries > GB_PARAM_MAX_ENTRIES)
        return gb_error_set(err, GB_EINVAL, "parameter subscriber: need pub and fetch endpoints, "
                            "timeout_ms > 0 and max_entries in [0, %d]", GB_PARAM_MAX_ENTRIES);
    gb_param_subscriber *s = calloc(1, sizeof *s);
    if (!s)
        return gb_error_set(err, GB_ENOMEM, "parameter subscriber: out of memory");
    int rc;
    s->o = *o;
    s->o.pub_endpoint = s->o.fetch_endpoint = NULL;
    if (!s->o.recheck_ms)
        s->o.recheck_ms = 1000;
    if (!s->o.window)
        s->o.window = 4;
    gb_wire_msg_init(&s->msg);
    s->sub = zmq_socket(zctx, ZMQ_SUB);
    s->dealer = zmq_socket(zctx, ZMQ_DEALER);
    if (!s->sub || !s->dealer) {
        rc = gb_wire_zmq_error(err, "parameter subscriber: zmq_socket");
        goto fail;
    }
    int linger = 0, hwm = o->rcv_hwm ? o->rcv_hwm : 64;
    if (zmq_setsockopt(s->sub, ZMQ_LINGER, &linger, sizeof linger) ||
        zmq_setsockopt(s->dealer, ZMQ_LINGER, &linger, sizeof linger) ||
        zmq_setsockopt(s->sub, ZMQ_RCVHWM, &hwm, sizeof hwm) ||
        zmq_setsockopt(s->sub, ZMQ_SUBSCRIBE, "", 0)) {
        rc = gb_wire_zmq_error(err, "parameter subscriber: setsockopt");
        goto fail;
    }
    if (o->chunk_bytes > 0) {
        /* what the service forwards or answers: a chunk, or a layout of any version its input
         * took, ours or not (a larger version is refused here after it is read) */
        uint64_t frame = o->chunk_bytes > PARAM_LAYOUT_MAX ? o->chunk_bytes : PARAM_LAYOUT_MAX;
        if ((rc = gb_wire_set_max_frame(s->sub, frame, err)) ||
            (rc = gb_wire_set_max_frame(s->dealer, frame, err)))
            goto fail;
    }
    if (gb_curve_connect(zctx, s->sub, o->pub_endpoint) != 0) {
        rc = gb_wire_zmq_error(err, "parameter subscriber: connect");
        gb_error_prefix(err, "%s", o->pub_endpoint);
        goto fail;
    }
    if (gb_curve_connect(zctx, s->dealer, o->fetch_endpoint) != 0) {
        rc = gb_wire_zmq_error(err, "parameter subscriber: connect");
        gb_error_prefix(err, "%s", o->fetch_endpoint);
        goto fail;
    }
    s->next_info_ns = 1; /* ask for the latest at the first poll: late joiners start there */
    *out = s;
    return 0;
fail:
    gb_param_subscriber_close(s);
    return rc;
}

void gb_param_subscriber_close(gb_param_subscriber *s)
{
    if (!s)
        return;
    gb_wire_msg_release(&s->msg);
    if (s->sub)
        zmq_close(s->sub);
    if (s->dealer)
        zmq_close(s->dealer);
    blob_put(s->current);
    blob_put(s->asmb);
    free(s);
}

int64_t gb_param_subscriber_version(const gb_param_subscriber *s)
{
    return s->current ? s->current->pub.version : -1;
}

const gb_param_blob *gb_param_subscriber_acquire(gb_param_subscriber *s)
{
    return s->current ? gb_param_blob_retain(&s->current->pub) : NULL;
}

gb_param_subscriber_stats gb_param_subscriber_get_stats(const gb_param_subscriber *s)
{
    return s->st;
}

static void send_req(gb_param_subscriber *s, int type, int64_t v, uint64_t off, uint64_t len)
{
    gb_wire_header *h = &s->hdr;
    gb_wire_header_init(h, type, s->o.role, s->o.index);
    h->seq = ++s->seq;
    gb_msg_param q = {.version = v, .offset = (int64_t)off, .length = (int64_t)len};
    gb_error e;
    if (type == GB_MSG_PARAM_FETCH && gb_wire_schema_write(&gb_schema_param_fetch, &q, h, &e))
        GB_DEBUG("parameter subscriber: request not sent: %s", e.msg);
    else if (gb_wire_send(s->dealer, NULL, 0, h, NULL, ZMQ_DONTWAIT, &e))
        GB_DEBUG("parameter subscriber: request not sent: %s", e.msg);
}

static void ask_info(gb_param_subscriber *s, uint64_t now)
{
    send_req(s, GB_MSG_PARAM_INFO_REQ, 0, 0, 0);
    s->next_info_ns = now + (uint64_t)s->o.timeout_ms * 1000000ULL; /* if unanswered */
}

static void drop_asm(gb_param_subscriber *s, int abandoned)
{
    if (s->asmb && abandoned)
        s->st.abandoned++;
    blob_put(s->asmb);
    s->asmb = NULL;
    s->mode = MODE_IDLE;
}

/* Counts a rejected message and warns about it, rate-limited (gb_log_due): the parameter
 * service relays what its input receives, so a peer can repeat this at will. */
static void reject(gb_param_subscriber *s, const char *why)
{
    s->st.rejected++;
    if (gb_log_due(s->st.rejected))
        GB_WARN("parameter subscriber: rejected a message (%llu so far): %s",
                (unsigned long long)s->st.rejected, why);
}

/* 1 when a version of total bytes with this layout exceeds the subscriber's bounds (it is then
 * refused: counted, and its serial remembered so that its other messages are ignored). */
static int too_large(gb_param_subscriber *s, int64_t v, uint64_t serial, uint64_t total,
                     const gb_tensor_view *layout, uint64_t now)
{
    uint64_t entries = layout->bytes / PARAM_RECORD_BYTES;
    if (!(s->o.max_bytes && total > s->o.max_bytes) &&
        !(s->o.max_entries && entries > (uint64_t)s->o.max_entries))
        return 0;
    char why[200];
    snprintf(why, sizeof why, "version %lld has %llu bytes and %llu layout entries; this "
             "subscriber takes at most %llu and %d (0: any): refused", (long long)v,
             (unsigned long long)total, (unsigned long long)entries,
             (unsigned long long)s->o.max_bytes, s->o.max_entries);
    reject(s, why);
    s->refused = serial;
    s->next_info_ns = now + (uint64_t)s->o.recheck_ms * 1000000ULL;
    return 1;
}

static void start_asm(gb_param_subscriber *s, int64_t v, uint64_t serial, uint64_t total,
                      uint64_t chunk, const gb_tensor_view *layout, int mode, uint64_t now)
{
    gb_error e;
    drop_asm(s, 1); /* a newer version replaces it at the service: it will not finish */
    if (too_large(s, v, serial, total, layout, now))
        return;
    s->asmb = param_blob_new(v, total, chunk, layout->data, layout->bytes, &e);
    if (!s->asmb) {
        s->st.rejected += e.code == GB_EPROTO;
        GB_ERROR("parameter subscriber: version %lld: %s", (long long)v, e.msg);
        s->next_info_ns = now + (uint64_t)s->o.recheck_ms * 1000000ULL;
        return;
    }
    s->asmb->serial = serial;
    s->mode = mode;
    s->expected = 0;
    s->crc_run = 0;
    s->have_crc = 0;
    s->needed_fetch = mode == MODE_FETCH;
    s->next_req = 0;
    s->last_progress_ns = now;
}

/* Moves the assembly to fetching (a chunk is missing, or it stalled). */
static void go_fetch(gb_param_subscriber *s, uint64_t now)
{
    if (s->mode != MODE_FETCH) {
        s->mode = MODE_FETCH;
        s->needed_fetch = 1;
    }
    s->last_progress_ns = now;
    ask_info(s, now);
}

static void finish(gb_param_subscriber *s, uint64_t now)
{
    param_blob *b = s->asmb;
    if (s->crc_run != s->crc_want) {
        s->st.corrupt++;
        GB_WARN("parameter subscriber: version %lld failed its CRC; fetching it again",
                (long long)b->pub.version);
        s->expected = 0;
        s->crc_run = 0;
        s->next_req = 0;
        go_fetch(s, now);
        return;
    }
    b->pub.crc = s->crc_want;
    blob_put(s->current);
    s->current = b;
    s->asmb = NULL;
    s->mode = MODE_IDLE;
    s->st.applied++;
    s->st.repaired += s->needed_fetch;
    s->applied_now = 1;
    s->next_info_ns = now + (uint64_t)s->o.recheck_ms * 1000000ULL;
}

static void fill_window(gb_param_subscriber *s)
{
    param_blob *b = s->asmb;
    uint64_t chunk = b->chunk_bytes;
    uint64_t limit = s->expected + (uint64_t)s->o.window * chunk;
    if (s->next_req < s->expected)
        s->next_req = s->expected;
    while (s->next_req < b->pub.bytes && s->next_req < limit) {
        uint64_t n = b->pub.bytes - s->next_req < chunk ? b->pub.bytes - s->next_req : chunk;
        send_req(s, GB_MSG_PARAM_FETCH, b->pub.version, s->next_req, n);
        s->next_req += n;
    }
}

/* Appends bytes at offset off of version v when they are the next ones; 1 when taken. */
static int take(gb_param_subscriber *s, uint64_t off, const gb_tensor_view *d, uint64_t now)
{
    param_blob *b = s->asmb;
    if (off != s->expected || d->bytes > b->pub.bytes - off)
        return 0;
    memcpy(b->data + off, d->data, d->bytes);
    s->crc_run = gb_crc32c(s->crc_run, d->data, d->bytes);
    s->expected += d->bytes;
    s->last_progress_ns = now;
    return 1;
}

/* The serials of the current version and of the one being assembled (0: none). */
static uint64_t cur_serial(const gb_param_subscriber *s)
{
    return s->current ? s->current->serial : 0;
}

static uint64_t asm_serial(const gb_param_subscriber *s) { return s->asmb ? s->asmb->serial : 0; }

/* One message of the service's PUB: a version's begin, chunk or end, ordered by its serial.
 * Returns 1 when it was well formed (a relay passes it on), else 0 (rejected and counted). */
static int on_pub(gb_param_subscriber *s, gb_wire_msg *m, uint64_t now)
{
    const gb_wire_header *h = &m->hdr;
    const gb_wire_schema *kind = param_stream_kind(h->type);
    gb_msg_param q = {0};
    gb_error e;
    if (!kind) {
        reject(s, "a message of another type on the service's PUB");
        return 0;
    }
    if (gb_wire_schema_read(kind, h, &q, &e) || q.serial == 0) {
        reject(s, q.serial == 0 ? "a message without the service's serial" : e.msg);
        return 0;
    }
    uint64_t sr = (uint64_t)q.serial, asm_s = asm_serial(s);
    if (sr <= cur_serial(s) || sr == s->refused)
        return 1;
    if (h->type == GB_MSG_PARAM_BEGIN) {
        if (sr <= asm_s)
            return 1;
        gb_tensor_view l = gb_wire_msg_tensor(m, 0);
        start_asm(s, q.version, sr, (uint64_t)q.total, (uint64_t)q.chunk, &l, MODE_PUB, now);
    } else if (h->type == GB_MSG_PARAM_CHUNK) {
        if (sr > asm_s) { /* missed its begin: joined late, or the begin was dropped */
            if (s->mode != MODE_FETCH || s->next_info_ns == 0)
                ask_info(s, now);
            if (s->mode == MODE_IDLE)
                s->mode = MODE_FETCH, s->last_progress_ns = now;
            return 1;
        }
        if (sr != asm_s || s->mode != MODE_PUB)
            return 1;
        gb_tensor_view d = gb_wire_msg_tensor(m, 0);
        if (!take(s, (uint64_t)q.offset, &d, now))
            go_fetch(s, now); /* a chunk went missing */
    } else if (sr != asm_s) {
        ask_info(s, now); /* the end of a version we have not seen begin: fetch it */
        if (s->mode == MODE_IDLE)
            s->mode = MODE_FETCH, s->last_progress_ns = now;
    } else {
        s->crc_want = (uint32_t)q.crc;
        s->have_crc = 1;
        if (s->mode == MODE_PUB && s->expected == s->asmb->pub.bytes)
            finish(s, now);
        else
            go_fetch(s, now);
    }
    return 1;
}

/* The service's description of its latest version (INFO, read into q): fetch it when it is
 * newer than what we have. */
static void on_info(gb_param_subscriber *s, gb_wire_msg *m, const gb_msg_param *q, uint64_t now)
{
    uint64_t sr = (uint64_t)q->serial, asm_s = asm_serial(s);
    uint64_t receiving = (uint64_t)q->incoming;
    if (s->asmb && asm_s > sr && asm_s != receiving) {
        /* the service dropped the version we assemble (replaced, torn or timed out) */
        drop_asm(s, 1);
        asm_s = 0;
    }
    /* nothing newer at the service (or only a version refused as too large) */
    if (m->hdr.status != 0 || sr <= cur_serial(s) || sr == s->refused) {
        if (s->asmb && s->mode == MODE_FETCH)
            s->next_info_ns = now + RETRY_SOON_NS;
        else if (!s->asmb)
            s->mode = MODE_IDLE;
        return;
    }
    if (q->chunk <= 0 || m->hdr.ntensors != 1) {
        reject(s, "a version's description without its chunk size or layout");
        return;
    }
    if (sr < asm_s) { /* the service has not finished the version we assemble */
        s->next_info_ns = now + RETRY_SOON_NS;
        return;
    }
    if (sr == asm_s && s->mode == MODE_PUB) { /* a routine recheck while PUB delivers */
        s->crc_want = (uint32_t)q->crc;
        s->have_crc = 1;
        return;
    }
    if (sr > asm_s) {
        gb_tensor_view l = gb_wire_msg_tensor(m, 0);
        start_asm(s, q->version, sr, (uint64_t)q->total, (uint64_t)q->chunk, &l, MODE_FETCH,
                  now);
        if (!s->asmb)
            return; /* refused (too large or malformed) */
    }
    s->mode = MODE_FETCH;
    s->needed_fetch = 1;
    s->crc_want = (uint32_t)q->crc;
    s->have_crc = 1;
    s->next_req = s->expected;
    s->last_progress_ns = now;
    s->next_info_ns = 0;
    if (s->expected == s->asmb->pub.bytes)
        finish(s, now);
    else
        fill_window(s);
}

/* Bytes the service sent for a fetch (DATA, read into q). */
static void on_data(gb_param_subscriber *s, gb_wire_msg *m, const gb_msg_param *q, uint64_t now)
{
    int64_t asm_v = s->asmb ? s->asmb->pub.version : -1;
    if (m->hdr.ntensors != 1) {
        reject(s, "a fetch's answer without its data");
        return;
    }
    if (s->mode != MODE_FETCH || q->version != asm_v || !s->have_crc)
        return; /* stale */
    gb_tensor_view d = gb_wire_msg_tensor(m, 0);
    if (!take(s, (uint64_t)q->offset, &d, now))
        return; /* a duplicate after a retry */
    s->st.fetched_bytes += d.bytes;
    if (s->expected == s->asmb->pub.bytes)
        finish(s, now);
    else
        fill_window(s);
}

static void on_reply(gb_param_subscriber *s, gb_wire_msg *m, uint64_t now)
{
    const gb_wire_header *h = &m->hdr;
    gb_msg_param q = {0};
    gb_error e;
    if (h->type == GB_MSG_PARAM_INFO) {
        s->next_info_ns = now + (uint64_t)s->o.recheck_ms * 1000000ULL;
        if (gb_wire_schema_read(&gb_schema_param_info, h, &q, &e))
            reject(s, e.msg);
        else
            on_info(s, m, &q, now);
    } else if (h->type == GB_MSG_PARAM_DATA) {
        if (h->status != 0) { /* the service moved on: start over from its latest */
            if (s->mode == MODE_FETCH)
                ask_info(s, now);
        } else if (gb_wire_schema_read(&gb_schema_param_data, h, &q, &e)) {
            reject(s, e.msg);
        } else {
            on_data(s, m, &q, now);
        }
    } else {
        reject(s, "a message of another type from the service");
    }
}

static void timers(gb_param_subscriber *s, uint64_t now)
{
    uint64_t stall = (uint64_t)s->o.timeout_ms * 1000000ULL;
    if (s->asmb && now - s->last_progress_ns > stall) {
        /* no progress: chunks lost (PUB drop with nothing after it, a dead publisher, a
         * dropped reply); ask again from where we are */
        s->next_req = s->expected;
        go_fetch(s, now);
        return;
    }
    if (s->next_info_ns && now >= s->next_info_ns)
        ask_info(s, now);
}

uint64_t param_subscriber_wake_ns(const gb_param_subscriber *s, uint64_t end)
{
    uint64_t wake = end;
    if (s->next_info_ns && s->next_info_ns < wake)
        wake = s->next_info_ns;
    if (s->asmb) {
        uint64_t stall = s->last_progress_ns + (uint64_t)s->o.timeout_ms * 1000000ULL + 1;
        if (stall < wake)
            wake = stall;
    }
    return wake;
}

void param_subscriber_set_tap(gb_param_subscriber *s, param_tap_fn *fn, void *ctx)
{
    s->tap = fn;
    s->tap_ctx = ctx;
}

void param_subscriber_sockets(const gb_param_subscriber *s, void **sub, void **dealer)
{
    *sub = s->sub;
    *dealer = s->dealer;
}

param_blob *param_subscriber_current(const gb_param_subscriber *s) { return s->current; }

uint64_t param_subscriber_incoming(const gb_param_subscriber *s) { return asm_serial(s); }

int gb_param_subscriber_poll(gb_param_subscriber *s, int timeout_ms, gb_error *err)
{
    gb_error local;
    if (!err)
        err = &local;
    uint64_t start = gb_now_ns();
    uint64_t end = start + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ULL;
    s->applied_now = 0;
    for (;;) {
        uint64_t now = gb_now_ns();
        timers(s, now);
        for (int busy = 1; busy;) {
            busy = 0;
            int rc = gb_wire_recv(s->sub, &s->msg, 0, ZMQ_DONTWAIT, err);
            if (rc == 0) {
                if (on_pub(s, &s->msg, gb_now_ns()) && s->tap)
                    s->tap(s->tap_ctx, &s->msg);
                busy = 1;
            } else if (rc == GB_EPROTO) {
                reject(s, err->msg);
                busy = 1;
            } else if (rc != GB_EAGAIN) {
                return rc;
            }
            gb_wire_msg_release(&s->msg);
            rc = gb_wire_recv(s->dealer, &s->msg, 0, ZMQ_DONTWAIT, err);
            if (rc == 0) {
                on_reply(s, &s->msg, gb_now_ns());
                busy = 1;
            } else if (rc == GB_EPROTO) {
                reject(s, err->msg);
                busy = 1;
            } else if (rc != GB_EAGAIN) {
                return rc;
            }
            gb_wire_msg_release(&s->msg);
        }
        now = gb_now_ns();
        if (s->applied_now)
            return 1;
        if (now >= end)
            return 0;
        uint64_t wake = param_subscriber_wake_ns(s, end);
        long wait_ms = wake > now ? (long)((wake - now + 999999) / 1000000) : 0;
        zmq_pollitem_t it[2] = {{s->sub, 0, ZMQ_POLLIN, 0}, {s->dealer, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(it, 2, wait_ms) < 0)
            return gb_wire_zmq_error(err, "parameter subscriber: zmq_poll");
    }
}

int gb_param_subscriber_wait(gb_param_subscriber *s, int64_t min_version, int timeout_ms,
                             gb_error *err)
{
    uint64_t end = gb_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
    while (gb_param_subscriber_version(s) < min_version) {
        uint64_t now = gb_now_ns();
        if (now >= end)
            return gb_error_set(err, GB_ETIMEOUT, "parameter subscriber: version %lld not "
                                "reached within %d ms (have %lld)", (long long)min_version,
                                timeout_ms, (long long)gb_param_subscriber_version(s));
        int rc = gb_param_subscriber_poll(s, (int)((end - now + 999999) / 1000000), err);
        if (rc < 0)
            return rc;
    }
    return 0;
}
