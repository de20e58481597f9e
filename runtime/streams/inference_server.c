/* runtime/streams/inference_server.c: the inference stream's batching server (ROUTER): open and close,
 * request checks, client bookkeeping, batch merging and replies, and the serial mode's poll
 * (the pipelined mode is in inference_pipelined.c). */
#include "runtime/streams/inference.h"
#include "runtime/streams/curve.h"
#include "runtime/streams/inference_internal.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"

#include <stdlib.h>
#include <string.h>

int gb_infer_msg_ensure(gb_wire_msg **m, gb_error *err)
{
    if (*m)
        return 0;
    *m = malloc(sizeof **m);
    if (!*m)
        return gb_error_set(err, GB_ENOMEM, "inference server: out of memory");
    gb_wire_msg_init(*m);
    return 0;
}

static int ensure_slot(gb_infer_server *s, int i, gb_error *err)
{
    return gb_infer_msg_ensure(&s->slot[i], err);
}

static void free_msgs(gb_wire_msg **slot, int n)
{
    if (!slot)
        return;
    for (int i = 0; i < n; i++)
        if (slot[i]) {
            gb_wire_msg_release(slot[i]);
            free(slot[i]);
        }
    free(slot);
}

int gb_infer_server_open(gb_infer_server **out, void *zctx, const gb_infer_server_opts *o,
                         gb_error *err)
{
    *out = NULL;
    if (!o->endpoint || !o->fn || o->max_batch_rows <= 0 || !(o->max_wait_ms >= 0))
        return gb_error_set(err, GB_EINVAL, "inference server: need an endpoint, a callback, "
                            "max_batch_rows > 0 and max_wait_ms >= 0");
    gb_infer_server *s = calloc(1, sizeof *s);
    if (!s)
        return gb_error_set(err, GB_ENOMEM, "inference server: out of memory");
    int rc;
    s->o = *o;
    s->rcvtimeo = -1;
    s->efd = -1;
    s->busy = -1;
    s->job = -1;
    s->cap = o->max_batch_rows < SERVER_MAX_REQUESTS ? o->max_batch_rows : SERVER_MAX_REQUESTS;
    s->slot = calloc((size_t)s->cap + 1, sizeof *s->slot);
    if (!s->slot) {
        rc = gb_error_set(err, GB_ENOMEM, "inference server: out of memory");
        goto fail;
    }
    /* slots (about 14 KiB each) are allocated when a batch first needs them: the carry slot
     * and the first one now, the rest as batches grow; none per request */
    if ((rc = ensure_slot(s, s->cap, err)) || (!o->pipelined && (rc = ensure_slot(s, 0, err))))
        goto fail;
    s->sock = zmq_socket(zctx, ZMQ_ROUTER);
    if (!s->sock) {
        rc = gb_wire_zmq_error(err, "inference server: zmq_socket(ROUTER)");
        goto fail;
    }
    /* ROUTER_MANDATORY: a reply to a client that is gone fails (EHOSTUNREACH) instead of
     * vanishing inside ZeroMQ, so that it is counted (stats.unsent) */
    if ((rc = gb_infer_set_int_opt(s->sock, ZMQ_LINGER, 0, err, "inference server: ZMQ_LINGER")) ||
        (rc = gb_infer_set_int_opt(s->sock, ZMQ_ROUTER_MANDATORY, 1, err,
                                   "inference server: ZMQ_ROUTER_MANDATORY")) ||
        (o->max_frame > 0 && (rc = gb_wire_set_max_frame(s->sock, o->max_frame, err))))
        goto fail;
    if (gb_curve_bind(zctx, s->sock, o->endpoint) != 0) {
        rc = gb_wire_zmq_error(err, "inference server: bind");
        gb_error_prefix(err, "%s", o->endpoint);
        goto fail;
    }
    size_t len = sizeof s->endpoint;
    if (zmq_getsockopt(s->sock, ZMQ_LAST_ENDPOINT, s->endpoint, &len) != 0) {
        rc = gb_wire_zmq_error(err, "inference server: ZMQ_LAST_ENDPOINT");
        goto fail;
    }
    if (o->pipelined && (rc = gb_infer_pipe_start(s, err)))
        goto fail;
    *out = s;
    return 0;
fail:
    gb_infer_server_close(s);
    return rc;
}

