/* envs/ring.h: the environment ring: K copies of one environment over contiguous caller-owned
 * buffers, stepped in S groups (while one group waits for its actions, another is stepped),
 * with auto-reset, the time limit, and per-copy episode statistics. The hot path of an actor:
 * gb_env_ring_step allocates nothing and copies nothing but the final observation of an
 * episode that ended.
 * defines: gb_env_ring, gb_env_ring_buffers, gb_env_copy_stats, gb_env_ring_create,
 *          gb_env_ring_spec, gb_env_ring_attach, gb_env_ring_buffers_alloc,
 *          gb_env_ring_buffers_free, gb_env_ring_from_config, gb_env_ring_reset,
 *          gb_env_ring_step, gb_env_ring_group,
 *          gb_env_ring_stats, gb_env_ring_take_episodes, gb_env_ring_copy, gb_env_ring_destroy
 *
 * Layout (K copies, A agents, O = bytes of one observation, B = bytes of one action), copy i's
 * slice starting at i × (A × size):
 *   obs        K × A × O  current observation; after an auto-reset, the new episode's first
 *   final_obs  K × A × O  for a copy whose episode ended on this step (all its agents
 *                         terminated or truncated), the episode's last observation: bootstrap
 *                         from it when truncated (optional: NULL when not wanted)
 *   actions    K × A × B  written by the caller before stepping a group
 *   rewards    K × A      float32
 *   terminated K × A      0/1; with truncated, tells that the copy's episode ended on this step
 *   truncated  K × A      0/1; the time limit sets it on the limit step even when terminated
 *                         is also set (Gymnasium's TimeLimit)
 *   acting     K × A      1 where the agent acts on the next step (all 1 unless turn-based)
 * Group g holds copies [g K/S, (g + 1) K/S). A ring is used by one thread at a time. */
#ifndef GB_ENVS_RING_H
#define GB_ENVS_RING_H

#include "envs/env.h"
#include "runtime/base/error.h"

#include <stdint.h>

typedef struct gb_env_ring gb_env_ring;

typedef struct gb_env_ring_buffers {
    void *obs;
    void *final_obs; /* may be NULL */
    void *actions;
    float *rewards;
    uint8_t *terminated;
    uint8_t *truncated;
    uint8_t *acting;
} gb_env_ring_buffers;

/* One copy's episode statistics. The return of a multi-agent copy is the sum over steps of the
 * mean reward over its agents (the plain return for one agent). */
typedef struct gb_env_copy_stats {
    double episode_return; /* of the running episode so far */
    int64_t episode_length;
    double last_return; /* of the last finished episode (0 before the first) */
    int64_t last_length;
    int64_t episodes; /* finished episodes */
} gb_env_copy_stats;

/* Creates K = copies copies of iface with args; copy i is seeded with a value derived from
 * (seed, i). splits (S) must divide copies. max_episode_steps > 0 overrides the environment's
 * own limit; 0 keeps it (and an environment without one runs until it terminates).
 * Returns 0, GB_EINVAL (bad K or S, create failed, invalid spec) or GB_ENOMEM. */
int gb_env_ring_create(const gb_env_interface *iface, const gb_env_args *args, uint64_t seed,
                       int copies, int splits, int64_t max_episode_steps, gb_env_ring **out,
                       gb_error *err);

/* For workers: resolves env.name / env.plugin from the config into *src (see host.h), converts
 * env.args, and creates the ring with env.max_episode_steps. The caller destroys the ring, then
 * closes src (a plugin must stay loaded while copies exist). Errors as gb_env_source_open and
 * gb_env_ring_create; on error nothing is left open. */
struct gb_config_env;
struct gb_env_source;
int gb_env_ring_from_config(const struct gb_config_env *env, uint64_t seed, int copies,
                            int splits, struct gb_env_source *src, gb_env_ring **out,
                            gb_error *err);

/* The environment's spec (the same for every copy), the number of copies and of groups, and
 * the time limit in force (0 = none). */
const gb_env_spec *gb_env_ring_spec(const gb_env_ring *ring);
int gb_env_ring_copies(const gb_env_ring *ring);
int gb_env_ring_splits(const gb_env_ring *ring);
int64_t gb_env_ring_time_limit(const gb_env_ring *ring);

/* Points the ring at caller-owned buffers laid out as above (the caller keeps ownership; they
 * must outlive the ring or the next attach). Every pointer but final_obs is required. */
int gb_env_ring_attach(gb_env_ring *ring, const gb_env_ring_buffers *buf, gb_error *err);

/* Convenience: one allocation (64-byte aligned) carved into all the buffers above, including
 * final_obs, sized for this ring; free with gb_env_ring_buffers_free. Does not attach.
 * Returns 0 or GB_ENOMEM. */
int gb_env_ring_buffers_alloc(const gb_env_ring *ring, gb_env_ring_buffers *buf, gb_error *err);
void gb_env_ring_buffers_free(gb_env_ring_buffers *buf);

/* Resets every copy (writes obs and acting; clears rewards and flags; running statistics start
 * again). Returns 0, or GB_EINVAL when not attached or a reset failed. */
int gb_env_ring_reset(gb_env_ring *ring, gb_error *err);

/* Steps every copy of group g with the actions in its slices, applies the time limit, records
 * statistics, and auto-resets the copies whose episode ended (their final observation goes to
 * final_obs). Never blocks or allocates. Returns 0, or GB_EINVAL when a copy's step or reset
 * failed (the message names the copy). */
int gb_env_ring_step(gb_env_ring *ring, int group, gb_error *err);

/* The copies of group g: first index and count. */
void gb_env_ring_group(const gb_env_ring *ring, int group, int *first, int *count);

/* Statistics of every copy (K entries), owned by the ring. */
const gb_env_copy_stats *gb_env_ring_stats(const gb_env_ring *ring);

/* Episodes finished since the last call: their count, and the sums of their returns and
 * lengths (for metrics); the counters then restart. */
void gb_env_ring_take_episodes(gb_env_ring *ring, int64_t *count, double *return_sum,
                               int64_t *length_sum);

/* The environment handle of copy i (for tests and tools that need the copy itself). */
void *gb_env_ring_copy(gb_env_ring *ring, int i);

/* Destroys every copy and the ring (NULL is a no-op). Buffers stay the caller's. */
void gb_env_ring_destroy(gb_env_ring *ring);

#endif
