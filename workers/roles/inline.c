/* workers/roles/inline.c: inline mode = acting (workers/roles/acting.h) + the learner's own model +
 * learning (workers/roles/learning.h) in one loop, in one process, through the same replay and rate
 * limiter as a distributed trainer: the reference the distributed mode is compared against. A plain
 * MLP acts without libtorch (workers/roles/policy_mlp.h, the learner's parameters imported at each
 * new version) while the learner does too (learning.h, "The learning without libtorch"): the run
 * starts stepping at once instead of after libtorch's load. */
#include "workers/roles/inline.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "runtime/base/rng.h"
#include "workers/roles/acting.h"
#include "workers/roles/checkpoint_set.h"
#include "workers/roles/learner_report.h"
#include "workers/roles/learning.h"
#include "workers/roles/policy_mlp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Everything the run owns; freed in one place. */
typedef struct inline_run {
    const gb_config *cfg;
    gb_rundir *rd;
    gb_acting *acting;
    gb_torch_space space;
    gb_learning *learning;
    gb_torch_model *model; /* the learner's, which acts; NULL: mlp acts */
    gb_policy_mlp *mlp;    /* the learner without libtorch's parameters (imported at mlp_version) */
    void *params;
    uint64_t params_bytes, mlp_version;
    int writes_policy; /* its checkpoints carry a policy file (a plain MLP, policy_mlp.h) */
    void *actions; /* [rows of the largest group, action row bytes] */
    float *logp;   /* [rows of the largest group] */
    double epsilon;
    int64_t chunks; /* inserted into the replay */
    gb_learner_report report;
    double last_row[GB_NCOLS]; /* the last metrics.csv row written */
    gb_run_rates rates;        /* the rows written, for the rates */
} inline_run;

static void set_progress(inline_run *r, int64_t env_steps)
{
    if (r->cfg->experiment.max_env_steps > 0)
        gb_learning_set_progress(r->learning, (double)env_steps /
                                                  (double)r->cfg->experiment.max_env_steps);
}

/* Inserts a finished chunk. When the rate limiter holds the insert back (the learner is behind
 * its samples_per_insert ratio), trains until it lets the chunk in: one thread does both, so
 * it never waits. */
static int insert_chunk(inline_run *r, const gb_chunk *c, gb_error *err)
{
    const gb_chunk_layout *l = gb_acting_layout(r->acting);
    const void *cols[GB_CHUNK_NCOLS];
    for (int col = 0; col < l->ncols; col++)
        cols[col] = gb_chunk_column(l, c->block, col);
    for (;;) {
        int rc = gb_learning_insert(r->learning, cols, c->policy_version, 0, err);
        r->chunks += rc == 0;
        if (rc != GB_ETIMEOUT)
            return rc;
        rc = gb_learning_step(r->learning, 0, 0, err);
        if (rc < 0)
            return rc;
        if (rc == 0)
            return gb_error_set(err, GB_EINVAL, "inline: the rate limiter holds back both the "
                                "insert and the sample (check trainer.replay.min_size, "
                                "samples_per_insert and error_buffer)");
    }
}

/* Acts for rows of obs with the policy without libtorch, first importing the learner's
 * parameters when they are newer than its own (a copy of a small MLP's few thousand floats); with
 * a core on the group's state rows, updated in place. */
static int act_in_c(inline_run *r, const void *obs, int64_t rows, const float *noise,
                    float *state, gb_torch_act_out *out, gb_error *err)
{
    const uint64_t v = gb_learning_version(r->learning);
    if (v != r->mlp_version) {
        const gb_param_entry *table;
        int count;
        uint64_t total;
        gb_learning_param_layout(r->learning, &table, &count, &total);
        if (total > r->params_bytes) {
            void *p = realloc(r->params, total);
            if (!p)
                return gb_error_set(err, GB_ENOMEM, "inline: out of memory");
            r->params = p;
            r->params_bytes = total;
        }
        uint64_t version;
        int rc = gb_learning_export(r->learning, r->params, total, &version, err);
        if (rc == 0)
            rc = gb_policy_mlp_import(r->mlp, r->params, total, table, count, version, err);
        if (rc)
            return rc;
        r->mlp_version = v;
    }
    return gb_policy_mlp_act(r->mlp, obs, rows, r->cfg->policy.deterministic, r->epsilon, noise,
                             state, state, out, err);
}

