/* runtime/run/contract.c: the run contract (see contract.h): metrics.csv's columns, which algorithm
 * reports which, the stop rules and summary.json's common fields. */
#include "runtime/run/contract.h"

#include <math.h>
#include <string.h>

#define PPO (1u << GB_ALGO_PPO)
#define DQN (1u << GB_ALGO_DQN)
#define SAC (1u << GB_ALGO_SAC)
#define ALL (PPO | DQN | SAC)

/* The table: column, name, the algorithms that report it, 1 when the learner reports it. */
#define COLUMNS(X) \
    X(GB_COL_TIME,          "time_s",              ALL,        0) \
    X(GB_COL_ENV_STEPS,     "env_steps",           ALL,        0) \
    X(GB_COL_ENV_RATE,      "env_steps_per_s",     ALL,        0) \
    X(GB_COL_TRAIN_STEPS,   "train_steps",         ALL,        0) \
    X(GB_COL_TRAIN_RATE,    "train_steps_per_s",   ALL,        0) \
    X(GB_COL_SAMPLES,       "samples_trained",     ALL,        0) \
    X(GB_COL_EPISODES,      "episodes",            ALL,        0) \
    X(GB_COL_RETURN,        "return_mean_100",     ALL,        0) \
    X(GB_COL_LENGTH,        "length_mean_100",     ALL,        0) \
    X(GB_COL_REPLAY_SIZE,   "replay_size",         ALL,        0) \
    X(GB_COL_REPLAY_FILL,   "replay_fill",         ALL,        0) \
    X(GB_COL_VERSION,       "policy_version",      ALL,        0) \
    X(GB_COL_SERVED,        "served_version_min",  ALL,        0) \
    X(GB_COL_LAG,           "version_lag",         ALL,        0) \
    X(GB_COL_LOSS,          "loss",                ALL,        1) \
    X(GB_COL_ENTROPY,       "entropy",             PPO | SAC,  1) \
    X(GB_COL_DROPS,         "sample_drops",        ALL,        0) \
    X(GB_COL_REJECTED,      "chunks_rejected",     ALL,        0) \
    X(GB_COL_SEGMENT,       "segment",             ALL,        0) \
    X(GB_COL_POLICY_LOSS,   "policy_loss",         PPO | SAC,  1) \
    X(GB_COL_VALUE_LOSS,    "value_loss",          ALL,        1) \
    X(GB_COL_KL,            "approx_kl",           PPO,        1) \
    X(GB_COL_Q,             "q_mean",              DQN | SAC,  1) \
    X(GB_COL_LR,            "lr",                  ALL,        1) \
    X(GB_COL_COLLECT_MS,    "collect_ms",          ALL,        1) \
    X(GB_COL_TRAIN_MS,      "train_ms",            ALL,        1) \
    X(GB_COL_COLLECT_SHARE, "collect_share",       ALL,        1) \
    X(GB_COL_CLIP_FRACTION, "clip_fraction",       PPO,        1) \
    X(GB_COL_EXPLAINED_VAR, "explained_var",       PPO,        1) \
    X(GB_COL_TD_ABS,        "td_abs_mean",         DQN | SAC,  1) \
    X(GB_COL_ALPHA,         "alpha",               SAC,        1) \
    X(GB_COL_EPSILON,       "epsilon",             DQN,        1) \
    X(GB_COL_GRAD_NORM,     "grad_norm",           ALL,        1) \
    X(GB_COL_TRAINED_SHARE, "trained_share",       ALL,        0)

static const char *const names[GB_NCOLS] = {
#define NAME(col, name, algos, learner) [col] = name,
    COLUMNS(NAME)
#undef NAME
};

static const struct {
    unsigned algos;
    int learner;
} table[GB_NCOLS] = {
#define PROPS(col, name, algos, learner) [col] = {algos, learner},
    COLUMNS(PROPS)
#undef PROPS
};

const char *const *gb_contract_columns(void) { return names; }

