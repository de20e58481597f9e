/* launch/cmd_serve.c: `gearbox serve CONFIG [--set key=value ...]`: the offline-RL data server.
 * Loads the dataset (or restores the checkpoint) into a replay, binds server.endpoint, prints
 * one line "gearbox serve: serving N items on ENDPOINT" to stdout (tools and tests read it),
 * serves until SIGINT/SIGTERM, and writes a final checkpoint when server.checkpoint is set. */
#include "launch/cli.h"
#include "launch/commands.h"
#include "replay/replay.h"
#include "runtime/base/clock.h"
#include "runtime/config/config.h"
#include "runtime/streams/curve.h"
#include "runtime/base/log.h"
#include "workers/server/server.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

static atomic_int stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&stop_flag, 1);
}

typedef struct ckpt_arg {
    gb_server *s;
    double every;
} ckpt_arg;

/* Periodic checkpoints (server.checkpoint_every_s), beside the broker. */
static void *ckpt_main(void *arg)
{
    ckpt_arg *a = arg;
    double next = gb_now_s() + a->every;
    while (!atomic_load(&stop_flag)) {
        gb_sleep_ms(100);
        if (gb_now_s() < next)
            continue;
        gb_error err = {0};
        if (gb_server_checkpoint(a->s, &err) != 0)
            GB_ERROR("periodic checkpoint failed: %s", err.msg);
        next = gb_now_s() + a->every;
    }
    return NULL;
}

static void serve_usage(FILE *out)
{
    fprintf(out,
            "usage: gearbox serve CONFIG.yaml [--set key.path=value ...]\n\n"
            "Serves a dataset from a replay over ZeroMQ to training processes (C client:\n"
            "workers/server/client/client.h; Python:\n"
            "workers/server/client/python/gearbox_client.py). The config's server\n"
            "section names the dataset (gearbox *.gbds from `gearbox run --record`, a D4RL\n"
            "HDF5 file or a Minari dataset folder), the endpoint (loopback or ipc unless it names\n"
            "another address), the replay (selector, remover, rate limiter), per-request limits\n"
            "and the checkpoint; server.tables adds named tables (docs/protocol.md, \"Tables\").\n"
            "Prints \"gearbox serve: serving N items on ENDPOINT\" once ready; SIGINT/SIGTERM\n"
            "stop it (writing the checkpoint when one is configured).\n\n"
            "exit status: 0 stopped cleanly, 1 runtime failure, 2 usage or config error\n");
}

/* Announces the endpoint (one line tools and tests read), then serves until stopped, with the
 * periodic checkpoints beside it. Returns 0 or the error of serving. */
static int serve(gb_server *s, const gb_config *cfg, const gb_server_opts *so, int64_t loaded,
                 const char *server_public, gb_error *err)
{
    printf("gearbox serve: serving %lld items on %s\n", (long long)loaded, gb_server_endpoint(s));
    if (server_public[0])
        printf("gearbox serve: CURVE on; clients need the server public key %s%s\n",
               server_public, cfg->server.curve_clients[0] ? " and an allowed key pair" : "");
    fflush(stdout);
    GB_INFO("serving on %s with %d request threads", gb_server_endpoint(s), so->threads);
    pthread_t ck;
    ckpt_arg ca = {s, cfg->server.checkpoint_every_s};
    int ck_started = ca.every > 0 && cfg->server.checkpoint[0] &&
                     pthread_create(&ck, NULL, ckpt_main, &ca) == 0;
    int rc = gb_server_run(s, &stop_flag, err);
    atomic_store(&stop_flag, 1);
    if (ck_started)
        pthread_join(ck, NULL);
    return rc;
}

static void log_stats(const gb_server *s)
{
    gb_server_stats st = gb_server_get_stats(s);
    GB_INFO("stopping: %llu info, %llu sample, %llu insert, %llu update, %llu checkpoint "
            "requests; %llu errors, %llu malformed, %llu refused (replies unread); %llu items, "
            "%.3f GB sent",
            (unsigned long long)st.requests[GB_SERVE_INFO],
            (unsigned long long)st.requests[GB_SERVE_SAMPLE],
            (unsigned long long)st.requests[GB_SERVE_INSERT],
            (unsigned long long)st.requests[GB_SERVE_UPDATE],
            (unsigned long long)st.requests[GB_SERVE_CHECKPOINT],
            (unsigned long long)st.errors, (unsigned long long)st.rejected,
            (unsigned long long)st.refused, (unsigned long long)st.items_sent,
            (double)st.bytes_sent / 1e9);
}

int gb_cmd_serve(int argc, char **argv)
{
    if (gb_wants_help(argc, argv)) {
        serve_usage(stdout);
        return GB_EXIT_OK;
    }
    gb_cli cli;
    static gb_config cfg;
    gb_error err = {0};
    int urc = gb_cli_load(argc, argv, 0, &cli, &cfg);
    if (urc != GB_EXIT_OK)
        return urc;
    gb_log_init("server", 0, (gb_log_level)cfg.experiment.log_level);
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    static gb_server_tables tables;
    gb_server *s = NULL;
    void *zctx = NULL;
    double t0 = gb_now_s();
    int rc = gb_server_load_tables(&cfg, &tables, &err);
    if (rc) {
        fprintf(stderr, "gearbox serve: %s\n", err.msg);
        return rc == GB_EINVAL ? GB_EXIT_USAGE : GB_EXIT_FAILURE;
    }
    int64_t loaded = tables.t[0].loaded;
    for (int i = 0; i < tables.n; i++)
        GB_INFO("table '%s': %lld items, %lld episodes", tables.t[i].name,
                (long long)tables.t[i].loaded, (long long)gb_episodes_count(tables.t[i].ep));
    GB_INFO("loaded %d table(s) in %.1f s", tables.n, gb_now_s() - t0);
    gb_server_opts so;
    gb_server_opts_from_config(&so, &cfg.server);
    zctx = zmq_ctx_new();
    int io_threads = 2;
    if (!zctx || zmq_ctx_set(zctx, ZMQ_IO_THREADS, io_threads) != 0)
        rc = gb_error_set(&err, GB_EZMQ, "zmq_ctx_new failed");
    gb_curve *curve = NULL;
    char server_public[GB_CURVE_KEY_Z85] = "";
    if (rc == 0 && cfg.server.curve)
        rc = gb_curve_server_attach(&curve, zctx, cfg.server.curve_key, cfg.server.curve_clients,
                                    server_public, &err);
    if (rc == 0)
        rc = gb_server_open_tables(&s, zctx, &tables, &so, &err);
    if (rc == 0)
        rc = serve(s, &cfg, &so, loaded, server_public, &err);
    if (s) {
        log_stats(s);
        if (rc == 0 && cfg.server.checkpoint[0])
            rc = gb_server_checkpoint(s, &err);
    }
    gb_server_close(s);
    if (curve)
        GB_INFO("CURVE: %llu clients accepted, %llu connections refused",
                (unsigned long long)gb_curve_accepted(curve),
                (unsigned long long)gb_curve_refused(curve));
    gb_curve_detach(curve);
    if (zctx)
        zmq_ctx_term(zctx);
    gb_server_tables_free(&tables);
    if (rc) {
        fprintf(stderr, "gearbox serve: %s\n", err.msg);
        return GB_EXIT_FAILURE;
    }
    return GB_EXIT_OK;
}
