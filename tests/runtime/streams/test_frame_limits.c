/* tests/runtime/streams/test_frame_limits.c: every socket a peer can write to bounds the frames it
 * takes (gb_wire_set_max_frame): a peer sending a frame larger than the protocol can carry is
 * disconnected before the frame is read (seen from the other end with a socket monitor), the
 * frame never reaches the receiver (its counters do not move), and legitimate peers go on being
 * served. Covers the inference server and client, the registry server (which carries run
 * control) and client, and the metrics collector; the parameter stream's sockets are in
 * test_frame_limits_params.c, the sample receiver's in test_sample.c. */
#include "frame_limits_test.h"
#include "runtime/base/clock.h"
#include "runtime/run/metrics.h"
#include "runtime/streams/inference.h"
#include "runtime/streams/registry.h"
#include "streams_test.h"
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

/* ---- inference server ------------------------------------------------------------------------ */

static float reply_out[64];

static int echo_fn(void *user, const gb_infer_batch *in, gb_infer_outputs *out, gb_error *err)
{
    (void)user;
    if (in->rows > 64)
        return gb_error_set(err, GB_EINVAL, "echo: %d rows, at most 64", in->rows);
    const float *x = in->inputs[0].data;
    for (int r = 0; r < in->rows; r++)
        reply_out[r] = x[r * 4] + 1;
    int64_t shape[1] = {in->rows};
    out->ntensors = 1;
    out->data[0] = reply_out;
    return gb_wire_set_tensor(&out->descs[0], "value", GB_DTYPE_FLOAT32, 1, shape, err);
}

/* A client sending a request of 4 MiB of observations to a server bounded to 64 rows of 4 floats
 * is disconnected; the request is never received, and a legitimate client is served after. */
static void test_inference_server(void)
{
    gb_error err;
    char dir[64], ep[128];
    st_tmpdir(dir, sizeof dir);
    endpoint_in(dir, "policy", ep, sizeof ep);
    void *ctx = zmq_ctx_new();
    gb_infer_server_opts so = {.endpoint = ep, .max_batch_rows = 64, .max_wait_ms = 0,
                               .role = GB_ROLE_POLICY, .fn = echo_fn,
                               .max_frame = 64 * 4 * sizeof(float)};
    gb_infer_server *s;
    CHECK_OK(gb_infer_server_open(&s, ctx, &so, &err));

    void *bad = socket_on(ctx, ZMQ_DEALER);
    void *mon = monitor_open(ctx, bad, ZMQ_EVENT_DISCONNECTED);
    CHECK(zmq_connect(bad, ep) == 0);
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_INFER_REQUEST, GB_ROLE_ACTOR, 0);
    h.seq = 1;
    h.ntensors = 1;
    int64_t shape[2] = {BIG / 4, 4}; /* 4 MiB: rows x 4 floats */
    CHECK_OK(gb_wire_set_tensor(&h.tensors[0], "obs", GB_DTYPE_FLOAT32, 2, shape, &err));
    float *obs = calloc((size_t)BIG, sizeof *obs);
    gb_wire_payload p = {obs, NULL, NULL, NULL};
    CHECK_OK(gb_wire_send(bad, NULL, 0, &h, &p, 0, &err));
    int dropped = 0;
    TEST_WAIT_UNTIL(gb_infer_server_poll(s, 5, &err) >= 0 &&
                        (dropped = monitor_saw(mon, ZMQ_EVENT_DISCONNECTED)),
                    WAIT_MS);
    CHECK_MSG(dropped, "the server did not disconnect the client sending 4 MiB");
    free(obs);

    const char *eps[1] = {ep};
    gb_infer_client_opts co = {.endpoints = eps, .n_endpoints = 1, .timeout_ms = WAIT_MS,
                               .role = GB_ROLE_ACTOR, .index = 1};
    gb_infer_client *c;
    CHECK_OK(gb_infer_client_open(&c, ctx, &co, &err));
    float x[2 * 4] = {10, 0, 0, 0, 20, 0, 0, 0};
    gb_tensor_desc d;
    int64_t small[2] = {2, 4};
    CHECK_OK(gb_wire_set_tensor(&d, "obs", GB_DTYPE_FLOAT32, 2, small, &err));
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
    CHECK_MSG(rc == 0, "the legitimate client was not served: %d %s", rc, err.msg);
    if (rc == 0) {
        const float *v = gb_wire_msg_tensor(&reply, 0).data;
        CHECK(v[0] == 11 && v[1] == 21);
    }
    gb_wire_msg_release(&reply);
    gb_infer_server_stats st = gb_infer_server_get_stats(s);
    CHECK_EQ_INT(st.received, 1); /* the oversized request never reached it */
    CHECK_EQ_INT(st.rejected, 0);
    gb_infer_client_close(c);
    monitor_close(bad, mon);
    zmq_close(bad);
    gb_infer_server_close(s);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

