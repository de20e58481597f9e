/* workers/torch/sampling.h: the acting distributions' draws and log-probabilities over rows of
 * network outputs, in plain loops over floats: what the policy worker runs on every batch after
 * the forward. Through libtorch's tensor ops the same work cost about 40 us a batch whatever its
 * size (a dozen ops of 2-4 us each), as much as the default MLP's whole forward. The random
 * numbers come from the caller (drawn from the model's generator), so that a seed still fixes
 * every action. Formulas as workers/torch/distributions.cpp's.
 * defines: gb_sample_categorical, gb_sample_epsilon_greedy, gb_sample_gaussian,
 *          gb_sample_squashed */
#ifndef GB_WORKERS_TORCH_SAMPLING_H
#define GB_WORKERS_TORCH_SAMPLING_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Categorical over logits [n][k]: a[i] drawn with probabilities softmax(logits[i]) by inverse
 * CDF from u[i] in [0, 1) (u NULL: the argmax, the first of equal ones); logp[i] its
 * log-softmax. A row with a non-finite logit draws uniformly and keeps a non-finite log-
 * probability wherever the chosen logit or the normaliser is not finite (its chunk is then
 * refused at the trainer, gb_chunk_nonfinite), as libtorch's path did. logp may be NULL. */
void gb_sample_categorical(const float *logits, int64_t n, int64_t k, const float *u, int64_t *a,
                           float *logp);

/* Epsilon-greedy over Q-values q [n][k]: the argmax (NaN counts as the largest, as torch's
 * argmax), replaced by a uniform action when u[2i] < epsilon, the action floor(u[2i+1] * k);
 * u NULL: greedy. value[i] = the row's max Q (NULL: not written). */
void gb_sample_epsilon_greedy(const float *q, int64_t n, int64_t k, double epsilon,
                              const float *u, int64_t *a, float *value);

/* Diagonal Gaussian: x = mean + exp(log_std) * noise (noise [n][d], NULL: x = mean);
 * logp[i] = sum over d of -z^2 / 2 - log_std - log sqrt(2 pi), z = (x - mean) / std. */
void gb_sample_gaussian(const float *mean, const float *log_std, int64_t n, int64_t d,
                        const float *noise, float *x, float *logp);

/* Squashed Gaussian (SAC): u = mean + exp(log_std) * noise (NULL: mean), action = tanh(u) *
 * scale + bias, logp = the Gaussian's at u - sum log(1 - tanh(u)^2) - sum log(scale), the
 * correction as 2 (log 2 - u - softplus(-2u)) (stable for large |u|). scale and bias: [d]. */
void gb_sample_squashed(const float *mean, const float *log_std, int64_t n, int64_t d,
                        const float *noise, const float *scale, const float *bias, float *action,
                        float *logp);

#ifdef __cplusplus
}
#endif

#endif
