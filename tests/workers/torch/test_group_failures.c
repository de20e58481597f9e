/* tests/workers/torch/test_group_failures.c: the trainers' process group (workers/torch/group.h)
 * when a rank fails, across forked processes: a rendezvous that misses a rank, a peer that exits
 * and a peer that hangs make the calls fail with an error instead of hanging; and giving up
 * (gb_group_opts.abandon): a call and a rendezvous said gone end at once (also one that finds
 * every rank present in a group already given up), a given-up call's buffers are the caller's
 * again when it returns, and a peer killed in the middle of a large all-to-all never leaves the
 * other waiting out the timeout. */
#include "workers/torch/group_ranks.h"
#include "runtime/base/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- failures ------------------------------------------------------------------------------ */

enum { FAIL_TIMEOUT_S = 3 };

/* Rank 1 of 2 never comes: the rendezvous fails with a timeout. */
static int lonely_rank(gb_group_opts *o)
{
    if (o->rank == 1)
        return 0;
    gb_error err = {0};
    gb_group *g = NULL;
    int rc = gb_group_open(o, &g, &err);
    CHECK_MSG(rc == GB_ETIMEOUT, "open returned %d: %s", rc, err.msg);
    CHECK(g == NULL);
    gb_group_close(g);
    return test_failures_;
}

/* Rank 1 joins, then exits before the first collective: rank 0's allreduce fails (its
 * connection closes), and the group refuses every later call. */
static int exiting_rank(gb_group_opts *o)
{
    gb_error err = {0};
    gb_group *g = open_met(o, &err);
    if (!g)
        return 1;
    if (o->rank == 1)
        _exit(0);
    float x[1000] = {0};
    int rc = gb_group_allreduce(g, GB_DTYPE_FLOAT32, x, 1000, GB_GROUP_SUM, &err);
    CHECK_MSG(rc == GB_ECLOSED || rc == GB_ETIMEOUT, "allreduce returned %d: %s", rc, err.msg);
    CHECK_MSG(strstr(err.msg, "allreduce (rank 0 of 2)") != NULL, "%s", err.msg);
    fprintf(stderr, "peer exited: %s: %s\n", gb_strerror(rc), err.msg);
    CHECK(gb_group_barrier(g, &err) == GB_ECLOSED);
    gb_group_close(g);
    return test_failures_;
}

/* Rank 1 joins, then hangs (blocks on a pipe until rank 0 has checked its call): rank 0's
 * collective fails with a timeout. */
static int hang_pipe[2];

/* Opens the group; rank 1 then hangs until rank 0 writes to hang_pipe, and exits. Rank 0: the
 * group, NULL when the open failed. */
static gb_group *open_hung(gb_group_opts *o, gb_error *out)
{
    gb_error err = {0};
    gb_group *g = NULL;
    CHECK_OK(gb_group_open(o, &g, &err));
    *out = err;
    if (g && o->rank == 1) {
        char c;
        while (read(hang_pipe[0], &c, 1) < 0 && errno == EINTR)
            ;
        _exit(0);
    }
    return g;
}

static int hanging_rank(gb_group_opts *o)
{
    gb_error err = {0};
    gb_group *g = open_hung(o, &err);
    if (!g)
        return 1;
    uint8_t buf[64] = {0};
    int rc = gb_group_broadcast(g, buf, sizeof buf, 1, &err);
    CHECK_MSG(rc == GB_ETIMEOUT, "broadcast returned %d: %s", rc, err.msg);
    CHECK_MSG(strstr(err.msg, "broadcast (rank 0 of 2)") != NULL, "%s", err.msg);
    fprintf(stderr, "peer hung: %s: %s\n", gb_strerror(rc), err.msg);
    gb_group_close(g);
    CHECK(write(hang_pipe[1], "x", 1) == 1); /* rank 1 may go */
    return test_failures_;
}

/* ---- giving up (gb_group_opts.abandon) ---------------------------------------------------- */

enum { LONG_TIMEOUT_S = 30 };
static char gone_flag[300]; /* exists once the group is gone: what abandon asks */

static int gone(void *arg)
{
    (void)arg;
    return access(gone_flag, F_OK) == 0;
}

static void set_gone(void) /* async-signal-safe: called in children forked from ranks */
{
    int fd = open(gone_flag, O_CREAT | O_WRONLY, 0644);
    if (fd >= 0)
        close(fd);
}

/* Forks a child that says the group is gone 0.3 s from now; its pid. */
static pid_t gone_soon(void)
{
    pid_t child = fork();
    if (child == 0) {
        usleep(300 * 1000);
        set_gone();
        _exit(0);
    }
    return child;
}

