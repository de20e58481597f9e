/* launch/evals.h: evaluations during a run (experiment.eval_every): each time the run's
 * env steps cross the next multiple of eval_every, the launcher starts `gearbox eval` as a child
 * process on the newest checkpoint (checkpoints/trainer-0), which writes
 * RUN_DIR/videos/eval_<env_steps>.mp4 (eval_episodes deterministic episodes), the same as a small
 * animated GIF, RUN_DIR/videos/eval_<env_steps>.gif, and its returns as
 * RUN_DIR/videos/eval_<env_steps>.json; its messages go to RUN_DIR/logs/eval_<env_steps>.log.
 * The run never waits for it. When it has ended well, the launcher logs it to the run's
 * TensorBoard file (tb/, through the run directory's writer) at step <env_steps>: the scalars
 * eval/return_mean, eval/return_std and eval/length_mean of its JSON, and the GIF as the image
 * eval/video (how tensorboardX and PyTorch's add_video log videos: TensorBoard's image plugin
 * plays it); a GIF over GB_EVALS_GIF_MAX bytes is left out with a warning. One evaluation
 * runs at a time: a crossing while one runs, or before a checkpoint newer than the last one
 * evaluated exists, waits for that (crossings in between merge into one). <env_steps> is the
 * run's count when the evaluation starts, or for a held one when it asks for its hold (its
 * process starts then).
 *
 * Each evaluation plays the set checkpoints/evaluating.checkpoint: trainer 0's newest model,
 * hard-linked when the evaluation starts (the trainer's next set removes its own files, not the
 * link), so the step an evaluation reports is the policy it played.
 *
 * The verdict (runtime/run/contract.h): with eval_every > 0 and a target_return, evaluations
 * decide whether the run is solved. Each one's mean return is compared with the target; the
 * first at or above it makes gb_evals.solved 1 and is kept as gb_evals.decided (logged, and in
 * summary.json), and its policy is kept as the set checkpoints/solved.checkpoint (a plain
 * `gearbox eval RUN_DIR` of a run that ended solved plays it; `--checkpoint trainer-0` the last
 * one, the same policy when the evaluation was held, else a few steps later). When the
 * training episodes' window reaches the target the launcher asks for an evaluation at once
 * (gb_evals_verdict_due): it waits for a checkpoint written after the ask (trainer 0 writes one
 * when asked, runtime/streams/runctl.h) and makes no video (it is for the verdict; its report is
 * RUN_DIR/videos/eval_<env_steps>.json all the same). One that falls short lets the run go on;
 * the next such evaluation waits for a newer checkpoint and for at least as long as the last
 * one took, so evaluations take at most about half the launcher's time while the window stays
 * at the target.
 *
 * Held evaluations (experiment.eval_hold, with a verdict): every evaluation, a crossing's or
 * the verdict's, asks trainer 0 for a checkpoint and a hold (gb_runctl_server_request_hold):
 * trainer 0 writes the checkpoint, then the trainers take no step, and trainer 0 reports the
 * request it holds at (its metric "held"; its train_steps are then the step). The
 * evaluation plays that checkpoint; one that falls short (or fails) releases the hold and the
 * run goes on; one that reaches the target keeps it, so the run ends on the policy it evaluated:
 * the trainers' final checkpoint is that policy. A trainer 0 that does not hold within
 * hold_wait_s (experiment.eval_hold_wait_s: a restart, a checkpoint that takes long) is not
 * waited for: the hold is released and that evaluation plays the newest checkpoint, as without
 * the hold. Its process starts with the ask and makes its environment (and loads libtorch where
 * libtorch will play: launch/eval_policy.h) while trainer 0 writes the checkpoint (`gearbox eval
 * --wait-stdin`), then plays on its go: a plain MLP's policy file in about 0.05 s, a
 * libtorch model's in 0.5 s and more. A held crossing's video is filmed after its verdict, by a
 * second child (GB_EVALS_FILM) that plays its first episode again (deterministic and seeded
 * alike: the same episode), so that the hold lasts only the episodes, not the encoding.
 * defines: gb_evals, gb_evals_opts, gb_evals_init, gb_evals_poll,
 *          gb_evals_verdict_due, gb_evals_finish */
#ifndef GB_LAUNCH_EVALS_H
#define GB_LAUNCH_EVALS_H

#include "runtime/base/error.h"
#include "runtime/run/rundir.h"
#include "runtime/streams/runctl.h"

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#define GB_EVALS_GIF_MAX (4 << 20) /* bytes of a GIF logged to TensorBoard */

enum { GB_EVALS_PLAY, GB_EVALS_PLAY_FILM, GB_EVALS_FILM }; /* what an evaluation child does */

