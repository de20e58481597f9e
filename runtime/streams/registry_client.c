/* runtime/streams/registry_client.c: the endpoint registry's client: requests with their timeouts,
 * and the heartbeat thread that keeps this worker's names registered (see registry.h). */
#include "runtime/streams/registry.h"

#include "runtime/base/clock.h"
#include "runtime/streams/curve.h"
#include "runtime/streams/endpoint.h"
#include "runtime/base/log.h"
#include "runtime/streams/wire.h"
#include "runtime/streams/wire_messages.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Lookups of names not registered yet are repeated, 5 ms apart at first and at most this apart:
 * workers wait on each other this way at start-up (an actor on the policy workers loading
 * libtorch), so the poll interval adds straight to the time until the run acts (a cap of 200 ms
 * kept CartPole's actors waiting up to 0.2 s after the policy worker was ready); a lookup is one
 * small request to the registry. */
#define LOOKUP_POLL_MAX_MS 25

typedef struct reg_conn {
    void *sock;
    uint64_t seq;
    gb_wire_msg reply;
    gb_wire_header hdr;
} reg_conn;

struct gb_registry_client {
    gb_registry_client_opts o;
    char endpoint[GB_REGISTRY_ENDPOINT_MAX];
    reg_conn main;
    pthread_mutex_t lock; /* guards mine */
    gb_registry_entry *mine;
    int nmine, cap_mine;
    int thread_started;
    pthread_t thread;
    atomic_int stop;
    pthread_mutex_t wake_mu; /* with wake: the heartbeat's wait, cut short by the close */
    pthread_cond_t wake;
    void *zctx;
};

static int conn_open(reg_conn *c, void *zctx, const char *endpoint, gb_error *err)
{
    gb_wire_msg_init(&c->reply);
    c->sock = zmq_socket(zctx, ZMQ_DEALER);
    if (!c->sock)
        return gb_wire_zmq_error(err, "registry client: zmq_socket(DEALER)");
    int linger = 0;
    if (zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger))
        return gb_wire_zmq_error(err, "registry client: ZMQ_LINGER");
    /* the largest reply lists every registration's endpoint */
    int rc = gb_wire_set_max_frame(c->sock, (uint64_t)GB_REGISTRY_MAX_ENTRIES *
                                                GB_REGISTRY_ENDPOINT_MAX, err);
    if (rc)
        return rc;
    if (gb_curve_connect(zctx, c->sock, endpoint) != 0) {
        rc = gb_wire_zmq_error(err, "registry client: connect");
        gb_error_prefix(err, "%s", endpoint);
        return rc;
    }
    return 0;
}

static void conn_close(reg_conn *c)
{
    gb_wire_msg_release(&c->reply);
    if (c->sock)
        zmq_close(c->sock);
    c->sock = NULL;
}

/* One request of kind q (attributes from in) with the tensors "name" and "endpoint" when given;
 * waits for its reply, which stays in c->reply. */
