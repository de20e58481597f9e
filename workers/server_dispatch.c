/* workers/server_dispatch.c: the data server's requests to their handlers: the checks every
 * request passes (its size, kind, operation, table and attributes), the sample requests parked
 * while they wait for the rate limiter, and their retries. */
#include "workers/server_internal.h"

#include "runtime/clock.h"
#include "runtime/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

/* Request attributes each operation accepts (a misspelt one is an error, not ignored). */
static int attr_allowed(int op, const char *key)
{
    if (strcmp(key, "table") == 0)
        return 1;
    return op == GB_SERVE_SAMPLE &&
           (strcmp(key, "mode") == 0 || strcmp(key, "len") == 0 || strcmp(key, "cursor") == 0 ||
            strcmp(key, "reset") == 0);
}

/* The table a request names (attribute "table"; absent: the default table), or NULL with the
 * reason in text (an unknown table or attribute). */
static const srv_table *table_of(const gb_server *s, const gb_wire_msg *m, char *text,
                                 size_t cap)
{
    int op = (int)m->hdr.meta[0];
    for (int a = 0; a < m->hdr.nattrs; a++)
        if (!attr_allowed(op, m->hdr.attrs[a].key)) {
            snprintf(text, cap, "unknown request attribute '%s' (%s)", m->hdr.attrs[a].key,
                     op == GB_SERVE_SAMPLE ? "a sample takes table, mode, len, cursor, reset"
                                           : "this operation takes only table");
            return NULL;
        }
    const gb_wire_attr *at = gb_wire_attr_find(&m->hdr, "table");
    if (!at)
        return &s->tables[0];
    const char *name = gb_wire_attr_str(&m->hdr, "table");
    for (int i = 0; name && i < s->ntables; i++)
        if (strcmp(s->tables[i].name, name) == 0)
            return &s->tables[i];
    size_t o = (size_t)snprintf(text, cap, "no table '%.31s'; this server has", name ? name : "?");
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
static int park(worker *w, double wait_s)
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

void gb_server_retry_parked(worker *w)
{
    gb_server *s = w->s;
    pthread_mutex_lock(&s->park_mu);
    parked *list = s->park_head;
    s->park_head = s->park_tail = NULL;
    s->nparked = 0;
    pthread_mutex_unlock(&s->park_mu);
    parked *keep = NULL, *last = NULL;
    int kept = 0;
    for (parked *p = list, *nx; p; p = nx) {
        nx = p->next;
        gb_error err = {0};
        char text[GB_WIRE_TEXT_MAX];
        const srv_table *tb = table_of(s, p->m, text, sizeof text); /* found when parked */
        int rc = gb_server_op_sample(w, tb ? tb : &s->tables[0], p->m, p, &err);
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
    }
    if (!keep)
        return;
    /* back in front of any parked meanwhile: the oldest are tried first */
    pthread_mutex_lock(&s->park_mu);
    last->next = s->park_head;
    s->park_head = keep;
    if (!s->park_tail)
        s->park_tail = last;
    s->nparked += kept;
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
static int sample(worker *w, const srv_table *tb, const gb_wire_msg *m, gb_error *err)
{
    char text[GB_WIRE_TEXT_MAX];
    const gb_wire_header *q = &m->hdr;
    if (q->nmeta < 2)
        return gb_server_send_error(w, m, GB_EPROTO, "sample: meta must hold [op, batch, ...]");
    const char *mode_name = gb_wire_attr_str(q, "mode");
    int mode = gb_serve_mode_parse(mode_name);
    if (mode < 0 || (!mode_name && gb_wire_attr_find(q, "mode"))) {
        snprintf(text, sizeof text, "sample: unknown mode (expected the string item, window, "
                 "transition, episode or epoch)");
        return gb_server_send_error(w, m, GB_EINVAL, text);
    }
    if (mode != GB_SERVE_MODE_ITEM)
        return gb_server_op_sample_offline(w, tb, m, mode, err);
    int rc = gb_server_op_sample(w, tb, m, NULL, err);
    if (rc != GB_SERVE_PARK)
        return rc;
    int pr = park(w, gb_server_sample_wait_s(w->s, m));
    if (pr == 0)
        return GB_SERVE_PARK; /* answered (and counted) by gb_server_retry_parked */
    return gb_server_send_error(w, m, pr, pr == GB_EFULL ? "sample: too many requests waiting "
                                                           "for the rate limiter; try again "
                                                           "later"
                                                         : "sample: out of memory");
}

/* The checks every request passes before its handler. Returns 0 with *tb set, or the reply's
 * result (an error was answered; -1: a message without a route, not answered). */
static int admit(worker *w, int recv_rc, const gb_error *recv_err, const srv_table **tb)
{
    gb_server *s = w->s;
    gb_wire_msg *m = w->m;
    uint64_t bytes;
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
        return gb_server_send_error(w, m, GB_EINVAL, text);
    }
    if (m->hdr.type != GB_MSG_SERVE_REQUEST || m->hdr.nmeta < 1 ||
        m->hdr.meta[0] < GB_SERVE_INFO || m->hdr.meta[0] >= GB_SERVE_OP_END) {
        atomic_fetch_add(&s->rejected, 1);
        return gb_server_send_error(w, m, GB_EPROTO, "expected a serve_request with meta[0] = "
                                    "op (1..5)");
    }
    if (!(*tb = table_of(s, m, text, sizeof text)))
        return gb_server_send_error(w, m, GB_EINVAL, text);
    return 0;
}

void gb_server_handle(worker *w, int recv_rc, const gb_error *recv_err)
{
    gb_wire_msg *m = w->m;
    gb_error err = {0};
    const srv_table *tb = NULL;
    int rc = admit(w, recv_rc, recv_err, &tb);
    if (tb) {
        switch ((int)m->hdr.meta[0]) {
        case GB_SERVE_INFO: rc = gb_server_op_info(w, tb, m, &err); break;
        case GB_SERVE_SAMPLE: rc = sample(w, tb, m, &err); break;
        case GB_SERVE_INSERT: rc = gb_server_op_insert(w, tb, m, &err); break;
        case GB_SERVE_UPDATE: rc = gb_server_op_update(w, tb, m, &err); break;
        default: rc = gb_server_op_checkpoint(w, tb, m, &err); break;
        }
    }
    if (rc && rc != -1 && rc != GB_SERVE_PARK)
        GB_WARN("server: reply failed: %s", err.msg);
}
