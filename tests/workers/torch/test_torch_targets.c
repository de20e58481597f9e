/* tests/workers/torch/test_torch_targets.c: GAE and n-step targets against values computed by hand
 * (next-step-reset chunks: terminated vs truncated bootstrapping, reset steps, chunk ends);
 * V-trace against IMPALA's definition as a sum, and against GAE on-policy; the valid steps'
 * rows. */
#include "test.h"
#include "workers/torch/bridge.h"
#include "workers/torch/targets.h"

#include <math.h>
#include <string.h>

/* One chunk, T = 6: episode 1 terminates at step 1 (step 2 is its reset step); episode 2 is
 * truncated at step 4 (step 5 is its reset step). obs[2] and obs[5] are final observations. */
static const float R[6] = {1, 2, 0, 3, 4, 5};
static const uint8_t TERM[6] = {0, 1, 0, 0, 0, 0};
static const uint8_t TRUNC[6] = {0, 0, 0, 0, 1, 0};
static const uint8_t VALID[6] = {1, 1, 0, 1, 1, 0};

static void test_gae_episode_ends(void)
{
    const float V[7] = {0.5f, 1.0f, 7.0f, 2.0f, 2.5f, 9.0f, 4.0f};
    float adv[6], ret[6];
    gb_torch_gae(1, 6, R, V, TERM, TRUNC, VALID, 0.9, 0.8, adv, ret);
    /* by hand, gamma 0.9, lambda 0.8 (gamma lambda = 0.72):
     * t=4 truncated: 4 + 0.9*9.0 - 2.5 = 9.6 (bootstraps from the final observation)
     * t=3: delta 3 + 0.9*2.5 - 2 = 3.25; 3.25 + 0.72*9.6 = 10.162
     * t=1 terminated: 2 - 1 = 1; t=0: delta 1 + 0.9*1 - 0.5 = 1.4; 1.4 + 0.72*1 = 2.12 */
    const float want_adv[6] = {2.12f, 1.0f, 0.0f, 10.162f, 9.6f, 0.0f};
    const float want_ret[6] = {2.62f, 2.0f, 7.0f, 12.162f, 12.1f, 9.0f};
    for (int t = 0; t < 6; t++) {
        CHECK_NEAR(adv[t], want_adv[t], 1e-5);
        CHECK_NEAR(ret[t], want_ret[t], 1e-5);
    }
    /* the same step terminated instead of truncated does not bootstrap: 4 - 2.5 */
    uint8_t term2[6] = {0, 1, 0, 0, 1, 0}, trunc2[6] = {0};
    gb_torch_gae(1, 6, R, V, term2, trunc2, VALID, 0.9, 0.8, adv, ret);
    CHECK_NEAR(adv[4], 1.5, 1e-6);
    CHECK_NEAR(adv[3], 3.25 + 0.72 * 1.5, 1e-5);
}

static void test_gae_chunk_end_and_batch(void)
{
    /* two chunks of T = 2; the second has no episode end: bootstraps from V(obs[T]) */
    const float r[4] = {1, 2, 1, 1};
    const float v[6] = {0, 0, 0, /* chunk 1 */ 0, 0, 10};
    const uint8_t term[4] = {0, 1, 0, 0}, trunc[4] = {0};
    float adv[4], ret[4];
    gb_torch_gae(2, 2, r, v, term, trunc, NULL, 0.9, 0.8, adv, ret);
    CHECK_NEAR(adv[1], 2.0, 1e-6);
    CHECK_NEAR(adv[0], 1.0 + 0.72 * 2.0, 1e-6);
    CHECK_NEAR(adv[3], 1.0 + 9.0, 1e-5);
    CHECK_NEAR(adv[2], 1.0 + 0.72 * 10.0, 1e-5);
    /* lambda = 1, no ends: the discounted return minus V */
    gb_torch_gae(2, 2, r, v, (const uint8_t[]){0, 0, 0, 0}, trunc, NULL, 0.5, 1.0, adv, ret);
    CHECK_NEAR(ret[0], 1 + 0.5 * 2 + 0.25 * 0, 1e-6);
    CHECK_NEAR(ret[2], 1 + 0.5 * 1 + 0.25 * 10, 1e-6);
}

