/* tests/replay/test_replay_ratelimit.c: the rate limiter: min_size, samples-per-insert with an
 * error buffer (Reverb semantics, checked against a direct evaluation of the inequalities),
 * blocking and waking across threads, timeouts with clear messages, run-time changes, settings
 * that can never make progress, close(), and remover none (inserts wait for room). Never asserts
 * on durations beyond "it returned". */
#include "replay/replay.h"
#include "runtime/base/clock.h"
#include "test.h"
#include "util.h"

#include <pthread.h>
#include <string.h>

static gb_replay *make(int64_t capacity, int64_t min_size, double spi, double eb)
{
    gb_error err = {0};
    gb_replay_options o;
    util_options(&o, capacity, 1);
    o.min_size = min_size;
    o.samples_per_insert = spi;
    o.error_buffer = eb;
    o.timeout_s = 0;
    gb_replay *r = NULL;
    CHECK_OK(gb_replay_create(&o, &r, &err));
    return r;
}

static int insert1(gb_replay *r, double timeout, gb_error *err)
{
    int64_t i;
    int rc = gb_replay_allocate(r, 1, &i, timeout, err);
    if (rc == 0)
        rc = gb_replay_commit(r, 1, &i, NULL, NULL, NULL, err);
    return rc;
}

static void test_min_size(void)
{
    gb_error err = {0};
    gb_replay *r = make(100, 3, 0, 0);
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, 4, &err));
    gb_replay_request q = gb_replay_request_default(1);
    q.timeout_s = 0;
    for (int k = 0; k < 2; k++) {
        CHECK_OK(insert1(r, 0, &err));
        CHECK(gb_replay_sample(r, &q, &s, &err) == GB_ETIMEOUT);
        CHECK(strstr(err.msg, "min_size 3") != NULL);
    }
    CHECK_OK(insert1(r, 0, &err));
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    gb_replay_release(r, &s);
    /* Raising min_size at run time blocks sampling again; lowering it releases. */
    CHECK_OK(gb_replay_set_rate_limit(r, 10, 0, 0, &err));
    CHECK(gb_replay_sample(r, &q, &s, &err) == GB_ETIMEOUT);
    CHECK(gb_replay_set_rate_limit(r, 0, 0, 0, &err) == GB_EINVAL);
    CHECK(gb_replay_set_rate_limit(r, 1000, 0, 0, &err) == GB_EINVAL); /* > max_size */
    CHECK(gb_replay_set_rate_limit(r, 2, 3, 1, &err) == GB_EINVAL);    /* no progress */
    CHECK_OK(gb_replay_set_rate_limit(r, 2, 0, 0, &err));
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    gb_replay_release(r, &s);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
}

/* Drives a replay with spi and error buffer through a random mix of insert and sample attempts
 * (timeout 0) and checks each outcome against the inequalities evaluated directly. */
static void test_ratio_semantics(void)
{
    gb_error err = {0};
    const double spis[] = {0.5, 1, 4};
    const double ebs[] = {1, 2, 6};
    for (int c = 0; c < 3; c++) {
        double spi = spis[c], eb = ebs[c];
        int64_t min_size = 5;
        gb_replay *r = make(1000, min_size, spi, eb);
        gb_replay_selection s;
        CHECK_OK(gb_replay_selection_init(&s, 2, &err));
        gb_rng rng;
        gb_rng_seed(&rng, (uint64_t)c);
        double inserts = 0, samples = 0, min_diff = spi * min_size - eb,
               max_diff = spi * min_size + eb;
        int blocked_inserts = 0, blocked_samples = 0;
        for (int step = 0; step < 3000; step++) {
            if (gb_rng_below(&rng, 2)) {
                int want = inserts + 1 <= min_size || (inserts + 1) * spi - samples <= max_diff;
                int rc = insert1(r, 0, &err);
                CHECK_MSG((rc == 0) == want, "spi %g step %d insert rc %d want %d: %s", spi, step,
                          rc, want, err.msg);
                if (rc == 0)
                    inserts++;
                else {
                    blocked_inserts++;
                    CHECK(rc == GB_ETIMEOUT && strstr(err.msg, "rate limiter") != NULL);
                }
            } else {
                int64_t n = 1 + (int64_t)gb_rng_below(&rng, 2);
                gb_replay_request q = gb_replay_request_default(n);
                q.timeout_s = 0;
                int want = inserts >= min_size && inserts * spi - samples - (double)n >= min_diff;
                if (2 * eb < spi + (double)n) {
                    CHECK(gb_replay_sample(r, &q, &s, &err) == GB_EINVAL);
                    continue;
                }
                int rc = gb_replay_sample(r, &q, &s, &err);
                CHECK_MSG((rc == 0) == want, "spi %g step %d sample rc %d want %d: %s", spi, step,
                          rc, want, err.msg);
                if (rc == 0) {
                    samples += (double)s.n;
                    gb_replay_release(r, &s);
                } else {
                    blocked_samples++;
                }
            }
        }
        CHECK(blocked_inserts > 0 && blocked_samples > 0);
        gb_replay_stats st;
        gb_replay_stats_get(r, &st);
        CHECK(st.inserts == (uint64_t)inserts && st.samples == (uint64_t)samples);
        gb_replay_selection_free(&s);
        gb_replay_free(r);
    }
}

