/* tests/replay/test_replay_remote.c: a writer in another process (fork + the segment's descriptor
 * by /proc path) inserts through the writer port while this process samples, collects and checks
 * every row; the rate limiter blocks and wakes the remote writer; a stopped port answers
 * GB_ECLOSED. */
#include "replay/replay.h"
#include "runtime/base/clock.h"
#include "test.h"
#include "util.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { STEPS = 8, ITEMS = 3000 };

static void remote_write(gb_replay_writer *w, int64_t idx, uint64_t id)
{
    float *obs = gb_replay_writer_block(w, 0, idx);
    int32_t *act = gb_replay_writer_block(w, 1, idx);
    float *boot = gb_replay_writer_block(w, 3, idx);
    for (int64_t t = 0; t < STEPS; t++) {
        for (int j = 0; j < 4; j++)
            obs[t * 4 + j] = util_obs(id, t, j);
        act[t] = util_act(id, t);
    }
    *(uint64_t *)gb_replay_writer_block(w, 2, idx) = id;
    for (int j = 0; j < 4; j++)
        boot[j] = util_obs(id, STEPS, j);
}

/* The child: ITEMS committed items in batches of 1..4, every 10th batch aborted first. */
static int child(pid_t parent, int fd)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)parent, fd);
    int myfd = open(path, O_RDWR | O_CLOEXEC);
    if (myfd < 0)
        return 2;
    gb_error err = {0};
    gb_replay_writer *w;
    if (gb_replay_writer_open(&w, myfd, 10, &err) != 0) {
        fprintf(stderr, "child: %s\n", err.msg);
        return 3;
    }
    close(myfd);
    uint64_t id = 1;
    int64_t committed = 0, batch_no = 0;
    while (committed < ITEMS) {
        int64_t n = 1 + batch_no % 4, idx[4];
        if (n > ITEMS - committed)
            n = ITEMS - committed;
        if (gb_replay_writer_allocate(w, n, idx, -1, &err) != 0) {
            fprintf(stderr, "child allocate: %s\n", err.msg);
            return 4;
        }
        if (batch_no++ % 10 == 9) {
            if (gb_replay_writer_abort(w, n, idx, &err) != 0)
                return 5;
            continue;
        }
        int32_t len[4];
        int64_t ver[4];
        for (int64_t k = 0; k < n; k++) {
            remote_write(w, idx[k], id);
            len[k] = 1 + (int32_t)(id % STEPS);
            ver[k] = (int64_t)id;
            id++;
        }
        if (gb_replay_writer_commit(w, n, idx, NULL, len, ver, &err) != 0) {
            fprintf(stderr, "child commit: %s\n", err.msg);
            return 6;
        }
        committed += n;
    }
    /* A commit of blocks not being written is refused with the owner's message. */
    int64_t bogus = 0;
    if (gb_replay_writer_commit(w, 1, &bogus, NULL, NULL, NULL, &err) != GB_EINVAL ||
        !strstr(err.msg, "not being written"))
        return 7;
    if (gb_replay_writer_allocate(w, 300, &bogus, -1, &err) != GB_EINVAL)
        return 8;
    gb_replay_writer_close(w);
    return 0;
}

static void test_remote_writer(void)
{
    gb_error err = {0};
    gb_replay_options o;
    util_options(&o, 64, STEPS);
    o.min_size = 4;
    o.samples_per_insert = 1; /* the remote writer must wait for this process's samples */
    o.error_buffer = 40;
    gb_replay *r;
    CHECK_OK(gb_replay_create(&o, &r, &err));
    size_t bytes;
    int fd = gb_replay_shm_fd(r, &bytes);
    /* Not served yet: a writer is told so at once. */
    gb_replay_writer *w;
    CHECK_OK(gb_replay_writer_open(&w, fd, 1, &err));
    int64_t idx;
    CHECK(gb_replay_writer_allocate(w, 1, &idx, 0, &err) == GB_ECLOSED);
    CHECK_OK(gb_replay_serve_writers(r, &err));
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        _exit(child(parent, fd));
    /* Sample nothing until the writer is held back: with samples_per_insert 1 and error buffer
     * 40 it can insert about 44 items ahead, then its allocate waits in the owner. */
    gb_replay_stats st;
    /* A deadline, not a count: on a loaded machine the child may take a while to start. */
    for (double end = gb_now_s() + 60; gb_now_s() < end;) {
        gb_replay_stats_get(r, &st);
        if (st.insert_waits > 0)
            break;
        gb_sleep_ms(1);
    }
    CHECK(st.insert_waits > 0 && st.inserts <= 45);
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, 8, &err));
    static float obs[8 * STEPS * 4];
    static int32_t act[8 * STEPS];
    uint64_t ids[8];
    int32_t lengths[8];
    int64_t bad = 0, sampled = 0;
    int status = 0;
    for (;;) {
        gb_replay_request q = gb_replay_request_default(8);
        q.timeout_s = 0.05;
        int rc = gb_replay_sample(r, &q, &s, &err);
        if (rc == 0) {
            gb_replay_dst d[3] = {{0, obs, sizeof obs}, {1, act, sizeof act}, {2, ids, sizeof ids}};
            CHECK_OK(gb_replay_collect(r, &s, d, 3, lengths, &err));
            for (int64_t k = 0; k < s.n; k++) {
                int32_t valid = 1 + (int32_t)(ids[k] % STEPS);
                if (lengths[k] != valid ||
                    !util_check_rows(obs + k * STEPS * 4, act + k * STEPS, ids[k], 0, STEPS, valid))
                    bad++;
            }
            sampled += s.n;
            gb_replay_release(r, &s);
        } else {
            CHECK(rc == GB_ETIMEOUT);
        }
        if (waitpid(pid, &status, WNOHANG) == pid)
            break;
    }
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    CHECK_EQ_INT(bad, 0);
    gb_replay_stats_get(r, &st);
    fprintf(stderr, "  remote: %llu inserted, %lld sampled, %llu aborted, %llu insert waits\n",
            (unsigned long long)st.inserts, (long long)sampled, (unsigned long long)st.aborted,
            (unsigned long long)st.insert_waits);
    CHECK(st.inserts == ITEMS && st.aborted > 0 && st.writing == 0 && sampled > 0);
    gb_replay_stop_writers(r);
    CHECK(gb_replay_writer_allocate(w, 1, &idx, 0, &err) == GB_ECLOSED);
    gb_replay_writer_close(w);
    gb_replay_selection_free(&s);
    gb_replay_free(r);
}

int main(void)
{
    TEST_RUN(test_remote_writer);
    return test_main_result();
}
