/* tests/workers/roles/test_acting_noise.c: actors.noise_correlation. The acting step's exploration
 * noise (workers/roles/acting.h) is N(0, 1) at every step with the configured correlation from one
 * step to the next, is drawn anew where an episode ends (Pendulum's copies all end at step 200),
 * and is absent for 0 or discrete actions; the model acts with the noise it is given
 * (gb_torch_model_act_noise): the same noise gives the same actions, zero noise the mean action,
 * for SAC's squashed Gaussian and PPO's Gaussian. */
#include "test.h"
#include "tests/workers/config_text.h"
#include "workers/torch_test_util.h"

#include "envs/env.h"
#include "workers/roles/acting.h"
#include "workers/torch/bridge.h"
#include "workers/roles/worker.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static gb_config cfg;

static int load(const char *text)
{
    return config_text(&cfg, text);
}

static gb_acting *make(int copies)
{
    gb_error err = {0};
    gb_acting *a = NULL;
    gb_acting_opts o = {.cfg = &cfg, .copies = copies, .splits = 2, .seed = 9};
    CHECK_OK(gb_acting_create(&o, &a, &err));
    return a;
}

/* Steps every group with action 0 for steps steps, keeping each row's noise at every step:
 * noise[t][row] (the action has one dimension). */
static void run(gb_acting *a, int copies, int steps, float *noise)
{
    gb_error err = {0};
    float action[512], logp[512];
    memset(action, 0, sizeof action);
    memset(logp, 0, sizeof logp);
    for (int t = 0; t < steps; t++)
        for (int g = 0; g < 2; g++) {
            int64_t rows;
            gb_acting_obs(a, g, &rows);
            const float *e = gb_acting_noise(a, g);
            memcpy(noise + (size_t)t * copies + (size_t)g * rows, e, (size_t)rows * sizeof *e);
            CHECK_OK(gb_acting_step(a, g, action, (size_t)rows * sizeof(float), logp,
                                    (size_t)rows * sizeof(float), 1, &err));
            gb_chunk c;
            while (gb_acting_take(a, &c))
                gb_chunk_release(c.block);
        }
}

/* The correlation between step t and step t+1 over every row, for t in [from, to). */
static double lag1(const float *noise, int copies, int from, int to)
{
    double sxy = 0, sxx = 0, syy = 0;
    for (int t = from; t < to; t++)
        for (int r = 0; r < copies; r++) {
            double x = noise[(size_t)t * copies + r], y = noise[(size_t)(t + 1) * copies + r];
            sxy += x * y;
            sxx += x * x;
            syy += y * y;
        }
    return sxy / sqrt(sxx * syy);
}

static void test_ar1_noise(void)
{
    enum { K = 256, STEPS = 400 };
    CHECK(load("experiment: {name: t}\nenv: {name: Pendulum-v1}\n"
               "actors: {chunk_len: 8, noise_correlation: 0.9}\n"
               "trainer: {algorithm: {name: sac}}\n") == 0);
    gb_acting *a = make(K);
    if (!a)
        return;
    float *noise = malloc(sizeof(float) * K * STEPS);
    run(a, K, STEPS, noise);
    double s = 0, ss = 0;
    for (int i = 0; i < K * STEPS; i++) {
        s += noise[i];
        ss += (double)noise[i] * noise[i];
    }
    const double n = (double)K * STEPS, mean = s / n, var = ss / n - mean * mean;
    /* Pendulum's episodes last 200 steps: every copy ends at step 199 (its 200th) */
    double within = lag1(noise, K, 0, 198), across = lag1(noise, K, 199, 200);
    fprintf(stderr, "  mean %.4f, variance %.4f, lag-1 correlation %.4f within episodes, "
            "%.4f across an episode end\n", mean, var, within, across);
    CHECK(fabs(mean) < 0.05);
    CHECK(fabs(var - 1.0) < 0.05);
    CHECK(fabs(within - 0.9) < 0.01);
    CHECK(fabs(across) < 0.15); /* 256 independent pairs */
    CHECK(fabs(lag1(noise, K, 201, 398) - 0.9) < 0.01);
    free(noise);
    gb_acting_destroy(a);
}

static void test_no_noise(void)
{
    /* 0: the policy draws its own */
    CHECK(load("experiment: {name: t}\nenv: {name: Pendulum-v1}\n"
               "trainer: {algorithm: {name: sac}}\n") == 0);
    gb_acting *a = make(4);
    if (a)
        CHECK(gb_acting_noise(a, 0) == NULL);
    gb_acting_destroy(a);
    /* discrete actions have none */
    CHECK(load("experiment: {name: t}\nenv: {name: CartPole-v1}\n"
               "actors: {noise_correlation: 0.9}\ntrainer: {algorithm: {name: ppo}}\n") == 0);
    a = make(4);
    if (a)
        CHECK(gb_acting_noise(a, 0) == NULL);
    gb_acting_destroy(a);
}

/* SAC and PPO on a box space act with the given noise. */
static void check_model(const char *algo)
{
    gb_error err = {0};
    gb_config c;
    CHECK(make_cfg(&c, algo, "") == 0);
    gb_torch_space sp = box_space();
    gb_torch_model *m = NULL;
    CHECK_OK(gb_torch_model_create(&c, &sp, 4, &m, &err));
    if (!m)
        return;
    enum { N = 16 };
    float obs[N * 3], noise[N * 2], zero[N * 2] = {0}, a1[N * 2], a2[N * 2], a3[N * 2], mean[N * 2];
    float lp1[N], lp2[N];
    fill(obs, N * 3, 1);
    fill(noise, N * 2, 2);
    gb_torch_act_out o1 = {.action = a1, .logp = lp1}, o2 = {.action = a2, .logp = lp2};
    gb_torch_act_out o3 = {.action = a3}, om = {.action = mean};
    CHECK_OK(gb_torch_model_act_noise(m, obs, N, 0, 0.0, noise, &o1, &err));
    CHECK_OK(gb_torch_model_act_noise(m, obs, N, 0, 0.0, noise, &o2, &err));
    CHECK(memcmp(a1, a2, sizeof a1) == 0 && memcmp(lp1, lp2, sizeof lp1) == 0);
    CHECK_OK(gb_torch_model_act_noise(m, obs, N, 0, 0.0, zero, &o3, &err));
    CHECK_OK(gb_torch_model_act(m, obs, N, 1, 0.0, &om, &err));
    int same = 1, moved = 0;
    for (int i = 0; i < N * 2; i++) {
        same &= fabsf(a3[i] - mean[i]) <= 1e-6f;
        moved |= fabsf(a1[i] - mean[i]) > 1e-3f;
    }
    CHECK_MSG(same, "%s: zero noise is not the mean action", algo);
    CHECK_MSG(moved, "%s: the noise did not move the actions", algo);
    gb_torch_model_destroy(m);
}

static void test_model_noise_sac(void) { check_model("sac"); }
static void test_model_noise_ppo(void) { check_model("ppo"); }

int main(void)
{
    TEST_RUN(test_ar1_noise);
    TEST_RUN(test_no_noise);
    TEST_RUN(test_model_noise_sac);
    TEST_RUN(test_model_noise_ppo);
    return test_main_result();
}
