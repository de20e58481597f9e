/* launch/bench/bench_serve.c: `gearbox bench serve`: the offline-RL data server against plain
 * ZeroMQ. Server and clients are separate processes over tcp loopback. For each client count (1, 4,
 * 16) it measures, interleaved in the same run:
 *   serve: gearbox's server (2 request threads) holding items of --item-bytes (default 64 KiB),
 *          clients sampling --batch items with the C client into their own buffers;
 *   raw:   a plain ZeroMQ ROUTER answering each request with the same bytes from one buffer
 *          (zero-copy send) and clients that receive the frames without touching them.
 * Each client count runs 3 interleaved rounds of --seconds per mode (default 1 s).
 * Throughput counts the item bytes delivered to clients per second (GB/s, 10^9 bytes). The
 * ratio gbps / raw_gbps is the figure of merit (target >= 0.6 at 4 clients, >= 64 KB items).
 * With python3 and pyzmq/msgpack/numpy, one Python client
 * (workers/server/client/python/gearbox_client.py)
 * is measured too, then (with torch) the PyTorch DataLoader path (gearbox_torch.py: in-process
 * and with 2 workers, against the plain client in the same run), and sampling across 2 servers
 * (gearbox_shards.py, against one server). Last, the memory a dataset of --memory-items 1-step
 * items takes a transition (default 1M; resident growth and column tables against raw bytes).
 * Options: --json, --seconds S (per round and mode, default 1), --item-bytes N, --batch N,
 * --clients a,b,c, --memory-items N, --no-python. */
#include "launch/bench/bench.h"
#include "launch/bench/bench_serve.h"
#include "launch/commands.h"
#include "replay/replay.h"
#include "runtime/base/clock.h"
#include "runtime/streams/wire.h"
#include "workers/server/client/client.h"
#include "workers/server/server.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#define ROUNDS 3 /* interleaved measurement rounds per client count */


static atomic_int child_stop;
static void on_term(int sig)
{
    (void)sig;
    atomic_store(&child_stop, 1);
}

/* ---- server processes ------------------------------------------------------------------------ */

static void serve_child(const gb_bench_serve_opts *o, int fd)
{
    gb_error err = {0};
    gb_replay_options ro;
    gb_replay_options_default(&ro);
    ro.steps = 16;
    ro.capacity = 512;
    ro.timeout_s = 5;
    int64_t shape[1] = {o->item_bytes / 16};
    gb_replay *r = NULL;
    gb_server *s = NULL;
    void *zctx = zmq_ctx_new();
    zmq_ctx_set(zctx, ZMQ_IO_THREADS, 2);
    if (gb_replay_add_column(&ro, "obs", GB_DTYPE_UINT8, 1, shape, 0, &err) ||
        gb_replay_create(&ro, &r, &err))
        goto fail;
    for (int i = 0; i < ro.capacity; i++) {
        int64_t idx;
        if (gb_replay_allocate(r, 1, &idx, 0, &err))
            goto fail;
        memset(gb_replay_block(r, 0, idx), i & 0xff, (size_t)o->item_bytes);
        if (gb_replay_commit(r, 1, &idx, NULL, NULL, NULL, &err))
            goto fail;
    }
    gb_server_opts so = {.endpoint = "tcp://127.0.0.1:*", .threads = 2,
                         .max_batch_rows = o->batch, .max_batch_bytes = 1LL << 34,
                         .max_request_bytes = 1 << 20, .max_wait_s = 5};
    if (gb_server_open(&s, zctx, r, &so, &err))
        goto fail;
    char ep[256];
    snprintf(ep, sizeof ep, "%s", gb_server_endpoint(s));
    if (write(fd, ep, sizeof ep) != (ssize_t)sizeof ep)
        goto fail;
    gb_server_run(s, &child_stop, &err);
    gb_server_close(s);
    zmq_ctx_term(zctx);
    gb_replay_free(r);
    _exit(0);
fail:
    fprintf(stderr, "bench serve: server: %s\n", err.msg);
    _exit(1);
}

