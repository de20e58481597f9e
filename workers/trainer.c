/* workers/trainer.c: the trainer worker. The replay (GEAR store) lives in this process's
 * shared host memory. The ingest thread pulls trajectory chunks from the sample stream and
 * writes each straight into its replay block (allocate -> copy the frames in -> commit); the
 * train thread (this one) waits on the rate limiter, selects, collects into staging buffers
 * allocated once, runs the algorithm, updates priorities, and pushes parameters to the
 * parameter service every trainer.push_params_every steps. Staleness is bounded by policy
 * version: items more than trainer.max_staleness versions behind the learner are expired. */
#include "workers/worker.h"

#include "envs/env.h"
#include "replay/formats/dataset.h"
#include "replay/replay.h"
#include "runtime/clock.h"
#include "runtime/log.h"
#include "runtime/params.h"
#include "runtime/sample.h"
#include "runtime/wire.h"
#include "workers/chunk.h"
#include "workers/torch/bridge.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define INGEST_BATCH 32 /* chunks taken per allocate/commit */

typedef struct trainer {
    gb_worker *w;
    gb_torch_space space;
    gb_chunk_layout layout;
    gb_torch_learner *learner;
    gb_replay *replay;
    gb_sample_receiver *samples;
    gb_param_publisher *publisher;
    /* ingest thread */
    pthread_t ingest;
    int ingest_started;
    int ingest_rc;
    gb_error ingest_err;
    atomic_llong ingested, rejected_chunks;
    atomic_int ending_seen;    /* 1: the ingest thread saw GB_RUN_ENDING_FILE; 2: reported */
    atomic_llong discarded_at_stop; /* chunks taken unused as the run ended: by the ingest
                                       thread, then by drain_at_stop once it has ended */
    /* train thread staging, allocated once */
    gb_replay_selection sel;
    void *staging[GB_CHUNK_NCOLS];
    float *priorities_f;
    double *priorities;
    void *param_buf;
    uint64_t param_bytes;
    gb_param_entry *param_layout;
    int param_count;
    int64_t train_steps, samples_trained, published_version;
    gb_torch_stats last;
    gb_dataset_writer *record; /* gearbox run --record DIR: every chunk received, appended */
} trainer;

/* Checks that a received chunk has exactly the layout's tensors. */
static int check_chunk(const trainer *t, const gb_wire_msg *m)
{
    if (m->hdr.ntensors != GB_CHUNK_NCOLS)
        return 0;
    for (int c = 0; c < GB_CHUNK_NCOLS; c++) {
        const gb_tensor_desc *a = &m->hdr.tensors[c], *b = &t->layout.desc[c];
        if (strcmp(a->name, b->name) != 0 || a->dtype != b->dtype || a->rank != b->rank ||
            memcmp(a->shape, b->shape, (size_t)a->rank * sizeof a->shape[0]) != 0)
            return 0;
    }
    return 1;
}

/* gearbox run --record: appends a received chunk to the dataset (no-op without --record).
 * Returns 0 or the dataset writer's error. */
static int record_chunk(trainer *t, const gb_wire_msg *m, gb_error *err)
{
    if (!t->record)
        return 0;
    const void *cols[GB_CHUNK_NCOLS];
    for (int c = 0; c < GB_CHUNK_NCOLS; c++)
        cols[c] = gb_wire_msg_tensor(m, c).data;
    return gb_dataset_writer_append(t->record, cols, m->hdr.policy_version,
                                    (int32_t)t->layout.T, err);
}

/* Once the launcher has said the run is ending (GB_RUN_ENDING_FILE): sets *ending and tells
 * the train thread, which confirms to the launcher. */
static void look_for_end(trainer *t, int *ending)
{
    if (!*ending && (*ending = gb_worker_run_ending(t->w)))
        atomic_store(&t->ending_seen, 1);
}

