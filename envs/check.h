/* envs/check.h: `gearbox env check`: validates an environment (built-in or plugin) as a user
 * would want before training on it: the interface and its spaces, random actions for many
 * steps (NaN or infinite observations and rewards, flags other than 0/1, writes past or short
 * of the declared sizes, failing calls), determinism (two copies with the same seed in
 * lockstep must agree bit for bit), render, and steps per second. Runs in a forked child so
 * that a crash (a signal) or a hang in the environment is reported, not suffered.
 * defines: gb_env_check_options, gb_env_check */
#ifndef GB_ENVS_CHECK_H
#define GB_ENVS_CHECK_H

#include "envs/env.h"
#include "envs/wrap.h"
#include "runtime/base/error.h"

#include <stdint.h>
#include <stdio.h>

typedef struct gb_env_check_options {
    const gb_env_args *args;   /* the environment's arguments (NULL = none) */
    const gb_env_wrap_params *wrap; /* preprocessing wrappers around it (NULL = none) */
    uint64_t seed;             /* seed of the copies under test */
    int64_t steps;             /* random-action steps of the lockstep run (default 10000) */
    int64_t max_episode_steps; /* > 0 overrides the environment's own limit */
    double speed_seconds;      /* how long the speed measurement runs (default 1) */
    double timeout_s;          /* the whole check; a hang past it fails (default 120) */
    int no_fork;               /* 1: run in this process (debugging; a crash is then ours) */
    FILE *out;                 /* the report (default stdout) */
} gb_env_check_options;

/* Checks the environment named `target`: a built-in name, or a path to a plugin (anything with
 * a '/' or ending in ".so"). Writes a report to opts->out. Returns 0 when every check passed,
 * GB_EINVAL when the environment misbehaved (the message says how: "crashed with SIGSEGV in
 * step 3 ...", "observation [0][1] is NaN at step 17", ...), GB_ECONFIG when create() refused
 * the arguments given (opts->args not empty; the environment's message), GB_ENOTFOUND when it
 * cannot be loaded, GB_ESYS when fork/mmap failed. Blocks for the duration of the check. */
int gb_env_check(const char *target, const gb_env_check_options *opts, gb_error *err);

#endif
