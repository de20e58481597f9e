/* workers/server/server.c: the offline-RL data server's transport and life: the client-facing
 * ROUTER, the broker loop handing each request to an idle request thread, the request threads, open
 * and close; each request goes to server_dispatch.c (protocol: workers/server/server_protocol.h).
 * */
#include "workers/server/server.h"
#include "workers/server/server_internal.h"

#include "runtime/base/clock.h"
#include "runtime/streams/curve.h"
#include "runtime/base/log.h"
#include "runtime/streams/wire.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

/* ---- request threads ------------------------------------------------------------------------ */

static void *worker_main(void *arg)
{
    worker *w = arg;
    gb_server *s = w->s;
    /* Replies go to the broker as they come; the empty frame alone says "ready for the next",
     * once after each request (a reply to a parked request is not one). */
    zmq_send(w->sock, "", 0, 0);
    while (!atomic_load(&s->stop_threads)) {
        gb_error err = {0};
        int rc = gb_wire_recv(w->sock, w->m, 1, 0, &err);
        if (rc == GB_EAGAIN || rc == GB_ETIMEOUT) {
            gb_server_retry_parked(w); /* every 100 ms (ZMQ_RCVTIMEO) while idle */
            continue;
        }
        if (rc == GB_ECLOSED || rc == GB_EZMQ)
            break;
        gb_server_handle(w, rc, &err);
        gb_wire_msg_release(w->m);
        gb_server_retry_parked(w);
        zmq_send(w->sock, "", 0, 0);
    }
    if (w->m)
        gb_wire_msg_release(w->m);
    return NULL;
}

/* ---- broker --------------------------------------------------------------------------------- */

/* Moves the remaining parts of the message on `from` to `to` (the first part in msg). */
static int forward(void *from, void *to, zmq_msg_t *msg, int more)
{
    for (;;) {
        if (zmq_msg_send(msg, to, more ? ZMQ_SNDMORE : 0) < 0) {
            zmq_msg_close(msg);
            /* drain what is left so the next message starts clean */
            while (more) {
                zmq_msg_init(msg);
                if (zmq_msg_recv(msg, from, 0) < 0)
                    return -1;
                more = zmq_msg_more(msg);
                zmq_msg_close(msg);
            }
            return -1;
        }
        if (!more)
            return 0;
        zmq_msg_init(msg);
        if (zmq_msg_recv(msg, from, 0) < 0)
            return -1;
        more = zmq_msg_more(msg);
    }
}

/* The request thread index in a routing id "wNNN" (ID_BYTES bytes), or -1. */
static int worker_of(const char *id)
{
    if (id[0] != 'w')
        return -1;
    int v = 0;
    for (int i = 1; i < ID_BYTES; i++) {
        if (id[i] < '0' || id[i] > '9')
            return -1;
        v = v * 10 + (id[i] - '0');
    }
    return v;
}

/* The broker loop on the caller's thread: blocks until *stop is set (checked every 100 ms).
 * Returns 0, GB_ECLOSED (context terminated), GB_EZMQ or GB_ENOMEM. */
int gb_server_run(gb_server *s, const atomic_int *stop, gb_error *err)
{
    int *idle = malloc((size_t)s->nthreads * sizeof *idle), nidle = 0;
    if (!idle)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    int rc = 0;
    while (!atomic_load(stop)) {
        zmq_pollitem_t items[2] = {{s->back, 0, ZMQ_POLLIN, 0}, {s->front, 0, ZMQ_POLLIN, 0}};
        int n = zmq_poll(items, nidle > 0 ? 2 : 1, 100);
        if (n < 0) {
            if (zmq_errno() == EINTR)
                continue;
            rc = gb_wire_zmq_error(err, "server: zmq_poll");
            break;
        }
        if (items[0].revents & ZMQ_POLLIN) {
            char id[16];
            int l = zmq_recv(s->back, id, sizeof id, 0);
            if (l < 0) {
                rc = gb_wire_zmq_error(err, "server: receive from a request thread");
                break;
            }
            zmq_msg_t msg;
            zmq_msg_init(&msg);
            if (zmq_msg_recv(&msg, s->back, 0) < 0) {
                zmq_msg_close(&msg);
                rc = gb_wire_zmq_error(err, "server: receive from a request thread");
                break;
            }
            int more = zmq_msg_more(&msg);
            if (more || zmq_msg_size(&msg) != 0) {
                forward(s->back, s->front, &msg, more); /* a reply */
                continue;
            }
            zmq_msg_close(&msg); /* ready */
            /* "wNNN": exactly ID_BYTES bytes, not NUL-terminated (atoi on the raw buffer read
             * whatever followed on the stack: "w001" then a stale '3' dispatched to a "w013"
             * that does not exist, and the request was dropped) */
            int wid = l == ID_BYTES ? worker_of(id) : -1;
            if (wid >= 0 && wid < s->nthreads && nidle < s->nthreads)
                idle[nidle++] = wid;
        }
        if (nidle > 0 && (items[1].revents & ZMQ_POLLIN)) {
            int wid = idle[--nidle];
            char id[16];
            snprintf(id, sizeof id, "w%03d", wid % 1000);
            zmq_msg_t msg;
            zmq_msg_init(&msg);
            if (zmq_msg_recv(&msg, s->front, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&msg);
                idle[nidle++] = wid;
                continue;
            }
            if (zmq_send(s->back, id, ID_BYTES, ZMQ_SNDMORE) < 0 ||
                forward(s->front, s->back, &msg, zmq_msg_more(&msg)) != 0) {
                GB_WARN("server: handing a request to thread %d failed: %s", wid,
                        zmq_strerror(zmq_errno()));
                idle[nidle++] = wid;
            }
        }
    }
    free(idle);
    return rc;
}