static void *ingest_main(void *arg)
{
    trainer *t = arg;
    gb_worker *w = t->w;
    gb_wire_msg msgs[INGEST_BATCH];
    int64_t idx[INGEST_BATCH], versions[INGEST_BATCH];
    int32_t lengths[INGEST_BATCH];
    for (int i = 0; i < INGEST_BATCH; i++)
        gb_wire_msg_init(&msgs[i]);
    gb_error *err = &t->ingest_err;
    int ending = 0; /* the launcher said the run is ending (gb_worker_run_ending) */
    double next_look = 0;
    while (!gb_worker_stopping(w)) {
        if (!ending && gb_now_s() >= next_look) {
            next_look = gb_now_s() + 0.05;
            look_for_end(t, &ending);
        }
        /* Take what is waiting (at least one, waiting up to 100 ms for it). */
        int n = 0;
        while (n < INGEST_BATCH) {
            int rc = gb_sample_recv(t->samples, &msgs[n], n == 0 ? 100 : 0, err);
            if (rc == GB_EAGAIN)
                break;
            if (rc) {
                t->ingest_rc = rc;
                goto out;
            }
            if (!check_chunk(t, &msgs[n])) {
                atomic_fetch_add(&t->rejected_chunks, 1);
                gb_wire_msg_release(&msgs[n]);
                continue;
            }
            if ((rc = record_chunk(t, &msgs[n], err))) {
                t->ingest_rc = rc;
                goto out;
            }
            n++;
        }
        if (n == 0)
            continue;
        /* All n in one allocate/commit when the rate limiter admits them now; else one item
         * at a time, each committed before the next is allocated: the limiter counts blocks
         * being written as inserts, so holding some while waiting for room for the others
         * could block sampling, and with it every insert, forever. */
        int rc = gb_replay_allocate(t->replay, n, idx, 0, err);
        int batched = rc == 0;
        int step = batched ? n : 1;
        if (rc == GB_ETIMEOUT)
            rc = 0;
        for (int first = 0; rc == 0 && first < n; first += step) {
            if (!batched) {
                /* Once the run is ending, nothing waits for the rate limiter: the socket keeps
                 * being read so the actors' last chunks arrive (counted as discarded). */
                do {
                    rc = gb_replay_allocate(t->replay, 1, &idx[first], ending ? 0 : 0.2, err);
                    if (rc == GB_ETIMEOUT)
                        look_for_end(t, &ending);
                } while (rc == GB_ETIMEOUT && !gb_worker_stopping(w) && !ending);
                if (rc == GB_ETIMEOUT && ending) {
                    for (int i = first; i < n; i++)
                        gb_wire_msg_release(&msgs[i]);
                    atomic_fetch_add(&t->discarded_at_stop, n - first);
                    atomic_fetch_add(&t->ingested, first);
                    n = 0;
                    rc = 0;
                    break;
                }
                if (rc)
                    break;
            }
            for (int i = first; i < first + step; i++) {
                for (int c = 0; c < GB_CHUNK_NCOLS; c++) {
                    gb_tensor_view v = gb_wire_msg_tensor(&msgs[i], c);
                    memcpy(gb_replay_block(t->replay, c, idx[i]), v.data, v.bytes);
                }
                versions[i] = msgs[i].hdr.policy_version;
                lengths[i] = (int32_t)t->layout.T;
                gb_wire_msg_release(&msgs[i]);
            }
            rc = gb_replay_commit(t->replay, step, &idx[first], NULL, &lengths[first],
                                  &versions[first], err);
        }
        if (rc) {
            for (int i = 0; i < n; i++)
                gb_wire_msg_release(&msgs[i]); /* no-op for those already written */
            if (rc == GB_ETIMEOUT || rc == GB_ECLOSED)
                break;
            t->ingest_rc = rc;
            goto out;
        }
        if (n)
            atomic_fetch_add(&t->ingested, n);
    }
out:
    for (int i = 0; i < INGEST_BATCH; i++)
        gb_wire_msg_release(&msgs[i]);
    if (t->ingest_rc)
        atomic_store(w->stop, 1);
    return NULL;
}

/* gearbox run --record DIR: opens DIR/trainer-<index>.gbds with the chunk layout as schema
 * (the replay's columns: next_obs per item). */
