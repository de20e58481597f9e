/* workers/roles/learning_internal.h: the learning step's state, shared by its files:
 * learning.c (create, insert, the step, checkpoints), learning_collect.c (how a selected
 * batch reaches the learner: host staging, the device gather, frame stacks) and
 * learning_early.c (the learning without libtorch). Calls go one way: learning.c ->
 * learning_collect.c, learning_early.c.
 * defines: gb_learning (the struct), batch_slot, gb_learning_host_dst, gb_learning_rebuild_obs,
 *          gb_learning_collect_slot, gb_learning_finish_slot, gb_learning_alloc_staging,
 *          gb_learning_free_slot, gb_learning_open_device, gb_learning_batch_view,
 *          gb_learning_early_open, gb_learning_early_train, gb_learning_early_poll,
 *          gb_learning_early_save, gb_learning_early_resume, gb_learning_early_close */
#ifndef GB_WORKERS_LEARNING_INTERNAL_H
#define GB_WORKERS_LEARNING_INTERNAL_H

#include "kernels/kernels.h"
#include "replay/gpu.h"
#include "workers/roles/learning.h"
#include "workers/roles/dqn_mlp.h"
#include "workers/roles/ppo_mlp.h"
#include "workers/roles/sac_mlp.h"

#include <pthread.h>
#include <stdatomic.h>

/* How the chosen items reach the learner.
 * - cpu trainer: gb_replay_collect copies every column into host staging allocated once
 *   (64-byte rows), which the learner reads in place.
 * - cuda trainer: the observation columns (obs, next_obs: nearly all the bytes) go to device
 *   buffers, by the gather kernel reading the page-locked tables (gpu_zero_copy, after a GPU
 *   selection for weighted replays) or by a CPU gather into pinned staging and one
 *   host-to-device copy per column (cpu_staged). The per-step scalars (actions, rewards, flags,
 *   behaviour log-probabilities) are read on the host by the learner's n-step and GAE code, so
 *   they are collected into host staging as on the cpu.
 * With a frame stack (the layout stores each frame once: runtime/streams/chunk.h), the rows'
 * whole observations are rebuilt into `stacked` from the collected frames (obs), obs_past and
 * valid: on the cpu by gb_chunk_stack_expand, on cuda by its kernel (gb_kernels_stack_expand)
 * after obs_past went to the device with the observations, by the same gather.
 * With prefetch, two slots take turns: batch k+1 is selected and its collection enqueued before
 * batch k trains, so the gather runs on its own stream while the training step runs on
 * libtorch's. */
enum { NDEV = 3 }; /* obs, next_obs, and with a frame stack obs_past */

typedef struct batch_slot {
    gb_replay_selection sel;
    int sel_init;
    int live;                   /* selected and collected (or enqueued), not yet trained */
    int timing;                 /* cuda: the context's timer holds this slot's collection */
    void *host[GB_CHUNK_NCOLS]; /* host staging [Bl, column bytes] (cuda: not obs, next_obs) */
    void *dev[NDEV];            /* cuda: obs, next_obs (, obs_past) [Bl, column bytes] there */
    void *pinned[NDEV];         /* cuda, cpu_staged: their pinned staging */
    void *stacked;              /* frame stack: [Bl, T, *obs_shape] rebuilt (cuda: device) */
    void *dev_valid;            /* cuda, frame stack: the valid column [Bl, T] for the kernel */
    double collect_us;          /* host part (CPU gather), then the device part added */
} batch_slot;