static void test_nstep_episode_ends(void)
{
    float g[6], d[6];
    int64_t boot[6];
    gb_torch_nstep(1, 6, 3, 0.5, R, TERM, TRUNC, VALID, g, d, boot);
    /* t=0: 1 + 0.5*2, stops at the terminal step 1: no bootstrap */
    CHECK_NEAR(g[0], 2.0, 1e-6);
    CHECK_NEAR(d[0], 0.0, 0);
    CHECK_EQ_INT(boot[0], 2);
    CHECK_NEAR(g[1], 2.0, 1e-6);
    CHECK_NEAR(d[1], 0.0, 0);
    /* reset step */
    CHECK_NEAR(g[2], 0.0, 0);
    CHECK_NEAR(d[2], 0.0, 0);
    /* t=3: 3 + 0.5*4, stops at the truncated step 4: bootstraps from obs[5] with 0.25 */
    CHECK_NEAR(g[3], 5.0, 1e-6);
    CHECK_NEAR(d[3], 0.25, 1e-7);
    CHECK_EQ_INT(boot[3], 5);
    CHECK_NEAR(g[4], 4.0, 1e-6);
    CHECK_NEAR(d[4], 0.5, 1e-7);
    CHECK_EQ_INT(boot[4], 5);
    CHECK_NEAR(d[5], 0.0, 0);
}

static void test_nstep_chunk_end(void)
{
    const float r[4] = {1, 1, 1, 1};
    const uint8_t z[4] = {0};
    float g[4], d[4];
    int64_t boot[4];
    gb_torch_nstep(1, 4, 3, 0.5, r, z, z, NULL, g, d, boot);
    const float wg[4] = {1.75f, 1.75f, 1.5f, 1.0f}, wd[4] = {0.125f, 0.125f, 0.25f, 0.5f};
    const int64_t wb[4] = {3, 4, 4, 4};
    for (int t = 0; t < 4; t++) {
        CHECK_NEAR(g[t], wg[t], 1e-6);
        CHECK_NEAR(d[t], wd[t], 1e-7);
        CHECK_EQ_INT(boot[t], wb[t]);
    }
    /* n = 1 is the one-step target */
    gb_torch_nstep(1, 4, 1, 0.99, r, z, z, NULL, g, d, boot);
    CHECK_NEAR(g[2], 1.0, 0);
    CHECK_NEAR(d[2], 0.99, 1e-6);
    CHECK_EQ_INT(boot[2], 3);
}

/* Two chunks of T = 3, the first's step 1 and the second's step 0 reset steps: the valid steps'
 * step indices, observation rows (4 a chunk) and bootstrap rows, written out. */
static void test_valid_rows(void)
{
    const uint8_t valid[6] = {1, 0, 1, 0, 1, 1};
    const int64_t boot[6] = {1, 1, 3, 0, 3, 3};
    int64_t step[6], row[6], brow[6];
    CHECK_EQ_INT(gb_torch_valid_rows(2, 3, valid, boot, step, row, brow), 4);
    const int64_t ws[4] = {0, 2, 4, 5}, wr[4] = {0, 2, 5, 6}, wb[4] = {1, 3, 7, 7};
    for (int k = 0; k < 4; k++) {
        CHECK_EQ_INT(step[k], ws[k]);
        CHECK_EQ_INT(row[k], wr[k]);
        CHECK_EQ_INT(brow[k], wb[k]);
    }
    /* every step valid, no bootstrap rows */
    CHECK_EQ_INT(gb_torch_valid_rows(2, 3, NULL, NULL, step, row, NULL), 6);
    CHECK_EQ_INT(step[5], 5);
    CHECK_EQ_INT(row[3], 4);
}

/* IMPALA's definition, directly: vs_s = V(x_s) + sum_{t=s}^{e} gamma^(t-s) (prod_{i=s}^{t-1}
 * c_i) delta_t, e the last step of s's episode inside the chunk; adv_s = rho_s (r_s + gamma
 * vs_{s+1} - V(x_s)) with vs_{s+1} = V(x_{s+1}) past e (0 after a terminated step). */
