/* tests/replay/test_replay_selectors.c: per-request selectors (gb_replay_request.selector): a
 * replay with a primary selector and extra ones. Every available selector's draws are checked
 * against a reference model of the live items, kept here independently of the replay: uniform
 * and weighted by chi-square over many draws plus the exact probability and importance weight of
 * every draw, FIFO / LIFO / top-k by their exact order. Checked after inserts with evictions,
 * priority updates, removals by the staleness floor and a checkpoint restore (into a replay with
 * the same and with other extra selectors); an unavailable selector is refused with the list;
 * max_times_sampled and the rate limiter hold whichever selector draws.
 * Usage: test_replay_selectors TMPDIR */
#include "replay/replay.h"
#include "test.h"
#include "util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP 48
#define MAX_SIZE 40
#define ALPHA 0.7
#define BETA 0.5
#define BATCH 256

static char tmpdir[512];

/* ---- the reference model: live items by block index ----------------------------------------- */

typedef struct model {
    int live[CAP];
    double prio[CAP];
    uint64_t order[CAP]; /* commit order (the replay's seq order) */
    int64_t version[CAP];
    uint64_t next;
    int size;
} model;

static int64_t model_oldest(const model *m)
{
    int64_t best = -1;
    for (int64_t i = 0; i < CAP; i++)
        if (m->live[i] && (best < 0 || m->order[i] < m->order[best]))
            best = i;
    return best;
}

static void model_remove(model *m, int64_t i)
{
    m->live[i] = 0;
    m->size--;
}

/* Inserts one item (priority p, policy version v) into both, evicting the oldest above
 * MAX_SIZE as the FIFO remover does. */
static void insert_one(gb_replay *r, model *m, double p, int64_t v)
{
    gb_error err = {0};
    int64_t i;
    CHECK_OK(gb_replay_allocate(r, 1, &i, 0, &err));
    util_write(r, i, m->next + 1, 1);
    CHECK_OK(gb_replay_commit(r, 1, &i, &p, NULL, &v, &err));
    if (m->size >= MAX_SIZE)
        model_remove(m, model_oldest(m));
    CHECK(!m->live[i]);
    m->live[i] = 1;
    m->prio[i] = p;
    m->order[i] = ++m->next;
    m->version[i] = v;
    m->size++;
}

static double weight_of(double p) { return p > 0 ? pow(p, ALPHA) : 0; }

/* Upper tail bound: chi-square with k degrees of freedom exceeds k + 5 sqrt(2k) + 10 with
 * probability far below 1e-6 (Wilson-Hilferty); with fixed seeds the test is deterministic. */
static double chi2_limit(int dof) { return dof + 5.0 * sqrt(2.0 * dof) + 10.0; }

/* Many draws with a random selector (uniform or weighted) requested by kind (or the primary,
 * kind = GB_REPLAY_SELECTOR_PRIMARY, which must then be `expect`). */
