/* workers/torch/fast_tanh.c: gb_tanh_forward, gb_tanh_backward (fast_tanh.h). Compiled with
 * -fno-trapping-math (CMakeLists.txt): without it GCC keeps the clamp's compares as branches
 * and vectorises nothing on AVX2 or SSE2. */
#include "workers/torch/fast_tanh.h"

/* Beyond this tanh rounds to +-1 in float; the rational form is fitted up to it. */
#define CLAMP 7.90531110763549805f

GB_CLONES
void gb_tanh_forward(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i] < -CLAMP ? -CLAMP : x[i]; /* two selects (not one nested): vectorised */
        v = v > CLAMP ? CLAMP : v;
        const float v2 = v * v;
        float p = -2.76076847742355e-16f;
        p = p * v2 + 2.00018790482477e-13f;
        p = p * v2 - 8.60467152213735e-11f;
        p = p * v2 + 5.12229709037114e-08f;
        p = p * v2 + 1.48572235717979e-05f;
        p = p * v2 + 6.37261928875436e-04f;
        p = p * v2 + 4.89352455891786e-03f;
        float q = 1.19825839466702e-06f;
        q = q * v2 + 1.18534705686654e-04f;
        q = q * v2 + 2.26843463243900e-03f;
        q = q * v2 + 4.89352518554385e-03f;
        y[i] = v * p / q;
    }
}

GB_CLONES
void gb_tanh_backward(const float *y, const float *g, float *gx, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gx[i] = g[i] * (1.0f - y[i] * y[i]);
}