/* Rank 1 joins and hangs; the group is said gone 0.3 s into rank 0's broadcast: the call gives
 * up at once (GB_ECLOSED, not the 30 s timeout), later calls are refused, and close returns
 * though the collective still waits in Gloo's thread. */
static int abandoned_call_rank(gb_group_opts *o)
{
    gb_error err = {0};
    gb_group *g = open_hung(o, &err);
    if (!g)
        return 1;
    pid_t child = gone_soon(); /* while rank 0 waits */
    uint8_t buf[64] = {0};
    double t0 = gb_now_s();
    int rc = gb_group_broadcast(g, buf, sizeof buf, 1, &err);
    double waited = gb_now_s() - t0;
    CHECK_MSG(rc == GB_ECLOSED && strstr(err.msg, "given up"), "broadcast returned %d: %s", rc,
              err.msg);
    CHECK_MSG(waited < LONG_TIMEOUT_S / 2, "gave up after %.1f s", waited);
    fprintf(stderr, "abandoned: gave up %.2f s into the call: %s\n", waited, err.msg);
    CHECK(gb_group_failed(g) && gb_group_barrier(g, &err) == GB_ECLOSED);
    t0 = gb_now_s();
    gb_group_close(g);
    fprintf(stderr, "abandoned: closed in %.3f s\n", gb_now_s() - t0);
    CHECK(gb_now_s() - t0 < LONG_TIMEOUT_S / 2);
    CHECK(write(hang_pipe[1], "x", 1) == 1);
    waitpid(child, NULL, 0);
    return test_failures_;
}

/* Rank 1 joins and hangs; the group is said gone 0.3 s into rank 0's 2 MB all-to-all: the call
 * gives up with its own part copied and nothing from rank 1, and Gloo's threads touch neither
 * buffer after it returned (Gloo's own local copy did, into freed memory, before group.cpp
 * gave it an empty own part): what the caller writes there stays, and they are free at once. */
static int abandoned_alltoall_rank(gb_group_opts *o)
{
    gb_error err = {0};
    gb_group *g = open_hung(o, &err);
    if (!g)
        return 1;
    pid_t child = gone_soon(); /* while rank 0 waits */
    const size_t part = 1u << 20;
    uint8_t *in = malloc(2 * part), *out = malloc(2 * part);
    memset(in, 0x22, 2 * part);
    memset(out, 0x5a, 2 * part);
    size_t sizes[2] = {part, part};
    int rc = gb_group_alltoall(g, in, sizes, out, sizes, &err);
    CHECK_MSG(rc == GB_ECLOSED && strstr(err.msg, "given up"), "alltoall returned %d: %s", rc,
              err.msg);
    size_t wrong = 0;
    for (size_t i = 0; i < 2 * part; i++)
        wrong += out[i] != (i < part ? 0x22 : 0x5a);
    CHECK_MSG(wrong == 0, "%zu bytes of the given-up all-to-all's out are not its own part or "
              "untouched", wrong);
    memset(in, 0x11, 2 * part);
    memset(out, 0xa5, 2 * part);
    usleep(200 * 1000); /* time for a collective still at work to write */
    size_t changed = 0;
    for (size_t i = 0; i < 2 * part; i++)
        changed += (in[i] != 0x11) + (out[i] != 0xa5);
    CHECK_MSG(changed == 0, "%zu bytes of the caller's buffers changed after the call", changed);
    free(in);
    free(out);
    gb_group_close(g);
    CHECK(write(hang_pipe[1], "x", 1) == 1);
    waitpid(child, NULL, 0);
    return test_failures_;
}

/* Rank 1 never comes; the group is said gone 0.3 s into rank 0's rendezvous: the open gives up
 * (GB_ECLOSED) instead of waiting out the timeout. */
static int abandoned_open_rank(gb_group_opts *o)
{
    if (o->rank == 1) {
        usleep(300 * 1000);
        set_gone();
        return 0;
    }
    gb_error err = {0};
    gb_group *g = NULL;
    double t0 = gb_now_s();
    int rc = gb_group_open(o, &g, &err);
    CHECK_MSG(rc == GB_ECLOSED && g == NULL, "open returned %d: %s", rc, err.msg);
    CHECK_MSG(gb_now_s() - t0 < LONG_TIMEOUT_S / 2, "gave up after %.1f s", gb_now_s() - t0);
    return test_failures_;
}

/* The group was given up before rank 1 came (a trainer stopped while the others moved on):
 * rank 0 said it was here and was killed as it waited, and the group was said gone. Rank 1,
 * arriving after, finds both ranks present: its open gives up at once (GB_ECLOSED) instead of
 * waiting out Gloo's rendezvous for rank 0's address. */
