/* launch/bench/bench_replay.c: `gearbox bench replay`: the GEAR replay store on the CPU, through
 * its public API (replay/replay.h). Cases: insert (small and large items, items/s, steps/s, GB/s),
 * select (uniform, weighted, top-k at capacities 1e4..1e7, batch 256, p50), collect (>= 64 KB
 * items against a single-thread memcpy of the same bytes from memory, measured in the same run),
 * and sample_update (weighted select + collect + priority update of 256 from 1e6 small items), and,
 * only when asked for by --case, global_select (replay shards in a forked group of 4 ranks, or
 * this process as one rank of a group over tcp: bench_replay_shards.c).
 * Options: --json, --case NAME, --max-capacity N (largest select capacity, default 1e7),
 * --reps N, --quick; global_select's --ranks N, --rank R, --store tcp://HOST:PORT,
 * --interface ADDR. */
#include "launch/bench/bench.h"
#include "runtime/streams/endpoint.h"
#include "launch/commands.h"
#include "replay/replay.h"
#include "runtime/base/clock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bopts {
    int json;
    int reps;
    int64_t max_capacity;
    int collect_threads;
} bopts;

/* The small item of the issue: T = 32 steps of obs float32[4], action int32, reward float32,
 * done uint8. */
static int small_options(gb_replay_options *o, int64_t capacity, gb_error *err)
{
    gb_replay_options_default(o);
    o->capacity = capacity;
    o->steps = 32;
    o->timeout_s = 5;
    int64_t four = 4;
    int rc = gb_replay_add_column(o, "obs", GB_DTYPE_FLOAT32, 1, &four, 0, err);
    if (!rc)
        rc = gb_replay_add_column(o, "action", GB_DTYPE_INT32, 0, NULL, 0, err);
    if (!rc)
        rc = gb_replay_add_column(o, "reward", GB_DTYPE_FLOAT32, 0, NULL, 0, err);
    if (!rc)
        rc = gb_replay_add_column(o, "done", GB_DTYPE_UINT8, 0, NULL, 0, err);
    return rc;
}

/* The large item: T = 16 steps of 84x84x4 uint8 frames. */
static int large_options(gb_replay_options *o, int64_t capacity, gb_error *err)
{
    gb_replay_options_default(o);
    o->capacity = capacity;
    o->steps = 16;
    o->timeout_s = 5;
    int64_t shape[3] = {84, 84, 4};
    return gb_replay_add_column(o, "obs", GB_DTYPE_UINT8, 3, shape, 0, err);
}

static size_t item_bytes(gb_replay *r)
{
    const gb_replay_options *o = gb_replay_options_of(r);
    gb_replay_table t[GB_REPLAY_MAX_COLUMNS];
    gb_replay_tables(r, t);
    size_t n = 0;
    for (int c = 0; c < o->ncolumns; c++)
        n += t[c].block_bytes;
    return n;
}

/* Inserts through allocate -> memcpy into the blocks (as the sample stream's ingest does from a
 * received frame) -> commit, `batch` items per call, for about `seconds`. */
