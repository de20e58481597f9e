/* workers/roles/inline.h: inline mode: the environment ring, the model and the algorithm in one
 * process, no sockets (`launch.mode: inline`). The same run directory as a distributed run; the
 * reference the distributed mode is compared against, and a debugging aid.
 * defines: gb_inline_result, gb_inline_run, gb_inline_summary */
#ifndef GB_WORKERS_INLINE_H
#define GB_WORKERS_INLINE_H

#include "runtime/config/config.h"
#include "runtime/run/contract.h"
#include "runtime/base/error.h"
#include "runtime/run/rundir.h"

#include <signal.h>
#include <stdint.h>

typedef struct gb_inline_result {
    int64_t env_steps;          /* environment copy steps (reset rows not counted) */
    int64_t train_steps;
    int64_t episodes;
    int64_t envs;               /* environment copies in the ring */
    int64_t chunks;             /* finished chunks inserted into the replay */
    int64_t chunks_trained;     /* of those, drawn by the learner at least once */
    double wall_seconds;
    double return_mean;         /* of the last (up to) GB_RUN_WINDOW episodes; NAN before the
                                   first */
    int solved;                 /* the stop rule said solved (runtime/run/contract.h) */
    char exit_reason[32];       /* solved, max_env_steps, max_seconds, interrupted, error */
} gb_inline_result;

/* Runs the experiment cfg in this process until a stop rule of the run contract says so
 * (runtime/run/contract.h: solved, max_env_steps, max_seconds) or *stop becomes nonzero (may be
 * NULL): acting (one ring of actors.count x actors.envs_per_actor copies in actors.splits groups,
 * chunks of actors.chunk_len steps) with the learner's own model, and learning through
 * trainer.replay and its rate limiter, exactly as a distributed trainer learns (PPO too: a FIFO
 * replay whose items are sampled once). One thread inserts and samples, so nothing waits: an insert
 * the rate limiter holds back runs training steps first, and after every group the learner trains
 * as often as the limiter allows. Writes rd's metrics.csv (the contract's columns) every
 * experiment.metrics_interval_s and checkpoints/learner.ckpt at the end (and every
 * trainer.checkpoint_every_s); the caller writes summary.json from *res (gb_inline_summary), also
 * after an error (*res then says "error"). Blocks for the whole run. Returns 0 when the run ended
 * normally (solved or not), or a GB_E* code with err filled. */
int gb_inline_run(const gb_config *cfg, gb_rundir *rd, volatile sig_atomic_t *stop,
                  gb_inline_result *res, gb_error *err);

/* The summary of an inline run (error: the message when it failed, else NULL): the contract's
 * keys, as a distributed run of cfg writes them. */
void gb_inline_summary(const gb_config *cfg, const gb_inline_result *res, const char *error,
                       gb_run_summary *s);

#endif
