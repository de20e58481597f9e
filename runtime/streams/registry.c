/* runtime/streams/registry.c: the endpoint registry's server, a ROUTER served from the launcher's
 * thread: registrations and their TTLs, lookups, joins and run control (see registry.h); the client
 * is in registry_client.c. */
#include "runtime/streams/registry.h"

#include "runtime/base/clock.h"
#include "runtime/streams/curve.h"
#include "runtime/base/log.h"
#include "runtime/streams/runctl.h"
#include "runtime/streams/wire.h"
#include "runtime/streams/wire_messages.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct reg_ent {
    char name[GB_REGISTRY_NAME_MAX];
    char endpoint[GB_REGISTRY_ENDPOINT_MAX];
    int role, index;
    char owner[GB_WIRE_PEER_MAX]; /* the identity that registered it ("" without identities) */
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
    _Atomic uint64_t rejected; /* read by the launcher's thread (summary.json) */
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

uint64_t gb_registry_server_rejected(const gb_registry_server *s)
{
    return atomic_load(&((gb_registry_server *)s)->rejected);
}

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

/* Counts a rejected request and warns about it, rate-limited (gb_log_due): any local process
 * can write to the registry, as often as it likes. */
static void note_rejected(gb_registry_server *s, const gb_wire_msg *m, const char *why)
{
    uint64_t n = atomic_fetch_add(&s->rejected, 1) + 1;
    if (gb_log_due(n))
        GB_WARN("registry: rejected a request from %s %d%s%s (%llu so far): %s",
                gb_role_name(m->hdr.role), m->hdr.index, m->peer[0] ? " sent by " : "", m->peer,
                (unsigned long long)n, why);
}

static int cmp_ent(const void *a, const void *b)
{
    return strcmp(((const reg_ent *)a)->name, ((const reg_ent *)b)->name);
}

/* Fills the reply h with a refusal: status code, text why. */
static void refuse(gb_wire_header *h, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void refuse(gb_wire_header *h, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->text, sizeof h->text, fmt, ap);
    va_end(ap);
    h->status = code;
}

/* With identities (m->peer set, curve.h): may the sender register name, which entry i (-1: none)
 * holds now? A worker registers names under its own "<role>/<index>/" only (a relay, whose
 * names are its host's, under "relay/"), never re-points a live name another identity holds,
 * and holds at most GB_REGISTRY_MAX_PER_IDENTITY names. Returns 0, or a GB_E* code with the
 * refusal said in h. */
static int owner_check(const gb_registry_server *s, const gb_wire_msg *m, const char *name,
                       int i, gb_wire_header *h)
{
    if (!m->peer[0])
        return 0;
    char prefix[GB_WIRE_PEER_MAX + 1];
    int relay = strncmp(m->peer, "relay/", 6) == 0;
    snprintf(prefix, sizeof prefix, "%s/", relay ? "relay" : m->peer);
    if (strncmp(name, prefix, strlen(prefix)) != 0) {
        refuse(h, GB_EINVAL, "register: %s may register names under '%s' only, not '%s'",
               m->peer, prefix, name);
        return GB_EINVAL;
    }
    if (i >= 0 && strcmp(s->ents[i].owner, m->peer) != 0) {
        refuse(h, GB_EINVAL, "register: '%s' is held by %s until it expires", name,
               s->ents[i].owner);
        return GB_EINVAL;
    }
    int held = 0;
    for (int k = 0; i < 0 && k < s->n; k++)
        held += strcmp(s->ents[k].owner, m->peer) == 0;
    if (held >= GB_REGISTRY_MAX_PER_IDENTITY) {
        refuse(h, GB_EFULL, "register: %s holds %d names already (the most one worker may)",
               m->peer, held);
        return GB_EFULL;
    }
    return 0;
}

