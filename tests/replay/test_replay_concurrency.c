/* tests/replay/test_replay_concurrency.c: ingest threads insert (allocate, write in place,
 * commit) while samplers sample, collect with no lock held, update priorities and release, and a
 * third party expires stale items and takes checkpoints. The store is small, so the remover is
 * always evicting items that readers still hold: every collected item must be exactly the item
 * its key names (contents derive from the id, which derives from the key), i.e. no block is
 * reused while a reader holds it. With extra selectors, samplers ask for a random one of every
 * selector the replay offers. Run under ThreadSanitizer too (see the replay report). */
#include "replay/replay.h"
#include "runtime/base/clock.h"
#include "test.h"
#include "util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { STEPS = 8, WRITERS = 2, SAMPLERS = 2, BATCH = 16 };

typedef struct shared {
    gb_replay *r;
    atomic_int stop;
    atomic_long inserted, sampled, bad, errors;
    atomic_long version;
    int64_t per_writer;
    unsigned selectors; /* gb_replay_selectors: samplers ask for any of them, or the primary */
} shared;

typedef struct warg {
    shared *sh;
    int id;
} warg;

/* Each item's id is (writer << 40 | counter); its contents derive from the id, and the per-item
 * "id" column holds it, so a collected row that does not match its own id column was torn. */
static void *writer(void *arg)
{
    warg *a = arg;
    shared *sh = a->sh;
    gb_error err = {0};
    for (int64_t k = 0; k < sh->per_writer; k++) {
        int64_t n = 1 + k % 3, idx[3];
        int rc = gb_replay_allocate(sh->r, n, idx, 10.0, &err);
        if (rc) {
            fprintf(stderr, "writer %d: %s\n", a->id, err.msg);
            atomic_fetch_add(&sh->errors, 1);
            break;
        }
        int64_t ver[3];
        int32_t len[3];
        for (int64_t j = 0; j < n; j++) {
            uint64_t id = ((uint64_t)a->id << 40) | (uint64_t)(k * 3 + j);
            util_write(sh->r, idx[j], id, STEPS);
            ver[j] = atomic_load(&sh->version) - (int64_t)(id % 3);
            len[j] = 1 + (int32_t)(id % STEPS);
        }
        if (k % 17 == 5) { /* a failed write: abort instead of commit */
            rc = gb_replay_abort(sh->r, n, idx, &err);
        } else {
            rc = gb_replay_commit(sh->r, n, idx, NULL, len, ver, &err);
            atomic_fetch_add(&sh->inserted, n);
        }
        if (rc) {
            fprintf(stderr, "writer %d: %s\n", a->id, err.msg);
            atomic_fetch_add(&sh->errors, 1);
            break;
        }
        if (k % 64 == 0)
            atomic_fetch_add(&sh->version, 1);
    }
    return NULL;
}

static void *sampler(void *arg)
{
    warg *a = arg;
    shared *sh = a->sh;
    gb_error err = {0};
    gb_replay_selection s;
    if (gb_replay_selection_init(&s, BATCH, &err) != 0)
        return NULL;
    float *obs = malloc(BATCH * STEPS * 4 * sizeof *obs);
    int32_t *act = malloc(BATCH * STEPS * sizeof *act);
    uint64_t ids[BATCH];
    float boot[BATCH * 4];
    int32_t lengths[BATCH];
    gb_rng rng;
    gb_rng_seed(&rng, (uint64_t)a->id);
    while (!atomic_load(&sh->stop)) {
        gb_replay_request q = gb_replay_request_default(BATCH);
        q.timeout_s = 0.2;
        q.t0 = (int32_t)gb_rng_below(&rng, 3);
        q.t1 = STEPS;
        if (gb_rng_below(&rng, 8) == 0)
            q.min_policy_version = atomic_load(&sh->version) - 2;
        int kind = (int)gb_rng_below(&rng, GB_REPLAY_SELECTORS + 1); /* the last: the primary */
        if (kind < GB_REPLAY_SELECTORS && (sh->selectors & (1u << kind)))
            q.selector = kind;
        int rc = gb_replay_sample(sh->r, &q, &s, &err);
        if (rc == GB_ETIMEOUT)
            continue;
        if (rc) {
            fprintf(stderr, "sampler %d: %s\n", a->id, err.msg);
            atomic_fetch_add(&sh->errors, 1);
            break;
        }
        /* Give writers time to churn through the store while we hold the pins. */
        if (gb_rng_below(&rng, 4) == 0)
            usleep(200);
        gb_replay_dst d[4] = {{0, obs, BATCH * STEPS * 16}, {1, act, BATCH * STEPS * 4},
                              {2, ids, sizeof ids}, {3, boot, sizeof boot}};
        rc = gb_replay_collect(sh->r, &s, d, 4, lengths, &err);
        if (rc) {
            fprintf(stderr, "sampler %d collect: %s\n", a->id, err.msg);
            atomic_fetch_add(&sh->errors, 1);
            break;
        }
        int32_t span = q.t1 - q.t0;
        for (int64_t k = 0; k < s.n; k++) {
            uint64_t id = ids[k];
            int32_t valid = 1 + (int32_t)(id % STEPS) - q.t0;
            valid = valid < 0 ? 0 : valid;
            if (lengths[k] != valid ||
                !util_check_rows(obs + k * span * 4, act + k * span, id, q.t0, span, valid) ||
                boot[k * 4 + 1] != util_obs(id, STEPS, 1))
                atomic_fetch_add(&sh->bad, 1);
        }
        double p[BATCH];
        for (int64_t k = 0; k < s.n; k++)
            p[k] = 0.1 + (double)gb_rng_below(&rng, 100);
        if (gb_replay_update_priorities(sh->r, s.n, s.index, s.key, p, NULL, &err) != 0)
            atomic_fetch_add(&sh->errors, 1);
        atomic_fetch_add(&sh->sampled, s.n);
        gb_replay_release(sh->r, &s);
    }
    free(obs);
    free(act);
    gb_replay_selection_free(&s);
    return NULL;
}

