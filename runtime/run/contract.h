/* runtime/run/contract.h: the run contract: what every run (inline, local, Slurm) reports, when it
 * stops and what it records, written once for inline mode (workers/roles/inline.c), the trainer
 * (workers/roles/trainer.c) and the launcher (launch/run_local.c) (docs/design.md, "The run
 * contract").
 *
 * metrics.csv: one row every experiment.metrics_interval_s, denser in a run's first seconds
 * (gb_contract_row_interval: every 0.1 s in the first second, then a tenth of the time so far,
 * so that a run of a second or two has a curve), these columns in this order (new
 * columns go at the end: a resumed run's metrics.csv from an earlier gearbox is widened,
 * gb_rundir_metrics_continue). Empty: NaN, a statistic the algorithm has not, or nothing yet.
 *
 *   column              algorithms   distributed run (launcher)          inline run
 *   time_s              all          seconds, over every segment         seconds
 *   env_steps           all          steps in the chunks actors sent     steps taken
 *   env_steps_per_s     all          over the last GB_RUN_RATE_WINDOW_S  same
 *   train_steps         all          the trainers' largest               the learner's
 *   train_steps_per_s   all          over the last GB_RUN_RATE_WINDOW_S  same
 *   samples_trained     all          sum over trainers                   the learner's
 *   episodes            all          episodes finished                   same
 *   return_mean_100     all          mean of the last GB_RUN_WINDOW       same
 *   length_mean_100     all          mean of the last GB_RUN_WINDOW       empty (not counted)
 *   replay_size         all          sum over trainers                   the replay's
 *   replay_fill         all          size / capacity                     same
 *   policy_version      all          the trainers' largest published     the model's
 *   served_version_min  all          the policy workers' smallest        the model's
 *   version_lag         all          policy_version - served, >= 0       0
 *   loss                all          trainer 0's (learner statistic)     the learner's
 *   entropy             PPO SAC      trainer 0's (learner statistic)     the learner's
 *   sample_drops        all          sum over actors                     0 (no stream)
 *   chunks_rejected     all          sum over trainers                   0 (no stream)
 *   segment             all          0, +1 per --resume                  0
 *   policy_loss         PPO SAC      learner statistic                   the learner's
 *   value_loss          all          learner statistic                   the learner's
 *   approx_kl           PPO          learner statistic                   the learner's
 *   q_mean              DQN SAC      learner statistic                   the learner's
 *   lr                  all          learner statistic                   the learner's
 *   collect_ms          all          trainer 0's, per step since last    the learner's
 *   train_ms            all          trainer 0's, per step since last    the learner's
 *   collect_share       all          collect_ms / train_ms               same
 *   clip_fraction       PPO          learner statistic                   the learner's
 *   explained_var       PPO          learner statistic                   the learner's
 *   td_abs_mean         DQN SAC      learner statistic                   the learner's
 *   alpha               SAC          learner statistic                   the learner's
 *   epsilon             DQN          exploration at the run's env steps  same
 *   grad_norm           all          learner statistic                   the learner's
 *   trained_share       all          chunks trained on at least once /   same, of the chunks
 *                                    chunks the trainers received        inserted
 *
 * A learner statistic (gb_contract_learner_column) is what the algorithm computes in its last
 * training step (workers/torch/bridge.h, gb_torch_stats); a trainer reports it as a metric of
 * the column's name and the launcher takes trainer 0's. "Trained": the process's learner has
 * taken a gradient step (gb_torch_stats.gradient_steps > 0); before that every learner
 * statistic is empty (a resumed or restarted learner's train_steps count from its checkpoint,
 * its statistics do not). One implementation for both: workers/roles/learner_report.h.
 *
 * Stop rules (gb_contract_stop_reason), checked after every report and in this order:
 *   solved          experiment.target_return is set and the verdict (gb_contract_solved_by) says
 *                   the policy reached it:
 *                   "training_episodes" (experiment.eval_every 0, and every inline run): at
 *                   least GB_RUN_WINDOW episodes finished and the mean return of the last
 *                   GB_RUN_WINDOW (the training episodes, exploration included) reached it;
 *                   "evaluation" (experiment.eval_every > 0, distributed runs): an evaluation of
 *                   the policy (experiment.eval_episodes deterministic episodes of a checkpoint,
 *                   launch/evals.h) had a mean return at or above it. The training episodes'
 *                   window reaching the target (gb_contract_target_reached) only starts such
 *                   an evaluation at once; one that falls short lets the run go on. One
 *                   that was running when a budget below stopped the run, or that plays the
 *                   final checkpoint then, still decides: the policy it played was trained
 *                   within the budget
 *   max_env_steps   env_steps (the column) reached experiment.max_env_steps (> 0)
 *   max_seconds     time_s (the column) reached experiment.max_seconds (> 0)
 * Besides these a run ends "interrupted" (SIGINT, SIGTERM), and a distributed one
 * "worker_died", "worker_failed", "unusable_data" or "error" (runtime/run/rundir.h).
 *
 * summary.json (runtime/run/rundir.h, gb_run_summary): the same keys in every mode for one config:
 * mode, env_steps, env_steps_unsent, train_steps, wall_seconds, episode_return_mean (the
 * training episodes' mean when the stop was decided: the last metrics.csv row's return_mean_100),
 * episodes, target_return, solved (the stop rule said solved), solved_by ("evaluation" or
 * "training_episodes": what solved rests on), evaluation (null, or the evaluation that decided,
 * else the last that finished: return_mean, return_std, length_mean, episodes, env_steps,
 * checkpoint_step, reached_target, held: the trainers held at its checkpoint while it played,
 * so that one that decided is the run's final policy), evaluations (how many finished),
 * exit_reason, error (when the run failed), workers {actors, policies, trainers, joined,
 * joined_restarts}, envs, reports_rejected (metrics reports the launcher refused), auth_refused
 * (CURVE runs), resumed (a resumed run), samples {chunks_sent, dropped,
 * chunks_received, discarded_at_stop, nonfinite, rejected, lost_in_crash, lost, chunks_trained,
 * trained_share} (an inline run's chunks go straight into its replay: sent = received, lost 0;
 * chunks_trained: received chunks a learner drew at least once, the rest expired as stale,
 * were evicted or were still waiting), restarts [], trackers {NAME: {ok, error, log}} (with
 * experiment.trackers, once they finished).
 * defines: GB_RUN_WINDOW, GB_RUN_ROW_MIN_S, GB_RUN_RATE_WINDOW_S, gb_run_col, gb_run_rates,
 *          gb_run_rates_add, gb_run_rates_fill, gb_contract_* */
