/* workers/torch/testing.h: the bridge's test hooks: the loss entry points the algorithms use,
 * callable on caller arrays, and a writer of a TorchScript test module. Only tests call these
 * (they link the bridge, gearbox_torch); they are not in the table (workers/torch/bridge.h).
 * defines: gb_torch_squashed_gaussian_logp, gb_torch_ppo_loss, gb_torch_dqn_loss,
 *          gb_torch_sac_loss, gb_torch_write_test_script, gb_torch_write_test_script_state,
 *          gb_torch_learner_sequence, gb_torch_learner_q_rows, gb_torch_value_rescale */
#ifndef GB_WORKERS_TORCH_TESTING_H
#define GB_WORKERS_TORCH_TESTING_H

#include "workers/torch/bridge.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Loss entry points: the exact functions the algorithms call, on caller arrays, so that tests
 * can check them against independently computed values. All return 0 or GB_ETORCH. */

/* log pi(a|s) of a tanh-squashed diagonal Gaussian at pre-squash u [n, A], with the
 * change-of-variables correction sum log(1 - tanh(u)^2) (computed stably) and the affine scale
 * to [low, high] (sum log((high-low)/2)) when scale != NULL ([A] = (high-low)/2). out [n]. */
int gb_torch_squashed_gaussian_logp(const float *mean, const float *log_std, const float *u,
                                    int64_t n, int64_t A, const float *scale, float *out,
                                    gb_error *err);

/* PPO losses over n samples: policy = -mean(min(r A, clip(r, 1-c, 1+c) A)) with
 * r = exp(new_logp - old_logp); value = 0.5 mean((v - ret)^2), or with clip_value the max of
 * that and the clipped (old_v + clip(v - old_v, -c, c)) version; total = policy +
 * value_coef value - entropy_coef mean(entropy). out[0..2] = policy, value, total. */
int gb_torch_ppo_loss(const float *new_logp, const float *old_logp, const float *adv,
                      const float *v, const float *old_v, const float *ret, const float *entropy,
                      int64_t n, double clip, int clip_value, double value_coef,
                      double entropy_coef, double out[3], gb_error *err);

/* DQN loss: mean(w * huber_delta(q - y)) (delta <= 0: squared error / 2); w may be NULL.
 * out[0] = loss; td [n] (may be NULL) receives y - q. */
int gb_torch_dqn_loss(const float *q, const float *y, const float *w, int64_t n, double delta,
                      double *out, float *td, gb_error *err);

/* SAC losses over n samples:
 *   y = r + disc (min(q1t, q2t) - alpha logp_next)
 *   critic = mean(w (q1 - y)^2) + mean(w (q2 - y)^2)
 *   actor  = mean(alpha logp_pi - min(q1_pi, q2_pi))
 *   temperature = -mean(log_alpha (logp_pi + target_entropy))
 * out[0..3] = critic, actor, temperature, mean y. w may be NULL. */
int gb_torch_sac_loss(const float *q1, const float *q2, const float *q1t, const float *q2t,
                      const float *r, const float *disc, const float *logp_next,
                      const float *q1_pi, const float *q2_pi, const float *logp_pi,
                      const float *w, int64_t n, double log_alpha, double target_entropy,
                      double out[4], gb_error *err);

/* For tests (no PyTorch needed): writes a TorchScript module with the PPO discrete contract
 * (forward(obs) -> (obs W_pi^T, obs w_v^T), plus a buffer), as a user's export would be.
 * Returns 0 or GB_ETORCH. */
int gb_torch_write_test_script(const char *path, int64_t obs_dim, int64_t n_actions,
                               uint64_t seed, gb_error *err);

/* The same with state_size floats of state a row (policy.model.torchscript_state): forward(obs,
 * state) -> (h W_pi^T, h w_v^T, h) for algo GB_ALGO_PPO, (h W_pi^T, h) (DQN's q and the next
 * state) for GB_ALGO_DQN, with h = tanh([obs, state] W_s^T), and the attribute state_size.
 * Returns 0, GB_EINVAL or GB_ETORCH. */
int gb_torch_write_test_script_state(const char *path, int64_t obs_dim, int64_t n_actions,
                                     int64_t state_size, int algo, uint64_t seed, gb_error *err);

/* The forward a PPO learner trains on (recurrent PPO's; without a core the plain forward): its
 * model over batch b's chunks as sequences from b->state0 with the reset rule of bridge.h's
 * "Cores". logp [B, T] (may be NULL) receives the log-probabilities of b's actions, value
 * [B, T+1] (may be NULL) the values, row T of each chunk next_obs's. Returns 0, GB_EINVAL or
 * GB_ETORCH. */
int gb_torch_learner_sequence(gb_torch_learner *l, const gb_torch_batch *b, float *logp,
                              float *value, gb_error *err);

/* The online Q-values a DQN learner trains on, q [B, T+1, n actions] (row T: next_obs's):
 * without a core its forward of every row; with one (R2D2), each chunk replayed from b->state0,
 * its first dqn.burn_in rows stepped one at a time, the rest as one sequence from the state
 * they leave (the Q of the burn-in rows from their steps). Returns 0, GB_EINVAL or GB_ETORCH. */
int gb_torch_learner_q_rows(gb_torch_learner *l, const gb_torch_batch *b, float *q,
                            gb_error *err);

/* R2D2's value rescaling as dqn.value_rescale applies it to n values: h(x) = sign(x)
 * (sqrt(|x| + 1) - 1) + 0.001 x, or its inverse. Returns 0 or GB_ETORCH. */
int gb_torch_value_rescale(const float *x, int64_t n, int inverse, float *out, gb_error *err);

#ifdef __cplusplus
}
#endif

#endif
