/* tests/replay/test_replay_shard_ops.c: what a replay shard offers the global selection over
 * several shards (workers/roles/shards.h): gb_replay_ready (the limiter's yes without a draw),
 * admitted requests, gb_replay_peek and gb_replay_weight_total. */
#include "replay/replay.h"

#include "test.h"

#include <string.h>

static gb_replay *make(gb_selector_kind sel, int64_t min_size, double spi, double eb,
                       unsigned extra)
{
    gb_error err = {0};
    gb_replay_options o;
    gb_replay_options_default(&o);
    o.capacity = 32;
    o.selector = sel;
    o.extra_selectors = extra;
    o.min_size = min_size;
    o.samples_per_insert = spi;
    o.error_buffer = eb;
    o.alpha = 0.5;
    o.timeout_s = 0;
    CHECK_OK(gb_replay_add_column(&o, "x", GB_DTYPE_FLOAT32, 0, NULL, 0, &err));
    gb_replay *r = NULL;
    CHECK_OK(gb_replay_create(&o, &r, &err));
    return r;
}

static void insert(gb_replay *r, int n, double base)
{
    gb_error err = {0};
    for (int i = 0; i < n; i++) {
        float x = (float)i;
        const void *data[1] = {&x};
        CHECK_OK(gb_replay_insert(r, data, base + i, 1, 0, &err));
    }
}

/* ready says what sample would, and draws nothing. */
static void test_ready(void)
{
    gb_error err = {0};
    gb_replay *r = make(GB_SELECTOR_UNIFORM, 4, 2.0, 8.0, 0);
    gb_replay_request q = gb_replay_request_default(4);
    q.timeout_s = 0;
    insert(r, 3, 1);
    CHECK_EQ_INT(gb_replay_ready(r, &q, &err), GB_ETIMEOUT); /* below min_size */
    insert(r, 1, 1);
    CHECK_OK(gb_replay_ready(r, &q, &err));
    gb_replay_stats st;
    gb_replay_stats_get(r, &st);
    CHECK_EQ_INT(st.samples, 0); /* nothing drawn */
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, 32, &err));
    /* 4 inserts x 2 = 8 samples allowed around the min_diff of 8 - 8 = 0: two batches of 4 */
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    gb_replay_release(r, &s);
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    gb_replay_release(r, &s);
    CHECK_EQ_INT(gb_replay_ready(r, &q, &err), GB_ETIMEOUT); /* the ratio holds it back */
    CHECK_EQ_INT(gb_replay_sample(r, &q, &s, &err), GB_ETIMEOUT);
    /* admitted: drawn anyway (an agreed step of several shards), and counted */
    q.admitted = 1;
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    CHECK_EQ_INT(s.n, 4);
    gb_replay_release(r, &s);
    gb_replay_stats_get(r, &st);
    CHECK_EQ_INT(st.samples, 12);
    /* an empty store still has nothing to give, admitted or not */
    gb_replay *e = make(GB_SELECTOR_UNIFORM, 1, 0, 0, 0);
    CHECK_EQ_INT(gb_replay_sample(e, &q, &s, &err), GB_ETIMEOUT);
    /* ready raises the staleness floor as sample would */
    q = gb_replay_request_default(1);
    q.timeout_s = 0;
    q.min_policy_version = 1;
    CHECK_EQ_INT(gb_replay_ready(r, &q, &err), GB_ETIMEOUT); /* every item had version 0 */
    gb_replay_stats_get(r, &st);
    CHECK_EQ_INT(st.expired, 4);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
    gb_replay_free(e);
}

/* peek: the order a distinct selector would pick, no pins, no counts. */
static void test_peek(void)
{
    gb_error err = {0};
    gb_replay *r = make(GB_SELECTOR_FIFO, 1, 0, 0, 1u << GB_SELECTOR_TOPK);
    double prios[6] = {3, 9, 1, 9, 5, 0};
    for (int i = 0; i < 6; i++) {
        float x = (float)i;
        const void *data[1] = {&x};
        CHECK_OK(gb_replay_insert(r, data, prios[i], 1, 0, &err));
    }
    int64_t idx[8], count;
    double p[8];
    CHECK_OK(gb_replay_peek(r, GB_REPLAY_SELECTOR_PRIMARY, 4, idx, p, &count, &err));
    CHECK_EQ_INT(count, 4);
    for (int k = 0; k < 4; k++)
        CHECK_NEAR(p[k], prios[k], 0); /* oldest first, with their priorities */
    CHECK_OK(gb_replay_peek(r, GB_SELECTOR_TOPK, 8, idx, p, &count, &err));
    CHECK_EQ_INT(count, 6);
    double want[6] = {9, 9, 5, 3, 1, 0};
    for (int k = 0; k < 6; k++)
        CHECK_NEAR(p[k], want[k], 0);
    CHECK_OK(gb_replay_peek(r, GB_SELECTOR_LIFO, 2, idx, p, &count, &err));
    CHECK_NEAR(p[0], 0, 0);
    CHECK_NEAR(p[1], 5, 0);
    CHECK_EQ_INT(gb_replay_peek(r, GB_SELECTOR_UNIFORM, 2, idx, p, &count, &err), GB_EINVAL);
    gb_replay_stats st;
    gb_replay_stats_get(r, &st);
    CHECK_EQ_INT(st.samples, 0);
    gb_replay_status view;
    gb_replay_status_view(r, &view);
    for (int64_t k = 0; k < view.size; k++)
        CHECK_EQ_INT(view.item[view.live[k]].pins, 0);
    gb_replay_free(r);
}

/* weight_total: the weighted draw's normaliser (sum of priority^alpha), uniform's size. */
static void test_weight_total(void)
{
    gb_error err = {0};
    gb_replay *r = make(GB_SELECTOR_WEIGHTED, 1, 0, 0, 0);
    double total;
    int64_t size;
    CHECK_OK(gb_replay_weight_total(r, GB_REPLAY_SELECTOR_PRIMARY, &total, &size, &err));
    CHECK_EQ_INT(size, 0);
    CHECK_NEAR(total, 0, 0);
    insert(r, 3, 1); /* priorities 1, 2, 3 */
    CHECK_OK(gb_replay_weight_total(r, GB_REPLAY_SELECTOR_PRIMARY, &total, &size, &err));
    CHECK_EQ_INT(size, 3);
    CHECK_NEAR(total, 1 + sqrt(2) + sqrt(3), 1e-12);
    CHECK_OK(gb_replay_weight_total(r, GB_SELECTOR_UNIFORM, &total, &size, &err));
    CHECK_NEAR(total, 3, 0);
    CHECK_EQ_INT(gb_replay_weight_total(r, GB_SELECTOR_FIFO, &total, &size, &err), GB_EINVAL);
    /* the weights' sum is what the draw's probabilities divide by */
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, 8, &err));
    gb_replay_request q = gb_replay_request_default(8);
    CHECK_OK(gb_replay_weight_total(r, GB_REPLAY_SELECTOR_PRIMARY, &total, &size, &err));
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    gb_replay_status view;
    gb_replay_status_view(r, &view);
    for (int64_t k = 0; k < s.n; k++)
        CHECK_NEAR(s.prob[k], sqrt(view.priority[s.index[k]]) / total, 1e-12);
    gb_replay_release(r, &s);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
}

int main(void)
{
    TEST_RUN(test_ready);
    TEST_RUN(test_peek);
    TEST_RUN(test_weight_total);
    return test_main_result();
}
