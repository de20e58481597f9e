/* launch/main.c: the gearbox command: subcommand dispatch, --help and --version. */
#include "launch/commands.h"
#include "runtime/base/sanitizers.h"
#include "workers/torch/bridge.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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
    {"bench", gb_cmd_bench, "run a benchmark (gearbox bench --help lists them)"},
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

/* A command's exit status, as the process's. A command that loaded libtorch (an inline run,
 * eval, a benchmark of models) has closed and written all of its own by now: the process ends
 * without what libtorch registered for exit (static destructors, its operators' deregistration,
 * the unmapping of its libraries), about 60 ms here, as a worker does (cmd_worker.c).
 * Sanitizer builds return as before, so that LeakSanitizer still checks the command. */
static int finish(int status)
{
#if !GB_ASAN && !GB_TSAN
    if (gb_torch_loaded()) {
        fflush(NULL);
        _exit(status);
    }
#endif
    return status;
}

int main(int argc, char **argv)
{
    static const struct option top[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    /* the options before COMMAND: the first one decides; the command parses the rest */
    optind = 0;
    opterr = 0;
    int c = getopt_long(argc, argv, "+:hV", top, NULL);
    const char *name = optind < argc ? argv[optind] : NULL;
    if (c == 'h' || (c == -1 && name && strcmp(name, "help") == 0)) {
        usage(stdout);
        return GB_EXIT_OK;
    }
    if (c == 'V') {
        printf("gearbox %s\n", GEARBOX_VERSION);
        return GB_EXIT_OK;
    }
    if (c == -1 && !name) {
        usage(stderr);
        return GB_EXIT_USAGE;
    }
    int at = optind;
    optind = 0; /* the command's own getopt_long starts afresh */
    if (c == -1)
        for (const subcommand *cmd = subcommands; cmd->name; cmd++)
            if (strcmp(name, cmd->name) == 0)
                return finish(cmd->run(argc - at, argv + at));
    /* the unknown option is argv[1]: the first option decides */
    fprintf(stderr, "gearbox: unknown command '%s'\n\n", c == -1 ? name : argv[1]);
    usage(stderr);
    return GB_EXIT_USAGE;
}
