/* workers/torch/mlp_infer.c: gb_mlp (mlp_infer.h). Rows go through the program in blocks of
 * GB_MLP_BLOCK; every layer of a block computes 4 rows x 64 outputs at a time in registers
 * (AVX-512: 16 accumulators; on AVX2: 4 rows x 16 outputs, 8), from weights laid out for it when
 * loaded:
 *   fp32: wt[in][out16], the transpose, so that one input feature meets 64 outputs in 4 loads;
 *   int8: wq[out16 / 16][in4 / 4][16][4], vpdpbusd's operand: 16 outputs x 4 inputs a vector;
 *         and w16[out16 / 8][in4 / 2][8][2], the same weights widened to int16 for AVX2's
 *         vpmaddwd (8 outputs x 2 inputs a vector, the inputs widened likewise: exact, where
 *         AVX2's u8 x s8 vpmaddubsw would saturate its int16 pair sums).
 * out16 and in4 round out and in up to 16 and 4; padding weights and biases are zero, so padded
 * outputs are 0 (tanh and relu keep 0) and padded inputs add nothing. */
#include "workers/torch/mlp_infer.h"
#include "workers/torch/fast_tanh.h"
#include "workers/torch/mlp_infer_avx2.h"
#include "workers/torch/mlp_layout.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GB_MLP_X86 1
#define GB_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define GB_INLINE static inline __attribute__((always_inline))
#endif

static int round_up(int v, int m)
{
    return (v + m - 1) / m * m;
}

static void *zalloc(size_t bytes)
{
    /* 64-byte aligned, zeroed; bytes rounded up to 64 as aligned_alloc wants */
    size_t n = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, n ? n : 64);
    if (p)
        memset(p, 0, n ? n : 64);
    return p;
}

enum {
    CPU_KNOWN = 1,   /* asked */
    CPU_AVX2 = 2,    /* AVX2 and FMA */
    CPU_AVX512 = 4,  /* the AVX-512 paths' instructions (F, BW, VL, VNNI) */
    CPU_AVX512F = 8, /* AVX-512 F besides AVX2 and FMA (mlp_train.c's wider tiles) */
};

/* What the cpu (and its OS) runs of the above, asked once: two threads may ask first at once
 * and get the same answer. */
static int cpu_features(void)
{
    int f = CPU_KNOWN;
#ifdef GB_MLP_X86
    static _Atomic int known = 0;
    int have = atomic_load_explicit(&known, memory_order_relaxed);
    if (have)
        return have;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        f |= CPU_AVX2;
    if (__builtin_cpu_supports("avx512f") && (f & CPU_AVX2))
        f |= CPU_AVX512F;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
        f |= CPU_AVX512;
    atomic_store_explicit(&known, f, memory_order_relaxed);
#endif
    return f;
}

static int have_avx512(void) { return (cpu_features() & CPU_AVX512) != 0; }
static int have_avx2(void) { return (cpu_features() & CPU_AVX2) != 0; }

int gb_mlp_avx2(void) { return have_avx2(); }

int gb_mlp_avx512f(void) { return (cpu_features() & CPU_AVX512F) != 0; }

int gb_mlp_fast(void)
{
    return have_avx512() || have_avx2();
}

int gb_mlp_int8_vnni(void)
{
    return have_avx512();
}

const char *gb_mlp_kernels_name(int int8)
{
    return !int8 ? "gearbox fp32"
           : gb_mlp_int8_vnni() ? "gearbox int8 (avx512-vnni)"
                                : "gearbox int8 (avx2)";
}

void gb_mlp_destroy(gb_mlp *m)
{
    if (!m)
        return;
    for (int i = 0; m->l && i < m->n; i++) {
        struct gb_mlp_layer *l = &m->l[i];
        free(l->wt);
        free(l->wq);
        free(l->w16);
        free(l->ws);
        free(l->wsum);
        free(l->b);
        free(l->y);
    }
    free(m->l);
    free(m->x);
    free(m->xq);
    free(m->x16);
    free(m->xs);
    free(m->xz);
    free(m);
}

