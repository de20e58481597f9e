/* launch/run_local.h: `gearbox run` with the local backend: every worker a process on this
 * machine, found through the registry this launcher serves.
 * defines: gb_run_local */
#ifndef GB_LAUNCH_RUN_LOCAL_H
#define GB_LAUNCH_RUN_LOCAL_H

#include "launch/cli.h"
#include "runtime/config/config.h"

/* Runs the experiment until it is solved, its env-step or wall-time budget runs out, it is
 * interrupted (SIGINT/SIGTERM) or a worker dies. Writes the run directory (config.yaml,
 * metrics.csv, logs/, checkpoints/, summary.json). Returns the exit status: 0 solved or budget
 * spent, 1 a worker died, a failure or an interruption (summary.json says which). */
int gb_run_local(const gb_config *cfg, const gb_cli *cli);

#endif
