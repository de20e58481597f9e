/* launch/bench/bench_replay_shards.c: `gearbox bench replay --case global_select`: global selection
 * over replay shards (workers/roles/shards.h) in a real Gloo group of 4 forked ranks, each holding
 * one shard, against references measured in the same run:
 *  - weighted: gb_shards_select of a global batch of 1024 (256 per trainer, one uint8 column)
 *    from 4 shards of 1e6 items, p50/p99, against one replay of 4e6 items drawing 1024 locally
 *    (gb_replay_sample + release; measured in the parent before it forks, on a quiet machine);
 *    beside it the one collective gb_shards_select makes after an agreement (its all-to-all,
 *    with its split sizes) as a plain gb_group call (the floor the collective sets), and
 *    agree + select (a trainer's step) beside its two collectives made raw;
 *  - remote_collect: gb_shards_select of 64 KiB rows (global batch 256, 64 per trainer) against
 *    one gb_group_alltoall of the same split sizes between preallocated buffers.
 * The parent never calls libtorch: it forks the ranks first; rank 0 prints, the others only
 * report errors. --quick: shards of 1e4 and few reps (ctest's bench label).
 * Over machines (--ranks N --rank R --store tcp://HOST:PORT --interface ADDR): this process is
 * one rank, the group meets at rank 0's TCPStore and its Gloo devices sit on each rank's ADDR;
 * the sizes are the same (global batches of 1024 and 256 over N shards), so the p50s compare
 * with the forked figures.
 * defines: gb_bench_replay_global_select */
#include "launch/bench/bench.h"
#include "replay/replay.h"
#include "runtime/base/clock.h"
#include "workers/roles/shards.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { RANKS = 4, WARMUP = 10 }; /* RANKS: the forked group's size */

typedef struct gs_plan {
    int json;
    int ranks;                  /* the group's size */
    const gb_bench_gs_net *net; /* NULL: RANKS forked ranks on a FileStore */
    int reps;              /* weighted part */
    int64_t shard_items;   /* weighted: items per shard (the local reference holds ranks x) */
    int64_t batch;         /* weighted: the global batch */
    int collect_reps;      /* remote_collect part */
    int64_t collect_items; /* remote_collect: items per shard */
    int64_t collect_batch; /* remote_collect: the global batch */
    int64_t row_bytes;     /* remote_collect: one per-item column of this many bytes */
    char dir[64];          /* the FileStore's directory */
    /* the local reference, measured by the parent before forking (rank 0 inherits it) */
    double local_p50, local_p99;
} gs_plan;

/* Where the ranks ran, as the output says it: "one" (forked on this host) or "tcp". */
static const char *hosts(const gs_plan *p)
{
    return p->net ? "tcp" : "one";
}

/* A weighted replay of capacity items of one per-item uint8 column of row_bytes. */
static int make_replay(int64_t capacity, int64_t row_bytes, uint64_t seed, gb_replay **out,
                       gb_error *err)
{
    gb_replay_options o;
    gb_replay_options_default(&o);
    o.capacity = capacity;
    o.steps = 1;
    o.selector = GB_SELECTOR_WEIGHTED;
    o.timeout_s = 5;
    o.seed = seed;
    int rc = row_bytes == 1 ? gb_replay_add_column(&o, "x", GB_DTYPE_UINT8, 0, NULL, 1, err)
                            : gb_replay_add_column(&o, "x", GB_DTYPE_UINT8, 1, &row_bytes, 1, err);
    return rc ? rc : gb_replay_create(&o, out, err);
}

/* Fills r with n committed items, priorities uniform in (0, 10]; each block holds its index's low
 * byte (written, so that collection reads real memory). */
