/* tests/gpu/test_gpu_replay.c: the replay's GPU path (replay/gpu.h) on a real replay: the
 * device-mirror weighted selector against priority^alpha (chi-square, probabilities, updates,
 * removals, the all-zero fallback), the uniform one (chi-square, 1/size), the top-k one against
 * the built-in heap, and zero-copy collection against gb_replay_collect, byte for
 * byte, with partial items and a step range. Exits 77 without CUDA or a device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "replay/gpu.h"
#include "runtime/base/rng.h"
#include "test.h"

#ifndef GEARBOX_HAVE_CUDA
int main(void)
{
    fprintf(stderr, "skipped: this gearbox was built without CUDA\n");
    return 77;
}
#else
#include <cuda_runtime_api.h>

#define CK(call)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

#define OK(call)                                                                                  \
    do {                                                                                          \
        int rc_ = (call);                                                                         \
        if (rc_ != 0) {                                                                           \
            fprintf(stderr, "%s:%d: %s returned %d: %s\n", __FILE__, __LINE__, #call, rc_,       \
                    err.msg);                                                                     \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

enum { CAP = 256, T = 8, ITEMS = 200, NCOL = 4 };

static gb_rng rng;

/* obs float32[4] per step, done bool per step, vec 3 x float32 per step, bootstrap float32[5]
 * per item. */
static gb_replay *make_replay(gb_selector_kind kind, const gb_replay_selector_ops *ops)
{
    gb_error err = {0};
    gb_replay_options o;
    gb_replay_options_default(&o);
    o.capacity = CAP;
    o.steps = T;
    o.selector = kind;
    o.selector_ops = ops;
    o.alpha = 0.6;
    o.seed = 5;
    int64_t four = 4, three = 3, five = 5;
    OK(gb_replay_add_column(&o, "obs", GB_DTYPE_FLOAT32, 1, &four, 0, &err));
    OK(gb_replay_add_column(&o, "done", GB_DTYPE_BOOL, 0, NULL, 0, &err));
    OK(gb_replay_add_column(&o, "vec", GB_DTYPE_FLOAT32, 1, &three, 0, &err));
    OK(gb_replay_add_column(&o, "bootstrap", GB_DTYPE_FLOAT32, 1, &five, 1, &err));
    gb_replay *r = NULL;
    OK(gb_replay_create(&o, &r, &err));
    return r;
}

static double priorities[ITEMS];

static void fill(gb_replay *r)
{
    gb_error err = {0};
    unsigned char obs[T * 16], done[T], vec[T * 12], boot[20];
    const void *data[NCOL] = {obs, done, vec, boot};
    for (int i = 0; i < ITEMS; i++) {
        for (size_t b = 0; b < sizeof(obs); b++)
            obs[b] = (unsigned char)gb_rng_next(&rng);
        for (size_t b = 0; b < sizeof(done); b++)
            done[b] = (unsigned char)(gb_rng_next(&rng) & 1);
        for (size_t b = 0; b < sizeof(vec); b++)
            vec[b] = (unsigned char)gb_rng_next(&rng);
        for (size_t b = 0; b < sizeof(boot); b++)
            boot[b] = (unsigned char)gb_rng_next(&rng);
        priorities[i] = i % 7 == 0 ? 0.0 : 0.05 + 3.0 * gb_rng_uniform(&rng);
        OK(gb_replay_insert(r, data, priorities[i], 1 + (int32_t)gb_rng_below(&rng, T), 0, &err));
    }
}

/* 400 draws of 64 from r: every item drawn has want[i] > 0 and its reported probability within
 * rel of it; items of want 0 are never drawn; a chi-square of the counts against want. */
static void check_draws(gb_replay *r, const double want[CAP], double rel, const char *name)
{
    gb_error err = {0};
    gb_replay_selection s;
    OK(gb_replay_selection_init(&s, 64, &err));
    int64_t count[CAP] = {0}, draws = 0;
    for (int rep = 0; rep < 400; rep++) {
        gb_replay_request q = gb_replay_request_default(64);
        OK(gb_replay_sample(r, &q, &s, &err));
        CHECK_EQ_INT(s.n, 64);
        for (int64_t k = 0; k < s.n; k++) {
            int64_t i = s.index[k];
            CHECK(i >= 0 && i < CAP && want[i] > 0);
            if (i < 0 || i >= CAP)
                continue;
            count[i]++;
            CHECK_NEAR(s.prob[k], want[i], rel * want[i]);
        }
        draws += s.n;
        gb_replay_release(r, &s);
    }
    double chi = 0.0;
    int64_t cells = 0;
    for (int64_t i = 0; i < CAP; i++) {
        if (want[i] <= 0) {
            CHECK_EQ_INT(count[i], 0);
            continue;
        }
        double e = want[i] * (double)draws;
        chi += ((double)count[i] - e) * ((double)count[i] - e) / e;
        cells++;
    }
    double df = (double)(cells - 1);
    fprintf(stderr, "  GPU %s selector: chi-square %.1f, df %.0f\n", name, chi, df);
    CHECK(chi < df + 6.0 * sqrt(2.0 * df));
    gb_replay_selection_free(&s);
}

