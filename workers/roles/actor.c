/* workers/roles/actor.c: the actor worker = acting (workers/roles/acting.h) + the streams. While
 * one group of the environment ring waits for its actions on the inference stream, the others are
 * stepped; each (copy, agent) stream becomes fixed-length trajectory chunks
 * (runtime/streams/chunk.h) pushed to the trainers on the sample stream without a copy; finished
 * episodes go to the launcher's metrics. */
#include "workers/roles/worker.h"

#include "runtime/base/clock.h"
#include "runtime/streams/inference.h"
#include "runtime/base/log.h"
#include "runtime/base/rng.h"
#include "runtime/streams/sample_stream.h"
#include "runtime/streams/wire.h"
#include "workers/roles/acting.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EPISODE_REPORT_S 0.05 /* the longest finished episodes wait before they are reported */

typedef struct actor {
    gb_worker *w;
    gb_acting *acting;
    const gb_chunk_layout *layout;
    int S;
    gb_infer_client *infer;
    gb_sample_sender *samples;
    uint64_t *pending; /* request id per group, 0 = none outstanding */
    gb_wire_msg reply;
    int64_t chunks_sent;
    int64_t rows_sent; /* valid rows (agent steps) in the chunks sent */
} actor;

static void on_episode(void *ctx, double episode_return, int64_t length)
{
    actor *a = ctx;
    gb_metrics_episode(a->w->metrics, (float)episode_return, length);
}

/* Sends group g's observations ([rows, *obs], as the chunk layout has them) to the policy
 * workers, with actors.noise_correlation its rows' exploration noise ([rows, action dim]
 * float32, "noise"), and with a core its rows' state ([rows, S] float32, "state": it lives
 * here, so any policy worker can answer, and the same request can be sent again). */
static int request_actions(actor *a, int g, gb_error *err)
{
    const gb_chunk_layout *l = a->layout;
    int64_t rows;
    const void *data[3] = {gb_acting_obs(a->acting, g, &rows), gb_acting_noise(a->acting, g),
                           gb_acting_state(a->acting, g)};
    gb_tensor_desc d[3];
    int64_t shape[GB_WIRE_MAX_RANK];
    shape[0] = rows;
    memcpy(shape + 1, l->obs_shape, (size_t)l->obs_rank * sizeof shape[0]);
    int rc = gb_wire_set_tensor(&d[0], "obs", l->obs_dtype, 1 + l->obs_rank, shape, err);
    int n = 1;
    if (!rc && data[1]) {
        const int64_t noise_shape[2] = {rows, l->action_dim};
        rc = gb_wire_set_tensor(&d[n], "noise", GB_DTYPE_FLOAT32, 2, noise_shape, err);
        n++;
    }
    if (!rc && data[2]) {
        const int64_t state_shape[2] = {rows, gb_acting_state_size(a->acting)};
        data[n] = data[2];
        rc = gb_wire_set_tensor(&d[n], "state", GB_DTYPE_FLOAT32, 2, state_shape, err);
        n++;
    }
    if (rc)
        return rc;
    return gb_infer_client_send(a->infer, d, data, n, &a->pending[g], err);
}

/* With a core: the reply's "state" ([rows, S] float32, the state each row leaves this step in)
 * into group g's rows, checked like the actions. */
static int take_state(actor *a, int g, const gb_wire_msg *m, gb_error *err)
{
    float *rows_state = gb_acting_state(a->acting, g);
    if (!rows_state)
        return 0;
    int64_t rows;
    gb_acting_obs(a->acting, g, &rows);
    const int64_t S = gb_acting_state_size(a->acting);
    int is = gb_wire_msg_find(m, "state");
    if (is < 0)
        return gb_error_set(err, GB_EPROTO, "policy reply without a state tensor (the policy "
                            "has a core: policy.model.core)");
    gb_tensor_view v = gb_wire_msg_tensor(m, is);
    const gb_tensor_desc *d = &m->hdr.tensors[is];
    if (d->dtype != GB_DTYPE_FLOAT32 || d->rank != 2 || d->shape[0] != rows ||
        d->shape[1] != S || v.bytes != (size_t)rows * (size_t)S * sizeof(float))
        return gb_error_set(err, GB_EPROTO, "policy reply: state must be float32 [%lld, %lld] "
                            "(%zu bytes came)", (long long)rows, (long long)S, v.bytes);
    memcpy(rows_state, v.data, v.bytes);
    return 0;
}