static int late_to_gone_rank(gb_group_opts *o)
{
    gb_error err = {0};
    gb_group *g = NULL;
    if (o->rank == 0) {
        if (fork() == 0) { /* the killer: the group is gone 0.3 s into rank 0's wait */
            usleep(300 * 1000);
            set_gone();
            kill(getppid(), SIGKILL);
            _exit(0);
        }
        gb_group_open(o, &g, &err);
        return 1; /* not reached: killed in the open */
    }
    usleep(800 * 1000);
    double t0 = gb_now_s();
    int rc = gb_group_open(o, &g, &err);
    CHECK_MSG(rc == GB_ECLOSED && g == NULL, "open returned %d: %s", rc, err.msg);
    CHECK_MSG(gb_now_s() - t0 < LONG_TIMEOUT_S / 2, "gave up after %.1f s", gb_now_s() - t0);
    gb_group_close(g);
    return test_failures_;
}

/* Rank 1 is killed in the middle of a 64 MB all-to-all (it says so first): rank 0's call ends,
 * closed by its peer or given up, and never waits out the timeout. Gloo can leave a send that
 * did not fit the socket's buffer waiting after its pair failed (workers/torch/group.cpp). */
static int killed_in_alltoall_rank(gb_group_opts *o)
{
    gb_error err = {0};
    gb_group *g = open_met(o, &err);
    if (!g)
        return 1;
    const size_t part = 32u << 20;
    uint8_t *in = calloc(2, part), *out = calloc(2, part);
    size_t sizes[2] = {part, part};
    if (o->rank == 1 && fork() == 0) { /* the killer: rank 1 dies 20 ms into the call */
        usleep(20 * 1000);
        set_gone();
        kill(getppid(), SIGKILL);
        _exit(0);
    }
    double t0 = gb_now_s();
    int rc = gb_group_alltoall(g, in, sizes, out, sizes, &err);
    if (o->rank == 0) {
        fprintf(stderr, "peer killed in a 64 MB all-to-all: %s after %.2f s: %s\n",
                gb_strerror(rc), gb_now_s() - t0, err.msg);
        CHECK_MSG(rc == GB_ECLOSED, "alltoall returned %d: %s", rc, err.msg);
    }
    gb_group_close(g);
    free(in);
    free(out);
    return o->rank == 0 ? test_failures_ : 0;
}

static gb_group_opts abandon_opts(void)
{
    unlink(gone_flag);
    gb_group_opts o = file_opts(2, LONG_TIMEOUT_S);
    o.abandon = gone;
    return o;
}

static void test_abandon(void)
{
    snprintf(gone_flag, sizeof gone_flag, "%s/gone", group_dir);
    CHECK(pipe(hang_pipe) == 0);
    CHECK_EQ_INT(run_ranks(abandon_opts(), abandoned_call_rank, 60), 0);
    close(hang_pipe[0]);
    close(hang_pipe[1]);
    CHECK(pipe(hang_pipe) == 0);
    CHECK_EQ_INT(run_ranks(abandon_opts(), abandoned_alltoall_rank, 60), 0);
    close(hang_pipe[0]);
    close(hang_pipe[1]);
    CHECK_EQ_INT(run_ranks(abandon_opts(), abandoned_open_rank, 60), 0);
    /* rank 0, killed, counts as failed */
    CHECK_EQ_INT(run_ranks(abandon_opts(), late_to_gone_rank, 60), 1);
    /* the kill lands at different points of the transfer; rank 1, killed, counts as failed */
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(run_ranks(abandon_opts(), killed_in_alltoall_rank, 60), 1);
    unlink(gone_flag);
}

static void test_failures(void)
{
    /* limits: the timeout plus a generous margin for a loaded machine */
    CHECK_EQ_INT(run_ranks(file_opts(2, FAIL_TIMEOUT_S), lonely_rank, 60), 0);
    CHECK_EQ_INT(run_ranks(file_opts(2, FAIL_TIMEOUT_S), exiting_rank, 60), 0);
    CHECK(pipe(hang_pipe) == 0);
    CHECK_EQ_INT(run_ranks(file_opts(2, FAIL_TIMEOUT_S), hanging_rank, 60), 0);
    close(hang_pipe[0]);
    close(hang_pipe[1]);
}

int main(void)
{
    /* as in `gearbox worker`: a write to a peer that left is an error return, not a SIGPIPE (one
     * CI run lost rank 0 of test_failures' exiting peer to it: signal 13) */
    signal(SIGPIPE, SIG_IGN);
    if (!mkdtemp(group_dir)) {
        perror("mkdtemp");
        return 1;
    }
    TEST_RUN(test_failures);
    TEST_RUN(test_abandon);
    ranks_remove_dir(group_dir);
    return test_main_result();
}
