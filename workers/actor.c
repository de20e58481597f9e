/* workers/actor.c: the actor worker: an environment ring of K copies in S groups; while one
 * group waits for its actions on the inference stream, the others are stepped. Each (copy,
 * agent) stream becomes fixed-length trajectory chunks (workers/chunk.h) pushed to the trainers
 * on the sample stream without a copy; finished episodes go to the launcher's metrics. */
#include "workers/worker.h"

#include "envs/host.h"
#include "envs/ring.h"
#include "runtime/clock.h"
#include "runtime/inference.h"
#include "runtime/log.h"
#include "runtime/sample.h"
#include "runtime/wire.h"
#include "workers/chunk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct actor {
    gb_worker *w;
    gb_env_source src;
    gb_env_ring *ring;
    gb_env_ring_buffers buf;
    const gb_env_spec *spec;
    int K, S, A;
    size_t obs_bytes, env_action_bytes;
    gb_chunk_layout layout;
    gb_chunk_builder *chunks;
    gb_infer_client *infer;
    gb_sample_sender *samples;
    uint64_t *pending; /* request id per group, 0 = none outstanding */
    gb_wire_msg reply;
    int64_t env_steps, episodes, chunks_sent;
    double return_sum;
} actor;

/* Sends group g's observations ([rows, *obs]) to the policy workers. */
static int request_actions(actor *a, int g, gb_error *err)
{
    int first, count;
    gb_env_ring_group(a->ring, g, &first, &count);
    int64_t rows = (int64_t)count * a->A;
    gb_tensor_desc d;
    int64_t shape[GB_WIRE_MAX_RANK];
    shape[0] = rows;
    for (int i = 0; i < a->spec->obs.ndim; i++)
        shape[1 + i] = a->spec->obs.shape[i];
    int rc = gb_wire_set_tensor(&d, "obs", gb_env_dtype_to_gb(a->spec->obs.dtype),
                                1 + a->spec->obs.ndim, shape, err);
    if (rc)
        return rc;
    const void *data = (const char *)a->buf.obs + (size_t)first * a->A * a->obs_bytes;
    return gb_infer_client_send(a->infer, &d, &data, 1, &a->pending[g], err);
}

/* Applies a reply for group g: actions to the ring (converted and clipped for the
 * environment), the chosen actions and log-probabilities to the chunks; steps the group; feeds
 * the outcomes to the chunks and the metrics; sends finished chunks. */
static int step_group(actor *a, int g, const gb_wire_msg *m, gb_error *err)
{
    int first, count;
    gb_env_ring_group(a->ring, g, &first, &count);
    int64_t rows = (int64_t)count * a->A;
    int ia = gb_wire_msg_find(m, "action"), il = gb_wire_msg_find(m, "logp");
    if (ia < 0 || il < 0)
        return gb_error_set(err, GB_EPROTO, "policy reply without action/logp tensors");
    gb_tensor_view act = gb_wire_msg_tensor(m, ia), logp = gb_wire_msg_tensor(m, il);
    const int discrete = a->spec->action.kind == GB_ENV_SPACE_DISCRETE;
    const int64_t adim = discrete ? 1 : a->spec->action.n;
    const size_t row_bytes = discrete ? sizeof(int64_t) : (size_t)adim * sizeof(float);
    if (act.bytes != (size_t)rows * row_bytes || logp.bytes != (size_t)rows * sizeof(float))
        return gb_error_set(err, GB_EPROTO,
                            "policy reply: %zu action bytes and %zu logp bytes for %lld rows",
                            act.bytes, logp.bytes, (long long)rows);
    int64_t version = m->hdr.policy_version;
    for (int64_t r = 0; r < rows; r++) {
        int64_t s = (int64_t)first * a->A + r; /* stream index = copy * A + agent */
        const char *arow = (const char *)act.data + (size_t)r * row_bytes;
        float lp;
        memcpy(&lp, (const char *)logp.data + (size_t)r * sizeof lp, sizeof lp);
        char *env_act = (char *)a->buf.actions + (size_t)s * a->env_action_bytes;
        if (discrete) {
            int64_t v;
            memcpy(&v, arow, sizeof v);
            if (v < 0 || v >= a->spec->action.n)
                return gb_error_set(err, GB_EPROTO, "policy chose action %lld of %d",
                                    (long long)v, a->spec->action.n);
            int32_t v32 = (int32_t)v;
            memcpy(env_act, &v32, sizeof v32);
        } else {
            for (int64_t j = 0; j < adim; j++) {
                float x;
                memcpy(&x, arow + j * sizeof(float), sizeof x);
                float lo = a->spec->action.low[j], hi = a->spec->action.high[j];
                x = isnan(x) ? 0.0f : (x < lo ? lo : (x > hi ? hi : x));
                memcpy(env_act + j * sizeof(float), &x, sizeof x);
            }
        }
        gb_chunk_act(a->chunks, (int)s, arow, lp, version);
    }
    int rc = gb_env_ring_step(a->ring, g, err);
    if (rc)
        return rc;
    const gb_env_copy_stats *stats = gb_env_ring_stats(a->ring);
    for (int c = first; c < first + count; c++) {
        int ended = 1;
        for (int ag = 0; ag < a->A; ag++) {
            size_t i = (size_t)c * a->A + ag;
            ended &= a->buf.terminated[i] | a->buf.truncated[i];
        }
        for (int ag = 0; ag < a->A; ag++) {
            size_t i = (size_t)c * a->A + ag;
            const char *obs = (const char *)a->buf.obs + i * a->obs_bytes;
            const char *fin = (const char *)a->buf.final_obs + i * a->obs_bytes;
            rc = gb_chunk_step(a->chunks, (int)i, a->buf.rewards[i], a->buf.terminated[i],
                               a->buf.truncated[i], ended, fin, obs, err);
            if (rc)
                return rc;
        }
        if (ended) {
            gb_metrics_episode(a->w->metrics, (float)stats[c].last_return, stats[c].last_length);
            a->episodes++;
            a->return_sum += stats[c].last_return;
        }
    }
    a->env_steps += count;
    gb_chunk chunk;
    while (gb_chunk_take(a->chunks, &chunk)) {
        gb_wire_payload p[GB_CHUNK_NCOLS];
        gb_chunk_payloads(&a->layout, &chunk, p);
        rc = gb_sample_send(a->samples, chunk.policy_version, a->layout.desc, p, GB_CHUNK_NCOLS,
                            err);
        if (rc == GB_ETIMEOUT)
            continue; /* dropped and counted by the stream */
        if (rc)
            return rc;
        a->chunks_sent++;
    }
    return 0;
}