gb_mlp *gb_mlp_create(const gb_mlp_layer_spec *specs, int n, char *err, size_t err_len)
{
    if (n < 1 || !specs) {
        snprintf(err, err_len, "mlp: a program needs layers");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        const gb_mlp_layer_spec *s = &specs[i];
        const char *why = NULL;
        if (s->in < 1 || s->out < 1)
            why = "widths must be positive";
        else if (s->src < -1 || s->src >= i)
            why = "its source must be the input (-1) or an earlier layer";
        else if (s->src >= 0 && specs[s->src].out != s->in)
            why = "its in differs from its source's out";
        else if (s->src < 0 && specs[0].src < 0 && s->in != specs[0].in)
            why = "every layer reading the input must take the same width";
        else if (s->act < GB_MLP_ACT_NONE || s->act > GB_MLP_ACT_RELU)
            why = "unknown activation";
        if (why) {
            snprintf(err, err_len, "mlp: layer %d: %s", i, why);
            return NULL;
        }
    }
    gb_mlp *m = calloc(1, sizeof *m);
    if (!m || !(m->l = calloc((size_t)n, sizeof *m->l)))
        goto oom;
    m->n = n;
    m->in0 = specs[0].in;
    m->in0_4 = round_up(m->in0, 4);
    int max_in4 = 4;
    for (int i = 0; i < n; i++) {
        struct gb_mlp_layer *l = &m->l[i];
        l->s = specs[i];
        l->in4 = round_up(l->s.in, 4);
        l->out16 = round_up(l->s.out, 16);
        if (l->in4 > max_in4)
            max_in4 = l->in4;
        size_t o = (size_t)l->out16;
        if (!(l->b = zalloc(o * sizeof(float))) ||
            !(l->y = zalloc((size_t)GB_MLP_BLOCK * o * sizeof(float))))
            goto oom;
        if (l->s.int8) {
            if (!(l->wq = zalloc(o * (size_t)l->in4)) || !(l->ws = zalloc(o * sizeof(float))) ||
                !(l->wsum = zalloc(o * sizeof(int32_t))) ||
                !(l->w16 = zalloc(o * (size_t)l->in4 * sizeof(int16_t))))
                goto oom;
        } else if (!(l->wt = zalloc((size_t)l->s.in * o * sizeof(float)))) {
            goto oom;
        }
    }
    if (!(m->x = zalloc((size_t)GB_MLP_BLOCK * (size_t)m->in0_4 * sizeof(float))) ||
        !(m->xq = zalloc((size_t)GB_MLP_BLOCK * (size_t)max_in4)) ||
        !(m->x16 = zalloc((size_t)GB_MLP_BLOCK * (size_t)max_in4 * sizeof(int16_t))) ||
        !(m->xs = zalloc(GB_MLP_BLOCK * sizeof(float))) ||
        !(m->xz = zalloc(GB_MLP_BLOCK * sizeof(int32_t))))
        goto oom;
    return m;
oom:
    gb_mlp_destroy(m);
    snprintf(err, err_len, "mlp: out of memory");
    return NULL;
}

void gb_mlp_path(gb_mlp *m, int path)
{
    m->path = path;
}

int gb_mlp_load(gb_mlp *m, int i, const float *w, const float *b)
{
    if (i < 0 || i >= m->n)
        return -1;
    struct gb_mlp_layer *l = &m->l[i];
    const int in = l->s.in, out = l->s.out, k4n = l->in4 / 4;
    for (int j = 0; j < out; j++)
        l->b[j] = b ? b[j] : 0.0f;
    if (!l->s.int8) {
        for (int j = 0; j < out; j++)
            for (int k = 0; k < in; k++)
                l->wt[(size_t)k * l->out16 + j] = w[(size_t)j * in + k];
        return 0;
    }
    for (int j = 0; j < out; j++) {
        const float *row = w + (size_t)j * in;
        float mx = 0.0f;
        for (int k = 0; k < in; k++)
            mx = fabsf(row[k]) > mx ? fabsf(row[k]) : mx;
        const float scale = mx > 0.0f ? mx / 127.0f : 1.0f;
        int32_t sum = 0;
        for (int k = 0; k < in; k++) {
            long q = lrintf(row[k] / scale);
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            l->wq[((size_t)(j / 16) * k4n + k / 4) * 64 + (j % 16) * 4 + k % 4] = (int8_t)q;
            l->w16[((size_t)(j / 8) * (l->in4 / 2) + k / 2) * 16 + (j % 8) * 2 + k % 2] =
                (int16_t)q;
            sum += (int32_t)q;
        }
        l->ws[j] = scale;
        l->wsum[j] = sum;
    }
    return 0;
}

