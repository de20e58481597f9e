/* workers/roles/learning.c: the learning step shared by the trainer worker and inline mode (see
 * learning.h). */
#include "workers/roles/learning.h"

#include "envs/host.h"
#include "kernels/kernels.h"
#include "replay/gpu.h"
#include "runtime/base/clock.h"
#include "runtime/base/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* How the chosen items reach the learner.
 * - cpu trainer: gb_replay_collect copies every column into host staging allocated once
 *   (64-byte rows), which the learner reads in place.
 * - cuda trainer: the observation columns (obs, next_obs: nearly all the bytes) go to device
 *   buffers, by the gather kernel reading the page-locked tables (gpu_zero_copy, after a GPU
 *   selection for weighted replays) or by a CPU gather into pinned staging and one
 *   host-to-device copy per column (cpu_staged). The per-step scalars (actions, rewards, flags,
 *   behaviour log-probabilities) are read on the host by the learner's n-step and GAE code, so
 *   they are collected into host staging as on the cpu.
 * With a frame stack (the layout stores each frame once: runtime/streams/chunk.h), obs and
 * obs_past are collected to the host on both, and the rows' whole observations rebuilt there
 * (gb_chunk_stack_expand) into `stacked`, which the cuda trainer copies to the device.
 * With prefetch, two slots take turns: batch k+1 is selected and its collection enqueued before
 * batch k trains, so the gather runs on its own stream while the training step runs on
 * libtorch's. */
enum { NDEV = 2 };
static const int device_cols[NDEV] = {GB_CHUNK_OBS, GB_CHUNK_NEXT_OBS};

typedef struct batch_slot {
    gb_replay_selection sel;
    int sel_init;
    int live;                   /* selected and collected (or enqueued), not yet trained */
    int timing;                 /* cuda: the context's timer holds this slot's collection */
    void *host[GB_CHUNK_NCOLS]; /* host staging [Bl, column bytes] (cuda: not obs, next_obs) */
    void *dev[NDEV];            /* cuda: obs, next_obs [Bl, column bytes] in device memory */
    void *pinned[NDEV];         /* cuda, cpu_staged: their pinned staging */
    void *stacked;              /* frame stack: [Bl, T, *obs_shape] rebuilt (cuda: pinned) */
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
    float *priorities_f;           /* [B]: the learner's new priorities */
    double *priorities;            /* [B]: as the replay takes them */
    int64_t train_steps, samples_trained;
    int restored; /* the learner came from opts.model_checkpoint */
    gb_torch_stats last;
};

/* The first device column collected by the gather (obs is rebuilt on the host with a frame
 * stack, then copied). */
static int first_dev(const gb_learning *L) { return L->layout.frame_stack > 1; }

/* Bytes of one item's whole observations [T, *obs_shape]. */
static size_t whole_obs_bytes(const gb_learning *L)
{
    return (size_t)L->layout.T * L->layout.bytes[GB_CHUNK_NEXT_OBS];
}

static int on_device(const gb_learning *L, int c)
{
    for (int i = first_dev(L); L->cuda && i < NDEV; i++)
        if (device_cols[i] == c)
            return 1;
    return 0;
}

/* The host destinations of a slot (every column on the cpu; the small ones with cuda). */
static int host_dst(const gb_learning *L, batch_slot *s, gb_replay_dst dst[GB_CHUNK_NCOLS])
{
    int n = 0;
    for (int c = 0; c < L->layout.ncols; c++)
        if (!on_device(L, c))
            dst[n++] = (gb_replay_dst){.column = c, .data = s->host[c],
                                       .bytes = (size_t)L->Bl * L->layout.bytes[c]};
    return n;
}

/* Enqueues the device part of a slot's collection on the collection stream, between the
 * context's timer events. Its buffers were last read by the training step before the one about
 * to run, on libtorch's stream: the gather waits for that stream first. */
