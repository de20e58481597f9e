/* launch/run_spawn.h: starts a distributed run's worker processes (gearbox worker), each with
 * its log in the run directory, directly or as steps of the run's Slurm job.
 * defines: gb_run_spawn_opts, gb_run_spawn */
#ifndef GB_LAUNCH_RUN_SPAWN_H
#define GB_LAUNCH_RUN_SPAWN_H

#include "launch/slurm.h"
#include "launch/supervisor.h"
#include "runtime/config/config.h"
#include "runtime/base/error.h"
#include "runtime/run/rundir.h"

typedef struct gb_run_spawn_opts {
    const gb_config *cfg;
    gb_supervisor *sup;     /* owns the children */
    const gb_rundir *rd;
    const char *exe;        /* this gearbox */
    const char *reg_ep, *met_ep;
    const char *record;     /* gearbox run --record DIR for the trainers, or NULL */
    int segment;            /* gearbox run --resume: its own random streams (0: first launch) */
    const gb_slurm_job *job; /* every worker a step of this job; NULL: a local process */
    int relays;             /* per_host parameter relays to start */
} gb_run_spawn_opts;

/* Starts the parameter service, the relays, the trainers, the policy workers and the actors of
 * this host (joiners come on their own; launch/joins.h), in that order. Returns 0, or the first
 * failure (the workers started so far stay with o->sup). Does not wait for them. */
int gb_run_spawn(const gb_run_spawn_opts *o, gb_error *err);

#endif