struct gb_learning {
    const gb_config *cfg;
    gb_chunk_layout layout;
    gb_torch_learner *learner;
    gb_replay *replay;
    int cuda;             /* trainer.device cuda */
    int collect;          /* gb_collect_mode (cuda) */
    int prefetch;         /* two slots, the next batch collected while this one trains */
    gb_kernels_ctx *kctx; /* cuda: the collection stream */
    gb_replay_gpu *rgpu;  /* cuda, gpu_zero_copy: the page-locked, mapped tables */
    batch_slot slot[2];   /* slot[cur] trains next; slot[cur ^ 1] is the prefetched one */
    int cur;
    double collect_ms, train_ms; /* sums over the trained batches (gb_learning_timings) */
    int weighted;
    int64_t B;  /* the global batch */
    int64_t Bl; /* this trainer's part: B / trainers */
    gb_group *group;   /* several trainers; NULL: one */
    gb_shards *shards; /* several trainers: the agreement, and global selection */
    int global;        /* trainer.replay.selection: global */
    float *weights;    /* [Bl] global selection's importance weights */
    uint64_t *checksums; /* [trainers] every replica's parameter checksum (check_replicas) */
    double progress;   /* this trainer's budget progress (gb_learning_set_progress) */
    int held;          /* gb_learning_hold: no step is taken */
    float *priorities_f;           /* [B]: the learner's new priorities */
    double *priorities;            /* [B]: as the replay takes them */
    int64_t train_steps, samples_trained;
    uint64_t trained_mark; /* the replay's first_samples at gb_learning_mark_trained */
    int restored; /* the learner came from opts.model_checkpoint */
    gb_torch_stats last;
    /* The learning without libtorch (learning.h; learning_early.c): early_ppo, early_dqn or
     * early_sac trains for the whole run and writes the checkpoints (learner_file.h); where a
     * layer is 128 wide or more, the loader thread loads libtorch for its BLAS (load_rc,
     * load_err: its failure, which leaves the C products). early is its network and counters. */
    gb_ppo_mlp *early_ppo;
    gb_dqn_mlp *early_dqn;
    gb_sac_mlp *early_sac;
    gb_flat_mlp *early;
    int early_live;   /* early trains (learner is NULL) */
    pthread_t loader;
    int loader_started; /* asked at the first step whether to load (learning_early.c: poll) */
    int loader_live;    /* started and not yet joined */
    atomic_int loader_done;
    int load_rc;
    gb_error load_err;
    double load_s;      /* how long the load took */
};

/* The host destinations of a slot (every column on the cpu; the small ones with cuda) into dst;
 * returns how many. */
int gb_learning_host_dst(const gb_learning *L, batch_slot *s, gb_replay_dst dst[GB_CHUNK_NCOLS]);

/* With a frame stack on the cpu: the n collected items' whole observations from their frames,
 * into s->stacked. No-op otherwise (cuda rebuilds them in gb_learning_collect_slot). */
void gb_learning_rebuild_obs(const gb_learning *L, batch_slot *s, int64_t n);

/* Collects a slot's selection: the host columns now, the device ones enqueued (cuda). Blocks
 * for the host part. Returns 0 or the replay's or CUDA's error. */
int gb_learning_collect_slot(gb_learning *L, batch_slot *s, gb_error *err);

/* Waits for a slot's device collection and adds its time (cuda; no-op on the cpu). */
int gb_learning_finish_slot(gb_learning *L, batch_slot *s, gb_error *err);

/* Allocates the slots (two with prefetch) and the per-batch arrays. GB_ENOMEM, GB_ECUDA. */
int gb_learning_alloc_staging(gb_learning *L, gb_error *err);

/* Frees one slot's buffers (any that were allocated). */
void gb_learning_free_slot(const gb_learning *L, batch_slot *s);

/* trainer.device cuda: the collection stream and (gpu_zero_copy) the replay's tables
 * page-locked and mapped. Blocks. */
int gb_learning_open_device(gb_learning *L, gb_error *err);

/* The learning without libtorch (learning_early.c). open: when o allows it (learning.h), makes
 * L->early (PPO's, DQN's or SAC's learner) to train from the first step to the last, restored
 * from o's model checkpoint when that is a learner file: 1; 0 when o does not allow it or the
 * checkpoint is libtorch's (nothing made); or an error (a learner file of another
 * configuration, or corrupt). train: gb_torch_learner_train's contract for early, the stats into
 * L->last. poll (at each step): where a layer is 128 wide or more, starts the loader thread the
 * first time and, once it is done, gives the C learner libtorch's BLAS; a failed load is
 * logged, not an error (the C products are slower there, not wrong); returns 0. save (a
 * checkpoint): early's state as the learner file at path. resume: after L->learner was
 * restored from libtorch's checkpoint, early continues from its state and L->learner is
 * destroyed: 1; 0 when o does not allow it or the states do not fit (L->learner trains on, as
 * before); or an error (memory). close: joins the loader and frees early. */
int gb_learning_early_open(gb_learning *L, const gb_learning_opts *o, gb_error *err);
int gb_learning_early_train(gb_learning *L, const gb_torch_batch *b, float *prio, gb_error *err);
int gb_learning_early_poll(gb_learning *L, gb_error *err);
int gb_learning_early_save(gb_learning *L, const char *path, gb_error *err);
int gb_learning_early_resume(gb_learning *L, const gb_learning_opts *o, gb_error *err);
void gb_learning_early_close(gb_learning *L);

/* The learner's view of a collected slot of n items. */
gb_torch_batch gb_learning_batch_view(const gb_learning *L, const batch_slot *s, int64_t n,
                                      const float *weights);

#endif
