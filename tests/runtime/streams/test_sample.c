/* tests/runtime/streams/test_sample.c: the sample stream across processes: several actors push to
 * several trainers over ipc and tcp, every chunk arrives exactly once with its content intact;
 * with a send timeout, drops are counted and the receiver gets exactly what was counted as sent;
 * the counters can be read from another thread while chunks flow (run under ThreadSanitizer by
 * tests/ci/extra.sh). */
#include "runtime/streams/sample_stream.h"
#include "streams_test.h"
#include "test.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#define NTRAINERS 2
#define NACTORS 4
#define NCHUNKS 400
#define T 16
#define OBS 8

static volatile sig_atomic_t stop_flag;
static void on_term(int sig)
{
    (void)sig;
    stop_flag = 1;
}

typedef struct trainer_arg {
    const char *dir;
    int index;
    int tcp;
} trainer_arg;

/* Content of chunk k of actor a: obs[t][j] = a * 1e6 + k * 100 + t + j / 100, rew[t] = k. */
static void fill(int a, int k, float *obs, float *rew, uint8_t *done)
{
    for (int t = 0; t < T; t++) {
        for (int j = 0; j < OBS; j++)
            obs[t * OBS + j] = (float)(a * 1000000 + k * 100 + t) + (float)j / 100.0f;
        rew[t] = (float)k;
        done[t] = t == T - 1;
    }
}

static int trainer_main(void *arg)
{
    trainer_arg *a = arg;
    signal(SIGTERM, on_term);
    gb_error err;
    void *ctx = zmq_ctx_new();
    char ep[256], path[512], buf[256];
    if (a->tcp)
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:*");
    else
        snprintf(ep, sizeof ep, "ipc://%s/trainer-%d", a->dir, a->index);
    gb_sample_receiver_opts o = {.endpoint = ep, .hwm = 16};
    gb_sample_receiver *r;
    if (gb_sample_receiver_open(&r, ctx, &o, &err)) {
        fprintf(stderr, "trainer: %s\n", err.msg);
        return 3;
    }
    snprintf(path, sizeof path, "%s/ep-%d", a->dir, a->index);
    st_write_file(path, gb_sample_receiver_endpoint(r));
    static uint8_t seen[NACTORS][NCHUNKS];
    int bad = 0;
    unsigned long long got = 0;
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    float obs[T * OBS], rew[T];
    uint8_t done[T];
    for (;;) {
        /* after SIGTERM, drain what is still queued, then stop at the first quiet 300 ms */
        int rc = gb_sample_recv(r, &m, stop_flag ? 300 : 50, &err);
        if (rc == GB_EAGAIN && stop_flag)
            break;
        if (rc == GB_EAGAIN || rc == GB_EINTR) {
            snprintf(path, sizeof path, "%s/progress-%d", a->dir, a->index);
            snprintf(buf, sizeof buf, "%llu", got);
            st_write_file(path, buf); /* quiet: report where we are */
            continue;
        }
        if (rc) {
            fprintf(stderr, "trainer recv: %s\n", err.msg);
            return 4;
        }
        int actor = m.hdr.index;
        int k = (int)m.hdr.seq - 1;
        if (actor < 0 || actor >= NACTORS || k < 0 || k >= NCHUNKS || m.hdr.ntensors != 3 ||
            m.hdr.policy_version != k / 10) {
            bad++;
            continue;
        }
        fill(actor, k, obs, rew, done);
        if (memcmp(gb_wire_msg_tensor(&m, 0).data, obs, sizeof obs) ||
            memcmp(gb_wire_msg_tensor(&m, 1).data, rew, sizeof rew) ||
            memcmp(gb_wire_msg_tensor(&m, 2).data, done, sizeof done))
            bad++;
        if (seen[actor][k]++)
            bad++; /* duplicate */
        got++;
        gb_wire_msg_release(&m);
        if (got % 50 == 0) {
            snprintf(path, sizeof path, "%s/progress-%d", a->dir, a->index);
            snprintf(buf, sizeof buf, "%llu", got);
            st_write_file(path, buf);
        }
    }
    gb_sample_receiver_stats st = gb_sample_receiver_get_stats(r);
    /* write which chunks arrived as a bitmap-ish checksum plus the count */
    unsigned long long sig = 0;
    for (int a2 = 0; a2 < NACTORS; a2++)
        for (int k = 0; k < NCHUNKS; k++)
            if (seen[a2][k])
                sig += (unsigned long long)(a2 * NCHUNKS + k + 1) * 2654435761ULL;
    snprintf(path, sizeof path, "%s/stats-%d", a->dir, a->index);
    snprintf(buf, sizeof buf, "%llu %d %llu %llu", got, bad, sig,
             (unsigned long long)st.rejected);
    st_write_file(path, buf);
    gb_sample_receiver_close(r);
    zmq_ctx_term(ctx);
    return 0;
}

