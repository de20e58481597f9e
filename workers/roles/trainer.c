/* workers/roles/trainer.c: the trainer worker = ingest (trainer_ingest.c) + learning
 * (workers/roles/learning.h): its start, training loop, reports, checkpoints and stop. The replay
 * (GEAR store) lives in this process's shared host memory. The ingest thread pulls trajectory
 * chunks from the sample stream and writes each straight into its replay block (allocate ->
 * copy the frames in -> commit); the train thread (this one) runs the learning step (rate
 * limiter, staleness bound, select, collect, train, priorities) and pushes parameters to the
 * parameter service every trainer.push_params_every steps (and again when its publisher connects
 * to a restarted service).
 *
 * A trainer killed mid-run loses no committed trajectory: its replay lives in the run-owned
 * shared memory segment "/gearbox-<run id>-replay-<index>" (replay.h, "Surviving the owner's
 * crash"), which a restarted trainer of the same run and index attaches to, keeping every
 * committed item and dropping those that were being written; it also restores the model and
 * optimiser from its last checkpoint. Who removes the segment: this trainer when it ends
 * without an error (the run is over for it); after an error or a kill it stays for a restart,
 * and the launcher removes the run's segments when the run ends (gb_shm_unlink_run). Its ledger
 * of the sample stream (what it received from each actor process) lives in a run-owned segment
 * too, so that a restarted trainer goes on with it and counts what went down with its
 * predecessor (workers/roles/trainer_ledger.h): the launcher's sample ledger stays exact. This
 * trainer removes it when it ends without an error once the run is ending; so a clean run
 * leaves no segment behind. */
#include "workers/roles/trainer_internal.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "runtime/streams/params.h"
#include "runtime/base/rng.h"
#include "runtime/streams/runctl.h"
#include "workers/roles/acting.h"
#include "workers/roles/policy_mlp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Converts the learner model's layout into the parameter stream's, once. */
/* The parameter stream carries the model's own layout table (runtime/streams/params.h); only the
 * flat buffer it is exported into is the trainer's. */
static int make_param_buffer(trainer *t, gb_error *err)
{
    gb_learning_param_layout(t->learning, &t->param_layout, &t->param_count, &t->param_bytes);
    t->param_buf = malloc(t->param_bytes ? t->param_bytes : 1);
    if (!t->param_buf)
        return gb_error_set(err, GB_ENOMEM, "out of memory for %llu parameter bytes",
                            (unsigned long long)t->param_bytes);
    return 0;
}

static int push_params(trainer *t, gb_error *err)
{
    uint64_t version = 0;
    int rc = gb_learning_export(t->learning, t->param_buf, t->param_bytes, &version, err);
    if (rc == 0)
        rc = gb_param_publish(t->publisher, (int64_t)version, t->param_layout, t->param_count,
                              t->param_buf, t->param_bytes, err);
    if (rc == 0) {
        t->published_version = (int64_t)version;
        gb_trainer_ledger_published(t->ledger, (int64_t)version);
    }
    return rc;
}

/* Sends a report: the trainer's counters, its ledger and the learner's columns of the run
 * contract (runtime/run/contract.h) under their column names. */
