/* workers/inline.c: inline mode: ring -> model -> chunks -> (replay) -> algorithm, one process. */
#include "workers/inline.h"

#include "envs/host.h"
#include "envs/ring.h"
#include "replay/replay.h"
#include "runtime/clock.h"
#include "runtime/log.h"
#include "workers/chunk.h"
#include "workers/torch/bridge.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETURN_WINDOW 100

/* Everything the run owns; freed in one place. */
typedef struct inline_run {
    const gb_config *cfg;
    gb_rundir *rd;
    gb_env_source src;
    gb_env_ring *ring;
    gb_env_ring_buffers rb;
    int rb_alloc;
    gb_torch_space space;
    gb_torch_learner *learner;
    gb_torch_model *model;
    gb_chunk_builder *chunks;
    gb_chunk_layout layout;
    gb_replay *replay;
    gb_replay_selection sel;
    int sel_init;
    int K, S, A, streams;
    size_t obs_bytes, env_action_bytes;
    /* acting scratch: [streams] */
    int64_t *act_i64;
    float *act_f32;
    float *logp;
    int64_t *prev_episodes; /* [K] */
    /* one training batch: [B] chunks */
    int64_t B, T;
    void *b_col[GB_CHUNK_NCOLS];
    float *weights, *prio;
    double *prio_d;
    int64_t pending; /* PPO: chunks in the batch */
    /* returns */
    double returns[RETURN_WINDOW];
    int64_t episodes;
    /* counters */
    int64_t env_steps, inserted, sampled, insert_base;
    int sampling_started;
    gb_torch_stats last;
    double epsilon;
} inline_run;

static double return_mean(const inline_run *r)
{
    int64_t n = r->episodes < RETURN_WINDOW ? r->episodes : RETURN_WINDOW;
    if (n == 0)
        return NAN;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += r->returns[i];
    return s / (double)n;
}

static int make_space(inline_run *r, gb_error *err)
{
    const gb_env_spec *spec = gb_env_ring_spec(r->ring);
    gb_torch_space *sp = &r->space;
    memset(sp, 0, sizeof *sp);
    sp->obs_dtype = gb_env_dtype_to_gb(spec->obs.dtype);
    sp->obs_ndim = spec->obs.ndim;
    for (int i = 0; i < spec->obs.ndim; i++)
        sp->obs_shape[i] = spec->obs.shape[i];
    if (sp->obs_dtype != GB_DTYPE_FLOAT32 && sp->obs_dtype != GB_DTYPE_UINT8)
        return gb_error_set(err, GB_EUNSUPPORTED, "inline: observations of type %s (the models "
                            "take float32 or uint8)", gb_dtype_name(sp->obs_dtype));
    if (spec->flags & GB_ENV_TURN_BASED)
        return gb_error_set(err, GB_EUNSUPPORTED, "inline: turn-based environments are not "
                            "supported by the built-in algorithms");
    if (spec->action.kind == GB_ENV_SPACE_DISCRETE) {
        sp->discrete = 1;
        sp->n_actions = spec->action.n;
    } else {
        if (spec->action.n > GB_TORCH_MAX_ACTION_DIM)
            return gb_error_set(err, GB_EUNSUPPORTED, "inline: %d action dimensions (max %d)",
                                spec->action.n, GB_TORCH_MAX_ACTION_DIM);
        sp->action_dim = spec->action.n;
        for (int i = 0; i < spec->action.n; i++) {
            sp->action_low[i] = spec->action.low[i];
            sp->action_high[i] = spec->action.high[i];
        }
    }
    r->obs_bytes = gb_env_obs_bytes(spec);
    r->env_action_bytes = gb_env_action_bytes(spec);
    return 0;
}

