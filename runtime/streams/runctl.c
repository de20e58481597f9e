/* runtime/streams/runctl.c: run control: the run's state on the launcher, the watches held at the
 * registry's socket, and each worker's watching thread (see runctl.h). */
#include "runtime/streams/runctl.h"

#include "runtime/base/clock.h"
#include "runtime/streams/curve.h"
#include "runtime/base/log.h"
#include "runtime/streams/wire.h"
#include "runtime/streams/wire_messages.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static const char *const state_names[GB_RUN_STATE_END] = {
    "running", "ending", "flushing", "drained", "released"};

const char *gb_run_state_name(int state)
{
    return state >= 0 && state < GB_RUN_STATE_END ? state_names[state] : "invalid";
}

/* ---- server ---------------------------------------------------------------------------------- */

typedef struct held_watch {
    unsigned char route[GB_WIRE_ROUTE_MAX];
    size_t route_len;
    uint64_t seq, since_ns;
    int state; /* what the run was when the watch was held: it is answered when that moves */
    int64_t checkpoints, hold, group;
} held_watch;

typedef struct confirmation {
    int role, index, state;
} confirmation;

struct gb_runctl_server {
    atomic_int state;
    _Atomic int64_t env_steps; /* the run's env steps as the launcher last counted them */
    _Atomic int64_t checkpoints; /* checkpoints asked of trainer 0 */
    _Atomic int64_t hold; /* the request trainer 0 holds its learning at; 0: none */
    _Atomic int64_t trainer_group; /* the trainers' group generation */
    atomic_int drained; /* 1 once the state went through drained */
    int wake_fd; /* an eventfd: a move wakes the registry's thread to answer it now */
    held_watch *held; /* registry thread only */
    int nheld;
    pthread_mutex_t lock; /* guards confirmed, read by the launcher's thread */
    confirmation *confirmed;
    int nconfirmed;
    gb_wire_header hdr; /* reply scratch (registry thread) */
};

int gb_runctl_server_open(gb_runctl_server **out, gb_error *err)
{
    *out = NULL;
    gb_runctl_server *s = calloc(1, sizeof *s);
    if (s) {
        s->held = calloc(GB_RUNCTL_MAX_WORKERS, sizeof *s->held);
        s->confirmed = calloc(GB_RUNCTL_MAX_WORKERS, sizeof *s->confirmed);
    }
    if (!s || !s->held || !s->confirmed) {
        if (s) {
            free(s->held);
            free(s->confirmed);
        }
        free(s);
        return gb_error_set(err, GB_ENOMEM, "run control: out of memory");
    }
    atomic_init(&s->state, GB_RUN_RUNNING);
    s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->wake_fd < 0) {
        int rc = gb_error_errno(err, "run control: eventfd");
        free(s->held);
        free(s->confirmed);
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return 0;
}

/* An eventfd's wake: written (EAGAIN: the counter is full of wakes not yet taken, and the
 * poller wakes for those) and taken (EAGAIN: nothing to take). */
static void efd_wake(int fd)
{
    uint64_t one = 1;
    if (write(fd, &one, sizeof one) < 0) {
        /* see above */
    }
}

static void efd_take(int fd)
{
    uint64_t n;
    if (read(fd, &n, sizeof n) < 0) {
        /* see above */
    }
}

/* Wakes the registry's thread (gb_runctl_server_wake_fd): what moved is answered at once, not
 * at its next poll period. */
static void wake(gb_runctl_server *s) { efd_wake(s->wake_fd); }

int gb_runctl_server_wake_fd(const gb_runctl_server *s) { return s ? s->wake_fd : -1; }

void gb_runctl_server_woken(gb_runctl_server *s) { efd_take(s->wake_fd); }

void gb_runctl_server_close(gb_runctl_server *s)
{
    if (!s)
        return;
    pthread_mutex_destroy(&s->lock);
    close(s->wake_fd);
    free(s->held);
    free(s->confirmed);
    free(s);
}

gb_run_state gb_runctl_server_set(gb_runctl_server *s, gb_run_state state)
{
    int now = atomic_load(&s->state);
    if (state == GB_RUN_DRAINED && now < (int)state)
        atomic_store(&s->drained, 1); /* before the state: an answer with it carries the flag */
    while (now < (int)state && !atomic_compare_exchange_weak(&s->state, &now, (int)state)) {
    }
    now = atomic_load(&s->state);
    wake(s);
    GB_DEBUG("run control: %s", gb_run_state_name(now));
    return (gb_run_state)now;
}

