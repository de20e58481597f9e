/* tests/replay/test_replay_weighted.c: the weighted and uniform selectors' distributions
 * (chi-square over many draws, against priority^alpha / sum), importance weights, the sum tree
 * against a naive prefix scan, and zero priorities. */
#include "replay/replay.h"
#include "replay/sumtree.h"
#include "test.h"
#include "util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Upper tail bound: chi-square with k degrees of freedom exceeds k + 5 sqrt(2k) + 10 with
 * probability far below 1e-6 (Wilson-Hilferty), so the test is not flaky. */
static double chi2_limit(int dof) { return dof + 5.0 * sqrt(2.0 * dof) + 10.0; }

static void distribution(int selector, double alpha, uint64_t seed)
{
    gb_error err = {0};
    enum { N = 50, DRAWS = 200000, BATCH = 250 };
    gb_replay_options o;
    util_options(&o, 64, 1);
    o.selector = selector;
    o.alpha = alpha;
    o.seed = seed;
    gb_replay *r;
    CHECK_OK(gb_replay_create(&o, &r, &err));
    double pr[N], w[N], total = 0;
    int64_t idx_of[N];
    for (int k = 0; k < N; k++) {
        pr[k] = k % 7 == 3 ? 0.0 : 0.1 + (double)((k * 37) % 23); /* some zeros */
        int64_t i;
        CHECK_OK(gb_replay_allocate(r, 1, &i, 0, &err));
        CHECK_OK(gb_replay_commit(r, 1, &i, &pr[k], NULL, NULL, &err));
        idx_of[k] = i;
        /* alpha 0 is uniform over every item, zero priorities included (p^0 = 1). */
        w[k] =
            selector == GB_SELECTOR_WEIGHTED && alpha > 0 ? (pr[k] > 0 ? pow(pr[k], alpha) : 0) : 1;
        total += w[k];
    }
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, BATCH, &err));
    static int64_t count[64];
    memset(count, 0, sizeof count);
    gb_replay_request q = gb_replay_request_default(BATCH);
    int probs_ok = 1;
    for (int d = 0; d < DRAWS / BATCH; d++) {
        CHECK_OK(gb_replay_sample(r, &q, &s, &err));
        for (int k = 0; k < s.n; k++) {
            count[s.index[k]]++;
            int item = -1;
            for (int j = 0; j < N; j++)
                if (idx_of[j] == s.index[k])
                    item = j;
            if (item < 0 || fabs(s.prob[k] - w[item] / total) > 1e-12)
                probs_ok = 0;
        }
        gb_replay_release(r, &s);
    }
    CHECK(probs_ok);
    double chi2 = 0;
    int dof = -1;
    for (int j = 0; j < N; j++) {
        double expect = (double)DRAWS * w[j] / total;
        if (expect == 0) {
            CHECK_MSG(count[idx_of[j]] == 0, "zero-weight item %d drawn %lld times", j,
                      (long long)count[idx_of[j]]);
            continue;
        }
        chi2 += (count[idx_of[j]] - expect) * (count[idx_of[j]] - expect) / expect;
        dof++;
    }
    fprintf(stderr, "  selector %d alpha %.2f: chi2 %.1f with %d dof (limit %.1f)\n", selector,
            alpha, chi2, dof, chi2_limit(dof));
    CHECK(chi2 < chi2_limit(dof));

    /* After priority updates the distribution follows the new priorities. */
    if (selector == GB_SELECTOR_WEIGHTED && alpha > 0) {
        double np[N];
        total = 0;
        for (int k = 0; k < N; k++) {
            np[k] = k < 5 ? 10.0 : 0.0;
            w[k] = k < 5 ? pow(10.0, alpha) : 0;
            total += w[k];
        }
        CHECK_OK(gb_replay_update_priorities(r, N, idx_of, NULL, np, NULL, &err));
        CHECK_OK(gb_replay_sample(r, &q, &s, &err));
        int inside = 1;
        for (int k = 0; k < s.n; k++)
            inside &= s.index[k] == idx_of[0] || s.index[k] == idx_of[1] ||
                      s.index[k] == idx_of[2] || s.index[k] == idx_of[3] ||
                      s.index[k] == idx_of[4];
        CHECK(inside);
        CHECK_NEAR(s.prob[0], 0.2, 1e-12);
        gb_replay_release(r, &s);
    }
    gb_replay_selection_free(&s);
    gb_replay_free(r);
}