static int device_collect(gb_learning *L, batch_slot *s, gb_error *err)
{
    const int f = first_dev(L), nd = NDEV - f;
    gb_replay_dst dst[NDEV];
    for (int i = f; i < NDEV; i++)
        dst[i - f] = (gb_replay_dst){.column = device_cols[i], .data = s->dev[i],
                                     .bytes = (size_t)L->Bl * L->layout.bytes[device_cols[i]]};
    int rc = gb_kernels_after_default_stream(L->kctx, err);
    if (rc == 0 && L->collect == GB_COLLECT_CPU_STAGED) {
        gb_replay_dst pin[NDEV];
        for (int i = 0; i < nd; i++)
            pin[i] = (gb_replay_dst){.column = dst[i].column, .data = s->pinned[i + f],
                                     .bytes = dst[i].bytes};
        double t0 = gb_now_s();
        rc = gb_replay_collect(L->replay, &s->sel, pin, nd, NULL, err);
        s->collect_us += (gb_now_s() - t0) * 1e6;
        if (rc == 0)
            rc = gb_kernels_timer_start(L->kctx, err);
        for (int i = 0; rc == 0 && i < nd; i++)
            rc = gb_kernels_copy(L->kctx, dst[i].data, pin[i].data,
                                 (size_t)s->sel.n * L->layout.bytes[dst[i].column], err);
    } else if (rc == 0) {
        rc = gb_kernels_timer_start(L->kctx, err);
        if (rc == 0)
            rc = gb_replay_gpu_collect(L->rgpu, &s->sel, dst, nd, NULL, err);
    }
    if (rc == 0 && f) /* the whole observations rebuilt on the host */
        rc = gb_kernels_copy(L->kctx, s->dev[0], s->stacked,
                             (size_t)s->sel.n * whole_obs_bytes(L), err);
    if (rc == 0)
        rc = gb_kernels_timer_mark(L->kctx, err);
    s->timing = rc == 0;
    return rc;
}

/* With a frame stack: the n collected items' whole observations from their frames. */
static void rebuild_obs(const gb_learning *L, batch_slot *s, int64_t n)
{
    const gb_chunk_layout *l = &L->layout;
    if (l->frame_stack > 1)
        gb_chunk_stack_expand(l, n, s->host[GB_CHUNK_OBS], s->host[l->past_col],
                              s->host[GB_CHUNK_VALID], s->stacked);
}

/* Collects a slot's selection: the host columns now, the device ones enqueued (cuda). */
static int collect_slot(gb_learning *L, batch_slot *s, gb_error *err)
{
    gb_replay_dst dst[GB_CHUNK_NCOLS];
    int nd = host_dst(L, s, dst);
    double t0 = gb_now_s();
    int rc = gb_replay_collect(L->replay, &s->sel, dst, nd, NULL, err);
    if (rc == 0)
        rebuild_obs(L, s, s->sel.n);
    s->collect_us = (gb_now_s() - t0) * 1e6;
    if (rc == 0 && L->cuda)
        rc = device_collect(L, s, err);
    return rc;
}

/* Waits for a slot's device collection (usually done: it ran while the step before trained)
 * and adds its time by the CUDA events. After this, libtorch's work enqueued from the host is
 * ordered after the gather. */
static int finish_slot(gb_learning *L, batch_slot *s, gb_error *err)
{
    if (!L->cuda || !s->timing)
        return 0;
    double us = 0.0;
    int rc = gb_kernels_sync(L->kctx, err);
    if (rc == 0)
        rc = gb_kernels_timer_read(L->kctx, &us, err);
    s->collect_us += us;
    s->timing = 0;
    return rc;
}

static int alloc_slot(gb_learning *L, batch_slot *s, gb_error *err)
{
    int rc = 0;
    for (int c = 0; c < L->layout.ncols; c++)
        if (!on_device(L, c) &&
            posix_memalign(&s->host[c], 64, (size_t)L->Bl * L->layout.bytes[c]) != 0)
            return gb_error_set(err, GB_ENOMEM, "out of memory for a training batch of %lld "
                                "chunks", (long long)L->Bl);
    size_t stacked = (size_t)L->Bl * whole_obs_bytes(L);
    if (first_dev(L))
        rc = L->cuda ? gb_kernels_host_alloc(stacked, &s->stacked, err)
             : posix_memalign(&s->stacked, 64, stacked) == 0 ? 0
             : gb_error_set(err, GB_ENOMEM, "out of memory for a training batch's observations");
    for (int i = 0; L->cuda && rc == 0 && i < NDEV; i++) {
        size_t bytes = i == 0 && first_dev(L) ? stacked
                                              : (size_t)L->Bl * L->layout.bytes[device_cols[i]];
        rc = gb_kernels_device_alloc(bytes, &s->dev[i], err);
        if (rc == 0 && L->collect == GB_COLLECT_CPU_STAGED && i >= first_dev(L))
            rc = gb_kernels_host_alloc(bytes, &s->pinned[i], err);
    }
    if (rc)
        return rc;
    /* a shard's part of a global selection can be the whole batch */
    rc = gb_replay_selection_init(&s->sel, L->B, err);
    s->sel_init = rc == 0;
    return rc;
}