static void check_random(gb_replay *r, const model *m, int kind, int expect)
{
    gb_error err = {0};
    enum { ROUNDS = 300 };
    double w[CAP], total = 0;
    for (int i = 0; i < CAP; i++) {
        w[i] = !m->live[i] ? 0 : (expect == GB_SELECTOR_UNIFORM ? 1.0 : weight_of(m->prio[i]));
        total += w[i];
    }
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, BATCH, &err));
    gb_replay_request q = gb_replay_request_default(BATCH);
    q.selector = kind;
    static int64_t count[CAP];
    memset(count, 0, sizeof count);
    int bad_prob = 0, bad_weight = 0, bad_item = 0, bad_kind = 0, bad_data = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int rc = gb_replay_sample(r, &q, &s, &err);
        CHECK_MSG(rc == 0, "sample with selector %d: %s", kind, err.msg);
        if (rc)
            break;
        bad_kind += s.selector != expect || s.n != BATCH || s.size != m->size;
        double pmin = INFINITY;
        for (int64_t k = 0; k < s.n; k++)
            if (s.prob[k] < pmin)
                pmin = s.prob[k];
        for (int64_t k = 0; k < s.n; k++) {
            int64_t i = s.index[k];
            if (i < 0 || i >= CAP || !m->live[i] || w[i] == 0) {
                bad_item++;
                continue;
            }
            count[i]++;
            double want = w[i] / total;
            bad_prob += fabs(s.prob[k] - want) > 1e-12 * (1 + want);
            double iw = pow(pmin / s.prob[k], BETA);
            bad_weight += fabsf(s.weight[k] - (float)iw) > 1e-5f;
        }
        /* The selection's blocks hold the items the model says (collected by index). */
        if (round == 0) {
            static uint64_t ids[BATCH];
            gb_replay_dst dst = {2, ids, sizeof ids};
            CHECK_OK(gb_replay_collect(r, &s, &dst, 1, NULL, &err));
            for (int64_t k = 0; k < s.n; k++)
                bad_data += s.index[k] >= 0 && s.index[k] < CAP && ids[k] != m->order[s.index[k]];
        }
        gb_replay_release(r, &s);
    }
    CHECK_EQ_INT(bad_kind, 0);
    CHECK_EQ_INT(bad_item, 0);
    CHECK_EQ_INT(bad_prob, 0);
    CHECK_EQ_INT(bad_weight, 0);
    CHECK_EQ_INT(bad_data, 0);
    double chi2 = 0;
    int dof = -1;
    for (int i = 0; i < CAP; i++) {
        if (w[i] == 0)
            continue;
        double e = (double)ROUNDS * BATCH * w[i] / total;
        chi2 += (count[i] - e) * (count[i] - e) / e;
        dof++;
    }
    fprintf(stderr, "  %-8s (asked %2d): chi2 %.1f, %d dof (limit %.1f)\n",
            gb_replay_selector_name(expect), kind, chi2, dof, chi2_limit(dof));
    CHECK(chi2 < chi2_limit(dof));
    gb_replay_selection_free(&s);
}

static int before_fifo(const model *m, int64_t a, int64_t b) { return m->order[a] < m->order[b]; }
static int before_lifo(const model *m, int64_t a, int64_t b) { return m->order[a] > m->order[b]; }
static int before_topk(const model *m, int64_t a, int64_t b)
{
    return m->prio[a] > m->prio[b] || (m->prio[a] == m->prio[b] && m->order[a] < m->order[b]);
}

/* A deterministic selector: the first n live items in its order, each once, prob and weight 1. */
static void check_ordered(gb_replay *r, const model *m, int kind, int expect)
{
    gb_error err = {0};
    int (*before)(const model *, int64_t, int64_t) =
        expect == GB_SELECTOR_FIFO ? before_fifo
                                   : expect == GB_SELECTOR_LIFO ? before_lifo : before_topk;
    int64_t want[CAP];
    int n = 0;
    for (int64_t i = 0; i < CAP; i++) /* insertion sort by the selector's order */
        if (m->live[i]) {
            int at = n++;
            while (at > 0 && before(m, i, want[at - 1])) {
                want[at] = want[at - 1];
                at--;
            }
            want[at] = i;
        }
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, BATCH, &err));
    gb_replay_request q = gb_replay_request_default(12);
    q.selector = kind;
    for (int pass = 0; pass < 2; pass++) { /* a batch of 12, then more than the size */
        CHECK_OK(gb_replay_sample(r, &q, &s, &err));
        int64_t expect_n = q.batch < n ? q.batch : n;
        CHECK_EQ_INT(s.n, expect_n);
        CHECK_EQ_INT(s.selector, expect);
        int bad = 0;
        for (int64_t k = 0; k < s.n && k < expect_n; k++)
            bad += s.index[k] != want[k] || s.prob[k] != 1.0 || s.weight[k] != 1.0f;
        CHECK_MSG(bad == 0, "%s: %d entries differ from the reference order",
                  gb_replay_selector_name(expect), bad);
        gb_replay_release(r, &s);
        q.batch = BATCH;
    }
    gb_replay_selection_free(&s);
}