static void test_selector_distribution(void)
{
    gb_error err = {0};
    gb_replay *r = make_replay(GB_SELECTOR_WEIGHTED, gb_replay_gpu_selector(GB_SELECTOR_WEIGHTED));
    fill(r);
    gb_replay_status st;
    gb_replay_status_view(r, &st);
    double total = 0.0, want[CAP] = {0};
    for (int64_t i = 0; i < CAP; i++)
        if (st.state[i] == GB_ITEM_COMMITTED && st.priority[i] > 0)
            total += pow(st.priority[i], 0.6);
    for (int64_t i = 0; i < CAP; i++)
        if (st.state[i] == GB_ITEM_COMMITTED && st.priority[i] > 0)
            want[i] = pow(st.priority[i], 0.6) / total;
    check_draws(r, want, 1e-5, "weighted");
    gb_replay_selection s;
    OK(gb_replay_selection_init(&s, 64, &err));

    /* Updates reach the mirror: one item keeps a priority, every other one gets 0. */
    int64_t all[ITEMS], n = 0, keep = -1;
    double pr[ITEMS];
    for (int64_t i = 0; i < CAP && n < ITEMS; i++)
        if (st.state[i] == GB_ITEM_COMMITTED) {
            all[n] = i;
            pr[n] = 0.0;
            if (keep < 0 && st.priority[i] > 0) {
                keep = i;
                pr[n] = 2.0;
            }
            n++;
        }
    OK(gb_replay_update_priorities(r, n, all, NULL, pr, NULL, &err));
    gb_replay_request q = gb_replay_request_default(64);
    OK(gb_replay_sample(r, &q, &s, &err));
    for (int64_t k = 0; k < s.n; k++) {
        CHECK_EQ_INT(s.index[k], keep);
        CHECK_NEAR(s.prob[k], 1.0, 1e-6);
    }
    gb_replay_release(r, &s);
    /* All zero: uniform over the committed items, like the CPU selector. */
    pr[0] = 0.0;
    for (int64_t j = 0; j < n; j++)
        pr[j] = 0.0;
    OK(gb_replay_update_priorities(r, n, all, NULL, pr, NULL, &err));
    OK(gb_replay_sample(r, &q, &s, &err));
    CHECK_EQ_INT(s.n, 64);
    for (int64_t k = 0; k < s.n; k++) {
        CHECK(st.state[s.index[k]] == GB_ITEM_COMMITTED);
        CHECK_NEAR(s.prob[k], 1.0 / (double)st.size, 1e-12);
    }
    gb_replay_release(r, &s);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
}

/* Uniform on the GPU: every committed item (priority 0 included) with probability 1/size. */
static void test_selector_uniform(void)
{
    gb_replay *r = make_replay(GB_SELECTOR_UNIFORM, gb_replay_gpu_selector(GB_SELECTOR_UNIFORM));
    fill(r);
    gb_replay_status st;
    gb_replay_status_view(r, &st);
    double want[CAP] = {0};
    for (int64_t i = 0; i < CAP; i++)
        if (st.state[i] == GB_ITEM_COMMITTED)
            want[i] = 1.0 / (double)st.size;
    check_draws(r, want, 1e-6, "uniform");
    gb_replay_free(r);
}

/* Top-k on the GPU against the built-in heap, on the same items, before and after an update. */
static void test_selector_topk(void)
{
    gb_error err = {0};
    gb_replay *rc = make_replay(GB_SELECTOR_TOPK, NULL);
    gb_replay *rg = make_replay(GB_SELECTOR_TOPK, gb_replay_gpu_selector(GB_SELECTOR_TOPK));
    gb_rng_seed(&rng, 11);
    fill(rc);
    gb_rng_seed(&rng, 11);
    fill(rg);
    gb_replay_selection sc, sg;
    OK(gb_replay_selection_init(&sc, 32, &err));
    OK(gb_replay_selection_init(&sg, 32, &err));
    for (int round = 0; round < 2; round++) {
        gb_replay_request q = gb_replay_request_default(32);
        OK(gb_replay_sample(rc, &q, &sc, &err));
        OK(gb_replay_sample(rg, &q, &sg, &err));
        CHECK_EQ_INT(sg.n, sc.n);
        for (int64_t k = 0; k < sc.n && k < sg.n; k++)
            CHECK_MSG(sg.index[k] == sc.index[k], "round %d rank %lld: GPU %lld, CPU %lld", round,
                      (long long)k, (long long)sg.index[k], (long long)sc.index[k]);
        /* the last of the 32 goes to the top */
        int64_t last = sc.index[sc.n - 1];
        double top = 100.0;
        gb_replay_release(rc, &sc);
        gb_replay_release(rg, &sg);
        OK(gb_replay_update_priorities(rc, 1, &last, NULL, &top, NULL, &err));
        OK(gb_replay_update_priorities(rg, 1, &last, NULL, &top, NULL, &err));
    }
    gb_replay_selection_free(&sc);
    gb_replay_selection_free(&sg);
    gb_replay_free(rc);
    gb_replay_free(rg);
}

