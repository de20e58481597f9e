/* workers/torch/bridge.h: the libtorch bridge: models, distributions, PPO/DQN/SAC, parameter
 * export/import and checkpoints behind plain C functions and opaque handles. This is the only
 * header the C side includes; the C++ lives in the .cpp files beside it.
 * defines: gb_torch_space, gb_torch_model, gb_torch_learner, gb_torch_batch, gb_torch_stats,
 *          gb_torch_model_* , gb_torch_learner_* (data-parallel: gb_torch_learner_set_group),
 *          gb_torch_gae, gb_torch_nstep, gb_torch_huber_td, gb_torch_chunk_priorities,
 *          gb_torch_ppo_fused, gb_torch_sac_critic_fused, gb_torch_sac_actor_fused,
 *          gb_torch_set_threads, loss entry points used by the tests
 *
 * Conventions
 * - Every fallible call returns 0 or a negative GB_E* code and fills err; libtorch exceptions are
 *   caught at the boundary and become GB_ETORCH with the exception's message. Nothing here exits.
 * - Caller buffers are read in place (torch::from_blob, no copy); results are written into caller
 *   buffers. Calls block until the computation is done. A handle is used by one thread at a time.
 * - Observations are float32 (MLP) or uint8 frames in CHW order (CNN: scaled by 1/255 inside the
 *   network). Discrete actions are int64, continuous actions float32 [A] in environment units.
 *
 * Trajectory chunks (what the algorithms train on; what actors send and the replay stores) are
 * defined in runtime/streams/chunk.h: T steps of one stream with next-step reset rows (valid 0) and one
 * per-item next_obs; gb_torch_batch below is a batch of them, column by column.
 */
#ifndef GB_WORKERS_TORCH_BRIDGE_H
#define GB_WORKERS_TORCH_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