/* Acts for group g with the learner's model (with a core, on the group's state rows, updated
 * in place), steps it, inserts the finished chunks, then trains as often as the rate limiter
 * allows. */
static int step_group(inline_run *r, int g, gb_error *err)
{
    int64_t rows;
    const void *obs = gb_acting_obs(r->acting, g, &rows);
    gb_torch_act_out out = {r->actions, r->logp, NULL, NULL};
    int64_t version = (int64_t)gb_learning_version(r->learning);
    float *state = gb_acting_state(r->acting, g); /* NULL without a core */
    int rc = r->model ? gb_torch_model_act_state(r->model, obs, rows, r->cfg->policy.deterministic,
                                                 r->epsilon, gb_acting_noise(r->acting, g), state,
                                                 state, &out, err)
                      : act_in_c(r, obs, rows, gb_acting_noise(r->acting, g), state, &out, err);
    if (rc == 0)
        rc = gb_acting_step(r->acting, g, r->actions,
                            (size_t)rows * gb_acting_action_row_bytes(r->acting), r->logp,
                            (size_t)rows * sizeof(float), version, err);
    gb_chunk c;
    while (gb_acting_take(r->acting, &c)) {
        if (rc == 0)
            rc = insert_chunk(r, &c, err);
        gb_chunk_release(c.block);
    }
    if (rc)
        return rc;
    gb_acting_stats st;
    gb_acting_stats_get(r->acting, &st);
    set_progress(r, st.env_steps);
    while ((rc = gb_learning_step(r->learning, 0, 0, err)) == 1)
        ;
    return rc;
}

/* One metrics.csv row, t seconds into the run, by the run contract (runtime/run/contract.h): the
 * columns a distributed run writes, from this process's acting, replay and learner. */
static int write_metrics(inline_run *r, const gb_acting_stats *st, double t, gb_error *err)
{
    double row[GB_NCOLS];
    for (int c = 0; c < GB_NCOLS; c++)
        row[c] = NAN;
    row[GB_COL_TIME] = t;
    row[GB_COL_ENV_STEPS] = (double)st->env_steps;
    row[GB_COL_TRAIN_STEPS] = (double)gb_learning_train_steps(r->learning);
    gb_run_rates_fill(&r->rates, 0, 0, 0, row); /* over the last rows (contract.h) */
    row[GB_COL_SAMPLES] = (double)gb_learning_samples_trained(r->learning);
    row[GB_COL_EPISODES] = (double)st->episodes;
    row[GB_COL_RETURN] = st->return_mean;
    gb_replay_stats rs;
    gb_replay_stats_get(gb_learning_replay(r->learning), &rs);
    row[GB_COL_REPLAY_SIZE] = (double)rs.size;
    row[GB_COL_REPLAY_FILL] = rs.capacity > 0 ? (double)rs.size / (double)rs.capacity : NAN;
    /* one model learns and acts: the version served is the one trained */
    row[GB_COL_VERSION] = row[GB_COL_SERVED] = (double)gb_learning_version(r->learning);
    row[GB_COL_LAG] = 0;
    row[GB_COL_DROPS] = row[GB_COL_REJECTED] = 0; /* no sample stream */
    row[GB_COL_SEGMENT] = 0;
    row[GB_COL_TRAINED_SHARE] = /* over the replay's life, a resumed run's too */
        rs.inserts > 0 ? (double)rs.first_samples / (double)rs.inserts : NAN;
    gb_learner_report_row(&r->report, r->cfg, r->learning, st->env_steps, row);
    memcpy(r->last_row, row, sizeof row);
    gb_run_rates_add(&r->rates, row);
    return gb_rundir_metrics_row(r->rd, row, GB_NCOLS, err);
}

/* The learner as a distributed run's trainer 0 keeps it (workers/roles/checkpoint_set.h, no
 * replay): checkpoints/trainer-0, which `gearbox eval RUN_DIR` plays. */