static void vtrace_by_sum(int T, const float *r, const float *v, const uint8_t *term,
                          const uint8_t *trunc, const uint8_t *ok, const float *lr, double g,
                          double lambda, double rb, double cb, double *vs, double *adv)
{
    for (int s = 0; s < T; s++) {
        if (!ok[s]) {
            vs[s] = v[s];
            adv[s] = 0;
            continue;
        }
        double sum = 0, w = 1;
        for (int t = s; t < T; t++) {
            double ratio = exp(lr[t]);
            double rho = fmin(rb, ratio), c = lambda * fmin(cb, ratio);
            double nv = term[t] ? 0.0 : v[t + 1];
            sum += w * rho * (r[t] + g * nv - v[t]);
            if (term[t] || trunc[t])
                break;
            w *= g * c;
        }
        vs[s] = v[s] + sum;
    }
    for (int s = 0; s < T; s++) {
        if (!ok[s])
            continue;
        double rho = fmin(rb, exp(lr[s]));
        double next = term[s] ? 0.0 : (trunc[s] || s == T - 1) ? v[s + 1] : vs[s + 1];
        adv[s] = rho * (r[s] + g * next - v[s]);
    }
}

static void test_vtrace(void)
{
    enum { NB = 3, NT = 9 };
    float r[NB * NT], v[NB * (NT + 1)], lr[NB * NT], vs[NB * NT], adv[NB * NT];
    uint8_t term[NB * NT] = {0}, trunc[NB * NT] = {0}, ok[NB * NT];
    memset(ok, 1, sizeof ok);
    unsigned s = 7;
    for (int i = 0; i < NB * (NT + 1); i++) {
        s = s * 1103515245u + 12345u;
        v[i] = (float)((s >> 8) % 1000) / 250.0f - 2.0f;
    }
    for (int i = 0; i < NB * NT; i++) {
        s = s * 1103515245u + 12345u;
        r[i] = (float)((s >> 8) % 1000) / 500.0f - 1.0f;
        s = s * 1103515245u + 12345u;
        lr[i] = (float)((s >> 8) % 1000) / 500.0f - 1.0f; /* ratios e^-1 .. e^1 */
    }
    term[0 * NT + 2] = 1, ok[0 * NT + 3] = 0;   /* an episode terminates mid-chunk */
    trunc[1 * NT + 5] = 1, ok[1 * NT + 6] = 0;  /* one is truncated */
    ok[2 * NT + 0] = 0;                          /* a chunk starting with a reset row */
    const double g = 0.95, lambda = 0.9, rb = 1.0, cb = 0.8;
    gb_torch_vtrace(NB, NT, r, v, term, trunc, ok, lr, g, lambda, rb, cb, vs, adv);
    for (int b = 0; b < NB; b++) {
        double want_vs[NT], want_adv[NT];
        vtrace_by_sum(NT, r + b * NT, v + b * (NT + 1), term + b * NT, trunc + b * NT,
                      ok + b * NT, lr + b * NT, g, lambda, rb, cb, want_vs, want_adv);
        for (int t = 0; t < NT; t++) {
            CHECK_NEAR(vs[b * NT + t], want_vs[t], 1e-5);
            CHECK_NEAR(adv[b * NT + t], want_adv[t], 1e-5);
        }
    }
    /* on-policy (every ratio 1): the value targets are GAE(lambda)'s returns */
    float zero[NB * NT] = {0}, gadv[NB * NT], gret[NB * NT];
    gb_torch_vtrace(NB, NT, r, v, term, trunc, ok, zero, g, lambda, 1.0, 1.0, vs, adv);
    gb_torch_gae(NB, NT, r, v, term, trunc, ok, g, lambda, gadv, gret);
    for (int i = 0; i < NB * NT; i++)
        CHECK_NEAR(vs[i], gret[i], 1e-5);
}

int main(void)
{
    TEST_RUN(test_gae_episode_ends);
    TEST_RUN(test_gae_chunk_end_and_batch);
    TEST_RUN(test_nstep_episode_ends);
    TEST_RUN(test_nstep_chunk_end);
    TEST_RUN(test_valid_rows);
    TEST_RUN(test_vtrace);
    return test_main_result();
}