static int call(const gb_registry_client *rc_, reg_conn *c, const gb_wire_schema *q,
                const void *in, const char *name, const char *endpoint, int timeout_ms,
                gb_error *err)
{
    gb_wire_header *h = &c->hdr;
    gb_wire_header_init(h, q->type, rc_->o.role, rc_->o.index);
    h->seq = ++c->seq;
    int rc = gb_wire_schema_write(q, in, h, err);
    if (rc)
        return rc;
    gb_wire_payload pl[2] = {{0}, {0}};
    const char *strs[2] = {name, endpoint};
    const char *names[2] = {"name", "endpoint"};
    for (int i = 0; i < 2 && strs[i]; i++) {
        int64_t n = (int64_t)strlen(strs[i]);
        gb_wire_set_tensor(&h->tensors[i], names[i], GB_DTYPE_UINT8, 1, &n, NULL);
        pl[i].data = strs[i];
        h->ntensors = i + 1;
    }
    rc = gb_wire_send(c->sock, NULL, 0, h, pl, ZMQ_DONTWAIT, err);
    if (rc == GB_EAGAIN) /* one request at a time: the queue is never full, the link is gone */
        return gb_error_set(err, GB_ECLOSED, "registry %s: request not sent: no connection (a "
                            "registry that broke the protocol, e.g. with a frame over the "
                            "limit, is not reconnected)", rc_->endpoint);
    if (rc)
        return rc;
    uint64_t end = gb_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
    for (;;) {
        uint64_t now = gb_now_ns();
        if (now >= end)
            return gb_error_set(err, GB_ETIMEOUT, "registry %s: no answer within %d ms",
                                rc_->endpoint, timeout_ms);
        zmq_pollitem_t it = {c->sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, (long)((end - now + 999999) / 1000000)) < 0)
            return gb_wire_zmq_error(err, "registry client: zmq_poll");
        if (!(it.revents & ZMQ_POLLIN))
            continue;
        rc = gb_wire_recv(c->sock, &c->reply, 0, ZMQ_DONTWAIT, err);
        if (rc == GB_EAGAIN || rc == GB_EPROTO)
            continue;
        if (rc)
            return rc;
        if (c->reply.hdr.seq != h->seq || c->reply.hdr.type != GB_MSG_REG_REPLY)
            continue; /* an answer to an earlier request that timed out */
        if (c->reply.hdr.status != 0)
            return gb_error_set(err, c->reply.hdr.status < 0 ? c->reply.hdr.status : GB_EPROTO,
                                "registry: %s", c->reply.hdr.text);
        return 0;
    }
}

static void *heartbeat_main(void *arg)
{
    gb_registry_client *c = arg;
    reg_conn conn = {0};
    gb_error err;
    if (conn_open(&conn, c->zctx, c->endpoint, &err)) {
        GB_ERROR("registry heartbeat: %s", err.msg);
        conn_close(&conn);
        return NULL;
    }
    uint64_t next = gb_now_ns() + (uint64_t)c->o.heartbeat_ms * 1000000ULL;
    while (!atomic_load(&c->stop)) {
        if (gb_now_ns() < next) {
            /* until the next round or the close (the stop would otherwise wait out a sleep) */
            struct timespec at = {(time_t)(next / 1000000000ULL), (long)(next % 1000000000ULL)};
            pthread_mutex_lock(&c->wake_mu);
            if (!atomic_load(&c->stop))
                pthread_cond_timedwait(&c->wake, &c->wake_mu, &at);
            pthread_mutex_unlock(&c->wake_mu);
            continue;
        }
        next += (uint64_t)c->o.heartbeat_ms * 1000000ULL;
        /* the lock is held for the whole round, so an unregister cannot be undone by a
         * heartbeat that read the name just before it */
        pthread_mutex_lock(&c->lock);
        gb_msg_reg_register q = {c->o.ttl_ms};
        for (int i = 0; i < c->nmine && !atomic_load(&c->stop); i++)
            if (call(c, &conn, &gb_schema_reg_register, &q, c->mine[i].name,
                     c->mine[i].endpoint, c->o.heartbeat_ms, &err))
                GB_WARN("registry heartbeat for '%s': %s", c->mine[i].name, err.msg);
        pthread_mutex_unlock(&c->lock);
    }
    conn_close(&conn);
    return NULL;
}

int gb_registry_client_open(gb_registry_client **out, void *zctx,
                            const gb_registry_client_opts *o, gb_error *err)
{
    *out = NULL;
    if (!o->endpoint || strlen(o->endpoint) >= GB_REGISTRY_ENDPOINT_MAX || o->timeout_ms <= 0 ||
        o->heartbeat_ms < 0 || o->ttl_ms <= o->heartbeat_ms)
        return gb_error_set(err, GB_EINVAL, "registry client: need an endpoint, timeout_ms > 0 "
                            "and ttl_ms > heartbeat_ms >= 0");
    gb_registry_client *c = calloc(1, sizeof *c);
    if (!c)
        return gb_error_set(err, GB_ENOMEM, "registry client: out of memory");
    c->o = *o;
    c->zctx = zctx;
    snprintf(c->endpoint, sizeof c->endpoint, "%s", o->endpoint);
    c->o.endpoint = c->endpoint;
    atomic_init(&c->stop, 0);
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->wake_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* gb_now_ns's clock */
    pthread_cond_init(&c->wake, &ca);
    pthread_condattr_destroy(&ca);
    int rc = conn_open(&c->main, zctx, c->endpoint, err);
    if (rc)
        goto fail;
    if (o->heartbeat_ms > 0) {
        int e = pthread_create(&c->thread, NULL, heartbeat_main, c);
        if (e) {
            errno = e;
            rc = gb_error_errno(err, "registry client: pthread_create");
            goto fail;
        }
        c->thread_started = 1;
    }
    *out = c;
    return 0;
fail:
    gb_registry_client_close(c);
    return rc;
}