static int record_open(trainer *t, gb_error *err)
{
    gb_dataset_schema s = {.steps = t->layout.T, .ncolumns = GB_CHUNK_NCOLS};
    for (int c = 0; c < GB_CHUNK_NCOLS; c++) {
        const gb_tensor_desc *d = &t->layout.desc[c];
        gb_replay_column *col = &s.columns[c];
        int per_item = c == GB_CHUNK_NEXT_OBS;
        snprintf(col->name, sizeof col->name, "%s", d->name);
        col->dtype = d->dtype;
        col->per_item = per_item;
        col->ndim = per_item ? d->rank : d->rank - 1;
        if (col->ndim > GB_REPLAY_MAX_DIMS)
            return gb_error_set(err, GB_EINVAL, "--record: column %s has too many dimensions",
                                d->name);
        memcpy(col->shape, per_item ? d->shape : d->shape + 1,
               (size_t)col->ndim * sizeof col->shape[0]);
    }
    char path[2048];
    mkdir(t->w->record_dir, 0755);
    snprintf(path, sizeof path, "%s/trainer-%d%s", t->w->record_dir, t->w->index,
             GB_DATASET_EXT);
    int rc = gb_dataset_writer_open(&t->record, path, &s, err);
    if (rc == 0)
        GB_INFO("trainer: recording every chunk to %s", path);
    return rc;
}

/* The replay's columns: one per chunk column; next_obs is per item. */
static int make_replay(trainer *t, gb_error *err)
{
    const gb_config *cfg = t->w->cfg;
    gb_replay_options o;
    gb_replay_options_default(&o);
    gb_replay_options_from_config(&o, &cfg->trainer.replay);
    o.steps = t->layout.T;
    o.seed = (uint64_t)cfg->experiment.seed * 31u + (uint64_t)t->w->index;
    for (int c = 0; c < GB_CHUNK_NCOLS; c++) {
        const gb_tensor_desc *d = &t->layout.desc[c];
        int per_item = c == GB_CHUNK_NEXT_OBS;
        int rc = gb_replay_add_column(&o, d->name, d->dtype, per_item ? d->rank : d->rank - 1,
                                      per_item ? d->shape : d->shape + 1, per_item, err);
        if (rc)
            return rc;
    }
    return gb_replay_create(&o, &t->replay, err);
}

/* Converts the learner model's layout into the parameter stream's, once. */
static int make_param_layout(trainer *t, gb_error *err)
{
    const gb_torch_param *table;
    int count;
    uint64_t total;
    gb_torch_model_layout(gb_torch_learner_model(t->learner), &table, &count, &total);
    t->param_layout = calloc((size_t)count, sizeof *t->param_layout);
    t->param_buf = malloc(total ? total : 1);
    if (!t->param_layout || !t->param_buf)
        return gb_error_set(err, GB_ENOMEM, "out of memory for %llu parameter bytes",
                            (unsigned long long)total);
    for (int i = 0; i < count; i++) {
        gb_param_entry *e = &t->param_layout[i];
        snprintf(e->name, sizeof e->name, "%s", table[i].name);
        e->dtype = table[i].dtype;
        e->rank = table[i].ndim;
        memcpy(e->shape, table[i].shape, (size_t)table[i].ndim * sizeof e->shape[0]);
        e->offset = table[i].offset;
    }
    t->param_count = count;
    t->param_bytes = total;
    return 0;
}

static int push_params(trainer *t, gb_error *err)
{
    uint64_t version = 0;
    int rc = gb_torch_model_export(gb_torch_learner_model(t->learner), t->param_buf,
                                   t->param_bytes, &version, err);
    if (rc == 0)
        rc = gb_param_publish(t->publisher, (int64_t)version, t->param_layout, t->param_count,
                              t->param_buf, t->param_bytes, err);
    if (rc == 0)
        t->published_version = (int64_t)version;
    return rc;
}

static int alloc_staging(trainer *t, int64_t batch, gb_error *err)
{
    for (int c = 0; c < GB_CHUNK_NCOLS; c++) {
        /* posix_memalign: 64-byte rows for the copy; from_blob reads it in place. */
        if (posix_memalign(&t->staging[c], 64, (size_t)batch * t->layout.bytes[c]) != 0)
            return gb_error_set(err, GB_ENOMEM, "out of memory for the training batch");
    }
    t->priorities_f = malloc((size_t)batch * sizeof(float));
    t->priorities = malloc((size_t)batch * sizeof(double));
    if (!t->priorities_f || !t->priorities)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    return gb_replay_selection_init(&t->sel, batch, err);
}

/* One training step: select, collect, train, update priorities. Returns 1 when trained, 0 when
 * the rate limiter had nothing yet, or an error. */
