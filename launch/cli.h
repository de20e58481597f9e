/* launch/cli.h: the options shared by run, serve and check: CONFIG [--set key=value ...],
 * and run's --backend/--run-dir/--record/--resume.
 * defines: gb_cli, gb_cli_parse, gb_cli_load, GB_CLI_MAX_SETS */
#ifndef GB_LAUNCH_CLI_H
#define GB_LAUNCH_CLI_H

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

/* Parses argv (argv[0] is the subcommand name). On a usage error prints it to stderr prefixed
 * with "gearbox <cmd>: " and returns -1; else 0. Nothing is copied: strings point into argv. */
int gb_cli_parse(int argc, char **argv, int flags, gb_cli *out);

struct gb_config;
/* gb_cli_parse, then reads cli->config (with --resume: the run's config.yaml) with the --set
 * overrides into cfg (validated; errors
 * name file:line:column and key and go to stderr). Returns GB_EXIT_OK or GB_EXIT_USAGE. */
int gb_cli_load(int argc, char **argv, int flags, gb_cli *cli, struct gb_config *cfg);

#endif
