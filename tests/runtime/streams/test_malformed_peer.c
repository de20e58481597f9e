/* tests/runtime/streams/test_malformed_peer.c: a live inference server in its own process receives
 * random bytes, truncated and extra frames, wrong frame counts, oversized shapes, a wrong
 * protocol version and garbage at the TCP level from real peers, keeps serving, and then answers
 * a valid request correctly. */
#include "runtime/streams/inference.h"
#include "runtime/base/rng.h"
#include "streams_test.h"
#include "test.h"

#include <arpa/inet.h>
#include <msgpack.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>

static volatile sig_atomic_t stop_flag;
static void on_term(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static float out_value[4096];

static int double_fn(void *user, const gb_infer_batch *in, gb_infer_outputs *out, gb_error *err)
{
    (void)user;
    const float *x = in->inputs[0].data;
    int64_t width = in->inputs[0].desc->shape[1];
    for (int r = 0; r < in->rows && r < 4096; r++)
        out_value[r] = 2.0f * x[r * width];
    int64_t shape[1] = {in->rows};
    out->ntensors = 1;
    out->data[0] = out_value;
    return gb_wire_set_tensor(&out->descs[0], "value", GB_DTYPE_FLOAT32, 1, shape, err);
}

typedef struct server_arg {
    const char *dir;
    const char *endpoint;
    int index;
} server_arg;

static int server_main(void *arg)
{
    server_arg *a = arg;
    signal(SIGTERM, on_term);
    gb_error err;
    void *ctx = zmq_ctx_new();
    gb_infer_server_opts o = {a->endpoint, 256, 1.0, GB_ROLE_POLICY, a->index, double_fn, NULL,
                              0, NULL, 0};
    gb_infer_server *s;
    if (gb_infer_server_open(&s, ctx, &o, &err)) {
        fprintf(stderr, "server: %s\n", err.msg);
        return 3;
    }
    char path[512], buf[256];
    snprintf(path, sizeof path, "%s/ep-%d", a->dir, a->index);
    st_write_file(path, gb_infer_server_endpoint(s));
    while (!stop_flag) {
        int rc = gb_infer_server_poll(s, 50, &err);
        if (rc < 0 && rc != GB_EINTR) {
            fprintf(stderr, "server poll failed: %s\n", err.msg);
            return 4;
        }
    }
    gb_infer_server_stats st = gb_infer_server_get_stats(s);
    snprintf(path, sizeof path, "%s/stats-%d", a->dir, a->index);
    snprintf(buf, sizeof buf, "%llu %llu", (unsigned long long)st.requests,
             (unsigned long long)st.rejected);
    st_write_file(path, buf);
    gb_infer_server_close(s);
    zmq_ctx_term(ctx);
    return 0;
}

static size_t encode(const gb_wire_header *h, unsigned char *buf)
{
    size_t len = 0;
    gb_error err;
    if (gb_wire_encode_header(h, buf, GB_WIRE_HEADER_MAX, &len, &err))
        fprintf(stderr, "encode: %s\n", err.msg);
    return len;
}

/* Random bytes, single and multi-frame; returns how many messages. */
static int send_random(void *d)
{
    gb_rng rng;
    gb_rng_seed_for(&rng, 1234, "peer", 0);
    static unsigned char junk[1 << 16];
    int count = 0;
    for (int i = 0; i < 60; i++) {
        size_t n = (size_t)gb_rng_below(&rng, sizeof junk);
        for (size_t k = 0; k < n; k++)
            junk[k] = (unsigned char)gb_rng_below(&rng, 256);
        int frames = 1 + (int)gb_rng_below(&rng, 4);
        for (int f = 0; f < frames; f++)
            zmq_send(d, junk, n / (size_t)frames, f + 1 < frames ? ZMQ_SNDMORE : 0);
        count++;
    }
    return count;
}

/* A real header with its frames wrong: truncated, missing, extra, a hundred, oversized shapes;
 * returns how many messages. */
static int send_bad_frames(void *d)
{
    unsigned char hb[GB_WIRE_HEADER_MAX];
    gb_wire_header h;
    gb_error err;
    int64_t shape[2] = {4, 3};
    float obs[12] = {0};
    int count = 0;
    gb_wire_header_init(&h, GB_MSG_INFER_REQUEST, GB_ROLE_ACTOR, 9);
    h.seq = 1;
    h.ntensors = 1;
    gb_wire_set_tensor(&h.tensors[0], "obs", GB_DTYPE_FLOAT32, 2, shape, &err);
    size_t hl = encode(&h, hb);
    /* truncated header (every 3rd prefix) */
    for (size_t k = 0; k < hl; k += 3) {
        zmq_send(d, hb, k, ZMQ_SNDMORE);
        zmq_send(d, obs, sizeof obs, 0);
        count++;
    }
    /* header alone (frame missing), truncated tensor frame, extra frames */
    zmq_send(d, hb, hl, 0);
    zmq_send(d, hb, hl, ZMQ_SNDMORE);
    zmq_send(d, obs, sizeof obs - 5, 0);
    zmq_send(d, hb, hl, ZMQ_SNDMORE);
    zmq_send(d, obs, sizeof obs, ZMQ_SNDMORE);
    zmq_send(d, obs, sizeof obs, 0);
    count += 3;
    /* a hundred frames */
    zmq_send(d, hb, hl, ZMQ_SNDMORE);
    for (int i = 0; i < 99; i++)
        zmq_send(d, obs, sizeof obs, ZMQ_SNDMORE);
    zmq_send(d, obs, sizeof obs, 0);
    count++;
    /* oversized shapes: overflow, and a plausible shape with a tiny frame */
    int64_t huge[3] = {1LL << 40, 1LL << 40, 1LL << 30};
    gb_wire_set_tensor(&h.tensors[0], "obs", GB_DTYPE_FLOAT32, 3, huge, &err);
    hl = encode(&h, hb);
    zmq_send(d, hb, hl, ZMQ_SNDMORE);
    zmq_send(d, obs, sizeof obs, 0);
    int64_t big[2] = {1LL << 20, 1LL << 20};
    gb_wire_set_tensor(&h.tensors[0], "obs", GB_DTYPE_FLOAT32, 2, big, &err);
    hl = encode(&h, hb);
    zmq_send(d, hb, hl, ZMQ_SNDMORE);
    zmq_send(d, obs, sizeof obs, 0);
    return count + 2;
}

/* The seven required header fields packed with msgpack-c, protocol version v; extra more
 * fields follow (the caller packs them). */
static void pack_fields(msgpack_packer *pk, int v, int extra)
{
    const char *keys[7] = {"v", "t", "r", "i", "s", "p", "T"};
    msgpack_pack_map(pk, 7 + (size_t)extra);
    for (int k = 0; k < 7; k++) {
        msgpack_pack_str_with_body(pk, keys[k], 1);
        if (k == 0)
            msgpack_pack_uint8(pk, (uint8_t)v);
        else if (k == 6)
            msgpack_pack_array(pk, 0);
        else
            msgpack_pack_uint8(pk, 1);
    }
}

/* Headers msgpack-c writes that the decoder refuses: a wrong protocol version, a typed
 * attribute over its limit (a 40-byte string; at most GB_WIRE_WORD_MAX-1). Returns 2. */
static int send_bad_msgpack(void *d)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack_fields(&pk, GB_WIRE_PROTOCOL + 7, 0);
    zmq_send(d, sb.data, sb.size, 0);
    msgpack_sbuffer_clear(&sb);
    pack_fields(&pk, GB_WIRE_PROTOCOL, 1);
    msgpack_pack_str_with_body(&pk, "a", 1);
    msgpack_pack_map(&pk, 1);
    msgpack_pack_str_with_body(&pk, "s", 1);
    msgpack_pack_str_with_body(&pk, "0123456789012345678901234567890123456789", 40);
    zmq_send(d, sb.data, sb.size, 0);
    msgpack_sbuffer_destroy(&sb);
    return 2;
}

