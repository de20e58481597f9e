/* tests/runtime/streams/test_message_bounds.c: the memory a flooding peer costs the launcher's
 * endpoints and a policy: another process sends the registry multipart messages of thousands of
 * frames each under the frame bound, the metrics collector reports of near the largest frame
 * and a policy's inference server requests of its largest frame, while they are not being
 * read. The attacked side must refuse and count them, its resident memory must stay within a
 * bound said at each test, and a well-behaved peer beside must go on being served. */
#include "hostile_peer.h"
#include "runtime/base/clock.h"
#include "runtime/run/metrics.h"
#include "runtime/streams/inference.h"
#include "runtime/streams/registry.h"
#include "runtime/streams/wire.h"
#include "runtime/streams/wire_messages.h"
#include "streams_test.h"
#include "test.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_MS 20000

/* Resets VmHWM to the present VmRSS (Linux: clear_refs 5), so each test sees its own peak. */
static void reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

/* ---- the attacker: a child process forked before any thread or ZeroMQ context exists -------- */

enum { ATTACK_REGISTRY, ATTACK_METRICS, ATTACK_INFERENCE, ATTACKS };
#define REG_MESSAGES 4     /* registry: messages of ... */
#define REG_FRAMES 2000    /* ... this many frames of ... */
#define REG_FRAME 60000    /* ... 60 KB each, under its frame bound (64 KiB of header slack) */
#define MET_MESSAGES 40    /* metrics: reports of one table frame of ~8 MB */
#define INF_REQUESTS 400   /* inference: requests of one row of ... */
#define INF_FLOATS 262144  /* ... 1 MiB of observation each (the server's frame bound) */

static void attack(int kind, const char *ep)
{
    void *zctx; /* linger: every message out before the child goes; no bound on its queue */
    void *s = hostile_socket(&zctx, kind == ATTACK_METRICS ? ZMQ_PUSH : ZMQ_DEALER, ep, -1, 0);
    gb_error err = {0};
    gb_wire_header h;
    unsigned char hb[GB_WIRE_HEADER_MAX];
    size_t hl;
    if (kind == ATTACK_REGISTRY) {
        static char frame[REG_FRAME];
        gb_wire_header_init(&h, GB_MSG_REG_REGISTER, GB_ROLE_ACTOR, 0);
        gb_wire_encode_header(&h, hb, sizeof hb, &hl, &err);
        for (int m = 0; m < REG_MESSAGES; m++) {
            zmq_send(s, hb, hl, ZMQ_SNDMORE);
            for (int i = 0; i < REG_FRAMES; i++)
                zmq_send(s, frame, sizeof frame, i + 1 < REG_FRAMES ? ZMQ_SNDMORE : 0);
        }
    } else if (kind == ATTACK_INFERENCE) {
        int64_t shape[2] = {1, INF_FLOATS};
        float *obs = calloc(INF_FLOATS, sizeof *obs);
        gb_wire_header_init(&h, GB_MSG_INFER_REQUEST, GB_ROLE_ACTOR, 0);
        h.ntensors = 1;
        gb_wire_set_tensor(&h.tensors[0], "obs", GB_DTYPE_FLOAT32, 2, shape, &err);
        for (int m = 0; m < INF_REQUESTS; m++) {
            h.seq = (uint64_t)m + 1;
            gb_wire_payload p = {obs, NULL, NULL, NULL};
            if (gb_wire_send(s, NULL, 0, &h, &p, 0, &err))
                _exit(1);
        }
        free(obs);
    } else {
        int64_t shape[2] = {GB_METRICS_TABLE_MAX_ROWS - 1, GB_METRICS_TABLE_MAX_COLS};
        size_t bytes = (size_t)shape[0] * (size_t)shape[1] * 8;
        void *table = calloc(1, bytes);
        gb_wire_header_init(&h, GB_MSG_METRICS, GB_ROLE_ACTOR, 0);
        h.ntensors = 1;
        gb_wire_set_tensor(&h.tensors[0], "table", GB_DTYPE_INT64, 2, shape, &err);
        gb_wire_encode_header(&h, hb, sizeof hb, &hl, &err);
        for (int m = 0; m < MET_MESSAGES; m++) {
            zmq_send(s, hb, hl, ZMQ_SNDMORE);
            zmq_send(s, table, bytes, 0);
        }
        free(table);
    }
    zmq_close(s); /* linger: every message out before the child goes */
    zmq_ctx_term(zctx);
    _exit(0);
}

