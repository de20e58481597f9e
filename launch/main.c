/* launch/main.c: the gearbox command: subcommand dispatch, --help and --version. */
#include "launch/commands.h"

#include <stdio.h>
#include <string.h>

#ifndef GEARBOX_VERSION
#define GEARBOX_VERSION "0.0.0"
#endif

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"run", gb_cmd_run, "run an experiment from a YAML config (local processes or Slurm)"},
    {"serve", gb_cmd_serve, "serve a replay as an offline-RL data server"},
    {"dataset", gb_cmd_dataset, "convert datasets: export a gearbox recording as D4RL HDF5"},
    {"check", gb_cmd_check, "validate a config and print it resolved, as YAML"},
    {"eval", gb_cmd_eval, "play episodes with a run's checkpoint: returns, optionally a video"},
    {"bench", gb_cmd_bench, "run a benchmark: replay, streams, envs, kernels, serve, e2e"},
    {"env", gb_cmd_env, "list built-in environments or check an environment plugin"},
    {"worker", gb_cmd_worker, "run one worker process (started by `gearbox run`)"},
    {"join", gb_cmd_join, "start workers on this host that join a running run (tcp)"},
    {"plot", gb_cmd_plot, "plot learning curves of runs (mean and spread over seeds) as a PNG"},
    {NULL, NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: gearbox COMMAND [ARGS...]\n"
                 "       gearbox --version | --help\n\ncommands:\n");
    for (const subcommand *c = subcommands; c->name; c++)
        fprintf(out, "  %-8s %s\n", c->name, c->summary);
    fprintf(out, "\n`gearbox COMMAND --help` describes a command.\n"
                 "exit status: 0 success, 2 usage or config error, 1 runtime failure\n");
}

int gb_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return GB_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "help") == 0) {
        usage(stdout);
        return GB_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("gearbox %s\n", GEARBOX_VERSION);
        return GB_EXIT_OK;
    }
    for (const subcommand *c = subcommands; c->name; c++)
        if (strcmp(name, c->name) == 0)
            return c->run(argc - 1, argv + 1);
    fprintf(stderr, "gearbox: unknown command '%s'\n\n", name);
    usage(stderr);
    return GB_EXIT_USAGE;
}
