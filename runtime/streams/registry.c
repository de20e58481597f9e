/* runtime/streams/registry.c: endpoint registry server (ROUTER) and client with heartbeat thread (see
 * registry.h). */
#include "runtime/streams/registry.h"

#include "runtime/base/clock.h"
#include "runtime/streams/curve.h"
#include "runtime/streams/endpoint.h"
#include "runtime/base/log.h"
#include "runtime/streams/runctl.h"
#include "runtime/streams/wire.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Lookups of names not registered yet are repeated, 5 ms apart at first and at most this apart:
 * workers wait on each other this way at start-up (an actor on the policy workers loading
 * libtorch), so the poll interval adds straight to the time until the run acts (a cap of 200 ms
 * kept CartPole's actors waiting up to 0.2 s after the policy worker was ready); a lookup is one
 * small request to the registry. */
#define LOOKUP_POLL_MAX_MS 25

/* ---- server ---------------------------------------------------------------------------------- */

typedef struct reg_ent {
    char name[GB_REGISTRY_NAME_MAX];
    char endpoint[GB_REGISTRY_ENDPOINT_MAX];
    int role, index;
    uint64_t expires_ns;
} reg_ent;

struct gb_registry_server {
    void *sock;
    char endpoint[256];
    int max_ttl_ms;
    gb_runctl_server *runctl; /* the launcher's, or NULL */
    gb_registry_join_fn join; /* the launcher's answer to gearbox join, or NULL */
    void *join_arg;
    reg_ent *ents;
    int n;
    reg_ent *former; /* the last endpoint of every name that expired or was unregistered */
    int nformer;
    uint64_t rejected;
    gb_wire_msg msg;
    gb_wire_header hdr;
    char *list_names, *list_eps; /* reply scratch */
};

int gb_registry_server_open(gb_registry_server **out, void *zctx,
                            const gb_registry_server_opts *o, gb_error *err)
{
    *out = NULL;
    if (!o->endpoint || o->max_ttl_ms <= 0)
        return gb_error_set(err, GB_EINVAL, "registry: need an endpoint and max_ttl_ms > 0");
    gb_registry_server *s = calloc(1, sizeof *s);
    int rc;
    if (!s)
        return gb_error_set(err, GB_ENOMEM, "registry: out of memory");
    s->max_ttl_ms = o->max_ttl_ms;
    s->runctl = o->runctl;
    s->join = o->join;
    s->join_arg = o->join_arg;
    gb_wire_msg_init(&s->msg);
    s->ents = calloc(GB_REGISTRY_MAX_ENTRIES, sizeof *s->ents);
    s->former = calloc(GB_REGISTRY_MAX_ENTRIES, sizeof *s->former);
    s->list_names = malloc((size_t)GB_REGISTRY_MAX_ENTRIES * GB_REGISTRY_NAME_MAX);
    s->list_eps = malloc((size_t)GB_REGISTRY_MAX_ENTRIES * GB_REGISTRY_ENDPOINT_MAX);
    if (!s->ents || !s->former || !s->list_names || !s->list_eps) {
        rc = gb_error_set(err, GB_ENOMEM, "registry: out of memory");
        goto fail;
    }
    s->sock = zmq_socket(zctx, ZMQ_ROUTER);
    if (!s->sock) {
        rc = gb_wire_zmq_error(err, "registry: zmq_socket(ROUTER)");
        goto fail;
    }
    int linger = 0;
    if (zmq_setsockopt(s->sock, ZMQ_LINGER, &linger, sizeof linger)) {
        rc = gb_wire_zmq_error(err, "registry: ZMQ_LINGER");
        goto fail;
    }
    /* requests hold a name and an endpoint (run control's watches hold none): a peer sending
     * a larger frame is disconnected before it is read */
    if ((rc = gb_wire_set_max_frame(s->sock, GB_REGISTRY_ENDPOINT_MAX, err)))
        goto fail;
    if (gb_curve_bind(zctx, s->sock, o->endpoint) != 0) {
        rc = gb_wire_zmq_error(err, "registry: bind");
        gb_error_prefix(err, "%s", o->endpoint);
        goto fail;
    }
    size_t len = sizeof s->endpoint;
    if (zmq_getsockopt(s->sock, ZMQ_LAST_ENDPOINT, s->endpoint, &len)) {
        rc = gb_wire_zmq_error(err, "registry: ZMQ_LAST_ENDPOINT");
        goto fail;
    }
    *out = s;
    return 0;
fail:
    gb_registry_server_close(s);
    return rc;
}

void gb_registry_server_close(gb_registry_server *s)
{
    if (!s)
        return;
    gb_wire_msg_release(&s->msg);
    if (s->sock)
        zmq_close(s->sock);
    free(s->ents);
    free(s->former);
    free(s->list_names);
    free(s->list_eps);
    free(s);
}

const char *gb_registry_server_endpoint(const gb_registry_server *s) { return s->endpoint; }

int gb_registry_server_count(const gb_registry_server *s) { return s->n; }

uint64_t gb_registry_server_rejected(const gb_registry_server *s) { return s->rejected; }

/* Keeps the endpoint of a name that goes away, so that the next process of the same worker
 * can bind where its peers still connect (gb_registry_lookup_last). One entry per name; when
 * the table is full the oldest-kept entry makes room. */
static void remember(gb_registry_server *s, const reg_ent *e)
{
    int i = 0;
    while (i < s->nformer && strcmp(s->former[i].name, e->name) != 0)
        i++;
    if (i == s->nformer) {
        if (s->nformer == GB_REGISTRY_MAX_ENTRIES) {
            memmove(s->former, s->former + 1, (size_t)(s->nformer - 1) * sizeof *s->former);
            i = s->nformer - 1;
        } else {
            s->nformer++;
        }
    }
    s->former[i] = *e;
}

static void expire(gb_registry_server *s, uint64_t now)
{
    for (int i = 0; i < s->n;) {
        if (s->ents[i].expires_ns <= now) {
            GB_INFO("registry: '%s' (%s %d) expired: no heartbeat", s->ents[i].name,
                    gb_role_name(s->ents[i].role), s->ents[i].index);
            remember(s, &s->ents[i]);
            s->ents[i] = s->ents[--s->n];
        } else {
            i++;
        }
    }
}

static int find(const gb_registry_server *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->ents[i].name, name) == 0)
            return i;
    return -1;
}

