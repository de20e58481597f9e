/* runtime/run/rundir.h: a run's directory (docs/design.md), for every launch mode:
 *   <run_root>/<name>/<UTC timestamp>/ (or launch.run_dir, or --run-dir):
 *     config.yaml    the resolved config (loads back to the same structs)
 *     metrics.csv    one header line, then one row per report (columns chosen by the writer)
 *     tb/            the same rows as TensorBoard scalars (runtime/run/tensorboard.h), step =
 *                    the row's env_steps; evaluations' results and videos (launch/evals.h)
 *     videos/        evaluation videos (experiment.eval_every)
 *     logs/          <role>-<index>.log per worker
 *     checkpoints/   model/optimiser (and replay) checkpoints
 *     summary.json   written when the run ends (atomically: temporary file, then rename)
 *     sockets/       the workers' ipc sockets, or a link to their short folder in /tmp when this
 *                    one is too deep for socket paths (runtime/streams/endpoint.h)
 *     run.lock       flock'ed by the run for its whole life (the launcher's pid inside): one
 *                    live run a directory
 * A run also has an entry in the run table of this machine ($GEARBOX_RUN_TABLE, else
 * /tmp/gearbox-runs-<uid>/<id>, naming the run's folder) until it ends cleanly; a later run
 * removes what a run that died left (ipc socket files in sockets/ or the short folder it links
 * to, runtime/streams/endpoint.h; POSIX shm segments named /gearbox-<id>-*) once no process
 * holds that run's lock.
 * defines: gb_rundir, gb_run_summary, gb_rundir_create, gb_rundir_reopen, gb_rundir_file,
 *          gb_rundir_metrics_open, gb_rundir_metrics_continue, gb_rundir_metrics_row,
 *          gb_rundir_tb_scalars, gb_rundir_tb_image, gb_rundir_write_summary, gb_rundir_close,
 *          gb_rundir_reap_dead, gb_rundir_lock, gb_rundir_register, gb_rundir_unlock,
 *          gb_rundir_json_string */
#ifndef GB_RUNTIME_RUNDIR_H
#define GB_RUNTIME_RUNDIR_H

#include "runtime/config/config.h"
#include "runtime/base/error.h"

#include <stdint.h>
#include <stdio.h>

#define GB_RUNDIR_PATH_MAX 1024

typedef struct gb_rundir {
    char path[GB_RUNDIR_PATH_MAX]; /* the run's folder, no trailing slash */
    FILE *metrics;                 /* metrics.csv once opened */
    int metrics_columns;
    const char *const *metrics_names; /* its header (the caller's array) */
    int metrics_step;              /* the column "env_steps" (TensorBoard's step), or -1 */
    struct gb_tensorboard *tb;     /* tb/'s events file, open with metrics.csv */
    int lock_fd, locked;           /* run.lock, held while locked */
    char id[17];                   /* gb_shm_run_id of the run (shm names, run table) */
    char table_entry[GB_RUNDIR_PATH_MAX + 32]; /* this run's entry in the run table, or "" */
} gb_rundir;

/* One restart of a worker by the launcher (launch.restart). */
typedef struct gb_run_restart {
    char worker[32];  /* "actor-3" */
    char reason[160]; /* "killed by signal 9 (Killed)", "hung: no report for 4.1 s" */
    double at_s;      /* seconds into the run */
} gb_run_restart;

/* An evaluation of a run's policy (`gearbox eval --deterministic` on a checkpoint; launch/evals.h):
 * summary.json's "evaluation". */
typedef struct gb_run_eval {
    int valid;                  /* 0: none ran (written as null) */
    double return_mean, return_std, length_mean;
    int64_t episodes;           /* episodes it played */
    int64_t env_steps;          /* the run's env steps when it started */
    int64_t checkpoint_step;    /* the training step of the checkpoint it played */
    int reached_target;         /* return_mean >= the config's target_return */
    int held;                   /* the trainers were held at that checkpoint while it played
                                   (experiment.eval_hold): deciding, it is the final policy */
} gb_run_eval;

/* An experiment tracker's outcome (experiment.trackers, launch/trackers.h): in summary.json's
 * "trackers" as {"NAME": {"ok", "error", "log": "logs/tracker-NAME.log"}}. */
typedef struct gb_run_tracker {
    const char *name;  /* "mlflow", "wandb" */
    const char *error; /* NULL: it logged the whole run */
} gb_run_tracker;

/* What summary.json records (docs/design.md, "The run contract"; runtime/run/contract.h lists the
 * keys), plus where the run stopped. */