/* ---- setup ---------------------------------------------------------------------------------- */

/* Fills o from the server section c (o's strings point into c). */
void gb_server_opts_from_config(gb_server_opts *o, const gb_config_server *c)
{
    *o = (gb_server_opts){.endpoint = c->endpoint,
                          .threads = (int)c->threads,
                          .max_batch_rows = c->max_batch_rows,
                          .max_batch_bytes = c->max_batch_bytes,
                          .max_request_bytes = c->max_request_bytes,
                          .max_pending_replies = c->max_pending_replies,
                          .max_wait_s = c->max_wait_s,
                          .checkpoint = c->checkpoint};
}

static int set_int(void *sock, int opt, int v) { return zmq_setsockopt(sock, opt, &v, sizeof v); }

/* One table, "default", serving r (not owned). As gb_server_open_tables. */
int gb_server_open(gb_server **out, void *zctx, gb_replay *r, const gb_server_opts *o,
                   gb_error *err)
{
    gb_server_tables t = {.n = 1};
    snprintf(t.t[0].name, sizeof t.t[0].name, "%s", GB_SERVER_DEFAULT_TABLE);
    t.t[0].r = r;
    return gb_server_open_tables(out, zctx, &t, o, err);
}

/* Checks the tables (1..GB_SERVER_MAX_TABLES, each a replay and a distinct name) and the
 * options. Returns 0 or GB_EINVAL. */
static int check_open(const gb_server_tables *t, const gb_server_opts *o, gb_error *err)
{
    if (t->n < 1 || t->n > GB_SERVER_MAX_TABLES)
        return gb_error_set(err, GB_EINVAL, "server: 1..%d tables, got %d", GB_SERVER_MAX_TABLES,
                            t->n);
    for (int i = 0; i < t->n; i++) {
        size_t l = strlen(t->t[i].name);
        if (!t->t[i].r || l == 0 || l > 31)
            return gb_error_set(err, GB_EINVAL, "server: table %d: a replay and a name of 1..31 "
                                "bytes needed", i);
        for (int j = 0; j < i; j++)
            if (strcmp(t->t[i].name, t->t[j].name) == 0)
                return gb_error_set(err, GB_EINVAL, "server: two tables named '%s'",
                                    t->t[i].name);
    }
    if (!o->endpoint || !o->endpoint[0] || o->threads < 1 || o->threads > 999 ||
        o->max_batch_rows < 1 || o->max_batch_bytes < 1 || o->max_request_bytes < 1 ||
        o->max_pending_replies < 0 || o->max_wait_s < 0)
        return gb_error_set(err, GB_EINVAL, "server: bad options (endpoint, threads 1..999, "
                            "positive limits)");
    return 0;
}

/* Opens the client-facing ROUTER (bound to o->endpoint, s->endpoint filled in) and the inproc
 * ROUTER the request threads connect to. Returns 0 or GB_EZMQ. */
