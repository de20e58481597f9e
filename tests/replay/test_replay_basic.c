/* tests/replay/test_replay_basic.c: schema and options validation, the write path (allocate,
 * in-place write, commit, abort, batched), collection with step ranges and zero fill, the
 * eviction-vs-reader rule, and a read-only view of the segment from another process. */
#include "replay/replay.h"
#include "replay/from_config.h"
#include "test.h"
#include "util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_validation(void)
{
    gb_error err = {0};
    gb_replay_options o;
    gb_replay *r = NULL;
    util_options(&o, 8, 4);
    CHECK_OK(gb_replay_validate(&o, &err));
    int64_t bad = 0;
    CHECK(gb_replay_add_column(&o, "x", GB_DTYPE_FLOAT32, 1, &bad, 0, &err) == GB_EINVAL);
    CHECK(gb_replay_add_column(&o, "obs", GB_DTYPE_FLOAT32, 0, NULL, 0, &err) == GB_EINVAL);
    CHECK(gb_replay_add_column(&o, "y", (gb_dtype)99, 0, NULL, 0, &err) == GB_EINVAL);
    gb_replay_options b = o;
    b.capacity = 0;
    CHECK(gb_replay_create(&b, &r, &err) == GB_EINVAL && r == NULL);
    b = o;
    b.max_size = 9;
    CHECK(gb_replay_validate(&b, &err) == GB_EINVAL);
    b = o;
    b.min_size = 9; /* > capacity: sampling could never start */
    CHECK(gb_replay_validate(&b, &err) == GB_EINVAL);
    CHECK(strstr(err.msg, "min_size") != NULL);
    b = o;
    b.samples_per_insert = 4;
    b.error_buffer = 2; /* 2 * 2 < 4 + 1 */
    CHECK(gb_replay_validate(&b, &err) == GB_EINVAL);
    CHECK(strstr(err.msg, "error_buffer") != NULL);
    b.error_buffer = 2.5;
    CHECK_OK(gb_replay_validate(&b, &err));
    b.max_times_sampled = 2; /* spi 4 > 2 samples per item: drains */
    CHECK(gb_replay_validate(&b, &err) == GB_EINVAL);
    b = o;
    b.remover = GB_REMOVER_MAX_TIMES_SAMPLED;
    CHECK(gb_replay_validate(&b, &err) == GB_EINVAL);
    b.alpha = -1;
    CHECK(gb_replay_validate(&b, &err) == GB_EINVAL);

    /* Config section mapping. */
    gb_config_replay c = {0};
    c.capacity = 100;
    c.max_size = 50;
    c.remover = GB_REMOVER_LIFO;
    c.selector = GB_SELECTOR_TOPK;
    c.alpha = 0.7;
    c.beta = 0.5;
    c.default_priority = NAN;
    c.min_size = 3;
    c.timeout_s = 1;
    gb_replay_options_from_config(&o, &c);
    CHECK(o.capacity == 100 && o.max_size == 50 && o.remover == GB_REMOVER_LIFO &&
          o.selector == GB_SELECTOR_TOPK && o.min_size == 3 && isnan(o.default_priority));
    CHECK_OK(gb_replay_validate(&o, &err));
}