typedef struct attacker {
    pid_t pid;
    int fd; /* write the endpoint here to start it */
} attacker;

static attacker attackers[ATTACKS];

static void fork_attacker(int kind)
{
    int fds[2];
    if (pipe(fds) != 0)
        exit(1);
    pid_t pid = fork();
    if (pid == 0) {
        char ep[256] = {0};
        close(fds[1]);
        if (read(fds[0], ep, sizeof ep - 1) <= 0)
            _exit(1);
        attack(kind, ep);
    }
    close(fds[0]);
    attackers[kind] = (attacker){pid, fds[1]};
}

/* Starts the attacker of kind on ep (it sends everything, then exits). Returns 1 on success. */
static int start_attacker(int kind, const char *ep)
{
    int ok = write(attackers[kind].fd, ep, strlen(ep)) == (ssize_t)strlen(ep);
    close(attackers[kind].fd);
    return ok;
}

/* 1 once the attacker of kind has sent everything and exited 0, else 0 (does not block). */
static int attacker_done(int kind)
{
    int st = 0;
    if (attackers[kind].pid <= 0)
        return 1;
    if (waitpid(attackers[kind].pid, &st, WNOHANG) != attackers[kind].pid)
        return 0;
    attackers[kind].pid = 0;
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return 1;
}

/* ---- the registry ------------------------------------------------------------------------- */

typedef struct reg_thread {
    gb_registry_server *s;
    atomic_int *stop;
} reg_thread;

static void *reg_run(void *arg)
{
    reg_thread *t = arg;
    gb_error err;
    gb_registry_server_run(t->s, t->stop, &err);
    return NULL;
}

