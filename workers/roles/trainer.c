/* workers/roles/trainer.c: the trainer worker = ingest + learning (workers/roles/learning.h). The replay
 * (GEAR store) lives in this process's shared host memory. The ingest thread pulls trajectory
 * chunks from the sample stream and writes each straight into its replay block (allocate ->
 * copy the frames in -> commit); the train thread (this one) runs the learning step (rate
 * limiter, staleness bound, select, collect, train, priorities) and pushes parameters to the
 * parameter service every trainer.push_params_every steps.
 *
 * A trainer killed mid-run loses no committed trajectory: its replay lives in the run-owned
 * shared memory segment "/gearbox-<run id>-replay-<index>" (replay.h, "Surviving the owner's
 * crash"), which a restarted trainer of the same run and index attaches to, keeping every
 * committed item and dropping those that were being written; it also restores the model and
 * optimiser from its last checkpoint. Who removes the segment: this trainer when it ends
 * without an error (the run is over for it); after an error or a kill it stays for a restart,
 * and the launcher removes the run's segments when the run ends (gb_shm_unlink_run). Its books
 * of the sample stream (what it received from each actor process) live in a run-owned segment
 * too, so that a restarted trainer goes on with them and counts what went down with its
 * predecessor (workers/roles/trainer_books.h): the launcher's sample ledger stays exact. */
#include "workers/roles/worker.h"

#include "replay/formats/dataset.h"
#include "runtime/streams/chunk.h"
#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "runtime/streams/params.h"
#include "runtime/base/rng.h"
#include "runtime/streams/sample_stream.h"
#include "runtime/base/shm.h"
#include "runtime/streams/wire.h"
#include "workers/roles/acting.h"
#include "workers/roles/checkpoint_set.h"
#include "workers/roles/learning.h"
#include "workers/roles/trainer_books.h"

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
    gb_group *group;       /* several trainers: the data-parallel group; NULL: one trainer */
    gb_learning *learning; /* learner, replay, staging: workers/roles/learning.h */
    gb_replay *replay;     /* the learning's, for ingest */
    gb_sample_receiver *samples;
    gb_param_publisher *publisher;
    /* ingest thread */
    pthread_t ingest;
    int ingest_started;
    int ingest_rc;
    gb_error ingest_err;
    /* The sample ledger (launch/run_local.c): the books count chunks in this run's layout from
     * one of its actors, once settled (stored, discarded at stop, non-finite), per actor process
     * and across this trainer's restarts, so that the actors' chunks_sent = received +
     * lost_in_crash. rejected = malformed or foreign chunks, never sent by an actor of the run:
     * shown on their own, outside those books. */
    gb_trainer_books *books;
    atomic_llong rejected_chunks;
    atomic_int ending_seen;    /* 1: the ingest thread saw the run is ending and confirmed it */
    void *param_buf;
    uint64_t param_bytes;
    const gb_param_entry *param_layout; /* the learner model's, [param_count] */
    int param_count;
    int64_t published_version;
    gb_dataset_writer *record; /* gearbox run --record DIR: every chunk received, appended */
    gb_sample_tally *tally;    /* [GB_SAMPLE_TALLY_MAX] for reports, allocated at the first */
    int64_t timed_steps;       /* train steps, collection and training ms at the last report */
    double timed_collect_ms, timed_train_ms;
    char replay_shm[GB_SHM_NAME_MAX]; /* the run-owned replay segment's name, "" if anonymous */
    gb_checkpoint_files ckpt;         /* the last complete checkpoint set at start (step -1: none) */
    gb_replay_recovery recovery;      /* what the replay kept from a killed predecessor */
} trainer;

/* Checks that a received chunk has exactly the layout's tensors and comes from one of the run's
 * actors; takes it into the books (*row: the row to settle it on) or counts it as rejected (the
 * ledger above). Returns 1 when it is taken. */
