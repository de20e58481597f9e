/* workers/roles/flat_mlp.h: what the trainer's learners without libtorch (ppo_mlp.h, dqn_mlp.h,
 * sac_mlp.h) share: a network of Linear layers whose parameters, gradients and Adam moments are one
 * flat block each, laid out as the bridge's model (names, shapes, 64-byte aligned offsets,
 * libtorch's parameter order), initialised as network.cpp's (orthogonal weights times a gain, zero
 * biases), trained with the gradient-norm clip and Adam of optimizer.cpp's FlatAdam, exported as
 * the bridge's model exports; and the learner's counters (version, training steps, progress).
 * Which configurations they can train as the bridge would: gb_flat_mlp_supported.
 * Not thread-safe: one caller at a time.
 * defines: gb_flat_mlp, gb_flat_buf, gb_flat_grow, gb_flat_mlp_model_refusal,
 *          gb_flat_mlp_features, gb_flat_mlp_supported, gb_flat_mlp_check_batch,
 *          gb_flat_mlp_obs_rows, gb_flat_steps, gb_flat_steps_make, gb_flat_steps_free,
 *          gb_flat_mlp_reserve,
 *          gb_flat_mlp_entry, gb_flat_mlp_torso, gb_flat_mlp_linear, gb_flat_mlp_extra,
 *          gb_flat_mlp_alloc, gb_flat_mlp_init_layer, gb_flat_mlp_init_at, gb_flat_mlp_step,
 *          gb_flat_mlp_step_part, gb_flat_mlp_export,
 *          gb_flat_mlp_set_progress, gb_flat_mlp_free */
#ifndef GB_WORKERS_ROLES_FLAT_MLP_H
#define GB_WORKERS_ROLES_FLAT_MLP_H

#include "runtime/base/error.h"
#include "runtime/base/rng.h"
#include "runtime/config/config.h"
#include "runtime/streams/params.h"
#include "workers/torch/bridge.h"
#include "workers/torch/mlp_train.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gb_flat_mlp {
    gb_param_entry *layout; /* [nlayout] of the capacity reserved */
    int nlayout;
    uint64_t total;   /* the layout's bytes */
    int64_t *flat_at; /* [nlayout]: each entry's first float in the flat blocks */
    int64_t n;        /* floats in each flat block */
    float *p, *g, *m, *v; /* parameters, gradients, Adam's moments (one allocation) */
    int64_t adam_steps, train_steps;
    uint64_t version;
    double progress; /* through the run's budget, 0..1 (lr annealing) */
} gb_flat_mlp;

/* A buffer grown to the largest size asked (no allocation a step once the sizes were seen). */
typedef struct gb_flat_buf {
    void *p;
    size_t cap;
} gb_flat_buf;

/* b's memory, at least bytes of it; NULL when out of memory (b unchanged). */
void *gb_flat_grow(gb_flat_buf *b, size_t bytes);

/* NULL when mc is a plain MLP that gearbox's own kernels run (Linear layers each followed by tanh
 * or relu; no layer norm), with no core or an LSTM or GRU core (core_train.h), else the key that
 * says otherwise (a static string): what the learners here and the policy worker's model
 * without libtorch (policy_mlp.h) both ask. */
const char *gb_flat_mlp_model_refusal(const gb_config_model *mc);

/* The features of one observation of sp: the product of its shape. */
int64_t gb_flat_mlp_features(const gb_torch_space *sp);

/* 0 when cfg's model is one these learners lay out and train as the bridge does for space sp:
 * trainer.kernels gearbox on the cpu, a plain MLP (no core, no layer norm, tanh or relu; no
 * normalised observations, no reward scaling), float32 observations, sizes in range; else
 * GB_EUNSUPPORTED naming the key that asks for libtorch. The algorithm's own checks are its;
 * core 1: the learner takes an LSTM or GRU core too (0: any core is refused). */
int gb_flat_mlp_supported(const gb_config *cfg, const gb_torch_space *sp, int core,
                          gb_error *err);

/* GB_EINVAL when b is not a batch these learners can train on: no step, a column missing (logp
 * too when need_logp: PPO's), observations in device memory; else 0. */
int gb_flat_mlp_check_batch(const gb_torch_batch *b, int need_logp, gb_error *err);

/* The batch's observation rows into X ([B*(T+1)][in]): each chunk's T steps, then its
 * next_obs (the rows a chunk's values and bootstraps are read from). */