void gb_infer_server_close(gb_infer_server *s)
{
    if (!s)
        return;
    if (s->o.pipelined)
        gb_infer_pipe_stop(s); /* answers what it still holds, before the socket goes */
    if (s->sock)
        zmq_close(s->sock);
    free_msgs(s->slot, s->cap + 1);
    for (int t = 0; t < GB_WIRE_MAX_TENSORS; t++)
        free(s->merge[t]);
    for (int k = 0; k < 2; k++) {
        free_msgs(s->stages[k].slot, s->cap);
        for (int t = 0; t < GB_WIRE_MAX_TENSORS; t++)
            free(s->stages[k].merge[t]);
    }
    free(s);
}

const char *gb_infer_server_endpoint(const gb_infer_server *s) { return s->endpoint; }

gb_infer_server_stats gb_infer_server_get_stats(const gb_infer_server *s) { return s->st; }

static uint64_t route_hash(const gb_wire_msg *m)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < m->route_len; i++)
        h = (h ^ m->route[i]) * 1099511628211ULL;
    return h;
}

/* Records that the client of m has a request in the current batch. */
void gb_infer_note_client(gb_infer_server *s, const gb_wire_msg *m, uint64_t now)
{
    uint64_t h = route_hash(m);
    int k, oldest = 0;
    for (k = 0; k < s->nclients; k++) {
        if (s->clients[k].hash == h)
            break;
        if (s->clients[k].last_ns < s->clients[oldest].last_ns)
            oldest = k;
    }
    if (k == s->nclients) {
        if (s->nclients < SERVER_MAX_CLIENTS)
            s->nclients++;
        else
            k = oldest;
        s->clients[k].hash = h;
    }
    s->clients[k].last_ns = now;
    s->clients[k].gen = s->gen;
}

/* 1 when every client seen within the active window has a request in this batch. */
int gb_infer_all_present(const gb_infer_server *s, uint64_t now)
{
    for (int k = 0; k < s->nclients; k++) {
        const client_ent *e = &s->clients[k];
        if (e->gen != s->gen && now - e->last_ns < SERVER_ACTIVE_WINDOW_NS)
            return 0;
    }
    return 1;
}

void gb_infer_reply_error(gb_infer_server *s, const gb_wire_msg *m, int code, const char *text)
{
    gb_wire_header *h = &s->reply;
    gb_wire_header_init(h, GB_MSG_INFER_REPLY, s->o.role, s->o.index);
    h->seq = m->hdr.seq;
    h->status = code;
    snprintf(h->text, sizeof h->text, "%.*s", (int)sizeof h->text - 1, text); /* cut to fit */
    gb_error e;
    if (gb_wire_send(s->sock, m->route, m->route_len, h, NULL, ZMQ_DONTWAIT, &e)) {
        s->st.unsent++;
        GB_DEBUG("inference server: could not answer a request with an error: %s", e.msg);
    }
}