/* Copies the uint8 tensor called name into out as a string (1..cap-1 bytes, no control
 * characters; bytes above 0x7e pass, so UTF-8 paths in ipc:// endpoints work). */
static int get_str(const gb_wire_msg *m, const char *tname, char *out, size_t cap, int allow_empty)
{
    int t = gb_wire_msg_find(m, tname);
    if (t < 0)
        return -1;
    gb_tensor_view v = gb_wire_msg_tensor(m, t);
    if (v.desc->dtype != GB_DTYPE_UINT8 || v.desc->rank != 1 || v.bytes >= cap ||
        (!allow_empty && v.bytes == 0))
        return -1;
    const unsigned char *p = v.data;
    for (size_t i = 0; i < v.bytes; i++)
        if (p[i] < 0x20 || p[i] == 0x7f)
            return -1;
    memcpy(out, p, v.bytes);
    out[v.bytes] = '\0';
    return 0;
}

/* Counts a rejected request and warns about it, rate-limited (gb_log_due): any local process
 * can write to the registry, as often as it likes. */
static void note_rejected(gb_registry_server *s, const gb_wire_msg *m, const char *why)
{
    s->rejected++;
    if (gb_log_due(s->rejected))
        GB_WARN("registry: rejected a request from %s %d (%llu so far): %s",
                gb_role_name(m->hdr.role), m->hdr.index, (unsigned long long)s->rejected, why);
}

static int cmp_ent(const void *a, const void *b)
{
    return strcmp(((const reg_ent *)a)->name, ((const reg_ent *)b)->name);
}

