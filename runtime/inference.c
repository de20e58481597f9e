/* runtime/inference.c: inference stream client (DEALER) and batching server (ROUTER). */
#include "runtime/inference.h"

#include "runtime/clock.h"
#include "runtime/log.h"

#include <stdlib.h>
#include <string.h>

#define CLIENT_MAX_OUTSTANDING 64
#define SERVER_MAX_CLIENTS 512
#define SERVER_ACTIVE_WINDOW_NS 1000000000ULL /* a client seen this recently is expected */
#define SERVER_MAX_REQUESTS 1024              /* requests per batch (each may hold many rows) */

static int set_int_opt(void *sock, int opt, int v, gb_error *err, const char *name)
{
    if (zmq_setsockopt(sock, opt, &v, sizeof v) != 0)
        return gb_wire_zmq_error(err, name);
    return 0;
}

/* ---- client ---------------------------------------------------------------------------------- */

struct gb_infer_client {
    void *sock;
    int timeout_ms;
    int role, index;
    uint64_t next_id;
    int nout;
    uint64_t out_id[CLIENT_MAX_OUTSTANDING];
    uint64_t out_deadline[CLIENT_MAX_OUTSTANDING];
    char where[512]; /* endpoints, for messages */
    int rcvtimeo;    /* ZMQ_RCVTIMEO now set on sock */
    gb_wire_header hdr;
    gb_infer_client_stats st;
};

/* Sets ZMQ_RCVTIMEO when it changes (blocking receives wait in ZeroMQ itself: one wake-up, no
 * separate zmq_poll). */
