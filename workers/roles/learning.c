/* workers/roles/learning.c: the learning step shared by the trainer worker and inline mode (see
 * learning.h). */
#include "workers/roles/learning_internal.h"

#include "envs/host.h"
#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "workers/roles/learner_file.h"
#include "workers/roles/policy_file.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    int early = rc == 0 ? gb_learning_early_open(L, o, err) : 0;
    if (early < 0)
        rc = early;
    else if (rc == 0 && !early &&
             (rc = gb_torch_set_threads((int)cfg->trainer.threads, err)) == 0)
        rc = gb_torch_learner_create(cfg, o->space, o->learner_seed, &L->learner, err);
    if (rc == 0 && !early && o->model_checkpoint) {
        rc = gb_learner_checkpoint_load(L->learner, cfg, o->model_checkpoint, err);
        if (rc == 0) {
            L->train_steps = gb_torch_learner_train_steps(L->learner);
            L->restored = 1;
            int resumed = gb_learning_early_resume(L, o, err); /* the C learner goes on */
            rc = resumed < 0 ? resumed : 0;
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
        rc = gb_learning_open_device(L, err);
    if (rc == 0)
        rc = gb_learning_alloc_staging(L, err);
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
        gb_learning_free_slot(L, &L->slot[i]);
    }
    gb_replay_gpu_close(L->rgpu);
    gb_kernels_ctx_destroy(L->kctx);
    free(L->priorities_f);
    free(L->priorities);
    free(L->weights);
    free(L->checksums);
    gb_shards_destroy(L->shards);
    gb_replay_free(L->replay);
    gb_learning_early_close(L);
    gb_torch_learner_destroy(L->learner);
    free(L);
}

int gb_learning_join_group(gb_learning *L, gb_group *g, uint64_t shared_seed, gb_error *err)
{
    L->group = g;
    int rc = gb_torch_learner_set_group(L->learner, g, (size_t)L->cfg->trainer.bucket_bytes, err);
    if (rc)
        return rc;
    L->train_steps = gb_torch_learner_train_steps(L->learner);
    gb_shards_regroup(L->shards, g, shared_seed);
    return 0;
}

gb_replay *gb_learning_replay(gb_learning *L) { return L->replay; }
int gb_learning_restored(const gb_learning *L) { return L->restored; }
gb_torch_learner *gb_learning_learner(gb_learning *L) { return L->learner; }
gb_torch_model *gb_learning_model(gb_learning *L)
{
    return L->learner ? gb_torch_learner_model(L->learner) : NULL;
}

void gb_learning_param_layout(const gb_learning *L, const gb_param_entry **table, int *count,
                              uint64_t *total)
{
    if (L->early) { /* laid out as the bridge's model is */
        *table = L->early->layout;
        *count = L->early->nlayout;
        *total = L->early->total;
    } else
        gb_torch_model_layout(gb_torch_learner_model(L->learner), table, count, total);
}

int gb_learning_export(const gb_learning *L, void *buf, size_t cap, uint64_t *version,
                       gb_error *err)
{
    return L->early_live ? gb_flat_mlp_export(L->early, buf, cap, version, err)
                         : gb_torch_model_export(gb_torch_learner_model(L->learner), buf, cap,
                                                 version, err);
}

uint64_t gb_learning_version(const gb_learning *L)
{
    return L->early_live ? L->early->version
                         : gb_torch_model_version(gb_torch_learner_model(L->learner));
}

void gb_learning_set_version(gb_learning *L, uint64_t version)
{
    if (L->early_live)
        L->early->version = version;
    else
        gb_torch_model_set_version(gb_torch_learner_model(L->learner), version);
}

const char *gb_learning_kernels(const gb_learning *L)
{
    if (L->early_live)
        return "gearbox C, libtorch loaded only for its BLAS where a layer is 128 wide or more";
    return gb_torch_learner_kernels(L->learner);
}
const gb_torch_stats *gb_learning_last(const gb_learning *L) { return &L->last; }
int64_t gb_learning_train_steps(const gb_learning *L) { return L->train_steps; }
int64_t gb_learning_samples_trained(const gb_learning *L) { return L->samples_trained; }

void gb_learning_mark_trained(gb_learning *L)
{
    gb_replay_stats rs;
    gb_replay_stats_get(L->replay, &rs);
    L->trained_mark = rs.first_samples;
}