static void serve(gb_registry_server *s, gb_wire_msg *m, uint64_t now)
{
    gb_wire_header *h = &s->hdr;
    gb_wire_header_init(h, GB_MSG_REG_REPLY, GB_ROLE_LAUNCHER, 0);
    h->seq = m->hdr.seq;
    gb_wire_payload pl[2] = {{0}, {0}};
    char name[GB_REGISTRY_NAME_MAX], ep[GB_REGISTRY_ENDPOINT_MAX];
    int type = m->hdr.type;
    if (type == GB_MSG_REG_REGISTER) {
        int64_t ttl = m->hdr.nmeta > 0 ? m->hdr.meta[0] : s->max_ttl_ms;
        if (get_str(m, "name", name, sizeof name, 0) || get_str(m, "endpoint", ep, sizeof ep, 0) ||
            ttl <= 0) {
            h->status = GB_EPROTO;
            snprintf(h->text, sizeof h->text, "register: need 'name' and 'endpoint' (no control "
                     "characters, < %d and < %d bytes) and a ttl > 0", GB_REGISTRY_NAME_MAX,
                     GB_REGISTRY_ENDPOINT_MAX);
        } else {
            if (ttl > s->max_ttl_ms)
                ttl = s->max_ttl_ms;
            int i = find(s, name);
            if (i < 0 && s->n == GB_REGISTRY_MAX_ENTRIES) {
                h->status = GB_EFULL;
                snprintf(h->text, sizeof h->text, "registry full (%d names)", s->n);
            } else {
                if (i < 0) {
                    i = s->n++;
                    GB_DEBUG("registry: '%s' -> %s (%s %d)", name, ep,
                             gb_role_name(m->hdr.role), m->hdr.index);
                }
                reg_ent *e = &s->ents[i];
                memcpy(e->name, name, sizeof name);
                memcpy(e->endpoint, ep, sizeof ep);
                e->role = m->hdr.role;
                e->index = m->hdr.index;
                e->expires_ns = now + (uint64_t)ttl * 1000000ULL;
            }
        }
    } else if (type == GB_MSG_REG_UNREGISTER) {
        int i = get_str(m, "name", name, sizeof name, 0) ? -1 : find(s, name);
        if (i < 0) {
            h->status = GB_ENOTFOUND;
            snprintf(h->text, sizeof h->text, "unregister: no such name");
        } else {
            remember(s, &s->ents[i]);
            s->ents[i] = s->ents[--s->n];
        }
    } else if (type == GB_MSG_REG_LOOKUP) {
        /* meta[0]: 0 the name, 1 every name under a prefix, 2 the name or, when it is not
         * registered now, its last endpoint */
        int prefix = m->hdr.nmeta > 0 && m->hdr.meta[0] == 1;
        int last = m->hdr.nmeta > 0 && m->hdr.meta[0] == 2;
        if (get_str(m, "name", name, sizeof name, prefix)) {
            h->status = GB_EPROTO;
            snprintf(h->text, sizeof h->text, "lookup: need a 'name'");
        } else {
            qsort(s->ents, (size_t)s->n, sizeof *s->ents, cmp_ent);
            size_t nl = strlen(name), a = 0, b = 0;
            int count = 0;
            for (int i = 0; i < s->n; i++) {
                const reg_ent *e = &s->ents[i];
                if (prefix ? strncmp(e->name, name, nl) != 0 : strcmp(e->name, name) != 0)
                    continue;
                size_t x = strlen(e->name) + 1, y = strlen(e->endpoint) + 1;
                memcpy(s->list_names + a, e->name, x);
                memcpy(s->list_eps + b, e->endpoint, y);
                a += x;
                b += y;
                count++;
            }
            for (int i = 0; last && !count && i < s->nformer; i++) {
                const reg_ent *e = &s->former[i];
                if (strcmp(e->name, name) != 0)
                    continue;
                size_t x = strlen(e->name) + 1, y = strlen(e->endpoint) + 1;
                memcpy(s->list_names, e->name, x);
                memcpy(s->list_eps, e->endpoint, y);
                a = x;
                b = y;
                count = 1;
            }
            if (!count && !prefix)
                h->status = GB_ENOTFOUND;
            h->ntensors = 2;
            int64_t sa = (int64_t)a, sb = (int64_t)b;
            gb_wire_set_tensor(&h->tensors[0], "names", GB_DTYPE_UINT8, 1, &sa, NULL);
            gb_wire_set_tensor(&h->tensors[1], "endpoints", GB_DTYPE_UINT8, 1, &sb, NULL);
            pl[0].data = s->list_names;
            pl[1].data = s->list_eps;
        }
    } else {
        h->status = GB_EPROTO;
        snprintf(h->text, sizeof h->text, "registry: unexpected %s message",
                 gb_msg_type_name(type));
    }
    if (h->status == GB_EPROTO)
        note_rejected(s, m, h->text);
    gb_error e;
    if (gb_wire_send(s->sock, m->route, m->route_len, h, pl, ZMQ_DONTWAIT, &e))
        GB_DEBUG("registry: reply not sent: %s", e.msg);
}