#ifndef GB_RUNTIME_CONTRACT_H
#define GB_RUNTIME_CONTRACT_H

#include "runtime/config/config.h"
#include "runtime/run/rundir.h"

#include <stdint.h>

#define GB_RUN_WINDOW 100 /* episodes in return_mean_100, length_mean_100 and "solved" */
#define GB_RUN_ROW_MIN_S 0.1 /* the shortest time between rows (gb_contract_row_interval) */
#define GB_RUN_RATE_WINDOW_S 2.0 /* the rates in rows: over about this long (gb_run_rates) */

/* metrics.csv's columns, in order (the table above). */
typedef enum gb_run_col {
    GB_COL_TIME, GB_COL_ENV_STEPS, GB_COL_ENV_RATE, GB_COL_TRAIN_STEPS, GB_COL_TRAIN_RATE,
    GB_COL_SAMPLES, GB_COL_EPISODES, GB_COL_RETURN, GB_COL_LENGTH, GB_COL_REPLAY_SIZE,
    GB_COL_REPLAY_FILL, GB_COL_VERSION, GB_COL_SERVED, GB_COL_LAG, GB_COL_LOSS, GB_COL_ENTROPY,
    GB_COL_DROPS, GB_COL_REJECTED, GB_COL_SEGMENT, GB_COL_POLICY_LOSS, GB_COL_VALUE_LOSS,
    GB_COL_KL, GB_COL_Q, GB_COL_LR, GB_COL_COLLECT_MS, GB_COL_TRAIN_MS, GB_COL_COLLECT_SHARE,
    GB_COL_CLIP_FRACTION, GB_COL_EXPLAINED_VAR, GB_COL_TD_ABS, GB_COL_ALPHA, GB_COL_EPSILON,
    GB_COL_GRAD_NORM, GB_COL_TRAINED_SHARE, GB_NCOLS
} gb_run_col;

