/* tests/runtime/streams/test_frame_limits.c: every socket a peer can write to bounds the frames it
 * takes (gb_wire_set_max_frame): a peer sending a frame larger than the protocol can carry is
 * disconnected before the frame is read (seen from the other end with a socket monitor), the
 * frame never reaches the receiver (its counters do not move), and legitimate peers go on being
 * served. Covers the inference server and client, the parameter subscriber and the parameter
 * service's request socket, the registry server (which carries run control) and client, and the
 * metrics collector. The sample receiver has its own in test_sample.c. */
#include "runtime/base/clock.h"
#include "runtime/streams/inference.h"
#include "runtime/run/metrics.h"
#include "runtime/streams/params.h"
#include "runtime/streams/registry.h"
#include "runtime/streams/wire_messages.h"
#include "streams_test.h"
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define BIG (1u << 20) /* an oversized frame: far above every bound set here */
#define WAIT_MS 10000  /* the longest any step below may take on a loaded machine */

/* ---- helpers --------------------------------------------------------------------------------- */

/* A PAIR socket receiving sock's events of mask (zmq_socket_monitor). */
static void *monitor_open(void *ctx, void *sock, int mask)
{
    static int n;
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://frame-limits-monitor-%d", n++);
    CHECK(zmq_socket_monitor(sock, ep, mask) == 0);
    void *pair = zmq_socket(ctx, ZMQ_PAIR);
    int linger = 0;
    zmq_setsockopt(pair, ZMQ_LINGER, &linger, sizeof linger);
    CHECK(zmq_connect(pair, ep) == 0);
    return pair;
}

/* 1 when an event of mask is waiting on the monitor (each event: a 6-byte frame, the endpoint). */
static int monitor_saw(void *pair, int mask)
{
    int seen = 0;
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, pair, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            return seen;
        }
        uint16_t ev = 0;
        if (zmq_msg_size(&m) >= sizeof ev)
            memcpy(&ev, zmq_msg_data(&m), sizeof ev);
        int more = zmq_msg_more(&m);
        while (more && zmq_msg_recv(&m, pair, 0) >= 0)
            more = zmq_msg_more(&m);
        zmq_msg_close(&m);
        seen |= (ev & mask) != 0;
    }
}

static void monitor_close(void *sock, void *pair)
{
    zmq_socket_monitor(sock, NULL, 0);
    zmq_close(pair);
}

static void *socket_on(void *ctx, int type)
{
    void *s = zmq_socket(ctx, type);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    return s;
}

/* Sends a well-formed message of type whose one uint8 tensor `name` has bytes bytes (zeros),
 * with the attributes attrs of kind sc when sc is set. */
static int send_sized(void *sock, const void *route, size_t route_len, int type, int role,
                      const char *name, uint64_t bytes, uint64_t seq, const gb_wire_schema *sc,
                      const void *attrs)
{
    unsigned char *zeros = calloc(1, bytes ? bytes : 1);
    gb_error err;
    gb_wire_header h;
    gb_wire_header_init(&h, type, role, 0);
    h.seq = seq;
    if (sc)
        CHECK_OK(gb_wire_schema_write(sc, attrs, &h, &err));
    int64_t n = (int64_t)bytes;
    h.ntensors = 1;
    CHECK_OK(gb_wire_set_tensor(&h.tensors[0], name, GB_DTYPE_UINT8, 1, &n, &err));
    gb_wire_payload p = {zeros, NULL, NULL, NULL};
    int rc = gb_wire_send(sock, route, route_len, &h, &p, 0, &err);
    CHECK_MSG(rc == 0, "send: %s", err.msg);
    free(zeros);
    return rc;
}

static void endpoint_in(const char *dir, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "ipc://%s/%s", dir, name);
}

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

/* ---- parameter subscriber -------------------------------------------------------------------- */

/* A service (here a stand-in for its PUB) sending a 16 MiB frame to a subscriber whose service
 * takes 4 KiB chunks (so it forwards at most those, or a layout of GB_PARAM_MAX_ENTRIES entries:
 * 13 MiB) is disconnected; the frame is never read. */