typedef struct gb_run_summary {
    const char *mode;           /* "inline", "local", "slurm" */
    int64_t env_steps;          /* steps in the chunks the actors sent to the trainers */
    int64_t env_steps_unsent;   /* steps taken whose chunks never left an actor: still being
                                   filled when the run stopped, or dropped (local runs) */
    int64_t train_steps;
    double wall_seconds;
    double episode_return_mean; /* of the last (up to) 100 episodes when the run was stopped
                                   (what `solved` was judged on); NAN when none ended */
    int64_t episodes;           /* episodes finished */
    double target_return;       /* NAN when the config has none */
    int solved;                 /* the stop rule said solved (runtime/run/contract.h) */
    const char *solved_by;      /* what `solved` rests on: "evaluation" (evaluations of the
                                   policy decide) or "training_episodes" (the mean of the last
                                   100 training episodes decides) */
    gb_run_eval evaluation;     /* the evaluation that decided (solved by evaluation), else the
                                   last one that finished; valid 0: none */
    int64_t evaluations;        /* evaluations that finished with results */
    const char *exit_reason;    /* "solved", "max_env_steps", "max_seconds", "interrupted",
                                   "worker_died", "worker_failed" (one failed or had to be
                                   killed while the run stopped), "unusable_data" (every chunk
                                   for a long stretch held NaN or infinity), "error" */
    const char *error;          /* the cause whenever the run failed, else NULL */
    int64_t actors, policies, trainers; /* worker counts (inline: 0 processes of each, see mode) */
    int64_t envs;               /* environment copies in all rings */
    /* The sample-stream ledger (local runs; omitted when has_samples is 0): chunks the actors
     * queued, dropped after streams.sample_send_timeout, and the trainers received (of which
     * discarded_at_stop arrived after training stopped). lost = sent - received: chunks that
     * left an actor and never reached a trainer; known only when ledger_complete (every actor
     * and trainer sent its final report), else written as null. Of received, nonfinite held a
     * NaN or an infinity and were not stored. rejected: malformed or not from the run's actors,
     * outside this ledger (never in sent nor in received). */
    int has_samples, ledger_complete;
    int64_t chunks_sent, chunks_dropped, chunks_received, chunks_discarded;
    /* chunks that actors which were killed or died had sent (their last report, or the highest
     * chunk number a trainer got from them) and no trainer received, and chunks that went down
     * with a killed trainer (workers/roles/trainer_ledger.h); part of chunks_sent, so
     * lost = sent - received - lost_in_crash (0 when nothing else went missing) */
    int64_t chunks_lost_in_crash;
    const gb_run_restart *restarts; /* [nrestarts] in order */
    int nrestarts;
    const gb_run_tracker *trackers; /* [ntrackers]; 0: none asked for, or not finished yet */
    int ntrackers;
    int64_t chunks_nonfinite, chunks_rejected;
    int64_t chunks_trained; /* of received, drawn by a learner at least once (replay counters) */
    int64_t joined;       /* workers that joined from other hosts (gearbox join; relays too) */
    int64_t joined_restarts; /* of those, restarts by their gearbox join (trainers, policy
                                workers, relays: launch/joins.h) */
    int64_t reports_rejected; /* metrics reports the launcher refused: malformed, from no
                                 worker of the run, an incarnation it did not issue, or values
                                 the run cannot have (runtime/run/metrics.h) */
    int64_t registry_rejected; /* registry requests refused: malformed, or beyond the sender's
                                  identity (another's name, runtime/streams/registry.h) */
    int64_t auth_refused; /* connections refused for want of the run's CURVE keys, by the
                             launcher and every worker; -1: the run uses no CURVE */
    /* A resumed run (gearbox run --resume): env_steps, episodes and wall_seconds count over
     * every segment; segment is this launch's number (0: not resumed, then nothing is written),
     * segment_env_steps where it started, segment_seconds its own wall time, trainer_sets_left
     * the trainers' checkpoint sets it did not restore (trainer.count lowered since they were
     * written). The sample ledger and restarts are this segment's. */
    int segment, trainer_sets_left;
    int64_t segment_env_steps;
    double segment_seconds;
} gb_run_summary;

/* Creates the run folder and its logs/ and checkpoints/ subfolders, locks it (run.lock) and
 * writes config.yaml; first removes what dead runs left (gb_rundir_reap_dead).
 * dir: an explicit folder (--run-dir) or NULL; then launch.run_dir, else
 * <experiment.run_root>/<experiment.name>/<YYYYmmddTHHMMSSZ> (a "-N" suffix when that exists).
 * Parents are created as needed; an explicit folder may exist but must not be in use by a live
 * run (the message names the pid holding the lock) nor hold an earlier run (config.yaml,
 * metrics.csv or summary.json: its metrics and checkpoints are never overwritten). Returns 0,
 * GB_ESYS or GB_EINVAL. */
int gb_rundir_create(gb_rundir *rd, const gb_config *cfg, const char *dir, gb_error *err);

