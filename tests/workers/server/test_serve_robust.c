/* tests/workers/server/test_serve_robust.c: the offline-RL data server with the C client, over tcp
 * loopback, under stress: garbage, oversized and abandoned requests while good clients keep
 * checking their data; request limits, insert checks, waiting samplers. (Restarts and fresh
 * servers: test_serve_restart.c.) Usage: test_serve_robust TMPDIR */
#include "serve_util.h"
#include "test.h"

#include "runtime/streams/wire.h"
#include "workers/server/client/client.h"

#include <unistd.h>

/* ---- robustness ------------------------------------------------------------------------------ */

typedef struct good_client {
    const char *endpoint;
    atomic_int stop;
    atomic_int samples; /* read by the test while the client runs */
    int bad, errors;
} good_client;

static void *good_main(void *arg)
{
    good_client *g = arg;
    gb_error err = {0};
    gb_client *c = NULL;
    if (gb_client_open(&c, g->endpoint, 5000, &err) != 0) {
        g->errors++;
        return NULL;
    }
    sbuf b = {0};
    if (gb_client_get_info(c, &b.info, &err) != 0) {
        g->errors++;
        gb_client_close(c);
        return NULL;
    }
    sbuf_alloc(&b, 32);
    while (!atomic_load(&g->stop)) {
        gb_client_sample_req req = {.batch = 32, .timeout_ms = -1};
        gb_client_batch out = {.data = b.data, .cap = b.cap, .length = b.length};
        if (gb_client_sample(c, &req, &out, &err) != 0) {
            fprintf(stderr, "good client: %s\n", err.msg);
            g->errors++;
            continue;
        }
        g->bad += verify(&b, out.n, 0, T_STEPS, NULL);
        g->samples++;
    }
    sbuf_free(&b);
    gb_client_close(c);
    return NULL;
}

static void *raw_dealer(void *zctx, const char *ep)
{
    void *s = zmq_socket(zctx, ZMQ_DEALER);
    int zero = 0, rcv = 2000;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &rcv, sizeof rcv);
    zmq_connect(s, ep);
    return s;
}

