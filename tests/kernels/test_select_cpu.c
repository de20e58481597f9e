/* tests/kernels/test_select_cpu.c: the CPU references of weighted, uniform and top-k selection and
 * of the priority scatter, against brute-force oracles and chi-square tests (fixed seeds, so the
 * statistics are deterministic; thresholds are ~6 standard deviations). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/draw.h"
#include "kernels/kernels.h"
#include "runtime/base/rng.h"
#include "test.h"

/* Chi-square statistic of observed counts against expected probabilities (cells with p == 0 must
 * have count 0); *df gets the degrees of freedom. */
static double chi_square(const int64_t *count, const double *p, int64_t cells, int64_t draws,
                         int64_t *df)
{
    double chi = 0.0;
    int64_t used = 0;
    for (int64_t j = 0; j < cells; j++) {
        if (p[j] == 0.0) {
            CHECK_EQ_INT(count[j], 0);
            continue;
        }
        double e = p[j] * (double)draws;
        chi += ((double)count[j] - e) * ((double)count[j] - e) / e;
        used++;
    }
    *df = used - 1;
    return chi;
}

static int chi_ok(double chi, int64_t df)
{
    return chi < (double)df + 6.0 * sqrt(2.0 * (double)df);
}

static void test_draws(void)
{
    double sum = 0.0;
    for (uint64_t i = 0; i < 100000; i++) {
        double u = gb_kernels_draw(42, i);
        CHECK(u >= 0.0 && u < 1.0);
        sum += u;
    }
    CHECK_NEAR(sum / 100000.0, 0.5, 0.005);
    CHECK(gb_kernels_draw_bits(1, 0) == gb_kernels_draw_bits(1, 0));
    CHECK(gb_kernels_draw_bits(1, 0) != gb_kernels_draw_bits(2, 0));
    CHECK(gb_kernels_draw_bits(1, 0) != gb_kernels_draw_bits(1, 1));
    CHECK(gb_kernels_seed(7, 0) != gb_kernels_seed(7, 1));
    CHECK(gb_kernels_seed(7, 1) != gb_kernels_seed(8, 1));
    for (uint64_t n = 1; n < 1000; n += 37)
        for (uint64_t i = 0; i < 50; i++)
            CHECK(gb_kernels_below(3, i, n) < n);
}

static void test_weights(void)
{
    CHECK(gb_kernels_weight(0.0f, 0.6) == 0.0);
    CHECK(gb_kernels_weight(-1.0f, 0.6) == 0.0);
    CHECK(gb_kernels_weight(NAN, 0.6) == 0.0);
    CHECK(gb_kernels_weight(INFINITY, 0.6) == 0.0);
    CHECK(gb_kernels_weight(4.0f, 0.5) == 2.0);
    CHECK(gb_kernels_weight(3.0f, 1.0) == 3.0);
    CHECK(gb_kernels_weight(1e-30f, 0.0) == 1.0);
}

/* Priorities with zeros, negatives, NaN and inf mixed in (never selectable). */
static void make_priorities(float *p, int64_t n, uint64_t seed)
{
    gb_rng rng;
    gb_rng_seed(&rng, seed);
    for (int64_t j = 0; j < n; j++) {
        uint64_t r = gb_rng_below(&rng, 10);
        p[j] = r == 0 ? 0.0f : r == 1 ? -1.0f : (float)(0.01 + 5.0 * gb_rng_uniform(&rng));
    }
    if (n > 3) {
        p[n / 3] = NAN;
        p[n / 2] = INFINITY;
    }
}