/* Well-formed messages the server must refuse: wrong type, rank 0, zero rows (seq 2, 3, 4).
 * Returns 3. */
static int send_refused(void *d)
{
    unsigned char hb[GB_WIRE_HEADER_MAX];
    gb_wire_header h;
    gb_error err;
    float obs[12] = {0};
    gb_wire_header_init(&h, GB_MSG_SAMPLE, GB_ROLE_ACTOR, 9);
    h.seq = 2;
    size_t hl = encode(&h, hb);
    zmq_send(d, hb, hl, 0);
    gb_wire_header_init(&h, GB_MSG_INFER_REQUEST, GB_ROLE_ACTOR, 9);
    h.seq = 3;
    h.ntensors = 1;
    gb_wire_set_tensor(&h.tensors[0], "obs", GB_DTYPE_FLOAT32, 0, NULL, &err);
    hl = encode(&h, hb);
    zmq_send(d, hb, hl, ZMQ_SNDMORE);
    zmq_send(d, obs, 4, 0);
    int64_t zero[2] = {0, 3};
    h.seq = 4; /* the last message: its answer means the server has read everything */
    gb_wire_set_tensor(&h.tensors[0], "obs", GB_DTYPE_FLOAT32, 2, zero, &err);
    hl = encode(&h, hb);
    zmq_send(d, hb, hl, ZMQ_SNDMORE);
    zmq_send(d, obs, 0, 0);
    return 3;
}

/* Sends every kind of bad message from a raw DEALER; returns how many reach the application
 * (and must be counted as rejected). */
