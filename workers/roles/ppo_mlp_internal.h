/* workers/roles/ppo_mlp_internal.h: what PPO's learner without libtorch (ppo_mlp.h) shares between
 * its plain MLP (ppo_mlp.c) and its recurrent core (ppo_core.c): the learner's state, and
 * (ppo_loss.c) the loss of a minibatch's heads, what follows a batch's values (GAE's targets,
 * the statistics), the shuffles and log_std.
 * defines: gb_ppo_mlp (the struct), gb_ppo_core_part, gb_ppo_loss_ws, gb_ppo_loss_norm,
 *          gb_ppo_mlp_heads_loss, gb_ppo_mlp_loss_norm, gb_ppo_mlp_rows_loss,
 *          gb_ppo_mlp_loss_terms, gb_ppo_mlp_loss_free, gb_ppo_mlp_after_values,
 *          gb_ppo_mlp_shuffle, gb_ppo_mlp_log_std,
 *          gb_ppo_core_build, gb_ppo_core_values, gb_ppo_core_epochs,
 *          gb_ppo_core_free */
#ifndef GB_WORKERS_ROLES_PPO_MLP_INTERNAL_H
#define GB_WORKERS_ROLES_PPO_MLP_INTERNAL_H

#include "runtime/base/rng.h"
#include "runtime/base/team.h"
#include "workers/roles/ppo_mlp.h"
#include "workers/torch/core_train.h"
#include "workers/torch/targets.h"

/* The buffers of a share of a minibatch's loss (ppo_loss.c): its rows' (behaviour logp,
 * advantage, value, return), actions, new logp, entropies, and the gradients. */
typedef struct gb_ppo_loss_ws {
    gb_flat_buf aux, acts, act_f, logp, ent, g_logp, g_value, dpi;
} gb_ppo_loss_ws;

/* A minibatch's n valid steps and their advantages' normalisation (gb_torch_ppo_adv_stats). */
typedef struct gb_ppo_loss_norm {
    double mean, inv_std;
    int64_t n;
} gb_ppo_loss_norm;

/* One thread's share of a minibatch's chunks (ppo_core.c): the network's layers with, past part
 * 0, gradients of their own (grad: as f.g, summed into it after the join), the core's weights'
 * transposes taken once a step, its own workspaces and loss sums, and rc (0, or -1 when its
 * last part ran out of memory). */
typedef struct gb_ppo_core_part {
    gb_core_train core;
    gb_mlp_train_layer *actor, critic[2];
    float *dlog_std;
    gb_flat_buf ws, grad, ws_a, ws_pi, ws_v;
    gb_ppo_loss_ws loss;
    gb_torch_ppo_terms sums;
    int rc;
} gb_ppo_core_part;

struct gb_ppo_mlp {
    gb_flat_mlp f; /* the network, Adam's state and the counters */
    gb_config_algorithm ac;
    int discrete, in, A;
    float *log_std, *dlog_std; /* boxes: in f.p and f.g; else NULL */
    /* plain: torso then pi; critic torso then v. With a core: torso (na layers, 0 or more),
     * and the heads pi and v as one layer each (critic[0], critic[1]) */
    gb_mlp_train_layer *actor, *critic;
    int na, nc;
    int has_core;      /* policy.model.core lstm or gru (ppo_core.c) */
    gb_core_train core; /* its core; torso -> core -> pi and v, both sharing torso and core */
    uint64_t seed;
    gb_rng rng; /* the initial weights', then each call's shuffles (seeded by its step) */
    gb_flat_buf x, values, adv, ret, srow, sstep, perm; /* a batch's */
    /* a minibatch's */
    gb_flat_buf xb, adv_mb, ws_a, ws_c;
    gb_ppo_loss_ws loss;
    /* the core's: the batch's keep flags (bridge.h's reset rule) and each chunk's first valid
     * step; a minibatch's keep flags, states entering, valid rows (in its rows and among the
     * batch's valid steps), core outputs (all, valid), their gradients, the workspaces */
    gb_flat_buf keep, first, kmb, s0mb, sel, rows, y, yv, dy, dyv, dyv2, dfeat;
    gb_flat_buf ws_v, vfirst; /* the values' head workspace; each chunk's first valid row */
    /* the core's sequences split over trainer.threads (a team of them when more than one) */
    gb_team *team;          /* NULL for one thread */
    gb_ppo_core_part *part; /* one a thread: gb_team_threads(team) */
    gb_flat_buf wt; /* the core's weights transposed */
};

