/* workers/torch/core_gates.c: the recurrent cores' gate arithmetic for one row of one step
 * (core_gates.h). Compiled with -O3 -fno-trapping-math (CMakeLists.txt) as fast_tanh.c: at -O2
 * GCC vectorises none of these loops. */
#include "workers/torch/core_gates.h"
#include "workers/torch/fast_tanh.h"

/* x[0..n) = sigmoid(x[0..n)) as (1 + tanh(x / 2)) / 2: one vectorised tanh */
static inline void sigmoid_inplace(float *x, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        x[j] *= 0.5f;
    gb_tanh_forward(x, x, (size_t)n);
    for (int64_t j = 0; j < n; j++)
        x[j] = 0.5f + 0.5f * x[j];
}

GB_CLONES
void gb_lstm_forward_row(int64_t H, const float *restrict x, const float *restrict b,
                         float *restrict g, const float *restrict c, float *restrict c2,
                         float *restrict tc, float *restrict h2)
{
    for (int64_t k = 0; k < 4 * H; k++) /* as libtorch's cell: xp + (h W^T + b) */
        g[k] = x[k] + (g[k] + b[k]);
    sigmoid_inplace(g, 2 * H);     /* i, f */
    gb_tanh_forward(g + 2 * H, g + 2 * H, (size_t)H); /* g */
    sigmoid_inplace(g + 3 * H, H); /* o */
    const float *ig = g, *fg = g + H, *gg = g + 2 * H, *og = g + 3 * H;
    for (int64_t j = 0; j < H; j++) {
        const float v = fg[j] * c[j] + ig[j] * gg[j];
        c2[j] = v;
        tc[j] = v;
    }
    gb_tanh_forward(tc, tc, (size_t)H);
    for (int64_t j = 0; j < H; j++)
        h2[j] = og[j] * tc[j];
}

GB_CLONES
void gb_lstm_backward_row(int64_t H, const float *restrict g, const float *restrict tc,
                          const float *restrict c, const float *restrict gy,
                          const float *restrict dh, float *restrict dc, float keep,
                          float *restrict dg)
{
    const float *ig = g, *fg = g + H, *gg = g + 2 * H, *og = g + 3 * H;
    for (int64_t j = 0; j < H; j++) {
        const float t2 = tc[j], dht = dh[j] + gy[j];
        const float dct = dc[j] + dht * og[j] * (1.0f - t2 * t2);
        dg[j] = dct * gg[j] * ig[j] * (1.0f - ig[j]);
        dg[H + j] = dct * c[j] * fg[j] * (1.0f - fg[j]);
        dg[2 * H + j] = dct * ig[j] * (1.0f - gg[j] * gg[j]);
        dg[3 * H + j] = dht * t2 * og[j] * (1.0f - og[j]);
        dc[j] = dct * fg[j] * keep; /* into the cell entering, then through the reset */
    }
}

GB_CLONES
void gb_gru_forward_row(int64_t H, const float *restrict x, const float *restrict b,
                        float *restrict gh, const float *restrict h, float *restrict g,
                        float *restrict h2)
{
    for (int64_t k = 0; k < 3 * H; k++)
        gh[k] += b[k];
    for (int64_t k = 0; k < 2 * H; k++)
        g[k] = x[k] + gh[k];
    sigmoid_inplace(g, 2 * H); /* r, z */
    const float *r = g, *z = g + H;
    float *n = g + 2 * H;
    for (int64_t j = 0; j < H; j++)
        n[j] = x[2 * H + j] + r[j] * gh[2 * H + j];
    gb_tanh_forward(n, n, (size_t)H);
    for (int64_t j = 0; j < H; j++)
        h2[j] = n[j] + z[j] * (h[j] - n[j]); /* (1 - z) n + z h */
}

GB_CLONES
void gb_gru_backward_row(int64_t H, const float *restrict g, const float *restrict gh,
                         const float *restrict h, const float *restrict gy, float *restrict dh,
                         float *restrict dx, float *restrict dgh)
{
    const float *r = g, *z = g + H, *n = g + 2 * H;
    for (int64_t j = 0; j < H; j++) {
        const float dht = dh[j] + gy[j];
        const float dnp = dht * (1.0f - z[j]) * (1.0f - n[j] * n[j]);
        const float dzp = dht * (h[j] - n[j]) * z[j] * (1.0f - z[j]);
        const float drp = dnp * gh[2 * H + j] * r[j] * (1.0f - r[j]);
        dx[j] = drp, dx[H + j] = dzp, dx[2 * H + j] = dnp;
        dgh[j] = drp, dgh[H + j] = dzp, dgh[2 * H + j] = dnp * r[j];
        dh[j] = dht * z[j];
    }
}