/* The rows written lately (time, env steps, train steps), for env_steps_per_s and
 * train_steps_per_s: over about GB_RUN_RATE_WINDOW_S in every mode. A distributed run's counts
 * move only when the workers' reports come (a rate since the last row would read 0 between
 * reports, and double after); an inline run's final row can follow the one before by a
 * moment. Zeroed: none. */
#define GB_RUN_RATES_MAX 64
typedef struct gb_run_rates {
    double t[GB_RUN_RATES_MAX], env[GB_RUN_RATES_MAX], train[GB_RUN_RATES_MAX];
    int n, next;
} gb_run_rates;

/* Notes the row just written (row[GB_NCOLS]). */
void gb_run_rates_add(gb_run_rates *r, const double *row);

/* Fills row's rates from its time, env steps and train steps: against the newest row written
 * at least GB_RUN_RATE_WINDOW_S before it, else the start (t0, env0, train0: where this launch
 * began), else (the rows kept are all newer) the oldest row kept. r may be NULL (the start). */
void gb_run_rates_fill(const gb_run_rates *r, double t0, double env0, double train0,
                       double *row);

/* metrics.csv's header: the names of the columns, [GB_NCOLS] in order. Static storage. */
const char *const *gb_contract_columns(void);

/* 1 when algorithm algo (gb_algorithm) reports column col, else 0 (its cell stays empty). */
int gb_contract_reports(int algo, int col);

/* 1 when col is reported by the learner (a trainer's metric of the column's name): the learner
 * statistics, epsilon, collect_ms, train_ms and collect_share. */
int gb_contract_learner_column(int col);

/* Seconds from a row of metrics.csv to the next, and from a worker's report to its next, at
 * elapsed_s seconds into the run (or into the worker's process): elapsed_s / 10, at least
 * GB_RUN_ROW_MIN_S, at most experiment.metrics_interval_s (which also bounds the least). */
double gb_contract_row_interval(const gb_config *cfg, double elapsed_s);

/* What a run of cfg's verdict rests on: "evaluation" when experiment.eval_every > 0, else
 * "training_episodes" (a static string). */
const char *gb_contract_solved_by(const gb_config *cfg);

/* 1 when the training episodes reach the target: one is set, at least GB_RUN_WINDOW episodes
 * finished and return_mean (the last GB_RUN_WINDOW's) is at or above it; else 0. */
int gb_contract_target_reached(const gb_config *cfg, int64_t episodes, double return_mean);

/* Why the run stops now by the stop rules above ("solved", "max_env_steps", "max_seconds"; a
 * static string), or NULL to go on. episodes: those in the mean return's window (a resumed
 * run's launcher counts this segment's); seconds: time_s, over every segment. With the verdict
 * by evaluation the training episodes never say solved here: the caller says solved once an
 * evaluation reached the target (launch/evals.h), before asking this. */
const char *gb_contract_stop_reason(const gb_config *cfg, int64_t env_steps, int64_t episodes,
                                    double return_mean, double seconds);

/* Starts a summary of a run of cfg in mode ("inline", "local", "slurm"): zeroes *s and fills
 * what the config says (target, worker counts, environment copies, whether auth_refused is
 * recorded) and the keys every mode writes (samples). The caller fills the rest. */
void gb_contract_summary_init(gb_run_summary *s, const gb_config *cfg, const char *mode);

#endif
