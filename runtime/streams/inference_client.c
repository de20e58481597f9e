/* runtime/streams/inference_client.c: the inference stream's client (DEALER to every policy
 * worker). */
#include "runtime/streams/inference.h"
#include "runtime/streams/curve.h"
#include "runtime/streams/inference_internal.h"
#include "runtime/streams/wire_messages.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"

#include <stdlib.h>
#include <string.h>

#define CLIENT_MAX_OUTSTANDING INFER_MAX_OUTSTANDING

struct gb_infer_client {
    void *sock;
    int timeout_ms;
    int role, index;
    uint64_t next_id;
    int nout;
    uint64_t out_id[CLIENT_MAX_OUTSTANDING];
    uint64_t out_deadline[CLIENT_MAX_OUTSTANDING];
    char where[512]; /* endpoints, for messages */
    int send_timeout_ms; /* ZMQ_SNDTIMEO */
    int rcvtimeo;        /* ZMQ_RCVTIMEO now set on sock */
    gb_wire_header hdr;
    gb_infer_client_stats st;
};

int gb_infer_client_open(gb_infer_client **out, void *zctx, const gb_infer_client_opts *o,
                         gb_error *err)
{
    *out = NULL;
    if (o->n_endpoints <= 0 || !o->endpoints || o->timeout_ms <= 0)
        return gb_error_set(err, GB_EINVAL, "inference client: need >= 1 endpoint and a "
                            "timeout > 0 (got %d endpoints, %d ms)", o->n_endpoints,
                            o->timeout_ms);
    gb_infer_client *c = calloc(1, sizeof *c);
    if (!c)
        return gb_error_set(err, GB_ENOMEM, "inference client: out of memory");
    int rc;
    c->timeout_ms = o->timeout_ms;
    c->send_timeout_ms = o->send_timeout_ms > 0 ? o->send_timeout_ms : o->timeout_ms;
    c->rcvtimeo = -1;
    c->role = o->role;
    c->index = o->index;
    c->sock = zmq_socket(zctx, ZMQ_DEALER);
    if (!c->sock) {
        rc = gb_wire_zmq_error(err, "inference client: zmq_socket(DEALER)");
        goto fail;
    }
    if ((rc = gb_infer_set_int_opt(c->sock, ZMQ_LINGER, 0, err, "inference client: ZMQ_LINGER")) ||
        (rc = gb_infer_set_int_opt(c->sock, ZMQ_IMMEDIATE, 1, err,
                                   "inference client: ZMQ_IMMEDIATE")) ||
        (rc = gb_infer_set_int_opt(c->sock, ZMQ_SNDTIMEO, c->send_timeout_ms, err,
                                   "inference client: ZMQ_SNDTIMEO")) ||
        (o->max_frame > 0 && (rc = gb_wire_set_max_frame(c->sock, o->max_frame, err))))
        goto fail;
    size_t w = 0;
    for (int i = 0; i < o->n_endpoints; i++) {
        if (gb_curve_connect(zctx, c->sock, o->endpoints[i]) != 0) {
            rc = gb_wire_zmq_error(err, "inference client: connect");
            gb_error_prefix(err, "%s", o->endpoints[i]);
            goto fail;
        }
        if (w < sizeof c->where)
            w += (size_t)snprintf(c->where + w, sizeof c->where - w, "%s%s", i ? ", " : "",
                                  o->endpoints[i]);
    }
    *out = c;
    return 0;
fail:
    gb_infer_client_close(c);
    return rc;
}

void gb_infer_client_close(gb_infer_client *c)
{
    if (!c)
        return;
    if (c->sock)
        zmq_close(c->sock);
    free(c);
}

int gb_infer_client_send(gb_infer_client *c, const gb_tensor_desc *descs, const void *const *data,
                         int n, uint64_t *id, gb_error *err)
{
    if (n <= 0 || n > GB_WIRE_MAX_TENSORS)
        return gb_error_set(err, GB_EINVAL, "inference request: %d tensors, need 1..%d", n,
                            GB_WIRE_MAX_TENSORS);
    for (int i = 0; i < n; i++)
        if (descs[i].rank < 1 || descs[i].shape[0] != descs[0].shape[0] || descs[i].shape[0] < 1)
            return gb_error_set(err, GB_EINVAL, "inference request: tensor '%s' must have rows "
                                "(>= 1, the same for all tensors) as its first dimension",
                                descs[i].name);
    if (c->nout == CLIENT_MAX_OUTSTANDING)
        return gb_error_set(err, GB_EFULL, "inference request: %d requests outstanding",
                            CLIENT_MAX_OUTSTANDING);
    gb_wire_header *h = &c->hdr;
    gb_wire_header_init(h, GB_MSG_INFER_REQUEST, c->role, c->index);
    h->seq = ++c->next_id;
    h->ntensors = n;
    memcpy(h->tensors, descs, (size_t)n * sizeof *descs);
    gb_wire_payload p[GB_WIRE_MAX_TENSORS];
    memset(p, 0, (size_t)n * sizeof p[0]);
    for (int i = 0; i < n; i++)
        p[i].data = data[i];
    int rc = gb_wire_send(c->sock, NULL, 0, h, p, 0, err);
    if (rc) {
        if (rc == GB_ETIMEOUT)
            gb_error_set(err, GB_ETIMEOUT, "inference request %llu: no policy worker accepted it "
                         "within %d ms (%s)", (unsigned long long)h->seq, c->send_timeout_ms,
                         c->where);
        return rc;
    }
    c->out_id[c->nout] = h->seq;
    c->out_deadline[c->nout] = gb_now_ns() + (uint64_t)c->timeout_ms * 1000000ULL;
    c->nout++;
    c->st.requests++;
    *id = h->seq;
    return 0;
}

