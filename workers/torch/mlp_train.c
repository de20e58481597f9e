/* workers/torch/mlp_train.c: a plain MLP's forward and backward in C (mlp_train.h). */
#include "workers/torch/mlp_train.h"
#include "workers/torch/fast_tanh.h"
#include "workers/torch/mlp_infer.h"

#include <stdatomic.h>

/* eight floats, loaded and stored at any float's alignment; sixteen, for AVX-512 */
typedef float v8 __attribute__((vector_size(32), aligned(4), may_alias));
typedef float v16 __attribute__((vector_size(64), aligned(4), may_alias));

#define LD(p) (*(const v8 *)(p))

/* A tile of R rows by 2L columns (two vectors V of L floats) at c: c (+)= a's R rows (row r,
 * column p at ar[r * rs + p * ps]) times b's 2L columns. Its 2R accumulators stay in registers:
 * R (at most 12) is a constant where it is inlined, and the loops over it are unrolled.
 * tile: 16 columns in AVX2's (or SSE2's) registers, 6 rows at most in their 16; tile32: 32
 * columns in AVX-512's, 12 rows (24 of its 32 registers). Each element's sum runs in the same
 * order in both: they give the same floats. */
#define GB_TILE(NAME, V, L)                                                                      \
    static inline __attribute__((always_inline)) void NAME(                                      \
        const int R, int k, const float *restrict ar, size_t rs, size_t ps,                      \
        const float *restrict b, int ldb, float *restrict c, int ldc, int add)                   \
    {                                                                                            \
        const V zero = {0};                                                                      \
        V x[12][2];                                                                              \
        _Pragma("GCC unroll 12") for (int r = 0; r < R; r++)                                     \
        {                                                                                        \
            x[r][0] = add ? *(const V *)(c + (size_t)r * ldc) : zero;                            \
            x[r][1] = add ? *(const V *)(c + (size_t)r * ldc + L) : zero;                        \
        }                                                                                        \
        for (int p = 0; p < k; p++, b += ldb, ar += ps) {                                        \
            const V b0 = *(const V *)b, b1 = *(const V *)(b + L);                                \
            _Pragma("GCC unroll 12") for (int r = 0; r < R; r++)                                 \
            {                                                                                    \
                const float s = ar[r * rs];                                                      \
                x[r][0] += s * b0;                                                               \
                x[r][1] += s * b1;                                                               \
            }                                                                                    \
        }                                                                                        \
        _Pragma("GCC unroll 12") for (int r = 0; r < R; r++)                                     \
        {                                                                                        \
            *(V *)(c + (size_t)r * ldc) = x[r][0];                                               \
            *(V *)(c + (size_t)r * ldc + L) = x[r][1];                                           \
        }                                                                                        \
    }
GB_TILE(tile, v8, 8)
GB_TILE(tile32, v16, 16)
#undef GB_TILE

/* tile (W = 16) or tile32 (W = 32): W is a constant where it is inlined */
static inline __attribute__((always_inline)) void
tile_w(const int W, const int R, int k, const float *restrict ar, size_t rs, size_t ps,
       const float *restrict b, int ldb, float *restrict c, int ldc, int add)
{
    if (W == 32)
        tile32(R, k, ar, rs, ps, b, ldb, c, ldc, add);
    else
        tile(R, k, ar, rs, ps, b, ldb, c, ldc, add);
}

/* The columns [j0, n) of c = (or +=) a b, fewer than W (16: tile's, 32: tile32's), in the same
 * tiles: b's columns copied into a panel W wide padded with zeros, KC of its rows at a time,
 * each block of c's rows taken into a tile of W columns and its columns put back (a partial sum
 * stays in c between the panels: a float, as in the registers, so the sums are as the tiles').
 * One at a time these columns ran at a tenth of the tiles' speed (256 x 23 x 64: 65 us against
 * 7 for 32 columns). */