/* Opens an earlier run's folder again to continue it (gearbox run --resume): first removes what
 * dead runs left (gb_rundir_reap_dead: the run's own shm segments too, so a resume starts from
 * its checkpoints on disk); then takes run.lock (GB_EINVAL naming the holder while another
 * process of any run holds it), enters the run table, moves an ended segment's summary.json to
 * summary.<k>.json (the first free k) and writes config.yaml anew from cfg (the old one with the
 * resume's --set overrides). dir must hold config.yaml. Returns 0, GB_ESYS or GB_EINVAL. */
int gb_rundir_reopen(gb_rundir *rd, const gb_config *cfg, const char *dir, gb_error *err);

/* mkdir -p path: creates it and every missing folder above it. Returns 0, GB_EINVAL (empty, too
 * long, or it exists and is not a folder) or GB_ESYS (a mkdir or stat failed, named). */
int gb_rundir_make_dirs(const char *path, gb_error *err);

/* Writes "<run>/<rel>" into out (size n). Returns 0 or GB_EINVAL when it does not fit. */
int gb_rundir_file(const gb_rundir *rd, const char *rel, char *out, size_t n, gb_error *err);

/* Opens metrics.csv and writes its header (ncol names), and a new TensorBoard events file in
 * tb/. names must stay valid until gb_rundir_close. Returns 0 or GB_ESYS. */
int gb_rundir_metrics_open(gb_rundir *rd, const char *const *names, int ncol, gb_error *err);

/* For a reopened run: opens metrics.csv to append after its rows, once its header is exactly
 * names; last[0..ncol) gets its last complete row (NaN for empty fields; all NaN when it has
 * none, and a missing or empty file is started as gb_rundir_metrics_open does). A header that
 * is the start of names (written by an earlier gearbox, before columns were appended) is first
 * widened: the file is rewritten with names and its rows with the new columns empty. Opens a
 * new TensorBoard events file in tb/ beside the earlier segments' (names as for
 * gb_rundir_metrics_open). Returns 0, GB_EINVAL (other columns), GB_ECORRUPT or GB_ESYS. */
int gb_rundir_metrics_continue(gb_rundir *rd, const char *const *names, int ncol, double *last,
                               gb_error *err);

/* Appends one row of ncol values (as the header; NaN written empty) and flushes, so a crashed
 * run keeps its rows; writes the same values to tb/ as one TensorBoard event (its finite ones,
 * step = the env_steps column) and flushes that too. Returns 0, GB_EINVAL (column count) or
 * GB_ESYS (a write failed: metrics.csv's or tb/'s). */
int gb_rundir_metrics_row(gb_rundir *rd, const double *values, int ncol, gb_error *err);

/* More values for tb/'s events file beside the metrics rows (an evaluation's, launch/evals.h):
 * gb_tensorboard_scalars and gb_tensorboard_image on the run's open writer, flushed. A no-op
 * returning 0 before metrics.csv is open (no writer yet). Returns as those: 0, GB_EINVAL,
 * GB_ENOMEM or GB_ESYS (a write failed: a full disk ends the run, as metrics.csv's). */
int gb_rundir_tb_scalars(gb_rundir *rd, int64_t step, const char *const *tags,
                         const double *values, int n, gb_error *err);
int gb_rundir_tb_image(gb_rundir *rd, int64_t step, const char *tag, int height, int width,
                       int colorspace, const void *bytes, size_t len, gb_error *err);

/* Writes summary.json (temporary file + rename). Returns 0 or GB_ESYS. */
int gb_rundir_write_summary(const gb_rundir *rd, const gb_run_summary *s, gb_error *err);

/* Closes metrics.csv and, once the run's processes have ended, removes its socket files and
 * shm segments and its run-table entry, and releases the lock. */
void gb_rundir_close(gb_rundir *rd);

/* Goes through the run table and, for every run whose lock no live process holds, removes its
 * socket files and shm segments and its entry. Never touches a live run. Returns the number of
 * dead runs reaped, or GB_ESYS/GB_EINVAL when the table cannot be read. */
int gb_rundir_reap_dead(gb_error *err);

/* Parts of gb_rundir_create: takes run.lock (GB_EINVAL naming the holder's pid when taken);
 * enters the run in the run table; and, in gb_rundir_close, undoes both. The lock descriptor is
 * inherited by the processes the run starts, so it is held while any of them lives. */
int gb_rundir_lock(gb_rundir *rd, gb_error *err);
int gb_rundir_register(gb_rundir *rd, gb_error *err);
void gb_rundir_unlock(gb_rundir *rd);

/* Writes s to f as a JSON string: quoted, with '"', '\\' and control characters escaped (bytes
 * from 0x80 as they are: UTF-8 stays UTF-8). NULL is written as "". For summary.json and the
 * JSON other commands write beside it (gearbox eval). */
void gb_rundir_json_string(FILE *f, const char *s);

#endif