static int make_replay(inline_run *r, gb_error *err)
{
    const gb_config *cfg = r->cfg;
    gb_replay_options o;
    gb_replay_options_default(&o);
    gb_replay_options_from_config(&o, &cfg->trainer.replay);
    o.steps = r->T;
    o.samples_per_insert = 0; /* the loop below keeps the ratio: it cannot wait for itself */
    o.timeout_s = 0;
    o.seed = (uint64_t)cfg->experiment.seed ^ 0x7265706c6179ULL;
    for (int c = 0; c < GB_CHUNK_NCOLS; c++) {
        const gb_tensor_desc *d = &r->layout.desc[c];
        int per_item = c == GB_CHUNK_NEXT_OBS;
        int ndim = per_item ? d->rank : d->rank - 1;
        const int64_t *shape = per_item ? d->shape : d->shape + 1;
        int rc = gb_replay_add_column(&o, d->name, (gb_dtype)d->dtype, ndim, shape, per_item, err);
        if (rc)
            return gb_error_prefix(err, "inline replay");
    }
    int rc = gb_replay_create(&o, &r->replay, err);
    if (rc == 0 && (rc = gb_replay_selection_init(&r->sel, r->B, err)) == 0)
        r->sel_init = 1;
    return rc;
}

static int alloc_batch(inline_run *r, gb_error *err)
{
    for (int c = 0; c < GB_CHUNK_NCOLS; c++) {
        r->b_col[c] = calloc((size_t)r->B, r->layout.bytes[c]);
        if (!r->b_col[c])
            return gb_error_set(err, GB_ENOMEM, "inline: batch of %lld chunks", (long long)r->B);
    }
    r->weights = calloc((size_t)r->B, sizeof(float));
    r->prio = calloc((size_t)r->B, sizeof(float));
    r->prio_d = calloc((size_t)r->B, sizeof(double));
    r->act_i64 = calloc((size_t)r->streams, sizeof(int64_t));
    r->act_f32 = calloc((size_t)r->streams * (r->space.discrete ? 1 : r->space.action_dim),
                        sizeof(float));
    r->logp = calloc((size_t)r->streams, sizeof(float));
    r->prev_episodes = calloc((size_t)r->K, sizeof(int64_t));
    if (!r->weights || !r->prio || !r->prio_d || !r->act_i64 || !r->act_f32 || !r->logp ||
        !r->prev_episodes)
        return gb_error_set(err, GB_ENOMEM, "inline: out of memory");
    return 0;
}

static gb_torch_batch batch_view(const inline_run *r, const float *weights)
{
    gb_torch_batch b;
    b.B = r->B;
    b.T = r->T;
    b.obs = r->b_col[GB_CHUNK_OBS];
    b.next_obs = r->b_col[GB_CHUNK_NEXT_OBS];
    b.action = r->b_col[GB_CHUNK_ACTION];
    b.reward = r->b_col[GB_CHUNK_REWARD];
    b.terminated = r->b_col[GB_CHUNK_TERMINATED];
    b.truncated = r->b_col[GB_CHUNK_TRUNCATED];
    b.valid = r->b_col[GB_CHUNK_VALID];
    b.logp = r->b_col[GB_CHUNK_LOGP];
    b.weights = weights;
    return b;
}

static void set_progress(inline_run *r)
{
    if (r->cfg->experiment.max_env_steps > 0)
        gb_torch_learner_set_progress(r->learner, (double)r->env_steps /
                                                      (double)r->cfg->experiment.max_env_steps);
}

/* PPO: copy the chunk into the batch; train when it is full. Chunks fill at their own pace (a
 * reset row shifts a stream by one), so a chunk may hold rows of the previous policy version;
 * PPO's ratio against the stored behaviour log-probabilities accounts for that, as it must for
 * the distributed mode's actors anyway. */
static int ppo_take(inline_run *r, const gb_chunk *c, gb_error *err)
{
    for (int col = 0; col < GB_CHUNK_NCOLS; col++)
        memcpy((char *)r->b_col[col] + (size_t)r->pending * r->layout.bytes[col],
               gb_chunk_column(&r->layout, c->block, col), r->layout.bytes[col]);
    if (++r->pending < r->B)
        return 0;
    r->pending = 0;
    set_progress(r);
    gb_torch_batch b = batch_view(r, NULL);
    return gb_torch_learner_train(r->learner, &b, &r->last, NULL, err);
}