static int fill(gb_replay *r, int64_t n, int64_t row_bytes, uint64_t seed, gb_error *err)
{
    enum { CHUNK = 4096 };
    int64_t idx[CHUNK];
    double prio[CHUNK];
    gb_rng rng;
    gb_rng_seed(&rng, seed);
    for (int64_t done = 0; done < n;) {
        int64_t m = n - done < CHUNK ? n - done : CHUNK;
        int rc = gb_replay_allocate(r, m, idx, -1, err);
        if (rc)
            return rc;
        for (int64_t k = 0; k < m; k++) {
            memset(gb_replay_block(r, 0, idx[k]), (int)(idx[k] & 0xff), (size_t)row_bytes);
            prio[k] = 10.0 * (1.0 - gb_rng_uniform(&rng));
        }
        if ((rc = gb_replay_commit(r, m, idx, prio, NULL, NULL, err)))
            return rc;
        done += m;
    }
    return 0;
}

/* The local reference: weighted selection of batch from one replay of ranks x shard_items. */
static int local_reference(gs_plan *p, gb_error *err)
{
    gb_replay *r = NULL;
    int rc = make_replay(p->ranks * p->shard_items, 1, 1, &r, err);
    if (rc)
        return rc;
    gb_replay_selection s;
    double *t = malloc((size_t)p->reps * sizeof *t);
    if (!(rc = fill(r, p->ranks * p->shard_items, 1, 1, err)) &&
        !(rc = gb_replay_selection_init(&s, p->batch, err))) {
        gb_replay_request q = gb_replay_request_default(p->batch);
        for (int i = -WARMUP; i < p->reps && !rc && t; i++) {
            uint64_t a = gb_now_ns();
            rc = gb_replay_sample(r, &q, &s, err);
            gb_replay_release(r, &s);
            if (i >= 0)
                t[i] = (double)(gb_now_ns() - a) * 1e-3;
        }
        gb_replay_selection_free(&s);
    }
    if (!t && !rc)
        rc = gb_error_set(err, GB_ENOMEM, "bench: timings");
    if (!rc) {
        p->local_p50 = gb_bench_quantile(t, p->reps, 0.5);
        p->local_p99 = gb_bench_quantile(t, p->reps, 0.99);
    }
    free(t);
    gb_replay_free(r);
    return rc;
}

/* The bytes of rows this trainer received from the other ranks in the last global batch. */
static size_t remote_bytes(const gb_shards *S, int rank, int64_t capacity, size_t row)
{
    gb_shards_batch b;
    gb_shards_last(S, &b);
    size_t remote = 0;
    for (int64_t i = 0; i < b.n; i++)
        remote += b.global_index[i] / capacity != rank ? row : 0;
    return remote;
}

/* Buffers of the raw all-to-all that mirrors gb_shards_select's (its headers and metas too). */
typedef struct gs_raw {
    uint8_t *send, *recv;
} gs_raw;

static int raw_init(gs_raw *x, int ranks, int64_t batch, size_t row, gb_error *err)
{
    size_t slot = 3 * sizeof(int64_t) + row, head = (size_t)ranks * 2 * sizeof(int64_t);
    size_t send = head + (size_t)batch * slot, recv = head + (size_t)batch / ranks * slot;
    x->send = malloc(send);
    x->recv = malloc(recv);
    if (!x->send || !x->recv)
        return gb_error_set(err, GB_ENOMEM, "bench: buffers for %lld rows of %zu bytes",
                            (long long)batch, row);
    memset(x->send, 2, send); /* every page touched before timing */
    memset(x->recv, 3, recv);
    return 0;
}

static void raw_free(gs_raw *x)
{
    free(x->send);
    free(x->recv);
}

/* The last select's all-to-all, made raw with the same splits. */
static int raw_alltoall(gb_group *g, const gb_shards *S, gs_raw *x, gb_error *err)
{
    gb_shards_batch b;
    gb_shards_last(S, &b);
    return gb_group_alltoall(g, x->send, b.send_bytes, x->recv, b.recv_bytes, err);
}

/* This rank's shard of items (one column of row bytes), its gb_shards for a global batch and
 * a selection and destination for its share. */