static void on_register(gb_registry_server *s, const gb_wire_msg *m, gb_wire_header *h,
                        uint64_t now)
{
    gb_msg_reg_register q;
    char name[GB_REGISTRY_NAME_MAX], ep[GB_REGISTRY_ENDPOINT_MAX];
    gb_error e;
    if (gb_wire_schema_read(&gb_schema_reg_register, &m->hdr, &q, &e) ||
        gb_wire_msg_text(m, "name", name, sizeof name, 0, &e) ||
        gb_wire_msg_text(m, "endpoint", ep, sizeof ep, 0, &e)) {
        refuse(h, GB_EPROTO, "register: %s", e.msg);
        return;
    }
    int64_t ttl = q.ttl_ms < s->max_ttl_ms ? q.ttl_ms : s->max_ttl_ms;
    int i = find(s, name);
    if (owner_check(s, m, name, i, h))
        return;
    if (i < 0 && s->n == GB_REGISTRY_MAX_ENTRIES) {
        refuse(h, GB_EFULL, "registry full (%d names)", s->n);
        return;
    }
    if (i < 0) {
        i = s->n++;
        GB_DEBUG("registry: '%s' -> %s (%s %d)", name, ep, gb_role_name(m->hdr.role),
                 m->hdr.index);
    }
    reg_ent *ent = &s->ents[i];
    memcpy(ent->name, name, sizeof name);
    memcpy(ent->endpoint, ep, sizeof ep);
    memcpy(ent->owner, m->peer, sizeof ent->owner);
    ent->role = m->hdr.role;
    ent->index = m->hdr.index;
    ent->expires_ns = now + (uint64_t)ttl * 1000000ULL;
}

static void on_unregister(gb_registry_server *s, const gb_wire_msg *m, gb_wire_header *h)
{
    char name[GB_REGISTRY_NAME_MAX];
    gb_error e;
    if (gb_wire_schema_read(&gb_schema_reg_unregister, &m->hdr, NULL, &e) ||
        gb_wire_msg_text(m, "name", name, sizeof name, 0, &e)) {
        refuse(h, GB_EPROTO, "unregister: %s", e.msg);
        return;
    }
    int i = find(s, name);
    if (i < 0) {
        refuse(h, GB_ENOTFOUND, "unregister: no such name");
        return;
    }
    if (m->peer[0] && strcmp(s->ents[i].owner, m->peer) != 0) {
        refuse(h, GB_EINVAL, "unregister: '%s' is held by %s", name, s->ents[i].owner);
        return;
    }
    remember(s, &s->ents[i]);
    s->ents[i] = s->ents[--s->n];
}

/* Appends e to the reply's lists at *a and *b (NUL after each). */
static void list_add(gb_registry_server *s, const reg_ent *e, size_t *a, size_t *b)
{
    size_t x = strlen(e->name) + 1, y = strlen(e->endpoint) + 1;
    memcpy(s->list_names + *a, e->name, x);
    memcpy(s->list_eps + *b, e->endpoint, y);
    *a += x;
    *b += y;
}