static void report(trainer *t, double env_progress)
{
    gb_metrics_sender *m = t->w->metrics;
    gb_replay_stats rs;
    gb_replay_stats_get(t->replay, &rs);
    gb_sample_receiver_stats ss = gb_sample_receiver_get_stats(t->samples);
    gb_metrics_set(m, "train_steps", (double)gb_learning_train_steps(t->learning));
    gb_metrics_set(m, "samples_trained", (double)gb_learning_samples_trained(t->learning));
    gb_metrics_set(m, "policy_version", (double)t->published_version);
    gb_metrics_set(m, "replay_size", (double)rs.size);
    gb_metrics_set(m, "replay_capacity", (double)rs.capacity);
    gb_metrics_set(m, "replay_inserts", (double)rs.inserts);
    gb_metrics_set(m, "replay_expired", (double)rs.expired);
    gb_metrics_set(m, "chunks_trained", (double)gb_learning_chunks_trained(t->learning));
    gb_metrics_set(m, "replay_items_recovered", (double)t->recovery.kept);
    gb_metrics_set(m, "replay_items_dropped_in_crash", (double)t->recovery.dropped_in_flight);
    gb_ledger_totals bt = gb_trainer_ledger_totals(t->ledger);
    gb_metrics_set(m, "chunks_received", (double)bt.received);
    gb_metrics_set(m, "chunks_nonfinite", (double)bt.nonfinite);
    gb_metrics_set(m, "chunks_discarded_at_stop", (double)bt.discarded);
    gb_metrics_set(m, "chunks_lost_in_crash", (double)bt.lost_in_crash);
    gb_metrics_set(m, "env_steps_received", (double)bt.steps);
    gb_metrics_set(m, "chunks_rejected",
                   (double)(ss.rejected + (uint64_t)atomic_load(&t->rejected_chunks)));
    /* chunks per actor process: the launcher's ledger counts what a crash lost */
    if (!t->ledger_rows)
        t->ledger_rows = calloc(GB_LEDGER_ROWS_MAX, sizeof *t->ledger_rows);
    if (t->ledger_rows) {
        int nt = gb_trainer_ledger_rows(t->ledger, t->ledger_rows, GB_LEDGER_ROWS_MAX);
        gb_metrics_set_table(m, (const int64_t *)t->ledger_rows, nt, GB_LEDGER_COLS, NULL);
    }
    gb_metrics_set(m, "progress", env_progress);
    gb_metrics_set(m, "held", (double)t->held_at); /* launch/evals.h: held evaluations */
    /* the learner's columns: NaN where the algorithm has none, which the launcher writes empty
     * (metrics.csv) or leaves out (TensorBoard), as it does everything before this process's
     * first step; epsilon at the launcher's env step count (the policy workers' schedule) */
    double row[GB_NCOLS];
    gb_learner_report_row(&t->timing, t->w->cfg, t->learning,
                          gb_runctl_client_env_steps(t->w->runctl), row);
    const char *const *names = gb_contract_columns();
    for (int c = 0; c < GB_NCOLS; c++)
        if (gb_contract_learner_column(c))
            gb_metrics_set(m, names[c], row[c]);
    gb_metrics_send(m, NULL);
}

/* Where this trainer's checkpoint sets live: <run>/checkpoints, named trainer-<index>. */
static void checkpoint_place(const trainer *t, char *dir, size_t n, char name[32])
{
    snprintf(dir, n, "%s/checkpoints", t->w->run_dir);
    snprintf(name, 32, "trainer-%d", t->w->index);
}

/* Surviving a crash of this trainer: the replay in its run-owned segment, the learner from its
 * last checkpoint set (and, in recover(), its replay). Without a run directory the replay stays
 * anonymous (it then dies with the process). No checkpoint is a fresh start; one that cannot be
 * read (a malformed manifest, a file it names gone) fails the start with the cause: going on
 * afresh would silently drop what the run had learnt and collected. Returns 0 or that error. */
static int crash_safe_opts(trainer *t, gb_learning_opts *lo, gb_error *err)
{
    if (!t->w->run_dir)
        return 0;
    gb_error e = {0};
    if (gb_replay_shm_name(t->w->run_dir, t->w->index, t->replay_shm, sizeof t->replay_shm,
                           &e) == 0)
        lo->replay_shm_name = t->replay_shm;
    else
        GB_WARN("trainer: the replay will not survive a crash of this trainer: %s", e.msg);
    char dir[2048], name[32];
    checkpoint_place(t, dir, sizeof dir, name);
    int rc = gb_checkpoint_find(dir, name, &t->ckpt, err);
    if (rc == 0) {
        lo->model_checkpoint = t->ckpt.model;
        return 0;
    }
    int named = t->ckpt.model[0] != '\0'; /* find filled in what a manifest named */
    t->ckpt.step = -1;
    t->ckpt.model[0] = t->ckpt.replay[0] = '\0';
    if (rc == GB_ENOTFOUND && !named)
        return 0;
    return gb_error_prefix(err, "trainer: the last checkpoint cannot be restored");
}