typedef struct gs_rank {
    gb_replay *r;
    gb_shards *S;
    gb_replay_selection sel;
    uint8_t *dst;  /* [B/N rows] */
    float *weight; /* [B/N] */
    double *t;     /* [4 * reps] timings */
    double *agreed; /* [3 + 2 * ranks]: the agreement's all-reduce, made raw */
} gs_rank;

static int rank_init(gs_rank *k, gb_group *g, int64_t items, int64_t row, int64_t batch,
                     uint64_t seed, int reps, gb_error *err)
{
    int64_t Bl = batch / gb_group_size(g);
    k->dst = malloc((size_t)(Bl * row));
    k->weight = malloc((size_t)Bl * sizeof *k->weight);
    k->t = calloc(4 * (size_t)reps, sizeof *k->t);
    k->agreed = calloc(3 + 2 * (size_t)gb_group_size(g), sizeof *k->agreed);
    if (!k->dst || !k->weight || !k->t || !k->agreed)
        return gb_error_set(err, GB_ENOMEM, "bench: buffers");
    memset(k->dst, 1, (size_t)(Bl * row));
    int rc = make_replay(items, row, seed + (uint64_t)gb_group_rank(g), &k->r, err);
    if (!rc)
        rc = fill(k->r, items, row, seed + (uint64_t)gb_group_rank(g), err);
    gb_shards_opts so = {.group = g, .replay = k->r, .batch = batch, .seed = seed, .global = 1};
    if (!rc)
        rc = gb_shards_create(&so, &k->S, err);
    if (!rc)
        rc = gb_replay_selection_init(&k->sel, batch, err);
    if (!rc)
        rc = gb_group_barrier(g, err); /* every shard filled: time from here */
    return rc;
}

static void rank_free(gs_rank *k)
{
    gb_replay_selection_free(&k->sel);
    gb_shards_destroy(k->S);
    gb_replay_free(k->r);
    free(k->dst);
    free(k->weight);
    free(k->t);
    free(k->agreed);
}

/* The trainers' agreement to take a step (untimed where the select is timed alone). */
static int agree(gs_rank *k, const gb_replay_request *share, gb_error *err)
{
    int rc = gb_shards_agree(k->S, share, 0, 0, 0, NULL, err);
    if (rc == 1)
        return 0;
    return rc ? rc : gb_error_set(err, GB_EINVAL, "bench: the shards did not agree to a step");
}

/* Part a: weighted global selection of p->batch over p->ranks shards of p->shard_items, against
 * the local reference and against the same collectives made raw. Rank 0 prints. */
