/* workers/torch/flat_kernels.h: the CPU optimiser's arithmetic over flat float buffers (FlatAdam's
 * parameters, gradients and moments; a target network's flat copy), one loop each. libtorch
 * runs each of Adam's eight tensor operations through its dispatcher at about 6 us apiece on the
 * AMD EPYC machine, 50 us a step for a network of 4.6k parameters whose arithmetic is 3 us; these
 * do the same per element (the same operations in the same order as FlatAdam's libtorch calls,
 * contracted to FMA where the cpu has it), vectorised for the cpu (fast_tanh.h's GB_CLONES).
 * defines: gb_flat_adam, gb_flat_sumsq, gb_flat_scale, gb_flat_lerp */
#ifndef GB_WORKERS_TORCH_FLAT_KERNELS_H
#define GB_WORKERS_TORCH_FLAT_KERNELS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Adam over n elements: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g g;
 * p += -step m / (sqrt(v) / sqrt_bc2 + eps), where step = lr / (1 - b1^t), sqrt_bc2 =
 * sqrt(1 - b2^t). */
void gb_flat_adam(float *p, const float *g, float *m, float *v, size_t n, float b1, float b2,
                  float step, float sqrt_bc2, float eps);

/* The sum of x[i]^2, in double. */
double gb_flat_sumsq(const float *x, size_t n);

/* x[i] *= s */
void gb_flat_scale(float *x, size_t n, float s);

/* dst[i] += w (src[i] - dst[i]) (w < 0.5; else dst[i] = src[i] - (src[i] - dst[i]) (1 - w)), as
 * torch's lerp_. */
void gb_flat_lerp(float *dst, const float *src, size_t n, float w);

#ifdef __cplusplus
}
#endif

#endif