static void weighted_distribution(int stratified, double alpha)
{
    enum { N = 40, K = 1000, CALLS = 200 };
    float p[N];
    double cum[N], expect[N], total = 0.0;
    int64_t idx[K], count[N] = {0};
    float probs[K];
    gb_error err = {0};
    make_priorities(p, N, 11);
    for (int j = 0; j < N; j++)
        total += gb_kernels_weight(p[j], alpha);
    for (int j = 0; j < N; j++)
        expect[j] = gb_kernels_weight(p[j], alpha) / total;
    for (int c = 0; c < CALLS; c++) {
        double seen = 0.0;
        CHECK_OK(gb_kernels_select_weighted_cpu(p, N, alpha, K, gb_kernels_seed(5, c), stratified,
                                                cum, idx, probs, &seen, &err));
        CHECK_NEAR(seen, total, 1e-9 * total);
        for (int i = 0; i < K; i++) {
            CHECK(idx[i] >= 0 && idx[i] < N);
            if (idx[i] < 0 || idx[i] >= N)
                return;
            count[idx[i]]++;
            CHECK_NEAR(probs[i], expect[idx[i]], 1e-6 * expect[idx[i]]);
            if (stratified && i > 0)
                CHECK(idx[i] >= idx[i - 1]); /* stratified targets increase */
        }
    }
    int64_t df;
    double chi = chi_square(count, expect, N, (int64_t)K * CALLS, &df);
    fprintf(stderr, "  weighted %s alpha %.1f: chi-square %.1f, df %lld\n",
            stratified ? "stratified" : "independent", alpha, chi, (long long)df);
    CHECK_MSG(chi_ok(chi, df), "chi-square %.1f with %lld df", chi, (long long)df);
}

static void test_weighted_independent(void) { weighted_distribution(0, 0.6); }
static void test_weighted_stratified(void) { weighted_distribution(1, 0.6); }
static void test_weighted_alpha_one(void) { weighted_distribution(0, 1.0); }
static void test_weighted_alpha_zero(void) { weighted_distribution(0, 0.0); }

/* Stratified draws: exactly one target per stratum, so an item holding a fraction f of the
 * weight gets floor(f k) or ceil(f k) of the k draws. */
static void test_weighted_stratified_counts(void)
{
    enum { N = 7, K = 1000 };
    float p[N] = {1, 2, 3, 0, 4, 5, 6};
    double cum[N];
    int64_t idx[K], count[N] = {0};
    gb_error err = {0};
    CHECK_OK(gb_kernels_select_weighted_cpu(p, N, 1.0, K, 99, 1, cum, idx, NULL, NULL, &err));
    for (int i = 0; i < K; i++)
        count[idx[i]]++;
    for (int j = 0; j < N; j++) {
        double e = p[j] / 21.0 * K;
        CHECK_MSG(count[j] >= floor(e) - 1 && count[j] <= ceil(e) + 1, "item %d: %lld vs %.1f", j,
                  (long long)count[j], e);
    }
}

static void test_weighted_same_seed_same_indices(void)
{
    enum { N = 1000, K = 64 };
    float p[N];
    double cum[N];
    int64_t a[K], b[K], c[K];
    gb_error err = {0};
    make_priorities(p, N, 3);
    CHECK_OK(gb_kernels_select_weighted_cpu(p, N, 0.7, K, 1234, 0, cum, a, NULL, NULL, &err));
    CHECK_OK(gb_kernels_select_weighted_cpu(p, N, 0.7, K, 1234, 0, cum, b, NULL, NULL, &err));
    CHECK_OK(gb_kernels_select_weighted_cpu(p, N, 0.7, K, 1235, 0, cum, c, NULL, NULL, &err));
    CHECK(memcmp(a, b, sizeof(a)) == 0);
    CHECK(memcmp(a, c, sizeof(a)) != 0);
}

/* Brute force: the chosen item's interval [cum[j-1], cum[j]) holds the target. */
static void test_weighted_matches_linear_scan(void)
{
    enum { N = 5000, K = 300 };
    float *p = malloc(N * sizeof(float));
    double *cum = malloc(N * sizeof(double));
    int64_t idx[K];
    gb_error err = {0};
    make_priorities(p, N, 8);
    double total = 0.0;
    CHECK_OK(gb_kernels_select_weighted_cpu(p, N, 0.5, K, 77, 0, cum, idx, NULL, &total, &err));
    for (int i = 0; i < K; i++) {
        double t = gb_kernels_draw(77, (uint64_t)i) * total;
        double run = 0.0;
        int64_t j = 0;
        for (; j < N; j++) {
            run += gb_kernels_weight(p[j], 0.5);
            if (run > t)
                break;
        }
        CHECK_EQ_INT(idx[i], j);
    }
    free(p);
    free(cum);
}