static int train_step(trainer *t, gb_error *err)
{
    const gb_config *cfg = t->w->cfg;
    int64_t B = cfg->trainer.batch_size;
    gb_replay_request req = gb_replay_request_default(B);
    req.timeout_s = 0.1;
    int64_t version = (int64_t)gb_torch_model_version(gb_torch_learner_model(t->learner));
    if (cfg->trainer.max_staleness >= 0)
        req.min_policy_version = version - cfg->trainer.max_staleness;
    int rc = gb_replay_sample(t->replay, &req, &t->sel, err);
    if (rc == GB_ETIMEOUT)
        return 0;
    if (rc)
        return rc;
    gb_replay_dst dst[GB_CHUNK_NCOLS];
    for (int c = 0; c < GB_CHUNK_NCOLS; c++)
        dst[c] = (gb_replay_dst){.column = c, .data = t->staging[c],
                                 .bytes = (size_t)B * t->layout.bytes[c]};
    rc = gb_replay_collect(t->replay, &t->sel, dst, GB_CHUNK_NCOLS, NULL, err);
    int64_t n = t->sel.n;
    if (rc == 0) {
        int weighted = cfg->trainer.replay.selector == GB_SELECTOR_WEIGHTED;
        gb_torch_batch batch = {
            .B = n,
            .T = t->layout.T,
            .obs = t->staging[GB_CHUNK_OBS],
            .next_obs = t->staging[GB_CHUNK_NEXT_OBS],
            .action = t->staging[GB_CHUNK_ACTION],
            .reward = t->staging[GB_CHUNK_REWARD],
            .terminated = t->staging[GB_CHUNK_TERMINATED],
            .truncated = t->staging[GB_CHUNK_TRUNCATED],
            .valid = t->staging[GB_CHUNK_VALID],
            .logp = t->staging[GB_CHUNK_LOGP],
            .weights = weighted ? t->sel.weight : NULL,
        };
        rc = gb_torch_learner_train(t->learner, &batch, &t->last,
                                    weighted ? t->priorities_f : NULL, err);
        if (rc == 0 && weighted) {
            for (int64_t i = 0; i < n; i++)
                t->priorities[i] = t->priorities_f[i];
            rc = gb_replay_update_priorities(t->replay, n, t->sel.index, t->sel.key,
                                             t->priorities, NULL, err);
        }
    }
    gb_replay_release(t->replay, &t->sel);
    if (rc)
        return rc;
    t->train_steps++;
    t->samples_trained += t->last.samples;
    return 1;
}

/* At stop, after the ingest thread ended: takes the chunks still queued on the sample stream
 * (the actors stop first and flush them here) and counts them as received but discarded, so the
 * launcher's ledger (actors' chunks_sent = trainers' chunks_received) shows any chunk lost in
 * transport. With --record they still go into the dataset. Bounded: at most 2 s. */
static void drain_at_stop(trainer *t)
{
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    gb_error err = {0};
    int64_t n = 0;
    for (double end = gb_now_s() + 2.0; gb_now_s() < end;) {
        int rc = gb_sample_recv(t->samples, &m, 50, &err);
        if (rc)
            break;
        if (!check_chunk(t, &m)) {
            atomic_fetch_add(&t->rejected_chunks, 1);
        } else {
            n++;
            if (record_chunk(t, &m, &err) != 0)
                GB_WARN("trainer: recording a chunk at stop: %s", err.msg);
        }
        gb_wire_msg_release(&m);
    }
    gb_wire_msg_release(&m);
    atomic_fetch_add(&t->discarded_at_stop, n);
    if (n)
        GB_INFO("trainer: %lld chunks arrived after training stopped (discarded%s)",
                (long long)n, t->record ? ", recorded" : "");
}