static int bench_insert(const bopts *b, const char *label, gb_replay_options *o, int64_t batch,
                        double seconds, gb_error *err)
{
    gb_replay *r = NULL;
    int rc = gb_replay_create(o, &r, err);
    if (rc)
        return rc;
    size_t ib = item_bytes(r);
    int ncol = o->ncolumns;
    gb_replay_table t[GB_REPLAY_MAX_COLUMNS];
    gb_replay_tables(r, t);
    /* Source chunk: batch items' worth of each column, as a received message would hold. */
    uint8_t *src[GB_REPLAY_MAX_COLUMNS] = {0};
    int64_t *idx = malloc((size_t)batch * sizeof *idx);
    double *prio = malloc((size_t)batch * sizeof *prio);
    for (int c = 0; c < ncol && idx; c++) {
        src[c] = malloc(t[c].block_bytes * (size_t)batch);
        if (src[c])
            memset(src[c], c + 1, t[c].block_bytes * (size_t)batch);
    }
    for (int64_t k = 0; k < batch && prio; k++)
        prio[k] = 1.0 + (double)(k % 7);
    /* Warm up: fill the store once, so the measured part includes eviction and the kernel has
     * already given the shared pages. */
    int64_t items = 0;
    double t0 = 0;
    for (int phase = 0; phase < 2 && !rc; phase++) {
        int64_t target = phase == 0 ? o->capacity : INT64_MAX;
        int64_t done = 0;
        t0 = gb_now_s();
        while (done < target) {
            rc = gb_replay_allocate(r, batch, idx, -1, err);
            if (rc)
                break;
            for (int c = 0; c < ncol; c++)
                for (int64_t k = 0; k < batch; k++)
                    memcpy(gb_replay_block(r, c, idx[k]), src[c] + (size_t)k * t[c].block_bytes,
                           t[c].block_bytes);
            rc = gb_replay_commit(r, batch, idx, prio, NULL, NULL, err);
            if (rc)
                break;
            done += batch;
            if (phase == 1 && (done & 63) < batch && gb_now_s() - t0 >= seconds)
                break;
        }
        items = done;
    }
    double dt = gb_now_s() - t0;
    if (!rc) {
        double ips = (double)items / dt, sps = ips * (double)o->steps,
               gbps = ips * (double)ib / 1e9;
        if (b->json)
            printf("{\"bench\":\"replay\",\"case\":\"insert\",\"item\":\"%s\",\"item_bytes\":%zu,"
                   "\"steps\":%lld,\"batch\":%lld,\"items_per_s\":%.0f,\"steps_per_s\":%.0f,"
                   "\"gbps\":%.3f}\n", label, ib, (long long)o->steps, (long long)batch, ips, sps,
                   gbps);
        else
            printf("insert   %-6s item %7zu B  batch %3lld  %10.0f items/s  %11.0f steps/s  "
                   "%6.2f GB/s\n", label, ib, (long long)batch, ips, sps, gbps);
        fflush(stdout);
    }
    for (int c = 0; c < ncol; c++)
        free(src[c]);
    free(idx);
    free(prio);
    gb_replay_free(r);
    return rc;
}

/* Fills a replay with n committed items (random priorities) without touching the tables:
 * selection depends only on the status table. */
static int fill_status(gb_replay *r, int64_t n, gb_error *err)
{
    enum { CHUNK = 4096 };
    int64_t idx[CHUNK];
    double prio[CHUNK];
    gb_rng rng;
    gb_rng_seed(&rng, 42);
    for (int64_t done = 0; done < n;) {
        int64_t m = n - done < CHUNK ? n - done : CHUNK;
        int rc = gb_replay_allocate(r, m, idx, -1, err);
        if (rc)
            return rc;
        for (int64_t k = 0; k < m; k++)
            prio[k] = 0.01 + 10.0 * gb_rng_uniform(&rng);
        rc = gb_replay_commit(r, m, idx, prio, NULL, NULL, err);
        if (rc)
            return rc;
        done += m;
    }
    return 0;
}

static int bench_select(const bopts *b, gb_selector_kind kind, const char *name, int64_t capacity,
                        int64_t batch, double *p50_out, gb_error *err)
{
    gb_replay_options o;
    gb_replay_options_default(&o);
    o.capacity = capacity;
    o.steps = 1;
    o.selector = kind;
    o.timeout_s = 5;
    int rc = gb_replay_add_column(&o, "x", GB_DTYPE_UINT8, 0, NULL, 1, err);
    gb_replay *r = NULL;
    if (!rc)
        rc = gb_replay_create(&o, &r, err);
    if (rc)
        return rc;
    double fill_t0 = gb_now_s();
    rc = fill_status(r, capacity, err);
    double fill_s = gb_now_s() - fill_t0;
    gb_replay_selection s;
    if (!rc)
        rc = gb_replay_selection_init(&s, batch, err);
    if (rc) {
        gb_replay_free(r);
        return rc;
    }
    int reps = b->reps;
    double *t = malloc((size_t)reps * sizeof *t);
    gb_replay_request q = gb_replay_request_default(batch);
    for (int i = -20; i < reps && !rc; i++) {
        uint64_t a = gb_now_ns();
        rc = gb_replay_sample(r, &q, &s, err);
        gb_replay_release(r, &s);
        if (i >= 0)
            t[i] = (double)(gb_now_ns() - a) * 1e-3;
    }
    if (!rc) {
        double p50 = gb_bench_quantile(t, reps, 0.5), p90 = gb_bench_quantile(t, reps, 0.9);
        *p50_out = p50;
        if (b->json)
            printf("{\"bench\":\"replay\",\"case\":\"select\",\"selector\":\"%s\","
                   "\"capacity\":%lld,\"batch\":%lld,\"p50_us\":%.2f,\"p90_us\":%.2f,"
                   "\"fill_items_per_s\":%.0f,"
                   "\"reps\":%d}\n", name, (long long)capacity, (long long)batch, p50, p90,
                   (double)capacity / fill_s, reps);
        else
            printf("select   %-8s capacity %9lld batch %lld  p50 %8.2f us  p90 %8.2f us  (fill "
                   "%.0f items/s)\n", name, (long long)capacity, (long long)batch, p50, p90,
                   (double)capacity / fill_s);
        fflush(stdout);
    }
    free(t);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
    return rc;
}

