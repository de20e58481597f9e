/* workers/torch/flat_kernels.c: the CPU optimiser's arithmetic (flat_kernels.h). */
#include "workers/torch/flat_kernels.h"
#include "workers/torch/fast_tanh.h"

#include <math.h>

GB_CLONES
void gb_flat_adam(float *restrict p, const float *restrict g, float *restrict m,
                  float *restrict v, size_t n, float b1, float b2, float step, float sqrt_bc2,
                  float eps)
{
    const float a1 = 1.0f - b1, a2 = 1.0f - b2;
    for (size_t i = 0; i < n; i++) {
        const float mi = m[i] * b1 + a1 * g[i];
        const float vi = v[i] * b2 + a2 * g[i] * g[i];
        m[i] = mi;
        v[i] = vi;
        p[i] += -step * (mi / (sqrtf(vi) / sqrt_bc2 + eps));
    }
}

GB_CLONES
double gb_flat_sumsq(const float *x, size_t n)
{
    double s[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += (double)x[i + k] * (double)x[i + k];
    for (; i < n; i++)
        s[0] += (double)x[i] * (double)x[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

GB_CLONES
void gb_flat_scale(float *x, size_t n, float s)
{
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
}

GB_CLONES
void gb_flat_lerp(float *restrict dst, const float *restrict src, size_t n, float w)
{
    if (w < 0.5f)
        for (size_t i = 0; i < n; i++)
            dst[i] += w * (src[i] - dst[i]);
    else
        for (size_t i = 0; i < n; i++)
            dst[i] = src[i] - (src[i] - dst[i]) * (1.0f - w);
}