static int open_sockets(gb_server *s, const gb_server_opts *o, gb_error *err)
{
    /* "tcp://host:0" means any port, as "tcp://host:*" does. */
    char ep[512];
    snprintf(ep, sizeof ep, "%s", o->endpoint);
    size_t el = strlen(ep);
    if (strncmp(ep, "tcp://", 6) == 0 && el > 2 && strcmp(ep + el - 2, ":0") == 0)
        ep[el - 1] = '*';
    s->front = zmq_socket(s->zctx, ZMQ_ROUTER);
    s->back = zmq_socket(s->zctx, ZMQ_ROUTER);
    if (!s->front || !s->back)
        return gb_wire_zmq_error(err, "server: zmq_socket");
    /* The limit is on a whole request (its frames together), checked by the request thread,
     * which answers with an error naming it. A frame must be read to be answered, so ZeroMQ
     * only drops a peer whose single frame exceeds twice the limit (and a header's slack). */
    int64_t maxmsg = o->max_request_bytes > (INT64_MAX - GB_WIRE_HEADER_SLACK) / 2
                         ? -1
                         : 2 * o->max_request_bytes + GB_WIRE_HEADER_SLACK;
    if (zmq_setsockopt(s->front, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) != 0 ||
        set_int(s->front, ZMQ_LINGER, 0) || set_int(s->back, ZMQ_LINGER, 0) ||
        /* Bounded queues per client: a client that sends requests without reading the replies
         * loses replies beyond ~FRONT_HWM frames (the ROUTER drops them); one that floods
         * requests is held back by TCP. Clients with one request in flight never come near. */
        set_int(s->front, ZMQ_SNDHWM, FRONT_HWM) || set_int(s->front, ZMQ_RCVHWM, FRONT_HWM) ||
        set_int(s->back, ZMQ_SNDHWM, 0) || set_int(s->back, ZMQ_RCVHWM, 0))
        return gb_wire_zmq_error(err, "server: zmq_setsockopt");
    if (gb_curve_bind(s->zctx, s->front, ep) != 0) {
        int rc = gb_wire_zmq_error(err, "server: bind");
        gb_error_prefix(err, "%s", ep);
        return rc;
    }
    size_t cap = sizeof s->endpoint;
    if (zmq_getsockopt(s->front, ZMQ_LAST_ENDPOINT, s->endpoint, &cap) != 0)
        return gb_wire_zmq_error(err, "server: ZMQ_LAST_ENDPOINT");
    snprintf(s->back_ep, sizeof s->back_ep, "inproc://gearbox-server-%p", (void *)s);
    if (zmq_bind(s->back, s->back_ep) != 0)
        return gb_wire_zmq_error(err, "server: bind inproc");
    return 0;
}

/* Sets up request thread i (its DEALER, selection, draws, rows, message) and starts it. Returns
 * 0 or GB_EZMQ / GB_ENOMEM / GB_ESYS; what was taken is freed by gb_server_close. */
static int start_worker(gb_server *s, int i, gb_error *err)
{
    const gb_server_opts *o = &s->o;
    worker *w = &s->workers[i];
    w->s = s;
    w->id = i;
    char id[16];
    snprintf(id, sizeof id, "w%03d", i % 1000);
    w->sock = zmq_socket(s->zctx, ZMQ_DEALER);
    if (!w->sock || zmq_setsockopt(w->sock, ZMQ_ROUTING_ID, id, ID_BYTES) != 0 ||
        set_int(w->sock, ZMQ_RCVTIMEO, 100) || set_int(w->sock, ZMQ_LINGER, 0) ||
        set_int(w->sock, ZMQ_SNDHWM, 0) || set_int(w->sock, ZMQ_RCVHWM, 0) ||
        zmq_connect(w->sock, s->back_ep) != 0)
        return gb_wire_zmq_error(err, "server: request thread socket");
    int rc = gb_replay_selection_init(&w->sel, o->max_batch_rows, err);
    if (rc)
        return rc;
    gb_rng_seed_for(&w->rng, (uint64_t)(uintptr_t)s ^ (uint64_t)gb_now_ns(), "server", i);
    if (!(w->rows = malloc((size_t)o->max_batch_rows * 2 * sizeof *w->rows)) ||
        !(w->m = malloc(sizeof *w->m)))
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    gb_wire_msg_init(w->m);
    if (pthread_create(&s->threads[i], NULL, worker_main, w) != 0)
        return gb_error_errno(err, "server: pthread_create");
    s->started++;
    return 0;
}

/* Binds the ROUTER and starts the request threads serving every table of t (not owned: they
 * must outlive the server); names distinct, 1..31 bytes. Does not block. Returns 0 with *out
 * set (gb_server_close), or GB_EINVAL (bad tables or options), GB_EZMQ (bind failed, naming
 * the endpoint), GB_ESYS, GB_ENOMEM. */