int64_t gb_runctl_server_request_checkpoint(gb_runctl_server *s)
{
    int64_t n = atomic_fetch_add(&s->checkpoints, 1) + 1;
    wake(s);
    return n;
}

int64_t gb_runctl_server_request_hold(gb_runctl_server *s)
{
    /* the hold first: a client that hears the new count hears the hold with it (one answer;
     * the client stores the hold before the count) */
    int64_t n = atomic_load(&s->checkpoints) + 1;
    atomic_store(&s->hold, n);
    atomic_store(&s->checkpoints, n);
    wake(s);
    return n;
}

void gb_runctl_server_release(gb_runctl_server *s)
{
    atomic_store(&s->hold, 0);
    wake(s);
}

int64_t gb_runctl_server_next_trainer_group(gb_runctl_server *s)
{
    int64_t g = atomic_fetch_add(&s->trainer_group, 1) + 1;
    wake(s);
    return g;
}

int64_t gb_runctl_server_trainer_group(const gb_runctl_server *s)
{
    return atomic_load(&((gb_runctl_server *)s)->trainer_group);
}

void gb_runctl_server_set_env_steps(gb_runctl_server *s, int64_t env_steps)
{
    atomic_store(&s->env_steps, env_steps);
}

gb_run_state gb_runctl_server_state(const gb_runctl_server *s)
{
    return (gb_run_state)atomic_load(&((gb_runctl_server *)s)->state);
}

int gb_runctl_server_confirmed(const gb_runctl_server *s, int role, gb_run_state state)
{
    gb_runctl_server *m = (gb_runctl_server *)s; /* the lock is not part of the value */
    int n = 0;
    pthread_mutex_lock(&m->lock);
    for (int i = 0; i < m->nconfirmed; i++)
        n += m->confirmed[i].role == role && m->confirmed[i].state >= (int)state;
    pthread_mutex_unlock(&m->lock);
    return n;
}

static void confirm(gb_runctl_server *s, int role, int index, int state)
{
    pthread_mutex_lock(&s->lock);
    int i = 0;
    while (i < s->nconfirmed && (s->confirmed[i].role != role || s->confirmed[i].index != index))
        i++;
    if (i == s->nconfirmed && i < GB_RUNCTL_MAX_WORKERS)
        s->confirmed[s->nconfirmed++] = (confirmation){role, index, GB_RUN_RUNNING};
    if (i < s->nconfirmed && s->confirmed[i].state < state) {
        s->confirmed[i].state = state;
        GB_DEBUG("run control: %s-%d confirmed %s", gb_role_name(role), index,
                 gb_run_state_name(state));
    }
    pthread_mutex_unlock(&s->lock);
}

static void answer(gb_runctl_server *s, void *sock, const void *route, size_t route_len,
                   uint64_t seq, int status, const char *text)
{
    gb_wire_header *h = &s->hdr;
    gb_wire_header_init(h, GB_MSG_RUN_STATE, GB_ROLE_LAUNCHER, 0);
    h->seq = seq;
    h->status = status;
    gb_msg_run_state st = {atomic_load(&s->state), atomic_load(&s->env_steps),
                           atomic_load(&s->checkpoints), atomic_load(&s->trainer_group),
                           atomic_load(&s->hold), 0};
    st.drained = atomic_load(&s->drained); /* after the state: never a drained run's flag late */
    snprintf(h->text, sizeof h->text, "%s", text);
    gb_error e;
    if (gb_wire_schema_write(&gb_schema_run_state, &st, h, &e) ||
        gb_wire_send(sock, route, route_len, h, NULL, ZMQ_DONTWAIT, &e))
        GB_DEBUG("run control: answer not sent: %s", e.msg);
}