/* Collect of `batch` items of T x step bytes against one memcpy of the same total bytes. */
static int bench_collect(const bopts *b, int64_t capacity, int64_t steps, int64_t step_bytes,
                         int64_t batch, int threads, gb_error *err)
{
    gb_replay_options o;
    gb_replay_options_default(&o);
    o.capacity = capacity;
    o.steps = steps;
    o.collect_threads = threads;
    int rc = gb_replay_add_column(&o, "obs", GB_DTYPE_UINT8, 1, &step_bytes, 0, err);
    gb_replay *r = NULL;
    if (!rc)
        rc = gb_replay_create(&o, &r, err);
    if (rc)
        return rc;
    size_t ib = (size_t)(steps * step_bytes), total = ib * (size_t)batch;
    int64_t idx[256];
    for (int64_t done = 0; done < capacity && !rc; done += 1) {
        rc = gb_replay_allocate(r, 1, idx, -1, err);
        if (!rc) {
            memset(gb_replay_block(r, 0, idx[0]), (int)(done & 0xff), ib);
            rc = gb_replay_commit(r, 1, idx, NULL, NULL, NULL, err);
        }
    }
    /* The reference copies from a source four times the batch, a different quarter each time,
     * so that like the collect (random blocks of a table larger than the cache) it reads memory,
     * not a cache-hot buffer. */
    uint8_t *dst = malloc(total), *src = malloc(4 * total);
    gb_replay_selection s;
    if (!rc)
        rc = gb_replay_selection_init(&s, batch, err);
    if (rc || !dst || !src) {
        free(dst);
        free(src);
        gb_replay_free(r);
        return rc ? rc : gb_error_set(err, GB_ENOMEM, "bench: buffers");
    }
    memset(dst, 1, total);
    memset(src, 2, 4 * total);
    int reps = b->reps < 50 ? b->reps : 50;
    double *tc = malloc((size_t)reps * sizeof *tc), *tm = malloc((size_t)reps * sizeof *tm);
    gb_replay_request q = gb_replay_request_default(batch);
    gb_replay_dst d = {0, dst, total};
    for (int i = -3; i < reps && !rc; i++) {
        rc = gb_replay_sample(r, &q, &s, err);
        if (rc)
            break;
        uint64_t a = gb_now_ns();
        rc = gb_replay_collect(r, &s, &d, 1, NULL, err);
        uint64_t m = gb_now_ns();
        gb_replay_release(r, &s);
        /* The reference: one single-thread memcpy of the same bytes, same run, same buffers. */
        uint64_t c = gb_now_ns();
        memcpy(dst, src + (size_t)((i + 3) % 4) * total, total);
        uint64_t e = gb_now_ns();
        if (i >= 0) {
            tc[i] = (double)(m - a) * 1e-9;
            tm[i] = (double)(e - c) * 1e-9;
        }
    }
    if (!rc) {
        double gbps = (double)total / gb_bench_quantile(tc, reps, 0.5) / 1e9,
               mgbps = (double)total / gb_bench_quantile(tm, reps, 0.5) / 1e9;
        if (b->json)
            printf("{\"bench\":\"replay\",\"case\":\"collect\",\"item_bytes\":%zu,\"batch\":%lld,"
                   "\"threads\":%d,\"bytes\":%zu,\"gbps\":%.3f,\"memcpy_gbps\":%.3f,"
                   "\"ratio\":%.3f}\n", ib, (long long)batch, threads, total, gbps, mgbps,
                   gbps / mgbps);
        else
            printf("collect  item %7zu B  batch %lld  threads %d  %6.2f GB/s  memcpy %6.2f GB/s  "
                   "ratio %.2f\n", ib, (long long)batch, threads, gbps, mgbps, gbps / mgbps);
        fflush(stdout);
    }
    free(tc);
    free(tm);
    free(dst);
    free(src);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
    return rc;
}