/* Checks a request on its own; returns its rows, or 0 after answering it with an error. */
int64_t gb_infer_request_rows(gb_infer_server *s, gb_wire_msg *m)
{
    const gb_wire_header *h = &m->hdr;
    char why[200];
    if (h->type != GB_MSG_INFER_REQUEST) {
        snprintf(why, sizeof why, "expected an infer_request, got %s", gb_msg_type_name(h->type));
        goto bad;
    }
    if (h->ntensors < 1) {
        snprintf(why, sizeof why, "request without tensors");
        goto bad;
    }
    for (int t = 0; t < h->ntensors; t++)
        if (h->tensors[t].rank < 1 || h->tensors[t].shape[0] < 1 ||
            h->tensors[t].shape[0] != h->tensors[0].shape[0]) {
            snprintf(why, sizeof why, "tensor '%s': first dimension must be rows >= 1, the same "
                     "for every tensor", h->tensors[t].name);
            goto bad;
        }
    s->st.received++;
    return h->tensors[0].shape[0];
bad:
    s->st.rejected++;
    if (gb_log_due(s->st.rejected))
        GB_WARN("inference server: rejected a request from %s %d (%llu so far): %s",
                gb_role_name(h->role), h->index, (unsigned long long)s->st.rejected, why);
    gb_infer_reply_error(s, m, GB_EPROTO, why);
    gb_wire_msg_release(m);
    return 0;
}

/* 1 when b can join a batch that starts with a (same names, dtypes and per-row shapes). */
int gb_infer_compatible(const gb_wire_header *a, const gb_wire_header *b)
{
    if (a->ntensors != b->ntensors)
        return 0;
    for (int t = 0; t < a->ntensors; t++) {
        const gb_tensor_desc *x = &a->tensors[t], *y = &b->tensors[t];
        if (x->dtype != y->dtype || x->rank != y->rank || strcmp(x->name, y->name) != 0)
            return 0;
        for (int i = 1; i < x->rank; i++)
            if (x->shape[i] != y->shape[i])
                return 0;
    }
    return 1;
}

static void swap_slots(gb_infer_server *s, int i, int j)
{
    gb_wire_msg *t = s->slot[i];
    s->slot[i] = s->slot[j];
    s->slot[j] = t;
}

/* Receives requests into slots until the batch is complete. Returns the number of requests
 * (0: none came within timeout_ms) or a negative code; *rows_out gets the batch's rows. */
static int gather(gb_infer_server *s, int timeout_ms, int64_t *rows_out, gb_error *err)
{
    int n = 0;
    int64_t rows = 0;
    uint64_t start = gb_now_ns(), deadline = 0;
    uint64_t wait_ns = (uint64_t)(s->o.max_wait_ms * 1e6);
    if (s->carry) {
        swap_slots(s, 0, s->cap);
        s->carry = 0;
        rows = s->slot[0]->hdr.tensors[0].shape[0];
        gb_infer_note_client(s, s->slot[0], start);
        deadline = start + wait_ns;
        n = 1;
    }
    for (;;) {
        uint64_t now = gb_now_ns();
        if (n > 0 && (rows >= s->o.max_batch_rows || n == s->cap))
            break;
        /* whatever is already queued joins the batch; waiting for more happens only while
         * some recently seen client has no request in it yet, and until the wait limit */
        int rc;
        if (n == 0) { /* wait for the first request inside ZeroMQ: one wake-up */
            long first_ms = -1;
            if (timeout_ms >= 0) {
                uint64_t end = start + (uint64_t)timeout_ms * 1000000ULL;
                first_ms = end > now ? (long)((end - now + 999999) / 1000000) : 0;
            }
            if ((rc = gb_infer_set_rcvtimeo(s->sock, &s->rcvtimeo, first_ms, err)))
                return rc;
            rc = gb_wire_recv(s->sock, s->slot[0], 1, first_ms == 0 ? ZMQ_DONTWAIT : 0, err);
            if (rc == GB_EAGAIN || rc == GB_ETIMEOUT)
                break;
        } else {
            if ((rc = ensure_slot(s, n, err)))
                return rc;
            rc = gb_wire_recv(s->sock, s->slot[n], 1, ZMQ_DONTWAIT, err);
        }
        if (rc == GB_EAGAIN) {
            long wait_ms;
            if (n > 0) {
                if (now >= deadline || gb_infer_all_present(s, now))
                    break;
                wait_ms = (long)((deadline - now + 999999) / 1000000);
            } else if (timeout_ms < 0) {
                wait_ms = -1;
            } else {
                uint64_t end = start + (uint64_t)timeout_ms * 1000000ULL;
                if (now >= end)
                    break;
                wait_ms = (long)((end - now + 999999) / 1000000);
            }
            zmq_pollitem_t it = {s->sock, 0, ZMQ_POLLIN, 0};
            if (zmq_poll(&it, 1, wait_ms) < 0)
                return gb_wire_zmq_error(err, "inference server: zmq_poll");
            if (!(it.revents & ZMQ_POLLIN) && n > 0)
                break;
            continue;
        }
        if (rc == GB_EPROTO) {
            s->st.rejected++;
            if (gb_log_due(s->st.rejected))
                GB_WARN("inference server: rejected a malformed request (%llu so far): %s",
                        (unsigned long long)s->st.rejected, err->msg);
            if (s->slot[n]->hdr.type != 0 && s->slot[n]->route_len > 0)
                gb_infer_reply_error(s, s->slot[n], GB_EPROTO, err->msg);
            continue;
        }
        if (rc)
            return rc;
        int64_t r = gb_infer_request_rows(s, s->slot[n]);
        if (r == 0)
            continue;
        if (n > 0 && (!gb_infer_compatible(&s->slot[0]->hdr, &s->slot[n]->hdr) ||
                      rows + r > s->o.max_batch_rows)) {
            swap_slots(s, n, s->cap);
            s->carry = 1;
            break;
        }
        gb_infer_note_client(s, s->slot[n], now);
        if (n == 0)
            deadline = now + wait_ns;
        rows += r;
        n++;
    }
    *rows_out = rows;
    return n;
}