static void test_layout_and_write(void)
{
    gb_error err = {0};
    gb_replay_options o;
    util_options(&o, 16, 5);
    gb_replay *r;
    CHECK_OK(gb_replay_create(&o, &r, &err));
    gb_replay_table tab[4];
    gb_replay_tables(r, tab);
    for (int c = 0; c < 4; c++) {
        CHECK(((uintptr_t)tab[c].base % 64) == 0);
        CHECK(tab[c].stride >= tab[c].block_bytes);
    }
    /* rows padded no more than their size needs: 80 -> 80, 20 -> 32, 8 -> 8, 16 -> 16 */
    CHECK_EQ_INT(tab[0].stride, 80);
    CHECK_EQ_INT(tab[1].stride, 32);
    CHECK_EQ_INT(tab[2].stride, 8);
    CHECK_EQ_INT(tab[3].stride, 16);
    CHECK(tab[0].block_bytes == 5 * 16 && tab[0].step_bytes == 16 && !tab[0].per_item);
    CHECK(tab[1].block_bytes == 5 * 4);
    CHECK(tab[2].block_bytes == 8 && tab[2].per_item);
    CHECK(tab[3].block_bytes == 16 && tab[3].per_item);

    /* Batched allocate: the free queue hands out 0, 1, 2 in order. */
    int64_t idx[3];
    CHECK_OK(gb_replay_allocate(r, 3, idx, 0, &err));
    CHECK(idx[0] == 0 && idx[1] == 1 && idx[2] == 2);
    gb_replay_stats st;
    gb_replay_stats_get(r, &st);
    CHECK(st.writing == 3 && st.size == 0);
    for (int k = 0; k < 3; k++)
        util_write(r, idx[k], 100 + (uint64_t)k, 5);
    /* Not committed: not selectable, and sampling with timeout 0 fails at once. */
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, 8, &err));
    gb_replay_request q = gb_replay_request_default(2);
    q.timeout_s = 0;
    CHECK(gb_replay_sample(r, &q, &s, &err) == GB_ETIMEOUT);
    /* Abort one, commit the others with priority, length and version. */
    CHECK_OK(gb_replay_abort(r, 1, &idx[1], &err));
    CHECK(gb_replay_abort(r, 1, &idx[1], &err) == GB_EINVAL);
    int64_t ci[2] = {idx[0], idx[2]};
    double pr[2] = {2.0, NAN};
    int32_t len[2] = {5, 3};
    int64_t ver[2] = {7, 8};
    int64_t dup[2] = {idx[0], idx[0]};
    CHECK(gb_replay_commit(r, 2, dup, pr, len, ver, &err) == GB_EINVAL);
    int32_t badlen[2] = {6, 1};
    CHECK(gb_replay_commit(r, 2, ci, pr, badlen, ver, &err) == GB_EINVAL);
    CHECK_OK(gb_replay_commit(r, 2, ci, pr, len, ver, &err));
    CHECK(gb_replay_commit(r, 1, ci, pr, len, ver, &err) == GB_EINVAL); /* already committed */
    gb_replay_stats_get(r, &st);
    CHECK(st.size == 2 && st.writing == 0 && st.inserts == 2 && st.aborted == 1);
    gb_replay_status sv;
    gb_replay_status_view(r, &sv);
    CHECK(sv.priority[idx[0]] == 2.0);
    CHECK(sv.priority[idx[2]] == 2.0); /* NAN = current max */
    CHECK(sv.length[idx[2]] == 3 && sv.policy_version[idx[2]] == 8);
    CHECK(sv.state[idx[1]] == GB_ITEM_FREE && sv.state[idx[0]] == GB_ITEM_COMMITTED);

    /* Collect steps [1, 4) from the FIFO-ordered pair: item 2 has 3 valid steps -> rows 1, 2
     * valid, row 3 zero. Per-item columns ignore the range. */
    gb_replay_options fo;
    (void)fo;
    q = gb_replay_request_default(2);
    q.t0 = 1;
    q.t1 = 4;
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    CHECK(s.n == 2 && s.pinned && s.size == 2);
    float obs[2 * 3 * 4];
    int32_t act[2 * 3];
    uint64_t ids[2];
    float boot[2 * 4];
    int32_t lengths[2];
    gb_replay_dst dst[4] = {{0, obs, sizeof obs}, {1, act, sizeof act}, {2, ids, sizeof ids},
                            {3, boot, sizeof boot}};
    CHECK_OK(gb_replay_collect(r, &s, dst, 4, lengths, &err));
    for (int k = 0; k < 2; k++) {
        uint64_t id = ids[k];
        CHECK(id == (s.index[k] == idx[0] ? 100u : 102u));
        int32_t valid = id == 100 ? 3 : 2;
        CHECK_EQ_INT(lengths[k], valid);
        CHECK(util_check_rows(obs + k * 12, act + k * 3, id, 1, 3, valid));
        CHECK(boot[k * 4 + 2] == util_obs(id, 5, 2));
    }
    dst[0].bytes = sizeof obs - 1;
    CHECK(gb_replay_collect(r, &s, dst, 4, NULL, &err) == GB_EINVAL);
    dst[0].column = 9;
    CHECK(gb_replay_collect(r, &s, dst, 1, NULL, &err) == GB_EINVAL);
    gb_replay_release(r, &s);
    gb_replay_release(r, &s); /* idempotent */
    CHECK(gb_replay_collect(r, &s, dst, 4, NULL, &err) == GB_EINVAL);
    q.t1 = 6;
    CHECK(gb_replay_sample(r, &q, &s, &err) == GB_EINVAL);

    /* gb_replay_insert copies whole blocks. */
    uint64_t id9 = 9;
    const void *data[4] = {NULL, NULL, &id9, NULL};
    CHECK_OK(gb_replay_insert(r, data, 1.0, 5, 0, &err));
    gb_replay_stats_get(r, &st);
    CHECK(st.size == 3);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
}

/* The eviction-vs-reader rule: a pinned item that the remover takes out is no longer selectable,
 * but its block is not reused until the reader releases it. */
/* first_samples counts the items drawn at least once, not the draws: a second draw of an item
 * adds nothing, an item evicted unsampled never counts. */