/* One training step's replay work: weighted select 256 of 1e6 small items, collect every column,
 * write back new priorities. */
static int bench_sample_update(const bopts *b, int64_t capacity, gb_error *err)
{
    gb_replay_options o;
    int rc = small_options(&o, capacity, err);
    o.selector = GB_SELECTOR_WEIGHTED;
    gb_replay *r = NULL;
    if (!rc)
        rc = gb_replay_create(&o, &r, err);
    if (rc)
        return rc;
    enum { B = 256 };
    gb_replay_table t[4];
    gb_replay_tables(r, t);
    int64_t idx[1024];
    double prio[1024];
    gb_rng rng;
    gb_rng_seed(&rng, 7);
    for (int64_t done = 0; done < capacity && !rc; done += 1024) {
        rc = gb_replay_allocate(r, 1024, idx, -1, err);
        for (int64_t k = 0; k < 1024 && !rc; k++) {
            for (int c = 0; c < 4; c++)
                memset(gb_replay_block(r, c, idx[k]), (int)(k & 0x7f), t[c].block_bytes);
            prio[k] = 0.01 + gb_rng_uniform(&rng);
        }
        if (!rc)
            rc = gb_replay_commit(r, 1024, idx, prio, NULL, NULL, err);
    }
    gb_replay_selection s;
    if (!rc)
        rc = gb_replay_selection_init(&s, B, err);
    if (rc) {
        gb_replay_free(r);
        return rc;
    }
    void *buf[4];
    gb_replay_dst d[4];
    for (int c = 0; c < 4; c++) {
        buf[c] = calloc(B, t[c].block_bytes);
        d[c] = (gb_replay_dst){c, buf[c], B * t[c].block_bytes};
    }
    int reps = b->reps;
    double *tt = malloc((size_t)reps * sizeof *tt);
    double np[B];
    gb_replay_request q = gb_replay_request_default(B);
    for (int i = -20; i < reps && !rc; i++) {
        for (int k = 0; k < B; k++)
            np[k] = 0.01 + gb_rng_uniform(&rng);
        uint64_t a = gb_now_ns();
        rc = gb_replay_sample(r, &q, &s, err);
        if (!rc)
            rc = gb_replay_collect(r, &s, d, 4, NULL, err);
        if (!rc)
            rc = gb_replay_update_priorities(r, s.n, s.index, s.key, np, NULL, err);
        gb_replay_release(r, &s);
        if (i >= 0)
            tt[i] = (double)(gb_now_ns() - a) * 1e-3;
    }
    if (!rc) {
        double p50 = gb_bench_quantile(tt, reps, 0.5);
        if (b->json)
            printf("{\"bench\":\"replay\",\"case\":\"sample_update\",\"capacity\":%lld,"
                   "\"batch\":%d,\"item_bytes\":%zu,\"p50_us\":%.2f,\"p90_us\":%.2f}\n",
                   (long long)capacity, B, item_bytes(r), p50, gb_bench_quantile(tt, reps, 0.9));
        else
            printf("sample_update capacity %lld batch %d  p50 %8.2f us  p90 %8.2f us\n",
                   (long long)capacity, B, p50, gb_bench_quantile(tt, reps, 0.9));
        fflush(stdout);
    }
    free(tt);
    for (int c = 0; c < 4; c++)
        free(buf[c]);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
    return rc;
}

/* The cases, in running order; the default run is every one but global_select (it forks a group
 * of processes and fills 4e6 items twice). */
static const char *const case_names[] = {"insert", "select", "collect", "sample_update",
                                         "global_select"};
enum { NCASES = sizeof case_names / sizeof case_names[0], CASE_GLOBAL_SELECT = NCASES - 1 };

