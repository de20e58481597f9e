/* launch/cmd_run.c: `gearbox run CONFIG [--set ...] [--run-dir DIR] [--backend local|slurm]` and
 * `gearbox run --resume RUN_DIR [--set ...]`.
 * launch.mode local (the default: one process per worker, launch/run_local.c), slurm (the same
 * launcher, each worker a step of the run's Slurm job: launch/slurm.h) and inline (one
 * process: ring -> model -> algorithm). */
#include "launch/cli.h"
#include "launch/run_local.h"
#include "launch/trackers.h"
#include "launch/commands.h"
#include "launch/validate.h"
#include "runtime/run/rundir.h"
#include "runtime/config/config.h"
#include "runtime/base/log.h"
#include "workers/roles/inline.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void run_usage(FILE *out)
{
    fprintf(out,
            "usage: gearbox run CONFIG.yaml [--set key.path=value ...] [--run-dir DIR]\n"
            "                   [--backend local|slurm] [--record DIR]\n"
            "       gearbox run --resume RUN_DIR [--set key.path=value ...]\n\n"
            "Runs the experiment in CONFIG.yaml until it is solved (experiment.target_return\n"
            "reached by the mean of the last 100 episodes) or a budget runs out\n"
            "(experiment.max_env_steps, experiment.max_seconds). Writes a run directory:\n"
            "<experiment.run_root>/<name>/<timestamp>/ with config.yaml, metrics.csv, logs/,\n"
            "checkpoints/ and summary.json. Before anything starts, CONFIG.yaml passes the\n"
            "checks of `gearbox check` (keys, environment, devices), or the run is refused\n"
            "with the same message (exit status 2).\n\n"
            "  --set key.path=value   override one config key (YAML value)\n"
            "  --run-dir DIR          write the run directory here instead\n"
            "  --backend local|slurm  distributed launch (sets launch.mode)\n"
            "  --record DIR           also write the run's trajectories as a dataset\n"
            "  --resume RUN_DIR       continue a run that was stopped, crashed, or whose\n"
            "                         machine rebooted, from its last checkpoints: model,\n"
            "                         optimiser, replay (with its rate limiter and selector\n"
            "                         state) and policy version; env_steps, episodes and\n"
            "                         time count on in metrics.csv and summary.json, and\n"
            "                         the budgets (raise them with --set) cover all of it\n\n"
            "Modes (launch.mode): local (default) starts the parameter service, trainer,\n"
            "policy and actor workers as processes on this machine; inline runs everything in\n"
            "one process without sockets (`--set launch.mode=inline`); slurm (--backend\n"
            "slurm) holds one Slurm job for the run (salloc, named gearbox:<experiment.name>)\n"
            "and starts each worker as one of its steps (srun, named <role>-<index>), with\n"
            "the resources of launch.slurm.<role>; this launcher stays here, collects the\n"
            "metrics and cancels the job when the run ends (see README: Running on a Slurm\n"
            "cluster).\n\n"
            "exit status: 0 the run ended (solved or budget spent; see summary.json),\n"
            "             2 usage or config error, 1 runtime failure (or a tracker of\n"
            "             experiment.trackers failed: summary.json says which and why)\n");
}

/* launch.mode inline: the whole run in this process, into a new run directory. Returns the
 * exit status. */
static int run_inline(const gb_config *cfg, const gb_cli *cli)
{
    gb_error err = {0};
    gb_log_init("inline", 0, (gb_log_level)cfg->experiment.log_level);
    gb_rundir rd;
    if (gb_rundir_create(&rd, cfg, cli->run_dir, &err) != 0) {
        fprintf(stderr, "gearbox run: %s\n", err.msg);
        return GB_EXIT_FAILURE;
    }
    char log_path[GB_RUNDIR_PATH_MAX];
    if (gb_rundir_file(&rd, "logs/inline-0.log", log_path, sizeof log_path, &err) != 0 ||
        gb_log_open_file(log_path) != 0) {
        fprintf(stderr, "gearbox run: cannot open the log in %s\n", rd.path);
        return GB_EXIT_FAILURE;
    }
    GB_INFO("run directory %s", rd.path);
    gb_trackers trackers;
    gb_trackers_start(&trackers, cfg, rd.path);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    gb_inline_result res;
    int rc = gb_inline_run(cfg, &rd, &stop_requested, &res, &err);
    gb_run_summary sum;
    gb_inline_summary(cfg, &res, rc ? err.msg : NULL, &sum);
    gb_error serr = {0};
    int src = gb_rundir_write_summary(&rd, &sum, &serr);
    int tracker_failed = gb_trackers_finish(&trackers, &rd, src ? NULL : &sum);
    gb_rundir_close(&rd);
    if (rc) {
        GB_ERROR("inline run failed: %s", err.msg);
        gb_log_close();
        return GB_EXIT_FAILURE;
    }
    if (src) {
        GB_ERROR("inline run: %s", serr.msg);
        gb_log_close();
        return GB_EXIT_FAILURE;
    }
    printf("%s: %s, env_steps %lld, train_steps %lld, %.1f s, return_mean %.2f, solved %s\n",
           rd.path, res.exit_reason, (long long)res.env_steps, (long long)res.train_steps,
           res.wall_seconds, res.return_mean, res.solved ? "true" : "false");
    gb_log_close();
    return tracker_failed ? GB_EXIT_FAILURE : GB_EXIT_OK; /* the tracker's cause: on stderr */
}