static int save_checkpoint(inline_run *r, gb_error *err)
{
    char dir[GB_RUNDIR_PATH_MAX];
    int rc = gb_rundir_file(r->rd, "checkpoints", dir, sizeof dir, err); /* made with the run */
    if (rc)
        return rc;
    const int with = r->writes_policy ? GB_CHECKPOINT_POLICY : 0;
    return gb_checkpoint_write(dir, "trainer-0", gb_learning_train_steps(r->learning), with,
                               gb_learning_write_set, r->learning, err);
}

static void run_free(inline_run *r)
{
    gb_learning_destroy(r->learning);
    gb_policy_mlp_close(r->mlp);
    free(r->params);
    gb_acting_destroy(r->acting);
    free(r->actions);
    free(r->logp);
}

static int run_setup(inline_run *r, gb_error *err)
{
    const gb_config *cfg = r->cfg;
    uint64_t seed = (uint64_t)cfg->experiment.seed;
    int rc;
    /* One process plays actor 0 (every copy in one ring), policy 0 and trainer 0 (libtorch's
     * threads: gb_learning_create sets them). */
    gb_acting_opts ao = {
        .cfg = cfg,
        .copies = (int)(cfg->actors.count * cfg->actors.envs_per_actor),
        .splits = (int)cfg->actors.splits,
        .seed = gb_rng_seed_of(seed, "actor", 0, "envs"),
    };
    if ((rc = gb_acting_create(&ao, &r->acting, err)) ||
        (rc = gb_learning_space(gb_acting_spec(r->acting), &r->space, err)))
        return rc;
    gb_learning_opts lo = {
        .cfg = cfg,
        .space = &r->space,
        .layout = gb_acting_layout(r->acting),
        .learner_seed = gb_rng_seed_of(seed, "trainer", 0, "learner"),
        .replay_seed = gb_rng_seed_of(seed, "trainer", 0, "replay"),
        .inline_mode = 1,
    };
    /* the learner's own parameters act, in fp32 (policy.precision is the policy workers');
     * a model the C cannot act with: the bridge's acts, as before */
    gb_error why = {0};
    lo.acts_in_c = gb_policy_mlp_open_fp32(cfg, &r->space, lo.learner_seed, &r->mlp, &why) == 0;
    r->writes_policy = lo.acts_in_c;
    if ((rc = gb_learning_create(&lo, &r->learning, err)))
        return rc;
    r->model = gb_learning_model(r->learning);
    if (r->model) { /* the learning loaded libtorch after all: its model acts */
        gb_policy_mlp_close(r->mlp);
        r->mlp = NULL;
    }
    r->mlp_version = UINT64_MAX; /* the first act imports */
    gb_learning_mark_trained(r->learning); /* a resume's replay: what it drew before */
    int64_t rows = (int64_t)(gb_acting_copies(r->acting) / gb_acting_groups(r->acting)) *
                   gb_acting_spec(r->acting)->agents;
    r->actions = calloc((size_t)rows, gb_acting_action_row_bytes(r->acting));
    r->logp = calloc((size_t)rows, sizeof *r->logp);
    if (!r->actions || !r->logp)
        return gb_error_set(err, GB_ENOMEM, "inline: out of memory");
    gb_learner_report_start(&r->report, r->learning);
    return gb_rundir_metrics_open(r->rd, gb_contract_columns(), GB_NCOLS, err);
}

/* Why the run stops now (the contract's stop rules, then *stop), or NULL to go on. */
static const char *stop_reason(const gb_config *cfg, const gb_acting_stats *st, double elapsed,
                               volatile sig_atomic_t *stop)
{
    const char *reason = gb_contract_stop_reason(cfg, st->env_steps, st->episodes,
                                                 st->return_mean, elapsed);
    return reason ? reason : stop && *stop ? "interrupted" : NULL;
}