static void report(actor *a);

/* Applies a reply for group g (acting: decode, step, chunks), then sends finished chunks. */
static int step_group(actor *a, int g, const gb_wire_msg *m, gb_error *err)
{
    int ia = gb_wire_msg_find(m, "action"), il = gb_wire_msg_find(m, "logp");
    if (ia < 0 || il < 0)
        return gb_error_set(err, GB_EPROTO, "policy reply without action/logp tensors");
    gb_tensor_view act = gb_wire_msg_tensor(m, ia), logp = gb_wire_msg_tensor(m, il);
    int rc = take_state(a, g, m, err);
    if (rc)
        return rc;
    rc = gb_acting_step(a->acting, g, act.data, act.bytes, logp.data, logp.bytes,
                        m->hdr.policy_version, err);
    if (rc)
        return rc;
    gb_chunk chunk;
    while (gb_acting_take(a->acting, &chunk)) {
        /* Backpressure (the trainers' rate limiter, a trainer restarting) can hold a send for
         * long: wait for room in slices and report meanwhile, the launcher's heartbeat (waiting
         * is not hanging). Once stopping, the send below just waits. */
        int slice_ms = (int)(1000 * gb_worker_report_interval(a->w));
        while (!gb_worker_stopping(a->w) &&
               (rc = gb_sample_sender_wait(a->samples, slice_ms, err)) == GB_ETIMEOUT)
            report(a);
        if (rc && rc != GB_ETIMEOUT)
            return rc;
        gb_wire_payload p[GB_CHUNK_NCOLS];
        gb_chunk_payloads(a->layout, &chunk, p);
        rc = gb_sample_send(a->samples, chunk.policy_version, a->layout->desc, p,
                            a->layout->ncols, err);
        if (rc == GB_ETIMEOUT)
            continue; /* dropped and counted by the stream */
        if (rc)
            return rc;
        a->chunks_sent++;
        a->rows_sent += chunk.steps;
    }
    return 0;
}

/* request_actions until one is accepted: while no policy worker is connected (one restarting)
 * the send times out after a report interval (the client's send timeout); the actor reports
 * (it is waiting, not hung: a send that waited the whole inference timeout once outlasted a
 * 3 s heartbeat), warns once per inference timeout waited, and gives up only when asked to
 * stop. */
static int resend(actor *a, int g, gb_error *err)
{
    const double warn_every = (double)a->w->cfg->streams.inference_timeout_ms / 1000.0;
    double since = gb_now_s(), warned = since;
    for (;;) {
        int rc = request_actions(a, g, err);
        if (rc != GB_ETIMEOUT || gb_worker_stopping(a->w))
            return rc;
        double now = gb_now_s();
        if (now - warned >= warn_every) {
            GB_WARN("actor: no policy worker accepted a request for %.0f s (%s); trying again",
                    now - since, err->msg);
            warned = now;
        }
        report(a);
    }
}

static void report(actor *a)
{
    gb_acting_stats st;
    gb_acting_stats_get(a->acting, &st);
    gb_sample_sender_stats ss = gb_sample_sender_get_stats(a->samples);
    gb_infer_client_stats is = gb_infer_client_get_stats(a->infer);
    /* env_steps: every step taken; env_steps_sent: those in chunks that left for a trainer
     * (the run's env_steps: steps of chunks still being filled when the run stops, or dropped,
     * never reach one). A copy's step is one row in each of its agents' chunks. */
    gb_metrics_set(a->w->metrics, "env_steps", (double)st.env_steps);
    gb_metrics_set(a->w->metrics, "env_steps_sent",
                   (double)a->rows_sent / (double)gb_acting_spec(a->acting)->agents);
    gb_metrics_set(a->w->metrics, "episodes", (double)st.episodes);
    gb_metrics_set(a->w->metrics, "chunks_sent", (double)a->chunks_sent);
    gb_metrics_set(a->w->metrics, "sample_drops", (double)ss.dropped);
    gb_metrics_set(a->w->metrics, "inference_timeouts", (double)is.timeouts);
    gb_metrics_send(a->w->metrics, NULL);
}