/* What the start recovered: a replay re-attached from a killed predecessor's segment (newer than
 * any checkpoint), else the replay of the last checkpoint set when there is one (a resumed run,
 * or a restart whose segment is gone). A checkpointed replay that cannot be restored fails the
 * start: going on without it would silently drop what the run had collected. */
static int recover(trainer *t, gb_error *err)
{
    gb_replay_recovery_get(t->replay, &t->recovery);
    if (t->recovery.attached)
        GB_INFO("replay re-attached: %lld committed items kept, %lld in-flight dropped "
                "(segment %s)", (long long)t->recovery.kept,
                (long long)t->recovery.dropped_in_flight, t->replay_shm);
    if (t->recovery.dropped_invalid)
        GB_WARN("trainer: the re-attached replay held %lld damaged entries (dropped)",
                (long long)t->recovery.dropped_invalid);
    if (gb_learning_restored(t->learning))
        GB_INFO("trainer: model and optimiser restored from %s (%lld training steps)",
                t->ckpt.model, (long long)gb_learning_train_steps(t->learning));
    if (t->recovery.attached || t->ckpt.step < 0 || !t->ckpt.replay[0])
        return 0;
    int rc = gb_replay_restore(t->replay, t->ckpt.replay, err);
    if (rc)
        return gb_error_prefix(err, "trainer: restoring the checkpointed replay");
    uint64_t digest = 0;
    int64_t n = gb_replay_digest(t->replay, &digest);
    GB_INFO("trainer: replay restored from %s: %lld items, digest %016llx", t->ckpt.replay,
            (long long)n, (unsigned long long)digest);
    return 0;
}

/* The sample ledger (workers/roles/trainer_ledger.h): in the run's shared memory, where a restarted
 * trainer finds them, else (no run directory, no room in /dev/shm) in this process's. Opened
 * before anything else, so that a trainer that took chunks left a ledger behind. */
static int open_ledger(trainer *t, gb_error *err)
{
    gb_worker *w = t->w;
    gb_error e = {0};
    if (w->run_dir && gb_trainer_ledger_open(&t->ledger, w->run_dir, w->index,
                                            w->incarnation == 0, &e) == 0) {
        if (gb_trainer_ledger_continued(t->ledger))
            GB_INFO("trainer: sample ledger taken over from the previous process (%lld chunks "
                    "received so far)", (long long)gb_trainer_ledger_totals(t->ledger).received);
    } else {
        if (w->run_dir)
            GB_WARN("trainer: sample ledger in process memory: if this trainer is killed, the "
                    "run's sample ledger will not be known: %s", e.msg);
        int rc = gb_trainer_ledger_open(&t->ledger, NULL, w->index, 1, err);
        if (rc)
            return rc;
    }
    /* set once, here, and sent with every report from now on (where the ledger lives does not
     * change): also with the ones a trainer sends while it waits for its group, before its first
     * report() (trainer_group.c, beat); the launcher reads it as a killed trainer's
     * (launch/watchdog.c, remember_trainer) */
    if (w->metrics)
        gb_metrics_set(w->metrics, "ledger_shared", gb_trainer_ledger_shared(t->ledger));
    return 0;
}

/* A restarted trainer's model comes from its last checkpoint, older than what its predecessor
 * published since. Its versions go on above the last one published (kept in the ledger), so that
 * version numbers only go up within a run: the replay's staleness floor (trainer.max_staleness)
 * was raised from the predecessor's versions, and chunks acted with lower ones would expire as
 * they arrive, leaving nothing to train on. Policy workers would take lower numbers too
 * (runtime/streams/params.h, "Order"). */
static void continue_versions(trainer *t)
{
    int64_t last = gb_trainer_ledger_last_published(t->ledger);
    gb_learning *L = t->learning;
    if (last < 0 || (int64_t)gb_learning_version(L) > last)
        return;
    GB_INFO("trainer: parameter versions go on from %lld (the last one published), not from "
            "the checkpoint's %lld", (long long)last + 1, (long long)gb_learning_version(L));
    gb_learning_set_version(L, (uint64_t)last + 1);
}