/* Every selector the replay should offer (mask) draws right; the others are refused. */
static void check_all(gb_replay *r, const model *m, unsigned mask, int primary)
{
    gb_error err = {0};
    CHECK_EQ_INT(gb_replay_selectors(r), mask);
    for (int kind = -1; kind < GB_REPLAY_SELECTORS; kind++) {
        int expect = kind < 0 ? primary : kind;
        if (!(mask & (1u << expect))) {
            gb_replay_selection s;
            CHECK_OK(gb_replay_selection_init(&s, 4, &err));
            gb_replay_request q = gb_replay_request_default(4);
            q.selector = kind;
            int rc = gb_replay_sample(r, &q, &s, &err);
            char have[96];
            gb_replay_selector_names(mask, ", ", have, sizeof have);
            CHECK_EQ_INT(rc, GB_EINVAL);
            CHECK_MSG(strstr(err.msg, have) && strstr(err.msg, gb_replay_selector_name(kind)),
                      "refusal of '%s' should name it and list '%s': %s",
                      gb_replay_selector_name(kind), have, err.msg);
            CHECK_EQ_INT(s.n, 0);
            CHECK(!s.pinned);
            gb_replay_selection_free(&s);
            continue;
        }
        if (expect == GB_SELECTOR_UNIFORM || expect == GB_SELECTOR_WEIGHTED)
            check_random(r, m, kind, expect);
        else
            check_ordered(r, m, kind, expect);
    }
}

static gb_replay *make(int primary, unsigned extra, uint64_t seed)
{
    gb_error err = {0};
    gb_replay_options o;
    util_options(&o, CAP, 1);
    o.max_size = MAX_SIZE;
    o.selector = (gb_selector_kind)primary;
    o.extra_selectors = extra;
    o.alpha = ALPHA;
    o.beta = BETA;
    o.seed = seed;
    o.timeout_s = 0;
    gb_replay *r = NULL;
    CHECK_OK(gb_replay_create(&o, &r, &err));
    return r;
}

static const unsigned FREE = 1u << GB_SELECTOR_UNIFORM | 1u << GB_SELECTOR_FIFO |
                             1u << GB_SELECTOR_LIFO;

/* One life of a replay: inserts (with evictions), priority updates, staleness removals; all
 * selectors checked after each phase; then a checkpoint restored into replays with the same and
 * with other extra selectors. */
static void scenario(int primary, unsigned extra, unsigned other_extra)
{
    gb_error err = {0};
    unsigned mask = FREE | 1u << primary | extra;
    fprintf(stderr, " primary %s, extra 0x%x\n", gb_replay_selector_name(primary), extra);
    gb_replay *r = make(primary, extra, 7 + (uint64_t)primary);
    if (!r)
        return;
    model m;
    memset(&m, 0, sizeof m);
    /* 60 inserts into room for 40: the 20 oldest are evicted. Priorities repeat so that top-k
     * has ties to break; some are zero (never drawn by weighted). */
    for (int k = 0; k < 60; k++)
        insert_one(r, &m, k % 9 == 4 ? 0.0 : 0.25 + (double)((k * 13) % 11), k % 4);
    CHECK_EQ_INT(m.size, MAX_SIZE);
    check_all(r, &m, mask, primary);

    /* Priority updates of every third live item (keys from a FIFO sample: current items). */
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, CAP, &err));
    gb_replay_request q = gb_replay_request_default(CAP);
    q.selector = GB_SELECTOR_FIFO;
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    int64_t idx[CAP];
    uint64_t key[CAP];
    double np[CAP];
    int nu = 0;
    for (int64_t k = 0; k < s.n; k += 3, nu++) {
        idx[nu] = s.index[k];
        key[nu] = s.key[k];
        np[nu] = nu % 5 == 0 ? 0.0 : (nu == 3 ? 100.0 : 0.5 + nu);
    }
    gb_replay_release(r, &s);
    int64_t skipped = -1;
    CHECK_OK(gb_replay_update_priorities(r, nu, idx, key, np, &skipped, &err));
    CHECK_EQ_INT(skipped, 0);
    for (int k = 0; k < nu; k++)
        m.prio[idx[k]] = np[k];
    check_all(r, &m, mask, primary);

    /* Staleness floor raised by a request with an extra (or the primary) selector: items of
     * policy version 0 leave every selector before the draw. */
    gb_replay_request e = gb_replay_request_default(4);
    e.min_policy_version = 1;
    e.selector = extra & (1u << GB_SELECTOR_WEIGHTED) ? GB_SELECTOR_WEIGHTED : GB_SELECTOR_LIFO;
    CHECK_OK(gb_replay_sample(r, &e, &s, &err));
    gb_replay_release(r, &s);
    for (int64_t i = 0; i < CAP; i++)
        if (m.live[i] && m.version[i] < 1)
            model_remove(&m, i);
    CHECK(m.size < MAX_SIZE);
    check_all(r, &m, mask, primary);
    /* A few more inserts after the removals reuse freed blocks. */
    for (int k = 0; k < 6; k++)
        insert_one(r, &m, 1.5 + k, 2);
    check_all(r, &m, mask, primary);

    /* Checkpoint; restore into the same configuration and into one with other extras. */
    char path[600];
    snprintf(path, sizeof path, "%s/selectors_%d.ckpt", tmpdir, primary);
    CHECK_OK(gb_replay_checkpoint(r, path, &err));
    gb_replay *same = make(primary, extra, 99), *other = make(primary, other_extra, 99);
    if (same) {
        CHECK_OK(gb_replay_restore(same, path, &err));
        check_all(same, &m, mask, primary);
    }
    if (other) {
        CHECK_OK(gb_replay_restore(other, path, &err));
        check_all(other, &m, FREE | 1u << primary | other_extra, primary);
    }
    /* The primary selector must match the file's. */
    int another = primary == GB_SELECTOR_UNIFORM ? GB_SELECTOR_LIFO : GB_SELECTOR_UNIFORM;
    gb_replay *wrong = make(another, extra | 1u << primary, 99);
    if (wrong) {
        CHECK_EQ_INT(gb_replay_restore(wrong, path, &err), GB_EINVAL);
        CHECK(strstr(err.msg, "selector") != NULL);
    }
    gb_replay_free(wrong);
    gb_replay_free(same);
    gb_replay_free(other);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
}

