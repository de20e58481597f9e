/* tests/replay/test_replay_reference.c: the replay against a naive reference model (arrays and
 * linear scans): FIFO/LIFO/top-k order, eviction order of every remover, max_times_sampled, the
 * staleness floor, batched commits and priority updates, and random operation sequences compared
 * step by step (contents, priorities, counts, and every draw's probability). */
#include "replay/replay.h"
#include "test.h"
#include "util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the reference: items in insertion order, every query a linear scan ---------------------- */

#define REF_MAX 4096

typedef struct ref_item {
    uint64_t seq;
    double priority;
    int64_t version;
    uint32_t times;
    int32_t length;
} ref_item;

typedef struct ref {
    ref_item it[REF_MAX];
    int n;
    int64_t max_size;
    int remover, selector;
    int64_t max_times;
    double alpha, max_priority;
    int has_priority;
    uint64_t next_seq;
    int64_t floor;
    uint64_t removed[REF_MAX * 8]; /* seqs in removal order */
    int nremoved;
} ref;

static void ref_remove_at(ref *m, int k)
{
    m->removed[m->nremoved++] = m->it[k].seq;
    memmove(&m->it[k], &m->it[k + 1], (size_t)(m->n - k - 1) * sizeof m->it[0]);
    m->n--;
}

static int ref_find(const ref *m, uint64_t seq)
{
    for (int k = 0; k < m->n; k++)
        if (m->it[k].seq == seq)
            return k;
    return -1;
}

static int ref_victim(const ref *m)
{
    if (m->remover == GB_REMOVER_LIFO)
        return m->n - 1;
    if (m->remover == GB_REMOVER_LOWEST_PRIORITY) {
        int best = 0;
        for (int k = 1; k < m->n; k++)
            if (m->it[k].priority < m->it[best].priority)
                best = k; /* strict: ties keep the oldest */
        return best;
    }
    return 0;
}

/* Allocation reserves blocks: with no free block the remover evicts committed items now (items
 * still being written are never candidates). No pins are held in these sequences. */
static void ref_allocate(ref *m, int64_t capacity, int64_t n)
{
    while (capacity - m->n < n)
        ref_remove_at(m, ref_victim(m));
}

static void ref_insert(ref *m, double p, int64_t version, int32_t length)
{
    if (isnan(p))
        p = m->has_priority ? m->max_priority : 1.0;
    while (m->n >= m->max_size)
        ref_remove_at(m, ref_victim(m));
    m->it[m->n++] = (ref_item){++m->next_seq, p, version, 0, length};
    if (!m->has_priority || p > m->max_priority) {
        m->max_priority = p;
        m->has_priority = 1;
    }
    if (version < m->floor)
        ref_remove_at(m, m->n - 1);
}

static void ref_expire(ref *m, int64_t floor)
{
    if (floor <= m->floor)
        return;
    m->floor = floor;
    /* Removal order: by (version, seq), as the replay's heap pops them. */
    for (;;) {
        int best = -1;
        for (int k = 0; k < m->n; k++)
            if (m->it[k].version < floor &&
                (best < 0 || m->it[k].version < m->it[best].version))
                best = k;
        if (best < 0)
            break;
        ref_remove_at(m, best);
    }
}

static double ref_weight(const ref *m, int k)
{
    return m->alpha == 0 ? 1.0 : pow(m->it[k].priority, m->alpha);
}

/* Deterministic selectors: the expected order of seqs. */
static int ref_select_distinct(const ref *m, int n, uint64_t *out)
{
    int k = 0;
    if (m->selector == GB_SELECTOR_FIFO)
        for (; k < n && k < m->n; k++)
            out[k] = m->it[k].seq;
    else if (m->selector == GB_SELECTOR_LIFO)
        for (; k < n && k < m->n; k++)
            out[k] = m->it[m->n - 1 - k].seq;
    else { /* top-k: selection sort by (priority desc, seq asc) */
        static uint8_t used[REF_MAX];
        memset(used, 0, sizeof used);
        for (; k < n && k < m->n; k++) {
            int best = -1;
            for (int j = 0; j < m->n; j++)
                if (!used[j] && (best < 0 || m->it[j].priority > m->it[best].priority))
                    best = j;
            used[best] = 1;
            out[k] = m->it[best].seq;
        }
    }
    return k;
}

