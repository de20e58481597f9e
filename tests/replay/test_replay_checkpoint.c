/* tests/replay/test_replay_checkpoint.c: checkpoint round trips (same items at the same indices,
 * priorities, counters, free queue and selector state: the original and the restored replay then
 * behave identically), and damaged files: every single flipped byte, every truncation length, a
 * different schema, a missing file. A failed restore leaves the replay empty and usable. A
 * file of format version 1 (no first_samples) still restores. A checkpoint taken while another
 * thread inserts reports the digest of what it wrote (gb_replay_checkpoint_digest). */
#include "replay/replay.h"
#include "runtime/base/crc32c.h"
#include "test.h"
#include "util.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static void opts(gb_replay_options *o, int selector)
{
    util_options(o, 32, 3);
    o->selector = selector;
    o->remover = GB_REMOVER_LOWEST_PRIORITY;
    o->max_size = 24;
    o->max_times_sampled = 5;
    o->alpha = 0.8;
    o->timeout_s = 0;
    o->seed = 11;
}

/* A history with inserts, samples, updates, evictions, expiry and aborts. */
static void populate(gb_replay *r, uint64_t *next_id)
{
    gb_error err = {0};
    gb_replay_selection s;
    gb_replay_selection_init(&s, 8, &err);
    gb_rng rng;
    gb_rng_seed(&rng, 5);
    for (int step = 0; step < 120; step++) {
        int64_t idx[3], n = 1 + (int64_t)gb_rng_below(&rng, 3);
        CHECK_OK(gb_replay_allocate(r, n, idx, 0, &err));
        double p[3];
        int32_t len[3];
        int64_t ver[3];
        for (int64_t k = 0; k < n; k++) {
            util_write(r, idx[k], (*next_id)++, 3);
            p[k] = (double)gb_rng_below(&rng, 50) * 0.1;
            len[k] = 1 + (int32_t)gb_rng_below(&rng, 3);
            ver[k] = step / 10;
        }
        if (step % 13 == 4)
            CHECK_OK(gb_replay_abort(r, n, idx, &err));
        else
            CHECK_OK(gb_replay_commit(r, n, idx, p, len, ver, &err));
        if (step % 3 == 0) {
            gb_replay_request q = gb_replay_request_default(4);
            q.timeout_s = 0;
            CHECK_OK(gb_replay_sample(r, &q, &s, &err));
            double np[8];
            for (int64_t k = 0; k < s.n; k++)
                np[k] = (double)gb_rng_below(&rng, 70) * 0.1;
            CHECK_OK(gb_replay_update_priorities(r, s.n, s.index, s.key, np, NULL, &err));
            gb_replay_release(r, &s);
        }
        if (step == 90)
            gb_replay_expire(r, 3);
    }
    gb_replay_selection_free(&s);
}

/* Compares two replays: status of every block, contents of committed ones, counters. */
static int same(gb_replay *a, gb_replay *b)
{
    gb_replay_status x, y;
    gb_replay_status_view(a, &x);
    gb_replay_status_view(b, &y);
    int ok = x.size == y.size && x.oldest == y.oldest && x.newest == y.newest;
    for (int64_t i = 0; i < x.capacity && ok; i++) {
        ok = x.state[i] == y.state[i];
        if (ok && x.state[i] == GB_ITEM_COMMITTED) {
            ok = x.item[i].seq == y.item[i].seq && x.priority[i] == y.priority[i] &&
                 x.item[i].times_sampled == y.item[i].times_sampled && x.length[i] == y.length[i] &&
                 x.policy_version[i] == y.policy_version[i] && x.next[i] == y.next[i];
            gb_replay_table ta[4], tb[4];
            gb_replay_tables(a, ta);
            gb_replay_tables(b, tb);
            for (int c = 0; c < 4 && ok; c++)
                ok = memcmp(ta[c].base + i * ta[c].stride, tb[c].base + i * tb[c].stride,
                            ta[c].block_bytes) == 0;
        }
    }
    for (int64_t k = 0; k < x.size && ok; k++)
        ok = x.live[k] == y.live[k];
    gb_replay_stats sa, sb;
    gb_replay_stats_get(a, &sa);
    gb_replay_stats_get(b, &sb);
    ok = ok && sa.inserts == sb.inserts && sa.samples == sb.samples &&
         sa.evicted == sb.evicted && sa.sampled_out == sb.sampled_out &&
         sa.expired == sb.expired && sa.aborted == sb.aborted && sa.updates == sb.updates &&
         sa.free_blocks == sb.free_blocks && sa.max_priority == sb.max_priority &&
         sa.min_version == sb.min_version;
    return ok && sa.first_samples == sb.first_samples;
}