static int check_outputs(const gb_infer_outputs *out, int64_t rows, gb_error *err)
{
    if (out->ntensors < 1 || out->ntensors > GB_WIRE_MAX_TENSORS)
        return gb_error_set(err, GB_EINVAL, "policy callback produced %d outputs, need 1..%d",
                            out->ntensors, GB_WIRE_MAX_TENSORS);
    for (int t = 0; t < out->ntensors; t++) {
        const gb_tensor_desc *d = &out->descs[t];
        uint64_t bytes;
        if (gb_tensor_desc_bytes(d, &bytes, err) || d->rank < 1 || d->shape[0] != rows ||
            (!out->data[t] && bytes > 0))
            return gb_error_set(err, GB_EINVAL, "policy callback output '%s': needs rows (%lld) "
                                "as first dimension, a valid dtype and data", d->name,
                                (long long)rows);
    }
    return 0;
}

/* Builds the batch of slot[0..n) (rows in all): a lone request is read in place, more are
 * copied into the merge buffers (grown when needed, never shrunk). Returns 0 or GB_ENOMEM. */
int gb_infer_build_batch(gb_wire_msg **slot, int n, int64_t rows, void **merge, size_t *merge_cap,
                         gb_infer_batch *b, gb_error *err)
{
    const gb_wire_header *h0 = &slot[0]->hdr;
    b->rows = (int)rows;
    b->n_requests = n;
    b->ntensors = h0->ntensors;
    for (int t = 0; t < h0->ntensors; t++) {
        b->descs[t] = h0->tensors[t];
        b->descs[t].shape[0] = rows;
        gb_tensor_view v0 = gb_wire_msg_tensor(slot[0], t);
        size_t row_bytes = v0.bytes / (size_t)h0->tensors[t].shape[0];
        size_t need = row_bytes * (size_t)rows;
        b->inputs[t].desc = &b->descs[t];
        b->inputs[t].bytes = need;
        if (n == 1) { /* a lone request is read in place */
            b->inputs[t].data = v0.data;
            continue;
        }
        if (need > merge_cap[t]) {
            void *p = realloc(merge[t], need);
            if (!p)
                return gb_error_set(err, GB_ENOMEM, "inference server: merge buffer of %zu bytes",
                                    need);
            merge[t] = p;
            merge_cap[t] = need;
        }
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            gb_tensor_view v = gb_wire_msg_tensor(slot[i], t);
            memcpy((char *)merge[t] + off, v.data, v.bytes);
            off += v.bytes;
        }
        b->inputs[t].data = merge[t];
    }
    return 0;
}

