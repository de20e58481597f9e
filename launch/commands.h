/* launch/commands.h: the gearbox subcommands. Each takes the arguments after its name
 * (argv[0] is the subcommand) and returns the process exit status:
 * 0 success, 2 usage or config error, 1 runtime failure.
 * defines: gb_cmd_run, gb_cmd_serve, gb_cmd_dataset, gb_cmd_check, gb_cmd_bench, gb_cmd_env,
 *          gb_cmd_worker, gb_cmd_join, gb_cmd_plot, gb_cmd_eval, gb_worker_process,
 *          gb_worker_process_opts, GB_EXIT_* */
#ifndef GB_LAUNCH_COMMANDS_H
#define GB_LAUNCH_COMMANDS_H

enum { GB_EXIT_OK = 0, GB_EXIT_FAILURE = 1, GB_EXIT_USAGE = 2 };

int gb_cmd_run(int argc, char **argv);
int gb_cmd_serve(int argc, char **argv);
int gb_cmd_dataset(int argc, char **argv);
int gb_cmd_check(int argc, char **argv);
int gb_cmd_bench(int argc, char **argv);
int gb_cmd_env(int argc, char **argv);
int gb_cmd_worker(int argc, char **argv);
int gb_cmd_join(int argc, char **argv);
int gb_cmd_plot(int argc, char **argv);
int gb_cmd_eval(int argc, char **argv);

struct gb_config;

/* One worker process of a run (what `gearbox worker` and each worker of `gearbox join` run). */
typedef struct gb_worker_process_opts {
    const char *role; /* "actor", "policy", "trainer", "params" */
    int index, incarnation, segment;
    const char *run_dir;  /* the run directory; NULL for a worker on another host (tcp) */
    const char *registry; /* the registry's endpoint (run control on the same socket) */
    const char *metrics;  /* the launcher's metrics endpoint */
    const char *record;   /* --record DIR, or NULL */
    const char *keys;     /* the run's CURVE keys folder (--keys); NULL: RUN_DIR/keys */
    int joined; /* 1: joined from another host (gearbox join), not the launcher's child: stops
                   by run control alone, and when the launcher is silent for GB_JOIN_LOST_MS */
} gb_worker_process_opts;

#define GB_JOIN_LOST_MS 5000

/* The worker until it stops; its exit status (launch/cmd_worker.c says how). */
int gb_worker_process(const struct gb_config *cfg, const gb_worker_process_opts *o);

/* 1 when argv holds -h or --help (launch/cli.c). */
int gb_wants_help(int argc, char **argv);

#endif