static void free_slot(const gb_learning *L, batch_slot *s)
{
    if (L->cuda)
        gb_kernels_host_free(s->stacked);
    else
        free(s->stacked);
    if (s->sel_init)
        gb_replay_selection_free(&s->sel);
    for (int c = 0; c < GB_CHUNK_NCOLS; c++)
        free(s->host[c]);
    for (int i = 0; i < NDEV; i++) {
        gb_kernels_device_free(s->dev[i]);
        gb_kernels_host_free(s->pinned[i]);
    }
}

static int alloc_staging(gb_learning *L, gb_error *err)
{
    int rc = 0;
    for (int i = 0; rc == 0 && i < (L->prefetch ? 2 : 1); i++)
        rc = alloc_slot(L, &L->slot[i], err);
    if (rc)
        return rc;
    L->priorities_f = malloc((size_t)L->Bl * sizeof *L->priorities_f);
    L->priorities = malloc((size_t)L->Bl * sizeof *L->priorities);
    L->weights = malloc((size_t)L->Bl * sizeof *L->weights);
    if (!L->priorities_f || !L->priorities || !L->weights)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    return 0;
}

/* trainer.device cuda: what the build and the machine must have, the collection stream, and
 * (gpu_zero_copy) the replay's tables page-locked and mapped. */
static int open_device(gb_learning *L, gb_error *err)
{
    int rc = gb_kernels_ctx_create(0, NULL, &L->kctx, err);
    if (rc == 0 && L->collect == GB_COLLECT_GPU_ZERO_COPY)
        rc = gb_replay_gpu_open(L->replay, L->kctx, L->Bl, &L->rgpu, err);
    if (rc)
        gb_error_prefix(err, "learning: trainer.device cuda");
    return rc;
}

static int cuda_usable(gb_error *err)
{
    if (!gb_kernels_cuda_built())
        return gb_error_set(err, GB_EUNSUPPORTED, "trainer.device: cuda: this gearbox was built "
                            "without CUDA (no nvcc at build time, or -DGEARBOX_CUDA=OFF)");
    if (gb_kernels_device_count() < 1)
        return gb_error_set(err, GB_EUNSUPPORTED, "trainer.device: cuda: no CUDA device is "
                            "visible to this process (driver, CUDA_VISIBLE_DEVICES)");
    if (!gb_torch_cuda_available())
        return gb_error_set(err, GB_EUNSUPPORTED, "trainer.device: cuda: the libtorch this "
                            "gearbox links has no CUDA (a cpu build)");
    return 0;
}

int gb_learning_create(const gb_learning_opts *o, gb_learning **out, gb_error *err)
{
    *out = NULL;
    const gb_config *cfg = o->cfg;
    int rc = 0;
    if (cfg->trainer.device == GB_DEVICE_CUDA && (rc = cuda_usable(err)))
        return rc;
    gb_learning *L = calloc(1, sizeof *L);
    if (!L)
        return gb_error_set(err, GB_ENOMEM, "learning: out of memory");
    L->cfg = cfg;
    L->layout = *o->layout;
    L->B = cfg->trainer.batch_size;
    L->group = o->group;
    int ranks = o->group ? gb_group_size(o->group) : 1;
    L->Bl = L->B / ranks;
    L->weighted = cfg->trainer.replay.selector == GB_SELECTOR_WEIGHTED;
    L->cuda = cfg->trainer.device == GB_DEVICE_CUDA;
    L->collect = cfg->trainer.collect;
    L->prefetch = !o->group && !o->inline_mode &&
                  (cfg->trainer.prefetch == GB_PREFETCH_ON ||
                   (cfg->trainer.prefetch == GB_PREFETCH_AUTO && L->cuda));
    if (L->B % ranks != 0)
        rc = gb_error_set(err, GB_EINVAL, "trainer.batch_size %lld does not split over %d "
                          "trainers", (long long)L->B, ranks);
    if (rc == 0)
        rc = gb_torch_learner_create(cfg, o->space, o->learner_seed, &L->learner, err);
    if (rc == 0 && o->model_checkpoint) {
        rc = gb_torch_learner_load(L->learner, o->model_checkpoint, err);
        if (rc == 0) {
            L->train_steps = gb_torch_learner_train_steps(L->learner);
            L->restored = 1;
        }
        else if (rc == GB_ENOTFOUND)
            rc = 0; /* no checkpoint yet: a fresh start */
        else
            gb_error_prefix(err, "learning: restoring %s", o->model_checkpoint);
    }
    if (rc == 0)
        rc = gb_learning_replay_create(o, &L->layout,
                                       L->cuda && L->collect == GB_COLLECT_GPU_ZERO_COPY,
                                       &L->replay, err);
    if (rc == 0 && L->cuda)
        rc = open_device(L, err);
    if (rc == 0)
        rc = alloc_staging(L, err);
    if (rc == 0 && L->group)
        rc = gb_torch_learner_set_group(L->learner, L->group,
                                        (size_t)cfg->trainer.bucket_bytes, err);
    if (rc == 0 && L->group && !(L->checksums = calloc((size_t)ranks, sizeof *L->checksums)))
        rc = gb_error_set(err, GB_ENOMEM, "learning: out of memory");
    if (rc == 0 && L->group) {
        gb_shards_opts so = {.group = L->group, .replay = L->replay, .batch = L->B,
                             .seed = o->shared_seed,
                             .global = cfg->trainer.replay.selection == GB_SELECTION_GLOBAL};
        rc = gb_shards_create(&so, &L->shards, err);
        L->global = so.global;
    }
    if (rc) {
        gb_learning_destroy(L);
        return rc;
    }
    *out = L;
    return 0;
}