/* DQN/SAC: insert the chunk into the replay. */
static int replay_insert(inline_run *r, const gb_chunk *c, gb_error *err)
{
    int64_t idx;
    int rc = gb_replay_allocate(r->replay, 1, &idx, 0, err);
    if (rc)
        return gb_error_prefix(err, "inline: replay insert");
    for (int col = 0; col < GB_CHUNK_NCOLS; col++)
        memcpy(gb_replay_block(r->replay, col, idx), gb_chunk_column(&r->layout, c->block, col),
               r->layout.bytes[col]);
    int32_t len = (int32_t)r->T;
    rc = gb_replay_commit(r->replay, 1, &idx, NULL, &len, &c->policy_version, err);
    if (rc)
        return rc;
    r->inserted++;
    return 0;
}

/* DQN/SAC: as many gradient steps as the samples-per-insert ratio allows now. */
static int replay_train(inline_run *r, gb_error *err)
{
    const gb_config_replay *rc_cfg = &r->cfg->trainer.replay;
    gb_replay_stats st;
    gb_replay_stats_get(r->replay, &st);
    int64_t min_size = rc_cfg->min_size > 0 ? rc_cfg->min_size : 1;
    if (st.size < min_size)
        return 0;
    if (!r->sampling_started) {
        r->sampling_started = 1;
        r->insert_base = r->inserted;
    }
    double spi = rc_cfg->samples_per_insert > 0 ? rc_cfg->samples_per_insert : (double)r->B;
    int weighted = rc_cfg->selector == GB_SELECTOR_WEIGHTED;
    gb_replay_dst dst[GB_CHUNK_NCOLS];
    int nd = 0;
    for (int col = 0; col < GB_CHUNK_NCOLS; col++) {
        if (col == GB_CHUNK_VERSION)
            continue;
        dst[nd].column = col;
        dst[nd].data = r->b_col[col];
        dst[nd].bytes = (size_t)r->B * r->layout.bytes[col];
        nd++;
    }
    while ((double)r->sampled <= spi * (double)(r->inserted - r->insert_base)) {
        gb_replay_request req = gb_replay_request_default(r->B);
        req.timeout_s = 0;
        int rc = gb_replay_sample(r->replay, &req, &r->sel, err);
        if (rc == GB_ETIMEOUT)
            return 0;
        if (rc)
            return rc;
        rc = gb_replay_collect(r->replay, &r->sel, dst, nd, NULL, err);
        if (rc == 0 && r->sel.n != r->B)
            rc = gb_error_set(err, GB_EINVAL, "inline: replay returned %lld of %lld items",
                              (long long)r->sel.n, (long long)r->B);
        if (rc == 0) {
            set_progress(r);
            gb_torch_batch b = batch_view(r, weighted ? r->sel.weight : NULL);
            rc = gb_torch_learner_train(r->learner, &b, &r->last, r->prio, err);
        }
        if (rc == 0 && weighted) {
            for (int64_t i = 0; i < r->B; i++)
                r->prio_d[i] = r->prio[i];
            rc = gb_replay_update_priorities(r->replay, r->B, r->sel.index, r->sel.key, r->prio_d,
                                             NULL, err);
        }
        gb_replay_release(r->replay, &r->sel);
        if (rc)
            return rc;
        r->sampled += r->B;
    }
    return 0;
}

