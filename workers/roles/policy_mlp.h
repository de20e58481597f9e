/* workers/roles/policy_mlp.h: a policy worker's model without libtorch. A built-in plain MLP
 * (policy.model.type mlp, hidden Linear layers each followed by tanh or relu: no layer norm,
 * elu or gelu) in fp32 or int8 on a cpu with AVX2 and FMA or AVX-512 runs, with policy.kernels
 * gearbox, on gearbox's own kernels (workers/torch/mlp_infer.h) and draws its actions with
 * sampling.h's loops: what the bridge's model does for it too. So does such a torso with an LSTM
 * or GRU core (PPO's, DQN's) in fp32: the core's step and the heads in gearbox's C
 * (workers/torch/core_train.h), the state each row brings and takes back as the bridge's.
 * Here the same program is built from the config alone, so the worker serves without loading
 * libtorch (0.9 s and 0.9 CPU-s at every start on the 2-core development machine, and its
 * memory).
 *
 * The parameters are the trainer's, imported from the parameter stream as the bridge's model
 * imports them: the same layout (names, dtypes, shapes, offsets, in libtorch's order), the same
 * checks, the same errors. The forward is the bridge's with policy.kernels gearbox: equal actions
 * and log-probabilities for equal inputs and random numbers (tests/workers/roles/
 * test_policy_mlp.c compares them). The random numbers are this model's own generator's
 * (runtime/base/rng.h), seeded like the bridge model's: a seed still fixes every action.
 * Not thread-safe: one caller at a time (the policy worker's inference thread).
 * defines: gb_policy_mlp, gb_policy_mlp_open, gb_policy_mlp_open_fp32,
 *          gb_policy_mlp_plays_fp32, gb_policy_mlp_close,
 *          gb_policy_mlp_layout, gb_policy_mlp_import, gb_policy_mlp_act, gb_policy_mlp_kernels,
 *          gb_policy_mlp_state_size */
#ifndef GB_WORKERS_ROLES_POLICY_MLP_H
#define GB_WORKERS_ROLES_POLICY_MLP_H

#include "runtime/base/error.h"
#include "runtime/config/config.h"
#include "runtime/streams/params.h"
#include "workers/torch/bridge.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gb_policy_mlp gb_policy_mlp;

/* The model of cfg's algorithm (ppo, dqn, sac) for the space sp, its draws seeded from seed, its
 * weights zero until the first import. GB_EUNSUPPORTED, with the reason in err (the config key
 * that asks for more), when libtorch must run this model: the caller then uses the bridge's. */
int gb_policy_mlp_open(const gb_config *cfg, const gb_torch_space *sp, uint64_t seed,
                       gb_policy_mlp **out, gb_error *err);
void gb_policy_mlp_close(gb_policy_mlp *m);

/* gb_policy_mlp_open in fp32 whatever policy.precision says (that is the policy workers'): the
 * model of the learner's own parameters, as inline mode, `gearbox eval` and the checkpoints'
 * policy files (workers/roles/policy_file.h) play it. */
int gb_policy_mlp_open_fp32(const gb_config *cfg, const gb_torch_space *sp, uint64_t seed,
                            gb_policy_mlp **out, gb_error *err);

/* Whether gb_policy_mlp_open_fp32 takes cfg's model for the space sp: a trainer's checkpoints
 * then carry a policy file, and `gearbox eval` plays it without libtorch. */
int gb_policy_mlp_plays_fp32(const gb_config *cfg, const gb_torch_space *sp);

/* The flat parameter buffer's table (owned by m) and its size: gb_torch_model_layout's. */
void gb_policy_mlp_layout(const gb_policy_mlp *m, const gb_param_entry **table, int *count,
                          uint64_t *total);

/* Imports a flat buffer of len bytes laid out as table (count entries), which must match m's
 * entry by entry (GB_EINVAL naming the first that does not), and takes version as its own. */
int gb_policy_mlp_import(gb_policy_mlp *m, const void *buf, size_t len,
                         const gb_param_entry *table, int count, uint64_t version,
                         gb_error *err);

/* gb_torch_model_act_state's contract (bridge.h): n rows of observations (float32, [n, *shape])
 * -> out's non-NULL fields; deterministic: greedy or mean actions; epsilon: DQN's exploration;
 * noise: [n, A] standard normal draws for continuous actions (NULL: the model's own); with a
 * core, state_in [n, S] the state entering each row (zeros at an episode's start) and
 * state_out [n, S] the state it leaves (may be state_in); without one both are ignored. */
int gb_policy_mlp_act(gb_policy_mlp *m, const float *obs, int64_t n, int deterministic,
                      double epsilon, const float *noise, const float *state_in,
                      float *state_out, gb_torch_act_out *out, gb_error *err);

/* S: the floats of state a row carries (gb_config_state_size's); 0 without a core. */
int64_t gb_policy_mlp_state_size(const gb_policy_mlp *m);

/* What runs the forward ("gearbox fp32", "gearbox int8 (avx2)", ...), as
 * gb_torch_model_kernels says it. */
const char *gb_policy_mlp_kernels(const gb_policy_mlp *m);

#endif