enum { KC = 256 };
static inline __attribute__((always_inline)) void
tail_columns(const int W, int m, int n, int k, const float *restrict a, int lda, int ta,
             const float *restrict b, int ldb, float *restrict c, int ldc, int add, int j0)
{
    const int w = n - j0;
    const size_t rs = ta ? 1 : (size_t)lda, ps = ta ? (size_t)lda : 1;
    float panel[KC * 32], ct[12 * 32];
    for (int p0 = 0; p0 < k || p0 == 0; p0 += KC) {
        const int kc = k - p0 < KC ? k - p0 : KC, more = add || p0 > 0;
        for (int p = 0; p < kc; p++)
            for (int j = 0; j < W; j++)
                panel[p * W + j] = j < w ? b[(size_t)(p0 + p) * ldb + j0 + j] : 0.0f;
        int i = 0;
#define GB_TAIL(R)                                                                               \
        for (; i + (R) <= m; i += (R)) {                                                         \
            const float *ar = a + (ta ? (size_t)i : (size_t)i * lda) + (size_t)p0 * ps;          \
            for (int r = 0; r < (R); r++)                                                        \
                for (int j = 0; j < W; j++)                                                      \
                    ct[r * W + j] = more && j < w ? c[(size_t)(i + r) * ldc + j0 + j] : 0.0f;    \
            tile_w(W, (R), kc, ar, rs, ps, panel, W, ct, W, 1);                                 \
            for (int r = 0; r < (R); r++)                                                        \
                for (int j = 0; j < w; j++)                                                      \
                    c[(size_t)(i + r) * ldc + j0 + j] = ct[r * W + j];                           \
        }
        if (W == 32) {
            GB_TAIL(12)
        } else {
            GB_TAIL(6)
        }
        GB_TAIL(4)
        GB_TAIL(2)
        GB_TAIL(1)
#undef GB_TAIL
    }
}

/* c = (or +=) a b, a read as it is ([m][k], row lda) or, ta, transposed ([k][m], row lda: the
 * element (i, p) at a[p * lda + i]), in tiles W columns wide (16: AVX2's or SSE2's; 32:
 * AVX-512's, where a tile of 32 in zmm registers costs what one of 16 in ymm does). Rows in
 * blocks of 6 (12 with AVX-512: accumulators enough to cover the FMAs' latency, then 8), the
 * last ones 4, 2 and 1 at a time; the columns past the last whole tile by tail_columns. */
static inline __attribute__((always_inline)) void
gemm_body(const int W, int m, int n, int k, const float *restrict a, int lda, int ta,
          const float *restrict b, int ldb, float *restrict c, int ldc, int add)
{
    const int nw = n - n % W;
    const size_t rs = ta ? 1 : (size_t)lda, ps = ta ? (size_t)lda : 1;
    int i = 0;
    /* blocks of R rows while they fit and MORE holds */
#define GB_TILES_WHILE(R, MORE)                                                                  \
    for (; i + (R) <= m && (MORE); i += (R))                                                     \
        for (int j = 0; j < nw; j += W)                                                          \
            tile_w(W, (R), k, ta ? a + i : a + (size_t)i * lda, rs, ps, b + j, ldb,              \
                   c + (size_t)i * ldc + j, ldc, add);
#define GB_TILES(R) GB_TILES_WHILE(R, 1)
    if (W == 32) {
        /* 12 rows while they leave none or 8 or more, then 8: 16 rows as 8 + 8, not 12 + 4
         * (a core's step, 16 x 256 x 64: 12.5 us in 12 + 4 on the Zen 4 machine, 8 x 256 x 64
         * 4.4 us) */
        GB_TILES_WHILE(12, m - i < 16 || m - i > 19)
        GB_TILES(8)
    } else {
        GB_TILES(6)
    }
    GB_TILES(4)
    GB_TILES(2)
    GB_TILES(1)
#undef GB_TILES
#undef GB_TILES_WHILE
    if (nw < n)
        tail_columns(W, m, n, k, a, lda, ta, b, ldb, c, ldc, add, nw);
}

/* c = (or +=) a b^T: a [m][k] (row lda), b [n][k] (row ldb): each element a dot product of two
 * rows, 8 lanes at a time. For few columns (a head's outputs), where gemm_body's tiles do not
 * apply. */