typedef struct actor_arg {
    const char *dir;
    int index;
    char eps[NTRAINERS][256];
} actor_arg;

static int actor_main(void *arg)
{
    actor_arg *a = arg;
    gb_error err;
    void *ctx = zmq_ctx_new();
    const char *eps[NTRAINERS];
    for (int i = 0; i < NTRAINERS; i++)
        eps[i] = a->eps[i];
    gb_sample_sender_opts o = {.endpoints = eps, .n_endpoints = NTRAINERS, .hwm = 8,
                              .send_timeout_ms = -1, .role = GB_ROLE_ACTOR, .index = a->index};
    gb_sample_sender *s;
    if (gb_sample_sender_open(&s, ctx, &o, &err)) {
        fprintf(stderr, "actor: %s\n", err.msg);
        return 3;
    }
    gb_tensor_desc d[3];
    int64_t so[2] = {T, OBS}, st1[1] = {T};
    gb_wire_set_tensor(&d[0], "obs", GB_DTYPE_FLOAT32, 2, so, &err);
    gb_wire_set_tensor(&d[1], "reward", GB_DTYPE_FLOAT32, 1, st1, &err);
    gb_wire_set_tensor(&d[2], "done", GB_DTYPE_BOOL, 1, st1, &err);
    float obs[T * OBS], rew[T];
    uint8_t done[T];
    for (int k = 0; k < NCHUNKS; k++) {
        fill(a->index, k, obs, rew, done);
        gb_wire_payload p[3] = {{obs, 0, 0, 0}, {rew, 0, 0, 0}, {done, 0, 0, 0}};
        if (gb_sample_send(s, k / 10, d, p, 3, &err)) {
            fprintf(stderr, "actor send: %s\n", err.msg);
            return 4;
        }
    }
    gb_sample_sender_stats st = gb_sample_sender_get_stats(s);
    int bad = st.sent != NCHUNKS || st.dropped != 0;
    /* Close only once the trainers hold everything: libzmq 4.3 drops what still sits in the
     * socket buffer of an ipc connection whose reader is at its high-water mark when the
     * writer closes (EPOLLHUP while input is throttled). See sample.h. */
    char path[512], buf[64];
    snprintf(path, sizeof path, "%s/release", a->dir);
    if (st_wait_file(path, buf, sizeof buf, 60) != 0)
        bad = 1;
    gb_sample_sender_close(s);
    zmq_ctx_term(ctx);
    return bad;
}

