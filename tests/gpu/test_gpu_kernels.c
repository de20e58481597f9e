/* tests/gpu/test_gpu_kernels.c: every GPU kernel against its CPU reference on fresh random inputs
 * at several sizes (the frame-stack rebuild against runtime/streams' gb_chunk_stack_expand).
 * Outputs are poisoned before each call; every CUDA call and launch is checked.
 * Exits 77 (skip) where there is no CUDA build or no device. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/draw.h"
#include "kernels/kernels.h"
#include "runtime/base/rng.h"
#include "runtime/streams/chunk.h"
#include "test.h"

#ifndef GEARBOX_HAVE_CUDA
int main(void)
{
    fprintf(stderr, "skipped: this gearbox was built without CUDA\n");
    return 77;
}
#else
#include <cuda_runtime_api.h>

/* A failed CUDA call ends the test (the device state is unknown after it). */
#define CK(call)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

/* A failed gearbox call ends the test too (later checks would only repeat it). */
#define OK(call)                                                                                  \
    do {                                                                                          \
        int rc_ = (call);                                                                         \
        if (rc_ != 0) {                                                                           \
            fprintf(stderr, "%s:%d: %s returned %d: %s\n", __FILE__, __LINE__, #call, rc_,       \
                    err.msg);                                                                     \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

#define POISON 0xA5

static gb_kernels_ctx *ctx;
static gb_rng rng;

static void *dev(size_t bytes)
{
    void *p = NULL;
    CK(cudaMalloc(&p, bytes ? bytes : 1));
    CK(cudaMemset(p, POISON, bytes ? bytes : 1));
    CK(cudaDeviceSynchronize()); /* the context's stream does not wait for the legacy stream */
    return p;
}

static void *host(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of host memory (%zu bytes)\n", bytes);
        exit(1);
    }
    memset(p, POISON, bytes ? bytes : 1);
    return p;
}

/* cudaMemcpy from pageable memory may return before its DMA ends; the context's stream is
 * non-blocking, so wait for the device before any kernel reads d. */
static void to_dev(void *d, const void *h, size_t bytes)
{
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());
}
static void to_host(void *h, const void *d, size_t bytes)
{
    CK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

/* Priorities: a tenth zero, a tenth negative, NaN and inf here and there, the rest spread over
 * six decades; with ties, values are rounded so many are equal. */
static void fill_priorities(float *p, int64_t n, int ties)
{
    for (int64_t j = 0; j < n; j++) {
        uint64_t r = gb_rng_below(&rng, 10);
        double v = pow(10.0, -3.0 + 6.0 * gb_rng_uniform(&rng));
        p[j] = r == 0 ? 0.0f : r == 1 ? -2.0f : (float)(ties ? floor(v / 100.0) + 1.0 : v);
    }
    if (n > 10) {
        p[gb_rng_below(&rng, (uint64_t)n)] = NAN;
        p[gb_rng_below(&rng, (uint64_t)n)] = INFINITY;
    }
}

/* ---- weighted ------------------------------------------------------------------------------- */

/* Both GPU implementations of the weighted draw, held to the same CPU reference. */
typedef int (*weighted_fn)(gb_kernels_ctx *, const float *, int64_t, double, int64_t, uint64_t,
                           int, int64_t *, float *, gb_error *);
static const struct {
    const char *name;
    weighted_fn fn;
} weighted_kinds[] = {{"scan", gb_kernels_select_weighted},
                      {"tiles", gb_kernels_select_weighted_tiles}};

/* sparse: all but every 7919th priority 0, so most tiles of the tiled draw weigh nothing */
static void weighted_case_of(size_t w, int64_t n, int64_t k, double alpha, int stratified,
                             int sparse)
{
    gb_error err = {0};
    float *p = host((size_t)n * sizeof(float));
    fill_priorities(p, n, 0);
    for (int64_t j = 0; sparse && j < n; j++)
        p[j] = j % 7919 == 5 ? 1.0f + (float)(j % 3) : 0.0f;
    double *cum = host((size_t)n * sizeof(double));
    int64_t *want = host((size_t)k * sizeof(int64_t)), *got = host((size_t)k * sizeof(int64_t));
    float *want_p = host((size_t)k * sizeof(float)), *got_p = host((size_t)k * sizeof(float));
    uint64_t seed = gb_rng_next(&rng);
    double total = 0.0;
    int rc = gb_kernels_select_weighted_cpu(p, n, alpha, k, seed, stratified, cum, want, want_p,
                                            &total, &err);
    float *dp = dev((size_t)n * sizeof(float));
    int64_t *di = dev((size_t)k * sizeof(int64_t));
    float *dprob = dev((size_t)k * sizeof(float));
    to_dev(dp, p, (size_t)n * sizeof(float));
    OK(weighted_kinds[w].fn(ctx, dp, n, alpha, k, seed, stratified, di, dprob, &err));
    int src = gb_kernels_sync(ctx, &err);
    CHECK_EQ_INT(src, rc);
    to_host(got, di, (size_t)k * sizeof(int64_t));
    to_host(got_p, dprob, (size_t)k * sizeof(float));
    if (rc == 0)
        CHECK_NEAR(gb_kernels_last_total(ctx), total, 1e-12 * total);
    int64_t boundary = 0;
    for (int64_t i = 0; i < k; i++) {
        if (got[i] == want[i]) {
            CHECK_NEAR(got_p[i], want_p[i], 1e-6 * want_p[i]);
            continue;
        }
        /* Allowed only when the target lies within rounding distance of the boundary. */
        double t = gb_kernels_draw_target(seed, (uint64_t)i, (uint64_t)k, stratified, total,
                                          nextafter(total, 0.0));
        int64_t g = got[i];
        int near = g >= 0 && g < n && gb_kernels_weight(p[g], alpha) > 0.0 &&
                   (g == 0 ? 0.0 : cum[g - 1]) <= t + 1e-12 * total && t < cum[g] + 1e-12 * total;
        CHECK_MSG(near, "%s n %lld k %lld draw %lld: gpu %lld cpu %lld", weighted_kinds[w].name,
                  (long long)n, (long long)k, (long long)i, (long long)g, (long long)want[i]);
        boundary++;
    }
    fprintf(stderr, "  weighted (%s) n %lld k %lld alpha %.1f %s: %lld boundary differences\n",
            weighted_kinds[w].name, (long long)n, (long long)k, alpha,
            stratified ? "stratified" : "independent", (long long)boundary);
    CK(cudaFree(dp));
    CK(cudaFree(di));
    CK(cudaFree(dprob));
    free(p);
    free(cum);
    free(want);
    free(got);
    free(want_p);
    free(got_p);
}

static void weighted_case(int64_t n, int64_t k, double alpha, int stratified, int sparse)
{
    for (size_t w = 0; w < sizeof weighted_kinds / sizeof weighted_kinds[0]; w++)
        weighted_case_of(w, n, k, alpha, stratified, sparse);
}

static void test_weighted(void)
{
    const int64_t ns[] = {1, 1000, 4096, (1 << 20) + 3, 5000011};
    const int64_t ks[] = {1, 256, 4096};
    for (size_t a = 0; a < 5; a++)
        for (size_t b = 0; b < 3; b++) {
            weighted_case(ns[a], ks[b], 0.6, 0, 0);
            weighted_case(ns[a], ks[b], 0.6, 1, 0);
        }
    weighted_case(1 << 20, 4096, 0.6, 1, 1);
    weighted_case(5000011, 256, 1.0, 0, 1);
    weighted_case(100000, 1024, 1.0, 0, 0);
    weighted_case(100000, 1024, 0.0, 1, 0);
}

static void test_weighted_empty(void)
{
    gb_error err = {0};
    float p[5] = {0, -1, 0, NAN, 0};
    float *dp = dev(sizeof(p));
    int64_t *di = dev(4 * sizeof(int64_t)), got[4];
    to_dev(dp, p, sizeof(p));
    for (size_t w = 0; w < sizeof weighted_kinds / sizeof weighted_kinds[0]; w++) {
        OK(weighted_kinds[w].fn(ctx, dp, 5, 0.6, 4, 1, 0, di, NULL, &err));
        CHECK_EQ_INT(gb_kernels_sync(ctx, &err), GB_EAGAIN);
        to_host(got, di, sizeof(got));
        for (int i = 0; i < 4; i++)
            CHECK_EQ_INT(got[i], GB_KERNELS_NONE);
        CHECK_OK(gb_kernels_sync(ctx, &err)); /* cleared */
    }
    CK(cudaFree(dp));
    CK(cudaFree(di));
}

/* ---- uniform -------------------------------------------------------------------------------- */

static void uniform_case(int64_t n, int64_t k, int with_candidates)
{
    gb_error err = {0};
    int64_t *cand = NULL, *dcand = NULL;
    if (with_candidates) {
        cand = host((size_t)n * sizeof(int64_t));
        for (int64_t j = 0; j < n; j++)
            cand[j] = (int64_t)gb_rng_below(&rng, 1ULL << 40);
        dcand = dev((size_t)n * sizeof(int64_t));
        to_dev(dcand, cand, (size_t)n * sizeof(int64_t));
    }
    uint64_t seed = gb_rng_next(&rng);
    int64_t *want = host((size_t)k * 8), *got = host((size_t)k * 8);
    float *want_p = host((size_t)k * 4), *got_p = host((size_t)k * 4);
    int64_t *di = dev((size_t)k * 8);
    float *dp = dev((size_t)k * 4);
    CHECK_OK(gb_kernels_select_uniform_cpu(n, cand, k, seed, want, want_p, &err));
    OK(gb_kernels_select_uniform(ctx, n, dcand, k, seed, di, dp, &err));
    OK(gb_kernels_sync(ctx, &err));
    to_host(got, di, (size_t)k * 8);
    to_host(got_p, dp, (size_t)k * 4);
    CHECK(memcmp(want, got, (size_t)k * 8) == 0);
    CHECK(memcmp(want_p, got_p, (size_t)k * 4) == 0);
    free(cand);
    free(want);
    free(got);
    free(want_p);
    free(got_p);
    if (dcand)
        CK(cudaFree(dcand));
    CK(cudaFree(di));
    CK(cudaFree(dp));
}

static void test_uniform(void)
{
    uniform_case(1, 10, 0);
    uniform_case(1000, 4096, 0);
    uniform_case(1000, 4096, 1);
    uniform_case((1LL << 40) + 17, 1024, 0); /* 64-bit positions, no memory behind them */
    uniform_case(3, 100000, 1);
}

/* ---- top-k ---------------------------------------------------------------------------------- */

static void topk_case(int64_t n, int64_t k, int ties)
{
    gb_error err = {0};
    float *p = host((size_t)n * 4);
    fill_priorities(p, n, ties);
    int64_t *want = host((size_t)k * 8), *got = host((size_t)k * 8);
    float *want_v = host((size_t)k * 4), *got_v = host((size_t)k * 4);
    CHECK_OK(gb_kernels_select_topk_cpu(p, n, k, want, want_v, NULL, &err));
    float *dp = dev((size_t)n * 4), *dv = dev((size_t)k * 4);
    int64_t *di = dev((size_t)k * 8);
    to_dev(dp, p, (size_t)n * 4);
    OK(gb_kernels_select_topk(ctx, dp, n, k, di, dv, &err));
    OK(gb_kernels_sync(ctx, &err));
    to_host(got, di, (size_t)k * 8);
    to_host(got_v, dv, (size_t)k * 4);
    CHECK_MSG(memcmp(want, got, (size_t)k * 8) == 0, "top-k n %lld k %lld ties %d", (long long)n,
              (long long)k, ties);
    CHECK(memcmp(want_v, got_v, (size_t)k * 4) == 0);
    free(p);
    free(want);
    free(got);
    free(want_v);
    free(got_v);
    CK(cudaFree(dp));
    CK(cudaFree(dv));
    CK(cudaFree(di));
}

static void test_topk(void)
{
    topk_case(1, 1, 0);
    topk_case(20, 30, 0); /* fewer selectable than k */
    topk_case(1000, 100, 1);
    topk_case((1 << 20) + 1, 1024, 0);
    topk_case(3000017, 1024, 1);
}

/* ---- scatter -------------------------------------------------------------------------------- */

static void scatter_case(int64_t capacity, int64_t m)
{
    gb_error err = {0};
    float *mirror = host((size_t)capacity * 4), *got = host((size_t)capacity * 4);
    fill_priorities(mirror, capacity, 0);
    int64_t *idx = host((size_t)m * 8);
    float *val = host((size_t)m * 4);
    for (int64_t i = 0; i < m; i++) {
        /* Half the indices from a small range, so repeats are common. */
        idx[i] =
            (int64_t)gb_rng_below(&rng, i % 2 ? (uint64_t)capacity : 1 + (uint64_t)capacity / 100);
        val[i] = (float)gb_rng_uniform(&rng);
    }
    float *dm = dev((size_t)capacity * 4), *dv = dev((size_t)m * 4);
    int64_t *di = dev((size_t)m * 8);
    to_dev(dm, mirror, (size_t)capacity * 4);
    to_dev(di, idx, (size_t)m * 8);
    to_dev(dv, val, (size_t)m * 4);
    CHECK_OK(gb_kernels_scatter_cpu(mirror, capacity, idx, val, m, &err));
    OK(gb_kernels_scatter(ctx, dm, capacity, di, dv, m, &err));
    OK(gb_kernels_sync(ctx, &err));
    to_host(got, dm, (size_t)capacity * 4);
    CHECK_MSG(memcmp(mirror, got, (size_t)capacity * 4) == 0, "scatter capacity %lld m %lld",
              (long long)capacity, (long long)m);
    /* One bad index: nothing written, sync says so. */
    idx[m / 2] = capacity;
    to_dev(di, idx, (size_t)m * 8);
    for (int64_t i = 0; i < m; i++)
        val[i] = -5.0f;
    to_dev(dv, val, (size_t)m * 4);
    OK(gb_kernels_scatter(ctx, dm, capacity, di, dv, m, &err));
    CHECK_EQ_INT(gb_kernels_sync(ctx, &err), GB_EINVAL);
    to_host(got, dm, (size_t)capacity * 4);
    CHECK(memcmp(mirror, got, (size_t)capacity * 4) == 0);
    free(mirror);
    free(got);
    free(idx);
    free(val);
    CK(cudaFree(dm));
    CK(cudaFree(dv));
    CK(cudaFree(di));
}

static void test_scatter(void)
{
    scatter_case(10, 1);
    scatter_case(1000, 1000);
    scatter_case(1000000, 4096);
    scatter_case(3000000, 200000);
}

/* ---- gather --------------------------------------------------------------------------------- */

typedef struct spec {
    uint64_t step_bytes, pad;
} spec;

/* Tables in one anonymous mapping (like the replay's shared memory), registered and mapped. */
static void gather_case(const spec *specs, int ncols, uint64_t capacity, uint32_t T, int64_t k,
                        int per_item, int staged)
{
    gb_error err = {0};
    uint64_t offs[64], total = 0;
    for (int c = 0; c < ncols; c++) {
        offs[c] = total;
        total += capacity * (T * specs[c].step_bytes + specs[c].pad);
        total = (total + 4095) & ~4095ULL;
    }
    unsigned char *base =
        mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(base != MAP_FAILED);
    if (base == MAP_FAILED)
        return;
    for (uint64_t b = 0; b < total; b += 8) {
        uint64_t r = gb_rng_next(&rng);
        memcpy(base + b, &r, total - b < 8 ? total - b : 8);
    }
    void *dbase = NULL;
    OK(gb_kernels_host_register(base, total, 1, &dbase, &err));
    int64_t *idx = host((size_t)k * 8);
    uint32_t *starts = host((size_t)k * 4);
    int32_t *lengths = host((size_t)k * 4); /* with per-item starts, also partial items */
    uint32_t count = per_item ? T / 2 : T - 2;
    for (int64_t i = 0; i < k; i++) {
        idx[i] = (int64_t)gb_rng_below(&rng, capacity);
        starts[i] = (uint32_t)gb_rng_below(&rng, T - count + 1);
        lengths[i] = (int32_t)gb_rng_below(&rng, T + 1);
    }
    idx[0] = (int64_t)capacity - 1;
    gb_kernels_steps s_host = {1, count, per_item ? starts : NULL, per_item ? lengths : NULL};
    int64_t *di = dev((size_t)k * 8);
    uint32_t *ds = dev((size_t)k * 4);
    int32_t *dl = dev((size_t)k * 4);
    to_dev(di, idx, (size_t)k * 8);
    to_dev(ds, starts, (size_t)k * 4);
    to_dev(dl, lengths, (size_t)k * 4);
    gb_kernels_steps s_dev = {1, count, per_item ? ds : NULL, per_item ? dl : NULL};
    gb_kernels_column cpu[64], gpu[64];
    unsigned char *want[64], *got[64];
    size_t batch_total = 0;
    for (int c = 0; c < ncols; c++) {
        uint64_t stride = T * specs[c].step_bytes + specs[c].pad;
        size_t bytes = (size_t)k * count * specs[c].step_bytes;
        want[c] = host(bytes);
        got[c] = host(bytes);
        gb_kernels_column col = {base + offs[c], want[c], capacity, stride, specs[c].step_bytes, T};
        cpu[c] = col;
        gpu[c] = col;
        gpu[c].src = (char *)dbase + offs[c];
        gpu[c].dst = dev(bytes);
        batch_total += bytes + 256;
    }
    CHECK_OK(gb_kernels_gather_cpu(cpu, ncols, idx, k, &s_host, &err));
    if (staged) {
        void *staging = NULL;
        OK(gb_kernels_host_alloc(batch_total, &staging, &err));
        for (int c = 0; c < ncols; c++)
            gpu[c].src = base + offs[c];
        OK(gb_kernels_gather_staged(ctx, gpu, ncols, idx, k, &s_host, staging, batch_total, &err));
        OK(gb_kernels_sync(ctx, &err));
        gb_kernels_host_free(staging);
    } else {
        OK(gb_kernels_gather(ctx, gpu, ncols, di, k, &s_dev, &err));
        OK(gb_kernels_sync(ctx, &err));
    }
    for (int c = 0; c < ncols; c++) {
        size_t bytes = (size_t)k * count * specs[c].step_bytes;
        to_host(got[c], gpu[c].dst, bytes);
        CHECK_MSG(memcmp(want[c], got[c], bytes) == 0,
                  "gather column %d (step %llu pad %llu) k %lld per_item %d staged %d", c,
                  (unsigned long long)specs[c].step_bytes, (unsigned long long)specs[c].pad,
                  (long long)k, per_item, staged);
    }
    if (!staged) {
        /* A bad index: nothing written (batches re-poisoned first), sync says so. */
        for (int c = 0; c < ncols; c++)
            CK(cudaMemset(gpu[c].dst, POISON, (size_t)k * count * specs[c].step_bytes));
        int64_t bad = (int64_t)capacity;
        to_dev(di + k / 2, &bad, 8);
        OK(gb_kernels_gather(ctx, gpu, ncols, di, k, &s_dev, &err));
        CHECK_EQ_INT(gb_kernels_sync(ctx, &err), GB_EINVAL);
        for (int c = 0; c < ncols; c++) {
            size_t bytes = (size_t)k * count * specs[c].step_bytes;
            to_host(got[c], gpu[c].dst, bytes);
            int untouched = 1;
            for (size_t b = 0; b < bytes; b++)
                untouched &= got[c][b] == POISON;
            CHECK(untouched);
        }
    }
    for (int c = 0; c < ncols; c++) {
        free(want[c]);
        free(got[c]);
        CK(cudaFree(gpu[c].dst));
    }
    OK(gb_kernels_host_unregister(base, &err));
    munmap(base, total);
    free(idx);
    free(starts);
    free(lengths);
    CK(cudaFree(di));
    CK(cudaFree(ds));
    CK(cudaFree(dl));
}

static void test_gather(void)
{
    /* float32 x4 (aligned), bool, 3 x float32, 3 bytes, an 84x84 uint8 frame, a 4 KiB row. */
    const spec mixed[] = {{16, 0}, {1, 63}, {12, 20}, {3, 5}, {84 * 84, 64}, {4096, 0}};
    const int64_t ks[] = {1, 100, 4096};
    for (int a = 0; a < 3; a++) {
        gather_case(mixed, 6, 1000, 8, ks[a], 0, 0);
        gather_case(mixed, 6, 1000, 8, ks[a], 1, 0);
        gather_case(mixed, 6, 1000, 8, ks[a], 1, 1);
    }
    spec many[20]; /* more columns than one launch takes */
    for (int c = 0; c < 20; c++) {
        many[c].step_bytes = (uint64_t)(c % 5 == 0 ? 3 : 4 * (c + 1));
        many[c].pad = (uint64_t)(c % 3) * 16;
    }
    gather_case(many, 20, 500, 4, 333, 0, 0);
    gather_case(many, 20, 500, 4, 333, 0, 1);
    const spec big[] = {{1 << 20, 0}}; /* 8 MiB items: many units per row */
    gather_case(big, 1, 64, 8, 16, 1, 0);
}

/* Offsets beyond 4 GiB: a device-memory table, when the device has room for one. */
static void test_gather_64bit_offsets(void)
{
    gb_error err = {0};
    const uint64_t stride = 1ULL << 22, capacity = 1100; /* 4.3 GiB */
    size_t free_b = 0, total_b = 0;
    CK(cudaMemGetInfo(&free_b, &total_b));
    if (free_b < stride * capacity + (1ULL << 30)) {
        fprintf(stderr, "  skipped: %zu bytes free on the device\n", free_b);
        return;
    }
    unsigned char *table = NULL;
    CK(cudaMalloc((void **)&table, stride * capacity));
    int64_t idx[4] = {1099, 1024, 0, 1099};
    unsigned char row[3 * 1000];
    for (int i = 0; i < 3; i++) {
        for (int b = 0; b < 3000; b++)
            row[b] = (unsigned char)(b * 13 + i);
        to_dev(table + (uint64_t)idx[i] * stride, row, sizeof(row));
    }
    unsigned char *dst = dev(4 * 2 * 1000), got[4 * 2 * 1000];
    gb_kernels_column col = {table, dst, capacity, stride, 1000, 3};
    gb_kernels_steps s = {1, 2, NULL, NULL};
    int64_t *di = dev(sizeof(idx));
    to_dev(di, idx, sizeof(idx));
    OK(gb_kernels_gather(ctx, &col, 1, di, 4, &s, &err));
    OK(gb_kernels_sync(ctx, &err));
    to_host(got, dst, sizeof(got));
    int same = 1;
    for (int i = 0; i < 4; i++) {
        int src_row = i == 3 ? 0 : i;
        for (int b = 0; b < 2000; b++)
            same &= got[i * 2000 + b] == (unsigned char)((b + 1000) * 13 + src_row);
    }
    CHECK(same);
    CK(cudaFree(table));
    CK(cudaFree(dst));
    CK(cudaFree(di));
}

/* Frame stacks of k frames (each frame c x h x w bytes) for n items of T rows, about one row in
 * eight not valid (resets, padding), rebuilt on the device and on the CPU: the same bytes. */
static void stack_case(int64_t k, int64_t c, int64_t h, int64_t w, int64_t T, int64_t n)
{
    gb_error err = {0};
    gb_chunk_layout l;
    const int64_t shape[3] = {k * c, h, w};
    OK(gb_chunk_layout_init(&l, T, GB_DTYPE_UINT8, 3, shape, 1, 1, 0, &err));
    OK(gb_chunk_layout_set_frame_stack(&l, k, &err));
    const size_t fb = l.frame_bytes, frames_b = (size_t)(n * T) * fb,
                 past_b = (size_t)(n * (k - 1)) * fb, out_b = frames_b * (size_t)k;
    uint8_t *frames = host(frames_b), *past = host(past_b), *valid = host((size_t)(n * T));
    uint8_t *want = host(out_b), *got = host(out_b);
    for (size_t i = 0; i < frames_b; i++)
        frames[i] = (uint8_t)gb_rng_next(&rng);
    for (size_t i = 0; i < past_b; i++)
        past[i] = (uint8_t)gb_rng_next(&rng);
    for (int64_t i = 0; i < n * T; i++)
        valid[i] = gb_rng_below(&rng, 8) != 0;
    gb_chunk_stack_expand(&l, n, frames, past, valid, want);
    uint8_t *df = dev(frames_b), *dp = dev(past_b), *dv = dev((size_t)(n * T)), *dout = dev(out_b);
    to_dev(df, frames, frames_b);
    to_dev(dp, past, past_b);
    to_dev(dv, valid, (size_t)(n * T));
    OK(gb_kernels_stack_expand(ctx, n, T, k, fb, df, dp, dv, dout, &err));
    OK(gb_kernels_sync(ctx, &err));
    to_host(got, dout, out_b);
    CHECK_MSG(memcmp(got, want, out_b) == 0, "k %lld, frame %zu bytes, T %lld, n %lld",
              (long long)k, fb, (long long)T, (long long)n);
    CK(cudaFree(df));
    CK(cudaFree(dp));
    CK(cudaFree(dv));
    CK(cudaFree(dout));
    free(frames);
    free(past);
    free(valid);
    free(want);
    free(got);
}

static void test_stack_expand(void)
{
    stack_case(4, 1, 84, 84, 32, 16); /* Atari: 16-byte words */
    stack_case(2, 3, 5, 1, 16, 7);    /* 15-byte frames: byte copies */
    stack_case(8, 1, 3, 4, 9, 5);     /* 12-byte frames: 4-byte words */
    stack_case(3, 1, 8, 1, 1, 3);     /* one row a chunk: every stack reaches into obs_past */
    gb_error err = {0};
    CHECK(gb_kernels_stack_expand(ctx, 1, 4, 1, 16, NULL, NULL, NULL, NULL, &err) == GB_EINVAL);
}

int main(void)
{
    int n = gb_kernels_device_count();
    if (n == 0) {
        fprintf(stderr, "skipped: no CUDA device\n");
        return 77;
    }
    gb_error err = {0};
    gb_rng_seed(&rng, 20261121);
    OK(gb_kernels_ctx_create(0, NULL, &ctx, &err));
    TEST_RUN(test_weighted);
    TEST_RUN(test_weighted_empty);
    TEST_RUN(test_uniform);
    TEST_RUN(test_topk);
    TEST_RUN(test_scatter);
    TEST_RUN(test_gather);
    TEST_RUN(test_gather_64bit_offsets);
    TEST_RUN(test_stack_expand);
    gb_kernels_ctx_destroy(ctx);
    CK(cudaGetLastError());
    return test_main_result();
}
#endif