/* Says in a report at once what this trainer writes now (the metric "writing": 1 its checkpoint,
 * 2 --record's dataset, 0 nothing): a stop waits for a trainer writing (launch/run_drain.c,
 * launch.stop_checkpoint_s). */
static void say_writing(trainer *t, int what)
{
    gb_metrics_set(t->w->metrics, "writing", what);
    gb_metrics_send(t->w->metrics, NULL);
}

/* checkpoints/trainer-<index>.checkpoint names the model and replay files of one step
 * (workers/roles/checkpoint_set.h): a failed write (ENOSPC) leaves the previous pair current. */
static int checkpoint(trainer *t, gb_error *err)
{
    char dir[2048], name[32];
    checkpoint_place(t, dir, sizeof dir, name);
    mkdir(dir, 0755);
    int64_t step = gb_learning_train_steps(t->learning);
    say_writing(t, 1);
    const int with = GB_CHECKPOINT_REPLAY | (t->writes_policy ? GB_CHECKPOINT_POLICY : 0);
    int rc = gb_checkpoint_write(dir, name, step, with, gb_learning_write_set, t->learning, err);
    say_writing(t, 0);
    if (rc == 0) {
        /* the digest of the replay's snapshot the file holds (what a restore of it reports),
         * though the ingest thread, or another rank's all-to-all, changed the replay while it
         * streamed */
        uint64_t digest = 0;
        int64_t n = gb_replay_checkpoint_digest(t->replay, &digest);
        GB_INFO("trainer: checkpoint written (%lld training steps; replay %lld items, digest "
                "%016llx)", (long long)step, (long long)n, (unsigned long long)digest);
    }
    return rc;
}

/* The learning side of the start: the ledger, the group of trainers, the learner and its replay
 * (re-attached or restored after a crash), the parameter buffer and --record's dataset. */
static int open_learning(trainer *t, gb_error *err)
{
    gb_worker *w = t->w;
    const gb_config *cfg = w->cfg;
    gb_env_spec *spec = &t->spec;
    int rc = open_ledger(t, err);
    if (rc || (rc = gb_worker_env_space(cfg, spec, &t->space, err)) ||
        (rc = gb_acting_layout_for(spec, cfg, &t->layout, err)))
        return rc;
    uint64_t seed = (uint64_t)cfg->experiment.seed;
    gb_learning_opts lo = {
        .cfg = cfg,
        .space = &t->space,
        .layout = &t->layout,
        .learner_seed = gb_rng_seed_of(seed, "trainer", (uint64_t)w->index, "learner"),
        .replay_seed = gb_rng_seed_of(seed, "trainer", (uint64_t)w->index, "replay"),
    };
    /* Several trainers: libtorch loads before the group's generation is read (the group opens
     * right after; a load of seconds between them would open a generation already gone). One
     * trainer loads it in gb_learning_create, or beside its first steps (learning.h). */
    if (cfg->trainer.count > 1 && (rc = gb_torch_load(err)))
        return rc;
    if ((rc = gb_trainer_join_group(t, err)))
        return rc;
    lo.group = t->group;
    lo.shared_seed = gb_trainer_shared_seed(t); /* the group's generation's */
    if ((rc = crash_safe_opts(t, &lo, err)) || (rc = gb_learning_create(&lo, &t->learning, err)))
        return rc;
    /* every trainer starts from the same state; a trainer that died as the group formed fails
     * this first collective, and the group forms again with its restart, as in training */
    if (t->group && (rc = gb_trainer_recover_group(
                         t, gb_learning_join_group(t->learning, t->group, lo.shared_seed, err),
                         err)))
        return rc;
    t->replay = gb_learning_replay(t->learning);
    gb_learner_report_start(&t->timing, t->learning);
    GB_INFO("trainer %d: learning on %s (the network's forward and backward: %s), batches "
            "collected by the %s path%s", w->index,
            cfg->trainer.device == GB_DEVICE_CUDA ? "cuda" : "the cpu",
            gb_learning_kernels(t->learning),
            gb_learning_collect_path(t->learning),
            gb_learning_prefetching(t->learning) ? ", the next batch prefetched" : "");
    if ((rc = recover(t, err)))
        return rc;
    /* chunks_trained counts among the chunks this ledger received: a new ledger (a resumed
     * run) starts from what the restored replay had already drawn */
    if (!gb_trainer_ledger_continued(t->ledger))
        gb_learning_mark_trained(t->learning);
    continue_versions(t);
    if ((rc = make_param_buffer(t, err)))
        return rc;
    t->writes_policy = gb_policy_mlp_plays_fp32(cfg, &t->space);
    return w->record_dir ? gb_trainer_record_open(t, err) : 0;
}

