/* tests/workers/torch/test_sampling.c: the acting distributions in plain loops (workers/torch/
 * sampling.h): categorical draws follow softmax (chi-square over 200k draws) and their
 * log-probabilities are log-softmax's; greedy picks the first largest; a row with a non-finite
 * logit draws uniformly with a non-finite log-probability; epsilon-greedy explores at epsilon
 * (k-1)/k and NaN counts as the largest Q; Gaussian and squashed-Gaussian actions and
 * log-probabilities against the formulas in double and libtorch's squashed_logp. */
#include "test.h"
#include "workers/torch/testing.h"
#include "workers/torch/sampling.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned long long state = 99;

static float uniform01(void)
{
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(state >> 40) / (double)(1ull << 24)); /* [0, 1) */
}

static void test_categorical(void)
{
    enum { N = 200000, K = 3 };
    static float logits[N * K], u[N], logp[N];
    static int64_t a[N];
    const float row[K] = {0.5f, -1.0f, 2.0f};
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < K; j++)
            logits[i * K + j] = row[j];
        u[i] = uniform01();
    }
    gb_sample_categorical(logits, N, K, u, a, logp);
    double z = 0, p[K], count[K] = {0};
    for (int j = 0; j < K; j++)
        z += exp(row[j]);
    for (int j = 0; j < K; j++)
        p[j] = exp(row[j]) / z;
    for (int i = 0; i < N; i++) {
        CHECK(a[i] >= 0 && a[i] < K);
        count[a[i]]++;
        if (i < 1000)
            CHECK(fabs(logp[i] - log(p[a[i]])) < 1e-6);
    }
    double chi2 = 0;
    for (int j = 0; j < K; j++)
        chi2 += (count[j] - N * p[j]) * (count[j] - N * p[j]) / (N * p[j]);
    printf("categorical: frequencies %.4f %.4f %.4f against %.4f %.4f %.4f, chi-square %.2f "
           "(2 dof, 0.1%% critical 13.8)\n", count[0] / N, count[1] / N, count[2] / N, p[0], p[1],
           p[2], chi2);
    CHECK(chi2 < 13.8);

    /* greedy: the argmax, the first of equal ones */
    const float ties[2 * K] = {1.0f, 3.0f, 3.0f, -2.0f, -2.0f, -5.0f};
    int64_t g[2];
    float gl[2];
    gb_sample_categorical(ties, 2, K, NULL, g, gl);
    CHECK(g[0] == 1 && g[1] == 0);
    CHECK(isfinite(gl[0]) && gl[0] < 0);

    /* non-finite rows draw uniformly; NaN or +inf leaves the log-probability non-finite */
    const float bad[3 * K] = {NAN, 0.0f, 1.0f, 0.0f, INFINITY, 1.0f, 0.0f, 1.0f, 2.0f};
    const float ub[3] = {0.1f, 0.9f, 0.5f};
    int64_t b[3];
    float bl[3];
    gb_sample_categorical(bad, 3, K, ub, b, bl);
    CHECK(b[0] == 0 && b[1] == 2); /* floor(u * k), not the logits */
    CHECK(!isfinite(bl[0]) && !isfinite(bl[1]));
    CHECK(isfinite(bl[2]));
}

static void test_epsilon_greedy(void)
{
    enum { N = 100000, K = 4 };
    static float q[N * K], u[2 * N], value[N];
    static int64_t a[N];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < K; j++)
            q[i * K + j] = (float)j == 2 ? 5.0f : (float)j;
        u[2 * i] = uniform01();
        u[2 * i + 1] = uniform01();
    }
    gb_sample_epsilon_greedy(q, N, K, 0.25, u, a, value);
    int other = 0;
    for (int i = 0; i < N; i++) {
        other += a[i] != 2;
        CHECK(value[i] == 5.0f);
    }
    double expect = 0.25 * (K - 1) / K, sd = sqrt(expect * (1 - expect) / N);
    printf("epsilon-greedy 0.25 over %d actions: %.4f non-greedy, expected %.4f (sd %.4f)\n", K,
           (double)other / N, expect, sd);
    CHECK(fabs((double)other / N - expect) < 5 * sd);
    const float withnan[K] = {1.0f, NAN, 7.0f, 2.0f};
    int64_t one;
    float v;
    gb_sample_epsilon_greedy(withnan, 1, K, 0.0, NULL, &one, &v);
    CHECK(one == 1 && isnan(v));
}

static void test_gaussians(void)
{
    enum { N = 64, D = 2 };
    float mean[N * D], ls[N * D], noise[N * D], x[N * D], lp[N], act[N * D], slp[N];
    const float scale[D] = {2.0f, 0.5f}, bias[D] = {0.0f, 1.0f};
    for (int i = 0; i < N * D; i++) {
        mean[i] = uniform01() * 4 - 2;
        ls[i] = uniform01() * 2 - 1.5f;
        noise[i] = uniform01() * 6 - 3;
    }
    gb_sample_gaussian(mean, ls, N, D, noise, x, lp);
    gb_sample_squashed(mean, ls, N, D, noise, scale, bias, act, slp);
    double worst = 0, worst_s = 0;
    for (int i = 0; i < N; i++) {
        double ref = 0, sref = 0;
        for (int j = 0; j < D; j++) {
            int e = i * D + j;
            double s = exp((double)ls[e]), u = mean[e] + s * noise[e];
            CHECK(fabs(x[e] - u) <= 1e-5 * (1 + fabs(u)));
            double g = -0.5 * noise[e] * noise[e] - ls[e] - 0.5 * log(2 * M_PI);
            ref += g;
            sref += g - log(1 - tanh(u) * tanh(u)) - log(scale[j]);
            CHECK(fabs(act[e] - (tanh(u) * scale[j] + bias[j])) <= 1e-5);
        }
        worst = fmax(worst, fabs(lp[i] - ref));
        if (fabs(sref) < 1e3)
            worst_s = fmax(worst_s, fabs(slp[i] - sref) / (1 + fabs(sref)));
    }
    printf("gaussian log-prob: max |diff| %.3g; squashed: max relative |diff| %.3g\n", worst,
           worst_s);
    CHECK(worst < 1e-4);
    CHECK(worst_s < 1e-4);

    /* against libtorch's squashed_logp on the same u */
    float u[N * D], torch_lp[N];
    for (int i = 0; i < N * D; i++)
        u[i] = mean[i] + expf(ls[i]) * noise[i];
    gb_error err = {0};
    CHECK_OK(gb_torch_squashed_gaussian_logp(mean, ls, u, N, D, scale, torch_lp, &err));
    double worst_t = 0;
    for (int i = 0; i < N; i++)
        worst_t = fmax(worst_t, fabs(slp[i] - torch_lp[i]) / (1 + fabs(torch_lp[i])));
    printf("squashed log-prob against libtorch's: max relative |diff| %.3g\n", worst_t);
    CHECK(worst_t < 1e-5);

    /* deterministic: the mean */
    gb_sample_gaussian(mean, ls, N, D, NULL, x, lp);
    for (int i = 0; i < N * D; i++)
        CHECK(x[i] == mean[i]);
}

int main(void)
{
    test_categorical();
    test_epsilon_greedy();
    test_gaussians();
    return test_main_result();
}
