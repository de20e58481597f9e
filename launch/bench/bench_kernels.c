/* launch/bench/bench_kernels.c: `gearbox bench kernels`: zero-copy gather against pinned cudaMemcpy
 * of the same bytes and against the CPU-orchestrated path; weighted selection and top-k on the GPU
 * against their CPU references. GPU figures are CUDA-event times after warm-up; each case prints
 * the median (p50) of its repetitions. Without a device only the CPU cases run, and it says so. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/kernels.h"
#include "launch/bench/bench.h"
#include "launch/commands.h"
#include "runtime/base/clock.h"
#include "runtime/base/rng.h"

typedef struct bench_opts {
    int json;
    int reps;
    int64_t n, k;
    uint64_t gather_bytes; /* bytes gathered per repetition */
} bench_opts;

#define MAX_REPS 1000

static void emit_rate(const bench_opts *o, const char *name, uint64_t row_bytes, uint64_t rows,
                      double p50_us, const char *ref_name, double ref_gbps, const char *ref2_name,
                      double ref2_gbps)
{
    double bytes = (double)row_bytes * (double)rows, gbps = bytes / (p50_us * 1e3);
    if (o->json) {
        printf("{\"case\":\"%s\",\"row_bytes\":%llu,\"rows\":%llu,\"bytes\":%.0f,\"p50_us\":%.1f,"
               "\"gbps\":%.3f", name, (unsigned long long)row_bytes, (unsigned long long)rows,
               bytes, p50_us, gbps);
        if (ref_name)
            printf(",\"ratio_vs_%s\":%.3f", ref_name, gbps / ref_gbps);
        if (ref2_name)
            printf(",\"ratio_vs_%s\":%.3f", ref2_name, gbps / ref2_gbps);
        printf(",\"reps\":%d}\n", o->reps);
    } else {
        printf("%-24s row %7llu B x %8llu rows  %9.1f us  %8.2f GB/s", name,
               (unsigned long long)row_bytes, (unsigned long long)rows, p50_us, gbps);
        if (ref_name)
            printf("  %.2fx %s", gbps / ref_gbps, ref_name);
        if (ref2_name)
            printf("  %.2fx %s", gbps / ref2_gbps, ref2_name);
        printf("\n");
    }
    fflush(stdout);
}

static void emit_select(const bench_opts *o, const char *name, int64_t n, int64_t k, double p50,
                        double p90, int reps, const char *ref_name, double ref_p50)
{
    if (o->json) {
        printf("{\"case\":\"%s\",\"n\":%lld,\"k\":%lld,\"p50_us\":%.1f,\"p90_us\":%.1f", name,
               (long long)n, (long long)k, p50, p90);
        if (ref_name)
            printf(",\"speedup_vs_%s\":%.1f", ref_name, ref_p50 / p50);
        printf(",\"reps\":%d}\n", reps);
    } else {
        printf("%-24s n %11lld k %6lld  p50 %11.1f us  p90 %11.1f us", name, (long long)n,
               (long long)k, p50, p90);
        if (ref_name)
            printf("  %.1fx faster than %s", ref_p50 / p50, ref_name);
        printf("\n");
    }
    fflush(stdout);
}

/* Random priorities as a replay would hold them: most in (0, 10], a tenth zero (free slots). */
static float *make_priorities(int64_t n, gb_error *err)
{
    float *p = malloc((size_t)n * sizeof(float));
    if (!p) {
        gb_error_set(err, GB_ENOMEM, "%lld priorities", (long long)n);
        return NULL;
    }
    gb_rng rng;
    gb_rng_seed(&rng, 1);
    for (int64_t j = 0; j < n; j++)
        p[j] = gb_rng_below(&rng, 10) == 0 ? 0.0f : 10.0f * (1.0f - gb_rng_uniform_f(&rng));
    return p;
}

/* ---- CPU cases ------------------------------------------------------------------------------- */