/* A worker asks to join the run (gearbox join): the launcher's callback gives it a slot; the
 * reply carries the slot, the metrics endpoint, the run's identity and its config. */
static void serve_join(gb_registry_server *s, const gb_wire_msg *m)
{
    gb_wire_header *h = &s->hdr;
    gb_wire_header_init(h, GB_MSG_REG_REPLY, GB_ROLE_LAUNCHER, 0);
    h->seq = m->hdr.seq;
    gb_wire_payload pl[3] = {{0}, {0}, {0}};
    gb_registry_join_reply r = {0};
    int role = m->hdr.nmeta > 0 ? (int)m->hdr.meta[0] : GB_ROLE_NONE;
    if (!s->join) {
        h->status = GB_EUNSUPPORTED;
        snprintf(h->text, sizeof h->text, "this run takes no joining workers");
    } else if ((h->status = s->join(s->join_arg, role, &r, h->text, sizeof h->text)) == 0) {
        GB_INFO("registry: %s %d joined the run (incarnation %d)", gb_role_name(role), r.index,
                r.incarnation);
        h->nmeta = 2;
        h->meta[0] = r.index;
        h->meta[1] = r.incarnation;
        const char *strs[3] = {r.config, r.metrics, r.run};
        const char *names[3] = {"config", "metrics", "run"};
        for (int i = 0; i < 3; i++) {
            int64_t n = (int64_t)(i == 0 ? r.config_len : strlen(strs[i]));
            gb_wire_set_tensor(&h->tensors[i], names[i], GB_DTYPE_UINT8, 1, &n, NULL);
            pl[i].data = strs[i];
        }
        h->ntensors = 3;
    } else {
        GB_INFO("registry: a %s was refused a slot: %s", gb_role_name(role), h->text);
    }
    gb_error e;
    if (gb_wire_send(s->sock, m->route, m->route_len, h, pl, ZMQ_DONTWAIT, &e))
        GB_DEBUG("registry: join reply not sent: %s", e.msg);
}

int gb_registry_server_poll(gb_registry_server *s, int timeout_ms, gb_error *err)
{
    gb_error local;
    if (!err)
        err = &local;
    zmq_pollitem_t it = {s->sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, timeout_ms) < 0)
        return gb_wire_zmq_error(err, "registry: zmq_poll");
    for (;;) {
        expire(s, gb_now_ns());
        int rc = gb_wire_recv(s->sock, &s->msg, 1, ZMQ_DONTWAIT, err);
        if (rc == GB_EAGAIN)
            break;
        if (rc == GB_EPROTO) {
            note_rejected(s, &s->msg, err->msg);
            continue;
        }
        if (rc)
            return rc;
        if (s->msg.hdr.type == GB_MSG_REG_JOIN)
            serve_join(s, &s->msg);
        else if (s->msg.hdr.type != GB_MSG_RUN_WATCH || !s->runctl)
            serve(s, &s->msg, gb_now_ns());
        else if (gb_runctl_server_handle(s->runctl, s->sock, &s->msg) != 0)
            note_rejected(s, &s->msg, "a malformed run-control watch");
        gb_wire_msg_release(&s->msg);
    }
    if (s->runctl)
        gb_runctl_server_tick(s->runctl, s->sock);
    return 0;
}

