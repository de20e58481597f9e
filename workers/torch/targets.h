/* workers/torch/targets.h: the bridge's plain-C arithmetic (targets.c: GAE and n-step returns;
 * fused_losses.c: the CPU learners' losses with their gradients in one pass). The algorithms call
 * these; the tests check them against independently computed values. Not part of the table
 * (workers/torch/bridge.h): the bridge's own files, its tests and the trainer's PPO learner
 * without libtorch (workers/roles/ppo_mlp.c) call them; they are in gearbox_mlp, which needs no
 * libtorch.
 * defines: gb_torch_gae, gb_torch_vtrace, gb_torch_nstep, gb_torch_valid_rows, gb_torch_huber_td,
 *          gb_torch_chunk_priorities, gb_torch_ppo_fused, gb_torch_ppo_coefs, gb_torch_ppo_terms,
 *          gb_torch_ppo_adv_stats, gb_torch_ppo_fused_rows,
 *          gb_torch_ppo_terms_add, gb_torch_ppo_terms_means, gb_torch_categorical_terms,
 *          gb_torch_categorical_grads, gb_torch_gaussian_terms, gb_torch_gaussian_grads,
 *          gb_torch_sac_critic_fused, gb_torch_sac_actor_fused */
#ifndef GB_WORKERS_TORCH_TARGETS_H
#define GB_WORKERS_TORCH_TARGETS_H

#include "workers/torch/bridge.h" /* gb_torch_stats */

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* GAE(lambda) over B chunks of T steps. value is [B, T+1] (V of obs[t], including obs[T]).
 * Terminated steps do not bootstrap; truncated steps bootstrap from V(obs[t+1]) (the final
 * observation, see the chunk layout); both cut the recursion. Invalid (reset) steps get
 * advantage 0 and return V. valid may be NULL. adv, ret: [B, T]. */
void gb_torch_gae(int64_t B, int64_t T, const float *reward, const float *value,
                  const uint8_t *terminated, const uint8_t *truncated, const uint8_t *valid,
                  double gamma, double lambda, float *adv, float *ret);

/* V-trace (Espeholt et al., 2018, IMPALA) over B chunks of T steps acted by a behaviour
 * policy mu, for a learner policy pi: log_rho [B, T] = log pi(a_t|x_t) - log mu(a_t|x_t);
 * rho_t = min(rho_bar, e^log_rho), c_t = lambda min(c_bar, e^log_rho). value [B, T+1] as GAE's.
 * delta_t = rho_t (r_t + gamma V(x_{t+1}) - V(x_t)) (no bootstrap after a terminated step; a
 * truncated one bootstraps from the final observation); vs_t - V(x_t) = delta_t + gamma c_t
 * (vs_{t+1} - V(x_{t+1})), the recursion cut at an episode end and vs_T = V(x_T) at the chunk's
 * end. vs [B, T]: the value targets; adv [B, T]: the policy gradient's advantages rho_t (r_t +
 * gamma vs_{t+1} - V(x_t)) (vs_{t+1} = V(x_{t+1}) past an episode or chunk end). Reset steps
 * (valid 0): adv 0, vs V. With log_rho all 0, rho_bar, c_bar >= 1, vs is GAE's return and adv
 * is GAE(lambda = 1)'s one-step form. */
void gb_torch_vtrace(int64_t B, int64_t T, const float *reward, const float *value,
                     const uint8_t *terminated, const uint8_t *truncated, const uint8_t *valid,
                     const float *log_rho, double gamma, double lambda, double rho_bar,
                     double c_bar, float *vs, float *adv);

/* n-step targets inside chunks: for each valid step t, G = sum_{k<m} gamma^k r[t+k] where the
 * window of m <= n steps stops after an episode end or at the chunk's end; boot[t] = t + m (the
 * obs row to bootstrap from) and disc[t] = gamma^m, or 0 when step t+m-1 terminated. Invalid
 * steps get G = 0, disc = 0, boot = t. ret, disc: [B, T] float; boot: [B, T] int64. */
void gb_torch_nstep(int64_t B, int64_t T, int64_t n, double gamma, const float *reward,
                    const uint8_t *terminated, const uint8_t *truncated, const uint8_t *valid,
                    float *ret, float *disc, int64_t *boot);

/* The valid steps of B chunks of T steps (valid NULL: every step), in order: each one's step
 * index (chunk * T + t) into step, its observation's row among the [B*(T+1)] rows of each
 * chunk's T steps then its next observation (chunk * (T+1) + t) into row, and with boot
 * (gb_torch_nstep's) the row it bootstraps from (chunk * (T+1) + boot[step]) into brow (both
 * NULL: none). step, row and brow hold B*T. Returns how many. */
int64_t gb_torch_valid_rows(int64_t B, int64_t T, const uint8_t *valid, const int64_t *boot,
                            int64_t *step, int64_t *row, int64_t *brow);

/* DQN's loss and its gradient in one pass over n valid steps (the CPU learner's; the same
 * arithmetic as gb_torch_dqn_loss, in float with a double sum): e = y - q, returns
 * mean(w huber_delta(e)) (delta <= 0: e^2 / 2), grad[i] = d loss / d q[i], td_abs[i] = |e[i]|
 * (td_abs may be NULL). w may be NULL (all 1). */
double gb_torch_huber_td(const float *q, const float *y, const float *w, int64_t n, double delta,
                         float *grad, float *td_abs);

/* Chunk priorities for prioritized replay (R2D2's mix): prio[b] = 0.9 max + 0.1 mean of |TD|
 * over chunk b's valid steps, + 1e-6 (no valid step: 1e-6). steps [n]: the valid steps' indices
 * into [B*T], ascending; td_abs [n] their |TD|. */
