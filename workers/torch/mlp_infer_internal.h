/* workers/torch/mlp_infer_internal.h: gb_mlp's insides, shared by the portable and AVX-512
 * paths (mlp_infer.c) and the AVX2 ones (mlp_infer_avx2.c); see mlp_infer.c for the layouts.
 * defines: struct gb_mlp_layer, struct gb_mlp, BLOCK, gb_mlp_row_params and the AVX2
 *          paths */
#ifndef GB_WORKERS_TORCH_MLP_INFER_INTERNAL_H
#define GB_WORKERS_TORCH_MLP_INFER_INTERNAL_H

#include "workers/torch/mlp_infer.h"

#define BLOCK 32 /* rows a block: a multiple of 4 */

struct gb_mlp_layer {
    gb_mlp_layer_spec s;
    int in4, out16;
    float *wt;     /* fp32: [in][out16] */
    int8_t *wq;    /* int8: [out16 / 16][in4 / 4][64] */
    int16_t *w16;  /* int8: [out16 / 8][in4 / 2][16], the AVX2 path's */
    float *ws;     /* int8: [out16] weight scales */
    int32_t *wsum; /* int8: [out16] sums of the quantized weights */
    float *b;      /* [out16] */
    float *y;      /* [BLOCK][out16]: the block's output */
};

struct gb_mlp {
    int n, in0, in0_4, path; /* path: GB_MLP_PATH_* */
    struct gb_mlp_layer *l;
    float *x;     /* [BLOCK][in0_4]: the block's input rows, zero-padded */
    uint8_t *xq;  /* [BLOCK][max in4]: an int8 layer's quantized input rows */
    int16_t *x16; /* [BLOCK][max in4]: the same, widened (the AVX2 path) */
    float *xs;    /* [BLOCK]: their scales (NaN: a row with a non-finite input) */
    int32_t *xz;  /* [BLOCK]: their zero points */
};

/* Row r's quantization parameters from its features' range [mn, max] (bad: a non-finite one):
 * see mlp_infer.c. Returns 1/scale. */
float gb_mlp_row_params(float mn, float mx, int bad, float *scale, int32_t *zero);

/* The AVX2 and FMA paths (call only where the cpu has both): an fp32 layer over rows input
 * rows x (leading dimension ldx); rows quantized into m->x16, m->xs, m->xz; an int8 layer over
 * them. rows: a multiple of 4. */
void gb_mlp_fp32_avx2(const struct gb_mlp_layer *l, const float *x, int ldx, int rows);
void gb_mlp_quantize_avx2(struct gb_mlp *m, const float *x, int ldx, int in, int in4, int rows);
void gb_mlp_int8_avx2(const struct gb_mlp *m, const struct gb_mlp_layer *l, int rows);

#endif