int gb_registry_server_run(gb_registry_server *s, const atomic_int *stop, gb_error *err)
{
    while (!atomic_load(stop)) {
        int rc = gb_registry_server_poll(s, s->runctl ? GB_RUNCTL_POLL_MS : 50, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- client ---------------------------------------------------------------------------------- */

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

/* One request/reply with the request's tensors as strings; the reply stays in c->reply. */
static int call(const gb_registry_client *rc_, reg_conn *c, int type, const char *name,
                const char *endpoint, int64_t meta0, int timeout_ms, gb_error *err)
{
    gb_wire_header *h = &c->hdr;
    gb_wire_header_init(h, type, rc_->o.role, rc_->o.index);
    h->seq = ++c->seq;
    h->nmeta = 1;
    h->meta[0] = meta0;
    gb_wire_payload pl[2] = {{0}, {0}};
    const char *strs[2] = {name, endpoint};
    const char *names[2] = {"name", "endpoint"};
    for (int i = 0; i < 2 && strs[i]; i++) {
        int64_t n = (int64_t)strlen(strs[i]);
        gb_wire_set_tensor(&h->tensors[i], names[i], GB_DTYPE_UINT8, 1, &n, NULL);
        pl[i].data = strs[i];
        h->ntensors = i + 1;
    }
    int rc = gb_wire_send(c->sock, NULL, 0, h, pl, ZMQ_DONTWAIT, err);
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
            gb_sleep_ms(next - gb_now_ns() > 20000000ULL ? 20 : 1);
            continue;
        }
        next += (uint64_t)c->o.heartbeat_ms * 1000000ULL;
        /* the lock is held for the whole round, so an unregister cannot be undone by a
         * heartbeat that read the name just before it */
        pthread_mutex_lock(&c->lock);
        for (int i = 0; i < c->nmine && !atomic_load(&c->stop); i++)
            if (call(c, &conn, GB_MSG_REG_REGISTER, c->mine[i].name, c->mine[i].endpoint,
                     c->o.ttl_ms, c->o.heartbeat_ms, &err))
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
        atomic_store(&c->stop, 1);
        pthread_join(c->thread, NULL);
    }
    gb_error err;
    for (int i = 0; i < c->nmine && c->main.sock; i++)
        call(c, &c->main, GB_MSG_REG_UNREGISTER, c->mine[i].name, NULL, 0,
             c->o.timeout_ms < 500 ? c->o.timeout_ms : 500, &err);
    conn_close(&c->main);
    pthread_mutex_destroy(&c->lock);
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
    rc = call(c, &c->main, GB_MSG_REG_REGISTER, name, endpoint, c->o.ttl_ms, c->o.timeout_ms,
              err);
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
    int rc = call(c, &c->main, GB_MSG_REG_UNREGISTER, name, NULL, 0, c->o.timeout_ms, err);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* Parses the reply's NUL-separated lists into a malloc'd array. */
static int parse_list(const gb_wire_msg *m, gb_registry_entry **out, int *n, gb_error *err)
{
    int tn = gb_wire_msg_find(m, "names"), te = gb_wire_msg_find(m, "endpoints");
    *out = NULL;
    *n = 0;
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
        int rc = call(c, &c->main, GB_MSG_REG_LOOKUP, prefix, NULL, 1,
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

/* One lookup of name (mode 0: registered now; 2: or its last endpoint) within timeout_ms. */
static int lookup_once(gb_registry_client *c, const char *name, int mode, char *endpoint,
                       size_t cap, int timeout_ms, gb_error *err)
{
    int rc = call(c, &c->main, GB_MSG_REG_LOOKUP, name, NULL, mode, timeout_ms, err);
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
    return lookup_once(c, name, 2, endpoint, cap, c->o.timeout_ms, err);
}

int gb_registry_lookup(gb_registry_client *c, const char *name, char *endpoint, size_t cap,
                       int timeout_ms, gb_error *err)
{
    uint64_t end = gb_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ULL;
    double backoff = 5;
    for (;;) {
        uint64_t now = gb_now_ns();
        int left = now < end ? (int)((end - now + 999999) / 1000000) : 1;
        int rc = lookup_once(c, name, 0, endpoint, cap,
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
    memset(out, 0, sizeof *out);
    int rc = call(c, &c->main, GB_MSG_REG_JOIN, NULL, NULL, role, c->o.timeout_ms, err);
    if (rc)
        return rc;
    const gb_wire_msg *m = &c->main.reply;
    int tc = gb_wire_msg_find(m, "config");
    if (m->hdr.nmeta < 2 || tc < 0 || get_str(m, "metrics", out->metrics, sizeof out->metrics, 0) ||
        get_str(m, "run", out->run, sizeof out->run, 0))
        return gb_error_set(err, GB_EPROTO, "registry: malformed join reply");
    gb_tensor_view v = gb_wire_msg_tensor(m, tc);
    char *text = malloc(v.bytes + 1);
    if (!text)
        return gb_error_set(err, GB_ENOMEM, "registry client: out of memory");
    memcpy(text, v.data, v.bytes);
    text[v.bytes] = '\0';
    out->config = text;
    out->config_len = v.bytes;
    out->index = (int)m->hdr.meta[0];
    out->incarnation = (int)m->hdr.meta[1];
    return 0;
}

void gb_registry_join_reply_free(gb_registry_join_reply *r)
{
    free((char *)r->config);
    r->config = NULL;
}
