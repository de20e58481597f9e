/* workers/roles/trainer_ingest.c: the trainer's ingest thread (see trainer_internal.h): chunks from
 * the sample stream, checked, counted in the ledger (workers/roles/trainer_ledger.h) and written
 * straight into their replay blocks (allocate -> copy the frames in -> commit). */
#include "workers/roles/trainer_internal.h"

#include "envs/spec.h"
#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "runtime/streams/runctl.h"
#include "runtime/streams/wire.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define INGEST_BATCH 32 /* chunks taken per allocate/commit */
#define INGEST_END_WAIT_S 0.5 /* once the run is ending, how long a chunk may wait for room */

/* The chunk's columns in place in the message. */
static void chunk_columns(const trainer *t, const gb_wire_msg *m,
                          const void *cols[GB_CHUNK_NCOLS])
{
    for (int c = 0; c < t->layout.ncols; c++)
        cols[c] = gb_wire_msg_tensor(m, c).data;
}

/* The name of the first column of a chunk (its layout checked) holding a value no actor of this
 * run can have sent, or NULL: a reward outside the environment's declared range on a valid row
 * (GB_ENV_REWARD_RANGE, envs/env.h), a reward, float observation or continuous action beyond
 * the guard (trainer.chunk_guard; sc: the chunk's float scan, in which a NaN counts as no
 * magnitude: check_chunk's; a NaN is counted as non-finite, not here), a discrete action
 * outside the action space on a valid row (a reset row's action is ignored). Finite but absurd
 * values (a reward of 1e30) would otherwise train: the Q-values diverge and stay so. */
static const char *out_of_bounds(const trainer *t, const void *const cols[GB_CHUNK_NCOLS],
                                 const gb_chunk_scan *sc)
{
    const gb_config_chunk_guard *g = &t->w->cfg->trainer.chunk_guard;
    const gb_chunk_layout *l = &t->layout;
    if (sc->max_abs[GB_CHUNK_REWARD] > g->max_abs_reward)
        return "reward";
    const uint8_t *valid = cols[GB_CHUNK_VALID];
    if (t->spec.flags & GB_ENV_REWARD_RANGE)
        for (int64_t r = 0; r < l->T; r++) {
            float rw;
            memcpy(&rw, (const char *)cols[GB_CHUNK_REWARD] + r * (int64_t)sizeof rw, sizeof rw);
            if (valid[r] && !isnan(rw) && !gb_env_reward_in_range(&t->spec, rw))
                return "reward";
        }
    if (l->obs_dtype == GB_DTYPE_FLOAT32 &&
        (sc->max_abs[GB_CHUNK_OBS] > g->max_abs_obs ||
         sc->max_abs[GB_CHUNK_NEXT_OBS] > g->max_abs_obs ||
         (l->past_col >= 0 && sc->max_abs[l->past_col] > g->max_abs_obs)))
        return "obs";
    if (!l->discrete)
        return sc->max_abs[GB_CHUNK_ACTION] > g->max_abs_action ? "action" : NULL;
    for (int64_t r = 0; r < l->T; r++) {
        int64_t a;
        memcpy(&a, (const char *)cols[GB_CHUNK_ACTION] + r * (int64_t)sizeof a, sizeof a);
        if (valid[r] && (a < 0 || a >= t->space.n_actions))
            return "action";
    }
    return NULL;
}

/* The chunk's new valid rows (those after the rows it repeats, layout.overlap): its steps. */
static int64_t chunk_steps(const trainer *t, const gb_wire_msg *m)
{
    const uint8_t *valid = gb_wire_msg_tensor(m, GB_CHUNK_VALID).data;
    int64_t steps = 0;
    for (int64_t r = t->layout.overlap; r < t->layout.T; r++)
        steps += valid[r] != 0;
    return steps;
}

