/* workers/server/server_dispatch.c: the data server's requests to their handlers: the checks every
 * request passes (its size, kind, operation, table and attributes), the sample requests parked
 * while they wait for the rate limiter, and their retries. */
#include "workers/server/server_internal.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

/* The table a request names (its attribute "table"; absent: the default table), or NULL with
 * the reason in text. */
static const srv_table *table_of(const gb_server *s, const gb_serve_request *q, char *text,
                                 size_t cap)
{
    if (!q->table)
        return &s->tables[0];
    for (int i = 0; i < s->ntables; i++)
        if (strcmp(s->tables[i].name, q->table) == 0)
            return &s->tables[i];
    size_t o = (size_t)snprintf(text, cap, "no table '%.31s'; this server has", q->table);
    for (int i = 0; i < s->ntables && o < cap; i++)
        o += (size_t)snprintf(text + o, cap - o, "%s %s", i ? "," : "", s->tables[i].name);
    return NULL;
}

/* The bytes of a received request's tensor frames together. */
static uint64_t request_bytes(const gb_wire_msg *m)
{
    uint64_t n = 0;
    for (int i = 0; i < m->nframes; i++)
        n += zmq_msg_size((zmq_msg_t *)&m->frames[i]);
    return n;
}

/* Parks w->m (a sample that must wait up to its timeout) and gives w a fresh message. Returns
 * 0, GB_EFULL (MAX_PARKED waiting: the caller answers with an error) or GB_ENOMEM. */
static int park(worker *w, const srv_request *r, double wait_s)
{
    gb_server *s = w->s;
    parked *p = malloc(sizeof *p);
    gb_wire_msg *fresh = malloc(sizeof *fresh);
    if (!p || !fresh) {
        free(p);
        free(fresh);
        return GB_ENOMEM;
    }
    gb_wire_msg_init(fresh);
    p->next = NULL;
    p->m = w->m;
    p->r = *r; /* r->m is w->m, now p->m */
    p->since = gb_now_s();
    p->deadline = p->since + wait_s;
    pthread_mutex_lock(&s->park_mu);
    int full = s->nparked >= MAX_PARKED;
    if (!full) {
        if (s->park_tail)
            s->park_tail->next = p;
        else
            s->park_head = p;
        s->park_tail = p;
        s->nparked++;
    }
    pthread_mutex_unlock(&s->park_mu);
    if (full) {
        free(p);
        free(fresh);
        return GB_EFULL;
    }
    atomic_fetch_add(&s->parked_total, 1);
    w->m = fresh;
    return 0;
}

/* The parked requests taken out to be tried again still count in nparked until they are
 * answered: the stats' parked_now never reads 0 for a request that is still waiting (it did
 * while a retry held the list, and a test read it so). */
void gb_server_retry_parked(worker *w)
{
    gb_server *s = w->s;
    pthread_mutex_lock(&s->park_mu);
    parked *list = s->park_head;
    s->park_head = s->park_tail = NULL;
    pthread_mutex_unlock(&s->park_mu);
    parked *keep = NULL, *last = NULL;
    int kept = 0, answered = 0;
    for (parked *p = list, *nx; p; p = nx) {
        nx = p->next;
        gb_error err = {0};
        int rc = gb_server_op_sample(w, &p->r, p, &err);
        if (rc == GB_SERVE_PARK) {
            p->next = NULL;
            if (last)
                last->next = p;
            else
                keep = p;
            last = p;
            kept++;
            continue;
        }
        if (rc)
            GB_WARN("server: reply to a parked request failed: %s", err.msg);
        gb_wire_msg_release(p->m);
        free(p->m);
        free(p);
        answered++;
    }
    pthread_mutex_lock(&s->park_mu);
    s->nparked -= answered;
    if (keep) { /* back in front of any parked meanwhile: the oldest are tried first */
        last->next = s->park_head;
        s->park_head = keep;
        if (!s->park_tail)
            s->park_tail = last;
    }
    pthread_mutex_unlock(&s->park_mu);
}

void gb_server_drop_parked(gb_server *s)
{
    for (parked *p = s->park_head, *nx; p; p = nx) {
        nx = p->next;
        gb_wire_msg_release(p->m);
        free(p->m);
        free(p);
    }
    s->park_head = s->park_tail = NULL;
    s->nparked = 0;
}

/* A sample request: by mode, offline or items; an item sample that must wait is parked
 * (returns GB_SERVE_PARK, w->m then parked) or answered with why it cannot be. */