int gb_runctl_server_handle(gb_runctl_server *s, void *sock, const gb_wire_msg *m)
{
    const gb_wire_header *q = &m->hdr;
    gb_msg_run_watch watch;
    gb_error e;
    if (gb_wire_schema_read(&gb_schema_run_watch, q, &watch, &e)) {
        answer(s, sock, m->route, m->route_len, q->seq, GB_EPROTO, e.msg);
        return GB_EPROTO;
    }
    if (!gb_wire_peer_is(m, q->role, q->index)) { /* a worker confirms as itself only */
        answer(s, sock, m->route, m->route_len, q->seq, GB_EINVAL, "a watch as another worker");
        return GB_EINVAL;
    }
    confirm(s, q->role, q->index, (int)watch.confirmed);
    /* Stale: answered now. A watch sent before the worker heard a request the held watches
     * were answered with would otherwise wait a whole hold for it (test_registry under TSan).
     * The run is read once: a move after this read is one the held watch does not know. */
    held_watch now = {.state = atomic_load(&s->state),
                      .checkpoints = atomic_load(&s->checkpoints),
                      .hold = atomic_load(&s->hold),
                      .group = atomic_load(&s->trainer_group)};
    if (watch.known != now.state ||
        (watch.known_ckpts >= 0 && watch.known_ckpts != now.checkpoints) ||
        (watch.known_hold >= 0 && watch.known_hold != now.hold) ||
        (watch.known_group >= 0 && watch.known_group != now.group)) {
        answer(s, sock, m->route, m->route_len, q->seq, 0, "");
        return 0;
    }
    /* Hold it; a newer watch from the same peer replaces the older one. */
    int i = 0;
    while (i < s->nheld && (s->held[i].route_len != m->route_len ||
                            memcmp(s->held[i].route, m->route, m->route_len) != 0))
        i++;
    if (i == s->nheld) {
        if (s->nheld == GB_RUNCTL_MAX_WORKERS) {
            answer(s, sock, m->route, m->route_len, q->seq, 0, ""); /* it asks again */
            return 0;
        }
        s->nheld++;
    }
    held_watch *w = &s->held[i];
    memcpy(w->route, m->route, m->route_len);
    w->route_len = m->route_len;
    w->seq = q->seq;
    w->since_ns = gb_now_ns();
    w->state = now.state;
    w->checkpoints = now.checkpoints;
    w->hold = now.hold;
    w->group = now.group;
    return 0;
}

void gb_runctl_server_tick(gb_runctl_server *s, void *sock)
{
    /* Each held watch against what the run was when it was held, not against the last tick: a
     * move answered at once to a stale watch (above) before any tick saw it must not answer a
     * watch held after it, which already knows it (test_runctl under TSan). */
    int state = atomic_load(&s->state);
    int64_t checkpoints = atomic_load(&s->checkpoints), group = atomic_load(&s->trainer_group);
    int64_t hold = atomic_load(&s->hold);
    uint64_t old = gb_now_ns() - (uint64_t)GB_RUNCTL_HOLD_MS * 1000000ULL;
    for (int i = 0; i < s->nheld;) {
        const held_watch *w = &s->held[i];
        int moved = state != w->state || checkpoints != w->checkpoints || hold != w->hold ||
                    group != w->group;
        if (moved || w->since_ns <= old) {
            answer(s, sock, w->route, w->route_len, w->seq, 0, "");
            s->held[i] = s->held[--s->nheld];
        } else {
            i++;
        }
    }
}

/* ---- client ---------------------------------------------------------------------------------- */

struct gb_runctl_client {
    gb_runctl_client_opts o;
    char endpoint[256];
    void *sock;
    pthread_t thread;
    int thread_started;
    atomic_int quit;
    atomic_int state;     /* as last heard */
    _Atomic int64_t env_steps; /* the run's env steps as last heard */
    _Atomic int64_t checkpoints; /* checkpoints asked for, as last heard */
    _Atomic int64_t hold; /* the request to hold at, as last heard; 0: none */
    _Atomic int64_t trainer_group; /* the trainers' group generation as last heard; -1: none */
    atomic_int drained;   /* 1 once an answer said the run was drained */
    int wake_fd; /* an eventfd the close and a confirmation write: the thread's poll ends */
    atomic_int confirmed; /* what this worker confirms */
    gb_wire_header hdr;
    gb_wire_msg reply;
};

static int watch(gb_runctl_client *c, uint64_t seq, int confirmed, gb_error *err)
{
    gb_wire_header *h = &c->hdr;
    gb_wire_header_init(h, GB_MSG_RUN_WATCH, c->o.role, c->o.index);
    h->seq = seq;
    gb_msg_run_watch w = {atomic_load(&c->state), confirmed, atomic_load(&c->checkpoints),
                          atomic_load(&c->hold), atomic_load(&c->trainer_group)};
    int rc = gb_wire_schema_write(&gb_schema_run_watch, &w, h, err);
    return rc ? rc : gb_wire_send(c->sock, NULL, 0, h, NULL, ZMQ_DONTWAIT, err);
}