static int send_garbage(void *ctx, const char *endpoint)
{
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 1000;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(d, endpoint);
    int count = send_random(d);
    count += send_bad_frames(d);
    count += send_bad_msgpack(d);
    count += send_refused(d);
    /* the refusals with a known id come back as error replies, in order; wait for the answer to
     * the last message (seq 4), not for a fixed time: under ThreadSanitizer the server takes
     * seconds over the garbage, and a peer that had given up after 2 s closed its socket before
     * the answers came (they were then dropped, and the server was stopped before it had read
     * everything) */
    int errors = 0, last = 0;
    zmq_pollitem_t it = {d, 0, ZMQ_POLLIN, 0};
    gb_wire_msg m;
    gb_error err;
    gb_wire_msg_init(&m);
    double end = gb_now_s() + 240; /* 63 s once under TSan on the 2-core AMD machine */
    while (!last && gb_now_s() < end) {
        if (zmq_poll(&it, 1, 100) <= 0 || !(it.revents & ZMQ_POLLIN))
            continue;
        if (gb_wire_recv(d, &m, 0, 0, &err) == 0 && m.hdr.status == GB_EPROTO) {
            errors++;
            last = m.hdr.seq == 4;
        }
        gb_wire_msg_release(&m);
    }
    CHECK_MSG(errors >= 3, "only %d error replies", errors);
    zmq_close(d);
    return count;
}

/* Garbage below ZeroMQ: raw TCP bytes, a truncated greeting, a greeting with a bad version. */
static void send_tcp_garbage(const char *endpoint)
{
    int port = 0;
    const char *colon = strrchr(endpoint, ':');
    if (colon)
        port = atoi(colon + 1);
    unsigned char greeting[64] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0};
    const struct {
        const void *p;
        size_t n;
    } sends[4] = {{"GET / HTTP/1.1\r\n\r\n", 18}, {greeting, 5}, {greeting, 11},
                  {"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 12}};
    for (int i = 0; i < 4; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {0};
        sa.sin_family = AF_INET;
        sa.sin_port = htons((uint16_t)port);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
            ssize_t w = write(fd, sends[i].p, sends[i].n);
            (void)w;
            gb_sleep_ms(20);
        }
        if (fd >= 0)
            close(fd);
    }
}

static void valid_request(void *ctx, const char *endpoint)
{
    gb_error err;
    const char *eps[1] = {endpoint};
    gb_infer_client_opts co = {eps, 1, 10000, GB_ROLE_ACTOR, 0, 0, 0};
    gb_infer_client *c;
    CHECK_OK(gb_infer_client_open(&c, ctx, &co, &err));
    float obs[5 * 2];
    for (int i = 0; i < 10; i++)
        obs[i] = (float)i + 0.25f;
    gb_tensor_desc d;
    int64_t shape[2] = {5, 2};
    gb_wire_set_tensor(&d, "obs", GB_DTYPE_FLOAT32, 2, shape, &err);
    const void *data[1] = {obs};
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    CHECK_OK(gb_infer_client_request(c, &d, data, 1, &m, &err));
    if (m.hdr.ntensors == 1) {
        const float *v = gb_wire_msg_tensor(&m, 0).data;
        CHECK_EQ_INT(m.hdr.tensors[0].shape[0], 5);
        for (int r = 0; r < 5; r++)
            CHECK_NEAR(v[r], 2.0f * obs[r * 2], 0);
    } else {
        CHECK(0);
    }
    gb_wire_msg_release(&m);
    gb_infer_client_close(c);
}

static void run(int tcp)
{
    char dir[64], ep[256], path[512], buf[256];
    st_tmpdir(dir, sizeof dir);
    if (tcp)
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:*");
    else
        snprintf(ep, sizeof ep, "ipc://%s/policy", dir);
    server_arg sa = {dir, ep, 0};
    pid_t pid = st_fork(server_main, &sa);
    snprintf(path, sizeof path, "%s/ep-0", dir);
    CHECK(st_wait_file(path, buf, sizeof buf, 20) == 0);
    void *ctx = zmq_ctx_new();
    valid_request(ctx, buf);
    int sent = send_garbage(ctx, buf);
    if (tcp)
        send_tcp_garbage(buf);
    valid_request(ctx, buf);
    zmq_ctx_term(ctx);
    kill(pid, SIGTERM);
    CHECK_EQ_INT(st_wait(pid), 0);
    snprintf(path, sizeof path, "%s/stats-0", dir);
    unsigned long long req = 0, rej = 0;
    CHECK(st_read_file(path, buf, sizeof buf) == 0 && sscanf(buf, "%llu %llu", &req, &rej) == 2);
    CHECK_EQ_INT(req, 2);
    CHECK_EQ_INT(rej, sent);
    fprintf(stderr, "  %s: %d malformed messages rejected (%llu counted), 2 valid served\n",
            tcp ? "tcp" : "ipc", sent, rej);
    st_rmdir(dir);
}

static void test_malformed_ipc(void) { run(0); }
static void test_malformed_tcp(void) { run(1); }

int main(void)
{
    TEST_RUN(test_malformed_ipc);
    TEST_RUN(test_malformed_tcp);
    return test_main_result();
}