static int sample(worker *w, const srv_request *r, gb_error *err)
{
    if (!gb_server_client_may_send(w->s, r->m)) {
        char text[GB_WIRE_TEXT_MAX];
        atomic_fetch_add(&w->s->refused, 1);
        snprintf(text, sizeof text, "sample: refused, this client has %lld replies not yet read "
                 "(server.max_pending_replies): read them before asking for more",
                 (long long)w->s->o.max_pending_replies);
        return gb_server_send_error(w, r->m, GB_EFULL, text);
    }
    int mode = gb_serve_mode_parse(r->q.mode);
    if (mode < 0)
        return gb_server_send_error(w, r->m, GB_EINVAL, "sample: unknown mode (expected item, "
                                    "window, transition, episode or epoch)");
    if (mode != GB_SERVE_MODE_ITEM)
        return gb_server_op_sample_offline(w, r, mode, err);
    int rc = gb_server_op_sample(w, r, NULL, err);
    if (rc != GB_SERVE_PARK)
        return rc;
    int pr = park(w, r, gb_server_sample_wait_s(w->s, &r->q));
    if (pr == 0)
        return GB_SERVE_PARK; /* answered (and counted) by gb_server_retry_parked */
    return gb_server_send_error(w, r->m, pr, pr == GB_EFULL ? "sample: too many requests "
                                                              "waiting for the rate limiter; "
                                                              "try again later"
                                                            : "sample: out of memory");
}

/* The checks every request passes before its handler: read whole, within the size limit, a
 * serve request with an operation ("op") whose table it satisfies, naming a table the server
 * has. Returns 0 with r filled, or the reply's result (an error was answered; -1: a message
 * without a route, not answered). */
static int admit(worker *w, int recv_rc, const gb_error *recv_err, srv_request *r)
{
    gb_server *s = w->s;
    gb_wire_msg *m = w->m;
    uint64_t bytes;
    int64_t op = 0;
    gb_error e = {0};
    char text[GB_WIRE_TEXT_MAX];
    if (recv_rc) {
        atomic_fetch_add(&s->rejected, 1);
        return m->route_len ? gb_server_send_error(w, m, GB_EPROTO, recv_err->msg) : -1;
    }
    if ((bytes = request_bytes(m)) > (uint64_t)s->o.max_request_bytes) {
        atomic_fetch_add(&s->rejected, 1);
        snprintf(text, sizeof text, "request of %llu bytes (its frames together) is over the "
                 "server's limit of %lld bytes (server.max_request_bytes): split it",
                 (unsigned long long)bytes, (long long)s->o.max_request_bytes);
        int rc = gb_server_send_error(w, m, GB_EINVAL, text);
        gb_wire_msg_refuse(m); /* its memory back now (m->route, copied, stays) */
        return rc;
    }
    if (m->hdr.type != GB_MSG_SERVE_REQUEST || gb_wire_attr_int(&m->hdr, "op", &op, &e) ||
        op < GB_SERVE_INFO || op >= GB_SERVE_OP_END) {
        atomic_fetch_add(&s->rejected, 1);
        return gb_server_send_error(w, m, GB_EPROTO, "expected a serve_request with attribute "
                                    "op (1..5)");
    }
    *r = (srv_request){.m = m};
    if (gb_wire_schema_read(gb_serve_request_schemas[op], &m->hdr, &r->q, &e))
        return gb_server_send_error(w, m, GB_EINVAL, e.msg);
    if (!(r->tb = table_of(s, &r->q, text, sizeof text)))
        return gb_server_send_error(w, m, GB_EINVAL, text);
    return 0;
}

void gb_server_handle(worker *w, int recv_rc, const gb_error *recv_err)
{
    gb_error err = {0};
    srv_request r = {0};
    int rc = admit(w, recv_rc, recv_err, &r);
    if (r.tb) {
        switch ((int)r.q.op) {
        case GB_SERVE_INFO: rc = gb_server_op_info(w, &r, &err); break;
        case GB_SERVE_SAMPLE: rc = sample(w, &r, &err); break;
        case GB_SERVE_INSERT: rc = gb_server_op_insert(w, &r, &err); break;
        case GB_SERVE_UPDATE: rc = gb_server_op_update(w, &r, &err); break;
        default: rc = gb_server_op_checkpoint(w, &r, &err); break;
        }
    }
    if (rc && rc != -1 && rc != GB_SERVE_PARK)
        GB_WARN("server: reply failed: %s", err.msg);
}
