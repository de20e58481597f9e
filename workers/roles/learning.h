/* workers/roles/learning.h: the learning step every trainer shares (the trainer worker, inline
 * mode):
 * a replay built from the chunk layout (runtime/streams/chunk.h), the rate limiter and the
 * staleness bound, selection, collection into the training batch, the algorithm's step, priority
 * updates and release. The trainer worker is ingest + learning; inline mode is acting
 * (workers/roles/acting.h) + learning in one loop, through the same replay and rate limiter.
 *
 * Several trainers (trainer.count > 1) learn data-parallel over a process group
 * (workers/torch/group.h): each holds one replay shard; every step is agreed by all of them (one
 * small all-reduce: every shard's rate limiter admits its share batch/count, nobody is stopping,
 * and the summed budget progress for lr annealing); each trains on batch/count items, drawn from
 * its own shard (trainer.replay.selection: local) or from one selection over the union of the
 * shards with the rows sent by their owners (global, workers/roles/shards.h); the learner
 * all-reduces the gradients, so every replica stays identical, which a parameter checksum compared
 * across the ranks every trainer.checksum_every steps checks (logged; a mismatch is an error).
 *
 * Collection: on the cpu the chosen rows are copied into staging buffers allocated once, which
 * libtorch then reads in place. With trainer.device cuda (one trainer) the observation columns
 * go to device buffers, by GEAR's path (trainer.collect gpu_zero_copy: weighted, uniform and
 * top-k selection on the GPU over a device mirror of the priorities, then the gather kernel
 * reading the rows from the page-locked, mapped replay tables straight into device memory,
 * replay/gpu.h) or by the CPU-orchestrated one (cpu_staged: CPU selection and gather into
 * pinned staging, one host-to-device copy per column); the learner wraps them as device
 * tensors without a copy. The per-step scalars stay on the host, where the n-step and GAE code
 * reads them. With trainer.prefetch (auto: on with cuda) batch k+1 is selected and its
 * collection enqueued on a stream of its own before batch k trains, into a second set of
 * buffers; the next selection then does not see step k's priority updates, and its staleness
 * floor is the one the learner will have when it trains. A machine or build without CUDA
 * refuses cuda (GB_EUNSUPPORTED, saying which part is missing), never runs it on the host.
 *
 * The learning without libtorch: a trainer, or inline mode that acts without libtorch
 * (acts_in_c), alone (trainer.count 1), with PPO, DQN or SAC on a model workers/roles/ppo_mlp.h,
 * dqn_mlp.h or sac_mlp.h can train as the bridge would (the classic-control configs', and PPO's
 * with an LSTM or GRU core), trains
 * from its first step to its last on that learner in C, and writes its checkpoints' model file
 * itself (workers/roles/learner_file.h): its state is the bridge's (parameters, Adam's, the
 * counters, DQN's target network, SAC's critics, their targets and its temperature; PPO's
 * shuffles and SAC's noise are drawn from a stream of the seed and the training step, so no
 * generator state is missing). Such a trainer never loads libtorch (0.4-0.6 s and about 150 MB
 * on the 2-core development machine) unless a layer is 128 wide or more (an LSTM core's gates
 * from 32 units, a GRU's from 43): then a thread started
 * at the first step loads it, and its BLAS computes the C learner's large products once
 * loaded, as the bridge's learners'. A restored trainer (a resume, a restart) goes on in C from
 * a learner file, or from libtorch's checkpoint (an older run's, one of libtorch's learner)
 * loaded into the bridge's learner; a learner of libtorch restores from either
 * (gb_learner_checkpoint_load). The layout and exported parameters are the same either side.
 * Every other configuration loads the bridge in create, as before.
 * defines: gb_learning, gb_learning_opts, gb_learning_*, gb_learning_space */
#ifndef GB_WORKERS_LEARNING_H
#define GB_WORKERS_LEARNING_H

#include "envs/env.h"
#include "replay/replay.h"
#include "runtime/streams/chunk.h"
#include "runtime/config/config.h"
#include "runtime/base/error.h"
#include "workers/roles/shards.h"
#include "workers/torch/bridge.h"
#include "workers/torch/group.h"

#include <stdint.h>

/* What the networks see and emit for an environment with this spec: the one conversion from an
 * environment to the learner's space. Refuses what the built-in algorithms cannot take
 * (observations other than float32 or uint8, turn-based environments, more than
 * GB_TORCH_MAX_ACTION_DIM action dimensions) with GB_EUNSUPPORTED; otherwise returns 0. */
int gb_learning_space(const gb_env_spec *spec, gb_torch_space *space, gb_error *err);

typedef struct gb_learning gb_learning;

