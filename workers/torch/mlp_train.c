/* workers/torch/mlp_train.c: a plain MLP's forward and backward in C (mlp_train.h). */
#include "workers/torch/mlp_train.h"
#include "workers/torch/fast_tanh.h"
#include "workers/torch/mlp_infer.h"

/* eight floats, loaded and stored at any float's alignment */
typedef float v8 __attribute__((vector_size(32), aligned(4), may_alias));

/* c = (or +=) a b over a block of rows [i0, i0 + 4) (rows < 4: the last block) and the
 * columns [0, n16) in tiles of 16, then the columns [n16, n) one at a time. */
static inline __attribute__((always_inline)) void
gemm_body(int m, int n, int k, const float *restrict a, int lda, const float *restrict b, int ldb,
          float *restrict c, int ldc, int add)
{
    const int n16 = n - n % 16;
    int i = 0;
    for (; i + 4 <= m; i += 4) {
        for (int j = 0; j < n16; j += 16) {
            v8 acc[4][2];
            for (int r = 0; r < 4; r++) {
                const float *cr = c + (size_t)(i + r) * ldc + j;
                acc[r][0] = add ? *(const v8 *)cr : (v8){0};
                acc[r][1] = add ? *(const v8 *)(cr + 8) : (v8){0};
            }
            for (int p = 0; p < k; p++) {
                const float *bp = b + (size_t)p * ldb + j;
                const v8 b0 = *(const v8 *)bp, b1 = *(const v8 *)(bp + 8);
                for (int r = 0; r < 4; r++) {
                    const float ar = a[(size_t)(i + r) * lda + p];
                    acc[r][0] += ar * b0;
                    acc[r][1] += ar * b1;
                }
            }
            for (int r = 0; r < 4; r++) {
                float *cr = c + (size_t)(i + r) * ldc + j;
                *(v8 *)cr = acc[r][0];
                *(v8 *)(cr + 8) = acc[r][1];
            }
        }
    }
    for (; i < m; i++) { /* the last rows, a tile of 16 columns at a time */
        for (int j = 0; j < n16; j += 16) {
            float *cr = c + (size_t)i * ldc + j;
            v8 c0 = add ? *(const v8 *)cr : (v8){0}, c1 = add ? *(const v8 *)(cr + 8) : (v8){0};
            for (int p = 0; p < k; p++) {
                const float *bp = b + (size_t)p * ldb + j;
                const float ar = a[(size_t)i * lda + p];
                c0 += ar * *(const v8 *)bp;
                c1 += ar * *(const v8 *)(bp + 8);
            }
            *(v8 *)cr = c0;
            *(v8 *)(cr + 8) = c1;
        }
    }
    for (int r = 0; r < m && n16 < n; r++) /* the last columns (a Q head's 2 actions) */
        for (int j = n16; j < n; j++) {
            float s = add ? c[(size_t)r * ldc + j] : 0.0f;
            for (int p = 0; p < k; p++)
                s += a[(size_t)r * lda + p] * b[(size_t)p * ldb + j];
            c[(size_t)r * ldc + j] = s;
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static void gemm_avx2(int m, int n, int k, const float *a,
                                                          int lda, const float *b, int ldb,
                                                          float *c, int ldc, int add)
{
    gemm_body(m, n, k, a, lda, b, ldb, c, ldc, add);
}
#endif

static void gemm_portable(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                          float *c, int ldc, int add)
{
    gemm_body(m, n, k, a, lda, b, ldb, c, ldc, add);
}

void gb_mlp_train_gemm(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                       float *c, int ldc, int add)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (gb_mlp_avx2()) {
        gemm_avx2(m, n, k, a, lda, b, ldb, c, ldc, add);
        return;
    }
#endif
    gemm_portable(m, n, k, a, lda, b, ldb, c, ldc, add);
}

/* t ([cols][rows]) = s ([rows][cols]) transposed */
static void transpose(const float *restrict s, int rows, int cols, float *restrict t)
{
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++)
            t[(size_t)j * rows + r] = s[(size_t)r * cols + j];
}