void gb_registry_client_close(gb_registry_client *c)
{
    if (!c)
        return;
    if (c->thread_started) {
        pthread_mutex_lock(&c->wake_mu);
        atomic_store(&c->stop, 1);
        pthread_cond_signal(&c->wake);
        pthread_mutex_unlock(&c->wake_mu);
        pthread_join(c->thread, NULL);
    }
    gb_error err;
    for (int i = 0; i < c->nmine && c->main.sock; i++)
        call(c, &c->main, &gb_schema_reg_unregister, NULL, c->mine[i].name, NULL,
             c->o.timeout_ms < 500 ? c->o.timeout_ms : 500, &err);
    conn_close(&c->main);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->wake_mu);
    free(c->mine);
    free(c);
}

int gb_registry_register(gb_registry_client *c, const char *name, const char *endpoint,
                         gb_error *err)
{
    /* a socket bound to every interface ("*") is published as this host's name: 0.0.0.0 is
     * no address a peer can connect to */
    char reachable[GB_REGISTRY_ENDPOINT_MAX];
    int rc = gb_endpoint_connectable(endpoint, reachable, sizeof reachable, err);
    if (rc)
        return rc;
    endpoint = reachable;
    size_t nl = strlen(name), el = strlen(endpoint);
    if (nl == 0 || nl >= GB_REGISTRY_NAME_MAX || el == 0 || el >= GB_REGISTRY_ENDPOINT_MAX)
        return gb_error_set(err, GB_EINVAL, "registry: name '%s' or endpoint '%s' empty or too "
                            "long", name, endpoint);
    gb_msg_reg_register q = {c->o.ttl_ms};
    rc = call(c, &c->main, &gb_schema_reg_register, &q, name, endpoint, c->o.timeout_ms, err);
    if (rc)
        return gb_error_prefix(err, "register '%s'", name);
    pthread_mutex_lock(&c->lock);
    int i;
    for (i = 0; i < c->nmine; i++)
        if (strcmp(c->mine[i].name, name) == 0)
            break;
    if (i == c->nmine && c->nmine == c->cap_mine) {
        int cap = c->cap_mine ? 2 * c->cap_mine : 8;
        gb_registry_entry *p = realloc(c->mine, (size_t)cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&c->lock);
            return gb_error_set(err, GB_ENOMEM, "registry client: out of memory");
        }
        c->mine = p;
        c->cap_mine = cap;
    }
    if (i == c->nmine)
        c->nmine++;
    memcpy(c->mine[i].name, name, nl + 1);
    memcpy(c->mine[i].endpoint, endpoint, el + 1);
    pthread_mutex_unlock(&c->lock);
    return 0;
}

int gb_registry_unregister(gb_registry_client *c, const char *name, gb_error *err)
{
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->nmine; i++)
        if (strcmp(c->mine[i].name, name) == 0) {
            c->mine[i] = c->mine[--c->nmine];
            break;
        }
    int rc = call(c, &c->main, &gb_schema_reg_unregister, NULL, name, NULL, c->o.timeout_ms,
                  err);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* Parses the reply's NUL-separated lists into a malloc'd array. */