static void client_forget(gb_infer_client *c, int k)
{
    c->nout--;
    c->out_id[k] = c->out_id[c->nout];
    c->out_deadline[k] = c->out_deadline[c->nout];
}

int gb_infer_client_recv(gb_infer_client *c, gb_wire_msg *reply, int timeout_ms, gb_error *err)
{
    gb_error local;
    if (!err)
        err = &local;
    uint64_t start = gb_now_ns();
    uint64_t until = start + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ULL;
    /* Replies already queued are taken before any request is expired: a caller that was busy
     * elsewhere (an actor held back by the sample stream's backpressure) must not lose answers
     * that arrived in time. */
    int drained = 0;
    for (;;) {
        uint64_t now = gb_now_ns();
        int oldest = -1;
        for (int k = 0; k < c->nout; k++)
            if (oldest < 0 || c->out_deadline[k] < c->out_deadline[oldest])
                oldest = k;
        if (oldest >= 0 && c->out_deadline[oldest] <= now && drained) {
            uint64_t id = c->out_id[oldest];
            client_forget(c, oldest);
            c->st.timeouts++;
            gb_wire_msg_release(reply);
            reply->hdr.seq = id;
            return gb_error_set(err, GB_ETIMEOUT, "inference request %llu: no reply within %d ms "
                                "from policy workers (%s)", (unsigned long long)id,
                                c->timeout_ms, c->where);
        }
        uint64_t wake = until;
        if (oldest >= 0 && c->out_deadline[oldest] < wake)
            wake = c->out_deadline[oldest];
        long wait_ms = wake > now ? (long)((wake - now + 999999) / 1000000) : 0;
        int rc = gb_infer_set_rcvtimeo(c->sock, &c->rcvtimeo, wait_ms, err);
        if (rc)
            return rc;
        rc = gb_wire_recv(c->sock, reply, 0, wait_ms > 0 ? 0 : ZMQ_DONTWAIT, err);
        if (rc == GB_EAGAIN || rc == GB_ETIMEOUT) {
            drained = wait_ms == 0; /* nothing was queued: expiring is now fair */
            now = gb_now_ns();
            if (now >= until && (oldest < 0 || c->out_deadline[oldest] > now))
                return gb_error_set(err, GB_EAGAIN, "no inference reply yet");
            continue;
        }
        if (rc == GB_EPROTO) {
            c->st.rejected++;
            if (gb_log_due(c->st.rejected))
                GB_WARN("inference client: dropped a malformed reply (%llu so far): %s",
                        (unsigned long long)c->st.rejected, err->msg);
            continue;
        }
        if (rc)
            return rc;
        int k;
        for (k = 0; k < c->nout; k++)
            if (c->out_id[k] == reply->hdr.seq)
                break;
        if (k == c->nout) {
            c->st.stale++;
            gb_wire_msg_release(reply);
            continue;
        }
        client_forget(c, k);
        if (reply->hdr.type != GB_MSG_INFER_REPLY) {
            c->st.rejected++;
            gb_wire_msg_release(reply);
            return gb_error_set(err, GB_EPROTO, "inference request %llu: answered with a %s "
                                "message", (unsigned long long)reply->hdr.seq,
                                gb_msg_type_name(reply->hdr.type));
        }
        if ((rc = gb_wire_schema_read(&gb_schema_infer_reply, &reply->hdr, NULL, err))) {
            c->st.rejected++;
            gb_wire_msg_release(reply);
            return rc;
        }
        if (reply->hdr.status != 0) {
            c->st.errors++;
            int code = reply->hdr.status < 0 ? reply->hdr.status : GB_EPROTO;
            return gb_error_set(err, code, "inference request %llu: policy worker %d: %s",
                                (unsigned long long)reply->hdr.seq, reply->hdr.index,
                                reply->hdr.text[0] ? reply->hdr.text : gb_strerror(code));
        }
        c->st.replies++;
        return 0;
    }
}

int gb_infer_client_request(gb_infer_client *c, const gb_tensor_desc *descs,
                            const void *const *data, int n, gb_wire_msg *reply, gb_error *err)
{
    if (c->nout != 0)
        return gb_error_set(err, GB_EINVAL, "inference request: %d requests already "
                            "outstanding; use gb_infer_client_recv", c->nout);
    uint64_t id;
    int rc = gb_infer_client_send(c, descs, data, n, &id, err);
    if (rc)
        return rc;
    for (;;) {
        rc = gb_infer_client_recv(c, reply, c->timeout_ms, err);
        if (rc != GB_EAGAIN)
            return rc; /* only one request is outstanding: this is its reply or its timeout */
    }
}

gb_infer_client_stats gb_infer_client_get_stats(const gb_infer_client *c) { return c->st; }