static void report(trainer *t, double env_progress)
{
    gb_metrics_sender *m = t->w->metrics;
    gb_replay_stats rs;
    gb_replay_stats_get(t->replay, &rs);
    gb_sample_receiver_stats ss = gb_sample_receiver_get_stats(t->samples);
    gb_metrics_set(m, "train_steps", (double)t->train_steps);
    gb_metrics_set(m, "samples_trained", (double)t->samples_trained);
    gb_metrics_set(m, "policy_version", (double)t->published_version);
    gb_metrics_set(m, "replay_size", (double)rs.size);
    gb_metrics_set(m, "replay_capacity", (double)rs.capacity);
    gb_metrics_set(m, "replay_inserts", (double)rs.inserts);
    gb_metrics_set(m, "replay_expired", (double)rs.expired);
    gb_metrics_set(m, "chunks_received", (double)ss.received);
    gb_metrics_set(m, "chunks_discarded_at_stop", (double)atomic_load(&t->discarded_at_stop));
    gb_metrics_set(m, "chunks_rejected",
                   (double)(ss.rejected + (uint64_t)atomic_load(&t->rejected_chunks)));
    gb_metrics_set(m, "loss", t->last.loss);
    gb_metrics_set(m, "policy_loss", t->last.policy_loss);
    gb_metrics_set(m, "value_loss", t->last.value_loss);
    gb_metrics_set(m, "entropy", t->last.entropy);
    gb_metrics_set(m, "lr", t->last.lr);
    gb_metrics_set(m, "progress", env_progress);
    gb_metrics_send(m, NULL);
}

static int checkpoint(trainer *t, gb_error *err)
{
    char dir[2048], path[2200];
    snprintf(dir, sizeof dir, "%s/checkpoints", t->w->run_dir);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/trainer-%d.model", dir, t->w->index);
    int rc = gb_torch_learner_save(t->learner, path, err);
    if (rc)
        return rc;
    snprintf(path, sizeof path, "%s/trainer-%d.replay", dir, t->w->index);
    rc = gb_replay_checkpoint(t->replay, path, err);
    if (rc == 0)
        GB_INFO("trainer: checkpoint written (%lld training steps)", (long long)t->train_steps);
    return rc;
}