static int part_weighted(const gs_plan *p, gb_group *g, int rank, gb_error *err)
{
    int64_t Bl = p->batch / p->ranks;
    int reps = p->reps;
    gs_rank k = {0};
    gs_raw x = {0};
    int rc = rank_init(&k, g, p->shard_items, 1, p->batch, 100, reps, err);
    if (!rc)
        rc = raw_init(&x, p->ranks, p->batch, 1, err);
    double *sel_us = k.t, *step_us = k.t + reps, *raw2_us = k.t + 2 * reps,
           *raw3_us = k.t + 3 * reps;
    gb_replay_request share = gb_replay_request_default(Bl), req = share;
    gb_replay_dst d = {0, k.dst, (size_t)Bl};
    for (int i = -WARMUP; i < reps && !rc; i++) {
        int64_t n = 0;
        uint64_t t0 = gb_now_ns();
        if ((rc = agree(&k, &share, err)))
            break;
        uint64_t t1 = gb_now_ns();
        rc = gb_shards_select(k.S, &req, &k.sel, &d, 1, k.weight, &n, err);
        gb_replay_release(k.r, &k.sel);
        uint64_t t2 = gb_now_ns();
        if (rc)
            break;
        /* the same collectives, raw: the agreement's all-reduce, then the select's all-to-all
         * with the same splits */
        uint64_t t3 = gb_now_ns();
        rc = gb_group_allreduce(g, GB_DTYPE_FLOAT64, k.agreed, 3 + 2 * p->ranks, GB_GROUP_SUM,
                                err);
        uint64_t t4 = gb_now_ns();
        if (!rc)
            rc = raw_alltoall(g, k.S, &x, err);
        uint64_t t5 = gb_now_ns();
        if (i >= 0) {
            sel_us[i] = (double)(t2 - t1) * 1e-3;
            step_us[i] = (double)(t2 - t0) * 1e-3;
            raw2_us[i] = (double)(t5 - t4) * 1e-3;
            raw3_us[i] = (double)(t5 - t3) * 1e-3;
        }
    }
    if (!rc && rank == 0) {
        double p50 = gb_bench_quantile(sel_us, reps, 0.5),
               p99 = gb_bench_quantile(sel_us, reps, 0.99),
               step = gb_bench_quantile(step_us, reps, 0.5),
               raw2 = gb_bench_quantile(raw2_us, reps, 0.5),
               raw3 = gb_bench_quantile(raw3_us, reps, 0.5), ratio = p50 / p->local_p50;
        long long local_items = p->ranks * p->shard_items;
        if (p->json)
            printf("{\"bench\":\"replay\",\"case\":\"global_select\",\"part\":\"weighted\","
                   "\"ranks\":%d,\"hosts\":\"%s\",\"shard_items\":%lld,\"batch\":%lld,"
                   "\"per_trainer\":%lld,\"reps\":%d,\"p50_us\":%.1f,\"p99_us\":%.1f,"
                   "\"collectives_p50_us\":%.1f,"
                   "\"agree_select_p50_us\":%.1f,\"step_collectives_p50_us\":%.1f,"
                   "\"local_items\":%lld,\"local_p50_us\":%.1f,\"local_p99_us\":%.1f,"
                   "\"ratio\":%.2f}\n", p->ranks, hosts(p), (long long)p->shard_items,
                   (long long)p->batch,
                   (long long)Bl, reps, p50, p99, raw2, step, raw3, local_items, p->local_p50,
                   p->local_p99, ratio);
        else
            printf("global_select weighted: %d shards x %lld items, batch %lld (%lld per "
                   "trainer), %d reps, hosts: %s\n"
                   "  gb_shards_select           p50 %8.1f us  p99 %8.1f us\n"
                   "    its all-to-all, raw      p50 %8.1f us\n"
                   "  agree + select             p50 %8.1f us\n"
                   "    their 2 collectives, raw p50 %8.1f us\n"
                   "  local select, %8lld items p50 %8.1f us  p99 %8.1f us\n"
                   "  global / local p50: %.2f\n", p->ranks, (long long)p->shard_items,
                   (long long)p->batch, (long long)Bl, reps, hosts(p), p50, p99, raw2, step, raw3,
                   local_items, p->local_p50, p->local_p99, ratio);
        fflush(stdout);
    }
    raw_free(&x);
    rank_free(&k);
    return rc;
}

/* Part b: remote collection of row_bytes rows against a raw all-to-all of the same splits (the one
 * collective the select makes after an agreement). Bytes
 * counted: the rows this rank receives from the other ranks (its own shard's rows are copied
 * locally by all three); rates per rep, their p50. Rank 0 prints. */