int gb_contract_reports(int algo, int col)
{
    if (col < 0 || col >= GB_NCOLS || algo < 0 || algo > GB_ALGO_SAC)
        return 0;
    return (table[col].algos >> algo) & 1u;
}

int gb_contract_learner_column(int col)
{
    return col >= 0 && col < GB_NCOLS && table[col].learner;
}

void gb_run_rates_add(gb_run_rates *r, const double *row)
{
    r->t[r->next] = row[GB_COL_TIME];
    r->env[r->next] = row[GB_COL_ENV_STEPS];
    r->train[r->next] = row[GB_COL_TRAIN_STEPS];
    r->next = (r->next + 1) % GB_RUN_RATES_MAX;
    r->n += r->n < GB_RUN_RATES_MAX;
}

void gb_run_rates_fill(const gb_run_rates *r, double t0, double env0, double train0,
                       double *row)
{
    int k = 1, n = r ? r->n : 0, i = 0;
    for (; k <= n; k++) { /* newest first */
        i = (r->next - k + GB_RUN_RATES_MAX) % GB_RUN_RATES_MAX;
        if (row[GB_COL_TIME] - r->t[i] >= GB_RUN_RATE_WINDOW_S)
            break;
    }
    if (k <= n || n == GB_RUN_RATES_MAX) {
        t0 = r->t[i];
        env0 = r->env[i];
        train0 = r->train[i];
    }
    double dt = row[GB_COL_TIME] - t0;
    row[GB_COL_ENV_RATE] = dt > 0 ? (row[GB_COL_ENV_STEPS] - env0) / dt : 0;
    row[GB_COL_TRAIN_RATE] = dt > 0 ? (row[GB_COL_TRAIN_STEPS] - train0) / dt : 0;
}

double gb_contract_row_interval(const gb_config *cfg, double elapsed_s)
{
    double every = cfg->experiment.metrics_interval_s, early = elapsed_s / 10;
    early = early > GB_RUN_ROW_MIN_S ? early : GB_RUN_ROW_MIN_S;
    return early < every ? early : every;
}

const char *gb_contract_solved_by(const gb_config *cfg)
{
    return cfg->experiment.eval_every > 0 ? "evaluation" : "training_episodes";
}

int gb_contract_target_reached(const gb_config *cfg, int64_t episodes, double return_mean)
{
    const double target = cfg->experiment.target_return;
    return !isnan(target) && episodes >= GB_RUN_WINDOW && return_mean >= target;
}

/* Solved by the training episodes: their verdict, and the window at the target. */
static int solved(const gb_config *cfg, int64_t episodes, double return_mean)
{
    return cfg->experiment.eval_every <= 0 &&
           gb_contract_target_reached(cfg, episodes, return_mean);
}

const char *gb_contract_stop_reason(const gb_config *cfg, int64_t env_steps, int64_t episodes,
                                    double return_mean, double seconds)
{
    if (solved(cfg, episodes, return_mean))
        return "solved";
    if (cfg->experiment.max_env_steps > 0 && env_steps >= cfg->experiment.max_env_steps)
        return "max_env_steps";
    if (cfg->experiment.max_seconds > 0 && seconds >= cfg->experiment.max_seconds)
        return "max_seconds";
    return NULL;
}

void gb_contract_summary_init(gb_run_summary *s, const gb_config *cfg, const char *mode)
{
    memset(s, 0, sizeof *s);
    s->mode = mode;
    s->exit_reason = "error";
    s->solved_by = gb_contract_solved_by(cfg);
    s->episode_return_mean = NAN;
    s->target_return = cfg->experiment.target_return;
    s->actors = cfg->actors.count;
    s->policies = cfg->policy.count;
    s->trainers = cfg->trainer.count;
    s->envs = cfg->actors.count * cfg->actors.envs_per_actor;
    s->has_samples = 1;
    s->ledger_complete = 1;
    /* connections refused for want of the run's keys: counted where the config uses CURVE */
    s->auth_refused = gb_config_streams_curve(&cfg->streams) ? 0 : -1;
}