static void test_first_samples(void)
{
    gb_error err = {0};
    gb_replay_options o;
    util_options(&o, 4, 2);
    o.selector = GB_SELECTOR_FIFO;
    gb_replay *r;
    CHECK_OK(gb_replay_create(&o, &r, &err));
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, 4, &err));
    gb_replay_request q = gb_replay_request_default(2);
    gb_replay_stats st;
    for (uint64_t id = 0; id < 7; id++) {
        int64_t i;
        CHECK_OK(gb_replay_allocate(r, 1, &i, 0, &err)); /* from id 4 on: evicts the oldest */
        util_write(r, i, id, 2);
        CHECK_OK(gb_replay_commit(r, 1, &i, NULL, NULL, NULL, &err));
        if (id == 1 || id == 2) { /* the two oldest, twice each */
            CHECK_OK(gb_replay_sample(r, &q, &s, &err));
            gb_replay_release(r, &s);
        }
    }
    gb_replay_stats_get(r, &st);
    /* drawn: ids 0, 1 (at id 1 and again at id 2); ids 2 to 6 never; 3 evicted unsampled */
    CHECK_EQ_INT(st.samples, 4);
    CHECK_EQ_INT(st.first_samples, 2);
    CHECK_EQ_INT(st.evicted, 3);
    CHECK_OK(gb_replay_sample(r, &q, &s, &err)); /* the oldest left: ids 3 and 4 */
    gb_replay_release(r, &s);
    gb_replay_stats_get(r, &st);
    CHECK_EQ_INT(st.first_samples, 4);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
}

static void test_eviction_vs_reader(void)
{
    gb_error err = {0};
    gb_replay_options o;
    util_options(&o, 4, 2);
    o.selector = GB_SELECTOR_FIFO;
    gb_replay *r;
    CHECK_OK(gb_replay_create(&o, &r, &err));
    for (uint64_t id = 0; id < 4; id++) {
        int64_t i;
        CHECK_OK(gb_replay_allocate(r, 1, &i, 0, &err));
        util_write(r, i, id, 2);
        CHECK_OK(gb_replay_commit(r, 1, &i, NULL, NULL, NULL, &err));
    }
    gb_replay_selection s, s2;
    CHECK_OK(gb_replay_selection_init(&s, 4, &err));
    CHECK_OK(gb_replay_selection_init(&s2, 4, &err));
    gb_replay_request q = gb_replay_request_default(1);
    CHECK_OK(gb_replay_sample(r, &q, &s, &err)); /* pins the oldest: block 0, id 0 */
    CHECK(s.n == 1 && s.index[0] == 0);
    /* Full: the FIFO remover takes item 0 out, but its block is pinned, so no block is free. */
    int64_t i;
    CHECK(gb_replay_allocate(r, 1, &i, 0, &err) == GB_ETIMEOUT);
    CHECK(strstr(err.msg, "pinned") != NULL);
    gb_replay_stats st;
    gb_replay_stats_get(r, &st);
    CHECK(st.size == 3 && st.retired_pinned == 1 && st.evicted == 1 && st.free_blocks == 0);
    /* No longer selectable: a new FIFO sample starts at item 1. */
    CHECK_OK(gb_replay_sample(r, &q, &s2, &err));
    CHECK(s2.index[0] == 1);
    gb_replay_release(r, &s2);
    /* The reader's data is intact. */
    uint64_t id;
    gb_replay_dst d = {2, &id, sizeof id};
    CHECK_OK(gb_replay_collect(r, &s, &d, 1, NULL, &err));
    CHECK(id == 0);
    /* Priority updates to the removed item are skipped. */
    double p = 5;
    int64_t skipped = -1;
    CHECK_OK(gb_replay_update_priorities(r, 1, s.index, s.key, &p, &skipped, &err));
    CHECK(skipped == 1);
    gb_replay_release(r, &s);
    gb_replay_stats_get(r, &st);
    CHECK(st.retired_pinned == 0 && st.free_blocks == 1);
    CHECK_OK(gb_replay_allocate(r, 1, &i, 0, &err));
    CHECK(i == 0);
    CHECK_OK(gb_replay_abort(r, 1, &i, &err));
    gb_replay_selection_free(&s);
    gb_replay_selection_free(&s2);
    gb_replay_free(r);
}

