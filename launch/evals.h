/* launch/evals.h: evaluation videos during a run (experiment.eval_every): each time the run's
 * env steps cross the next multiple of eval_every, the launcher starts `gearbox eval` as a child
 * process on the newest checkpoint (checkpoints/trainer-0), which writes
 * RUN_DIR/videos/eval_<env_steps>.mp4 (eval_episodes deterministic episodes) and its returns as
 * RUN_DIR/videos/eval_<env_steps>.json; its messages go to RUN_DIR/logs/eval_<env_steps>.log.
 * The run never waits for it. One evaluation runs at a time: a crossing while one runs, or
 * before a checkpoint newer than the last one evaluated exists, waits for that (crossings in
 * between merge into one). <env_steps> is the run's count when the evaluation starts.
 * defines: gb_evals, gb_evals_init, gb_evals_poll, gb_evals_finish */
#ifndef GB_LAUNCH_EVALS_H
#define GB_LAUNCH_EVALS_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct gb_evals {
    int64_t every, episodes, seed; /* 0 every: off, every call a no-op */
    int64_t next;                  /* env steps that trigger the next evaluation */
    int pending;                   /* a crossing waits for a checkpoint or the running child */
    int64_t last_step;             /* training step of the checkpoint last evaluated; -1 none */
    pid_t pid;                     /* the running `gearbox eval`; 0 none */
    int64_t pid_env_steps;         /* its <env_steps> */
    int64_t started, failed;       /* counts, for the log */
    char run_dir[2048], exe[PATH_MAX];
} gb_evals;

/* Prepares evaluations for the run in run_dir with the gearbox executable exe, every `every`
 * env steps (0: off) of `episodes` episodes, seeded with seed; the run has already taken
 * env_steps (a resumed run: the next crossing is the first multiple above it). */
void gb_evals_init(gb_evals *ev, const char *run_dir, const char *exe, int64_t every,
                   int64_t episodes, int64_t seed, int64_t env_steps);

/* Called from the launcher's loop with the run's env steps: reaps a finished evaluation
 * (logging how it ended), notes a crossing, and starts an evaluation when one is due and a new
 * checkpoint exists. Never blocks; failures are logged, never fatal to the run. */
void gb_evals_poll(gb_evals *ev, int64_t env_steps);

/* At the end of the run, after the workers stopped (the trainers' final checkpoints written):
 * waits up to wait_s for a running evaluation; then a crossing still waiting for a checkpoint
 * starts its evaluation on the final one, and that is waited for likewise. One still running
 * after wait_s is stopped (SIGTERM, then SIGKILL after 5 s) and reaped. env_steps: the run's
 * final count. Blocks. */
void gb_evals_finish(gb_evals *ev, int64_t env_steps, double wait_s);

#endif