static void test_hostile_clients(void)
{
    gb_error err = {0};
    test_server ts;
    CHECK_OK(test_server_start(&ts, server_config(""), &err));
    if (!ts.server)
        return;
    const char *ep = gb_server_endpoint(ts.server);
    good_client gs[2] = {{.endpoint = ep}, {.endpoint = ep}}; /* one each: no shared counters */
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, good_main, &gs[i]);
    void *zctx = zmq_ctx_new();

    /* garbage: a random frame, a header without its frames, 100 frames */
    void *d = raw_dealer(zctx, ep);
    zmq_send(d, "\x93\x01\xff garbage", 11, 0);
    char reply[4096];
    int n = zmq_recv(d, reply, sizeof reply, 0); /* answered with an error, header first */
    CHECK(n > 0);
    gb_wire_header h;
    CHECK(gb_wire_decode_header(reply, (size_t)n, &h, &err) == 0 && h.status == GB_EPROTO);
    int more;
    size_t ml = sizeof more;
    while (zmq_getsockopt(d, ZMQ_RCVMORE, &more, &ml) == 0 && more)
        zmq_recv(d, reply, sizeof reply, 0);
    gb_wire_header_init(&h, GB_MSG_SERVE_REQUEST, GB_ROLE_CLIENT, 0);
    gb_wire_attr_set_int(&h, "op", GB_SERVE_INSERT, &err);
    int64_t shape[1] = {1000};
    gb_wire_set_tensor(&h.tensors[0], "obs", GB_DTYPE_FLOAT32, 1, shape, &err);
    h.ntensors = 1;
    unsigned char hb[GB_WIRE_HEADER_MAX];
    size_t hl;
    gb_wire_encode_header(&h, hb, sizeof hb, &hl, &err);
    zmq_send(d, hb, hl, 0); /* declares a tensor, sends none */
    for (int i = 0; i < 100; i++)
        zmq_send(d, "x", 1, i < 99 ? ZMQ_SNDMORE : 0);
    /* a well-formed insert with the wrong schema */
    zmq_send(d, hb, hl, ZMQ_SNDMORE);
    static float junk[1000];
    zmq_send(d, junk, sizeof junk, 0);

    /* oversized: 4 MB against max_request_bytes 1 MB, over twice the limit in one frame
     * (ZeroMQ drops this peer's connection) */
    void *big = raw_dealer(zctx, ep);
    char *huge = calloc(1, 4 << 20);
    zmq_send(big, huge, 4 << 20, 0);
    free(huge);

    /* vanishing: ask for data and close at once, 20 times */
    for (int i = 0; i < 20; i++) {
        void *v = raw_dealer(zctx, ep);
        gb_wire_header_init(&h, GB_MSG_SERVE_REQUEST, GB_ROLE_CLIENT, 0);
        gb_wire_attr_set_int(&h, "op", GB_SERVE_SAMPLE, &err);
        gb_wire_attr_set_int(&h, "batch", 64, &err);
        gb_wire_encode_header(&h, hb, sizeof hb, &hl, &err);
        zmq_send(v, hb, hl, 0);
        zmq_close(v);
    }
    /* greedy: 300 requests, never reads a reply (its queue is bounded; replies are dropped) */
    void *greedy = raw_dealer(zctx, ep);
    gb_wire_header_init(&h, GB_MSG_SERVE_REQUEST, GB_ROLE_CLIENT, 0);
    gb_wire_attr_set_int(&h, "op", GB_SERVE_SAMPLE, &err);
    gb_wire_attr_set_int(&h, "batch", 64, &err);
    gb_wire_encode_header(&h, hb, sizeof hb, &hl, &err);
    for (int i = 0; i < 300; i++)
        zmq_send(greedy, hb, hl, 0);
    /* the good clients keep being served meanwhile: wait for it (and for the hostile traffic
     * to be counted) rather than for a fixed time */
    TEST_WAIT_UNTIL(atomic_load(&gs[0].samples) > 5 && atomic_load(&gs[1].samples) > 5 &&
                        gb_server_get_stats(ts.server).rejected >= 2 &&
                        gb_server_get_stats(ts.server).errors >= 1,
                    30000);
    for (int i = 0; i < 2; i++)
        atomic_store(&gs[i].stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    good_client g = {.samples = gs[0].samples + gs[1].samples, .bad = gs[0].bad + gs[1].bad,
                     .errors = gs[0].errors + gs[1].errors};
    CHECK(gs[0].samples > 5 && gs[1].samples > 5);
    zmq_close(d);
    zmq_close(big);
    zmq_close(greedy);
    zmq_ctx_term(zctx);
    gb_server_stats st = gb_server_get_stats(ts.server);
    CHECK(g.samples > 10);
    CHECK_EQ_INT(g.bad, 0);
    CHECK_EQ_INT(g.errors, 0);
    CHECK(st.rejected >= 2);
    CHECK(st.errors >= 1);
    fprintf(stderr, "hostile: good clients sampled %d times; server rejected %llu, errors %llu\n",
            g.samples, (unsigned long long)st.rejected, (unsigned long long)st.errors);
    /* the server still answers a fresh client */
    gb_client *c = NULL;
    gb_client_info info;
    CHECK_OK(gb_client_open(&c, ep, 5000, &err));
    CHECK_OK(gb_client_get_info(c, &info, &err));
    gb_client_close(c);
    test_server_stop(&ts);
}

/* ---- request limits and REQ clients --------------------------------------------------------- */

/* Sends a serve request (op, request id seq) with one uint8 tensor per entry of sizes, and
 * waits for the reply's header in *h; envelope: send (and expect back) REQ's empty delimiter
 * frame by hand, as a DEALER talking to a REQ-style server does. Returns 0 when a reply came. */
