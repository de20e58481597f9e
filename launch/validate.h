/* launch/validate.h: the one validation of a config, shared by `gearbox check`, `gearbox run`
 * (launch.mode local, inline and slurm, and --resume) and `gearbox join`, run before any worker
 * starts or any run directory is made: the config's own checks (runtime/config), then what
 * running it needs from this machine: the environment (env.plugin's path resolved, the library
 * loaded, one copy created with env.args and its spaces converted for the learner, as every
 * worker will) and the devices (a cuda trainer or policy worker needs a CUDA build, and a visible
 * device where it runs here), the memory what runs here will take (launch/footprint.h)
 * against this machine's, and a TorchScript model's outputs on the environment's observations
 * against its spaces (launch/model_check.h; not for actors joining), and experiment.trackers'
 * Python and packages (launch/trackers.h). Every error names the place its key was set
 * ("configs/x.yaml:12:9: env.name: ..." or "--set[1]:1:10: env.name: ...") and is a config
 * error: exit status 2.
 *
 * A relative env.plugin is tried against the folder of the config file that names it, then
 * against the current folder; one given by --set (typed where gearbox runs) the other way
 * round. The first that exists is written back as an absolute path: the resolved config (check's
 * output, the run's config.yaml) names the same library for every worker, a resume and eval,
 * whatever their folder. An error names every path tried.
 * defines: gb_validate_here, gb_validate_check, gb_validate_cli, gb_validate_reward_range */
#ifndef GB_LAUNCH_VALIDATE_H
#define GB_LAUNCH_VALIDATE_H

#include "launch/cli.h"
#include "runtime/config/config.h"

/* What runs on this machine, so what must be found here. */
typedef enum gb_validate_here {
    GB_VALIDATE_RUN = 0,     /* as launch.mode says: every worker here (local, inline), or the
                                workers on Slurm's nodes (only the build is checked for cuda) */
    GB_VALIDATE_JOIN_ACTOR,  /* actors joining a run: its environment */
    GB_VALIDATE_JOIN_POLICY, /* policy workers joining: the environment and policy.device */
    GB_VALIDATE_JOIN_TRAINER, /* trainers joining: the environment and trainer.device */
} gb_validate_here;

/* gb_config_check_fn (runtime/config/config.h) with arg a gb_validate_here * (NULL:
 * GB_VALIDATE_RUN): the environment and the devices, as above; may make env.plugin absolute.
 * Returns 0, GB_ECONFIG naming the key's place, or GB_ENOMEM. Blocks while the environment's
 * copy is created (a Python environment starts its interpreter). */
int gb_validate_check(gb_config *cfg, const gb_config_marks *marks, void *arg, gb_error *err);

/* A command's CONFIG [--set ...] (gb_cli_parse with flags; run's --backend applied as
 * launch.mode=local|slurm before the checks), read and validated (GB_VALIDATE_RUN). Errors go
 * to stderr, the first line the same for check and run. Returns GB_EXIT_OK, GB_EXIT_USAGE
 * (usage, config or environment error) or GB_EXIT_FAILURE (out of memory). */
int gb_validate_cli(int argc, char **argv, int flags, gb_cli *cli, gb_config *cfg);

/* What a reported episode's return per step lies in: the environment's declared reward range
 * (GB_ENV_REWARD_RANGE, after its wrappers), where it declares one and the episodes the actors
 * report are its own (not behind episodic_life or clip_reward, whose episodes are the game's:
 * envs/wrap.h). Makes one copy of the environment. Returns 1 with *low and *high, else 0. */
int gb_validate_reward_range(const gb_config *cfg, double *low, double *high);

#endif