static void run(int tcp)
{
    char dir[64], path[512], buf[256];
    st_tmpdir(dir, sizeof dir);
    pid_t trainers[NTRAINERS], actors[NACTORS];
    trainer_arg ta[NTRAINERS];
    static actor_arg aa[NACTORS];
    for (int i = 0; i < NTRAINERS; i++) {
        ta[i] = (trainer_arg){dir, i, tcp};
        trainers[i] = st_fork(trainer_main, &ta[i]);
    }
    for (int i = 0; i < NTRAINERS; i++) {
        snprintf(path, sizeof path, "%s/ep-%d", dir, i);
        CHECK(st_wait_file(path, buf, sizeof buf, 20) == 0);
        for (int a = 0; a < NACTORS; a++)
            snprintf(aa[a].eps[i], sizeof aa[a].eps[i], "%s", buf);
    }
    for (int a = 0; a < NACTORS; a++) {
        aa[a].dir = dir;
        aa[a].index = a;
        actors[a] = st_fork(actor_main, &aa[a]);
    }
    /* wait (bounded) until the trainers hold every chunk, then let the actors close */
    double end = gb_now_s() + 60;
    unsigned long long progress = 0;
    while (gb_now_s() < end) {
        progress = 0;
        for (int i = 0; i < NTRAINERS; i++) {
            unsigned long long p = 0;
            snprintf(path, sizeof path, "%s/progress-%d", dir, i);
            if (st_read_file(path, buf, sizeof buf) == 0 && sscanf(buf, "%llu", &p) == 1)
                progress += p;
        }
        if (progress >= NACTORS * NCHUNKS)
            break;
        gb_sleep_ms(10);
    }
    snprintf(path, sizeof path, "%s/release", dir);
    st_write_file(path, "go");
    for (int a = 0; a < NACTORS; a++)
        CHECK_EQ_INT(st_wait(actors[a]), 0);
    unsigned long long got = 0, sig = 0;
    int per_trainer[NTRAINERS];
    for (int i = 0; i < NTRAINERS; i++) {
        snprintf(path, sizeof path, "%s/stats-%d", dir, i);
        /* let the trainer drain what is queued: stop only once its count stops growing */
        kill(trainers[i], SIGTERM);
        CHECK_EQ_INT(st_wait(trainers[i]), 0);
        unsigned long long g = 0, s = 0, rej = 1;
        int bad = 1;
        CHECK(st_read_file(path, buf, sizeof buf) == 0 &&
              sscanf(buf, "%llu %d %llu %llu", &g, &bad, &s, &rej) == 4);
        CHECK_EQ_INT(bad, 0);
        CHECK_EQ_INT(rej, 0);
        got += g;
        sig += s;
        per_trainer[i] = (int)g;
    }
    unsigned long long want_sig = 0;
    for (int a = 0; a < NACTORS; a++)
        for (int k = 0; k < NCHUNKS; k++)
            want_sig += (unsigned long long)(a * NCHUNKS + k + 1) * 2654435761ULL;
    CHECK_EQ_INT(got, NACTORS * NCHUNKS);
    CHECK(sig == want_sig);
    for (int i = 0; i < NTRAINERS; i++)
        CHECK_MSG(per_trainer[i] > 0, "trainer %d got nothing (no round-robin)", i);
    fprintf(stderr, "  %s: %llu chunks, per trainer %d / %d, no drops, no duplicates\n",
            tcp ? "tcp" : "ipc", got, per_trainer[0], per_trainer[1]);
    st_rmdir(dir);
}

static void test_actors_to_trainers_ipc(void) { run(0); }
static void test_actors_to_trainers_tcp(void) { run(1); }

/* One sender connected to one receiver over ipc:// in a fresh folder (dir, for st_rmdir). */
typedef struct pair {
    void *ctx;
    char dir[64];
    gb_sample_receiver *r;
    gb_sample_sender *s;
} pair;

static void pair_open(pair *p, int hwm, int send_timeout_ms)
{
    gb_error err;
    char ep[128];
    p->ctx = zmq_ctx_new();
    st_tmpdir(p->dir, sizeof p->dir);
    snprintf(ep, sizeof ep, "ipc://%s/trainer", p->dir);
    gb_sample_receiver_opts ro = {.endpoint = ep, .hwm = hwm};
    CHECK_OK(gb_sample_receiver_open(&p->r, p->ctx, &ro, &err));
    const char *eps[1] = {ep};
    gb_sample_sender_opts so = {.endpoints = eps, .n_endpoints = 1, .hwm = hwm,
                               .send_timeout_ms = send_timeout_ms, .role = GB_ROLE_ACTOR,
                               .index = 0};
    CHECK_OK(gb_sample_sender_open(&p->s, p->ctx, &so, &err));
}

static void pair_close(pair *p)
{
    gb_sample_sender_close(p->s);
    gb_sample_receiver_close(p->r);
    zmq_ctx_term(p->ctx);
    st_rmdir(p->dir);
}

/* A trainer that does not read: with a send timeout the sender drops and counts; everything it
 * counted as sent is then received, nothing else. */