static void report(actor *a)
{
    gb_sample_sender_stats ss = gb_sample_sender_get_stats(a->samples);
    gb_infer_client_stats is = gb_infer_client_get_stats(a->infer);
    gb_metrics_set(a->w->metrics, "env_steps", (double)a->env_steps);
    gb_metrics_set(a->w->metrics, "episodes", (double)a->episodes);
    gb_metrics_set(a->w->metrics, "chunks_sent", (double)a->chunks_sent);
    gb_metrics_set(a->w->metrics, "sample_drops", (double)ss.dropped);
    gb_metrics_set(a->w->metrics, "inference_timeouts", (double)is.timeouts);
    gb_metrics_send(a->w->metrics, NULL);
}

/* Looks up every endpoint under prefix (waiting for `count` of them). */
static int lookup_all(gb_worker *w, const char *prefix, int count, const char *suffix,
                      char ***out, int *n, gb_error *err)
{
    gb_registry_entry *e = NULL;
    int found = 0;
    int rc = gb_registry_list(w->registry, prefix, count, (int)w->cfg->streams.registry_timeout_ms,
                              &e, &found, err);
    if (rc)
        return rc;
    char **eps = calloc((size_t)found + 1, sizeof *eps);
    int k = 0;
    for (int i = 0; eps && i < found; i++) {
        size_t l = strlen(e[i].name), sl = strlen(suffix);
        if (l >= sl && strcmp(e[i].name + l - sl, suffix) == 0)
            eps[k++] = strdup(e[i].endpoint);
    }
    free(e);
    if (!eps)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    if (k < count) {
        for (int i = 0; i < k; i++)
            free(eps[i]);
        free(eps);
        return gb_error_set(err, GB_ETIMEOUT, "found %d of %d %s*%s endpoints", k, count, prefix,
                            suffix);
    }
    *out = eps;
    *n = k;
    return 0;
}

static void free_list(char **l, int n)
{
    for (int i = 0; l && i < n; i++)
        free(l[i]);
    free(l);
}