/* The streams side: the sample receiver (registered once everything else is ready), trainer
 * 0's parameter publisher with the first parameters, and the ingest thread. */
static int open_streams(trainer *t, gb_error *err)
{
    gb_worker *w = t->w;
    const gb_config *cfg = w->cfg;
    char ep[GB_REGISTRY_ENDPOINT_MAX], name[64];
    snprintf(name, sizeof name, "trainer/%d/%s", w->index, GB_SOCKET_SAMPLES);
    int rc = gb_worker_endpoint(w, GB_SOCKET_SAMPLES, name, ep, sizeof ep, err);
    if (rc)
        return rc;
    gb_sample_receiver_opts ro = {
        .endpoint = ep,
        .hwm = (int)cfg->streams.sample_hwm,
        .kernel_buffer = gb_sample_kernel_buffer((int)cfg->streams.sample_hwm,
                                                 t->layout.block_bytes),
        .max_frame = t->layout.block_bytes};
    if ((rc = gb_sample_receiver_open(&t->samples, w->zctx, &ro, err)))
        return rc;
    if (w->index == 0) {
        char in_ep[GB_REGISTRY_ENDPOINT_MAX];
        if ((rc = gb_worker_lookup(w, "params/0/in", in_ep, sizeof in_ep, err)))
            return rc;
        gb_param_publisher_opts po = {.service_endpoint = in_ep,
                                      .chunk_bytes = (uint64_t)cfg->parameters.chunk_bytes,
                                      .timeout_ms = 2000, /* fits the stop grace period */
                                      .role = w->role,
                                      .index = w->index};
        if ((rc = gb_param_publisher_open(&t->publisher, w->zctx, &po, err)) ||
            (rc = push_params(t, err)))
            return rc;
    }
    if ((rc = gb_registry_register(w->registry, name, gb_sample_receiver_endpoint(t->samples),
                                   err)))
        return rc;
    if (pthread_create(&t->ingest, NULL, gb_trainer_ingest_main, t) != 0)
        return gb_error_errno(err, "pthread_create");
    t->ingest_started = 1;
    char env[GB_CONFIG_ENV_LABEL_MAX];
    GB_INFO("trainer: %s on %s, replay of %lld chunks x %lld steps, batch %lld",
            gb_config_enum_name("trainer.algorithm.name", cfg->trainer.algorithm.name),
            gb_config_env_label(cfg, env, sizeof env), (long long)cfg->trainer.replay.capacity,
            (long long)t->layout.T,
            (long long)cfg->trainer.batch_size);
    return 0;
}

/* Trainer 0 holds the learning once it wrote the checkpoint of the held request `hold` (the
 * launcher evaluates it: runtime/streams/runctl.h) and learns again when the launcher releases
 * it; the change is reported at once (the launcher's go waits for it; a report at the next turn
 * came after a held step's wait, 0.1 s). written: the requests met so far. */
static void follow_hold(trainer *t, int64_t hold, int64_t written, double progress)
{
    int64_t at = hold > 0 && written >= hold ? hold : 0;
    if (at == t->held_at)
        return;
    t->held_at = at;
    long long step = (long long)gb_learning_train_steps(t->learning);
    gb_learning_hold(t->learning, at > 0);
    if (at)
        GB_INFO("trainer: learning held at step %lld for an evaluation (request %lld)", step,
                (long long)at);
    else
        GB_INFO("trainer: learning again from step %lld", step);
    report(t, progress);
}