/* Acts for group g, steps it, feeds the chunk builder, counts episodes. */
static int step_group(inline_run *r, int g, gb_error *err)
{
    int first, count;
    gb_env_ring_group(r->ring, g, &first, &count);
    const int A = r->A;
    const int64_t n = (int64_t)count * A, s0 = (int64_t)first * A;
    const gb_torch_space *sp = &r->space;
    const int64_t adim = sp->discrete ? 1 : sp->action_dim;
    int algo = r->cfg->trainer.algorithm.name;
    int64_t version = (int64_t)gb_torch_model_version(r->model);
    gb_torch_act_out out = {sp->discrete ? (void *)(r->act_i64 + s0) : (void *)(r->act_f32 +
                                                                                s0 * adim),
                            r->logp + s0, NULL, NULL};
    int rc = gb_torch_model_act(r->model, (const char *)r->rb.obs + (size_t)s0 * r->obs_bytes, n,
                                r->cfg->policy.deterministic, r->epsilon, &out, err);
    if (rc)
        return rc;
    for (int64_t s = s0; s < s0 + n; s++) {
        if (sp->discrete) {
            gb_chunk_act(r->chunks, (int)s, &r->act_i64[s], r->logp[s], version);
            ((int32_t *)r->rb.actions)[s] = (int32_t)r->act_i64[s];
        } else {
            const float *a = r->act_f32 + s * adim;
            float *env_a = (float *)r->rb.actions + s * adim;
            gb_chunk_act(r->chunks, (int)s, a, r->logp[s], version);
            for (int64_t d = 0; d < adim; d++) {
                float lo = sp->action_low[d], hi = sp->action_high[d], x = a[d];
                env_a[d] = x < lo ? lo : x > hi ? hi : x; /* PPO's raw Gaussian sample */
            }
        }
    }
    if ((rc = gb_env_ring_step(r->ring, g, err)) != 0)
        return rc;
    r->env_steps += count;
    const gb_env_copy_stats *stats = gb_env_ring_stats(r->ring);
    for (int i = first; i < first + count; i++) {
        int ended = stats[i].episodes != r->prev_episodes[i];
        if (ended) {
            r->prev_episodes[i] = stats[i].episodes;
            r->returns[r->episodes % RETURN_WINDOW] = stats[i].last_return;
            r->episodes++;
        }
        for (int j = 0; j < A; j++) {
            int64_t s = (int64_t)i * A + j;
            rc = gb_chunk_step(r->chunks, (int)s, r->rb.rewards[s], r->rb.terminated[s],
                               r->rb.truncated[s], ended,
                               (const char *)r->rb.final_obs + (size_t)s * r->obs_bytes,
                               (const char *)r->rb.obs + (size_t)s * r->obs_bytes, err);
            if (rc)
                return rc;
        }
    }
    gb_chunk c;
    while (gb_chunk_take(r->chunks, &c)) {
        rc = algo == GB_ALGO_PPO ? ppo_take(r, &c, err) : replay_insert(r, &c, err);
        gb_chunk_release(c.block);
        if (rc)
            return rc;
    }
    if (algo != GB_ALGO_PPO)
        return replay_train(r, err);
    return 0;
}

static const char *const metric_names[] = {
    "wall_s", "env_steps", "train_steps", "episodes", "return_mean_100", "env_steps_per_s",
    "loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction",
    "explained_var", "q_mean", "td_abs_mean", "alpha", "epsilon", "lr", "grad_norm",
    "policy_version"};
#define NMETRICS ((int)(sizeof metric_names / sizeof metric_names[0]))

static int write_metrics(inline_run *r, double wall, double sps, gb_error *err)
{
    const gb_torch_stats *s = &r->last;
    double v[NMETRICS] = {wall, (double)r->env_steps,
                          (double)gb_torch_learner_train_steps(r->learner), (double)r->episodes,
                          return_mean(r), sps, s->loss, s->policy_loss, s->value_loss,
                          s->entropy, s->approx_kl, s->clip_fraction, s->explained_var,
                          s->q_mean, s->td_abs_mean, s->alpha, r->epsilon, s->lr, s->grad_norm,
                          (double)gb_torch_model_version(r->model)};
    return gb_rundir_metrics_row(r->rd, v, NMETRICS, err);
}