static void free_list(char **l, int n)
{
    for (int i = 0; l && i < n; i++)
        free(l[i]);
    free(l);
}

typedef struct listing {
    gb_worker *w;
    const char *prefix, *suffix;
    int count;
    char **eps; /* the caller's once found (free_list) */
    int n;
    char last[GB_ERROR_MSG_MAX]; /* why the last attempt was not enough */
} listing;

/* A gb_worker_wait attempt: every endpoint under l->prefix whose name ends in l->suffix, once
 * there are l->count of them (other names under prefix, like trainer 0's rendezvous, do not
 * count); GB_ETIMEOUT while fewer are. */
static int try_list(void *arg, int ms, gb_error *err)
{
    listing *l = arg;
    gb_registry_entry *e = NULL;
    int found = 0;
    int rc = gb_registry_list(l->w->registry, l->prefix, l->count, ms, &e, &found, err);
    if (rc == GB_ETIMEOUT)
        snprintf(l->last, sizeof l->last, "%s", err->msg);
    if (rc)
        return rc;
    const size_t sl = strlen(l->suffix);
    char **eps = calloc((size_t)found + 1, sizeof *eps);
    int k = 0;
    for (int i = 0; eps && i < found; i++) {
        size_t n = strlen(e[i].name);
        if (n < sl || strcmp(e[i].name + n - sl, l->suffix) != 0)
            continue;
        if (!(eps[k] = strdup(e[i].endpoint))) {
            free_list(eps, k);
            eps = NULL;
            break;
        }
        k++;
    }
    free(e);
    if (!eps)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    if (k >= l->count) {
        l->eps = eps;
        l->n = k;
        return 0;
    }
    free_list(eps, k);
    usleep((useconds_t)(ms < 50 ? ms : 50) * 1000u); /* enough names, not yet these */
    snprintf(l->last, sizeof l->last, "found %d", k);
    return GB_ETIMEOUT;
}

/* Looks up `count` endpoints under prefix ending in suffix, waiting up to timeout_ms (which
 * `setting` decides) with the worker's reports meanwhile (gb_worker_wait_ms). *out is the
 * caller's (free_list). */
static int lookup_all(gb_worker *w, const char *prefix, int count, const char *suffix,
                      long long timeout_ms, const char *setting, char ***out, int *n,
                      gb_error *err)
{
    listing l = {w, prefix, suffix, count, NULL, 0, ""};
    char what[96];
    snprintf(what, sizeof what, "%d %s*%s endpoints", count, prefix, suffix);
    int rc = gb_worker_wait_ms(w, what, timeout_ms, setting, try_list, &l, err);
    if (rc == GB_ETIMEOUT) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        gb_error_set(err, rc, "%s; last: %s", msg, l.last);
    }
    *out = l.eps;
    *n = l.n;
    return rc;
}

/* Connects the actor to every policy worker's inference endpoint and every trainer's sample
 * endpoint (the lists, owned by the caller, in *policy_eps and *trainer_eps). Blocks on the
 * registry lookups. */