/* ---- inference client ------------------------------------------------------------------------ */

/* A client bounded to 256-byte frames is connected to two policy workers; one answers with a
 * 1 MiB frame. The client drops that worker (for good: libzmq does not reconnect a peer that
 * broke the protocol), that request times out, and every request after it is served by the
 * other worker. */
static void test_inference_client(void)
{
    gb_error err;
    char dir[64], bad_ep[128], good_ep[128];
    st_tmpdir(dir, sizeof dir);
    endpoint_in(dir, "bad", bad_ep, sizeof bad_ep);
    endpoint_in(dir, "good", good_ep, sizeof good_ep);
    void *ctx = zmq_ctx_new();
    void *bad = socket_on(ctx, ZMQ_ROUTER);
    void *mon = monitor_open(ctx, bad, ZMQ_EVENT_DISCONNECTED);
    CHECK(zmq_bind(bad, bad_ep) == 0);
    gb_infer_server_opts so = {.endpoint = good_ep, .max_batch_rows = 64, .max_wait_ms = 0,
                               .role = GB_ROLE_POLICY, .index = 1, .fn = echo_fn};
    gb_infer_server *good;
    CHECK_OK(gb_infer_server_open(&good, ctx, &so, &err));
    const char *eps[2] = {bad_ep, good_ep};
    gb_infer_client_opts co = {.endpoints = eps, .n_endpoints = 2, .timeout_ms = 1000,
                               .role = GB_ROLE_ACTOR, .max_frame = 256};
    gb_infer_client *c;
    CHECK_OK(gb_infer_client_open(&c, ctx, &co, &err));
    float x[4] = {1, 2, 3, 4};
    gb_tensor_desc d;
    int64_t shape[2] = {1, 4};
    CHECK_OK(gb_wire_set_tensor(&d, "obs", GB_DTYPE_FLOAT32, 2, shape, &err));
    const void *data[1] = {x};
    gb_wire_msg req, reply;
    gb_wire_msg_init(&req);
    gb_wire_msg_init(&reply);
    /* requests go round-robin: send until the misbehaving worker has had one */
    int answered_bad = 0, served = 0, timeouts = 0, dropped = 0;
    for (double end = gb_now_s() + WAIT_MS / 1000.0; gb_now_s() < end && !dropped;) {
        uint64_t id;
        CHECK_OK(gb_infer_client_send(c, &d, data, 1, &id, &err));
        int rc = GB_EAGAIN;
        for (double until = gb_now_s() + 2.0; rc == GB_EAGAIN && gb_now_s() < until;) {
            gb_infer_server_poll(good, 1, &err);
            if (gb_wire_recv(bad, &req, 1, ZMQ_DONTWAIT, &err) == 0) {
                send_sized(bad, req.route, req.route_len, GB_MSG_INFER_REPLY, GB_ROLE_POLICY,
                           "action", BIG, req.hdr.seq, 0, NULL);
                answered_bad++;
                gb_wire_msg_release(&req);
            }
            rc = gb_infer_client_recv(c, &reply, 1, &err);
            dropped |= monitor_saw(mon, ZMQ_EVENT_DISCONNECTED);
        }
        served += rc == 0;
        timeouts += rc == GB_ETIMEOUT;
        CHECK_MSG(rc == 0 || rc == GB_ETIMEOUT, "request: %d %s", rc, err.msg);
        if (rc == 0)
            CHECK(reply.hdr.index == 1 && ((const float *)reply.data[0])[0] == 2);
        gb_wire_msg_release(&reply);
    }
    CHECK_EQ_INT(answered_bad, 1);
    CHECK_MSG(dropped, "the client did not drop the worker sending 1 MiB");
    CHECK_EQ_INT(timeouts, 1);
    /* from now on the other worker serves every request */
    for (int i = 0; i < 8; i++) {
        uint64_t id;
        CHECK_OK(gb_infer_client_send(c, &d, data, 1, &id, &err));
        int rc = GB_EAGAIN;
        for (double until = gb_now_s() + WAIT_MS / 1000.0; rc == GB_EAGAIN && gb_now_s() < until;) {
            gb_infer_server_poll(good, 1, &err);
            rc = gb_infer_client_recv(c, &reply, 1, &err);
        }
        CHECK_MSG(rc == 0, "request %d after the drop: %d %s", i, rc, err.msg);
        served += rc == 0;
        gb_wire_msg_release(&reply);
    }
    CHECK(gb_wire_recv(bad, &req, 1, ZMQ_DONTWAIT, &err) == GB_EAGAIN); /* never asked again */
    gb_infer_client_stats st = gb_infer_client_get_stats(c);
    CHECK_EQ_INT(st.replies, served);
    CHECK_EQ_INT(st.timeouts, 1);
    CHECK_EQ_INT(st.rejected, 0); /* the oversized reply was never read */
    gb_infer_client_close(c);
    gb_infer_server_close(good);
    monitor_close(bad, mon);
    zmq_close(bad);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

/* ---- registry -------------------------------------------------------------------------------- */

typedef struct reg_thread {
    gb_registry_server *s;
    atomic_int stop;
} reg_thread;

static void *reg_run(void *arg)
{
    reg_thread *t = arg;
    gb_error err;
    gb_registry_server_run(t->s, &t->stop, &err);
    return NULL;
}

/* A peer registering a 1 MiB endpoint is disconnected before the registry reads it; workers
 * still register and look up. */
static void test_registry_server(void)
{
    gb_error err;
    char dir[64], ep[128];
    st_tmpdir(dir, sizeof dir);
    endpoint_in(dir, "registry", ep, sizeof ep);
    void *ctx = zmq_ctx_new();
    gb_registry_server_opts so = {.endpoint = ep, .max_ttl_ms = 10000};
    reg_thread t = {0};
    atomic_init(&t.stop, 0);
    CHECK_OK(gb_registry_server_open(&t.s, ctx, &so, &err));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, reg_run, &t) == 0);

    void *bad = socket_on(ctx, ZMQ_DEALER);
    void *mon = monitor_open(ctx, bad, ZMQ_EVENT_DISCONNECTED);
    CHECK(zmq_connect(bad, ep) == 0);
    send_sized(bad, NULL, 0, GB_MSG_REG_REGISTER, GB_ROLE_ACTOR, "endpoint", BIG, 1, NULL, NULL);
    int dropped = 0;
    TEST_WAIT_UNTIL((dropped = monitor_saw(mon, ZMQ_EVENT_DISCONNECTED)), WAIT_MS);
    CHECK_MSG(dropped, "the registry did not disconnect the peer sending 1 MiB");

    gb_registry_client_opts co = {.endpoint = ep, .timeout_ms = 2000, .ttl_ms = 5000,
                                  .role = GB_ROLE_POLICY};
    gb_registry_client *c;
    CHECK_OK(gb_registry_client_open(&c, ctx, &co, &err));
    CHECK_OK(gb_registry_register(c, "policy/0/inference", "ipc:///x/policy-0", &err));
    char found[256];
    CHECK_OK(gb_registry_lookup(c, "policy/0/inference", found, sizeof found, 2000, &err));
    CHECK(strcmp(found, "ipc:///x/policy-0") == 0);
    gb_registry_client_close(c);
    atomic_store(&t.stop, 1);
    pthread_join(th, NULL);
    /* the oversized request was never read: nothing to reject, nothing registered from it */
    CHECK_EQ_INT(gb_registry_server_rejected(t.s), 0);
    CHECK_EQ_INT(gb_registry_server_count(t.s), 0); /* the client unregistered at close */
    monitor_close(bad, mon);
    zmq_close(bad);
    gb_registry_server_close(t.s);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

