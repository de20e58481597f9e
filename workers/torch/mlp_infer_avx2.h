/* workers/torch/mlp_infer_avx2.h: gb_mlp's paths on AVX2 and FMA (mlp_infer_avx2.c), which
 * gb_mlp_forward takes where the cpu has both and no AVX-512 VNNI.
 * defines: gb_mlp_fp32_avx2, gb_mlp_quantize_avx2, gb_mlp_int8_avx2 */
#ifndef GB_WORKERS_TORCH_MLP_INFER_AVX2_H
#define GB_WORKERS_TORCH_MLP_INFER_AVX2_H

#include "workers/torch/mlp_layout.h"

/* The AVX2 and FMA paths (call only where the cpu has both): an fp32 layer over rows input
 * rows x (leading dimension ldx); rows quantized into m->x16, m->xs, m->xz; an int8 layer over
 * them. rows: a multiple of 4. */
void gb_mlp_fp32_avx2(const struct gb_mlp_layer *l, const float *x, int ldx, int rows);
void gb_mlp_quantize_avx2(struct gb_mlp *m, const float *x, int ldx, int in, int in4, int rows);
void gb_mlp_int8_avx2(const struct gb_mlp *m, const struct gb_mlp_layer *l, int rows);

#endif