static int save_checkpoint(inline_run *r, gb_error *err)
{
    char p[GB_RUNDIR_PATH_MAX];
    int rc = gb_rundir_file(r->rd, "checkpoints/learner.ckpt", p, sizeof p, err);
    return rc ? rc : gb_torch_learner_save(r->learner, p, err);
}

static void run_free(inline_run *r)
{
    if (r->sel_init)
        gb_replay_selection_free(&r->sel);
    gb_replay_free(r->replay);
    gb_chunk_builder_destroy(r->chunks);
    gb_torch_learner_destroy(r->learner);
    if (r->rb_alloc)
        gb_env_ring_buffers_free(&r->rb);
    gb_env_ring_destroy(r->ring);
    gb_env_source_close(&r->src);
    for (int c = 0; c < GB_CHUNK_NCOLS; c++)
        free(r->b_col[c]);
    free(r->weights);
    free(r->prio);
    free(r->prio_d);
    free(r->act_i64);
    free(r->act_f32);
    free(r->logp);
    free(r->prev_episodes);
}

static int run_setup(inline_run *r, gb_error *err)
{
    const gb_config *cfg = r->cfg;
    uint64_t seed = (uint64_t)cfg->experiment.seed;
    int rc = gb_torch_set_threads((int)cfg->trainer.threads, err);
    if (rc)
        return rc;
    r->K = (int)(cfg->actors.count * cfg->actors.envs_per_actor);
    r->S = (int)cfg->actors.splits;
    r->T = cfg->actors.chunk_len;
    r->B = cfg->trainer.batch_size;
    rc = gb_env_ring_from_config(&cfg->env, seed, r->K, r->S, &r->src, &r->ring, err);
    if (rc)
        return rc;
    if ((rc = gb_env_ring_buffers_alloc(r->ring, &r->rb, err)) != 0)
        return rc;
    r->rb_alloc = 1;
    if ((rc = gb_env_ring_attach(r->ring, &r->rb, err)) != 0)
        return rc;
    r->A = gb_env_ring_spec(r->ring)->agents;
    r->streams = r->K * r->A;
    if ((rc = make_space(r, err)) != 0)
        return rc;
    if ((rc = gb_torch_learner_create(cfg, &r->space, seed, &r->learner, err)) != 0)
        return rc;
    r->model = gb_torch_learner_model(r->learner);
    rc = gb_chunk_layout_init(&r->layout, r->T, r->space.obs_dtype, r->space.obs_ndim,
                              r->space.obs_shape, r->space.discrete,
                              r->space.discrete ? 1 : r->space.action_dim, err);
    if (rc == 0)
        rc = gb_chunk_builder_create(&r->layout, r->streams, &r->chunks, err);
    if (rc == 0)
        rc = alloc_batch(r, err);
    if (rc == 0 && cfg->trainer.algorithm.name != GB_ALGO_PPO)
        rc = make_replay(r, err);
    if (rc == 0)
        rc = gb_env_ring_reset(r->ring, err);
    if (rc)
        return rc;
    for (int s = 0; s < r->streams; s++)
        gb_chunk_start(r->chunks, s, (const char *)r->rb.obs + (size_t)s * r->obs_bytes);
    return gb_rundir_metrics_open(r->rd, metric_names, NMETRICS, err);
}

