/* replay/remote.c: writers in another local process. The writer maps the replay's segment
 * read-write, writes items in place like a local ingest thread, and sends the index-manager
 * operations (allocate, commit, abort) through the segment's writer port to the owner, whose port
 * thread runs them with the replay's own calls, blocking and timeouts included. Data never goes
 * through the port: only indices and item metadata. One request is in flight at a time; several
 * writer processes take turns. */
#include "replay/internal.h"
#include "runtime/base/shm.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Static_assert(sizeof(gb_replay_shm_header) <= GB_REPLAY_PORT_OFFSET, "header overlaps the port");
_Static_assert(GB_REPLAY_PORT_OFFSET + sizeof(gb_replay_port) <= GB_REPLAY_SHM_HEADER,
               "port overlaps the status arrays");

int gb_replay_port_init(gb_replay_port *p, gb_error *err)
{
    memset(p, 0, sizeof *p);
    pthread_mutexattr_t ma;
    pthread_condattr_t ca;
    int ok = pthread_mutexattr_init(&ma) == 0;
    ok = ok && pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED) == 0;
    /* A writer that dies holding the lock must not wedge the port. */
    ok = ok && pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST) == 0;
    int c1 = ok && pthread_mutex_init(&p->client, &ma) == 0;
    int c2 = c1 && pthread_mutex_init(&p->mu, &ma) == 0;
    pthread_mutexattr_destroy(&ma);
    ok = c2 && pthread_condattr_init(&ca) == 0;
    ok = ok && pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED) == 0 &&
         pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0;
    int c3 = ok && pthread_cond_init(&p->cv_req, &ca) == 0;
    int c4 = c3 && pthread_cond_init(&p->cv_rep, &ca) == 0;
    if (ok)
        pthread_condattr_destroy(&ca);
    if (c4)
        return 0;
    if (c3)
        pthread_cond_destroy(&p->cv_req);
    if (c2)
        pthread_mutex_destroy(&p->mu);
    if (c1)
        pthread_mutex_destroy(&p->client);
    return gb_error_set(err, GB_ESYS, "replay: cannot initialise the writer port's process-shared "
                        "locks");
}

void gb_replay_port_destroy(gb_replay_port *p)
{
    pthread_cond_destroy(&p->cv_req);
    pthread_cond_destroy(&p->cv_rep);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->client);
}

/* Locks a robust mutex; a holder that died leaves it consistent again (the port's fields are
 * rewritten by every request, so nothing needs repair). */
static int lock_robust(pthread_mutex_t *m)
{
    int rc = pthread_mutex_lock(m);
    if (rc == EOWNERDEAD)
        rc = pthread_mutex_consistent(m);
    return rc;
}