/* The training loop, until the learning step says every trainer agreed to stop: trains,
 * publishes every trainer.push_params_every steps, reports and checkpoints. Returns 0 or the
 * error that ended it. */
static int train(trainer *t, gb_error *err)
{
    gb_worker *w = t->w;
    const gb_config *cfg = w->cfg;
    double next_report = gb_now_s(), next_checkpoint = INFINITY;
    if (cfg->trainer.checkpoint_every_s > 0)
        next_checkpoint = gb_now_s() + cfg->trainer.checkpoint_every_s;
    double budget = (double)cfg->experiment.max_env_steps;
    int reporting_fast = 0;
    /* the launcher asks trainer 0 for a checkpoint to evaluate (launch/evals.h): one more
     * request than seen so far writes one now (a restarted trainer 0: one, for a request its
     * predecessor may not have met), and a held request holds the learning after it */
    int64_t checkpoints_seen = 0;
    /* With several trainers every step, and the stop, is agreed by all of them. */
    int publishing = t->publisher != NULL;
    for (;;) {
        /* a step waits up to 0.1 s for samples; while the run ends, 5 ms, so that the reports
         * the launcher waits on (chunks_received, every 5 ms below) are not held back; while
         * held, 5 ms, so that the release is seen at once */
        int rc = gb_learning_step(t->learning, reporting_fast || t->held_at ? 0.005 : 0.1,
                                  gb_worker_stopping(w), err);
        if (rc == 2)
            return 0;
        /* a trainer of the group died or hung: form the group again with its restart */
        if (rc < 0 && (rc = gb_trainer_recover_group(t, rc, err)) == 0)
            continue;
        if (rc < 0)
            return rc;
        /* the parameters go out every push_params_every steps, and again as soon as the
         * publisher connects to a restarted parameter service: that holds nothing until the
         * next push, and while a restarted policy worker waits for it no action is served, no
         * sample comes and no step is taken (run_chaos once: policy and service killed in
         * turn, the run stuck until its restarts ran out). (It was every 3 s without a push,
         * the whole model again and again while the trainer was held or starved.) */
        /* Once the actors flush (the run's state flushing), or this worker stops, no action is
         * served any more: no push either. The parameter service is stopped with the trainers
         * after the release, and a push that met it gone blocked for the publisher's 2 s send
         * timeout, past a short stop grace (run_slow_checkpoint, CI 2026-12-02, once the stop
         * got quicker). */
        if (publishing && (gb_worker_run_state(w) >= GB_RUN_FLUSHING || gb_worker_stopping(w)))
            publishing = 0;
        int due = rc == 1 &&
                  gb_learning_train_steps(t->learning) % cfg->trainer.push_params_every == 0;
        if (publishing && (due || gb_param_publisher_reconnected(t->publisher)) &&
            (rc = push_params(t, err))) {
            if (!gb_worker_stopping(w))
                return rc;
            /* the service stopped first: nothing left to publish to; the other trainers
             * still need this one to agree on the stop */
            publishing = 0;
        }
        /* Learning-rate annealing follows the env-step budget: estimated from stored chunks
         * (by this trainer and its predecessors: the ledger) */
        int64_t env_steps_seen = gb_trainer_ledger_totals(t->ledger).stored * t->layout.T;
        double progress = budget > 0 ? fmin(1.0, (double)env_steps_seen / budget) : 0.0;
        gb_learning_set_progress(t->learning, progress);
        if (!reporting_fast && atomic_load(&t->ending_seen)) {
            reporting_fast = 1; /* the launcher now waits on chunks_received: report at once */
            next_report = 0;
        }
        if (gb_now_s() >= next_report) {
            report(t, progress);
            /* while the run ends the launcher waits on chunks_received: report often */
            next_report = gb_now_s() + (reporting_fast ? 0.005 : gb_worker_report_interval(w));
        }
        int64_t asked = w->index == 0 ? gb_runctl_client_checkpoints(w->runctl) : 0;
        int64_t hold = w->index == 0 ? gb_runctl_client_hold(w->runctl) : 0; /* after asked */
        if (gb_now_s() >= next_checkpoint || asked > checkpoints_seen) {
            checkpoints_seen = asked > checkpoints_seen ? asked : checkpoints_seen;
            if ((rc = checkpoint(t, err)))
                return rc;
            next_checkpoint = gb_now_s() + cfg->trainer.checkpoint_every_s;
        }
        follow_hold(t, hold, checkpoints_seen, progress);
    }
}

