/* launch/commands.h: the gearbox subcommands. Each takes the arguments after its name
 * (argv[0] is the subcommand) and returns the process exit status:
 * 0 success, 2 usage or config error, 1 runtime failure.
 * defines: gb_cmd_run, gb_cmd_serve, gb_cmd_check, gb_cmd_bench, gb_cmd_env, gb_cmd_worker,
 *          GB_EXIT_* */
#ifndef GB_LAUNCH_COMMANDS_H
#define GB_LAUNCH_COMMANDS_H

enum { GB_EXIT_OK = 0, GB_EXIT_FAILURE = 1, GB_EXIT_USAGE = 2 };

int gb_cmd_run(int argc, char **argv);
int gb_cmd_serve(int argc, char **argv);
int gb_cmd_check(int argc, char **argv);
int gb_cmd_bench(int argc, char **argv);
int gb_cmd_env(int argc, char **argv);
int gb_cmd_worker(int argc, char **argv);

/* 1 when argv holds -h or --help. */
int gb_wants_help(int argc, char **argv);

#endif