static void test_weighted_empty_and_args(void)
{
    float p[4] = {0, -1, NAN, INFINITY};
    double cum[4];
    int64_t idx[3] = {5, 5, 5};
    float probs[3] = {1, 1, 1};
    gb_error err = {0};
    CHECK_EQ_INT(gb_kernels_select_weighted_cpu(p, 4, 0.6, 3, 1, 0, cum, idx, probs, NULL, &err),
                 GB_EAGAIN);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(idx[i], GB_KERNELS_NONE);
        CHECK(probs[i] == 0.0f);
    }
    CHECK_EQ_INT(gb_kernels_select_weighted_cpu(p, 0, 0.6, 3, 1, 0, cum, idx, probs, NULL, &err),
                 GB_EAGAIN);
    CHECK_EQ_INT(gb_kernels_select_weighted_cpu(p, 4, -0.5, 3, 1, 0, cum, idx, probs, NULL, &err),
                 GB_EINVAL);
    CHECK_EQ_INT(gb_kernels_select_weighted_cpu(p, 4, 0.5, 3, 1, 0, NULL, idx, probs, NULL, &err),
                 GB_EINVAL);
    /* A single selectable item among unselectable ones is always the one chosen. */
    p[2] = 0.25f;
    CHECK_OK(gb_kernels_select_weighted_cpu(p, 4, 0.6, 3, 1, 1, cum, idx, probs, NULL, &err));
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(idx[i], 2);
        CHECK(probs[i] == 1.0f);
    }
}

/* Tiny weights next to huge ones keep their share (double prefix sums). */
static void test_weighted_wide_range(void)
{
    enum { N = 200000, K = 4096 };
    float *p = malloc(N * sizeof(float));
    double *cum = malloc(N * sizeof(double));
    int64_t *idx = malloc(K * sizeof(int64_t));
    gb_error err = {0};
    for (int j = 0; j < N; j++)
        p[j] = 1e-3f;
    p[N / 2] = (float)(1e-3 * (N - 1)); /* holds half the weight */
    int64_t hits = 0, draws = 0;
    for (int c = 0; c < 20; c++) {
        CHECK_OK(gb_kernels_select_weighted_cpu(p, N, 1.0, K, gb_kernels_seed(1, c), 0, cum, idx,
                                                NULL, NULL, &err));
        for (int i = 0; i < K; i++)
            hits += idx[i] == N / 2;
        draws += K;
    }
    double share = (double)hits / (double)draws;
    CHECK_MSG(fabs(share - 0.5) < 6.0 * sqrt(0.25 / (double)draws), "share %.4f", share);
    free(p);
    free(cum);
    free(idx);
}

static void test_uniform(void)
{
    enum { N = 25, K = 2000, CALLS = 50 };
    int64_t idx[K], count[N] = {0}, cand[N];
    float probs[K];
    double expect[N];
    gb_error err = {0};
    for (int j = 0; j < N; j++) {
        expect[j] = 1.0 / N;
        cand[j] = 1000 + 3 * j;
    }
    for (int c = 0; c < CALLS; c++) {
        CHECK_OK(
            gb_kernels_select_uniform_cpu(N, NULL, K, gb_kernels_seed(2, c), idx, probs, &err));
        for (int i = 0; i < K; i++) {
            CHECK(idx[i] >= 0 && idx[i] < N);
            if (idx[i] >= 0 && idx[i] < N)
                count[idx[i]]++;
            CHECK(probs[i] == (float)(1.0 / N));
        }
    }
    int64_t df;
    double chi = chi_square(count, expect, N, (int64_t)K * CALLS, &df);
    fprintf(stderr, "  uniform: chi-square %.1f, df %lld\n", chi, (long long)df);
    CHECK(chi_ok(chi, df));
    /* Candidates: the same positions, mapped through the list. */
    int64_t plain[K];
    CHECK_OK(gb_kernels_select_uniform_cpu(N, NULL, K, 9, plain, NULL, &err));
    CHECK_OK(gb_kernels_select_uniform_cpu(N, cand, K, 9, idx, NULL, &err));
    for (int i = 0; i < K; i++)
        CHECK_EQ_INT(idx[i], cand[plain[i]]);
    CHECK_EQ_INT(gb_kernels_select_uniform_cpu(0, NULL, K, 9, idx, NULL, &err), GB_EAGAIN);
    CHECK_EQ_INT(idx[0], GB_KERNELS_NONE);
}

