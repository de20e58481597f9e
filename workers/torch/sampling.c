/* workers/torch/sampling.c: the acting distributions over rows (sampling.h). Sums in double,
 * as libtorch's float reductions are within float rounding of them. */
#include "workers/torch/sampling.h"

#include <math.h>

#define LOG_SQRT_2PI 0.91893853320467274178

void gb_sample_categorical(const float *logits, int64_t n, int64_t k, const float *u, int64_t *a,
                           float *logp)
{
    for (int64_t i = 0; i < n; i++) {
        const float *l = logits + i * k;
        int finite = 1;
        int64_t best = 0;
        for (int64_t j = 0; j < k; j++) {
            finite &= isfinite(l[j]) != 0;
            if (l[j] > l[best])
                best = j;
        }
        /* the normaliser: log sum exp, shifted by the largest finite value */
        double mx = l[best], sum = 0.0;
        for (int64_t j = 0; j < k; j++)
            sum += exp((double)l[j] - mx);
        const double lse = mx + log(sum);
        int64_t pick = best;
        if (u && !finite) {
            pick = (int64_t)((double)u[i] * (double)k);
            pick = pick < k ? pick : k - 1;
        } else if (u) {
            /* inverse CDF: the first j whose cumulative probability exceeds u */
            const double target = (double)u[i] * sum;
            double c = 0.0;
            pick = k - 1;
            for (int64_t j = 0; j < k; j++) {
                c += exp((double)l[j] - mx);
                if (target < c) {
                    pick = j;
                    break;
                }
            }
        }
        a[i] = pick;
        if (logp)
            logp[i] = (float)((double)l[pick] - lse);
    }
}

void gb_sample_epsilon_greedy(const float *q, int64_t n, int64_t k, double epsilon,
                              const float *u, int64_t *a, float *value)
{
    for (int64_t i = 0; i < n; i++) {
        const float *r = q + i * k;
        int64_t best = 0;
        for (int64_t j = 1; j < k && !isnan(r[best]); j++)
            if (r[j] > r[best] || isnan(r[j]))
                best = j;
        if (value)
            value[i] = r[best];
        if (u && (double)u[2 * i] < epsilon) {
            int64_t pick = (int64_t)((double)u[2 * i + 1] * (double)k);
            best = pick < k ? pick : k - 1;
        }
        a[i] = best;
    }
}

void gb_sample_gaussian(const float *mean, const float *log_std, int64_t n, int64_t d,
                        const float *noise, float *x, float *logp)
{
    for (int64_t i = 0; i < n; i++) {
        double lp = 0.0;
        for (int64_t j = 0; j < d; j++) {
            const int64_t e = i * d + j;
            const float xv = noise ? mean[e] + expf(log_std[e]) * noise[e] : mean[e];
            x[e] = xv;
            const double z = ((double)xv - mean[e]) * exp(-(double)log_std[e]);
            lp += -0.5 * z * z - log_std[e] - LOG_SQRT_2PI;
        }
        if (logp)
            logp[i] = (float)lp;
    }
}

static double softplus(double v)
{
    return v > 0 ? v + log1p(exp(-v)) : log1p(exp(v));
}

void gb_sample_squashed(const float *mean, const float *log_std, int64_t n, int64_t d,
                        const float *noise, const float *scale, const float *bias, float *action,
                        float *logp)
{
    double log_scale = 0.0;
    for (int64_t j = 0; scale && j < d; j++)
        log_scale += log((double)scale[j]);
    for (int64_t i = 0; i < n; i++) {
        double lp = 0.0;
        for (int64_t j = 0; j < d; j++) {
            const int64_t e = i * d + j;
            const float uv = noise ? mean[e] + expf(log_std[e]) * noise[e] : mean[e];
            action[e] = tanhf(uv) * (scale ? scale[j] : 1.0f) + (bias ? bias[j] : 0.0f);
            const double z = ((double)uv - mean[e]) * exp(-(double)log_std[e]);
            lp += -0.5 * z * z - log_std[e] - LOG_SQRT_2PI;
            lp -= 2.0 * (log(2.0) - uv - softplus(-2.0 * uv));
        }
        if (logp)
            logp[i] = (float)(lp - log_scale);
    }
}