static void test_registry_flood(void)
{
    gb_error err;
    char dir[64], ep[128];
    st_tmpdir(dir, sizeof dir);
    snprintf(ep, sizeof ep, "ipc://%s/registry", dir);
    void *ctx = zmq_ctx_new();
    gb_registry_server_opts so = {.endpoint = ep, .max_ttl_ms = 10000};
    gb_registry_server *rs;
    CHECK_OK(gb_registry_server_open(&rs, ctx, &so, &err));
    reset_peak();
    long long hwm0 = test_vm_bytes("VmHWM:"), rss0 = test_vm_bytes("VmRSS:");
    /* the attacker sends everything while the registry is not read (the launcher busy) */
    CHECK(start_attacker(ATTACK_REGISTRY, ep));
    TEST_WAIT_UNTIL(attacker_done(ATTACK_REGISTRY), WAIT_MS);
    TEST_WAIT_UNTIL(gb_registry_server_poll(rs, 10, &err) == 0 &&
                        gb_registry_server_rejected(rs) >= REG_MESSAGES,
                    WAIT_MS);
    long long hwm1 = test_vm_bytes("VmHWM:"), rss1 = test_vm_bytes("VmRSS:");
    fprintf(stderr, "  registry: %d messages of %d x %d B: %llu rejected; RSS %.1f -> %.1f MB, "
            "peak %.1f -> %.1f MB\n", REG_MESSAGES, REG_FRAMES, REG_FRAME,
            (unsigned long long)gb_registry_server_rejected(rs), rss0 / 1e6, rss1 / 1e6,
            hwm0 / 1e6, hwm1 / 1e6);
    CHECK_EQ_INT(gb_registry_server_rejected(rs), REG_MESSAGES);
    /* What was refused is given back: the peak is what the peer sent while the registry was
     * not read (ZeroMQ holds a multipart message whole, however many frames it has), but
     * once the messages are refused the RSS comes back within 32 MB of where it was (the
     * allocator's and ZeroMQ's own slack); before, all 480 MB stayed. */
    CHECK_MSG(rss1 - rss0 < 32000000, "the registry kept the memory of refused messages");
    /* a well-behaved worker is served beside it */
    gb_registry_client_opts co = {.endpoint = ep, .timeout_ms = 2000, .ttl_ms = 5000,
                                  .role = GB_ROLE_POLICY};
    gb_registry_client *c = NULL;
    CHECK_OK(gb_registry_client_open(&c, ctx, &co, &err));
    atomic_int stop;
    atomic_init(&stop, 0);
    pthread_t th;
    reg_thread t = {rs, &stop};
    CHECK(pthread_create(&th, NULL, reg_run, &t) == 0);
    char found[256] = "";
    CHECK_OK(gb_registry_register(c, "policy/0/inference", "ipc:///x/policy-0", &err));
    CHECK_OK(gb_registry_lookup(c, "policy/0/inference", found, sizeof found, 2000, &err));
    CHECK(strcmp(found, "ipc:///x/policy-0") == 0);
    gb_registry_client_close(c);
    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    gb_registry_server_close(rs);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

/* ---- the metrics collector ------------------------------------------------------------------ */

static void test_metrics_flood(void)
{
    gb_error err;
    char dir[64], ep[128];
    st_tmpdir(dir, sizeof dir);
    snprintf(ep, sizeof ep, "ipc://%s/metrics", dir);
    void *ctx = zmq_ctx_new();
    gb_metrics_collector *mc;
    CHECK_OK(gb_metrics_collector_open(&mc, ctx, ep, &err));
    reset_peak();
    long long hwm0 = test_vm_bytes("VmHWM:"), rss0 = test_vm_bytes("VmRSS:");
    /* the attacker sends while the collector is not read for a second (the launcher busy),
     * then is read every 10 ms until everything was refused */
    CHECK(start_attacker(ATTACK_METRICS, ep));
    struct timespec busy = {1, 0};
    nanosleep(&busy, NULL);
    TEST_WAIT_UNTIL(gb_metrics_collector_poll(mc, 10, &err) >= 0 &&
                        attacker_done(ATTACK_METRICS) &&
                        gb_metrics_collector_rejected(mc) >= MET_MESSAGES,
                    WAIT_MS);
    long long hwm1 = test_vm_bytes("VmHWM:"), rss1 = test_vm_bytes("VmRSS:");
    fprintf(stderr, "  metrics: %d reports of ~8 MB: %llu rejected; RSS %.1f -> %.1f MB, "
            "peak %.1f -> %.1f MB\n", MET_MESSAGES,
            (unsigned long long)gb_metrics_collector_rejected(mc), rss0 / 1e6, rss1 / 1e6,
            hwm0 / 1e6, hwm1 / 1e6);
    /* At most 16 reports of one peer wait unread (the collector's receive queue), each at most
     * one table of METRICS_MAX_FRAME (8 MB): 128 MB, and 64 MB of slack for the allocator,
     * ZeroMQ and the one report being read; before, all 40 (320 MB) could wait. Refused, they
     * are given back: the RSS comes back within 32 MB (before, 240 MB stayed). */
    CHECK_MSG(hwm1 - rss0 < 16 * 8400000LL + 64000000, "the collector queued a flood");
    CHECK_MSG(rss1 - rss0 < 32000000, "the collector kept the memory of refused reports");
    /* a well-behaved worker's report is taken beside it */
    gb_metrics_sender *ms;
    CHECK_OK(gb_metrics_sender_open(&ms, ctx, ep, GB_ROLE_ACTOR, 0, &err));
    CHECK(gb_metrics_set(ms, "env_steps", 7) == 0);
    CHECK_OK(gb_metrics_send(ms, &err));
    TEST_WAIT_UNTIL(gb_metrics_collector_poll(mc, 5, &err) >= 0 &&
                        gb_metrics_get(mc, GB_ROLE_ACTOR, 0, "env_steps") == 7,
                    WAIT_MS);
    CHECK(gb_metrics_get(mc, GB_ROLE_ACTOR, 0, "env_steps") == 7);
    gb_metrics_sender_close(ms);
    gb_metrics_collector_close(mc);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

/* ---- the inference server (a policy worker) -------------------------------------------------- */

static float reply_out[1];

static int first_plus_one(void *user, const gb_infer_batch *in, gb_infer_outputs *out,
                          gb_error *err)
{
    (void)user;
    reply_out[0] = ((const float *)in->inputs[0].data)[0] + 1;
    int64_t shape[1] = {in->rows};
    out->ntensors = 1;
    out->data[0] = reply_out;
    return gb_wire_set_tensor(&out->descs[0], "value", GB_DTYPE_FLOAT32, 1, shape, err);
}

/* A peer sends INF_REQUESTS requests of 1 MiB while the policy is busy (not reading for a
 * second) and reads no reply. At most 64 of them wait (what a client of gearbox keeps in flight at
 * most: INFER_MAX_OUTSTANDING), 64 MiB, and 64 MB of slack; before, ZeroMQ queued 1000 a peer
 * (all 400 MiB here). A well-behaved client is served after. */
static void test_inference_flood(void)
{
    gb_error err;
    char dir[64], ep[128];
    st_tmpdir(dir, sizeof dir);
    snprintf(ep, sizeof ep, "ipc://%s/policy", dir);
    void *ctx = zmq_ctx_new();
    gb_infer_server_opts so = {.endpoint = ep, .max_batch_rows = 1, .max_wait_ms = 0,
                               .role = GB_ROLE_POLICY, .fn = first_plus_one,
                               .max_frame = INF_FLOATS * sizeof(float)};
    gb_infer_server *s;
    CHECK_OK(gb_infer_server_open(&s, ctx, &so, &err));
    reset_peak();
    long long rss0 = test_vm_bytes("VmRSS:");
    CHECK(start_attacker(ATTACK_INFERENCE, ep));
    struct timespec busy = {1, 0};
    nanosleep(&busy, NULL);
    TEST_WAIT_UNTIL(gb_infer_server_poll(s, 10, &err) >= 0 && attacker_done(ATTACK_INFERENCE) &&
                        gb_infer_server_get_stats(s).received >= INF_REQUESTS,
                    WAIT_MS);
    gb_infer_server_stats st = gb_infer_server_get_stats(s);
    long long hwm1 = test_vm_bytes("VmHWM:"), rss1 = test_vm_bytes("VmRSS:");
    fprintf(stderr, "  inference: %d requests of 1 MiB, replies unread: %llu served, %llu "
            "unsent; RSS %.1f -> %.1f MB, peak %.1f MB\n", INF_REQUESTS,
            (unsigned long long)st.requests, (unsigned long long)st.unsent, rss0 / 1e6,
            rss1 / 1e6, hwm1 / 1e6);
    CHECK_EQ_INT(st.received, INF_REQUESTS);
    CHECK_MSG(hwm1 - rss0 < 64LL * (INF_FLOATS * 4 + 65536) + 64000000,
              "the policy queued a flood");
    const char *eps[1] = {ep};
    gb_infer_client_opts co = {.endpoints = eps, .n_endpoints = 1, .timeout_ms = WAIT_MS,
                               .role = GB_ROLE_ACTOR, .index = 1};
    gb_infer_client *c;
    CHECK_OK(gb_infer_client_open(&c, ctx, &co, &err));
    float x[4] = {10, 0, 0, 0};
    gb_tensor_desc d;
    int64_t shape[2] = {1, 4};
    CHECK_OK(gb_wire_set_tensor(&d, "obs", GB_DTYPE_FLOAT32, 2, shape, &err));
    const void *data[1] = {x};
    uint64_t id;
    CHECK_OK(gb_infer_client_send(c, &d, data, 1, &id, &err));
    gb_wire_msg reply;
    gb_wire_msg_init(&reply);
    int rc = GB_EAGAIN;
    for (double end = gb_now_s() + WAIT_MS / 1000.0; rc == GB_EAGAIN && gb_now_s() < end;) {
        gb_infer_server_poll(s, 5, &err);
        rc = gb_infer_client_recv(c, &reply, 5, &err);
    }
    CHECK_MSG(rc == 0 && ((const float *)gb_wire_msg_tensor(&reply, 0).data)[0] == 11,
              "the well-behaved client was not served: %d %s", rc, err.msg);
    gb_wire_msg_release(&reply);
    gb_infer_client_close(c);
    gb_infer_server_close(s);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

/* Each test in a process of its own, forked before any thread exists (so that one test's
 * memory does not hide the next one's), with its attacker forked from it in turn. */
static int run_alone(int kind)
{
    pid_t pid = fork();
    if (pid == 0) {
        fork_attacker(kind);
        if (kind == ATTACK_REGISTRY)
            TEST_RUN(test_registry_flood);
        else if (kind == ATTACK_METRICS)
            TEST_RUN(test_metrics_flood);
        else
            TEST_RUN(test_inference_flood);
        if (attackers[kind].pid > 0) {
            kill(attackers[kind].pid, SIGKILL);
            waitpid(attackers[kind].pid, NULL, 0);
        }
        _exit(test_main_result());
    }
    int st = 0;
    return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(void)
{
    int ok = run_alone(ATTACK_REGISTRY);
    ok &= run_alone(ATTACK_METRICS);
    ok &= run_alone(ATTACK_INFERENCE);
    return ok ? 0 : 1;
}