/* Checks that a received chunk has exactly the layout's tensors, comes from one of the run's
 * actors and holds values within bounds (out_of_bounds); takes it into the ledger (*row: the row
 * to settle it on) or counts it as rejected (the sample ledger, trainer_internal.h). A refused
 * chunk never reaches the ledger: neither its number (a forged one would count the sender's
 * real chunks as lost after a crash) nor its arrival (received more than sent: a negative
 * loss). A taken chunk holding a NaN or an infinity is then counted and not stored
 * (chunks_nonfinite): one such chunk must not poison the replay (a NaN priority, a NaN loss).
 * The floating columns are read once for both checks (gb_chunk_scan_floats). Warned about at
 * the 1st, 2nd, 4th, ... Returns 1 when the chunk is to be stored. */
static int check_chunk(trainer *t, const gb_wire_msg *m, int *row)
{
    /* the run's actors, and those that joined it beyond its count (gearbox join) */
    int64_t actors = t->w->cfg->actors.count + t->w->cfg->actors.join_max;
    /* sent by the actor it names, as its connection proved (the ZAP User-Id, curve.h) */
    int self = gb_wire_peer_is(m, GB_ROLE_ACTOR, m->hdr.index);
    int ok = m->hdr.role == GB_ROLE_ACTOR && m->hdr.index >= 0 && m->hdr.index < actors &&
             self && gb_chunk_matches(&t->layout, m->hdr.tensors, m->hdr.ntensors);
    const void *cols[GB_CHUNK_NCOLS];
    gb_chunk_scan sc;
    const char *bad = NULL;
    if (ok) {
        chunk_columns(t, m, cols);
        gb_chunk_scan_floats(&t->layout, cols, &sc);
        bad = out_of_bounds(t, cols, &sc);
    }
    if (ok && !bad) {
        *row = gb_trainer_ledger_take(t->ledger, m->hdr.index, m->hdr.seq);
        if (sc.nonfinite < 0)
            return 1;
        gb_trainer_ledger_settle_steps(t->ledger, *row, GB_LEDGER_NONFINITE, chunk_steps(t, m));
        long long k = (long long)gb_trainer_ledger_totals(t->ledger).nonfinite;
        if (gb_log_due((uint64_t)k))
            GB_WARN("trainer: chunk from actor %d holds a non-finite '%s' value: not stored "
                    "(%lld such chunks so far; chunks_nonfinite)", m->hdr.index,
                    t->layout.desc[sc.nonfinite].name, k);
        return 0;
    }
    long long k = atomic_fetch_add(&t->rejected_chunks, 1) + 1;
    if (gb_log_due((uint64_t)k) && !self)
        GB_WARN("trainer: refused a chunk as %s %d sent by %s: an actor sends as itself only "
                "(%lld refused chunks so far; chunks_rejected)", gb_role_name(m->hdr.role),
                m->hdr.index, m->peer, k);
    else if (gb_log_due((uint64_t)k) && bad)
        GB_WARN("trainer: refused a chunk from actor %d: a '%s' value beyond the run's bounds "
                "(trainer.chunk_guard, the action space; %lld refused chunks so far; "
                "chunks_rejected)", m->hdr.index, bad, k);
    else if (gb_log_due((uint64_t)k))
        GB_WARN("trainer: refused a sample from %s %d: not one of the run's %lld actors, or not "
                "in this run's chunk layout (%lld such so far; chunks_rejected)",
                gb_role_name(m->hdr.role), m->hdr.index, (long long)actors, k);
    return 0;
}

/* Counts msgs [from, to) of a batch as received with fate (their rows in rows[], their steps in
 * steps[]). */
static void settle(trainer *t, const int *rows, const int64_t *steps, int from, int to,
                   gb_ledger_fate fate)
{
    for (int i = from; i < to; i++)
        gb_trainer_ledger_settle_steps(t->ledger, rows[i], fate, steps[i]);
}