/* The loss terms of n valid steps (rows[i] the i-th's index among the batch's valid steps,
 * gb_torch_valid_rows' order) from the heads' outputs pi ([n][A]) and v ([n]); the gradients
 * for pi's outputs into *dpi and for v's into *g_value ([n][A] and [n], the learner's buffers),
 * log_std's added into dlog_std. Returns -1 when out of memory, else 0. */
int gb_ppo_mlp_heads_loss(gb_ppo_mlp *q, const gb_torch_batch *b, const int64_t *rows, int n,
                          const float *pi, const float *v, const gb_torch_ppo_coefs *c,
                          gb_torch_ppo_terms *terms, float **dpi, float **g_value);

/* gb_ppo_mlp_heads_loss in shares: norm, the minibatch's (rows[0..n)) normalisation; rows_loss,
 * a share of its rows (rows[0..n) here) into w's buffers with norm, log_std's gradient added
 * into dlog_std, the share's sums into *sums (gb_torch_ppo_fused_rows', entropy's sum too);
 * terms, the minibatch's terms from its shares' sums added up. -1: out of memory. Over all the
 * rows at once the same floats as gb_ppo_mlp_heads_loss. */
int gb_ppo_mlp_loss_norm(gb_ppo_mlp *q, const int64_t *rows, int n, const gb_torch_ppo_coefs *c,
                         gb_ppo_loss_norm *norm);
int gb_ppo_mlp_rows_loss(const gb_ppo_mlp *q, gb_ppo_loss_ws *w, const gb_torch_batch *b,
                         const int64_t *rows, int n, const float *pi, const float *v,
                         const gb_torch_ppo_coefs *c, const gb_ppo_loss_norm *norm,
                         float *dlog_std, gb_torch_ppo_terms *sums, float **dpi,
                         float **g_value);
void gb_ppo_mlp_loss_terms(const gb_torch_ppo_terms *sums, const gb_ppo_loss_norm *norm,
                           const gb_torch_ppo_coefs *c, gb_torch_ppo_terms *terms);
void gb_ppo_mlp_loss_free(gb_ppo_loss_ws *w);

/* With q->values holding the critic's values of the batch's B*(T+1) observation rows: GAE's
 * advantages and returns, the valid steps (q->sstep, q->srow), the explained variance and the
 * chunk priorities. Returns the valid steps' count, or -1 (memory). */
int64_t gb_ppo_mlp_after_values(gb_ppo_mlp *q, const gb_torch_batch *b, gb_torch_stats *st,
                                float *prio);

/* Boxes: log_std (layout entry entry; -1: none, discrete) pointed into the blocks and set to
 * policy.model.log_std_init. */
void gb_ppo_mlp_log_std(gb_ppo_mlp *q, int entry, const gb_config_model *mc);

/* perm[0..n) = a permutation of 0..n-1 drawn from q->rng (Fisher-Yates). */
void gb_ppo_mlp_shuffle(gb_ppo_mlp *q, int64_t *perm, int64_t n);

/* ppo_core.c. The network as network.cpp's ActorCritic registers it with a core: log_std
 * (boxes), torso, core.ih, core.hh, pi, v; initialised as the bridge's. The core's forward and
 * backward split a minibatch's sequences over threads threads (the caller's and helpers'). */
int gb_ppo_core_build(gb_ppo_mlp *q, const gb_config_model *mc, int threads, gb_error *err);
/* The values of the batch's B*(T+1) observation rows into q->values (each chunk's T steps and
 * its next_obs from its state0, bridge.h's reset rule), the rows in q->x. -1: memory. */
int gb_ppo_core_values(gb_ppo_mlp *q, const gb_torch_batch *b);
/* The epochs over minibatches of whole chunks (ppo_seq.cpp's): the terms summed into sum, the
 * gradient steps taken counted in *count. -1: memory. */
int gb_ppo_core_epochs(gb_ppo_mlp *q, const gb_torch_batch *b, int64_t N,
                       const gb_torch_ppo_coefs *c, gb_torch_stats *st, gb_torch_ppo_terms *sum,
                       int64_t *count);
void gb_ppo_core_free(gb_ppo_mlp *q);

#endif
