/* workers/roles/dqn_mlp.h: DQN's learner for a plain MLP without libtorch, which a lone trainer
 * trains on from its first step to its last (a restored one from the checkpoint's state on),
 * writing its checkpoints itself (workers/roles/learning.h, "The learning without libtorch");
 * PPO's is ppo_mlp.h.
 *
 * What it learns is what the bridge's DQN learner learns with trainer.kernels gearbox for the
 * same configuration (dqn.cpp's dqn_train with dqn_kernels_step): the same Q network
 * (network.cpp's QNet: hidden Linear layers each followed by tanh or relu, the q head;
 * orthogonal weights with gains sqrt 2 and 1, zero biases) and its target copy, n-step returns
 * inside chunks, double Q or the target's maximum, the Huber loss with the chunks' importance
 * weights, the gradient-norm clip and Adam (betas 0.9 and 0.999, eps 1e-8) over one flat buffer,
 * lr annealing, the target's Polyak or periodic hard update, the statistics and R2D2's chunk
 * priorities. Its arithmetic is the bridge's own C (gearbox_mlp: mlp_train.h, targets.h,
 * flat_kernels.h); its initial weights are its own generator's (runtime/base/rng.h), so a seed
 * fixes them but they are not the bridge's. DQN's step draws nothing else at random.
 * tests/workers/roles/test_dqn_mlp.c trains it beside the bridge's learner from the same state.
 *
 * The flat state (flat_mlp.h) is in libtorch's parameter order, and so is the target network's
 * (gb_dqn_mlp_target): what a checkpoint copies into the bridge's learner to write
 * (gb_torch_learner_set_flat), and what a restored run's learner is filled from
 * (gb_torch_learner_get_flat).
 * Not thread-safe: one caller at a time.
 * defines: gb_dqn_mlp, gb_dqn_mlp_open, gb_dqn_mlp_close, gb_dqn_mlp_train, gb_dqn_mlp_net,
 *          gb_dqn_mlp_target */
#ifndef GB_WORKERS_ROLES_DQN_MLP_H
#define GB_WORKERS_ROLES_DQN_MLP_H

#include "runtime/base/error.h"
#include "runtime/config/config.h"
#include "workers/roles/flat_mlp.h"
#include "workers/torch/bridge.h"

#include <stdint.h>

typedef struct gb_dqn_mlp gb_dqn_mlp;

/* The learner of cfg (trainer.algorithm dqn) for the space sp (discrete actions), its weights
 * drawn from seed. GB_EUNSUPPORTED, with the reason in err (the config key that asks for
 * libtorch), when this learner cannot train cfg's model as the bridge's would: another
 * algorithm, value rescaling, and what gb_flat_mlp_supported refuses. GB_ENOMEM. */
int gb_dqn_mlp_open(const gb_config *cfg, const gb_torch_space *sp, uint64_t seed,
                    gb_dqn_mlp **out, gb_error *err);
void gb_dqn_mlp_close(gb_dqn_mlp *d);

/* gb_torch_learner_train's contract (bridge.h) for DQN: one gradient step on b (host memory;
 * b->weights: the chunks' importance weights, or NULL), stats into st (may be NULL), one new
 * priority per chunk into prio when not NULL; the train steps and the version go up by one. A
 * batch without a valid step changes no parameter. GB_EINVAL for a malformed batch, GB_ENOMEM. */
int gb_dqn_mlp_train(gb_dqn_mlp *d, const gb_torch_batch *b, gb_torch_stats *st, float *prio,
                     gb_error *err);

/* The online network, its flat state and the counters (owned by d; flat_mlp.h). */
gb_flat_mlp *gb_dqn_mlp_net(gb_dqn_mlp *d);

/* The target network's parameters: gb_dqn_mlp_net(d)->n floats in the online network's order
 * (writable, as the network's flat state: a restored run's learner is filled in place). */
float *gb_dqn_mlp_target(gb_dqn_mlp *d);

#endif