/* gearbox run --record: appends a received chunk to the dataset (no-op without --record).
 * Returns 0 or the dataset writer's error. */
static int record_chunk(trainer *t, const gb_wire_msg *m, gb_error *err)
{
    if (!t->record)
        return 0;
    const void *cols[GB_CHUNK_NCOLS];
    chunk_columns(t, m, cols);
    return gb_dataset_writer_append(t->record, cols, m->hdr.policy_version,
                                    (int32_t)t->layout.T, err);
}

/* Once the launcher has said the run is ending (runtime/streams/runctl.h): sets *ending and
 * confirms it (the launcher stops the actors once every trainer has). One atomic load per call. */
static void look_for_end(trainer *t, int *ending)
{
    if (!*ending && (*ending = gb_worker_run_ending(t->w))) {
        t->ending_at = gb_now_s();
        atomic_store(&t->ending_seen, 1);
        gb_worker_confirm_ending(t->w);
    }
}

/* Takes what is waiting (at least one, waiting up to 100 ms for it; 10 ms once the run ends, so
 * that the stop's join does not wait out the rest), at most `most` messages a round, refused
 * ones included: a stream of refused chunks (all non-finite, forged) must not keep this thread
 * from seeing the run end. Returns the number of chunks taken into msgs (rows: their ledger rows
 * rows), or a negative error. */
static int take_batch(trainer *t, gb_wire_msg *msgs, int *rows, int64_t *steps, int most,
                      int ending, gb_error *err)
{
    int n = 0;
    for (int taken = 0; n < most && taken < most; taken++) {
        int rc = gb_sample_recv(t->samples, &msgs[n], n ? 0 : ending ? 10 : 100, err);
        if (rc == GB_EAGAIN)
            break;
        if (rc)
            return rc;
        if (!check_chunk(t, &msgs[n], &rows[n])) {
            gb_wire_msg_release(&msgs[n]);
            continue;
        }
        if ((rc = record_chunk(t, &msgs[n], err)))
            return rc;
        steps[n] = chunk_steps(t, &msgs[n]);
        n++;
    }
    return n;
}

/* Allocates one replay block for a chunk, waiting for the rate limiter in steps of 0.2 s while
 * the run goes on. Once the run is ending nothing is paced any more: the chunk takes a block past
 * the rate limiter when the replay has room (its remover makes room), and waits only for room in
 * a queue with remover none (PPO's round), which the learner, still training, empties. So the
 * actors' last chunks reach the replay that the final checkpoint saves. That wait ends
 * INGEST_END_WAIT_S after the end was seen: several trainers train only together, and one whose
 * queue is full may wait on a step the others cannot make (their shards short of a round); the
 * launcher's drain gives the last chunks about 1.6 s. Once this trainer stops (no more
 * training), or past that wait, a chunk without room is discarded, counted. Returns as
 * gb_replay_allocate (GB_ETIMEOUT: the worker stops with no room for it). */
static int allocate_one(trainer *t, int64_t *idx, int *ending, gb_error *err)
{
    for (;;) {
        int rc = *ending ? gb_replay_allocate_unlimited(t->replay, 1, idx, err)
                         : gb_replay_allocate(t->replay, 1, idx, 0.2, err);
        if (rc != GB_ETIMEOUT)
            return rc;
        if (gb_worker_stopping(t->w))
            return gb_replay_allocate_unlimited(t->replay, 1, idx, err);
        if (*ending && gb_now_s() - t->ending_at > INGEST_END_WAIT_S)
            return GB_ETIMEOUT; /* discarded, counted (store_batch) */
        if (*ending) /* no room yet: wait for the learner (or the rate limiter) a little */
            rc = gb_replay_allocate(t->replay, 1, idx, 0.05, err);
        if (rc != GB_ETIMEOUT)
            return rc;
        look_for_end(t, ending);
    }
}

