/* launch/cli.h: the commands' argument parsing: getopt_long driven one element at a time
 * (gb_cli_getopt), and the options shared by run, serve and check: CONFIG [--set key=value ...]
 * and run's --backend/--run-dir/--record/--resume.
 * defines: gb_cli_getopt, gb_cli_find, gb_cli, gb_cli_parse, gb_cli_load, GB_CLI_MAX_SETS */
#ifndef GB_LAUNCH_CLI_H
#define GB_LAUNCH_CLI_H

#include <getopt.h>

/* What gb_cli_getopt hands a command besides its options' vals (which must differ from these):
 * a positional argument, an unknown option, an option without its value. */
enum { GB_CLI_POSITIONAL = 1, GB_CLI_UNKNOWN = '?', GB_CLI_NO_VALUE = ':' };

/* Takes one element: opt is an option's val (arg its value, or NULL) or one of the above (arg
 * the positional, or the refused option as typed). Returns 0 to go on; anything else stops. */
typedef int (*gb_cli_take_fn)(void *ctx, int opt, const char *arg);

int gb_cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts,
                  gb_cli_take_fn take, void *ctx);

int gb_cli_find(int argc, char **argv, const char *shortopts, const struct option *longopts,
                const char **arg);

#define GB_CLI_MAX_SETS 256

typedef struct gb_cli {
    const char *config;                 /* the positional CONFIG.yaml */
    const char *sets[GB_CLI_MAX_SETS];  /* --set key.path=value, in order */
    int nsets;
    const char *backend;                /* --backend local|slurm (run) */
    const char *run_dir;                /* --run-dir DIR (run) */
    const char *record;                 /* --record DIR (run) */
    const char *resume;                 /* --resume RUN_DIR (run): its config.yaml is CONFIG */
    char resume_config[1100];           /* <RUN_DIR>/config.yaml, what config points to */
} gb_cli;

/* Flags a subcommand accepts besides --set (bit set). */
enum { GB_CLI_RUN_FLAGS = 1 };

int gb_cli_parse(int argc, char **argv, int flags, gb_cli *out);

struct gb_config;
int gb_cli_load(int argc, char **argv, int flags, gb_cli *cli, struct gb_config *cfg);

#endif