int gb_trainer_main(gb_worker *w, gb_error *err)
{
    const gb_config *cfg = w->cfg;
    trainer t = {.w = w, .published_version = -1};
    gb_env_spec spec;
    char ep[GB_REGISTRY_ENDPOINT_MAX], name[64];
    int rc = gb_worker_env_space(cfg, &spec, &t.space, err);
    if (rc)
        goto done;
    if (spec.agents != 1 && cfg->trainer.algorithm.name != GB_ALGO_PPO) {
        /* chunks are per agent, so any algorithm works; nothing to check here */
    }
    rc = gb_chunk_layout_init(&t.layout, cfg->actors.chunk_len, t.space.obs_dtype,
                              t.space.obs_ndim, t.space.obs_shape, t.space.discrete,
                              t.space.discrete ? 1 : t.space.action_dim, err);
    if (rc || (rc = gb_torch_set_threads((int)cfg->trainer.threads, err)) ||
        (rc = gb_torch_learner_create(cfg, &t.space,
                                      (uint64_t)cfg->experiment.seed + (uint64_t)w->index,
                                      &t.learner, err)) ||
        (rc = make_replay(&t, err)) || (rc = make_param_layout(&t, err)) ||
        (rc = alloc_staging(&t, cfg->trainer.batch_size, err)) ||
        (w->record_dir && (rc = record_open(&t, err))))
        goto done;

    if ((rc = gb_worker_endpoint(w, "samples", ep, sizeof ep, err)))
        goto done;
    gb_sample_receiver_opts ro = {
        .endpoint = ep,
        .hwm = (int)cfg->streams.sample_hwm,
        .kernel_buffer = gb_sample_kernel_buffer((int)cfg->streams.sample_hwm,
                                                 t.layout.block_bytes)};
    if ((rc = gb_sample_receiver_open(&t.samples, w->zctx, &ro, err)))
        goto done;
    if (w->index == 0) {
        char in_ep[GB_REGISTRY_ENDPOINT_MAX];
        if ((rc = gb_registry_lookup(w->registry, "params/0/in", in_ep, sizeof in_ep,
                                     (int)cfg->streams.registry_timeout_ms, err)))
            goto done;
        gb_param_publisher_opts po = {.service_endpoint = in_ep,
                                      .chunk_bytes = (uint64_t)cfg->parameters.chunk_bytes,
                                      .timeout_ms = 2000, /* fits the stop grace period */
                                      .role = w->role,
                                      .index = w->index};
        if ((rc = gb_param_publisher_open(&t.publisher, w->zctx, &po, err)) ||
            (rc = push_params(&t, err)))
            goto done;
    }
    snprintf(name, sizeof name, "trainer/%d/samples", w->index);
    if ((rc = gb_registry_register(w->registry, name, gb_sample_receiver_endpoint(t.samples),
                                   err)))
        goto done;
    if (pthread_create(&t.ingest, NULL, ingest_main, &t) != 0) {
        rc = gb_error_errno(err, "pthread_create");
        goto done;
    }
    t.ingest_started = 1;
    GB_INFO("trainer: %s on %s, replay of %lld chunks x %lld steps, batch %lld",
            gb_config_enum_name("trainer.algorithm.name", cfg->trainer.algorithm.name),
            cfg->env.name, (long long)cfg->trainer.replay.capacity, (long long)t.layout.T,
            (long long)cfg->trainer.batch_size);

    double next_report = gb_now_s(), next_checkpoint = INFINITY;
    if (cfg->trainer.checkpoint_every_s > 0)
        next_checkpoint = gb_now_s() + cfg->trainer.checkpoint_every_s;
    double budget = (double)cfg->experiment.max_env_steps;
    int64_t env_steps_seen = 0;
    while (!gb_worker_stopping(w)) {
        rc = train_step(&t, err);
        if (rc < 0)
            goto done;
        if (rc == 1 && t.publisher && t.train_steps % cfg->trainer.push_params_every == 0 &&
            (rc = push_params(&t, err))) {
            if (gb_worker_stopping(w))
                rc = 0; /* the service stopped first: nothing left to publish to */
            goto done;
        }
        /* Learning-rate annealing follows the env-step budget: estimated from ingested chunks. */
        env_steps_seen = (int64_t)atomic_load(&t.ingested) * t.layout.T;
        double progress = budget > 0 ? fmin(1.0, (double)env_steps_seen / budget) : 0.0;
        gb_torch_learner_set_progress(t.learner, progress);
        int ack = atomic_load(&t.ending_seen) == 1;
        if (ack) { /* tell the launcher once: it stops the actors when every trainer reads */
            atomic_store(&t.ending_seen, 2);
            gb_metrics_set(w->metrics, "ending_seen", 1);
        }
        if (ack || gb_now_s() >= next_report) {
            report(&t, progress);
            /* while the run ends the launcher waits on chunks_received: report often */
            next_report = gb_now_s() + (atomic_load(&t.ending_seen) ? 0.02
                                                                    : cfg->experiment.metrics_interval_s);
        }
        if (gb_now_s() >= next_checkpoint) {
            if ((rc = checkpoint(&t, err)))
                goto done;
            next_checkpoint = gb_now_s() + cfg->trainer.checkpoint_every_s;
        }
    }
    rc = 0;
done:
    atomic_store(w->stop, 1);
    if (t.replay)
        gb_replay_close(t.replay); /* wakes the ingest thread if it blocks on the replay */
    if (t.ingest_started) {
        pthread_join(t.ingest, NULL);
        if (rc == 0 && t.ingest_rc) {
            rc = t.ingest_rc;
            if (err)
                *err = t.ingest_err;
        }
    }
    if (t.samples && t.replay)
        drain_at_stop(&t);
    if (t.replay && t.learner && t.samples) {
        gb_metrics_set(w->metrics, "final", 1); /* the launcher's sample ledger needs this one */
        report(&t, 0);
        gb_error cerr = {0};
        if (checkpoint(&t, &cerr) != 0)
            GB_ERROR("trainer: final checkpoint failed: %s", cerr.msg);
    }
    if (t.record) { /* --record: flush and close the dataset */
        gb_error rerr = {0};
        int64_t items = gb_dataset_writer_count(t.record);
        if (gb_dataset_writer_close(t.record, &rerr) != 0) {
            GB_ERROR("trainer: closing the recorded dataset failed: %s", rerr.msg);
            if (rc == 0) {
                rc = rerr.code;
                if (err)
                    *err = rerr;
            }
        } else {
            GB_INFO("trainer: recorded %lld chunks", (long long)items);
        }
    }
    gb_param_publisher_close(t.publisher);
    gb_sample_receiver_close(t.samples);
    gb_replay_selection_free(&t.sel);
    for (int c = 0; c < GB_CHUNK_NCOLS; c++)
        free(t.staging[c]);
    free(t.priorities_f);
    free(t.priorities);
    free(t.param_buf);
    free(t.param_layout);
    gb_replay_free(t.replay);
    gb_torch_learner_destroy(t.learner);
    return rc;
}
