/* runtime/streams/inference_pipelined.c: the inference server's pipelined mode: the request thread
 * gathers batch k+1 while the inference thread runs batch k (see Threading in inference.h). */
#include "runtime/streams/inference.h"
#include "runtime/streams/inference_internal.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

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
    gb_infer_note_client(s, g->slot[g->n], now);
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
        if ((rc = gb_infer_msg_ensure(&g->slot[0], err)))
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
        if ((rc = gb_infer_msg_ensure(&g->slot[g->n], err)))
            return rc;
        gb_wire_msg *m = g->slot[g->n];
        rc = gb_wire_recv(s->sock, m, 1, ZMQ_DONTWAIT, err);
        if (rc == GB_EAGAIN)
            return 0;
        if (rc == GB_EPROTO) {
            s->st.rejected++;
            if (gb_log_due(s->st.rejected))
                GB_WARN("inference server: rejected a malformed request (%llu so far): %s",
                        (unsigned long long)s->st.rejected, err->msg);
            if (m->hdr.type != 0 && m->route_len > 0)
                gb_infer_reply_error(s, m, GB_EPROTO, err->msg);
            continue;
        }
        if (rc)
            return rc;
        int64_t r = gb_infer_request_rows(s, m);
        if (r == 0)
            continue;
        if (g->n > 0 && (!gb_infer_compatible(&g->slot[0]->hdr, &m->hdr) ||
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
    return g->n > 0 && (g->full || now >= g->deadline || gb_infer_all_present(s, now));
}

/* Request thread: merges the gathering stage and hands it to the idle inference thread; the
 * other stage starts gathering. Returns 0, or GB_ENOMEM after answering the batch with it. */
static int pipe_hand(gb_infer_server *s, gb_error *err)
{
    stage *g = &s->stages[s->gi];
    int rc = gb_infer_build_batch(g->slot, g->n, g->rows, g->merge, g->merge_cap, &g->batch, err);
    if (rc) {
        gb_infer_reply_all_error(s, g->slot, g->n, rc, err->msg);
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

/* Empties the eventfd of the inference thread's wake-ups. */
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
        gb_infer_send_replies(s, f->slot, f->n, f->rows, &f->out);
    } else {
        gb_infer_reply_all_error(s, f->slot, f->n, rc, f->err.msg);
        s->st.failed += (uint64_t)f->n;
        *err = f->err;
    }
    f->n = 0;
    return rc ? rc : 1;
}

/* The pipelined gb_infer_server_poll: receives into the gathering stage, hands a ready stage to
 * the inference thread, replies for a finished one. Returns 1, 0 or an error as the serial one. */
int gb_infer_pipe_poll(gb_infer_server *s, int timeout_ms, gb_error *err)
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

/* The inference thread: runs the callback on each stage it is handed, until told to quit. */
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
        g->rc = gb_infer_run_fn(s, &g->batch, &g->out, &g->err);
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

/* Allocates both stages, the eventfd and starts the inference thread. Returns 0, GB_ENOMEM or
 * GB_ESYS (what was made is freed by gb_infer_pipe_stop). */
int gb_infer_pipe_start(gb_infer_server *s, gb_error *err)
{
    int rc;
    for (int k = 0; k < 2; k++) {
        s->stages[k].slot = calloc((size_t)s->cap, sizeof *s->stages[k].slot);
        if (!s->stages[k].slot)
            return gb_error_set(err, GB_ENOMEM, "inference server: out of memory");
        if ((rc = gb_infer_msg_ensure(&s->stages[k].slot[0], err)))
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

/* Waits for a batch in the model, joins the thread and answers the requests still held (served
 * ones with their outputs, others with GB_ECLOSED) without waiting on the socket. */
void gb_infer_pipe_stop(gb_infer_server *s)
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
            gb_infer_reply_all_error(s, g->slot, g->n, GB_ECLOSED, "inference server closing");
        g->n = 0;
    }
    if (s->carry) {
        gb_infer_reply_error(s, s->slot[s->cap], GB_ECLOSED, "inference server closing");
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