/* ---- portable paths: the reference ---- */

static uint8_t quantize(float v, float inv, int32_t zero)
{
    long q = lrintf(v * inv) + zero;
    return (uint8_t)(q < 0 ? 0 : q > 255 ? 255 : q);
}

static void quantize_rows_portable(gb_mlp *m, const float *x, int ldx, int in, int in4, int rows)
{
    for (int r = 0; r < rows; r++) {
        const float *v = x + (size_t)r * ldx;
        float mn = 0.0f, mx = 0.0f;
        int bad = 0;
        for (int k = 0; k < in; k++) {
            bad |= !isfinite(v[k]);
            mn = v[k] < mn ? v[k] : mn;
            mx = v[k] > mx ? v[k] : mx;
        }
        const float inv = gb_mlp_row_params(mn, mx, bad, &m->xs[r], &m->xz[r]);
        uint8_t *q = m->xq + (size_t)r * in4;
        for (int k = 0; k < in; k++)
            q[k] = bad ? 0 : quantize(v[k], inv, m->xz[r]);
        for (int k = in; k < in4; k++)
            q[k] = (uint8_t)m->xz[r];
    }
}

static void int8_portable(gb_mlp *m, const struct gb_mlp_layer *l, int rows)
{
    const int k4n = l->in4 / 4;
    for (int r = 0; r < rows; r++) {
        const uint8_t *q = m->xq + (size_t)r * l->in4;
        float *y = l->y + (size_t)r * l->out16;
        for (int j = 0; j < l->out16; j++) {
            const int8_t *w = l->wq + (size_t)(j / 16) * k4n * 64 + (j % 16) * 4;
            int32_t acc = 0;
            for (int k = 0; k < l->in4; k++)
                acc += (int32_t)q[k] * w[(size_t)(k / 4) * 64 + k % 4];
            const float sc = m->xs[r] * l->ws[j];
            y[j] = (float)(acc - m->xz[r] * l->wsum[j]) * sc + l->b[j];
            if (l->s.act == GB_MLP_ACT_RELU)
                y[j] = y[j] < 0.0f ? 0.0f : y[j]; /* NaN stays NaN, as torch.relu */
        }
    }
}

static void fp32_portable(const struct gb_mlp_layer *l, const float *x, int ldx, int rows)
{
    for (int r = 0; r < rows; r++) {
        float *y = l->y + (size_t)r * l->out16;
        memcpy(y, l->b, (size_t)l->out16 * sizeof(float));
        for (int k = 0; k < l->s.in; k++) {
            const float xv = x[(size_t)r * ldx + k];
            const float *w = l->wt + (size_t)k * l->out16;
            for (int j = 0; j < l->out16; j++)
                y[j] += xv * w[j];
        }
        if (l->s.act == GB_MLP_ACT_RELU)
            for (int j = 0; j < l->out16; j++)
                y[j] = y[j] < 0.0f ? 0.0f : y[j]; /* NaN stays NaN, as torch.relu */
    }
}

/* ---- AVX-512 paths ---- */
#ifdef GB_MLP_X86

/* 4 rows x NV vectors of 16 outputs, starting at output column j0 */
GB_INLINE GB_AVX512 void fp32_tile(const struct gb_mlp_layer *l, const float *x, int ldx,
                                   int r0, int j0, const int NV)
{
    __m512 acc[4][4];
    for (int r = 0; r < 4; r++)
        for (int v = 0; v < NV; v++)
            acc[r][v] = _mm512_load_ps(l->b + j0 + 16 * v);
    const float *xr = x + (size_t)r0 * ldx;
    for (int k = 0; k < l->s.in; k++) {
        const float *wk = l->wt + (size_t)k * l->out16 + j0;
        __m512 w[4];
        for (int v = 0; v < NV; v++)
            w[v] = _mm512_load_ps(wk + 16 * v);
        for (int r = 0; r < 4; r++) {
            const __m512 xb = _mm512_set1_ps(xr[(size_t)r * ldx + k]);
            for (int v = 0; v < NV; v++)
                acc[r][v] = _mm512_fmadd_ps(xb, w[v], acc[r][v]);
        }
    }
    const __m512 zero = _mm512_setzero_ps();
    for (int r = 0; r < 4; r++)
        for (int v = 0; v < NV; v++) {
            __m512 o = l->s.act == GB_MLP_ACT_RELU ? _mm512_max_ps(zero, acc[r][v]) : acc[r][v];
            _mm512_store_ps(l->y + (size_t)(r0 + r) * l->out16 + j0 + 16 * v, o);
        }
}