static void test_drops_counted(void)
{
    gb_error err;
    pair pr;
    pair_open(&pr, 1, 20);
    gb_sample_receiver *r = pr.r;
    gb_sample_sender *s = pr.s;
    static unsigned char chunk[1 << 20];
    gb_tensor_desc d;
    int64_t shape[1] = {sizeof chunk};
    gb_wire_set_tensor(&d, "bytes", GB_DTYPE_UINT8, 1, shape, &err);
    int failed = 0;
    for (int k = 0; k < 30; k++) {
        memset(chunk, k, sizeof chunk);
        gb_wire_payload p = {chunk, 0, 0, 0};
        int rc = gb_sample_send(s, k, &d, &p, 1, &err);
        CHECK(rc == 0 || rc == GB_ETIMEOUT);
        failed += rc == GB_ETIMEOUT;
    }
    gb_sample_sender_stats st = gb_sample_sender_get_stats(s);
    CHECK(failed > 0); /* 30 MB cannot sit in hwm 1 + 1 plus socket buffers */
    CHECK_EQ_INT(st.dropped, failed);
    CHECK_EQ_INT(st.sent + st.dropped, 30);
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    unsigned received = 0;
    uint64_t last_seq = 0;
    int gaps = 0;
    /* every chunk sent arrives (1 MB each: seconds under ThreadSanitizer on 2 slow cores) */
    while (received < st.sent && gb_sample_recv(r, &m, 10000, &err) == 0) {
        received++;
        gaps += m.hdr.seq != last_seq + 1; /* dropped chunks leave visible gaps */
        last_seq = m.hdr.seq;
        const unsigned char *b = gb_wire_msg_tensor(&m, 0).data;
        CHECK_EQ_INT(b[0], (int)m.hdr.seq - 1);
        gb_wire_msg_release(&m);
    }
    CHECK_EQ_INT(received, st.sent);
    /* the receiver has room again: the next chunk goes through, after a visible gap */
    gb_wire_payload p = {chunk, 0, 0, 0};
    CHECK_OK(gb_sample_send(s, 30, &d, &p, 1, &err));
    CHECK_OK(gb_sample_recv(r, &m, 5000, &err));
    gaps += m.hdr.seq != last_seq + 1;
    CHECK(m.hdr.seq == 31);
    gb_wire_msg_release(&m);
    CHECK(gaps > 0);
    st = gb_sample_sender_get_stats(s);
    fprintf(stderr, "  31 chunks of 1 MB: %llu sent, %llu dropped and counted, %u received\n",
            (unsigned long long)st.sent, (unsigned long long)st.dropped, received);
    pair_close(&pr);
}

/* Over tcp://, a receiver that stops reading holds the sender back after about hwm chunks at
 * each end plus what the kernel buffers (gb_sample_kernel_buffer) hold: small chunks, like
 * CartPole DQN's 640-byte ones, must not pile up by the hundred in flight, where the trainer's
 * rate limiter cannot see them (the learner then trains on stale data). */
static void test_tcp_in_flight_bounded(void)
{
    gb_error err;
    enum { HWM = 4, CHUNK = 640, LIMIT = 64 };
    void *ctx = zmq_ctx_new();
    int kb = gb_sample_kernel_buffer(HWM, CHUNK);
    CHECK_EQ_INT(kb, HWM * CHUNK);
    gb_sample_receiver_opts ro = {.endpoint = "tcp://127.0.0.1:*", .hwm = HWM,
                                  .kernel_buffer = kb};
    gb_sample_receiver *r;
    CHECK_OK(gb_sample_receiver_open(&r, ctx, &ro, &err));
    const char *eps[1] = {gb_sample_receiver_endpoint(r)};
    gb_sample_sender_opts so = {.endpoints = eps, .n_endpoints = 1, .hwm = HWM,
                               .send_timeout_ms = 50, .role = GB_ROLE_ACTOR, .index = 0,
                               .kernel_buffer = kb};
    gb_sample_sender *s;
    CHECK_OK(gb_sample_sender_open(&s, ctx, &so, &err));
    static unsigned char chunk[CHUNK];
    gb_tensor_desc d;
    int64_t shape[1] = {CHUNK};
    gb_wire_set_tensor(&d, "bytes", GB_DTYPE_UINT8, 1, shape, &err);
    /* the first send waits for the connection (ZMQ_IMMEDIATE queues nothing before it) */
    gb_wire_payload p0 = {chunk, 0, 0, 0};
    int accepted = 0;
    for (int tries = 0; tries < 200 && accepted == 0; tries++)
        accepted = gb_sample_send(s, 0, &d, &p0, 1, &err) == 0;
    CHECK(accepted == 1);
    for (int k = 1; k < 4 * LIMIT; k++) {
        gb_wire_payload p = {chunk, 0, 0, 0};
        if (gb_sample_send(s, k, &d, &p, 1, &err) != 0)
            break;
        accepted++;
    }
    CHECK_MSG(accepted <= LIMIT, "%d chunks of %d bytes in flight with hwm %d", accepted, CHUNK,
              HWM);
    CHECK(accepted >= HWM);
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    int received = 0;
    while (gb_sample_recv(r, &m, 500, &err) == 0) {
        received++;
        gb_wire_msg_release(&m);
    }
    CHECK_EQ_INT(received, accepted);
    fprintf(stderr, "  tcp, hwm %d, chunks of %d bytes: %d in flight before the sender waited\n",
            HWM, CHUNK, accepted);
    gb_sample_sender_close(s);
    gb_sample_receiver_close(r);
    zmq_ctx_term(ctx);
}