static void raw_child(const gb_bench_serve_opts *o, int fd)
{
    size_t bytes = (size_t)(o->batch * o->item_bytes);
    void *buf = malloc(bytes);
    memset(buf, 7, bytes);
    void *zctx = zmq_ctx_new();
    zmq_ctx_set(zctx, ZMQ_IO_THREADS, 2);
    void *s = zmq_socket(zctx, ZMQ_ROUTER);
    int t = 100, zero = 0;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &t, sizeof t);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    char ep[256] = {0};
    size_t cap = sizeof ep;
    if (zmq_bind(s, "tcp://127.0.0.1:*") != 0 ||
        zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &cap) != 0 ||
        write(fd, ep, sizeof ep) != (ssize_t)sizeof ep)
        _exit(1);
    while (!atomic_load(&child_stop)) {
        char id[256], req[256];
        int n = zmq_recv(s, id, sizeof id, 0);
        if (n < 0)
            continue;
        int more = 1;
        size_t ml = sizeof more;
        while (zmq_getsockopt(s, ZMQ_RCVMORE, &more, &ml) == 0 && more)
            zmq_recv(s, req, sizeof req, 0);
        zmq_msg_t m;
        zmq_msg_init_data(&m, buf, bytes, NULL, NULL); /* zero-copy, never freed */
        zmq_send(s, id, (size_t)n, ZMQ_SNDMORE);
        zmq_send(s, "hdr", 3, ZMQ_SNDMORE);
        zmq_msg_send(&m, s, 0);
    }
    zmq_close(s);
    zmq_ctx_term(zctx);
    _exit(0);
}

static pid_t start_server(const gb_bench_serve_opts *o, int raw, char *ep)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        signal(SIGTERM, on_term);
        raw ? raw_child(o, p[1]) : serve_child(o, p[1]);
    }
    close(p[1]);
    ssize_t n = read(p[0], ep, 256);
    close(p[0]);
    if (n != 256) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    return pid;
}

/* ---- client processes ------------------------------------------------------------------------ */

typedef struct result {
    double bytes, items, seconds;
} result;

/* raw: 1 plain ZeroMQ, 0 gearbox client copying into caller buffers, 2 gearbox client views */
static void client_child(const gb_bench_serve_opts *o, int raw, const char *ep, int go_fd,
                         int out_fd)
{
    result res = {0};
    char go;
    if (raw == 1) {
        void *zctx = zmq_ctx_new();
        void *s = zmq_socket(zctx, ZMQ_DEALER);
        int zero = 0;
        zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
        zmq_connect(s, ep);
        if (read(go_fd, &go, 1) != 1)
            _exit(1);
        double t0 = gb_now_s(), end = t0 + o->seconds;
        zmq_msg_t m;
        zmq_msg_init(&m);
        while (gb_now_s() < end) {
            zmq_send(s, "req", 3, 0);
            int more = 1;
            while (more) {
                if (zmq_msg_recv(&m, s, 0) < 0)
                    _exit(1);
                more = zmq_msg_more(&m);
                if (!more)
                    res.bytes += (double)zmq_msg_size(&m);
            }
            res.items += (double)o->batch;
        }
        res.seconds = gb_now_s() - t0;
        zmq_msg_close(&m);
        zmq_close(s);
        zmq_ctx_term(zctx);
    } else {
        gb_error err = {0};
        gb_client *c = NULL;
        gb_client_info info;
        if (gb_client_open(&c, ep, 10000, &err) || gb_client_get_info(c, &info, &err)) {
            fprintf(stderr, "bench serve: client: %s\n", err.msg);
            _exit(1);
        }
        size_t cap = (size_t)(o->batch * o->item_bytes);
        void *data[1] = {malloc(cap)};
        memset(data[0], 0, cap);
        if (read(go_fd, &go, 1) != 1)
            _exit(1);
        double t0 = gb_now_s(), end = t0 + o->seconds;
        while (gb_now_s() < end) {
            gb_client_sample_req req = {.batch = o->batch, .timeout_ms = -1};
            gb_client_batch out = {.data = data, .cap = &cap};
            const void *view[1];
            if ((raw == 2 ? gb_client_sample_views(c, &req, &out, view, NULL, &err)
                          : gb_client_sample(c, &req, &out, &err))) {
                fprintf(stderr, "bench serve: client: %s\n", err.msg);
                _exit(1);
            }
            res.bytes += (double)out.n * (double)o->item_bytes;
            res.items += (double)out.n;
        }
        res.seconds = gb_now_s() - t0;
        gb_client_close(c);
        free(data[0]);
    }
    if (write(out_fd, &res, sizeof res) != (ssize_t)sizeof res)
        _exit(1);
    _exit(0);
}