static void test_param_subscriber_frame(void)
{
    gb_error err;
    char dir[64], pub_ep[128], fetch_ep[128];
    st_tmpdir(dir, sizeof dir);
    endpoint_in(dir, "pub", pub_ep, sizeof pub_ep);
    endpoint_in(dir, "fetch", fetch_ep, sizeof fetch_ep);
    void *ctx = zmq_ctx_new();
    void *pub = socket_on(ctx, ZMQ_PUB), *fetch = socket_on(ctx, ZMQ_ROUTER);
    void *mon = monitor_open(ctx, pub, ZMQ_EVENT_DISCONNECTED);
    CHECK(zmq_bind(pub, pub_ep) == 0 && zmq_bind(fetch, fetch_ep) == 0);
    gb_param_subscriber_opts o = {.pub_endpoint = pub_ep, .fetch_endpoint = fetch_ep,
                                  .timeout_ms = 2000, .role = GB_ROLE_POLICY,
                                  .chunk_bytes = 4096, .max_bytes = 4096, .max_entries = 4};
    gb_param_subscriber *s;
    CHECK_OK(gb_param_subscriber_open(&s, ctx, &o, &err));
    /* PUB drops what it sends before the subscription arrives: send until the drop is seen */
    gb_msg_param q = {.version = 1, .serial = 1};
    int dropped = 0;
    for (double end = gb_now_s() + WAIT_MS / 1000.0; !dropped && gb_now_s() < end;) {
        send_sized(pub, NULL, 0, GB_MSG_PARAM_CHUNK, GB_ROLE_PARAMS, "data", 16 * BIG, 1,
                   &gb_schema_param_chunk, &q);
        for (int i = 0; i < 10 && !dropped; i++) {
            gb_param_subscriber_poll(s, 5, &err);
            dropped = monitor_saw(mon, ZMQ_EVENT_DISCONNECTED);
        }
    }
    CHECK_MSG(dropped, "the subscriber did not disconnect the service sending 16 MiB");
    gb_param_subscriber_stats st = gb_param_subscriber_get_stats(s);
    CHECK_EQ_INT(st.rejected, 0); /* never read, so never judged */
    CHECK_EQ_INT(gb_param_subscriber_version(s), -1);
    gb_param_subscriber_close(s);
    monitor_close(pub, mon);
    zmq_close(pub);
    zmq_close(fetch);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

/* Runs the service and the subscriber until the subscriber has version v (or WAIT_MS). */
static int sub_reaches(gb_param_service *svc, gb_param_subscriber *s, int64_t v)
{
    gb_error err;
    for (double end = gb_now_s() + WAIT_MS / 1000.0; gb_now_s() < end;) {
        gb_param_service_poll(svc, 0, &err);
        gb_param_subscriber_poll(s, 5, &err);
        if (gb_param_subscriber_version(s) == v)
            return 1;
    }
    return 0;
}

/* Through the real service: a version larger than the subscriber's model is refused (counted,
 * nothing allocated), the subscriber keeps its version, and the next proper one is applied. */
static void test_param_subscriber_refuses(void)
{
    gb_error err;
    char dir[64], in_ep[128], pub_ep[128], fetch_ep[128];
    st_tmpdir(dir, sizeof dir);
    endpoint_in(dir, "in", in_ep, sizeof in_ep);
    endpoint_in(dir, "pub", pub_ep, sizeof pub_ep);
    endpoint_in(dir, "fetch", fetch_ep, sizeof fetch_ep);
    void *ctx = zmq_ctx_new();
    gb_param_service_opts so = {.in_endpoint = in_ep, .pub_endpoint = pub_ep,
                                .fetch_endpoint = fetch_ep, .role = GB_ROLE_PARAMS,
                                .max_chunk_bytes = BIG};
    gb_param_service *svc;
    CHECK_OK(gb_param_service_open(&svc, ctx, &so, &err));
    gb_param_publisher_opts po = {.service_endpoint = in_ep, .chunk_bytes = BIG,
                                  .timeout_ms = WAIT_MS, .role = GB_ROLE_TRAINER};
    gb_param_publisher *p;
    CHECK_OK(gb_param_publisher_open(&p, ctx, &po, &err));
    gb_param_subscriber_opts o = {.pub_endpoint = pub_ep, .fetch_endpoint = fetch_ep,
                                  .timeout_ms = 2000, .recheck_ms = 50, .role = GB_ROLE_POLICY,
                                  .chunk_bytes = BIG, .max_bytes = 4096, .max_entries = 1};
    gb_param_subscriber *s;
    CHECK_OK(gb_param_subscriber_open(&s, ctx, &o, &err));
    static unsigned char blob[BIG];
    gb_param_entry e = {.name = "w", .dtype = GB_DTYPE_UINT8, .rank = 1, .shape = {4096}};
    CHECK_OK(gb_param_publish(p, 1, &e, 1, blob, 4096, &err));
    CHECK(sub_reaches(svc, s, 1));
    e.shape[0] = BIG;
    CHECK_OK(gb_param_publish(p, 2, &e, 1, blob, BIG, &err));
    TEST_WAIT_UNTIL(gb_param_service_poll(svc, 0, &err) == 0 &&
                        gb_param_subscriber_poll(s, 5, &err) >= 0 &&
                        gb_param_subscriber_get_stats(s).rejected > 0 &&
                        gb_param_service_version(svc) == 2,
                    WAIT_MS);
    CHECK(gb_param_service_version(svc) == 2);
    CHECK(gb_param_subscriber_get_stats(s).rejected > 0);
    CHECK_EQ_INT(gb_param_subscriber_version(s), 1);
    /* a peer sending the service's request socket a 1 MiB frame is dropped unread; the
     * subscriber still gets the next version */
    void *bad = socket_on(ctx, ZMQ_DEALER);
    void *mon = monitor_open(ctx, bad, ZMQ_EVENT_DISCONNECTED);
    CHECK(zmq_connect(bad, fetch_ep) == 0);
    uint64_t service_rejected = gb_param_service_get_stats(svc).rejected;
    send_sized(bad, NULL, 0, GB_MSG_PARAM_FETCH, GB_ROLE_POLICY, "data", BIG, 1, NULL, NULL);
    int dropped = 0;
    TEST_WAIT_UNTIL(gb_param_service_poll(svc, 0, &err) == 0 &&
                        (dropped = monitor_saw(mon, ZMQ_EVENT_DISCONNECTED)),
                    WAIT_MS);
    CHECK_MSG(dropped, "the service did not disconnect the peer sending 1 MiB");
    e.shape[0] = 2048;
    CHECK_OK(gb_param_publish(p, 3, &e, 1, blob, 2048, &err));
    CHECK(sub_reaches(svc, s, 3));
    CHECK_EQ_INT(gb_param_service_get_stats(svc).rejected, service_rejected);
    monitor_close(bad, mon);
    zmq_close(bad);
    gb_param_subscriber_stats st = gb_param_subscriber_get_stats(s);
    CHECK_EQ_INT(st.applied, 2);
    gb_param_subscriber_close(s);
    gb_param_publisher_close(p);
    gb_param_service_close(svc);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

/* The service taking 4 KiB chunks: a version announcing larger ones is rejected, a publisher
 * sending a 16 MiB frame (above a chunk and the largest layout) is disconnected unread, and a
 * proper version is taken after both. */
static void test_param_service_input(void)
{
    gb_error err;
    char dir[64], in_ep[128], pub_ep[128], fetch_ep[128];
    st_tmpdir(dir, sizeof dir);
    endpoint_in(dir, "in", in_ep, sizeof in_ep);
    endpoint_in(dir, "pub", pub_ep, sizeof pub_ep);
    endpoint_in(dir, "fetch", fetch_ep, sizeof fetch_ep);
    void *ctx = zmq_ctx_new();
    gb_param_service_opts so = {.in_endpoint = in_ep, .pub_endpoint = pub_ep,
                                .fetch_endpoint = fetch_ep, .role = GB_ROLE_PARAMS,
                                .max_chunk_bytes = 4096};
    gb_param_service *svc;
    CHECK_OK(gb_param_service_open(&svc, ctx, &so, &err));
    gb_param_publisher_opts po = {.service_endpoint = in_ep, .chunk_bytes = 8192,
                                  .timeout_ms = WAIT_MS, .role = GB_ROLE_TRAINER};
    gb_param_publisher *wide, *p;
    CHECK_OK(gb_param_publisher_open(&wide, ctx, &po, &err));
    po.chunk_bytes = 4096;
    CHECK_OK(gb_param_publisher_open(&p, ctx, &po, &err));
    static unsigned char blob[16384];
    gb_param_entry e = {.name = "w", .dtype = GB_DTYPE_UINT8, .rank = 1, .shape = {16384}};
    CHECK_OK(gb_param_publish(wide, 1, &e, 1, blob, sizeof blob, &err));
    TEST_WAIT_UNTIL(gb_param_service_poll(svc, 5, &err) == 0 &&
                        gb_param_service_get_stats(svc).rejected > 0,
                    WAIT_MS);
    CHECK(gb_param_service_get_stats(svc).rejected > 0);

    void *bad = socket_on(ctx, ZMQ_PUSH);
    void *mon = monitor_open(ctx, bad, ZMQ_EVENT_DISCONNECTED);
    CHECK(zmq_connect(bad, in_ep) == 0);
    uint64_t rejected = gb_param_service_get_stats(svc).rejected;
    gb_msg_param q = {.version = 2};
    send_sized(bad, NULL, 0, GB_MSG_PARAM_CHUNK, GB_ROLE_TRAINER, "data", 16 * BIG, 1,
               &gb_schema_param_chunk, &q);
    int dropped = 0;
    TEST_WAIT_UNTIL(gb_param_service_poll(svc, 5, &err) == 0 &&
                        (dropped = monitor_saw(mon, ZMQ_EVENT_DISCONNECTED)),
                    WAIT_MS);
    CHECK_MSG(dropped, "the service did not disconnect the publisher sending 16 MiB");

    CHECK_OK(gb_param_publish(p, 3, &e, 1, blob, sizeof blob, &err));
    TEST_WAIT_UNTIL(gb_param_service_poll(svc, 5, &err) == 0 &&
                        gb_param_service_version(svc) == 3,
                    WAIT_MS);
    CHECK_EQ_INT(gb_param_service_version(svc), 3);
    CHECK_EQ_INT(gb_param_service_get_stats(svc).rejected, rejected); /* never read */
    monitor_close(bad, mon);
    zmq_close(bad);
    gb_param_publisher_close(wide);
    gb_param_publisher_close(p);
    gb_param_service_close(svc);
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
    TEST_RUN(test_param_subscriber_frame);
    TEST_RUN(test_param_subscriber_refuses);
    TEST_RUN(test_param_service_input);
    TEST_RUN(test_registry_server);
    TEST_RUN(test_registry_client);
    TEST_RUN(test_metrics_collector);
    return test_main_result();
}
