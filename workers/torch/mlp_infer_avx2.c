/* workers/torch/mlp_infer_avx2.c: gb_mlp's paths on AVX2 and FMA (mlp_infer_avx2.h): fp32 in
 * tiles of 4 rows x 16 outputs; int8 quantized as the portable path does and summed with
 * vpmaddwd over int16 inputs and weights, exactly the portable path's sums. */
#include "workers/torch/mlp_infer_avx2.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GB_AVX2 __attribute__((target("avx2,fma")))

/* fp32 on AVX2 and FMA: 4 rows x 16 outputs (2 vectors of 8) a tile */
GB_AVX2 void gb_mlp_fp32_avx2(const struct gb_mlp_layer *l, const float *x, int ldx, int rows)
{
    const __m256 zero = _mm256_setzero_ps();
    for (int r0 = 0; r0 < rows; r0 += 4)
        for (int j0 = 0; j0 < l->out16; j0 += 16) {
            __m256 acc[4][2];
            for (int r = 0; r < 4; r++) {
                acc[r][0] = _mm256_load_ps(l->b + j0);
                acc[r][1] = _mm256_load_ps(l->b + j0 + 8);
            }
            const float *xr = x + (size_t)r0 * ldx;
            for (int k = 0; k < l->s.in; k++) {
                const float *wk = l->wt + (size_t)k * l->out16 + j0;
                const __m256 w0 = _mm256_load_ps(wk), w1 = _mm256_load_ps(wk + 8);
                for (int r = 0; r < 4; r++) {
                    const __m256 xb = _mm256_broadcast_ss(xr + (size_t)r * ldx + k);
                    acc[r][0] = _mm256_fmadd_ps(xb, w0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(xb, w1, acc[r][1]);
                }
            }
            for (int r = 0; r < 4; r++)
                for (int v = 0; v < 2; v++) {
                    /* max(0, NaN) is NaN, as torch.relu */
                    __m256 o = l->s.act == GB_MLP_ACT_RELU ? _mm256_max_ps(zero, acc[r][v])
                                                           : acc[r][v];
                    _mm256_store_ps(l->y + (size_t)(r0 + r) * l->out16 + j0 + 8 * v, o);
                }
        }
}

/* quantize_rows_portable's quantization on AVX2, 8 features a step, into x16 (widened) */
GB_AVX2 void gb_mlp_quantize_avx2(gb_mlp *m, const float *x, int ldx, int in, int in4, int rows)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int r = 0; r < rows; r++) {
        const float *v = x + (size_t)r * ldx;
        __m256 mn = _mm256_setzero_ps(), mx = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
        for (int k = 0; k < in; k += 8) {
            const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(in - k), lane);
            const __m256 f = _mm256_maskload_ps(v + k, live);
            /* not finite: NaN, or x - x not 0 (inf) */
            bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_sub_ps(f, f), _mm256_setzero_ps(),
                                                  _CMP_NEQ_UQ));
            mn = _mm256_min_ps(mn, f);
            mx = _mm256_max_ps(mx, f);
        }
        float lo[8], hi[8];
        _mm256_storeu_ps(lo, mn);
        _mm256_storeu_ps(hi, mx);
        for (int i = 1; i < 8; i++) {
            lo[0] = lo[i] < lo[0] ? lo[i] : lo[0];
            hi[0] = hi[i] > hi[0] ? hi[i] : hi[0];
        }
        const int is_bad = _mm256_movemask_ps(bad) != 0;
        int32_t *zero = &m->xz[r];
        const float inv = gb_mlp_row_params(lo[0], hi[0], is_bad, &m->xs[r], zero);
        int16_t *q = m->x16 + (size_t)r * in4;
        const __m256 vinv = _mm256_set1_ps(inv);
        const __m256i vz = _mm256_set1_epi32(*zero), top = _mm256_set1_epi32(255);
        for (int k = 0; k < in4; k += 8) {
            const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(in - k), lane);
            const __m256 f = _mm256_maskload_ps(v + k, live);
            /* padding (0) quantizes to the zero point, as in the portable path */
            __m256i qi = _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(f, vinv)), vz);
            qi = _mm256_min_epi32(_mm256_max_epi32(qi, _mm256_setzero_si256()), top);
            const __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(qi, qi), 0x08);
            if (in4 - k >= 8)
                _mm_storeu_si128((__m128i *)(q + k), _mm256_castsi256_si128(p));
            else /* in4 is a multiple of 4: 4 left */
                _mm_storel_epi64((__m128i *)(q + k), _mm256_castsi256_si128(p));
        }
        if (is_bad)
            memset(q, 0, (size_t)in * sizeof *q);
    }
}

/* int8 on AVX2: 4 rows x 16 outputs (2 vectors of 8) a tile, two inputs a vpmaddwd (uint8
 * inputs and int8 weights widened to int16: pair sums up to 2 x 255 x 127, exact in int32),
 * the same integer sums as the portable path and the same float epilogue */
GB_AVX2 void gb_mlp_int8_avx2(const gb_mlp *m, const struct gb_mlp_layer *l, int rows)
{
    const int k2n = l->in4 / 2;
    const __m256 zero = _mm256_setzero_ps();
    for (int r0 = 0; r0 < rows; r0 += 4)
        for (int j0 = 0; j0 < l->out16; j0 += 16) {
            __m256i acc[4][2];
            for (int r = 0; r < 4; r++)
                acc[r][0] = acc[r][1] = _mm256_setzero_si256();
            const int16_t *w0 = l->w16 + (size_t)(j0 / 8) * k2n * 16;
            const int16_t *w1 = w0 + (size_t)k2n * 16;
            const int16_t *xr = m->x16 + (size_t)r0 * l->in4;
            for (int k2 = 0; k2 < k2n; k2++) {
                const __m256i a = _mm256_load_si256((const __m256i *)(w0 + (size_t)k2 * 16));
                const __m256i b = _mm256_load_si256((const __m256i *)(w1 + (size_t)k2 * 16));
                for (int r = 0; r < 4; r++) {
                    int32_t two;
                    memcpy(&two, xr + (size_t)r * l->in4 + 2 * k2, 4);
                    const __m256i xb = _mm256_set1_epi32(two);
                    acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(xb, a));
                    acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(xb, b));
                }
            }
            for (int r = 0; r < 4; r++) {
                const __m256i xz = _mm256_set1_epi32(m->xz[r0 + r]);
                const __m256 xs = _mm256_set1_ps(m->xs[r0 + r]);
                for (int v = 0; v < 2; v++) {
                    const int j = j0 + 8 * v;
                    const __m256i d = _mm256_sub_epi32(
                        acc[r][v], _mm256_mullo_epi32(
                                       xz, _mm256_load_si256((const __m256i *)(l->wsum + j))));
                    const __m256 sc = _mm256_mul_ps(xs, _mm256_load_ps(l->ws + j));
                    __m256 o = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(d), sc),
                                             _mm256_load_ps(l->b + j));
                    if (l->s.act == GB_MLP_ACT_RELU)
                        o = _mm256_max_ps(zero, o); /* NaN stays NaN */
                    _mm256_store_ps(l->y + (size_t)(r0 + r) * l->out16 + j, o);
                }
            }
        }
}
#endif