/* FIFO eviction past capacity: evicted items leave the mirror. */
static void test_selector_removals(void)
{
    gb_error err = {0};
    gb_replay *r = make_replay(GB_SELECTOR_WEIGHTED, gb_replay_gpu_selector(GB_SELECTOR_WEIGHTED));
    fill(r);
    fill(r); /* 400 inserts into 256 slots */
    gb_replay_status st;
    gb_replay_status_view(r, &st);
    gb_replay_selection s;
    OK(gb_replay_selection_init(&s, 256, &err));
    for (int rep = 0; rep < 50; rep++) {
        gb_replay_request q = gb_replay_request_default(256);
        OK(gb_replay_sample(r, &q, &s, &err));
        for (int64_t k = 0; k < s.n; k++)
            CHECK(st.state[s.index[k]] == GB_ITEM_COMMITTED && st.priority[s.index[k]] > 0);
        gb_replay_release(r, &s);
    }
    gb_replay_selection_free(&s);
    gb_replay_free(r);
}

static void test_collect(void)
{
    gb_error err = {0};
    /* the CPU selector: collection is what is tested */
    gb_replay *r = make_replay(GB_SELECTOR_WEIGHTED, NULL);
    fill(r);
    gb_kernels_ctx *ctx = NULL;
    OK(gb_kernels_ctx_create(0, NULL, &ctx, &err));
    gb_replay_gpu *g = NULL;
    OK(gb_replay_gpu_open(r, ctx, 128, &g, &err));
    const size_t row[NCOL] = {16, 1, 12, 20};
    const int per_item[NCOL] = {0, 0, 0, 1};
    gb_replay_selection s;
    OK(gb_replay_selection_init(&s, 128, &err));
    const int32_t ranges[3][2] = {{0, T}, {2, 7}, {T - 1, T}};
    for (int rg = 0; rg < 3; rg++)
        for (int64_t batch = 1; batch <= 128; batch *= 4) {
            gb_replay_request q = gb_replay_request_default(batch);
            q.t0 = ranges[rg][0];
            q.t1 = ranges[rg][1];
            OK(gb_replay_sample(r, &q, &s, &err));
            int32_t span = q.t1 - q.t0;
            gb_replay_dst hd[NCOL], dd[NCOL];
            void *want[NCOL], *got[NCOL];
            for (int c = 0; c < NCOL; c++) {
                size_t bytes = (per_item[c] ? row[c] : row[c] * (size_t)span) * (size_t)s.n;
                want[c] = malloc(bytes);
                got[c] = malloc(bytes);
                void *d = NULL;
                CK(cudaMalloc(&d, bytes));
                CK(cudaMemset(d, 0xA5, bytes));
                hd[c] = (gb_replay_dst){c, want[c], bytes};
                dd[c] = (gb_replay_dst){c, d, bytes};
            }
            CK(cudaDeviceSynchronize());
            int32_t len_cpu[128], len_gpu[128];
            OK(gb_replay_collect(r, &s, hd, NCOL, len_cpu, &err));
            OK(gb_replay_gpu_collect(g, &s, dd, NCOL, len_gpu, &err));
            OK(gb_kernels_sync(ctx, &err));
            CHECK(memcmp(len_cpu, len_gpu, (size_t)s.n * sizeof(int32_t)) == 0);
            for (int c = 0; c < NCOL; c++) {
                CK(cudaMemcpy(got[c], dd[c].data, dd[c].bytes, cudaMemcpyDeviceToHost));
                CHECK_MSG(memcmp(want[c], got[c], hd[c].bytes) == 0,
                          "column %d range [%d, %d) batch %lld", c, q.t0, q.t1, (long long)batch);
                free(want[c]);
                free(got[c]);
                CK(cudaFree(dd[c].data));
            }
            gb_replay_release(r, &s);
        }
    gb_replay_selection_free(&s);
    gb_replay_gpu_close(g);
    gb_kernels_ctx_destroy(ctx);
    gb_replay_free(r);
}

int main(void)
{
    if (gb_kernels_device_count() == 0) {
        fprintf(stderr, "skipped: no CUDA device\n");
        return 77;
    }
    gb_rng_seed(&rng, 77);
    TEST_RUN(test_selector_distribution);
    TEST_RUN(test_selector_removals);
    TEST_RUN(test_selector_uniform);
    TEST_RUN(test_selector_topk);
    TEST_RUN(test_collect);
    return test_main_result();
}
#endif
