/* workers/roles/ppo_mlp.h: PPO's learner for a plain MLP without libtorch, which a lone trainer
 * trains on from its first step to its last (a restored one from the checkpoint's state on),
 * writing its checkpoints itself (workers/roles/learning.h, "The learning without libtorch").
 * Loading libtorch takes 0.4-0.6 s of a trainer's start on the 2-core development machine (289
 * libraries, its operator registration), a third of a CartPole run; the policy worker serves
 * without it (policy_mlp.h) and waits for the trainer's first parameters.
 *
 * A model with policy.model.core lstm or gru trains here too (ppo_core.c): network.cpp's
 * ActorCritic with a core (torso, core and heads shared by actor and critic), its values over
 * whole chunks from their state0 and ppo_seq.cpp's epochs over minibatches of whole chunks with
 * the gradient through each chunk, the core's arithmetic workers/torch/core_train.h's; the
 * bridge's recurrent PPO computes the same (tests/workers/roles/test_ppo_core.c).
 * What it learns is what the bridge's PPO learner learns with trainer.kernels gearbox for the
 * same configuration (ppo.cpp's epochs with ppo_kernels.cpp's minibatch step): the same network
 * (workers/torch/network.cpp's ActorCritic with separate actor and critic torsos: hidden Linear
 * layers each followed by tanh or relu, pi and v heads, log_std for boxes; orthogonal weights
 * with gains sqrt 2, 0.01 and 1, zero biases), GAE targets, the valid steps in minibatches
 * shuffled every epoch, the clipped objective with its options, the gradient-norm clip and Adam
 * (betas 0.9 and 0.999, eps 1e-5) over one flat buffer, lr annealing, the statistics and the
 * chunk priorities. Its arithmetic is the bridge's own C (gearbox_mlp: mlp_train.h,
 * targets.h, flat_kernels.h); its random numbers (the initial weights, the shuffles) are its
 * own generator's (runtime/base/rng.h), so a seed fixes them but they are not the bridge's.
 * Each call's shuffles are drawn from a stream of the seed and its training step, so the flat
 * state and the step are all a checkpoint needs for a restored learner to go on as this one
 * would have. tests/workers/roles/test_ppo_mlp.c trains it beside the bridge's learner from the
 * same state.
 *
 * The flat state (flat_mlp.h: parameters, Adam's moments, its step count) is in libtorch's
 * parameter order, which the bridge's learner takes (gb_torch_learner_set_flat) and gives
 * back (gb_torch_learner_get_flat); the
 * parameter layout (names, shapes, 64-byte aligned offsets) is the bridge model's
 * (gb_torch_model_layout), so its exports go out on the parameter stream as the bridge's would.
 * dqn_mlp.h is DQN's counterpart.
 * Not thread-safe: one caller at a time.
 * defines: gb_ppo_mlp, gb_ppo_mlp_open, gb_ppo_mlp_close, gb_ppo_mlp_train, gb_ppo_mlp_net */
#ifndef GB_WORKERS_ROLES_PPO_MLP_H
#define GB_WORKERS_ROLES_PPO_MLP_H

#include "runtime/base/error.h"
#include "runtime/config/config.h"
#include "workers/roles/flat_mlp.h"
#include "workers/torch/bridge.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gb_ppo_mlp gb_ppo_mlp;

/* The learner of cfg (trainer.algorithm ppo) for the space sp, its weights drawn from seed.
 * GB_EUNSUPPORTED, with the reason in err (the config key that asks for libtorch), when this
 * learner cannot train cfg's model as the bridge's would: another algorithm, not a plain MLP
 * with separate torsos (or with an LSTM or GRU core), trainer.kernels libtorch, a cuda trainer,
 * normalised observations, reward scaling, V-trace, observations other than float32.
 * GB_ENOMEM. */
int gb_ppo_mlp_open(const gb_config *cfg, const gb_torch_space *sp, uint64_t seed,
                    gb_ppo_mlp **out, gb_error *err);
void gb_ppo_mlp_close(gb_ppo_mlp *p);

/* gb_torch_learner_train's contract (bridge.h) for PPO: one training call on b (host memory),
 * stats into st (may be NULL), one new priority per chunk into prio when not NULL; the train
 * steps and the version go up by one. GB_EINVAL for a malformed batch, GB_ENOMEM. */
int gb_ppo_mlp_train(gb_ppo_mlp *p, const gb_torch_batch *b, gb_torch_stats *st, float *prio,
                     gb_error *err);

/* The network, its flat state (in libtorch's parameter order: what gb_torch_learner_set_flat
 * takes) and the counters (owned by p): layout, export, version, training steps, progress. */
gb_flat_mlp *gb_ppo_mlp_net(gb_ppo_mlp *p);

#endif