typedef struct gb_learning_opts {
    const gb_config *cfg;          /* trainer.* (algorithm, replay, batch_size, staleness) */
    const gb_torch_space *space;
    const gb_chunk_layout *layout; /* the replay's columns are the chunk's */
    uint64_t learner_seed, replay_seed;
    int inline_mode; /* 1: one thread both inserts and samples: nothing may wait (below) */
    int acts_in_c;   /* inline mode: the caller acts without libtorch (policy_mlp.h), so the
                      * learning may too (above, "The learning without libtorch") */
    gb_group *group; /* several trainers: this rank's group (not owned); NULL: one trainer */
    uint64_t shared_seed; /* several trainers: the same on every rank (the global draw) */
    /* Surviving a trainer crash (both optional). replay_shm_name: the replay lives in this
     * run-owned POSIX shm segment (gb_replay_shm_name) instead of an anonymous one: a segment
     * left by a killed trainer of the same run and index is attached to and its committed items
     * kept (replay.h, "Surviving the owner's crash"; gb_replay_recovery_get tells what was
     * recovered), and destroy leaves the name in place (gb_replay_unlink removes it).
     * model_checkpoint: a learner checkpoint (gb_learning_checkpoint's model_path) to restore
     * the model, optimiser and step count from when the file exists, before joining the group
     * (rank 0's parameters still win there). */
    const char *replay_shm_name;
    const char *model_checkpoint;
} gb_learning_opts;

/* Creates the learner, the replay (trainer.replay, one column per chunk column, next_obs per
 * item) and the staging. With a group, the batch's split and the shards are made for it, and
 * gb_learning_join_group (collective) then starts every rank from the same state. In inline mode
 * no call waits, so the rate limiter's ratio must be able to hold back the learner: a replay whose
 * items are sampled more than once (max_times_sampled 0) needs samples_per_insert > 0 (GB_EINVAL
 * otherwise, naming the key). Returns 0, GB_EUNSUPPORTED (cuda without a CUDA build, device or
 * libtorch), GB_EINVAL, GB_ENOMEM or the learner's and the replay's errors (GB_EINVAL /
 * GB_ECORRUPT for a replay segment or model checkpoint of another configuration). */
int gb_learning_create(const gb_learning_opts *o, gb_learning **out, gb_error *err);

/* Frees everything (NULL: no-op). A thread still using the replay must be woken first
 * (gb_replay_close on gb_learning_replay) and joined. */
void gb_learning_destroy(gb_learning *L);

/* Several trainers, once create made every rank's learning for group g and again after the
 * group failed and re-formed as g (same rank and size; workers/roles/trainer_group.c): the
 * learner takes the state of the rank that trained furthest (gb_torch_learner_set_group: rank
 * 0's at a start), the shards' shared draw starts again from shared_seed (equal on every rank).
 * Collective; nothing trains before it. Returns 0 or the group's errors (a peer that died as
 * the group formed fails it: gb_group_failed, form the group again). */
int gb_learning_join_group(gb_learning *L, gb_group *g, uint64_t shared_seed, gb_error *err);

gb_replay *gb_learning_replay(gb_learning *L);
/* 1 when create loaded the learner from opts.model_checkpoint, else 0. */
int gb_learning_restored(const gb_learning *L);
/* The bridge's learner and its model: NULL while the learner without libtorch trains (above);
 * never NULL in inline mode unless it acts in C (acts_in_c). */
gb_torch_learner *gb_learning_learner(gb_learning *L);
gb_torch_model *gb_learning_model(gb_learning *L);

/* What the trainer publishes, whichever learner trains: the parameter layout (owned by L, valid
 * until destroy) and its bytes; the parameters exported into buf (gb_torch_model_export's
 * contract) with their version; the version, and setting it (a restarted trainer's versions go
 * on from the last published); what computes the forward and backward (gb_torch_learner_kernels,
 * or the learner without libtorch's). */
void gb_learning_param_layout(const gb_learning *L, const gb_param_entry **table, int *count,
                              uint64_t *total);
int gb_learning_export(const gb_learning *L, void *buf, size_t cap, uint64_t *version,
                       gb_error *err);
uint64_t gb_learning_version(const gb_learning *L);
void gb_learning_set_version(gb_learning *L, uint64_t version);
const char *gb_learning_kernels(const gb_learning *L);

/* Copies one chunk's columns (cols[c] laid out as the chunk layout says, e.g. a chunk block's
 * columns or a received message's tensors) into replay item idx, allocated and not yet
 * committed (gb_replay_allocate), and its new rows to the learner's running statistics
 * (gb_learning_observe). */
void gb_learning_write(gb_learning *L, int64_t idx, const void *const cols[GB_CHUNK_NCOLS]);

/* The replay of a learner made with o: its columns are the chunk layout's (next_obs, a core's
 * state and a frame stack's obs_past per item), its options trainer.replay's; gpu_selector: a
 * weighted selection runs on the GPU (gpu_zero_copy). Returns 0 or gb_replay_create's error
 * (GB_EINVAL for a ratio inline mode cannot keep). learning_replay.c. */
