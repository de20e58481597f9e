/* workers/torch/squashed.h: SAC's tanh-squashed Gaussian actions in C, for the CPU learner's
 * step on gearbox's kernels (sac_kernels.cpp): the reparameterised draw with its
 * log-probability, and the gradients through both back to the actor's two heads. The same
 * arithmetic as the autograd path (network.cpp's SacActor heads, sac.cpp's sample,
 * distributions.cpp's squashed_logp), in float as libtorch's.
 * defines: gb_squashed_draw, gb_squashed_backward */
#ifndef GB_WORKERS_TORCH_SQUASHED_H
#define GB_WORKERS_TORCH_SQUASHED_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* n rows of A actions from the heads' outputs mean and raw (the log_std head's Linear, squashed
 * into log_std = -5 + 3.5 (tanh(raw) + 1), as SacActor's) and the noise eps (standard normal):
 * u = mean + e^log_std eps and the action tanh(u) into u's and a's rows; each row's
 * log-probability of a, less log_scale (the sum of the log action scales: the density of the
 * environment's action), into logp [n]. ls receives log_std's rows (for the backward). */
void gb_squashed_draw(int64_t n, int A, const float *mean, const float *raw, const float *eps,
                      float log_scale, float *ls, float *u, float *a, float *logp);

/* The gradients with respect to the heads' outputs of a loss L whose gradient is ga (d L / d a,
 * [n][A]; NULL: none) and g_logp (d L / d logp, [n]), through the draw just made (the same mean,
 * raw, eps, ls, u and a): into dmean and draw ([n][A], overwritten). Both of autograd's paths:
 * through u = mean + e^log_std eps, and through log_std and mean inside the Gaussian's density. */
void gb_squashed_backward(int64_t n, int A, const float *mean, const float *raw, const float *eps,
                          const float *ls, const float *u, const float *a, const float *ga,
                          const float *g_logp, float *dmean, float *draw);

#ifdef __cplusplus
}
#endif

#endif