static int parse_list(const gb_wire_msg *m, gb_registry_entry **out, int *n, gb_error *err)
{
    int tn = gb_wire_msg_find(m, "names"), te = gb_wire_msg_find(m, "endpoints");
    *out = NULL;
    *n = 0;
    int rc = gb_wire_schema_read(&gb_schema_reg_reply, &m->hdr, NULL, err);
    if (rc)
        return rc;
    if (tn < 0 || te < 0)
        return gb_error_set(err, GB_EPROTO, "registry: reply without names/endpoints");
    gb_tensor_view vn = gb_wire_msg_tensor(m, tn), ve = gb_wire_msg_tensor(m, te);
    const char *pn = vn.data, *pe = ve.data;
    int count = 0;
    for (size_t i = 0; i < vn.bytes; i++)
        count += pn[i] == '\0';
    gb_registry_entry *a = calloc(count ? (size_t)count : 1, sizeof *a);
    if (!a)
        return gb_error_set(err, GB_ENOMEM, "registry client: out of memory");
    size_t on = 0, oe = 0;
    for (int k = 0; k < count; k++) {
        size_t ln = strnlen(pn + on, vn.bytes - on);
        size_t le = oe < ve.bytes ? strnlen(pe + oe, ve.bytes - oe) : ve.bytes;
        if (ln >= GB_REGISTRY_NAME_MAX || oe >= ve.bytes || oe + le >= ve.bytes ||
            le >= GB_REGISTRY_ENDPOINT_MAX) {
            free(a);
            return gb_error_set(err, GB_EPROTO, "registry: malformed list reply");
        }
        memcpy(a[k].name, pn + on, ln);
        memcpy(a[k].endpoint, pe + oe, le);
        on += ln + 1;
        oe += le + 1;
    }
    *out = a;
    *n = count;
    return 0;
}

int gb_registry_list(gb_registry_client *c, const char *prefix, int min_count, int timeout_ms,
                     gb_registry_entry **out, int *n, gb_error *err)
{
    uint64_t end = gb_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ULL;
    double backoff = 5;
    int have = 0;
    for (;;) {
        uint64_t now = gb_now_ns();
        int left = now < end ? (int)((end - now + 999999) / 1000000) : 1;
        gb_msg_reg_lookup q = {GB_REG_LOOKUP_PREFIX};
        int rc = call(c, &c->main, &gb_schema_reg_lookup, &q, prefix, NULL,
                      left < c->o.timeout_ms ? left : c->o.timeout_ms, err);
        if (rc == 0) {
            if ((rc = parse_list(&c->main.reply, out, n, err)))
                return rc;
            have = *n;
            if (*n >= min_count)
                return 0;
            free(*out);
            *out = NULL;
        } else if (rc != GB_ETIMEOUT) {
            return rc;
        }
        if (gb_now_ns() >= end)
            return gb_error_set(err, GB_ETIMEOUT, "registry: %d of %d names under '%s' "
                                "registered after %d ms", have, min_count, prefix, timeout_ms);
        gb_sleep_ms(backoff);
        backoff = backoff < LOOKUP_POLL_MAX_MS ? backoff * 2 : LOOKUP_POLL_MAX_MS;
    }
}

/* One lookup of name (mode GB_REG_LOOKUP_NAME or _LAST) within timeout_ms. */
static int lookup_once(gb_registry_client *c, const char *name, int mode, char *endpoint,
                       size_t cap, int timeout_ms, gb_error *err)
{
    gb_msg_reg_lookup q = {mode};
    int rc = call(c, &c->main, &gb_schema_reg_lookup, &q, name, NULL, timeout_ms, err);
    if (rc)
        return rc;
    gb_registry_entry *a;
    int n;
    if ((rc = parse_list(&c->main.reply, &a, &n, err)))
        return rc;
    if (n < 1) {
        free(a);
        return gb_error_set(err, GB_EPROTO, "registry: empty lookup reply");
    }
    size_t len = strlen(a[0].endpoint);
    if (len >= cap) {
        free(a);
        return gb_error_set(err, GB_EINVAL, "registry: endpoint of '%s' longer than %zu bytes",
                            name, cap);
    }
    memcpy(endpoint, a[0].endpoint, len + 1);
    free(a);
    return 0;
}