static int widest(const gb_mlp_train_layer *l, int nl, size_t *outs, size_t *weights)
{
    int w = 0;
    *outs = *weights = 0;
    for (int i = 0; i < nl; i++) {
        w = l[i].in > w ? l[i].in : w;
        w = l[i].out > w ? l[i].out : w;
        *outs += (size_t)l[i].out;
        size_t ws = (size_t)l[i].in * (size_t)l[i].out;
        *weights = ws > *weights ? ws : *weights;
    }
    return w;
}

/* The workspace: every layer's output (n rows each), one transposed weight (the forward's),
 * two gradients of n rows and one transposed gradient (the backward's). */
size_t gb_mlp_train_floats(const gb_mlp_train_layer *l, int nl, int n)
{
    size_t outs, weights;
    int w = widest(l, nl, &outs, &weights);
    return (size_t)n * outs + weights + 3 * (size_t)n * (size_t)w;
}

float *gb_mlp_train_forward(const gb_mlp_train_layer *l, int nl, const float *x, int n, float *ws)
{
    size_t outs, weights;
    widest(l, nl, &outs, &weights);
    float *wt = ws + (size_t)n * outs, *y = ws;
    const float *in = x;
    for (int i = 0; i < nl; i++) {
        const int fi = l[i].in, fo = l[i].out;
        transpose(l[i].w, fo, fi, wt);
        gb_mlp_train_gemm(n, fo, fi, in, fi, wt, fo, y, fo, 0);
        for (int r = 0; l[i].b && r < n; r++)
            for (int j = 0; j < fo; j++)
                y[(size_t)r * fo + j] += l[i].b[j];
        const size_t all = (size_t)n * (size_t)fo;
        if (l[i].act == GB_MLP_ACT_RELU)
            for (size_t e = 0; e < all; e++)
                y[e] = y[e] > 0.0f ? y[e] : 0.0f;
        else if (l[i].act == GB_MLP_ACT_TANH)
            gb_tanh_forward(y, y, all);
        in = y;
        y += all;
    }
    return (float *)in;
}

void gb_mlp_train_backward(const gb_mlp_train_layer *l, int nl, const float *x, int n, float *ws,
                           float *dy)
{
    size_t outs, weights;
    const int w = widest(l, nl, &outs, &weights);
    float *gbuf[2], *gt = ws + (size_t)n * outs + weights + 2 * (size_t)n * (size_t)w;
    gbuf[0] = ws + (size_t)n * outs + weights;
    gbuf[1] = gbuf[0] + (size_t)n * (size_t)w;
    float *y = ws + (size_t)n * outs, *g = dy;
    for (int i = nl - 1, next = 0; i >= 0; i--) {
        const int fi = l[i].in, fo = l[i].out;
        const size_t all = (size_t)n * (size_t)fo;
        y -= all; /* this layer's output */
        const float *in = i > 0 ? y - (size_t)n * (size_t)fi : x;
        if (l[i].act == GB_MLP_ACT_RELU)
            for (size_t e = 0; e < all; e++)
                g[e] = y[e] > 0.0f ? g[e] : 0.0f;
        else if (l[i].act == GB_MLP_ACT_TANH)
            gb_tanh_backward(y, g, g, all);
        for (int r = 0; l[i].db && r < n; r++)
            for (int j = 0; j < fo; j++)
                l[i].db[j] += g[(size_t)r * fo + j];
        if (l[i].dw) {
            transpose(g, n, fo, gt);
            gb_mlp_train_gemm(fo, fi, n, gt, n, in, fi, l[i].dw, fi, 1);
        }
        if (i > 0) {
            gb_mlp_train_gemm(n, fi, fo, g, fo, l[i].w, fi, gbuf[next], fi, 0);
            g = gbuf[next];
            next ^= 1;
        }
    }
}
