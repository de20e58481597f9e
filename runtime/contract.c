/* runtime/contract.c: the run contract (see contract.h): metrics.csv's columns, which algorithm
 * reports which, the stop rules and summary.json's common fields. */
#include "runtime/contract.h"

#include <math.h>
#include <string.h>

#define PPO (1u << GB_ALGO_PPO)
#define DQN (1u << GB_ALGO_DQN)
#define SAC (1u << GB_ALGO_SAC)
#define ALL (PPO | DQN | SAC)

static const char *const names[GB_NCOLS] = {
    [GB_COL_TIME] = "time_s",
    [GB_COL_ENV_STEPS] = "env_steps",
    [GB_COL_ENV_RATE] = "env_steps_per_s",
    [GB_COL_TRAIN_STEPS] = "train_steps",
    [GB_COL_TRAIN_RATE] = "train_steps_per_s",
    [GB_COL_SAMPLES] = "samples_trained",
    [GB_COL_EPISODES] = "episodes",
    [GB_COL_RETURN] = "return_mean_100",
    [GB_COL_LENGTH] = "length_mean_100",
    [GB_COL_REPLAY_SIZE] = "replay_size",
    [GB_COL_REPLAY_FILL] = "replay_fill",
    [GB_COL_VERSION] = "policy_version",
    [GB_COL_SERVED] = "served_version_min",
    [GB_COL_LAG] = "version_lag",
    [GB_COL_LOSS] = "loss",
    [GB_COL_ENTROPY] = "entropy",
    [GB_COL_DROPS] = "sample_drops",
    [GB_COL_REJECTED] = "chunks_rejected",
    [GB_COL_SEGMENT] = "segment",
    [GB_COL_POLICY_LOSS] = "policy_loss",
    [GB_COL_VALUE_LOSS] = "value_loss",
    [GB_COL_KL] = "approx_kl",
    [GB_COL_Q] = "q_mean",
    [GB_COL_LR] = "lr",
    [GB_COL_COLLECT_MS] = "collect_ms",
    [GB_COL_TRAIN_MS] = "train_ms",
    [GB_COL_COLLECT_SHARE] = "collect_share",
    [GB_COL_CLIP_FRACTION] = "clip_fraction",
    [GB_COL_EXPLAINED_VAR] = "explained_var",
    [GB_COL_TD_ABS] = "td_abs_mean",
    [GB_COL_ALPHA] = "alpha",
    [GB_COL_EPSILON] = "epsilon",
    [GB_COL_GRAD_NORM] = "grad_norm",
};

/* the algorithms that report each column, and whether the learner reports it */
static const struct {
    unsigned algos;
    int learner;
} table[GB_NCOLS] = {
    [GB_COL_TIME] = {ALL, 0},
    [GB_COL_ENV_STEPS] = {ALL, 0},
    [GB_COL_ENV_RATE] = {ALL, 0},
    [GB_COL_TRAIN_STEPS] = {ALL, 0},
    [GB_COL_TRAIN_RATE] = {ALL, 0},
    [GB_COL_SAMPLES] = {ALL, 0},
    [GB_COL_EPISODES] = {ALL, 0},
    [GB_COL_RETURN] = {ALL, 0},
    [GB_COL_LENGTH] = {ALL, 0},
    [GB_COL_REPLAY_SIZE] = {ALL, 0},
    [GB_COL_REPLAY_FILL] = {ALL, 0},
    [GB_COL_VERSION] = {ALL, 0},
    [GB_COL_SERVED] = {ALL, 0},
    [GB_COL_LAG] = {ALL, 0},
    [GB_COL_LOSS] = {ALL, 1},
    [GB_COL_ENTROPY] = {PPO | SAC, 1},
    [GB_COL_DROPS] = {ALL, 0},
    [GB_COL_REJECTED] = {ALL, 0},
    [GB_COL_SEGMENT] = {ALL, 0},
    [GB_COL_POLICY_LOSS] = {PPO | SAC, 1},
    [GB_COL_VALUE_LOSS] = {ALL, 1},
    [GB_COL_KL] = {PPO, 1},
    [GB_COL_Q] = {DQN | SAC, 1},
    [GB_COL_LR] = {ALL, 1},
    [GB_COL_COLLECT_MS] = {ALL, 1},
    [GB_COL_TRAIN_MS] = {ALL, 1},
    [GB_COL_COLLECT_SHARE] = {ALL, 1},
    [GB_COL_CLIP_FRACTION] = {PPO, 1},
    [GB_COL_EXPLAINED_VAR] = {PPO, 1},
    [GB_COL_TD_ABS] = {DQN | SAC, 1},
    [GB_COL_ALPHA] = {SAC, 1},
    [GB_COL_EPSILON] = {DQN, 1},
    [GB_COL_GRAD_NORM] = {ALL, 1},
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

int gb_contract_solved(const gb_config *cfg, int64_t episodes, double return_mean)
{
    const double target = cfg->experiment.target_return;
    return !isnan(target) && episodes >= GB_RUN_WINDOW && return_mean >= target;
}

const char *gb_contract_stop_reason(const gb_config *cfg, int64_t env_steps, int64_t episodes,
                                    double return_mean, double seconds)
{
    if (gb_contract_solved(cfg, episodes, return_mean))
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
