/* tests/runtime/streams/test_frame_limits_params.c: the parameter stream's sockets bound the
 * frames a peer sends them (gb_wire_set_max_frame), as test_frame_limits.c checks for the other
 * endpoints: the parameter subscriber, the parameter service's request socket and its input
 * from the trainer. A peer sending a frame larger than the protocol can carry is disconnected
 * before the frame is read, the frame never reaches the receiver, and legitimate versions go
 * on being applied. */
#include "frame_limits_test.h"
#include "runtime/base/clock.h"
#include "runtime/streams/params.h"
#include "runtime/streams/wire_messages.h"
#include "streams_test.h"
#include "test.h"

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

/* A parameter service on ctx taking chunks of max_chunk bytes at most, at the ipc endpoints
 * "in", "pub" and "fetch" (128 bytes each) in a fresh directory dir (64 bytes). */
static gb_param_service *service_open(void *ctx, char *dir, uint64_t max_chunk, char *in_ep,
                                      char *pub_ep, char *fetch_ep)
{
    gb_error err;
    st_tmpdir(dir, 64);
    endpoint_in(dir, "in", in_ep, 128);
    endpoint_in(dir, "pub", pub_ep, 128);
    endpoint_in(dir, "fetch", fetch_ep, 128);
    gb_param_service_opts so = {.in_endpoint = in_ep, .pub_endpoint = pub_ep,
                                .fetch_endpoint = fetch_ep, .role = GB_ROLE_PARAMS,
                                .max_chunk_bytes = max_chunk};
    gb_param_service *svc = NULL;
    CHECK_OK(gb_param_service_open(&svc, ctx, &so, &err));
    return svc;
}

/* Through the real service: a version larger than the subscriber's model is refused (counted,
 * nothing allocated), the subscriber keeps its version, and the next proper one is applied. */
static void test_param_subscriber_refuses(void)
{
    gb_error err;
    char dir[64], in_ep[128], pub_ep[128], fetch_ep[128];
    void *ctx = zmq_ctx_new();
    gb_param_service *svc = service_open(ctx, dir, BIG, in_ep, pub_ep, fetch_ep);
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
    void *ctx = zmq_ctx_new();
    gb_param_service *svc = service_open(ctx, dir, 4096, in_ep, pub_ep, fetch_ep);
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

int main(void)
{
    TEST_RUN(test_param_subscriber_frame);
    TEST_RUN(test_param_subscriber_refuses);
    TEST_RUN(test_param_service_input);
    return test_main_result();
}
