/* runtime/inference.c: inference stream client (DEALER) and batching server (ROUTER). */
#include "runtime/inference.h"

#include "runtime/clock.h"
#include "runtime/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define CLIENT_MAX_OUTSTANDING 64
#define SERVER_MAX_CLIENTS 512
#define SERVER_ACTIVE_WINDOW_NS 1000000000ULL /* a client seen this recently is expected */
#define SERVER_MAX_REQUESTS 1024              /* requests per batch (each may hold many rows) */
#define SERVER_IDLE_BETWEEN_MS 50             /* pipelined: opts.between while no batch comes */

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

/* Pipelined mode: one of the two batch buffers (gathering, or in the model). */
typedef struct stage {
    gb_wire_msg **slot; /* cap requests */
    int n;
    int64_t rows;
    uint64_t gen;      /* batch generation (client bookkeeping) */
    uint64_t deadline; /* ns: first request + max_wait */
    int full;          /* no more requests fit (row/request limit, or one was carried) */
    int overlapped;    /* requests came while the other stage was in the model */
    void *merge[GB_WIRE_MAX_TENSORS];
    size_t merge_cap[GB_WIRE_MAX_TENSORS];
    gb_infer_batch batch;
    gb_infer_outputs out;
    int rc; /* the callback's result (inference thread writes, request thread reads after done) */
    gb_error err;
} stage;

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
    /* pipelined mode (slot[cap] stays the carry slot; slot[0..cap) are unused) */
    stage stages[2];
    int gi;   /* the stage gathering */
    int busy; /* the stage handed to the inference thread, -1 when none */
    int efd;  /* eventfd: the inference thread's "done" wake-up, polled beside the ROUTER */
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu; /* guards job, done, quit */
    pthread_cond_t cv;
    int mu_init, cv_init;
    int job; /* stage index for the inference thread, -1: none */
    int done, quit;
};

static int ensure_msg(gb_wire_msg **m, gb_error *err)
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
    return ensure_msg(&s->slot[i], err);
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

static int pipe_start(gb_infer_server *s, gb_error *err);
static void pipe_stop(gb_infer_server *s);

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
    if (o->pipelined && (rc = pipe_start(s, err)))
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
        pipe_stop(s); /* answers what it still holds, before the socket goes */
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
    snprintf(h->text, sizeof h->text, "%.*s", (int)sizeof h->text - 1, text); /* cut to fit */
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

/* Builds the batch of slot[0..n) (rows in all): a lone request is read in place, more are
 * copied into the merge buffers (grown when needed, never shrunk). Returns 0 or GB_ENOMEM. */