void gb_learning_destroy(gb_learning *L)
{
    if (!L)
        return;
    if (L->kctx) { /* nothing may still read the slots' buffers or the tables */
        gb_error e = {0};
        if (gb_kernels_sync(L->kctx, &e))
            GB_WARN("learning: at destroy: %s", e.msg);
    }
    for (int i = 0; i < 2; i++) {
        if (L->replay)
            gb_replay_release(L->replay, &L->slot[i].sel);
        free_slot(L, &L->slot[i]);
    }
    gb_replay_gpu_close(L->rgpu);
    gb_kernels_ctx_destroy(L->kctx);
    free(L->priorities_f);
    free(L->priorities);
    free(L->weights);
    free(L->checksums);
    gb_shards_destroy(L->shards);
    gb_replay_free(L->replay);
    gb_torch_learner_destroy(L->learner);
    free(L);
}

gb_replay *gb_learning_replay(gb_learning *L) { return L->replay; }
int gb_learning_restored(const gb_learning *L) { return L->restored; }
gb_torch_learner *gb_learning_learner(gb_learning *L) { return L->learner; }
gb_torch_model *gb_learning_model(gb_learning *L) { return gb_torch_learner_model(L->learner); }
const gb_torch_stats *gb_learning_last(const gb_learning *L) { return &L->last; }
int64_t gb_learning_train_steps(const gb_learning *L) { return L->train_steps; }
int64_t gb_learning_samples_trained(const gb_learning *L) { return L->samples_trained; }

void gb_learning_write(gb_learning *L, int64_t idx, const void *const cols[GB_CHUNK_NCOLS])
{
    for (int c = 0; c < L->layout.ncols; c++)
        memcpy(gb_replay_block(L->replay, c, idx), cols[c], L->layout.bytes[c]);
    gb_learning_observe(L->cfg, &L->layout, L->learner, cols);
}

int gb_learning_commit(gb_learning *L, int64_t n, const int64_t *idx, const int64_t *versions,
                       gb_error *err)
{
    enum { MAX_BATCH = 64 };
    int32_t lengths[MAX_BATCH];
    for (int i = 0; i < MAX_BATCH; i++)
        lengths[i] = (int32_t)L->layout.T;
    if (L->global)
        gb_shards_stamp(L->shards, n, idx, NULL);
    for (int64_t first = 0; first < n; first += MAX_BATCH) {
        int64_t k = n - first < MAX_BATCH ? n - first : MAX_BATCH;
        int rc = gb_replay_commit(L->replay, k, idx + first, NULL, lengths, versions + first, err);
        if (rc)
            return rc;
    }
    return 0;
}