int gb_actor_main(gb_worker *w, gb_error *err)
{
    const gb_config *cfg = w->cfg;
    actor a = {.w = w};
    char **policy_eps = NULL, **trainer_eps = NULL;
    int npolicy = 0, ntrainer = 0;
    gb_wire_msg_init(&a.reply);
    uint64_t seed = (uint64_t)cfg->experiment.seed * 1000003u + (uint64_t)w->index * 7919u;
    int rc = gb_env_ring_from_config(&cfg->env, seed, (int)cfg->actors.envs_per_actor,
                                     (int)cfg->actors.splits, &a.src, &a.ring, err);
    if (rc)
        goto done;
    a.spec = gb_env_ring_spec(a.ring);
    a.K = gb_env_ring_copies(a.ring);
    a.S = gb_env_ring_splits(a.ring);
    a.A = a.spec->agents;
    a.obs_bytes = gb_env_obs_bytes(a.spec);
    a.env_action_bytes = gb_env_action_bytes(a.spec);
    if ((rc = gb_env_ring_buffers_alloc(a.ring, &a.buf, err)) ||
        (rc = gb_env_ring_attach(a.ring, &a.buf, err)))
        goto done;
    int discrete = a.spec->action.kind == GB_ENV_SPACE_DISCRETE;
    rc = gb_chunk_layout_init(&a.layout, cfg->actors.chunk_len,
                              gb_env_dtype_to_gb(a.spec->obs.dtype), a.spec->obs.ndim,
                              a.spec->obs.shape, discrete, discrete ? 1 : a.spec->action.n, err);
    if (rc || (rc = gb_chunk_builder_create(&a.layout, a.K * a.A, &a.chunks, err)))
        goto done;
    a.pending = calloc((size_t)a.S, sizeof *a.pending);
    if (!a.pending) {
        rc = gb_error_set(err, GB_ENOMEM, "out of memory");
        goto done;
    }

    if ((rc = lookup_all(w, "policy/", (int)cfg->policy.count, "/inference", &policy_eps,
                         &npolicy, err)) ||
        (rc = lookup_all(w, "trainer/", (int)cfg->trainer.count, "/samples", &trainer_eps,
                         &ntrainer, err)))
        goto done;
    gb_infer_client_opts io = {.endpoints = (const char *const *)policy_eps,
                               .n_endpoints = npolicy,
                               .timeout_ms = (int)cfg->streams.inference_timeout_ms,
                               .role = w->role,
                               .index = w->index};
    gb_sample_sender_opts so = {.endpoints = (const char *const *)trainer_eps,
                                .n_endpoints = ntrainer,
                                .hwm = (int)cfg->streams.sample_hwm,
                                .send_timeout_ms = -1, /* backpressure, never drop */
                                .role = w->role,
                                .index = w->index,
                                .kernel_buffer = gb_sample_kernel_buffer(
                                    (int)cfg->streams.sample_hwm, a.layout.block_bytes)};
    if ((rc = gb_infer_client_open(&a.infer, w->zctx, &io, err)) ||
        (rc = gb_sample_sender_open(&a.samples, w->zctx, &so, err)))
        goto done;

    if ((rc = gb_env_ring_reset(a.ring, err)))
        goto done;
    for (int s = 0; s < a.K * a.A; s++)
        gb_chunk_start(a.chunks, s, (const char *)a.buf.obs + (size_t)s * a.obs_bytes);
    GB_INFO("actor: %s, %d copies x %d agents in %d groups, chunks of %lld steps, %d policy and "
            "%d trainer endpoints", cfg->env.name, a.K, a.A, a.S,
            (long long)cfg->actors.chunk_len, npolicy, ntrainer);
    for (int g = 0; g < a.S; g++)
        if ((rc = request_actions(&a, g, err)))
            goto done;

    double next_report = gb_now_s();
    while (!gb_worker_stopping(w)) {
        rc = gb_infer_client_recv(a.infer, &a.reply, 100, err);
        if (rc == GB_EAGAIN)
            continue;
        if (rc)
            goto done;
        int g = -1;
        for (int i = 0; i < a.S; i++)
            if (a.pending[i] == a.reply.hdr.seq)
                g = i;
        if (g < 0) {
            gb_wire_msg_release(&a.reply);
            continue; /* a reply we no longer wait for */
        }
        a.pending[g] = 0;
        rc = step_group(&a, g, &a.reply, err);
        gb_wire_msg_release(&a.reply);
        if (rc || (rc = request_actions(&a, g, err)))
            goto done;
        if (gb_now_s() >= next_report) {
            report(&a);
            next_report = gb_now_s() + cfg->experiment.metrics_interval_s;
        }
    }
    rc = 0;
done:
    if (a.infer && a.samples) {
        gb_metrics_set(w->metrics, "final", 1); /* chunks_sent is final: the launcher's ledger */
        report(&a);
        if (gb_worker_stopping(w) && !gb_worker_wait_release(w, 3.0))
            GB_WARN("actor: not released within 3 s of stopping; closing the sample stream "
                    "(chunks still queued may be lost; the run's summary counts them)");
    }
    gb_wire_msg_release(&a.reply);
    gb_sample_sender_close(a.samples);
    gb_infer_client_close(a.infer);
    gb_chunk_builder_destroy(a.chunks);
    free(a.pending);
    gb_env_ring_destroy(a.ring);
    gb_env_ring_buffers_free(&a.buf);
    gb_env_source_close(&a.src);
    free_list(policy_eps, npolicy);
    free_list(trainer_eps, ntrainer);
    return rc;
}