typedef struct lookup_arg {
    void *ctx;
    const char *ep;
    atomic_int done;
    int rc;
    char found[256];
    char msg[GB_ERROR_MSG_MAX];
} lookup_arg;

static void *lookup_main(void *arg)
{
    lookup_arg *a = arg;
    gb_error err = {0};
    gb_registry_client_opts co = {.endpoint = a->ep, .timeout_ms = 300, .ttl_ms = 5000,
                                  .role = GB_ROLE_ACTOR};
    gb_registry_client *c;
    a->rc = gb_registry_client_open(&c, a->ctx, &co, &err);
    if (a->rc == 0) {
        a->rc = gb_registry_lookup(c, "trainer/0/samples", a->found, sizeof a->found, WAIT_MS,
                                   &err);
        gb_registry_client_close(c);
    }
    snprintf(a->msg, sizeof a->msg, "%s", err.msg);
    atomic_store(&a->done, 1);
    return NULL;
}

/* Answers the next lookup on the stand-in registry srv, if one comes within wait_ms, with a
 * names list of names_bytes bytes (the first name trainer/0/samples) and one endpoint. Returns
 * 0 when it answered one. */
static int answer_lookup(void *srv, uint64_t names_bytes, const char *endpoint, int wait_ms)
{
    gb_error err;
    gb_wire_msg req;
    gb_wire_msg_init(&req);
    int rc = GB_EAGAIN;
    TEST_WAIT_UNTIL((rc = gb_wire_recv(srv, &req, 1, ZMQ_DONTWAIT, &err)) == 0 &&
                        req.hdr.type == GB_MSG_REG_LOOKUP,
                    wait_ms);
    if (rc)
        return rc;
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_REG_REPLY, GB_ROLE_LAUNCHER, 0);
    h.seq = req.hdr.seq;
    h.ntensors = 2;
    static char names[2 * BIG];
    memset(names, 'x', names_bytes);
    memcpy(names, "trainer/0/samples", 18);
    names[names_bytes - 1] = '\0';
    int64_t n = (int64_t)names_bytes, m = (int64_t)strlen(endpoint) + 1;
    CHECK_OK(gb_wire_set_tensor(&h.tensors[0], "names", GB_DTYPE_UINT8, 1, &n, &err));
    CHECK_OK(gb_wire_set_tensor(&h.tensors[1], "endpoints", GB_DTYPE_UINT8, 1, &m, &err));
    gb_wire_payload p[2] = {{names, NULL, NULL, NULL}, {endpoint, NULL, NULL, NULL}};
    rc = gb_wire_send(srv, req.route, req.route_len, &h, p, 0, &err);
    CHECK_MSG(rc == 0, "reply: %s", err.msg);
    gb_wire_msg_release(&req);
    return rc;
}