static void heard(gb_runctl_client *c, int state)
{
    int was = atomic_load(&c->state);
    if (state <= was)
        return;
    /* the stop flag before the state: whoever sees the new state sees the flag it implies
     * (test_registry's check right after every client reached FLUSHING once saw it unset) */
    if (c->o.stop && c->o.stop_at != GB_RUN_RUNNING && state >= (int)c->o.stop_at) {
        int zero = 0;
        atomic_compare_exchange_strong(c->o.stop, &zero, 1);
    }
    atomic_store(&c->state, state);
    GB_DEBUG("run control: %s", gb_run_state_name(state));
}

/* Ends the client thread's poll: it sends a confirmation or sees its close at once. */
static void wake_client(gb_runctl_client *c) { efd_wake(c->wake_fd); }

/* Keeps one watch outstanding; sends a new one when the last is answered, when this worker
 * confirms something, or after GB_RUNCTL_RESEND_MS of silence. */
static void *client_main(void *arg)
{
    gb_runctl_client *c = arg;
    gb_error err;
    uint64_t seq = 0, sent_ns = 0, heard_ns = gb_now_ns();
    int sent_confirmed = -1, need = 1, lost = 0;
    while (!atomic_load(&c->quit)) {
        int confirmed = atomic_load(&c->confirmed);
        uint64_t now = gb_now_ns();
        if (c->o.lost_after_ms > 0 && c->o.stop && !lost &&
            now - heard_ns >= (uint64_t)c->o.lost_after_ms * 1000000ULL) {
            lost = 1;
            GB_WARN("run control: no answer from the launcher (%s) for %d ms: the run is gone; "
                    "stopping", c->endpoint, c->o.lost_after_ms);
            int zero = 0;
            atomic_compare_exchange_strong(c->o.stop, &zero, 1);
        }
        if (need || confirmed != sent_confirmed ||
            now - sent_ns >= (uint64_t)GB_RUNCTL_RESEND_MS * 1000000ULL) {
            if (watch(c, ++seq, confirmed, &err) == 0) {
                sent_confirmed = confirmed;
                need = 0;
            } /* else (the launcher's queue full or gone): try again after the resend period */
            sent_ns = now;
        }
        zmq_pollitem_t it[2] = {{c->sock, 0, ZMQ_POLLIN, 0}, {NULL, c->wake_fd, ZMQ_POLLIN, 0}};
        if (zmq_poll(it, 2, GB_RUNCTL_POLL_MS) < 0 && zmq_errno() != EINTR) {
            GB_WARN("run control: zmq_poll: %s", zmq_strerror(zmq_errno()));
            gb_sleep_ms(GB_RUNCTL_POLL_MS);
            continue;
        }
        if (it[1].revents & ZMQ_POLLIN) /* a confirmation to send (the loop's top) or a close */
            efd_take(c->wake_fd);
        if (!(it[0].revents & ZMQ_POLLIN))
            continue;
        gb_msg_run_state st;
        while (gb_wire_recv(c->sock, &c->reply, 0, ZMQ_DONTWAIT, &err) == 0) {
            if (gb_wire_schema_read(&gb_schema_run_state, &c->reply.hdr, &st, &err) == 0) {
                if (c->reply.hdr.status)
                    GB_WARN("run control: %s", c->reply.hdr.text);
                if (st.drained > 0) /* before the state it goes with */
                    atomic_store(&c->drained, 1);
                heard(c, (int)st.state);
                heard_ns = gb_now_ns();
                if (st.env_steps >= 0)
                    atomic_store(&c->env_steps, st.env_steps);
                if (st.hold >= 0) /* before the count it goes with (request_hold) */
                    atomic_store(&c->hold, st.hold);
                if (st.checkpoints >= 0)
                    atomic_store(&c->checkpoints, st.checkpoints);
                if (st.trainer_group >= 0)
                    atomic_store(&c->trainer_group, st.trainer_group);
                need = need || c->reply.hdr.seq == seq; /* the watch outstanding was answered */
            }
            gb_wire_msg_release(&c->reply);
        }
    }
    return NULL;
}