/* Writes msgs [0, n) into the replay and commits them, each counted in the ledger once it is
 * committed (a chunk committed by a trainer killed before it counted it counts as lost, not
 * twice). All n in one allocate/commit when the rate limiter admits them now; else one item at
 * a time, each committed before the next is allocated: the limiter counts blocks being written
 * as inserts, so holding some while waiting for room for the others could block sampling, and
 * with it every insert, forever. Releases every message. Returns 0, 1 when the trainer stops
 * (the replay closed: what it held is discarded), or a negative error (the trainer ends and its
 * successor counts what was not committed as lost). */
static int store_batch(trainer *t, gb_wire_msg *msgs, const int *rows, const int64_t *steps,
                       int n, int *ending, gb_error *err)
{
    int64_t idx[INGEST_BATCH], versions[INGEST_BATCH];
    int settled = 0; /* msgs [0, settled) are counted in the ledger */
    int rc = *ending ? gb_replay_allocate_unlimited(t->replay, n, idx, err)
                     : gb_replay_allocate(t->replay, n, idx, 0, err);
    int batched = rc == 0;
    int step = batched ? n : 1;
    if (rc == GB_ETIMEOUT)
        rc = 0;
    for (int first = 0; rc == 0 && first < n; first += step) {
        if (!batched && (rc = allocate_one(t, &idx[first], ending, err)) == GB_ETIMEOUT &&
            *ending) {
            for (int i = first; i < n; i++)
                gb_wire_msg_release(&msgs[i]);
            settle(t, rows, steps, first, n, GB_LEDGER_DISCARDED);
            GB_INFO("trainer: %d chunks discarded (no room) %.1f s after the run began ending",
                    n - first, gb_now_s() - t->ending_at);
            return 0;
        }
        if (rc)
            break;
        for (int i = first; i < first + step; i++) {
            const void *cols[GB_CHUNK_NCOLS];
            chunk_columns(t, &msgs[i], cols);
            gb_learning_write(t->learning, idx[i], cols);
            versions[i] = msgs[i].hdr.policy_version;
            gb_wire_msg_release(&msgs[i]);
        }
        rc = gb_learning_commit(t->learning, step, &idx[first], &versions[first], err);
        if (rc == 0) {
            settle(t, rows, steps, first, first + step, GB_LEDGER_STORED);
            settled = first + step;
        }
    }
    if (rc == 0)
        return 0;
    for (int i = 0; i < n; i++)
        gb_wire_msg_release(&msgs[i]); /* no-op for those already written */
    if (rc == GB_ETIMEOUT || rc == GB_ECLOSED) {
        settle(t, rows, steps, settled, n, GB_LEDGER_DISCARDED);
        if (n > settled)
            GB_INFO("trainer: %d chunks discarded (no room) as the trainer stopped",
                    n - settled);
        return 1;
    }
    return rc;
}

void *gb_trainer_ingest_main(void *arg)
{
    trainer *t = arg;
    gb_wire_msg msgs[INGEST_BATCH];
    int rows[INGEST_BATCH]; /* each message's ledger row */
    int64_t steps[INGEST_BATCH]; /* and its steps */
    for (int i = 0; i < INGEST_BATCH; i++)
        gb_wire_msg_init(&msgs[i]);
    int ending = 0; /* the launcher said the run is ending (gb_worker_run_ending) */
    /* a round is committed in one allocate, which a replay holding fewer than INGEST_BATCH
     * items refuses (capacity) or waits on forever (max_size with remover none) */
    gb_replay_stats rs;
    gb_replay_stats_get(t->replay, &rs);
    int64_t room = rs.max_size < rs.capacity ? rs.max_size : rs.capacity;
    const int most = room < INGEST_BATCH ? (int)room : INGEST_BATCH;
    int rc = 0; /* < 0: an error; 1: the replay closed */
    while (!gb_worker_stopping(t->w)) {
        look_for_end(t, &ending);
        int n = take_batch(t, msgs, rows, steps, most, ending, &t->ingest_err);
        if (n < 0) {
            rc = n;
            break;
        }
        if (n > 0 && (rc = store_batch(t, msgs, rows, steps, n, &ending, &t->ingest_err)))
            break;
    }
    for (int i = 0; i < INGEST_BATCH; i++)
        gb_wire_msg_release(&msgs[i]);
    if (rc < 0) {
        t->ingest_rc = rc;
        gb_worker_stop_self(t->w);
    }
    return NULL;
}