/* Runs k clients at once; returns the total bytes/s and items/s (sum of each client's rate). */
static int run_clients(const gb_bench_serve_opts *o, int raw, const char *ep, int k, double *bps,
                       double *ips)
{
    if (k < 1 || k > 64)
        return -1;
    int go[2], res[2];
    if (pipe(go) != 0 || pipe(res) != 0)
        return -1;
    pid_t pids[64];
    for (int i = 0; i < k; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(go[1]);
            close(res[0]);
            client_child(o, raw, ep, go[0], res[1]);
        }
    }
    close(go[0]);
    close(res[1]);
    gb_sleep_ms(300); /* connections up */
    char ones[64];
    memset(ones, 1, sizeof ones);
    if (write(go[1], ones, (size_t)k) != (ssize_t)k)
        return -1;
    close(go[1]);
    *bps = *ips = 0;
    int ok = 0;
    for (int i = 0; i < k; i++) {
        result r;
        if (read(res[0], &r, sizeof r) == (ssize_t)sizeof r && r.seconds > 0) {
            *bps += r.bytes / r.seconds;
            *ips += r.items / r.seconds;
            ok++;
        }
    }
    close(res[0]);
    for (int i = 0; i < k; i++)
        waitpid(pids[i], NULL, 0);
    return ok == k ? 0 : -1;
}

/* This process's resident memory in bytes (/proc/self/statm), 0 when unknown. */
static double rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, resident = 0;
    if (!f)
        return 0;
    int n = fscanf(f, "%lld %lld", &size, &resident);
    fclose(f);
    return n == 2 ? (double)resident * (double)sysconf(_SC_PAGESIZE) : 0;
}

/* The memory a dataset of 1-step items takes (the D4RL layout of a 17-dimensional observation
 * and 6-dimensional action, as HalfCheetah's): a child process fills a replay the way
 * `gearbox serve` loads one, and reports its resident memory growth and the column tables'
 * bytes, per transition, against the raw bytes of a transition. */