static int part_collect(const gs_plan *p, gb_group *g, int rank, gb_error *err)
{
    int64_t Bl = p->collect_batch / p->ranks;
    size_t row = (size_t)p->row_bytes;
    int reps = p->collect_reps;
    gs_rank k = {0};
    gs_raw x = {0};
    int rc = rank_init(&k, g, p->collect_items, p->row_bytes, p->collect_batch, 200, reps, err);
    if (!rc)
        rc = raw_init(&x, p->ranks, p->collect_batch, row, err);
    double *sel_gbps = k.t, *a2a_gbps = k.t + reps, *sel_us = k.t + 2 * reps;
    gb_replay_request share = gb_replay_request_default(Bl), req = share;
    gb_replay_dst d = {0, k.dst, (size_t)Bl * row};
    double rows = 0, bytes = 0;
    for (int i = -3; i < reps && !rc; i++) {
        int64_t n = 0;
        if ((rc = agree(&k, &share, err)))
            break;
        uint64_t t0 = gb_now_ns();
        rc = gb_shards_select(k.S, &req, &k.sel, &d, 1, k.weight, &n, err);
        gb_replay_release(k.r, &k.sel);
        uint64_t t1 = gb_now_ns();
        if (rc)
            break;
        size_t remote = remote_bytes(k.S, rank, p->collect_items, row);
        uint64_t t2 = gb_now_ns();
        rc = raw_alltoall(g, k.S, &x, err);
        uint64_t t3 = gb_now_ns();
        if (i >= 0) {
            sel_gbps[i] = (double)remote / (double)(t1 - t0);
            a2a_gbps[i] = (double)remote / (double)(t3 - t2);
            sel_us[i] = (double)(t1 - t0) * 1e-3;
            rows += (double)n / reps;
            bytes += (double)remote / reps;
        }
    }
    if (!rc && rank == 0) {
        double gbps = gb_bench_quantile(sel_gbps, reps, 0.5),
               p10 = gb_bench_quantile(sel_gbps, reps, 0.1),
               a2a = gb_bench_quantile(a2a_gbps, reps, 0.5),
               us = gb_bench_quantile(sel_us, reps, 0.5);
        if (p->json)
            printf("{\"bench\":\"replay\",\"case\":\"global_select\",\"part\":\"remote_collect\","
                   "\"ranks\":%d,\"hosts\":\"%s\",\"shard_items\":%lld,\"row_bytes\":%lld,"
                   "\"batch\":%lld,"
                   "\"per_trainer\":%lld,\"reps\":%d,\"rows_per_rank\":%.1f,"
                   "\"bytes\":\"received_from_other_ranks\",\"bytes_per_rank\":%.0f,"
                   "\"select_p50_us\":%.1f,\"gbps\":%.3f,\"gbps_p10\":%.3f,"
                   "\"alltoall_gbps\":%.3f,\"ratio\":%.3f}\n", p->ranks, hosts(p),
                   (long long)p->collect_items, (long long)p->row_bytes,
                   (long long)p->collect_batch, (long long)Bl, reps, rows, bytes, us, gbps, p10,
                   a2a, gbps / a2a);
        else
            printf("global_select remote_collect: %d shards x %lld rows of %lld B, batch %lld "
                   "(%lld per trainer), %d reps, hosts: %s\n"
                   "  bytes a rank receives from the others per select: %.0f (mean)\n"
                   "  gb_shards_select                  %6.3f GB/s p50  (p10 %.3f; p50 %.0f us)\n"
                   "  raw all-to-all, same splits       %6.3f GB/s p50  select / it: %.2f\n",
                   p->ranks, (long long)p->collect_items, (long long)p->row_bytes,
                   (long long)p->collect_batch, (long long)Bl, reps, hosts(p), bytes, gbps, p10,
                   us, a2a, gbps / a2a);
        fflush(stdout);
    }
    raw_free(&x);
    rank_free(&k);
    return rc;
}

/* Rank 0 of a TCPStore on port 0: says where the others find it. */
static int store_ready(void *arg, int port, gb_error *err)
{
    (void)err;
    fprintf(stderr, "gearbox bench replay global_select: store on tcp://%s:%d\n",
            ((const gb_bench_gs_net *)arg)->store_host, port);
    return 0;
}

/* One rank: joins the group (on the FileStore in p->dir, or over tcp), runs both parts,
 * leaves. */