static void test_distributions(void)
{
    distribution(GB_SELECTOR_WEIGHTED, 0.6, 1);
    distribution(GB_SELECTOR_WEIGHTED, 1.0, 2);
    distribution(GB_SELECTOR_WEIGHTED, 0.0, 3);
    distribution(GB_SELECTOR_UNIFORM, 0.6, 4);
}

static void test_importance_weights(void)
{
    gb_error err = {0};
    gb_replay_options o;
    util_options(&o, 8, 1);
    o.selector = GB_SELECTOR_WEIGHTED;
    o.alpha = 1.0;
    o.beta = 0.5;
    gb_replay *r;
    CHECK_OK(gb_replay_create(&o, &r, &err));
    double pr[4] = {1, 2, 3, 4};
    for (int k = 0; k < 4; k++) {
        int64_t i;
        CHECK_OK(gb_replay_allocate(r, 1, &i, 0, &err));
        CHECK_OK(gb_replay_commit(r, 1, &i, &pr[k], NULL, NULL, &err));
    }
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, 64, &err));
    gb_replay_request q = gb_replay_request_default(64);
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    /* w = (N p)^-beta / max: reference from the probabilities. */
    double max = 0;
    for (int k = 0; k < s.n; k++)
        max = fmax(max, pow(4 * s.prob[k], -0.5));
    for (int k = 0; k < s.n; k++) {
        CHECK_NEAR(s.prob[k], pr[s.index[k]] / 10.0, 1e-12);
        CHECK_NEAR(s.weight[k], pow(4 * s.prob[k], -0.5) / max, 1e-6);
    }
    gb_replay_release(r, &s);
    /* beta changes at run time; beta 0 gives all ones. */
    gb_replay_set_beta(r, 0);
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    for (int k = 0; k < s.n; k++)
        CHECK(s.weight[k] == 1.0f);
    gb_replay_release(r, &s);
    float wts[3];
    double probs[3] = {0.5, 0.25, 0.25};
    gb_replay_importance_weights(probs, 3, 4, 1.0, wts);
    CHECK_NEAR(wts[0], 0.5, 1e-7);
    CHECK_NEAR(wts[1], 1.0, 1e-7);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
}

/* The sum tree against a naive prefix scan: every draw must land on the leaf whose prefix
 * interval holds the uniform value (checked through the returned leaf's bounds). */
static void test_sumtree(void)
{
    gb_error err = {0};
    const int64_t sizes[] = {1, 7, 8, 9, 64, 65, 1000, 4099};
    for (int s = 0; s < 8; s++) {
        int64_t n = sizes[s];
        gb_sumtree t;
        CHECK_OK(gb_sumtree_init(&t, n, &err));
        gb_rng rng;
        gb_rng_seed(&rng, (uint64_t)n);
        double *w = calloc((size_t)n, sizeof *w);
        for (int round = 0; round < 3; round++) {
            for (int64_t i = 0; i < n; i++) {
                w[i] = gb_rng_below(&rng, 4) == 0 ? 0 : gb_rng_uniform(&rng);
                gb_sumtree_set(&t, i, w[i]);
            }
            w[n - 1] = 0.5; /* at least one positive */
            gb_sumtree_set(&t, n - 1, 0.5);
            double total = 0;
            for (int64_t i = 0; i < n; i++)
                total += w[i];
            CHECK_NEAR(gb_sumtree_total(&t), total, 1e-9 * total);
            int64_t idx[100], scratch[200];
            gb_rng copy = rng;
            gb_sumtree_draw(&t, 100, &rng, idx, scratch);
            for (int k = 0; k < 100; k++) {
                double u = gb_rng_uniform(&copy) * gb_sumtree_total(&t);
                double lo = 0;
                int64_t want = -1;
                for (int64_t i = 0; i < n; i++) {
                    if (w[i] > 0 && u < lo + w[i]) {
                        want = i;
                        break;
                    }
                    lo += w[i];
                }
                CHECK(idx[k] >= 0 && idx[k] < n && w[idx[k]] > 0);
                /* Rounding may move a draw that sits within 1e-9 of a boundary to a neighbour. */
                if (idx[k] != want && want >= 0) {
                    double b = 0;
                    for (int64_t i = 0; i < (idx[k] < want ? want : idx[k]); i++)
                        b += w[i];
                    CHECK_MSG(fabs(u - b) < 1e-9 * total, "n %lld draw %d leaf %lld want %lld",
                              (long long)n, k, (long long)idx[k], (long long)want);
                }
            }
        }
        free(w);
        gb_sumtree_free(&t);
    }
}

int main(void)
{
    TEST_RUN(test_sumtree);
    TEST_RUN(test_distributions);
    TEST_RUN(test_importance_weights);
    return test_main_result();
}