static void bench_memory(const gb_bench_serve_opts *o, int64_t items)
{
    int p[2];
    if (pipe(p) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        double v[3] = {0, 0, 0};
        gb_error err = {0};
        gb_replay_options ro;
        gb_replay_options_default(&ro);
        ro.steps = 1;
        ro.capacity = items;
        static const int64_t obs[1] = {17}, act[1] = {6};
        const struct { const char *name; gb_dtype dt; int ndim; const int64_t *shape; } cols[] = {
            {"obs", GB_DTYPE_FLOAT32, 1, obs},       {"action", GB_DTYPE_FLOAT32, 1, act},
            {"reward", GB_DTYPE_FLOAT32, 0, NULL},   {"terminal", GB_DTYPE_UINT8, 0, NULL},
            {"timeout", GB_DTYPE_UINT8, 0, NULL},    {"valid", GB_DTYPE_UINT8, 0, NULL},
            {"next_obs", GB_DTYPE_FLOAT32, 1, obs}};
        double raw = 0;
        for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
            raw += (double)gb_dtype_size(cols[c].dt) *
                   (cols[c].ndim ? (double)cols[c].shape[0] : 1);
            if (gb_replay_add_column(&ro, cols[c].name, cols[c].dt, cols[c].ndim, cols[c].shape,
                                     0, &err))
                _exit(1);
        }
        double before = rss_bytes();
        gb_replay *r = NULL;
        if (gb_replay_create(&ro, &r, &err))
            _exit(1);
        for (int64_t i = 0; i < items; i++) {
            int64_t idx;
            if (gb_replay_allocate_unlimited(r, 1, &idx, &err))
                _exit(1);
            for (int c = 0; c < ro.ncolumns; c++)
                memset(gb_replay_block(r, c, idx), (int)(i & 0x7f), 4);
            if (gb_replay_commit(r, 1, &idx, NULL, NULL, NULL, &err))
                _exit(1);
        }
        gb_replay_table t[GB_REPLAY_MAX_COLUMNS];
        gb_replay_tables(r, t);
        double tables = 0;
        for (int c = 0; c < ro.ncolumns; c++)
            tables += (double)t[c].stride;
        v[0] = (rss_bytes() - before) / (double)items;
        v[1] = tables;
        v[2] = raw;
        ssize_t w = write(p[1], v, sizeof v);
        _exit(w == (ssize_t)sizeof v ? 0 : 1);
    }
    close(p[1]);
    double v[3];
    ssize_t n = read(p[0], v, sizeof v);
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (n != (ssize_t)sizeof v || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (!o->json)
            printf("  memory per transition: not measured (the replay could not be filled)\n");
        return;
    }
    if (o->json)
        printf("{\"bench\":\"serve\",\"case\":\"memory_1step\",\"items\":%lld,"
               "\"raw_bytes_per_transition\":%.0f,\"table_bytes_per_transition\":%.0f,"
               "\"rss_bytes_per_transition\":%.1f,\"rss_ratio\":%.2f}\n", (long long)items,
               v[2], v[1], v[0], v[0] / v[2]);
    else
        printf("  memory, %lld 1-step items (D4RL columns, 17-d obs, 6-d action): %.0f B a "
               "transition resident, %.0f B in the column tables, raw %.0f B (x%.2f)\n",
               (long long)items, v[0], v[1], v[2], v[0] / v[2]);
}

static void bench_usage(FILE *out)
{
    fprintf(out, "usage: gearbox bench serve [--json] [--seconds S] [--item-bytes N] "
                 "[--batch N] [--clients 1,4,16] [--memory-items N] [--no-python]\n");
}

static int on_option(void *ctx, int val, const char *arg)
{
    gb_bench_serve_opts *o = ctx;
    switch (val) {
    case 'n':
        o->python = 0;
        break;
    case 's':
        o->seconds = atof(arg);
        break;
    case 'i':
        o->item_bytes = atoll(arg);
        break;
    case 'b':
        o->batch = atoll(arg);
        break;
    case 'm':
        o->memory_items = atoll(arg);
        break;
    case 'c': {
        char *list = (char *)arg; /* argv is ours to split */
        o->nclients = 0;
        for (char *t = strtok(list, ","); t && o->nclients < 8; t = strtok(NULL, ","))
            o->clients[o->nclients++] = atoi(t);
        break;
    }
    }
    return 0;
}

