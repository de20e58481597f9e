/* launch/cmd_bench.c: `gearbox bench NAME [--json]`: dispatch to the benchmarks in bench.h. */
#include "launch/bench/bench.h"
#include "launch/cli.h"
#include "launch/commands.h"

#include <stdio.h>
#include <string.h>

/* Each area adds its entry here when its benchmark lands. */
const gb_bench_entry gb_bench_table[] = {
    {"envs", "built-in environments: steps/s on one core, single and in a ring", gb_bench_envs},
    {"kernels", "GPU selection and zero-copy gather vs memcpy and the CPU path", gb_bench_kernels},
    {"replay", "GEAR replay on the CPU: insert, select, collect vs memcpy, sample+update",
     gb_bench_replay},
    {"serve", "offline-RL data server: C (and Python) clients vs plain ZeroMQ over tcp",
     gb_bench_serve},
    {"e2e", "a whole run of configs/cartpole_ppo.yaml: env steps/s, time to solve", gb_bench_e2e},
    {"suite", "time to solve on the shipped configs' tasks, several seeds, as a user runs them",
     gb_bench_suite},
    {"streams", "inference round trips, sample throughput, parameter broadcast vs raw ZeroMQ",
     gb_bench_streams},
    {"inference", "the policy model in fp32, bf16, int8 (policy.precision)", gb_bench_inference},
    {"learner", "the trainer's learner alone: CPU time per training call and gradient step",
     gb_bench_learner},
    {NULL, NULL, NULL},
};

static void bench_usage(FILE *out)
{
    fprintf(out, "usage: gearbox bench NAME [--json] [OPTIONS]\n\n"
                 "Runs a benchmark and prints its figures; with --json, one JSON object per line.\n"
                 "Every benchmark also measures a reference (memcpy, raw ZeroMQ, ...) in the same\n"
                 "run and reports the ratio.\n\nbenchmarks:\n");
    for (const gb_bench_entry *b = gb_bench_table; b->name; b++)
        fprintf(out, "  %-8s %s\n", b->name, b->summary);
}

int gb_cmd_bench(int argc, char **argv)
{
    static const struct option help[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    static const struct option json[] = {{"json", no_argument, NULL, 'j'}, {NULL, 0, NULL, 0}};
    /* NAME is the first argument; -h/--help before it is this command's, the rest the
     * benchmark's (its --help included) */
    optind = 0;
    opterr = 0;
    int c = getopt_long(argc, argv, "+h", help, NULL);
    int at = optind;
    optind = 0;
    if (c == 'h') {
        bench_usage(stdout);
        return GB_EXIT_OK;
    }
    if (c == -1 && at >= argc) {
        bench_usage(stderr);
        return GB_EXIT_USAGE;
    }
    const char *name = c == -1 ? argv[at] : argv[1]; /* else argv[1] is the option */
    for (const gb_bench_entry *b = gb_bench_table; c == -1 && b->name; b++)
        if (strcmp(name, b->name) == 0)
            return b->run(argc - at, argv + at, gb_cli_find(argc - at, argv + at, "", json,
                                                            NULL) == 'j');
    fprintf(stderr, "gearbox bench: unknown or not yet built benchmark '%s'\n", name);
    bench_usage(stderr);
    return GB_EXIT_USAGE;
}