static void round_trip(int selector)
{
    gb_error err = {0};
    gb_replay_options o;
    opts(&o, selector);
    gb_replay *a, *b;
    CHECK_OK(gb_replay_create(&o, &a, &err));
    CHECK_OK(gb_replay_create(&o, &b, &err));
    uint64_t id = 1;
    populate(a, &id);
    char path[300];
    snprintf(path, sizeof path, "%s/rt.ckpt", dir);
    CHECK_OK(gb_replay_checkpoint(a, path, &err));
    char tmp[320];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0); /* renamed away */
    uint64_t da = 0, db = 1;
    CHECK(gb_replay_digest(b, &db) == 0);
    CHECK_OK(gb_replay_restore(b, path, &err));
    CHECK(same(a, b));
    /* the digest sees what the checkpoint carried: equal after the restore, and it moves with a
     * priority */
    int64_t na = gb_replay_digest(a, &da), nb = gb_replay_digest(b, &db);
    CHECK(na > 0 && na == nb && da == db);
    CHECK(gb_replay_restore(b, path, &err) == GB_EINVAL); /* not empty */
    /* Both continue identically: same draws (selector RNG and structures), same blocks handed
     * out (free queue), same evictions. */
    gb_replay_selection sa, sb;
    gb_replay_selection_init(&sa, 8, &err);
    gb_replay_selection_init(&sb, 8, &err);
    int identical = 1;
    for (int step = 0; step < 60; step++) {
        int64_t ia, ib;
        CHECK_OK(gb_replay_allocate(a, 1, &ia, 0, &err));
        CHECK_OK(gb_replay_allocate(b, 1, &ib, 0, &err));
        identical &= ia == ib;
        util_write(a, ia, id, 3);
        util_write(b, ib, id++, 3);
        double p = NAN;
        int64_t v = 20; /* above the staleness floor populate() left */
        CHECK_OK(gb_replay_commit(a, 1, &ia, &p, NULL, &v, &err));
        CHECK_OK(gb_replay_commit(b, 1, &ib, &p, NULL, &v, &err));
        gb_replay_request q = gb_replay_request_default(3); /* drains slower than it fills */
        q.timeout_s = 0;
        CHECK_OK(gb_replay_sample(a, &q, &sa, &err));
        CHECK_OK(gb_replay_sample(b, &q, &sb, &err));
        identical &= sa.n == sb.n;
        for (int64_t k = 0; k < sa.n && k < sb.n; k++)
            identical &= sa.index[k] == sb.index[k] && sa.prob[k] == sb.prob[k];
        gb_replay_release(a, &sa);
        gb_replay_release(b, &sb);
    }
    CHECK_MSG(identical, "selector %d: restored replay diverged", selector);
    CHECK(same(a, b));
    CHECK(gb_replay_digest(a, &da) == gb_replay_digest(b, &db) && da == db);
    gb_replay_status st;
    gb_replay_status_view(a, &st);
    int64_t one = st.live[0];
    uint64_t key = st.item[one].seq;
    double p = 123.5;
    CHECK_OK(gb_replay_update_priorities(a, 1, &one, &key, &p, NULL, &err));
    gb_replay_digest(a, &da);
    CHECK(da != db);
    gb_replay_selection_free(&sa);
    gb_replay_selection_free(&sb);
    gb_replay_free(a);
    gb_replay_free(b);
    unlink(path);
}

static void test_round_trip(void)
{
    round_trip(GB_SELECTOR_UNIFORM);
    round_trip(GB_SELECTOR_WEIGHTED);
    round_trip(GB_SELECTOR_TOPK);
    round_trip(GB_SELECTOR_FIFO);
}

static long file_bytes(const char *path, uint8_t **data)
{
    *data = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc((size_t)n);
    if (fread(*data, 1, (size_t)n, f) != (size_t)n)
        n = -1;
    fclose(f);
    return n;
}

static void write_bytes(const char *path, const uint8_t *data, long n)
{
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, (size_t)n, f);
    fclose(f);
}

