/* tests/runtime/base/test_rng.c: the PRNG is reproducible, streams differ by (role, index), the
 * bounded integer sampler passes a chi-square test, floats and normals have the right moments. */
#include "runtime/base/rng.h"
#include "test.h"

#include <string.h>

static void test_same_seed_same_stream(void)
{
    gb_rng a, b;
    gb_rng_seed_for(&a, 42, "actor", 3);
    gb_rng_seed_for(&b, 42, "actor", 3);
    int same = 1;
    for (int i = 0; i < 10000; i++)
        same &= gb_rng_next(&a) == gb_rng_next(&b);
    CHECK(same);
    gb_rng_seed(&a, 0);
    gb_rng_seed(&b, 0);
    CHECK(gb_rng_next(&a) == gb_rng_next(&b));
    CHECK(gb_rng_next(&a) != 0 || gb_rng_next(&a) != 0); /* seed 0 is not a dead state */
}

static int count_equal(gb_rng *a, gb_rng *b, int n)
{
    int eq = 0;
    for (int i = 0; i < n; i++)
        eq += gb_rng_next(a) == gb_rng_next(b);
    return eq;
}

static void test_streams_differ(void)
{
    const char *roles[] = {"actor", "policy", "trainer", "env"};
    gb_rng r[4 * 8];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++)
            gb_rng_seed_for(&r[i * 8 + j], 7, roles[i], (uint64_t)j);
    uint64_t first[32];
    for (int i = 0; i < 32; i++)
        first[i] = gb_rng_next(&r[i]);
    int collisions = 0;
    for (int i = 0; i < 32; i++)
        for (int j = i + 1; j < 32; j++)
            collisions += first[i] == first[j];
    CHECK_EQ_INT(collisions, 0);
    gb_rng a, b;
    gb_rng_seed_for(&a, 7, "actor", 0);
    gb_rng_seed_for(&b, 8, "actor", 0);
    CHECK_EQ_INT(count_equal(&a, &b, 1000), 0);
    gb_rng_seed_for(&a, 7, "actor", 0);
    b = a;
    gb_rng_jump(&b);
    CHECK_EQ_INT(count_equal(&a, &b, 1000), 0);
}

/* Chi-square over n buckets; n chosen so that a modulo-based sampler would be visibly biased
 * (n near 2^63 is tested separately for range). */
static void test_below_chi_square(void)
{
    gb_rng rng;
    gb_rng_seed_for(&rng, 1234, "test", 0);
    const int buckets = 37;
    const int draws = 370000;
    long counts[37] = {0};
    for (int i = 0; i < draws; i++)
        counts[gb_rng_below(&rng, buckets)]++;
    double expect = (double)draws / buckets, chi = 0;
    for (int i = 0; i < buckets; i++)
        chi += (counts[i] - expect) * (counts[i] - expect) / expect;
    /* 36 degrees of freedom: the 99.9th percentile is 67.99. */
    CHECK_MSG(chi < 67.99, "chi-square %.2f", chi);

    /* A bound where modulo bias would be large: 3 * 2^62. With x % n, values below 2^62 would
     * come up twice as often as the rest (expected share 1/3, would be 1/2). */
    uint64_t n = 3ULL << 62;
    int low = 0;
    const int m = 200000;
    for (int i = 0; i < m; i++) {
        uint64_t v = gb_rng_below(&rng, n);
        CHECK(v < n);
        low += v < (1ULL << 62);
    }
    CHECK_NEAR((double)low / m, 1.0 / 3.0, 0.01);
    for (int i = 0; i < 1000; i++)
        CHECK(gb_rng_below(&rng, 1) == 0);
}

static void test_floats_and_normals(void)
{
    gb_rng rng;
    gb_rng_seed_for(&rng, 99, "test", 1);
    const int n = 400000;
    double sum = 0, sum2 = 0, fmin = 1, fmax = 0;
    for (int i = 0; i < n; i++) {
        double u = gb_rng_uniform(&rng);
        float f = gb_rng_uniform_f(&rng);
        CHECK(u >= 0.0 && u < 1.0);
        CHECK(f >= 0.0f && f < 1.0f);
        sum += u;
        fmin = u < fmin ? u : fmin;
        fmax = u > fmax ? u : fmax;
    }
    CHECK_NEAR(sum / n, 0.5, 0.003);
    CHECK(fmin < 1e-4 && fmax > 1 - 1e-4);
    sum = 0;
    double sum4 = 0;
    for (int i = 0; i < n; i++) {
        double z = gb_rng_normal(&rng);
        sum += z;
        sum2 += z * z;
        sum4 += z * z * z * z;
    }
    CHECK_NEAR(sum / n, 0.0, 0.01);
    CHECK_NEAR(sum2 / n, 1.0, 0.01);
    CHECK_NEAR(sum4 / n, 3.0, 0.06); /* kurtosis of a normal */
}

/* The seeding rule: same inputs, same seed; any differing input (experiment seed, role, index,
 * purpose) gives another seed. */
static void test_seed_of(void)
{
    const char *roles[] = {"actor", "policy", "trainer"};
    const char *purposes[] = {"envs", "model", "learner", "replay"};
    uint64_t seen[3 * 4 * 4 * 2];
    int n = 0;
    for (int r = 0; r < 3; r++)
        for (int p = 0; p < 4; p++)
            for (uint64_t i = 0; i < 4; i++)
                for (uint64_t s = 1; s <= 2; s++) {
                    uint64_t v = gb_rng_seed_of(s, roles[r], i, purposes[p]);
                    CHECK(v == gb_rng_seed_of(s, roles[r], i, purposes[p]));
                    for (int k = 0; k < n; k++)
                        CHECK(seen[k] != v);
                    seen[n++] = v;
                }
}

int main(void)
{
    TEST_RUN(test_seed_of);
    TEST_RUN(test_same_seed_same_stream);
    TEST_RUN(test_streams_differ);
    TEST_RUN(test_below_chi_square);
    TEST_RUN(test_floats_and_normals);
    return test_main_result();
}