/* The options into o; returns 0, or -1 after saying what is wrong. */
static int serve_options(int argc, char **argv, gb_bench_serve_opts *o)
{
    static const struct option longs[] = {
        {"no-python", no_argument, NULL, 'n'},     {"seconds", required_argument, NULL, 's'},
        {"item-bytes", required_argument, NULL, 'i'}, {"batch", required_argument, NULL, 'b'},
        {"memory-items", required_argument, NULL, 'm'},
        {"clients", required_argument, NULL, 'c'}, GB_BENCH_OPTION_JSON, {0}};
    if (gb_bench_options(argc, argv, longs, 0, on_option, o, bench_usage))
        return -1;
    if (o->seconds <= 0 || o->item_bytes < 16 || o->item_bytes % 16 || o->batch < 1 ||
        o->memory_items < 1) {
        fprintf(stderr, "gearbox bench serve: --item-bytes must be a multiple of 16 (T = 16), "
                        "--batch and --seconds positive\n");
        return -1;
    }
    for (int i = 0; i < o->nclients; i++)
        if (o->clients[i] < 1 || o->clients[i] > 64) {
            fprintf(stderr, "gearbox bench serve: client counts 1..64\n");
            return -1;
        }
    return 0;
}

/* For each client count: C clients of gearbox's server (at sep), with copies and with views,
 * against raw ZeroMQ (at rep). Returns 0, or -1 when a client failed. */
static int measure_c_clients(const gb_bench_serve_opts *o, const char *sep, const char *rep)
{
    for (int i = 0; i < o->nclients; i++) {
        int k = o->clients[i];
        /* Interleaved rounds (raw, copy, views) so that load from other processes on the
         * machine falls on all three alike; rates are averaged over the rounds. */
        double sb = 0, si = 0, rb = 0, ri = 0, vb = 0, vi = 0;
        for (int round = 0; round < ROUNDS; round++) {
            double b[3], it[3];
            if (run_clients(o, 1, rep, k, &b[0], &it[0]) ||
                run_clients(o, 0, sep, k, &b[1], &it[1]) ||
                run_clients(o, 2, sep, k, &b[2], &it[2])) {
                fprintf(stderr, "gearbox bench serve: a client failed (%d clients)\n", k);
                return -1;
            }
            rb += b[0] / ROUNDS, ri += it[0] / ROUNDS;
            sb += b[1] / ROUNDS, si += it[1] / ROUNDS;
            vb += b[2] / ROUNDS, vi += it[2] / ROUNDS;
        }
        if (o->json)
            printf("{\"bench\":\"serve\",\"client\":\"c\",\"clients\":%d,\"batch\":%lld,"
                   "\"item_bytes\":%lld,\"samples_per_s\":%.1f,\"gbps\":%.3f,\"raw_gbps\":%.3f,"
                   "\"ratio\":%.3f}\n"
                   "{\"bench\":\"serve\",\"client\":\"c_views\",\"clients\":%d,\"batch\":%lld,"
                   "\"item_bytes\":%lld,\"samples_per_s\":%.1f,\"gbps\":%.3f,\"raw_gbps\":%.3f,"
                   "\"ratio\":%.3f}\n", k, (long long)o->batch, (long long)o->item_bytes, si,
                   sb / 1e9, rb / 1e9, sb / rb, k, (long long)o->batch,
                   (long long)o->item_bytes, vi, vb / 1e9, rb / 1e9, vb / rb);
        else
            printf("  %2d C clients: %9.0f items/s  %6.2f GB/s   raw ZeroMQ %6.2f GB/s   "
                   "ratio %.2f   (views, no copy: %6.2f GB/s, ratio %.2f)\n", k, si, sb / 1e9,
                   rb / 1e9, sb / rb, vb / 1e9, vb / rb);
        fflush(stdout);
    }
    return 0;
}