static int bench_select_cpu(const bench_opts *o, double *weighted_p50, double *topk_p50,
                            gb_error *err)
{
    int rc = GB_ENOMEM, reps = o->reps < 3 ? o->reps : 3; /* 1e8 items take seconds per run */
    float *p = make_priorities(o->n, err);
    double *cum = malloc((size_t)o->n * sizeof(double));
    int64_t *idx = malloc((size_t)o->k * sizeof(int64_t));
    float *probs = malloc((size_t)o->k * sizeof(float));
    double t[MAX_REPS];
    if (!p || !cum || !idx || !probs) {
        gb_error_set(err, GB_ENOMEM, "CPU selection buffers for n %lld", (long long)o->n);
        goto fail;
    }
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up (page faults) */
        uint64_t t0 = gb_now_ns();
        if ((rc = gb_kernels_select_weighted_cpu(p, o->n, 0.6, o->k,
                                                 gb_kernels_seed(1, (uint64_t)(r + 1)), 1, cum,
                                                 idx, probs, NULL, err)))
            goto fail;
        if (r >= 0)
            t[r] = (double)(gb_now_ns() - t0) * 1e-3;
    }
    *weighted_p50 = gb_bench_quantile(t, reps, 0.5);
    emit_select(o, "weighted_select_cpu", o->n, o->k, *weighted_p50,
                gb_bench_quantile(t, reps, 0.9), reps, NULL, 0);
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = gb_now_ns();
        if ((rc = gb_kernels_select_topk_cpu(p, o->n, o->k, idx, probs, NULL, err)))
            goto fail;
        t[r] = (double)(gb_now_ns() - t0) * 1e-3;
    }
    *topk_p50 = gb_bench_quantile(t, reps, 0.5);
    emit_select(o, "topk_cpu", o->n, o->k, *topk_p50, gb_bench_quantile(t, reps, 0.9), reps,
                NULL, 0);
    rc = 0;
fail:
    free(p);
    free(cum);
    free(idx);
    free(probs);
    return rc;
}

static int bench_gather_cpu(const bench_opts *o, uint64_t row_bytes, gb_error *err)
{
    uint64_t rows = o->gather_bytes / row_bytes, capacity = 2 * rows;
    int rc = GB_ENOMEM;
    unsigned char *table = malloc(capacity * row_bytes), *dst = malloc(rows * row_bytes);
    int64_t *idx = malloc(rows * sizeof(int64_t));
    double t[MAX_REPS], m[MAX_REPS];
    if (!table || !dst || !idx) {
        gb_error_set(err, GB_ENOMEM, "gather buffers");
        goto fail;
    }
    memset(table, 1, capacity * row_bytes);
    gb_rng rng;
    gb_rng_seed(&rng, 2);
    for (uint64_t i = 0; i < rows; i++)
        idx[i] = (int64_t)gb_rng_below(&rng, capacity);
    gb_kernels_column col = {table, dst, capacity, row_bytes, row_bytes, 1};
    gb_kernels_steps steps = {0, 1, NULL, NULL};
    for (int r = -1; r < o->reps; r++) {
        uint64_t t0 = gb_now_ns();
        memcpy(dst, table + row_bytes, rows * row_bytes);
        uint64_t t1 = gb_now_ns();
        if ((rc = gb_kernels_gather_cpu(&col, 1, idx, (int64_t)rows, &steps, err)))
            goto fail;
        uint64_t t2 = gb_now_ns();
        if (r >= 0) {
            m[r] = (double)(t1 - t0) * 1e-3;
            t[r] = (double)(t2 - t1) * 1e-3;
        }
    }
    double memcpy_gbps = (double)(rows * row_bytes) / (gb_bench_quantile(m, o->reps, 0.5) * 1e3);
    emit_rate(o, "memcpy", row_bytes, rows, gb_bench_quantile(m, o->reps, 0.5), NULL, 0, NULL, 0);
    emit_rate(o, "gather_cpu", row_bytes, rows, gb_bench_quantile(t, o->reps, 0.5), "memcpy",
              memcpy_gbps, NULL, 0);
    rc = 0;
fail:
    free(table);
    free(dst);
    free(idx);
    return rc;
}

/* ---- GPU cases ------------------------------------------------------------------------------- */

/* Runs op reps times after two warm-ups, each timed with events; *p50 gets the median in us. */
typedef int (*timed_op)(gb_kernels_ctx *ctx, void *arg, int rep, gb_error *err);