int gb_server_open_tables(gb_server **out, void *zctx, const gb_server_tables *t,
                          const gb_server_opts *o, gb_error *err)
{
    *out = NULL;
    int rc = check_open(t, o, err);
    if (rc)
        return rc;
    gb_server *s = calloc(1, sizeof *s);
    if (!s)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    s->zctx = zctx;
    s->ntables = t->n;
    for (int i = 0; i < t->n; i++) {
        snprintf(s->tables[i].name, sizeof s->tables[i].name, "%s", t->t[i].name);
        s->tables[i].r = t->t[i].r;
        s->tables[i].ep = t->t[i].ep;
    }
    s->r = s->tables[0].r;
    s->o = *o;
    if (s->o.max_pending_replies == 0)
        s->o.max_pending_replies = GB_SERVER_MAX_PENDING_REPLIES;
    snprintf(s->checkpoint, sizeof s->checkpoint, "%s", o->checkpoint ? o->checkpoint : "");
    pthread_mutex_init(&s->ckpt_mu, NULL);
    pthread_mutex_init(&s->pool_mu, NULL);
    pthread_mutex_init(&s->park_mu, NULL);
    pthread_mutex_init(&s->client_mu, NULL);
    if ((rc = open_sockets(s, o, err)))
        goto fail;
    s->nthreads = o->threads;
    s->threads = calloc((size_t)s->nthreads, sizeof *s->threads);
    s->workers = calloc((size_t)s->nthreads, sizeof *s->workers);
    if (!s->threads || !s->workers) {
        rc = gb_error_set(err, GB_ENOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < s->nthreads; i++)
        if ((rc = start_worker(s, i, err)))
            goto fail;
    *out = s;
    return 0;
fail:
    gb_server_close(s);
    return rc;
}

/* The bound endpoint (owned by s), the port filled in. */
const char *gb_server_endpoint(const gb_server *s) { return s->endpoint; }

/* Stops and joins the request threads, closes the sockets, waits (bounded) for the reply
 * buffers ZeroMQ still holds and frees s. NULL is fine; the tables are not freed. */
void gb_server_close(gb_server *s)
{
    if (!s)
        return;
    atomic_store(&s->stop_threads, 1);
    for (int i = 0; i < s->started; i++)
        pthread_join(s->threads[i], NULL);
    for (int i = 0; s->workers && i < s->nthreads; i++) {
        if (s->workers[i].sock)
            zmq_close(s->workers[i].sock);
        gb_replay_selection_free(&s->workers[i].sel);
        free(s->workers[i].m);
        free(s->workers[i].rows);
    }
    gb_server_drop_parked(s);
    if (s->front)
        zmq_close(s->front);
    if (s->back)
        zmq_close(s->back);
    /* Reply buffers still held by ZeroMQ come back through gb_server_rbuf_free after this: they
     * are freed there once the pool is full; the pool itself is freed here. Sockets are closed
     * with linger 0 above, so ZeroMQ releases pending messages when the context terminates;
     * the caller terminates the context after close, and gb_server_rbuf_free must not run on a
     * freed server, so close waits for every buffer to come back (bounded: linger 0 drops them
     * at once). */
    for (;;) {
        pthread_mutex_lock(&s->pool_mu);
        int out = atomic_load(&s->buffers_out);
        pthread_mutex_unlock(&s->pool_mu);
        if (out == 0)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        if (++s->close_waits > 5000) {
            GB_WARN("server: %d reply buffers still held by ZeroMQ at close; leaking them", out);
            s->leak = 1;
            break;
        }
    }
    gb_server_pool_free(s);
    free(s->threads);
    free(s->workers);
    if (!s->leak) {
        pthread_mutex_destroy(&s->ckpt_mu);
        pthread_mutex_destroy(&s->pool_mu);
        pthread_mutex_destroy(&s->park_mu);
        pthread_mutex_destroy(&s->client_mu);
        free(s);
    }
}

/* A snapshot of the counters; never blocks for long (the parked list's lock). */
gb_server_stats gb_server_get_stats(const gb_server *s)
{
    gb_server_stats st = {0};
    for (int i = 0; i < GB_SERVE_OP_END; i++)
        st.requests[i] = atomic_load(&((gb_server *)s)->requests[i]);
    st.errors = atomic_load(&((gb_server *)s)->errors);
    st.rejected = atomic_load(&((gb_server *)s)->rejected);
    st.refused = atomic_load(&((gb_server *)s)->refused);
    st.clients_waiting = gb_server_clients_waiting((gb_server *)s);
    st.items_sent = atomic_load(&((gb_server *)s)->items_sent);
    st.bytes_sent = atomic_load(&((gb_server *)s)->bytes_sent);
    st.parked = atomic_load(&((gb_server *)s)->parked_total);
    pthread_mutex_lock(&((gb_server *)s)->park_mu);
    st.parked_now = s->nparked;
    pthread_mutex_unlock(&((gb_server *)s)->park_mu);
    return st;
}