typedef struct gb_evals {
    int64_t every, episodes, seed; /* 0 every: off, every call a no-op */
    double target;                 /* the verdict's target_return; NAN: no verdict */
    int64_t next;                  /* env steps that trigger the next evaluation */
    int pending;                   /* a crossing waits for a checkpoint or the running child */
    int pending_verdict;           /* an evaluation for the verdict waits likewise */
    int64_t want_step;             /* ... for a checkpoint of at least this training step */
    int64_t last_step;             /* training step of the checkpoint last evaluated; -1 none */
    pid_t pid;                     /* the running `gearbox eval`; 0 none */
    char pid_set[32];              /* the checkpoint set it plays ("evaluating": pinned) */
    int64_t pid_env_steps;         /* its <env_steps> */
    double pid_started;            /* when it started (gb_now_s) */
    int pid_mode;                  /* what it does: GB_EVALS_PLAY, _PLAY_FILM or _FILM */
    int pid_verdict;               /* it is the verdict's (no crossing's) */
    int film_after;                /* a held crossing's video is filmed once it ends */
    int go_fd;                     /* a held evaluation's process waits for its go here; -1 */
    int pid_dropped;               /* its process stopped before its go: nothing to play yet */
    double quiet_until;            /* no evaluation for the verdict is asked before this */
    gb_runctl_server *ctl;         /* where checkpoints (and holds) are asked for; NULL: none */
    int hold;                      /* held evaluations (see the top) */
    int64_t hold_req;              /* the held request asked for and not released; 0: none */
    double hold_asked;             /* when it was asked (gb_now_s) */
    double hold_wait_s;            /* the longest it is waited for (gb_evals_opts) */
    int64_t holds, hold_missed;    /* held evaluations started; holds not met in time */
    int64_t started, failed;       /* counts, for the log */
    int64_t logged;                /* videos logged to TensorBoard (eval/video) */
    int64_t finished;              /* evaluations that ended with results */
    gb_run_eval last;              /* the last of those (valid 0: none) */
    int solved;                    /* an evaluation reached the target: it is decided */
    gb_run_eval decided;
    gb_rundir *rd;                 /* the run's directory (its TensorBoard writer); NULL: none */
    char run_dir[2048], exe[PATH_MAX];
} gb_evals;

typedef struct gb_evals_opts {
    gb_rundir *rd;          /* the run's directory: NULL, nothing is logged to TensorBoard */
    const char *run_dir, *exe; /* its path; the gearbox executable */
    int64_t every, episodes, seed; /* every `every` env steps (0: off), `episodes` episodes */
    double target;          /* the verdict's target (NAN: no verdict, as with every 0) */
    double env_steps;       /* the run's already (resumed: the next crossing is above it) */
    gb_runctl_server *ctl;  /* the run's control, where checkpoints are asked for; NULL: none */
    int hold;               /* held evaluations (experiment.eval_hold; needs ctl and a verdict) */
    double hold_wait_s;     /* the longest one waits for trainer 0 to hold; <= 0: 60 s */
} gb_evals_opts;

/* Prepares evaluations as o says. */
void gb_evals_init(gb_evals *ev, const gb_evals_opts *o);

/* The training episodes reached the target now, after train_steps training steps: asks for an
 * evaluation for the verdict unless one is waiting or running, the last one ended less than
 * its own duration ago, or the run is decided already. Returns 1 when it asked, else 0. It
 * asks trainer 0 for a checkpoint (through ctl: at once, or a held one from gb_evals_poll),
 * which the evaluation waits for (one of at least train_steps, newer than the last evaluated).
 * Never blocks. */
int gb_evals_verdict_due(gb_evals *ev, int64_t train_steps);

/* Called from the launcher's loop with the run's env steps and its workers' reports (mc, where
 * trainer 0's hold is heard; NULL once the workers stopped: nothing is held then): reaps a
 * finished evaluation (logging how it ended, its results to TensorBoard, and the verdict:
 * gb_evals.solved when it reached the target), notes a crossing, and starts an evaluation when
 * one is due and a new checkpoint exists (held: asks for it). Never blocks (but for writing what
 * an evaluation made to tb/: a GIF of at most GB_EVALS_GIF_MAX bytes). An evaluation's failure
 * (its exit status, a missing or unreadable JSON or GIF) is logged, never fatal to the run.
 * Returns 0, or GB_ESYS/GB_ENOMEM when writing tb/ failed (a full disk: that ends the run, as
 * metrics.csv's errors do). */
struct gb_metrics_collector;
int gb_evals_poll(gb_evals *ev, int64_t env_steps, const struct gb_metrics_collector *mc,
                  gb_error *err);

/* At the end of the run, after the workers stopped (the trainers' final checkpoints written;
 * mc: their reports, for whether trainer 0 held): a held evaluation still waiting for its
 * checkpoint plays the final one; then it waits up to wait_s for a running evaluation; then a
 * crossing still waiting for a checkpoint starts its evaluation on the final one, and that is
 * waited for likewise. One still running
 * after wait_s is stopped (SIGTERM, then SIGKILL after 5 s) and reaped. env_steps: the run's
 * final count. Blocks. Returns as gb_evals_poll (the first error; it goes on regardless). */
int gb_evals_finish(gb_evals *ev, int64_t env_steps, double wait_s,
                    const struct gb_metrics_collector *mc, gb_error *err);

#endif