int gb_registry_lookup_last(gb_registry_client *c, const char *name, char *endpoint, size_t cap,
                            gb_error *err)
{
    return lookup_once(c, name, GB_REG_LOOKUP_LAST, endpoint, cap, c->o.timeout_ms, err);
}

int gb_registry_lookup(gb_registry_client *c, const char *name, char *endpoint, size_t cap,
                       int timeout_ms, gb_error *err)
{
    uint64_t end = gb_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ULL;
    double backoff = 5;
    for (;;) {
        uint64_t now = gb_now_ns();
        int left = now < end ? (int)((end - now + 999999) / 1000000) : 1;
        int rc = lookup_once(c, name, GB_REG_LOOKUP_NAME, endpoint, cap,
                             left < c->o.timeout_ms ? left : c->o.timeout_ms, err);
        if (rc == 0)
            return 0;
        if (rc != GB_ENOTFOUND && rc != GB_ETIMEOUT)
            return rc;
        if (gb_now_ns() >= end)
            return gb_error_set(err, GB_ETIMEOUT, "registry: no worker registered '%s' within "
                                "%d ms", name, timeout_ms);
        gb_sleep_ms(backoff);
        backoff = backoff < LOOKUP_POLL_MAX_MS ? backoff * 2 : LOOKUP_POLL_MAX_MS;
    }
}

int gb_registry_join(gb_registry_client *c, int role, gb_registry_join_reply *out,
                     gb_error *err)
{
    return gb_registry_join_again(c, role, -1, out, err);
}

int gb_registry_join_again(gb_registry_client *c, int role, int again,
                           gb_registry_join_reply *out, gb_error *err)
{
    memset(out, 0, sizeof *out);
    gb_msg_reg_join q = {role, again};
    int rc = call(c, &c->main, &gb_schema_reg_join, &q, NULL, NULL, c->o.timeout_ms, err);
    if (rc)
        return rc;
    const gb_wire_msg *m = &c->main.reply;
    gb_msg_reg_joined joined;
    if ((rc = gb_wire_schema_read(&gb_schema_reg_joined, &m->hdr, &joined, err)) ||
        (rc = gb_wire_msg_text(m, "metrics", out->metrics, sizeof out->metrics, 0, err)) ||
        (rc = gb_wire_msg_text(m, "run", out->run, sizeof out->run, 0, err)))
        return gb_error_prefix(err, "registry: malformed join reply");
    gb_tensor_view v = gb_wire_msg_tensor(m, gb_wire_msg_find(m, "config"));
    char *text = malloc(v.bytes + 1);
    if (!text)
        return gb_error_set(err, GB_ENOMEM, "registry client: out of memory");
    memcpy(text, v.data, v.bytes);
    text[v.bytes] = '\0';
    out->config = text;
    out->config_len = v.bytes;
    int ik = gb_wire_msg_find(m, "key"), ii = gb_wire_msg_find(m, "identities");
    if (ik >= 0 && ii >= 0) { /* the slot's own credential (curve.h) */
        if ((rc = gb_wire_msg_text(m, "key", out->key, sizeof out->key, 0, err))) {
            gb_registry_join_reply_free(out);
            return gb_error_prefix(err, "registry: malformed join reply");
        }
        gb_tensor_view iv = gb_wire_msg_tensor(m, ii);
        char *ids = malloc(iv.bytes + 1);
        if (!ids) {
            gb_registry_join_reply_free(out);
            return gb_error_set(err, GB_ENOMEM, "registry client: out of memory");
        }
        memcpy(ids, iv.data, iv.bytes);
        ids[iv.bytes] = '\0';
        out->identities = ids;
        out->identities_len = iv.bytes;
    }
    out->index = (int)joined.index;
    out->incarnation = (int)joined.incarnation;
    return 0;
}

void gb_registry_join_reply_free(gb_registry_join_reply *r)
{
    free((char *)r->config);
    r->config = NULL;
    free((char *)r->identities);
    r->identities = NULL;
    explicit_bzero(r->key, sizeof r->key);
}
