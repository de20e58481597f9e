/* workers/inline.h: inline mode: the environment ring, the model and the algorithm in one
 * process, no sockets (`launch.mode: inline`). The same run directory as a distributed run; the
 * reference the distributed mode is compared against, and a debugging aid.
 * defines: gb_inline_result, gb_inline_run */
#ifndef GB_WORKERS_INLINE_H
#define GB_WORKERS_INLINE_H

#include "runtime/rundir.h"
#include "runtime/config.h"
#include "runtime/error.h"

#include <signal.h>
#include <stdint.h>

typedef struct gb_inline_result {
    int64_t env_steps;          /* environment copy steps (reset rows not counted) */
    int64_t train_steps;
    int64_t episodes;
    double wall_seconds;
    double return_mean;         /* of the last (up to) 100 episodes; NAN before the first */
    int solved;
    char exit_reason[32];       /* solved, max_env_steps, max_seconds, interrupted, error */
} gb_inline_result;

/* Runs the experiment cfg in this process until it is solved (the mean of the last 100 episode
 * returns reaches experiment.target_return), a budget runs out (experiment.max_env_steps,
 * max_seconds) or *stop becomes nonzero (may be NULL). One ring of actors.count x
 * actors.envs_per_actor copies in actors.splits groups; trajectory chunks of actors.chunk_len
 * steps (workers/chunk.h); PPO trains on every trainer.batch_size fresh chunks; DQN and SAC
 * insert chunks into gearbox's replay (trainer.replay) and take one gradient step per
 * trainer.batch_size items sampled while samples <= samples_per_insert x items inserted since
 * sampling began (1 step per inserted chunk when samples_per_insert is 0), with prioritized
 * replay's importance weights and priority updates when the selector is weighted.
 * Writes rd's metrics.csv every experiment.metrics_interval_s, checkpoints/learner.ckpt at the
 * end (and every trainer.checkpoint_every_s), and summary.json, also after an error (then
 * exit_reason "error"). Blocks for the whole run. Returns 0 when the run ended normally (solved
 * or not), or a GB_E* code with err filled. */
int gb_inline_run(const gb_config *cfg, gb_rundir *rd, volatile sig_atomic_t *stop,
                  gb_inline_result *res, gb_error *err);

#endif
