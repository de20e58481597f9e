/* workers/roles/acting.h: the acting step every actor shares (the actor worker, inline mode): an
 * environment ring of K copies in S groups, the policy's answer decoded and clipped for the
 * environment, the trajectory-chunk builder (runtime/streams/chunk.h) and episode statistics. The
 * actor worker is acting + the inference and sample streams; inline mode is acting + a local
 * model + learning (workers/roles/learning.h), in one loop.
 * defines: gb_acting, gb_acting_opts, gb_acting_stats, gb_acting_* */
#ifndef GB_WORKERS_ACTING_H
#define GB_WORKERS_ACTING_H

#include "envs/env.h"
#include "runtime/streams/chunk.h"
#include "runtime/config/config.h"
#include "runtime/run/contract.h"
#include "runtime/base/error.h"

#include <stdint.h>

typedef struct gb_acting gb_acting;

/* The chunk layout of cfg's chunks for an environment with this spec (observation dtype and
 * shape; discrete actions as int64, boxes as float32): actors.chunk_len new rows, after R2D2's
 * burn-in rows repeated from the stream's previous chunk (gb_config_burn_in: the layout's
 * overlap), and the policy's recurrent state (gb_config_state_size; 0: none) followed, with
 * trainer.algorithm.reward_scale, by the discounted return (the layout's return carry); with
 * env.wrappers.frame_stack k > 1, observations stored a frame a row (the layout's frame stack,
 * runtime/streams/chunk.h "Frame stacks"). The one
 * conversion from an environment to the chunk format, used by actors and trainers alike.
 * Returns 0 or GB_EINVAL. */
int gb_acting_layout_for(const gb_env_spec *spec, const gb_config *cfg, gb_chunk_layout *l,
                         gb_error *err);

typedef struct gb_acting_opts {
    const gb_config *cfg; /* env (name, plugin, args, time limit), the chunk layout
                             (gb_acting_layout_for) */
    int copies, splits;   /* K environment copies stepped in S groups (S divides K) */
    uint64_t seed;        /* the ring's seed (gb_rng_seed_of(..., "envs")) */
    /* Called for every finished episode (may be NULL): its return (the mean over agents of
     * the team's summed rewards) and length. */
    void (*on_episode)(void *ctx, double episode_return, int64_t length);
    void *ctx;
} gb_acting_opts;

/* Creates the ring (copies created and seeded), its buffers and a chunk builder for every
 * (copy, agent) stream, then resets every copy. *out is the caller's (gb_acting_destroy).
 * Returns 0 or the environment's, the ring's or the chunk layout's error; nothing is left open
 * on error. */
int gb_acting_create(const gb_acting_opts *o, gb_acting **out, gb_error *err);
void gb_acting_destroy(gb_acting *a);

const gb_env_spec *gb_acting_spec(const gb_acting *a);
const gb_chunk_layout *gb_acting_layout(const gb_acting *a);
int gb_acting_groups(const gb_acting *a);
int gb_acting_copies(const gb_acting *a);

/* Group g's current observations, [rows, *obs_shape] with rows = copies in g x agents, in
 * place in the ring's buffer (valid until the group is stepped). */
const void *gb_acting_obs(const gb_acting *a, int g, int64_t *rows);

/* Group g's exploration noise for continuous actions, [rows, action dim] float32 N(0, 1) in
 * the rows' order of gb_acting_obs, for the policy to use in place of its own draws; NULL when
 * actors.noise_correlation is 0 or the actions are discrete. Each row's noise is an AR(1)
 * with correlation actors.noise_correlation from one step to the next, drawn anew when its
 * copy's episode ends; gb_acting_step advances it. Valid until the group is stepped. */
const float *gb_acting_noise(const gb_acting *a, int g);
/* Bytes of one row of the policy's actions: 8 (one int64) for discrete actions, 4 x the action
 * dimension (float32) for boxes. */
size_t gb_acting_action_row_bytes(const gb_acting *a);

/* The policy's recurrent state (policy.model.core; workers/torch/bridge.h "Cores"). The acting
 * owns one row of S floats per environment copy and agent, [K*A, S], zeros at creation: the
 * state lives with the actor, so a request carries it to any policy worker and the reply brings
 * the next one back, and no two copies ever share a row. S = gb_config_state_size(cfg);
 * 0 without a core. */
int64_t gb_acting_state_size(const gb_acting *a);

/* Group g's state rows, [rows, S] float32 in the rows' order of gb_acting_obs, in place: the
 * state entering the group's next step. Pass them to the model as state_in and have its
 * state_out written over them (or copy a reply's into them) before gb_acting_step, which hands
 * each row's state to the chunk builder and zeroes the rows of copies whose episode ended. NULL
 * without a core. Valid for the acting's life. */
float *gb_acting_state(gb_acting *a, int g);

/* Applies the policy's answer for group g and steps it: action ([rows] int64 or [rows, A]
 * float32, action_bytes in all) and logp ([rows] float32, logp_bytes), chosen by `version`;
 * with a core, the state the policy left in the group's rows (gb_acting_state) goes to the
 * chunks as each row's state_out, and the rows of copies whose episode ended become zeros.
 * A discrete action outside [0, n) is refused (GB_EPROTO); a continuous one goes to the
 * environment with NaN mapped to 0 and clipped to the action bounds, while the chunk keeps the
 * value the policy produced (PPO's log-probability is of that one). Then the group is stepped,
 * its streams' chunks advance (finished ones queue for gb_acting_take) and finished episodes
 * are counted. Returns 0, GB_EPROTO (sizes or action values), the environment's error, or
 * GB_ENOMEM from the chunk builder (the stream restarted; the run may go on). */
int gb_acting_step(gb_acting *a, int g, const void *action, size_t action_bytes,
                   const float *logp, size_t logp_bytes, int64_t version, gb_error *err);

/* Takes the next finished chunk (1: *out filled, the caller now owns out->block; 0: none). */
int gb_acting_take(gb_acting *a, gb_chunk *out);

typedef struct gb_acting_stats {
    int64_t env_steps; /* copy steps (a multi-agent copy's step counts once) */
    int64_t episodes;
    double return_sum;  /* over every finished episode */
    double return_mean; /* of the last GB_RUN_WINDOW episodes; NaN before the first */
} gb_acting_stats;

void gb_acting_stats_get(const gb_acting *a, gb_acting_stats *st);

#endif