/* A failure while stopping fails the run unless an earlier error already did: keeps the first. */
static int first_error(int rc, gb_error *err, int code, const gb_error *e)
{
    if (rc == 0 && err)
        *err = *e;
    return rc ? rc : code;
}

/* The stop, whatever ended the loop (rc): joins the ingest thread, drains the stream, sends the
 * final report (the launcher's sample ledger needs it), writes the final checkpoint, closes the
 * dataset and frees everything. Returns rc, or the first failure of the stop itself. */
static int finish(trainer *t, int rc, gb_error *err)
{
    gb_worker_stop_self(t->w);
    /* the ingest thread sees the stop within 0.2 s (its waits on the socket and the replay are
     * that short): the replay stays open for the chunks still arriving, which the final
     * checkpoint keeps (gb_trainer_drain_at_stop) */
    if (t->ingest_started) {
        pthread_join(t->ingest, NULL);
        if (t->ingest_rc)
            rc = first_error(rc, err, t->ingest_rc, &t->ingest_err);
    }
    if (t->samples && t->replay)
        gb_trainer_drain_at_stop(t, rc != 0);
    if (t->replay)
        gb_replay_close(t->replay);
    if (t->learning && t->samples) {
        gb_metrics_set(t->w->metrics, "final", 1);
        report(t, 0);
        gb_error cerr = {0};
        if (checkpoint(t, &cerr) != 0) {
            /* the run's last model is lost: that is a failure, not a clean stop */
            gb_error_prefix(&cerr, "final checkpoint failed");
            GB_ERROR("trainer: %s", cerr.msg);
            rc = first_error(rc, err, cerr.code, &cerr);
        }
    }
    if (t->record) { /* --record: flush and close the dataset */
        gb_error rerr = {0};
        int64_t items = gb_dataset_writer_count(t->record);
        say_writing(t, 2); /* its fsync: the stop waits for it too */
        int closed = gb_dataset_writer_close(t->record, &rerr);
        say_writing(t, 0);
        if (closed != 0) {
            GB_ERROR("trainer: closing the recorded dataset failed: %s", rerr.msg);
            rc = first_error(rc, err, rerr.code, &rerr);
        } else {
            GB_INFO("trainer: recorded %lld chunks", (long long)items);
        }
    }
    gb_param_publisher_close(t->publisher);
    gb_sample_receiver_close(t->samples);
    free(t->param_buf);
    free(t->ledger_rows);
    if (rc == 0 && t->replay && t->replay_shm[0]) /* ended cleanly: nothing will re-attach */
        gb_replay_unlink(t->replay, NULL);
    gb_learning_destroy(t->learning);
    if (t->group) {
        int64_t sent = 0, received = 0;
        gb_group_traffic(t->group, &sent, &received);
        GB_INFO("trainer: all-to-all traffic with the other trainers (agreement, selection, "
                "rows, priorities, small all-reduces): %lld bytes sent, %lld received",
                (long long)sent, (long long)received);
    }
    gb_group_close(t->group);
    /* The ledger's name stays for a successor (a restart goes on with its counts) unless the
     * run is over for this trainer: it stopped cleanly after the launcher said the run ends.
     * A clean run then leaves no segment; the launcher removes what a failed trainer left. */
    gb_trainer_ledger_close(t->ledger, rc == 0 && gb_worker_run_ending(t->w));
    return rc;
}

int gb_trainer_main(gb_worker *w, gb_error *err)
{
    trainer t = {.w = w, .published_version = -1, .ckpt.step = -1};
    int rc = open_learning(&t, err);
    if (rc == 0)
        rc = open_streams(&t, err);
    if (rc == 0)
        rc = train(&t, err);
    return finish(&t, rc, err);
}
