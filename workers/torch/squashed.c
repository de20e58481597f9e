/* workers/torch/squashed.c: SAC's tanh-squashed Gaussian actions in C (squashed.h). Each line
 * follows the autograd path's operations in their order, in float. */
#include "workers/torch/squashed.h"

#include <math.h>

static const float kLogStdLo = -5.0f, kLogStdHalfSpan = 3.5f; /* log_std in [-5, 2] */
static const float kHalfLog2Pi = 0.91893853320467274178f;    /* 0.5 log(2 pi) */
static const float kLog2 = 0.69314718055994530942f;

/* libtorch's softplus (beta 1, threshold 20) and the derivative its backward takes */
static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
static float softplus_grad(float x)
{
    if (x > 20.0f)
        return 1.0f;
    const float z = expf(x);
    return z / (z + 1.0f);
}

void gb_squashed_draw(int64_t n, int A, const float *mean, const float *raw, const float *eps,
                      float log_scale, float *ls, float *u, float *a, float *logp)
{
    for (int64_t i = 0; i < n; i++) {
        float gauss = 0.0f, corr = 0.0f;
        for (int j = 0; j < A; j++) {
            const int64_t e = i * A + j;
            ls[e] = (tanhf(raw[e]) + 1.0f) * kLogStdHalfSpan + kLogStdLo;
            u[e] = mean[e] + expf(ls[e]) * eps[e];
            a[e] = tanhf(u[e]);
            const float z = (u[e] - mean[e]) * expf(-ls[e]);
            gauss += -0.5f * z * z - ls[e] - kHalfLog2Pi;
            /* log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)) */
            corr += 2.0f * (kLog2 - u[e] - softplus(-2.0f * u[e]));
        }
        logp[i] = gauss - corr - log_scale;
    }
}

void gb_squashed_backward(int64_t n, int A, const float *mean, const float *raw, const float *eps,
                          const float *ls, const float *u, const float *a, const float *ga,
                          const float *g_logp, float *dmean, float *draw)
{
    for (int64_t i = 0; i < n; i++) {
        const float gl = g_logp[i];
        for (int j = 0; j < A; j++) {
            const int64_t e = i * A + j;
            const float einv = expf(-ls[e]), z = (u[e] - mean[e]) * einv;
            const float dz = -gl * z; /* of -0.5 z^2 */
            /* u's consumers: the action, the density's x and the correction (2 - 4 sigmoid) */
            float du = ga ? ga[e] * (1.0f - a[e] * a[e]) : 0.0f;
            du += dz * einv + gl * (2.0f - 4.0f * softplus_grad(-2.0f * u[e]));
            dmean[e] = du - dz * einv;
            /* log_std: through e^log_std eps, through z's e^-log_std, and its own -log_std */
            const float dls = du * eps[e] * expf(ls[e]) - dz * z - gl;
            const float t = tanhf(raw[e]);
            draw[e] = dls * kLogStdHalfSpan * (1.0f - t * t);
        }
    }
}