static void *port_main(void *arg)
{
    gb_replay *r = arg;
    gb_replay_port *p = r->port;
    lock_robust(&p->mu);
    uint64_t seen = r->port_seen; /* not p->req_seq now: a writer may have asked already */
    for (;;) {
        while (p->served && p->req_seq == seen) {
            int rc = pthread_cond_wait(&p->cv_req, &p->mu);
            if (rc == EOWNERDEAD)
                pthread_mutex_consistent(&p->mu);
        }
        if (!p->served)
            break;
        seen = p->req_seq;
        int op = p->op;
        int64_t n = p->n;
        double timeout = p->timeout_s;
        pthread_mutex_unlock(&p->mu);
        /* The request's arrays stay put: the writer holds the client lock until it has the
         * reply, so no other request can overwrite them. */
        gb_error err = {0};
        int rc;
        if (n < 1 || n > GB_REPLAY_PORT_MAX)
            rc = gb_error_set(&err, GB_EINVAL, "replay port: %lld items per request (1 to %d)",
                              (long long)n, GB_REPLAY_PORT_MAX);
        else if (op == GB_PORT_ALLOCATE)
            rc = gb_replay_allocate(r, n, p->idx, timeout, &err);
        else if (op == GB_PORT_COMMIT)
            rc = gb_replay_commit(r, n, p->idx, p->priority, p->length, p->version, &err);
        else if (op == GB_PORT_ABORT)
            rc = gb_replay_abort(r, n, p->idx, &err);
        else
            rc = gb_error_set(&err, GB_EINVAL, "replay port: unknown request %d", op);
        lock_robust(&p->mu);
        p->rc = rc;
        size_t len = rc ? strnlen(err.msg, sizeof p->msg - 1) : 0; /* cut to the port's room */
        memcpy(p->msg, err.msg, len);
        p->msg[len] = '\0';
        p->rep_seq = seen;
        pthread_cond_broadcast(&p->cv_rep);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int gb_replay_serve_writers(gb_replay *r, gb_error *err)
{
    if (r->port_running)
        return 0;
    gb_replay_port *p = r->port;
    lock_robust(&p->mu);
    p->served = 1;
    r->port_seen = p->req_seq;
    pthread_mutex_unlock(&p->mu);
    if (pthread_create(&r->port_thread, NULL, port_main, r) != 0) {
        lock_robust(&p->mu);
        p->served = 0;
        pthread_mutex_unlock(&p->mu);
        return gb_error_set(err, GB_ESYS, "replay: cannot start the writer port thread");
    }
    r->port_running = 1;
    return 0;
}

void gb_replay_stop_writers(gb_replay *r)
{
    if (!r->port_running)
        return;
    gb_replay_port *p = r->port;
    lock_robust(&p->mu);
    p->served = 0;
    pthread_cond_broadcast(&p->cv_req);
    pthread_cond_broadcast(&p->cv_rep);
    pthread_mutex_unlock(&p->mu);
    pthread_join(r->port_thread, NULL);
    r->port_running = 0;
}

/* ---- the writer's side ---------------------------------------------------------------------- */

struct gb_replay_writer {
    gb_replay_view view; /* read-only view for the layout */
    gb_shm rw;           /* the same segment, read-write, for the blocks and the port */
    gb_replay_port *port;
    int64_t capacity, steps;
    double timeout_s;
};

int gb_replay_writer_open(gb_replay_writer **out, int fd, double timeout_s, gb_error *err)
{
    *out = NULL;
    gb_replay_writer *w = calloc(1, sizeof *w);
    if (!w)
        return gb_error_set(err, GB_ENOMEM, "replay writer: out of memory");
    w->rw.fd = -1;
    int rc = gb_replay_view_open(&w->view, fd, err);
    if (!rc)
        rc = gb_shm_map_fd(&w->rw, fd, 0, 0, err);
    if (rc) {
        gb_replay_writer_close(w);
        return gb_error_prefix(err, "replay writer");
    }
    /* Point the tables at the writable mapping (same layout, other address). */
    uint8_t *ro = ((gb_shm *)w->view.shm)->base, *base = w->rw.base;
    for (int c = 0; c < w->view.ncolumns; c++)
        w->view.tables[c].base = base + (w->view.tables[c].base - ro);
    w->port = (gb_replay_port *)(base + GB_REPLAY_PORT_OFFSET);
    w->capacity = w->view.capacity;
    w->steps = w->view.steps;
    w->timeout_s = timeout_s >= 0 ? timeout_s : 10.0;
    *out = w;
    return 0;
}

void gb_replay_writer_close(gb_replay_writer *w)
{
    if (!w)
        return;
    gb_shm_free(&w->rw);
    gb_replay_view_close(&w->view);
    free(w);
}

void *gb_replay_writer_block(const gb_replay_writer *w, int col, int64_t idx)
{
    return w->view.tables[col].base + (size_t)idx * w->view.tables[col].stride;
}

const gb_replay_view *gb_replay_writer_view(const gb_replay_writer *w) { return &w->view; }

/* Sends one request and waits for the reply: up to the request's own timeout plus a margin for
 * the owner to answer at all. */
static int request(gb_replay_writer *w, int op, int64_t n, const int64_t *idx, int64_t *idx_out,
                   const double *priority, const int32_t *length, const int64_t *version,
                   double timeout_s, gb_error *err)
{
    if (n < 1 || n > GB_REPLAY_PORT_MAX)
        return gb_error_set(err, GB_EINVAL, "replay writer: %lld items per call (1 to %d)",
                            (long long)n, GB_REPLAY_PORT_MAX);
    gb_replay_port *p = w->port;
    if (lock_robust(&p->client) != 0)
        return gb_error_set(err, GB_ESYS, "replay writer: port lock failed");
    lock_robust(&p->mu);
    if (!p->served) {
        pthread_mutex_unlock(&p->mu);
        pthread_mutex_unlock(&p->client);
        return gb_error_set(err, GB_ECLOSED, "replay writer: the replay's owner is not serving "
                            "writers (gb_replay_serve_writers)");
    }
    p->op = op;
    p->n = n;
    p->timeout_s = timeout_s;
    for (int64_t k = 0; k < n; k++) {
        p->idx[k] = idx ? idx[k] : -1;
        p->priority[k] = priority ? priority[k] : (double)NAN;
        p->length[k] = length ? length[k] : (int32_t)w->steps;
        p->version[k] = version ? version[k] : 0;
    }
    uint64_t mine = ++p->req_seq;
    pthread_cond_signal(&p->cv_req);
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    double wait = timeout_s + 5.0;
    deadline.tv_sec += (time_t)wait;
    deadline.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    int rc = 0;
    while (p->rep_seq != mine && p->served) {
        int w8 = pthread_cond_timedwait(&p->cv_rep, &p->mu, &deadline);
        if (w8 == EOWNERDEAD)
            pthread_mutex_consistent(&p->mu);
        else if (w8 == ETIMEDOUT && p->rep_seq != mine) {
            rc = gb_error_set(err, GB_ETIMEOUT, "replay writer: the owner did not answer within "
                              "%.1f s", wait);
            break;
        }
    }
    if (!rc && p->rep_seq != mine)
        rc = gb_error_set(err, GB_ECLOSED, "replay writer: the owner stopped serving writers");
    if (!rc) {
        rc = p->rc;
        if (rc)
            gb_error_set(err, rc, "%s", p->msg);
        else if (idx_out)
            memcpy(idx_out, p->idx, (size_t)n * sizeof *idx_out);
    }
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_unlock(&p->client);
    return rc;
}

int gb_replay_writer_allocate(gb_replay_writer *w, int64_t n, int64_t *idx, double timeout_s,
                              gb_error *err)
{
    return request(w, GB_PORT_ALLOCATE, n, NULL, idx, NULL, NULL, NULL,
                   timeout_s < 0 ? w->timeout_s : timeout_s, err);
}

int gb_replay_writer_commit(gb_replay_writer *w, int64_t n, const int64_t *idx,
                            const double *priority, const int32_t *length,
                            const int64_t *policy_version, gb_error *err)
{
    return request(w, GB_PORT_COMMIT, n, idx, NULL, priority, length, policy_version, 0, err);
}

int gb_replay_writer_abort(gb_replay_writer *w, int64_t n, const int64_t *idx, gb_error *err)
{
    return request(w, GB_PORT_ABORT, n, idx, NULL, NULL, NULL, NULL, 0, err);
}
