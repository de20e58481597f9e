/* launch/footprint.h: what a run will take in host memory, estimated from its config before
 * anything starts, so that `gearbox check` and `gearbox run` refuse a config that cannot fit on
 * this machine (a replay of 1e12 items, layers of 100,000 units) with the figures, instead of
 * letting its workers fail one restart after another.
 * defines: gb_footprint, gb_footprint_estimate, gb_footprint_check */
#ifndef GB_LAUNCH_FOOTPRINT_H
#define GB_LAUNCH_FOOTPRINT_H

#include "envs/env.h"
#include "runtime/config/config.h"

#include <stdint.h>

/* Bytes, as doubles (a config may ask for more than 2^64). Counted: the replay's column tables
 * when full (capacity items of the chunk layout's blocks), the networks' parameters with what
 * training keeps beside them (gradients, Adam's two moments, target networks), the policy
 * workers' copies, and the actors' chunk blocks; not counted: activations, libtorch's own
 * arenas, the interpreter of a Python environment. */
typedef struct gb_footprint {
    double params;    /* the acting network's parameters (count) */
    double replay;    /* one trainer's replay */
    double trainer;   /* one trainer's networks, gradients and optimiser state */
    double policy;    /* one policy worker's model */
    double actor;     /* one actor's chunk blocks */
    double here;      /* every process that runs on this machine, together */
    double machine;   /* this machine's memory (MemTotal); 0 when unknown */
} gb_footprint;

/* Fills fp for cfg on an environment with this spec (the processes "here" as launch.mode says:
 * all of a local or inline run, none of a Slurm one). Returns 0 or the chunk layout's error. */
int gb_footprint_estimate(const gb_config *cfg, const gb_env_spec *spec, gb_footprint *fp,
                          gb_error *err);

/* gb_footprint_estimate, then a refusal (GB_ECONFIG at the key that asks for most of it:
 * trainer.replay.capacity or the model's sizes) when what runs here needs more than this
 * machine has, with the figures. Returns 0, GB_ECONFIG or the estimate's errors. */
int gb_footprint_check(const gb_config *cfg, const gb_config_marks *marks,
                       const gb_env_spec *spec, gb_footprint *fp, gb_error *err);

#endif