/* A registry answering with a 2 MiB list (the most a real one sends is GB_REGISTRY_MAX_ENTRIES
 * endpoints, 1 MiB) is dropped by the client, unread: the lookup does not return the forged
 * answer, and fails at once with the cause instead of waiting out its timeout on a link that
 * libzmq will not bring back (it does not reconnect a peer that broke the protocol). */
static void test_registry_client(void)
{
    char dir[64], ep[128];
    st_tmpdir(dir, sizeof dir);
    endpoint_in(dir, "registry", ep, sizeof ep);
    void *ctx = zmq_ctx_new();
    void *srv = socket_on(ctx, ZMQ_ROUTER);
    void *mon = monitor_open(ctx, srv, ZMQ_EVENT_DISCONNECTED);
    CHECK(zmq_bind(srv, ep) == 0);
    lookup_arg a = {.ctx = ctx, .ep = ep};
    atomic_init(&a.done, 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, lookup_main, &a) == 0);
    CHECK_EQ_INT(answer_lookup(srv, 2 * BIG, "ipc:///forged", WAIT_MS), 0);
    int dropped = 0;
    TEST_WAIT_UNTIL((dropped = monitor_saw(mon, ZMQ_EVENT_DISCONNECTED)), WAIT_MS);
    CHECK_MSG(dropped, "the client did not disconnect the registry sending 2 MiB");
    TEST_WAIT_UNTIL(atomic_load(&a.done), WAIT_MS);
    CHECK(atomic_load(&a.done));
    pthread_join(th, NULL);
    CHECK_EQ_INT(a.rc, GB_ECLOSED);
    CHECK_MSG(strstr(a.msg, "no connection") != NULL, "message: %s", a.msg);
    CHECK(strcmp(a.found, "ipc:///forged") != 0);
    monitor_close(srv, mon);
    zmq_close(srv);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