int gb_inline_run(const gb_config *cfg, gb_rundir *rd, volatile sig_atomic_t *stop,
                  gb_inline_result *res, gb_error *err)
{
    inline_run *r = calloc(1, sizeof *r);
    if (!r)
        return gb_error_set(err, GB_ENOMEM, "inline: out of memory");
    memset(res, 0, sizeof *res);
    r->cfg = cfg;
    r->rd = rd;
    const double t0 = gb_now_s();
    const char *reason = "error";
    int rc = run_setup(r, err);
    double next_report = t0 + cfg->experiment.metrics_interval_s, last_report = t0;
    int64_t last_steps = 0;
    double next_ckpt = cfg->trainer.checkpoint_every_s > 0 ? t0 + cfg->trainer.checkpoint_every_s
                                                           : INFINITY;
    const double target = cfg->experiment.target_return;
    if (rc == 0)
        GB_INFO("inline: %s on %s, %d envs in %d groups, chunks of %lld, batch %lld",
                gb_config_enum_name("trainer.algorithm.name", cfg->trainer.algorithm.name),
                cfg->env.name, r->K, r->S, (long long)r->T, (long long)r->B);
    while (rc == 0) {
        for (int g = 0; g < r->S && rc == 0; g++) {
            if (cfg->trainer.algorithm.name == GB_ALGO_DQN)
                r->epsilon = gb_torch_dqn_epsilon(&cfg->trainer.algorithm.dqn, r->env_steps);
            rc = step_group(r, g, err);
        }
        if (rc)
            break;
        double now = gb_now_s();
        double mean = return_mean(r);
        if (!isnan(target) && r->episodes >= RETURN_WINDOW && mean >= target)
            reason = "solved";
        else if (cfg->experiment.max_env_steps > 0 && r->env_steps >= cfg->experiment.max_env_steps)
            reason = "max_env_steps";
        else if (cfg->experiment.max_seconds > 0 && now - t0 >= cfg->experiment.max_seconds)
            reason = "max_seconds";
        else if (stop && *stop)
            reason = "interrupted";
        else
            reason = NULL;
        if (now >= next_report || reason) {
            double sps = (double)(r->env_steps - last_steps) / (now - last_report + 1e-9);
            rc = write_metrics(r, now - t0, sps, err);
            GB_INFO("inline: %.0fs env_steps %lld train_steps %lld episodes %lld return %.1f "
                    "(%.0f steps/s)", now - t0, (long long)r->env_steps,
                    (long long)gb_torch_learner_train_steps(r->learner), (long long)r->episodes,
                    mean, sps);
            last_report = now;
            last_steps = r->env_steps;
            next_report = now + cfg->experiment.metrics_interval_s;
        }
        if (rc == 0 && now >= next_ckpt) {
            rc = save_checkpoint(r, err);
            next_ckpt = now + cfg->trainer.checkpoint_every_s;
        }
        if (reason)
            break;
    }
    if (rc == 0)
        rc = save_checkpoint(r, err);
    if (rc)
        reason = "error";

    res->env_steps = r->env_steps;
    res->train_steps = r->learner ? gb_torch_learner_train_steps(r->learner) : 0;
    res->episodes = r->episodes;
    res->wall_seconds = gb_now_s() - t0;
    res->return_mean = return_mean(r);
    res->solved = !isnan(target) && r->episodes >= RETURN_WINDOW && res->return_mean >= target;
    snprintf(res->exit_reason, sizeof res->exit_reason, "%s", reason);
    gb_run_summary s = {0};
    s.mode = "inline";
    s.env_steps = res->env_steps;
    s.train_steps = res->train_steps;
    s.wall_seconds = res->wall_seconds;
    s.episode_return_mean = res->return_mean;
    s.episodes = res->episodes;
    s.target_return = target;
    s.solved = res->solved;
    s.exit_reason = reason;
    s.error = rc ? err->msg : NULL;
    /* inline: one process plays every role: one actor ring, one policy, one trainer */
    s.actors = 1;
    s.policies = 1;
    s.trainers = 1;
    s.envs = r->K;
    gb_error serr = {0};
    int src = gb_rundir_write_summary(rd, &s, &serr);
    gb_rundir_close(rd);
    run_free(r);
    free(r);
    if (rc == 0 && src)
        return gb_error_set(err, src, "%s", serr.msg);
    if (rc == 0)
        GB_INFO("inline: %s after %lld env steps, %.1f s; return %.1f over the last %lld "
                "episodes", reason, (long long)res->env_steps, res->wall_seconds, res->return_mean,
                (long long)(res->episodes < RETURN_WINDOW ? res->episodes : RETURN_WINDOW));
    return rc;
}