static int set_rcvtimeo(void *sock, int *cur, long ms, gb_error *err)
{
    int v = ms < 0 ? -1 : ms > INT32_MAX ? INT32_MAX : (int)ms;
    if (v == *cur)
        return 0;
    if (zmq_setsockopt(sock, ZMQ_RCVTIMEO, &v, sizeof v) != 0)
        return gb_wire_zmq_error(err, "ZMQ_RCVTIMEO");
    *cur = v;
    return 0;
}

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
    c->rcvtimeo = -1;
    c->role = o->role;
    c->index = o->index;
    c->sock = zmq_socket(zctx, ZMQ_DEALER);
    if (!c->sock) {
        rc = gb_wire_zmq_error(err, "inference client: zmq_socket(DEALER)");
        goto fail;
    }
    if ((rc = set_int_opt(c->sock, ZMQ_LINGER, 0, err, "inference client: ZMQ_LINGER")) ||
        (rc = set_int_opt(c->sock, ZMQ_IMMEDIATE, 1, err, "inference client: ZMQ_IMMEDIATE")) ||
        (rc = set_int_opt(c->sock, ZMQ_SNDTIMEO, o->timeout_ms, err,
                          "inference client: ZMQ_SNDTIMEO")))
        goto fail;
    size_t w = 0;
    for (int i = 0; i < o->n_endpoints; i++) {
        if (zmq_connect(c->sock, o->endpoints[i]) != 0) {
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

int gb_infer_client_send(gb_infer_client *c, const gb_tensor_desc *descs,
                         const void *const *data, int n, uint64_t *id, gb_error *err)
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
                         "within %d ms (%s)", (unsigned long long)h->seq, c->timeout_ms,
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
        int rc = set_rcvtimeo(c->sock, &c->rcvtimeo, wait_ms, err);
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
            GB_WARN("inference client: dropped a malformed reply: %s", err->msg);
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

/* ---- server ---------------------------------------------------------------------------------- */

typedef struct client_ent {
    uint64_t hash;
    uint64_t last_ns;
    uint64_t gen; /* batch generation in which it last had a request */
} client_ent;

struct gb_infer_server {
    gb_infer_server_opts o;
    void *sock;
    char endpoint[256];
    int cap;            /* request slots per batch */
    gb_wire_msg **slot; /* cap + 1: the last one holds a request carried to the next batch */
    int carry;
    int64_t row_bytes[GB_WIRE_MAX_TENSORS]; /* per request, scratch */
    void *merge[GB_WIRE_MAX_TENSORS];
    size_t merge_cap[GB_WIRE_MAX_TENSORS];
    gb_infer_batch batch;
    gb_infer_outputs out;
    gb_wire_header reply;
    client_ent clients[SERVER_MAX_CLIENTS];
    int nclients;
    int rcvtimeo;
    uint64_t gen;
    gb_infer_server_stats st;
};

static int ensure_slot(gb_infer_server *s, int i, gb_error *err)
{
    if (s->slot[i])
        return 0;
    s->slot[i] = malloc(sizeof *s->slot[i]);
    if (!s->slot[i])
        return gb_error_set(err, GB_ENOMEM, "inference server: out of memory");
    gb_wire_msg_init(s->slot[i]);
    return 0;
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
    s->cap = o->max_batch_rows < SERVER_MAX_REQUESTS ? o->max_batch_rows : SERVER_MAX_REQUESTS;
    s->slot = calloc((size_t)s->cap + 1, sizeof *s->slot);
    if (!s->slot) {
        rc = gb_error_set(err, GB_ENOMEM, "inference server: out of memory");
        goto fail;
    }
    /* slots (about 14 KiB each) are allocated when a batch first needs them: the carry slot
     * and the first one now, the rest as batches grow; none per request */
    if ((rc = ensure_slot(s, 0, err)) || (rc = ensure_slot(s, s->cap, err)))
        goto fail;
    s->sock = zmq_socket(zctx, ZMQ_ROUTER);
    if (!s->sock) {
        rc = gb_wire_zmq_error(err, "inference server: zmq_socket(ROUTER)");
        goto fail;
    }
    if ((rc = set_int_opt(s->sock, ZMQ_LINGER, 0, err, "inference server: ZMQ_LINGER")))
        goto fail;
    if (zmq_bind(s->sock, o->endpoint) != 0) {
        rc = gb_wire_zmq_error(err, "inference server: bind");
        gb_error_prefix(err, "%s", o->endpoint);
        goto fail;
    }
    size_t len = sizeof s->endpoint;
    if (zmq_getsockopt(s->sock, ZMQ_LAST_ENDPOINT, s->endpoint, &len) != 0) {
        rc = gb_wire_zmq_error(err, "inference server: ZMQ_LAST_ENDPOINT");
        goto fail;
    }
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
    if (s->sock)
        zmq_close(s->sock);
    if (s->slot) {
        for (int i = 0; i <= s->cap; i++)
            if (s->slot[i]) {
                gb_wire_msg_release(s->slot[i]);
                free(s->slot[i]);
            }
        free(s->slot);
    }
    for (int t = 0; t < GB_WIRE_MAX_TENSORS; t++)
        free(s->merge[t]);
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
static void note_client(gb_infer_server *s, const gb_wire_msg *m, uint64_t now)
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
static int all_clients_present(const gb_infer_server *s, uint64_t now)
{
    for (int k = 0; k < s->nclients; k++) {
        const client_ent *e = &s->clients[k];
        if (e->gen != s->gen && now - e->last_ns < SERVER_ACTIVE_WINDOW_NS)
            return 0;
    }
    return 1;
}

static void reply_error(gb_infer_server *s, const gb_wire_msg *m, int code, const char *text)
{
    gb_wire_header *h = &s->reply;
    gb_wire_header_init(h, GB_MSG_INFER_REPLY, s->o.role, s->o.index);
    h->seq = m->hdr.seq;
    h->status = code;
    snprintf(h->text, sizeof h->text, "%s", text);
    gb_error e;
    if (gb_wire_send(s->sock, m->route, m->route_len, h, NULL, ZMQ_DONTWAIT, &e))
        GB_DEBUG("inference server: could not answer a bad request: %s", e.msg);
}

/* Checks a request on its own; returns its rows, or 0 after answering it with an error. */
static int64_t request_rows(gb_infer_server *s, gb_wire_msg *m)
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
    return h->tensors[0].shape[0];
bad:
    s->st.rejected++;
    reply_error(s, m, GB_EPROTO, why);
    gb_wire_msg_release(m);
    return 0;
}

/* 1 when b can join a batch that starts with a (same names, dtypes and per-row shapes). */
static int compatible(const gb_wire_header *a, const gb_wire_header *b)
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
        note_client(s, s->slot[0], start);
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
            if ((rc = set_rcvtimeo(s->sock, &s->rcvtimeo, first_ms, err)))
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
                if (now >= deadline || all_clients_present(s, now))
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
            GB_DEBUG("inference server: rejected a request: %s", err->msg);
            if (s->slot[n]->hdr.type != 0 && s->slot[n]->route_len > 0)
                reply_error(s, s->slot[n], GB_EPROTO, err->msg);
            continue;
        }
        if (rc)
            return rc;
        int64_t r = request_rows(s, s->slot[n]);
        if (r == 0)
            continue;
        if (n > 0 && (!compatible(&s->slot[0]->hdr, &s->slot[n]->hdr) ||
                      rows + r > s->o.max_batch_rows)) {
            swap_slots(s, n, s->cap);
            s->carry = 1;
            break;
        }
        note_client(s, s->slot[n], now);
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

int gb_infer_server_poll(gb_infer_server *s, int timeout_ms, gb_error *err)
{
    gb_error local;
    if (!err)
        err = &local;
    int64_t rows = 0;
    s->gen++;
    int n = gather(s, timeout_ms, &rows, err);
    if (n <= 0)
        return n;
    gb_infer_batch *b = &s->batch;
    const gb_wire_header *h0 = &s->slot[0]->hdr;
    b->rows = (int)rows;
    b->n_requests = n;
    b->ntensors = h0->ntensors;
    int rc = 0;
    for (int t = 0; t < h0->ntensors; t++) {
        b->descs[t] = h0->tensors[t];
        b->descs[t].shape[0] = rows;
        gb_tensor_view v0 = gb_wire_msg_tensor(s->slot[0], t);
        size_t row_bytes = v0.bytes / (size_t)h0->tensors[t].shape[0];
        size_t need = row_bytes * (size_t)rows;
        b->inputs[t].desc = &b->descs[t];
        b->inputs[t].bytes = need;
        if (n == 1) { /* a lone request is read in place */
            b->inputs[t].data = v0.data;
            continue;
        }
        if (need > s->merge_cap[t]) {
            void *p = realloc(s->merge[t], need);
            if (!p) {
                rc = gb_error_set(err, GB_ENOMEM, "inference server: merge buffer of %zu bytes",
                                  need);
                goto reply_all_error;
            }
            s->merge[t] = p;
            s->merge_cap[t] = need;
        }
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            gb_tensor_view v = gb_wire_msg_tensor(s->slot[i], t);
            memcpy((char *)s->merge[t] + off, v.data, v.bytes);
            off += v.bytes;
        }
        b->inputs[t].data = s->merge[t];
    }
    gb_infer_outputs *out = &s->out;
    out->ntensors = 0;
    out->policy_version = -1;
    if ((rc = s->o.fn(s->o.user, b, out, err)))
        goto reply_all_error;
    if ((rc = check_outputs(out, rows, err)))
        goto reply_all_error;
    int64_t r0 = 0;
    for (int i = 0; i < n; i++) {
        gb_wire_msg *m = s->slot[i];
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
        if (gb_wire_send(s->sock, m->route, m->route_len, h, p, ZMQ_DONTWAIT, &e))
            GB_DEBUG("inference server: reply to request %llu not sent: %s",
                     (unsigned long long)m->hdr.seq, e.msg);
        r0 += ri;
        gb_wire_msg_release(m);
    }
    s->st.requests += (uint64_t)n;
    s->st.rows += (uint64_t)rows;
    s->st.batches++;
    return 1;
reply_all_error:
    for (int i = 0; i < n; i++) {
        reply_error(s, s->slot[i], rc, err->msg);
        gb_wire_msg_release(s->slot[i]);
    }
    s->st.failed += (uint64_t)n;
    return rc;
}
