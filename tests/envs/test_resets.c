/* tests/envs/test_resets.c: the built-ins' start-state distributions against Gymnasium's
 * documented ranges (CartPole: every state variable U(-0.05, 0.05); Acrobot: U(-0.1, 0.1);
 * MountainCar and MountainCarContinuous: position U(-0.6, -0.4), velocity 0; Pendulum: theta
 * U(-pi, pi), theta_dot U(-1, 1)): every draw inside the range, mean and variance within
 * 5 standard errors of the uniform's, and a chi-square test over 20 bins (p = 1e-4). Also:
 * the same seed gives the same start states, another seed different ones. */
#include "envs/builtin.h"
#include "envs/host.h"
#include "test.h"

#include <math.h>
#include <string.h>

#define N 20000
#define BINS 20
#define CHI2_CRIT 43.82 /* chi-square, 19 degrees of freedom, p = 1e-4 */

/* Checks N draws x[] against U(lo, hi); name says which variable. */
static void check_uniform(const char *name, const double *x, double lo, double hi)
{
    double mean = 0, var = 0;
    int counts[BINS] = {0}, outside = 0;
    for (int i = 0; i < N; i++) {
        if (x[i] < lo || x[i] > hi)
            outside++;
        mean += x[i];
        int b = (int)((x[i] - lo) / (hi - lo) * BINS);
        counts[b < 0 ? 0 : (b >= BINS ? BINS - 1 : b)]++;
    }
    mean /= N;
    for (int i = 0; i < N; i++)
        var += (x[i] - mean) * (x[i] - mean);
    var /= N - 1;
    double w = hi - lo, mu = (lo + hi) / 2, sigma2 = w * w / 12;
    double se_mean = sqrt(sigma2 / N), se_var = sqrt(w * w * w * w / 180.0 / N);
    double chi2 = 0, expect = (double)N / BINS;
    for (int b = 0; b < BINS; b++)
        chi2 += (counts[b] - expect) * (counts[b] - expect) / expect;
    CHECK_MSG(outside == 0, "%s: %d of %d draws outside [%g, %g]", name, outside, N, lo, hi);
    CHECK_MSG(fabs(mean - mu) < 5 * se_mean, "%s: mean %g, expected %g +- %g", name, mean, mu,
              5 * se_mean);
    CHECK_MSG(fabs(var - sigma2) < 5 * se_var, "%s: variance %g, expected %g +- %g", name, var,
              sigma2, 5 * se_var);
    CHECK_MSG(chi2 < CHI2_CRIT, "%s: chi-square %g over %d bins (critical %g)", name, chi2, BINS,
              CHI2_CRIT);
    fprintf(stderr, "  %-28s mean %+.5f (expected %+.5f) var %.3g (%.3g) chi2 %.1f\n", name, mean,
            mu, var, sigma2, chi2);
}

/* Resets one copy N times and returns the observations (obs_dim floats each). */
static float *draw_resets(const char *env_name, uint64_t seed, int *obs_dim)
{
    const gb_env_interface *iface = gb_env_builtin_find(env_name);
    gb_error err = {0};
    void *env = NULL;
    gb_env_spec spec;
    CHECK_OK(gb_env_create(iface, NULL, seed, &env, &spec, &err));
    if (!env)
        return NULL;
    *obs_dim = (int)spec.obs.shape[0];
    float *obs = malloc(sizeof(float) * (size_t)N * (size_t)*obs_dim);
    uint8_t acting;
    for (int i = 0; i < N; i++) {
        gb_env_buffers b = {NULL, obs + (size_t)i * (size_t)*obs_dim, NULL, NULL, NULL, &acting};
        CHECK_EQ_INT(iface->reset(env, &b), 0);
    }
    iface->destroy(env);
    return obs;
}

static double xs[N];

static void test_cartpole(void)
{
    int d;
    float *o = draw_resets("CartPole-v1", 11, &d);
    static const char *names[4] = {"CartPole x", "CartPole x_dot", "CartPole theta",
                                   "CartPole theta_dot"};
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < N; i++)
            xs[i] = o[i * d + k];
        check_uniform(names[k], xs, -0.05, 0.05);
    }
    free(o);
}