static void test_corruption(void)
{
    gb_error err = {0};
    gb_replay_options o;
    opts(&o, GB_SELECTOR_WEIGHTED);
    gb_replay *a, *b;
    CHECK_OK(gb_replay_create(&o, &a, &err));
    CHECK_OK(gb_replay_create(&o, &b, &err));
    uint64_t id = 1;
    populate(a, &id);
    char good[300], bad[300];
    snprintf(good, sizeof good, "%s/good.ckpt", dir);
    snprintf(bad, sizeof bad, "%s/bad.ckpt", dir);
    CHECK_OK(gb_replay_checkpoint(a, good, &err));
    uint8_t *data = NULL;
    long n = file_bytes(good, &data);
    CHECK(n > 0);
    /* Every byte flipped in turn. */
    long undetected = 0, wrong_code = 0, not_empty = 0;
    for (long at = 0; at < n; at++) {
        data[at] ^= 0x20;
        write_bytes(bad, data, n);
        data[at] ^= 0x20;
        int rc = gb_replay_restore(b, bad, &err);
        if (rc == 0) {
            undetected++;
            gb_replay_free(b);
            CHECK_OK(gb_replay_create(&o, &b, &err));
        } else if (rc != GB_ECORRUPT && rc != GB_EINVAL) {
            wrong_code++;
        }
        gb_replay_stats st;
        gb_replay_stats_get(b, &st);
        if (st.size != 0 || st.inserts != 0)
            not_empty++;
    }
    CHECK_MSG(undetected == 0, "%ld of %ld flipped bytes went unnoticed", undetected, n);
    CHECK_EQ_INT(wrong_code, 0);
    CHECK_EQ_INT(not_empty, 0);
    /* Every truncation. */
    long accepted = 0;
    for (long len = 0; len < n; len++) {
        write_bytes(bad, data, len);
        int rc = gb_replay_restore(b, bad, &err);
        if (rc != GB_ECORRUPT)
            accepted++;
    }
    CHECK_EQ_INT(accepted, 0);
    write_bytes(bad, data, n - 1);
    CHECK(gb_replay_restore(b, bad, &err) == GB_ECORRUPT);
    fprintf(stderr, "  truncated: %s\n", err.msg);
    /* A trailing byte is not silently ignored. */
    uint8_t *longer = malloc((size_t)n + 1);
    memcpy(longer, data, (size_t)n);
    longer[n] = 0;
    write_bytes(bad, longer, n + 1);
    CHECK(gb_replay_restore(b, bad, &err) == GB_ECORRUPT);
    free(longer);
    /* Flip in a table: the message names the table. */
    data[n - 20] ^= 1;
    write_bytes(bad, data, n);
    data[n - 20] ^= 1;
    CHECK(gb_replay_restore(b, bad, &err) == GB_ECORRUPT);
    CHECK(strstr(err.msg, "table 'boot'") != NULL);
    fprintf(stderr, "  flipped: %s\n", err.msg);
    CHECK(gb_replay_restore(b, "/nonexistent/x.ckpt", &err) == GB_ENOTFOUND);
    /* Still usable: the good file restores. */
    CHECK_OK(gb_replay_restore(b, good, &err));
    CHECK(same(a, b));
    free(data);
    gb_replay_free(a);
    gb_replay_free(b);

    /* Wrong schema: another dtype, shape, T, capacity or selector. */
    CHECK_OK(gb_replay_create(&o, &a, &err));
    gb_replay_options w = o;
    w.columns[0].shape[0] = 5;
    CHECK_OK(gb_replay_create(&w, &b, &err));
    CHECK(gb_replay_restore(b, good, &err) == GB_EINVAL);
    CHECK(strstr(err.msg, "column 'obs'") != NULL);
    fprintf(stderr, "  schema: %s\n", err.msg);
    gb_replay_free(b);
    w = o;
    w.steps = 4;
    CHECK_OK(gb_replay_create(&w, &b, &err));
    CHECK(gb_replay_restore(b, good, &err) == GB_EINVAL);
    gb_replay_free(b);
    w = o;
    w.selector = GB_SELECTOR_UNIFORM;
    CHECK_OK(gb_replay_create(&w, &b, &err));
    CHECK(gb_replay_restore(b, good, &err) == GB_EINVAL);
    CHECK(strstr(err.msg, "selector") != NULL);
    gb_replay_free(b);
    /* A checkpoint that cannot be written leaves the previous file intact. */
    char missing[320];
    snprintf(missing, sizeof missing, "%s/no-such-dir/x.ckpt", dir);
    CHECK(gb_replay_checkpoint(a, missing, &err) != 0);
    CHECK_OK(gb_replay_create(&o, &b, &err));
    CHECK_OK(gb_replay_restore(b, good, &err));
    gb_replay_free(b);
    gb_replay_free(a);
    unlink(good);
    unlink(bad);
}

/* A version 1 file (the header without its last field, first_samples) restores: the same
 * items and counters, first_samples 0. Made from a version 2 file: the header cut, its version,
 * size and CRC rewritten. */