int gb_runctl_client_open(gb_runctl_client **out, void *zctx, const gb_runctl_client_opts *o,
                          gb_error *err)
{
    *out = NULL;
    if (!o->endpoint || strlen(o->endpoint) >= sizeof ((gb_runctl_client *)0)->endpoint ||
        o->stop_at < GB_RUN_RUNNING || o->stop_at >= GB_RUN_STATE_END)
        return gb_error_set(err, GB_EINVAL, "run control: need an endpoint and a valid stop_at");
    gb_runctl_client *c = calloc(1, sizeof *c);
    if (!c)
        return gb_error_set(err, GB_ENOMEM, "run control: out of memory");
    int rc = 0;
    c->o = *o;
    snprintf(c->endpoint, sizeof c->endpoint, "%s", o->endpoint);
    c->o.endpoint = c->endpoint;
    atomic_init(&c->quit, 0);
    atomic_init(&c->state, GB_RUN_RUNNING);
    atomic_init(&c->confirmed, GB_RUN_RUNNING);
    atomic_init(&c->trainer_group, -1);
    gb_wire_msg_init(&c->reply);
    c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (c->wake_fd < 0) {
        rc = gb_error_errno(err, "run control: eventfd");
        goto fail;
    }
    int linger = 0;
    if (!(c->sock = zmq_socket(zctx, ZMQ_DEALER))) {
        rc = gb_wire_zmq_error(err, "run control: zmq_socket(DEALER)");
        goto fail;
    }
    if (zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger)) {
        rc = gb_wire_zmq_error(err, "run control: ZMQ_LINGER");
        goto fail;
    }
    /* a state answer is a header alone: a larger frame disconnects its sender */
    if ((rc = gb_wire_set_max_frame(c->sock, 0, err)))
        goto fail;
    if (gb_curve_connect(zctx, c->sock, c->endpoint) != 0) {
        rc = gb_wire_zmq_error(err, "run control: connect");
        gb_error_prefix(err, "%s", c->endpoint);
        goto fail;
    }
    int e = pthread_create(&c->thread, NULL, client_main, c);
    if (e) {
        errno = e;
        rc = gb_error_errno(err, "run control: pthread_create");
        goto fail;
    }
    c->thread_started = 1;
    *out = c;
    return 0;
fail:
    gb_runctl_client_close(c);
    return rc;
}

void gb_runctl_client_close(gb_runctl_client *c)
{
    if (!c)
        return;
    if (c->thread_started) {
        atomic_store(&c->quit, 1);
        wake_client(c);
        pthread_join(c->thread, NULL);
    }
    gb_wire_msg_release(&c->reply);
    if (c->sock)
        zmq_close(c->sock);
    if (c->wake_fd >= 0)
        close(c->wake_fd);
    free(c);
}

gb_run_state gb_runctl_client_state(const gb_runctl_client *c)
{
    return (gb_run_state)atomic_load(&((gb_runctl_client *)c)->state);
}

int64_t gb_runctl_client_checkpoints(const gb_runctl_client *c)
{
    return c ? atomic_load(&((gb_runctl_client *)c)->checkpoints) : 0;
}

int gb_runctl_client_drained(const gb_runctl_client *c)
{
    return c ? atomic_load(&((gb_runctl_client *)c)->drained) : 0;
}

int64_t gb_runctl_client_hold(const gb_runctl_client *c)
{
    return c ? atomic_load(&((gb_runctl_client *)c)->hold) : 0;
}

int64_t gb_runctl_client_trainer_group(const gb_runctl_client *c)
{
    return c ? atomic_load(&((gb_runctl_client *)c)->trainer_group) : 0;
}

int64_t gb_runctl_client_env_steps(const gb_runctl_client *c)
{
    return c ? atomic_load(&((gb_runctl_client *)c)->env_steps) : 0;
}

void gb_runctl_client_confirm(gb_runctl_client *c, gb_run_state state)
{
    int was = atomic_load(&c->confirmed);
    while (was < (int)state && !atomic_compare_exchange_weak(&c->confirmed, &was, (int)state)) {
    }
    if (was < (int)state)
        wake_client(c); /* sent now, not after the rest of the thread's poll */
}

int gb_runctl_client_wait(const gb_runctl_client *c, gb_run_state state, double max_s)
{
    for (double end = gb_now_s() + max_s; gb_now_s() < end; gb_sleep_ms(5))
        if (gb_runctl_client_state(c) >= state)
            return 1;
    return gb_runctl_client_state(c) >= state;
}