static int actor_connect(actor *a, char ***policy_eps, int *npolicy, char ***trainer_eps,
                         int *ntrainer, gb_error *err)
{
    gb_worker *w = a->w;
    const gb_config *cfg = w->cfg;
    int rc;
    /* trainers that join from other hosts may take up to their rendezvous timeout to be
     * there (they register their sample streams once the group has formed) */
    const long long ms = (long long)cfg->streams.registry_timeout_ms;
    const int joining = cfg->trainer.local >= 0 && cfg->trainer.local < cfg->trainer.count;
    if ((rc = lookup_all(w, "policy/", (int)cfg->policy.count, "/" GB_SOCKET_INFERENCE, ms,
                         "streams.registry_timeout_ms", policy_eps, npolicy, err)) ||
        (rc = lookup_all(w, "trainer/", (int)cfg->trainer.count, "/" GB_SOCKET_SAMPLES,
                         joining ? ms + (long long)(cfg->trainer.rendezvous.timeout_s * 1000.0)
                                 : ms,
                         joining ? "streams.registry_timeout_ms + trainer.rendezvous.timeout_s"
                                 : "streams.registry_timeout_ms",
                         trainer_eps, ntrainer, err)))
        return rc;
    size_t arow = gb_acting_action_row_bytes(a->acting);
    size_t srow = (size_t)gb_acting_state_size(a->acting) * sizeof(float);
    size_t widest = arow > 4 ? arow : 4; /* an action row, or a logp */
    widest = srow > widest ? srow : widest;
    gb_infer_client_opts io = {.endpoints = (const char *const *)*policy_eps,
                               .n_endpoints = *npolicy,
                               .timeout_ms = (int)cfg->streams.inference_timeout_ms,
                               /* sends wait in heartbeat slices (resend reports between) */
                               .send_timeout_ms = (int)fmax(1.0, 1000.0 * fmin(
                                   cfg->launch.heartbeat_timeout_s / 5,
                                   (double)cfg->streams.inference_timeout_ms / 1000.0)),
                               .role = w->role,
                               .index = w->index,
                               /* a reply holds actions, logp (and state) for at most the
                                * whole ring */
                               .max_frame = (uint64_t)gb_acting_copies(a->acting) *
                                            (uint64_t)gb_acting_spec(a->acting)->agents *
                                            widest};
    gb_sample_sender_opts so = {.endpoints = (const char *const *)*trainer_eps,
                                .n_endpoints = *ntrainer,
                                .hwm = (int)cfg->streams.sample_hwm,
                                .send_timeout_ms = -1, /* backpressure, never drop */
                                .role = w->role,
                                .index = w->index,
                                .incarnation = w->incarnation,
                                .kernel_buffer = gb_sample_kernel_buffer(
                                    (int)cfg->streams.sample_hwm, a->layout->block_bytes)};
    if ((rc = gb_infer_client_open(&a->infer, w->zctx, &io, err)) ||
        (rc = gb_sample_sender_open(&a->samples, w->zctx, &so, err)))
        return rc;
    char env[GB_CONFIG_ENV_LABEL_MAX];
    GB_INFO("actor: %s, %d copies x %d agents in %d groups, chunks of %lld steps, %d policy and "
            "%d trainer endpoints", gb_config_env_label(cfg, env, sizeof env),
            gb_acting_copies(a->acting),
            gb_acting_spec(a->acting)->agents, a->S, (long long)cfg->actors.chunk_len, *npolicy,
            *ntrainer);
    return 0;
}

/* Waits up to 100 ms for one reply, steps its group and asks again for it; a request whose
 * policy worker died or hangs is asked again. 0 (also when nothing came) or the error that
 * ends the actor. */
static int actor_turn(actor *a, gb_error *err)
{
    int rc = gb_infer_client_recv(a->infer, &a->reply, 100, err);
    if (rc == GB_EAGAIN)
        return 0;
    int g = -1;
    for (int i = 0; i < a->S; i++)
        if (a->pending[i] == a->reply.hdr.seq)
            g = i;
    if (rc == GB_ETIMEOUT && g >= 0) {
        /* The policy worker that had the request died or hangs (the launcher restarts it): ask
         * again; the DEALER sends it to a live one. */
        GB_WARN("actor: %s; asking again", err->msg);
        a->pending[g] = 0;
        return resend(a, g, err);
    }
    if (rc)
        return rc;
    if (g < 0) {
        gb_wire_msg_release(&a->reply);
        return 0; /* a reply we no longer wait for */
    }
    a->pending[g] = 0;
    rc = step_group(a, g, &a->reply, err);
    gb_wire_msg_release(&a->reply);
    return rc ? rc : resend(a, g, err);
}