static GB_AVX512 void fp32_avx512(const struct gb_mlp_layer *l, const float *x, int ldx, int rows)
{
    for (int r0 = 0; r0 < rows; r0 += 4)
        for (int j0 = 0; j0 < l->out16; j0 += 64) {
            switch ((l->out16 - j0) / 16) {
            case 1: fp32_tile(l, x, ldx, r0, j0, 1); break;
            case 2: fp32_tile(l, x, ldx, r0, j0, 2); break;
            case 3: fp32_tile(l, x, ldx, r0, j0, 3); break;
            default: fp32_tile(l, x, ldx, r0, j0, 4); break;
            }
        }
}

/* The same quantization as quantize_rows_portable, 16 features a step. */
static GB_AVX512 void quantize_rows_avx512(gb_mlp *m, const float *x, int ldx, int in, int in4,
                                           int rows)
{
    for (int r = 0; r < rows; r++) {
        const float *v = x + (size_t)r * ldx;
        __m512 mn = _mm512_setzero_ps(), mx = _mm512_setzero_ps();
        __mmask16 bad = 0;
        for (int k = 0; k < in; k += 16) {
            const __mmask16 live = in - k >= 16 ? 0xffff : (__mmask16)((1u << (in - k)) - 1);
            const __m512 f = _mm512_maskz_loadu_ps(live, v + k);
            /* not finite: NaN, or x - x not 0 (inf) */
            bad |= _mm512_cmp_ps_mask(_mm512_sub_ps(f, f), _mm512_setzero_ps(), _CMP_NEQ_UQ);
            mn = _mm512_min_ps(mn, f);
            mx = _mm512_max_ps(mx, f);
        }
        int32_t *zero = &m->xz[r];
        const float inv = gb_mlp_row_params(_mm512_reduce_min_ps(mn), _mm512_reduce_max_ps(mx),
                                            bad != 0, &m->xs[r], zero);
        uint8_t *q = m->xq + (size_t)r * in4;
        const __m512 vinv = _mm512_set1_ps(inv);
        const __m512i vz = _mm512_set1_epi32(*zero), lo = _mm512_setzero_si512();
        for (int k = 0; k < in4; k += 16) {
            const int n = in4 - k >= 16 ? 16 : in4 - k;
            const __mmask16 store = (__mmask16)((1u << n) - 1);
            const __mmask16 live = in - k >= 16 ? 0xffff
                                   : in - k > 0 ? (__mmask16)((1u << (in - k)) - 1)
                                                : 0;
            const __m512 f = _mm512_maskz_loadu_ps(live, v + k);
            /* padding (0) quantizes to the zero point, as in the portable path */
            __m512i qi = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(f, vinv)), vz);
            qi = _mm512_max_epi32(qi, lo);
            _mm512_mask_cvtusepi32_storeu_epi8(q + k, store, qi);
        }
        if (bad)
            memset(q, 0, (size_t)in);
    }
}