/* Runs the callback on b and checks what it produced. */
int gb_infer_run_fn(gb_infer_server *s, const gb_infer_batch *b, gb_infer_outputs *out,
                    gb_error *err)
{
    out->ntensors = 0;
    out->policy_version = -1;
    int rc = s->o.fn(s->o.user, b, out, err);
    if (rc == 0)
        rc = check_outputs(out, b->rows, err);
    return rc;
}

/* Answers each request of slot[0..n) with its rows of out, releases them, counts the batch. */
void gb_infer_send_replies(gb_infer_server *s, gb_wire_msg **slot, int n, int64_t rows,
                           const gb_infer_outputs *out)
{
    int64_t r0 = 0;
    for (int i = 0; i < n; i++) {
        gb_wire_msg *m = slot[i];
        int64_t ri = m->hdr.tensors[0].shape[0];
        gb_wire_header *h = &s->reply;
        gb_wire_header_init(h, GB_MSG_INFER_REPLY, s->o.role, s->o.index);
        h->seq = m->hdr.seq;
        h->policy_version = out->policy_version;
        h->ntensors = out->ntensors;
        gb_wire_payload p[GB_WIRE_MAX_TENSORS];
        for (int t = 0; t < out->ntensors; t++) {
            h->tensors[t] = out->descs[t];
            h->tensors[t].shape[0] = ri;
            uint64_t all;
            gb_tensor_desc_bytes(&out->descs[t], &all, NULL);
            size_t row_bytes = (size_t)(all / (uint64_t)rows);
            p[t] = (gb_wire_payload){(const char *)out->data[t] + (size_t)r0 * row_bytes, NULL,
                                     NULL, NULL};
        }
        gb_error e;
        if (gb_wire_send(s->sock, m->route, m->route_len, h, p, ZMQ_DONTWAIT, &e)) {
            s->st.unsent++;
            GB_DEBUG("inference server: reply to request %llu not sent: %s",
                     (unsigned long long)m->hdr.seq, e.msg);
        }
        r0 += ri;
        gb_wire_msg_release(m);
    }
    s->st.requests += (uint64_t)n;
    s->st.rows += (uint64_t)rows;
    s->st.batches++;
}

/* Answers every request of slot[0..n) with code and text, releases them. */
void gb_infer_reply_all_error(gb_infer_server *s, gb_wire_msg **slot, int n, int code,
                              const char *text)
{
    for (int i = 0; i < n; i++) {
        gb_infer_reply_error(s, slot[i], code, text);
        gb_wire_msg_release(slot[i]);
    }
}

int gb_infer_server_poll(gb_infer_server *s, int timeout_ms, gb_error *err)
{
    gb_error local;
    if (!err)
        err = &local;
    if (s->o.pipelined)
        return gb_infer_pipe_poll(s, timeout_ms, err);
    if (s->o.between)
        s->o.between(s->o.user);
    int64_t rows = 0;
    s->gen++;
    int n = gather(s, timeout_ms, &rows, err);
    if (n <= 0)
        return n;
    int rc = gb_infer_build_batch(s->slot, n, rows, s->merge, s->merge_cap, &s->batch, err);
    if (rc == 0)
        rc = gb_infer_run_fn(s, &s->batch, &s->out, err);
    if (rc) {
        gb_infer_reply_all_error(s, s->slot, n, rc, err->msg);
        s->st.failed += (uint64_t)n;
        return rc;
    }
    gb_infer_send_replies(s, s->slot, n, rows, &s->out);
    return 1;
}