/* One Python client of the server at sep against one raw ZeroMQ C client (at rep). */
static void measure_python(const gb_bench_serve_opts *o, const char *sep, const char *rep)
{
    double pb, pi, rb = 0, ri = 0;
    if (run_clients(o, 1, rep, 1, &rb, &ri) != 0 ||
        gb_bench_serve_python(o, sep, &pb, &pi) != 0) {
        if (!o->json)
            printf("  python client: not measured (python3 with pyzmq, msgpack and numpy "
                   "not found, or GEARBOX_PYTHON_DIR wrong)\n");
    } else if (o->json) {
        printf("{\"bench\":\"serve\",\"client\":\"python\",\"clients\":1,\"batch\":%lld,"
               "\"item_bytes\":%lld,\"samples_per_s\":%.1f,\"gbps\":%.3f,"
               "\"raw_gbps\":%.3f,\"ratio\":%.3f}\n", (long long)o->batch,
               (long long)o->item_bytes, pi, pb / 1e9, rb / 1e9, pb / rb);
    } else {
        printf("   1 Python client: %7.0f items/s  %6.2f GB/s   raw ZeroMQ %6.2f GB/s   "
               "ratio %.2f\n", pi, pb / 1e9, rb / 1e9, pb / rb);
    }
}

/* The DataLoader and 2-server cases with o's items (the first server: sp at sep), then with
 * small ones (256 B items, batch 256: D4RL-sized transitions, where a round trip costs more
 * than the bytes), on servers of their own. */
static void measure_python_loaders(const gb_bench_serve_opts *o, pid_t sp, const char *sep)
{
    gb_bench_serve_opts small = *o;
    small.item_bytes = 256;
    small.batch = 256;
    for (int pass = 0; pass < 2; pass++) {
        const gb_bench_serve_opts *po = pass ? &small : o;
        char ep1[256], ep2[256];
        pid_t s1 = pass ? start_server(po, 0, ep1) : sp, s2 = start_server(po, 0, ep2);
        if (pass == 0)
            snprintf(ep1, sizeof ep1, "%s", sep);
        if (s1 > 0 && s2 > 0) {
            if (!o->json)
                printf(" items of %lld B, batch %lld:\n", (long long)po->item_bytes,
                       (long long)po->batch);
            gb_bench_serve_torch(po, ep1);
            gb_bench_serve_shards(po, ep1, ep2);
        }
        for (int k = 0; k < 2; k++) {
            pid_t p = k ? s2 : (pass ? s1 : -1);
            if (p > 0) {
                kill(p, SIGTERM);
                waitpid(p, NULL, 0);
            }
        }
    }
}

int gb_bench_serve(int argc, char **argv, int json)
{
    if (gb_wants_help(argc, argv)) {
        bench_usage(stdout);
        return GB_EXIT_OK;
    }
    gb_bench_serve_opts o = {.json = json, .python = 1, .seconds = 1, .item_bytes = 65536,
                             .batch = 32, .clients = {1, 4, 16}, .nclients = 3,
                             .memory_items = 1000000};
    if (serve_options(argc, argv, &o))
        return GB_EXIT_USAGE;
    signal(SIGPIPE, SIG_IGN);
    char sep[256], rep[256];
    pid_t sp = start_server(&o, 0, sep), rp = start_server(&o, 1, rep);
    if (sp < 0 || rp < 0) {
        fprintf(stderr, "gearbox bench serve: could not start the servers\n");
        if (sp > 0)
            kill(sp, SIGKILL);
        if (rp > 0)
            kill(rp, SIGKILL);
        return GB_EXIT_FAILURE;
    }
    if (!json)
        printf("data server vs plain ZeroMQ, tcp loopback, items of %lld B, batch %lld, %.1f s "
               "per round, 3 rounds\n", (long long)o.item_bytes, (long long)o.batch, o.seconds);
    int rc = measure_c_clients(&o, sep, rep) ? GB_EXIT_FAILURE : GB_EXIT_OK;
    if (rc == 0 && o.python) {
        measure_python(&o, sep, rep);
        measure_python_loaders(&o, sp, sep);
    }
    if (rc == 0)
        bench_memory(&o, o.memory_items);
    kill(sp, SIGTERM);
    kill(rp, SIGTERM);
    waitpid(sp, NULL, 0);
    waitpid(rp, NULL, 0);
    return rc;
}