/* The last report (chunks_sent is final: the launcher's ledger), then a moment for the trainers
 * to read what this actor queued before its connections close. */
static void actor_leave(actor *a)
{
    gb_worker *w = a->w;
    gb_metrics_set(w->metrics, "final", 1);
    report(a);
    GB_INFO("actor: leaving after %llu chunks sent (%.0f env steps in them)",
            (unsigned long long)a->chunks_sent,
            (double)a->rows_sent / (double)gb_acting_spec(a->acting)->agents);
    if (w->joined && gb_worker_run_state(w) < GB_RUN_FLUSHING) {
        /* leaving a run that goes on (gearbox join): the trainers get a moment to read what
         * this actor queued before its connections close; the run is not waited for */
        if (gb_worker_stop_requested(w))
            gb_runctl_client_wait(w->runctl, GB_RUN_RELEASED, 1.0);
    } else if (gb_worker_stopping(w) && !gb_worker_wait_release(w, 3.0)) {
        GB_WARN("actor: not released within 3 s of stopping; closing the sample stream "
                "(chunks still queued may be lost; the run's summary counts them)");
    }
}

/* The actor's role (workers/roles/worker.h): steps its environments with the policy workers'
 * actions and sends the trajectory chunks to the trainers until the worker stops. Returns 0 on a
 * clean stop or the first error (err filled). Blocks for the worker's life. */
int gb_actor_main(gb_worker *w, gb_error *err)
{
    const gb_config *cfg = w->cfg;
    actor a = {.w = w};
    char **policy_eps = NULL, **trainer_eps = NULL;
    int npolicy = 0, ntrainer = 0;
    gb_wire_msg_init(&a.reply);
    gb_acting_opts ao = {
        .cfg = cfg,
        .copies = (int)cfg->actors.envs_per_actor,
        .splits = (int)cfg->actors.splits,
        .seed = gb_worker_seed(w, "envs"),
        .on_episode = on_episode,
        .ctx = &a,
    };
    int rc = gb_acting_create(&ao, &a.acting, err);
    if (rc)
        goto done;
    a.layout = gb_acting_layout(a.acting);
    a.S = gb_acting_groups(a.acting);
    a.pending = calloc((size_t)a.S, sizeof *a.pending);
    if (!a.pending) {
        rc = gb_error_set(err, GB_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = actor_connect(&a, &policy_eps, &npolicy, &trainer_eps, &ntrainer, err)))
        goto done;
    for (int g = 0; g < a.S; g++)
        if ((rc = resend(&a, g, err)))
            goto done;

    double next_report = gb_now_s(), last_report = 0;
    while (!gb_worker_stopping(w)) {
        /* Reports are the launcher's heartbeat: sent from this loop, so an environment stuck
         * in step silences them. Finished episodes go out within EPISODE_REPORT_S, not at the
         * next heartbeat: the launcher decides that the run is solved on their returns, and a
         * second's wait there was a third of a CartPole run. */
        double now = gb_now_s();
        if (now >= next_report || (gb_metrics_episodes_unsent(w->metrics) > 0 &&
                                   now >= last_report + EPISODE_REPORT_S)) {
            report(&a);
            last_report = now;
            next_report = now + gb_worker_report_interval(w);
        }
        if ((rc = actor_turn(&a, err)))
            goto done;
    }
    rc = 0;
done:
    if (a.infer && a.samples)
        actor_leave(&a);
    gb_wire_msg_release(&a.reply);
    gb_sample_sender_close(a.samples);
    gb_infer_client_close(a.infer);
    free(a.pending);
    gb_acting_destroy(a.acting);
    free_list(policy_eps, npolicy);
    free_list(trainer_eps, ntrainer);
    return rc;
}
