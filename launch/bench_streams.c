/* launch/bench_streams.c: `gearbox bench streams [--json] [--transport ipc|tcp] [--quick]`:
 * inference round trips, sample throughput and parameter broadcast, each against raw ZeroMQ
 * moving the same bytes over the same transport in the same run. The cases live one subject a
 * file: bench_inference.c, bench_sample.c, bench_params.c, bench_relay.c (parameters through
 * relays to 48 subscribers against direct). */
#include "launch/bench.h"
#include "launch/commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

static void bench_usage(FILE *out)
{
    fprintf(out, "usage: gearbox bench streams [--json] [--transport ipc|tcp] [--quick]\n"
                 "                             [--case inference_rtt|inference_pipelined|sample_throughput|\n"
                 "                                     param_broadcast|param_relay]\n");
}

int gb_bench_streams(int argc, char **argv, int json)
{
    if (gb_wants_help(argc, argv)) {
        bench_usage(stdout);
        return GB_EXIT_OK;
    }
    gb_bench_net b = {0};
    b.json = json;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            continue;
        if (strcmp(argv[i], "--quick") == 0)
            b.quick = 1;
        else if (strcmp(argv[i], "--transport") == 0 && i + 1 < argc)
            b.tcp = strcmp(argv[++i], "tcp") == 0;
        else if (strcmp(argv[i], "--case") == 0 && i + 1 < argc)
            b.only = argv[++i];
        else {
            bench_usage(stderr);
            return GB_EXIT_USAGE;
        }
    }
    snprintf(b.dir, sizeof b.dir, "/tmp/gbbench-XXXXXX");
    if (!mkdtemp(b.dir)) {
        perror("gearbox bench streams: mkdtemp");
        return GB_EXIT_FAILURE;
    }
    b.ctx = zmq_ctx_new();
    int io = 2;
    zmq_ctx_set(b.ctx, ZMQ_IO_THREADS, io);
    int rc = 0;
    if (!json)
        printf("gearbox bench streams (%s, raw ZeroMQ reference measured in the same run)\n",
               b.tcp ? "tcp://127.0.0.1" : "ipc://");
    if (gb_bench_net_want(&b, "inference_rtt"))
        rc |= gb_bench_inference_rtt(&b);
    if (gb_bench_net_want(&b, "inference_pipelined"))
        rc |= gb_bench_inference_pipelined(&b);
    if (gb_bench_net_want(&b, "sample_throughput"))
        rc |= gb_bench_sample_throughput(&b);
    if (gb_bench_net_want(&b, "param_broadcast"))
        rc |= gb_bench_param_broadcast(&b);
    if (gb_bench_net_want(&b, "param_relay"))
        rc |= gb_bench_param_relay(&b);
    zmq_ctx_term(b.ctx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "%s", b.dir);
    rmdir(cmd); /* ipc socket files are removed by ZeroMQ on close */
    return rc ? GB_EXIT_FAILURE : GB_EXIT_OK;
}