int gb_trainer_record_open(trainer *t, gb_error *err)
{
    const gb_replay_options *ro = gb_replay_options_of(t->replay);
    gb_dataset_schema s = {.steps = ro->steps, .ncolumns = ro->ncolumns};
    memcpy(s.columns, ro->columns, (size_t)ro->ncolumns * sizeof s.columns[0]);
    char path[2048];
    snprintf(path, sizeof path, "%s/trainer-%d%s", t->w->record_dir, t->w->index,
             GB_DATASET_EXT);
    int rc = gb_dataset_writer_open(&t->record, path, &s, err);
    if (rc == 0)
        GB_INFO("trainer: recording every chunk to %s", path);
    return rc;
}

/* A chunk that arrived after the last training step: into the replay when it has room, past
 * the rate limiter (nothing is paced any more), so the final checkpoint keeps it; else (a full
 * queue with remover none: PPO's round) discarded. Settles it; returns 1 when stored. */
static int store_at_stop(trainer *t, const gb_wire_msg *m, int row)
{
    int64_t idx, version = m->hdr.policy_version, steps = chunk_steps(t, m);
    gb_error e = {0};
    if (gb_replay_allocate_unlimited(t->replay, 1, &idx, &e) != 0) {
        gb_trainer_ledger_settle_steps(t->ledger, row, GB_LEDGER_DISCARDED, steps);
        return 0;
    }
    const void *cols[GB_CHUNK_NCOLS];
    chunk_columns(t, m, cols);
    gb_learning_write(t->learning, idx, cols);
    if (gb_learning_commit(t->learning, 1, &idx, &version, &e) != 0) {
        GB_WARN("trainer: storing a chunk at stop: %s", e.msg);
        gb_replay_abort(t->replay, 1, &idx, NULL);
        gb_trainer_ledger_settle_steps(t->ledger, row, GB_LEDGER_DISCARDED, steps);
        return 0;
    }
    gb_trainer_ledger_settle_steps(t->ledger, row, GB_LEDGER_STORED, steps);
    return 1;
}

void gb_trainer_drain_at_stop(trainer *t, int failing)
{
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    gb_error err = {0};
    int64_t stored = 0, discarded = 0;
    /* after a drained run nothing is in flight: what is queued, without waiting for more */
    const int silence_ms = gb_runctl_client_drained(t->w->runctl) ? 0 : 50;
    for (double end = gb_now_s() + 2.0; gb_now_s() < end;) {
        int rc = gb_sample_recv(t->samples, &m, silence_ms, &err);
        if (rc)
            break;
        int row;
        if (check_chunk(t, &m, &row)) {
            if (record_chunk(t, &m, &err) != 0)
                GB_WARN("trainer: recording a chunk at stop: %s", err.msg);
            if (store_at_stop(t, &m, row)) {
                stored++;
            } else {
                discarded++;
                if (failing) { /* see trainer_internal.h */
                    gb_wire_msg_release(&m);
                    break;
                }
            }
        }
        gb_wire_msg_release(&m);
    }
    gb_wire_msg_release(&m);
    if (stored || discarded)
        GB_INFO("trainer: %lld chunks arrived after training stopped: %lld stored in the replay "
                "(the final checkpoint keeps them), %lld discarded (no room)%s",
                (long long)(stored + discarded), (long long)stored, (long long)discarded,
                t->record ? "; all recorded" : "");
}