/* 4 rows x NV blocks of 16 outputs, starting at output block jb */
GB_INLINE GB_AVX512 void int8_tile(const gb_mlp *m, const struct gb_mlp_layer *l, int r0, int jb,
                                   const int NV)
{
    const int k4n = l->in4 / 4;
    __m512i acc[4][4];
    for (int r = 0; r < 4; r++)
        for (int v = 0; v < NV; v++)
            acc[r][v] = _mm512_setzero_si512();
    const uint8_t *q = m->xq + (size_t)r0 * l->in4;
    const int8_t *wb = l->wq + (size_t)jb * k4n * 64;
    for (int k4 = 0; k4 < k4n; k4++) {
        __m512i w[4];
        for (int v = 0; v < NV; v++)
            w[v] = _mm512_load_si512(wb + ((size_t)v * k4n + k4) * 64);
        for (int r = 0; r < 4; r++) {
            int32_t four;
            memcpy(&four, q + (size_t)r * l->in4 + 4 * k4, 4);
            const __m512i xb = _mm512_set1_epi32(four);
            for (int v = 0; v < NV; v++)
                acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], xb, w[v]);
        }
    }
    const __m512 zero = _mm512_setzero_ps();
    for (int r = 0; r < 4; r++) {
        const __m512i xz = _mm512_set1_epi32(m->xz[r0 + r]);
        const __m512 xs = _mm512_set1_ps(m->xs[r0 + r]);
        for (int v = 0; v < NV; v++) {
            const int j = (jb + v) * 16;
            const __m512i d = _mm512_sub_epi32(
                acc[r][v], _mm512_mullo_epi32(xz, _mm512_load_si512(l->wsum + j)));
            const __m512 sc = _mm512_mul_ps(xs, _mm512_load_ps(l->ws + j));
            __m512 o = _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(d), sc),
                                     _mm512_load_ps(l->b + j));
            if (l->s.act == GB_MLP_ACT_RELU)
                o = _mm512_max_ps(zero, o); /* NaN stays NaN (max returns its second operand) */
            _mm512_store_ps(l->y + (size_t)(r0 + r) * l->out16 + j, o);
        }
    }
}

static GB_AVX512 void int8_avx512(const gb_mlp *m, const struct gb_mlp_layer *l, int rows)
{
    const int blocks = l->out16 / 16;
    for (int r0 = 0; r0 < rows; r0 += 4)
        for (int jb = 0; jb < blocks; jb += 4) {
            switch (blocks - jb) {
            case 1: int8_tile(m, l, r0, jb, 1); break;
            case 2: int8_tile(m, l, r0, jb, 2); break;
            case 3: int8_tile(m, l, r0, jb, 3); break;
            default: int8_tile(m, l, r0, jb, 4); break;
            }
        }
}
#endif

void gb_mlp_forward(gb_mlp *m, const float *x, int64_t rows, float *const *outs)
{
#ifdef GB_MLP_X86
    const int fast = m->path == GB_MLP_PATH_BEST && have_avx512();
    const int avx2 = m->path != GB_MLP_PATH_PORTABLE && have_avx2();
#endif
    for (int64_t r0 = 0; r0 < rows; r0 += GB_MLP_BLOCK) {
        const int n = rows - r0 < GB_MLP_BLOCK ? (int)(rows - r0) : GB_MLP_BLOCK;
        const int n4 = round_up(n, 4);
        for (int r = 0; r < n; r++)
            memcpy(m->x + (size_t)r * m->in0_4, x + (size_t)(r0 + r) * m->in0,
                   (size_t)m->in0 * sizeof(float));
        memset(m->x + (size_t)n * m->in0_4, 0, (size_t)(n4 - n) * m->in0_4 * sizeof(float));
        for (int i = 0; i < m->n; i++) {
            const struct gb_mlp_layer *l = &m->l[i];
            const float *in = l->s.src < 0 ? m->x : m->l[l->s.src].y;
            const int ld = l->s.src < 0 ? m->in0_4 : m->l[l->s.src].out16;
            if (l->s.int8) {
#ifdef GB_MLP_X86
                if (fast) {
                    quantize_rows_avx512(m, in, ld, l->s.in, l->in4, n4);
                    int8_avx512(m, l, n4);
                } else if (avx2) {
                    gb_mlp_quantize_avx2(m, in, ld, l->s.in, l->in4, n4);
                    gb_mlp_int8_avx2(m, l, n4);
                } else
#endif
                {
                    quantize_rows_portable(m, in, ld, l->s.in, l->in4, n4);
                    int8_portable(m, l, n4);
                }
            } else {
#ifdef GB_MLP_X86
                if (fast)
                    fp32_avx512(l, in, ld, n4);
                else if (avx2)
                    gb_mlp_fp32_avx2(l, in, ld, n4);
                else
#endif
                    fp32_portable(l, in, ld, n4);
            }
            if (l->s.act == GB_MLP_ACT_TANH)
                gb_tanh_forward(l->y, l->y, (size_t)n4 * l->out16);
            if (outs && outs[i])
                for (int r = 0; r < n; r++)
                    memcpy(outs[i] + (size_t)(r0 + r) * l->s.out, l->y + (size_t)r * l->out16,
                           (size_t)l->s.out * sizeof(float));
        }
    }
}