/* The receiver tallies chunks per sending process (index, incarnation in the seq's high bits):
 * the launcher's count of what a crashed actor sent and no trainer got. */
/* A chunk's seq says which process of its actor sent it and its number there: the ledger of the
 * sample ledger (workers/roles/trainer_ledger.h) count per process from it. */
static void test_seq_per_process(void)
{
    gb_error err;
    pair pr;
    pair_open(&pr, 16, -1);
    static unsigned char chunk[256];
    gb_tensor_desc d;
    int64_t shape[1] = {sizeof chunk};
    gb_wire_set_tensor(&d, "bytes", GB_DTYPE_UINT8, 1, shape, &err);
    gb_wire_payload p = {chunk, 0, 0, 0};
    for (int k = 0; k < 3; k++)
        CHECK_OK(gb_sample_send(pr.s, k, &d, &p, 1, &err));
    /* the same actor index restarted (incarnation 2), on its own socket */
    const char *eps[1] = {gb_sample_receiver_endpoint(pr.r)};
    gb_sample_sender_opts so = {.endpoints = eps, .n_endpoints = 1, .hwm = 16,
                               .send_timeout_ms = -1, .role = GB_ROLE_ACTOR, .index = 0,
                               .incarnation = 2};
    gb_sample_sender *s2 = NULL;
    CHECK_OK(gb_sample_sender_open(&s2, pr.ctx, &so, &err));
    for (int k = 0; k < 5 && s2; k++)
        CHECK_OK(gb_sample_send(s2, k, &d, &p, 1, &err));
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    int got = 0, count[3] = {0}, last[3] = {0}, in_order = 1;
    while (got < 8 && gb_sample_recv(pr.r, &m, 5000, &err) == 0) {
        uint64_t inc = m.hdr.seq >> GB_SAMPLE_SEQ_BITS;
        int number = (int)(m.hdr.seq & ((1ULL << GB_SAMPLE_SEQ_BITS) - 1));
        CHECK(m.hdr.index == 0 && (inc == 0 || inc == 2));
        if (inc <= 2) {
            in_order &= number == last[inc] + 1; /* 1, 2, ... per process, in order */
            last[inc] = number;
            count[inc]++;
        }
        got++;
        gb_wire_msg_release(&m);
    }
    CHECK_EQ_INT(got, 8);
    CHECK(in_order);
    CHECK_EQ_INT(count[0], 3);
    CHECK_EQ_INT(count[2], 5);
    gb_sample_sender_close(s2);
    pair_close(&pr);
}

/* A trainer's report reads the receiver's counters while its ingest thread receives: a reader
 * thread polls both ends' statistics while this thread sends and receives. Without atomic
 * counters this is a data race that ThreadSanitizer reports; here the counts also must only
 * grow and end exact. */
#define STATS_CHUNKS 2000
typedef struct stats_reader {
    const gb_sample_sender *s;
    const gb_sample_receiver *r;
    atomic_int done;
    uint64_t reads, went_back, too_many;
} stats_reader;

static void *read_stats(void *arg)
{
    stats_reader *sr = arg;
    uint64_t last_recv = 0, last_sent = 0;
    while (!atomic_load(&sr->done)) {
        gb_sample_receiver_stats rs = gb_sample_receiver_get_stats(sr->r);
        gb_sample_sender_stats ss = gb_sample_sender_get_stats(sr->s);
        sr->went_back += rs.received < last_recv || ss.sent < last_sent;
        sr->too_many += rs.received > STATS_CHUNKS || ss.sent > STATS_CHUNKS;
        last_recv = rs.received;
        last_sent = ss.sent;
        sr->reads++;
    }
    return NULL;
}