/* --record DIR: the folder the trainers write their datasets into exists and is writable
 * before any worker starts (created with its parents), else the run is refused here: a trainer
 * that cannot create its file would only be restarted until the run ends. Returns 0 or -1 (said
 * on stderr). */
static int prepare_record(const char *dir)
{
    gb_error err = {0};
    if (gb_rundir_make_dirs(dir, &err) != 0) {
        fprintf(stderr, "gearbox run: --record %s: %s\n", dir, err.msg);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "gearbox run: --record %s: the folder is not writable: %s\n", dir,
                strerror(errno));
        return -1;
    }
    return 0;
}

/* env.name gymnasium: $GEARBOX_GYMNASIUM_PYTHON, which the plugin prefers to
 * env.args.python_path, goes into the run's config as env.args.python_path (made absolute, not
 * resolved: a virtual environment's bin/python is a link that must stay one), so that `gearbox
 * eval` of the run (and its evaluation videos) later runs the same Python without the variable.
 * Returns 0, or -1 (said on stderr) when the path does not fit. */
static int keep_gymnasium_python(gb_config *cfg)
{
    const char *py = getenv("GEARBOX_GYMNASIUM_PYTHON");
    if (strcmp(cfg->env.name, "gymnasium") != 0 || !py || !py[0])
        return 0;
    gb_config_args *a = &cfg->env.args;
    int i = 0;
    while (i < a->n && strcmp(a->kv[i].key, "python_path") != 0)
        i++;
    char cwd[GB_CONFIG_ARG_VALUE_MAX] = "";
    if (py[0] != '/' && !getcwd(cwd, sizeof cwd))
        cwd[0] = '\0';
    if (i == GB_CONFIG_ARGS_MAX || (py[0] != '/' && !cwd[0]) ||
        snprintf(a->kv[i].value, sizeof a->kv[i].value, "%s%s%s", cwd, cwd[0] ? "/" : "", py) >=
            (int)sizeof a->kv[i].value) {
        fprintf(stderr, "gearbox run: GEARBOX_GYMNASIUM_PYTHON %s does not fit in env.args "
                        "(at most %d arguments, paths of %d characters)\n",
                py, GB_CONFIG_ARGS_MAX, GB_CONFIG_ARG_VALUE_MAX - 1);
        return -1;
    }
    snprintf(a->kv[i].key, sizeof a->kv[i].key, "python_path");
    a->n += i == a->n;
    return 0;
}

int gb_cmd_run(int argc, char **argv)
{
    if (gb_wants_help(argc, argv)) {
        run_usage(stdout);
        return GB_EXIT_OK;
    }
    gb_cli cli;
    static gb_config cfg; /* large: keep it off the stack */
    /* the checks of `gearbox check`, before any worker or the run directory (--backend is
     * launch.mode there) */
    int urc = gb_validate_cli(argc, argv, GB_CLI_RUN_FLAGS, &cli, &cfg);
    if (urc != GB_EXIT_OK)
        return urc;
    if (keep_gymnasium_python(&cfg) != 0)
        return GB_EXIT_USAGE;
    if (cfg.launch.mode == GB_LAUNCH_LOCAL || cfg.launch.mode == GB_LAUNCH_SLURM) {
        if (cli.record && prepare_record(cli.record) != 0)
            return GB_EXIT_USAGE;
        return gb_run_local(&cfg, &cli); /* --record: the trainers write the dataset */
    }
    if (cli.resume) {
        fprintf(stderr, "gearbox run: --resume: launch.mode %s cannot be resumed (only local "
                        "runs write the checkpoints a resume starts from)\n",
                gb_config_enum_name("launch.mode", cfg.launch.mode));
        return GB_EXIT_USAGE;
    }
    if (cfg.launch.mode != GB_LAUNCH_INLINE) {
        fprintf(stderr, "gearbox run: launch.mode %s: not implemented yet in this build "
                        "(use --set launch.mode=inline)\n",
                gb_config_enum_name("launch.mode", cfg.launch.mode));
        return GB_EXIT_FAILURE;
    }
    if (cli.record) {
        fprintf(stderr, "gearbox run: --record records the trainers' sample streams, which "
                        "launch.mode inline does not have; use launch.mode local\n");
        return GB_EXIT_USAGE;
    }
    return run_inline(&cfg, &cli);
}
