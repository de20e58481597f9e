/* workers/torch/mlp_layout.h: gb_mlp's insides, shared by its portable and AVX-512 paths
 * (mlp_infer.c) and its AVX2 ones (mlp_infer_avx2.c): the program, its layers' weights as each
 * path reads them (mlp_infer.c says how they are laid out) and each row's quantization.
 * defines: struct gb_mlp_layer, struct gb_mlp, GB_MLP_BLOCK, gb_mlp_row_params */
#ifndef GB_WORKERS_TORCH_MLP_LAYOUT_H
#define GB_WORKERS_TORCH_MLP_LAYOUT_H

#include "workers/torch/mlp_infer.h"

#include <math.h>

#define GB_MLP_BLOCK 32 /* rows a block: a multiple of 4 */

struct gb_mlp_layer {
    gb_mlp_layer_spec s;
    int in4, out16;
    float *wt;     /* fp32: [in][out16] */
    int8_t *wq;    /* int8: [out16 / 16][in4 / 4][64] */
    int16_t *w16;  /* int8: [out16 / 8][in4 / 2][16], the AVX2 path's */
    float *ws;     /* int8: [out16] weight scales */
    int32_t *wsum; /* int8: [out16] sums of the quantized weights */
    float *b;      /* [out16] */
    float *y;      /* [GB_MLP_BLOCK][out16]: the block's output */
};

struct gb_mlp {
    int n, in0, in0_4, path; /* path: GB_MLP_PATH_* */
    struct gb_mlp_layer *l;
    float *x;     /* [GB_MLP_BLOCK][in0_4]: the block's input rows, zero-padded */
    uint8_t *xq;  /* [GB_MLP_BLOCK][max in4]: an int8 layer's quantized input rows */
    int16_t *x16; /* [GB_MLP_BLOCK][max in4]: the same, widened (the AVX2 path) */
    float *xs;    /* [GB_MLP_BLOCK]: their scales (NaN: a row with a non-finite input) */
    int32_t *xz;  /* [GB_MLP_BLOCK]: their zero points */
};

/* Row r's quantization parameters from its in features: the range [min, max], widened to hold
 * 0, mapped onto 0..255. Returns 1/scale; a row with a non-finite feature gets a NaN scale, so
 * that its outputs are NaN as in fp32. */
static inline float gb_mlp_row_params(float mn, float mx, int bad, float *scale, int32_t *zero)
{
    float s = (mx - mn) / 255.0f;
    if (bad || !isfinite(s)) {
        *scale = NAN;
        *zero = 0;
        return 0.0f;
    }
    if (s == 0.0f)
        s = 1.0f;
    const float inv = 1.0f / s;
    *scale = s;
    *zero = (int32_t)lrintf(-mn * inv);
    return inv;
}

#endif
