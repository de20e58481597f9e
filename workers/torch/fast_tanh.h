/* workers/torch/fast_tanh.h: tanh and its gradient over float arrays, vectorised for the CPU
 * this runs on (AVX-512, AVX2 or SSE2 clones, chosen once at load). Debian's libtorch 1.13 runs
 * tanh at about 1.8 ns an element on the development machine, 4x its sigmoid and most of the
 * cost of a [64, 64] tanh MLP's forward; these run at 0.13-0.25 ns.
 * The function is a rational minimax approximation (odd degree-13 numerator over an even
 * degree-6 denominator, as Eigen's float tanh) on [-7.905, 7.905], clamped outside it: at most
 * 4e-7 from tanh in absolute terms over all floats, tanh(0) = 0, odd, and NaN in gives NaN out.
 * defines: gb_tanh_forward, gb_tanh_backward, GB_CLONES */
#ifndef GB_WORKERS_TORCH_FAST_TANH_H
#define GB_WORKERS_TORCH_FAST_TANH_H

#include "runtime/base/sanitizers.h"

#include <stddef.h>

/* GB_CLONES before a C function compiles it for AVX-512, AVX2 and SSE2, chosen once at load.
 * ThreadSanitizer builds take the default clone only: the clones' resolver (an ifunc) runs while
 * the library is relocated, before TSan's runtime is set up, and crashed every process that
 * loaded it. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !GB_TSAN
#define GB_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GB_CLONES
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* y[i] = tanh(x[i]) for i < n; x and y may be the same array, never partly overlapping. */
void gb_tanh_forward(const float *x, float *y, size_t n);

/* gx[i] = g[i] * (1 - y[i]^2), the gradient through y = tanh(x); gx may be g. */
void gb_tanh_backward(const float *y, const float *g, float *gx, size_t n);

#ifdef __cplusplus
}
#endif

#endif