/* Counts one draw of seq (after the replay made it); applies max_times_sampled. */
static void ref_count_draw(ref *m, uint64_t seq)
{
    int k = ref_find(m, seq);
    if (k < 0)
        return;
    m->it[k].times++;
    if (m->max_times > 0 && m->it[k].times >= (uint32_t)m->max_times)
        ref_remove_at(m, k);
}

/* ---- comparison ---------------------------------------------------------------------------- */

static int compare(gb_replay *r, const ref *m, const char *where)
{
    gb_replay_status st;
    gb_replay_status_view(r, &st);
    int ok = st.size == m->n;
    CHECK_MSG(ok, "%s: size %lld, reference %d", where, (long long)st.size, m->n);
    if (!ok)
        return 0;
    /* Walk the commit-ordered list: same seqs in the same order, same fields. */
    int k = 0;
    for (int64_t i = st.oldest; i >= 0; i = st.next[i], k++) {
        const ref_item *it = &m->it[k];
        if (st.item[i].seq != it->seq || st.priority[i] != it->priority ||
            st.policy_version[i] != it->version || st.item[i].times_sampled != it->times ||
            st.length[i] != it->length || st.state[i] != GB_ITEM_COMMITTED) {
            CHECK_MSG(0, "%s: item %d: seq %llu/%llu priority %g/%g version %lld/%lld times "
                      "%u/%u", where, k, (unsigned long long)st.item[i].seq,
                      (unsigned long long)it->seq, st.priority[i], it->priority,
                      (long long)st.policy_version[i], (long long)it->version,
                      st.item[i].times_sampled, it->times);
            return 0;
        }
        uint64_t id = *(uint64_t *)gb_replay_block(r, 2, i);
        if (id != it->seq * 31) {
            CHECK_MSG(0, "%s: block %lld holds id %llu, want %llu", where, (long long)i,
                      (unsigned long long)id, (unsigned long long)it->seq * 31);
            return 0;
        }
    }
    CHECK_EQ_INT(k, m->n);
    return k == m->n;
}

/* ---- random operation sequences ------------------------------------------------------------- */