static void bench_usage(FILE *out)
{
    fprintf(out, "usage: gearbox bench replay [--json] [--case NAME] [--max-capacity N] [--reps N] "
                 "[--quick]\n"
                 "--case NAME: run only that case, one of:");
    for (int c = 0; c < NCASES; c++)
        fprintf(out, " %s", case_names[c]);
    fprintf(out, "\n"
                 "             (without --case: every one but global_select, which forks 4 ranks\n"
                 "             holding replay shards of 1e6 items in a Gloo group)\n"
                 "--quick: capacities up to 1e4, 0.1 s per insert case, shards of 1e4 (a smoke\n"
                 "         run, as ctest's bench label runs it).\n"
                 "global_select over machines, instead of 4 forked ranks: start one command a\n"
                 "rank, on any host, with the same sizes and options:\n"
                 "  gearbox bench replay --case global_select --ranks N --rank R\n"
                 "      --store tcp://HOST:PORT [--interface ADDR] [--quick] [--reps N]\n"
                 "--ranks N: the group's size (dividing 256); --rank R: this process's, 0..N-1\n"
                 "           (rank 0 prints, with hosts: tcp)\n"
                 "--store tcp://HOST:PORT: rank 0 serves the group's TCPStore there (rank 0: port\n"
                 "           0 = any free one, printed on stderr); the others connect to it\n"
                 "--interface ADDR: the address of this rank's Gloo connections (default\n"
                 "           127.0.0.1: every rank on this machine)\n");
}

typedef struct replay_opts {
    bopts b;
    double insert_s; /* per insert case */
    int quick, only; /* only: a case_names index, -1: every one but global_select */
    gb_bench_gs_net net;  /* global_select over tcp (net.ranks 0: forked) */
    const char *rank;     /* --rank as given */
    const char *store;    /* --store as given */
} replay_opts;

static int on_option(void *ctx, int val, const char *arg)
{
    replay_opts *o = ctx;
    switch (val) {
    case 'q':
        o->b.max_capacity = 10000;
        o->insert_s = 0.1;
        o->quick = 1;
        return 0;
    case 'c':
        for (int c = 0; c < NCASES; c++)
            if (strcmp(arg, case_names[c]) == 0)
                o->only = c;
        if (o->only < 0) {
            fprintf(stderr, "gearbox bench replay: no case '%s'\n", arg);
            bench_usage(stderr);
            return -1;
        }
        return 0;
    case 'm':
        o->b.max_capacity = (int64_t)strtod(arg, NULL);
        return 0;
    case 'n':
        o->net.ranks = atoi(arg);
        return 0;
    case 'k':
        o->rank = arg;
        return 0;
    case 's':
        o->store = arg;
        return 0;
    case 'i':
        o->net.interface = arg;
        return 0;
    default: /* --reps */
        o->b.reps = atoi(arg);
        return 0;
    }
}

/* Checks global_select's options over tcp (all or none; only with --case global_select) and
 * fills o->net. Returns 0, or -1 after saying why on stderr. */
static int net_options(replay_opts *o)
{
    gb_bench_gs_net *n = &o->net;
    if (!n->ranks && !o->rank && !o->store && !n->interface)
        return 0;
    const char *why = NULL;
    char *end = NULL;
    n->rank = o->rank ? (int)strtol(o->rank, &end, 10) : -1;
    if (o->only != CASE_GLOBAL_SELECT)
        why = "--ranks, --rank, --store and --interface are options of --case global_select";
    else if (!o->rank || !o->store || n->ranks < 2)
        why = "a rank over tcp needs --ranks N (N >= 2), --rank R and --store tcp://HOST:PORT";
    else if (*end || n->rank < 0 || n->rank >= n->ranks)
        why = "--rank must be one of 0..N-1";
    else if (gb_endpoint_tcp_split(o->store, n->store_host, sizeof n->store_host, &n->store_port) ||
             (n->store_port == 0 && n->rank != 0))
        why = "--store must be tcp://HOST:PORT (port 0, any free one, only on rank 0)";
    if (why)
        fprintf(stderr, "gearbox bench replay: %s\n", why);
    return why ? -1 : 0;
}

/* insert: small items, one and 64 per call; large items. */
static int run_insert(const bopts *b, double insert_s, gb_error *err)
{
    gb_replay_options o;
    int rc;
    if ((rc = small_options(&o, 100000, err)) ||
        (rc = bench_insert(b, "small", &o, 1, insert_s, err)) ||
        (rc = bench_insert(b, "small", &o, 64, insert_s, err)) ||
        (rc = large_options(&o, 512, err)))
        return rc;
    return bench_insert(b, "large", &o, 1, insert_s, err);
}