static const float *sort_p;
static int by_rank(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    if (sort_p[x] != sort_p[y])
        return sort_p[x] > sort_p[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static void topk_case(int64_t n, int64_t k, uint64_t seed, int ties)
{
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    int64_t *all = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    int64_t *idx = malloc((size_t)k * sizeof(int64_t));
    float *val = malloc((size_t)k * sizeof(float));
    gb_error err = {0};
    make_priorities(p, n, seed);
    if (ties)
        for (int64_t j = 0; j < n; j++)
            p[j] = p[j] > 0 && p[j] < INFINITY ? floorf(p[j]) + 1.0f : p[j];
    int64_t m = 0;
    for (int64_t j = 0; j < n; j++)
        if (gb_kernels_weight(p[j], 1.0) > 0.0)
            all[m++] = j;
    sort_p = p;
    qsort(all, (size_t)m, sizeof(int64_t), by_rank);
    for (int64_t i = 0; i < k; i++) {
        idx[i] = 12345;
        val[i] = -7.0f;
    }
    int64_t count = -1;
    CHECK_OK(gb_kernels_select_topk_cpu(p, n, k, idx, val, &count, &err));
    CHECK_EQ_INT(count, m < k ? m : k);
    for (int64_t i = 0; i < k; i++) {
        if (i < m) {
            CHECK_EQ_INT(idx[i], all[i]);
            CHECK(val[i] == p[all[i]]);
        } else {
            CHECK_EQ_INT(idx[i], GB_KERNELS_NONE);
            CHECK(val[i] == 0.0f);
        }
    }
    free(p);
    free(all);
    free(idx);
    free(val);
}

static void test_topk(void)
{
    topk_case(1000, 10, 1, 0);
    topk_case(1000, 10, 2, 1); /* many equal priorities: lower index first */
    topk_case(100000, 1024, 3, 1);
    topk_case(50, 100, 4, 0); /* fewer selectable than k */
    topk_case(0, 5, 5, 0);
    topk_case(1, 1, 6, 0);
}

static void test_scatter(void)
{
    float mirror[10] = {0};
    int64_t idx[6] = {3, 7, 3, 0, 9, 3};
    float val[6] = {1, 2, 3, 4, 5, 6};
    gb_error err = {0};
    CHECK_OK(gb_kernels_scatter_cpu(mirror, 10, idx, val, 6, &err));
    CHECK(mirror[3] == 6.0f); /* last write wins */
    CHECK(mirror[7] == 2.0f);
    CHECK(mirror[0] == 4.0f);
    CHECK(mirror[9] == 5.0f);
    CHECK(mirror[1] == 0.0f);
    float before[10];
    memcpy(before, mirror, sizeof(mirror));
    int64_t bad[3] = {1, 10, 2};
    CHECK_EQ_INT(gb_kernels_scatter_cpu(mirror, 10, bad, val, 3, &err), GB_EINVAL);
    CHECK(memcmp(before, mirror, sizeof(mirror)) == 0); /* nothing written */
    bad[1] = -1;
    CHECK_EQ_INT(gb_kernels_scatter_cpu(mirror, 10, bad, val, 3, &err), GB_EINVAL);
    CHECK_OK(gb_kernels_scatter_cpu(mirror, 10, NULL, NULL, 0, &err));
}

int main(void)
{
    TEST_RUN(test_draws);
    TEST_RUN(test_weights);
    TEST_RUN(test_weighted_independent);
    TEST_RUN(test_weighted_stratified);
    TEST_RUN(test_weighted_alpha_one);
    TEST_RUN(test_weighted_alpha_zero);
    TEST_RUN(test_weighted_stratified_counts);
    TEST_RUN(test_weighted_same_seed_same_indices);
    TEST_RUN(test_weighted_matches_linear_scan);
    TEST_RUN(test_weighted_empty_and_args);
    TEST_RUN(test_weighted_wide_range);
    TEST_RUN(test_uniform);
    TEST_RUN(test_topk);
    TEST_RUN(test_scatter);
    return test_main_result();
}