static int check_chunk(trainer *t, const gb_wire_msg *m, int *row)
{
    /* the run's actors, and those that joined it beyond its count (gearbox join) */
    int64_t actors = t->w->cfg->actors.count + t->w->cfg->actors.join_max;
    int ok = m->hdr.role == GB_ROLE_ACTOR && m->hdr.index >= 0 && m->hdr.index < actors &&
             gb_chunk_matches(&t->layout, m->hdr.tensors, m->hdr.ntensors);
    if (ok) {
        *row = gb_trainer_books_take(t->books, m->hdr.index, m->hdr.seq);
        return 1;
    }
    long long k = atomic_fetch_add(&t->rejected_chunks, 1) + 1;
    if (gb_log_due((uint64_t)k))
        GB_WARN("trainer: refused a sample from %s %d: not one of the run's %lld actors, or not "
                "in this run's chunk layout (%lld such so far; chunks_rejected)",
                gb_role_name(m->hdr.role), m->hdr.index, (long long)actors, k);
    return ok;
}

/* Counts msgs [from, to) of a batch as received with fate (their rows in rows[]). */
static void settle(trainer *t, const int *rows, int from, int to, gb_books_fate fate)
{
    for (int i = from; i < to; i++)
        gb_trainer_books_settle(t->books, rows[i], fate);
}

/* The chunk's columns in place in the message. */
static void chunk_columns(const gb_wire_msg *m, const void *cols[GB_CHUNK_NCOLS])
{
    for (int c = 0; c < GB_CHUNK_NCOLS; c++)
        cols[c] = gb_wire_msg_tensor(m, c).data;
}

/* A received chunk holding a NaN or an infinity is counted and not stored: one such chunk must
 * not poison the replay (a NaN priority, a NaN loss). Warned about at the 1st, 2nd, 4th, ...
 * Returns 1 when the chunk is finite; else it is settled (row: its books row). */
static int check_finite(trainer *t, const gb_wire_msg *m, int row)
{
    const void *cols[GB_CHUNK_NCOLS];
    chunk_columns(m, cols);
    int c = gb_chunk_nonfinite(&t->layout, cols);
    if (c < 0)
        return 1;
    gb_trainer_books_settle(t->books, row, GB_BOOKS_NONFINITE);
    long long k = (long long)gb_trainer_books_totals(t->books).nonfinite;
    if (gb_log_due((uint64_t)k))
        GB_WARN("trainer: chunk from actor %d holds a non-finite '%s' value: not stored (%lld "
                "such chunks so far; chunks_nonfinite)", m->hdr.index, t->layout.desc[c].name, k);
    return 0;
}

/* gearbox run --record: appends a received chunk to the dataset (no-op without --record).
 * Returns 0 or the dataset writer's error. */
static int record_chunk(trainer *t, const gb_wire_msg *m, gb_error *err)
{
    if (!t->record)
        return 0;
    const void *cols[GB_CHUNK_NCOLS];
    chunk_columns(m, cols);
    return gb_dataset_writer_append(t->record, cols, m->hdr.policy_version,
                                    (int32_t)t->layout.T, err);
}

/* Once the launcher has said the run is ending (runtime/streams/runctl.h): sets *ending and confirms
 * it (the launcher stops the actors once every trainer has). One atomic load per call. */
static void look_for_end(trainer *t, int *ending)
{
    if (!*ending && (*ending = gb_worker_run_ending(t->w))) {
        atomic_store(&t->ending_seen, 1);
        gb_worker_confirm_ending(t->w);
    }
}