/* ---- metrics collector ----------------------------------------------------------------------- */

/* A peer pushing a 16 MiB frame (above the largest table a report may hold) to the launcher's
 * collector is disconnected; the collector never reads it and takes a worker's report. */
static void test_metrics_collector(void)
{
    gb_error err;
    char dir[64], ep[128];
    st_tmpdir(dir, sizeof dir);
    endpoint_in(dir, "metrics", ep, sizeof ep);
    void *ctx = zmq_ctx_new();
    gb_metrics_collector *mc;
    CHECK_OK(gb_metrics_collector_open(&mc, ctx, ep, &err));
    void *bad = socket_on(ctx, ZMQ_PUSH);
    void *mon = monitor_open(ctx, bad, ZMQ_EVENT_DISCONNECTED);
    CHECK(zmq_connect(bad, ep) == 0);
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_METRICS, GB_ROLE_ACTOR, 0);
    h.ntensors = 1;
    int64_t shape[2] = {(16 * BIG) / (16 * 8), 16}; /* 16 MiB of int64 table */
    CHECK_OK(gb_wire_set_tensor(&h.tensors[0], "table", GB_DTYPE_INT64, 2, shape, &err));
    void *big = calloc(16, BIG);
    gb_wire_payload p = {big, NULL, NULL, NULL};
    CHECK_OK(gb_wire_send(bad, NULL, 0, &h, &p, 0, &err));
    int dropped = 0;
    TEST_WAIT_UNTIL(gb_metrics_collector_poll(mc, 5, &err) >= 0 &&
                        (dropped = monitor_saw(mon, ZMQ_EVENT_DISCONNECTED)),
                    WAIT_MS);
    CHECK_MSG(dropped, "the collector did not disconnect the peer sending 16 MiB");
    free(big);

    gb_metrics_sender *ms;
    CHECK_OK(gb_metrics_sender_open(&ms, ctx, ep, GB_ROLE_ACTOR, 0, &err));
    CHECK(gb_metrics_set(ms, "env_steps", 7) == 0);
    CHECK_OK(gb_metrics_send(ms, &err));
    TEST_WAIT_UNTIL(gb_metrics_collector_poll(mc, 5, &err) >= 0 &&
                        gb_metrics_get(mc, GB_ROLE_ACTOR, 0, "env_steps") == 7,
                    WAIT_MS);
    CHECK(gb_metrics_get(mc, GB_ROLE_ACTOR, 0, "env_steps") == 7);
    CHECK_EQ_INT(gb_metrics_collector_rejected(mc), 0); /* never read, so never judged */
    gb_metrics_sender_close(ms);
    monitor_close(bad, mon);
    zmq_close(bad);
    gb_metrics_collector_close(mc);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

int main(void)
{
    TEST_RUN(test_inference_server);
    TEST_RUN(test_inference_client);
    TEST_RUN(test_registry_server);
    TEST_RUN(test_registry_client);
    TEST_RUN(test_metrics_collector);
    return test_main_result();
}
