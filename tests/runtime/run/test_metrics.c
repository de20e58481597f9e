/* tests/runtime/run/test_metrics.c: the metrics stream between real processes over ipc://:
 * several workers report values and episodes; the collector sums, windows and rejects garbage. */
#include "runtime/run/contract.h"
#include "runtime/run/metrics.h"
#include "runtime/streams/wire.h"
#include "test.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

static char endpoint[256];

/* A worker process: reports env_steps = 1000*(index+1) and `index + 1` episodes of return
 * 10*(index+1), then a final report, and exits 0 on success. */
static int worker_main(int role, int index)
{
    void *ctx = zmq_ctx_new();
    gb_metrics_sender *s = NULL;
    gb_error err = {0};
    if (gb_metrics_sender_open(&s, ctx, endpoint, role, index, &err))
        return 1;
    for (int e = 0; e <= index; e++)
        gb_metrics_episode(s, 10.0f * (float)(index + 1), 5 + index);
    gb_metrics_set(s, "env_steps", 1000.0 * (index + 1));
    gb_metrics_set(s, "policy_version", index);
    int rc;
    while ((rc = gb_metrics_send(s, &err)) == GB_EAGAIN)
        usleep(1000);
    gb_metrics_set(s, "env_steps", 2000.0 * (index + 1)); /* a later report replaces values */
    while ((rc = gb_metrics_send(s, &err)) == GB_EAGAIN)
        usleep(1000);
    usleep(200000); /* let ZeroMQ deliver before the socket closes (linger 0) */
    gb_metrics_sender_close(s);
    zmq_ctx_term(ctx);
    return rc == 0 ? 0 : 1;
}

