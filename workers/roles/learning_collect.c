/* workers/roles/learning_collect.c: how a selected batch reaches the learner (see the comment
 * on collection in learning_internal.h): host staging, the device gather, frame stacks. */
#include "workers/roles/learning_internal.h"

#include "runtime/base/clock.h"

#include <stdlib.h>

/* The columns a cuda trainer collects to the device: i < ndev(L). */
static int ndev(const gb_learning *L) { return L->layout.past_col >= 0 ? 3 : 2; }

static int device_col(const gb_learning *L, int i)
{
    return i == 0 ? GB_CHUNK_OBS : i == 1 ? GB_CHUNK_NEXT_OBS : L->layout.past_col;
}

static int stacks(const gb_learning *L) { return L->layout.frame_stack > 1; }

/* Bytes of one item's whole observations [T, *obs_shape] (k frames a row with a frame stack). */
static size_t whole_obs_bytes(const gb_learning *L)
{
    return (size_t)L->layout.T * L->layout.frame_bytes * (size_t)L->layout.frame_stack;
}

static int on_device(const gb_learning *L, int c)
{
    for (int i = 0; L->cuda && i < ndev(L); i++)
        if (device_col(L, i) == c)
            return 1;
    return 0;
}

/* The host destinations of a slot (every column on the cpu; the small ones with cuda). */
int gb_learning_host_dst(const gb_learning *L, batch_slot *s, gb_replay_dst dst[GB_CHUNK_NCOLS])
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
    const int nd = ndev(L);
    gb_replay_dst dst[NDEV];
    for (int i = 0; i < nd; i++)
        dst[i] = (gb_replay_dst){.column = device_col(L, i), .data = s->dev[i],
                                 .bytes = (size_t)L->Bl * L->layout.bytes[device_col(L, i)]};
    int rc = gb_kernels_after_default_stream(L->kctx, err);
    if (rc == 0 && L->collect == GB_COLLECT_CPU_STAGED) {
        gb_replay_dst pin[NDEV];
        for (int i = 0; i < nd; i++)
            pin[i] = (gb_replay_dst){.column = dst[i].column, .data = s->pinned[i],
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
    if (rc == 0 && stacks(L)) /* the whole observations, rebuilt there */
        rc = gb_kernels_copy(L->kctx, s->dev_valid, s->host[GB_CHUNK_VALID],
                             (size_t)s->sel.n * L->layout.bytes[GB_CHUNK_VALID], err);
    if (rc == 0 && stacks(L))
        rc = gb_kernels_stack_expand(L->kctx, s->sel.n, L->layout.T, L->layout.frame_stack,
                                     L->layout.frame_bytes, s->dev[0], s->dev[2], s->dev_valid,
                                     s->stacked, err);
    if (rc == 0)
        rc = gb_kernels_timer_mark(L->kctx, err);
    s->timing = rc == 0;
    return rc;
}

/* With a frame stack on the cpu: the n collected items' whole observations from their frames. */
void gb_learning_rebuild_obs(const gb_learning *L, batch_slot *s, int64_t n)
{
    const gb_chunk_layout *l = &L->layout;
    if (stacks(L) && !L->cuda)
        gb_chunk_stack_expand(l, n, s->host[GB_CHUNK_OBS], s->host[l->past_col],
                              s->host[GB_CHUNK_VALID], s->stacked);
}

/* Collects a slot's selection: the host columns now, the device ones enqueued (cuda). */
int gb_learning_collect_slot(gb_learning *L, batch_slot *s, gb_error *err)
{
    gb_replay_dst dst[GB_CHUNK_NCOLS];
    int nd = gb_learning_host_dst(L, s, dst);
    double t0 = gb_now_s();
    int rc = gb_replay_collect(L->replay, &s->sel, dst, nd, NULL, err);
    if (rc == 0)
        gb_learning_rebuild_obs(L, s, s->sel.n);
    s->collect_us = (gb_now_s() - t0) * 1e6;
    if (rc == 0 && L->cuda)
        rc = device_collect(L, s, err);
    return rc;
}

/* Waits for a slot's device collection (usually done: it ran while the step before trained)
 * and adds its time by the CUDA events. After this, libtorch's work enqueued from the host is
 * ordered after the gather. */
int gb_learning_finish_slot(gb_learning *L, batch_slot *s, gb_error *err)
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
    if (stacks(L))
        rc = L->cuda ? gb_kernels_device_alloc(stacked, &s->stacked, err)
             : posix_memalign(&s->stacked, 64, stacked) == 0 ? 0
             : gb_error_set(err, GB_ENOMEM, "out of memory for a training batch's observations");
    if (stacks(L) && L->cuda && rc == 0)
        rc = gb_kernels_device_alloc((size_t)L->Bl * L->layout.bytes[GB_CHUNK_VALID],
                                     &s->dev_valid, err);
    for (int i = 0; L->cuda && rc == 0 && i < ndev(L); i++) {
        size_t bytes = (size_t)L->Bl * L->layout.bytes[device_col(L, i)];
        rc = gb_kernels_device_alloc(bytes, &s->dev[i], err);
        if (rc == 0 && L->collect == GB_COLLECT_CPU_STAGED)
            rc = gb_kernels_host_alloc(bytes, &s->pinned[i], err);
    }
    if (rc)
        return rc;
    /* a shard's part of a global selection can be the whole batch */
    rc = gb_replay_selection_init(&s->sel, L->B, err);
    s->sel_init = rc == 0;
    return rc;
}

void gb_learning_free_slot(const gb_learning *L, batch_slot *s)
{
    if (L->cuda) {
        gb_kernels_device_free(s->stacked);
        gb_kernels_device_free(s->dev_valid);
    } else {
        free(s->stacked);
    }
    if (s->sel_init)
        gb_replay_selection_free(&s->sel);
    for (int c = 0; c < GB_CHUNK_NCOLS; c++)
        free(s->host[c]);
    for (int i = 0; i < NDEV; i++) {
        gb_kernels_device_free(s->dev[i]);
        gb_kernels_host_free(s->pinned[i]);
    }
}

int gb_learning_alloc_staging(gb_learning *L, gb_error *err)
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
int gb_learning_open_device(gb_learning *L, gb_error *err)
{
    int rc = gb_kernels_ctx_create(0, NULL, &L->kctx, err);
    if (rc == 0 && L->collect == GB_COLLECT_GPU_ZERO_COPY)
        rc = gb_replay_gpu_open(L->replay, L->kctx, L->Bl, &L->rgpu, err);
    if (rc)
        gb_error_prefix(err, "learning: trainer.device cuda");
    return rc;
}

gb_torch_batch gb_learning_batch_view(const gb_learning *L, const batch_slot *s, int64_t n,
                                 const float *weights)
{
    return (gb_torch_batch){
        .B = n,
        .T = L->layout.T,
        .obs = s->stacked ? s->stacked : L->cuda ? s->dev[0] : s->host[GB_CHUNK_OBS],
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