int gb_learning_insert(gb_learning *L, const void *const cols[GB_CHUNK_NCOLS], int64_t version,
                       double timeout_s, gb_error *err)
{
    int64_t idx;
    int rc = gb_replay_allocate(L->replay, 1, &idx, timeout_s, err);
    if (rc)
        return rc;
    gb_learning_write(L, idx, cols);
    return gb_learning_commit(L, 1, &idx, &version, err);
}

static gb_torch_batch batch_view(const gb_learning *L, const batch_slot *s, int64_t n,
                                 const float *weights)
{
    return (gb_torch_batch){
        .B = n,
        .T = L->layout.T,
        .obs = L->cuda ? s->dev[0] : s->stacked ? s->stacked : s->host[GB_CHUNK_OBS],
        .next_obs = L->cuda ? s->dev[1] : s->host[GB_CHUNK_NEXT_OBS],
        .obs_on_device = L->cuda,
        .action = s->host[GB_CHUNK_ACTION],
        .reward = s->host[GB_CHUNK_REWARD],
        .terminated = s->host[GB_CHUNK_TERMINATED],
        .truncated = s->host[GB_CHUNK_TRUNCATED],
        .valid = s->host[GB_CHUNK_VALID],
        .logp = s->host[GB_CHUNK_LOGP],
        .weights = L->weighted ? weights : NULL,
        /* a core's state entering row 0 (host, like the per-step scalars), then the return */
        .state0 = L->layout.state_size > 0 ? s->host[GB_CHUNK_STATE] : NULL,
        .state_stride = L->layout.state_size,
    };
}

void gb_learning_set_progress(gb_learning *L, double progress)
{
    L->progress = progress;
    if (!L->group)
        gb_torch_learner_set_progress(L->learner, progress);
}

/* Several trainers: every trainer.checksum_every steps, every replica's parameter checksum is
 * gathered and compared (the all-reduced gradients keep them identical: checked, not assumed). */
static int check_replicas(gb_learning *L, gb_error *err)
{
    int64_t every = L->cfg->trainer.checksum_every;
    if (!L->group || every <= 0 || L->train_steps % every != 0)
        return 0;
    int n = gb_group_size(L->group);
    uint64_t mine = gb_torch_learner_checksum(L->learner), *all = L->checksums;
    int rc = gb_group_allgather(L->group, &mine, sizeof mine, all, err);
    if (rc)
        return rc;
    for (int r = 0; r < n; r++)
        if (all[r] != mine)
            return gb_error_set(err, GB_ECORRUPT, "learning: after %lld steps the parameters of "
                                "trainer %d (checksum %016llx) differ from trainer %d's "
                                "(%016llx): the replicas diverged", (long long)L->train_steps,
                                r, (unsigned long long)all[r], gb_group_rank(L->group),
                                (unsigned long long)mine);
    GB_INFO("learning: step %lld parameter checksum %016llx, equal on all %d trainers",
            (long long)L->train_steps, (unsigned long long)mine, n);
    return 0;
}

/* Selects and collects the batch after this one into the other slot, without waiting: the
 * rate limiter's no leaves it to the next step. Its staleness floor is the one the learner will
 * have when it trains (one version on). */
static int prefetch_next(gb_learning *L, const gb_replay_request *now, gb_error *err)
{
    batch_slot *s = &L->slot[L->cur ^ 1];
    gb_replay_request req = *now;
    req.timeout_s = 0;
    if (req.min_policy_version != GB_REPLAY_NO_MIN_VERSION)
        req.min_policy_version++;
    int rc = gb_replay_sample(L->replay, &req, &s->sel, err);
    if (rc == GB_ETIMEOUT)
        return 0;
    if (rc == 0)
        rc = collect_slot(L, s, err);
    if (rc)
        gb_replay_release(L->replay, &s->sel);
    s->live = rc == 0;
    return rc;
}

/* Trains on a slot's n collected items (weights: their importance weights) and gives the replay
 * their new priorities (weighted replays). A non-finite loss is GB_ECORRUPT. */