static int rank_main(const gs_plan *p, int rank)
{
    gb_error err = {0};
    char path[128];
    snprintf(path, sizeof path, "%s/store", p->dir);
    gb_group_opts go = {.rank = rank, .size = p->ranks, .store_path = path, .timeout_s = 120};
    const gb_bench_gs_net *net = p->net;
    if (net) {
        go.store_path = NULL;
        go.tcp_host = net->store_host;
        go.tcp_port = net->store_port;
        go.device_host = net->interface;
        if (rank == 0 && net->store_port == 0) {
            go.store_ready = store_ready;
            go.store_ready_arg = (void *)net;
        }
    }
    gb_group *g = NULL;
    int rc = gb_group_open(&go, &g, &err);
    if (!rc)
        rc = part_weighted(p, g, rank, &err);
    if (!rc)
        rc = part_collect(p, g, rank, &err);
    if (!rc)
        rc = gb_group_barrier(g, &err);
    if (rc)
        fprintf(stderr, "gearbox bench replay global_select: rank %d: %s\n", rank, err.msg);
    gb_group_close(g);
    return rc ? 1 : 0;
}

/* Forks RANKS ranks on a FileStore in a fresh temporary directory and waits for them. Returns 0,
 * or 1 when one failed. */
static int run_forked(gs_plan *p, int quick)
{
    snprintf(p->dir, sizeof p->dir, "/tmp/gb-bench-shards-XXXXXX");
    if (!mkdtemp(p->dir)) {
        perror("gearbox bench replay global_select: mkdtemp");
        return 1;
    }
    fflush(stdout); /* nothing buffered may be printed twice by the children */
    fflush(stderr);
    pid_t pid[RANKS];
    int forked = 0, failed = 0;
    for (; forked < RANKS; forked++) {
        pid[forked] = fork();
        if (pid[forked] == 0) {
            alarm(quick ? 120 : 1200); /* a rank stuck in a collective must not hang the run */
            _exit(rank_main(p, forked));
        }
        if (pid[forked] < 0) {
            perror("gearbox bench replay global_select: fork");
            failed = 1;
            for (int k = 0; k < forked; k++) /* the others would wait for it in the rendezvous */
                kill(pid[k], SIGTERM);
            break;
        }
    }
    for (int r = 0; r < forked; r++) {
        int status = 0;
        if (waitpid(pid[r], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            if (!failed || WIFEXITED(status))
                fprintf(stderr, "gearbox bench replay global_select: rank %d failed (status "
                        "%d)\n", r, status);
            failed = 1;
        }
    }
    char path[128];
    snprintf(path, sizeof path, "%s/store", p->dir);
    unlink(path);
    if (rmdir(p->dir) != 0)
        fprintf(stderr, "gearbox bench replay global_select: could not remove %s\n", p->dir);
    return failed;
}

/* Returns 0, or nonzero when a measurement failed (the message is on stderr). */
int gb_bench_replay_global_select(int json, int quick, int reps, const gb_bench_gs_net *net)
{
    gs_plan p = {.json = json,
                 .ranks = net ? net->ranks : RANKS,
                 .net = net,
                 .reps = quick ? 20 : reps,
                 .shard_items = quick ? 10000 : 1000000,
                 .batch = 1024,
                 .collect_reps = quick ? 5 : (reps < 200 ? reps : 200),
                 .collect_items = quick ? 256 : 1024,
                 .collect_batch = 256,
                 .row_bytes = 65536};
    if (p.collect_batch % p.ranks != 0 || p.batch % p.ranks != 0) {
        fprintf(stderr, "gearbox bench replay global_select: %d ranks do not divide the global "
                "batches (%lld, %lld)\n", p.ranks, (long long)p.batch,
                (long long)p.collect_batch);
        return 1;
    }
    gb_error err = {0};
    /* The local reference first, alone on the machine (over tcp: rank 0, before it joins, while
       the others wait in the rendezvous); the ranks inherit its figures. */
    if ((!net || net->rank == 0) && local_reference(&p, &err)) {
        fprintf(stderr, "gearbox bench replay global_select: local reference: %s\n", err.msg);
        return 1;
    }
    if (!net)
        return run_forked(&p, quick);
    alarm(quick ? 120 : 1200); /* as a forked rank: a stuck collective must not hang the run */
    return rank_main(&p, net->rank);
}