static void test_acrobot(void)
{
    int d;
    float *o = draw_resets("Acrobot-v1", 12, &d);
    for (int i = 0; i < N; i++)
        xs[i] = atan2(o[i * d + 1], o[i * d + 0]);
    check_uniform("Acrobot theta1", xs, -0.1 - 1e-6, 0.1 + 1e-6); /* float32 cos/sin */
    for (int i = 0; i < N; i++)
        xs[i] = atan2(o[i * d + 3], o[i * d + 2]);
    check_uniform("Acrobot theta2", xs, -0.1 - 1e-6, 0.1 + 1e-6);
    for (int i = 0; i < N; i++)
        xs[i] = o[i * d + 4];
    check_uniform("Acrobot dtheta1", xs, -0.1, 0.1);
    for (int i = 0; i < N; i++)
        xs[i] = o[i * d + 5];
    check_uniform("Acrobot dtheta2", xs, -0.1, 0.1);
    free(o);
}

static void test_mountain_cars(void)
{
    const char *names[2] = {"MountainCar-v0", "MountainCarContinuous-v0"};
    for (int e = 0; e < 2; e++) {
        int d, zero = 1;
        float *o = draw_resets(names[e], 13 + (uint64_t)e, &d);
        for (int i = 0; i < N; i++) {
            xs[i] = o[i * d];
            zero &= o[i * d + 1] == 0.0f;
        }
        CHECK_MSG(zero, "%s: start velocity must be 0", names[e]);
        check_uniform(e ? "MountainCarContinuous pos" : "MountainCar position", xs, -0.6, -0.4);
        free(o);
    }
}

static void test_pendulum(void)
{
    int d;
    float *o = draw_resets("Pendulum-v1", 15, &d);
    for (int i = 0; i < N; i++)
        xs[i] = atan2(o[i * d + 1], o[i * d + 0]);
    check_uniform("Pendulum theta", xs, -M_PI - 1e-6, M_PI + 1e-6);
    for (int i = 0; i < N; i++)
        xs[i] = o[i * d + 2];
    check_uniform("Pendulum theta_dot", xs, -1, 1);
    free(o);
}

static void test_seeding(void)
{
    int n;
    const gb_env_interface *const *all = gb_env_builtins(&n);
    for (int e = 0; e < n; e++) {
        const gb_env_interface *iface = all[e];
        gb_error err = {0};
        void *env[3] = {0};
        gb_env_spec spec;
        uint64_t seeds[3] = {5, 5, 6};
        for (int c = 0; c < 3; c++)
            CHECK_OK(gb_env_create(iface, NULL, seeds[c], &env[c], &spec, &err));
        size_t bytes = gb_env_obs_bytes(&spec) * (size_t)spec.agents;
        uint8_t *obs[3], acting[64];
        for (int c = 0; c < 3; c++) {
            obs[c] = calloc(1, bytes);
            gb_env_buffers b = {NULL, obs[c], NULL, NULL, NULL, acting};
            CHECK_EQ_INT(iface->reset(env[c], &b), 0);
            iface->destroy(env[c]);
        }
        CHECK_MSG(memcmp(obs[0], obs[1], bytes) == 0, "%s: same seed, different start",
                  iface->name);
        /* an Atari game starts on the same screen whatever the seed, in ale-py too: the seed
         * drives the sticky actions (and env.wrappers.noop_max the no-ops) */
        CHECK_MSG(memcmp(obs[0], obs[2], bytes) != 0 || strcmp(iface->name, "atari") == 0,
                  "%s: seeds 5 and 6 give the same start", iface->name);
        for (int c = 0; c < 3; c++)
            free(obs[c]);
    }
}

int main(void)
{
    TEST_RUN(test_cartpole);
    TEST_RUN(test_acrobot);
    TEST_RUN(test_mountain_cars);
    TEST_RUN(test_pendulum);
    TEST_RUN(test_seeding);
    return test_main_result();
}