int gb_inline_run(const gb_config *cfg, gb_rundir *rd, volatile sig_atomic_t *stop,
                  gb_inline_result *res, gb_error *err)
{
    inline_run *r = calloc(1, sizeof *r);
    memset(res, 0, sizeof *res);
    snprintf(res->exit_reason, sizeof res->exit_reason, "error");
    res->return_mean = NAN;
    if (!r)
        return gb_error_set(err, GB_ENOMEM, "inline: out of memory");
    r->cfg = cfg;
    r->rd = rd;
    const double t0 = gb_now_s();
    const char *reason = NULL;
    int rc = run_setup(r, err);
    /* rows denser in the first seconds of stepping (runtime/run/contract.h), the log line at
     * most every metrics_interval_s */
    const double t1 = gb_now_s();
    double next_report = t1 + gb_contract_row_interval(cfg, 0), next_log = t1;
    double next_ckpt = cfg->trainer.checkpoint_every_s > 0 ? t0 + cfg->trainer.checkpoint_every_s
                                                           : INFINITY;
    gb_acting_stats st = {0};
    st.return_mean = NAN;
    char env[GB_CONFIG_ENV_LABEL_MAX];
    if (rc == 0)
        GB_INFO("inline: %s on %s, %d envs in %d groups, chunks of %lld, batch %lld",
                gb_config_enum_name("trainer.algorithm.name", cfg->trainer.algorithm.name),
                gb_config_env_label(cfg, env, sizeof env), gb_acting_copies(r->acting),
                gb_acting_groups(r->acting),
                (long long)cfg->actors.chunk_len, (long long)cfg->trainer.batch_size);
    while (rc == 0) {
        for (int g = 0; g < gb_acting_groups(r->acting) && rc == 0; g++) {
            gb_acting_stats_get(r->acting, &st);
            if (cfg->trainer.algorithm.name == GB_ALGO_DQN)
                r->epsilon = gb_config_dqn_epsilon(&cfg->trainer.algorithm.dqn, st.env_steps);
            rc = step_group(r, g, err);
        }
        if (rc)
            break;
        gb_acting_stats_get(r->acting, &st);
        double now = gb_now_s();
        reason = stop_reason(cfg, &st, now - t0, stop);
        if (now >= next_report || reason) {
            rc = write_metrics(r, &st, now - t0, err);
            if (now >= next_log || reason)
                GB_INFO("inline: %.0fs env_steps %lld train_steps %lld episodes %lld return %.1f "
                        "(%.0f steps/s)", now - t0, (long long)st.env_steps,
                        (long long)gb_learning_train_steps(r->learning), (long long)st.episodes,
                        st.return_mean, r->last_row[GB_COL_ENV_RATE]);
            next_log = now >= next_log ? now + cfg->experiment.metrics_interval_s : next_log;
            next_report = now + gb_contract_row_interval(cfg, now - t1);
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

    res->env_steps = st.env_steps;
    res->train_steps = r->learning ? gb_learning_train_steps(r->learning) : 0;
    res->episodes = st.episodes;
    res->envs = r->acting ? gb_acting_copies(r->acting) : 0;
    res->chunks = r->chunks;
    if (r->learning)
        res->chunks_trained = gb_learning_chunks_trained(r->learning);
    res->wall_seconds = gb_now_s() - t0;
    res->return_mean = st.return_mean;
    res->solved = rc == 0 && reason && strcmp(reason, "solved") == 0;
    snprintf(res->exit_reason, sizeof res->exit_reason, "%s", rc ? "error" : reason);
    run_free(r);
    free(r);
    if (rc == 0)
        GB_INFO("inline: %s after %lld env steps, %.1f s; return %.1f over the last %lld "
                "episodes", res->exit_reason, (long long)res->env_steps, res->wall_seconds,
                res->return_mean,
                (long long)(res->episodes < GB_RUN_WINDOW ? res->episodes : GB_RUN_WINDOW));
    return rc;
}

void gb_inline_summary(const gb_config *cfg, const gb_inline_result *res, const char *error,
                       gb_run_summary *s)
{
    gb_contract_summary_init(s, cfg, "inline");
    s->env_steps = res->env_steps; /* every step taken: env_steps_unsent stays 0 */
    s->train_steps = res->train_steps;
    s->wall_seconds = res->wall_seconds;
    s->episode_return_mean = res->return_mean;
    s->episodes = res->episodes;
    s->solved = res->solved;
    s->exit_reason = res->exit_reason;
    s->error = error;
    /* inline: one process plays every role: one actor ring, one policy, one trainer */
    s->actors = 1;
    s->policies = 1;
    s->trainers = 1;
    s->envs = res->envs;
    /* the sample stream is a call: every finished chunk goes straight into the replay */
    s->chunks_sent = s->chunks_received = res->chunks;
    s->chunks_trained = res->chunks_trained;
}