int64_t gb_learning_chunks_trained(const gb_learning *L)
{
    gb_replay_stats rs;
    gb_replay_stats_get(L->replay, &rs);
    return (int64_t)(rs.first_samples - L->trained_mark);
}

void gb_learning_write(gb_learning *L, int64_t idx, const void *const cols[GB_CHUNK_NCOLS])
{
    for (int c = 0; c < L->layout.ncols; c++)
        memcpy(gb_replay_block(L->replay, c, idx), cols[c], L->layout.bytes[c]);
    /* (the statistics never start without libtorch: L->learner is read only where they are
     * kept, and then never changes) */
    if (L->cfg->policy.model.normalize_obs || L->layout.return_carry)
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


void gb_learning_set_progress(gb_learning *L, double progress)
{
    L->progress = progress;
    if (L->early_live)
        gb_flat_mlp_set_progress(L->early, progress);
    else if (!L->group)
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
        rc = gb_learning_collect_slot(L, s, err);
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
    gb_torch_batch b = gb_learning_batch_view(L, s, n, weights);
    double t0 = gb_now_s();
    float *prio = L->weighted ? L->priorities_f : NULL;
    int rc = L->early_live ? gb_learning_early_train(L, &b, prio, err)
                           : gb_torch_learner_train(L->learner, &b, &L->last, prio, err);
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
    if (L->held && !stop) { /* no step: wait as the rate limiter would (the others in theirs) */
        gb_sleep_ms((int)(timeout_s * 1000));
        if (!L->group)
            return 0; /* several trainers: the agreement below says "not yet" to all */
    }
    int rc = gb_learning_early_poll(L, err); /* joins the loader once it is done */
    if (rc)
        return rc;
    gb_replay_request req = gb_replay_request_default(L->Bl);
    req.timeout_s = timeout_s;
    int64_t version = (int64_t)gb_learning_version(L);
    if (L->cfg->trainer.max_staleness >= 0)
        req.min_policy_version = version - L->cfg->trainer.max_staleness;
    if (L->group) {
        double progress;
        if ((rc = gb_shards_agree(L->shards, &req, stop, L->held, L->progress, &progress,
                                  err)) != 1)
            return rc;
        gb_torch_learner_set_progress(L->learner, progress);
        req.admitted = 1; /* every shard said yes to its share */
    }
    int64_t n = 0;
    const float *weights = s->sel.weight;
    if (L->global) {
        gb_replay_dst dst[GB_CHUNK_NCOLS];
        int nd = gb_learning_host_dst(L, s, dst); /* several trainers: cpu only (config_check.c) */
        rc = gb_shards_select(L->shards, &req, &s->sel, dst, nd, L->weights, &n, err);
        if (rc == 0)
            gb_learning_rebuild_obs(L, s, n);
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
                rc = gb_learning_collect_slot(L, s, err);
        }
        s->live = 0;
        n = s->sel.n;
        if (rc == 0)
            rc = gb_learning_finish_slot(L, s, err);
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

void gb_learning_hold(gb_learning *L, int held) { L->held = held != 0; }

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
                           const char *policy_path, gb_error *err)
{
    int rc = L->early_live ? gb_learning_early_save(L, model_path, err)
                           : gb_torch_learner_save(L->learner, model_path, err);
    if (rc == 0 && replay_path)
        rc = gb_replay_checkpoint(L->replay, replay_path, err);
    if (rc == 0 && policy_path) {
        const gb_param_entry *table;
        int count;
        uint64_t bytes, version = 0;
        gb_learning_param_layout(L, &table, &count, &bytes);
        void *buf = malloc(bytes ? bytes : 1); /* a checkpoint's, not a step's */
        if (!buf)
            return gb_error_set(err, GB_ENOMEM, "policy file: out of memory");
        rc = gb_learning_export(L, buf, bytes, &version, err);
        if (rc == 0)
            rc = gb_policy_file_write(policy_path, version, table, count, buf, bytes, err);
        free(buf);
    }
    return rc;
}

int gb_learning_write_set(void *ctx, const char *model_path, const char *replay_path,
                          const char *policy_path, gb_error *err)
{
    return gb_learning_checkpoint(ctx, model_path, replay_path, policy_path, err);
}