void gb_flat_mlp_obs_rows(const gb_torch_batch *b, size_t in, float *X);

/* A batch's n-step transitions for the off-policy learners (dqn_mlp.h, sac_mlp.h): the
 * observation rows x ([B*(T+1)][in]: gb_flat_mlp_obs_rows), every step's n-step return G,
 * discount and bootstrap step (targets.h's gb_torch_nstep), and the valid steps' indices, obs
 * rows and bootstrap rows (gb_torch_valid_rows): valid_transitions' in algorithm.cpp. */
typedef struct gb_flat_steps {
    gb_flat_buf x, G, disc, boot, step, row, brow;
} gb_flat_steps;

/* Fills t for b: returns the valid steps' count, or -1 (memory). */
int64_t gb_flat_steps_make(gb_flat_steps *t, const gb_torch_batch *b, size_t in, int64_t n_step,
                           double gamma);
void gb_flat_steps_free(gb_flat_steps *t);

/* Room for entries layout entries (before the first gb_flat_mlp_entry). GB_ENOMEM. */
int gb_flat_mlp_reserve(gb_flat_mlp *f, int entries, gb_error *err);

/* Appends a float32 entry of shape [d0] or [d0, d1] (d1 0: rank 1); returns its index. */
int gb_flat_mlp_entry(gb_flat_mlp *f, const char *name, int64_t d0, int64_t d1);

/* A Linear layer named prefix (prefix.weight, prefix.bias: the next two entries), in features
 * in, out out, activation act (GB_MLP_ACT_*), appended to chain (of *nl layers). */
void gb_flat_mlp_linear(gb_flat_mlp *f, const char *prefix, gb_mlp_train_layer *chain, int *nl,
                        int in, int out, int act);

/* An MLP torso named name (name.0, name.2, ...: each Linear followed by its activation module
 * in the bridge's Sequential) of mc's hidden layers over in features onto chain; returns its
 * width (in when there is no hidden layer). */
int gb_flat_mlp_torso(gb_flat_mlp *f, const gb_config_model *mc, int in, const char *name,
                      gb_mlp_train_layer *chain, int *nl);

/* count floats in the flat blocks past the layout's entries (trained, never exported: SAC's
 * critics and temperature); returns the first one's index. Before gb_flat_mlp_alloc. */
int64_t gb_flat_mlp_extra(gb_flat_mlp *f, int64_t count);

/* The flat blocks for the entries appended (zeroed). GB_ENOMEM. */
int gb_flat_mlp_alloc(gb_flat_mlp *f, gb_error *err);

/* Layer l's weight and bias, entries e and e + 1, pointed into the blocks, and initialised from
 * r: torch::nn::init::orthogonal_ times gain, a zero bias. GB_ENOMEM (scratch). */
int gb_flat_mlp_init_layer(gb_flat_mlp *f, gb_rng *r, gb_mlp_train_layer *l, int e, double gain,
                           gb_error *err);

/* The same for a weight and bias at the floats w and bb (gb_flat_mlp_extra's). */
int gb_flat_mlp_init_at(gb_flat_mlp *f, gb_rng *r, gb_mlp_train_layer *l, int64_t w, int64_t bb,
                        double gain, gb_error *err);

/* The gradients' 2-norm clipped to max_norm (<= 0: never), then Adam's step at lr (betas 0.9
 * and 0.999, epsilon eps, bias corrected); returns the norm before the clip. */
double gb_flat_mlp_step(gb_flat_mlp *f, double lr, double max_norm, double eps);

/* gb_flat_mlp_step over the floats [at, at + count) alone, as one optimiser of its own that
 * takes its step-th step (bias correction); f->adam_steps is the caller's to count. */
double gb_flat_mlp_step_part(gb_flat_mlp *f, int64_t at, int64_t count, int64_t step, double lr,
                             double max_norm, double eps);

/* The parameters into buf (cap bytes, at least f->total) as the layout says, and the version.
 * GB_EINVAL when cap is too small. */
int gb_flat_mlp_export(const gb_flat_mlp *f, void *buf, size_t cap, uint64_t *version,
                       gb_error *err);

/* How far through its budget the run is, clamped to 0..1 (lr annealing). */
void gb_flat_mlp_set_progress(gb_flat_mlp *f, double progress);

void gb_flat_mlp_free(gb_flat_mlp *f);

#endif