int gb_learning_replay_create(const gb_learning_opts *o, const gb_chunk_layout *l,
                              int gpu_selector, gb_replay **out, gb_error *err);

/* A chunk's new rows (a burn-in's repeated rows aside) into the learner's running statistics
 * (gb_torch_learner_observe): with policy.model.normalize_obs its valid rows' observations;
 * with trainer.algorithm.reward_scale the discounted return of each valid row's episode after
 * its reward, replayed from the return the chunk carries (the layout's return carry). Each row
 * once: called where chunks enter the replay. A failure is logged, not returned (statistics,
 * not data). learning_stats.c. */
void gb_learning_observe(const gb_config *cfg, const gb_chunk_layout *l,
                         gb_torch_learner *learner, const void *const cols[GB_CHUNK_NCOLS]);

/* Commits n written items with their policy versions (every item is T steps long). With several
 * trainers under global selection it also stamps their commit time (the fifo/lifo merge). */
int gb_learning_commit(gb_learning *L, int64_t n, const int64_t *idx, const int64_t *versions,
                       gb_error *err);

/* Allocates, writes and commits one chunk, waiting at most timeout_s for the rate limiter.
 * Returns 0, GB_ETIMEOUT (held back; nothing inserted), GB_ECLOSED or the replay's errors. */
int gb_learning_insert(gb_learning *L, const void *const cols[GB_CHUNK_NCOLS], int64_t version,
                       double timeout_s, gb_error *err);

/* One training step: waits at most timeout_s for the rate limiter, selects batch_size items
 * (items more than trainer.max_staleness versions behind the learner are expired first), collects
 * them, trains, updates priorities (weighted selector) and releases them. stop: this caller wants
 * to stop; with several trainers every rank calls this together, and they stop together (all of
 * them get 2 as soon as any asked). Returns 1 when it trained, 0 when the rate limiter had
 * nothing yet (on some shard), 2 to stop, or an error (GB_ECLOSED after destroy began, the
 * replay's, the learner's or the group's errors, GB_ECORRUPT when the replicas' parameters
 * differ or the loss is not finite: the message names the loss and the step). */
int gb_learning_step(gb_learning *L, double timeout_s, int stop, gb_error *err);

/* held 1: gb_learning_step takes no step (it waits timeout_s and returns 0; with several
 * trainers its agreement says "not yet" to every rank) until held 0; a stop still stops. For an
 * evaluation of the policy as it is (runtime/streams/runctl.h, the hold). */
void gb_learning_hold(gb_learning *L, int held);

/* The trained batches' collection and training steps so far, summed, in milliseconds (divide
 * by the difference of gb_learning_train_steps for a mean per step). Collection: the
 * host copies plus, with cuda, the device part between CUDA events (the gather kernel, or the
 * staged host-to-device copies); with prefetch it ran while the step before trained. Training:
 * the learner's call on the host clock (with cuda it ends synchronised with the device). */
void gb_learning_timings(const gb_learning *L, double *collect_ms, double *train_ms);

/* "host", "gpu_zero_copy" or "cpu_staged": how batches reach the learner. */
const char *gb_learning_collect_path(const gb_learning *L);
/* 1 when the next batch is selected and collected while this one trains (trainer.prefetch). */
int gb_learning_prefetching(const gb_learning *L);

/* How far through its env-step budget this trainer's share of the run is (0..1), for lr
 * annealing: with several trainers the shares are summed at the next step, so that every replica
 * anneals alike. */
void gb_learning_set_progress(gb_learning *L, double progress);

/* The last training step's statistics, and the counts so far. */
const gb_torch_stats *gb_learning_last(const gb_learning *L);
int64_t gb_learning_train_steps(const gb_learning *L);
int64_t gb_learning_samples_trained(const gb_learning *L);

/* chunks_trained (the trained share): the replay's items drawn at least once since the mark,
 * which gb_learning_mark_trained sets to what the replay has drawn now (0 until called: count
 * from the replay's beginning, as a trainer whose ledger continues does). Call it once the
 * replay is restored or re-attached. */
void gb_learning_mark_trained(gb_learning *L);
int64_t gb_learning_chunks_trained(const gb_learning *L);

/* Writes the learner to model_path and, when they are not NULL, the replay to replay_path and
 * the parameters the policy workers would get now (gb_learning_export) as the policy file
 * policy_path (workers/roles/policy_file.h); each to a temporary file, then renamed. Returns 0
 * or the first error. */
int gb_learning_checkpoint(gb_learning *L, const char *model_path, const char *replay_path,
                           const char *policy_path, gb_error *err);

/* gb_learning_checkpoint as a checkpoint set's writer (workers/roles/checkpoint_set.h), ctx the
 * gb_learning. */
int gb_learning_write_set(void *ctx, const char *model_path, const char *replay_path,
                          const char *policy_path, gb_error *err);

#endif