static void test_stats_read_while_receiving(void)
{
    gb_error err;
    pair pr;
    pair_open(&pr, 64, -1);
    gb_sample_receiver *r = pr.r;
    gb_sample_sender *s = pr.s;
    stats_reader sr = {.s = s, .r = r};
    atomic_init(&sr.done, 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, read_stats, &sr) == 0);
    float obs[T * OBS];
    memset(obs, 0, sizeof obs);
    gb_tensor_desc d;
    int64_t shape[2] = {T, OBS};
    CHECK_OK(gb_wire_set_tensor(&d, "obs", GB_DTYPE_FLOAT32, 2, shape, &err));
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    for (int k = 0; k < STATS_CHUNKS; k++) {
        obs[0] = (float)k;
        gb_wire_payload p = {obs, 0, 0, 0};
        CHECK_OK(gb_sample_send(s, k, &d, &p, 1, &err));
        CHECK_OK(gb_sample_recv(r, &m, 5000, &err));
        CHECK(((const float *)gb_wire_msg_tensor(&m, 0).data)[0] == (float)k);
        gb_wire_msg_release(&m);
    }
    atomic_store(&sr.done, 1);
    CHECK(pthread_join(th, NULL) == 0);
    gb_sample_receiver_stats rs = gb_sample_receiver_get_stats(r);
    gb_sample_sender_stats ss = gb_sample_sender_get_stats(s);
    CHECK_EQ_INT(rs.received, STATS_CHUNKS);
    CHECK_EQ_INT(ss.sent, STATS_CHUNKS);
    CHECK_EQ_INT(rs.rejected, 0);
    CHECK(rs.bytes >= ss.bytes); /* the receiver counts the header frame too */
    CHECK(sr.reads > 0);
    CHECK_EQ_INT(sr.went_back, 0);
    CHECK_EQ_INT(sr.too_many, 0);
    fprintf(stderr, "  %d chunks, %llu concurrent statistics reads\n", STATS_CHUNKS,
            (unsigned long long)sr.reads);
    pair_close(&pr);
}

/* A receiver bounded to 4 KiB frames (max_frame, as the trainer sets it from its chunk size):
 * a peer sending a 1 MiB frame is disconnected by libzmq before the frame reaches the trainer,
 * and a legitimate sender's chunks after it are all received. */
static void test_oversized_frame_dropped(void)
{
    gb_error err;
    char dir[64], ep[128];
    void *ctx = zmq_ctx_new();
    st_tmpdir(dir, sizeof dir);
    snprintf(ep, sizeof ep, "ipc://%s/trainer", dir);
    gb_sample_receiver_opts ro = {.endpoint = ep, .hwm = 16, .max_frame = 4096};
    gb_sample_receiver *r;
    CHECK_OK(gb_sample_receiver_open(&r, ctx, &ro, &err));
    const char *eps[1] = {ep};
    gb_sample_sender_opts so = {.endpoints = eps, .n_endpoints = 1, .hwm = 16,
                               .send_timeout_ms = 5000, .role = GB_ROLE_ACTOR, .index = 0};
    gb_sample_sender *bad, *good;
    CHECK_OK(gb_sample_sender_open(&bad, ctx, &so, &err));
    so.index = 1;
    CHECK_OK(gb_sample_sender_open(&good, ctx, &so, &err));
    static float big[1 << 18], small[256];
    gb_tensor_desc d;
    int64_t n_big = 1 << 18, n_small = 256;
    CHECK_OK(gb_wire_set_tensor(&d, "obs", GB_DTYPE_FLOAT32, 1, &n_big, &err));
    gb_wire_payload p = {big, NULL, NULL, NULL};
    CHECK_OK(gb_sample_send(bad, 0, &d, &p, 1, &err));
    CHECK_OK(gb_wire_set_tensor(&d, "obs", GB_DTYPE_FLOAT32, 1, &n_small, &err));
    p.data = small;
    for (int i = 0; i < 3; i++)
        CHECK_OK(gb_sample_send(good, 0, &d, &p, 1, &err));
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    int got = 0, oversized = 0;
    for (;;) {
        int rc = gb_sample_recv(r, &m, got < 3 ? 10000 : 300, &err);
        if (rc)
            break;
        got++;
        oversized += m.hdr.index == 0;
        gb_wire_msg_release(&m);
    }
    CHECK_EQ_INT(got, 3);
    CHECK_EQ_INT(oversized, 0);
    gb_sample_sender_close_within(bad, 0);
    gb_sample_sender_close(good);
    gb_sample_receiver_close(r);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

int main(void)
{
    TEST_RUN(test_actors_to_trainers_ipc);
    TEST_RUN(test_actors_to_trainers_tcp);
    TEST_RUN(test_tcp_in_flight_bounded);
    TEST_RUN(test_drops_counted);
    TEST_RUN(test_seq_per_process);
    TEST_RUN(test_stats_read_while_receiving);
    TEST_RUN(test_oversized_frame_dropped);
    return test_main_result();
}