static void run_sequence(int remover, int selector, int64_t max_times, int64_t capacity,
                         int64_t max_size, uint64_t seed, int steps)
{
    gb_error err = {0};
    gb_replay_options o;
    util_options(&o, capacity, 4);
    o.max_size = max_size;
    o.remover = remover;
    o.selector = selector;
    o.max_times_sampled = max_times;
    o.alpha = 0.7;
    o.seed = seed;
    o.timeout_s = 0;
    gb_replay *r;
    CHECK_OK(gb_replay_create(&o, &r, &err));
    static ref m;
    memset(&m, 0, sizeof m);
    m.max_size = max_size ? max_size : capacity;
    m.remover = remover;
    m.selector = selector;
    m.max_times = max_times;
    m.alpha = 0.7;
    m.floor = GB_REPLAY_NO_MIN_VERSION;
    gb_rng rng;
    gb_rng_seed(&rng, seed * 7 + 1);
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, 64, &err));
    int64_t version = 0;
    uint64_t seq_expected = 0;
    char where[128];
    for (int step = 0; step < steps; step++) {
        int op = (int)gb_rng_below(&rng, 10);
        snprintf(where, sizeof where, "remover %d selector %d seed %llu step %d op %d", remover,
                 selector, (unsigned long long)seed, step, op);
        if (op < 4) { /* batched insert of 1..5 items */
            int64_t n = 1 + (int64_t)gb_rng_below(&rng, 5), idx[5];
            double pr[5];
            int32_t len[5];
            int64_t ver[5];
            if (n > m.max_size)
                n = m.max_size;
            if (gb_replay_allocate(r, n, idx, 0, &err) != 0) {
                CHECK_MSG(0, "%s: allocate: %s", where, err.msg);
                break;
            }
            for (int64_t k = 0; k < n; k++) {
                int64_t v = version - 3 + (int64_t)gb_rng_below(&rng, 5); /* out of order */
                int kind = (int)gb_rng_below(&rng, 4);
                pr[k] = kind == 0 ? NAN : kind == 1 ? 0.0 : (double)gb_rng_below(&rng, 8) * 0.5;
                len[k] = 1 + (int32_t)gb_rng_below(&rng, 4);
                ver[k] = v;
                util_write(r, idx[k], (++seq_expected) * 31, 4);
            }
            CHECK_OK(gb_replay_commit(r, n, idx, pr, len, ver, &err));
            ref_allocate(&m, capacity, n);
            for (int64_t k = 0; k < n; k++)
                ref_insert(&m, pr[k], ver[k], len[k]);
            version++;
        } else if (op < 7) { /* sample */
            int64_t batch = 1 + (int64_t)gb_rng_below(&rng, 8);
            gb_replay_request q = gb_replay_request_default(batch);
            q.timeout_s = 0;
            int rc = gb_replay_sample(r, &q, &s, &err);
            if (m.n == 0) {
                CHECK_MSG(rc == GB_ETIMEOUT, "%s: sample of empty store gave %d", where, rc);
                continue;
            }
            CHECK_MSG(rc == 0, "%s: sample: %s", where, err.msg);
            if (rc)
                break;
            CHECK_EQ_INT(s.size, m.n);
            if (selector == GB_SELECTOR_FIFO || selector == GB_SELECTOR_LIFO ||
                selector == GB_SELECTOR_TOPK) {
                uint64_t want[64];
                int nw = ref_select_distinct(&m, (int)batch, want);
                CHECK_EQ_INT(s.n, nw);
                for (int k = 0; k < nw && k < s.n; k++)
                    CHECK_MSG(s.key[k] == want[k], "%s: draw %d seq %llu, reference %llu", where,
                              k, (unsigned long long)s.key[k], (unsigned long long)want[k]);
                for (int k = 0; k < s.n; k++)
                    ref_count_draw(&m, s.key[k]);
            } else {
                /* Each draw: a live item, with the reference's probability at that moment. */
                for (int k = 0; k < s.n; k++) {
                    int j = ref_find(&m, s.key[k]);
                    CHECK_MSG(j >= 0, "%s: draw %d seq %llu is not live", where, k,
                              (unsigned long long)s.key[k]);
                    if (j < 0)
                        break;
                    double want = 1.0 / m.n;
                    if (selector == GB_SELECTOR_WEIGHTED) {
                        double total = 0;
                        for (int i = 0; i < m.n; i++)
                            total += ref_weight(&m, i);
                        want = total > 0 ? ref_weight(&m, j) / total : 1.0 / m.n;
                    }
                    CHECK_MSG(fabs(s.prob[k] - want) <= 1e-12 * want + 1e-300,
                              "%s: draw %d prob %.17g, reference %.17g", where, k, s.prob[k],
                              want);
                    if (max_times > 0) /* sequential: later draws see the removal */
                        ref_count_draw(&m, s.key[k]);
                }
                if (max_times == 0)
                    for (int k = 0; k < s.n; k++)
                        ref_count_draw(&m, s.key[k]);
            }
            /* Collect and check content. */
            static uint64_t ids[64];
            gb_replay_dst d = {2, ids, sizeof ids};
            CHECK_OK(gb_replay_collect(r, &s, &d, 1, NULL, &err));
            for (int k = 0; k < s.n; k++)
                CHECK(ids[k] == s.key[k] * 31);
            /* Update some priorities, sometimes after their item left. */
            if (gb_rng_below(&rng, 2)) {
                double p[64];
                for (int k = 0; k < s.n; k++)
                    p[k] = (double)gb_rng_below(&rng, 10) * 0.25;
                int64_t skipped = 0, want_skip = 0;
                CHECK_OK(gb_replay_update_priorities(r, s.n, s.index, s.key, p, &skipped, &err));
                for (int k = 0; k < s.n; k++) {
                    int j = ref_find(&m, s.key[k]);
                    if (j < 0)
                        want_skip++;
                    else {
                        m.it[j].priority = p[k];
                        if (p[k] > m.max_priority)
                            m.max_priority = p[k];
                    }
                }
                CHECK_EQ_INT(skipped, want_skip);
            }
            gb_replay_release(r, &s);
        } else if (op < 8) { /* staleness floor */
            int64_t floor = version - 6 + (int64_t)gb_rng_below(&rng, 4);
            gb_replay_expire(r, floor);
            ref_expire(&m, floor);
        } else { /* priority updates by index of random live items (no keys) */
            gb_replay_status st;
            gb_replay_status_view(r, &st);
            if (st.size == 0)
                continue;
            int64_t idx[4];
            double p[4];
            int n = 1 + (int)gb_rng_below(&rng, 4);
            for (int k = 0; k < n; k++) {
                idx[k] = st.live[gb_rng_below(&rng, (uint64_t)st.size)];
                p[k] = (double)gb_rng_below(&rng, 20) * 0.125;
            }
            /* Read the seqs first: update changes nothing else. */
            uint64_t seqs[4];
            for (int k = 0; k < n; k++)
                seqs[k] = st.item[idx[k]].seq;
            CHECK_OK(gb_replay_update_priorities(r, n, idx, NULL, p, NULL, &err));
            for (int k = 0; k < n; k++) {
                int j = ref_find(&m, seqs[k]);
                m.it[j].priority = p[k];
                if (p[k] > m.max_priority)
                    m.max_priority = p[k];
            }
        }
        if (!compare(r, &m, where))
            break;
    }
    gb_replay_stats stats;
    gb_replay_stats_get(r, &stats);
    CHECK(stats.inserts == m.next_seq);
    CHECK((uint64_t)stats.size + stats.evicted + stats.sampled_out + stats.expired ==
          stats.inserts);
    CHECK_EQ_INT(stats.retired_pinned, 0);
    CHECK_EQ_INT(stats.free_blocks + stats.size, capacity);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
}