/* select: three selectors at 1e4..1e7; weighted growth ratio 1e7 / 1e5. */
static int run_select(const bopts *b, gb_error *err)
{
    const struct {
        gb_selector_kind kind;
        const char *name;
    } sels[] = {{GB_SELECTOR_UNIFORM, "uniform"}, {GB_SELECTOR_WEIGHTED, "weighted"},
                {GB_SELECTOR_TOPK, "topk"}};
    double weighted_p50[4] = {0};
    int rc = 0;
    for (int s = 0; s < 3 && !rc; s++)
        for (int e = 0; e < 4 && !rc; e++) {
            int64_t cap = (int64_t)pow(10, 4 + e);
            if (cap > b->max_capacity)
                break;
            double p50 = 0;
            rc = bench_select(b, sels[s].kind, sels[s].name, cap, 256, &p50, err);
            if (sels[s].kind == GB_SELECTOR_WEIGHTED)
                weighted_p50[e] = p50;
        }
    if (!rc && weighted_p50[1] > 0 && weighted_p50[3] > 0) {
        double g = weighted_p50[3] / weighted_p50[1];
        if (b->json)
            printf("{\"bench\":\"replay\",\"case\":\"select_growth\",\"selector\":\"weighted\","
                   "\"from\":100000,\"to\":10000000,\"ratio\":%.3f}\n", g);
        else
            printf("select   weighted p50 at 1e7 / at 1e5 = %.2f\n", g);
    }
    return rc;
}

/* collect: 64 KB and 448 KB items, batch 256 / 32, one and two threads. */
static int run_collect(const bopts *b, gb_error *err)
{
    int rc;
    if ((rc = bench_collect(b, 1024, 16, 4096, 256, 1, err)) ||
        (rc = bench_collect(b, 1024, 16, 4096, 256, 2, err)))
        return rc;
    return bench_collect(b, 256, 16, 84 * 84 * 4, 32, 1, err);
}

int gb_bench_replay(int argc, char **argv, int json)
{
    if (gb_wants_help(argc, argv)) {
        bench_usage(stdout);
        return GB_EXIT_OK;
    }
    static const struct option longs[] = {
        {"quick", no_argument, NULL, 'q'}, {"case", required_argument, NULL, 'c'},
        {"max-capacity", required_argument, NULL, 'm'}, {"reps", required_argument, NULL, 'r'},
        {"ranks", required_argument, NULL, 'n'}, {"rank", required_argument, NULL, 'k'},
        {"store", required_argument, NULL, 's'}, {"interface", required_argument, NULL, 'i'},
        GB_BENCH_OPTION_JSON, {0}};
    replay_opts o = {.b = {json, 1000, 10000000, 2}, .insert_s = 0.5, .only = -1};
    if (gb_bench_options(argc, argv, longs, 0, on_option, &o, bench_usage) || net_options(&o))
        return GB_EXIT_USAGE;
    bopts *b = &o.b;
    if (b->reps < 10)
        b->reps = 10;
    if (o.only == CASE_GLOBAL_SELECT) {
#ifdef GEARBOX_BENCH_GLOBAL_SELECT
        const gb_bench_gs_net *net = o.net.ranks ? &o.net : NULL;
        return gb_bench_replay_global_select(json, o.quick, b->reps, net) ? GB_EXIT_FAILURE
                                                                          : GB_EXIT_OK;
#else
        fprintf(stderr, "gearbox bench replay: global_select needs the trainers' group (libtorch); "
                        "this gearbox was built without it\n");
        return GB_EXIT_FAILURE;
#endif
    }
    gb_error err = {0};
    int rc = 0;
    if (o.only < 0 || o.only == 0)
        rc = run_insert(b, o.insert_s, &err);
    if (!rc && (o.only < 0 || o.only == 1))
        rc = run_select(b, &err);
    if (!rc && (o.only < 0 || o.only == 2))
        rc = run_collect(b, &err);
    if (!rc && (o.only < 0 || o.only == 3))
        rc = bench_sample_update(b, b->max_capacity < 1000000 ? b->max_capacity : 1000000, &err);
    if (rc) {
        fprintf(stderr, "gearbox bench replay: %s\n", err.msg);
        return GB_EXIT_FAILURE;
    }
    return GB_EXIT_OK;
}