/* The runtime headers have no C++ guards of their own. */
#ifdef __cplusplus
extern "C" {
#endif

#include "runtime/config/config.h"
#include "runtime/base/dtype.h"
#include "runtime/base/error.h"
#include "runtime/streams/params.h" /* gb_param_entry: the parameter layout, from trainer to policy */

#define GB_TORCH_MAX_DIMS 8
#define GB_TORCH_MAX_ACTION_DIM 64
#define GB_TORCH_PARAM_ALIGN 64 /* every tensor's offset in a flat parameter buffer */

/* What the networks see and emit. */
typedef struct gb_torch_space {
    gb_dtype obs_dtype;                 /* GB_DTYPE_FLOAT32 or GB_DTYPE_UINT8 */
    int obs_ndim;                       /* 1 for vectors, 3 (C, H, W) for frames */
    int64_t obs_shape[GB_TORCH_MAX_DIMS];
    int discrete;                       /* 1: actions 0..n_actions-1; 0: a box of action_dim */
    int64_t n_actions;                  /* discrete */
    int64_t action_dim;                 /* continuous */
    float action_low[GB_TORCH_MAX_ACTION_DIM];  /* continuous bounds (finite for SAC) */
    float action_high[GB_TORCH_MAX_ACTION_DIM];
} gb_torch_space;

/* Sets libtorch's intra-op threads for this process (policy.threads / trainer.threads), and, on
 * the first call only, the inter-op pool to 1 thread, so that several workers on one machine do
 * not oversubscribe its cores. n >= 1. Returns 0 or GB_EINVAL/GB_ETORCH. */
int gb_torch_set_threads(int n, gb_error *err);

/* 1 when libtorch sees a CUDA device, else 0. */
int gb_torch_cuda_available(void);

/* ---------------------------------------------------------------------------------------------
 * Models: the acting network of an algorithm (PPO: actor-critic; DQN: Q-network; SAC: the
 * squashed-Gaussian actor). Built from policy.model (mlp, cnn: Nature-DQN torso for 84x84 frames
 * followed by the hidden list; orthogonal init) or loaded from policy.model.torchscript.
 *
 * TorchScript contract: the user exports a module whose forward(obs: Tensor) takes a float batch
 * [N, *obs_shape] (uint8 frames arrive as float in 0..255) and returns
 *   PPO discrete:   (logits [N, n], value [N] or [N, 1])
 *   PPO continuous: (mean [N, A], log_std [N, A] or [A], value [N] or [N, 1])
 *   DQN:            q [N, n]
 *   SAC:            (mean [N, A], log_std [N, A])  (SAC's critics are built from policy.model)
 * Example (python):
 *   class Net(torch.nn.Module):
 *       def __init__(self):
 *           super().__init__()
 *           self.body = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh())
 *           self.pi = torch.nn.Linear(64, 2); self.v = torch.nn.Linear(64, 1)
 *       def forward(self, obs):
 *           h = self.body(obs); return self.pi(h), self.v(h)
 *   torch.jit.script(Net()).save("cartpole_ac.pt")
 * Its parameters train like a built-in model's and travel through export/import the same way.
 * ------------------------------------------------------------------------------------------- */
typedef struct gb_torch_model gb_torch_model;

/* Creates the acting network for cfg->trainer.algorithm.name on cfg->policy.device, seeded from
 * seed (initialisation uses libtorch's process-wide generator under a lock; sampling uses a
 * generator owned by the model). *out is owned by the caller (gb_torch_model_destroy).
 * Returns 0, GB_EINVAL (space/config mismatch), GB_EUNSUPPORTED, GB_ENOTFOUND (torchscript file)
 * or GB_ETORCH. */
int gb_torch_model_create(const gb_config *cfg, const gb_torch_space *space, uint64_t seed,
                          gb_torch_model **out, gb_error *err);
void gb_torch_model_destroy(gb_torch_model *m);

/* Where a batched forward writes; any pointer may be NULL when not wanted.
 *   action [n] int64 or [n, A] float32: sampled (or greedy/mean when deterministic). PPO
 *          continuous actions are the raw Gaussian sample (clip to the bounds before stepping the
 *          environment; the raw value is what the chunk stores); SAC actions are squashed and
 *          scaled into [low, high].
 *   logp   [n]    log-probability of action under the policy (DQN: 0)
 *   value  [n]    PPO: V(obs); DQN: max_a Q(obs, a); SAC: 0
 *   q      [n, n_actions]  DQN only */
typedef struct gb_torch_act_out {
    void *action;
    float *logp;
    float *value;
    float *q;
} gb_torch_act_out;

/* One batched forward over n observations read in place from obs ([n, *obs_shape], the space's
 * dtype). deterministic: greedy/mean actions. epsilon: DQN's epsilon-greedy probability (ignored
 * by PPO and SAC). Blocks; no allocation proportional to anything but n. Returns 0 or GB_ETORCH. */
int gb_torch_model_act(gb_torch_model *m, const void *obs, int64_t n, int deterministic,
                       double epsilon, gb_torch_act_out *out, gb_error *err);

/* gb_torch_model_act with the exploration noise of continuous actions given: noise [n, action
 * dim] standard-normal values (actors.noise_correlation's, workers/roles/acting.h) take the place of
 * the policy's own draws (PPO: a = mean + std noise; SAC: a = tanh(mean + std noise), scaled),
 * and the log-probabilities are those of the actions so made. NULL: drawn here. Ignored for
 * discrete actions and when deterministic. */
int gb_torch_model_act_noise(gb_torch_model *m, const void *obs, int64_t n, int deterministic,
                             double epsilon, const float *noise, gb_torch_act_out *out,
                             gb_error *err);

/* The layout of this model's flat parameter buffer: every parameter and buffer of the acting
 * network in a fixed order ("torso.0.weight", "log_std", ...), each entry's offset a multiple of
 * GB_TORCH_PARAM_ALIGN. The table is the parameter stream's own type (runtime/streams/params.h), so the
 * trainer publishes it and the policy worker imports a received blob's table as they are.
 * *table points into the model (valid until destroy); *total is the buffer size in bytes.
 * Never fails. */
void gb_torch_model_layout(const gb_torch_model *m, const gb_param_entry **table, int *count,
                           uint64_t *total);

/* Copies every parameter and buffer into buf (cap >= total from gb_torch_model_layout), laid out
 * as the layout says; *version (may be NULL) receives the model's version. Returns 0, GB_EINVAL
 * (buffer too small) or GB_ETORCH. */
int gb_torch_model_export(const gb_torch_model *m, void *buf, size_t cap, uint64_t *version,
                          gb_error *err);

/* Loads a buffer written by gb_torch_model_export of an identically configured model. The
 * sender's layout table is checked entry by entry against this model's (names, dtypes, shapes,
 * offsets) and len against the total: any mismatch is GB_EINVAL naming the entry, and nothing is
 * changed. On success the model's version becomes `version`. */
int gb_torch_model_import(gb_torch_model *m, const void *buf, size_t len,
                          const gb_param_entry *table, int count, uint64_t version,
                          gb_error *err);

/* Runs this model's acting forward in precision (gb_precision, policy.precision) from now on,
 * through the kernels of the config's policy.kernels. With gearbox's (a plain MLP, the cpu has
 * AVX-512 VNNI) the whole forward is one C program (workers/torch/mlp_infer.h), for fp32 and
 * int8; int8 there quantizes the weights as below and each input row as it enters a layer.
 * Otherwise libtorch's modules run it: int8 quantizes every Linear layer's weights (per output
 * channel, symmetric) for libtorch's dynamic int8 linear, which quantizes the activations per
 * batch (in both, a layer with fewer than 16 inputs or outputs, e.g. CartPole's first layer or a
 * value head, stays fp32: quantizing its input costs more than its GEMM);
 * bf16 keeps bf16 copies of those weights and casts the layer inputs. The activations between
 * layers of a bf16 torso stay bf16; everything else (layer norms, convolutions, log_std, the
 * distributions) and every output stay fp32. The reduced copies are built now from the fp32
 * parameters and rebuilt by every gb_torch_model_import (once a parameter swap, never per
 * batch); the parameters themselves, the layout and export stay fp32. GB_PRECISION_FP32 with
 * libtorch's kernels drops them. Only for a model whose parameters change through import (not
 * a learner's, which its optimizer changes in place). Returns 0, GB_EINVAL (not a gb_precision), GB_EUNSUPPORTED (int8 off the cpu; a
 * torchscript model) or GB_ETORCH (no quantized engine in this libtorch). */
int gb_torch_model_set_precision(gb_torch_model *m, int precision, gb_error *err);

/* The quantized engine int8 runs on ("onednn", "qnnpack", "fbgemm", "x86": the fastest this
 * libtorch has, chosen once a process; the environment variable GEARBOX_QENGINE=name asks for
 * one). *name is static. Returns 0 or GB_ETORCH (none usable). */
int gb_torch_model_int8_engine(const char **name, gb_error *err);

/* What runs the model's inference forward since its last gb_torch_model_set_precision: "gearbox
 * fp32" or "gearbox int8 (avx512-vnni)" (policy.kernels gearbox: a plain MLP on a cpu with
 * AVX-512 VNNI, workers/torch/mlp_infer.h), else "libtorch fp32", "libtorch int8", "libtorch
 * bf16" or "libtorch (torchscript)". Static. */
const char *gb_torch_model_kernels(const gb_torch_model *m);

/* The network's forward alone over n observations (no sampling, outputs discarded): for
 * benchmarks that separate the layers' cost from the distributions'. Returns 0 or GB_ETORCH. */
int gb_torch_model_forward(gb_torch_model *m, const void *obs, int64_t n, gb_error *err);

/* Policy version: incremented by every training step of the learner that owns the model, set
 * by import. */
uint64_t gb_torch_model_version(const gb_torch_model *m);
/* Sets it: a restarted trainer goes on above the versions its predecessor published
 * (workers/roles/trainer.c). Training steps go on incrementing it from there. */
void gb_torch_model_set_version(gb_torch_model *m, uint64_t version);

/* ---------------------------------------------------------------------------------------------
 * Learners: an algorithm with its networks (the acting model, target networks, critics),
 * optimisers and counters.
 * ------------------------------------------------------------------------------------------- */
typedef struct gb_torch_learner gb_torch_learner;

/* Creates the algorithm of cfg->trainer.algorithm on cfg->trainer.device, seeded from seed.
 * Returns 0 or the codes of gb_torch_model_create. Owned by the caller. */
int gb_torch_learner_create(const gb_config *cfg, const gb_torch_space *space, uint64_t seed,
                            gb_torch_learner **out, gb_error *err);
void gb_torch_learner_destroy(gb_torch_learner *l);

/* The learner's own acting model (shares its parameters; owned by the learner). Inline mode acts
 * with it directly; distributed trainers export it for the parameter stream. */
gb_torch_model *gb_torch_learner_model(gb_torch_learner *l);

/* A batch of B trajectory chunks of T steps (runtime/streams/chunk.h). Arrays are C order. */
typedef struct gb_torch_batch {
    int64_t B, T;
    const void *obs;           /* [B, T, *obs_shape], the space's dtype */
    const void *next_obs;      /* [B, *obs_shape]: the observation after each chunk's last step */
    const void *action;        /* [B, T] int64 or [B, T, A] float32 (as acted) */
    const float *reward;       /* [B, T] */
    const uint8_t *terminated; /* [B, T] 0/1 */
    const uint8_t *truncated;  /* [B, T] 0/1 */
    const uint8_t *valid;      /* [B, T] 0 marks a reset step; NULL = every step valid */
    const float *logp;         /* [B, T] behaviour log-probabilities (PPO) */
    const float *weights;      /* [B] importance weights (prioritized replay); NULL = all 1 */
    int obs_on_device;         /* 1: obs and next_obs are in the learner's device memory (a
                                  cuda trainer's collection); the other columns are host */
} gb_torch_batch;

/* What one training call reports (fields that do not apply to the algorithm are 0). */
typedef struct gb_torch_stats {
    double loss;           /* total loss of the last gradient step */
    double policy_loss;    /* PPO clipped objective / SAC actor loss (epoch means for PPO) */
    double value_loss;     /* PPO value loss / DQN TD loss / SAC critic loss */
    double entropy;        /* PPO mean entropy / SAC -mean logp */
    double approx_kl;      /* PPO */
    double clip_fraction;  /* PPO */
    double explained_var;  /* PPO: of the value targets by the pre-update values */
    double q_mean;         /* DQN/SAC: mean Q of the taken actions */
    double td_abs_mean;    /* DQN/SAC: mean |TD error| */
    double alpha;          /* SAC temperature */
    double grad_norm;      /* before clipping, last step */
    double lr;             /* learning rate used */
    int64_t samples;       /* valid steps trained on */
    int64_t gradient_steps;
} gb_torch_stats;

/* Runs the configured algorithm on one batch: PPO: GAE + epochs x minibatches; DQN: one
 * gradient step on every valid step's n-step target, then the target update; SAC: one critic,
 * actor and temperature step, then the Polyak update. priorities (may be NULL) receives [B] new
 * priorities for prioritized replay (DQN/SAC: 0.9 max + 0.1 mean of |TD| over the chunk's valid
 * steps, as R2D2; PPO: mean |advantage|). Increments the model version. Blocks for the whole
 * computation. Returns 0, GB_EINVAL (malformed batch) or GB_ETORCH. */
int gb_torch_learner_train(gb_torch_learner *l, const gb_torch_batch *batch,
                           gb_torch_stats *stats, float *priorities, gb_error *err);

/* Tells the learner how far through its budget the run is (0..1), for lr annealing
 * (trainer.algorithm.lr_anneal: lr = lr0 * (1 - progress)). */
void gb_torch_learner_set_progress(gb_torch_learner *l, double progress);

/* Training steps taken so far (restored by load). */
int64_t gb_torch_learner_train_steps(const gb_torch_learner *l);

/* Saves every network, optimiser state and counter to path (serialised in memory, written to
 * path.tmp, fsynced, renamed: a crash or a full disk leaves the previous checkpoint intact and
 * no path.tmp). Returns 0, GB_EIO (the file and the system's reason, e.g. "No space left on
 * device"), GB_ENOMEM or GB_ETORCH. */
int gb_torch_learner_save(const gb_torch_learner *l, const char *path, gb_error *err);

/* Loads a checkpoint written by gb_torch_learner_save of an identically configured learner.
 * Returns 0, GB_ENOTFOUND, GB_ECORRUPT (shapes or names differ) or GB_ETORCH. */
int gb_torch_learner_load(gb_torch_learner *l, const char *path, gb_error *err);

/* ---------------------------------------------------------------------------------------------
 * Data-parallel training: N trainers, one learner replica each, joined by a process group
 * (workers/torch/group.h).
 * ------------------------------------------------------------------------------------------- */
typedef struct gb_group gb_group; /* workers/torch/group.h */

/* Data-parallel training over g (workers/torch/group.h; NULL: back to local training): the
 * learner's tensors (networks, targets, critics, temperature), optimiser states and counters
 * (train steps, model version) become rank 0's now (broadcast), and from then on every optimiser
 * step all-reduces the gradients (summed in buckets of at most bucket_bytes, 0 = 25 MiB, then
 * divided by the number of ranks that had a gradient for the parameter: the group size, unless a
 * rank had no valid step in its batch) before clipping and stepping, so every replica stays
 * bit-identical. Every rank must then call gb_torch_learner_train the same number of times, in
 * step, and pass gb_torch_learner_set_progress the same values (a rank whose batch has no valid
 * step still takes part). PPO's minibatch count per epoch is agreed across the group (the
 * largest); a rank with fewer minibatches takes part without a gradient in the extra steps.
 * Advantage normalisation stays per rank and per minibatch. The learner keeps g (owned by the
 * caller; close it only after set_group(NULL) or destroy). After a group error in train the
 * replicas may differ: call set_group again (with a new group) to resynchronise. Collective:
 * every rank calls it. Returns 0 or the group's errors (GB_ETIMEOUT, GB_ECLOSED, GB_ETORCH), or
 * GB_ECORRUPT when rank 0's state does not fit this learner (another configuration) on some
 * rank (every rank then fails, and the learner is back to local training). */
int gb_torch_learner_set_group(gb_torch_learner *l, gb_group *g, size_t bucket_bytes,
                               gb_error *err);

/* A 64-bit checksum of the bits of every tensor the learner trains or keeps (networks, targets,
 * critics, temperature), in a fixed order: equal on every rank of a data-parallel group. */
uint64_t gb_torch_learner_checksum(const gb_torch_learner *l);

/* ---------------------------------------------------------------------------------------------
 * Targets and fused losses (plain C, in targets.c and fused_losses.c; the algorithms use these
 * same functions)
 * ------------------------------------------------------------------------------------------- */

/* GAE(lambda) over B chunks of T steps. value is [B, T+1] (V of obs[t], including obs[T]).
 * Terminated steps do not bootstrap; truncated steps bootstrap from V(obs[t+1]) (the final
 * observation, see the chunk layout); both cut the recursion. Invalid (reset) steps get
 * advantage 0 and return V. valid may be NULL. adv, ret: [B, T]. */
void gb_torch_gae(int64_t B, int64_t T, const float *reward, const float *value,
                  const uint8_t *terminated, const uint8_t *truncated, const uint8_t *valid,
                  double gamma, double lambda, float *adv, float *ret);

/* n-step targets inside chunks: for each valid step t, G = sum_{k<m} gamma^k r[t+k] where the
 * window of m <= n steps stops after an episode end or at the chunk's end; boot[t] = t + m (the
 * obs row to bootstrap from) and disc[t] = gamma^m, or 0 when step t+m-1 terminated. Invalid
 * steps get G = 0, disc = 0, boot = t. ret, disc: [B, T] float; boot: [B, T] int64. */
void gb_torch_nstep(int64_t B, int64_t T, int64_t n, double gamma, const float *reward,
                    const uint8_t *terminated, const uint8_t *truncated, const uint8_t *valid,
                    float *ret, float *disc, int64_t *boot);

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

/* DQN's linear epsilon schedule: epsilon_start -> epsilon_end over epsilon_decay_steps env
 * steps. */
double gb_torch_dqn_epsilon(const gb_config_dqn *dqn, int64_t env_steps);

/* ---------------------------------------------------------------------------------------------
 * Loss entry points: the exact functions the algorithms call, on caller arrays, so that tests
 * can check them against independently computed values. All return 0 or GB_ETORCH.
 * ------------------------------------------------------------------------------------------- */

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

#ifdef __cplusplus
}
#endif

#endif
