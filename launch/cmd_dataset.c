/* launch/cmd_dataset.c: `gearbox dataset export IN -o OUT.hdf5`: a gearbox recording (a .gbds
 * file, or a directory of them, from `gearbox run --record`) written as a D4RL HDF5 file that
 * D4RL, Minari's converters, h5py users and `gearbox serve` (dataset_format d4rl) can read. */
#include "launch/cli.h"
#include "launch/commands.h"
#include "replay/formats/d4rl.h"
#include "replay/formats/dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void dataset_usage(FILE *out)
{
    fprintf(out,
            "usage: gearbox dataset export IN -o OUT.hdf5\n\n"
            "Writes a gearbox recording (IN: a .gbds file, or a directory of them, from\n"
            "`gearbox run --record DIR`) as one D4RL-layout HDF5 file: observations, actions,\n"
            "rewards, terminals, timeouts, next_observations (and infos/logp, infos/version),\n"
            "one row per valid step, each episode's rows consecutive (an episode the recording\n"
            "ended inside gets timeouts on its last row). Prints one line of counts.\n\n"
            "exit status: 0 written, 1 runtime failure, 2 usage error or an unusable input\n");
}

typedef struct export_args {
    const char *in, *out;
} export_args;

static int take_export(void *ctx, int opt, const char *arg)
{
    export_args *a = ctx;
    if (opt == 'o')
        a->out = arg;
    else if (opt == GB_CLI_POSITIONAL && !a->in)
        a->in = arg;
    else {
        fprintf(stderr, "gearbox dataset export: unexpected argument '%s'\n", arg);
        dataset_usage(stderr);
        return -1;
    }
    return 0;
}

static int export_main(int argc, char **argv)
{
    static const struct option options[] = {{"output", required_argument, NULL, 'o'},
                                            {NULL, 0, NULL, 0}};
    export_args a = {NULL, NULL};
    if (gb_cli_getopt(argc, argv, "o:", options, take_export, &a) != 0)
        return GB_EXIT_USAGE;
    const char *in = a.in, *out = a.out;
    if (!in || !out) {
        fprintf(stderr, "gearbox dataset export: %s\n", !in ? "no input" : "no -o OUT.hdf5");
        dataset_usage(stderr);
        return GB_EXIT_USAGE;
    }
    gb_error err = {0};
    char **paths = NULL;
    int n = 0;
    gb_d4rl_export_stats st;
    int rc = gb_dataset_list(in, &paths, &n, &err);
    if (rc == 0)
        rc = gb_d4rl_export((const char *const *)paths, n, out, &st, &err);
    free(paths);
    if (rc) {
        fprintf(stderr, "gearbox dataset export: %s\n", err.msg);
        return rc == GB_EINVAL || rc == GB_ENOTFOUND || rc == GB_ECORRUPT ? GB_EXIT_USAGE
                                                                          : GB_EXIT_FAILURE;
    }
    printf("gearbox dataset export: %s: %lld items -> %lld transitions, %lld episode ends "
           "(%lld cut by the recording's end), %lld item chains\n", out, (long long)st.records,
           (long long)st.transitions, (long long)st.episodes, (long long)st.cut,
           (long long)st.chains);
    return GB_EXIT_OK;
}

int gb_cmd_dataset(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "export") == 0) {
        if (gb_wants_help(argc - 1, argv + 1)) {
            dataset_usage(stdout);
            return GB_EXIT_OK;
        }
        return export_main(argc - 1, argv + 1);
    }
    if (gb_wants_help(argc, argv)) {
        dataset_usage(stdout);
        return GB_EXIT_OK;
    }
    fprintf(stderr, "gearbox dataset: expected a subcommand: export\n");
    dataset_usage(stderr);
    return GB_EXIT_USAGE;
}