typedef struct waiter {
    gb_replay *r;
    int rc;
    int sample; /* 1: sample, 0: insert */
    double timeout;
    gb_error err;
} waiter;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    if (w->sample) {
        gb_replay_selection s;
        gb_replay_selection_init(&s, 1, &w->err);
        gb_replay_request q = gb_replay_request_default(1);
        q.timeout_s = w->timeout;
        w->rc = gb_replay_sample(w->r, &q, &s, &w->err);
        if (w->rc == 0)
            gb_replay_release(w->r, &s);
        gb_replay_selection_free(&s);
    } else {
        w->rc = insert1(w->r, w->timeout, &w->err);
    }
    return NULL;
}

/* Blocking calls of one kind that have had to wait so far (a waiter counts itself before it
 * sleeps, under the replay's lock: once this grows, a wake-up cannot be missed). */
static uint64_t waits(gb_replay *r, int sample)
{
    gb_replay_stats st;
    gb_replay_stats_get(r, &st);
    return sample ? st.sample_waits : st.insert_waits;
}

static void test_blocking(void)
{
    gb_error err = {0};
    /* A sampler blocked on min_size wakes when the insert arrives. */
    gb_replay *r = make(10, 1, 1, 2);
    waiter w = {r, 99, 1, 30.0, {0}};
    pthread_t t;
    uint64_t w0_w = waits(r, 1);
    CHECK(pthread_create(&t, NULL, wait_thread, &w) == 0);
    TEST_WAIT_UNTIL(waits(r, 1) > w0_w, 10000); /* it is blocked */
    CHECK_OK(insert1(r, 0, &err));
    pthread_join(t, NULL);
    CHECK_MSG(w.rc == 0, "%s", w.err.msg);
    /* An inserter blocked by the ratio wakes when a sample is taken. spi 1, eb 2, min 1:
     * inserts allowed while inserts + 1 - samples <= 3. */
    CHECK_OK(insert1(r, 0, &err));
    CHECK_OK(insert1(r, 0, &err)); /* inserts 3, samples 1: diff 2 */
    CHECK_OK(insert1(r, 0, &err)); /* diff 3 */
    CHECK(insert1(r, 0, &err) == GB_ETIMEOUT);
    waiter wi = {r, 99, 0, 30.0, {0}};
    uint64_t w0_wi = waits(r, 0);
    CHECK(pthread_create(&t, NULL, wait_thread, &wi) == 0);
    TEST_WAIT_UNTIL(waits(r, 0) > w0_wi, 10000); /* it is blocked */
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, 1, &err));
    gb_replay_request q = gb_replay_request_default(1);
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    gb_replay_release(r, &s);
    pthread_join(t, NULL);
    CHECK_MSG(wi.rc == 0, "%s", wi.err.msg);
    /* A timed wait that nothing satisfies ends with GB_ETIMEOUT and says why. */
    waiter wt = {r, 99, 0, 0.05, {0}};
    wait_thread(&wt);
    CHECK(wt.rc == GB_ETIMEOUT && strstr(wt.err.msg, "timed out after 0.050 s") != NULL);
    /* Changing the limiter at run time wakes the blocked inserter. */
    waiter wc = {r, 99, 0, 30.0, {0}};
    uint64_t w0_wc = waits(r, 0);
    CHECK(pthread_create(&t, NULL, wait_thread, &wc) == 0);
    TEST_WAIT_UNTIL(waits(r, 0) > w0_wc, 10000); /* it is blocked */
    CHECK_OK(gb_replay_set_rate_limit(r, 1, 0, 0, &err));
    pthread_join(t, NULL);
    CHECK_MSG(wc.rc == 0, "%s", wc.err.msg);
    /* close() wakes a blocked sampler with GB_ECLOSED. */
    CHECK_OK(gb_replay_set_rate_limit(r, 10, 0, 0, &err));
    waiter wz = {r, 99, 1, 30.0, {0}};
    uint64_t w0_wz = waits(r, 1);
    CHECK(pthread_create(&t, NULL, wait_thread, &wz) == 0);
    TEST_WAIT_UNTIL(waits(r, 1) > w0_wz, 10000); /* it is blocked */
    gb_replay_close(r);
    pthread_join(t, NULL);
    CHECK(wz.rc == GB_ECLOSED);
    CHECK(insert1(r, 1.0, &err) == GB_ECLOSED);
    gb_replay_stats st;
    gb_replay_stats_get(r, &st);
    CHECK(st.insert_waits >= 2 && st.sample_waits >= 2);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
}