/* Fills the reply's "names" and "endpoints" (payloads pl[0..1]) with the matches. */
static void on_lookup(gb_registry_server *s, const gb_wire_msg *m, gb_wire_header *h,
                      gb_wire_payload *pl)
{
    gb_msg_reg_lookup q;
    char name[GB_REGISTRY_NAME_MAX];
    gb_error e;
    if (gb_wire_schema_read(&gb_schema_reg_lookup, &m->hdr, &q, &e) ||
        gb_wire_msg_text(m, "name", name, sizeof name, q.mode == GB_REG_LOOKUP_PREFIX, &e)) {
        refuse(h, GB_EPROTO, "lookup: %s", e.msg);
        return;
    }
    int prefix = q.mode == GB_REG_LOOKUP_PREFIX;
    qsort(s->ents, (size_t)s->n, sizeof *s->ents, cmp_ent);
    size_t nl = strlen(name), a = 0, b = 0;
    int count = 0;
    for (int i = 0; i < s->n; i++) {
        const reg_ent *ent = &s->ents[i];
        if (prefix ? strncmp(ent->name, name, nl) == 0 : strcmp(ent->name, name) == 0) {
            list_add(s, ent, &a, &b);
            count++;
        }
    }
    for (int i = 0; q.mode == GB_REG_LOOKUP_LAST && !count && i < s->nformer; i++)
        if (strcmp(s->former[i].name, name) == 0) {
            list_add(s, &s->former[i], &a, &b);
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

static void serve(gb_registry_server *s, gb_wire_msg *m, uint64_t now)
{
    gb_wire_header *h = &s->hdr;
    gb_wire_header_init(h, GB_MSG_REG_REPLY, GB_ROLE_LAUNCHER, 0);
    h->seq = m->hdr.seq;
    gb_wire_payload pl[2] = {{0}, {0}};
    switch (m->hdr.type) {
    case GB_MSG_REG_REGISTER: on_register(s, m, h, now); break;
    case GB_MSG_REG_UNREGISTER: on_unregister(s, m, h); break;
    case GB_MSG_REG_LOOKUP: on_lookup(s, m, h, pl); break;
    default:
        refuse(h, GB_EPROTO, "registry: unexpected %s message", gb_msg_type_name(m->hdr.type));
    }
    if (h->status == GB_EPROTO || (m->peer[0] && (h->status == GB_EINVAL ||
                                                  (h->status == GB_EFULL &&
                                                   m->hdr.type == GB_MSG_REG_REGISTER))))
        note_rejected(s, m, h->text); /* malformed, or beyond what the sender's identity may */
    gb_error e;
    if (gb_wire_send(s->sock, m->route, m->route_len, h, pl, ZMQ_DONTWAIT, &e))
        GB_DEBUG("registry: reply not sent: %s", e.msg);
}

/* The reply h giving the slot r: its attributes and the run's strings (payloads pl[0..2]). */
static int grant(gb_wire_header *h, gb_wire_payload *pl, const gb_registry_join_reply *r,
                 gb_error *err)
{
    gb_msg_reg_joined joined = {r->index, r->incarnation};
    int rc = gb_wire_schema_write(&gb_schema_reg_joined, &joined, h, err);
    if (rc)
        return rc;
    const char *strs[5] = {r->config, r->metrics, r->run, r->key, r->identities};
    const char *names[5] = {"config", "metrics", "run", "key", "identities"};
    int n = r->key[0] && r->identities ? 5 : 3; /* the slot's credential, in a run with them */
    for (int i = 0; i < n; i++) {
        int64_t len = (int64_t)(i == 0 ? r->config_len : i == 4 ? r->identities_len
                                                                : strlen(strs[i]));
        gb_wire_set_tensor(&h->tensors[i], names[i], GB_DTYPE_UINT8, 1, &len, NULL);
        pl[i].data = strs[i];
    }
    h->ntensors = n;
    return 0;
}

/* A worker asks to join the run (gearbox join): the launcher's callback gives it a slot; the
 * reply carries the slot, the metrics endpoint, the run's identity and its config. */
static void serve_join(gb_registry_server *s, const gb_wire_msg *m)
{
    gb_wire_header *h = &s->hdr;
    gb_wire_header_init(h, GB_MSG_REG_REPLY, GB_ROLE_LAUNCHER, 0);
    h->seq = m->hdr.seq;
    gb_wire_payload pl[5] = {{0}, {0}, {0}, {0}, {0}};
    gb_registry_join_reply r = {0};
    gb_msg_reg_join q;
    gb_error e;
    int rc;
    if (gb_wire_schema_read(&gb_schema_reg_join, &m->hdr, &q, &e)) {
        refuse(h, GB_EPROTO, "join: %s", e.msg);
        note_rejected(s, m, h->text);
    } else if (!s->join) {
        refuse(h, GB_EUNSUPPORTED, "this run takes no joining workers");
    } else if ((h->status = s->join(s->join_arg, (int)q.role, (int)q.again,
                                    q.again < 0 || !m->peer[0] ||
                                        gb_wire_peer_is(m, (int)q.role, (int)q.again),
                                    &r, h->text, sizeof h->text))) {
        GB_INFO("registry: a %s was refused a slot: %s", gb_role_name((int)q.role), h->text);
    } else if ((rc = grant(h, pl, &r, &e))) {
        gb_wire_header_init(h, GB_MSG_REG_REPLY, GB_ROLE_LAUNCHER, 0);
        h->seq = m->hdr.seq;
        refuse(h, rc, "join: %s", e.msg);
        GB_ERROR("registry: join reply: %s", e.msg);
    } else {
        GB_INFO("registry: %s %d joined the run (incarnation %d)", gb_role_name((int)q.role),
                r.index, r.incarnation);
    }
    if (gb_wire_send(s->sock, m->route, m->route_len, h, pl, ZMQ_DONTWAIT, &e))
        GB_DEBUG("registry: join reply not sent: %s", e.msg);
}

int gb_registry_server_poll(gb_registry_server *s, int timeout_ms, gb_error *err)
{
    gb_error local;
    if (!err)
        err = &local;
    zmq_pollitem_t it[2] = {{s->sock, 0, ZMQ_POLLIN, 0},
                            {NULL, gb_runctl_server_wake_fd(s->runctl), ZMQ_POLLIN, 0}};
    if (zmq_poll(it, s->runctl ? 2 : 1, timeout_ms) < 0)
        return gb_wire_zmq_error(err, "registry: zmq_poll");
    if (s->runctl && (it[1].revents & ZMQ_POLLIN))
        gb_runctl_server_woken(s->runctl); /* the tick below answers what moved */
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
        else if ((rc = gb_runctl_server_handle(s->runctl, s->sock, &s->msg)) != 0)
            note_rejected(s, &s->msg, rc == GB_EINVAL ? "a run-control watch as another worker"
                                                      : "a malformed run-control watch");
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
