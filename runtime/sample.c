/* runtime/sample.c: sample stream sender (PUSH) and receiver (PULL). */
#include "runtime/sample.h"

#include "runtime/clock.h"
#include "runtime/curve.h"
#include "runtime/log.h"
#include "runtime/wire_messages.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A statistics counter: written by the one thread that uses the handle, read by any thread
 * (gb_sample_*_get_stats). Relaxed atomics: no lock and no read-modify-write on the hot path
 * (a relaxed load and store are plain moves on x86-64 and arm64); a reader sees each counter's
 * latest value, not a snapshot consistent across counters. */
typedef _Atomic uint64_t counter;

static inline void counter_add(counter *c, uint64_t by) /* the one writer only */
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + by,
                          memory_order_relaxed);
}

static inline uint64_t counter_get(const counter *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

struct gb_sample_sender {
    void *sock;
    gb_sample_sender_opts o;
    uint64_t seq;
    gb_wire_header hdr;
    counter sent, dropped, bytes;
};

struct gb_sample_receiver {
    void *sock;
    int rcvtimeo; /* ZMQ_RCVTIMEO now set */
    char endpoint[256];
    counter received, rejected, bytes;
};

static int opt(void *sock, int name, int v, gb_error *err, const char *what)
{
    if (zmq_setsockopt(sock, name, &v, sizeof v) != 0)
        return gb_wire_zmq_error(err, what);
    return 0;
}

int gb_sample_kernel_buffer(int hwm, uint64_t chunk_bytes)
{
    uint64_t b = (uint64_t)(hwm > 0 ? hwm : 1) * chunk_bytes;
    return b > (uint64_t)INT32_MAX ? INT32_MAX : (int)b;
}

int gb_sample_sender_open(gb_sample_sender **out, void *zctx, const gb_sample_sender_opts *o,
                          gb_error *err)
{
    *out = NULL;
    if (!o->endpoints || o->n_endpoints <= 0 || o->hwm <= 0 || o->send_timeout_ms < -1)
        return gb_error_set(err, GB_EINVAL, "sample sender: need >= 1 endpoint, hwm > 0 and "
                            "send_timeout_ms >= -1");
    gb_sample_sender *s = calloc(1, sizeof *s);
    if (!s)
        return gb_error_set(err, GB_ENOMEM, "sample sender: out of memory");
    int rc;
    s->o = *o;
    s->sock = zmq_socket(zctx, ZMQ_PUSH);
    if (!s->sock) {
        rc = gb_wire_zmq_error(err, "sample sender: zmq_socket(PUSH)");
        goto fail;
    }
    /* Linger as long as a send may block: chunks still queued at close are delivered (forever
     * with -1, the no-drop setting), not thrown away while counted as sent. */
    if ((rc = opt(s->sock, ZMQ_LINGER, o->send_timeout_ms, err, "sample sender: ZMQ_LINGER")) ||
        (rc = opt(s->sock, ZMQ_SNDHWM, o->hwm, err, "sample sender: ZMQ_SNDHWM")) ||
        (rc = opt(s->sock, ZMQ_IMMEDIATE, 1, err, "sample sender: ZMQ_IMMEDIATE")) ||
        (rc = opt(s->sock, ZMQ_SNDTIMEO, o->send_timeout_ms, err, "sample sender: ZMQ_SNDTIMEO")) ||
        (o->kernel_buffer > 0 &&
         (rc = opt(s->sock, ZMQ_SNDBUF, o->kernel_buffer, err, "sample sender: ZMQ_SNDBUF"))))
        goto fail;
    for (int i = 0; i < o->n_endpoints; i++)
        if (gb_curve_connect(zctx, s->sock, o->endpoints[i]) != 0) {
            rc = gb_wire_zmq_error(err, "sample sender: connect");
            gb_error_prefix(err, "%s", o->endpoints[i]);
            goto fail;
        }
    s->o.endpoints = NULL; /* not kept */
    *out = s;
    return 0;
fail:
    gb_sample_sender_close(s);
    return rc;
}

void gb_sample_sender_close(gb_sample_sender *s)
{
    if (!s)
        return;
    uint64_t dropped = counter_get(&s->dropped), sent = counter_get(&s->sent);
    if (dropped)
        GB_WARN("sample sender: %llu of %llu chunks were dropped (trainers not keeping up)",
                (unsigned long long)dropped, (unsigned long long)(dropped + sent));
    if (s->sock)
        zmq_close(s->sock);
    free(s);
}

int gb_sample_send(gb_sample_sender *s, int64_t policy_version, const gb_tensor_desc *descs,
                   const gb_wire_payload *payloads, int n, gb_error *err)
{
    if (n < 1 || n > GB_WIRE_MAX_TENSORS)
        return gb_error_set(err, GB_EINVAL, "sample: %d tensors, need 1..%d", n,
                            GB_WIRE_MAX_TENSORS);
    gb_wire_header *h = &s->hdr;
    gb_wire_header_init(h, GB_MSG_SAMPLE, s->o.role, s->o.index);
    h->seq = (uint64_t)s->o.incarnation << GB_SAMPLE_SEQ_BITS | (s->seq + 1);
    h->policy_version = policy_version;
    h->ntensors = n;
    memcpy(h->tensors, descs, (size_t)n * sizeof *descs);
    uint64_t bytes = 0;
    for (int t = 0; t < n; t++) {
        uint64_t b;
        int rc = gb_tensor_desc_bytes(&descs[t], &b, err);
        if (rc)
            return gb_error_set(err, GB_EINVAL, "sample: %s", err->msg);
        bytes += b;
    }
    int rc = gb_wire_send(s->sock, NULL, 0, h, payloads, 0, err);
    if (rc == GB_ETIMEOUT) {
        counter_add(&s->dropped, 1);
        s->seq++; /* the receiver can see the gap */
        uint64_t d = counter_get(&s->dropped);
        if (gb_log_due(d))
            GB_WARN("sample sender %d: dropped chunk %llu (%llu drops so far): no trainer "
                    "accepted it within %d ms", s->o.index, (unsigned long long)h->seq,
                    (unsigned long long)d, s->o.send_timeout_ms);
        return gb_error_set(err, GB_ETIMEOUT, "sample chunk %llu dropped: no trainer accepted "
                            "it within %d ms", (unsigned long long)h->seq, s->o.send_timeout_ms);
    }
    if (rc)
        return rc;
    s->seq++;
    counter_add(&s->sent, 1);
    counter_add(&s->bytes, bytes);
    return 0;
}

void gb_sample_sender_close_within(gb_sample_sender *s, int linger_ms)
{
    if (!s)
        return;
    if (s->sock && linger_ms >= 0 &&
        zmq_setsockopt(s->sock, ZMQ_LINGER, &linger_ms, sizeof linger_ms) != 0)
        GB_WARN("sample sender: ZMQ_LINGER: %s", zmq_strerror(zmq_errno()));
    if (linger_ms >= 0)
        GB_DEBUG("sample sender: closing; chunks not delivered within %d ms are dropped",
                 linger_ms);
    gb_sample_sender_close(s);
}

int gb_sample_sender_wait(gb_sample_sender *s, int timeout_ms, gb_error *err)
{
    zmq_pollitem_t item = {.socket = s->sock, .events = ZMQ_POLLOUT};
    int n = zmq_poll(&item, 1, timeout_ms < 0 ? 0 : timeout_ms);
    if (n < 0)
        return gb_wire_zmq_error(err, "sample sender: zmq_poll");
    if (n == 0 || !(item.revents & ZMQ_POLLOUT))
        return gb_error_set(err, GB_ETIMEOUT, "sample sender: no room for a chunk within %d ms",
                            timeout_ms);
    return 0;
}

gb_sample_sender_stats gb_sample_sender_get_stats(const gb_sample_sender *s)
{
    gb_sample_sender_stats st = {.sent = counter_get(&s->sent),
                                 .dropped = counter_get(&s->dropped),
                                 .bytes = counter_get(&s->bytes)};
    return st;
}

int gb_sample_receiver_open(gb_sample_receiver **out, void *zctx,
                            const gb_sample_receiver_opts *o, gb_error *err)
{
    *out = NULL;
    if (!o->endpoint || o->hwm <= 0)
        return gb_error_set(err, GB_EINVAL, "sample receiver: need an endpoint and hwm > 0");
    gb_sample_receiver *r = calloc(1, sizeof *r);
    if (!r)
        return gb_error_set(err, GB_ENOMEM, "sample receiver: out of memory");
    int rc;
    r->rcvtimeo = -1;
    r->sock = zmq_socket(zctx, ZMQ_PULL);
    if (!r->sock) {
        rc = gb_wire_zmq_error(err, "sample receiver: zmq_socket(PULL)");
        goto fail;
    }
    if ((rc = opt(r->sock, ZMQ_LINGER, 0, err, "sample receiver: ZMQ_LINGER")) ||
        (rc = opt(r->sock, ZMQ_RCVHWM, o->hwm, err, "sample receiver: ZMQ_RCVHWM")) ||
        (o->kernel_buffer > 0 &&
         (rc = opt(r->sock, ZMQ_RCVBUF, o->kernel_buffer, err, "sample receiver: ZMQ_RCVBUF"))) ||
        (o->max_frame > 0 && (rc = gb_wire_set_max_frame(r->sock, o->max_frame, err))))
        goto fail;
    if (gb_curve_bind(zctx, r->sock, o->endpoint) != 0) {
        rc = gb_wire_zmq_error(err, "sample receiver: bind");
        gb_error_prefix(err, "%s", o->endpoint);
        goto fail;
    }
    size_t len = sizeof r->endpoint;
    if (zmq_getsockopt(r->sock, ZMQ_LAST_ENDPOINT, r->endpoint, &len) != 0) {
        rc = gb_wire_zmq_error(err, "sample receiver: ZMQ_LAST_ENDPOINT");
        goto fail;
    }
    *out = r;
    return 0;
fail:
    gb_sample_receiver_close(r);
    return rc;
}

void gb_sample_receiver_close(gb_sample_receiver *r)
{
    if (!r)
        return;
    if (r->sock)
        zmq_close(r->sock);
    free(r);
}

const char *gb_sample_receiver_endpoint(const gb_sample_receiver *r) { return r->endpoint; }

int gb_sample_recv(gb_sample_receiver *r, gb_wire_msg *m, int timeout_ms, gb_error *err)
{
    gb_error local;
    if (!err)
        err = &local;
    uint64_t end = gb_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ULL;
    for (int first = 1;; first = 0) {
        /* block inside ZeroMQ (one wake-up per message, no separate zmq_poll); the first try
         * waits the whole timeout, so the option is not reset on every call */
        long wait_ms = timeout_ms < 0 ? -1 : timeout_ms;
        if (!first && timeout_ms >= 0) {
            uint64_t now = gb_now_ns();
            wait_ms = end > now ? (long)((end - now + 999999) / 1000000) : 0;
        }
        int v = (int)wait_ms;
        if (v != r->rcvtimeo) {
            if (zmq_setsockopt(r->sock, ZMQ_RCVTIMEO, &v, sizeof v) != 0)
                return gb_wire_zmq_error(err, "sample receiver: ZMQ_RCVTIMEO");
            r->rcvtimeo = v;
        }
        int rc = gb_wire_recv(r->sock, m, 0, wait_ms == 0 ? ZMQ_DONTWAIT : 0, err);
        if (rc == 0 && (rc = gb_wire_schema_read(&gb_schema_sample, &m->hdr, NULL, err))) {
            gb_error_prefix(err, "sample receiver");
            gb_wire_msg_release(m);
        }
        if (rc == 0) {
            uint64_t bytes = 0;
            for (int t = 0; t < m->nframes; t++)
                bytes += zmq_msg_size(&m->frames[t]);
            counter_add(&r->received, 1);
            counter_add(&r->bytes, bytes);
            return 0;
        }
        if (rc == GB_EPROTO) {
            counter_add(&r->rejected, 1);
            uint64_t k = counter_get(&r->rejected);
            if (gb_log_due(k))
                GB_WARN("sample receiver: rejected %llu malformed messages; last: %s",
                        (unsigned long long)k, err->msg);
            continue;
        }
        if (rc == GB_EAGAIN || rc == GB_ETIMEOUT)
            return gb_error_set(err, GB_EAGAIN, "no sample within %d ms", timeout_ms);
        return rc;
    }
}

gb_sample_receiver_stats gb_sample_receiver_get_stats(const gb_sample_receiver *r)
{
    gb_sample_receiver_stats st = {.received = counter_get(&r->received),
                                   .rejected = counter_get(&r->rejected),
                                   .bytes = counter_get(&r->bytes)};
    return st;
}