static void run(int selector, unsigned extra, int remover, int64_t max_times,
                int collect_threads, const char *ckpt)
{
    gb_error err = {0};
    gb_replay_options o;
    util_options(&o, 48, STEPS);
    o.selector = selector;
    o.extra_selectors = extra;
    o.remover = remover;
    o.max_times_sampled = max_times;
    o.collect_threads = collect_threads;
    o.min_size = 4;
    o.samples_per_insert = 1; /* writers and samplers take turns: both sides block and wake */
    o.error_buffer = 40;
    o.timeout_s = 10;
    shared sh = {0};
    sh.per_writer = 1500;
    CHECK_OK(gb_replay_create(&o, &sh.r, &err));
    sh.selectors = gb_replay_selectors(sh.r);
    pthread_t w[WRITERS], s[SAMPLERS];
    warg wa[WRITERS], sa[SAMPLERS];
    for (int i = 0; i < SAMPLERS; i++) {
        sa[i] = (warg){&sh, 100 + i};
        CHECK(pthread_create(&s[i], NULL, sampler, &sa[i]) == 0);
    }
    for (int i = 0; i < WRITERS; i++) {
        wa[i] = (warg){&sh, i + 1};
        CHECK(pthread_create(&w[i], NULL, writer, &wa[i]) == 0);
    }
    /* Meanwhile: checkpoints and status reads from this thread. */
    for (int k = 0; k < 3 && ckpt; k++) {
        gb_sleep_ms(20);
        CHECK_OK(gb_replay_checkpoint(sh.r, ckpt, &err));
        gb_replay_stats st;
        gb_replay_stats_get(sh.r, &st);
    }
    for (int i = 0; i < WRITERS; i++)
        pthread_join(w[i], NULL);
    atomic_store(&sh.stop, 1);
    for (int i = 0; i < SAMPLERS; i++)
        pthread_join(s[i], NULL);
    gb_replay_stats st;
    gb_replay_stats_get(sh.r, &st);
    fprintf(stderr, "  selector %d extra 0x%x remover %d: %ld inserted, %ld sampled, %llu "
            "evicted, %llu sampled out, %llu expired, %llu insert waits\n", selector, extra,
            remover, (long)sh.inserted, (long)sh.sampled, (unsigned long long)st.evicted,
            (unsigned long long)st.sampled_out, (unsigned long long)st.expired,
            (unsigned long long)st.insert_waits);
    CHECK_EQ_INT(atomic_load(&sh.bad), 0);
    CHECK_EQ_INT(atomic_load(&sh.errors), 0);
    CHECK(atomic_load(&sh.sampled) > 0);
    CHECK(st.inserts == (uint64_t)atomic_load(&sh.inserted));
    CHECK((uint64_t)st.size + st.evicted + st.sampled_out + st.expired == st.inserts);
    CHECK(st.retired_pinned == 0 && st.writing == 0);
    CHECK_EQ_INT(st.free_blocks + st.size, 48);
    gb_replay_free(sh.r);
}

int main(void)
{
    char ckpt[64];
    snprintf(ckpt, sizeof ckpt, "/tmp/gearbox-test-concurrency-%d.ckpt", (int)getpid());
    const unsigned weighted = 1u << GB_SELECTOR_WEIGHTED, topk = 1u << GB_SELECTOR_TOPK;
    run(GB_SELECTOR_WEIGHTED, 0, GB_REMOVER_FIFO, 0, 1, ckpt);
    run(GB_SELECTOR_UNIFORM, 0, GB_REMOVER_LOWEST_PRIORITY, 0, 2, NULL);
    run(GB_SELECTOR_FIFO, 0, GB_REMOVER_MAX_TIMES_SAMPLED, 2, 1, NULL);
    run(GB_SELECTOR_TOPK, 0, GB_REMOVER_LIFO, 3, 2, NULL);
    /* Extra selectors: samplers ask for a random one of everything the replay offers. */
    run(GB_SELECTOR_UNIFORM, weighted | topk, GB_REMOVER_LOWEST_PRIORITY, 0, 1, ckpt);
    run(GB_SELECTOR_WEIGHTED, topk, GB_REMOVER_MAX_TIMES_SAMPLED, 2, 2, NULL);
    unlink(ckpt);
    return test_main_result();
}