static void *ingest_main(void *arg)
{
    trainer *t = arg;
    gb_worker *w = t->w;
    gb_wire_msg msgs[INGEST_BATCH];
    int64_t idx[INGEST_BATCH], versions[INGEST_BATCH];
    int rows[INGEST_BATCH]; /* each message's books row */
    for (int i = 0; i < INGEST_BATCH; i++)
        gb_wire_msg_init(&msgs[i]);
    gb_error *err = &t->ingest_err;
    int ending = 0; /* the launcher said the run is ending (gb_worker_run_ending) */
    /* a round is committed in one allocate, which a replay holding fewer than INGEST_BATCH
     * items refuses (capacity) or waits on forever (max_size with remover none) */
    gb_replay_stats rs;
    gb_replay_stats_get(t->replay, &rs);
    int64_t room = rs.max_size < rs.capacity ? rs.max_size : rs.capacity;
    const int most = room < INGEST_BATCH ? (int)room : INGEST_BATCH;
    while (!gb_worker_stopping(w)) {
        look_for_end(t, &ending);
        /* Take what is waiting (at least one, waiting up to 100 ms for it; 10 ms once the run
         * ends, so that the stop's join does not wait out the rest), at most INGEST_BATCH
         * messages a round, refused ones included: a stream of refused chunks (all
         * non-finite, forged) must not keep this thread from seeing the run end. */
        int n = 0;
        for (int taken = 0; n < most && taken < most; taken++) {
            int rc = gb_sample_recv(t->samples, &msgs[n], n ? 0 : ending ? 10 : 100, err);
            if (rc == GB_EAGAIN)
                break;
            if (rc) {
                t->ingest_rc = rc;
                goto out;
            }
            if (!check_chunk(t, &msgs[n], &rows[n]) || !check_finite(t, &msgs[n], rows[n])) {
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
        /* msgs [0, settled) are counted in the books: each once it is committed (a chunk
         * committed by a trainer killed before it counted it counts as lost, not twice) */
        int settled = 0;
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
                    settle(t, rows, first, n, GB_BOOKS_DISCARDED);
                    settled = n;
                    n = 0;
                    rc = 0;
                    break;
                }
                if (rc)
                    break;
            }
            for (int i = first; i < first + step; i++) {
                const void *cols[GB_CHUNK_NCOLS];
                chunk_columns(&msgs[i], cols);
                gb_learning_write(t->learning, idx[i], cols);
                versions[i] = msgs[i].hdr.policy_version;
                gb_wire_msg_release(&msgs[i]);
            }
            rc = gb_learning_commit(t->learning, step, &idx[first], &versions[first], err);
            if (rc == 0) {
                settle(t, rows, first, first + step, GB_BOOKS_STORED);
                settled = first + step;
            }
        }
        if (rc) {
            for (int i = 0; i < n; i++)
                gb_wire_msg_release(&msgs[i]); /* no-op for those already written */
            if (rc == GB_ETIMEOUT || rc == GB_ECLOSED) {
                /* the trainer stops (the replay closed): what it holds is discarded */
                settle(t, rows, settled, n, GB_BOOKS_DISCARDED);
                break;
            }
            /* a failure: the trainer ends and its successor counts these as lost */
            t->ingest_rc = rc;
            goto out;
        }
    }
out:
    for (int i = 0; i < INGEST_BATCH; i++)
        gb_wire_msg_release(&msgs[i]);
    if (t->ingest_rc)
        gb_worker_stop_self(w);
    return NULL;
}

/* gearbox run --record DIR: opens DIR/trainer-<index>.gbds with the replay's columns as schema
 * (the chunk's columns, next_obs per item). */
static int record_open(trainer *t, gb_error *err)
{
    const gb_replay_options *ro = gb_replay_options_of(t->replay);
    gb_dataset_schema s = {.steps = ro->steps, .ncolumns = ro->ncolumns};
    memcpy(s.columns, ro->columns, (size_t)ro->ncolumns * sizeof s.columns[0]);
    char path[2048];
    mkdir(t->w->record_dir, 0755);
    snprintf(path, sizeof path, "%s/trainer-%d%s", t->w->record_dir, t->w->index,
             GB_DATASET_EXT);
    int rc = gb_dataset_writer_open(&t->record, path, &s, err);
    if (rc == 0)
        GB_INFO("trainer: recording every chunk to %s", path);
    return rc;
}