static void test_uniform_primary(void)
{
    scenario(GB_SELECTOR_UNIFORM, 1u << GB_SELECTOR_WEIGHTED | 1u << GB_SELECTOR_TOPK, 0);
}

static void test_weighted_primary(void)
{
    scenario(GB_SELECTOR_WEIGHTED, 1u << GB_SELECTOR_TOPK, 0);
}

static void test_topk_primary(void)
{
    scenario(GB_SELECTOR_TOPK, 1u << GB_SELECTOR_WEIGHTED, 0);
}

static void test_lifo_primary_extras_added_on_restore(void)
{
    /* Extra selectors that the checkpointed replay did not have are built from its items. */
    scenario(GB_SELECTOR_LIFO, 0, 1u << GB_SELECTOR_WEIGHTED | 1u << GB_SELECTOR_TOPK);
}

/* Names and the options' checks. */
static void test_names_and_validation(void)
{
    gb_error err = {0};
    int kind = 99;
    CHECK_OK(gb_replay_selector_parse("weighted", &kind, &err));
    CHECK_EQ_INT(kind, GB_SELECTOR_WEIGHTED);
    CHECK_OK(gb_replay_selector_parse("topk", &kind, &err));
    CHECK_EQ_INT(kind, GB_SELECTOR_TOPK);
    CHECK_OK(gb_replay_selector_parse("default", &kind, &err));
    CHECK_EQ_INT(kind, GB_REPLAY_SELECTOR_PRIMARY);
    CHECK_OK(gb_replay_selector_parse(NULL, &kind, &err));
    CHECK_EQ_INT(kind, GB_REPLAY_SELECTOR_PRIMARY);
    CHECK_EQ_INT(gb_replay_selector_parse("prioritized", &kind, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "prioritized") && strstr(err.msg, "weighted"));
    char buf[64];
    CHECK_EQ_INT(gb_replay_selector_names(0x1f, ",", buf, sizeof buf),
                 strlen("uniform,weighted,fifo,lifo,topk"));
    CHECK(strcmp(buf, "uniform,weighted,fifo,lifo,topk") == 0);
    CHECK_EQ_INT(gb_replay_selector_names(0x12, ", ", buf, 8), strlen("weighted, topk"));
    CHECK(strcmp(buf, "weighte") == 0); /* cut, terminated */
    CHECK(strcmp(gb_replay_selector_name(-1), "?") == 0);

    gb_replay_options o;
    util_options(&o, 16, 1);
    o.extra_selectors = 1u << GB_REPLAY_SELECTORS;
    CHECK_EQ_INT(gb_replay_validate(&o, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "extra_selectors") != NULL);
    o.extra_selectors = 0;
    o.selector = (gb_selector_kind)GB_REPLAY_SELECTORS;
    CHECK_EQ_INT(gb_replay_validate(&o, &err), GB_EINVAL);

    /* Without extras: uniform, FIFO, LIFO and the primary; a bad kind names the list. */
    gb_replay *r = make(GB_SELECTOR_UNIFORM, 0, 1);
    if (!r)
        return;
    CHECK_EQ_INT(gb_replay_selectors(r), FREE);
    model m;
    memset(&m, 0, sizeof m);
    for (int k = 0; k < 5; k++)
        insert_one(r, &m, 1.0 + k, 0);
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, 8, &err));
    gb_replay_request q = gb_replay_request_default(8);
    q.selector = 17;
    CHECK_EQ_INT(gb_replay_sample(r, &q, &s, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "unknown selector 17") && strstr(err.msg, "uniform, fifo, lifo"));
    q.selector = GB_SELECTOR_WEIGHTED;
    CHECK_EQ_INT(gb_replay_sample(r, &q, &s, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "'weighted'") && strstr(err.msg, "uniform, fifo, lifo"));
    gb_replay_selection_free(&s);
    gb_replay_free(r);
}