static void test_processes(void)
{
    char dir[] = "/tmp/gb_metrics_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(endpoint, sizeof endpoint, "ipc://%s/metrics", dir);
    /* Fork before this process has a ZeroMQ context: a child forked while the context's I/O
     * threads run may inherit a lock one of them held (the sanitizer allocator's, say) and hang.
     * The children's PUSH sockets reconnect until the collector binds. */
    fflush(stdout);
    fflush(stderr);
    pid_t pids[3];
    for (int i = 0; i < 3; i++) {
        pids[i] = fork();
        if (pids[i] == 0)
            _exit(worker_main(GB_ROLE_ACTOR, i));
    }
    void *ctx = zmq_ctx_new();
    gb_metrics_collector *c = NULL;
    gb_error err = {0};
    CHECK_OK(gb_metrics_collector_open(&c, ctx, endpoint, &err));
    if (!c) {
        for (int i = 0; i < 3; i++)
            kill(pids[i], SIGKILL);
        return;
    }
    /* Garbage from a live peer: a raw PUSH sending a non-gearbox message. */
    void *bad = zmq_socket(ctx, ZMQ_PUSH);
    zmq_connect(bad, endpoint);
    zmq_send(bad, "\xc1garbage", 8, 0);
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_METRICS, GB_ROLE_ACTOR, 9); /* no tensors: rejected */
    gb_wire_send(bad, NULL, 0, &h, NULL, 0, &err);

    int reports = 0;
    for (int tries = 0; tries < 3000 && reports < 6; tries++) { /* 30 s: sanitizer builds */
        int n = gb_metrics_collector_poll(c, 10, &err);
        CHECK(n >= 0);
        reports += n > 0 ? n : 0;
    }
    CHECK_EQ_INT(reports, 6);
    if (reports < 6) /* a stuck child fails the test instead of hanging it */
        for (int i = 0; i < 3; i++)
            kill(pids[i], SIGKILL);
    for (int i = 0; i < 3; i++) {
        int status = 0;
        waitpid(pids[i], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    for (int tries = 0; tries < 50 && gb_metrics_collector_rejected(c) < 2; tries++)
        gb_metrics_collector_poll(c, 10, &err);
    CHECK_EQ_INT(gb_metrics_collector_rejected(c), 2);
    CHECK_EQ_INT(gb_metrics_workers(c, GB_ROLE_ACTOR), 3);
    CHECK_NEAR(gb_metrics_sum(c, GB_ROLE_ACTOR, "env_steps"), 2000.0 * 6, 0);
    CHECK_NEAR(gb_metrics_get(c, GB_ROLE_ACTOR, 2, "env_steps"), 6000, 0);
    CHECK_NEAR(gb_metrics_max(c, GB_ROLE_ACTOR, "policy_version"), 2, 0);
    CHECK_NEAR(gb_metrics_min(c, GB_ROLE_ACTOR, "policy_version"), 0, 0);
    CHECK(isnan(gb_metrics_sum(c, GB_ROLE_TRAINER, "env_steps")));
    CHECK(isnan(gb_metrics_get(c, GB_ROLE_ACTOR, 0, "nope")));
    CHECK_EQ_INT(gb_metrics_episodes(c), 6);
    /* returns: 10 once, 20 twice, 30 three times */
    CHECK_NEAR(gb_metrics_return_mean(c), (10 + 40 + 90) / 6.0, 1e-9);
    CHECK_NEAR(gb_metrics_length_mean(c), (5 + 12 + 21) / 6.0, 1e-9);
    zmq_close(bad);
    gb_metrics_collector_close(c);
    zmq_ctx_term(ctx);
    char sock[300];
    snprintf(sock, sizeof sock, "%s/metrics", dir);
    unlink(sock);
    rmdir(dir);
}

static void test_window_keeps_last_100(void)
{
    /* In one process: 250 episodes, the window holds the last 100 (returns 150..249). */
    char dir[] = "/tmp/gb_metrics_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(endpoint, sizeof endpoint, "ipc://%s/m", dir);
    void *ctx = zmq_ctx_new();
    gb_metrics_collector *c = NULL;
    gb_metrics_sender *s = NULL;
    gb_error err = {0};
    CHECK_OK(gb_metrics_collector_open(&c, ctx, endpoint, &err));
    CHECK_OK(gb_metrics_sender_open(&s, ctx, endpoint, GB_ROLE_TRAINER, 0, &err));
    if (!c || !s)
        return;
    gb_metrics_set(s, "env_steps", 250); /* episodes are no longer than the steps taken */
    for (int i = 0; i < 250; i++) {
        gb_metrics_episode(s, (float)i, 1);
        if (i % 50 == 49)
            CHECK_OK(gb_metrics_send(s, &err));
    }
    int got = 0;
    for (int tries = 0; tries < 200 && got < 5; tries++)
        got += gb_metrics_collector_poll(c, 10, &err);
    CHECK_EQ_INT(got, 5);
    CHECK_EQ_INT(gb_metrics_episodes(c), 250);
    CHECK_NEAR(gb_metrics_return_mean(c), (150 + 249) / 2.0, 1e-9);
    gb_metrics_sender_close(s);
    gb_metrics_collector_close(c);
    zmq_ctx_term(ctx);
    char sock[300];
    snprintf(sock, sizeof sock, "%s/m", dir);
    unlink(sock);
    rmdir(dir);
}

/* Sends one report with env_steps = steps and gauge = gauge from a sender of incarnation inc;
 * returns once the collector took it. */
static void report_as(gb_metrics_collector *c, void *ctx, int inc, double steps, double gauge,
                      const int64_t *table, int rows)
{
    gb_error err = {0};
    gb_metrics_sender *s = NULL;
    CHECK_OK(gb_metrics_sender_open(&s, ctx, endpoint, GB_ROLE_ACTOR, 3, &err));
    if (!s)
        return;
    gb_metrics_sender_set_incarnation(s, inc);
    gb_metrics_set(s, "env_steps", steps);
    gb_metrics_set(s, "gauge", gauge);
    if (table)
        CHECK_OK(gb_metrics_set_table(s, table, rows, 4, &err));
    CHECK_OK(gb_metrics_send(s, &err));
    gb_metrics_sender_close(s);
    int got = 0;
    for (int tries = 0; tries < 300 && !got; tries++)
        got = gb_metrics_collector_poll(c, 10, &err);
    CHECK_EQ_INT(got, 1);
}

static void test_restarted_worker(void)
{
    /* A worker restarted three times: carried counters add up over its processes, gauges start
     * afresh, a late report from a dead process is ignored (also one from a retired process
     * before its successor reported), the last report time moves, and the table arrives
     * intact. */
    char dir[] = "/tmp/gb_metrics_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(endpoint, sizeof endpoint, "ipc://%s/m", dir);
    void *ctx = zmq_ctx_new();
    gb_metrics_collector *c = NULL;
    gb_error err = {0};
    CHECK_OK(gb_metrics_collector_open(&c, ctx, endpoint, &err));
    if (!c)
        return;
    const char *carry[] = {"env_steps"};
    CHECK_OK(gb_metrics_collector_carry(c, GB_ROLE_ACTOR, carry, 1, &err));
    CHECK(isnan(gb_metrics_last_report_s(c, GB_ROLE_ACTOR, 3)));
    CHECK_EQ_INT(gb_metrics_incarnation(c, GB_ROLE_ACTOR, 3), -1);
    report_as(c, ctx, 0, 100, 7, NULL, 0);
    double first = gb_metrics_last_report_s(c, GB_ROLE_ACTOR, 3);
    CHECK(!isnan(first));
    report_as(c, ctx, 0, 150, 8, NULL, 0);
    CHECK_NEAR(gb_metrics_get(c, GB_ROLE_ACTOR, 3, "env_steps"), 150, 0);
    CHECK_OK(gb_metrics_collector_issue(c, GB_ROLE_ACTOR, 3, 1, &err)); /* the launcher's */
    report_as(c, ctx, 1, 20, 9, NULL, 0); /* restarted: 150 carried */
    CHECK_EQ_INT(gb_metrics_incarnation(c, GB_ROLE_ACTOR, 3), 1);
    CHECK_NEAR(gb_metrics_get(c, GB_ROLE_ACTOR, 3, "env_steps"), 170, 0);
    CHECK_NEAR(gb_metrics_get(c, GB_ROLE_ACTOR, 3, "gauge"), 9, 0);
    report_as(c, ctx, 0, 999, 1, NULL, 0); /* queued by the dead process: ignored */
    CHECK_NEAR(gb_metrics_get(c, GB_ROLE_ACTOR, 3, "env_steps"), 170, 0);
    CHECK_EQ_INT((int)gb_metrics_collector_stale(c), 1);
    int64_t table[8] = {0, 2, 30, 31, 1, 0, 5, 5};
    CHECK_OK(gb_metrics_collector_issue(c, GB_ROLE_ACTOR, 3, 2, &err));
    report_as(c, ctx, 2, 5, 10, table, 2);
    CHECK_NEAR(gb_metrics_get(c, GB_ROLE_ACTOR, 3, "env_steps"), 175, 0);
    CHECK_NEAR(gb_metrics_sum(c, GB_ROLE_ACTOR, "env_steps"), 175, 0);
    CHECK(gb_metrics_last_report_s(c, GB_ROLE_ACTOR, 3) >= first);
    const int64_t *rows = NULL;
    int nrows = 0, ncols = 0;
    CHECK(gb_metrics_table(c, GB_ROLE_ACTOR, 3, &rows, &nrows, &ncols) == 1);
    CHECK_EQ_INT(nrows, 2);
    CHECK_EQ_INT(ncols, 4);
    for (int i = 0; rows && i < 8; i++)
        CHECK(rows[i] == table[i]);
    /* the launcher saw process 2 die and took its counts (5): a report it left on its way is
     * ignored, so the next process adds to those 5, not to what arrived late */
    gb_metrics_collector_retire(c, GB_ROLE_ACTOR, 3, 2);
    report_as(c, ctx, 2, 50, 11, NULL, 0);
    CHECK_NEAR(gb_metrics_get(c, GB_ROLE_ACTOR, 3, "env_steps"), 175, 0);
    CHECK_EQ_INT((int)gb_metrics_collector_stale(c), 2);
    CHECK_OK(gb_metrics_collector_issue(c, GB_ROLE_ACTOR, 3, 3, &err));
    report_as(c, ctx, 3, 1, 12, NULL, 0);
    CHECK_NEAR(gb_metrics_get(c, GB_ROLE_ACTOR, 3, "env_steps"), 176, 0);
    CHECK_EQ_INT(gb_metrics_incarnation(c, GB_ROLE_ACTOR, 3), 3);
    CHECK(gb_metrics_set_table(NULL, table, GB_METRICS_TABLE_MAX_ROWS + 1, 4, &err) == GB_EINVAL);
    gb_metrics_collector_close(c);
    zmq_ctx_term(ctx);
    char sock[300];
    snprintf(sock, sizeof sock, "%s/m", dir);
    unlink(sock);
    rmdir(dir);
}

/* Reports from a worker the run does not have (a forged role/index) are dropped and counted:
 * they can neither finish the run (episodes) nor grow the table of reporters. */
static void test_unexpected_senders_rejected(void)
{
    char dir[] = "/tmp/gb_metrics_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(endpoint, sizeof endpoint, "ipc://%s/u", dir);
    void *ctx = zmq_ctx_new();
    gb_metrics_collector *c = NULL;
    gb_error err = {0};
    CHECK_OK(gb_metrics_collector_open(&c, ctx, endpoint, &err));
    if (!c)
        return;
    CHECK_OK(gb_metrics_collector_expect(c, GB_ROLE_ACTOR, 2, &err));
    CHECK_OK(gb_metrics_collector_expect(c, GB_ROLE_TRAINER, 1, &err));
    CHECK(gb_metrics_collector_expect(c, GB_ROLE_POLICY, -1, &err) == GB_EINVAL);
    CHECK(gb_metrics_collector_expect(c, 99, 1, &err) == GB_EINVAL);
    /* senders: actor 1 (real), actor 2, policy 0 (role not in the run), 200 distinct forgeries */
    static const int who[][2] = {{GB_ROLE_ACTOR, 1}, {GB_ROLE_ACTOR, 2}, {GB_ROLE_POLICY, 0},
                                 {GB_ROLE_TRAINER, 1}, {GB_ROLE_PARAMS, 3}};
    int nsenders = (int)(sizeof who / sizeof who[0]);
    gb_metrics_sender *s[5 + 200] = {0};
    for (int i = 0; i < nsenders + 200; i++) {
        int role = i < nsenders ? who[i][0] : GB_ROLE_ACTOR;
        int index = i < nsenders ? who[i][1] : 1000 + i;
        CHECK_OK(gb_metrics_sender_open(&s[i], ctx, endpoint, role, index, &err));
        if (!s[i])
            return;
        for (int e = 0; e < GB_RUN_WINDOW; e++)
            gb_metrics_episode(s[i], 500.0f, 500);
        gb_metrics_set(s[i], "env_steps", 1e9);
        while (gb_metrics_send(s[i], &err) == GB_EAGAIN)
            usleep(1000);
    }
    int total = nsenders + 200;
    for (int tries = 0; tries < 3000; tries++) {
        gb_metrics_collector_poll(c, 10, &err);
        if ((int)gb_metrics_collector_unexpected(c) + (int)gb_metrics_episodes(c) / 100 +
                (int)gb_metrics_collector_rejected(c) >= total)
            break;
    }
    CHECK_EQ_INT(gb_metrics_collector_unexpected(c), total - 1);
    CHECK_EQ_INT(gb_metrics_episodes(c), GB_RUN_WINDOW); /* actor 1's only */
    CHECK_EQ_INT(gb_metrics_workers(c, GB_ROLE_ACTOR), 1);
    CHECK_EQ_INT(gb_metrics_workers(c, GB_ROLE_POLICY), 0);
    CHECK_NEAR(gb_metrics_sum(c, GB_ROLE_ACTOR, "env_steps"), 1e9, 0);
    for (int i = 0; i < total; i++)
        gb_metrics_sender_close(s[i]);
    gb_metrics_collector_close(c);
    zmq_ctx_term(ctx);
    char sock[300];
    snprintf(sock, sizeof sock, "%s/u", dir);
    unlink(sock);
    rmdir(dir);
}

/* Sends one report as (role, index) of incarnation inc: values names[i] = values[i], neps
 * episodes of return ret and length len; returns 1 when the collector took it, 0 when it refused
 * it, -1 when it counted it stale. */
static int claim(gb_metrics_collector *c, void *ctx, int role, int index, int inc, int nvalues,
                 const char *const *names, const double *values, int neps, float ret,
                 int64_t len)
{
    gb_error err = {0};
    gb_metrics_sender *s = NULL;
    CHECK_OK(gb_metrics_sender_open(&s, ctx, endpoint, role, index, &err));
    if (!s)
        return 0;
    gb_metrics_sender_set_incarnation(s, inc);
    for (int i = 0; i < nvalues; i++)
        gb_metrics_set(s, names[i], values[i]);
    for (int i = 0; i < neps; i++)
        gb_metrics_episode(s, ret, len);
    uint64_t refused = gb_metrics_collector_refused(c), stale = gb_metrics_collector_stale(c);
    CHECK_OK(gb_metrics_send(s, &err));
    gb_metrics_sender_close(s);
    for (int tries = 0; tries < 300; tries++) {
        int taken = gb_metrics_collector_poll(c, 10, &err); /* stale ones count as taken */
        if (gb_metrics_collector_refused(c) > refused)
            return 0;
        if (gb_metrics_collector_stale(c) > stale)
            return -1;
        if (taken > 0)
            return 1;
    }
    return 0;
}

/* Issue 35: a report is a claim. One from an incarnation the launcher did not issue, with a
 * non-finite or negative counter, a counter going back, or episodes longer than the steps its
 * worker took, is refused whole and counted; what the collector holds stays. */
static void test_reports_checked(void)
{
    char dir[] = "/tmp/gb_metrics_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(endpoint, sizeof endpoint, "ipc://%s/r", dir);
    void *ctx = zmq_ctx_new();
    gb_metrics_collector *c = NULL;
    gb_error err = {0};
    CHECK_OK(gb_metrics_collector_open(&c, ctx, endpoint, &err));
    if (!c)
        return;
    CHECK_OK(gb_metrics_collector_expect(c, GB_ROLE_ACTOR, 2, &err));
    const char *carry[] = {"env_steps", "chunks_sent"};
    CHECK_OK(gb_metrics_collector_carry(c, GB_ROLE_ACTOR, carry, 2, &err));
    gb_metrics_collector_bound_returns(c, 1.0);
    const char *steps_sent[] = {"env_steps", "chunks_sent", "gauge"};
    double honest[] = {1000, 10, 1};
    CHECK_EQ_INT(claim(c, ctx, GB_ROLE_ACTOR, 0, 0, 3, steps_sent, honest, 2, 20, 20), 1);
    CHECK_EQ_INT(gb_metrics_episodes(c), 2);
    CHECK_EQ_INT(gb_metrics_episode_steps(c), 40);
    double t0 = gb_metrics_last_report_s(c, GB_ROLE_ACTOR, 0);
    /* an incarnation never issued: refused, actor 0's heartbeat and values unmoved */
    CHECK_EQ_INT(claim(c, ctx, GB_ROLE_ACTOR, 0, 7, 3, steps_sent, honest, 0, 0, 0), 0);
    CHECK_EQ_INT(gb_metrics_incarnation(c, GB_ROLE_ACTOR, 0), 0);
    CHECK_NEAR(gb_metrics_last_report_s(c, GB_ROLE_ACTOR, 0), t0, 0);
    /* 100 episodes of 500 steps from a worker that took 1000: refused */
    CHECK_EQ_INT(claim(c, ctx, GB_ROLE_ACTOR, 0, 0, 3, steps_sent, honest, 100, 500, 500), 0);
    CHECK_EQ_INT(gb_metrics_episodes(c), 2);
    /* a return beyond length x max_abs_reward (1 here): refused */
    CHECK_EQ_INT(claim(c, ctx, GB_ROLE_ACTOR, 0, 0, 3, steps_sent, honest, 1, 50, 20), 0);
    /* counters: negative, NaN, going back: refused; a NaN gauge is "no value": taken */
    double negative[] = {1000, -1e18, 1}, nan_counter[] = {NAN, 10, 1}, back[] = {999, 10, 1};
    double nan_gauge[] = {1100, 11, NAN};
    CHECK_EQ_INT(claim(c, ctx, GB_ROLE_ACTOR, 0, 0, 3, steps_sent, negative, 0, 0, 0), 0);
    CHECK_EQ_INT(claim(c, ctx, GB_ROLE_ACTOR, 0, 0, 3, steps_sent, nan_counter, 0, 0, 0), 0);
    CHECK_EQ_INT(claim(c, ctx, GB_ROLE_ACTOR, 0, 0, 3, steps_sent, back, 0, 0, 0), 0);
    CHECK_NEAR(gb_metrics_get(c, GB_ROLE_ACTOR, 0, "chunks_sent"), 10, 0);
    CHECK_EQ_INT(claim(c, ctx, GB_ROLE_ACTOR, 0, 0, 3, steps_sent, nan_gauge, 0, 0, 0), 1);
    CHECK_NEAR(gb_metrics_get(c, GB_ROLE_ACTOR, 0, "env_steps"), 1100, 0);
    CHECK_EQ_INT((int)gb_metrics_collector_refused(c), 6);
    /* refused before actor 1 ever reported: no trace of it (not a worker silent since 0) */
    CHECK_EQ_INT(claim(c, ctx, GB_ROLE_ACTOR, 1, 3, 3, steps_sent, honest, 0, 0, 0), 0);
    CHECK(isnan(gb_metrics_last_report_s(c, GB_ROLE_ACTOR, 1)));
    CHECK_EQ_INT(gb_metrics_incarnation(c, GB_ROLE_ACTOR, 1), -1);
    CHECK_EQ_INT(gb_metrics_workers(c, GB_ROLE_ACTOR), 1);
    /* the launcher restarts actor 1: its incarnation 1 is taken, 0 is stale, 2 refused */
    CHECK_EQ_INT(claim(c, ctx, GB_ROLE_ACTOR, 1, 0, 3, steps_sent, honest, 0, 0, 0), 1);
    CHECK_OK(gb_metrics_collector_issue(c, GB_ROLE_ACTOR, 1, 1, &err));
    CHECK_EQ_INT(claim(c, ctx, GB_ROLE_ACTOR, 1, 0, 3, steps_sent, honest, 0, 0, 0), -1);
    CHECK_EQ_INT(claim(c, ctx, GB_ROLE_ACTOR, 1, 2, 3, steps_sent, honest, 0, 0, 0), 0);
    CHECK_EQ_INT(claim(c, ctx, GB_ROLE_ACTOR, 1, 1, 3, steps_sent, honest, 0, 0, 0), 1);
    CHECK_EQ_INT(gb_metrics_incarnation(c, GB_ROLE_ACTOR, 1), 1);
    CHECK_NEAR(gb_metrics_get(c, GB_ROLE_ACTOR, 1, "env_steps"), 2000, 0); /* carried */
    CHECK_EQ_INT((int)gb_metrics_collector_refused(c), 8);
    gb_metrics_collector_close(c);
    zmq_ctx_term(ctx);
    char sock[300];
    snprintf(sock, sizeof sock, "%s/r", dir);
    unlink(sock);
    rmdir(dir);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    TEST_RUN(test_processes);
    TEST_RUN(test_window_keeps_last_100);
    TEST_RUN(test_restarted_worker);
    TEST_RUN(test_unexpected_senders_rejected);
    TEST_RUN(test_reports_checked);
    return test_main_result();
}