static int raw_request(void *sock, int envelope, int64_t seq, int op, const int64_t *sizes, int n,
                       gb_wire_header *h)
{
    gb_error err = {0};
    gb_wire_header q;
    gb_wire_header_init(&q, GB_MSG_SERVE_REQUEST, GB_ROLE_CLIENT, 0);
    q.seq = seq;
    gb_wire_attr_set_int(&q, "op", op, &err);
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "part%d", i);
        gb_wire_set_tensor(&q.tensors[i], name, GB_DTYPE_UINT8, 1, &sizes[i], &err);
    }
    q.ntensors = n;
    unsigned char hb[GB_WIRE_HEADER_MAX];
    size_t hl;
    if (gb_wire_encode_header(&q, hb, sizeof hb, &hl, &err) != 0)
        return -1;
    if (envelope)
        zmq_send(sock, "", 0, ZMQ_SNDMORE);
    zmq_send(sock, hb, hl, n ? ZMQ_SNDMORE : 0);
    for (int i = 0; i < n; i++) {
        char *part = calloc(1, (size_t)sizes[i]);
        zmq_send(sock, part, (size_t)sizes[i], i + 1 < n ? ZMQ_SNDMORE : 0);
        free(part);
    }
    char buf[GB_WIRE_HEADER_MAX];
    int got = zmq_recv(sock, buf, sizeof buf, 0);
    if (envelope) { /* it comes back first */
        if (got != 0)
            return -1;
        got = zmq_recv(sock, buf, sizeof buf, 0);
    }
    if (got <= 0 || gb_wire_decode_header(buf, (size_t)got, h, &err) != 0)
        return -1;
    int more;
    size_t ml = sizeof more;
    while (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &ml) == 0 && more)
        zmq_recv(sock, buf, sizeof buf, 0);
    return 0;
}

/* The size an INFO reply's header h reports (its table reads it), or -1. */
static int64_t info_size(const gb_wire_header *h)
{
    gb_serve_info in = {.size = -1};
    gb_error err = {0};
    if (gb_wire_schema_read(gb_serve_reply_schemas[GB_SERVE_INFO], h, &in, &err))
        return -1;
    return in.size;
}