/* max_times_sampled and the rate limiter apply to draws of an extra selector as to the
 * primary's: an item leaves every selector after its last allowed draw. */
static void test_limits_with_extra(void)
{
    gb_error err = {0};
    gb_replay_options o;
    util_options(&o, 32, 1);
    o.selector = GB_SELECTOR_UNIFORM;
    o.extra_selectors = 1u << GB_SELECTOR_WEIGHTED | 1u << GB_SELECTOR_TOPK;
    o.max_times_sampled = 3;
    o.min_size = 4;
    o.timeout_s = 0;
    gb_replay *r = NULL;
    CHECK_OK(gb_replay_create(&o, &r, &err));
    if (!r)
        return;
    model m;
    memset(&m, 0, sizeof m);
    for (int k = 0; k < 3; k++)
        insert_one(r, &m, 1.0 + k, 0);
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, 64, &err));
    gb_replay_request q = gb_replay_request_default(2);
    q.selector = GB_SELECTOR_WEIGHTED;
    CHECK_EQ_INT(gb_replay_sample(r, &q, &s, &err), GB_ETIMEOUT); /* 3 < min_size 4 */
    CHECK(strstr(err.msg, "min_size") != NULL);
    for (int k = 3; k < 20; k++)
        insert_one(r, &m, 1.0 + k, 0);
    /* Draw with weighted and top-k in turn until the store runs dry: 20 items x 3 draws. */
    int draws[32] = {0};
    int64_t total = 0;
    for (int round = 0; round < 100; round++) {
        q.selector = round % 2 ? GB_SELECTOR_TOPK : GB_SELECTOR_WEIGHTED;
        q.batch = 7;
        int rc = gb_replay_sample(r, &q, &s, &err);
        if (rc == GB_ETIMEOUT) /* below min_size now */
            break;
        CHECK_OK(rc);
        for (int64_t k = 0; k < s.n; k++)
            draws[s.index[k]]++;
        total += s.n;
        gb_replay_release(r, &s);
    }
    int over = 0;
    for (int i = 0; i < 32; i++)
        over += draws[i] > 3;
    CHECK_EQ_INT(over, 0);
    gb_replay_stats st;
    gb_replay_stats_get(r, &st);
    CHECK(st.size < 4);
    CHECK_EQ_INT((int64_t)st.sampled_out, 20 - st.size);
    CHECK_EQ_INT((int64_t)st.samples, total);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
}

int main(int argc, char **argv)
{
    snprintf(tmpdir, sizeof tmpdir, "%s", argc > 1 ? argv[1] : "/tmp");
    TEST_RUN(test_names_and_validation);
    TEST_RUN(test_uniform_primary);
    TEST_RUN(test_weighted_primary);
    TEST_RUN(test_topk_primary);
    TEST_RUN(test_lifo_primary_extras_added_on_restore);
    TEST_RUN(test_limits_with_extra);
    return test_main_result();
}