static int time_op(gb_kernels_ctx *ctx, int reps, timed_op op, void *arg, double *p50, double *p90,
                   gb_error *err)
{
    double t[MAX_REPS];
    int rc;
    for (int r = -2; r < reps; r++) {
        if ((rc = gb_kernels_timer_start(ctx, err)) || (rc = op(ctx, arg, r + 2, err)))
            return rc;
        double us;
        if ((rc = gb_kernels_timer_stop(ctx, &us, err)) || (rc = gb_kernels_sync(ctx, err)))
            return rc;
        if (r >= 0)
            t[r] = us;
    }
    *p50 = gb_bench_quantile(t, reps, 0.5);
    if (p90)
        *p90 = gb_bench_quantile(t, reps, 0.9);
    return 0;
}

typedef struct gather_bench {
    gb_kernels_column gpu, cpu;
    gb_kernels_steps steps;
    int64_t *idx, *didx;
    int64_t rows;
    void *staging, *dst;
    size_t bytes;
} gather_bench;

static int op_h2d(gb_kernels_ctx *ctx, void *arg, int rep, gb_error *err)
{
    gather_bench *g = arg;
    return gb_kernels_copy(ctx, g->dst, g->staging, g->bytes, err);
}

static int op_gather(gb_kernels_ctx *ctx, void *arg, int rep, gb_error *err)
{
    gather_bench *g = arg;
    return gb_kernels_gather(ctx, &g->gpu, 1, g->didx, g->rows, &g->steps, err);
}

static int op_staged(gb_kernels_ctx *ctx, void *arg, int rep, gb_error *err)
{
    gather_bench *g = arg;
    return gb_kernels_gather_staged(ctx, &g->cpu, 1, g->idx, g->rows, &g->steps, g->staging,
                                    g->bytes, err);
}