static void test_version1(void)
{
    gb_error err = {0};
    gb_replay_options o;
    opts(&o, GB_SELECTOR_UNIFORM);
    gb_replay *a, *b;
    CHECK_OK(gb_replay_create(&o, &a, &err));
    CHECK_OK(gb_replay_create(&o, &b, &err));
    uint64_t id = 1;
    populate(a, &id);
    gb_replay_stats sa, sb;
    gb_replay_stats_get(a, &sa);
    CHECK(sa.first_samples > 0 && sa.first_samples <= sa.inserts && sa.first_samples < sa.samples);
    char path[300];
    snprintf(path, sizeof path, "%s/v1.ckpt", dir);
    CHECK_OK(gb_replay_checkpoint(a, path, &err));
    uint8_t *data = NULL;
    long n = file_bytes(path, &data);
    uint32_t version, hb;
    memcpy(&version, data + 8, 4), memcpy(&hb, data + 12, 4);
    CHECK_EQ_INT(version, 2);
    const uint32_t v1 = hb - 8, one = 1;
    uint8_t *old = malloc((size_t)n);
    memcpy(old, data, v1);
    memcpy(old + 8, &one, 4), memcpy(old + 12, &v1, 4);
    uint32_t crc = gb_crc32c(0, old, v1);
    memcpy(old + v1, &crc, 4);
    memcpy(old + v1 + 4, data + hb + 4, (size_t)(n - hb - 4));
    write_bytes(path, old, n - 8);
    CHECK_OK(gb_replay_restore(b, path, &err));
    gb_replay_stats_get(b, &sb);
    CHECK_EQ_INT(sb.first_samples, 0);
    CHECK(sb.inserts == sa.inserts && sb.samples == sa.samples && sb.size == sa.size);
    free(old);
    free(data);
    gb_replay_free(a);
    gb_replay_free(b);
    unlink(path);
}

/* ---- the digest of what a checkpoint wrote, while another thread inserts ------------------ */

typedef struct inserter {
    gb_replay *r;
    atomic_int stop;
    int64_t inserted;
} inserter;

static void *insert_until_stopped(void *arg)
{
    inserter *in = arg;
    gb_error err = {0};
    uint64_t id = 1000000;
    while (!atomic_load(&in->stop)) {
        int64_t idx;
        if (gb_replay_allocate(in->r, 1, &idx, 0, &err))
            continue; /* an eviction waits on an item the checkpoint pins: try again */
        util_write(in->r, idx, id++, 3);
        double p = 0.5 + (double)(id % 7);
        int64_t v = 0;
        if (gb_replay_commit(in->r, 1, &idx, &p, NULL, &v, &err) == 0)
            in->inserted++;
    }
    return NULL;
}

/* Twenty checkpoints of a replay another thread keeps inserting into: each one's
 * gb_replay_checkpoint_digest is what a replay restored from its file says (items and digest),
 * whether or not the replay changed while it streamed (the count that did is printed). */
static void test_checkpoint_digest(void)
{
    gb_error err = {0};
    gb_replay_options o;
    util_options(&o, 4096, 3);
    o.selector = GB_SELECTOR_WEIGHTED;
    o.timeout_s = 0;
    gb_replay *a;
    CHECK_OK(gb_replay_create(&o, &a, &err));
    uint64_t d = 0;
    CHECK(gb_replay_checkpoint_digest(a, &d) == -1); /* none yet */
    inserter in = {.r = a};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, insert_until_stopped, &in) == 0);
    char path[300];
    snprintf(path, sizeof path, "%s/digest.ckpt", dir);
    int changed = 0, agreed = 0;
    for (int k = 0; k < 20; k++) {
        uint64_t written, after, restored;
        CHECK_OK(gb_replay_checkpoint(a, path, &err));
        gb_replay_digest(a, &after);
        int64_t n = gb_replay_checkpoint_digest(a, &written);
        gb_replay *b;
        CHECK_OK(gb_replay_create(&o, &b, &err));
        CHECK_OK(gb_replay_restore(b, path, &err));
        agreed += gb_replay_digest(b, &restored) == n && restored == written;
        changed += after != written; /* items came while it streamed */
        gb_replay_free(b);
    }
    atomic_store(&in.stop, 1);
    pthread_join(th, NULL);
    CHECK_MSG(agreed == 20, "%d of 20 checkpoints' digests were what their files restored",
              agreed);
    printf("checkpoint digests: 20 of 20 as restored; the replay moved during %d of them "
           "(%lld inserts)\n", changed, (long long)in.inserted);
    gb_replay_free(a);
    unlink(path);
}

int main(void)
{
    /* tmpfs when there is one: the corruption test rewrites the file thousands of times. */
    snprintf(dir, sizeof dir, "%s/gearbox-test-ckpt-XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(dir))
        return 1;
    TEST_RUN(test_round_trip);
    TEST_RUN(test_corruption);
    TEST_RUN(test_version1);
    TEST_RUN(test_checkpoint_digest);
    rmdir(dir);
    return test_main_result();
}