static void test_request_limits(void)
{
    gb_error err = {0};
    test_server ts;
    CHECK_OK(test_server_start(&ts, server_config(""), &err)); /* max_request_bytes 1000000 */
    if (!ts.server)
        return;
    const char *ep = gb_server_endpoint(ts.server);
    void *zctx = zmq_ctx_new();
    void *d = raw_dealer(zctx, ep);
    gb_wire_header h;
    /* three parts of 700 kB: each under the limit, together 2.1 MB over it */
    int64_t three[3] = {700000, 700000, 700000};
    CHECK_OK(raw_request(d, 0, 41, GB_SERVE_INSERT, three, 3, &h));
    CHECK_EQ_INT(h.status, GB_EINVAL);
    CHECK_EQ_INT(h.seq, 41);
    CHECK(strstr(h.text, "max_request_bytes") && strstr(h.text, "1000000") &&
          strstr(h.text, "2100000"));
    /* one part of 1.5 MB: answered too (the peer is not dropped) */
    int64_t one[1] = {1500000};
    CHECK_OK(raw_request(d, 0, 42, GB_SERVE_INSERT, one, 1, &h));
    CHECK_EQ_INT(h.status, GB_EINVAL);
    CHECK_EQ_INT(h.seq, 42);
    CHECK(strstr(h.text, "max_request_bytes") != NULL);
    /* the same connection is still served */
    CHECK_OK(raw_request(d, 0, 43, GB_SERVE_INFO, NULL, 0, &h));
    CHECK_EQ_INT(h.status, 0);
    CHECK_EQ_INT(h.seq, 43);
    CHECK_EQ_INT(info_size(&h), nplan);
    zmq_close(d);
    /* a REQ client: its envelope is answered in kind, for a good request and a bad one */
    void *r = zmq_socket(zctx, ZMQ_REQ);
    int zero = 0, rcv = 5000;
    zmq_setsockopt(r, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(r, ZMQ_RCVTIMEO, &rcv, sizeof rcv);
    zmq_connect(r, ep);
    CHECK_OK(raw_request(r, 0, 7, GB_SERVE_INFO, NULL, 0, &h));
    CHECK_EQ_INT(h.status, 0);
    CHECK_EQ_INT(h.seq, 7);
    CHECK_EQ_INT(info_size(&h), nplan);
    CHECK_OK(raw_request(r, 0, 8, GB_SERVE_INSERT, three, 3, &h));
    CHECK_EQ_INT(h.status, GB_EINVAL);
    CHECK_EQ_INT(h.seq, 8);
    zmq_close(r);
    /* a DEALER that sends REQ's envelope by hand gets it back */
    d = raw_dealer(zctx, ep);
    CHECK_OK(raw_request(d, 1, 9, GB_SERVE_INFO, NULL, 0, &h));
    CHECK_EQ_INT(h.status, 0);
    CHECK_EQ_INT(h.seq, 9);
    zmq_close(d);
    zmq_ctx_term(zctx);
    CHECK(gb_server_get_stats(ts.server).rejected >= 3);
    test_server_stop(&ts);
}

/* Sends an insert of one item (every column zero but valid's first `valid_steps` steps) plus
 * an extra int32[1] tensor called extra (NULL: none) on a raw DEALER; the reply's header in *h. */
static int raw_insert(void *sock, const gb_client_info *info, int valid_steps, const char *extra,
                      gb_wire_header *h)
{
    gb_error err = {0};
    gb_wire_header q;
    gb_wire_header_init(&q, GB_MSG_SERVE_REQUEST, GB_ROLE_CLIENT, 0);
    q.seq = 77;
    gb_wire_attr_set_int(&q, "op", GB_SERVE_INSERT, &err);
    gb_wire_payload pl[GB_CLIENT_MAX_COLUMNS + 1] = {{0}};
    void *bufs[GB_CLIENT_MAX_COLUMNS + 1] = {0};
    int n = 0;
    for (int c = 0; c < info->ncolumns; c++, n++) {
        const gb_client_column *col = &info->columns[c];
        int64_t shape[2 + GB_CLIENT_MAX_DIMS] = {1};
        int rank = 1;
        if (!col->per_item)
            shape[rank++] = info->steps;
        for (int d = 0; d < col->ndim; d++)
            shape[rank++] = col->shape[d];
        size_t bytes = col->step_bytes * (size_t)(col->per_item ? 1 : info->steps);
        bufs[n] = calloc(1, bytes);
        if (strcmp(col->name, "valid") == 0)
            memset(bufs[n], 1, (size_t)valid_steps);
        gb_wire_set_tensor(&q.tensors[n], col->name, col->dtype, rank, shape, &err);
        pl[n].data = bufs[n];
    }
    static const int32_t one = 3;
    if (extra) {
        int64_t shape[1] = {1};
        gb_wire_set_tensor(&q.tensors[n], extra, GB_DTYPE_INT32, 1, shape, &err);
        pl[n++].data = &one;
    }
    q.ntensors = n;
    int rc = gb_wire_send(sock, NULL, 0, &q, pl, 0, &err);
    for (int i = 0; i < n; i++)
        if (bufs[i])
            free(bufs[i]);
    if (rc)
        return rc;
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    rc = gb_wire_recv(sock, &m, 0, 0, &err);
    *h = m.hdr;
    gb_wire_msg_release(&m);
    return rc;
}

/* Inserts are checked whole: a misspelt optional field, a length outside 1..T, a valid column
 * that does not mark the first length steps are refused with the reason; good ones go in. */
static void test_insert_checks(void)
{
    gb_error err = {0};
    test_server ts;
    CHECK_OK(test_server_start(&ts, server_config(""), &err));
    if (!ts.server)
        return;
    const char *ep = gb_server_endpoint(ts.server);
    gb_client *c = NULL;
    gb_client_info info;
    CHECK_OK(gb_client_open(&c, ep, 5000, &err));
    CHECK_OK(gb_client_get_info(c, &info, &err));
    int64_t T = info.steps;
    CHECK(T >= 2);
    void *zctx = zmq_ctx_new();
    void *d = raw_dealer(zctx, ep);
    gb_wire_header h;
    const char *typos[] = {"priorty", "lenght", "obs_typo"};
    for (int i = 0; i < 3; i++) {
        CHECK_OK(raw_insert(d, &info, (int)T, typos[i], &h));
        CHECK_EQ_INT(h.status, GB_EINVAL);
        CHECK_MSG(strstr(h.text, typos[i]) && strstr(h.text, "unknown"), "%s", h.text);
    }
    CHECK_OK(raw_insert(d, &info, (int)T, "length", &h)); /* length 3 but T steps valid */
    if (T != 3) {
        CHECK_EQ_INT(h.status, GB_EINVAL);
        CHECK_MSG(strstr(h.text, "disagrees") != NULL, "%s", h.text);
    }
    CHECK_OK(raw_insert(d, &info, 0, NULL, &h)); /* no valid step */
    CHECK_EQ_INT(h.status, GB_EINVAL);
    CHECK_MSG(strstr(h.text, "no valid step") != NULL, "%s", h.text);
    CHECK_OK(raw_insert(d, &info, 1, NULL, &h)); /* one valid step, no length: length 1 */
    CHECK_EQ_INT(h.status, 0);
    zmq_close(d);
    zmq_ctx_term(zctx);
    /* through the C client: length 0 and T + 1 are refused, nothing goes in */
    sbuf b = {.info = info};
    sbuf_alloc(&b, 1);
    int cv = gb_client_column_index(&info, "valid");
    memset(b.data[cv], 1, b.cap[cv]);
    uint64_t before = info.inserts;
    int64_t size = -1;
    int32_t bad[2] = {0, (int32_t)T + 1};
    for (int i = 0; i < 2; i++) {
        CHECK(gb_client_insert(c, &info, 1, (const void *const *)b.data, NULL, &bad[i], 0, &size,
                               &err) == GB_EINVAL);
        CHECK_MSG(strstr(err.msg, "length") != NULL, "%s", err.msg);
    }
    int32_t good = (int32_t)T;
    CHECK_OK(gb_client_insert(c, &info, 1, (const void *const *)b.data, NULL, &good, 0, &size,
                              &err));
    gb_client_info after;
    CHECK_OK(gb_client_get_info(c, &after, &err));
    CHECK_EQ_INT(after.inserts, before + 2); /* the raw one-step item and this one */
    sbuf_free(&b);
    gb_client_close(c);
    test_server_stop(&ts);
}

/* Samplers that must wait for the rate limiter hold no request thread: with as many of them
 * waiting as the server has threads, info is still answered, and the insert that admits them
 * goes in at once and they get their batches (before, the insert queued behind them until
 * they timed out). */
typedef struct waiting_sampler {
    const char *endpoint;
    int rc;
    int64_t n;
} waiting_sampler;

static void *waiting_main(void *arg)
{
    waiting_sampler *ws = arg;
    gb_error err = {0};
    gb_client *c = NULL;
    ws->rc = gb_client_open(&c, ws->endpoint, 70000, &err);
    if (ws->rc)
        return NULL;
    gb_client_info info;
    if ((ws->rc = gb_client_get_info(c, &info, &err)) == 0) {
        sbuf b = {.info = info};
        sbuf_alloc(&b, 4);
        gb_client_sample_req req = {.batch = 4, .timeout_ms = 60000};
        gb_client_batch out = {.data = b.data, .cap = b.cap, .index = b.index, .key = b.key,
                               .prob = b.prob, .weight = b.weight, .length = b.length};
        ws->rc = gb_client_sample(c, &req, &out, &err);
        ws->n = out.n;
        if (ws->rc)
            fprintf(stderr, "  waiting sampler: %s\n", err.msg);
        sbuf_free(&b);
    }
    gb_client_close(c);
    return NULL;
}

static void test_waiting_samplers_park(void)
{
    gb_error err = {0};
    char extra[256];
    snprintf(extra, sizeof extra, "  replay: {min_size: %lld, capacity: %lld}\n",
             (long long)nplan + 2, (long long)nplan + 10);
    test_server ts; /* 3 request threads */
    CHECK_OK(test_server_start(&ts, server_config_wait(extra, 50000, 60), &err));
    if (!ts.server)
        return;
    const char *ep = gb_server_endpoint(ts.server);
    waiting_sampler ws[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        ws[i] = (waiting_sampler){.endpoint = ep, .rc = -100};
        pthread_create(&th[i], NULL, waiting_main, &ws[i]);
    }
    TEST_WAIT_UNTIL(gb_server_get_stats(ts.server).parked_now == 3, 20000);
    CHECK_EQ_INT(gb_server_get_stats(ts.server).parked_now, 3);
    gb_client *c = NULL;
    gb_client_info info;
    CHECK_OK(gb_client_open(&c, ep, 20000, &err));
    CHECK_OK(gb_client_get_info(c, &info, &err)); /* answered while all three wait */
    sbuf b = {.info = info};
    sbuf_alloc(&b, 4);
    /* a fourth whose time runs out is answered with the limiter's reason */
    gb_client_sample_req req = {.batch = 2, .timeout_ms = 300};
    gb_client_batch out = {.data = b.data, .cap = b.cap, .index = b.index, .key = b.key,
                           .prob = b.prob, .weight = b.weight, .length = b.length};
    CHECK(gb_client_sample(c, &req, &out, &err) == GB_ETIMEOUT);
    CHECK_MSG(strstr(err.msg, "timed out") && strstr(err.msg, "min_size"), "%s", err.msg);
    int cv = gb_client_column_index(&info, "valid");
    memset(b.data[cv], 1, b.cap[cv]);
    int64_t size = 0;
    CHECK_OK(gb_client_insert(c, &info, 2, (const void *const *)b.data, NULL, NULL, 0, &size,
                              &err));
    CHECK_EQ_INT(size, nplan + 2);
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(ws[i].rc, 0);
        CHECK_EQ_INT(ws[i].n, 4);
    }
    gb_server_stats st = gb_server_get_stats(ts.server);
    CHECK_EQ_INT(st.parked, 4);
    CHECK_EQ_INT(st.parked_now, 0);
    sbuf_free(&b);
    gb_client_close(c);
    test_server_stop(&ts);
}