/* Converts the learner model's layout into the parameter stream's, once. */
/* The parameter stream carries the model's own layout table (runtime/streams/params.h); only the flat
 * buffer it is exported into is the trainer's. */
static int make_param_buffer(trainer *t, gb_error *err)
{
    gb_torch_model_layout(gb_learning_model(t->learning), &t->param_layout, &t->param_count,
                          &t->param_bytes);
    t->param_buf = malloc(t->param_bytes ? t->param_bytes : 1);
    if (!t->param_buf)
        return gb_error_set(err, GB_ENOMEM, "out of memory for %llu parameter bytes",
                            (unsigned long long)t->param_bytes);
    return 0;
}

static int push_params(trainer *t, gb_error *err)
{
    uint64_t version = 0;
    int rc = gb_torch_model_export(gb_learning_model(t->learning), t->param_buf,
                                   t->param_bytes, &version, err);
    if (rc == 0)
        rc = gb_param_publish(t->publisher, (int64_t)version, t->param_layout, t->param_count,
                              t->param_buf, t->param_bytes, err);
    if (rc == 0) {
        t->published_version = (int64_t)version;
        gb_trainer_books_published(t->books, (int64_t)version);
    }
    return rc;
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
        int row;
        if (check_chunk(t, &m, &row)) {
            n++;
            if (record_chunk(t, &m, &err) != 0)
                GB_WARN("trainer: recording a chunk at stop: %s", err.msg);
            gb_trainer_books_settle(t->books, row, GB_BOOKS_DISCARDED);
        }
        gb_wire_msg_release(&m);
    }
    gb_wire_msg_release(&m);
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
    const gb_torch_stats *last = gb_learning_last(t->learning);
    gb_metrics_set(m, "train_steps", (double)gb_learning_train_steps(t->learning));
    gb_metrics_set(m, "samples_trained", (double)gb_learning_samples_trained(t->learning));
    gb_metrics_set(m, "policy_version", (double)t->published_version);
    gb_metrics_set(m, "replay_size", (double)rs.size);
    gb_metrics_set(m, "replay_capacity", (double)rs.capacity);
    gb_metrics_set(m, "replay_inserts", (double)rs.inserts);
    gb_metrics_set(m, "replay_expired", (double)rs.expired);
    gb_metrics_set(m, "replay_items_recovered", (double)t->recovery.kept);
    gb_metrics_set(m, "replay_items_dropped_in_crash", (double)t->recovery.dropped_in_flight);
    gb_books_totals bt = gb_trainer_books_totals(t->books);
    gb_metrics_set(m, "chunks_received", (double)bt.received);
    gb_metrics_set(m, "chunks_nonfinite", (double)bt.nonfinite);
    gb_metrics_set(m, "chunks_discarded_at_stop", (double)bt.discarded);
    gb_metrics_set(m, "chunks_lost_in_crash", (double)bt.lost_in_crash);
    gb_metrics_set(m, "books_shared", gb_trainer_books_shared(t->books));
    gb_metrics_set(m, "chunks_rejected",
                   (double)(ss.rejected + (uint64_t)atomic_load(&t->rejected_chunks)));
    /* chunks per actor process: the launcher's ledger counts what a crash lost */
    if (!t->tally)
        t->tally = calloc(GB_SAMPLE_TALLY_MAX, sizeof *t->tally);
    if (t->tally) {
        int nt = gb_trainer_books_tally(t->books, t->tally, GB_SAMPLE_TALLY_MAX);
        gb_metrics_set_table(m, (const int64_t *)t->tally, nt, GB_SAMPLE_TALLY_COLS, NULL);
    }
    /* what the algorithm computes; the rest is NaN, which the launcher writes empty
     * (metrics.csv) or leaves out (TensorBoard), as it does everything before this process's
     * first step (a resumed or restarted trainer's train_steps count from its checkpoint) */
    const int algo = t->w->cfg->trainer.algorithm.name;
    const int trained = last->gradient_steps > 0;
    const int ppo = algo == GB_ALGO_PPO, dqn = algo == GB_ALGO_DQN;
    gb_metrics_set(m, "loss", trained ? last->loss : NAN);
    gb_metrics_set(m, "policy_loss", trained && !dqn ? last->policy_loss : NAN);
    gb_metrics_set(m, "value_loss", trained ? last->value_loss : NAN);
    gb_metrics_set(m, "entropy", trained && !dqn ? last->entropy : NAN);
    gb_metrics_set(m, "approx_kl", trained && ppo ? last->approx_kl : NAN);
    gb_metrics_set(m, "q_mean", trained && !ppo ? last->q_mean : NAN);
    gb_metrics_set(m, "lr", trained ? last->lr : NAN);
    gb_metrics_set(m, "progress", env_progress);
    /* collection against the training step, per step since the last report (CUDA events for
     * the device part of a cuda trainer's collection) */
    double collect_ms, train_ms;
    gb_learning_timings(t->learning, &collect_ms, &train_ms);
    int64_t steps = gb_learning_train_steps(t->learning) - t->timed_steps;
    double c = steps > 0 ? (collect_ms - t->timed_collect_ms) / (double)steps : NAN;
    double tr = steps > 0 ? (train_ms - t->timed_train_ms) / (double)steps : NAN;
    gb_metrics_set(m, "collect_ms", c);
    gb_metrics_set(m, "train_ms", tr);
    gb_metrics_set(m, "collect_share", steps > 0 && tr > 0.0 ? c / tr : NAN);
    t->timed_steps += steps;
    t->timed_collect_ms = collect_ms;
    t->timed_train_ms = train_ms;
    gb_metrics_send(m, NULL);
}

