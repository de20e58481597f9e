/* workers/roles/sac_mlp.h: SAC's learner for a plain MLP without libtorch, which a lone trainer
 * trains on from its first step to its last (a restored one from the checkpoint's state on),
 * writing its checkpoints itself (workers/roles/learning.h, "The learning without libtorch");
 * PPO's is ppo_mlp.h, DQN's dqn_mlp.h.
 *
 * What it learns is what the bridge's SAC learner learns with trainer.kernels gearbox for the
 * same configuration (sac.cpp's sac_train with sac_kernels.cpp's steps): the same actor
 * (network.cpp's SacActor: hidden Linear layers each followed by tanh or relu, then the mean
 * and log_std heads, log_std squashed into [-5, 2]; orthogonal weights with gains sqrt 2 and
 * 0.01, zero biases), twin critics of the observation and the action (gains sqrt 2 and 1) with
 * their Polyak targets, one-step targets inside chunks with a fresh action from the next
 * observation, the critics' loss with the chunks' importance weights, the actor's loss through
 * the critics' input gradients and the squashed Gaussian's, the learned temperature against
 * its target entropy; three optimisers as the bridge's three FlatAdams (betas 0.9 and 0.999,
 * eps 1e-8; the actor's and the critics' each clipped to max_grad_norm, lr annealed; the
 * temperature's at alpha_lr), the statistics and R2D2's chunk priorities. Its arithmetic is
 * the bridge's own C (gearbox_mlp: mlp_train.h, squashed.h, targets.h, flat_kernels.h); its
 * random numbers (the initial weights, each step's noise) are its own generator's
 * (runtime/base/rng.h): a seed fixes them, they are not the bridge's. Each call's noise is
 * drawn from a stream of the seed and its training step, so the flat state and the step are
 * all a checkpoint needs for a restored learner to go on as this one would have.
 * tests/workers/roles/test_sac_mlp.c trains it beside the bridge's learner from the same state
 * on the same noise (gb_sac_mlp_set_noise, gb_torch_learner_set_noise).
 *
 * The flat state (flat_mlp.h) is SAC's as gb_torch_learner_set_flat takes it: the actor's
 * parameters in libtorch's order (the layout: what goes out on the parameter stream), then the
 * critics' (q1's, then q2's: the bridge's opt_q), then log_alpha, with Adam's moments alike
 * and one step count; the target critics (gb_sac_mlp_target) are laid out as the critics.
 * Not thread-safe: one caller at a time.
 * defines: gb_sac_mlp, gb_sac_mlp_open, gb_sac_mlp_close, gb_sac_mlp_train, gb_sac_mlp_net,
 *          gb_sac_mlp_target, gb_sac_mlp_target_floats, gb_sac_mlp_set_noise */
#ifndef GB_WORKERS_ROLES_SAC_MLP_H
#define GB_WORKERS_ROLES_SAC_MLP_H

#include "runtime/base/error.h"
#include "runtime/config/config.h"
#include "workers/roles/flat_mlp.h"
#include "workers/torch/bridge.h"

#include <stdint.h>

typedef struct gb_sac_mlp gb_sac_mlp;

/* The learner of cfg (trainer.algorithm sac) for the space sp (a box with finite bounds), its
 * weights drawn from seed. GB_EUNSUPPORTED, with the reason in err (the config key that asks
 * for libtorch), when this learner cannot train cfg's model as the bridge's would: another
 * algorithm, and what gb_flat_mlp_supported refuses. GB_ENOMEM. */
int gb_sac_mlp_open(const gb_config *cfg, const gb_torch_space *sp, uint64_t seed,
                    gb_sac_mlp **out, gb_error *err);
void gb_sac_mlp_close(gb_sac_mlp *s);

/* gb_torch_learner_train's contract (bridge.h) for SAC: one gradient step of the critics, the
 * actor and the temperature on b (host memory; no valid step: nothing changes), stats into st
 * (may be NULL), one new priority per chunk into prio when not NULL; the train steps and the
 * version go up by one. GB_EINVAL for a malformed batch, GB_ENOMEM. */
int gb_sac_mlp_train(gb_sac_mlp *s, const gb_torch_batch *b, gb_torch_stats *st, float *prio,
                     gb_error *err);

/* The flat state (owned by s; above) and the counters: layout, export, version, training
 * steps, progress. */
gb_flat_mlp *gb_sac_mlp_net(gb_sac_mlp *s);

/* The target critics' parameters: as many floats as the critics' block, in its order. */
float *gb_sac_mlp_target(gb_sac_mlp *s);
/* How many: the critics' block's floats. */
int64_t gb_sac_mlp_target_floats(const gb_sac_mlp *s);

/* The standard-normal noise of every draw from now on from fill (ctx, out, n: n floats, the
 * draw's [rows][action_dim]) instead of the generator (NULL: the generator again): a test's
 * way to train this learner and the bridge's on the same noise. */
void gb_sac_mlp_set_noise(gb_sac_mlp *s, void (*fill)(void *ctx, float *out, int64_t n),
                          void *ctx);

#endif