void gb_torch_chunk_priorities(int64_t B, int64_t T, const int64_t *steps,
                               const float *td_abs, int64_t n, float *prio);

/* PPO's clipped objective and its gradients in one pass over a minibatch of n samples (the CPU
 * learner's; the arithmetic of gb_torch_ppo_loss). aux [n, 4]: rows of (behaviour logp,
 * advantage, value before the update, return); the advantages are normalised first when
 * normalize (mean, unbiased std + 1e-8, as PPO's minibatches). out->entropy is the caller's
 * mean entropy (in), which total takes as -entropy_coef x it; the entropy's gradient is the
 * constant -entropy_coef / its count, not written here. g_logp[i] = d total / d new_logp[i],
 * g_value[i] = d total / d value[i]; out gets the policy and value losses, total, approx_kl
 * and clip_fraction. */
typedef struct gb_torch_ppo_coefs {
    double clip, value_coef, entropy_coef;
    int clip_value, normalize;
} gb_torch_ppo_coefs;
typedef struct gb_torch_ppo_terms {
    double policy, value, total, approx_kl, clip_fraction, entropy;
} gb_torch_ppo_terms;
void gb_torch_ppo_fused(int64_t n, const float *new_logp, const float *value,
                        const float *aux, const gb_torch_ppo_coefs *c, float *g_logp,
                        float *g_value, gb_torch_ppo_terms *out);

/* gb_torch_ppo_fused in two steps, for a minibatch whose rows are taken in shares (threads):
 * adv_stats, the normalisation of its n advantages a[i * stride] (mean, 1 / (unbiased std +
 * 1e-8); 0 and 1 unless normalize and n >= 2); fused_rows, a share of its rows with those and
 * scale (1 / the minibatch's n) in the gradients, the share's sums (not means: the squared value
 * errors without the 0.5, the clipped rows' count) into sums' policy, value, approx_kl and
 * clip_fraction. Over all the rows at once the same floats as gb_torch_ppo_fused. */
void gb_torch_ppo_adv_stats(int64_t n, const float *a, int64_t stride, int normalize,
                            double *mean, double *inv_std);
void gb_torch_ppo_fused_rows(int64_t n, const float *new_logp, const float *value,
                             const float *aux, const gb_torch_ppo_coefs *c, double mean,
                             double inv_std, float scale, float *g_logp, float *g_value,
                             gb_torch_ppo_terms *sums);

/* A training call's PPO statistics: sum adds one minibatch's terms t (policy, value, entropy,
 * approx_kl, clip_fraction); means writes the means of count such into st's policy_loss,
 * value_loss, entropy, approx_kl and clip_fraction (nothing when count is 0). */
void gb_torch_ppo_terms_add(gb_torch_ppo_terms *sum, const gb_torch_ppo_terms *t);
void gb_torch_ppo_terms_means(const gb_torch_ppo_terms *sum, int64_t count, gb_torch_stats *st);

/* PPO's distributions over a minibatch's n rows of the policy head's A outputs, for the fused
 * loss's inputs and from its gradients (the arithmetic of distributions.cpp, in float).
 * categorical_terms: rows of logits x [n, A]: the log-probabilities of the actions a into logp,
 * the entropies into ent; x becomes log_softmax(x). categorical_grads: into the place of those
 * log_softmax rows, the logits' gradient of g_logp[i] logp[i] + ge ent[i] (d logp = onehot(a) -
 * p, d ent = -p (log p + ent)). gaussian_terms: rows of means m [n, A] with one log_std ls [A]
 * for every row: the log-probabilities of the actions act [n, A] into logp, the entropies into
 * ent; m becomes the standardised actions z. gaussian_grads: into the place of those z rows, the
 * means' gradient of g_logp[i] logp[i] (z e^-ls); log_std's (z^2 - 1, and ge for each row's
 * entropy) added into dls [A]. */
void gb_torch_categorical_terms(float *x, int64_t n, int A, const int64_t *a, float *logp,
                                float *ent);
void gb_torch_categorical_grads(float *x, int64_t n, int A, const int64_t *a, const float *ent,
                                const float *g_logp, float ge);
void gb_torch_gaussian_terms(float *m, int64_t n, int A, const float *ls, const float *act,
                             float *logp, float *ent);
void gb_torch_gaussian_grads(float *z, int64_t n, int A, const float *ls, const float *g_logp,
                             float ge, float *dls);

/* SAC's critic loss and its gradients in one pass over n samples (the CPU learner's; the
 * arithmetic of gb_torch_sac_loss's critic): returns mean(w (q1 - y)^2) + mean(w (q2 - y)^2),
 * g1[i] = d loss / d q1[i], g2 likewise, td_abs[i] = |q1[i] - y[i]| (may be NULL). w may be
 * NULL (all 1). */
double gb_torch_sac_critic_fused(const float *q1, const float *q2, const float *y, const float *w,
                                 int64_t n, float *g1, float *g2, float *td_abs);

/* SAC's actor loss mean(alpha logp - min(q1, q2)) over n samples and its gradients in logp and
 * in the critics' values of the actor's actions (min passes its gradient as libtorch's does:
 * to the smaller, half each at a tie); *logp_mean receives mean(logp). */
double gb_torch_sac_actor_fused(const float *logp, const float *q1, const float *q2, int64_t n,
                                double alpha, float *g_logp, float *g_q1, float *g_q2,
                                double *logp_mean);

#ifdef __cplusplus
}
#endif

#endif