/* Several trainers: joins the data-parallel group (workers/torch/group.h), rank = index, through
 * the store trainer.rendezvous names (a file in the run directory, or trainer 0's TCP store). */
static int join_group(trainer *t, gb_error *err)
{
    const gb_config_trainer *tc = &t->w->cfg->trainer;
    if (tc->count == 1)
        return 0;
    char dir[2048], store[2200];
    snprintf(dir, sizeof dir, "%s/rendezvous", t->w->run_dir);
    mkdir(dir, 0755);
    snprintf(store, sizeof store, "%s/trainers", dir);
    gb_group_opts go = {
        .rank = t->w->index,
        .size = (int)tc->count,
        .store_path = tc->rendezvous.store == GB_STORE_FILE ? store : NULL,
        .tcp_host = tc->rendezvous.host,
        .tcp_port = (int)tc->rendezvous.port,
        .device_host = tc->rendezvous.host,
        .prefix = "trainers",
        .timeout_s = tc->rendezvous.timeout_s,
    };
    int rc = gb_group_open(&go, &t->group, err);
    if (rc == 0)
        GB_INFO("trainer: rank %d of %lld trainers (%s rendezvous, %s selection)", t->w->index,
                (long long)tc->count,
                gb_config_enum_name("trainer.rendezvous.store", tc->rendezvous.store),
                gb_config_enum_name("trainer.replay.selection", tc->replay.selection));
    return rc;
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

/* The sample books (workers/roles/trainer_books.h): in the run's shared memory, where a restarted
 * trainer finds them, else (no run directory, no room in /dev/shm) in this process's. Opened
 * before anything else, so that a trainer that took chunks left books behind. */
static int open_books(trainer *t, gb_error *err)
{
    gb_worker *w = t->w;
    gb_error e = {0};
    if (w->run_dir && gb_trainer_books_open(&t->books, w->run_dir, w->index,
                                            w->incarnation == 0, &e) == 0) {
        if (gb_trainer_books_continued(t->books))
            GB_INFO("trainer: sample books taken over from the previous process (%lld chunks "
                    "received so far)", (long long)gb_trainer_books_totals(t->books).received);
        return 0;
    }
    if (w->run_dir)
        GB_WARN("trainer: sample books in process memory: if this trainer is killed, the run's "
                "sample ledger will not be known: %s", e.msg);
    return gb_trainer_books_open(&t->books, NULL, w->index, 1, err);
}

/* A restarted trainer's model comes from its last checkpoint, older than what its predecessor
 * published since. Its versions go on above the last one published (kept in the books), so that
 * version numbers only go up within a run: the replay's staleness floor (trainer.max_staleness)
 * was raised from the predecessor's versions, and chunks acted with lower ones would expire as
 * they arrive, leaving nothing to train on. Policy workers would take lower numbers too
 * (runtime/streams/params.h, "Order"). */
static void continue_versions(trainer *t)
{
    int64_t last = gb_trainer_books_last_published(t->books);
    gb_torch_model *m = gb_learning_model(t->learning);
    if (last < 0 || (int64_t)gb_torch_model_version(m) > last)
        return;
    GB_INFO("trainer: parameter versions go on from %lld (the last one published), not from "
            "the checkpoint's %lld", (long long)last + 1, (long long)gb_torch_model_version(m));
    gb_torch_model_set_version(m, (uint64_t)last + 1);
}

static int write_learning(void *ctx, const char *model, const char *replay, gb_error *err)
{
    return gb_learning_checkpoint(ctx, model, replay, err);
}

/* checkpoints/trainer-<index>.checkpoint names the model and replay files of one step
 * (workers/roles/checkpoint_set.h): a failed write (ENOSPC) leaves the previous pair current. */
static int checkpoint(trainer *t, gb_error *err)
{
    char dir[2048], name[32];
    checkpoint_place(t, dir, sizeof dir, name);
    mkdir(dir, 0755);
    int64_t step = gb_learning_train_steps(t->learning);
    uint64_t before = 0, after = 0;
    int64_t n = gb_replay_digest(t->replay, &before);
    int rc = gb_checkpoint_write(dir, name, step, 1, write_learning, t->learning, err);
    if (rc == 0 && gb_replay_digest(t->replay, &after) == n && after == before)
        GB_INFO("trainer: checkpoint written (%lld training steps; replay %lld items, digest "
                "%016llx)", (long long)step, (long long)n, (unsigned long long)before);
    else if (rc == 0) /* another rank wrote into this shard meanwhile: no digest to quote */
        GB_INFO("trainer: checkpoint written (%lld training steps)", (long long)step);
    return rc;
}

int gb_trainer_main(gb_worker *w, gb_error *err)
{
    const gb_config *cfg = w->cfg;
    trainer t = {.w = w, .published_version = -1, .ckpt.step = -1};
    gb_env_spec spec;
    char ep[GB_REGISTRY_ENDPOINT_MAX], name[64];
    int rc = open_books(&t, err);
    if (rc || (rc = gb_worker_env_space(cfg, &spec, &t.space, err)) || (rc = gb_acting_layout_for(&spec, cfg->actors.chunk_len, &t.layout, err)) ||
        (rc = gb_torch_set_threads((int)cfg->trainer.threads, err)))
        goto done;
    uint64_t seed = (uint64_t)cfg->experiment.seed;
    gb_learning_opts lo = {
        .cfg = cfg,
        .space = &t.space,
        .layout = &t.layout,
        .learner_seed = gb_rng_seed_of(seed, "trainer", (uint64_t)w->index, "learner"),
        .replay_seed = gb_rng_seed_of(seed, "trainer", (uint64_t)w->index, "replay"),
        .shared_seed = gb_rng_seed_of(seed, "trainers", 0, "global-selection"),
    };
    if ((rc = join_group(&t, err)))
        goto done;
    lo.group = t.group;
    if ((rc = crash_safe_opts(&t, &lo, err)))
        goto done;
    if ((rc = gb_learning_create(&lo, &t.learning, err)))
        goto done;
    t.replay = gb_learning_replay(t.learning);
    t.timed_steps = gb_learning_train_steps(t.learning);
    GB_INFO("trainer %d: learning on %s, batches collected by the %s path%s", w->index,
            cfg->trainer.device == GB_DEVICE_CUDA ? "cuda" : "the cpu",
            gb_learning_collect_path(t.learning),
            gb_learning_prefetching(t.learning) ? ", the next batch prefetched" : "");
    if ((rc = recover(&t, err)))
        goto done;
    continue_versions(&t);
    if ((rc = make_param_buffer(&t, err)) || (w->record_dir && (rc = record_open(&t, err))))
        goto done;

    snprintf(name, sizeof name, "trainer/%d/samples", w->index);
    if ((rc = gb_worker_endpoint(w, "samples", name, ep, sizeof ep, err)))
        goto done;
    gb_sample_receiver_opts ro = {
        .endpoint = ep,
        .hwm = (int)cfg->streams.sample_hwm,
        .kernel_buffer = gb_sample_kernel_buffer((int)cfg->streams.sample_hwm,
                                                 t.layout.block_bytes),
        .max_frame = t.layout.block_bytes};
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
    int reporting_fast = 0;
    /* With several trainers every step, and the stop, is agreed by all of them. */
    int publishing = t.publisher != NULL;
    for (;;) {
        /* a step waits up to 0.1 s for samples; while the run ends, 10 ms, so that the reports
         * the launcher waits on (chunks_received, every 20 ms below) are not held back */
        rc = gb_learning_step(t.learning, reporting_fast ? 0.01 : 0.1, gb_worker_stopping(w),
                              err);
        if (rc == 2)
            break;
        if (rc < 0)
            goto done;
        if (rc == 1 && publishing &&
            gb_learning_train_steps(t.learning) % cfg->trainer.push_params_every == 0 &&
            (rc = push_params(&t, err))) {
            if (!gb_worker_stopping(w))
                goto done;
            /* the service stopped first: nothing left to publish to; the other trainers
             * still need this one to agree on the stop */
            publishing = 0;
            rc = 0;
        }
        /* Learning-rate annealing follows the env-step budget: estimated from stored chunks
         * (by this trainer and its predecessors: the books) */
        env_steps_seen = gb_trainer_books_totals(t.books).stored * t.layout.T;
        double progress = budget > 0 ? fmin(1.0, (double)env_steps_seen / budget) : 0.0;
        gb_learning_set_progress(t.learning, progress);
        if (!reporting_fast && atomic_load(&t.ending_seen)) {
            reporting_fast = 1; /* the launcher now waits on chunks_received: report at once */
            next_report = 0;
        }
        if (gb_now_s() >= next_report) {
            report(&t, progress);
            /* while the run ends the launcher waits on chunks_received: report often */
            next_report = gb_now_s() + (reporting_fast ? 0.02 : gb_worker_report_interval(w));
        }
        if (gb_now_s() >= next_checkpoint) {
            if ((rc = checkpoint(&t, err)))
                goto done;
            next_checkpoint = gb_now_s() + cfg->trainer.checkpoint_every_s;
        }
    }
    rc = 0;
done:
    gb_worker_stop_self(w);
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
    if (t.learning && t.samples) {
        gb_metrics_set(w->metrics, "final", 1); /* the launcher's sample ledger needs this one */
        report(&t, 0);
        gb_error cerr = {0};
        if (checkpoint(&t, &cerr) != 0) {
            /* the run's last model is lost: that is a failure, not a clean stop */
            gb_error_prefix(&cerr, "final checkpoint failed");
            GB_ERROR("trainer: %s", cerr.msg);
            if (rc == 0) {
                rc = cerr.code;
                if (err)
                    *err = cerr;
            }
        }
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
    free(t.param_buf);
    free(t.tally);
    if (rc == 0 && t.replay && t.replay_shm[0]) /* ended cleanly: nothing will re-attach */
        gb_replay_unlink(t.replay, NULL);
    gb_learning_destroy(t.learning);
    gb_group_close(t.group);
    gb_trainer_books_close(t.books, 0); /* its name stays for a restart; the launcher removes it */
    return rc;
}