static void test_view_other_process(void)
{
    gb_error err = {0};
    gb_replay_options o;
    util_options(&o, 8, 3);
    gb_replay *r;
    CHECK_OK(gb_replay_create(&o, &r, &err));
    for (uint64_t id = 0; id < 5; id++) {
        int64_t i;
        CHECK_OK(gb_replay_allocate(r, 1, &i, 0, &err));
        util_write(r, i, 1000 + id, 3);
        double p = (double)id;
        CHECK_OK(gb_replay_commit(r, 1, &i, &p, NULL, NULL, &err));
    }
    size_t bytes;
    int fd = gb_replay_shm_fd(r, &bytes);
    CHECK(fd >= 0 && bytes > 0);
    pid_t pid = fork();
    if (pid == 0) {
        gb_replay_view v;
        gb_error e = {0};
        if (gb_replay_view_open(&v, fd, &e) != 0)
            _exit(2);
        if (v.capacity != 8 || v.steps != 3 || v.ncolumns != 4 || strcmp(v.columns[2].name, "id"))
            _exit(3);
        for (int64_t i = 0; i < 5; i++) {
            const uint64_t *id = (const uint64_t *)(v.tables[2].base + i * v.tables[2].stride);
            const float *obs = (const float *)(v.tables[0].base + i * v.tables[0].stride);
            if (v.state[i] != GB_ITEM_COMMITTED || *id != 1000 + (uint64_t)i ||
                v.priority[i] != (double)i || obs[4 * 2 + 1] != util_obs(*id, 2, 1))
                _exit(4);
        }
        gb_replay_view_close(&v);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    gb_replay_view v;
    int pipefd[2];
    CHECK(pipe(pipefd) == 0);
    CHECK(gb_replay_view_open(&v, pipefd[0], &err) != 0); /* not a replay segment */
    close(pipefd[0]);
    close(pipefd[1]);
    gb_replay_free(r);
}

/* Collection on the thread pool (batches over 1 MiB) gives exactly what one thread gives. */
static void test_collect_pool(void)
{
    gb_error err = {0};
    gb_replay_options o;
    gb_replay_options_default(&o);
    o.capacity = 64;
    o.steps = 16;
    o.collect_threads = 3;
    int64_t step = 4096 + 8; /* rows >= 16 KiB: streaming stores, odd alignment */
    CHECK_OK(gb_replay_add_column(&o, "frames", GB_DTYPE_UINT8, 1, &step, 0, &err));
    CHECK_OK(gb_replay_add_column(&o, "id", GB_DTYPE_UINT64, 0, NULL, 1, &err));
    gb_replay *r;
    CHECK_OK(gb_replay_create(&o, &r, &err));
    for (uint64_t id = 0; id < 64; id++) {
        int64_t i;
        CHECK_OK(gb_replay_allocate(r, 1, &i, 0, &err));
        uint8_t *b = gb_replay_block(r, 0, i);
        for (int64_t k = 0; k < 16 * step; k++)
            b[k] = (uint8_t)(id * 31 + (uint64_t)k * 7);
        *(uint64_t *)gb_replay_block(r, 1, i) = id;
        int32_t len = 3 + (int32_t)(id % 14);
        CHECK_OK(gb_replay_commit(r, 1, &i, NULL, &len, NULL, &err));
    }
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, 64, &err));
    gb_replay_request q = gb_replay_request_default(64);
    q.t0 = 2;
    q.t1 = 15;
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    size_t row = 13 * (size_t)step, bytes = 64 * row;
    uint8_t *a = malloc(bytes + 1), *b = malloc(bytes);
    uint64_t ids[64];
    gb_replay_dst d[2] = {{0, a + 1, bytes}, {1, ids, sizeof ids}}; /* unaligned destination */
    int32_t lengths[64];
    CHECK_OK(gb_replay_collect(r, &s, d, 2, lengths, &err));
    gb_replay_table tab[2];
    gb_replay_tables(r, tab);
    gb_replay_status st;
    gb_replay_status_view(r, &st);
    gb_replay_gather(&tab[0], s.index, st.length, s.n, 2, 15, b);
    CHECK(memcmp(a + 1, b, bytes) == 0);
    int ok = 1;
    for (int64_t k = 0; k < s.n; k++) {
        int32_t valid = 3 + (int32_t)(ids[k] % 14) - 2;
        ok &= lengths[k] == (valid > 13 ? 13 : valid);
        for (size_t x = 0; x < row; x++) {
            size_t at = 2 * (size_t)step + x;
            uint8_t want = x < (size_t)lengths[k] * (size_t)step
                               ? (uint8_t)(ids[k] * 31 + (uint64_t)at * 7) : 0;
            if (b[(size_t)k * row + x] != want) {
                ok = 0;
                break;
            }
        }
    }
    CHECK(ok);
    gb_replay_release(r, &s);
    free(a);
    free(b);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
}

int main(void)
{
    TEST_RUN(test_collect_pool);
    TEST_RUN(test_validation);
    TEST_RUN(test_layout_and_write);
    TEST_RUN(test_first_samples);
    TEST_RUN(test_eviction_vs_reader);
    TEST_RUN(test_view_other_process);
    return test_main_result();
}