static int build_batch(gb_wire_msg **slot, int n, int64_t rows, void **merge, size_t *merge_cap,
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
static int run_fn(gb_infer_server *s, const gb_infer_batch *b, gb_infer_outputs *out,
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
static void send_replies(gb_infer_server *s, gb_wire_msg **slot, int n, int64_t rows,
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
        if (gb_wire_send(s->sock, m->route, m->route_len, h, p, ZMQ_DONTWAIT, &e))
            GB_DEBUG("inference server: reply to request %llu not sent: %s",
                     (unsigned long long)m->hdr.seq, e.msg);
        r0 += ri;
        gb_wire_msg_release(m);
    }
    s->st.requests += (uint64_t)n;
    s->st.rows += (uint64_t)rows;
    s->st.batches++;
}

/* Answers every request of slot[0..n) with code and text, releases them. */
static void reply_all_error(gb_infer_server *s, gb_wire_msg **slot, int n, int code,
                            const char *text)
{
    for (int i = 0; i < n; i++) {
        reply_error(s, slot[i], code, text);
        gb_wire_msg_release(slot[i]);
    }
}

static int pipe_poll(gb_infer_server *s, int timeout_ms, gb_error *err);

int gb_infer_server_poll(gb_infer_server *s, int timeout_ms, gb_error *err)
{
    gb_error local;
    if (!err)
        err = &local;
    if (s->o.pipelined)
        return pipe_poll(s, timeout_ms, err);
    if (s->o.between)
        s->o.between(s->o.user);
    int64_t rows = 0;
    s->gen++;
    int n = gather(s, timeout_ms, &rows, err);
    if (n <= 0)
        return n;
    int rc = build_batch(s->slot, n, rows, s->merge, s->merge_cap, &s->batch, err);
    if (rc == 0)
        rc = run_fn(s, &s->batch, &s->out, err);
    if (rc) {
        reply_all_error(s, s->slot, n, rc, err->msg);
        s->st.failed += (uint64_t)n;
        return rc;
    }
    send_replies(s, s->slot, n, rows, &s->out);
    return 1;
}

/* ---- pipelined mode ---------------------------------------------------------------------------- */

/* Empties a stage and opens it as the next batch generation. */
static void stage_reset(gb_infer_server *s, stage *g)
{
    g->n = 0;
    g->rows = 0;
    g->full = 0;
    g->overlapped = 0;
    g->deadline = 0;
    g->gen = ++s->gen;
}

/* Adds the validated request in g->slot[g->n] to the gathering stage. */
static void stage_add(gb_infer_server *s, stage *g, int64_t rows, uint64_t now)
{
    note_client(s, g->slot[g->n], now);
    if (g->n == 0)
        g->deadline = now + (uint64_t)(s->o.max_wait_ms * 1e6);
    if (s->busy >= 0)
        g->overlapped = 1;
    g->rows += rows;
    g->n++;
}

/* Request thread: receives what is queued on the ROUTER into the gathering stage without
 * waiting, until nothing is left or the stage is full (a request that does not fit is carried
 * to the next batch, as in the serial mode). Returns 0 or GB_ECLOSED/GB_EZMQ/GB_ENOMEM. */
static int pipe_receive(gb_infer_server *s, stage *g, gb_error *err)
{
    int rc;
    if (g->n == 0 && s->carry) {
        if ((rc = ensure_msg(&g->slot[0], err)))
            return rc;
        gb_wire_msg *t = g->slot[0];
        g->slot[0] = s->slot[s->cap];
        s->slot[s->cap] = t;
        s->carry = 0;
        stage_add(s, g, g->slot[0]->hdr.tensors[0].shape[0], gb_now_ns());
    }
    while (!g->full) {
        if (g->n > 0 && (g->rows >= s->o.max_batch_rows || g->n == s->cap)) {
            g->full = 1;
            break;
        }
        if ((rc = ensure_msg(&g->slot[g->n], err)))
            return rc;
        gb_wire_msg *m = g->slot[g->n];
        rc = gb_wire_recv(s->sock, m, 1, ZMQ_DONTWAIT, err);
        if (rc == GB_EAGAIN)
            return 0;
        if (rc == GB_EPROTO) {
            s->st.rejected++;
            GB_DEBUG("inference server: rejected a request: %s", err->msg);
            if (m->hdr.type != 0 && m->route_len > 0)
                reply_error(s, m, GB_EPROTO, err->msg);
            continue;
        }
        if (rc)
            return rc;
        int64_t r = request_rows(s, m);
        if (r == 0)
            continue;
        if (g->n > 0 && (!compatible(&g->slot[0]->hdr, &m->hdr) ||
                         g->rows + r > s->o.max_batch_rows)) {
            g->slot[g->n] = s->slot[s->cap];
            s->slot[s->cap] = m;
            s->carry = 1;
            g->full = 1;
            break;
        }
        stage_add(s, g, r, gb_now_ns());
    }
    return 0;
}

/* 1 when the gathering stage should go to the model (once the model is free). */
static int stage_ready(const gb_infer_server *s, const stage *g, uint64_t now)
{
    return g->n > 0 && (g->full || now >= g->deadline || all_clients_present(s, now));
}

/* Request thread: merges the gathering stage and hands it to the idle inference thread; the
 * other stage starts gathering. Returns 0, or GB_ENOMEM after answering the batch with it. */
static int pipe_hand(gb_infer_server *s, gb_error *err)
{
    stage *g = &s->stages[s->gi];
    int rc = build_batch(g->slot, g->n, g->rows, g->merge, g->merge_cap, &g->batch, err);
    if (rc) {
        reply_all_error(s, g->slot, g->n, rc, err->msg);
        s->st.failed += (uint64_t)g->n;
        stage_reset(s, g);
        return rc;
    }
    if (g->overlapped)
        s->st.overlapped++;
    pthread_mutex_lock(&s->mu);
    s->job = s->gi;
    s->done = 0;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    s->busy = s->gi;
    s->gi ^= 1;
    stage_reset(s, &s->stages[s->gi]);
    return 0;
}

/* 1 (and cleared) when the inference thread has finished the batch it was handed. */
static int pipe_take_done(gb_infer_server *s)
{
    pthread_mutex_lock(&s->mu);
    int d = s->done;
    s->done = 0;
    pthread_mutex_unlock(&s->mu);
    return d;
}

static void drain_wakeups(gb_infer_server *s)
{
    uint64_t v;
    if (read(s->efd, &v, sizeof v) < 0 && errno != EAGAIN)
        GB_DEBUG("inference server: eventfd read: %s", strerror(errno));
}

/* Request thread: answers the finished batch (outputs or the callback's error). Returns 1 or
 * the callback's error (err filled). */
static int pipe_finish(gb_infer_server *s, gb_error *err)
{
    stage *f = &s->stages[s->busy];
    s->busy = -1;
    int rc = f->rc;
    if (rc == 0) {
        send_replies(s, f->slot, f->n, f->rows, &f->out);
    } else {
        reply_all_error(s, f->slot, f->n, rc, f->err.msg);
        s->st.failed += (uint64_t)f->n;
        *err = f->err;
    }
    f->n = 0;
    return rc ? rc : 1;
}

static int pipe_poll(gb_infer_server *s, int timeout_ms, gb_error *err)
{
    uint64_t start = gb_now_ns();
    uint64_t end = timeout_ms < 0 ? UINT64_MAX : start + (uint64_t)timeout_ms * 1000000ULL;
    int rc;
    for (;;) {
        stage *g = &s->stages[s->gi];
        if (s->busy >= 0 && pipe_take_done(s)) {
            drain_wakeups(s);
            int served = pipe_finish(s, err);
            /* keep the model busy: the next batch goes now when it is ready */
            gb_error e;
            if ((rc = pipe_receive(s, g, &e)) ||
                (stage_ready(s, g, gb_now_ns()) && (rc = pipe_hand(s, &e))))
                GB_WARN("inference server: after a batch: %s", e.msg);
            return served;
        }
        if ((rc = pipe_receive(s, g, err)))
            return rc;
        uint64_t now = gb_now_ns();
        if (s->busy < 0 && stage_ready(s, g, now)) {
            if ((rc = pipe_hand(s, err)))
                return rc;
            continue;
        }
        if (now >= end)
            return 0;
        uint64_t until = end;
        if (s->busy < 0 && g->n > 0 && g->deadline < until)
            until = g->deadline;
        long ms = until == UINT64_MAX ? -1 : (long)((until - now + 999999) / 1000000);
        zmq_pollitem_t it[2];
        int k = 0, ie = -1;
        if (!g->full)
            it[k++] = (zmq_pollitem_t){s->sock, 0, ZMQ_POLLIN, 0};
        if (s->busy >= 0) {
            ie = k;
            it[k++] = (zmq_pollitem_t){NULL, s->efd, ZMQ_POLLIN, 0};
        }
        if (k == 0) /* cannot happen: a full stage with an idle model was handed above */
            return gb_error_set(err, GB_EINVAL, "inference server: nothing to wait for");
        if (zmq_poll(it, k, ms) < 0)
            return gb_wire_zmq_error(err, "inference server: zmq_poll");
        /* the done flag is the truth; a wake-up left over from a batch already taken (its done
         * seen before its write) must not keep the eventfd readable, or this loop would spin */
        if (ie >= 0 && (it[ie].revents & ZMQ_POLLIN))
            drain_wakeups(s);
    }
}

static void *infer_thread(void *arg)
{
    gb_infer_server *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (s->job < 0) {
            if (s->quit)
                break;
            if (!s->o.between) {
                pthread_cond_wait(&s->cv, &s->mu);
                continue;
            }
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += SERVER_IDLE_BETWEEN_MS * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT && s->job < 0 &&
                !s->quit) {
                pthread_mutex_unlock(&s->mu);
                s->o.between(s->o.user);
                pthread_mutex_lock(&s->mu);
            }
            continue;
        }
        stage *g = &s->stages[s->job];
        pthread_mutex_unlock(&s->mu);
        if (s->o.between)
            s->o.between(s->o.user);
        g->rc = run_fn(s, &g->batch, &g->out, &g->err);
        pthread_mutex_lock(&s->mu);
        s->job = -1;
        s->done = 1;
        pthread_mutex_unlock(&s->mu);
        uint64_t one = 1;
        if (write(s->efd, &one, sizeof one) < 0) /* only EAGAIN at 2^64-1: already readable */
            GB_DEBUG("inference server: eventfd write: %s", strerror(errno));
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static int pipe_start(gb_infer_server *s, gb_error *err)
{
    int rc;
    for (int k = 0; k < 2; k++) {
        s->stages[k].slot = calloc((size_t)s->cap, sizeof *s->stages[k].slot);
        if (!s->stages[k].slot)
            return gb_error_set(err, GB_ENOMEM, "inference server: out of memory");
        if ((rc = ensure_msg(&s->stages[k].slot[0], err)))
            return rc;
    }
    s->gi = 0;
    stage_reset(s, &s->stages[0]);
    s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->efd < 0)
        return gb_error_errno(err, "inference server: eventfd");
    if ((rc = pthread_mutex_init(&s->mu, NULL)) != 0) {
        errno = rc;
        return gb_error_errno(err, "inference server: pthread_mutex_init");
    }
    s->mu_init = 1;
    pthread_condattr_t ca;
    if ((rc = pthread_condattr_init(&ca)) != 0) {
        errno = rc;
        return gb_error_errno(err, "inference server: pthread_condattr_init");
    }
    rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) {
        errno = rc;
        return gb_error_errno(err, "inference server: pthread_cond_init");
    }
    s->cv_init = 1;
    if ((rc = pthread_create(&s->thread, NULL, infer_thread, s)) != 0) {
        errno = rc;
        return gb_error_errno(err, "inference server: pthread_create");
    }
    s->thread_started = 1;
    return 0;
}

static void pipe_stop(gb_infer_server *s)
{
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->quit = 1;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL); /* a batch in the model finishes first */
        s->thread_started = 0;
    }
    if (s->busy >= 0) { /* its callback has returned: answer it with what it produced */
        gb_error e;
        pipe_finish(s, &e);
    }
    for (int k = 0; k < 2; k++) {
        stage *g = &s->stages[k];
        if (g->slot && g->n > 0)
            reply_all_error(s, g->slot, g->n, GB_ECLOSED, "inference server closing");
        g->n = 0;
    }
    if (s->carry) {
        reply_error(s, s->slot[s->cap], GB_ECLOSED, "inference server closing");
        gb_wire_msg_release(s->slot[s->cap]);
        s->carry = 0;
    }
    if (s->efd >= 0)
        close(s->efd);
    s->efd = -1;
    if (s->cv_init)
        pthread_cond_destroy(&s->cv);
    if (s->mu_init)
        pthread_mutex_destroy(&s->mu);
    s->cv_init = s->mu_init = 0;
}