/* Remover none: a full store evicts nothing; inserts wait until items leave by sampling
 * (max_times_sampled) or below the staleness floor, and max_size bounds committed plus written
 * items. An inserter blocked on the full store wakes when a sample makes room. */
static void test_remover_none(void)
{
    gb_error err = {0};
    gb_replay_options o;
    util_options(&o, 8, 1);
    o.remover = GB_REMOVER_NONE;
    o.selector = GB_SELECTOR_FIFO;
    o.timeout_s = 0;
    CHECK(gb_replay_validate(&o, &err) == GB_EINVAL); /* nothing would ever empty it */
    CHECK(strstr(err.msg, "max_times_sampled") != NULL);
    o.max_times_sampled = 1;
    o.max_size = 4;
    gb_replay *r = NULL;
    CHECK_OK(gb_replay_create(&o, &r, &err));
    int64_t idx[4];
    CHECK_OK(gb_replay_allocate(r, 3, idx, 0, &err));
    /* three being written and one more would fit, two would not: all or nothing */
    CHECK(gb_replay_allocate(r, 2, &idx[3], 0, &err) == GB_ETIMEOUT);
    CHECK(strstr(err.msg, "full") != NULL);
    int64_t version[3] = {0, 0, 1};
    CHECK_OK(gb_replay_commit(r, 3, idx, NULL, NULL, version, &err));
    CHECK_OK(insert1(r, 0, &err)); /* the fourth: version 0 */
    CHECK(insert1(r, 0, &err) == GB_ETIMEOUT);
    gb_replay_stats st;
    gb_replay_stats_get(r, &st);
    CHECK(st.size == 4 && st.evicted == 0 && st.free_blocks == 4);
    /* A sample takes the oldest out (sampled once): room for one, even while still pinned. */
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, 2, &err));
    gb_replay_request q = gb_replay_request_default(1);
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    CHECK_OK(insert1(r, 0, &err));
    CHECK(insert1(r, 0, &err) == GB_ETIMEOUT);
    gb_replay_release(r, &s);
    /* Raising the staleness floor removes the version-0 items: room for three. */
    q.min_policy_version = 1;
    CHECK_OK(gb_replay_sample(r, &q, &s, &err)); /* the version-1 item */
    gb_replay_release(r, &s);
    gb_replay_stats_get(r, &st);
    CHECK(st.size == 0 && st.expired == 3 && st.evicted == 0);
    int64_t v1[4] = {1, 1, 1, 1}; /* at the floor: kept */
    CHECK_OK(gb_replay_allocate(r, 4, idx, 0, &err));
    CHECK_OK(gb_replay_commit(r, 4, idx, NULL, NULL, v1, &err));
    CHECK(insert1(r, 0, &err) == GB_ETIMEOUT);
    /* A blocked inserter wakes when a sample makes room (its version-0 item then falls below
     * the floor at commit: counted as expired, never selectable). */
    waiter wi = {r, 99, 0, 30.0, {0}};
    uint64_t w0 = waits(r, 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, wait_thread, &wi) == 0);
    TEST_WAIT_UNTIL(waits(r, 0) > w0, 10000); /* it is blocked */
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    gb_replay_release(r, &s);
    pthread_join(t, NULL);
    CHECK_MSG(wi.rc == 0, "%s", wi.err.msg);
    gb_replay_stats_get(r, &st);
    CHECK(st.size == 3 && st.expired == 4 && st.evicted == 0);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
}

int main(void)
{
    TEST_RUN(test_min_size);
    TEST_RUN(test_ratio_semantics);
    TEST_RUN(test_blocking);
    TEST_RUN(test_remover_none);
    return test_main_result();
}
