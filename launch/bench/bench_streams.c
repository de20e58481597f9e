/* launch/bench/bench_streams.c: `gearbox bench streams [--json] [--transport ipc|tcp] [--quick]
 * [--curve on|off]`: inference round trips, sample throughput and parameter broadcast, each
 * against raw ZeroMQ moving the same bytes over the same transport in the same run. The cases
 * live one subject a file: bench_inference.c, bench_sample.c, bench_params.c, bench_relay.c
 * (parameters through relays to 48 subscribers against direct). With --curve on (tcp),
 * inference_rtt and sample_throughput run twice in the same run, plain and then with CURVE on
 * gearbox's sockets (runtime/streams/curve.h; fresh keys, the raw reference still plain), and a
 * curve_cost line per row gives the CURVE figure over the plain one. With --curve on and ipc, the
 * second pass proves a run's worker identity with PLAIN (what a run does on ipc: the handshake
 * only) and the line gives that figure over the plain one. */
#include "launch/bench/bench.h"
#include "launch/commands.h"
#include "runtime/streams/curve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

static void bench_usage(FILE *out)
{
    fprintf(out, "usage: gearbox bench streams [--json] [--transport ipc|tcp] [--quick]\n"
                 "                             [--curve on|off]\n"
                 "                             [--case inference_rtt|inference_pipelined|\n"
                 "                                     sample_throughput|param_broadcast|\n"
                 "                                     param_relay]\n");
}

/* inference_rtt and sample_throughput plain, then with CURVE, then the cost per row. */
static int curve_passes(gb_bench_net *b)
{
    static const char *const cases[2] = {"inference_rtt", "sample_throughput"};
    double plain[16];
    int nplain, rc = 0;
    for (int k = 0; k < 2; k++) {
        if (!gb_bench_net_want(b, cases[k]))
            continue;
        b->nfigures = 0;
        rc |= k == 0 ? gb_bench_inference_rtt(b) : gb_bench_sample_throughput(b);
        nplain = b->nfigures;
        memcpy(plain, b->figures, sizeof plain);
        /* the same case again on a context with a run's keys: every gearbox socket uses CURVE */
        gb_error err = {0};
        char keys[128];
        snprintf(keys, sizeof keys, "%s/%s", b->dir, GB_CURVE_KEYS_DIR);
        void *plain_ctx = b->ctx, *ctx = zmq_ctx_new();
        gb_curve *c = NULL;
        zmq_ctx_set(ctx, ZMQ_IO_THREADS, 2);
        /* ipc: a run's worker identity (PLAIN, the handshake only) */
        const char *const self[1] = {"actor/0"};
        if ((access(keys, F_OK) != 0 && gb_curve_run_keys_create(b->dir, &err)) ||
            (!b->tcp && gb_curve_identities_create(b->dir, self, 1, &err)) ||
            (b->tcp ? gb_curve_run_attach(&c, ctx, keys, &err)
                    : gb_curve_identity_attach(&c, ctx, keys, self[0], &err))) {
            fprintf(stderr, "gearbox bench streams: %s\n", err.msg);
            zmq_ctx_term(ctx);
            return 1;
        }
        b->ctx = ctx;
        b->curve = 1;
        b->nfigures = 0;
        rc |= k == 0 ? gb_bench_inference_rtt(b) : gb_bench_sample_throughput(b);
        b->curve = 0;
        b->ctx = plain_ctx;
        gb_curve_detach(c);
        zmq_ctx_term(ctx);
        for (int i = 0; i < nplain && i < b->nfigures; i++) {
            double ratio = plain[i] > 0 ? b->figures[i] / plain[i] : 0;
            if (b->json)
                printf("{\"bench\": \"streams\", \"case\": \"curve_cost\", \"of\": \"%s\", "
                       "\"row\": %d, \"plain\": %.3f, \"curve\": %.3f, \"ratio\": %.3f}\n",
                       cases[k], i, plain[i], b->figures[i], ratio);
            else
                printf("curve_cost  %-17s row %d  plain %9.2f  %s %9.2f %s  "
                       "%s/plain %.2f\n", cases[k], i, plain[i], b->tcp ? "CURVE" : "PLAIN",
                       b->figures[i], k == 0 ? "us p50 " : "Gbit/s ",
                       b->tcp ? "CURVE" : "PLAIN", ratio);
        }
        fflush(stdout);
    }
    char path[256];
    const char *files[4] = {"server.key", "client.key", "actor-0.key", "identities"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s/%s", b->dir, GB_CURVE_KEYS_DIR, files[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/%s", b->dir, GB_CURVE_KEYS_DIR);
    rmdir(path);
    return rc;
}

typedef struct streams_opts {
    gb_bench_net *b;
    int curve;
} streams_opts;

static int on_option(void *ctx, int val, const char *arg)
{
    streams_opts *o = ctx;
    if (val == 'q')
        o->b->quick = 1;
    else if (val == 't')
        o->b->tcp = strcmp(arg, "tcp") == 0;
    else if (val == 'c')
        o->b->only = arg;
    else if (strcmp(arg, "on") == 0 || strcmp(arg, "off") == 0)
        o->curve = strcmp(arg, "on") == 0;
    else {
        bench_usage(stderr);
        return -1;
    }
    return 0;
}

int gb_bench_streams(int argc, char **argv, int json)
{
    if (gb_wants_help(argc, argv)) {
        bench_usage(stdout);
        return GB_EXIT_OK;
    }
    static const struct option longs[] = {
        {"quick", no_argument, NULL, 'q'}, {"transport", required_argument, NULL, 't'},
        {"case", required_argument, NULL, 'c'}, {"curve", required_argument, NULL, 'C'},
        GB_BENCH_OPTION_JSON, {0}};
    gb_bench_net b = {0};
    b.json = json;
    streams_opts o = {.b = &b};
    if (gb_bench_options(argc, argv, longs, 0, on_option, &o, bench_usage))
        return GB_EXIT_USAGE;
    int curve = o.curve;
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
    if (curve) {
        rc = curve_passes(&b);
        zmq_ctx_term(b.ctx);
        rmdir(b.dir);
        return rc ? GB_EXIT_FAILURE : GB_EXIT_OK;
    }
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