/* Loading the dataset is not rate-limited: samples_per_insert 1 with an error buffer far
 * below the dataset's size loads it all (it failed with "is server.replay.capacity too
 * small?"); sampling goes ahead, and an online insert waits until samples catch up. */
static void test_load_not_rate_limited(void)
{
    gb_error err = {0};
    test_server ts;
    CHECK(nplan > 40);
    CHECK_OK(test_server_start(&ts, server_config("  replay: {samples_per_insert: 1, "
                                                  "error_buffer: 10}\n"), &err));
    if (!ts.server)
        return;
    CHECK_EQ_INT(ts.loaded, nplan);
    gb_client *c = NULL;
    gb_client_info info;
    CHECK_OK(gb_client_open(&c, gb_server_endpoint(ts.server), 5000, &err));
    CHECK_OK(gb_client_get_info(c, &info, &err));
    CHECK_EQ_INT(info.size, nplan);
    sbuf b = {.info = info};
    sbuf_alloc(&b, 4);
    gb_client_sample_req req = {.batch = 4, .timeout_ms = 1000};
    gb_client_batch out = {.data = b.data, .cap = b.cap, .length = b.length};
    CHECK_OK(gb_client_sample(c, &req, &out, &err));
    CHECK_EQ_INT(out.n, 4);
    int cv = gb_client_column_index(&info, "valid");
    memset(b.data[cv], 1, b.cap[cv]);
    int rc = gb_client_insert(c, &info, 1, (const void *const *)b.data, NULL, NULL, 0, NULL, &err);
    CHECK_EQ_INT(rc, GB_ETIMEOUT); /* 134 inserts x 1 - 4 samples is far above max_diff */
    CHECK_MSG(strstr(err.msg, "rate limiter") != NULL, "%s", err.msg);
    sbuf_free(&b);
    gb_client_close(c);
    test_server_stop(&ts);
}

int main(int argc, char **argv)
{
    if (serve_test_setup(argc, argv, "d4rl_robust.h5") != 0)
        return 1;
    TEST_RUN(test_hostile_clients);
    TEST_RUN(test_request_limits);
    TEST_RUN(test_insert_checks);
    TEST_RUN(test_waiting_samplers_park);
    TEST_RUN(test_load_not_rate_limited);
    return test_main_result();
}