static void test_random_sequences(void)
{
    const int removers[] = {GB_REMOVER_FIFO, GB_REMOVER_LIFO, GB_REMOVER_LOWEST_PRIORITY,
                            GB_REMOVER_MAX_TIMES_SAMPLED};
    const int selectors[] = {GB_SELECTOR_UNIFORM, GB_SELECTOR_WEIGHTED, GB_SELECTOR_FIFO,
                             GB_SELECTOR_LIFO, GB_SELECTOR_TOPK};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 5; b++)
            for (uint64_t seed = 1; seed <= 3; seed++) {
                int64_t max_times = removers[a] == GB_REMOVER_MAX_TIMES_SAMPLED ? 2
                                    : seed == 2                                 ? 3
                                                                                : 0;
                int64_t cap = seed == 3 ? 64 : 24;
                int64_t max_size = seed == 1 ? 0 : 16;
                run_sequence(removers[a], selectors[b], max_times, cap, max_size, seed, 600);
            }
}

/* The eviction order of each remover, spelled out. */
static void test_eviction_order(void)
{
    gb_error err = {0};
    for (int remover = 0; remover < 3; remover++) {
        gb_replay_options o;
        util_options(&o, 4, 1);
        o.remover = remover;
        gb_replay *r;
        CHECK_OK(gb_replay_create(&o, &r, &err));
        double pr[6] = {3, 1, 2, 5, 0.5, 4};
        for (int k = 0; k < 6; k++) {
            int64_t i;
            CHECK_OK(gb_replay_allocate(r, 1, &i, 0, &err));
            util_write(r, i, (uint64_t)(k + 1) * 31, 1);
            CHECK_OK(gb_replay_commit(r, 1, &i, &pr[k], NULL, NULL, &err));
        }
        gb_replay_status st;
        gb_replay_status_view(r, &st);
        uint64_t seqs[4];
        int n = 0;
        for (int64_t i = st.oldest; i >= 0; i = st.next[i])
            seqs[n++] = st.item[i].seq;
        CHECK_EQ_INT(n, 4);
        if (remover == GB_REMOVER_FIFO) /* items 1, 2 left */
            CHECK(seqs[0] == 3 && seqs[1] == 4 && seqs[2] == 5 && seqs[3] == 6);
        else if (remover == GB_REMOVER_LIFO) /* 4 left for 5, then 5 for 6 */
            CHECK(seqs[0] == 1 && seqs[1] == 2 && seqs[2] == 3 && seqs[3] == 6);
        else /* lowest: 1 (p=1) for 5, then 5 (p=0.5) for 6 */
            CHECK(seqs[0] == 1 && seqs[1] == 3 && seqs[2] == 4 && seqs[3] == 6);
        gb_replay_free(r);
    }
}

int main(void)
{
    TEST_RUN(test_eviction_order);
    TEST_RUN(test_random_sequences);
    return test_main_result();
}