static int bench_gather_gpu(gb_kernels_ctx *ctx, const bench_opts *o, uint64_t row_bytes,
                            gb_error *err)
{
    gather_bench g = {0};
    uint64_t rows = o->gather_bytes / row_bytes, capacity = 2 * rows;
    size_t table_bytes = capacity * row_bytes;
    int rc = 0, registered = 0;
    g.rows = (int64_t)rows;
    g.bytes = rows * row_bytes;
    /* The table as the replay holds it: a shared mapping, registered and mapped for the GPU. */
    unsigned char *table = mmap(NULL, table_bytes, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (table == MAP_FAILED) {
        table = NULL;
        rc = gb_error_errno(err, "mmap %zu bytes", table_bytes);
        goto fail;
    }
    memset(table, 1, table_bytes);
    void *dtable = NULL;
    if ((rc = gb_kernels_host_register(table, table_bytes, 1, &dtable, err)))
        goto fail;
    registered = 1;
    if (!(g.idx = malloc(rows * sizeof(int64_t)))) {
        rc = gb_error_set(err, GB_ENOMEM, "indices");
        goto fail;
    }
    gb_rng rng;
    gb_rng_seed(&rng, 3);
    for (uint64_t i = 0; i < rows; i++)
        g.idx[i] = (int64_t)gb_rng_below(&rng, capacity);
    if ((rc = gb_kernels_device_alloc(rows * sizeof(int64_t), (void **)&g.didx, err)) ||
        (rc = gb_kernels_device_alloc(g.bytes, &g.dst, err)) ||
        (rc = gb_kernels_host_alloc(g.bytes, &g.staging, err)) ||
        (rc = gb_kernels_copy(ctx, g.didx, g.idx, rows * sizeof(int64_t), err)) ||
        (rc = gb_kernels_sync(ctx, err)))
        goto fail;
    memset(g.staging, 2, g.bytes);
    gb_kernels_column gpu = {dtable, g.dst, capacity, row_bytes, row_bytes, 1};
    gb_kernels_column cpu = {table, g.dst, capacity, row_bytes, row_bytes, 1};
    g.gpu = gpu;
    g.cpu = cpu;
    g.steps.count = 1;
    double h2d, gather, staged;
    if ((rc = time_op(ctx, o->reps, op_h2d, &g, &h2d, NULL, err)) ||
        (rc = time_op(ctx, o->reps, op_staged, &g, &staged, NULL, err)) ||
        (rc = time_op(ctx, o->reps, op_gather, &g, &gather, NULL, err)))
        goto fail;
    double h2d_gbps = (double)g.bytes / (h2d * 1e3), staged_gbps = (double)g.bytes / (staged * 1e3);
    emit_rate(o, "h2d_memcpy", row_bytes, rows, h2d, NULL, 0, NULL, 0);
    emit_rate(o, "gather_cpu_orchestrated", row_bytes, rows, staged, "h2d_memcpy", h2d_gbps, NULL,
              0);
    emit_rate(o, "gather", row_bytes, rows, gather, "h2d_memcpy", h2d_gbps,
              "gather_cpu_orchestrated", staged_gbps);
fail:
    if (registered) {
        gb_error ignored;
        gb_kernels_host_unregister(table, &ignored);
    }
    if (table)
        munmap(table, table_bytes);
    free(g.idx);
    gb_kernels_device_free(g.didx);
    gb_kernels_device_free(g.dst);
    gb_kernels_host_free(g.staging);
    return rc;
}

typedef struct select_bench {
    float *prio;
    int64_t n, k, *idx;
    float *probs;
} select_bench;

static int op_weighted(gb_kernels_ctx *ctx, void *arg, int rep, gb_error *err)
{
    select_bench *s = arg;
    return gb_kernels_select_weighted(ctx, s->prio, s->n, 0.6, s->k,
                                      gb_kernels_seed(1, (uint64_t)rep), 1, s->idx, s->probs,
                                      err);
}

static int op_weighted_tiles(gb_kernels_ctx *ctx, void *arg, int rep, gb_error *err)
{
    select_bench *s = arg;
    return gb_kernels_select_weighted_tiles(ctx, s->prio, s->n, 0.6, s->k,
                                            gb_kernels_seed(1, (uint64_t)rep), 1, s->idx,
                                            s->probs, err);
}

static int op_topk(gb_kernels_ctx *ctx, void *arg, int rep, gb_error *err)
{
    select_bench *s = arg;
    return gb_kernels_select_topk(ctx, s->prio, s->n, s->k, s->idx, s->probs, err);
}

static int bench_select_gpu(gb_kernels_ctx *ctx, const bench_opts *o, double cpu_weighted,
                            double cpu_topk, gb_error *err)
{
    select_bench s = {0};
    s.n = o->n;
    s.k = o->k;
    int rc;
    float *p = make_priorities(o->n, err);
    if (!p)
        return GB_ENOMEM;
    if ((rc = gb_kernels_ctx_reserve(ctx, o->n, o->k, 0, err)) ||
        (rc = gb_kernels_device_alloc((size_t)o->n * sizeof(float), (void **)&s.prio, err)) ||
        (rc = gb_kernels_device_alloc((size_t)o->k * sizeof(int64_t), (void **)&s.idx, err)) ||
        (rc = gb_kernels_device_alloc((size_t)o->k * sizeof(float), (void **)&s.probs, err)) ||
        (rc = gb_kernels_copy(ctx, s.prio, p, (size_t)o->n * sizeof(float), err)) ||
        (rc = gb_kernels_sync(ctx, err)))
        goto fail;
    int reps = o->reps < 20 ? 20 : o->reps;
    double p50, p90, scan_p50; /* the tiles' draw against the full scan's, in the same run */
    if ((rc = time_op(ctx, reps, op_weighted, &s, &p50, &p90, err)))
        goto fail;
    emit_select(o, "weighted_select", o->n, o->k, p50, p90, reps, "weighted_select_cpu",
                cpu_weighted);
    scan_p50 = p50;
    if ((rc = time_op(ctx, reps, op_weighted_tiles, &s, &p50, &p90, err)))
        goto fail;
    emit_select(o, "weighted_select_tiles", o->n, o->k, p50, p90, reps, "weighted_select",
                scan_p50);
    if ((rc = time_op(ctx, reps, op_topk, &s, &p50, &p90, err)))
        goto fail;
    emit_select(o, "topk", o->n, o->k, p50, p90, reps, "topk_cpu", cpu_topk);
fail:
    free(p);
    gb_kernels_device_free(s.prio);
    gb_kernels_device_free(s.idx);
    gb_kernels_device_free(s.probs);
    return rc;
}

static void bench_kernels_usage(FILE *out)
{
    fprintf(out,
            "usage: gearbox bench kernels [--json] [--quick] [--n N] [--k K] [--reps R]\n"
            "                             [--gather-mib M]\n\n"
            "Cases: gather (zero-copy from registered host memory), gather_cpu_orchestrated\n"
            "(memcpy into pinned staging + cudaMemcpyAsync), h2d_memcpy (pinned, same bytes), for\n"
            "rows of 256 B, 4 KiB and 64 KiB; weighted_select (and weighted_select_tiles against\n"
            "it) and topk on the GPU against weighted_select_cpu and topk_cpu (n = 1e8, k = 1024\n"
            "unless told). Without a CUDA device only the CPU cases run (weighted_select_cpu,\n"
            "topk_cpu, gather_cpu, memcpy).\n"
            "--quick: n = 1e6, 16 MiB per gather, 5 repetitions.\n");
}

static int on_option(void *ctx, int val, const char *arg)
{
    bench_opts *o = ctx;
    switch (val) {
    case 'q':
        o->n = 1000000;
        o->gather_bytes = 16ULL << 20;
        o->reps = 5;
        break;
    case 'n':
        o->n = (int64_t)strtod(arg, NULL);
        break;
    case 'k':
        o->k = (int64_t)strtod(arg, NULL);
        break;
    case 'r':
        o->reps = atoi(arg);
        break;
    case 'g':
        o->gather_bytes = (uint64_t)(strtod(arg, NULL) * 1048576.0);
        break;
    }
    return 0;
}

int gb_bench_kernels(int argc, char **argv, int json)
{
    if (gb_wants_help(argc, argv)) {
        bench_kernels_usage(stdout);
        return GB_EXIT_OK;
    }
    static const struct option longs[] = {
        {"quick", no_argument, NULL, 'q'},      {"n", required_argument, NULL, 'n'},
        {"k", required_argument, NULL, 'k'},    {"reps", required_argument, NULL, 'r'},
        {"gather-mib", required_argument, NULL, 'g'}, GB_BENCH_OPTION_JSON, {0}};
    bench_opts o = {json, 10, 100000000, 1024, 256ULL << 20};
    if (gb_bench_options(argc, argv, longs, 0, on_option, &o, bench_kernels_usage))
        return GB_EXIT_USAGE;
    if (o.n < 1 || o.n > 2000000000 || o.k < 1 || o.k > o.n || o.reps < 1 || o.reps > MAX_REPS ||
        o.gather_bytes < 65536) {
        fprintf(stderr, "gearbox bench kernels: need 1 <= k <= n <= 2e9, 1 <= reps <= %d, "
                        "--gather-mib >= 0.0625\n", MAX_REPS);
        return GB_EXIT_USAGE;
    }
    const uint64_t row_sizes[] = {256, 4096, 65536};
    gb_error err = {0};
    int rc = 0;
    double cpu_weighted = 0, cpu_topk = 0;
    gb_kernels_ctx *ctx = NULL;
    int gpu = gb_kernels_device_count() > 0;
    if (!gpu)
        fprintf(stderr, "gearbox bench kernels: %s: running only the CPU cases\n",
                gb_kernels_cuda_built() ? "no CUDA device" : "built without CUDA");
    if ((rc = bench_select_cpu(&o, &cpu_weighted, &cpu_topk, &err)))
        goto fail;
    if (!gpu) {
        for (size_t r = 0; r < sizeof(row_sizes) / sizeof(row_sizes[0]); r++)
            if ((rc = bench_gather_cpu(&o, row_sizes[r], &err)))
                goto fail;
        return GB_EXIT_OK;
    }
    char device[256];
    if (gb_kernels_device_describe(0, device, sizeof device, &err) == 0)
        fprintf(stderr, "gearbox bench kernels: device 0: %s\n", device);
    if ((rc = gb_kernels_ctx_create(0, NULL, &ctx, &err)) ||
        (rc = bench_select_gpu(ctx, &o, cpu_weighted, cpu_topk, &err)))
        goto fail;
    for (size_t r = 0; r < sizeof(row_sizes) / sizeof(row_sizes[0]); r++)
        if ((rc = bench_gather_gpu(ctx, &o, row_sizes[r], &err)))
            goto fail;
    gb_kernels_ctx_destroy(ctx);
    return GB_EXIT_OK;
fail:
    fprintf(stderr, "gearbox bench kernels: %s\n", err.msg);
    gb_kernels_ctx_destroy(ctx);
    return GB_EXIT_FAILURE;
}
