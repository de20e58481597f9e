/* launch/run_rows.h: a distributed run's metrics.csv rows: the run contract's columns
 * (runtime/run/contract.h) from the workers' reports, where a resumed run's counters go on from,
 * and the progress line.
 * defines: gb_run_base, gb_run_rows_base, gb_run_rows_sample, gb_run_rows_progress,
 *          gb_run_vouch, gb_run_rows_received_steps, gb_run_rows_sent_steps,
 *          gb_run_rows_vouched,
 *          gb_run_rows_env_steps, gb_run_rows_reports_rejected, gb_run_rows_auth_refused,
 *          gb_run_resume_sets */
#ifndef GB_LAUNCH_RUN_ROWS_H
#define GB_LAUNCH_RUN_ROWS_H

#include "runtime/config/config.h"
#include "runtime/run/contract.h"
#include "runtime/run/metrics.h"
#include "runtime/streams/curve.h"

/* Where a resumed run's counters go on from (all 0 for a run's first launch): its metrics.csv's
 * last row. Env steps, episodes, samples and time add up over segments; train steps come from
 * the trainers, which restore theirs with the model. */
typedef struct gb_run_base {
    double time, env_steps, episodes, samples, train_steps;
    int segment;   /* this launch's: 0, +1 per resume */
    int sets_left; /* trainers' checkpoint sets this resume does not restore (gb_run_resume_sets) */
} gb_run_base;

/* The base after a run whose last metrics.csv row is last[GB_NCOLS] (empty cells NaN). */
void gb_run_rows_base(const double *last, gb_run_base *b);

/* A resume's trainers (cfg's) against the run's checkpoint sets (run_dir/checkpoints/trainer-K),
 * logged: with trainer.count changed since they were written, a set of a trainer at or past the
 * count is not restored (a warning names it, its step and replay; it stays on disk, where a
 * resume with more trainers takes it up), and a trainer the launcher starts (joined ones keep
 * their sets on their own hosts) without a set starts from the group's parameters (trainer 0's,
 * restored) with an empty replay. Returns the sets left unrestored. */
int gb_run_resume_sets(const char *run_dir, const gb_config *cfg);

/* Fills row[GB_NCOLS] at t seconds into this launch from m's reports (b: where a resumed run
 * goes on from; rates: the rows written so far, for the rates, runtime/run/contract.h). */
void gb_run_rows_sample(const gb_metrics_collector *m, double t, const gb_run_rates *rates,
                        const gb_run_base *b, double *row);

/* What the trainers vouch for (runtime/run/metrics.h: a report is a claim): the steps in the
 * chunks they received (env_steps_received), against which the episodes that decide a run are
 * checked. need: the steps the episodes had claimed when the window first reached the target;
 * 0 while it has not. */
typedef struct gb_run_vouch {
    int64_t need;
    int said; /* the deferral was logged */
} gb_run_vouch;

/* The steps every trainer received (their env_steps_received summed; 0 before any report), and
 * the steps the actors say they sent in chunks (env_steps_sent summed). A row's env_steps is the
 * smaller of the two (over this segment). */
double gb_run_rows_received_steps(const gb_metrics_collector *m);
double gb_run_rows_sent_steps(const gb_metrics_collector *m);

/* Whether the training episodes' window, which reached the target (reached = 1) or not, may
 * decide the run: only once the trainers have received at least the steps every episode so far
 * claims (the actors report an episode before its last chunk reaches a trainer: the verdict waits
 * for those chunks rather than taking the claim). Returns 1 when it may; v keeps the claim. */
int gb_run_rows_vouched(const gb_metrics_collector *m, int reached, gb_run_vouch *v);

/* The env steps a run counts at its end (summary.json): b's plus the steps in the chunks the
 * actors say they sent, at most b's plus what the trainers received; says so in the log when it
 * cuts the claim. */
int64_t gb_run_rows_env_steps(const gb_metrics_collector *m, const gb_run_base *b);

/* Reports the collector refused: malformed, from no worker of the run, or for what they say. */
int64_t gb_run_rows_reports_rejected(const gb_metrics_collector *m);

/* Connections refused for want of the run's keys: the launcher's own sockets (curve) and every
 * worker's (their reports in m, NULL: none); -1 without CURVE (curve NULL). */
int64_t gb_run_rows_auth_refused(const gb_metrics_collector *m, const gb_curve *curve);

/* Writes the progress line of row to stderr: in place (live: a terminal) or one line each. */
void gb_run_rows_progress(const double *row, int live);

#endif