static int train_slot(gb_learning *L, batch_slot *s, int64_t n, const float *weights,
                      gb_error *err)
{
    gb_torch_batch b = batch_view(L, s, n, weights);
    double t0 = gb_now_s();
    int rc = gb_torch_learner_train(L->learner, &b, &L->last,
                                    L->weighted ? L->priorities_f : NULL, err);
    L->train_ms += (gb_now_s() - t0) * 1e3;
    L->collect_ms += s->collect_us * 1e-3;
    /* A non-finite loss means the parameters are lost too (the step already applied its
     * gradients): going on would only publish and train on NaN. Stop with the cause. */
    if (rc == 0 && !isfinite(L->last.loss))
        rc = gb_error_set(err, GB_ECORRUPT, "learning: the loss is %g at training step %lld "
                          "(policy loss %g, value loss %g): the learner diverged; stopping "
                          "(lower trainer.lr, or check the environment's observations and "
                          "rewards)", L->last.loss, (long long)L->train_steps + 1,
                          L->last.policy_loss, L->last.value_loss);
    if (rc == 0 && L->weighted) {
        for (int64_t i = 0; i < n; i++)
            L->priorities[i] = L->priorities_f[i];
        rc = L->global ? gb_shards_update_priorities(L->shards, L->priorities, err)
                       : gb_replay_update_priorities(L->replay, n, s->sel.index, s->sel.key,
                                                     L->priorities, NULL, err);
    }
    return rc;
}

int gb_learning_step(gb_learning *L, double timeout_s, int stop, gb_error *err)
{
    batch_slot *s = &L->slot[L->cur];
    if (stop && !L->group) {
        gb_error e = {0};
        if (L->kctx && gb_kernels_sync(L->kctx, &e)) /* its gather may still read the tables */
            GB_WARN("learning: at stop: %s", e.msg);
        for (int i = 0; i < 2; i++) { /* a prefetched batch */
            gb_replay_release(L->replay, &L->slot[i].sel);
            L->slot[i].live = 0;
        }
        return 2;
    }
    gb_replay_request req = gb_replay_request_default(L->Bl);
    req.timeout_s = timeout_s;
    int64_t version = (int64_t)gb_torch_model_version(gb_torch_learner_model(L->learner));
    if (L->cfg->trainer.max_staleness >= 0)
        req.min_policy_version = version - L->cfg->trainer.max_staleness;
    int rc = 0;
    if (L->group) {
        double progress;
        if ((rc = gb_shards_agree(L->shards, &req, stop, L->progress, &progress, err)) != 1)
            return rc;
        gb_torch_learner_set_progress(L->learner, progress);
        req.admitted = 1; /* every shard said yes to its share */
    }
    int64_t n = 0;
    const float *weights = s->sel.weight;
    if (L->global) {
        gb_replay_dst dst[GB_CHUNK_NCOLS];
        int nd = host_dst(L, s, dst); /* several trainers: cpu only (config_check.c) */
        rc = gb_shards_select(L->shards, &req, &s->sel, dst, nd, L->weights, &n, err);
        if (rc == 0)
            rebuild_obs(L, s, n);
        weights = L->weights;
        if (rc == 0 && n == 0) { /* every rank got the same answer: nobody trains */
            gb_replay_release(L->replay, &s->sel);
            return 0;
        }
    } else {
        if (!s->live) {
            rc = gb_replay_sample(L->replay, &req, &s->sel, err);
            if (rc == GB_ETIMEOUT && !L->group)
                return 0;
            if (rc == 0)
                rc = collect_slot(L, s, err);
        }
        s->live = 0;
        n = s->sel.n;
        if (rc == 0)
            rc = finish_slot(L, s, err);
        if (rc == 0 && L->prefetch)
            rc = prefetch_next(L, &req, err);
    }
    if (rc == 0)
        rc = train_slot(L, s, n, weights, err);
    gb_replay_release(L->replay, &s->sel);
    if (L->prefetch)
        L->cur ^= 1;
    if (rc)
        return rc;
    L->train_steps++;
    L->samples_trained += L->last.samples;
    if ((rc = check_replicas(L, err)))
        return rc;
    return 1;
}

void gb_learning_timings(const gb_learning *L, double *collect_ms, double *train_ms)
{
    *collect_ms = L->collect_ms;
    *train_ms = L->train_ms;
}

int gb_learning_prefetching(const gb_learning *L) { return L->prefetch; }

const char *gb_learning_collect_path(const gb_learning *L)
{
    if (!L->cuda)
        return "host";
    return L->collect == GB_COLLECT_CPU_STAGED ? "cpu_staged" : "gpu_zero_copy";
}

int gb_learning_checkpoint(gb_learning *L, const char *model_path, const char *replay_path,
                           gb_error *err)
{
    int rc = gb_torch_learner_save(L->learner, model_path, err);
    if (rc == 0 && replay_path)
        rc = gb_replay_checkpoint(L->replay, replay_path, err);
    return rc;
}