static inline __attribute__((always_inline)) void
gemm_nt_body(int m, int n, int k, const float *restrict a, int lda, const float *restrict b,
             int ldb, float *restrict c, int ldc, int add)
{
    const int k8 = k - k % 8;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            const float *ar = a + (size_t)i * lda, *br = b + (size_t)j * ldb;
            v8 acc = {0};
            for (int p = 0; p < k8; p += 8)
                acc += LD(ar + p) * LD(br + p);
            float s = 0.0f;
            for (int e = 0; e < 8; e++)
                s += acc[e];
            for (int p = k8; p < k; p++)
                s += ar[p] * br[p];
            c[(size_t)i * ldc + j] = add ? c[(size_t)i * ldc + j] + s : s;
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx2,fma"))) static void
gemm_avx512(int m, int n, int k, const float *a, int lda, int ta, const float *b, int ldb,
            float *c, int ldc, int add)
{
    if (ta)
        gemm_body(32, m, n, k, a, lda, 1, b, ldb, c, ldc, add);
    else
        gemm_body(32, m, n, k, a, lda, 0, b, ldb, c, ldc, add);
}
__attribute__((target("avx2,fma"))) static void gemm_avx2(int m, int n, int k, const float *a,
                                                          int lda, int ta, const float *b,
                                                          int ldb, float *c, int ldc, int add)
{
    if (ta)
        gemm_body(16, m, n, k, a, lda, 1, b, ldb, c, ldc, add);
    else
        gemm_body(16, m, n, k, a, lda, 0, b, ldb, c, ldc, add);
}

__attribute__((target("avx2,fma"))) static void gemm_nt_avx2(int m, int n, int k,
                                                             const float *a, int lda,
                                                             const float *b, int ldb, float *c,
                                                             int ldc, int add)
{
    gemm_nt_body(m, n, k, a, lda, b, ldb, c, ldc, add);
}
#endif

static void gemm_portable(int m, int n, int k, const float *a, int lda, int ta, const float *b,
                          int ldb, float *c, int ldc, int add)
{
    if (ta)
        gemm_body(16, m, n, k, a, lda, 1, b, ldb, c, ldc, add);
    else
        gemm_body(16, m, n, k, a, lda, 0, b, ldb, c, ldc, add);
}

static void gemm_nt_portable(int m, int n, int k, const float *a, int lda, const float *b,
                             int ldb, float *c, int ldc, int add)
{
    gemm_nt_body(m, n, k, a, lda, b, ldb, c, ldc, add);
}

static void gemm(int m, int n, int k, const float *a, int lda, int ta, const float *b, int ldb,
                 float *c, int ldc, int add)
{
#if defined(__x86_64__) && defined(__GNUC__)
    /* fewer than 32 columns: AVX2's tiles of 16 (the same floats), not one padded tile of 32
     * (a core's input gradient, 512 x 16 x 256: 63 us against 132 on the Zen 4 machine) */
    if (gb_mlp_avx512f() && n >= 32) {
        gemm_avx512(m, n, k, a, lda, ta, b, ldb, c, ldc, add);
        return;
    }
    if (gb_mlp_avx2()) {
        gemm_avx2(m, n, k, a, lda, ta, b, ldb, c, ldc, add);
        return;
    }
#endif
    gemm_portable(m, n, k, a, lda, ta, b, ldb, c, ldc, add);
}

/* The large products' other implementation (gb_mlp_train_set_large). Atomic: where one binary
 * links both the bridge and the C learners (the tests), the bridge's learner sets it on the
 * thread that loads it while the C learner trains on another. */
static _Atomic(gb_mlp_train_large_fn) large_fn;
static _Thread_local int tiles_only; /* gb_mlp_train_tiles_only: this thread's products */

int gb_mlp_train_tiles_only(int on)
{
    const int was = tiles_only;
    tiles_only = on;
    return was;
}

void gb_mlp_train_set_large(gb_mlp_train_large_fn fn)
{
    atomic_store_explicit(&large_fn, fn, memory_order_release);
}

/* 1 when the product went to the large products' implementation: at least 1M multiply-adds with
 * its middle dimension at least 128 (two of a layer's rows, inputs and outputs that wide). The
 * tiles are faster below (512 x 64 x 64: 72-76 GFLOP/s on the AMD EPYC machine, OpenBLAS 55-60),
 * OpenBLAS above (64 x 256 x 256: 65-67 against 57-59; a halfcheetah_ppo call 0.6x, a
 * halfcheetah_sac step 0.9x of libtorch's autograd with it, 1.2x without). */
static int large(int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b,
                 int ldb, float *c, int ldc, int add)
{
    const int lo = m < n ? m : n, hi = m < n ? n : m;
    const int mid = k < lo ? lo : k > hi ? hi : k;
    gb_mlp_train_large_fn fn = atomic_load_explicit(&large_fn, memory_order_acquire);
    if (!fn || tiles_only || mid < 128 || (double)m * (double)n * (double)k < 1e6)
        return 0;
    fn(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, add);
    return 1;
}

void gb_mlp_train_gemm(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                       float *c, int ldc, int add)
{
    if (!large(0, 0, m, n, k, a, lda, b, ldb, c, ldc, add))
        gemm(m, n, k, a, lda, 0, b, ldb, c, ldc, add);
}

void gb_mlp_train_gemm_tn(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                          float *c, int ldc, int add)
{
    if (!large(1, 0, m, n, k, a, lda, b, ldb, c, ldc, add))
        gemm(m, n, k, a, lda, 1, b, ldb, c, ldc, add);
}

void gb_mlp_train_gemm_nt(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                          float *c, int ldc, int add)
{
    if (large(0, 1, m, n, k, a, lda, b, ldb, c, ldc, add))
        return;
#if defined(__x86_64__) && defined(__GNUC__)
    if (gb_mlp_avx2()) {
        gemm_nt_avx2(m, n, k, a, lda, b, ldb, c, ldc, add);
        return;
    }
#endif
    gemm_nt_portable(m, n, k, a, lda, b, ldb, c, ldc, add);
}

/* t ([cols][rows]) = s ([rows][cols]) transposed, in blocks of 16 x 16 (a 256 x 256 weight's
 * strided writes one at a time missed the cache on each) */
static void transpose(const float *restrict s, int rows, int cols, float *restrict t)
{
    for (int r0 = 0; r0 < rows; r0 += 16)
        for (int j0 = 0; j0 < cols; j0 += 16) {
            const int r1 = r0 + 16 < rows ? r0 + 16 : rows, j1 = j0 + 16 < cols ? j0 + 16 : cols;
            for (int r = r0; r < r1; r++)
                for (int j = j0; j < j1; j++)
                    t[(size_t)j * rows + r] = s[(size_t)r * cols + j];
        }
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

/* The workspace: every layer's output (n rows each), one weight's room (the forward's
 * transposed weight, the backward's transposed weight gradient) and two gradients of n rows. */
size_t gb_mlp_train_floats(const gb_mlp_train_layer *l, int nl, int n)
{
    size_t outs, weights;
    int w = widest(l, nl, &outs, &weights);
    return (size_t)n * outs + weights + 2 * (size_t)n * (size_t)w;
}

/* A layer's output rows y ([n][fo]) plus its bias b (NULL: none), then relu where asked: row by
 * row, each row once through the cache, in the cpu's widest vectors (GB_CLONES; the rest of this
 * file is compiled for the baseline x86-64). */
GB_CLONES
static void bias_relu(float *restrict y, int n, int fo, const float *restrict b, int relu)
{
    for (int r = 0; r < n; r++, y += fo) {
        if (b)
            for (int j = 0; j < fo; j++)
                y[j] += b[j];
        if (relu)
            for (int j = 0; j < fo; j++)
                y[j] = y[j] > 0.0f ? y[j] : 0.0f;
    }
}

/* The backward's: the output's gradient g ([n][fo]) through relu (where y, the output, is not
 * positive: 0) where asked, and added into db (NULL: skipped) row by row. */
GB_CLONES
static void relu_bias_grad(float *restrict g, const float *restrict y, int n, int fo, int relu,
                           float *restrict db)
{
    for (int r = 0; r < n; r++, g += fo, y += fo) {
        if (relu)
            for (int j = 0; j < fo; j++)
                g[j] = y[j] > 0.0f ? g[j] : 0.0f;
        if (db)
            for (int j = 0; j < fo; j++)
                db[j] += g[j];
    }
}

float *gb_mlp_train_forward(const gb_mlp_train_layer *l, int nl, const float *x, int n, float *ws)
{
    size_t outs, weights;
    widest(l, nl, &outs, &weights);
    float *wt = ws + (size_t)n * outs, *y = ws;
    const float *in = x;
    for (int i = 0; i < nl; i++) {
        const int fi = l[i].in, fo = l[i].out;
        if (fo < 16) { /* a head's few outputs: dot products of the rows with the weight's */
            gb_mlp_train_gemm_nt(n, fo, fi, in, fi, l[i].w, fi, y, fo, 0);
        } else if (!large(0, 1, n, fo, fi, in, fi, l[i].w, fi, y, fo, 0)) {
            transpose(l[i].w, fo, fi, wt);
            gb_mlp_train_gemm(n, fo, fi, in, fi, wt, fo, y, fo, 0);
        }
        bias_relu(y, n, fo, l[i].b, l[i].act == GB_MLP_ACT_RELU);
        const size_t all = (size_t)n * (size_t)fo;
        if (l[i].act == GB_MLP_ACT_TANH)
            gb_tanh_forward(y, y, all);
        in = y;
        y += all;
    }
    return (float *)in;
}

/* dw ([fo][fi]) += g^T in over n rows (g [n][fo], in [n][fi]); with few inputs and more outputs
 * (a first layer's) as its transpose in^T g into tmp ([fi][fo]), whose columns are the wider. */
static void weight_grad(int n, int fi, int fo, const float *g, const float *in, float *dw,
                        float *tmp)
{
    if (fi >= 16 || fi >= fo) {
        gb_mlp_train_gemm_tn(fo, fi, n, g, fo, in, fi, dw, fi, 1);
        return;
    }
    gb_mlp_train_gemm_tn(fi, fo, n, in, fi, g, fo, tmp, fo, 0);
    for (int o = 0; o < fo; o++)
        for (int j = 0; j < fi; j++)
            dw[(size_t)o * fi + j] += tmp[(size_t)j * fo + o];
}

void gb_mlp_train_backward(const gb_mlp_train_layer *l, int nl, const float *x, int n, float *ws,
                           float *dy, float *dx)
{
    size_t outs, weights;
    const int w = widest(l, nl, &outs, &weights);
    float *gbuf[2], *tmp = ws + (size_t)n * outs;
    gbuf[0] = tmp + weights;
    gbuf[1] = gbuf[0] + (size_t)n * (size_t)w;
    float *y = ws + (size_t)n * outs, *g = dy;
    for (int i = nl - 1, next = 0; i >= 0; i--) {
        const int fi = l[i].in, fo = l[i].out;
        const size_t all = (size_t)n * (size_t)fo;
        y -= all; /* this layer's output */
        const float *in = i > 0 ? y - (size_t)n * (size_t)fi : x;
        if (l[i].act == GB_MLP_ACT_TANH)
            gb_tanh_backward(y, g, g, all);
        relu_bias_grad(g, y, n, fo, l[i].act == GB_MLP_ACT_RELU, l[i].db);
        if (l[i].dw)
            weight_grad(n, fi, fo, g, in, l[i].dw, tmp);
        if (i > 0) {
            gb_mlp_train_gemm(n, fi, fo, g, fo, l[i].w, fi, gbuf[next], fi, 0);
            g = gbuf[next];
            next ^= 1;
        } else if (dx) {
            gb_mlp_train_gemm(n, fi, fo, g, fo, l[i].w, fi, dx, fi, 0);
        }
    }
}
